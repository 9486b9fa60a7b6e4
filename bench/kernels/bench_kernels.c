/* tessera-bench-kernels — time every tile kernel and compare it with
 * ceilings measured in the same run: a STREAM-like copy for memory-bound ops
 * and a large OpenBLAS SGEMM for compute-bound ones on the CPU (one thread:
 * kernels run one per task); a device-to-device copy and large cuBLAS GEMMs
 * on the GPU.  Prints a human table and one JSON line per figure.
 * The CPU GEMM's libraries (OpenBLAS, and oneDNN fp32 and bf16 where built
 * with it) are compared on GPT-2's tile shapes, each against OpenBLAS on the
 * same shape.
 *
 * Usage: tessera-bench-kernels [--quick] [--cpu-only] [--gpu-only] [FILTER]
 *   --quick: small shapes and few repetitions (a smoke test; figures then
 *            measure caches, not memory)
 *   FILTER:  run only cases whose name contains this string
 * Bytes are logical traffic (each input read once, each output written once,
 * read-modify-write counted twice), as STREAM counts them.
 *
 * In an emulation build (-Dcuda=emu) the GPU section runs the CUDA kernels on
 * emulated devices, on small shapes, each case once: a correctness run (every
 * call and the stream must succeed).  Its times are the emulation's, not a
 * GPU's; the table says so and every JSON line of it has "emulated":true.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/crossentropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/softmax.h"

#ifdef TSR_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda_status.h"
#endif

static int quick;
static const char *filter;
static double min_time = 0.3; /* seconds of repetitions per case */

static int selected(const char *name)
{
    return !filter || strstr(name, filter) != NULL;
}

/* Best time of one call over repetitions lasting at least min_time (and at
 * least 3), after one warm-up call. */
static double time_best(void (*fn)(void))
{
    fn();
    double best = INFINITY, start = bench_now();
    int reps = 0;
    while (reps < 3 || (bench_now() - start < min_time && reps < 1000)) {
        double t0 = bench_now();
        fn();
        double t = bench_now() - t0;
        best = t < best ? t : best;
        reps++;
    }
    return best;
}

/* The shape label of a memory-bound case: (vocab tile x rows) for the
 * softmax/cross-entropy cases, (C x T / vocab) for embedding, else C x T. */
static void case_shape(char *buf, size_t len, const char *nm, int C, int T, int V,
                       int NVT, size_t N)
{
    if (!strcmp(nm, "maxsumexp") || !strcmp(nm, "crossentropy_bwd"))
        snprintf(buf, len, "%dx%zu", NVT, N / (size_t)NVT);
    else if (!strncmp(nm, "embedding", 9))
        snprintf(buf, len, "%dx%d/v%d", C, T, V);
    else
        snprintf(buf, len, "%dx%d", C, T);
}

/* The GPU section runs on emulated devices (set by run_gpu): its lines say
 * so, in the table and in the JSON. */
static int emulated;

static void report(const char *name, const char *shape, const char *device, double seconds,
                   double amount, const char *unit, double ceiling)
{
    double value = amount / seconds / 1e9;
    double ratio = ceiling > 0 ? value / ceiling : 0;
    int gpu = !strcmp(device, "cuda");
    printf("%-22s %-18s %-5s %10.3f ms %9.2f %-7s ceiling %9.2f  ratio %5.2f%s\n", name, shape,
           device, seconds * 1e3, value, unit, ceiling, ratio,
           gpu && emulated ? "  (emulated)" : "");
    printf("{\"bench\":\"kernels\",\"case\":\"%s\",\"shape\":\"%s\",\"device\":\"%s\","
           "\"metric\":\"%s\",\"value\":%.4g,\"unit\":\"%s\",\"ceiling\":%.4g,\"ratio\":%.3f%s}\n",
           name, shape, device, unit, value, unit, ceiling, ratio,
           !gpu ? "" : emulated ? ",\"emulated\":true" : ",\"emulated\":false");
    fflush(stdout);
}

static float *falloc(size_t n, float lo, float hi, uint64_t seed)
{
    float *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (!p) {
        fprintf(stderr, "tessera-bench-kernels: out of memory (%zu floats)\n", n);
        exit(1);
    }
    uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < n; i++) { /* also first-touches the pages */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = lo + (hi - lo) * (float)((s >> 40) * 0x1.0p-24);
    }
    return p;
}

/* ---------------------------------------------------------------- CPU */

/* activation tiles (C, T): big enough to miss a 32 MiB L3 */
static int C, T, V, NVT; /* feature, tokens, vocab tile rows for maxsumexp/CE */
static size_t N;         /* C * T */
static float *A, *B, *Cb, *D, *E, *G, *Bv, *Ms, *Lse;
static uint16_t *H;
static int32_t *Tok;
static int GM, GT; /* gemm sizes: ceiling, tile */
static float *GA, *GB, *GC;
static int AD = 64, ATQ = 256, ANB = 12; /* attention tile: d, tq = tk, heads */
static float *AQ, *AK, *AV, *AO, *ADO, *AMS, *AACC, *ALSE, *AD_, *ADQ, *ADK, *ADV;

static void c_copy_stream(void)
{
    const float *restrict x = A;
    float *restrict y = B;
    for (size_t i = 0; i < N; i++)
        y[i] = x[i];
}
static void c_gemm_big(void)
{
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, GM, GM, GM, 1.0f, GA, GM, GB, GM, 0.0f,
                GC, GM);
}
static void c_fill(void) { tsr_cpu_fill(N, 0.5f, B); }
static void c_copy(void) { tsr_cpu_copy(N, A, B); }
static void c_scale(void) { tsr_cpu_scale(N, 0.999f, A, B); }
static void c_axpy(void) { tsr_cpu_axpy(N, 1e-3f, A, B); }
static void c_add(void) { tsr_cpu_add(N, A, Cb, B); }
static void c_bias_add(void) { tsr_cpu_bias_add(0, C, T, Bv, B, C); }
static void c_sum_axis0(void) { tsr_cpu_sum_axis(0, C, T, 1.0f, A, C, 0.0f, Bv); }
static void c_sum_axis1(void) { tsr_cpu_sum_axis(1, C, T, 1.0f, A, C, 0.0f, Lse); }
static void c_ln_fwd(void) { tsr_cpu_layernorm_fwd(C, T, A, Bv, Bv + C, 1e-5f, B, Ms, Ms + T); }
static void c_ln_bwd(void)
{
    tsr_cpu_layernorm_bwd(C, T, Cb, A, Bv, Ms, Ms + T, B, Bv + 2 * C, Bv + 3 * C);
}
static void c_gelu_fwd(void) { tsr_cpu_gelu_fwd(N, A, B); }
static void c_gelu_bwd(void) { tsr_cpu_gelu_bwd(N, A, Cb, B); }
static void c_maxsumexp(void) { tsr_cpu_maxsumexp(NVT, (int)(N / NVT), A, NVT, Ms, 0); }
static void c_ce_bwd(void)
{
    tsr_cpu_crossentropy_bwd(NVT, (int)(N / NVT), 0, A, NVT, Lse, Tok, 1e-3f, B, NVT);
}
static void c_emb_fwd(void) { tsr_cpu_embedding_fwd(C, T, V, 0, Tok, D, B); }
static void c_emb_bwd(void) { tsr_cpu_embedding_bwd(C, T, V, 0, Tok, Cb, D); }
static void c_adamw(void) { tsr_cpu_adamw(N, 10, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, A, B, Cb, E, NULL, 0); }
/* the step with the bf16 copy of the weights (mixed precision) */
static void c_adamw_bf16(void)
{
    tsr_cpu_adamw(N, 10, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, A, B, Cb, E, H, 0);
}
static void c_sumsq(void)
{
    float acc = 0;
    tsr_cpu_sumsq(N, A, &acc);
    G[0] = acc;
}
static void c_f2bf(void) { tsr_cpu_f32_to_bf16(N, A, H); }
static void c_bf2f(void) { tsr_cpu_bf16_to_f32(N, H, B); }
static void c_gemm_tile(void)
{
    tsr_cpu_gemm(TSR_NOTRANS, TSR_NOTRANS, GT, GT, GT, 1.0f, GA, GT, 0, GB, GT, 0, 0.0f, GC, GT, 0, 1);
}
/* an off-diagonal pair (all keys visible): the full work of a tile pair,
 * contiguous (d, tq, nb) tiles (ld = d, hs = tq d) */
static void c_attn_fwd(void)
{
    tsr_cpu_attn_fwd(AD, ATQ, ATQ, ANB, ATQ, 0, 0.125f, AD, (long long)ATQ * AD, AQ, AK, AV, AMS,
                     AACC);
}
static void c_attn_bwd(void)
{
    tsr_cpu_attn_bwd(AD, ATQ, ATQ, ANB, ATQ, 0, 0.125f, AD, (long long)ATQ * AD, AQ, AK, AV, AD,
                     (long long)ATQ * AD, ADO, ALSE, AD_, ADQ, ADK, ADV);
}
/* GPT-2's attention task on one 64-token sequence tile: a diagonal (causal)
 * tile pair of 64 queries and keys, all 12 heads, q, k, v read in place from
 * the fused (3C, 64) qkv tile (ld = 3C, hs = d, C = 12 d), o and dout in
 * (C, 64), dq, dk, dv written into a fused tile (kernels/attention.h) */
enum { GD_T = 64, GD_NB = 12 };
#define GD_C (GD_NB * AD)
static void c_attn_fwd_diag(void)
{
    tsr_cpu_attn_fwd(AD, GD_T, GD_T, GD_NB, 0, 0, 0.125f, 3 * GD_C, AD, AQ, AQ + GD_C,
                     AQ + 2 * GD_C, AMS, AACC);
}
static void c_attn_bwd_diag(void)
{
    tsr_cpu_attn_bwd(AD, GD_T, GD_T, GD_NB, 0, 0, 0.125f, 3 * GD_C, AD, AQ, AQ + GD_C,
                     AQ + 2 * GD_C, GD_C, AD, ADO, ALSE, AD_, ADQ, ADQ + GD_C, ADQ + 2 * GD_C);
}

/* ---- the CPU GEMM's libraries on GPT-2's tile shapes ------------------------ */

/* One product of the comparison: C (m, n) = op(A) op(B) + beta C. */
typedef struct {
    int m, n, k, ta, tb, threads;
    float beta;
    const char *what;
} lshape;

static lshape LS;
static float *LA, *LB, *LC;
static uint16_t *LHA, *LHB;

static int lrows(int trans, int r, int c) { return trans ? c : r; }
static void l_openblas(void)
{
    cblas_sgemm(CblasColMajor, LS.ta ? CblasTrans : CblasNoTrans, LS.tb ? CblasTrans : CblasNoTrans,
                LS.m, LS.n, LS.k, 1.0f, LA, lrows(LS.ta, LS.m, LS.k), LB,
                lrows(LS.tb, LS.k, LS.n), LS.beta, LC, LS.m);
}
static void l_f32(void)
{
    tsr_cpu_gemm(LS.ta, LS.tb, LS.m, LS.n, LS.k, 1.0f, LA, lrows(LS.ta, LS.m, LS.k), 0, LB,
                 lrows(LS.tb, LS.k, LS.n), 0, LS.beta, LC, LS.m, 0, 1);
}
static void l_bf16(void)
{
    tsr_cpu_gemm_bf16(LS.ta, LS.tb, LS.m, LS.n, LS.k, 1.0f, LHA, lrows(LS.ta, LS.m, LS.k), 0, LHB,
                      lrows(LS.tb, LS.k, LS.n), 0, LS.beta, LC, 0, LS.m, 0, 1);
}

/* OpenBLAS SGEMM, tsr_cpu_gemm and tsr_cpu_gemm_bf16 (bf16 in, fp32 out)
 * on the tile products of a GPT-2 step (one thread: one per worker), and a
 * large product on two threads as the ceiling. The ratio is against
 * OpenBLAS on the same shape. */
static void run_cpu_gemm_libs(void)
{
    const char *lib = tsr_cpu_gemm_library();
    int big = quick ? 1024 : 4096;
    const lshape shapes[] = {
        {768, 256, 768, 0, 0, 1, 0.0f, "linear fwd"},
        {768, 256, 768, 1, 0, 1, 0.0f, "linear dx"},
        {1024, 256, 768, 0, 0, 1, 0.0f, "linear fwd"},
        {768, 768, 256, 0, 1, 1, 1.0f, "linear dw +="},
        {768, 256, 3072, 0, 0, 1, 0.0f, "mlp proj fwd"},
        {768, 768, 768, 0, 0, 1, 0.0f, "square"},
        {big, big, big, 0, 0, 2, 0.0f, "ceiling, 2 threads"},
    };
    size_t most = (size_t)big * big;
    LA = falloc(most, -1, 1, 40), LB = falloc(most, -1, 1, 41), LC = falloc(most, -1, 1, 42);
    LHA = aligned_alloc(64, ((most * 2 + 63) / 64) * 64);
    LHB = aligned_alloc(64, ((most * 2 + 63) / 64) * 64);
    if (!LHA || !LHB) {
        fprintf(stderr, "tessera-bench-kernels: out of memory (bf16 GEMM operands)\n");
        exit(1);
    }
    tsr_cpu_f32_to_bf16(most, LA, LHA);
    tsr_cpu_f32_to_bf16(most, LB, LHB);
    printf("# CPU GEMM libraries: OpenBLAS fp32, tsr_cpu_gemm (%s) fp32, tsr_cpu_gemm_bf16 (%s) "
           "bf16 in, fp32 out (GFLOP/s; ceiling = OpenBLAS on the same shape)\n", lib, lib);
    char shape[64], name[64];
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        LS = shapes[i];
        snprintf(shape, sizeof shape, "%dx%dx%d%c%c%s", LS.m, LS.n, LS.k, LS.ta ? 'T' : 'N',
                 LS.tb ? 'T' : 'N', LS.threads > 1 ? "/2thr" : "");
        double fl = 2.0 * LS.m * LS.n * LS.k;
        openblas_set_num_threads(LS.threads);
        int saved = tsr_cpu_gemm_set_thread_count(LS.threads); /* this thread's only */
        double ob = fl / time_best(l_openblas) / 1e9;
        if (selected("gemm_f32_openblas"))
            report("gemm_f32_openblas", shape, "cpu", fl / ob / 1e9, fl, "GFLOP/s", ob);
        snprintf(name, sizeof name, "gemm_f32_%s", lib);
        if (selected(name))
            report(name, shape, "cpu", time_best(l_f32), fl, "GFLOP/s", ob);
        snprintf(name, sizeof name, "gemm_bf16_%s", lib);
        if (selected(name))
            report(name, shape, "cpu", time_best(l_bf16), fl, "GFLOP/s", ob);
        tsr_cpu_gemm_set_thread_count(saved);
        openblas_set_num_threads(1);
    }
    free(LA), free(LB), free(LC), free(LHA), free(LHB);
}

typedef struct {
    const char *name;
    void (*fn)(void);
    double bytes_per_elem; /* memory-bound: logical bytes per element of N */
} mcase;

static void run_cpu(void)
{
    openblas_set_num_threads(1);
    C = 768;
    T = quick ? 1024 : 16384; /* 48 MiB per (C, T) tile */
    N = (size_t)C * T;
    V = 8192; /* embedding table tile: 24 MiB */
    NVT = 4096; /* logits tile (4096, N / 4096) */
    A = falloc(N, -2, 2, 1), B = falloc(N, -1, 1, 2), Cb = falloc(N, -1, 1, 3);
    E = falloc(N, 0, 1e-3f, 4), D = falloc((size_t)C * V, -1, 1, 5);
    Bv = falloc(4 * (size_t)C, 0.5f, 1.5f, 6), Ms = falloc(2 * N / C + 2 * N / NVT, -1, 1, 7);
    Lse = falloc(N / C + N / NVT, 8, 9, 8), G = falloc(16, 0, 1, 9);
    H = aligned_alloc(64, ((N * 2 + 63) / 64) * 64);
    Tok = malloc(sizeof(int32_t) * (N / C > N / NVT ? N / C : N / NVT));
    for (size_t t = 0; t < N / C || t < N / NVT; t++)
        Tok[t] = (int32_t)((t * 2654435761u) % (unsigned)V);
    for (int t = 0; t < T; t++)
        Ms[T + t] = 1.0f; /* rstd */
    memset(H, 0, N * 2);

    printf("# CPU (1 thread): ceilings\n");
    double copy_s = time_best(c_copy_stream);
    double bw = 8.0 * N / copy_s / 1e9;
    char shape[64];
    snprintf(shape, sizeof shape, "%zu", N);
    report("stream_copy", shape, "cpu", copy_s, 8.0 * N, "GB/s", bw);
    GM = quick ? 512 : 2048;
    GT = quick ? 256 : 1024;
    GA = falloc((size_t)GM * GM, -1, 1, 10), GB = falloc((size_t)GM * GM, -1, 1, 11);
    GC = falloc((size_t)GM * GM, 0, 1, 12);
    double gemm_s = time_best(c_gemm_big);
    double gf = 2.0 * GM * GM * GM / gemm_s / 1e9;
    snprintf(shape, sizeof shape, "%dx%dx%d", GM, GM, GM);
    report("openblas_sgemm", shape, "cpu", gemm_s, 2.0 * GM * GM * GM, "GFLOP/s", gf);

    printf("# CPU kernels: memory-bound (GB/s vs stream_copy)\n");
    const mcase cases[] = {
        {"fill", c_fill, 4},           {"copy", c_copy, 8},
        {"scale", c_scale, 8},         {"axpy", c_axpy, 12},
        {"add", c_add, 12},            {"bias_add", c_bias_add, 8},
        {"sum_axis0", c_sum_axis0, 4}, {"sum_axis1", c_sum_axis1, 4},
        {"layernorm_fwd", c_ln_fwd, 8}, {"layernorm_bwd", c_ln_bwd, 16},
        {"gelu_fwd", c_gelu_fwd, 8},   {"gelu_bwd", c_gelu_bwd, 12},
        {"maxsumexp", c_maxsumexp, 4}, {"crossentropy_bwd", c_ce_bwd, 8},
        {"embedding_fwd", c_emb_fwd, 12}, {"embedding_bwd", c_emb_bwd, 12},
        {"adamw", c_adamw, 28},        {"adamw_bf16", c_adamw_bf16, 30},
        {"sumsq", c_sumsq, 4},
        {"f32_to_bf16", c_f2bf, 6},    {"bf16_to_f32", c_bf2f, 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!selected(cases[i].name))
            continue;
        const char *nm = cases[i].name;
        case_shape(shape, sizeof shape, nm, C, T, V, NVT, N);
        double s = time_best(cases[i].fn);
        report(nm, shape, "cpu", s, cases[i].bytes_per_elem * N, "GB/s", bw);
    }

    printf("# CPU kernels: compute-bound (GFLOP/s vs openblas_sgemm)\n");
    if (selected("gemm")) {
        snprintf(shape, sizeof shape, "%dx%dx%d", GT, GT, GT);
        report("gemm", shape, "cpu", time_best(c_gemm_tile), 2.0 * GT * GT * GT, "GFLOP/s", gf);
    }
    if (selected("attn")) {
        size_t nq = (size_t)AD * ATQ * ANB, nf = (size_t)3 * GD_C * GD_T;
        nf = nf > nq ? nf : nq; /* q and dq hold the diagonal case's fused tiles too */
        AQ = falloc(nf, -1, 1, 20), AK = falloc(nq, -1, 1, 21), AV = falloc(nq, -1, 1, 22);
        ADO = falloc(nq, -1, 1, 23), ADQ = falloc(nf, 0, 0, 24), ADK = falloc(nq, 0, 0, 25);
        ADV = falloc(nq, 0, 0, 26), AACC = falloc(nq, 0, 0, 27), AO = falloc(nq, 0, 0, 28);
        AMS = falloc(2 * (size_t)ATQ * ANB, 0, 0, 29), ALSE = falloc((size_t)ATQ * ANB, 0, 0, 30);
        AD_ = falloc((size_t)ATQ * ANB, 0, 0, 31);
        tsr_cpu_attn_init(AD, ATQ, ANB, AMS, AACC);
        c_attn_fwd();
        tsr_cpu_attn_finalize(AD, ATQ, ANB, AMS, AACC, AD, (long long)ATQ * AD, AO, ALSE);
        tsr_cpu_attn_bwd_dot(AD, ATQ, ANB, AD, (long long)ATQ * AD, AO, ADO, AD_);
        snprintf(shape, sizeof shape, "d%d,%dx%d,h%d", AD, ATQ, ATQ, ANB);
        double fl = (double)AD * ATQ * ATQ * ANB;
        report("attn_fwd", shape, "cpu", time_best(c_attn_fwd), 4 * fl, "GFLOP/s", gf);
        report("attn_bwd", shape, "cpu", time_best(c_attn_bwd), 10 * fl, "GFLOP/s", gf);
        /* the diagonal tile: flops of the visible pairs, T (T + 1) / 2 per head */
        tsr_cpu_attn_init(AD, GD_T, GD_NB, AMS, AACC);
        c_attn_fwd_diag();
        tsr_cpu_attn_finalize(AD, GD_T, GD_NB, AMS, AACC, GD_C, AD, AO, ALSE);
        tsr_cpu_attn_bwd_dot(AD, GD_T, GD_NB, GD_C, AD, AO, ADO, AD_);
        snprintf(shape, sizeof shape, "d%d,%dx%d,h%d,diag,fused", AD, GD_T, GD_T, GD_NB);
        double fd = (double)AD * GD_T * (GD_T + 1) / 2 * GD_NB;
        report("attn_fwd_diag", shape, "cpu", time_best(c_attn_fwd_diag), 4 * fd, "GFLOP/s", gf);
        report("attn_bwd_diag", shape, "cpu", time_best(c_attn_bwd_diag), 10 * fd, "GFLOP/s", gf);
        free(AQ), free(AK), free(AV), free(ADO), free(ADQ), free(ADK), free(ADV), free(AACC);
        free(AO), free(AMS), free(ALSE), free(AD_);
    }
    free(A), free(B), free(Cb), free(D), free(E), free(Bv), free(Ms), free(Lse), free(G);
    free(H), free(Tok), free(GA), free(GB), free(GC);
    if (selected("gemm_f32") || selected("gemm_bf16"))
        run_cpu_gemm_libs();
}

/* ---------------------------------------------------------------- GPU */
#ifdef TSR_HAVE_CUDA
static cudaStream_t gs;
static cublasHandle_t gh;
static cudaEvent_t ev0, ev1;
static size_t gN;
static int gC, gT, gV, gNVT, gGM, gGT;
static float *gA, *gB, *gCb, *gD, *gE, *gBv, *gMs, *gLse, *gAcc;
static uint16_t *gH, *gH2, *gH3;
static int32_t *gTok;
static int gAD = 64, gATQ = 1024, gANB = 48;
static float *gq, *gk, *gv, *gdo, *gdq, *gdk, *gdv, *gms, *gacc, *glse, *gDD;
static int gerr;

/* A tsr_cuda_* call: its failure message (kernels/cuda_status.h). */
#define GCHECK(call)                                                                       \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ && !gerr) {                                                                \
            fprintf(stderr, "tessera-bench-kernels: %s failed: %d (%s)\n", #call, rc_,    \
                    tsr_cuda_last_error());                                                \
            gerr = rc_;                                                                    \
        }                                                                                  \
    } while (0)

/* A CUDA runtime call. */
#define GCUDA(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess && !gerr) {                                                  \
            fprintf(stderr, "tessera-bench-kernels: %s failed: %s (%s)\n", #call,         \
                    cudaGetErrorName(e_), cudaGetErrorString(e_));                         \
            gerr = (int)e_;                                                                \
        }                                                                                  \
    } while (0)

/* Emulated: one call and the stream's completion, timed on the host clock
 * (an emulation time, for the record only). */
static double gtime_once(void (*fn)(void))
{
    double t0 = bench_now();
    fn();
    GCUDA(cudaStreamSynchronize(gs));
    return bench_now() - t0;
}

static double gtime_best(void (*fn)(void))
{
    if (emulated)
        return gtime_once(fn);
    fn();
    GCUDA(cudaStreamSynchronize(gs));
    float best = INFINITY;
    double start = bench_now();
    int reps = 0;
    while (reps < 5 || (bench_now() - start < min_time && reps < 2000)) {
        cudaEventRecord(ev0, gs);
        fn();
        cudaEventRecord(ev1, gs);
        cudaEventSynchronize(ev1);
        float ms = 0;
        cudaEventElapsedTime(&ms, ev0, ev1);
        best = ms < best ? ms : best;
        reps++;
    }
    return best * 1e-3;
}

static float *galloc(size_t n, float lo, float hi, uint64_t seed)
{
    float *d = NULL;
    if (cudaMalloc((void **)&d, n * sizeof(float) + 64) != cudaSuccess) {
        fprintf(stderr, "tessera-bench-kernels: cudaMalloc of %zu floats failed\n", n);
        exit(1);
    }
    size_t chunk = 1 << 22;
    float *h = falloc(chunk, lo, hi, seed);
    for (size_t i = 0; i < n; i += chunk)
        cudaMemcpy(d + i, h, sizeof(float) * (n - i < chunk ? n - i : chunk), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

static void g_copy_dd(void) { GCUDA(cudaMemcpyAsync(gB, gA, gN * sizeof(float), cudaMemcpyDeviceToDevice, gs)); }
static void g_gemm32(void)
{
    GCHECK(tsr_cuda_gemm(gs, gh, TSR_GEMM_FP32, 0, 0, gGM, gGM, gGM, 1.0f, gA, gGM, 0, gB, gGM, 0, 0.0f, gCb, gGM, 0, 1));
}
static void g_gemmtf(void)
{
    GCHECK(tsr_cuda_gemm(gs, gh, TSR_GEMM_TF32, 0, 0, gGM, gGM, gGM, 1.0f, gA, gGM, 0, gB, gGM, 0, 0.0f, gCb, gGM, 0, 1));
}
static void g_gemmbf(void)
{
    GCHECK(tsr_cuda_gemm_bf16(gs, gh, 0, 0, gGM, gGM, gGM, 1.0f, gH, gGM, 0, gH2, gGM, 0, 0.0f, gH3, 1, gGM, 0, 1));
}
static void g_gemm32_t(void)
{
    GCHECK(tsr_cuda_gemm(gs, gh, TSR_GEMM_FP32, 0, 0, gGT, gGT, gGT, 1.0f, gA, gGT, 0, gB, gGT, 0, 0.0f, gCb, gGT, 0, 1));
}
static void g_gemmtf_t(void)
{
    GCHECK(tsr_cuda_gemm(gs, gh, TSR_GEMM_TF32, 0, 0, gGT, gGT, gGT, 1.0f, gA, gGT, 0, gB, gGT, 0, 0.0f, gCb, gGT, 0, 1));
}
static void g_gemmbf_t(void)
{
    GCHECK(tsr_cuda_gemm_bf16(gs, gh, 0, 0, gGT, gGT, gGT, 1.0f, gH, gGT, 0, gH2, gGT, 0, 0.0f, gH3, 1, gGT, 0, 1));
}
static void g_fill(void) { GCHECK(tsr_cuda_fill(gs, gN, 0.5f, gB)); }
static void g_copy(void) { GCHECK(tsr_cuda_copy(gs, gN, gA, gB)); }
static void g_scale(void) { GCHECK(tsr_cuda_scale(gs, gN, 0.999f, gA, gB)); }
static void g_axpy(void) { GCHECK(tsr_cuda_axpy(gs, gN, 1e-3f, gA, gB)); }
static void g_add(void) { GCHECK(tsr_cuda_add(gs, gN, gA, gCb, gB)); }
static void g_bias_add(void) { GCHECK(tsr_cuda_bias_add(gs, 0, gC, gT, gBv, gB, gC)); }
static void g_sum_axis0(void) { GCHECK(tsr_cuda_sum_axis(gs, 0, gC, gT, 1.0f, gA, gC, 0.0f, gBv)); }
static void g_sum_axis1(void) { GCHECK(tsr_cuda_sum_axis(gs, 1, gC, gT, 1.0f, gA, gC, 0.0f, gLse)); }
static void g_ln_fwd(void) { GCHECK(tsr_cuda_layernorm_fwd(gs, gC, gT, gA, gBv, gBv + gC, 1e-5f, gB, gMs, gMs + gT)); }
static void g_ln_bwd(void)
{
    GCHECK(tsr_cuda_layernorm_bwd(gs, gC, gT, gCb, gA, gBv, gMs, gMs + gT, gB, gBv + 2 * gC, gBv + 3 * gC, 0));
}
static void g_gelu_fwd(void) { GCHECK(tsr_cuda_gelu_fwd(gs, gN, gA, gB)); }
static void g_gelu_bwd(void) { GCHECK(tsr_cuda_gelu_bwd(gs, gN, gA, gCb, gB)); }
static void g_maxsumexp(void) { GCHECK(tsr_cuda_maxsumexp(gs, gNVT, (int)(gN / gNVT), gA, gNVT, gMs, 0)); }
static void g_ce_bwd(void)
{
    GCHECK(tsr_cuda_crossentropy_bwd(gs, gNVT, (int)(gN / gNVT), 0, gA, gNVT, gLse, gTok, 1e-3f, gB, gNVT));
}
static void g_emb_fwd(void) { GCHECK(tsr_cuda_embedding_fwd(gs, gC, gT, gV, 0, gTok, gD, gB)); }
static void g_emb_bwd(void) { GCHECK(tsr_cuda_embedding_bwd(gs, gC, gT, gV, 0, gTok, gCb, gD, 0)); }
static void g_adamw(void) { GCHECK(tsr_cuda_adamw(gs, gN, 10, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, gA, gB, gCb, gE, NULL, 0)); }
/* with the bf16 copy (into gH3, the bf16 GEMMs' output) */
static void g_adamw_bf16(void)
{
    GCHECK(tsr_cuda_adamw(gs, gN, 10, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, gA, gB, gCb, gE, gH3, 0));
}
static void g_sumsq(void) { GCHECK(tsr_cuda_sumsq(gs, gN, gA, gAcc, 0)); }
static void g_f2bf(void) { GCHECK(tsr_cuda_f32_to_bf16(gs, gN, gA, gH)); }
static void g_bf2f(void) { GCHECK(tsr_cuda_bf16_to_f32(gs, gN, gH, gB)); }
/* the attention cases: precision (TSR_ATTN_TF32 by default), head width
 * gAd (64: GPT-2's; 128: Llama's, half as many heads in the same buffers), heads, where
 * the queries start (gATQ: every key visible; 0: the causal diagonal), and
 * the layout: contiguous (d, tq, nb) tiles, or (gAfused) GPT-2's, q, k, v
 * read in place from the fused (3C, T) qkv activation (ld = 3C, hs = d,
 * C = nb d; dq, dk, dv likewise into gdq), o and dout in (C, T) */
static int gAprec = TSR_ATTN_TF32, gAd = 64, gAnb = 0, gAq0 = 0, gAfused = 0;
static void g_attn_fwd(void)
{
    if (gAfused) {
        long long C = (long long)gAnb * gAd;
        GCHECK(tsr_cuda_attn_fwd(gs, gAprec, gAd, gATQ, gATQ, gAnb, 1, gAq0, 0, 0.125f, (int)(3 * C),
                                 gAd, gq, gq + C, gq + 2 * C, gms, gacc));
    } else {
        GCHECK(tsr_cuda_attn_fwd(gs, gAprec, gAd, gATQ, gATQ, gAnb, 1, gAq0, 0, 0.125f, gAd,
                                 (long long)gATQ * gAd, gq, gk, gv, gms, gacc));
    }
}
static void g_attn_bwd(void)
{
    if (gAfused) {
        long long C = (long long)gAnb * gAd;
        GCHECK(tsr_cuda_attn_bwd(gs, gAprec, gAd, gATQ, gATQ, gAnb, 1, gAq0, 0, 0.125f, (int)(3 * C),
                                 gAd, gq, gq + C, gq + 2 * C, (int)C, gAd, gdo, glse, gDD, gdq,
                                 gdq + C, gdq + 2 * C));
    } else {
        long long hs = (long long)gATQ * gAd;
        GCHECK(tsr_cuda_attn_bwd(gs, gAprec, gAd, gATQ, gATQ, gAnb, 1, gAq0, 0, 0.125f, gAd, hs, gq,
                                 gk, gv, gAd, hs, gdo, glse, gDD, gdq, gdk, gdv));
    }
}

static void run_gpu(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("# GPU: skipped (no CUDA device: %s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
#ifdef TSR_CUDA_EMU
    emulated = 1;
#endif
    printf("# GPU 0: %s\n", prop.name);
    if (emulated)
        printf("# GPU: EMULATED (a -Dcuda=emu build): the CUDA kernels run on the CPU, on small\n"
               "# shapes, once each, for correctness only; the times below are emulation times,\n"
               "# NOT GPU timings (\"emulated\":true in the JSON lines)\n");
    cudaStreamCreate(&gs);
    cublasCreate(&gh);
    cudaEventCreate(&ev0), cudaEventCreate(&ev1);
    gC = 768, gT = quick ? 4096 : 65536; /* 192 MiB per (C, T) tile */
    gN = (size_t)gC * gT, gV = 50304, gNVT = 8192;
    if (emulated) /* every shape off the kernels' multiples, a few blocks each */
        gC = 100, gT = 37, gN = (size_t)gC * gT, gV = 300, gNVT = 740, gATQ = 70, gANB = 2;
    gA = galloc(gN, -2, 2, 1), gB = galloc(gN, -1, 1, 2), gCb = galloc(gN, -1, 1, 3);
    gE = galloc(gN, 0, 1e-3f, 4), gD = galloc((size_t)gC * gV, -1, 1, 5);
    gBv = galloc(4 * (size_t)gC, 0.5f, 1.5f, 6), gMs = galloc(2 * gN / gNVT + 2 * (size_t)gT, 0.5f, 1, 7);
    gLse = galloc(gN / gNVT + gT, 8, 9, 8), gAcc = galloc(16, 0, 0, 9);
    cudaMalloc((void **)&gH, gN * 2), cudaMalloc((void **)&gH2, gN * 2), cudaMalloc((void **)&gH3, gN * 2);
    cudaMemset(gH, 0x3f, gN * 2), cudaMemset(gH2, 0x3f, gN * 2);
    size_t ntok = gN / gNVT > (size_t)gT ? gN / gNVT : (size_t)gT;
    int32_t *htok = malloc(sizeof(int32_t) * ntok);
    for (size_t t = 0; t < ntok; t++)
        htok[t] = (int32_t)((t * 2654435761u) % (unsigned)gV);
    cudaMalloc((void **)&gTok, sizeof(int32_t) * ntok);
    cudaMemcpy(gTok, htok, sizeof(int32_t) * ntok, cudaMemcpyHostToDevice);
    free(htok);

    char shape[64];
    printf("# GPU: ceilings\n");
    double cs = gtime_best(g_copy_dd);
    double bw = 8.0 * gN / cs / 1e9;
    snprintf(shape, sizeof shape, "%zu", gN);
    report("d2d_copy", shape, "cuda", cs, 8.0 * gN, "GB/s", bw);
    gGM = quick ? 2048 : 4096; /* gGM^2 fits in the (C, T) buffers (8192^2 did not) */
    gGT = quick ? 1024 : 2048;
    if (emulated)
        gGM = 60, gGT = 33;
    double ceil32, ceiltf, ceilbf;
    snprintf(shape, sizeof shape, "%dx%dx%d", gGM, gGM, gGM);
    double fl = 2.0 * gGM * gGM * gGM;
    double s = gtime_best(g_gemm32);
    ceil32 = fl / s / 1e9;
    report("cublas_sgemm", shape, "cuda", s, fl, "GFLOP/s", ceil32);
    s = gtime_best(g_gemmtf);
    ceiltf = fl / s / 1e9;
    report("cublas_tf32", shape, "cuda", s, fl, "GFLOP/s", ceiltf);
    s = gtime_best(g_gemmbf);
    ceilbf = fl / s / 1e9;
    report("cublas_bf16", shape, "cuda", s, fl, "GFLOP/s", ceilbf);

    printf("# GPU kernels: memory-bound (GB/s vs d2d_copy)\n");
    const mcase cases[] = {
        {"fill", g_fill, 4},           {"copy", g_copy, 8},
        {"scale", g_scale, 8},         {"axpy", g_axpy, 12},
        {"add", g_add, 12},            {"bias_add", g_bias_add, 8},
        {"sum_axis0", g_sum_axis0, 4}, {"sum_axis1", g_sum_axis1, 4},
        {"layernorm_fwd", g_ln_fwd, 8}, {"layernorm_bwd", g_ln_bwd, 16},
        {"gelu_fwd", g_gelu_fwd, 8},   {"gelu_bwd", g_gelu_bwd, 12},
        {"maxsumexp", g_maxsumexp, 4}, {"crossentropy_bwd", g_ce_bwd, 8},
        {"embedding_fwd", g_emb_fwd, 12}, {"embedding_bwd", g_emb_bwd, 12},
        {"adamw", g_adamw, 28},        {"adamw_bf16", g_adamw_bf16, 30},
        {"sumsq", g_sumsq, 4},
        {"f32_to_bf16", g_f2bf, 6},    {"bf16_to_f32", g_bf2f, 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !gerr; i++) {
        if (!selected(cases[i].name))
            continue;
        const char *nm = cases[i].name;
        case_shape(shape, sizeof shape, nm, gC, gT, gV, gNVT, gN);
        double t = gtime_best(cases[i].fn);
        report(nm, shape, "cuda", t, cases[i].bytes_per_elem * gN, "GB/s", bw);
    }

    printf("# GPU kernels: compute-bound (GFLOP/s vs the cuBLAS GEMM of the same precision)\n");
    if (selected("gemm") && !gerr) {
        snprintf(shape, sizeof shape, "%dx%dx%d", gGT, gGT, gGT);
        double f = 2.0 * gGT * gGT * gGT;
        report("gemm_fp32", shape, "cuda", gtime_best(g_gemm32_t), f, "GFLOP/s", ceil32);
        report("gemm_tf32", shape, "cuda", gtime_best(g_gemmtf_t), f, "GFLOP/s", ceiltf);
        report("gemm_bf16", shape, "cuda", gtime_best(g_gemmbf_t), f, "GFLOP/s", ceilbf);
    }
    if (selected("attn") && !gerr) {
        size_t nq = (size_t)gAD * gATQ * gANB, rows = (size_t)gATQ * gANB;
        /* q and dq hold a fused (3C, T) tile of up to gANB heads */
        gq = galloc(3 * nq, -1, 1, 20), gk = galloc(nq, -1, 1, 21), gv = galloc(nq, -1, 1, 22);
        gdo = galloc(nq, -1, 1, 23), gdq = galloc(3 * nq, 0, 0, 24), gdk = galloc(nq, 0, 0, 25);
        gdv = galloc(nq, 0, 0, 26), gacc = galloc(nq, 0, 0, 27), gms = galloc(2 * rows, 0, 0, 28);
        glse = galloc(rows, 0, 0, 29), gDD = galloc(rows, 0, 0, 30);
        GCHECK(tsr_cuda_attn_init(gs, gAD, gATQ, gANB, gms, gacc));
        gAnb = gANB, gAq0 = gATQ;
        g_attn_fwd();
        GCHECK(tsr_cuda_attn_finalize(gs, gAD, gATQ, gANB, gms, gacc, gAD, (long long)gATQ * gAD,
                                      gacc, glse));
        GCHECK(tsr_cuda_attn_bwd_dot(gs, gAD, gATQ, gANB, gAD, (long long)gATQ * gAD, gacc, gdo,
                                     gDD));
        /* TF32 tensor cores (what training runs unless strict) against the
         * cuBLAS TF32 ceiling, bf16 ones against cuBLAS bf16's, then the
         * strict FP32 kernels against SGEMM's;
         * a pair with every key visible (gANB heads, contiguous tiles), then
         * the causal diagonal pair of GPT-2's attention call (the 12 heads of
         * one sequence read in place from the fused qkv tile, half the
         * products) */
        const struct {
            const char *name;
            int prec, d, nb, q0, fused;
        } ac[] = {
            {"attn_fwd", TSR_ATTN_TF32, gAD, gANB, gATQ, 0},
            {"attn_fwd_bf16", TSR_ATTN_BF16, gAD, gANB, gATQ, 0},
            {"attn_fwd_fp32", TSR_ATTN_FP32, gAD, gANB, gATQ, 0},
            {"attn_fwd_diag", TSR_ATTN_TF32, gAD, 12, 0, 1},
            {"attn_fwd_diag_bf16", TSR_ATTN_BF16, gAD, 12, 0, 1},
            {"attn_fwd_diag_fp32", TSR_ATTN_FP32, gAD, 12, 0, 1},
            /* 128-wide heads (Llama's; the large GPT-2 projections'): the
             * tensor-core kernels' 16-row chunks, against the same ceilings */
            {"attn_fwd_d128", TSR_ATTN_TF32, 2 * gAD, gANB / 2, gATQ, 0},
            {"attn_fwd_d128_bf16", TSR_ATTN_BF16, 2 * gAD, gANB / 2, gATQ, 0},
            {"attn_fwd_d128_fp32", TSR_ATTN_FP32, 2 * gAD, gANB / 2, gATQ, 0},
        };
        for (size_t c = 0; c < sizeof ac / sizeof ac[0] && !gerr; c++) {
            gAprec = ac[c].prec, gAnb = ac[c].nb < gANB ? ac[c].nb : gANB, gAq0 = ac[c].q0;
            gAfused = ac[c].fused, gAd = ac[c].d;
            if (gAnb < 1)
                continue; /* --quick's 2 heads hold one of 128 */
            snprintf(shape, sizeof shape, "d%d,%dx%d,h%d%s%s", gAd, gATQ, gATQ, gAnb,
                     gAq0 ? "" : ",causal", gAfused ? ",fused" : "");
            double f = (double)gAd * gATQ * gATQ * gAnb * (gAq0 ? 1.0 : 0.5);
            double ceil = gAprec == TSR_ATTN_TF32   ? ceiltf
                          : gAprec == TSR_ATTN_BF16 ? ceilbf
                                                    : ceil32;
            char bname[32];
            snprintf(bname, sizeof bname, "attn_bwd%s", ac[c].name + 8);
            report(ac[c].name, shape, "cuda", gtime_best(g_attn_fwd), 4 * f, "GFLOP/s", ceil);
            if (!gerr)
                report(bname, shape, "cuda", gtime_best(g_attn_bwd), 10 * f, "GFLOP/s", ceil);
        }
        float *bufs[] = {gq, gk, gv, gdo, gdq, gdk, gdv, gacc, gms, glse, gDD};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            cudaFree(bufs[i]);
    }
    GCUDA(cudaDeviceSynchronize());
    if (gerr)
        printf("# GPU: stopped after an error (%d)\n", gerr);
    else if (emulated)
        printf("# GPU (emulated): every case ran and completed without error\n");
    float *bufs[] = {gA, gB, gCb, gE, gD, gBv, gMs, gLse, gAcc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    cudaFree(gH), cudaFree(gH2), cudaFree(gH3), cudaFree(gTok);
    cublasDestroy(gh);
    cudaStreamDestroy(gs);
}
#endif

/* The exit status: a failed GPU case fails the run (make bench-kernels). */
static int gpu_failed(void)
{
#ifdef TSR_HAVE_CUDA
    return gerr != 0;
#else
    return 0;
#endif
}

int main(int argc, char **argv)
{
    int cpu = 1, gpu = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1, min_time = 0.05;
        else if (!strcmp(argv[i], "--cpu-only"))
            gpu = 0;
        else if (!strcmp(argv[i], "--gpu-only"))
            cpu = 0;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: %s [--quick] [--cpu-only] [--gpu-only] [FILTER]\n", argv[0]);
            return 0;
        } else
            filter = argv[i];
    }
    if (cpu)
        run_cpu();
#ifdef TSR_HAVE_CUDA
    if (gpu)
        run_gpu();
#else
    if (gpu)
        printf("# GPU: skipped (built without CUDA)\n");
#endif
    return gpu_failed() ? 1 : 0;
}
