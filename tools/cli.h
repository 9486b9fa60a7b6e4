/* tools/cli.h — what the GPT-2 command-line programs (tessera-train,
 * tessera-eval, tessera-generate, tessera-tokenize) share: a table-driven
 * flag parser with one-line errors, the runtime started from --threads and
 * --sched, the model shape flags, tokenizer and token-shard checks, and small
 * helpers (clock, durations, files, folders). The run folder of
 * tessera-train (checkpoints) is in ckpt.h.
 *
 * Conventions of every program: an error is one line on stderr starting with
 * the program's name; usage errors exit with 2, every other failure with 1.
 * Library errors are reported with tsr_error_message(). Under simulation
 * (TESSERA_SIMULATE) a program that reads or writes real checkpoints or
 * prints results refuses to run, with exit 2: it must never start a
 * simulated runtime, whose tensors are phantom zeros, on real files.
 */
#ifndef TESSERA_TOOLS_CLI_H
#define TESSERA_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tessera/gpt2.h>
#include <tessera/tessera.h>

/* ---- flags ------------------------------------------------------------- */

typedef enum cli_type {
    CLI_INT,   /* int *, within [min, max] */
    CLI_U64,   /* uint64_t * (seeds) */
    CLI_FLOAT, /* double *, finite, within [min, max] */
    CLI_STR,   /* const char ** (points into argv) */
    CLI_BOOL,  /* int *, set to 1; takes no value */
} cli_type_t;

typedef struct cli_opt {
    const char *name;  /* long name without "--": "steps" */
    char short_name;   /* 'o' for -o, or 0 */
    cli_type_t type;
    void *dst;
    double min, max;   /* accepted range of CLI_INT and CLI_FLOAT values */
    int seen;          /* set by cli_parse when the flag was given */
} cli_opt_t;

/* The program's name used in every message (set by cli_parse). */
extern const char *cli_prog;

/* Parse argv: "--name VALUE", "--name=VALUE", "-o VALUE" and "--" (the end
 * of flags). Other arguments are positional: at most max_pos are stored in
 * pos[] (NULL: none accepted), their count in *npos. --help / -h prints
 * `usage` to stdout. Returns -1 to go on, else the exit status to return
 * from main: 0 after --help, 2 after a usage error (reported). */
int cli_parse(const char *prog, const char *usage, cli_opt_t *opts, int nopts, int argc,
              char **argv, const char **pos, int max_pos, int *npos);

/* Parse `value` into o as if given on the command line (o->seen is set).
 * Returns 0, or 2 after a usage error. */
int cli_set(cli_opt_t *o, const char *value);
/* o's current value as text that cli_set reads back exactly. */
void cli_format(const cli_opt_t *o, char *buf, size_t size);

/* The option named `name` in opts, or NULL. */
cli_opt_t *cli_find(cli_opt_t *opts, int nopts, const char *name);
/* Whether the flag `name` was given. */
int cli_seen(cli_opt_t *opts, int nopts, const char *name);

/* ---- messages ---------------------------------------------------------- */

/* "prog: message" on stderr; return 1 (the exit status). */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: message (see --help)" on stderr; return 2. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog: message: <what the library said>" on stderr; return 1. `rc` is the
 * library's status, used when it left no detailed message. */
int cli_lib_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last message cli_fail, cli_usage_error or cli_lib_fail reported,
 * without the program's name ("" if none). */
const char *cli_last_message(void);

/* s as a JSON string on stdout (quotes and backslashes escaped, control
 * characters dropped), for the programs' JSON lines. */
void cli_json_str(const char *s);

/* ---- simulation --------------------------------------------------------- */

/* The platform file TESSERA_SIMULATE names, read as the runtime reads it
 * (set and not empty), or NULL: the real machine. */
const char *cli_simulated(void);
/* Under simulation, report that this program does not run simulated
 * ("…: simulated runs have no real data …, so CONSEQUENCE: use
 * tessera-sim …") and return 2 (a usage error: nothing was read or
 * written); else return 0. Called before any file is opened. */
int cli_refuse_simulation(const char *consequence);

/* ---- runtime and model ------------------------------------------------- */

/* tsr_init with `threads` CPU workers (0: the runtime's default) and the
 * policy `sched` (NULL: the default). Returns 0, or 1 after reporting; 2
 * under simulation (cli_refuse_simulation). */
int cli_runtime_init(int threads, const char *sched);

/* Number of option entries cli_model_opts writes. */
#define CLI_MODEL_NOPTS 9
/* Write the model shape flags (--vocab, --context, --layers, --heads,
 * --channels, --tile-tokens, --tile-vocab, --tile-hidden, --tile-channels)
 * into opts[0 ..
 * CLI_MODEL_NOPTS), bound to the fields of cfg. */
void cli_model_opts(cli_opt_t *opts, tsr_gpt2_config_t *cfg);

/* The shape comes from a checkpoint (`what` names it): every shape flag the
 * user gave must agree with ckpt; the tile sizes, the recompute switch and
 * the precision of `flags` are kept (they are not the checkpoint's).
 * Writes the result to *out. Returns 0, or 1 after reporting a conflict. */
int cli_config_from_checkpoint(const char *what, const tsr_gpt2_config_t *ckpt,
                               const tsr_gpt2_config_t *flags, cli_opt_t *model_opts,
                               tsr_gpt2_config_t *out);

/* tsr_gpt2_read_config with a clear error. Returns 0 or 1. */
int cli_read_config(const char *path, tsr_gpt2_config_t *cfg);

/* "12 layers, 12 heads, 768 channels, context 1024, vocab 50257". */
void cli_config_describe(const tsr_gpt2_config_t *cfg, char *buf, size_t size);

/* ---- tokenizer and data ------------------------------------------------ */

/* GPT-2's BPE from DIR/encoder.json (or vocab.json) and DIR/vocab.bpe (or
 * merges.txt); a Hugging Face tokenizer.json (Llama 3's) when dir names that
 * file, or a folder holding a tokenizer.json and neither encoder.json nor
 * vocab.json; the byte-level tokenizer when dir is NULL. Returns 0, or 1
 * after reporting. */
int cli_tokenizer_open(const char *dir, tsr_tokenizer_t **out);

/* Open the shard at path, check it has at least min_tokens tokens, that
 * every id is < vocab (the model's vocabulary), and that the manifest of
 * tessera-tokenize beside it, if any, lists it as it is (shards.h). *ntokens and *max_id (may be
 * NULL) receive its size and largest id. `role` names it in messages
 * ("training data"). Returns 0, or 1 after reporting. */
int cli_check_shard(const char *role, const char *path, int vocab, size_t min_tokens,
                    size_t *ntokens, int *max_id);

/* ---- small helpers ----------------------------------------------------- */

/* Seconds on a monotonic clock. */
double cli_now(void);
/* "45s", "3m07s", "2h05m". */
void cli_duration(double seconds, char *buf, size_t size);
/* Read a whole file ("-": stdin) into a malloc'ed buffer (NUL-terminated).
 * Returns 0, or 1 after reporting. */
int cli_read_file(const char *path, char **data, size_t *len);
/* dir + "/" + name into buf. Returns 0, or 1 after reporting (too long). */
int cli_path(char *buf, size_t size, const char *dir, const char *name);
/* mkdir -p. Returns 0, or 1 after reporting. */
int cli_mkdirs(const char *path);
/* 0 when path is a regular file (or a link to one); else 1 after reporting
 * "ROLE 'path' does not exist", "… is a directory, not a file" or "… is not
 * a regular file (a FIFO)". */
int cli_regular_file(const char *role, const char *path);
/* Whether a regular file exists at path. */
int cli_file_exists(const char *path);

/* Whether the process `pid`, which left a temporary "….tmp.<pid>", is gone
 * (or is this one, which has none yet): then the temporary is stale. */
int cli_pid_gone(long pid);
/* fsync a folder, so that the names created or renamed in it are durable.
 * Returns 0, or 1 after reporting. */
int cli_sync_dir(const char *dir);
/* Create `path` holding the n bytes of buf, synced to disk (the publishing
 * code's fault hook counts the write and the sync; see fault.h). On failure
 * the file is removed. Returns 0, or 1 after reporting. */
int cli_write_synced(const char *path, const void *buf, size_t n);
/* FNV-1a 64 of a whole file. Returns 0, or 1 after reporting. */
int cli_fnv64_file(const char *path, uint64_t *sum);

/* A small deterministic random generator (splitmix64 seeded, xoshiro256**). */
typedef struct cli_rng {
    uint64_t s[4];
} cli_rng_t;
void cli_rng_seed(cli_rng_t *r, uint64_t seed);
uint64_t cli_rng_next(cli_rng_t *r);
/* Uniform in [0, 1). */
double cli_rng_uniform(cli_rng_t *r);

#endif
