/* server.h — OpenAI-compatible HTTP server (libmicrohttpd + cJSON) over the public API.
 * Two layers:
 *  - request parsing/validation (df_srv_parse*): pure functions from a body buffer to a parsed
 *    request or an HTTP status + OpenAI-format error; no sockets, no model (fuzzed by
 *    fuzz/fuzz_server.c);
 *  - the server (df_server_*): HTTP front end (one thread per connection), a bounded queue and
 *    one scheduler thread that owns --parallel slots (a deltafin_ctx each) and runs their
 *    decode steps round-robin, one token (or one prompt batch) per slot per turn.
 * Threading: df_server_* functions are called from one controlling thread (start, set_model,
 * stop, free); everything else happens on the server's own threads. */
#ifndef DF_SERVER_H
#define DF_SERVER_H

#include "deltafin.h"
#include "app/server_agents.h"
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- request parsing ---------------------------------------------------------------------- */
enum { DF_SRV_CHAT = 1, DF_SRV_COMPLETION = 2, DF_SRV_TOKENIZE = 3, DF_SRV_DETOKENIZE = 4,
       DF_SRV_EMBED = 5,            /* /v1/embeddings (and llama.cpp's /embedding) */
       DF_SRV_LLAMA_COMPLETION = 6  /* llama.cpp's /completion */ };
#define DF_SRV_MAX_STOP 16
#define DF_SRV_MAX_TOP_LOGPROBS 20
#define DF_SRV_MAX_BREAKERS 32

typedef struct df_srv_error {
    int status;        /* HTTP status: 400 401 404 405 413 422 429 500 503 */
    char type[32];     /* OpenAI error type: invalid_request_error, authentication_error ... */
    char code[48];     /* machine-readable code, e.g. "context_length_exceeded" */
    char message[320];
} df_srv_error;

typedef struct df_srv_req {
    int kind;                     /* DF_SRV_* */
    cJSON *root;                  /* parsed body; the strings below point into it unless noted */
    const char *model;            /* requested model name or NULL */
    /* chat */
    deltafin_chat_msg *msgs;      /* [n_msgs]; content/tool_calls_json may be owned (see owned) */
    int n_msgs;
    char *tools_json;             /* owned, or NULL */
    /* completion */
    const char *prompt;           /* text prompt, or NULL when prompt_ids is set */
    int32_t *prompt_ids;          /* owned: token-id prompt (completion) or tokens (detokenize) */
    int n_prompt_ids;
    /* tokenize */
    const char *content;
    bool add_special, parse_special;
    /* generation */
    int max_tokens;               /* -1: until end of generation or a full context */
    deltafin_sampler_params sp;   /* the server's defaults (--temp ...), then the request's fields */
    const char *dry_breakers[DF_SRV_MAX_BREAKERS];
    const char *stop[DF_SRV_MAX_STOP];
    int n_stop;
    bool stream, include_usage;
    bool logprobs;
    int top_logprobs;             /* alternatives per token (0..20) */
    bool echo;                    /* completion: not supported, rejected */
    char **owned;                 /* strings allocated by the parser, freed with the request */
    int n_owned;
    df_srv_ext x;                 /* n, logit_bias, grammar, response_format, tool_choice, embeddings
                                   * input, llama.cpp's fields (server_agents.h) */
} df_srv_req;

typedef struct {
    int max_tokens_limit;         /* requests asking for more get 400 (typically n_ctx) */
    const deltafin_sampler_params *defaults; /* sampling of requests that do not set it (NULL:
                                   * deltafin_sampler_default_params) */
} df_srv_limits;

/* Parse and validate a request body for an endpoint kind. Returns 0 and fills *out (free with
 * df_srv_req_free), or an HTTP status (>= 400) and fills *err. Invalid UTF-8 anywhere in the
 * body, malformed JSON, wrong types and out-of-range values are all reported, never crash. */
int df_srv_parse(int kind, const char *body, size_t len, const df_srv_limits *lim,
                 df_srv_req *out, df_srv_error *err);
void df_srv_req_free(df_srv_req *r);
/* Whether a request naming model `requested` (NULL = not given) is served: with one model
 * served, any id is (as llama-server: clients set up for it send "llama", a file name, a
 * Hugging Face repo); the answer names the served id. */
bool df_srv_model_ok(const char *requested, const char *served_id);
/* Fill an error; returns status. */
int df_srv_set_error(df_srv_error *e, int status, const char *type, const char *code,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* {"error":{"message":...,"type":...,"code":...}} (malloc'ed). */
char *df_srv_error_json(const df_srv_error *e);
/* Copy s[0..n), NUL-terminated and malloc'ed, with invalid UTF-8 replaced by U+FFFD as
 * deltafin_utf8_sanitize does (for token pieces in JSON). */
char *df_srv_utf8_sanitize(const char *s, size_t n);

/* ---- server ----------------------------------------------------------------------------- */
typedef struct df_server df_server;

typedef struct {
    const char *host;             /* "127.0.0.1" */
    int port;                     /* 8080; 0 = pick a free port (df_server_port) */
    const char *api_key;          /* NULL: no authentication */
    int n_parallel;               /* slots (2) */
    int n_queue;                  /* requests waiting for a slot before 429 (64) */
    size_t max_body;              /* bytes (1 MiB) */
    int timeout_s;                /* idle connection timeout (60) */
    int n_ctx;                    /* per slot (0: model default) */
    int n_batch;                  /* 512 */
    int step_tokens;              /* prompt tokens per scheduler step, all slots together
                                   * (0: a slot's n_batch); generating slots add one each */
    int n_threads;                /* 0: all cores */
    int default_max_tokens;       /* when a request gives none (-1: until EOG / ctx full) */
    const char *model_id;         /* id in /v1/models (required) */
    const char *chat_template;    /* builtin template name or NULL (model's own, else chatml) */
    const char *chat_template_src;/* a template's Jinja text (--chat-template-file), or NULL */
    const char *model_path;       /* for /props */
    const char *default_grammar;  /* GBNF for requests without their own constraint (--grammar,
                                   * --json-schema), or NULL */
    bool cache_prompt;            /* reuse a slot's KV prefix (true) */
    deltafin_routing routing;     /* opt-in lossy routing for every slot (all 0: off) */
    int verbose;                  /* log each request to stderr */
} df_server_params;

df_server_params df_server_default_params(void);
/* Start listening (/health answers 503 until df_server_set_model). */
int df_server_start(const df_server_params *p, df_server **out);
int df_server_port(const df_server *s);
/* Create the slots and the scheduler; the model stays owned by the caller and must outlive
 * the server. */
int df_server_set_model(df_server *s, deltafin_model *m);
/* The sampling of requests that do not set it (llama-server's --temp, --top-k ... flags);
 * before set_model. The pointers in *sp (biases, breakers, vocab) must outlive the server. */
void df_server_set_sampling(df_server *s, const deltafin_sampler_params *sp);
/* Stop accepting, let running and queued requests finish for up to drain_ms (then cancel
 * them), stop every thread. Idempotent. */
void df_server_stop(df_server *s, int drain_ms);
void df_server_free(df_server *s);

#endif
