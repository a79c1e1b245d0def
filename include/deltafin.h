/* deltafin.h — public API of the deltafin inference library.
 * Opaque handles, negative status codes (see src/util.h df_status), *_default_params(),
 * create/free pairs. The detail of the last error on the calling thread is in
 * deltafin_errmsg(). A model is shared read-only by any number of contexts; each context
 * (one sequence: KV cache / recurrent state, scratch, logits) is used by one thread at a time. */
#ifndef DELTAFIN_H
#define DELTAFIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DELTAFIN_VERSION "0.1.0"

/* Thread-local detail of the last failure (never NULL). */
const char *deltafin_errmsg(void);

typedef struct deltafin_model deltafin_model;
typedef struct deltafin_ctx deltafin_ctx;
typedef struct deltafin_sampler deltafin_sampler;

/* ---- model ------------------------------------------------------------------------- */
typedef struct {
    int n_threads;          /* <= 0: all cores */
    uint64_t mem_limit;     /* bytes for the whole process; 0 = available RAM - mem_reserve */
    uint64_t mem_reserve;   /* bytes left to the OS when mem_limit == 0 */
    const char *io_engine;  /* "auto", "pread", "direct", "uring", "mmap" (NULL = auto) */
    bool mlock;             /* mlock the dense weights */
    bool progress;          /* log load progress (info level) */
    /* Load progress callback, called after each tensor is read (tools draw a bar with it);
     * done and total are bytes to read at load. NULL = none. */
    void (*progress_cb)(void *ud, uint64_t done, uint64_t total);
    void *progress_ud;
} deltafin_model_params;

deltafin_model_params deltafin_model_default_params(void);
int deltafin_model_load(const char *path, const deltafin_model_params *p, deltafin_model **out);
void deltafin_model_free(deltafin_model *m);

int deltafin_model_n_vocab(const deltafin_model *m);
int deltafin_model_n_ctx_train(const deltafin_model *m);
const char *deltafin_model_arch(const deltafin_model *m);
/* Value of a string metadata key (e.g. "general.name"), NULL if absent. */
const char *deltafin_model_meta_str(const deltafin_model *m, const char *key);

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
int deltafin_chat_render(const deltafin_model *m, const char *template_name,
                         const deltafin_chat_msg *msgs, int n_msgs, const char *tools_json,
                         bool add_generation_prompt, char **out);

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
/* Number of tokens in the cache (next position). */
int deltafin_ctx_pos(const deltafin_ctx *c);
/* Drop cached tokens from position pos on (pos <= current); for reuse across chat turns. */
int deltafin_ctx_truncate(deltafin_ctx *c, int pos);

/* Run the model on n tokens appended at the current position, in batches. If all_logits,
 * logits for every token are kept (perplexity); otherwise only for the last one.
 * Returns DF_OK or < 0 (context full, cancelled, I/O error ...). */
int deltafin_decode(deltafin_ctx *c, const int32_t *ids, int n, bool all_logits);
/* Logits of the i-th token of the last decode call (i = -1: the last). n_vocab floats. */
const float *deltafin_logits(const deltafin_ctx *c, int i);
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

/* ---- sampling (llama.cpp's default chain) ------------------------------------------------ */
typedef struct {
    float temp;             /* 0.8; <= 0: greedy */
    int top_k;              /* 40; <= 0 disables */
    float top_p;            /* 0.95; 1 disables */
    float min_p;            /* 0.05; 0 disables */
    float repeat_penalty;   /* 1.0 (disabled) */
    int repeat_last_n;      /* 64 */
    float freq_penalty;     /* 0 */
    float presence_penalty; /* 0 */
    uint64_t seed;          /* UINT64_MAX: random */
} deltafin_sampler_params;

deltafin_sampler_params deltafin_sampler_default_params(void);
deltafin_sampler *deltafin_sampler_create(const deltafin_sampler_params *p);
void deltafin_sampler_free(deltafin_sampler *s);
/* Choose the next token from logits (n_vocab). Does not modify logits. */
int32_t deltafin_sampler_sample(deltafin_sampler *s, const float *logits, int n_vocab);
/* Record an accepted token (prompt tokens too) for the penalty history. */
void deltafin_sampler_accept(deltafin_sampler *s, int32_t id);
/* Probability of the chosen token and top alternatives of the last sample() (for logprobs):
 * fills up to n (id, logprob) pairs sorted by probability, returns the count. */
int deltafin_sampler_top(const deltafin_sampler *s, int n, int32_t *ids, float *logprobs);

#ifdef __cplusplus
}
#endif
#endif
