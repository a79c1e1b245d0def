/* server_agents.c — see server_agents.h. The semantics follow llama-server's
 * (tools/server/server-common.cpp there): response_format json_object / json_schema and the
 * json_schema field become a grammar through the JSON-schema converter; grammar and tools do
 * not combine (tool_choice "none" aside); tool_choice "required" or a named function forces a
 * call with the format's grammar, "auto" constrains a call only once the model starts one (a
 * lazy grammar on the format's trigger); logit_bias takes OpenAI's {"id": bias} map or
 * llama.cpp's [[id or text, bias or false]] list. */
#include "app/server.h"
#include "app/server_agents.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define BAD(...) df_srv_set_error(err, 400, "invalid_request_error", "invalid_value", __VA_ARGS__)
#define BADTYPE(...) df_srv_set_error(err, 400, "invalid_request_error", "invalid_type", __VA_ARGS__)
#define NOMEM() df_srv_set_error(err, 500, "server_error", "out_of_memory", "out of memory")

static const cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static bool given(const cJSON *x) { return x && !cJSON_IsNull(x); }

/* a schema object as GBNF, or a 400 naming where it came from */
static int schema_grammar(df_srv_ext *x, const cJSON *schema, const char *what, df_srv_error *err) {
    char *js = cJSON_PrintUnformatted(schema);
    if (!js) return NOMEM();
    int rc = deltafin_json_schema_to_grammar(js, &x->grammar);
    free(js);
    if (rc < 0) return BAD("%s: %s", what, deltafin_errmsg());
    x->json_output = true;
    return 0;
}

static int parse_logit_bias(df_srv_ext *x, const cJSON *lb, df_srv_error *err) {
    int n = cJSON_GetArraySize(lb);
    if (n > 4096) return BAD("'logit_bias' has %d entries (at most 4096)", n);
    if (!n) return 0;
    x->bias_id = calloc((size_t)n, sizeof(int32_t));
    x->bias_text = calloc((size_t)n, sizeof(char *));
    x->bias = calloc((size_t)n, sizeof(float));
    if (!x->bias_id || !x->bias_text || !x->bias) return NOMEM();
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, lb) {
        const cJSON *key = e, *val = e;
        if (cJSON_IsObject(lb)) { /* OpenAI: {"token id": bias} */
            char *end;
            long id = strtol(e->string, &end, 10);
            if (!e->string[0] || *end || id < 0 || id > INT32_MAX)
                return BADTYPE("'logit_bias' keys must be token ids (got '%.40s')", e->string);
            x->bias_id[i] = (int32_t)id;
            key = NULL;
        } else { /* llama.cpp: [[id or "text", bias or false], ...] */
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2)
                return BADTYPE("'logit_bias' entries must be [token, bias] pairs");
            key = cJSON_GetArrayItem(e, 0);
            val = cJSON_GetArrayItem(e, 1);
            if (cJSON_IsNumber(key)) {
                if (key->valuedouble != floor(key->valuedouble) || key->valuedouble < 0 || key->valuedouble > INT32_MAX)
                    return BADTYPE("'logit_bias' token ids must be non-negative integers");
                x->bias_id[i] = (int32_t)key->valuedouble;
            } else if (cJSON_IsString(key) && key->valuestring[0]) {
                x->bias_id[i] = -1;
                x->bias_text[i] = key->valuestring;
            } else {
                return BADTYPE("'logit_bias' tokens must be ids or non-empty strings");
            }
        }
        if (cJSON_IsFalse(val)) x->bias[i] = -INFINITY;
        else if (cJSON_IsNumber(val) && isfinite(val->valuedouble) && fabs(val->valuedouble) <= 100)
            x->bias[i] = (float)val->valuedouble;
        else
            return BAD("'logit_bias' values must be numbers in [-100, 100] (or false)");
        i++;
    }
    x->n_bias = i;
    return 0;
}

static int parse_tool_choice(df_srv_ext *x, const cJSON *root, bool has_tools, df_srv_error *err) {
    const cJSON *tc = item(root, "tool_choice");
    x->tool_choice = has_tools ? DF_TC_AUTO : DF_TC_NONE;
    if (given(tc)) {
        if (cJSON_IsString(tc)) {
            if (!strcmp(tc->valuestring, "none")) x->tool_choice = DF_TC_NONE;
            else if (!strcmp(tc->valuestring, "auto")) x->tool_choice = has_tools ? DF_TC_AUTO : DF_TC_NONE;
            else if (!strcmp(tc->valuestring, "required")) x->tool_choice = DF_TC_REQUIRED;
            else return BAD("'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}");
        } else if (cJSON_IsObject(tc)) {
            const cJSON *fn = item(tc, "function"), *nm = item(fn, "name");
            if (!cJSON_IsString(nm)) return BADTYPE("'tool_choice' names no function ({\"type\":\"function\",\"function\":{\"name\":...}})");
            x->tool_choice = DF_TC_NAMED;
            x->tool_fn = nm->valuestring;
        } else {
            return BADTYPE("'tool_choice' must be a string or an object");
        }
        if (x->tool_choice >= DF_TC_REQUIRED && !has_tools) return BAD("'tool_choice' asks for a tool call but 'tools' is empty");
    }
    x->parallel_tool_calls = true;
    const cJSON *ptc = item(root, "parallel_tool_calls");
    if (given(ptc)) {
        if (!cJSON_IsBool(ptc)) return BADTYPE("'parallel_tool_calls' must be a boolean");
        x->parallel_tool_calls = cJSON_IsTrue(ptc);
    }
    return 0;
}

static int parse_inputs(df_srv_ext *x, const cJSON *root, df_srv_error *err) {
    const cJSON *in = item(root, "input");
    if (!in) in = item(root, "content"); /* llama.cpp's /embedding */
    if (!given(in)) return BAD("'input' is required");
    const cJSON *list = in;
    cJSON *wrap = NULL;
    if (cJSON_IsString(in) || (cJSON_IsArray(in) && cJSON_IsNumber(in->child))) { /* one input */
        wrap = cJSON_CreateArray();
        if (!wrap) return NOMEM();
        cJSON_AddItemReferenceToArray(wrap, (cJSON *)in);
        list = wrap;
    } else if (!cJSON_IsArray(in)) {
        return BADTYPE("'input' must be a string, an array of strings or token ids");
    }
    int n = cJSON_GetArraySize(list), rc = 0;
    if (n < 1 || n > DF_SRV_MAX_INPUTS) { cJSON_Delete(wrap); return BAD("'input' must have 1 to %d entries", DF_SRV_MAX_INPUTS); }
    x->input_text = calloc((size_t)n, sizeof(char *));
    x->input_ids = calloc((size_t)n, sizeof(int32_t *));
    x->input_n = calloc((size_t)n, sizeof(int));
    if (!x->input_text || !x->input_ids || !x->input_n) { cJSON_Delete(wrap); return NOMEM(); }
    x->n_inputs = n;
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        if (cJSON_IsString(e)) {
            if (!e->valuestring[0]) { rc = BAD("'input'[%d] is empty", i); break; }
            x->input_text[i] = e->valuestring;
        } else if (cJSON_IsArray(e)) {
            int k = cJSON_GetArraySize(e), j = 0;
            if (k < 1) { rc = BAD("'input'[%d] is empty", i); break; }
            x->input_ids[i] = malloc(sizeof(int32_t) * (size_t)k);
            if (!x->input_ids[i]) { rc = NOMEM(); break; }
            const cJSON *t;
            cJSON_ArrayForEach(t, e) {
                if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 || t->valuedouble > INT32_MAX) {
                    rc = BADTYPE("'input'[%d][%d] must be a token id", i, j);
                    break;
                }
                x->input_ids[i][j++] = (int32_t)t->valuedouble;
            }
            if (rc) break;
            x->input_n[i] = k;
        } else {
            rc = BADTYPE("'input'[%d] must be a string or an array of token ids", i);
            break;
        }
        i++;
    }
    cJSON_Delete(wrap);
    if (rc) return rc;
    const cJSON *ef = item(root, "encoding_format");
    if (given(ef)) {
        if (!cJSON_IsString(ef) || (strcmp(ef->valuestring, "float") && strcmp(ef->valuestring, "base64")))
            return BAD("'encoding_format' must be float or base64");
        x->base64 = !strcmp(ef->valuestring, "base64");
    }
    return 0;
}

int df_srv_parse_ext(df_srv_ext *x, int kind, const cJSON *root, bool has_tools, int *max_tokens, df_srv_error *err) {
    memset(x, 0, sizeof *x);
    x->n = 1;
    if (kind == DF_SRV_EMBED) return parse_inputs(x, root, err);
    x->native = kind == DF_SRV_LLAMA_COMPLETION;
    const cJSON *n = item(root, "n");
    if (given(n)) {
        if (!cJSON_IsNumber(n) || n->valuedouble != floor(n->valuedouble)) return BADTYPE("'n' must be an integer");
        if (n->valuedouble < 1 || n->valuedouble > DF_SRV_MAX_N) return BAD("'n' = %g is out of range [1, %d]", n->valuedouble, DF_SRV_MAX_N);
        x->n = (int)n->valuedouble;
    }
    if (x->native) {
        const cJSON *np = item(root, "n_predict");
        if (given(np)) {
            if (!cJSON_IsNumber(np) || np->valuedouble != floor(np->valuedouble) || np->valuedouble < -1 || np->valuedouble > (1 << 24))
                return BAD("'n_predict' must be an integer >= -1");
            if (np->valuedouble != 0) *max_tokens = np->valuedouble < 0 ? -1 : (int)np->valuedouble;
        }
        const cJSON *pr = item(root, "n_probs");
        if (given(pr)) {
            if (!cJSON_IsNumber(pr) || pr->valuedouble != floor(pr->valuedouble) || pr->valuedouble < 0 ||
                pr->valuedouble > DF_SRV_MAX_TOP_LOGPROBS)
                return BAD("'n_probs' must be an integer in [0, %d]", DF_SRV_MAX_TOP_LOGPROBS);
            x->n_probs = (int)pr->valuedouble;
        }
        const cJSON *ps = item(root, "post_sampling_probs");
        if (given(ps)) {
            if (!cJSON_IsBool(ps)) return BADTYPE("'post_sampling_probs' must be a boolean");
            if (cJSON_IsTrue(ps))
                return df_srv_set_error(err, 400, "invalid_request_error", "unsupported_value",
                                        "'post_sampling_probs' is not supported (n_probs gives the model's probabilities before sampling)");
        }
    }
    const cJSON *lb = item(root, "logit_bias");
    if (given(lb)) {
        if (!cJSON_IsObject(lb) && !cJSON_IsArray(lb)) return BADTYPE("'logit_bias' must be an object or an array");
        int rc = parse_logit_bias(x, lb, err);
        if (rc) return rc;
    }
    const cJSON *ie = item(root, "ignore_eos");
    if (given(ie)) {
        if (!cJSON_IsBool(ie)) return BADTYPE("'ignore_eos' must be a boolean");
        x->ignore_eos = cJSON_IsTrue(ie);
    }
    int rc = parse_tool_choice(x, root, has_tools, err);
    if (rc) return rc;
    /* llama-server's reasoning_format: "none" leaves the reasoning in the content (gpt-oss: the
     * analysis message with its markers); auto / deepseek / deepseek-legacy split it off into
     * reasoning_content, as without the field */
    const cJSON *rfmt = item(root, "reasoning_format");
    if (given(rfmt)) {
        if (!cJSON_IsString(rfmt)) return BADTYPE("'reasoning_format' must be a string");
        const char *v = rfmt->valuestring;
        if (strcmp(v, "none") && strcmp(v, "auto") && strcmp(v, "deepseek") && strcmp(v, "deepseek-legacy"))
            return BAD("'reasoning_format' must be none, auto, deepseek or deepseek-legacy");
        x->reasoning_raw = !strcmp(v, "none");
    }
    /* one source of constraint: grammar, json_schema or response_format */
    const cJSON *g = item(root, "grammar"), *js = item(root, "json_schema"), *rf = item(root, "response_format");
    int sources = 0;
    if (given(g)) {
        if (!cJSON_IsString(g)) return BADTYPE("'grammar' must be a string (GBNF)");
        if (g->valuestring[0]) {
            if (deltafin_grammar_check(g->valuestring, NULL) == DELTAFIN_ERR_FORMAT)
                return BAD("'grammar': %s", deltafin_errmsg());
            x->grammar = strdup(g->valuestring);
            if (!x->grammar) return NOMEM();
            sources++;
        }
    }
    if (given(js)) {
        if (!cJSON_IsObject(js) && !cJSON_IsBool(js)) return BADTYPE("'json_schema' must be a schema object");
        if (sources++) return BAD("use one of 'grammar', 'json_schema' and 'response_format'");
        if ((rc = schema_grammar(x, js, "json_schema", err))) return rc;
    }
    if (given(rf)) {
        if (!cJSON_IsObject(rf)) return BADTYPE("'response_format' must be an object");
        const cJSON *t = item(rf, "type");
        if (!cJSON_IsString(t)) return BADTYPE("'response_format.type' must be a string");
        if (!strcmp(t->valuestring, "json_object") || !strcmp(t->valuestring, "json_schema")) {
            const cJSON *schema = NULL;
            if (!strcmp(t->valuestring, "json_object")) {
                schema = item(rf, "schema"); /* llama.cpp's extension; else any JSON object */
            } else {
                const cJSON *w = item(rf, "json_schema");
                if (!cJSON_IsObject(w)) return BADTYPE("'response_format.json_schema' must be an object with a 'schema'");
                schema = item(w, "schema");
                if (!given(schema)) return BAD("'response_format.json_schema.schema' is required");
            }
            if (sources++) return BAD("use one of 'grammar', 'json_schema' and 'response_format'");
            cJSON *any = NULL;
            if (!given(schema)) schema = any = cJSON_CreateObject();
            rc = schema ? schema_grammar(x, schema, "response_format", err) : NOMEM();
            cJSON_Delete(any);
            if (rc) return rc;
        } else if (strcmp(t->valuestring, "text")) {
            return BAD("'response_format.type' must be text, json_object or json_schema");
        }
    }
    if (x->grammar && x->tool_choice != DF_TC_NONE)
        return BAD("a grammar or response format cannot be combined with tools (unless tool_choice is none)");
    return 0;
}

void df_srv_ext_free(df_srv_ext *x) {
    free(x->grammar);
    free(x->bias_id);
    free(x->bias_text);
    free(x->bias);
    for (int i = 0; i < x->n_inputs; i++) free(x->input_ids ? x->input_ids[i] : NULL);
    free(x->input_ids);
    free(x->input_text);
    free(x->input_n);
    memset(x, 0, sizeof *x);
}

/* ---- per job -------------------------------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* the format's markers that are single special tokens: their text must reach the parser */
static int find_special(df_srv_agent *a, const deltafin_model *m) {
    const char *const *mk = deltafin_chat_format_markers(a->fmt);
    int n = 0;
    while (mk[n]) n++;
    a->special = calloc((size_t)n + 1, sizeof(int32_t));
    a->special_text = calloc((size_t)n + 1, sizeof(char *));
    a->special_len = calloc((size_t)n + 1, sizeof(int));
    if (!a->special || !a->special_text || !a->special_len) return -1;
    for (int i = 0; i < n; i++) {
        int32_t ids[2];
        char piece[8];
        if (deltafin_tokenize(m, mk[i], strlen(mk[i]), false, true, ids, 2) != 1) continue;
        if (deltafin_token_to_piece(m, ids[0], false, piece, (int)sizeof piece) != 0) continue; /* shown anyway */
        a->special[a->n_special] = ids[0];
        a->special_text[a->n_special] = mk[i];
        a->special_len[a->n_special++] = (int)strlen(mk[i]);
    }
    /* sort ids with their texts */
    for (int i = 1; i < a->n_special; i++)
        for (int j = i; j > 0 && a->special[j] < a->special[j - 1]; j--) {
            int32_t t = a->special[j]; a->special[j] = a->special[j - 1]; a->special[j - 1] = t;
            const char *s = a->special_text[j]; a->special_text[j] = a->special_text[j - 1]; a->special_text[j - 1] = s;
            int l = a->special_len[j]; a->special_len[j] = a->special_len[j - 1]; a->special_len[j - 1] = l;
        }
    (void)cmp_i32;
    return 0;
}

static int resolve_bias(df_srv_agent *a, const deltafin_model *m, const df_srv_ext *x, df_srv_error *err) {
    if (!x->n_bias && !x->ignore_eos) return 0;
    const int nv = deltafin_model_n_vocab(m);
    deltafin_vocab_info vi;
    deltafin_vocab_get_info(deltafin_model_vocab(m), &vi);
    int cap = x->n_bias + (x->ignore_eos ? vi.n_eog : 0);
    if (cap == 0) return 0;
    a->bias = malloc(sizeof *a->bias * (size_t)cap);
    if (!a->bias) return NOMEM();
    for (int i = 0; i < x->n_bias; i++) {
        if (x->bias_id[i] >= 0) {
            if (x->bias_id[i] >= nv)
                return df_srv_set_error(err, 400, "invalid_request_error", "invalid_token",
                                        "logit_bias token id %d is outside the vocabulary (%d tokens)", x->bias_id[i], nv);
            a->bias[a->n_bias].token = x->bias_id[i];
            a->bias[a->n_bias++].bias = x->bias[i];
            continue;
        }
        int32_t *ids = NULL;
        int n = deltafin_vocab_tokenize_alloc(deltafin_model_vocab(m), x->bias_text[i], strlen(x->bias_text[i]), false, false, &ids);
        if (n < 0) { free(ids); return BAD("logit_bias: cannot tokenize '%.40s'", x->bias_text[i]); }
        deltafin_logit_bias *nb = realloc(a->bias, sizeof *nb * (size_t)(cap + n));
        if (!nb) { free(ids); return NOMEM(); }
        a->bias = nb;
        cap += n;
        for (int k = 0; k < n; k++) {
            a->bias[a->n_bias].token = ids[k];
            a->bias[a->n_bias++].bias = x->bias[i];
        }
        free(ids);
    }
    for (int i = 0; x->ignore_eos && i < vi.n_eog; i++) /* llama-server's ignore_eos */
        a->bias[a->n_bias++] = (deltafin_logit_bias){vi.eog[i], -INFINITY};
    return 0;
}

int df_srv_agent_prepare(df_srv_agent *a, const deltafin_model *m, const df_srv_req *r, const df_srv_agent_ctx *ctx,
                         df_srv_error *err) {
    memset(a, 0, sizeof *a);
    const df_srv_ext *x = &r->x;
    unsigned long long seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (unsigned long long)time(NULL);
    a->id_seed = seed;
    int rc = resolve_bias(a, m, x, err);
    if (rc) return rc;
    if (r->kind == DF_SRV_CHAT) {
        a->fmt = deltafin_chat_format_for(m, ctx->template_name, ctx->template_src);
        a->tools_json = r->tools_json;
        a->parse = (r->tools_json && x->tool_choice != DF_TC_NONE) || deltafin_chat_format_always_parse(a->fmt);
        a->parse_flags = (ctx->prompt && deltafin_chat_format_in_reasoning(a->fmt, ctx->prompt) ? DELTAFIN_PARSE_IN_REASONING : 0) |
                         (x->reasoning_raw ? DELTAFIN_PARSE_REASONING_AS_CONTENT : 0);
        if (a->parse && find_special(a, m) < 0) return NOMEM();
        if (r->tools_json && x->tool_choice != DF_TC_NONE) {
            a->lazy = x->tool_choice == DF_TC_AUTO;
            rc = deltafin_chat_tool_grammar(a->fmt, r->tools_json, x->tool_choice == DF_TC_NAMED ? x->tool_fn : NULL,
                                            x->parallel_tool_calls, a->lazy, &a->gbnf);
            if (rc == DELTAFIN_ERR_INVALID) return BAD("%s", deltafin_errmsg());
            if (rc < 0) return BAD("tools: %s", deltafin_errmsg());
        }
    }
    if (!a->gbnf && x->grammar) {
        a->gbnf = strdup(x->grammar);
        if (!a->gbnf) return NOMEM();
    }
    if (!a->gbnf && !x->grammar && ctx->default_grammar && !(r->tools_json && x->tool_choice != DF_TC_NONE)) {
        a->gbnf = strdup(ctx->default_grammar);
        if (!a->gbnf) return NOMEM();
    }
    if (a->gbnf) { /* compile once now: a bad grammar (e.g. an unknown <token>) is the request's fault */
        deltafin_grammar *g = NULL;
        rc = deltafin_grammar_create(deltafin_model_vocab(m), a->gbnf, NULL, &g);
        deltafin_grammar_free(g);
        if (rc < 0) return BAD("grammar: %s", deltafin_errmsg());
    }
    return 0;
}

void df_srv_agent_free(df_srv_agent *a) {
    free(a->gbnf);
    free(a->special);
    free(a->special_text);
    free(a->special_len);
    free(a->bias);
    memset(a, 0, sizeof *a);
}

void df_srv_agent_sampler_params(const df_srv_agent *a, deltafin_sampler_params *sp, int choice) {
    if (a->n_bias) { /* the request's biases replace the server's (-l, --ignore-eos) */
        sp->logit_bias = a->bias;
        sp->n_logit_bias = a->n_bias;
    }
    if (choice > 0 && sp->seed != UINT64_MAX) sp->seed += (uint64_t)choice;
}

int df_srv_agent_attach(df_srv_agent *a, const deltafin_model *m, deltafin_sampler *s) {
    a->cur = NULL;
    if (!a->gbnf) return 0;
    deltafin_grammar *g = NULL;
    int rc = deltafin_grammar_create(deltafin_model_vocab(m), a->gbnf, NULL, &g);
    if (rc < 0) return rc;
    if (a->lazy) {
        const char *trig = deltafin_chat_format_trigger(a->fmt);
        if ((rc = deltafin_grammar_set_triggers(g, &trig, 1)) < 0) { deltafin_grammar_free(g); return rc; }
    }
    a->cur = g;
    return deltafin_sampler_set_grammar(s, g);
}

bool df_srv_agent_done(const df_srv_agent *a) { return a->cur && deltafin_grammar_done(a->cur); }

const char *df_srv_agent_special(const df_srv_agent *a, int32_t id, int *len) {
    int lo = 0, hi = a->n_special - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (a->special[mid] == id) { *len = a->special_len[mid]; return a->special_text[mid]; }
        if (a->special[mid] < id) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* call_ + 24 letters and digits, different per call of the job */
static void call_id(df_srv_agent *a, char out[32]) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned long long x = a->id_seed + 0x9E3779B97F4A7C15ull * (unsigned long long)++a->n_ids;
    memcpy(out, "call_", 5);
    for (int i = 0; i < 24; i++) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 29;
        out[5 + i] = al[x % 62];
    }
    out[29] = 0;
}

static cJSON *call_json(df_srv_agent *a, const deltafin_tool_call *c, int index, bool delta) {
    cJSON *o = cJSON_CreateObject();
    if (delta) cJSON_AddNumberToObject(o, "index", index);
    char id[32];
    if (c->id) cJSON_AddStringToObject(o, "id", c->id);
    else { call_id(a, id); cJSON_AddStringToObject(o, "id", id); }
    cJSON_AddStringToObject(o, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(o, "function");
    cJSON_AddStringToObject(f, "name", c->name);
    cJSON_AddStringToObject(f, "arguments", c->arguments);
    return o;
}

cJSON *df_srv_agent_message(df_srv_agent *a, const char *text, size_t n, const char **finish) {
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "assistant");
    deltafin_chat_output o;
    if (deltafin_chat_output_parse(a->fmt, text, n, false, a->parse_flags, a->tools_json, &o) < 0) {
        char *t = strndup(text, n);
        cJSON_AddStringToObject(msg, "content", t ? t : "");
        free(t);
        return msg;
    }
    if (o.n_calls && !o.content[0]) cJSON_AddNullToObject(msg, "content");
    else cJSON_AddStringToObject(msg, "content", o.content);
    if (o.reasoning[0]) cJSON_AddStringToObject(msg, "reasoning_content", o.reasoning);
    if (o.n_calls) {
        cJSON *tc = cJSON_AddArrayToObject(msg, "tool_calls");
        for (int i = 0; i < o.n_calls; i++) cJSON_AddItemToArray(tc, call_json(a, &o.calls[i], i, false));
        if (finish && *finish && !strcmp(*finish, "stop")) *finish = "tool_calls";
    }
    deltafin_chat_output_free(&o);
    return msg;
}

cJSON *df_srv_agent_deltas(df_srv_agent *a, const char *text, size_t n, bool final, df_srv_agent_sent *sent,
                           bool *has_calls) {
    cJSON *arr = cJSON_CreateArray();
    deltafin_chat_output o;
    if (!arr || deltafin_chat_output_parse(a->fmt, text, n, !final, a->parse_flags, a->tools_json, &o) < 0) return arr;
    size_t rl = strlen(o.reasoning), cl = strlen(o.content);
    /* every partial parse is a prefix of the next: send what is new */
    if (rl > sent->reasoning) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "reasoning_content", o.reasoning + sent->reasoning);
        cJSON_AddItemToArray(arr, d);
        sent->reasoning = rl;
    }
    if (cl > sent->content) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "content", o.content + sent->content);
        cJSON_AddItemToArray(arr, d);
        sent->content = cl;
    }
    for (int i = sent->calls; i < o.n_calls; i++) {
        cJSON *d = cJSON_CreateObject(), *tc = cJSON_AddArrayToObject(d, "tool_calls");
        cJSON_AddItemToArray(tc, call_json(a, &o.calls[i], i, true));
        cJSON_AddItemToArray(arr, d);
    }
    if (o.n_calls > sent->calls) sent->calls = o.n_calls;
    if (has_calls) *has_calls = sent->calls > 0;
    deltafin_chat_output_free(&o);
    return arr;
}

/* ---- llama-server's endpoints ---------------------------------------------------------------- */

static const char *stop_type(const char *finish, bool stop_word) {
    if (!finish) return "none";
    if (!strcmp(finish, "length")) return "limit";
    if (!strcmp(finish, "stop")) return stop_word ? "word" : "eos";
    return "none";
}

cJSON *df_srv_native_final(const char *text, const char *finish, bool stop_word, int n_prompt, int n_gen, int n_cached,
                           const char *model_id, int slot) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", 0);
    cJSON_AddStringToObject(o, "content", text);
    cJSON_AddArrayToObject(o, "tokens");
    cJSON_AddNumberToObject(o, "id_slot", slot);
    cJSON_AddBoolToObject(o, "stop", true);
    cJSON_AddStringToObject(o, "model", model_id);
    cJSON_AddNumberToObject(o, "tokens_predicted", n_gen);
    cJSON_AddNumberToObject(o, "tokens_evaluated", n_prompt);
    cJSON_AddNumberToObject(o, "tokens_cached", n_cached);
    cJSON_AddBoolToObject(o, "truncated", false);
    cJSON_AddStringToObject(o, "stop_type", stop_type(finish, stop_word));
    cJSON_AddStringToObject(o, "stopping_word", "");
    return o;
}

cJSON *df_srv_native_chunk(int index, const char *text, const char *finish, int n_prompt, int n_gen, const char *model_id) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", index);
    cJSON_AddStringToObject(o, "content", text ? text : "");
    cJSON_AddBoolToObject(o, "stop", finish != NULL);
    if (finish) {
        cJSON_AddStringToObject(o, "model", model_id);
        cJSON_AddNumberToObject(o, "tokens_predicted", n_gen);
        cJSON_AddNumberToObject(o, "tokens_evaluated", n_prompt);
        cJSON_AddStringToObject(o, "stop_type", stop_type(finish, false));
    }
    return o;
}

static char *base64_floats(const float *v, int d) {
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = (size_t)d * 4;
    unsigned char *b = malloc(n ? n : 1);
    char *o = malloc((n + 2) / 3 * 4 + 1);
    if (!b || !o) { free(b); free(o); return NULL; }
    for (int i = 0; i < d; i++) { /* little-endian float32 */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[(size_t)i * 4 + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        o[w++] = al[x >> 18 & 63];
        o[w++] = al[x >> 12 & 63];
        o[w++] = i + 1 < n ? al[x >> 6 & 63] : '=';
        o[w++] = i + 2 < n ? al[x & 63] : '=';
    }
    o[w] = 0;
    free(b);
    return o;
}

cJSON *df_srv_embed_json(const float *embd, int n, int d, bool base64, int n_tokens, const char *model_id) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "object", "embedding");
        cJSON_AddNumberToObject(e, "index", i);
        const float *v = embd + (size_t)i * (size_t)d;
        if (base64) {
            char *b = base64_floats(v, d);
            cJSON_AddStringToObject(e, "embedding", b ? b : "");
            free(b);
        } else {
            cJSON *a = cJSON_AddArrayToObject(e, "embedding");
            for (int k = 0; k < d; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber(isfinite(v[k]) ? (double)v[k] : 0.0));
        }
        cJSON_AddItemToArray(data, e);
    }
    cJSON_AddStringToObject(o, "model", model_id);
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", n_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", n_tokens);
    return o;
}

cJSON *df_srv_props_json(const df_srv_props *p) {
    cJSON *o = cJSON_CreateObject();
    cJSON *g = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON_AddNumberToObject(g, "id", 0);
    cJSON_AddNumberToObject(g, "n_ctx", p->n_ctx);
    cJSON_AddStringToObject(g, "model", p->model_id);
    cJSON *pa = cJSON_AddObjectToObject(g, "params");
    cJSON_AddNumberToObject(pa, "n_predict", p->n_predict);
    cJSON_AddNumberToObject(o, "total_slots", p->n_slots);
    cJSON_AddStringToObject(o, "model_alias", p->model_id);
    cJSON_AddStringToObject(o, "model_path", p->model_path ? p->model_path : "");
    cJSON_AddStringToObject(o, "chat_template", p->chat_template ? p->chat_template : "");
    cJSON *mo = cJSON_AddObjectToObject(o, "modalities");
    cJSON_AddBoolToObject(mo, "vision", false);
    cJSON_AddBoolToObject(mo, "audio", false);
    cJSON_AddNumberToObject(o, "n_ctx_train", p->n_ctx_train);
    cJSON_AddNumberToObject(o, "n_vocab", p->n_vocab);
    cJSON_AddStringToObject(o, "build_info", "deltafin " DELTAFIN_VERSION);
    return o;
}
