/* nn/params.h — a model's parameter table: every parameter's value,
 * gradient, AdamW moments and (mixed precision) bf16 copy as tiled tensors,
 * found by name, read and written as whole host arrays, and the two-pass
 * construction (a dry pass that checks every size and counts the tiles,
 * then the real one) that every model of nn/ uses for all its tensors.
 *
 * Model-independent: GPT-2 (nn/gpt2.c) and Llama (nn/llama.c) each fill a
 * table with their own names and tilings; the optimizer step over a table is
 * nn/trainer.c's. Must never: know a model's layers or names, submit
 * anything but whole-table maintenance (bf16 refresh, zeroed gradients), or
 * be used outside nn/.
 */
#ifndef TSR_NN_PARAMS_H
#define TSR_NN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "nn/tensor.h"

/* The most tiles (runtime handles) one model may have: about 36 000 for the
 * 124M GPT-2 with 8 x 1024 tokens and the derived tiles; beyond this the
 * tiles are far too small for the shapes, or the shapes far too large for
 * one machine. */
enum { MODEL_MAX_TILES = 1 << 22 };

/* The two passes of a model's construction over the same code. In the dry
 * pass (dry = 1) tsr__build_tensor checks a shape in 64 bits and counts its
 * tiles, so that a configuration whose sizes overflow int, or which needs
 * more tiles than a model may have, fails before anything is allocated. */
typedef struct tsr__build {
    const char *model; /* "gpt2", "llama": the messages' prefix */
    int dry;
    long long ntiles;  /* counted so far in this pass */
} tsr__build_t;

/* t = a (rows, cols) tensor in tiles of at most (tile_rows, tile_cols),
 * bf16 or fp32; nothing is made in the dry pass. `field` names the
 * configuration sizes that make this tensor, for the message. */
int tsr__build_tensor(tsr__build_t *b, tsr_tensor_t *t, const char *name, const char *field,
                      long long rows, long long cols, long long tile_rows, long long tile_cols,
                      int bf16);

/* One parameter: its value, gradient and AdamW moments, tiled alike. With
 * a bf16 table the weight matrices that GEMMs read also have pb, a bf16
 * copy of p tiled like it (zeroed for the others and in fp32), which every
 * GEMM reads instead. */
typedef struct param {
    char name[64];
    tsr_tensor_t p, g, m, v;
    int decay; /* weight decay applies (matrices) */
    tsr_tensor_t pb; /* bf16 copy of p, refreshed after every change of p */
    int *owner;      /* data parallel with ZeRO: the rank that updates each
                        tile (tiles[i] of p, g, m, v); NULL otherwise */
} param_t;

typedef struct tsr__params {
    const char *model;  /* "gpt2", "llama": the messages' prefix */
    int bf16;           /* GEMM weights get bf16 copies */
    int n, cap;
    param_t *p;         /* n of cap, in checkpoint order */
    int rank;           /* this replica's rank (ZeRO owners); 0 alone */
    int bf16_stale;     /* a pb is older than its p */
    int grads_zero;     /* every gradient is known to be 0 */
} tsr__params_t;

/* Room for `cap` parameters (once, before the real pass adds them). */
int tsr__params_reserve(tsr__params_t *ps, int cap);
/* A parameter of (rows, cols) in tiles (trows, tcols) with its gradient and
 * moments; gemm: GEMMs read it (a bf16 table gives it a bf16 copy). *out:
 * the new entry, NULL in the dry pass. */
int tsr__params_add(tsr__params_t *ps, tsr__build_t *b, param_t **out, const char *name,
                    const char *field, long long rows, long long cols, long long trows,
                    long long tcols, int decay, int gemm);
/* Every tensor of the table to fn (those not made are zeroed), and the
 * table's own memory freed. */
void tsr__params_each_tensor(tsr__params_t *ps, void (*fn)(tsr_tensor_t *));
void tsr__params_free(tsr__params_t *ps);

param_t *tsr__params_find(tsr__params_t *ps, const char *name);
size_t tsr__params_numel(const tsr__params_t *ps);
/* Whether this replica updates tile i of p (every tile without ZeRO). */
int tsr__params_owns(const tsr__params_t *ps, const param_t *p, size_t i);

/* Read (write 0) or write one part of a parameter (which: TSR_GPT2_PARAM,
 * _GRAD, _ADAM_M, _ADAM_V) as a dense column-major host array of its
 * (rows, cols); numel receives the count. A ZeRO moment reads zeros for the
 * tiles other replicas own, and writing skips them. `fn`: the caller, for
 * the messages. */
int tsr__params_access(tsr__params_t *ps, const char *fn, const char *name, int which,
                       float *ptr, size_t *numel, size_t given, int write);

/* The bf16 copies refreshed from their fp32 masters where marked stale (by
 * a set, a load or an initialisation), before the next forward reads them. */
int tsr__params_refresh_stale(tsr__params_t *ps);
/* Every gradient = 0, unless known to be already. */
int tsr__params_zero_grad(tsr__params_t *ps);

/* What a GEMM reads of weight p: its bf16 copy where it has one. */
static inline const tsr_tensor_t *tsr__params_wmat(const param_t *p)
{
    return p->pb.tiles ? &p->pb : &p->p;
}

/* A standard normal draw from a splitmix stream (the initialisations). */
double tsr__params_normal(uint64_t *s);

#endif
