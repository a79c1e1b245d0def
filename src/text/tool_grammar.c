/* tool_grammar.c — the GBNF grammar that makes a model write a tool call in its format
 * (df_tool_grammar, tool_calls.h): the call syntax of the format around each function's
 * parameters, which go through the JSON-schema converter (json_schema.h) — as a JSON object for
 * the JSON formats, value by value for the key/value ones (a string parameter as plain text
 * without '<', anything else as its JSON schema says).
 * Invariant: the grammar's start rule is "root"; a lazy grammar starts with the format's trigger
 * text. Threading: reentrant. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "text/json_schema.h"
#include "text/tool_calls.h"

typedef struct {
    df_jsg *g;
    char **tmp;      /* strings made while building, freed at the end */
    int n_tmp, cap_tmp;
    bool oom;
} tb;

static const char *fmt(tb *b, const char *f, ...) __attribute__((format(printf, 2, 3)));
static const char *fmt(tb *b, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    int n = vasprintf(&s, f, ap);
    va_end(ap);
    if (n < 0) { b->oom = true; return ""; }
    if (b->n_tmp == b->cap_tmp) {
        int nc = b->cap_tmp ? b->cap_tmp * 2 : 64;
        char **nt = realloc(b->tmp, sizeof(char *) * (size_t)nc);
        if (!nt) { free(s); b->oom = true; return ""; }
        b->tmp = nt;
        b->cap_tmp = nc;
    }
    b->tmp[b->n_tmp++] = s;
    return s;
}

/* a rule with this body; returns its name (escaped, numbered if taken) */
static const char *rule(tb *b, const char *name, const char *body) {
    const char *r = NULL;
    if (df_jsg_rule(b->g, name, body, &r) < 0) { b->oom = true; return ""; }
    return r;
}

/* the rule for a parameter value in a key/value format */
static const char *kv_value(tb *b, const cJSON *ps, const char *name, int *rc) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(ps, "type"), *en = cJSON_GetObjectItemCaseSensitive(ps, "enum");
    if (cJSON_IsString(t) && !strcmp(t->valuestring, "string")) {
        if (cJSON_IsArray(en)) { /* the values as plain text */
            const char *alts = "";
            const cJSON *e;
            cJSON_ArrayForEach(e, en)
                if (cJSON_IsString(e)) alts = fmt(b, "%s%s%s", alts, alts[0] ? " | " : "", df_jsg_literal(b->g, e->valuestring));
            if (alts[0]) return rule(b, name, fmt(b, "(%s)", alts));
        }
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(ps, "maxLength"), *mn = cJSON_GetObjectItemCaseSensitive(ps, "minLength");
        if (cJSON_IsNumber(mx) && mx->valuedouble >= 0 && mx->valuedouble <= 2000)
            return rule(b, name, fmt(b, "[^<]{%d,%d}", cJSON_IsNumber(mn) && mn->valuedouble >= 0 && mn->valuedouble <= mx->valuedouble
                                                           ? (int)mn->valuedouble : 0, (int)mx->valuedouble));
        return rule(b, "xml-text", "[^<]*");
    }
    char *js = cJSON_PrintUnformatted(ps);
    const char *r = NULL;
    if (!js || df_jsg_visit(b->g, js, name, &r) < 0) *rc = js ? DF_ERR_FORMAT : DF_ERR_NOMEM;
    free(js);
    return r ? r : "";
}

static const char *k3_type(const cJSON *ps) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(ps, "type");
    const char *s = cJSON_IsString(t) ? t->valuestring : "string";
    if (!strcmp(s, "integer")) return "number";
    return s;
}

/* key/value formats: one item per property in schema order, required ones first-class */
static const char *kv_args(tb *b, int kind, const cJSON *params, const char *fname, int *rc) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required"), *p, *r;
    size_t cap = 256, n = 0;
    char *body = malloc(cap);
    if (!body) { b->oom = true; return ""; }
    body[0] = 0;
    int i = 0;
    cJSON_ArrayForEach(p, props) {
        bool required = false;
        cJSON_ArrayForEach(r, req) if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string)) required = true;
        const char *vr = kv_value(b, p, fmt(b, "%s-%s", fname, p->string), rc);
        if (*rc < 0) break;
        const char *item;
        if (kind == 0) /* qwen3-coder */
            item = fmt(b, "\"<parameter=\" %s \">\\n\" %s \"\\n</parameter>\\n\"", df_jsg_literal(b->g, p->string), vr);
        else if (kind == 1) /* glm */
            item = fmt(b, "\"<arg_key>\" %s \"</arg_key>\\n<arg_value>\" %s \"</arg_value>\\n\"", df_jsg_literal(b->g, p->string), vr);
        else /* kimi-k3 */
            item = fmt(b, "\"<|open|>argument key=\\\"\" %s \"\\\" type=\\\"%s\\\"<|sep|>\" %s \"<|close|>argument<|sep|>\"",
                       df_jsg_literal(b->g, p->string), k3_type(p), vr);
        const char *ir = rule(b, fmt(b, "%s-%s-kv", fname, p->string), item);
        size_t need = n + strlen(ir) + 4;
        if (need > cap) {
            cap = need * 2;
            char *nb = realloc(body, cap);
            if (!nb) { free(body); b->oom = true; return ""; }
            body = nb;
        }
        n += (size_t)sprintf(body + n, "%s%s%s", i++ ? " " : "", ir, required ? "" : "?");
    }
    const char *res = rule(b, fmt(b, "%s-args", fname), n ? body : "\"\"");
    free(body);
    return res;
}

static const char *json_args(tb *b, const cJSON *params, const char *fname, int *rc) {
    char *js = params ? cJSON_PrintUnformatted(params) : strdup("{\"type\":\"object\"}");
    const char *r = NULL;
    if (!js || df_jsg_visit(b->g, js, fmt(b, "%s-args", fname), &r) < 0) *rc = js ? DF_ERR_FORMAT : DF_ERR_NOMEM;
    free(js);
    return r ? r : "";
}

/* one function's call, in the format's syntax */
static const char *call_rule(tb *b, const char *format, const char *name, const cJSON *params, int *rc) {
    const char *fname = fmt(b, "fn-%s", name);
    const char *nl = df_jsg_literal(b->g, name), *nj = df_jsg_json_literal(b->g, name);
    if (!nl || !nj) { b->oom = true; return ""; }
    const char *body;
    if (!strcmp(format, "hermes")) {
        const char *a = json_args(b, params, fname, rc);
        body = fmt(b, "\"<tool_call>\\n{\\\"name\\\": \" %s \", \\\"arguments\\\": \" %s \"}\\n</tool_call>\"", nj, a);
    } else if (!strcmp(format, "qwen3-coder")) {
        const char *a = kv_args(b, 0, params, fname, rc);
        body = fmt(b, "\"<tool_call>\\n<function=\" %s \">\\n\" %s \"</function>\\n</tool_call>\"", nl, a);
    } else if (!strcmp(format, "glm-4.5")) {
        const char *a = kv_args(b, 1, params, fname, rc);
        body = fmt(b, "\"<tool_call>\" %s \"\\n\" %s \"</tool_call>\"", nl, a);
    } else if (!strcmp(format, "kimi-k3")) {
        const char *a = kv_args(b, 2, params, fname, rc);
        body = fmt(b, "\"<|open|>call tool=\\\"\" %s \"\\\" index=\\\"\" [1-9] [0-9]? \"\\\"<|sep|>\" %s \"<|close|>call<|sep|>\"", nl, a);
    } else if (!strcmp(format, "kimi-k2")) {
        const char *a = json_args(b, params, fname, rc);
        body = fmt(b, "\"<|tool_call_begin|>functions.\" %s \":\" [0-9] [0-9]? \"<|tool_call_argument_begin|>\" %s \"<|tool_call_end|>\"", nl, a);
    } else if (!strcmp(format, "deepseek-v3.1")) {
        const char *a = json_args(b, params, fname, rc);
        body = fmt(b, "\"<｜tool▁call▁begin｜>\" %s \"<｜tool▁sep｜>\" %s \"<｜tool▁call▁end｜>\"", nl, a);
    } else if (!strcmp(format, "harmony")) {
        const char *a = json_args(b, params, fname, rc);
        body = fmt(b, "\"<|channel|>commentary to=functions.\" %s \" <|constrain|>json<|message|>\" %s", nl, a);
    } else if (!strcmp(format, "llama3")) {
        const char *a = json_args(b, params, fname, rc);
        body = fmt(b, "\"{\\\"name\\\": \" %s \", \\\"parameters\\\": \" %s \"}\"", nj, a);
    } else { /* mistral */
        const char *a = json_args(b, params, fname, rc);
        body = fmt(b, "\"{\\\"name\\\": \" %s \", \\\"arguments\\\": \" %s \"}\"", nj, a);
    }
    return rule(b, fmt(b, "%s-call", fname), body);
}

int df_tool_grammar(const df_tool_format *f, const char *tools_json, const char *only_fn, bool parallel, bool lazy,
                    char **gbnf) {
    *gbnf = NULL;
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    if (!cJSON_IsArray(tools) || !cJSON_GetArraySize(tools)) {
        cJSON_Delete(tools);
        return df_err(DF_ERR_INVALID, "tool grammar: no tools");
    }
    tb b = {0};
    int rc = df_jsg_create(&b.g);
    if (rc < 0) { cJSON_Delete(tools); return rc; }
    const char *format = df_tool_format_name(f);
    size_t cap = 256, n = 0;
    char *alts = malloc(cap);
    int n_fn = 0;
    const cJSON *t;
    if (!alts) rc = DF_ERR_NOMEM;
    cJSON_ArrayForEach(t, tools) {
        if (rc < 0) break;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(nm)) continue;
        if (only_fn && strcmp(only_fn, nm->valuestring)) continue;
        const char *cr = call_rule(&b, format, nm->valuestring, cJSON_GetObjectItemCaseSensitive(fn, "parameters"), &rc);
        if (rc < 0) break;
        size_t need = n + strlen(cr) + 4;
        if (need > cap) {
            cap = need * 2;
            char *na = realloc(alts, cap);
            if (!na) { rc = DF_ERR_NOMEM; break; }
            alts = na;
        }
        n += (size_t)sprintf(alts + n, "%s%s", n_fn++ ? " | " : "", cr);
    }
    if (rc == DF_OK && !n_fn)
        rc = df_err(DF_ERR_INVALID, "tool_choice names function '%.80s', which is not among the tools", only_fn ? only_fn : "");
    if (rc == DF_OK) {
        rule(&b, "tool-call", alts);
        const char *calls = parallel ? "tool-call (\"\\n\" tool-call)*" : "tool-call";
        const char *root;
        if (!strcmp(format, "kimi-k2"))
            root = fmt(&b, "\"<|tool_calls_section_begin|>\" %s \"<|tool_calls_section_end|>\"", parallel ? "tool-call+" : "tool-call");
        else if (!strcmp(format, "deepseek-v3.1"))
            root = fmt(&b, "\"<｜tool▁calls▁begin｜>\" %s \"<｜tool▁calls▁end｜>\"", parallel ? "tool-call+" : "tool-call");
        else if (!strcmp(format, "kimi-k3")) {
            const char *tools_sec = fmt(&b, "\"<|open|>tools<|sep|>\" %s \"<|close|>tools<|sep|>\"", parallel ? "tool-call+" : "tool-call");
            /* the prompt leaves the model in its think channel: it closes it, answers nothing, calls */
            root = lazy ? tools_sec
                        : fmt(&b, "[^<]* \"<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>\" %s", tools_sec);
        } else if (!strcmp(format, "harmony") || !strcmp(format, "llama3"))
            root = "tool-call"; /* one call per message / answer */
        else if (!strcmp(format, "mistral"))
            root = parallel ? "\"[TOOL_CALLS][\" tool-call (\", \" tool-call)* \"]\"" : "\"[TOOL_CALLS][\" tool-call \"]\"";
        else
            root = calls;
        rule(&b, "root", root);
        if (b.oom) rc = df_err(DF_ERR_NOMEM, "tool grammar: out of memory");
        else rc = df_jsg_print(b.g, gbnf);
    } else if (rc == DF_ERR_NOMEM) {
        rc = df_err(DF_ERR_NOMEM, "tool grammar: out of memory");
    }
    for (int i = 0; i < b.n_tmp; i++) free(b.tmp[i]);
    free(b.tmp);
    free(alts);
    df_jsg_free(b.g);
    cJSON_Delete(tools);
    return rc;
}
