/* tools/tessera-eval.c — the mean cross-entropy (and perplexity) of a GPT-2
 * or Llama (--arch llama) checkpoint on a token shard.
 *
 *   tessera-eval --checkpoint MODEL.safetensors|RUN_DIR --data TOKENS.bin [flags]
 *
 * Works with any HF GPT-2 safetensors checkpoint (the 124M model.safetensors,
 * or a checkpoint written by tessera-train): the shape comes from the file;
 * with any HF Llama checkpoint folder (its config.json) likewise.
 * The shard is read as consecutive windows of batch x seq tokens (the tail
 * that fills no whole batch is left out), each predicting the next token.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "cli.h"
#include "model.h"

static const char usage[] =
    "usage: tessera-eval --checkpoint FILE --data TOKENS.bin [flags]\n"
    "Mean cross-entropy of a GPT-2 (or Llama) checkpoint over a token shard.\n"
    "  --arch A             gpt2 (default) or llama: then --checkpoint is an HF\n"
    "                       checkpoint folder (config.json, safetensors), a run\n"
    "                       folder of tessera-train --arch llama or one of its\n"
    "                       checkpoint folders\n"
    "  --checkpoint FILE    HF GPT-2 safetensors checkpoint (required); or a run\n"
    "                       folder of tessera-train (its latest checkpoint), or\n"
    "                       one of its checkpoint folders (DIR/step-N)\n"
    "  --data FILE          token shard (required), tokenized for that model\n"
    "  --batch B            sequences per forward pass (default 4)\n"
    "  --seq T              tokens per sequence (default: the context, at most 1024)\n"
    "  --precision P        fp32 (default) or bf16: the GEMMs on bf16 inputs\n"
    "  --max-batches K      evaluate the first K batches only (default 0: all)\n"
    "  --threads N          CPU workers (default: one per core; none where GPUs are:\n"
    "                       the GPUs alone)\n"
    "  --sched NAME         scheduling policy (default: eager)\n"
    "Refuses to run under TESSERA_SIMULATE (exit 2): a simulated run has no real\n"
    "data; tessera-sim simulates a model's steps.\n";

int main(int argc, char **argv)
{
    const char *ckpt_arg = NULL, *data = NULL, *sched = NULL, *arch_name = NULL,
               *precision = NULL;
    int batch = 4, seq = 0, max_batches = 0, threads = 0;
    cli_opt_t opts[] = {
        {"checkpoint", 0, CLI_STR, &ckpt_arg, 0, 0, 0},
        {"data", 0, CLI_STR, &data, 0, 0, 0},
        {"batch", 0, CLI_INT, &batch, 1, 1e6, 0},
        {"seq", 0, CLI_INT, &seq, 1, 1e6, 0},
        {"max-batches", 0, CLI_INT, &max_batches, 0, 1e9, 0},
        {"threads", 0, CLI_INT, &threads, 0, 4096, 0},
        {"sched", 0, CLI_STR, &sched, 0, 0, 0},
        {"arch", 0, CLI_STR, &arch_name, 0, 0, 0},
        {"precision", 0, CLI_STR, &precision, 0, 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof *opts);
    int npos = 0;
    int rc = cli_parse("tessera-eval", usage, opts, nopts, argc, argv, NULL, 0, &npos);
    if (rc >= 0)
        return rc;
    if (ckpt_arg == NULL)
        return cli_usage_error("missing --checkpoint FILE");
    if (data == NULL)
        return cli_usage_error("missing --data TOKENS.bin");
    model_arch_t arch = MODEL_GPT2;
    if (arch_name != NULL && (rc = model_arch_parse(arch_name, &arch)) != 0)
        return rc;
    if (precision != NULL && strcmp(precision, "fp32") && strcmp(precision, "bf16"))
        return cli_usage_error("--precision: fp32 or bf16, not '%s'", precision);
    /* before any file is read: a simulated model's weights are zeros */
    if ((rc = cli_refuse_simulation("its loss would be that of a model of zeros")) != 0)
        return rc;

    /* a file, a checkpoint folder or a run folder of tessera-train */
    char ckpt[4096];
    if (ckpt_model_path_arch(arch, ckpt_arg, ckpt, sizeof ckpt) != 0)
        return 1;
    model_config_t cfg;
    if (model_read_config(arch, ckpt, &cfg) != 0)
        return 1;
    model_config_set_run(&cfg, 0, precision && !strcmp(precision, "bf16") ? TSR_GPT2_BF16
                                                                          : TSR_GPT2_FP32, 0, 0);
    int context = model_config_context(&cfg);
    if (seq == 0)
        seq = context < 1024 ? context : 1024;
    if (seq > context)
        return cli_usage_error("--seq %d exceeds the checkpoint's context of %d", seq, context);
    size_t ntokens = 0;
    if (cli_check_shard("data", data, model_config_vocab(&cfg), (size_t)seq + 1, &ntokens,
                        NULL) != 0)
        return 1;
    /* A shard smaller than one batch: fewer sequences per batch. */
    if (ntokens < (size_t)batch * (size_t)seq + 1) {
        int fit = (int)((ntokens - 1) / (size_t)seq);
        if (cli_seen(opts, nopts, "batch"))
            fprintf(stderr, "%s: note: '%s' holds %zu tokens: --batch %d instead of %d\n",
                    cli_prog, data, ntokens, fit, batch);
        batch = fit;
    }

    if ((rc = cli_runtime_init(threads, sched)) != 0)
        return rc;
    int status = 0;
    model_t m = {.arch = arch};
    tsr_loader_t *loader = NULL;
    int32_t *inputs = NULL, *targets = NULL;
    char desc[256];
    model_config_describe(&cfg, desc, sizeof desc);

    rc = model_create(&m, &cfg, batch, seq);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot create a model of %s for %d x %d tokens", desc, batch,
                              seq);
        goto done;
    }
    rc = model_load(&m, ckpt);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot load '%s'", ckpt);
        goto done;
    }
    rc = tsr_loader_open(&loader, data, batch, seq);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot read '%s'", data);
        goto done;
    }
    size_t nbatches = tsr_loader_batches(loader);
    if (max_batches > 0 && (size_t)max_batches < nbatches)
        nbatches = (size_t)max_batches;
    size_t ntok = (size_t)batch * (size_t)seq;
    inputs = malloc(ntok * sizeof *inputs);
    targets = malloc(ntok * sizeof *targets);
    if (inputs == NULL || targets == NULL) {
        status = cli_fail("out of memory");
        goto done;
    }
    printf("model: %s (%.2fM parameters) from %s\n", desc, (double)model_num_params(&m) / 1e6,
           ckpt);
    printf("data: %s, %zu tokens; %zu batch%s of %d x %d\n", data, ntokens, nbatches,
           nbatches == 1 ? "" : "es", batch, seq);
    fflush(stdout);

    double t0 = cli_now(), sum = 0.0;
    for (size_t i = 0; i < nbatches; i++) {
        float loss = 0.0f;
        rc = tsr_loader_next(loader, inputs, targets);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot read '%s'", data);
            goto done;
        }
        rc = model_forward(&m, inputs, targets, &loss);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "forward pass failed on batch %zu", i + 1);
            goto done;
        }
        sum += loss;
    }
    double mean = sum / (double)nbatches;
    double dt = cli_now() - t0;
    printf("loss %.4f over %zu tokens (perplexity %.2f)\n", mean, nbatches * ntok, exp(mean));
    printf("%.1f s, %.0f tok/s\n", dt, dt > 0 ? (double)(nbatches * ntok) / dt : 0.0);

done:
    free(inputs);
    free(targets);
    tsr_loader_close(loader);
    model_free(&m);
    rc = tsr_shutdown();
    if (rc != TSR_OK && status == 0)
        status = cli_lib_fail(rc, "runtime shutdown");
    return status;
}
