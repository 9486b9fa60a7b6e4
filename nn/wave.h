/* nn/wave.h — the order in which a decoder's micro-batches go through its
 * blocks (docs/gpt2.md, "Waves"). One at a time, a training loop's order:
 * each micro-batch's forward, then its backward. In waves of k: block l runs
 * for the k micro-batches before block l + 1 starts, the head for each, then
 * the backward block by block in reverse, again k micro-batches per block.
 * Within a block each step (a Linear, the attention, a LayerNorm) runs for
 * the k micro-batches before the next, so each weight matrix is read by k
 * consecutive groups of tasks: a model whose weights do not stay on its
 * GPUs streams them once per wave instead of once per micro-batch. The
 * price is k sets of what crosses steps and blocks (each block's input,
 * one block's activations and its backward's gradients), which the model
 * keeps in "slots".
 *
 * Both orders submit the same tasks on the same tiles; only the order of
 * submission differs. Every sum that runs in a fixed order (deterministic
 * mode) therefore adds the same terms in the same order — except where two
 * phases add into one tensor, which waves interleave differently (a tied
 * token embedding, GPT-2's wte or a Llama with tie_embeddings: its head and
 * its embedding both add to its gradient).
 *
 * Both model families use it, and so does everything that trains them.
 * It checks the micro-batches' ids (tsr__trainer_check_batch) before
 * anything is submitted, and narrows the runtime's submission window while
 * a wave is submitted (tsr__wave_window). Must never: know a model's
 * layers, tensors or names, or submit tasks of its own: it calls the
 * model's phases in order.
 */
#ifndef TSR_NN_WAVE_H
#define TSR_NN_WAVE_H

#include <stddef.h>
#include <stdint.h>

/* A model's phases for micro-batch slot s (0 <= s < slots); block_fwd and
 * block_bwd take the k slots of a wave at once (FOR_SLOTS in the models). */
typedef struct tsr__wave_model {
    void *m;
    int layers;
    int slots;   /* micro-batches per wave the model has storage for */
    int tokens;  /* tokens per micro-batch (batch x seq_len) */
    size_t window; /* the submission window while a wave is submitted
                      (tsr__wave_window; 0: the runtime's, unchanged) */
    /* tokens (tokens ids) -> block 0's input of slot s */
    int (*embed)(void *m, int s, const int32_t *tokens);
    /* block l's forward of slots 0 .. k-1 (each input -> the next block's
     * input), each of its steps for every slot before the next step */
    int (*block_fwd)(void *m, int l, int k);
    /* the head of slot s, forward and backward: the loss of targets
     * (ntargets of them not ignored), and scale x its gradient into slot
     * s's residual-stream gradient */
    int (*head)(void *m, int s, const int32_t *targets, int ntargets, float scale);
    /* block l's backward of slots 0 .. k-1, step by step likewise */
    int (*block_bwd)(void *m, int l, int k);
    /* the embedding's backward of slot s */
    int (*embed_bwd)(void *m, int s);
    /* the mean loss of slot s's last head (waits for it) */
    int (*loss)(void *m, int s, float *loss);
} tsr__wave_model_t;

/* Forward and backward of `micro` micro-batches (tokens and targets: micro
 * x w->tokens ids each, below `vocab`; every one is checked before
 * anything is submitted: TSR_EINVAL naming `fn`), in waves of w->slots: the same as
 * `micro` rounds of forward + backward(scale). losses (may be NULL): each
 * micro-batch's mean loss, read at the end of each wave (NULL: nothing
 * waits). The submission window is w->window while it submits (unless
 * narrower already), and the runtime's again on return. */
int tsr__wave_run(const tsr__wave_model_t *w, const char *fn, int vocab, int micro,
                  const int32_t *tokens, const int32_t *targets, float scale, float *losses);

/* The default wave size (tsr_gpt2_config_t.wave, tsr_llama_config_t.wave
 * = 0) for a model of
 * `weight_bytes` of parameters and gradients (and bf16 copies) and
 * `slot_bytes` per slot, under the running runtime: where the weights
 * stay on the accelerators (they fit in 70 % of their memory: owner
 * placement homes them there), 2 if the state and three slots fit in 60 %
 * of their memory (the next micro-batch's forward fills the accelerators
 * while one backward drains: the simulated DGX A100 trains GPT-2 1.5 B
 * at 786 TFLOPS instead of 734, 10.6 B at 900 instead of 882), else 1; 1
 * where there are none; else (the weights stream) as many slots as
 * 3/4 of the memory left beside the training state (`state_bytes`) on the
 * host, the accelerators and a disk tier holds, but at most half the
 * host's (slots live there), at least 1, at most TSR__WAVE_MAX. */
#define TSR__WAVE_MAX 16
int tsr__wave_auto(double weight_bytes, double state_bytes, double slot_bytes);

/* The submission window (tsr_set_pending_bytes) for waves of a model of
 * `weight_bytes` of weights: 0 (the runtime's) where they stay on the
 * accelerators, else TSR__WAVE_WINDOW x the accelerators' memory. A wave
 * saves traffic only if the workers run its tasks about in the order it
 * submits them: with an unbounded window they start each micro-batch's
 * next step as soon as its input is ready, every step of a block runs at
 * once, and the block's weights stream per micro-batch again (measured in
 * docs/gpt2.md, "Waves"). */
#define TSR__WAVE_WINDOW 2.0
size_t tsr__wave_window(double weight_bytes);

#endif
