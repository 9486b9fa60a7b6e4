/* tools/tessera-train.c — train a GPT-2 on a token shard with Tessera's tiled
 * tasks: from scratch, from an HF checkpoint (--init), or resuming a run of
 * this program (--resume), with AdamW, warmup + cosine learning rate,
 * gradient accumulation over micro-batches, validation and checkpoints.
 *
 *   tessera-train --data TRAIN.bin [--val VAL.bin] [--out DIR] [flags]
 *
 * A checkpoint is DIR/model.safetensors (an HF GPT-2 file other tools and
 * programs read) and DIR/train.state (AdamW moments, the step counter, and
 * the data position and run settings as text), so that --resume continues
 * exactly where the run stopped: the same batches, the same learning rates,
 * the same losses as a run never interrupted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: tessera-train --data TRAIN.bin [--val VAL.bin] [--out DIR] [flags]\n"
    "       tessera-train --out DIR --resume [flags]\n"
    "Train a GPT-2 on a token shard (from tessera-tokenize or llm.c).\n"
    "data:\n"
    "  --data FILE          training tokens (required, but for --resume)\n"
    "  --val FILE           validation tokens: loss every --eval-every steps and at the end\n"
    "model (with --init or --resume the checkpoint sets the shape; the flags given\n"
    "must agree with it):\n"
    "  --vocab N            vocabulary size (default 50257, GPT-2's BPE;\n"
    "                       257 for data from the byte-level tokenizer)\n"
    "  --context N          positions (default 1024)\n"
    "  --layers N           transformer blocks (default 12)\n"
    "  --heads N            attention heads (default 12)\n"
    "  --channels N         embedding width, a multiple of heads (default 768)\n"
    "  --tile-tokens N      tokens per activation tile (default 0: derived)\n"
    "  --tile-vocab N       vocabulary rows per tile (default 0: derived)\n"
    "  --tile-hidden N      MLP hidden rows per tile (default 0: derived)\n"
    "  --init CKPT          start from this HF GPT-2 safetensors checkpoint\n"
    "  --seed S             initialisation seed (default 1337)\n"
    "optimization:\n"
    "  --steps N            optimizer steps (default 100)\n"
    "  --batch N            sequences per optimizer step (default 4)\n"
    "  --micro-batch N      sequences per forward/backward (default: --batch);\n"
    "                       --batch must be a multiple\n"
    "  --seq N              tokens per sequence (default: the context, at most 1024)\n"
    "  --lr X               peak learning rate (default 6e-4)\n"
    "  --min-lr X           final learning rate of the cosine (default: lr / 10)\n"
    "  --warmup N           linear warmup steps (default: steps / 10)\n"
    "  --weight-decay X     AdamW weight decay of the matrices (default 0.1)\n"
    "  --grad-clip X        clip the gradients' global norm (default 1.0; 0: off)\n"
    "checkpoints and output:\n"
    "  --out DIR            write DIR/model.safetensors and DIR/train.state\n"
    "  --checkpoint-every N also every N steps (default 0: only at the end)\n"
    "  --stop-at N          stop after step N with a checkpoint, keeping the\n"
    "                       learning-rate schedule of --steps (resume later)\n"
    "  --resume             continue the run saved in --out DIR (data and settings\n"
    "                       not given again are taken from DIR/train.state)\n"
    "  --eval-every N       validation every N steps (default 0: only at the end)\n"
    "  --eval-batches K     validation micro-batches per evaluation (default 10)\n"
    "  --log-every N        progress line every N steps (default 1)\n"
    "runtime:\n"
    "  --threads N          CPU workers (default: one per core)\n"
    "  --sched NAME         scheduling policy (default: eager)\n";

#define STATE_MAGIC "tessera-train 1"

/* Run settings saved in train.state and restored on --resume when not given
 * again: everything that decides the batches and the updates. */
static const char *const saved_opts[] = {"steps",        "batch",     "micro-batch",
                                         "seq",          "lr",        "min-lr",
                                         "warmup",       "weight-decay", "grad-clip",
                                         "eval-every",   "eval-batches"};
#define NSAVED ((int)(sizeof saved_opts / sizeof *saved_opts))

typedef struct run {
    tsr_gpt2_t *m;
    tsr_loader_t *train, *val;
    int micro, seq, accum, eval_batches;
    int32_t *inputs, *targets;
    const char *out;
    const char **data_path, **val_path; /* the flags' values, restored by --resume */
    cli_opt_t *opts;
    int nopts;
    int total_steps, width;
} run_t;

/* Mean validation loss over the first eval_batches micro-batches. */
static int validate(run_t *r, int step)
{
    int rc = tsr_loader_seek(r->val, 0);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot rewind the validation data");
    double sum = 0.0;
    for (int i = 0; i < r->eval_batches; i++) {
        float loss = 0.0f;
        rc = tsr_loader_next(r->val, r->inputs, r->targets);
        if (rc != TSR_OK)
            return cli_lib_fail(rc, "cannot read the validation data");
        rc = tsr_gpt2_forward(r->m, r->inputs, r->targets, &loss);
        if (rc != TSR_OK)
            return cli_lib_fail(rc, "validation forward pass failed");
        sum += loss;
    }
    double mean = sum / r->eval_batches;
    printf("step %*d/%d | val loss %.4f (%d x %d tokens)\n", r->width, step, r->total_steps,
           mean, r->eval_batches, r->micro * r->seq);
    fflush(stdout);
    return 0;
}

static int save_checkpoint(run_t *r, int step)
{
    char model_path[4096], state_path[4096];
    if (cli_mkdirs(r->out) != 0 || cli_path(model_path, sizeof model_path, r->out,
                                            "model.safetensors") != 0 ||
        cli_path(state_path, sizeof state_path, r->out, "train.state") != 0)
        return 1;
    /* The run's settings and the data position, as text. */
    size_t cap = 8192, len = 0;
    char *extra = malloc(cap);
    if (extra == NULL)
        return cli_fail("out of memory");
    len += (size_t)snprintf(extra + len, cap - len, "%s\nstep %d\nposition %zu\ndata %s\n",
                            STATE_MAGIC, step, tsr_loader_position(r->train), *r->data_path);
    if (*r->val_path != NULL)
        len += (size_t)snprintf(extra + len, cap - len, "val %s\n", *r->val_path);
    for (int i = 0; i < NSAVED && len < cap; i++) {
        char v[128];
        cli_format(cli_find(r->opts, r->nopts, saved_opts[i]), v, sizeof v);
        len += (size_t)snprintf(extra + len, cap - len, "opt %s %s\n", saved_opts[i], v);
    }
    int rc = tsr_gpt2_save(r->m, model_path);
    if (rc != TSR_OK) {
        free(extra);
        return cli_lib_fail(rc, "cannot save '%s'", model_path);
    }
    rc = tsr_gpt2_save_state(r->m, state_path, extra);
    free(extra);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot save '%s'", state_path);
    printf("step %*d/%d | checkpoint saved to %s\n", r->width, step, r->total_steps, r->out);
    fflush(stdout);
    return 0;
}

/* Read the text saved with train.state: the step, the data position, and
 * the settings not given again on the command line. */
static int restore_extra(run_t *r, const char *state_path, char *extra, int *step,
                         size_t *position)
{
    int have_step = 0, have_pos = 0;
    char *save = NULL;
    char *line = strtok_r(extra, "\n", &save);
    if (line == NULL || strcmp(line, STATE_MAGIC) != 0)
        return cli_fail("'%s' was not written by tessera-train", state_path);
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char name[64], value[4096];
        if (sscanf(line, "step %d", step) == 1) {
            have_step = *step >= 0;
        } else if (strncmp(line, "position ", 9) == 0) {
            char *end;
            unsigned long long p = strtoull(line + 9, &end, 10);
            have_pos = *end == '\0';
            *position = (size_t)p;
        } else if (strncmp(line, "data ", 5) == 0 || strncmp(line, "val ", 4) == 0) {
            int is_val = line[0] == 'v';
            const char *saved = line + (is_val ? 4 : 5);
            const char **now = is_val ? r->val_path : r->data_path;
            if (*now == NULL)
                *now = saved; /* points into extra, which outlives the run */
            else if (strcmp(saved, *now) != 0)
                fprintf(stderr, "%s: warning: the run was saved with --%s '%s', not '%s'\n",
                        cli_prog, is_val ? "val" : "data", saved, *now);
        } else if (sscanf(line, "opt %63s %4095s", name, value) == 2) {
            cli_opt_t *o = cli_find(r->opts, r->nopts, name);
            if (o == NULL)
                continue;
            if (!o->seen) {
                if (cli_set(o, value) != 0)
                    return cli_fail("'%s' holds a bad value for --%s", state_path, name);
            } else {
                char now[128];
                cli_format(o, now, sizeof now);
                if (strcmp(now, value) != 0)
                    fprintf(stderr,
                            "%s: warning: --%s %s differs from the saved run's %s: the "
                            "losses will differ from an uninterrupted run\n",
                            cli_prog, name, now, value);
            }
        }
    }
    if (!have_step || !have_pos)
        return cli_fail("'%s' lacks the step or the data position (corrupt?)", state_path);
    return 0;
}

int main(int argc, char **argv)
{
    tsr_gpt2_config_t flags;
    tsr_gpt2_config_default(&flags);
    tsr_adamw_config_t adamw;
    tsr_adamw_config_default(&adamw);

    const char *data = NULL, *val = NULL, *init = NULL, *out = NULL, *sched = NULL;
    int threads = 0, steps = 100, batch = 4, micro = 0, seq = 0, warmup = -1;
    int ckpt_every = 0, stop_at = 0, resume = 0, eval_every = 0, eval_batches = 10, log_every = 1;
    double lr = 6e-4, min_lr = -1.0, wd = adamw.weight_decay, clip = adamw.grad_clip;
    uint64_t seed = 1337;

    cli_opt_t opts[CLI_MODEL_NOPTS + 24];
    cli_model_opts(opts, &flags);
    const cli_opt_t run_opts[] = {
        {"data", 0, CLI_STR, &data, 0, 0, 0},
        {"val", 0, CLI_STR, &val, 0, 0, 0},
        {"init", 0, CLI_STR, &init, 0, 0, 0},
        {"seed", 0, CLI_U64, &seed, 0, 0, 0},
        {"steps", 0, CLI_INT, &steps, 1, 1e9, 0},
        {"batch", 0, CLI_INT, &batch, 1, 1e6, 0},
        {"micro-batch", 0, CLI_INT, &micro, 1, 1e6, 0},
        {"seq", 0, CLI_INT, &seq, 1, 1e6, 0},
        {"lr", 0, CLI_FLOAT, &lr, 0.0, 10.0, 0},
        {"min-lr", 0, CLI_FLOAT, &min_lr, 0.0, 10.0, 0},
        {"warmup", 0, CLI_INT, &warmup, 0, 1e9, 0},
        {"weight-decay", 0, CLI_FLOAT, &wd, 0.0, 10.0, 0},
        {"grad-clip", 0, CLI_FLOAT, &clip, 0.0, 1e9, 0},
        {"out", 0, CLI_STR, &out, 0, 0, 0},
        {"checkpoint-every", 0, CLI_INT, &ckpt_every, 0, 1e9, 0},
        {"stop-at", 0, CLI_INT, &stop_at, 1, 1e9, 0},
        {"resume", 0, CLI_BOOL, &resume, 0, 0, 0},
        {"eval-every", 0, CLI_INT, &eval_every, 0, 1e9, 0},
        {"eval-batches", 0, CLI_INT, &eval_batches, 1, 1e9, 0},
        {"log-every", 0, CLI_INT, &log_every, 1, 1e9, 0},
        {"threads", 0, CLI_INT, &threads, 0, 4096, 0},
        {"sched", 0, CLI_STR, &sched, 0, 0, 0},
    };
    const int nrun = (int)(sizeof run_opts / sizeof *run_opts);
    memcpy(opts + CLI_MODEL_NOPTS, run_opts, sizeof run_opts);
    const int nopts = CLI_MODEL_NOPTS + nrun;
    int npos = 0;
    int rc = cli_parse("tessera-train", usage, opts, nopts, argc, argv, NULL, 0, &npos);
    if (rc >= 0)
        return rc;

    if (data == NULL && !resume)
        return cli_usage_error("missing --data TRAIN.bin");
    if (resume && out == NULL)
        return cli_usage_error("--resume needs --out DIR (the run to continue)");
    if (resume && init != NULL)
        return cli_usage_error("--resume and --init exclude each other");

    run_t r = {0};
    r.out = out;
    r.data_path = &data;
    r.val_path = &val;
    r.opts = opts;
    r.nopts = nopts;

    /* The model's shape: from the checkpoint to start from, else the flags. */
    char model_path[4096] = "", state_path[4096] = "";
    tsr_gpt2_config_t cfg = flags;
    if (resume) {
        if (cli_path(model_path, sizeof model_path, out, "model.safetensors") != 0 ||
            cli_path(state_path, sizeof state_path, out, "train.state") != 0)
            return 1;
        if (!cli_file_exists(model_path) || !cli_file_exists(state_path))
            return cli_fail("no checkpoint to resume in '%s' (model.safetensors and "
                            "train.state)",
                            out);
    }
    const char *from = resume ? model_path : init;
    if (from != NULL) {
        tsr_gpt2_config_t ck;
        if (cli_read_config(from, &ck) != 0 ||
            cli_config_from_checkpoint(from, &ck, &flags, opts, &cfg) != 0)
            return 1;
    }

    /* A folder that cannot be written fails now, not after training. */
    if (out != NULL && cli_mkdirs(out) != 0)
        return 1;
    if (cli_runtime_init(threads, sched) != 0)
        return 1;
    int status = 0;
    tsr_gpt2_t *m = NULL;
    int start_step = 0;
    size_t position = 0;
    char desc[256];

    /* The saved run's settings first (they decide the shapes of batches). */
    char extra[16384];
    if (resume) {
        /* A model is needed to read the state, but the batch shapes are
         * among the saved settings: read them through a throw-away model of
         * one sequence (activations are allocated only when used). */
        tsr_gpt2_t *probe = NULL;
        tsr_gpt2_config_t pc = cfg;
        pc.tile_tokens = 0;
        rc = tsr_gpt2_create(&probe, &pc, 1, cfg.context);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot create the model of '%s'", model_path);
            goto done;
        }
        rc = tsr_gpt2_load_state(probe, state_path, extra, sizeof extra);
        tsr_gpt2_free(probe);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot read '%s'", state_path);
            goto done;
        }
        extra[sizeof extra - 1] = '\0';
        if ((status = restore_extra(&r, state_path, extra, &start_step, &position)) != 0)
            goto done;
    }

    if (data == NULL) {
        status = cli_usage_error("missing --data TRAIN.bin");
        goto done;
    }
    if (micro == 0)
        micro = batch;
    if (seq == 0)
        seq = cfg.context < 1024 ? cfg.context : 1024;
    if (batch % micro != 0) {
        status = cli_usage_error("--batch %d is not a multiple of --micro-batch %d", batch,
                                 micro);
        goto done;
    }
    if (seq > cfg.context) {
        status = cli_usage_error("--seq %d exceeds the model's context of %d", seq, cfg.context);
        goto done;
    }
    if (warmup < 0)
        warmup = steps / 10;
    if (min_lr < 0.0)
        min_lr = lr / 10.0;
    if (min_lr > lr) {
        status = cli_usage_error("--min-lr %g exceeds --lr %g", min_lr, lr);
        goto done;
    }
    adamw.weight_decay = (float)wd;
    adamw.grad_clip = (float)clip;
    r.micro = micro;
    r.seq = seq;
    r.accum = batch / micro;
    r.total_steps = steps;
    r.width = snprintf(NULL, 0, "%d", steps);

    /* The data: every id must fit the model's vocabulary. */
    size_t ntrain = 0, nval = 0;
    int max_id = 0;
    size_t need = (size_t)micro * (size_t)seq + 1;
    if (cli_check_shard("training data", data, cfg.vocab_size, need, &ntrain, &max_id) != 0 ||
        (val != NULL &&
         cli_check_shard("validation data", val, cfg.vocab_size, need, &nval, NULL) != 0)) {
        status = 1;
        goto done;
    }
    if (max_id <= 256 && cfg.vocab_size > 257 && from == NULL &&
        !cli_seen(opts, nopts, "vocab"))
        fprintf(stderr, "%s: note: '%s' looks byte-level (ids up to %d): --vocab 257 makes a "
                        "much smaller model than the default %d\n",
                cli_prog, data, max_id, cfg.vocab_size);

    rc = tsr_gpt2_create(&m, &cfg, micro, seq);
    if (rc != TSR_OK) {
        cli_config_describe(&cfg, desc, sizeof desc);
        status = cli_lib_fail(rc, "cannot create a model of %s for %d x %d tokens", desc, micro,
                              seq);
        goto done;
    }
    r.m = m;
    if (resume) {
        rc = tsr_gpt2_load(m, model_path);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot load '%s'", model_path);
            goto done;
        }
        rc = tsr_gpt2_load_state(m, state_path, NULL, 0);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot load '%s'", state_path);
            goto done;
        }
        if (tsr_gpt2_steps_done(m) != start_step) {
            status = cli_fail("'%s' says step %d but holds the optimizer of step %d (corrupt?)",
                              state_path, start_step, tsr_gpt2_steps_done(m));
            goto done;
        }
    } else if (init != NULL) {
        rc = tsr_gpt2_load(m, init);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot load '%s'", init);
            goto done;
        }
    } else {
        rc = tsr_gpt2_init_weights(m, seed);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot initialise the weights");
            goto done;
        }
    }

    rc = tsr_loader_open(&r.train, data, micro, seq);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot read training data '%s'", data);
        goto done;
    }
    if (resume && (rc = tsr_loader_seek(r.train, position)) != TSR_OK) {
        status = cli_lib_fail(rc, "cannot go back to position %zu of '%s'", position, data);
        goto done;
    }
    if (val != NULL) {
        rc = tsr_loader_open(&r.val, val, micro, seq);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot read validation data '%s'", val);
            goto done;
        }
        size_t nb = tsr_loader_batches(r.val);
        r.eval_batches = (size_t)eval_batches < nb ? eval_batches : (int)nb;
    }
    size_t ntok = (size_t)micro * (size_t)seq;
    r.inputs = malloc(ntok * sizeof *r.inputs);
    r.targets = malloc(ntok * sizeof *r.targets);
    if (r.inputs == NULL || r.targets == NULL) {
        status = cli_fail("out of memory");
        goto done;
    }

    const tsr_gpt2_config_t *mc = tsr_gpt2_config(m);
    cli_config_describe(mc, desc, sizeof desc);
    printf("model: %s, %.2fM parameters (tiles: %d tokens, %d vocab rows, %d hidden rows)\n",
           desc, (double)tsr_gpt2_num_params(m) / 1e6, mc->tile_tokens, mc->tile_vocab,
           mc->tile_hidden);
    printf("data: %s, %zu tokens (%zu micro-batches per pass)", data, ntrain,
           tsr_loader_batches(r.train));
    if (val != NULL)
        printf("; validation %s, %zu tokens", val, nval);
    printf("\nrun: %d steps of %d x %d tokens (%d micro-batch%s of %d), lr %.1e -> %.1e, "
           "warmup %d, %d workers\n",
           steps, batch, seq, r.accum, r.accum > 1 ? "es" : "", micro, lr, min_lr, warmup,
           tsr_worker_count());
    if (resume)
        printf("resuming %s at step %d\n", out, start_step);
    fflush(stdout);
    int last = stop_at > 0 && stop_at < steps ? stop_at : steps;
    if (start_step >= last) {
        printf("already at step %d (of %d): nothing to do\n", start_step, steps);
        goto done;
    }

    double t_start = cli_now(), t_train = 0.0, t_train_log = 0.0;
    double loss_log = 0.0;
    int steps_log = 0, steps_run = 0, saved_at = -1;
    for (int step = start_step; step < last; step++) {
        double t0 = cli_now();
        rc = tsr_gpt2_zero_grad(m);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "zero_grad failed at step %d", step + 1);
            goto done;
        }
        /* Each loss is read once its backward is submitted (and the last
         * one after the update), so that the workers never run dry. */
        double loss_sum = 0.0;
        for (int k = 0; k < r.accum; k++) {
            float loss = 0.0f;
            rc = tsr_loader_next(r.train, r.inputs, r.targets);
            if (rc != TSR_OK) {
                status = cli_lib_fail(rc, "cannot read the training data");
                goto done;
            }
            rc = tsr_gpt2_forward(m, r.inputs, r.targets, NULL);
            if (rc != TSR_OK) {
                status = cli_lib_fail(rc, "forward pass failed at step %d", step + 1);
                goto done;
            }
            rc = tsr_gpt2_backward(m, 1.0f / (float)r.accum);
            if (rc != TSR_OK) {
                status = cli_lib_fail(rc, "backward pass failed at step %d", step + 1);
                goto done;
            }
            if (k + 1 < r.accum) {
                if ((rc = tsr_gpt2_loss(m, &loss)) != TSR_OK) {
                    status = cli_lib_fail(rc, "cannot read the loss at step %d", step + 1);
                    goto done;
                }
                loss_sum += loss;
            }
        }
        float lr_now = tsr_lr_schedule(step, warmup, steps, (float)lr, (float)min_lr);
        float norm = 0.0f, last_loss = 0.0f;
        rc = tsr_gpt2_step(m, &adamw, lr_now, &norm);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "optimizer step %d failed%s", step + 1,
                                  isfinite(norm) ? "" : " (diverged: try a lower --lr)");
            goto done;
        }
        if ((rc = tsr_gpt2_loss(m, &last_loss)) != TSR_OK) {
            status = cli_lib_fail(rc, "cannot read the loss at step %d", step + 1);
            goto done;
        }
        double loss = (loss_sum + last_loss) / r.accum;
        if (!isfinite(loss)) {
            status = cli_fail("the loss is %f at step %d: try a lower --lr", loss, step + 1);
            goto done;
        }
        double t1 = cli_now();
        t_train += t1 - t0;
        t_train_log += t1 - t0;
        steps_run++;
        loss_log += loss;
        steps_log++;
        int done_steps = step + 1;

        if (done_steps % log_every == 0 || done_steps == last) {
            /* Evaluations and checkpoints do not count in the throughput. */
            double tps = t_train_log > 0 ? (double)steps_log * batch * seq / t_train_log : 0.0;
            char eta[32];
            cli_duration((double)(last - done_steps) * t_train / steps_run, eta, sizeof eta);
            printf("step %*d/%d | loss %.4f | lr %.1e | norm %.2f | %.0f tok/s | ETA %s\n",
                   r.width, done_steps, steps, loss_log / steps_log, (double)lr_now,
                   (double)norm, tps, eta);
            fflush(stdout);
            loss_log = 0.0;
            steps_log = 0;
            t_train_log = 0.0;
        }
        if (val != NULL &&
            (done_steps == last || (eval_every > 0 && done_steps % eval_every == 0))) {
            if ((status = validate(&r, done_steps)) != 0)
                goto done;
        }
        if (out != NULL &&
            (done_steps == last || (ckpt_every > 0 && done_steps % ckpt_every == 0))) {
            if ((status = save_checkpoint(&r, done_steps)) != 0)
                goto done;
            saved_at = done_steps;
        }
    }
    char took[32];
    cli_duration(cli_now() - t_start, took, sizeof took);
    printf("done: %d steps in %s", steps_run, took);
    if (saved_at >= 0)
        printf(", model in %s/model.safetensors", out);
    printf("\n");

done:
    tsr_loader_close(r.train);
    tsr_loader_close(r.val);
    free(r.inputs);
    free(r.targets);
    tsr_gpt2_free(m);
    rc = tsr_shutdown();
    if (rc != TSR_OK && status == 0)
        status = cli_lib_fail(rc, "runtime shutdown");
    return status;
}
