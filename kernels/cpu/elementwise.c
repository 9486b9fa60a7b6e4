/* CPU elementwise and broadcast kernels: plain loops that gcc -O3 vectorizes. */
#include "kernels/elementwise.h"

#include <string.h>

#include "kernels/cpu/vecmath.h"

/* x: (n) */
void tsr_cpu_fill(size_t n, float value, float *x)
{
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

/* x, y: (n) */
void tsr_cpu_copy(size_t n, const float *x, float *y)
{
    if (n > 0)
        memcpy(y, x, n * sizeof(float));
}

/* x, y: (n), y may be x */
TSR_CPU_CLONES void tsr_cpu_scale(size_t n, float alpha, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = alpha * x[i];
}

/* x, y: (n) */
TSR_CPU_CLONES void tsr_cpu_axpy(size_t n, float alpha, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
}

/* x, y, z: (n), z may be x or y */
TSR_CPU_CLONES void tsr_cpu_add(size_t n, const float *x, const float *y, float *z)
{
    for (size_t i = 0; i < n; i++)
        z[i] = x[i] + y[i];
}

/* x: (m, n) with ldx; b: (m) for axis 0, (n) for axis 1 */
TSR_CPU_CLONES void tsr_cpu_bias_add(int axis, int m, int n, const float *b, float *x, int ldx)
{
    for (int j = 0; j < n; j++) {
        float *xj = x + (size_t)j * ldx;
        if (axis == 0) {
            for (int i = 0; i < m; i++)
                xj[i] += b[i];
        } else {
            float bj = b[j];
            for (int i = 0; i < m; i++)
                xj[i] += bj;
        }
    }
}

/* x: (m, n) with ldx; y: (m) for axis 0, (n) for axis 1 */
TSR_CPU_CLONES void tsr_cpu_sum_axis(int axis, int m, int n, float alpha, const float *x, int ldx,
                      float beta, float *y)
{
    if (axis == 1) {
        for (int j = 0; j < n; j++) {
            double s = alpha * tsr_vsum(x + (size_t)j * ldx, (size_t)m);
            y[j] = (float)(beta == 0.0f ? s : s + (double)beta * y[j]);
        }
        return;
    }
    /* axis 0: walk the columns contiguously, a block of rows at a time; add
     * 8 columns in fp32 before each update of the double accumulators, which
     * would otherwise bound the loop by their loads and stores */
    enum { RB = 1024, CB = 8 };
    double acc[RB];
    for (int i0 = 0; i0 < m; i0 += RB) {
        int mb = m - i0 < RB ? m - i0 : RB;
        for (int i = 0; i < mb; i++)
            acc[i] = 0.0;
        int j = 0;
        for (; j + CB <= n; j += CB) {
            const float *x0 = x + (size_t)j * ldx + i0;
            for (int i = 0; i < mb; i++) {
                float s = 0.0f;
                for (int c = 0; c < CB; c++)
                    s += x0[i + (size_t)c * ldx];
                acc[i] += s;
            }
        }
        for (; j < n; j++) {
            const float *xj = x + (size_t)j * ldx + i0;
            for (int i = 0; i < mb; i++)
                acc[i] += xj[i];
        }
        for (int i = 0; i < mb; i++) {
            double s = alpha * acc[i];
            y[i0 + i] = (float)(beta == 0.0f ? s : s + (double)beta * y[i0 + i]);
        }
    }
}
