/* nn/io/checkpoint.h — the one model hook that checkpoints need beyond the
 * public accessors of tessera/gpt2.h, implemented in nn/gpt2.c.
 *
 * Must never grow into a second, private model API: checkpoints read and
 * write the model only through gpt2.h plus this.
 */
#ifndef TSR_NN_IO_CHECKPOINT_H
#define TSR_NN_IO_CHECKPOINT_H

#include <tessera/gpt2.h>

/* Restore the optimizer step counter when resuming (load_state).
 * TSR_EINVAL for a negative count. */
int tsr__gpt2_set_steps(tsr_gpt2_t *m, int steps);

#endif
