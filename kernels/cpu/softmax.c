/* CPU softmax pieces: (max, sumexp) states per column, their merge, logsumexp. */
#include "kernels/softmax.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

/* Merge state (m2, s2) into (m1, s1); an empty state has m = -inf. */
static inline void merge_state(float *m1, float *s1, float m2, float s2)
{
    if (m2 == -INFINITY)
        return;
    if (*m1 == -INFINITY) {
        *m1 = m2;
        *s1 = s2;
    } else if (m2 > *m1) {
        *s1 = *s1 * expf(*m1 - m2) + s2;
        *m1 = m2;
    } else {
        *s1 += s2 * expf(m2 - *m1);
    }
}

/* x: (m, n) with ldx; ms: (2, n) */
TSR_CPU_CLONES void tsr_cpu_maxsumexp(int m, int n, const float *x, int ldx, float *ms, int accumulate)
{
    for (int j = 0; j < n; j++) {
        const float *xj = x + (size_t)j * ldx;
        float mx = tsr_vmax(xj, (size_t)m);
        float s = 0.0f;
        if (mx != -INFINITY) {
            /* TSR_VACC partial sums: a full vector of exponentials per step at
             * every width (8 partials held the AVX-512 clone to 8 lanes) */
            float acc[TSR_VACC] = {0};
            int i = 0;
            for (; i + TSR_VACC <= m; i += TSR_VACC)
                for (int u = 0; u < TSR_VACC; u++)
                    acc[u] += tsr_vexpf(xj[i + u] - mx);
            float tail = 0.0f;
            for (; i < m; i++)
                tail += tsr_vexpf(xj[i] - mx);
            s = tsr_vfold(acc) + tail;
        }
        if (accumulate) {
            merge_state(&ms[2 * (size_t)j], &ms[2 * (size_t)j + 1], mx, s);
        } else {
            ms[2 * (size_t)j] = mx;
            ms[2 * (size_t)j + 1] = s;
        }
    }
}

/* src, dst: (2, n) */
void tsr_cpu_maxsumexp_merge(int n, const float *src, float *dst)
{
    for (int j = 0; j < n; j++)
        merge_state(&dst[2 * (size_t)j], &dst[2 * (size_t)j + 1], src[2 * (size_t)j],
                    src[2 * (size_t)j + 1]);
}

/* ms: (2, n), lse: (n) */
void tsr_cpu_logsumexp(int n, const float *ms, float *lse)
{
    for (int j = 0; j < n; j++) {
        float m = ms[2 * (size_t)j], s = ms[2 * (size_t)j + 1];
        lse[j] = m == -INFINITY ? -INFINITY : m + logf(s);
    }
}
