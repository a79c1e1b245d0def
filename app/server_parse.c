/* server_parse.c — the server's request parsing and validation, a pure function of the body
 * (no server state; fuzzed by fuzz/fuzz_server.c): every problem becomes an OpenAI-format
 * error (df_srv_error) with its HTTP status, never a crash. The fields llama.cpp's clients and
 * agents add (tools, grammar, n_probs, ...) are parsed in server_agents.c. */
#include "app/server.h"

#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================== errors, UTF-8 ============================================== */

int df_srv_set_error(df_srv_error *e, int status, const char *type, const char *code,
                     const char *fmt, ...) {
    e->status = status;
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    /* messages may quote user input: keep them valid UTF-8 (cut at the first bad byte) */
    e->message[deltafin_utf8_valid_prefix(e->message, strlen(e->message))] = 0;
    return status;
}

char *df_srv_error_json(const df_srv_error *e) {
    cJSON *o = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(er, "message", e->message);
    cJSON_AddStringToObject(er, "type", e->type);
    if (e->code[0]) cJSON_AddStringToObject(er, "code", e->code);
    else cJSON_AddNullToObject(er, "code");
    cJSON_AddNullToObject(er, "param");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *df_srv_utf8_sanitize(const char *s, size_t n) {
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    o[deltafin_utf8_sanitize(s, n, o)] = 0;
    return o;
}

/* ============================== request parsing ============================================ */

#define BAD(...) df_srv_set_error(err, 400, "invalid_request_error", "invalid_value", __VA_ARGS__)
#define BADTYPE(...) df_srv_set_error(err, 400, "invalid_request_error", "invalid_type", __VA_ARGS__)

static char *own(df_srv_req *r, char *s) {
    if (!s) return NULL;
    char **no = realloc(r->owned, sizeof(char *) * (size_t)(r->n_owned + 1));
    if (!no) { free(s); return NULL; }
    r->owned = no;
    r->owned[r->n_owned++] = s;
    return s;
}

void df_srv_req_free(df_srv_req *r) {
    if (!r) return;
    for (int i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    free(r->msgs);
    free(r->tools_json);
    free(r->prompt_ids);
    df_srv_ext_free(&r->x);
    cJSON_Delete(r->root);
    memset(r, 0, sizeof *r);
}

/* optional field helpers: 0 = absent/null (default kept), 1 = set, <0 = error (err filled) */
static int get_num(const cJSON *o, const char *k, double lo, double hi, double *v, df_srv_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x)) return -BADTYPE("'%s' must be a number", k);
    double d = x->valuedouble;
    if (!isfinite(d) || d < lo || d > hi) return -BAD("'%s' = %g is out of range [%g, %g]", k, d, lo, hi);
    *v = d;
    return 1;
}
static int get_int(const cJSON *o, const char *k, double lo, double hi, int64_t *v, df_srv_error *err) {
    double d;
    int rc = get_num(o, k, lo, hi, &d, err);
    if (rc <= 0) return rc;
    if (d != floor(d)) return -BADTYPE("'%s' must be an integer", k);
    *v = (int64_t)d;
    return 1;
}
static int get_bool(const cJSON *o, const char *k, bool *v, df_srv_error *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsBool(x)) return -BADTYPE("'%s' must be a boolean", k);
    *v = cJSON_IsTrue(x);
    return 1;
}

/* content: string, null, or an array of {"type":"text","text":...} parts (concatenated) */
static int msg_content(df_srv_req *r, const cJSON *c, int idx, const char **out, df_srv_error *err) {
    *out = NULL;
    if (!c || cJSON_IsNull(c)) return 0;
    if (cJSON_IsString(c)) { *out = c->valuestring; return 0; }
    if (!cJSON_IsArray(c)) return BADTYPE("messages[%d].content must be a string or an array of parts", idx);
    size_t total = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(t))
            return BADTYPE("messages[%d].content parts must be objects with a 'type'", idx);
        if (strcmp(t->valuestring, "text"))
            return df_srv_set_error(err, 400, "invalid_request_error", "unsupported_content",
                                    "messages[%d]: content part type '%.40s' is not supported (text only)", idx, t->valuestring);
        if (!cJSON_IsString(tx)) return BADTYPE("messages[%d].content text part needs a string 'text'", idx);
        total += strlen(tx->valuestring);
    }
    char *s = own(r, malloc(total + 1));
    if (!s) return df_srv_set_error(err, 500, "server_error", "out_of_memory", "out of memory");
    size_t k = 0;
    cJSON_ArrayForEach(p, c) {
        const char *tx = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t l = strlen(tx);
        memcpy(s + k, tx, l);
        k += l;
    }
    s[k] = 0;
    *out = s;
    return 0;
}

static int parse_messages(df_srv_req *r, const cJSON *root, df_srv_error *err) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!ms) return BAD("'messages' is required");
    if (!cJSON_IsArray(ms)) return BADTYPE("'messages' must be an array");
    int n = cJSON_GetArraySize(ms);
    if (n <= 0) return BAD("'messages' must not be empty");
    if (n > 100000) return BAD("too many messages (%d)", n);
    r->msgs = calloc((size_t)n, sizeof *r->msgs);
    if (!r->msgs) return df_srv_set_error(err, 500, "server_error", "out_of_memory", "out of memory");
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, ms) {
        deltafin_chat_msg *d = &r->msgs[i];
        if (!cJSON_IsObject(m)) return BADTYPE("messages[%d] must be an object", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) return BADTYPE("messages[%d].role must be a string", i);
        const char *rl = role->valuestring;
        if (!strcmp(rl, "developer")) rl = "system";
        if (strcmp(rl, "system") && strcmp(rl, "user") && strcmp(rl, "assistant") && strcmp(rl, "tool"))
            return BAD("messages[%d].role '%.40s' is not one of system, developer, user, assistant, tool", i, rl);
        d->role = rl;
        int rc = msg_content(r, cJSON_GetObjectItemCaseSensitive(m, "content"), i, &d->content, err);
        if (rc) return rc;
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (tc && !cJSON_IsNull(tc)) {
            if (!cJSON_IsArray(tc)) return BADTYPE("messages[%d].tool_calls must be an array", i);
            if (strcmp(rl, "assistant")) return BAD("messages[%d]: only assistant messages have tool_calls", i);
            const cJSON *t;
            cJSON_ArrayForEach(t, tc) {
                const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
                if (!cJSON_IsObject(t) || !cJSON_IsObject(fn) ||
                    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
                    return BADTYPE("messages[%d].tool_calls entries need a function with a name", i);
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
                if (a && !cJSON_IsString(a) && !cJSON_IsObject(a))
                    return BADTYPE("messages[%d].tool_calls function arguments must be a string or object", i);
            }
            d->tool_calls_json = own(r, cJSON_PrintUnformatted(tc));
            if (!d->tool_calls_json) return df_srv_set_error(err, 500, "server_error", "out_of_memory", "out of memory");
        }
        if (!d->content && !d->tool_calls_json && strcmp(rl, "assistant"))
            return BAD("messages[%d].content is required", i);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        if (id && !cJSON_IsNull(id)) {
            if (!cJSON_IsString(id)) return BADTYPE("messages[%d].tool_call_id must be a string", i);
            d->tool_call_id = id->valuestring;
        }
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(m, "name");
        if (nm && !cJSON_IsNull(nm)) {
            if (!cJSON_IsString(nm)) return BADTYPE("messages[%d].name must be a string", i);
            d->name = nm->valuestring;
        }
        i++;
    }
    r->n_msgs = n;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) return BADTYPE("'tools' must be an array");
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            if (!cJSON_IsObject(t)) return BADTYPE("'tools' entries must be objects");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
            if (!cJSON_IsObject(fn) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
                return BADTYPE("'tools' entries need a function with a name");
        }
        if (cJSON_GetArraySize(tools) > 0) {
            r->tools_json = cJSON_PrintUnformatted(tools);
            if (!r->tools_json) return df_srv_set_error(err, 500, "server_error", "out_of_memory", "out of memory");
        }
    }
    return 0;
}

static int parse_ids(df_srv_req *r, const cJSON *a, const char *what, df_srv_error *err) {
    int n = cJSON_GetArraySize(a);
    r->prompt_ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!r->prompt_ids) return df_srv_set_error(err, 500, "server_error", "out_of_memory", "out of memory");
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble > INT32_MAX)
            return BADTYPE("'%s'[%d] must be a non-negative integer token id", what, i);
        r->prompt_ids[i++] = (int32_t)x->valuedouble;
    }
    r->n_prompt_ids = n;
    return 0;
}

/* llama-server's sampling fields beyond OpenAI's: numbers into deltafin_sampler_params */
#define SPF(f) offsetof(deltafin_sampler_params, f)
static const struct {
    const char *key;
    size_t off;
    bool integer;
    double lo, hi;
} k_llama_fields[] = {
    {"typical_p", SPF(typical_p), false, -1e30, 1e30},
    {"top_n_sigma", SPF(top_n_sigma), false, -1e30, 1e30},
    {"xtc_probability", SPF(xtc_probability), false, 0, 1},
    {"xtc_threshold", SPF(xtc_threshold), false, 0, 1},
    {"mirostat", SPF(mirostat), true, 0, 2},
    {"mirostat_tau", SPF(mirostat_tau), false, -1e30, 1e30},
    {"mirostat_eta", SPF(mirostat_eta), false, -1e30, 1e30},
    {"dry_multiplier", SPF(dry_multiplier), false, -1e30, 1e30},
    {"dry_base", SPF(dry_base), false, -1e30, 1e30},
    {"dry_allowed_length", SPF(dry_allowed_length), true, 0, INT32_MAX},
    {"dry_penalty_last_n", SPF(dry_penalty_last_n), true, 0, 1 << 24},
    {"repeat_last_n", SPF(repeat_last_n), true, 0, 1 << 24},
    {"min_keep", SPF(min_keep), true, 0, INT32_MAX},
};
#undef SPF

/* dry_sequence_breakers (a non-empty array of strings) and samplers (an array of names or a
 * string of letters), as llama-server takes them */
static int parse_llama_sampling(df_srv_req *r, const cJSON *root, df_srv_error *err) {
    deltafin_sampler_params *sp = &r->sp;
    const float dflt_base = sp->dry_base; /* the server's (--dry-base, else 1.75) */
    for (size_t i = 0; i < sizeof k_llama_fields / sizeof k_llama_fields[0]; i++) {
        double d;
        int rc = get_num(root, k_llama_fields[i].key, k_llama_fields[i].lo, k_llama_fields[i].hi, &d, err);
        if (rc < 0) return -rc;
        if (!rc) continue;
        void *dst = (char *)sp + k_llama_fields[i].off;
        if (k_llama_fields[i].integer) {
            if (d != floor(d)) return BADTYPE("'%s' must be an integer", k_llama_fields[i].key);
            *(int *)dst = (int)d;
        } else {
            *(float *)dst = (float)d;
        }
    }
    if (sp->dry_base < 1.0f) sp->dry_base = dflt_base; /* llama-server: below 1 means the server's value */
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "dry_sequence_breakers");
    if (b && !cJSON_IsNull(b)) {
        if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) == 0)
            return BADTYPE("'dry_sequence_breakers' must be a non-empty array of strings");
        if (cJSON_GetArraySize(b) > DF_SRV_MAX_BREAKERS)
            return BAD("at most %d dry_sequence_breakers", DF_SRV_MAX_BREAKERS);
        int n = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, b) {
            if (!cJSON_IsString(x)) return BADTYPE("'dry_sequence_breakers' entries must be strings");
            r->dry_breakers[n++] = x->valuestring;
        }
        sp->dry_sequence_breakers = r->dry_breakers;
        sp->n_dry_sequence_breakers = n;
    }
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(root, "samplers");
    if (sm && !cJSON_IsNull(sm)) {
        int rc;
        if (cJSON_IsString(sm)) {
            rc = deltafin_sampler_parse_order(sm->valuestring, true, sp);
        } else if (cJSON_IsArray(sm)) {
            char names[512];
            size_t at = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, sm) {
                if (!cJSON_IsString(x) || strchr(x->valuestring, ';'))
                    return BADTYPE("'samplers' must be an array of sampler names or a string of letters");
                int w = snprintf(names + at, sizeof names - at, "%s%s", at ? ";" : "", x->valuestring);
                if (w < 0 || (size_t)w >= sizeof names - at) return BAD("'samplers' is too long");
                at += (size_t)w;
            }
            rc = deltafin_sampler_parse_order(names, false, sp);
        } else {
            return BADTYPE("'samplers' must be an array of sampler names or a string of letters");
        }
        if (rc < 0) return BAD("%s", deltafin_errmsg());
    }
    return 0;
}

static int parse_sampling(df_srv_req *r, const cJSON *root, const df_srv_limits *lim, df_srv_error *err) {
    deltafin_sampler_params *sp = &r->sp;
    *sp = lim && lim->defaults ? *lim->defaults : deltafin_sampler_default_params();
    double d;
    int64_t v;
    int rc;
    if ((rc = get_num(root, "temperature", 0, 2, &d, err)) < 0) return -rc;
    if (rc) sp->temp = (float)d;
    if ((rc = get_num(root, "top_p", 0, 1, &d, err)) < 0) return -rc;
    if (rc) sp->top_p = (float)d;
    if ((rc = get_num(root, "min_p", 0, 1, &d, err)) < 0) return -rc;
    if (rc) sp->min_p = (float)d;
    if ((rc = get_int(root, "top_k", -1, 1 << 30, &v, err)) < 0) return -rc;
    if (rc) sp->top_k = (int)v;
    if ((rc = get_num(root, "frequency_penalty", -2, 2, &d, err)) < 0) return -rc;
    if (rc) sp->freq_penalty = (float)d;
    if ((rc = get_num(root, "presence_penalty", -2, 2, &d, err)) < 0) return -rc;
    if (rc) sp->presence_penalty = (float)d;
    if ((rc = get_num(root, "repeat_penalty", 0, 10, &d, err)) < 0) return -rc;
    if (rc && d <= 0) return BAD("'repeat_penalty' must be greater than 0 (1 = off)");
    if (rc) sp->repeat_penalty = (float)d;
    if ((rc = parse_llama_sampling(r, root, err))) return rc;
    if ((rc = get_int(root, "seed", -9.2e18, 1.8e19, &v, err)) < 0) return -rc;
    if (rc) {
        double sd = cJSON_GetObjectItemCaseSensitive(root, "seed")->valuedouble;
        sp->seed = sd < 0 ? UINT64_MAX : (sd >= 1.8446744073709552e19 ? UINT64_MAX - 1 : (uint64_t)sd);
    }

    r->max_tokens = -2; /* not given */
    const char *mk = cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, mk);
    if (mt && !cJSON_IsNull(mt)) {
        if (!cJSON_IsNumber(mt) || mt->valuedouble != floor(mt->valuedouble))
            return BADTYPE("'%s' must be an integer", mk);
        double x = mt->valuedouble;
        int limit = lim && lim->max_tokens_limit > 0 ? lim->max_tokens_limit : (1 << 24);
        if (x < 1) return BAD("'%s' must be at least 1 (got %.0f)", mk, x);
        if (x > limit) return BAD("'%s' = %.0f exceeds the limit of %d tokens (the context size)", mk, x, limit);
        r->max_tokens = (int)x;
    }

    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (st && !cJSON_IsNull(st)) {
        if (cJSON_IsString(st)) {
            if (st->valuestring[0]) r->stop[r->n_stop++] = st->valuestring;
        } else if (cJSON_IsArray(st)) {
            if (cJSON_GetArraySize(st) > DF_SRV_MAX_STOP) return BAD("at most %d stop sequences", DF_SRV_MAX_STOP);
            const cJSON *x;
            cJSON_ArrayForEach(x, st) {
                if (!cJSON_IsString(x)) return BADTYPE("'stop' entries must be strings");
                if (x->valuestring[0]) r->stop[r->n_stop++] = x->valuestring;
            }
        } else return BADTYPE("'stop' must be a string or an array of strings");
    }
    if ((rc = get_bool(root, "stream", &r->stream, err)) < 0) return -rc;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) return BADTYPE("'stream_options' must be an object");
        if ((rc = get_bool(so, "include_usage", &r->include_usage, err)) < 0) return -rc;
    }
    /* logprobs: chat = boolean + top_logprobs 0..20; completion = integer 0..5 */
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    if (r->kind == DF_SRV_CHAT) {
        if ((rc = get_bool(root, "logprobs", &r->logprobs, err)) < 0) return -rc;
        if ((rc = get_int(root, "top_logprobs", 0, DF_SRV_MAX_TOP_LOGPROBS, &v, err)) < 0) return -rc;
        if (rc) {
            if (!r->logprobs) return BAD("'top_logprobs' requires 'logprobs': true");
            r->top_logprobs = (int)v;
        }
    } else if (lp && !cJSON_IsNull(lp)) {
        if (cJSON_IsBool(lp)) { r->logprobs = cJSON_IsTrue(lp); }
        else if ((rc = get_int(root, "logprobs", 0, 5, &v, err)) < 0) return -rc;
        else { r->logprobs = true; r->top_logprobs = (int)v; }
    }
    if ((rc = get_bool(root, "echo", &r->echo, err)) < 0) return -rc;
    if (r->echo) return df_srv_set_error(err, 400, "invalid_request_error", "unsupported_value", "'echo' is not supported");
    return 0;
}

int df_srv_parse(int kind, const char *body, size_t len, const df_srv_limits *lim,
                 df_srv_req *out, df_srv_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->kind = kind;
    if (!body || len == 0) return BAD("empty request body (expected a JSON object)");
    if (deltafin_utf8_valid_prefix(body, len) != len)
        return df_srv_set_error(err, 400, "invalid_request_error", "invalid_utf8", "request body is not valid UTF-8");
    if (memchr(body, 0, len)) return BAD("request body contains a NUL byte");
    /* JSON allows no raw control character (strings must escape them, RFC 8259 §7); cJSON
     * would take them as they are */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)body[i] < 0x20 && body[i] != '\t' && body[i] != '\n' && body[i] != '\r')
            return df_srv_set_error(err, 400, "invalid_request_error", "invalid_json",
                                    "control character 0x%02x at byte %zu (JSON strings must escape it)",
                                    (unsigned)(unsigned char)body[i], i);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        size_t off = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        return df_srv_set_error(err, 400, "invalid_request_error", "invalid_json",
                                "malformed JSON near byte %zu", off);
    }
    out->root = root;
    /* only whitespace may follow the value */
    for (const char *p = end; p && p < body + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            df_srv_set_error(err, 400, "invalid_request_error", "invalid_json", "trailing data after the JSON value at byte %zu", (size_t)(p - body));
            goto fail;
        }
    if (!cJSON_IsObject(root)) { BADTYPE("request body must be a JSON object"); goto fail; }
    const cJSON *mdl = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (mdl && !cJSON_IsNull(mdl)) {
        if (!cJSON_IsString(mdl)) { BADTYPE("'model' must be a string"); goto fail; }
        out->model = mdl->valuestring;
    }
    int rc;
    switch (kind) {
    case DF_SRV_CHAT:
        if ((rc = parse_messages(out, root, err))) goto fail;
        if ((rc = parse_sampling(out, root, lim, err))) goto fail;
        if ((rc = df_srv_parse_ext(&out->x, kind, root, out->tools_json != NULL, &out->max_tokens, err))) goto fail;
        break;
    case DF_SRV_EMBED:
        if ((rc = df_srv_parse_ext(&out->x, kind, root, false, &out->max_tokens, err))) goto fail;
        break;
    case DF_SRV_COMPLETION:
    case DF_SRV_LLAMA_COMPLETION: {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (!p) { BAD("'prompt' is required"); goto fail; }
        if (cJSON_IsString(p)) out->prompt = p->valuestring;
        else if (cJSON_IsArray(p)) {
            const cJSON *f = p->child;
            if (!f) { BAD("'prompt' must not be empty"); goto fail; }
            if (cJSON_IsString(f)) {
                if (cJSON_GetArraySize(p) != 1) {
                    df_srv_set_error(err, 400, "invalid_request_error", "unsupported_value", "only one prompt per request is supported");
                    goto fail;
                }
                out->prompt = f->valuestring;
            } else if (cJSON_IsArray(f)) {
                if (cJSON_GetArraySize(p) != 1) {
                    df_srv_set_error(err, 400, "invalid_request_error", "unsupported_value", "only one prompt per request is supported");
                    goto fail;
                }
                if (parse_ids(out, f, "prompt", err)) goto fail;
            } else if (parse_ids(out, p, "prompt", err)) goto fail;
        } else { BADTYPE("'prompt' must be a string, an array of token ids or an array of one string"); goto fail; }
        if (out->prompt && !out->prompt[0]) { BAD("'prompt' must not be empty"); goto fail; }
        if (!out->prompt && out->n_prompt_ids == 0) { BAD("'prompt' must not be empty"); goto fail; }
        const cJSON *sfx = cJSON_GetObjectItemCaseSensitive(root, "suffix");
        if (sfx && !cJSON_IsNull(sfx)) {
            df_srv_set_error(err, 400, "invalid_request_error", "unsupported_value", "'suffix' is not supported");
            goto fail;
        }
        if ((rc = parse_sampling(out, root, lim, err))) goto fail;
        if ((rc = df_srv_parse_ext(&out->x, kind, root, false, &out->max_tokens, err))) goto fail;
        if (out->x.native) { /* llama.cpp's n_probs: the top n_probs tokens of each step */
            out->logprobs = out->x.n_probs > 0;
            out->top_logprobs = out->x.n_probs;
        }
        break;
    }
    case DF_SRV_TOKENIZE: {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "content");
        if (!cJSON_IsString(c)) { BADTYPE("'content' must be a string"); goto fail; }
        out->content = c->valuestring;
        out->parse_special = true;
        if ((rc = get_bool(root, "add_special", &out->add_special, err)) < 0) goto fail;
        if ((rc = get_bool(root, "parse_special", &out->parse_special, err)) < 0) goto fail;
        break;
    }
    case DF_SRV_DETOKENIZE: {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens");
        if (!cJSON_IsArray(t)) { BADTYPE("'tokens' must be an array of token ids"); goto fail; }
        if (parse_ids(out, t, "tokens", err)) goto fail;
        break;
    }
    default:
        df_srv_set_error(err, 404, "invalid_request_error", "not_found", "unknown endpoint");
        goto fail;
    }
    return 0;
fail:
    if (!err->status) df_srv_set_error(err, 400, "invalid_request_error", "invalid_value", "invalid request");
    df_srv_req_free(out);
    out->kind = kind;
    return err->status;
}

bool df_srv_model_ok(const char *requested, const char *served_id) {
    (void)requested;
    (void)served_id;
    return true; /* one model served: every id names it (llama-server does the same) */
}

