/* flags.h — the one command-line table of every deltafin command (app/cli/flags.c).
 * Each option is one row: its spellings (llama.cpp's where llama.cpp has the option), the kind
 * of value, the help text, the default, the commands that take it and the deltafin.yaml key it
 * maps to. df_cli_parse turns a command's argv into a df_settings:
 *   defaults -> the --config FILE (any position; keys of options this command takes) -> flags.
 * Conventions every command shares:
 *   - a value is the next argument whatever it looks like (`-c -` is the value "-"), or
 *     `--name=value`; in long names `_` and `-` are the same (`--top_k`);
 *   - numbers are strict (`-n abc`, `-t 4x`, `-c 99999999999` are usage errors naming the flag);
 *   - an unknown option, a missing value or a malformed one prints one line and exits 2;
 *   - `-h` / `--help` prints the command's help (also `deltafin help CMD`) and exits 0.
 * Threading: none (used by the main thread before anything runs). */
#ifndef DF_CLI_FLAGS_H
#define DF_CLI_FLAGS_H
#include "app/config.h"
#include "deltafin.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    DF_CMD_RUN, DF_CMD_CHAT, DF_CMD_SERVE, DF_CMD_BENCH, DF_CMD_BENCH_KERNELS, DF_CMD_PERPLEXITY,
    DF_CMD_INFO, DF_CMD_TOKENIZE, DF_CMD_QUANTIZE, DF_CMD_PACK, DF_CMD_PROFILE, DF_CMD_VERIFY,
    DF_CMD_DOCTOR, DF_CMD_PULL, DF_CMD_IMATRIX, DF_CMD_COUNT
} df_cmd_id;

/* A command as its help shows it. */
typedef struct {
    df_cmd_id id;
    const char *name;      /* as typed after `deltafin`: "run", "bench kernels" */
    const char *usage;     /* the usage line(s), without a trailing newline */
    const char *about;     /* paragraph(s) between usage and options, or NULL */
    const char *after;     /* text after the options, or NULL */
    int max_pos;           /* positional arguments it takes (0: none) */
} df_cmd;

enum { DF_CLI_MAX_POS = 4, DF_CLI_MAX_ROWS = 192, DF_CLI_MAX_BIAS = 256, DF_CLI_MAX_BREAKERS = 32,
       DF_CLI_MAX_LIST = 64 };

/* A list of integers as llama-bench takes them: "32,64", ranges "first-last", "first-last+step",
 * "first-last*mult"; a flag given again adds to the list (bench's -p -n -t -b -pg). */
typedef struct {
    int n;
    int v[DF_CLI_MAX_LIST];
} df_int_list;

typedef struct df_settings {
    /* the model and how it is loaded */
    const char *config, *model;
    int n_threads;
    uint64_t mem_limit, mem_reserve, cache_size;
    const char *io_engine, *hot, *preload;
    int prefetch;                 /* DELTAFIN_PREFETCH_*; -1: not given */
    int cache_type_k, cache_type_v; /* DELTAFIN_KV_* (0: f16) */
    const char *flash_attn;       /* -fa's value (a notice; NULL: not given) */
    bool mlock, verify_on_load;
    deltafin_routing routing;     /* opt-in lossy routing (all 0: off) */
    /* context and generation */
    int n_ctx, n_batch, n_predict;
    bool n_batch_chosen;          /* -b given (flag or config file): the plan keeps it */
    deltafin_sampler_params sp;
    deltafin_logit_bias logit_bias[DF_CLI_MAX_BIAS]; /* -l (then --ignore-eos's, see df_cli_sampler) */
    int n_logit_bias;
    const char *dry_breakers[DF_CLI_MAX_BREAKERS];   /* --dry-sequence-breaker */
    int n_dry_breakers;
    bool dry_breakers_set;        /* given: they replace llama.cpp's default breakers */
    bool ignore_eos;
    /* inputs */
    const char *prompt, *file, *system, *chat_template;
    const char *chat_template_file;
    const char *history_file;     /* chat: NULL = the default file, "" = none */
    bool context_shift;           /* chat: drop the oldest turns when the context is full */
    bool single_turn;             /* chat: one answer, then exit */
    bool escape, no_escape;       /* -e / --no-escape: backslash escapes in -p and DRY breakers */
    char breaker_text[DF_CLI_MAX_BREAKERS][64]; /* the breakers as the sampler gets them */
    const char *breaker_ptr[DF_CLI_MAX_BREAKERS];
    /* constrained output: a GBNF grammar or a JSON schema, as text or from a file */
    const char *grammar, *grammar_file, *json_schema, *json_schema_file;
    /* output and logging */
    bool special, json, verbose, stats, log_prompts, quiet;
    const char *stats_file, *log_file;
    int stats_every, log_level;   /* log_level -1: not given */
    /* serve */
    const char *host, *api_key, *alias;
    int port, n_parallel, n_queue, timeout_s, drain_s, step_tokens;
    uint64_t max_body;
    bool no_cache_prompt;
    /* bench, bench kernels */
    int reps, n_in, n_tok;
    df_int_list n_prompt, n_gen, bench_threads, bench_batch, bench_pg;
    const char *bench_output;     /* -o md | csv | json | jsonl */
    uint64_t buf_size;
    const char *types, *isa;
    /* perplexity, profile */
    int chunks, top;
    const char *kld_base;         /* --kl-divergence-base FILE */
    bool kld, hellaswag;          /* --kl-divergence, --hellaswag */
    int hellaswag_tasks;
    const char *output, *trace;
    bool whole;
    /* tokenize */
    bool bos, pieces, count, timing;
    const char *pre;
    /* quantize, pack, verify */
    const char *type_experts, *type_dense, *output_type, *token_embd_type, *imatrix, *sha256_file;
    bool pure, leave_output, allow_requantize, check, force, no_sha256, list;
    /* imatrix */
    int out_freq, save_freq, from_chunk;
    const char *out_format;
    bool process_output, parse_special;
    /* doctor, pull */
    double seconds, retry_wait;
    const char *profile, *sha256, *token;
    bool no_save, dry_run;
    int retries;
    /* positional arguments */
    const char *pos[DF_CLI_MAX_POS];
    int n_pos;
    /* bookkeeping */
    df_config cfg;                /* the --config file (string settings may point into it) */
    bool given[DF_CLI_MAX_ROWS];  /* rows given on the command line */
    FILE *log_f;                  /* df_cli_log_begin */
} df_settings;

/* Returned by df_cli_parse when the command should run; anything else is its exit status. */
enum { DF_CLI_GO = -1 };

/* Parse argv (argv[0] is the command's name; `bench kernels` passes argv from "kernels").
 * Prints the help (exit 0) or a one-line usage error (exit 2) itself. */
int df_cli_parse(const df_cmd *cmd, int argc, char **argv, df_settings *s);
/* The command's help: usage, about, its options from the table, after. */
void df_cli_help(const df_cmd *cmd, FILE *f);
/* "CMD: message (see deltafin CMD --help)" on stderr; returns 2. */
int df_cli_usage_error(const df_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether the option (any of its spellings, e.g. "--model") was given on the command line. */
bool df_cli_given(const df_settings *s, const df_cmd *cmd, const char *name);
/* The model (the first positional overrides -m / the config file's model.path; both on the
 * command line is a usage error): NULL and exit status in *rc when absent or ambiguous. */
const char *df_cli_model_arg(const df_cmd *cmd, df_settings *s, bool required, int *rc);

/* Model and context parameters from the settings (threads, limits, I/O, cache, hot set). */
deltafin_model_params df_cli_model_params(const df_settings *s);
deltafin_ctx_params df_cli_ctx_params(const df_settings *s);
/* deltafin_ctx_set_routing with the lossy-routing flags; prints the error and returns 2 when refused. */
int df_cli_apply_routing(const df_cmd *cmd, const df_settings *s, deltafin_ctx *c);
/* llama.cpp's string_process_escapes, in place: \n \r \t \' \" \\ and \xNN become the byte;
 * any other backslash stays as it is. */
void df_cli_unescape(char *t);
/* The sampler parameters of the sampling flags for model m: --logit-bias ids checked against
 * its vocabulary, --ignore-eos as -inf biases on its end-of-generation ids, the DRY breakers
 * with its vocabulary. The result points into s. Prints the error and returns 2 when refused. */
int df_cli_sampler(const df_cmd *cmd, df_settings *s, const deltafin_model *m, deltafin_sampler_params *sp);
/* One line on what the lossy routing flags did (nothing when they are off). */
void df_cli_routing_report(const df_settings *s, deltafin_ctx *c, FILE *f);
/* --log-file, --log-level, --log-prompts and -v (log level info): DF_CLI_GO or 1 (the log file
 * cannot be opened). df_cli_log_end restores stderr and closes the file. */
int df_cli_log_begin(const df_cmd *cmd, df_settings *s);
/* The GBNF of --grammar / --grammar-file / --json-schema / --json-schema-file (a schema
 * converted), or *gbnf NULL when none is given; prints the error and returns 1 on a bad one. */
int df_cli_grammar(const df_cmd *cmd, const df_settings *s, char **gbnf);
void df_cli_log_end(df_settings *s);

/* The table, for tests: number of rows and row i's spellings ("-m|--model"), the commands it
 * belongs to (bit per df_cmd_id) and its config key bit (DF_CFG_*, 0 if none). */
int df_cli_n_rows(void);
void df_cli_row(int i, const char **names, unsigned *cmds, unsigned *cfg_bit, const char **help);
/* Row i's numeric value in s as text ("" for other kinds). */
const char *df_cli_row_value(int i, const df_settings *s, char *buf, size_t cap);
#endif
