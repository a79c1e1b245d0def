/* flags.c — see flags.h. The table below is every option of every command, once; a row names
 * the commands that take it, so two rows may share a spelling only for disjoint commands
 * (`-p`: run's prompt, bench's prompt length). tests/test_flags.c checks that, that every
 * config key is reachable, and that the defaults the help states are the defaults applied. */
#include "app/cli/flags.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pcre2.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    K_SWITCH,     /* bool = true */
    K_INT,        /* int, strict */
    K_FLOAT,      /* float, strict */
    K_DOUBLE,     /* double, strict */
    K_SIZE,       /* uint64_t bytes: 16G, 512M, 4096 */
    K_SEED,       /* uint64_t; -1 = random (UINT64_MAX), as in llama.cpp */
    K_STR,        /* const char * */
    K_IO,         /* const char *: a read engine name */
    K_PREFETCH,   /* int DELTAFIN_PREFETCH_*: auto | on | off */
    K_KVTYPE,     /* int DELTAFIN_KV_*: f16 | q8_0 | q4_0 ... */
    K_LOGLEVEL,   /* int: error | warn | info | debug | 0..3 */
    K_NOTICE,     /* llama.cpp option without a value that means nothing here: a notice */
    K_NOTICE_VAL, /* the same with a value, checked as `meta` says: choices "a|b" (N: an integer),
                   * N (an integer >= 0), PATTERN=BUFTYPE,... (-ot's regular expressions) */
    K_SAMPLERS,   /* --samplers names;names / --sampler-seq letters (into sp.samplers) */
    K_LOGIT_BIAS, /* TOKEN(+|-)BIAS, repeatable (appended to logit_bias[]) */
    K_BREAKER,    /* --dry-sequence-breaker: repeatable; the first clears the defaults, none: no breakers */
    K_CONFIG,     /* --config FILE: read before every other flag */
    K_HELP,
    K_INTS,       /* df_int_list: llama-bench's lists and ranges; given again, it adds */
} kind;

typedef struct {
    const char *names;   /* spellings, '|'-separated: "-m|--model" */
    const char *meta;    /* value name in the help ("FILE"); NULL for switches */
    kind k;
    size_t off;          /* field of df_settings */
    const char *def;     /* default as typed on the command line (NULL: zero / library default) */
    const char *help;    /* states the default where there is one */
    unsigned cmds;       /* bit per df_cmd_id */
    unsigned cfg;        /* DF_CFG_* key it maps to (0: none) */
    size_t cfg_off;      /* field of df_config */
} row;

#define B(x) (1u << DF_CMD_##x)
enum {
    /* commands that load a model to run it */
    LOADS = B(RUN) | B(CHAT) | B(SERVE) | B(BENCH) | B(PERPLEXITY) | B(PROFILE) | B(IMATRIX),
    GEN = B(RUN) | B(CHAT) | B(SERVE),
    SAMPLE = GEN, /* sampling flags (serve: the defaults of requests that do not set them) */
    ALL = (1u << DF_CMD_COUNT) - 1,
};
#define F(f) offsetof(df_settings, f)
#define C(bit, f) DF_CFG_##bit, offsetof(df_config, f)
#define NOCFG 0, 0

static const row g_rows[] = {
    /* ---- the model and where settings come from ---- */
    {"--config", "FILE", K_CONFIG, F(config), NULL,
     "deltafin.yaml settings (docs/operations.md) for the options below; flags override it",
     ALL & ~(B(PULL) | B(BENCH_KERNELS) | B(PACK)), NOCFG},
    {"-m|--model", "FILE", K_STR, F(model), NULL, "GGUF model",
     LOADS | B(INFO) | B(TOKENIZE) | B(DOCTOR) | B(VERIFY), C(MODEL_PATH, model_path)},
    /* ---- inputs ---- */
    {"-p|--prompt", "TEXT", K_STR, F(prompt), NULL, "prompt", B(RUN) | B(TOKENIZE), NOCFG},
    {"-f|--file", "FILE", K_STR, F(file), NULL, "read the prompt from a file (bytes as they are)",
     B(RUN) | B(TOKENIZE), NOCFG},
    {"-f|--file", "FILE", K_STR, F(file), NULL, "text to score (--hellaswag: the task file)", B(PERPLEXITY),
     NOCFG},
    {"-f|--file", "FILE", K_STR, F(file), NULL, "prompts: one per non-empty line", B(PROFILE), NOCFG},
    {"-f|--file", "FILE", K_STR, F(file), NULL, "text to collect the activations over (calibration data)", B(IMATRIX),
     NOCFG},
    {"--whole", NULL, K_SWITCH, F(whole), NULL, "treat the whole file as one prompt", B(PROFILE), NOCFG},
    {"-sys|--system|--system-prompt", "TEXT", K_STR, F(system), NULL, "system prompt", B(CHAT), NOCFG},
    {"-p|--prompt", "TEXT", K_STR, F(prompt), NULL, "the first message, sent before any input is read", B(CHAT),
     NOCFG},
    {"-st|--single-turn", NULL, K_SWITCH, F(single_turn), NULL, "answer the first message (-p or input) and exit",
     B(CHAT), NOCFG},
    {"-e|--escape", NULL, K_SWITCH, F(escape), NULL,
     "process escapes (\\n \\r \\t \\' \\\" \\\\ \\xNN) in -p and --dry-sequence-breaker, as llama.cpp (the default)",
     SAMPLE, NOCFG},
    {"--no-escape", NULL, K_SWITCH, F(no_escape), NULL, "take -p and --dry-sequence-breaker as typed", SAMPLE,
     NOCFG},
    {"--history", "FILE", K_STR, F(history_file), NULL,
     "chat's input history, kept between runs (default ~/.deltafin_history; \"\" = none)", B(CHAT), NOCFG},
    {"--context-shift", NULL, K_SWITCH, F(context_shift), NULL,
     "when the conversation outgrows the context, drop its oldest turns (default: refuse)", B(CHAT), NOCFG},
    {"--chat-template", "NAME", K_STR, F(chat_template), NULL,
     "builtin chat template (chatml, llama3, qwen3, ...; default: the model's tokenizer.chat_template, else chatml)",
     B(CHAT) | B(SERVE), NOCFG},
    {"--chat-template-file", "FILE", K_STR, F(chat_template_file), NULL,
     "chat template from a Jinja file (wins over --chat-template and the model's)", B(SERVE), NOCFG},
    /* ---- constrained output (docs/server.md "Constrained output") ---- */
    {"--grammar", "GBNF", K_STR, F(grammar), NULL, "constrain the output with a GBNF grammar (llama.cpp's syntax)",
     B(RUN) | B(CHAT) | B(SERVE), NOCFG},
    {"--grammar-file", "FILE", K_STR, F(grammar_file), NULL, "the grammar from a file", B(RUN) | B(CHAT) | B(SERVE),
     NOCFG},
    {"-j|--json-schema", "SCHEMA", K_STR, F(json_schema), NULL,
     "constrain the output to JSON matching a schema (e.g. {} for any object)", B(RUN) | B(CHAT) | B(SERVE),
     NOCFG},
    {"--json-schema-file", "FILE", K_STR, F(json_schema_file), NULL, "the JSON schema from a file",
     B(RUN) | B(CHAT) | B(SERVE), NOCFG},
    /* ---- bench ---- */
    {"-p|--n-prompt", "N,...", K_INTS, F(n_prompt), "512",
     "prompt tokens of the pp tests: a list, e.g. 32,64 or 128-512*2 (default 512; 0 = none)", B(BENCH), NOCFG},
    {"-n|--n-gen", "N,...", K_INTS, F(n_gen), "128",
     "generated tokens of the tg tests, a list as -p (default 128; 0 = none)", B(BENCH), NOCFG},
    {"-pg", "PP,TG", K_INTS, F(bench_pg), NULL,
     "also a test of PP prompt tokens then TG generated ones, timed together (again for more pairs)", B(BENCH),
     NOCFG},
    {"-t|--threads", "N,...", K_INTS, F(bench_threads), NULL, "threads, a list as -p (default: all cores)", B(BENCH),
     C(THREADS, threads)},
    {"-b|--batch-size", "N,...", K_INTS, F(bench_batch), "512", "prompt tokens per forward step, a list (default 512)",
     B(BENCH), C(BATCH_SIZE, batch_size)},
    {"-r|--repetitions", "N", K_INT, F(reps), "5", "repetitions per test (default 5)", B(BENCH), NOCFG},
    {"-o|--output", "FORMAT", K_STR, F(bench_output), "md",
     "md (llama-bench's table), csv, json or jsonl, with llama-bench's field names (default md)", B(BENCH), NOCFG},
    /* ---- context and generation ---- */
    {"-n|--n-predict|--predict", "N", K_INT, F(n_predict), "-1",
     "tokens to generate (default -1: until the end of generation or a full context)", B(RUN), NOCFG},
    {"-n|--n-predict|--predict", "N", K_INT, F(n_predict), "-1",
     "max tokens per answer (default -1: until the end of the turn)", B(CHAT), NOCFG},
    {"-n|--n-predict|--predict", "N", K_INT, F(n_predict), "-1",
     "max_tokens when a request gives none (default -1: until the end of generation or a full context)",
     B(SERVE), NOCFG},
    {"-n|--n-predict|--predict", "N", K_INT, F(n_predict), "0",
     "tokens to generate greedily after each prompt (default 0)", B(PROFILE), NOCFG},
    {"-c|--ctx-size", "N", K_INT, F(n_ctx), NULL, "context size (default: min(training context, 4096))",
     B(RUN) | B(CHAT), C(MAX_SEQ_LEN, max_seq_len)},
    {"-c|--ctx-size", "N", K_INT, F(n_ctx), NULL, "context per slot (default: min(training context, 4096))",
     B(SERVE), C(MAX_SEQ_LEN, max_seq_len)},
    {"-c|--ctx-size", "N", K_INT, F(n_ctx), NULL,
     "context size (default: min(training context, 4096)); longer prompts are cut to fit", B(PROFILE),
     C(MAX_SEQ_LEN, max_seq_len)},
    {"-c|--ctx-size", "N", K_INT, F(n_ctx), NULL,
     "context for the KV line of the memory plan (default: min(training context, 4096))", B(INFO),
     C(MAX_SEQ_LEN, max_seq_len)},
    {"-c|--ctx-size", "N", K_INT, F(n_ctx), "512", "tokens per chunk (default 512)", B(PERPLEXITY) | B(IMATRIX),
     C(MAX_SEQ_LEN, max_seq_len)},
    {"-b|--batch-size", "N", K_INT, F(n_batch), "512", "prompt tokens per forward step (default 512)",
     GEN, C(BATCH_SIZE, batch_size)},
    {"-b|--batch-size", "N", K_INT, F(n_batch), "512", "batch for the scratch line (default 512)", B(INFO),
     C(BATCH_SIZE, batch_size)},
    {"-b|--batch-size", "N", K_INT, F(n_batch), NULL, "tokens per forward step (default: min(CTX, 512))",
     B(PERPLEXITY) | B(IMATRIX), C(BATCH_SIZE, batch_size)},
    {"--chunks", "N", K_INT, F(chunks), "-1", "score at most N chunks (default -1: all)", B(PERPLEXITY), NOCFG},
    {"--chunks", "N", K_INT, F(chunks), "-1", "process at most N chunks (default -1: all)", B(IMATRIX), NOCFG},
    /* ---- imatrix (llama-imatrix's options) ---- */
    {"-o|--output|--output-file", "FILE", K_STR, F(output), "imatrix.gguf", "importance matrix to write (default imatrix.gguf)",
     B(IMATRIX), NOCFG},
    {"--output-format", "gguf|dat", K_STR, F(out_format), NULL,
     "file format: gguf, or llama.cpp's legacy dat (default gguf)", B(IMATRIX), NOCFG},
    {"-ofreq|--output-frequency", "N", K_INT, F(out_freq), "10", "write the file every N chunks (default 10)",
     B(IMATRIX), NOCFG},
    {"--save-frequency", "N", K_INT, F(save_freq), "0", "also keep a copy FILE.at_N every N chunks (default 0: none)",
     B(IMATRIX), NOCFG},
    {"--chunk|--from-chunk", "N", K_INT, F(from_chunk), "0", "skip the first N chunks of the text (default 0)",
     B(IMATRIX), NOCFG},
    {"--process-output", NULL, K_SWITCH, F(process_output), NULL, "also collect output.weight's activations",
     B(IMATRIX), NOCFG},
    {"--parse-special", NULL, K_SWITCH, F(parse_special), NULL, "parse special-token text in the data (default: off)",
     B(IMATRIX), NOCFG},
    {"--kl-divergence-base|--save-all-logits", "FILE", K_STR, F(kld_base), NULL,
     "write the model's log-probabilities of every scored token to FILE (llama-perplexity's format); with "
     "--kl-divergence: read them from FILE", B(PERPLEXITY), NOCFG},
    {"--kl-divergence", NULL, K_SWITCH, F(kld), NULL,
     "KL divergence, top-token agreement and probability change against the --kl-divergence-base file, whose "
     "tokens and context are used (no -f)", B(PERPLEXITY), NOCFG},
    {"--hellaswag", NULL, K_SWITCH, F(hellaswag), NULL,
     "HellaSwag score (acc_norm) of the task file given with -f (llama.cpp's format: 6 lines per task)",
     B(PERPLEXITY), NOCFG},
    {"--hellaswag-tasks", "N", K_INT, F(hellaswag_tasks), "400",
     "tasks to score, picked at random as llama-perplexity does (default 400)", B(PERPLEXITY), NOCFG},
    {"-t|--threads", "N", K_INT, F(n_threads), NULL, "threads (default: all cores; quantize also takes it as a "
     "fourth argument, as llama-quantize)", (LOADS & ~B(BENCH)) | B(BENCH_KERNELS) | B(QUANTIZE), C(THREADS, threads)},
    /* ---- sampling (defaults: deltafin_sampler_default_params, llama.cpp's) ---- */
    {"--temp|--temperature", "T", K_FLOAT, F(sp.temp), NULL, "temperature; 0 = greedy (default 0.8)",
     SAMPLE, C(TEMP, temperature)},
    {"--top-k", "N", K_INT, F(sp.top_k), NULL, "top-k; 0 = off (default 40)", SAMPLE, C(TOP_K, top_k)},
    {"--top-p", "P", K_FLOAT, F(sp.top_p), NULL, "top-p; 1 = off (default 0.95)", SAMPLE,
     C(TOP_P, top_p)},
    {"--min-p", "P", K_FLOAT, F(sp.min_p), NULL, "min-p; 0 = off (default 0.05)", SAMPLE,
     C(MIN_P, min_p)},
    {"--repeat-penalty", "X", K_FLOAT, F(sp.repeat_penalty), NULL, "repetition penalty; 1 = off (default 1)",
     SAMPLE, C(REPEAT_PENALTY, repeat_penalty)},
    {"--repeat-last-n", "N", K_INT, F(sp.repeat_last_n), NULL, "last N tokens the penalties look at; 0 = off "
     "(default 64)", SAMPLE, NOCFG},
    {"--presence-penalty", "N", K_FLOAT, F(sp.presence_penalty), NULL,
     "subtract N from the logit of every token in the penalty window; 0 = off (default 0)", SAMPLE, NOCFG},
    {"--frequency-penalty", "N", K_FLOAT, F(sp.freq_penalty), NULL,
     "subtract N per occurrence in the penalty window; 0 = off (default 0)", SAMPLE, NOCFG},
    {"--dry-multiplier", "N", K_FLOAT, F(sp.dry_multiplier), NULL,
     "DRY: a token extending a repeat longer than --dry-allowed-length loses N * base^(length - allowed); "
     "0 = off (default 0)", SAMPLE, NOCFG},
    {"--dry-base", "N", K_FLOAT, F(sp.dry_base), NULL, "DRY base; values below 1 are ignored (default 1.75)",
     SAMPLE, NOCFG},
    {"--dry-allowed-length", "N", K_INT, F(sp.dry_allowed_length), NULL, "DRY: repeats up to N tokens are free "
     "(default 2)", SAMPLE, NOCFG},
    {"--dry-penalty-last-n", "N", K_INT, F(sp.dry_penalty_last_n), NULL, "DRY: last N tokens searched for repeats; "
     "0 = off (default 64)", SAMPLE, NOCFG},
    {"--dry-sequence-breaker", "TEXT", K_BREAKER, 0, NULL,
     "DRY: text that ends a repeat; repeatable, the first replaces the defaults ('\\n', ':', '\"', '*'); "
     "none = no breakers", SAMPLE, NOCFG},
    {"--typical|--typical-p", "N", K_FLOAT, F(sp.typical_p), NULL, "locally typical sampling, parameter p; 1 = off "
     "(default 1)", SAMPLE, NOCFG},
    {"--top-nsigma|--top-n-sigma", "N", K_FLOAT, F(sp.top_n_sigma), NULL,
     "keep logits within N standard deviations of the best; <= 0 = off (default -1)", SAMPLE, NOCFG},
    {"--xtc-probability", "N", K_FLOAT, F(sp.xtc_probability), NULL,
     "XTC: chance to drop the most probable tokens; 0 = off (default 0)", SAMPLE, NOCFG},
    {"--xtc-threshold", "N", K_FLOAT, F(sp.xtc_threshold), NULL,
     "XTC: tokens at least this probable are dropped but the last; > 0.5 = off (default 0.1)", SAMPLE, NOCFG},
    {"--mirostat", "N", K_INT, F(sp.mirostat), NULL,
     "Mirostat sampling: 0 = off, 1 = Mirostat, 2 = Mirostat 2.0; replaces every stage but the temperature "
     "(default 0)", SAMPLE, NOCFG},
    {"--mirostat-lr", "N", K_FLOAT, F(sp.mirostat_eta), NULL, "Mirostat learning rate, eta (default 0.1)", SAMPLE,
     NOCFG},
    {"--mirostat-ent", "N", K_FLOAT, F(sp.mirostat_tau), NULL, "Mirostat target entropy, tau (default 5)", SAMPLE,
     NOCFG},
    {"-l|--logit-bias", "TOKEN_ID(+/-)BIAS", K_LOGIT_BIAS, 0, NULL,
     "add BIAS to a token's logit, repeatable: 15043+1 raises, 15043-1 lowers, 15043-inf bans token 15043",
     SAMPLE, NOCFG},
    {"--ignore-eos", NULL, K_SWITCH, F(ignore_eos), NULL,
     "never end at an end-of-generation token (a -inf logit bias on them)", SAMPLE, NOCFG},
    {"--samplers", "SAMPLERS", K_SAMPLERS, F(sp.samplers), NULL,
     "the stages in order, separated by ';' (default: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;"
     "temperature)", SAMPLE, NOCFG},
    {"--sampler-seq|--sampling-seq", "SEQUENCE", K_SAMPLERS, F(sp.samplers), NULL,
     "the same as letters: e penalties, d dry, s top_n_sigma, k top_k, y typ_p, p top_p, m min_p, x xtc, "
     "t temperature (default: edskypmxt)", SAMPLE, NOCFG},
    {"-s|--seed", "N", K_SEED, F(sp.seed), NULL, "sampler seed; -1 = random (default: random)", SAMPLE,
     C(SEED, seed)},
    /* ---- memory, I/O and the expert cache ---- */
    {"--mem-limit", "SIZE", K_SIZE, F(mem_limit), NULL,
     "memory limit for the process, e.g. 16G (default: available RAM - --mem-reserve)", LOADS,
     C(MEM_LIMIT, memory_limit)},
    {"--mem-limit", "SIZE", K_SIZE, F(mem_limit), NULL,
     "also show which dense layers would stream and the expert cache at this limit (as run plans them)",
     B(INFO), C(MEM_LIMIT, memory_limit)},
    {"--mem-limit", "SIZE", K_SIZE, F(mem_limit), NULL,
     "estimate tok/s for this memory limit (default: the recommended one)", B(DOCTOR), C(MEM_LIMIT, memory_limit)},
    {"--mem-reserve", "SIZE", K_SIZE, F(mem_reserve), NULL, "with no --mem-limit: RAM left to the OS (default: 1G)",
     LOADS, C(MEM_RESERVE, memory_reserve)},
    {"--cache-size", "SIZE", K_SIZE, F(cache_size), NULL, "expert cache bytes (default: what --mem-limit leaves)",
     LOADS, C(CACHE_SIZE, cache_size)},
    {"--io|--io-engine", "ENGINE", K_IO, F(io_engine), NULL,
     "expert reads: auto | pread | direct | uring | mmap; any other than auto streams the routed experts from "
     "disk (default auto)", LOADS, C(IO_ENGINE, io_engine)},
    {"--prefetch", "MODE", K_PREFETCH, F(prefetch), NULL,
     "auto | on | off: read a layer's routed experts ahead, and the next layer's predicted experts (router "
     "look-ahead; auto: when measured to pay, see docs/streaming.md) (default auto)", LOADS,
     C(PREFETCH, prefetch)},
    {"--hot", "FILE", K_STR, F(hot), NULL,
     "pin the most used experts (\"layer expert count\" lines, from deltafin profile) in the expert cache",
     LOADS, C(HOT_SET, hot_set)},
    {"--preload", "L:E,...", K_STR, F(preload), NULL, "pin these experts in the expert cache", LOADS,
     C(PRELOAD, preload_experts)},
    /* opt-in lossy routing (deltafin_routing): fewer expert reads, a changed output */
    {"--experts-per-token", "N", K_INT, F(routing.experts_per_token), NULL,
     "lossy: route each token to its N best experts of the model's top-k (default: the model's k)", LOADS, NOCFG},
    {"--expert-top-p", "P", K_FLOAT, F(routing.expert_top_p), NULL,
     "lossy: keep the fewest routed experts holding share P of the routing weight (off unless given)", LOADS, NOCFG},
    {"--cache-aware-routing", "M", K_FLOAT, F(routing.cache_aware), NULL,
     "lossy: an uncached expert gives way to a cached one scored within relative margin M (default 0 = off)",
     LOADS, NOCFG},
    {"--trace", "FILE", K_STR, F(trace), NULL,
     "also write the routing trace (one line per token and MoE layer: token layer experts...)", B(PROFILE), NOCFG},
    {"-ctk|--cache-type-k", "TYPE", K_KVTYPE, F(cache_type_k), "f16",
     "KV cache type for K: f16 | f32 | bf16 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | iq4_nl, with llama.cpp's "
     "flash-attention numerics (docs/kv_cache.md) (default f16)", LOADS | B(INFO), C(CACHE_TYPE_K, cache_type_k)},
    {"-ctv|--cache-type-v", "TYPE", K_KVTYPE, F(cache_type_v), "f16",
     "KV cache type for V, the same types (MLA models: must equal -ctk) (default f16)", LOADS | B(INFO),
     C(CACHE_TYPE_V, cache_type_v)},
    {"--mlock", NULL, K_SWITCH, F(mlock), NULL, "lock the dense weights in RAM (mlock)", LOADS, NOCFG},
    {"--verify-on-load", NULL, K_SWITCH, F(verify_on_load), NULL,
     "packed models: check every dense tensor against its checksum as it is read (streamed layers and expert "
     "records are always checked)", LOADS, NOCFG},
    /* ---- output and logging ---- */
    {"--special", NULL, K_SWITCH, F(special), NULL, "print special (control) tokens' text", B(RUN), NOCFG},
    {"--special", NULL, K_SWITCH, F(special), NULL,
     "parse special-token text such as <|im_start|> (default: off, special-token text is tokenized as plain text)",
     B(TOKENIZE), NOCFG},
    {"--bos", NULL, K_SWITCH, F(bos), NULL, "add BOS/EOS as the model's add_bos/add_eos flags say (default: off)",
     B(TOKENIZE), NOCFG},
    {"--json", NULL, K_SWITCH, F(json), NULL, "print one JSON object instead of text",
     B(RUN) | B(BENCH) | B(BENCH_KERNELS), NOCFG},
    {"--json", NULL, K_SWITCH, F(json), NULL, "print a JSON array of ids instead", B(TOKENIZE), NOCFG},
    {"--pieces", NULL, K_SWITCH, F(pieces), NULL, "print one line per token: id<TAB>piece (piece JSON-escaped)",
     B(TOKENIZE), NOCFG},
    {"--count", NULL, K_SWITCH, F(count), NULL, "print only the number of tokens", B(TOKENIZE), NOCFG},
    {"--pre", "NAME", K_STR, F(pre), NULL, "override tokenizer.ggml.pre (testing)", B(TOKENIZE), NOCFG},
    {"--time", NULL, K_SWITCH, F(timing), NULL, "print tokenizer speed (MB/s) to stderr", B(TOKENIZE), NOCFG},
    {"-v|--verbose", NULL, K_SWITCH, F(verbose), NULL, "print the memory plan and expert-cache statistics",
     B(RUN), NOCFG},
    {"-v|--verbose", NULL, K_SWITCH, F(verbose), NULL, "--stats plus library logging", B(CHAT), NOCFG},
    {"-v|--verbose", NULL, K_SWITCH, F(verbose), NULL, "log requests", B(SERVE), NOCFG},
    {"--stats", NULL, K_SWITCH, F(stats), NULL,
     "per turn on stderr: prompt tokens, reused from the cache, decoded, generated, speed", B(CHAT), NOCFG},
    {"--stats-file", "FILE", K_STR, F(stats_file), NULL,
     "append one JSON line every --stats-every tokens and one at the end: tok/s, RSS, expert cache bytes and "
     "hit rate, SSD MB/s, compute/I/O split", B(RUN), NOCFG},
    {"--stats-every", "N", K_INT, F(stats_every), "16", "tokens between stats lines (default 16)", B(RUN), NOCFG},
    {"--log-file", "FILE", K_STR, F(log_file), NULL, "write log messages to FILE instead of stderr", LOADS, NOCFG},
    {"--log-level", "LEVEL", K_LOGLEVEL, F(log_level), NULL, "error | warn | info | debug (default warn; -v = info)",
     LOADS, NOCFG},
    {"--log-prompts", NULL, K_SWITCH, F(log_prompts), NULL,
     "also log the prompt and the generated text (never logged otherwise)", B(RUN), NOCFG},
    /* ---- serve ---- */
    {"--host", "ADDR", K_STR, F(host), "127.0.0.1", "address to bind (default 127.0.0.1)", B(SERVE), NOCFG},
    {"--port", "N", K_INT, F(port), "8080", "port; 0 = pick a free port, printed on stdout (default 8080)",
     B(SERVE), NOCFG},
    {"--api-key", "KEY", K_STR, F(api_key), NULL,
     "require 'Authorization: Bearer KEY' on every endpoint but /health (default: env DELTAFIN_API_KEY, else none)",
     B(SERVE), NOCFG},
    {"-a|--alias", "NAME", K_STR, F(alias), NULL, "model id shown in /v1/models (default: the file's base name)",
     B(SERVE), NOCFG},
    {"-np|--parallel", "N", K_INT, F(n_parallel), "2", "parallel slots, each with its own KV cache (default 2)",
     B(SERVE), NOCFG},
    {"--queue", "N", K_INT, F(n_queue), "64", "requests waiting for a slot before 429 (default 64)", B(SERVE),
     NOCFG},
    {"--step-tokens", "N", K_INT, F(step_tokens), "0",
     "prompt tokens per scheduler step, all slots together; generating slots add one token each (default 0: -b)",
     B(SERVE), NOCFG},
    {"--max-body", "SIZE", K_SIZE, F(max_body), "1M", "largest request body; larger: 413 (default 1M)", B(SERVE),
     NOCFG},
    {"-to|--timeout", "S", K_INT, F(timeout_s), "60", "idle connection timeout in seconds (default 60)", B(SERVE),
     NOCFG},
    {"--drain-timeout", "S", K_INT, F(drain_s), "30",
     "on SIGINT/SIGTERM, wait this long for running requests (default 30)", B(SERVE), NOCFG},
    {"--no-cache-prompt", NULL, K_SWITCH, F(no_cache_prompt), NULL, "do not reuse a slot's KV cache across requests",
     B(SERVE), NOCFG},
    /* ---- bench kernels ---- */
    {"--size", "SIZE", K_SIZE, F(buf_size), "1G", "bytes per buffer/matrix; use >= 4x the L3 size (default 1G)",
     B(BENCH_KERNELS), NOCFG},
    {"--types", "LIST", K_STR, F(types), "Q8_0,Q4_K,MXFP4,Q6_K,IQ2_XXS,F16",
     "comma-separated weight types (default Q8_0,Q4_K,MXFP4,Q6_K,IQ2_XXS,F16)", B(BENCH_KERNELS), NOCFG},
    {"--n-in", "N", K_INT, F(n_in), "4096", "matrix row length (default 4096)", B(BENCH_KERNELS), NOCFG},
    {"--n-tok", "N", K_INT, F(n_tok), "0", "also time N activation rows at once (default 0 = skip)",
     B(BENCH_KERNELS), NOCFG},
    {"-r|--reps", "N", K_INT, F(reps), "5", "repetitions, best is reported (default 5)", B(BENCH_KERNELS), NOCFG},
    {"--isa", "NAME", K_STR, F(isa), NULL, "kernel table: ref | avx2 | avx512 | neon (default: best)",
     B(BENCH_KERNELS), NOCFG},
    /* ---- profile ---- */
    {"-o|--output", "PATH", K_STR, F(output), "-", "hot file to write; - = stdout (default -)", B(PROFILE), NOCFG},
    {"--top", "N", K_INT, F(top), "10", "experts listed in the summary (default 10)", B(PROFILE), NOCFG},
    /* ---- quantize ---- */
    {"--type-experts", "T", K_STR, F(type_experts), NULL,
     "type for 3-D weight tensors: routed experts (*_exps), and deepseek2's attn_k_b / attn_v_b (default: the "
     "recipe's; llama-quantize's --tensor-type _exps=T)", B(QUANTIZE), NOCFG},
    {"--type-dense", "T", K_STR, F(type_dense), NULL,
     "type for every other weight matrix but output and token_embd (default: the recipe's)", B(QUANTIZE), NOCFG},
    {"--output-tensor-type|--output-type", "T", K_STR, F(output_type), NULL,
     "type for output.weight (default: the recipe's, e.g. Q6_K)", B(QUANTIZE), NOCFG},
    {"--token-embedding-type", "T", K_STR, F(token_embd_type), NULL,
     "type for token_embd.weight (default: the recipe's)", B(QUANTIZE), NOCFG},
    {"--pure", NULL, K_SWITCH, F(pure), NULL,
     "no mixture: every matrix in the recipe's type (default: the recipe's per-tensor choices)", B(QUANTIZE), NOCFG},
    {"--leave-output-tensor", NULL, K_SWITCH, F(leave_output), NULL, "copy output.weight as it is", B(QUANTIZE),
     NOCFG},
    {"--imatrix", "FILE", K_STR, F(imatrix), NULL,
     "importance matrix (deltafin imatrix / llama-imatrix, GGUF or legacy .dat): the k-quants and i-quants weigh "
     "their rounding with it; IQ1_*, IQ2_*, IQ3_XXS and Q2_K_S need one", B(QUANTIZE), NOCFG},
    {"--allow-requantize", NULL, K_SWITCH, F(allow_requantize), NULL,
     "convert tensors that are already quantized (default: refuse; quality suffers)", B(QUANTIZE), NOCFG},
    {"--dry-run", NULL, K_SWITCH, F(dry_run), NULL, "print each tensor's type and size and the totals; write nothing",
     B(QUANTIZE), NOCFG},
    /* ---- pack, verify ---- */
    {"--check", NULL, K_SWITCH, F(check), NULL, "read every record of a packed file and verify its checksum",
     B(PACK), NOCFG},
    {"-f|--force", NULL, K_SWITCH, F(force), NULL, "overwrite OUT if it exists (default: refuse)", B(PACK), NOCFG},
    {"--sha256-file", "FILE", K_STR, F(sha256_file), NULL, "manifest to use instead of MODEL.sha256", B(VERIFY),
     NOCFG},
    {"--no-sha256", NULL, K_SWITCH, F(no_sha256), NULL,
     "skip the SHA-256 manifest (packed records only: much faster)", B(VERIFY), NOCFG},
    {"--list", NULL, K_SWITCH, F(list), NULL,
     "packed models: print \"record LAYER EXPERT OFFSET BYTES\" for every expert record and \"part KIND NAME "
     "OFFSET BYTES\" for every other checked part", B(VERIFY), NOCFG},
    /* ---- doctor ---- */
    {"--seconds", "S", K_DOUBLE, F(seconds), "8", "disk measurement budget in seconds (default 8)", B(DOCTOR),
     NOCFG},
    {"--profile", "FILE", K_STR, F(profile), NULL,
     "I/O profile to write (default: $DELTAFIN_IO_PROFILE, else $XDG_CACHE_HOME/deltafin/io-profile, else "
     "~/.cache/deltafin/io-profile)", B(DOCTOR), NOCFG},
    {"--no-save", NULL, K_SWITCH, F(no_save), NULL, "measure and print only; do not write the profile", B(DOCTOR),
     NOCFG},
    /* ---- pull ---- */
    {"-o|--output", "PATH", K_STR, F(output), NULL,
     "file to write (default: the URL's file name in the current directory); a directory (existing or ending "
     "in /) keeps the name. Split models: PATH is a directory (created if missing)", B(PULL), NOCFG},
    {"--sha256", "HEX", K_STR, F(sha256), NULL, "expected SHA-256 of the file (single files only)", B(PULL) | B(VERIFY),
     NOCFG},
    {"--sha256-file", "FILE", K_STR, F(sha256_file), NULL,
     "sha256sum-format manifest (\"HEX  NAME\" lines) to check each file against, matched by file name; also "
     "copied next to the download as FIRST_FILE.sha256 for `deltafin verify`", B(PULL), NOCFG},
    {"--retries", "N", K_INT, F(retries), "5", "retries without progress before giving up (default 5)", B(PULL),
     NOCFG},
    {"--retry-wait", "SEC", K_DOUBLE, F(retry_wait), "1", "first backoff, doubled per retry up to 60 s (default 1)",
     B(PULL), NOCFG},
    {"--token", "TOKEN", K_STR, F(token), NULL,
     "send \"Authorization: Bearer TOKEN\" to the URL's host (gated models); default: $HF_TOKEN, sent to "
     "huggingface.co only", B(PULL), NOCFG},
    {"--dry-run", NULL, K_SWITCH, F(dry_run), NULL, "print each URL and the path it would go to; download nothing",
     B(PULL), NOCFG},
    {"-q|--quiet", NULL, K_SWITCH, F(quiet), NULL,
     "no progress output (default: a bar on a terminal, else a line every 5 s)", B(PULL) | B(PACK) | B(VERIFY),
     NOCFG},
    /* ---- llama.cpp options that mean nothing on this CPU engine: accepted with a notice ---- */
    {"-ngl|--gpu-layers|--n-gpu-layers", "N|auto|all", K_NOTICE_VAL, 0, NULL,
     "llama.cpp's GPU offload: accepted and ignored (every layer runs on the CPU)", LOADS, NOCFG},
    {"-fa|--flash-attn", "on|off|auto", K_NOTICE_VAL, F(flash_attn), NULL,
     "llama.cpp's flash attention switch: accepted and ignored (attention always runs fused, in ggml's "
     "flash-attention order; -fa off with a quantized -ctv is refused, as llama.cpp does)", LOADS, NOCFG},
    {"-ub|--ubatch-size", "N", K_NOTICE_VAL, 0, NULL,
     "llama.cpp's physical batch: accepted and ignored (a prompt step is -b tokens)", LOADS, NOCFG},
    {"-tb|--threads-batch", "N", K_NOTICE_VAL, 0, NULL,
     "llama.cpp's prompt threads: accepted and ignored (prompt and generation use -t threads)", LOADS, NOCFG},
    {"-ot|--override-tensor", "PATTERN=BUFTYPE,...", K_NOTICE_VAL, 0, NULL,
     "llama.cpp's tensor placement: accepted and ignored (every tensor is computed on the CPU; routed experts "
     "that do not fit --mem-limit stream from disk)", LOADS, NOCFG},
    {"-cmoe|--cpu-moe", NULL, K_NOTICE, 0, NULL,
     "llama.cpp's keep-experts-on-the-CPU switch: accepted; every expert runs on the CPU here (those that do "
     "not fit --mem-limit stream from disk)", LOADS, NOCFG},
    {"-ncmoe|--n-cpu-moe", "N", K_NOTICE_VAL, 0, NULL,
     "llama.cpp's experts of the first N layers on the CPU: accepted; every expert runs on the CPU here (those "
     "that do not fit --mem-limit stream from disk)", LOADS, NOCFG},
    {"--jinja", NULL, K_NOTICE, 0, NULL,
     "llama.cpp's Jinja switch: accepted; the model's tokenizer.chat_template is always rendered by deltafin's Jinja engine",
     B(CHAT) | B(SERVE), NOCFG},
    {"-no-cnv|--no-conversation", NULL, K_NOTICE, 0, NULL,
     "llama.cpp's plain-completion switch: accepted; run always completes the prompt (deltafin chat converses)",
     B(RUN), NOCFG},
    {"--prio", "-1|0|1|2|3", K_NOTICE_VAL, 0, NULL, "llama.cpp's thread priority: accepted and ignored", LOADS,
     NOCFG},
    {"--no-mmap", NULL, K_NOTICE, 0, NULL,
     "llama.cpp's no-mmap: accepted; weights are always read into memory, never mapped (streamed experts use "
     "--io)", LOADS, NOCFG},
    {"-h|--help", NULL, K_HELP, 0, NULL, "this help", ALL, NOCFG},
};
#undef F
#undef C
#undef NOCFG

enum { N_ROWS = (int)(sizeof g_rows / sizeof g_rows[0]) };
_Static_assert((int)N_ROWS <= (int)DF_CLI_MAX_ROWS, "raise DF_CLI_MAX_ROWS");

int df_cli_n_rows(void) { return N_ROWS; }
void df_cli_row(int i, const char **names, unsigned *cmds, unsigned *cfg_bit, const char **help) {
    *names = g_rows[i].names;
    *cmds = g_rows[i].cmds;
    *cfg_bit = g_rows[i].cfg;
    *help = g_rows[i].help;
}

/* The value row i's field has in s, formatted as the help states defaults ("" for text, switches
 * and notices): what test_flags.c compares the help's "(default N" with. */
const char *df_cli_row_value(int i, const df_settings *s, char *buf, size_t cap) {
    const row *r = &g_rows[i];
    const void *v = (const char *)s + r->off;
    buf[0] = 0;
    switch (r->k) {
    case K_INT: snprintf(buf, cap, "%d", *(const int *)v); break;
    case K_FLOAT: snprintf(buf, cap, "%g", *(const float *)v); break;
    case K_DOUBLE: snprintf(buf, cap, "%g", *(const double *)v); break;
    case K_SIZE: case K_SEED: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)v); break;
    case K_INTS:
        for (int k = 0, used = 0; k < ((const df_int_list *)v)->n && used < (int)cap; k++)
            used += snprintf(buf + used, cap - (size_t)used, "%s%d", k ? "," : "", ((const df_int_list *)v)->v[k]);
        break;
    default: break;
    }
    return buf;
}

/* ---- matching ------------------------------------------------------------------------------ */
/* arg (up to len bytes) is spelling `name`; in long names '_' and '-' are the same */
static bool same_name(const char *arg, size_t len, const char *name, size_t nlen) {
    if (len != nlen) return false;
    const bool lng = len > 2 && arg[0] == '-' && arg[1] == '-';
    for (size_t i = 0; i < len; i++) {
        char a = arg[i], b = name[i];
        if (lng && a == '_') a = '-';
        if (a != b) return false;
    }
    return true;
}

static bool row_has(const row *r, const char *arg, size_t len) {
    for (const char *p = r->names; *p;) {
        size_t n = strcspn(p, "|");
        if (same_name(arg, len, p, n)) return true;
        p += n;
        if (*p) p++;
    }
    return false;
}

static int find_row(const df_cmd *cmd, const char *arg, size_t len) {
    for (int i = 0; i < N_ROWS; i++)
        if ((g_rows[i].cmds & (1u << cmd->id)) && row_has(&g_rows[i], arg, len)) return i;
    return -1;
}

/* ---- values --------------------------------------------------------------------------------- */
static int bad_value(const df_cmd *cmd, const char *flag, const char *what, const char *v) {
    fprintf(stderr, "%s: %s: expected %s, got '%s'\n", cmd->name, flag, what, v);
    return 2;
}

/* a non-negative int at *p (digits only), *p moved past it */
static bool list_num(const char **p, long *x) {
    if (**p < '0' || **p > '9') return false;
    *x = 0;
    while (**p >= '0' && **p <= '9') {
        *x = *x * 10 + (**p - '0');
        if (*x > INT_MAX) return false;
        (*p)++;
    }
    return true;
}

/* v as llama-bench's list ("N" | "N-M" | "N-M+STEP" | "N-M*MULT", comma-separated), added to l:
 * NULL, or what was expected */
static const char *list_add(const char *v, df_int_list *l) {
    const char *p = v, *syntax = "N,N,... with ranges first-last[+step|*mult]";
    for (;;) {
        long a, b, st = 1;
        char op = '+';
        if (!list_num(&p, &a)) return syntax;
        b = a;
        if (*p == '-') {
            p++;
            if (!list_num(&p, &b)) return syntax;
            if (*p == '+' || *p == '*') {
                op = *p++;
                if (!list_num(&p, &st)) return syntax;
            }
        }
        if (b < a) return "a range first-last with last >= first";
        if (op == '+' ? st < 1 : st < 2 || a < 1) return "a range step that grows the value";
        for (long x = a; x <= b; x = op == '+' ? x + st : x * st) {
            if (l->n >= DF_CLI_MAX_LIST) return "at most 64 values";
            l->v[l->n++] = (int)x;
        }
        if (!*p) return NULL;
        if (*p++ != ',') return syntax;
    }
}

/* an integer, strictly (any sign) */
static bool is_int(const char *v, size_t n) {
    char buf[32];
    if (!n || n >= sizeof buf) return false;
    memcpy(buf, v, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long x = strtol(buf, &end, 10);
    return !*end && !errno && x >= INT_MIN && x <= INT_MAX;
}

/* -ot's value: PATTERN=BUFTYPE pairs separated by ',' (llama.cpp's syntax); each pattern must
 * compile as a regular expression (PCRE2, close to the ECMAScript std::regex llama.cpp uses) */
static int overrides_ok(const df_cmd *cmd, const char *flag, const char *v) {
    for (const char *p = v;;) {
        const size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        if (!eq || eq + 1 == p + n)
            return bad_value(cmd, flag, "PATTERN=BUFTYPE pairs separated by ',' (e.g. exps=CPU)", v);
        int err;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)p, (PCRE2_SIZE)(eq - p), 0, &err, &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(err, msg, sizeof msg);
            fprintf(stderr, "%s: %s: '%.*s' is not a regular expression: %s at offset %zu\n", cmd->name, flag,
                    (int)(eq - p), p, (const char *)msg, (size_t)at);
            return 2;
        }
        pcre2_code_free(re);
        if (!p[n]) return 0;
        p += n + 1;
    }
}

/* a notice flag's value as its meta says: choices (N = an integer), N (an integer >= 0), or
 * -ot's PATTERN=BUFTYPE list */
static int notice_value_ok(const df_cmd *cmd, const row *r, const char *flag, const char *v) {
    if (!r->meta) return 0;
    if (strchr(r->meta, '=')) return overrides_ok(cmd, flag, v);
    if (!strchr(r->meta, '|')) {
        if (!strcmp(r->meta, "N") && (!is_int(v, strlen(v)) || v[0] == '-'))
            return bad_value(cmd, flag, "an integer >= 0", v);
        return 0;
    }
    const size_t n = strlen(v);
    for (const char *p = r->meta; *p;) { /* "on|off|auto": one of them */
        const size_t k = strcspn(p, "|");
        if ((k == n && !strncmp(p, v, n)) || (k == 1 && *p == 'N' && is_int(v, n))) return 0;
        p += k + (p[k] ? 1 : 0);
    }
    return bad_value(cmd, flag, r->meta, v);
}

static int parse_value(const df_cmd *cmd, const row *r, const char *flag, const char *v, df_settings *s) {
    void *dst = (char *)s + r->off;
    char *end = NULL;
    errno = 0;
    switch (r->k) {
    case K_INT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < INT_MIN || x > INT_MAX) return bad_value(cmd, flag, "an integer", v);
        *(int *)dst = (int)x;
        return 0;
    }
    case K_FLOAT: case K_DOUBLE: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x)) return bad_value(cmd, flag, "a number", v);
        if (r->k == K_FLOAT) *(float *)dst = (float)x;
        else *(double *)dst = x;
        return 0;
    }
    case K_SEED: {
        if (!strcmp(v, "-1")) { *(uint64_t *)dst = UINT64_MAX; return 0; }
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *end || errno || *v == '-') return bad_value(cmd, flag, "a non-negative integer or -1", v);
        *(uint64_t *)dst = x;
        return 0;
    }
    case K_SIZE:
        if (deltafin_parse_size(v, (uint64_t *)dst) != DELTAFIN_OK)
            return bad_value(cmd, flag, "a size such as 16G, 512M or 4096", v);
        return 0;
    case K_STR:
        *(const char **)dst = v;
        return 0;
    case K_INTS: {
        const char *what = list_add(v, (df_int_list *)dst);
        return what ? bad_value(cmd, flag, what, v) : 0;
    }
    case K_IO:
        /* the name only: an engine this build lacks is reported when the model loads */
        if (deltafin_io_engine_check(v) == DELTAFIN_ERR_INVALID)
            return bad_value(cmd, flag, "auto, pread, direct, uring or mmap", v);
        *(const char **)dst = v;
        return 0;
    case K_PREFETCH:
        if (deltafin_prefetch_parse(v, (int *)dst) != DELTAFIN_OK) return bad_value(cmd, flag, "auto, on or off", v);
        return 0;
    case K_KVTYPE:
        if (deltafin_kv_type_parse(v, (int *)dst) != DELTAFIN_OK)
            return bad_value(cmd, flag, "f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl", v);
        return 0;
    case K_LOGLEVEL: {
        static const char *lv[] = {"error", "warn", "info", "debug"};
        for (int k = 0; k < 4; k++)
            if (!strcmp(v, lv[k]) || (v[0] == '0' + k && !v[1])) { *(int *)dst = k; return 0; }
        return bad_value(cmd, flag, "error, warn, info or debug", v);
    }
    case K_NOTICE_VAL: {
        int rc = notice_value_ok(cmd, r, flag, v);
        if (rc) return rc;
        fprintf(stderr, "%s: note: %s %s: %s\n", cmd->name, flag, v, r->help);
        if (r->off) *(const char **)dst = v; /* kept where a combination is refused (-fa off -ctv q8_0) */
        return 0;
    }
    case K_SAMPLERS:
        if (deltafin_sampler_parse_order(v, strstr(r->names, "-seq") != NULL, &s->sp) < 0) {
            fprintf(stderr, "%s: %s: %s\n", cmd->name, flag, deltafin_errmsg());
            return 2;
        }
        return 0;
    case K_LOGIT_BIAS:
        if (s->n_logit_bias == DF_CLI_MAX_BIAS)
            return df_cli_usage_error(cmd, "%s: at most %d biases", flag, DF_CLI_MAX_BIAS);
        if (deltafin_logit_bias_parse(v, &s->logit_bias[s->n_logit_bias]) < 0) {
            fprintf(stderr, "%s: %s: %s\n", cmd->name, flag, deltafin_errmsg());
            return 2;
        }
        s->n_logit_bias++;
        return 0;
    case K_BREAKER: /* llama.cpp: the first one replaces the defaults; "none" empties the list */
        if (!s->dry_breakers_set || !strcmp(v, "none")) s->n_dry_breakers = 0;
        s->dry_breakers_set = true;
        if (!strcmp(v, "none")) return 0;
        if (s->n_dry_breakers == DF_CLI_MAX_BREAKERS)
            return df_cli_usage_error(cmd, "%s: at most %d breakers", flag, DF_CLI_MAX_BREAKERS);
        s->dry_breakers[s->n_dry_breakers++] = v;
        return 0;
    default:
        return 0;
    }
}

static void apply_defaults(const df_cmd *cmd, df_settings *s) {
    memset(s, 0, sizeof *s);
    s->sp = deltafin_sampler_default_params();
    s->prefetch = -1;
    s->log_level = -1;
    df_config_init(&s->cfg);
    for (int i = 0; i < N_ROWS; i++) {
        const row *r = &g_rows[i];
        if (!(r->cmds & (1u << cmd->id)) || !r->def) continue;
        int rc = parse_value(cmd, r, r->names, r->def, s);
        (void)rc; /* the table's own defaults parse (test_flags.c) */
    }
}

/* Copy the config file's value of row r (its key was set) into the settings. */
static void apply_cfg_row(const row *r, df_settings *s) {
    void *dst = (char *)s + r->off;
    const char *src = (const char *)&s->cfg + r->cfg_off;
    switch (r->k) {
    case K_INT: case K_PREFETCH: case K_KVTYPE: memcpy(dst, src, sizeof(int)); break;
    case K_FLOAT: memcpy(dst, src, sizeof(float)); break;
    case K_SIZE: case K_SEED: memcpy(dst, src, sizeof(uint64_t)); break;
    case K_STR: case K_IO: *(const char **)dst = src; break;
    case K_INTS:
        ((df_int_list *)dst)->n = 1;
        memcpy(((df_int_list *)dst)->v, src, sizeof(int));
        break;
    default: break;
    }
}

/* Before the flags: -h / --help (help needs no valid config file) and the --config FILE
 * (any position; the last one counts). Values are skipped as the parser will take them. */
static int prescan(const df_cmd *cmd, int argc, char **argv, const char **config) {
    *config = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
        if (a[0] != '-' || !a[1]) continue;
        const int ri = find_row(cmd, a, eq ? (size_t)(eq - a) : strlen(a));
        if (ri < 0) continue; /* reported in order by the parser */
        const row *r = &g_rows[ri];
        if (r->k == K_HELP) { df_cli_help(cmd, stdout); return 0; }
        if (r->k == K_SWITCH || r->k == K_NOTICE || eq) {
            if (eq && r->k == K_CONFIG) *config = eq + 1;
            continue;
        }
        if (i + 1 < argc && r->k == K_CONFIG) *config = argv[i + 1];
        i++;
    }
    return DF_CLI_GO;
}

/* The config file's values for the options this command takes. */
static int load_config(const df_cmd *cmd, const char *path, df_settings *s) {
    if (!path) return DF_CLI_GO;
    s->config = path;
    if (df_config_load(path, &s->cfg) < 0) {
        fprintf(stderr, "%s: %s\n", cmd->name, deltafin_errmsg());
        return 2;
    }
    for (int i = 0; i < N_ROWS; i++) {
        const row *r = &g_rows[i];
        if ((r->cmds & (1u << cmd->id)) && r->cfg && (s->cfg.set & r->cfg)) apply_cfg_row(r, s);
    }
    return DF_CLI_GO;
}

/* argv[*i] is an option: its row, its value (next argument or after '='). */
static int parse_option(const df_cmd *cmd, int argc, char **argv, int *i, df_settings *s) {
    const char *a = argv[*i], *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    const size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const int ri = find_row(cmd, a, len);
    if (ri < 0) return df_cli_usage_error(cmd, "unknown option '%.*s'", (int)len, a);
    const row *r = &g_rows[ri];
    char flag[64];
    snprintf(flag, sizeof flag, "%.*s", (int)len, a);
    if (r->k == K_HELP) { df_cli_help(cmd, stdout); return 0; }
    if (r->k == K_SWITCH || r->k == K_NOTICE) {
        if (eq) return df_cli_usage_error(cmd, "%s takes no value", flag);
        if (r->k == K_SWITCH) *(bool *)((char *)s + r->off) = true;
        else fprintf(stderr, "%s: note: %s: %s\n", cmd->name, flag, r->help);
        s->given[ri] = true;
        return DF_CLI_GO;
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v) {
        if (*i + 1 >= argc) return df_cli_usage_error(cmd, "%s needs a value (%s)", flag, r->meta);
        v = argv[++*i];
    }
    if (r->k == K_INTS && !s->given[ri]) ((df_int_list *)((char *)s + r->off))->n = 0; /* not the default's */
    s->given[ri] = true;
    if (r->k == K_CONFIG) return DF_CLI_GO; /* read before the flags */
    int rc = parse_value(cmd, r, flag, v, s);
    return rc ? rc : DF_CLI_GO;
}

static int check_sampling(const df_cmd *cmd, df_settings *s);

void df_cli_unescape(char *t) {
    char *o = t;
    for (const char *p = t; *p; p++) {
        if (p[0] != '\\' || !p[1]) { *o++ = *p; continue; }
        static const char pairs[] = "n\nr\rt\t''\"\"\\\\"; /* escape letter, then its byte */
        const char c = *++p;
        const char *map = strchr(pairs, c);
        if (map && (map - pairs) % 2 == 0) { *o++ = map[1]; continue; }
        if (c == 'x' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
            const char hex[3] = {p[1], p[2], 0};
            *o++ = (char)strtol(hex, NULL, 16);
            p += 2;
            continue;
        }
        *o++ = '\\';
        *o++ = c;
    }
    *o = 0;
}

int df_cli_parse(const df_cmd *cmd, int argc, char **argv, df_settings *s) {
    apply_defaults(cmd, s);
    const char *config;
    int rc = prescan(cmd, argc, argv, &config);
    if (rc != DF_CLI_GO) return rc;
    rc = load_config(cmd, config, s);
    if (rc != DF_CLI_GO) return rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1]) {
            rc = parse_option(cmd, argc, argv, &i, s);
            if (rc != DF_CLI_GO) return rc;
        } else if (s->n_pos < cmd->max_pos) {
            s->pos[s->n_pos++] = a;
        } else {
            return df_cli_usage_error(cmd, cmd->max_pos ? "unexpected argument '%s'" : "unexpected argument '%s' "
                                      "(options start with -)", a);
        }
    }
    if (find_row(cmd, "--temp", 6) >= 0 && (rc = check_sampling(cmd, s)) != DF_CLI_GO) return rc;

    /* a chunk the user chose is kept by the memory plan; the default may shrink under pressure */
    s->n_batch_chosen = df_cli_given(s, cmd, "--batch-size") || (s->cfg.set & DF_CFG_BATCH_SIZE);
    /* llama.cpp: "quantized V cache requires flash_attn to be enabled" */
    const int tv = s->cache_type_v;
    if (s->flash_attn && !strcmp(s->flash_attn, "off") && tv != DELTAFIN_KV_F16 && tv != DELTAFIN_KV_F32 &&
        tv != DELTAFIN_KV_BF16)
        return df_cli_usage_error(cmd, "a quantized V cache (-ctv %s) requires flash attention; llama.cpp refuses "
                                  "-fa off with it (deltafin always runs flash attention: drop -fa off)",
                                  deltafin_kv_type_name(tv));
    return DF_CLI_GO;
}

int df_cli_usage_error(const df_cmd *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see deltafin %s --help)\n", cmd->name);
    va_end(ap);
    return 2;
}

bool df_cli_given(const df_settings *s, const df_cmd *cmd, const char *name) {
    for (int i = 0; i < N_ROWS; i++)
        if (s->given[i] && (g_rows[i].cmds & (1u << cmd->id)) && row_has(&g_rows[i], name, strlen(name))) return true;
    return false;
}

const char *df_cli_model_arg(const df_cmd *cmd, df_settings *s, bool required, int *rc) {
    *rc = 0;
    if (s->n_pos > 0) {
        if (df_cli_given(s, cmd, "--model")) {
            *rc = df_cli_usage_error(cmd, "give the model once (-m %s or %s)", s->model, s->pos[0]);
            return NULL;
        }
        s->model = s->pos[0];
    }
    if (!s->model && required) {
        fprintf(stderr, "%s: MODEL is required\n\n", cmd->name);
        df_cli_help(cmd, stderr);
        *rc = 2;
    }
    return s->model;
}

/* ---- help ----------------------------------------------------------------------------------- */
enum { HELP_COL = 28, HELP_WIDTH = 100 };

/* text from column `col`, wrapped at HELP_WIDTH with continuation lines indented to col */
static void wrap(FILE *f, const char *text, int col, int at) {
    const char *p = text;
    while (*p) {
        int room = HELP_WIDTH - at;
        int n = (int)strlen(p);
        if (n > room) {
            int cut = room;
            while (cut > 0 && p[cut] != ' ') cut--;
            if (cut == 0) cut = (int)strcspn(p, " ");
            n = cut;
        }
        fprintf(f, "%.*s\n", n, p);
        p += n;
        while (*p == ' ') p++;
        if (*p) fprintf(f, "%*s", col, "");
        at = col;
    }
}

static void help_row(FILE *f, const row *r) {
    char names[160];
    size_t used = 0;
    names[0] = 0;
    for (const char *p = r->names; *p && used < sizeof names - 1;) {
        size_t n = strcspn(p, "|");
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%.*s", used ? ", " : "", (int)n, p);
        p += n + (p[n] ? 1 : 0);
    }
    if (r->meta && used < sizeof names - 1) snprintf(names + used, sizeof names - used, " %s", r->meta);
    int at = fprintf(f, "  %s", names);
    if (at + 1 >= HELP_COL) { fprintf(f, "\n%*s", HELP_COL, ""); at = HELP_COL; }
    else { fprintf(f, "%*s", HELP_COL - at, ""); at = HELP_COL; }
    wrap(f, r->help, HELP_COL, at);
}

void df_cli_help(const df_cmd *cmd, FILE *f) {
    fprintf(f, "%s\n", cmd->usage);
    if (cmd->about) fprintf(f, "\n%s\n", cmd->about);
    fprintf(f, "\noptions:\n");
    for (int i = 0; i < N_ROWS; i++)
        if (g_rows[i].cmds & (1u << cmd->id)) help_row(f, &g_rows[i]);
    if (cmd->after) fprintf(f, "\n%s\n", cmd->after);
}

/* ---- what the commands share -------------------------------------------------------------- */
deltafin_model_params df_cli_model_params(const df_settings *s) {
    deltafin_model_params mp = deltafin_model_default_params();
    mp.n_threads = s->n_threads;
    mp.mem_limit = s->mem_limit;
    mp.mem_reserve = s->mem_reserve;
    if (s->io_engine) mp.io_engine = s->io_engine;
    mp.cache_bytes = s->cache_size; /* the memory plan sizes the expert cache exactly from this */
    if (s->prefetch >= 0) mp.prefetch = s->prefetch;
    mp.hot_file = s->hot;
    mp.preload = s->preload;
    mp.mlock = s->mlock;
    mp.cache_type_k = s->cache_type_k;
    mp.cache_type_v = s->cache_type_v;
    mp.verify_on_load = s->verify_on_load;
    /* what the memory plan reserves: this context, this chunk (when chosen), one sequence
     * (serve sets n_seq to its slots) */
    mp.n_ctx = s->n_ctx;
    mp.n_batch = s->n_batch_chosen ? s->n_batch : 0;
    return mp;
}

int df_cli_apply_routing(const df_cmd *cmd, const df_settings *s, deltafin_ctx *c) {
    if (deltafin_ctx_set_routing(c, &s->routing) < 0) {
        fprintf(stderr, "%s: %s\n", cmd->name, deltafin_errmsg());
        return 2;
    }
    return 0;
}

void df_cli_routing_report(const df_settings *s, deltafin_ctx *c, FILE *f) {
    const deltafin_routing *r = &s->routing;
    if (!r->experts_per_token && !r->expert_top_p && !r->cache_aware) return;
    uint64_t n = 0, dropped = 0, swapped = 0;
    deltafin_ctx_routing_stats(c, &n, &dropped, &swapped);
    deltafin_stats st;
    deltafin_ctx_stats(c, &st);
    const uint64_t nt = st.n_prompt_tokens + st.n_gen_tokens;
    fprintf(f, "lossy routing: %llu of %llu expert slots dropped (%.1f%%), %llu moved to cached experts; "
            "%.4f MB read per token\n", (unsigned long long)dropped, (unsigned long long)n,
            n ? 100.0 * (double)dropped / (double)n : 0.0, (unsigned long long)swapped,
            nt ? (double)st.bytes_read / 1e6 / (double)nt : 0.0);
}

int df_cli_sampler(const df_cmd *cmd, df_settings *s, const deltafin_model *m, deltafin_sampler_params *sp) {
    *sp = s->sp;
    const deltafin_vocab *v = deltafin_model_vocab(m);
    deltafin_vocab_info vi;
    deltafin_vocab_get_info(v, &vi);
    int n = s->n_logit_bias;
    for (int i = 0; i < n; i++)
        if (s->logit_bias[i].token >= vi.n_tokens)
            return df_cli_usage_error(cmd, "--logit-bias: token %d is outside the vocabulary (%d tokens)",
                                      s->logit_bias[i].token, vi.n_tokens);
    for (int i = 0; s->ignore_eos && i < vi.n_eog; i++) { /* llama.cpp: --logit-bias EOG-inf */
        if (n == DF_CLI_MAX_BIAS) return df_cli_usage_error(cmd, "--ignore-eos: too many biases");
        s->logit_bias[n++] = (deltafin_logit_bias){vi.eog[i], -INFINITY};
    }
    sp->logit_bias = s->logit_bias;
    sp->n_logit_bias = n;
    if (s->dry_breakers_set) { /* copies, with llama.cpp's escapes processed ("\n": a newline) */
        for (int i = 0; i < s->n_dry_breakers; i++) {
            snprintf(s->breaker_text[i], sizeof s->breaker_text[i], "%s", s->dry_breakers[i]);
            if (s->escape || !s->no_escape) df_cli_unescape(s->breaker_text[i]);
            s->breaker_ptr[i] = s->breaker_text[i];
        }
        sp->dry_sequence_breakers = s->breaker_ptr;
        sp->n_dry_sequence_breakers = s->n_dry_breakers;
    }
    sp->vocab = v;
    return 0;
}

/* llama.cpp's checks of the sampling flags (common/arg.cpp) */
static int check_sampling(const df_cmd *cmd, df_settings *s) {
    deltafin_sampler_params *sp = &s->sp;
    if (sp->repeat_last_n < 0) return df_cli_usage_error(cmd, "invalid --repeat-last-n = %d", sp->repeat_last_n);
    if (sp->dry_penalty_last_n < 0)
        return df_cli_usage_error(cmd, "invalid --dry-penalty-last-n = %d", sp->dry_penalty_last_n);
    if (!(sp->repeat_penalty > 0.0f) || !isfinite(1.0f / sp->repeat_penalty))
        return df_cli_usage_error(cmd, "--repeat-penalty must be finite and greater than 0");
    if (sp->mirostat < 0 || sp->mirostat > 2)
        return df_cli_usage_error(cmd, "--mirostat %d: expected 0 (off), 1 (Mirostat) or 2 (Mirostat 2.0)", sp->mirostat);
    if (sp->temp < 0.0f) sp->temp = 0.0f; /* llama.cpp clamps --temp at 0 */
    if (sp->dry_base < 1.0f) sp->dry_base = deltafin_sampler_default_params().dry_base; /* ignored, as there */
    return DF_CLI_GO;
}

deltafin_ctx_params df_cli_ctx_params(const df_settings *s) {
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = s->n_ctx;
    cp.n_batch = s->n_batch;
    cp.n_threads = s->n_threads;
    return cp;
}

int df_cli_log_begin(const df_cmd *cmd, df_settings *s) {
    if (s->log_file) {
        s->log_f = fopen(s->log_file, "a");
        if (!s->log_f) {
            fprintf(stderr, "%s: --log-file %s: %s\n", cmd->name, s->log_file, strerror(errno));
            return 1;
        }
        setvbuf(s->log_f, NULL, _IOLBF, 0);
        deltafin_log_set_file(s->log_f);
    }
    if (s->log_level >= 0) deltafin_log_set_level(s->log_level);
    const bool info = s->log_prompts || (s->verbose && s->log_level < 0);
    if (info && deltafin_log_get_level() < DELTAFIN_LOG_INFO) deltafin_log_set_level(DELTAFIN_LOG_INFO);
    return DF_CLI_GO;
}

void df_cli_log_end(df_settings *s) {
    if (!s->log_f) return;
    deltafin_log_set_file(NULL);
    fclose(s->log_f);
    s->log_f = NULL;
}

int df_cli_grammar(const df_cmd *cmd, const df_settings *s, char **gbnf) {
    *gbnf = NULL;
    int given = !!s->grammar + !!s->grammar_file + !!s->json_schema + !!s->json_schema_file;
    if (!given) return 0;
    if (given > 1) {
        df_cli_usage_error(cmd, "use one of --grammar, --grammar-file, --json-schema and --json-schema-file");
        return 1;
    }
    char *text = NULL;
    size_t len = 0;
    const char *file = s->grammar_file ? s->grammar_file : s->json_schema_file;
    if (file && deltafin_read_file(file, &text, &len) < 0) {
        fprintf(stderr, "%s: %s\n", cmd->name, deltafin_errmsg());
        return 1;
    }
    if (!file) {
        text = strdup(s->grammar ? s->grammar : s->json_schema);
        if (!text) return 1;
    }
    int rc;
    if (s->grammar || s->grammar_file) {
        rc = deltafin_grammar_check(text, NULL);
        if (rc == DELTAFIN_ERR_FORMAT) { free(text); fprintf(stderr, "%s: grammar: %s\n", cmd->name, deltafin_errmsg()); return 1; }
        *gbnf = text;
        return 0;
    }
    rc = deltafin_json_schema_to_grammar(text, gbnf);
    free(text);
    if (rc < 0) { fprintf(stderr, "%s: --json-schema: %s\n", cmd->name, deltafin_errmsg()); return 1; }
    return 0;
}
