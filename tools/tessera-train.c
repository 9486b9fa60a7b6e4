/* tools/tessera-train.c — train a GPT-2 or a Llama (--arch llama) on a token
 * shard with Tessera's tiled tasks: from scratch, from an HF checkpoint (--init), or resuming a run of
 * this program (--resume), with AdamW, warmup + cosine learning rate,
 * gradient accumulation over micro-batches, validation and checkpoints.
 *
 *   tessera-train --data TRAIN.bin [--val VAL.bin] [--out DIR] [flags]
 *
 * A checkpoint is a folder DIR/step-N/ holding model.safetensors (an HF
 * GPT-2 file other tools and programs read; for a Llama, the HF checkpoint
 * folder model/) and train.state (AdamW moments,
 * the step counter, the data position and run settings as text, and the
 * model's checksum), made complete before DIR/latest names it (ckpt.h), so
 * that --resume continues exactly where the run stopped — the same batches,
 * the same learning rates, the same losses as a run never interrupted — and
 * refuses a model and a state of different saves.
 *
 * main runs named steps (parse, prepare, resume settings, settings, data,
 * model, loaders, the ranks' agreement, training); each returns 0 or the
 * exit status, and one function frees the run whatever step failed. Under
 * mpirun every rank takes part in the agreement (agree.h) whatever its
 * earlier steps ended with, so that a rank that stopped, or that would
 * train another run, stops every rank within seconds.
 *
 * The loop is written once for both families: the model is a model_t
 * (model.h), the checkpoints hold either's files (ckpt.h).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tessera/mpi.h>

#include "agree.h"
#include "ckpt.h"
#include "cli.h"
#include "model.h"

static const char usage[] =
    "usage: tessera-train --data TRAIN.bin [--val VAL.bin] [--out DIR] [flags]\n"
    "       tessera-train --out DIR --resume [flags]\n"
    "Train a GPT-2 (or a Llama: --arch llama) on a token shard (from tessera-tokenize\n"
    "or llm.c).\n"
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
    "  --tile-channels N    GPT-2: rows per channel tile, whole heads dividing the\n"
    "                       channels (default 0: derived, the channels up to 16384)\n"
    "  --init CKPT          start from this HF GPT-2 safetensors checkpoint (a Llama:\n"
    "                       an HF checkpoint folder, whose config.json sets the shape)\n"
    "  --seed S             initialisation seed (default 1337)\n"
    "  --recompute          keep only each block's input through the forward pass and\n"
    "                       recompute the block's activations in backward: less\n"
    "                       memory for about one more forward pass, the same model\n"
    "  --wave K             micro-batches per wave: each block step runs for K\n"
    "                       micro-batches before the next (docs/gpt2.md, \"Waves\");\n"
    "                       1 one at a time; 0 (default) the model's choice\n"
    "  --precision P        fp32 (default) or bf16: mixed precision, the GEMMs in bf16\n"
    "                       with fp32 sums, fp32 master weights and checkpoints\n"
    "Llama (--arch llama; docs/llama.md): --vocab, --layers, --heads and the tile\n"
    "flags above serve it too (not --context, --channels); the shape defaults to\n"
    "tsr_llama_config_default's (6 layers, hidden 512, 8 heads, 2 K/V heads)\n"
    "  --arch A             gpt2 (default) or llama (a resumed run: its checkpoint's)\n"
    "  --config FILE        the shape of an HF config.json (or the folder holding\n"
    "                       it); the shape flags given override it\n"
    "  --hidden N           hidden_size\n"
    "  --intermediate N     intermediate_size (the SwiGLU width)\n"
    "  --kv-heads N         num_key_value_heads, dividing --heads\n"
    "  --head-dim N         head_dim (default 0: hidden / heads)\n"
    "  --max-positions N    max_position_embeddings: the longest sequence\n"
    "  --rope-theta X       rope_theta\n"
    "  --rms-norm-eps X     rms_norm_eps\n"
    "  --tie-embeddings     the head is the token embedding\n"
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
    "  --out DIR            write checkpoints to DIR: DIR/step-N/model.safetensors\n"
    "                       (a Llama: the HF folder DIR/step-N/model/) and\n"
    "                       DIR/step-N/train.state, named by DIR/latest\n"
    "  --checkpoint-every N also every N steps (default 0: only at the end)\n"
    "  --save-dtype D       a Llama's saved weights: fp32 (default) or bf16 (rounded\n"
    "                       to nearest even: half the bytes; a run resumed from them\n"
    "                       continues from the rounded weights). A resumed run keeps\n"
    "                       its saved value unless given\n"
    "  --shard-bytes N      a Llama's saved weights in shards of at most N data bytes\n"
    "                       with model.safetensors.index.json (default 0: one\n"
    "                       model.safetensors); kept on resume as --save-dtype\n"
    "  --stop-at N          stop after step N with a checkpoint, keeping the\n"
    "                       learning-rate schedule of --steps (resume later)\n"
    "  --resume             continue the run saved in --out DIR from its latest\n"
    "                       checkpoint (data and settings not given again are taken\n"
    "                       from its train.state)\n"
    "  --eval-every N       validation every N steps (default 0: only at the end)\n"
    "  --eval-batches K     validation micro-batches per evaluation (default 10)\n"
    "  --log-every N        progress line every N steps (default 1)\n"
    "runtime:\n"
    "  --threads N          CPU workers (default: one per core; none where GPUs are:\n"
    "                       the GPUs alone)\n"
    "  --sched NAME         scheduling policy (default: eager)\n"
    "data parallel (under mpirun -np N, in a build with MPI; docs/data-parallel.md):\n"
    "  every rank trains a replica on its slice of each batch: --batch and\n"
    "  --micro-batch are per rank, a step trains on N x --batch sequences; rank 0\n"
    "  logs and writes the model; --resume needs the same N. Before training the\n"
    "  ranks agree on the model, these flags, the resume step and each rank's\n"
    "  optimizer state (rank r loads its own shard): any difference, or a rank\n"
    "  that cannot start (a missing shard), stops every rank with exit 1, naming\n"
    "  the first differing rank and flag\n"
    "  --zero 0|1           1: ZeRO-1, each rank keeps and updates its share of\n"
    "                       the optimizer state (saved per rank); default 0\n"
    "Refuses to run under TESSERA_SIMULATE (exit 2), before it reads or writes\n"
    "anything: a simulated run has no real data; tessera-sim simulates training.\n";

#define STATE_MAGIC "tessera-train 1"

/* Run settings saved in train.state and restored on --resume when not given
 * again: everything that decides the batches and the updates. */
static const char *const saved_opts[] = {"steps",        "batch",     "micro-batch",
                                         "seq",          "lr",        "min-lr",
                                         "warmup",       "weight-decay", "grad-clip",
                                         "eval-every",   "eval-batches", "zero"};
#define NSAVED ((int)(sizeof saved_opts / sizeof *saved_opts))

/* The command line: every flag's value (the option table points here). */
typedef struct settings {
    tsr_gpt2_config_t flags; /* the model shape flags */
    tsr_llama_config_t lflags; /* the Llama shape flags */
    const char *data, *val, *init, *out, *sched, *precision, *arch, *config;
    const char *save_dtype; /* a Llama's checkpoints: "fp32" or "bf16" */
    uint64_t shard_bytes;   /* and their shard size (0: one file) */
    int threads, steps, batch, micro, seq, warmup;
    int ckpt_every, stop_at, resume, eval_every, eval_batches, log_every, zero;
    int wave; /* micro-batches per wave; 0: the model's choice */
    double lr, min_lr, wd, clip;
    uint64_t seed;
} settings_t;

enum { NRUN_OPTS = 30, NOPTS = CLI_MODEL_NOPTS + MODEL_LLAMA_NOPTS + NRUN_OPTS };

typedef struct run {
    settings_t s;
    cli_opt_t opts[NOPTS];
    tsr_adamw_config_t adamw;
    model_config_t cfg;     /* the model's shape */
    const char *from;       /* the checkpoint the shape comes from, or NULL */
    ckpt_t resumed;         /* with --resume: the checkpoint continued */
    char init_path[4096];   /* a Llama's --init, resolved (ckpt.h) */
    char extra[16384];      /* with --resume: its text (data paths point here) */
    int start_step, last;   /* steps (start_step, last] are run */
    size_t position, ntrain, nval;
    int max_id;
    model_t m;
    tsr_loader_t *train, *val;
    int accum, eval_batches, width;
    int32_t *inputs, *targets;
    int runtime_up;
    /* data parallel: this rank, the job's size, the combined micro-batch
     * the loaders read (this rank's slice is copied to inputs, targets) and
     * the handle of rank_agree */
    int rank, nranks;
    int32_t *all_inputs, *all_targets;
    /* a model that runs waves (model_wave > 1): a step's accum micro-batches
     * side by side, and their losses (train_step_waves) */
    int32_t *wave_inputs, *wave_targets;
    float *losses;
    tsr_handle_t agree;
    /* the run's id (kept by --resume; written into every state file), and
     * with --resume the state this rank loaded: its path and what its text
     * says it is; missing_shard: that file could not be found */
    uint64_t run_id;
    char shard_path[4096];
    ckpt_shard_id_t shard;
    int missing_shard;
} run_t;

/* ---- step 1: the command line ------------------------------------------- */

/* The model of the flags (and of --config): -1 to go on, else the exit
 * status (1: --config unreadable, 2: a usage error). */
static int resolve_model(run_t *r, model_arch_t arch)
{
    settings_t *s = &r->s;
    model_config_t base;
    if (s->config != NULL && model_read_config(MODEL_LLAMA, s->config, &base) != 0)
        return 1;
    int rc = model_flags_resolve(arch, r->opts, &s->flags, r->opts + CLI_MODEL_NOPTS,
                                 &s->lflags, s->config != NULL ? &base.llama : NULL,
                                 s->flags.recompute, s->flags.precision, &r->cfg);
    return rc != 0 ? rc : -1;
}

/* -1 to go on, else the exit status (after --help or a usage error). */
static int parse_options(run_t *r, int argc, char **argv)
{
    settings_t *s = &r->s;
    tsr_gpt2_config_default(&s->flags);
    tsr_adamw_config_default(&r->adamw);
    s->steps = 100, s->batch = 4, s->warmup = -1, s->eval_batches = 10, s->log_every = 1;
    s->lr = 6e-4, s->min_lr = -1.0, s->wd = r->adamw.weight_decay, s->clip = r->adamw.grad_clip;
    s->seed = 1337;
    s->save_dtype = "fp32";
    tsr_llama_config_default(&s->lflags);
    cli_model_opts(r->opts, &s->flags);
    model_llama_opts(r->opts + CLI_MODEL_NOPTS, &s->lflags);
    const cli_opt_t run_opts[NRUN_OPTS] = {
        {"arch", 0, CLI_STR, &s->arch, 0, 0, 0},
        {"config", 0, CLI_STR, &s->config, 0, 0, 0},
        {"data", 0, CLI_STR, &s->data, 0, 0, 0},
        {"val", 0, CLI_STR, &s->val, 0, 0, 0},
        {"init", 0, CLI_STR, &s->init, 0, 0, 0},
        {"seed", 0, CLI_U64, &s->seed, 0, 0, 0},
        {"recompute", 0, CLI_BOOL, &s->flags.recompute, 0, 0, 0},
        {"wave", 0, CLI_INT, &s->wave, 0, 4096, 0},
        {"precision", 0, CLI_STR, &s->precision, 0, 0, 0},
        {"steps", 0, CLI_INT, &s->steps, 1, 1e9, 0},
        {"batch", 0, CLI_INT, &s->batch, 1, 1e6, 0},
        {"micro-batch", 0, CLI_INT, &s->micro, 1, 1e6, 0},
        {"seq", 0, CLI_INT, &s->seq, 1, 1e6, 0},
        {"lr", 0, CLI_FLOAT, &s->lr, 0.0, 10.0, 0},
        {"min-lr", 0, CLI_FLOAT, &s->min_lr, 0.0, 10.0, 0},
        {"warmup", 0, CLI_INT, &s->warmup, 0, 1e9, 0},
        {"weight-decay", 0, CLI_FLOAT, &s->wd, 0.0, 10.0, 0},
        {"grad-clip", 0, CLI_FLOAT, &s->clip, 0.0, 1e9, 0},
        {"out", 0, CLI_STR, &s->out, 0, 0, 0},
        {"checkpoint-every", 0, CLI_INT, &s->ckpt_every, 0, 1e9, 0},
        {"stop-at", 0, CLI_INT, &s->stop_at, 1, 1e9, 0},
        {"resume", 0, CLI_BOOL, &s->resume, 0, 0, 0},
        {"eval-every", 0, CLI_INT, &s->eval_every, 0, 1e9, 0},
        {"eval-batches", 0, CLI_INT, &s->eval_batches, 1, 1e9, 0},
        {"log-every", 0, CLI_INT, &s->log_every, 1, 1e9, 0},
        {"threads", 0, CLI_INT, &s->threads, 0, 4096, 0},
        {"sched", 0, CLI_STR, &s->sched, 0, 0, 0},
        {"zero", 0, CLI_INT, &s->zero, 0, 1, 0},
        {"save-dtype", 0, CLI_STR, &s->save_dtype, 0, 0, 0},
        {"shard-bytes", 0, CLI_U64, &s->shard_bytes, 0, 0, 0},
    };
    memcpy(r->opts + CLI_MODEL_NOPTS + MODEL_LLAMA_NOPTS, run_opts, sizeof run_opts);
    int npos = 0;
    int rc = cli_parse("tessera-train", usage, r->opts, NOPTS, argc, argv, NULL, 0, &npos);
    if (rc >= 0)
        return rc;
    if (s->data == NULL && !s->resume)
        return cli_usage_error("missing --data TRAIN.bin");
    if (s->precision != NULL && strcmp(s->precision, "fp32") && strcmp(s->precision, "bf16"))
        return cli_usage_error("--precision: fp32 or bf16, not '%s'", s->precision);
    if (strcmp(s->save_dtype, "fp32") && strcmp(s->save_dtype, "bf16"))
        return cli_usage_error("--save-dtype: fp32 or bf16, not '%s'", s->save_dtype);
    if (s->precision != NULL)
        s->flags.precision = strcmp(s->precision, "bf16") ? TSR_GPT2_FP32 : TSR_GPT2_BF16;
    if (s->resume && s->out == NULL)
        return cli_usage_error("--resume needs --out DIR (the run to continue)");
    if (s->resume && s->init != NULL)
        return cli_usage_error("--resume and --init exclude each other");
    model_arch_t arch = MODEL_GPT2;
    if (s->arch != NULL && (rc = model_arch_parse(s->arch, &arch)) != 0)
        return rc;
    if (s->config != NULL && arch != MODEL_LLAMA)
        return cli_usage_error("--config is for a Llama (--arch llama); a GPT-2's shape comes "
                               "from the flags or --init");
    if (s->config != NULL && (s->init != NULL || s->resume))
        return cli_usage_error("--config and --%s exclude each other (the checkpoint sets the "
                               "shape)", s->resume ? "resume" : "init");
    /* before any file is opened or folder made: a simulated run would
     * save checkpoints of zeros over the real ones */
    if ((rc = cli_refuse_simulation("training would log losses of zeros and save checkpoints "
                                    "of zeros over the real ones")) != 0)
        return rc;
    return resolve_model(r, arch);
}

/* ---- step 2: the checkpoint to continue, the shape, the output folder ---- */

static int prepare(run_t *r)
{
    settings_t *s = &r->s;
    if (s->resume && ckpt_latest(s->out, &r->resumed) != 0)
        return 1;
    /* a resumed run is of its checkpoint's family */
    if (s->resume && r->resumed.arch != r->cfg.arch) {
        if (s->arch != NULL)
            return cli_fail("--arch %s, but '%s' is the run of a %s", s->arch, s->out,
                            model_arch_name(r->resumed.arch));
        int rc = resolve_model(r, r->resumed.arch);
        if (rc >= 0)
            return rc;
    }
    /* a Llama's --init: an HF folder, or a run or step folder of this
     * program (its model/) */
    if (s->init != NULL && r->cfg.arch == MODEL_LLAMA) {
        if (ckpt_model_path_arch(MODEL_LLAMA, s->init, r->init_path, sizeof r->init_path) != 0)
            return 1;
        s->init = r->init_path;
    }
    /* the model's shape: from the checkpoint to start from, else the flags */
    r->from = s->resume ? r->resumed.model : s->init;
    if (r->from != NULL) {
        model_config_t ck;
        if (model_read_config(r->cfg.arch, r->from, &ck) != 0 ||
            model_config_from_checkpoint(r->from, &ck, &r->cfg, r->opts,
                                         r->opts + CLI_MODEL_NOPTS, &r->cfg) != 0)
            return 1;
    }
    /* a folder that cannot be written fails now, not after training; what
     * a killed save left there goes */
    if (s->out != NULL &&
        (cli_mkdirs(s->out) != 0 || (r->rank == 0 && ckpt_clean(s->out) != 0)))
        return 1;
    int rc = cli_runtime_init(s->threads, s->sched);
    if (rc != 0)
        return rc;
    r->runtime_up = 1;
    return 0;
}

/* ---- step 3 (--resume): the saved run's settings ------------------------ */

/* Read the text saved with train.state: the step, the data position, and
 * the settings not given again on the command line. */
static int restore_extra(run_t *r, const char *state_path, char *extra)
{
    int have_step = 0, have_pos = 0, saved_ranks = 1;
    char *save = NULL;
    char *line = strtok_r(extra, "\n", &save);
    if (line == NULL || strcmp(line, STATE_MAGIC) != 0)
        return cli_fail("'%s' was not written by tessera-train", state_path);
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char name[64], value[4096];
        int ranks;
        if (sscanf(line, "step %d", &r->start_step) == 1) {
            have_step = r->start_step >= 0;
        } else if (sscanf(line, "ranks %d", &ranks) == 1) {
            saved_ranks = ranks;
        } else if (strncmp(line, "run ", 4) == 0) {
            r->run_id = strtoull(line + 4, NULL, 16);
        } else if (strncmp(line, "save-dtype ", 11) == 0) {
            /* a Llama run's save format, kept unless given again */
            if (!cli_seen(r->opts, NOPTS, "save-dtype"))
                r->s.save_dtype = strcmp(line + 11, "bf16") ? "fp32" : "bf16";
        } else if (strncmp(line, "shard-bytes ", 12) == 0) {
            if (!cli_seen(r->opts, NOPTS, "shard-bytes"))
                r->s.shard_bytes = strtoull(line + 12, NULL, 10);
        } else if (strncmp(line, "position ", 9) == 0) {
            char *end;
            unsigned long long p = strtoull(line + 9, &end, 10);
            have_pos = *end == '\0';
            r->position = (size_t)p;
        } else if (strncmp(line, "data ", 5) == 0 || strncmp(line, "val ", 4) == 0) {
            int is_val = line[0] == 'v';
            const char *saved = line + (is_val ? 4 : 5);
            const char **now = is_val ? &r->s.val : &r->s.data;
            if (*now == NULL)
                *now = saved; /* points into r->extra, which outlives the run */
            else if (strcmp(saved, *now) != 0)
                fprintf(stderr, "%s: warning: the run was saved with --%s '%s', not '%s'\n",
                        cli_prog, is_val ? "val" : "data", saved, *now);
        } else if (sscanf(line, "opt %63s %4095s", name, value) == 2) {
            cli_opt_t *o = cli_find(r->opts, NOPTS, name);
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
    /* the batches of a step and the shards of the optimizer state are cut
     * by the job's size: another size would continue another run */
    if (saved_ranks != r->nranks)
        return cli_fail("'%s' was saved by a job of %d rank%s; resume it with %d (mpirun -np "
                        "%d), not %d", state_path, saved_ranks, saved_ranks > 1 ? "s" : "",
                        saved_ranks, saved_ranks, r->nranks);
    if (r->start_step != r->resumed.step)
        return cli_fail("'%s' continues step %d, but its folder '%s' is the checkpoint of "
                        "step %d: refusing to resume from a mismatched pair",
                        state_path, r->start_step, r->resumed.dir, r->resumed.step);
    return 0;
}

static int resume_settings(run_t *r)
{
    /* A model is needed to read the state, but the batch shapes are among
     * the saved settings: read them through a throw-away model of one
     * sequence (activations are allocated only when used). */
    const ckpt_t *c = &r->resumed;
    model_t probe;
    model_config_t pc = r->cfg;
    pc.gpt2.tile_tokens = pc.llama.tile_tokens = 0;
    int rc = model_create(&probe, &pc, 1, model_config_context(&r->cfg));
    if (rc != TSR_OK) {
        model_free(&probe);
        return cli_lib_fail(rc, "cannot create the model of '%s'", c->model);
    }
    rc = model_load_state(&probe, c->state, r->extra, sizeof r->extra);
    model_free(&probe);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot read '%s'", c->state);
    r->extra[sizeof r->extra - 1] = '\0';
    /* the pair first: the text is cut into lines by restore_extra */
    if (ckpt_verify(c, r->extra) != 0)
        return 1;
    return restore_extra(r, c->state, r->extra);
}

/* ---- step 4: derived settings and their checks -------------------------- */

static int check_settings(run_t *r)
{
    settings_t *s = &r->s;
    if (s->data == NULL)
        return cli_usage_error("missing --data TRAIN.bin");
    if (r->cfg.arch != MODEL_LLAMA && (strcmp(s->save_dtype, "fp32") || s->shard_bytes != 0))
        return cli_usage_error("--%s is for a Llama's checkpoint folder (--arch llama): a "
                               "GPT-2 is saved as one fp32 file",
                               s->shard_bytes != 0 ? "shard-bytes" : "save-dtype");
    if (s->micro == 0)
        s->micro = s->batch;
    int context = model_config_context(&r->cfg);
    if (s->seq == 0)
        s->seq = context < 1024 ? context : 1024;
    if (s->batch % s->micro != 0)
        return cli_usage_error("--batch %d is not a multiple of --micro-batch %d", s->batch,
                               s->micro);
    if (s->seq > context)
        return cli_usage_error("--seq %d exceeds the model's context of %d", s->seq, context);
    if (s->warmup < 0)
        s->warmup = s->steps / 10;
    if (s->min_lr < 0.0)
        s->min_lr = s->lr / 10.0;
    if (s->min_lr > s->lr)
        return cli_usage_error("--min-lr %g exceeds --lr %g", s->min_lr, s->lr);
    r->adamw.weight_decay = (float)s->wd;
    r->adamw.grad_clip = (float)s->clip;
    r->accum = s->batch / s->micro;
    r->width = snprintf(NULL, 0, "%d", s->steps);
    r->last = s->stop_at > 0 && s->stop_at < s->steps ? s->stop_at : s->steps;
    return 0;
}

/* ---- step 5: the data (every id must fit the model's vocabulary) -------- */

static int check_data(run_t *r)
{
    const settings_t *s = &r->s;
    size_t need = (size_t)s->micro * (size_t)r->nranks * (size_t)s->seq + 1;
    int vocab = model_config_vocab(&r->cfg);
    if (cli_check_shard("training data", s->data, vocab, need, &r->ntrain, &r->max_id) != 0 ||
        (s->val != NULL &&
         cli_check_shard("validation data", s->val, vocab, need, &r->nval, NULL) != 0))
        return 1;
    if (r->max_id <= 256 && vocab > 257 && r->from == NULL &&
        !cli_seen(r->opts, NOPTS, "vocab"))
        fprintf(stderr, "%s: note: '%s' looks byte-level (ids up to %d): --vocab 257 makes a "
                        "much smaller model than the default %d\n",
                cli_prog, s->data, r->max_id, vocab);
    return 0;
}

/* ---- step 6: the model: resumed, from --init, or initialised ------------ */

static int resume_model(run_t *r)
{
    const ckpt_t *c = &r->resumed;
    int rc = model_load(&r->m, c->model);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot load '%s'", c->model);
    /* with ZeRO each rank its own share; else every rank the same state.
     * A missing file is told apart: the other ranks then report a missing
     * shard (agree.h) rather than a failure they cannot explain. */
    char *state = r->shard_path;
    if (ckpt_shard_path(c, r->s.zero ? r->rank : 0, state, sizeof r->shard_path) != 0)
        return 1;
    if (!cli_file_exists(state)) {
        r->missing_shard = 1;
        return cli_fail("rank %d's optimizer state '%s' is missing (missing shard)", r->rank,
                        state);
    }
    /* its text as large as train.state's may be (the run's settings) */
    char *text = malloc(sizeof r->extra);
    if (text == NULL)
        return cli_fail("out of memory");
    rc = model_load_state(&r->m, state, text, sizeof r->extra);
    if (rc == TSR_OK)
        ckpt_shard_id(text, &r->shard); /* whose it is: checked in the agreement */
    free(text);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot load '%s'", state);
    if (model_steps_done(&r->m) != r->start_step)
        return cli_fail("'%s' says step %d but holds the optimizer of step %d (corrupt?)",
                        state, r->start_step, model_steps_done(&r->m));
    return 0;
}

static int build_model(run_t *r)
{
    const settings_t *s = &r->s;
    r->cfg.gpt2.data_parallel = r->cfg.llama.data_parallel = r->nranks > 1 || s->zero;
    r->cfg.gpt2.zero = r->cfg.llama.zero = s->zero;
    r->cfg.gpt2.wave = r->cfg.llama.wave = s->wave;
    int rc = model_create(&r->m, &r->cfg, s->micro, s->seq);
    r->m.save_dtype = strcmp(s->save_dtype, "bf16") ? TSR_GPT2_FP32 : TSR_GPT2_BF16;
    r->m.shard_bytes = (size_t)s->shard_bytes;
    if (rc != TSR_OK) {
        char desc[256];
        model_config_describe(&r->cfg, desc, sizeof desc);
        return cli_lib_fail(rc, "cannot create a model of %s for %d x %d tokens", desc,
                            s->micro, s->seq);
    }
    if (s->resume)
        return resume_model(r);
    if (s->init != NULL) {
        rc = model_load(&r->m, s->init);
        return rc != TSR_OK ? cli_lib_fail(rc, "cannot load '%s'", s->init) : 0;
    }
    rc = model_init_weights(&r->m, s->seed);
    return rc != TSR_OK ? cli_lib_fail(rc, "cannot initialise the weights") : 0;
}

/* ---- step 7: the batch loaders ------------------------------------------ */

static int open_loaders(run_t *r)
{
    const settings_t *s = &r->s;
    /* the loaders read the combined micro-batch of every rank */
    int all = s->micro * r->nranks;
    int rc = tsr_loader_open(&r->train, s->data, all, s->seq);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot read training data '%s'", s->data);
    if (s->resume && (rc = tsr_loader_seek(r->train, r->position)) != TSR_OK)
        return cli_lib_fail(rc, "cannot go back to position %zu of '%s'", r->position, s->data);
    if (s->val != NULL) {
        rc = tsr_loader_open(&r->val, s->val, all, s->seq);
        if (rc != TSR_OK)
            return cli_lib_fail(rc, "cannot read validation data '%s'", s->val);
        size_t nb = tsr_loader_batches(r->val);
        r->eval_batches = (size_t)s->eval_batches < nb ? s->eval_batches : (int)nb;
    }
    size_t ntok = (size_t)s->micro * (size_t)s->seq;
    r->inputs = malloc(ntok * sizeof *r->inputs);
    r->targets = malloc(ntok * sizeof *r->targets);
    r->all_inputs = malloc(ntok * (size_t)r->nranks * sizeof *r->all_inputs);
    r->all_targets = malloc(ntok * (size_t)r->nranks * sizeof *r->all_targets);
    if (r->inputs == NULL || r->targets == NULL || r->all_inputs == NULL ||
        r->all_targets == NULL)
        return cli_fail("out of memory");
    return 0;
}

/* The next combined micro-batch of l; this rank's slice of it (sequences
 * rank x micro .. rank x micro + micro - 1, contiguous) into inputs and
 * targets. With one rank, the micro-batch itself. */
static int next_batch(run_t *r, tsr_loader_t *l)
{
    int rc = tsr_loader_next(l, r->all_inputs, r->all_targets);
    if (rc != TSR_OK)
        return rc;
    size_t ntok = (size_t)r->s.micro * (size_t)r->s.seq, off = ntok * (size_t)r->rank;
    memcpy(r->inputs, r->all_inputs + off, ntok * sizeof *r->inputs);
    memcpy(r->targets, r->all_targets + off, ntok * sizeof *r->targets);
    return TSR_OK;
}

/* The largest of every rank's `value` (each rank's own without MPI): the
 * ranks agree on a status, and wait for each other (a barrier). */
static int rank_agree(run_t *r, int value)
{
    if (r->nranks == 1)
        return value;
    float *x;
    int rc = r->agree ? TSR_OK : tsr_handle_alloc(&r->agree, sizeof(float));
    if (rc == TSR_OK && (rc = tsr_handle_acquire(r->agree, TSR_W, (void **)&x)) == TSR_OK) {
        *x = (float)value;
        rc = tsr_handle_release(r->agree);
    }
    if (rc == TSR_OK)
        rc = tsr_mpi_allreduce(r->agree, TSR_MPI_FLOAT, TSR_MPI_MAX);
    if (rc == TSR_OK && (rc = tsr_handle_acquire(r->agree, TSR_R, (void **)&x)) == TSR_OK) {
        value = (int)*x;
        rc = tsr_handle_release(r->agree);
    }
    return rc != TSR_OK ? cli_lib_fail(rc, "the ranks cannot agree (a rank failed?)") : value;
}

static void print_header(const run_t *r)
{
    const settings_t *s = &r->s;
    model_config_t resolved;
    model_config_of(&r->m, &resolved);
    char desc[256];
    model_config_describe(&resolved, desc, sizeof desc);
    int tt = resolved.gpt2.tile_tokens, tv = resolved.gpt2.tile_vocab,
        th = resolved.gpt2.tile_hidden, rec = resolved.gpt2.recompute,
        prec = resolved.gpt2.precision;
    if (resolved.arch == MODEL_LLAMA) {
        const tsr_llama_config_t *l = &resolved.llama;
        tt = l->tile_tokens, tv = l->tile_vocab, th = l->tile_hidden;
        rec = l->recompute, prec = l->precision;
    }
    char waves[48] = "", chan[48] = "";
    if (resolved.arch != MODEL_LLAMA && resolved.gpt2.tile_channels < resolved.gpt2.channels)
        snprintf(chan, sizeof chan, ", %d channel rows", resolved.gpt2.tile_channels);
    if (model_wave(&r->m) > 1)
        snprintf(waves, sizeof waves, ", waves of %d micro-batches", model_wave(&r->m));
    printf("model: %s, %.2fM parameters (tiles: %d tokens, %d vocab rows, %d hidden rows%s)"
           "%s%s%s\n",
           desc, (double)model_num_params(&r->m) / 1e6, tt, tv, th, chan,
           rec ? ", activations recomputed in backward" : "",
           prec == TSR_GPT2_BF16 ? ", bf16 mixed precision" : "", waves);
    printf("data: %s, %zu tokens (%zu micro-batches per pass)", s->data, r->ntrain,
           tsr_loader_batches(r->train));
    if (s->val != NULL)
        printf("; validation %s, %zu tokens", s->val, r->nval);
    printf("\nrun: %d steps of %d x %d tokens (%d micro-batch%s of %d), lr %.1e -> %.1e, "
           "warmup %d, %d workers\n",
           s->steps, s->batch, s->seq, r->accum, r->accum > 1 ? "es" : "", s->micro, s->lr,
           s->min_lr, s->warmup, tsr_worker_count());
    if (r->nranks > 1)
        printf("data parallel: %d ranks of %d sequences, %d per step%s\n", r->nranks, s->batch,
               s->batch * r->nranks, s->zero ? ", optimizer state sharded (ZeRO-1)" : "");
    if (s->resume)
        printf("resuming %s at step %d (%s)\n", s->out, r->start_step, r->resumed.dir);
    fflush(stdout);
}

/* ---- step 8: the ranks agree on the run (agree.h) ----------------------- */

/* A new run's id: it only has to differ from other runs' */
static uint64_t fresh_run_id(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    cli_rng_t g;
    cli_rng_seed(&g, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                         ((uint64_t)getpid() << 40));
    uint64_t id = cli_rng_next(&g);
    return id != 0 ? id : 1;
}

/* src into note[size], cut if longer (a note is for a message) */
static void set_note(char *note, size_t size, const char *src)
{
    size_t n = strlen(src);
    n = n < size - 1 ? n : size - 1;
    memcpy(note, src, n);
    note[n] = '\0';
}

/* This rank's record: ready, with what must match, or why it stopped. */
static void fill_record(const run_t *r, int status, agree_rec_t *rec)
{
    agree_init(rec);
    rec->proposal = fresh_run_id();
    if (status != 0) {
        rec->status = r->missing_shard ? AGREE_MISSING_SHARD : AGREE_FAILED;
        set_note(rec->note, sizeof rec->note, cli_last_message());
        return;
    }
    const settings_t *s = &r->s;
    model_config_t mc;
    model_config_of(&r->m, &mc);
    if (mc.arch == MODEL_LLAMA) {
        /* a Llama's width and length in GPT-2's fields, and its own */
        const tsr_llama_config_t *c = &mc.llama;
        rec->vocab = c->vocab_size, rec->context = c->max_positions, rec->layers = c->layers;
        rec->heads = c->heads, rec->channels = c->hidden, rec->tile_tokens = c->tile_tokens;
        rec->kv_heads = c->kv_heads, rec->intermediate = c->intermediate;
        rec->head_dim = c->head_dim ? c->head_dim : (c->heads ? c->hidden / c->heads : 0);
        rec->tile_vocab = c->tile_vocab, rec->tile_hidden = c->tile_hidden;
        rec->tile_channels = c->hidden;
        rec->precision = c->precision, rec->recompute = c->recompute;
    } else {
        const tsr_gpt2_config_t *c = &mc.gpt2;
        rec->vocab = c->vocab_size, rec->context = c->context, rec->layers = c->layers;
        rec->heads = c->heads, rec->channels = c->channels, rec->tile_tokens = c->tile_tokens;
        rec->tile_vocab = c->tile_vocab, rec->tile_hidden = c->tile_hidden;
        rec->tile_channels = c->tile_channels;
        rec->precision = c->precision, rec->recompute = c->recompute;
    }
    rec->zero = s->zero, rec->steps = s->steps, rec->last = r->last, rec->batch = s->batch;
    rec->micro = s->micro, rec->seq = s->seq, rec->warmup = s->warmup;
    rec->eval_every = s->eval_every, rec->eval_batches = r->eval_batches;
    rec->ckpt_every = s->ckpt_every;
    rec->lr = s->lr, rec->min_lr = s->min_lr, rec->wd = s->wd, rec->clip = s->clip;
    rec->seed = s->seed, rec->ntrain = r->ntrain, rec->nval = s->val != NULL ? r->nval : 0;
    rec->resume = s->resume, rec->step = r->start_step, rec->position = r->position;
    if (s->resume) {
        rec->run = r->run_id;
        rec->shard_rank = r->shard.rank, rec->shard_step = r->shard.step;
        rec->shard_run = r->shard.run;
        set_note(rec->note, sizeof rec->note, r->shard_path);
    }
}

/* Every rank takes part, whatever `status` its earlier steps ended with:
 * one that stopped tells the others why, so that none waits for it. The
 * status to go on with: this rank's own failure, else the verdict. */
static int agree_on_run(run_t *r, int status)
{
    if (r->nranks == 1 && status != 0)
        return status;
    if (!r->runtime_up) {
        /* stopped before its runtime started: one worker, to take part */
        if (cli_runtime_init(1, NULL) != 0)
            return status != 0 ? status : 1;
        r->runtime_up = 1;
    }
    agree_rec_t rec;
    fill_record(r, status, &rec);
    uint64_t run_id = 0;
    int verdict = agree_run(&rec, &run_id);
    if (status != 0)
        return status;
    if (verdict == 0)
        r->run_id = run_id;
    return verdict;
}

/* ---- step 9: training --------------------------------------------------- */

/* Mean validation loss over the first eval_batches micro-batches. */
static int validate(run_t *r, int step)
{
    int rc = tsr_loader_seek(r->val, 0);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot rewind the validation data");
    double sum = 0.0;
    for (int i = 0; i < r->eval_batches; i++) {
        float loss = 0.0f;
        rc = next_batch(r, r->val);
        if (rc != TSR_OK)
            return cli_lib_fail(rc, "cannot read the validation data");
        rc = model_forward(&r->m, r->inputs, r->targets, &loss);
        if (rc != TSR_OK)
            return cli_lib_fail(rc, "validation forward pass failed");
        sum += loss;
    }
    double mean = sum / r->eval_batches;
    printf("step %*d/%d | val loss %.4f (%d x %d tokens)\n", r->width, step, r->s.steps, mean,
           r->eval_batches, r->s.micro * r->s.seq);
    fflush(stdout);
    return 0;
}

/* The checkpoint of `step`: the run's settings and data position as the
 * state's text, both files made complete together (ckpt.h). */
static int save_checkpoint(run_t *r, int step, ckpt_t *saved)
{
    size_t cap = 8192, len = 0;
    char *extra = malloc(cap);
    if (extra == NULL)
        return cli_fail("out of memory");
    len += (size_t)snprintf(extra + len, cap - len,
                            "%s\nstep %d\nposition %zu\nranks %d\ndata %s\n", STATE_MAGIC, step,
                            tsr_loader_position(r->train), r->nranks, r->s.data);
    if (r->s.val != NULL && len < cap)
        len += (size_t)snprintf(extra + len, cap - len, "val %s\n", r->s.val);
    for (int i = 0; i < NSAVED && len < cap; i++) {
        char v[128];
        cli_format(cli_find(r->opts, NOPTS, saved_opts[i]), v, sizeof v);
        len += (size_t)snprintf(extra + len, cap - len, "opt %s %s\n", saved_opts[i], v);
    }
    if (r->cfg.arch == MODEL_LLAMA && len < cap)
        len += (size_t)snprintf(extra + len, cap - len, "save-dtype %s\nshard-bytes %llu\n",
                                r->s.save_dtype, (unsigned long long)r->s.shard_bytes);
    /* data parallel: with ZeRO every rank writes its share first; once all
     * have, rank 0 writes the model and its state and moves the shares into
     * the checkpoint (ckpt.h); then the ranks agree on the outcome */
    int zero = r->s.zero && r->nranks > 1, status = len < cap ? 0 :
        cli_fail("the run's settings exceed %zu bytes", cap);
    if (status == 0 && zero && r->rank > 0)
        status = ckpt_save_shard(r->s.out, step, r->rank, r->run_id, &r->m);
    status = rank_agree(r, status);
    if (status == 0 && r->rank == 0)
        status = ckpt_save_sharded(r->s.out, step, zero ? r->nranks : 1, r->run_id, &r->m, extra,
                                   saved);
    status = rank_agree(r, status);
    free(extra);
    if (status == 0) {
        printf("step %*d/%d | checkpoint saved to %s\n", r->width, step, r->s.steps,
               saved->dir);
        fflush(stdout);
    }
    return status;
}

/* The optimizer step of train_step, and its checks: *loss the mean of
 * `loss_sum` over accum micro-batches plus the last one's (read after the
 * update was submitted, unless last_read). */
static int step_and_loss(run_t *r, int step, float lr_now, double loss_sum, int last_read,
                         double *loss, float *norm)
{
    float last_loss = 0.0f;
    *norm = 0.0f;
    int rc = model_step(&r->m, &r->adamw, lr_now, norm);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "optimizer step %d failed%s", step + 1,
                            isfinite(*norm) ? "" : " (diverged: try a lower --lr)");
    if (!last_read && (rc = model_loss(&r->m, &last_loss)) != TSR_OK)
        return cli_lib_fail(rc, "cannot read the loss at step %d", step + 1);
    *loss = (loss_sum + last_loss) / r->accum;
    if (!isfinite(*loss))
        return cli_fail("the loss is %f at step %d: try a lower --lr", *loss, step + 1);
    return 0;
}

/* train_step for a model that runs waves (docs/gpt2.md, "Waves"): the
 * step's micro-batches go in one call, which reads each wave's losses. */
static int train_step_waves(run_t *r, int step, float lr_now, double *loss, float *norm)
{
    size_t ntok = (size_t)r->s.micro * (size_t)r->s.seq;
    if (!r->wave_inputs) {
        r->wave_inputs = malloc(ntok * (size_t)r->accum * sizeof *r->wave_inputs);
        r->wave_targets = malloc(ntok * (size_t)r->accum * sizeof *r->wave_targets);
        r->losses = malloc((size_t)r->accum * sizeof *r->losses);
        if (!r->wave_inputs || !r->wave_targets || !r->losses)
            return cli_fail("out of memory");
    }
    int rc = model_zero_grad(&r->m);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "zero_grad failed at step %d", step + 1);
    for (int k = 0; k < r->accum; k++) {
        if ((rc = next_batch(r, r->train)) != TSR_OK)
            return cli_lib_fail(rc, "cannot read the training data");
        memcpy(r->wave_inputs + (size_t)k * ntok, r->inputs, ntok * sizeof *r->inputs);
        memcpy(r->wave_targets + (size_t)k * ntok, r->targets, ntok * sizeof *r->targets);
    }
    rc = model_forward_backward(&r->m, r->accum, r->wave_inputs, r->wave_targets,
                                1.0f / (float)r->accum, r->losses);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "forward and backward passes failed at step %d", step + 1);
    double loss_sum = 0.0;
    for (int k = 0; k < r->accum; k++)
        loss_sum += r->losses[k];
    return step_and_loss(r, step, lr_now, loss_sum, 1, loss, norm);
}

/* One optimizer step (zero-based `step`): accum micro-batches forward and
 * backward, then AdamW. *loss is the mean loss, *norm the gradient norm. */
static int train_step(run_t *r, int step, float lr_now, double *loss, float *norm)
{
    if (model_wave(&r->m) > 1)
        return train_step_waves(r, step, lr_now, loss, norm);
    int rc = model_zero_grad(&r->m);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "zero_grad failed at step %d", step + 1);
    /* Each loss is read once its backward is submitted (and the last one
     * after the update), so that the workers never run dry. */
    double loss_sum = 0.0;
    for (int k = 0; k < r->accum; k++) {
        float l = 0.0f;
        if ((rc = next_batch(r, r->train)) != TSR_OK)
            return cli_lib_fail(rc, "cannot read the training data");
        if ((rc = model_forward(&r->m, r->inputs, r->targets, NULL)) != TSR_OK)
            return cli_lib_fail(rc, "forward pass failed at step %d", step + 1);
        if ((rc = model_backward(&r->m, 1.0f / (float)r->accum)) != TSR_OK)
            return cli_lib_fail(rc, "backward pass failed at step %d", step + 1);
        if (k + 1 < r->accum) {
            if ((rc = model_loss(&r->m, &l)) != TSR_OK)
                return cli_lib_fail(rc, "cannot read the loss at step %d", step + 1);
            loss_sum += l;
        }
    }
    return step_and_loss(r, step, lr_now, loss_sum, 0, loss, norm);
}

static int train(run_t *r)
{
    const settings_t *s = &r->s;
    print_header(r);
    if (r->start_step >= r->last) {
        printf("already at step %d (of %d): nothing to do\n", r->start_step, s->steps);
        return 0;
    }
    double t_start = cli_now(), t_train = 0.0, t_train_log = 0.0, loss_log = 0.0;
    int steps_log = 0, steps_run = 0, status = 0;
    ckpt_t saved = {.step = -1};
    for (int step = r->start_step; status == 0 && step < r->last; step++) {
        double t0 = cli_now(), loss = 0.0;
        float norm = 0.0f;
        float lr_now = tsr_lr_schedule(step, s->warmup, s->steps, (float)s->lr,
                                       (float)s->min_lr);
        if ((status = train_step(r, step, lr_now, &loss, &norm)) != 0)
            break;
        double t1 = cli_now();
        t_train += t1 - t0;
        t_train_log += t1 - t0;
        steps_run++;
        loss_log += loss;
        steps_log++;
        int done = step + 1;
        if (done % s->log_every == 0 || done == r->last) {
            /* Evaluations and checkpoints do not count in the throughput. */
            double tps = t_train_log > 0 ? (double)steps_log * s->batch * r->nranks * s->seq /
                                               t_train_log
                                         : 0.0;
            char eta[32];
            cli_duration((double)(r->last - done) * t_train / steps_run, eta, sizeof eta);
            printf("step %*d/%d | loss %.4f | lr %.1e | norm %.2f | %.0f tok/s | ETA %s\n",
                   r->width, done, s->steps, loss_log / steps_log, (double)lr_now,
                   (double)norm, tps, eta);
            fflush(stdout);
            loss_log = 0.0, steps_log = 0, t_train_log = 0.0;
        }
        if (s->val != NULL &&
            (done == r->last || (s->eval_every > 0 && done % s->eval_every == 0)))
            status = validate(r, done);
        if (status == 0 && s->out != NULL &&
            (done == r->last || (s->ckpt_every > 0 && done % s->ckpt_every == 0)))
            status = save_checkpoint(r, done, &saved);
    }
    if (status != 0)
        return status;
    char took[32];
    cli_duration(cli_now() - t_start, took, sizeof took);
    printf("done: %d steps in %s", steps_run, took);
    if (saved.step >= 0)
        printf(", model in %s", saved.model);
    printf("\n");
    return 0;
}

/* ---- the run ------------------------------------------------------------ */

/* Frees whatever the steps made, whichever failed; the exit status. */
static int run_free(run_t *r, int status)
{
    tsr_loader_close(r->train);
    tsr_loader_close(r->val);
    free(r->inputs);
    free(r->targets);
    free(r->wave_inputs);
    free(r->wave_targets);
    free(r->losses);
    free(r->all_inputs);
    free(r->all_targets);
    model_free(&r->m);
    if (r->agree && r->runtime_up)
        tsr_handle_unregister(r->agree);
    if (r->runtime_up) {
        int rc = tsr_shutdown();
        if (rc != TSR_OK && status == 0)
            status = cli_lib_fail(rc, "runtime shutdown");
    }
    return status;
}

/* Whether an MPI launcher started this process (Open MPI's mpirun sets
 * OMPI_COMM_WORLD_SIZE; PMI-based launchers, MPICH's and Slurm's, PMI_SIZE
 * or PMIX_RANK). */
static int launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL ||
           getenv("PMIX_RANK") != NULL;
}

int main(int argc, char **argv)
{
    static run_t r; /* large (the state's text); zeroed */
    /* under mpirun: one process per rank, each a replica; only rank 0
     * prints its progress (errors come from every rank). Started without
     * a launcher, the program does not start MPI at all and runs as it
     * does in a build without it. */
    int mpi = tsr_mpi_available() && launched_by_mpi();
    if (mpi && tsr_mpi_init(&argc, &argv) != TSR_OK)
        return cli_lib_fail(TSR_ENODEV, "cannot start MPI");
    r.rank = tsr_mpi_rank();
    r.nranks = tsr_mpi_size();
    if (r.rank > 0 && freopen("/dev/null", "w", stdout) == NULL)
        return cli_fail("cannot silence rank %d's output", r.rank);
    int status = parse_options(&r, argc, argv);
    /* --help, and a refusal under simulation (whose runtime has no peers:
     * every rank has the launcher's environment and refuses alike), end
     * here; another usage error still takes part in the agreement */
    if (status == 0 || (status > 0 && (r.nranks == 1 || cli_simulated() != NULL))) {
        if (mpi)
            tsr_mpi_finalize();
        return status;
    }
    if (status < 0)
        status = prepare(&r);
    if (status == 0 && r.s.resume)
        status = resume_settings(&r);
    if (status == 0)
        status = check_settings(&r);
    if (status == 0)
        status = check_data(&r);
    if (status == 0)
        status = build_model(&r);
    if (status == 0)
        status = open_loaders(&r);
    status = agree_on_run(&r, status);
    if (status == 0)
        status = train(&r);
    status = run_free(&r, status);
    if (mpi)
        tsr_mpi_finalize();
    return status;
}
