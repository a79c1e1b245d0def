/* server_agents.h — what agent frameworks and llama-server clients send beyond plain chat:
 * the request fields (n, logit_bias, grammar, response_format, json_schema, tool_choice,
 * parallel_tool_calls, llama.cpp's /completion fields, embeddings input) parsed as pure
 * functions (fuzzed with the rest of df_srv_parse), and per job: the grammar every choice is
 * sampled under, the tool-call format of the chat template, the special tokens the output must
 * keep, and the OpenAI message / stream deltas built from the parsed output (tool_calls,
 * reasoning_content). server.c calls these at a few fixed points.
 * Threading: a df_srv_agent belongs to its job (the scheduler thread samples with it, the
 * connection thread builds the answer under the server lock). */
#ifndef DF_SERVER_AGENTS_H
#define DF_SERVER_AGENTS_H

#include "deltafin.h"
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DF_SRV_MAX_N 16          /* choices per request */
#define DF_SRV_MAX_INPUTS 256    /* embeddings inputs per request */

enum { DF_TC_NONE = 0, DF_TC_AUTO = 1, DF_TC_REQUIRED = 2, DF_TC_NAMED = 3 };

struct df_srv_error;
struct df_srv_req;

/* the request fields of this module (inside df_srv_req; strings point into its JSON) */
typedef struct {
    int n;                       /* choices, 1..DF_SRV_MAX_N */
    char *grammar;               /* owned GBNF from grammar / json_schema / response_format, or NULL */
    bool json_output;            /* from response_format / json_schema (for the error message) */
    int tool_choice;             /* DF_TC_*; auto when tools are given and nothing is said */
    const char *tool_fn;         /* DF_TC_NAMED: the function */
    bool parallel_tool_calls;    /* true unless the request says false */
    int n_bias;                  /* logit_bias entries */
    int32_t *bias_id;            /* [n_bias] token id, or -1 when given as text */
    const char **bias_text;      /* [n_bias] text whose tokens get the bias (llama.cpp's form) */
    float *bias;                 /* [n_bias] (-INFINITY for false) */
    bool native;                 /* llama.cpp's /completion: its field names and answer shape */
    int n_probs;                 /* /completion n_probs */
    bool ignore_eos;             /* llama-server's: -inf biases on the end-of-generation ids */
    bool reasoning_raw;          /* reasoning_format "none": the reasoning stays in the content */
    /* embeddings */
    int n_inputs;
    const char **input_text;     /* [n_inputs] a text, or NULL when given as token ids */
    int32_t **input_ids;         /* [n_inputs] owned */
    int *input_n;
    bool base64;                 /* encoding_format "base64" */
} df_srv_ext;

/* Parse this module's fields of a request (kind: DF_SRV_*; see server.h); after the common
 * fields. Returns 0 or an HTTP status with err filled. */
int df_srv_parse_ext(df_srv_ext *x, int kind, const cJSON *root, bool has_tools, int *max_tokens,
                     struct df_srv_error *err);
void df_srv_ext_free(df_srv_ext *x);

/* ---- per job ------------------------------------------------------------------------------ */
typedef struct {
    const deltafin_chat_format *fmt;
    bool parse;                  /* build the answer from the parsed output */
    unsigned parse_flags;        /* DELTAFIN_PARSE_*: in the reasoning, reasoning as content */
    const char *tools_json;      /* the request's (borrowed) */
    char *gbnf;                  /* the grammar of every choice, or NULL */
    bool lazy;                   /* ... starting at the format's trigger */
    int32_t *special;            /* sorted ids of tokens whose text the output keeps */
    const char **special_text;
    int *special_len;
    int n_special;
    deltafin_logit_bias *bias;
    int n_bias;
    deltafin_grammar *cur;       /* the running choice's grammar (owned by its sampler) */
    unsigned long long id_seed;  /* tool call ids */
    int n_ids;
} df_srv_agent;

typedef struct {
    const char *template_name;   /* --chat-template, or NULL */
    const char *template_src;    /* --chat-template-file's text, or NULL */
    const char *prompt;          /* the rendered chat prompt (NULL for completions) */
    const char *default_grammar; /* --grammar / --json-schema of the server, or NULL */
} df_srv_agent_ctx;

/* Decide a job's grammar and output handling; errors (a grammar that does not compile, a token
 * id outside the vocabulary, tool_choice naming an unknown function) fill e. */
int df_srv_agent_prepare(df_srv_agent *a, const deltafin_model *m, const struct df_srv_req *r,
                         const df_srv_agent_ctx *ctx, struct df_srv_error *e);
void df_srv_agent_free(df_srv_agent *a);
/* The sampler parameters of choice i (logit bias; seed + i so choices differ). */
void df_srv_agent_sampler_params(const df_srv_agent *a, deltafin_sampler_params *sp, int choice);
/* Attach a fresh grammar for the next choice (after the prompt was accepted). < 0: error. */
int df_srv_agent_attach(df_srv_agent *a, const deltafin_model *m, deltafin_sampler *s);
/* The running choice's grammar is complete (only the end can follow). */
bool df_srv_agent_done(const df_srv_agent *a);
/* The text to show for a token the output keeps though it is special, or NULL. */
const char *df_srv_agent_special(const df_srv_agent *a, int32_t id, int *len);
/* The chat answer's message for text[0..n): content, reasoning_content, tool_calls; *finish
 * becomes "tool_calls" when there are calls. */
cJSON *df_srv_agent_message(df_srv_agent *a, const char *text, size_t n, const char **finish);
/* Streaming: what one choice has sent so far. */
typedef struct {
    size_t content, reasoning;
    int calls;
} df_srv_agent_sent;
/* The chat "delta" objects that text[0..n) adds to what was sent (final: the whole answer is
 * there), as a JSON array (empty when nothing is new); *has_calls tells the finish reason. */
cJSON *df_srv_agent_deltas(df_srv_agent *a, const char *text, size_t n, bool final, df_srv_agent_sent *sent,
                           bool *has_calls);


/* ---- llama-server's endpoints ------------------------------------------------------------- */
/* /completion (llama.cpp's answer shape): the whole answer, and one stream chunk (finish NULL
 * until the last) */
cJSON *df_srv_native_final(const char *text, const char *finish, bool stop_word, int n_prompt, int n_gen, int n_cached,
                           const char *model_id, int slot);
cJSON *df_srv_native_chunk(int index, const char *text, const char *finish, int n_prompt, int n_gen, const char *model_id);
/* /v1/embeddings: n inputs of d floats each (base64: little-endian float32, as OpenAI's) */
cJSON *df_srv_embed_json(const float *embd, int n, int d, bool base64, int n_tokens, const char *model_id);
typedef struct {
    const char *model_id, *model_path, *chat_template;
    int n_slots, n_ctx, n_predict, n_ctx_train, n_vocab;
} df_srv_props;
cJSON *df_srv_props_json(const df_srv_props *p);
/* the built-in web chat page at / (app/server_web.c): plain HTML and JS, no network fetches
 * but this server's /v1/chat/completions */
extern const char df_srv_web_page[];

#endif
