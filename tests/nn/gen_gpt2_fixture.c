/* tests/nn/gen_gpt2_fixture.c — writes the initial weights of the PyTorch
 * comparison's tiny GPT-2 (vocabulary 300, context 64, 2 layers, 4 heads,
 * 64 channels) with Tessera's own initialisation, as an HF safetensors file.
 * `make fixture` runs it and then tools/gpt2_reference.py on its output.
 *
 *   gen-gpt2-fixture OUT.safetensors
 */
#include <stdio.h>

#include <tessera/gpt2.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen-gpt2-fixture OUT.safetensors\n");
        return 2;
    }
    tsr_config_t rc;
    tsr_config_init(&rc);
    rc.ncpu = 1;
    tsr_gpt2_config_t cfg = {.vocab_size = 300, .context = 64, .layers = 2, .heads = 4,
                             .channels = 64};
    tsr_gpt2_t *m = NULL;
    int st = tsr_init(&rc);
    if (!st)
        st = tsr_gpt2_create(&m, &cfg, 1, 64);
    if (!st)
        st = tsr_gpt2_init_weights(m, 20261121);
    if (!st)
        st = tsr_gpt2_save(m, argv[1]);
    if (st)
        fprintf(stderr, "gen-gpt2-fixture: %s\n", tsr_error_message());
    tsr_gpt2_free(m);
    tsr_shutdown();
    return st ? 1 : 0;
}
