/* deltafin.h — public API of the deltafin inference library.
 * Opaque handles, negative status codes (see src/util.h df_status), *_default_params(),
 * create/free pairs. The detail of the last error on the calling thread is in
 * deltafin_errmsg(). A model is shared read-only by any number of contexts; each context
 * (one sequence: KV cache / recurrent state, scratch, logits) is used by one thread at a time;
 * several contexts can be decoded in shared passes (deltafin_decode_batch). */
#ifndef DELTAFIN_H
#define DELTAFIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DELTAFIN_VERSION "0.1.0"

/* Status codes: every function returning int returns DELTAFIN_OK (0) or one of these. */
typedef enum {
    DELTAFIN_OK = 0,
    DELTAFIN_ERR_IO = -1,          /* read/write/open failed, short read */
    DELTAFIN_ERR_FORMAT = -2,      /* malformed untrusted input (file, JSON, template ...) */
    DELTAFIN_ERR_NOMEM = -3,
    DELTAFIN_ERR_INVALID = -4,     /* bad argument / option value */
    DELTAFIN_ERR_UNSUPPORTED = -5, /* valid but not implemented (arch, tensor type) */
    DELTAFIN_ERR_RANGE = -6,       /* size/overflow/limit exceeded (e.g. the memory limit) */
    DELTAFIN_ERR_CANCELLED = -7,
    DELTAFIN_ERR_INTERNAL = -8,
    DELTAFIN_ERR_CHECKSUM = -9,
    DELTAFIN_ERR_NOTFOUND = -10,
} deltafin_status;

/* Thread-local detail of the last failure (never NULL). */
const char *deltafin_errmsg(void);
/* "ok", "I/O error", "format error" ... */
const char *deltafin_status_str(int status);
/* The build: version and the git commit it was built from ("unknown" outside a checkout). */
const char *deltafin_commit(void);

/* One-time process setup (tables, CPU detection). Optional: every entry point that needs it
 * calls it; idempotent and thread-safe. */
void deltafin_init(void);
/* Record `fmt` as the calling thread's error detail (deltafin_errmsg) and return `status`:
 * for applications that report their own failures through the same channel as the library.
 * The arguments may include deltafin_errmsg() itself (to add context in front of it). */
int deltafin_set_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The kernel table in use: "avx512", "avx2", "neon" or "ref". */
const char *deltafin_kernel_isa(void);

/* ---- small utilities the tools share ---------------------------------------------------- */
/* Read a whole (small) file: configs, prompts. *data is malloc'ed and NUL-terminated (caller
 * frees); DELTAFIN_ERR_IO naming the path. */
int deltafin_read_file(const char *path, char **data, size_t *len);
/* "16G", "512M", "1.5GiB", "4096" -> bytes. DELTAFIN_ERR_INVALID with a message if malformed. */
int deltafin_parse_size(const char *s, uint64_t *out);
/* "1.5 GiB"; returns buf. */
const char *deltafin_fmt_bytes(uint64_t n, char *buf, size_t cap);
uint64_t deltafin_time_ns(void);   /* monotonic */
uint64_t deltafin_peak_rss(void);  /* bytes (VmHWM) */
uint64_t deltafin_cur_rss(void);   /* bytes (VmRSS) */
/* Bytes this process may still use: min(MemAvailable, memory cgroup limit - usage). */
uint64_t deltafin_mem_available(void);
/* Logging (the library prints only through this logger). Default level: warn. */
enum { DELTAFIN_LOG_ERROR = 0, DELTAFIN_LOG_WARN = 1, DELTAFIN_LOG_INFO = 2, DELTAFIN_LOG_DEBUG = 3 };
void deltafin_log_set_level(int level);
int deltafin_log_get_level(void);
void deltafin_log_set_file(void *file); /* a FILE *; NULL = stderr */
void deltafin_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct deltafin_model deltafin_model;
typedef struct deltafin_ctx deltafin_ctx;
typedef struct deltafin_sampler deltafin_sampler;
typedef struct deltafin_grammar deltafin_grammar;

/* ---- model ------------------------------------------------------------------------- */
/* Expert prefetch / router look-ahead (docs/streaming.md). */
enum { DELTAFIN_PREFETCH_OFF = 0, DELTAFIN_PREFETCH_ON = 1, DELTAFIN_PREFETCH_AUTO = 2 };
/* "off" | "on" | "auto" -> DELTAFIN_PREFETCH_*; DELTAFIN_ERR_INVALID otherwise. */
int deltafin_prefetch_parse(const char *s, int *mode);
/* DELTAFIN_OK if `name` is a read engine of this build ("auto", "pread", "direct", "uring",
 * "mmap"), else DELTAFIN_ERR_INVALID / _UNSUPPORTED with a message. */
int deltafin_io_engine_check(const char *name);
/* KV cache element types (llama.cpp's -ctk / -ctv, docs/kv_cache.md). F16 is llama.cpp's
 * default; F32 is accepted and stored as F16 (llama.cpp's flash attention casts an F32 cache
 * to F16, so the tokens are the same). Quantized types use ggml's block formats and
 * llama.cpp's flash-attention numerics (K·Q in K's dot type, V rows dequantized to F32). */
enum {
    DELTAFIN_KV_F16 = 0, DELTAFIN_KV_F32, DELTAFIN_KV_BF16, DELTAFIN_KV_Q8_0, DELTAFIN_KV_Q4_0,
    DELTAFIN_KV_Q4_1, DELTAFIN_KV_Q5_0, DELTAFIN_KV_Q5_1, DELTAFIN_KV_IQ4_NL, DELTAFIN_KV_COUNT
};
/* "f16" | "f32" | "bf16" | "q8_0" | "q4_0" | "q4_1" | "q5_0" | "q5_1" | "iq4_nl" (any case) ->
 * DELTAFIN_KV_*; DELTAFIN_ERR_INVALID with a message listing them otherwise. */
int deltafin_kv_type_parse(const char *s, int *type);
/* "f16" ... (NULL for an id out of range) */
const char *deltafin_kv_type_name(int type);

typedef struct {
    int n_threads;          /* <= 0: all cores */
    uint64_t mem_limit;     /* bytes for the whole process; 0 = available RAM - mem_reserve */
    uint64_t mem_reserve;   /* bytes left to the OS when mem_limit == 0 */
    const char *io_engine;  /* "auto", "pread", "direct", "uring", "mmap" (NULL = auto); any
                             * engine other than auto streams the routed experts */
    uint64_t cache_bytes;   /* expert cache bytes (--cache-size); 0 = what the limit leaves */
    int prefetch;           /* DELTAFIN_PREFETCH_* (default AUTO) */
    const char *hot_file;   /* pin the most used experts ("layer expert count" lines, from
                             * `deltafin profile`), or NULL */
    const char *preload;    /* pin these experts ("L:E,L:E,..."), or NULL */
    /* What the memory plan reserves for (docs/streaming.md "memory plan"): KV cache for n_seq
     * sequences of n_ctx tokens and scratch for prompt chunks of n_batch tokens. With a
     * mem_limit, contexts beyond that are refused (deltafin_ctx_create), so the process stays
     * inside the limit; under memory pressure the plan may choose smaller prompt chunks
     * (deltafin_plan.n_batch; same tokens). 0 = defaults: min(training context, 4096), 512, 1. */
    int n_ctx;
    int n_batch;
    int n_seq;
    /* KV cache types of K and V rows (DELTAFIN_KV_*, 0 = F16), llama.cpp's -ctk / -ctv: the
     * memory plan counts their bytes; load refuses a type the architecture cannot hold (block
     * size not dividing a head, K and V types differing where V is a view of K: MLA) */
    int cache_type_k, cache_type_v;
    bool mlock;             /* lock the resident weights, the expert cache and the dense layer
                             * buffers in RAM (llama.cpp's --mlock); load fails with a message
                             * naming RLIMIT_MEMLOCK when the kernel refuses */
    bool verify_on_load;    /* packed models (version 2): check every resident dense tensor
                             * against its checksum as it is read (streamed dense layers and
                             * expert records are always checked); the header, tensor table
                             * and expert index of a packed file are checked at every load */
    bool progress;          /* log load progress (info level) */
    /* Load progress callback, called after each tensor is read (tools draw a bar with it);
     * done and total are bytes to read at load. NULL = none. */
    void (*progress_cb)(void *ud, uint64_t done, uint64_t total);
    void *progress_ud;
} deltafin_model_params;

deltafin_model_params deltafin_model_default_params(void);
int deltafin_model_load(const char *path, const deltafin_model_params *p, deltafin_model **out);
void deltafin_model_free(deltafin_model *m);

/* The memory plan the model was loaded with (docs/streaming.md): where the limit goes. */
typedef struct {
    uint64_t limit;              /* effective memory limit */
    bool limit_from_ram;         /* limit = available RAM - reserve */
    bool experts_stream;         /* routed experts are read from disk into the cache */
    uint64_t dense_bytes;        /* resident dense weights (+ layer buffers when they stream) */
    uint64_t kv_bytes;           /* KV cache (+ recurrent state) at the planned context */
    uint64_t scratch_bytes;      /* activations */
    uint64_t overhead_bytes;     /* runtime, I/O buffers, slack */
    uint64_t cache_bytes;        /* expert cache = n_slots * slot_bytes */
    uint64_t slot_bytes;         /* one expert cache slot */
    int n_slots;
    int n_experts_total;         /* (layer, expert) pairs */
    uint64_t expert_total_bytes; /* all routed experts as stored on disk */
    bool all_resident;           /* every expert has a slot */
    /* dense layers */
    int n_layer;
    int dense_layers_resident;   /* layers [0, n) keep their dense matrices */
    int dense_layers_streamed;   /* the others stream (0: all resident) */
    int dense_buffers;           /* layer buffers (2: double-buffered) */
    uint64_t dense_buffer_bytes; /* one layer buffer */
    uint64_t dense_total_bytes;  /* every dense tensor */
    uint64_t dense_global_bytes; /* always resident (embeddings, output, norms, routers) */
    uint64_t dense_layers_bytes; /* matrices of the resident layers */
    uint64_t dense_read_per_token; /* dense bytes read per forward pass */
    /* what it reserves for */
    int n_ctx;                   /* KV per sequence */
    int n_batch;                 /* prompt tokens per forward step (may be below the request) */
    int n_seq;                   /* sequences (contexts, server slots) */
} deltafin_plan;
/* DELTAFIN_OK; a model whose experts are resident has experts_stream false and no slots. */
int deltafin_model_plan(const deltafin_model *m, deltafin_plan *out);
/* Multi-line human-readable plan (what `run -v` and `info --mem-limit` print). */
const char *deltafin_model_plan_str(const deltafin_model *m, char *buf, size_t cap);
/* One line on the dense layers: "dense: 3 of 8 layers resident (...), 5 streamed through 2
 * buffers of ..." or "dense: all 8 layers resident (...)". */
const char *deltafin_plan_dense_str(const deltafin_plan *p, char *buf, size_t cap);

/* Where the memory went, now: what each part of the plan holds and the process's RSS (`run -v`
 * prints it as "budget use"). other = peak RSS - the parts (code, libraries, the tokenizer, I/O
 * and thread buffers, allocator slack; what the plan's overhead term stands for). */
typedef struct {
    uint64_t dense_bytes;        /* resident dense weights + dense layer buffers */
    uint64_t experts_bytes;      /* resident routed experts (when they do not stream) */
    uint64_t cache_bytes;        /* the expert cache */
    uint64_t kv_bytes;           /* KV cache + recurrent state of the live contexts */
    uint64_t scratch_bytes;      /* their scratch */
    uint64_t rss_bytes, peak_rss_bytes;
    uint64_t plan_bytes;         /* what the plan assigned (its limit minus what it left free) */
    uint64_t limit;              /* the plan's limit */
    uint64_t locked_bytes;       /* memory locked by --mlock now (VmLck); 0 without it */
} deltafin_memory_use;
void deltafin_model_memory_use(const deltafin_model *m, deltafin_memory_use *out);
/* One line: "budget use: dense X, cache X, KV X, scratch X, other X = peak RSS X of the plan's X
 * (limit X)", then ", locked X" under --mlock. */
const char *deltafin_memory_use_str(const deltafin_memory_use *u, char *buf, size_t cap);

/* Streaming statistics of a model (all contexts together; cumulative since load). */
typedef struct {
    bool experts_stream;              /* false: routed experts are resident (fields below 0) */
    const char *io_engine;            /* read engine in use */
    int n_slots, n_hot;
    uint64_t slot_bytes, cache_bytes;
    uint64_t hits, misses, evictions;
    double hit_rate;
    uint64_t bytes_read;              /* expert payload read from disk */
    double read_gbps;                 /* bytes_read / io_busy */
    uint64_t io_busy_ns, wait_ns;     /* wall time with a read in flight; acquire blocked */
    int prefetch;                     /* DELTAFIN_PREFETCH_* */
    uint64_t prefetch_issued, prefetch_used, prefetch_wasted;
    double prefetch_accuracy;
    /* router look-ahead */
    int lookahead_mode;
    bool lookahead_active;
    int lookahead_depth;
    uint64_t lookahead_predicted, lookahead_correct, lookahead_issued, lookahead_used;
    uint64_t lookahead_wasted, lookahead_cancelled, boundary_gap_ns;
    double lookahead_accuracy;
    /* dense-layer streaming */
    bool dense_stream;
    int dense_layers_streamed;
    uint64_t dense_passes, dense_layer_reads, dense_layer_ready, dense_bytes_read, dense_wait_ns;
} deltafin_stream_stats;
int deltafin_model_stream_stats(const deltafin_model *m, deltafin_stream_stats *out);
/* One line ("cache 12/40 slots ... hit 83.1% read 1.23 GB at 2.1 GB/s ..."); "" if nothing
 * streams. */
const char *deltafin_stream_stats_str(const deltafin_stream_stats *st, char *buf, size_t cap);
/* The same as a JSON object text (run --json "stream", bench --json, --stats-file); the
 * caller frees. NULL when nothing streams. */
char *deltafin_stream_stats_json(const deltafin_stream_stats *st);
/* Per-layer expert counters (run -v): acquires that hit / missed, time blocked on reads.
 * DELTAFIN_ERR_INVALID if experts do not stream or layer is out of range. */
int deltafin_model_layer_stats(const deltafin_model *m, int layer, uint64_t *hits, uint64_t *misses,
                               uint64_t *wait_ns);
int deltafin_model_n_layer(const deltafin_model *m);
int deltafin_model_n_expert(const deltafin_model *m);

int deltafin_model_n_vocab(const deltafin_model *m);
int deltafin_model_n_ctx_train(const deltafin_model *m);
const char *deltafin_model_arch(const deltafin_model *m);
/* Value of a string metadata key (e.g. "general.name"), NULL if absent. */
const char *deltafin_model_meta_str(const deltafin_model *m, const char *key);
/* Bytes of all weight tensors as stored (dense + every routed expert in the file). */
uint64_t deltafin_model_size(const deltafin_model *m);
/* Elements of all weight tensors (llama.cpp's llama_model_n_params). */
uint64_t deltafin_model_n_params(const deltafin_model *m);
/* "ARCH SIZE TYPE", the model column of llama-bench (llama_model_desc): the architecture,
 * general.size_label (else "?B") and the type of the most weight bytes, e.g. "llama ?B Q8_0"
 * (llama.cpp names the file type instead: "Q4_K - Medium"). Returns buf. */
const char *deltafin_model_desc(const deltafin_model *m, char *buf, size_t cap);

/* ---- vocabulary ---------------------------------------------------------------------- */
/* Tokenize text. add_special: add BOS/EOS as the model's tokenizer says. parse_special:
 * recognize special-token text (e.g. "<|im_start|>"). Writes up to cap ids; returns the
 * number of ids the text needs (may exceed cap: call again with a larger buffer), or < 0. */
int deltafin_tokenize(const deltafin_model *m, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *ids, int cap);
/* Bytes of one token (special: render control tokens' text too). Returns length needed
 * (may exceed cap) or < 0. Not NUL-terminated. */
int deltafin_token_to_piece(const deltafin_model *m, int32_t id, bool special, char *buf, int cap);
bool deltafin_token_is_eog(const deltafin_model *m, int32_t id);
int32_t deltafin_token_bos(const deltafin_model *m); /* -1 if none */
int32_t deltafin_token_eos(const deltafin_model *m);

/* The vocabulary on its own (llama.cpp's llama_vocab): a model's, or one loaded from the
 * tokenizer keys of a GGUF without its tensors (a vocab-only file is enough). Immutable;
 * every function is thread-safe. */
typedef struct deltafin_vocab deltafin_vocab;
/* NULL if the model has no tokenizer; valid while the model lives. */
const deltafin_vocab *deltafin_model_vocab(const deltafin_model *m);
/* pre_override: use this pre-tokenizer instead of the file's tokenizer.ggml.pre (testing),
 * or NULL. */
int deltafin_vocab_load(const char *path, const char *pre_override, deltafin_vocab **out);
void deltafin_vocab_free(deltafin_vocab *v);
/* As deltafin_tokenize / deltafin_token_to_piece. */
int deltafin_vocab_tokenize(const deltafin_vocab *v, const char *text, size_t len, bool add_special,
                            bool parse_special, int32_t *ids, int cap);
/* One pass into a malloc'ed array (*ids, caller frees; NULL when empty): the count or < 0. */
int deltafin_vocab_tokenize_alloc(const deltafin_vocab *v, const char *text, size_t len,
                                  bool add_special, bool parse_special, int32_t **ids);
int deltafin_vocab_token_to_piece(const deltafin_vocab *v, int32_t id, bool special, char *buf, int cap);
typedef struct {
    const char *type;       /* "SPM" (sentencepiece) or "BPE" (byte-level BPE) */
    const char *pre;        /* pre-tokenizer in use ("" for SPM) */
    int n_tokens;
    int32_t bos, eos;       /* -1 if none */
    int n_eog;              /* end-of-generation ids */
    bool add_bos, add_eos;  /* what add_special adds */
    const int32_t *eog;     /* [n_eog] the end-of-generation ids (valid while the vocab lives) */
} deltafin_vocab_info;
void deltafin_vocab_get_info(const deltafin_vocab *v, deltafin_vocab_info *out);
/* ---- streaming detokenizer --------------------------------------------------------------
 * Turns generated token ids into text that is always whole, valid UTF-8, one token at a
 * time: the bytes of a character split across tokens are held back until it completes, and
 * bytes that can never form a character become U+FFFD (one per maximal invalid subpart, as
 * Python's errors="replace"). Concatenating every push and the final flush gives the
 * sanitized concatenation of the tokens' pieces.
 *
 *   deltafin_detok *d = deltafin_detok_create(m, false);
 *   for each generated id: n = deltafin_detok_push(d, id, &text); write(text, n);
 *   at the end:            n = deltafin_detok_flush(d, &text);      write(text, n);
 *   deltafin_detok_free(d);
 *
 * special: render control tokens' text (e.g. "<|im_end|>") instead of nothing.
 * push / flush return the number of bytes ready (>= 0; 0 when a character is still
 * incomplete) and point *text at them, or < 0 (an id outside the vocabulary; the state is
 * unchanged). The bytes live in the detokenizer and stay valid until its next call; they are
 * not NUL-terminated. No allocation after create. A detokenizer is one stream, used by one
 * thread at a time; reset starts a new stream (e.g. the next request) without reallocating.
 * create returns NULL (deltafin_errmsg() says why) when the model has no tokenizer or memory
 * is short. The model must outlive the detokenizer. */
typedef struct deltafin_detok deltafin_detok;
deltafin_detok *deltafin_detok_create(const deltafin_model *m, bool special);
int deltafin_detok_push(deltafin_detok *d, int32_t id, const char **text);
int deltafin_detok_flush(deltafin_detok *d, const char **text);
void deltafin_detok_reset(deltafin_detok *d);
void deltafin_detok_free(deltafin_detok *d);

/* ---- UTF-8 ------------------------------------------------------------------------------- */
/* Length of the longest prefix of s[0..n) made of complete, valid UTF-8 sequences (RFC 3629:
 * no overlong forms, surrogates or code points above U+10FFFF); s is valid iff it is n. */
size_t deltafin_utf8_valid_prefix(const char *s, size_t n);
/* Copy s[0..n) to out with every maximal invalid subpart replaced by U+FFFD, so the result
 * is valid UTF-8 (the same replacement as the streaming detokenizer). out needs 3 * n bytes;
 * it is not NUL-terminated. Returns the bytes written. */
size_t deltafin_utf8_sanitize(const char *s, size_t n, char *out);

/* ---- chat -------------------------------------------------------------------------------- */
typedef struct {
    const char *role;       /* "system", "user", "assistant", "tool" */
    const char *content;
    const char *tool_calls_json; /* assistant tool calls as OpenAI JSON array, or NULL */
    const char *tool_call_id;    /* for role "tool", or NULL */
    const char *name;            /* tool name for role "tool", or NULL */
} deltafin_chat_msg;

/* Render messages with the model's chat format (or `template_name` if not NULL, e.g.
 * "chatml", "qwen3", "kimi-k2", "llama3", "deepseek-v3", "gpt-oss", "mistral", "glm-4.6").
 * tools_json: OpenAI tools array or NULL. *out is malloc'ed (caller frees). */
/* DELTAFIN_OK if `name` is a built-in template of this build, else DELTAFIN_ERR_INVALID with a
 * message listing the built-in names (for tools that take --chat-template: refuse it at start). */
int deltafin_chat_template_check(const char *name);
int deltafin_chat_render(const deltafin_model *m, const char *template_name,
                         const deltafin_chat_msg *msgs, int n_msgs, const char *tools_json,
                         bool add_generation_prompt, char **out);

/* The same with the template given as Jinja text (a --chat-template-file), not by name. */
int deltafin_chat_render_template(const deltafin_model *m, const char *template_src, const deltafin_chat_msg *msgs,
                                  int n_msgs, const char *tools_json, bool add_generation_prompt, char **out);

/* ---- chat output: tool calls and reasoning (docs/server.md "Tool calls") ------------------
 * Each template family writes tool calls in its own syntax (Qwen3/Hermes <tool_call> JSON,
 * Qwen3-Coder/Qwen3.5 XML parameters, Kimi K2 and K3 sections, DeepSeek V3.1, gpt-oss Harmony
 * channels, GLM-4.5/4.6 <arg_key>/<arg_value>, Llama 3 JSON, Mistral [TOOL_CALLS]); a format
 * parses generated text into content, reasoning and OpenAI tool calls and builds the grammar
 * that makes a model write a call. Formats are immutable and thread-safe. */
typedef struct deltafin_chat_format deltafin_chat_format;
typedef struct {
    char *id;               /* the model's own call id where the format has one, else NULL */
    char *name;
    char *arguments;        /* a JSON object, as text */
} deltafin_tool_call;
typedef struct {
    char *content;          /* "" when none */
    char *reasoning;        /* "" when none */
    deltafin_tool_call *calls;
    int n_calls;
} deltafin_chat_output;
/* The format of the template a request is rendered with: template_name (a built-in name) wins,
 * else the family of template_src (a template's text), else of the model's own template; no
 * template at all: ChatML with Hermes calls. Never NULL. */
const deltafin_chat_format *deltafin_chat_format_for(const deltafin_model *m, const char *template_name,
                                                     const char *template_src);
const char *deltafin_chat_format_name(const deltafin_chat_format *f);
/* Special-token texts the generated text must keep (render these tokens' text while
 * detokenizing, or the parser cannot see them). NULL-terminated. */
const char *const *deltafin_chat_format_markers(const deltafin_chat_format *f);
/* The text a call starts with: the trigger of a lazy grammar (tool_choice "auto"). */
const char *deltafin_chat_format_trigger(const deltafin_chat_format *f);
/* The rendered prompt leaves the model inside its reasoning (e.g. it ends with "<think>"). */
bool deltafin_chat_format_in_reasoning(const deltafin_chat_format *f, const char *prompt);
/* The format must be parsed even without tools (gpt-oss: analysis and final channels). */
bool deltafin_chat_format_always_parse(const deltafin_chat_format *f);
/* Parse text[0..n). partial: for streaming, only what cannot change any more (content without
 * a tail that may start a marker, calls whose end arrived); every partial result is a prefix of
 * the final one. flags: DELTAFIN_PARSE_IN_REASONING (1, what a bool true gives: the prompt left
 * the model in its reasoning), DELTAFIN_PARSE_REASONING_AS_CONTENT (llama-server's
 * reasoning_format "none": the reasoning stays in the content as the model wrote it, gpt-oss's
 * analysis message with its markers). tools_json (may be NULL) types the values of key/value
 * formats. A malformed call stays content. Free *out with deltafin_chat_output_free. */
enum { DELTAFIN_PARSE_IN_REASONING = 1u, DELTAFIN_PARSE_REASONING_AS_CONTENT = 2u };
int deltafin_chat_output_parse(const deltafin_chat_format *f, const char *text, size_t n, bool partial, unsigned flags,
                               const char *tools_json, deltafin_chat_output *out);
void deltafin_chat_output_free(deltafin_chat_output *o);
/* GBNF forcing a call in format f: only_function NULL = any of the tools; parallel: one or
 * more calls; lazy: the grammar starts at deltafin_chat_format_trigger (for
 * deltafin_grammar_set_triggers). *gbnf is malloc'ed. DELTAFIN_ERR_INVALID when only_function
 * is not among the tools. */
int deltafin_chat_tool_grammar(const deltafin_chat_format *f, const char *tools_json, const char *only_function,
                               bool parallel, bool lazy, char **gbnf);
/* ---- gpt-oss Harmony output channels ------------------------------------------------------
 * Splits generated text (detokenized with special tokens rendered) into what llama-server's
 * reasoning format makes of it: the analysis channel is reasoning, final and commentary
 * preambles are content, a message with a recipient (" to=functions.NAME") is a tool call;
 * headers and end markers are dropped. Streaming: pieces may end inside a marker. */
enum { DELTAFIN_CH_CONTENT = 1, DELTAFIN_CH_REASONING = 2, DELTAFIN_CH_TOOL = 3 };
typedef void (*deltafin_harmony_sink)(void *ud, int channel, const char *text, size_t n);
typedef struct deltafin_harmony deltafin_harmony;
deltafin_harmony *deltafin_harmony_create(void);   /* NULL when out of memory */
void deltafin_harmony_push(deltafin_harmony *h, const char *text, size_t n, deltafin_harmony_sink sink, void *ud);
void deltafin_harmony_flush(deltafin_harmony *h, deltafin_harmony_sink sink, void *ud); /* end of a stream */
void deltafin_harmony_reset(deltafin_harmony *h);
void deltafin_harmony_free(deltafin_harmony *h);

/* ---- context (one sequence) ------------------------------------------------------------ */
typedef struct {
    int n_ctx;              /* <= 0: min(training context, 4096) */
    int n_batch;            /* prompt tokens per forward step (default 512) */
    int n_threads;          /* <= 0: the model's */
} deltafin_ctx_params;

deltafin_ctx_params deltafin_ctx_default_params(void);
int deltafin_ctx_create(deltafin_model *m, const deltafin_ctx_params *p, deltafin_ctx **out);
void deltafin_ctx_free(deltafin_ctx *c);
int deltafin_ctx_n_ctx(const deltafin_ctx *c);
int deltafin_ctx_n_batch(const deltafin_ctx *c);
int deltafin_ctx_n_threads(const deltafin_ctx *c);
/* Number of tokens in the cache (next position). */
int deltafin_ctx_pos(const deltafin_ctx *c);
/* Drop cached tokens from position pos on (pos <= current); for reuse across chat turns. */
int deltafin_ctx_truncate(deltafin_ctx *c, int pos);

/* Run the model on n tokens appended at the current position, in batches. If all_logits,
 * logits for every token are kept (perplexity); otherwise only for the last one.
 * Returns DF_OK or < 0 (context full, cancelled, I/O error ...). */
int deltafin_decode(deltafin_ctx *c, const int32_t *ids, int n, bool all_logits);
/* ---- multi-sequence batches -------------------------------------------------------------
 * Several sequences (contexts of one model) decoded together, as llama.cpp's llama_batch with
 * sequence ids: each forward pass carries tokens of several sequences, so every layer's dense
 * weights are read once per pass and each routed expert is acquired once for the union of
 * all sequences' routing (under --mem-limit: one disk read where separate decodes would read
 * it once per sequence). Attention, the KV cache and recurrent state stay per sequence.
 *
 * The result is bit for bit that of calling deltafin_decode(ctx, ids, n, all_logits) for each
 * sequence on its own: a sequence's tokens run in the same chunks of its ctx's n_batch, and
 * every choice a kernel makes by the number of tokens it sees (tinyBLAS for F32, ggml's gemm
 * order for repacked rows, llama.cpp's tiled attention from 64 queries) is made per sequence.
 * Prompt chunks and single generated tokens of different sequences may share a pass
 * (continuous batching): give each sequence the tokens it has now.
 *
 * A pass holds at most n_batch tokens of the context with the largest n_batch (the lead: the
 * pass runs on its scratch and threads); the call runs as many passes as its tokens need, each
 * taking the next chunk of every unfinished sequence that still fits, in order. A caller that
 * wants a bound on each call's latency (a server's step) gives it at most one pass's worth.
 * Each context may appear once per call and is used by this call only (one thread).
 * deltafin_ctx_cancel on a sequence of a running call stops it only when every sequence of the
 * pass under way is cancelled (then DELTAFIN_ERR_CANCELLED); otherwise the cancelled
 * sequence's tokens are decoded with the others' and the caller drops it afterwards. When the
 * call fails, every sequence is as it was before the call (recurrent state rebuilt as after a
 * failed deltafin_decode); the caller may retry, e.g. without the sequence that failed. A lead
 * of several sequences allocates, once, room for their logits rows (n_vocab floats each). */
typedef struct {
    deltafin_ctx *ctx;      /* the sequence; tokens go at deltafin_ctx_pos(ctx) */
    const int32_t *ids;
    int n;                  /* >= 1 */
    bool all_logits;        /* as deltafin_decode: logits for every token, else for the last */
} deltafin_batch_seq;
/* What a call did (for statistics; all counts summed over its passes). */
typedef struct {
    int n_passes;                   /* forward passes run (dense weights read once each) */
    int n_seq_passes;               /* Σ sequences per pass: the passes separate decodes of the
                                     * same chunks would have run */
    int n_tokens;
    uint64_t expert_acquires;       /* routed experts acquired: per MoE layer, the union */
    uint64_t expert_acquires_alone; /* what separate decodes would have acquired: Σ per sequence */
} deltafin_batch_info;
/* DELTAFIN_OK or < 0 (nothing given, a context twice or of another model, a context full, a
 * token out of range: checked before anything runs; cancelled, I/O error ...). info may be
 * NULL. Logits: deltafin_logits(seqs[i].ctx, ...) as after deltafin_decode. */
int deltafin_decode_batch(const deltafin_batch_seq *seqs, int n_seqs, deltafin_batch_info *info);
/* Logits of the i-th token of the last decode call (i = -1: the last). n_vocab floats. */
const float *deltafin_logits(const deltafin_ctx *c, int i);
/* Embedding of n tokens decoded at the ctx's current position (deltafin_ctx_truncate(c, 0)
 * first for a text on its own): the mean over the tokens of the final hidden state after the
 * output norm (llama.cpp's --pooling mean for a causal model), L2-normalized when normalize (as
 * llama-server's /v1/embeddings). out: deltafin_model_n_embd floats. The tokens stay in the KV
 * cache; no logits are computed. */
int deltafin_embed(deltafin_ctx *c, const int32_t *ids, int n, bool normalize, float *out);
int deltafin_model_n_embd(const deltafin_model *m);
/* Set from another thread (or a signal handler) to stop a running decode with
 * DF_ERR_CANCELLED. Cleared by the next decode. */
void deltafin_ctx_cancel(deltafin_ctx *c);

/* Per-context statistics (cumulative since create). */
typedef struct {
    uint64_t n_prompt_tokens, n_gen_tokens;
    uint64_t prompt_ns, gen_ns;
    uint64_t expert_hits, expert_misses;
    uint64_t bytes_read;         /* from disk: routed experts + streamed dense layers */
    uint64_t io_wait_ns, compute_ns; /* io_wait_ns includes dense_wait_ns */
    /* streamed dense layers (--mem-limit below the dense weights; model-wide, all contexts) */
    uint64_t dense_bytes_read, dense_wait_ns;
} deltafin_stats;
void deltafin_ctx_stats(const deltafin_ctx *c, deltafin_stats *out);
/* Routing statistics (MoE models; `deltafin profile`). deltafin_ctx_count_routes turns them on
 * (or zeroes them): from then on every decode adds 1 to counts[layer * n_expert + expert] for
 * each token the router sends to that expert (n_expert_used per token and MoE layer; dense
 * layers stay 0). deltafin_ctx_route_counts points *counts at that array (valid until the ctx
 * is freed). Both return DF_OK or < 0 (no routed experts / not turned on). */
int deltafin_ctx_count_routes(deltafin_ctx *c);
int deltafin_ctx_route_counts(const deltafin_ctx *c, const uint32_t **counts, int *n_layer, int *n_expert);

/* Routing trace (`deltafin profile --trace`): fn is called once per MoE layer and forward pass
 * with the experts chosen for each of the pass's n_tokens rows (experts[t * k + j], k =
 * n_expert_used, in the router's order; -1 for a slot dropped by the lossy modes below). Called on the decoding thread; NULL turns it off. */
int deltafin_ctx_set_route_trace(deltafin_ctx *c,
                                 void (*fn)(void *ud, int layer, int n_tokens, int k, const int32_t *experts),
                                 void *ud);

/* Matmul observer (`deltafin imatrix`, calibration, debugging): fn is called before every
 * product of a model weight with activations in this ctx's forward passes, with the weight's
 * GGUF name and the F32 input rows the product reads (before any activation quantization):
 *  - a plain matmul (attention projections, dense and shared-expert FFN, routers, output):
 *    matrix 0 of n_matrix 1, every row of the pass;
 *  - a routed expert (ggml's MUL_MAT_ID): per_expert, matrix = the expert, n_matrix = the
 *    experts of the tensor, the rows routed to it (a fused gate_up tensor is reported once);
 *  - a per-head product of a 3-D weight (MLA's attn_k_b / attn_v_b): matrix = the head.
 * Called on the decoding thread; the rows are valid during the call only. Off (NULL) by
 * default, when it costs one test per matmul. In a deltafin_decode_batch pass the observer of
 * the pass's lead ctx is called. */
typedef struct {
    const char *tensor;        /* "blk.3.ffn_down_exps.weight" */
    int matrix, n_matrix;      /* which matrix of the weight, of how many */
    bool per_expert;           /* a routed expert's rows */
    int n_in;                  /* values per input row (the weight's ne[0]) */
    int n_rows;
    const float *x;            /* row r at x + r * ldx */
    int64_t ldx;
} deltafin_matmul_info;
typedef void (*deltafin_matmul_fn)(void *ud, const deltafin_matmul_info *mm);
int deltafin_ctx_set_matmul_observer(deltafin_ctx *c, deltafin_matmul_fn fn, void *ud);

/* Opt-in lossy routing: fewer expert reads for a changed output (docs/streaming.md "lossy
 * routing"). All fields 0 = off: the model's own routing, tokens unchanged.
 *  experts_per_token N: the N best of the router's top-k, weights computed over those N as the
 *    model would with n_expert_used = N (llama.cpp --override-kv ARCH.expert_used_count=int:N);
 *  expert_top_p P in (0, 1]: per token, the smallest prefix of the chosen experts (router order)
 *    whose share of the routing weight reaches P; the kept weights are scaled to the full sum;
 *  cache_aware M in (0, 1): a chosen expert that is not in the expert cache is replaced by a
 *    cached one the router scored within the relative margin M of it (raw-logit routers: within
 *    log(1 - M) in logit). */
typedef struct {
    int experts_per_token;
    float expert_top_p;
    float cache_aware;
} deltafin_routing;
int deltafin_ctx_set_routing(deltafin_ctx *c, const deltafin_routing *r);
/* Counters since create: (token, slot) pairs routed, dropped by experts_per_token/top-p, moved
 * to a cached expert. */
void deltafin_ctx_routing_stats(const deltafin_ctx *c, uint64_t *slots, uint64_t *dropped, uint64_t *swapped);

/* ---- sampling (llama.cpp's sampler chain, common/sampling.cpp) ---------------------------
 * A sampler turns logits into a token id through llama.cpp's chain, with its math and order:
 *   logit bias -> the stages of `samplers` in order -> dist (a random draw)
 * (default order: penalties dry top_n_sigma top_k typ_p top_p min_p xtc temperature), or,
 * with mirostat 1 or 2: logit bias -> temperature -> mirostat (the other stages are not run,
 * as in llama.cpp). A stage left at its "off" value changes nothing. temp <= 0 keeps only the
 * best candidate where the temperature stage stands (greedy when that stage is in the chain;
 * ties: the lowest id). Stages:
 *   penalties    repeat (divide positive / multiply negative logits), frequency (count times)
 *                and presence (once) penalties over the last repeat_last_n accepted ids;
 *   dry          DRY: a token that would extend a repeat of the recent text (the last
 *                dry_penalty_last_n ids) longer than dry_allowed_length loses
 *                dry_multiplier * dry_base^(length - allowed); a sequence breaker stops repeats;
 *   top_n_sigma  keep logits >= max - top_n_sigma * (standard deviation of the finite logits);
 *   top_k, typ_p (locally typical), top_p, min_p: truncations, each keeping >= min_keep;
 *   xtc          with probability xtc_probability, drop every token of probability >=
 *                xtc_threshold but the least probable of them;
 *   temperature  divide the logits by temp.
 * The RNG is xoshiro256** (not llama.cpp's mt19937): the same seed gives the same tokens here
 * on every machine, not the same tokens as llama.cpp (greedy outputs are comparable). */
typedef struct {
    int32_t token;
    float bias;             /* added to the token's logit; -INFINITY bans it */
} deltafin_logit_bias;

/* The stages of the chain, llama.cpp's common_sampler_type names (deltafin_sampler_type_name). */
typedef enum {
    DELTAFIN_SAMPLER_PENALTIES, DELTAFIN_SAMPLER_DRY, DELTAFIN_SAMPLER_TOP_N_SIGMA,
    DELTAFIN_SAMPLER_TOP_K, DELTAFIN_SAMPLER_TYPICAL_P, DELTAFIN_SAMPLER_TOP_P, DELTAFIN_SAMPLER_MIN_P,
    DELTAFIN_SAMPLER_XTC, DELTAFIN_SAMPLER_TEMPERATURE, DELTAFIN_SAMPLER_N_TYPES
} deltafin_sampler_type;
enum { DELTAFIN_SAMPLER_MAX_CHAIN = 32 };

typedef struct {
    float temp;             /* 0.8; <= 0: greedy */
    int top_k;              /* 40; <= 0 disables */
    float top_p;            /* 0.95; 1 disables */
    float min_p;            /* 0.05; 0 disables */
    float repeat_penalty;   /* 1.0 (disabled) */
    int repeat_last_n;      /* 64 (0 disables the penalties) */
    float freq_penalty;     /* 0 */
    float presence_penalty; /* 0 */
    uint64_t seed;          /* UINT64_MAX: random */
    /* logit bias, applied before every other stage (llama.cpp's order); copied by create */
    const deltafin_logit_bias *logit_bias;
    int n_logit_bias;
    int min_keep;           /* 0: truncations keep at least this many candidates */
    float typical_p;        /* 1.0 disables */
    float top_n_sigma;      /* -1; <= 0 disables */
    float xtc_probability;  /* 0 disables */
    float xtc_threshold;    /* 0.1; > 0.5 disables */
    int mirostat;           /* 0 off, 1 Mirostat, 2 Mirostat 2.0 */
    float mirostat_tau;     /* 5.0: target entropy (--mirostat-ent) */
    float mirostat_eta;     /* 0.1: learning rate (--mirostat-lr) */
    float dry_multiplier;   /* 0 disables */
    float dry_base;         /* 1.75; < 1 disables */
    int dry_allowed_length; /* 2 */
    int dry_penalty_last_n; /* 64; 0 disables */
    /* DRY sequence breakers as text, matched over the tokens' text with `vocab` (needed when
     * DRY is on and there is a breaker): -1 (default) = llama.cpp's "\n" ":" "\"" "*"; 0 = none */
    const char *const *dry_sequence_breakers;
    int n_dry_sequence_breakers;
    const deltafin_vocab *vocab;
    /* the stages in order (repeats allowed); the default is llama.cpp's order above */
    int samplers[DELTAFIN_SAMPLER_MAX_CHAIN];
    int n_samplers;
} deltafin_sampler_params;

/* llama.cpp's name of a stage ("top_k", "typ_p", ...), NULL when out of range. */
const char *deltafin_sampler_type_name(int type);
/* Set p->samplers from llama.cpp's --samplers text ("top_k;top_p;temperature": names separated
 * by ';', case-insensitive, with llama.cpp's aliases "top-k", "topk", "nucleus", "temp", "typ"
 * ...) or, with chars, from --sampler-seq's letters ("kfypmxt": e penalties, d dry, s
 * top_n_sigma, k top_k, y typ_p, p top_p, m min_p, x xtc, t temperature). An unknown name is
 * DELTAFIN_ERR_INVALID naming it (p unchanged). */
int deltafin_sampler_parse_order(const char *text, bool chars, deltafin_sampler_params *p);
/* "TOKEN(+|-)BIAS" as llama.cpp's --logit-bias (15043+1, 15043-inf): the pair, or
 * DELTAFIN_ERR_INVALID. */
int deltafin_logit_bias_parse(const char *text, deltafin_logit_bias *out);

deltafin_sampler_params deltafin_sampler_default_params(void);
deltafin_sampler *deltafin_sampler_create(const deltafin_sampler_params *p);
void deltafin_sampler_free(deltafin_sampler *s);
/* Choose the next token from logits (n_vocab). Does not modify logits. */
int32_t deltafin_sampler_sample(deltafin_sampler *s, const float *logits, int n_vocab);
/* Record an accepted token (prompt tokens too) for the penalty history. */
void deltafin_sampler_accept(deltafin_sampler *s, int32_t id);
/* The chain as llama.cpp's `sampler chain:` line prints it ("logits -> logit-bias ->
 * penalties -> ... -> dist"; stages that change nothing are left out). Returns the length
 * (snprintf's contract). */
int deltafin_sampler_describe(const deltafin_sampler *s, char *buf, size_t cap);
/* Probability of the chosen token and top alternatives of the last sample() (for logprobs):
 * fills up to n (id, logprob) pairs sorted by probability, returns the count. */
int deltafin_sampler_top(const deltafin_sampler *s, int n, int32_t *ids, float *logprobs);
/* Constrain sampling with a grammar (below); the sampler owns g from now on (freed with it;
 * NULL detaches and frees the one attached). Every token accepted after this call advances the
 * grammar, so attach it after accepting the prompt's tokens (they feed the penalties only).
 * sample() then returns only tokens the grammar allows (the chain's choice when allowed, else
 * the chain run again over the allowed tokens; -1 with an error when none is); end-of-
 * generation ids are allowed exactly when the grammar may end. */
int deltafin_sampler_set_grammar(deltafin_sampler *s, deltafin_grammar *g);

/* ---- grammars (llama.cpp's GBNF; docs/server.md "Constrained output") ---------------------
 * A grammar is one generation's constraint, compiled for a vocabulary: rules in llama.cpp's
 * GBNF syntax (its grammars work unchanged: literals, classes, groups, * + ? {m,n}, <token>
 * and <[id]> elements), matched over the tokens' text as llama.cpp's sampler does (control
 * tokens by their text). Errors name line:column. The vocabulary must outlive the grammar. */
/* Compile gbnf (root: the start rule, "root" when NULL) for vocabulary v. */
int deltafin_grammar_create(const deltafin_vocab *v, const char *gbnf, const char *root, deltafin_grammar **out);
/* Parse only (no vocabulary: <text> token elements are an error): for validating input early. */
int deltafin_grammar_check(const char *gbnf, const char *root);
void deltafin_grammar_free(deltafin_grammar *g);
/* Lazy grammar: unconstrained until one of the words appears in the accepted tokens' text,
 * then constrained from the start of that word (e.g. "<tool_call>"). Call before sampling. */
int deltafin_grammar_set_triggers(deltafin_grammar *g, const char *const *words, int n);
/* Advance over an accepted token (DELTAFIN_ERR_INVALID if the grammar does not allow it). */
int deltafin_grammar_accept(deltafin_grammar *g, int32_t id);
bool deltafin_grammar_allows(deltafin_grammar *g, int32_t id);
/* Set every disallowed logit to -INFINITY; returns the number allowed (0: none) or < 0. */
int deltafin_grammar_apply(deltafin_grammar *g, float *logits, int n_vocab);
/* The grammar is complete: only end-of-generation can follow. */
bool deltafin_grammar_done(const deltafin_grammar *g);
/* Constraining now (false while a lazy grammar awaits its trigger, or after it gave up). */
bool deltafin_grammar_active(const deltafin_grammar *g);
/* A JSON schema (the common subset: type, properties, required, additionalProperties, enum,
 * const, items, prefixItems, minItems/maxItems, minLength/maxLength, anyOf/oneOf/allOf, local
 * $ref, format date/time/date-time/uuid) as a GBNF grammar whose start rule is "root", in
 * llama.cpp's json-schema-to-grammar style; *out is malloc'ed. Keywords it cannot express
 * (pattern, numeric bounds) are not enforced. DELTAFIN_ERR_FORMAT naming what is wrong. */
int deltafin_json_schema_to_grammar(const char *schema_json, char **out);

/* ---- tensor types ------------------------------------------------------------------------ */
/* GGUF (ggml) type ids: "Q4_K", "q8_0", "F16" ... -> id; DELTAFIN_ERR_INVALID naming it. */
int deltafin_type_from_name(const char *name);
const char *deltafin_type_name(int type);  /* "?" for an unknown id */
int deltafin_type_count(void);             /* ids are 0 .. count - 1 */
bool deltafin_type_can_quantize(int type); /* a quantizer exists (deltafin_quantize targets) */

/* ---- model files: quantize, pack, verify ------------------------------------------------- */
/* Convert a GGUF's weight matrices to other types, tensor by tensor (memory: one chunk of rows,
 * not the model), as llama-quantize (d32676d) does with the same recipe: the recipes are its
 * names ("Q4_K_M", "IQ2_XXS", "MXFP4_MOE", "Q8_0", "F16" ... — deltafin_quantize_recipe), each
 * tensor gets the type llama-quantize gives it (its mixtures by tensor, layer and model shape,
 * only >= 2-D tensors named *weight, norms / routers / position embeddings copied, rows the
 * block size does not divide falling back), and the tensor data are byte-identical to
 * llama-quantize's, with or without an importance matrix. Writes OUT.tmp and renames it on
 * success (nothing named OUT on failure; nothing at all for a dry run). */
typedef struct {
    int index, n_tensors;   /* its place in the file (0-based), of how many */
    const char *name;       /* the tensor's GGUF name */
    int n_dims;
    int64_t ne[4];
    int type_in, type_out;  /* type_out == type_in: copied */
    uint64_t bytes_in, bytes_out;
    bool imatrix;           /* quantized with importance weights */
} deltafin_quantize_tensor;
typedef struct {
    int n_threads;          /* <= 0: all cores */
    int recipe;             /* deltafin_quantize_recipe(): llama-quantize's recipe (ftype) */
    int type_experts;       /* 3-D weights: routed experts, deepseek2 attn_k_b/v_b; < 0: the recipe's */
    int type_dense;         /* every other weight matrix but the output and token embeddings; < 0: the recipe's */
    int output_type;        /* output.weight (--output-tensor-type); < 0: the recipe's */
    int token_embd_type;    /* token_embd.weight (--token-embedding-type); < 0: the recipe's */
    bool pure;              /* no mixture: every matrix in the recipe's type (--pure) */
    bool leave_output;      /* output.weight copied as it is (--leave-output-tensor) */
    bool allow_requantize;  /* convert tensors that are already quantized (else refused) */
    bool dry_run;           /* plan and report sizes only; write nothing */
    const char *imatrix;    /* importance matrix file (llama-imatrix's GGUF or legacy .dat), or NULL */
    /* called as tensors are read (bytes of the input done / total); NULL = none */
    void (*progress_cb)(void *ud, const char *tensor, uint64_t done, uint64_t total);
    void *progress_ud;
    /* called once per tensor, in file order, with its conversion (a dry run: as planned) */
    void (*tensor_cb)(void *ud, const deltafin_quantize_tensor *t);
    void *tensor_ud;
} deltafin_quantize_params;
typedef struct {
    int n_converted, n_copied;
    int n_fallback;         /* tensors given another type because the block does not divide the row */
    int imatrix_entries;    /* entries of the importance matrix (0: none) */
    bool needs_imatrix;     /* a dry run without --imatrix whose real run would need one */
    uint64_t bytes_in, bytes_out;
    int64_t n_elements;
} deltafin_quantize_result;
deltafin_quantize_params deltafin_quantize_default_params(void); /* recipe Q8_0 */
/* The recipe id of a llama-quantize recipe name (case-insensitive) or ftype number; -1 if
 * unknown. deltafin_quantize_recipe_info(i, ...) walks the list (i = 0, 1, ... until it returns
 * false): name, llama-quantize's description and its ftype (general.file_type; -1 for COPY,
 * which keeps the input's, and deltafin's MXFP4: neither is chosen by number). */
int deltafin_quantize_recipe(const char *name);
bool deltafin_quantize_recipe_info(int i, const char **name, const char **desc, int *ftype);
/* DELTAFIN_ERR_INVALID for a recipe or type that cannot be a target (before anything is
 * opened); DELTAFIN_ERR_UNSUPPORTED for a tensor that cannot be converted; DELTAFIN_ERR_INVALID
 * naming the tensor for an already-quantized input without allow_requantize and for a recipe
 * that needs an importance matrix without one (IQ1_*, IQ2_*, IQ3_XXS, Q2_K_S: llama-quantize's
 * rule); I/O and format errors name the file. res may be NULL. */
int deltafin_quantize(const char *in_path, const char *out_path, const deltafin_quantize_params *p,
                      deltafin_quantize_result *res);

/* ---- importance matrices (llama-imatrix's files) ---------------------------------------- */
/* The mean square of each input column of every weight matrix over a text (per expert for
 * routed experts): what llama-imatrix collects and llama-quantize's i-quants and k-quants
 * weigh their rounding with. */
typedef struct deltafin_imatrix deltafin_imatrix;
/* An empty collector for chunks of chunk_size tokens; process_output: also output.weight. */
int deltafin_imatrix_new(int chunk_size, bool process_output, deltafin_imatrix **out);
/* Read llama-imatrix's GGUF format (per tensor NAME.in_sum2 [ne0, n_mat] and NAME.counts
 * [1, n_mat], imatrix.* keys) or its legacy .dat format; DELTAFIN_ERR_FORMAT naming the problem. */
int deltafin_imatrix_load(const char *path, deltafin_imatrix **out);
/* Collect c's forward passes into im (through deltafin_ctx_set_matmul_observer), with
 * llama-imatrix's rules: every routed-expert product, and the plain products of blk.* weights
 * (output.weight with process_output) over at least 16 rows; squares summed per column, one
 * count per row (per expert: per routed row). im NULL detaches. */
int deltafin_imatrix_attach(deltafin_imatrix *im, deltafin_ctx *c);
/* Record the text the data came from (imatrix.datasets). */
int deltafin_imatrix_add_dataset(deltafin_imatrix *im, const char *name);
/* Entries, and chunks covered (largest count / chunk size, llama-imatrix's chunk_count). */
int deltafin_imatrix_n_entries(const deltafin_imatrix *im);
int deltafin_imatrix_chunks(const deltafin_imatrix *im);
/* Entry i (0 <= i < n_entries, in the order read or first seen): the weight's name, its sums
 * (nval values: ne0 per matrix) and counts (n_counts: one, or one per expert); false past the end. */
bool deltafin_imatrix_entry(const deltafin_imatrix *im, int i, const char **name, const float **sums, int64_t *nval,
                            const int64_t **counts, int *n_counts);
/* A collection error (a non-finite sum, a tensor seen with two shapes), or DELTAFIN_OK. */
int deltafin_imatrix_status(const deltafin_imatrix *im);
/* Write as llama-imatrix does (GGUF, or the legacy .dat format with legacy), via PATH.tmp. */
int deltafin_imatrix_save(const deltafin_imatrix *im, const char *path, bool legacy);
void deltafin_imatrix_free(deltafin_imatrix *im);

/* Rewrite a model into the expert-major streaming layout (docs/pack-format.md): one 4 KiB-
 * aligned record per (layer, expert) with an XXH64 checksum, and (version 2) an XXH64 of the
 * header, of every dense tensor and of the index. Writes OUT.tmp, renamed when complete. The
 * packer draws its own progress on stderr (bar or lines). */
enum { DELTAFIN_PROGRESS_NONE = 0, DELTAFIN_PROGRESS_BAR = 1, DELTAFIN_PROGRESS_LINES = 2 };
typedef struct {
    int progress;           /* DELTAFIN_PROGRESS_* */
    uint64_t fail_after;    /* testing: fail after this many records (0 = never) */
    int version;            /* pack version to write (0 = the current one, 2; 1 = records only,
                             * for testing readers of old files) */
} deltafin_pack_params;
int deltafin_pack(const char *in_path, const char *out_path, const deltafin_pack_params *p);
/* Read every part of a packed file (header, dense tensors, index, records) and check its
 * checksum; the first mismatch is DELTAFIN_ERR_CHECKSUM naming the tensor or layer and expert,
 * the file and the offset. *n_records: expert records checked; *version (may be NULL): the
 * file's pack version (1: only the records carry checksums). */
int deltafin_pack_check(const char *path, uint64_t *n_records, int *version);

/* Open a GGUF (every part of a split model) and validate its header and tensor table; *packed
 * says whether it is a packed model. */
int deltafin_file_check(const char *path, bool *packed);
/* The same for exactly one file (one part of a split model on its own, whatever its name, e.g.
 * a download's PATH.part): magic, header, metadata, tensor table, every tensor inside the file. */
int deltafin_file_check_one(const char *path);
/* One checked part of a packed model, as deltafin_pack_verify checked it. */
enum {
    DELTAFIN_PACK_PART_EXPERT = 0,   /* one (layer, expert) record */
    DELTAFIN_PACK_PART_HEADER = 1,   /* header, metadata and tensor table (file bytes [0, data start)) */
    DELTAFIN_PACK_PART_TENSOR = 2,   /* a dense tensor, or a chunk of a large one */
    DELTAFIN_PACK_PART_INDEX = 3,    /* the expert index (offsets and checksums of the records) */
    DELTAFIN_PACK_PART_TABLE = 4,    /* the checksum table itself */
};
typedef struct {
    int kind;               /* DELTAFIN_PACK_PART_* */
    int layer, expert;      /* EXPERT */
    const char *tensor;     /* TENSOR, INDEX, TABLE: the tensor's name */
    uint64_t tensor_offset; /* TENSOR: where the chunk starts inside the tensor */
    uint64_t tensor_bytes;  /* TENSOR: the whole tensor's size */
    const char *path;       /* the file holding it */
    uint64_t offset, nbytes;
    int status;             /* DELTAFIN_OK, DELTAFIN_ERR_IO (unreadable), DELTAFIN_ERR_CHECKSUM, or
                             * DELTAFIN_ERR_FORMAT (TABLE: it does not fit the tensor table) */
    const char *error;      /* IO / FORMAT: what went wrong ("truncated: ..." when the file is short) */
    uint64_t xxh64, xxh64_expected;
    uint64_t done, total;   /* bytes checked so far / to check */
} deltafin_pack_record;
typedef struct {
    int version;            /* pack version of the file */
    uint64_t n_ok, n_bad;   /* parts checked (every kind) */
    uint64_t n_records;     /* expert records among them */
    int n_tensors;          /* dense tensors checked (version 2) */
    uint64_t tensor_bytes;  /* their bytes */
    uint64_t header_bytes;  /* header and tensor table */
    /* what the file leaves unprotected (version 1: header, index and dense tensors) */
    uint64_t unprotected_bytes;
    int unprotected_tensors;
} deltafin_pack_verify_result;
/* Check every part (not only up to the first bad one): the checksum table, the header, every
 * dense tensor and the index (version 2), then every expert record; cb (may be NULL) sees each
 * part after it was read and returns 0 to go on. Returns DELTAFIN_OK with the counts, or < 0
 * when the pack index itself is unusable. */
int deltafin_pack_verify(const char *path, int (*cb)(void *ud, const deltafin_pack_record *r), void *ud,
                         deltafin_pack_verify_result *res);

/* ---- several processes or machines: experts spread over MPI ranks (docs/distributed.md) ---
 * Under `mpirun -np N deltafin ...` rank 0 runs the command as usual and ranks 1..N-1 each
 * hold a share of every MoE layer's routed experts (their own expert store under their own
 * memory limit) and compute it on the hidden states rank 0 sends; tokens are the same for
 * every N. A build without MPI (make without MPI=1) is always one process. */
typedef struct {
    double timeout_s;        /* a worker that does not answer within this ends the run (default 60) */
    const char *placement;   /* a `deltafin profile` file: experts placed by load; NULL: round robin */
} deltafin_dist_params;
deltafin_dist_params deltafin_dist_default_params(void);
/* Joins the MPI job when an MPI launcher (mpirun, srun) started this process, else does
 * nothing. Call once at start (argc/argv may be NULL); p may be NULL. */
int deltafin_dist_init(int *argc, char ***argv, const deltafin_dist_params *p);
bool deltafin_dist_built(void);          /* this library was built with MPI */
int deltafin_dist_rank(void);            /* 0 outside a job */
int deltafin_dist_size(void);            /* 1 outside a job */
const char *deltafin_dist_library(void); /* "Open MPI v4.1.4" or why there is none */
/* Ranks > 0: load path's share of the routed experts with p (memory limit, cache, I/O engine,
 * prefetch, hot set, threads) and compute rank 0's requests until rank 0 is done. Returns
 * DELTAFIN_OK, or < 0 (also reported to rank 0, which fails the load naming this rank). */
int deltafin_dist_worker(const char *path, const deltafin_model_params *p);
/* Leaves the job (rank 0 stops the workers first). After a fault — a worker that did not
 * answer within the timeout — the whole job is aborted instead and this does not return.
 * Returns status; a no-op outside a job. */
int deltafin_dist_finalize(int status);

/* Communication statistics of a distributed model (rank 0; cumulative since load). rtt: from
 * sending a layer's rows to the last owner's answer; wait: rank 0 blocked after its own
 * experts; comm: rtt minus the owner's own compute and I/O time (network, MPI, queueing). */
typedef struct {
    int n_rank;                 /* 1: not distributed (everything below 0) */
    const char *placement;      /* "round-robin" | "balanced by FILE" */
    uint64_t exchanges;         /* MoE layers that needed another rank */
    uint64_t messages, bytes_out, bytes_in;
    uint64_t rtt_ns, wait_ns, comm_ns;
} deltafin_dist_stats;
int deltafin_model_dist_stats(const deltafin_model *m, deltafin_dist_stats *out);
/* One MoE layer's share of the above. DELTAFIN_ERR_INVALID if not distributed / bad layer. */
int deltafin_model_dist_layer_stats(const deltafin_model *m, int layer, uint64_t *calls, uint64_t *bytes_out,
                                    uint64_t *bytes_in, uint64_t *rtt_ns, uint64_t *wait_ns, uint64_t *comm_ns);
/* Each rank's expert cache and work (asks the workers: call between decodes). */
typedef struct {
    int rank, n_slots, engine;
    uint64_t pairs;                    /* (layer, expert) pairs it owns */
    uint64_t requests, rows, busy_ns;  /* requests computed, expert rows, time receipt -> reply */
    uint64_t hits, misses, bytes_read, io_busy_ns, wait_ns, cache_bytes;
    double read_gbps;
    char host[64];
} deltafin_dist_rank_stats;
/* Fills up to cap rows (rank order); returns the number of ranks or < 0. */
int deltafin_model_dist_rank_stats(deltafin_model *m, deltafin_dist_rank_stats *out, int cap);
/* All of it as one JSON object text ({"ranks", "placement", totals, "layers": [...],
 * "per_rank": [...]}); the caller frees. NULL when not distributed. */
char *deltafin_model_dist_json(deltafin_model *m);

#ifdef __cplusplus
}
#endif
#endif
