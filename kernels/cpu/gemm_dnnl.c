/* CPU GEMM through oneDNN matmul primitives, with a per-thread cache of
 * created primitives (creating one costs far more than a tile product).
 *
 * Column-major to oneDNN: a column-major (m, n) C with leading dimension ldc
 * is the row-major (n, m) matrix C^T with row stride ldc, so each product is
 * computed as C^T (n, m) = op(B)^T (n, k) op(A)^T (k, m), every operand
 * described by strides (a transposed operand is the same bytes with the two
 * strides swapped): no copy, any ld.
 *   alpha: the output scale (applied to the accumulator, before the sum);
 *   beta:  a sum post-op with scale beta (C read, scaled, added); none when
 *          beta == 0, so C is written only and a NaN in it cannot propagate.
 * Batches are a loop over one 2-D primitive whose memory objects get new
 * data handles per call (any batch strides, 0 included).
 */
#include "kernels/cpu/gemm_dnnl.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Primitives kept per thread: the distinct GEMM shapes one worker runs in a
 * GPT-2 step (forward, both backward products of four linear layers, the
 * unembedding, for a couple of tile sizes) fit; beyond that the least
 * recently used one is destroyed. */
enum { CACHE_SLOTS = 32 };

/* Everything that shapes a primitive. All members are 32-bit: no padding,
 * so memcmp compares keys. */
typedef struct {
    int32_t bf16_in, c_bf16, transa, transb, m, n, k, lda, ldb, ldc;
    int32_t nthreads;     /* the OpenMP team size it was planned for */
    uint32_t alpha, beta; /* bit patterns; beta 0 for any zero (no sum post-op) */
} gkey;

typedef struct {
    gkey key;
    int used;               /* slot holds a key */
    dnnl_primitive_t prim;  /* NULL: oneDNN cannot (or only by a reference kernel) */
    dnnl_memory_t src, wei, dst; /* no buffer of their own: handles set per call */
    uint64_t last;          /* LRU clock */
} slot;

typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    uint64_t clock;
    slot slots[CACHE_SLOTS];
} tcache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_key_ok;
/* The thread's cache, also reachable from TLS so a leak checker scanning
 * the main thread (whose key destructors never run) sees it. */
static _Thread_local tcache *tl_cache;

static void slot_clear(slot *s)
{
    if (s->prim)
        dnnl_primitive_destroy(s->prim);
    if (s->src)
        dnnl_memory_destroy(s->src);
    if (s->wei)
        dnnl_memory_destroy(s->wei);
    if (s->dst)
        dnnl_memory_destroy(s->dst);
    memset(s, 0, sizeof *s);
}

/* pthread key destructor: the thread exits, its primitives go. */
static void cache_free(void *p)
{
    tcache *tc = p;
    if (!tc)
        return;
    for (int i = 0; i < CACHE_SLOTS; i++)
        slot_clear(&tc->slots[i]);
    if (tc->stream)
        dnnl_stream_destroy(tc->stream);
    if (tc->eng)
        dnnl_engine_destroy(tc->eng);
    free(tc);
    if (tl_cache == tc)
        tl_cache = NULL;
}

static void cache_key_init(void) { cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0; }

/* The calling thread's cache, made on first use; NULL when it cannot be. */
static tcache *thread_cache(void)
{
    if (tl_cache)
        return tl_cache;
    pthread_once(&cache_once, cache_key_init);
    if (!cache_key_ok)
        return NULL; /* without a destructor the cache would leak per thread */
    tcache *tc = calloc(1, sizeof *tc);
    if (!tc)
        return NULL;
    if (dnnl_engine_create(&tc->eng, dnnl_cpu, 0) != dnnl_success) {
        tc->eng = NULL;
        free(tc);
        return NULL;
    }
    if (dnnl_stream_create(&tc->stream, tc->eng, dnnl_stream_default_flags) != dnnl_success) {
        dnnl_engine_destroy(tc->eng);
        free(tc);
        return NULL;
    }
    if (pthread_setspecific(cache_key, tc) != 0) {
        cache_free(tc);
        return NULL;
    }
    tl_cache = tc;
    return tc;
}

/* Fill s (key already set) with a primitive and its memory objects; on any
 * failure s->prim stays NULL and the failure is remembered by the slot. */
static void slot_create(tcache *tc, slot *s)
{
    const gkey *k = &s->key;
    dnnl_data_type_t tin = k->bf16_in ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t tout = k->c_bf16 ? dnnl_bf16 : dnnl_f32;
    /* src = op(B)^T (n, k): B (k, n) column-major is row-major (n, k) with
     * row stride ldb; B^T stored (n, k) column-major swaps the strides. */
    dnnl_dims_t sdims = {k->n, k->k}, sstr = {k->transb ? 1 : k->ldb, k->transb ? k->ldb : 1};
    /* weights = op(A)^T (k, m), the same way from A (m, k) or A^T (k, m) */
    dnnl_dims_t wdims = {k->k, k->m}, wstr = {k->transa ? 1 : k->lda, k->transa ? k->lda : 1};
    /* dst = C^T (n, m): row stride ldc */
    dnnl_dims_t ddims = {k->n, k->m}, dstr = {k->ldc, 1};
    dnnl_memory_desc_t smd, wmd, dmd;
    if (dnnl_memory_desc_init_by_strides(&smd, 2, sdims, tin, sstr) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&wmd, 2, wdims, tin, wstr) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&dmd, 2, ddims, tout, dstr) != dnnl_success)
        return;
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &smd, &wmd, NULL, &dmd) != dnnl_success)
        return;

    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    float alpha, beta;
    memcpy(&alpha, &k->alpha, sizeof alpha);
    memcpy(&beta, &k->beta, sizeof beta);
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) {
        attr = NULL;
        goto out;
    }
    /* fp32 stays fp32: no implicit down-conversion, whatever the environment
     * (ONEDNN_DEFAULT_FPMATH_MODE) says */
    if (dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_strict) != dnnl_success)
        goto out;
    if (alpha != 1.0f && dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) != dnnl_success)
        goto out;
    if (beta != 0.0f) {
        if (dnnl_post_ops_create(&ops) != dnnl_success) {
            ops = NULL;
            goto out;
        }
        if (dnnl_post_ops_append_sum(ops, beta) != dnnl_success ||
            dnnl_primitive_attr_set_post_ops(attr, ops) != dnnl_success)
            goto out;
    }
    if (dnnl_primitive_desc_create(&pd, &md, attr, tc->eng, NULL) != dnnl_success) {
        pd = NULL;
        goto out;
    }
    /* A reference implementation (plain loops) is far slower than the
     * fallback: leave such shapes to it. */
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
        !impl || !strncmp(impl, "ref", 3))
        goto out;
    if (dnnl_primitive_create(&s->prim, pd) != dnnl_success) {
        s->prim = NULL;
        goto out;
    }
    if (dnnl_memory_create(&s->src, &smd, tc->eng, DNNL_MEMORY_NONE) != dnnl_success)
        s->src = NULL;
    if (dnnl_memory_create(&s->wei, &wmd, tc->eng, DNNL_MEMORY_NONE) != dnnl_success)
        s->wei = NULL;
    if (dnnl_memory_create(&s->dst, &dmd, tc->eng, DNNL_MEMORY_NONE) != dnnl_success)
        s->dst = NULL;
    if (!s->src || !s->wei || !s->dst) {
        gkey key = s->key;
        slot_clear(s); /* remembered as unsupported: same key, no primitive */
        s->key = key;
        s->used = 1;
    }
out:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (ops)
        dnnl_post_ops_destroy(ops);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
}

/* The slot of key: a hit, else the least recently used one, rebuilt. */
static slot *lookup(tcache *tc, const gkey *key)
{
    slot *victim = &tc->slots[0];
    tc->clock++;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        slot *s = &tc->slots[i];
        if (s->used && !memcmp(&s->key, key, sizeof *key)) {
            s->last = tc->clock;
            return s;
        }
        if (!s->used ? victim->used : (victim->used && s->last < victim->last))
            victim = s;
    }
    slot_clear(victim);
    victim->key = *key;
    victim->used = 1;
    victim->last = tc->clock;
    slot_create(tc, victim);
    return victim;
}

int tsr__dnnl_gemm(int bf16_in, int c_bf16, int transa, int transb, int m, int n, int k,
                   float alpha, const void *a, int lda, int64_t stride_a, const void *b, int ldb,
                   int64_t stride_b, float beta, void *c, int ldc, int64_t stride_c, int batch)
{
    tcache *tc = thread_cache();
    if (!tc)
        return 0;
    gkey key;
    memset(&key, 0, sizeof key);
    key.bf16_in = bf16_in != 0;
    key.c_bf16 = c_bf16 != 0;
    key.transa = transa != 0;
    key.transb = transb != 0;
    key.m = m, key.n = n, key.k = k;
    key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.nthreads = omp_get_max_threads();
    memcpy(&key.alpha, &alpha, sizeof alpha);
    if (beta != 0.0f)
        memcpy(&key.beta, &beta, sizeof beta);
    slot *s = lookup(tc, &key);
    if (!s->prim)
        return 0;
    size_t in_size = bf16_in ? 2 : 4, out_size = c_bf16 ? 2 : 4;
    for (int bi = 0; bi < batch; bi++) {
        /* oneDNN reads src and weights only; its API takes void * */
        void *pa = (char *)(uintptr_t)a + (size_t)((int64_t)bi * stride_a) * in_size;
        void *pb = (char *)(uintptr_t)b + (size_t)((int64_t)bi * stride_b) * in_size;
        void *pc = (char *)c + (size_t)((int64_t)bi * stride_c) * out_size;
        if (dnnl_memory_set_data_handle(s->src, pb) != dnnl_success ||
            dnnl_memory_set_data_handle(s->wei, pa) != dnnl_success ||
            dnnl_memory_set_data_handle(s->dst, pc) != dnnl_success)
            return bi;
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, s->src}, {DNNL_ARG_WEIGHTS, s->wei}, {DNNL_ARG_DST, s->dst}};
        if (dnnl_primitive_execute(s->prim, tc->stream, 3, args) != dnnl_success ||
            dnnl_stream_wait(tc->stream) != dnnl_success)
            return bi;
    }
    return batch;
}

int tsr__dnnl_set_threads(int n)
{
    int old = omp_get_max_threads();
    omp_set_num_threads(n > 0 ? n : 1);
    return old;
}
