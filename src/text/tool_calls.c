/* tool_calls.c — the tool-call formats (one table row each) and their parsers (tool_calls.h).
 * Written from the chat templates deltafin ships (how each renders an assistant's tool calls
 * and reasoning) and from llama.cpp's common/chat.cpp for what models actually emit.
 * A parse is one left-to-right scan: reasoning first (the format's think tags), then content
 * up to a call section, the calls, content again. Malformed sections stay content; in a partial
 * parse an unfinished section (or a tail that may start a marker) is held back instead.
 * Threading: reentrant. */
#include "text/tool_calls.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

enum { K_HERMES, K_QWEN3_CODER, K_KIMI_K2, K_KIMI_K3, K_DEEPSEEK, K_HARMONY, K_GLM, K_LLAMA3, K_MISTRAL };

struct df_tool_format {
    const char *name;
    const char *families;      /* template names, space-separated */
    int kind;
    const char *section;       /* where calls start (also the lazy trigger, unless trigger is set) */
    const char *trigger;
    const char *think_open, *think_close;
    const char *markers[16];   /* special-token texts to keep in the output */
};

static const df_tool_format FORMATS[] = {
    {"hermes", "qwen3 chatml", K_HERMES, "<tool_call>", NULL, "<think>", "</think>",
     {"<tool_call>", "</tool_call>", "<think>", "</think>", NULL}},
    {"qwen3-coder", "qwen3-coder qwen3.5", K_QWEN3_CODER, "<tool_call>", NULL, "<think>", "</think>",
     {"<tool_call>", "</tool_call>", "<think>", "</think>", NULL}},
    {"kimi-k2", "kimi-k2 kimi-k2-base", K_KIMI_K2, "<|tool_calls_section_begin|>", NULL, "<think>", "</think>",
     {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
      "<|tool_call_end|>", "<think>", "</think>", NULL}},
    {"kimi-k3", "kimi-k3", K_KIMI_K3, "<|open|>tools<|sep|>", NULL, "<|open|>think<|sep|>", "<|close|>think<|sep|>",
     {"<|open|>", "<|close|>", "<|sep|>", NULL}},
    {"deepseek-v3.1", "deepseek-v3 deepseek-v3.1", K_DEEPSEEK, "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>", NULL,
     "<think>", "</think>",
     {"<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>", "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
      "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>", "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>",
      "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>", "<think>", "</think>", NULL}},
    {"harmony", "gpt-oss", K_HARMONY, "<|channel|>commentary to=", "<|channel|>commentary to=", NULL, NULL,
     {"<|start|>", "<|end|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|call|>", "<|return|>", NULL}},
    {"glm-4.5", "glm-4.6 glm-4.5", K_GLM, "<tool_call>", NULL, "<think>", "</think>",
     {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<think>", "</think>", NULL}},
    {"llama3", "llama3", K_LLAMA3, "{\"name\"", NULL, NULL, NULL, {"<|python_tag|>", NULL}},
    {"mistral", "mistral", K_MISTRAL, "[TOOL_CALLS]", NULL, NULL, NULL, {"[TOOL_CALLS]", NULL}},
};
enum { N_FORMATS = (int)(sizeof FORMATS / sizeof FORMATS[0]) };

static bool has_word(const char *list, const char *w) {
    size_t l = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += l)
        if ((p == list || p[-1] == ' ') && (p[l] == ' ' || !p[l])) return true;
    return false;
}

const df_tool_format *df_tool_format_for(const char *template_name) {
    for (int i = 0; template_name && i < N_FORMATS; i++)
        if (has_word(FORMATS[i].families, template_name)) return &FORMATS[i];
    return &FORMATS[0];
}
const df_tool_format *df_tool_format_by_name(const char *name) {
    for (int i = 0; name && i < N_FORMATS; i++)
        if (!strcmp(FORMATS[i].name, name)) return &FORMATS[i];
    return NULL;
}
const char *df_tool_format_name(const df_tool_format *f) { return f->name; }
const char *const *df_tool_format_markers(const df_tool_format *f) { return f->markers; }
const char *df_tool_format_trigger(const df_tool_format *f) { return f->trigger ? f->trigger : f->section; }
bool df_tool_format_always_parse(const df_tool_format *f) { return f->kind == K_HARMONY; }

bool df_tool_prompt_in_reasoning(const df_tool_format *f, const char *prompt) {
    if (!f->think_open || !prompt) return false;
    size_t n = strlen(prompt);
    while (n && (prompt[n - 1] == '\n' || prompt[n - 1] == ' ')) n--;
    size_t l = strlen(f->think_open);
    return n >= l && !memcmp(prompt + n - l, f->think_open, l);
}

/* ---- result building --------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static void add(buf *b, const char *s, size_t n) {
    if (b->oom || !n) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = (b->n + n + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

typedef struct {
    const df_tool_format *f;
    const char *t;             /* the text, NUL-terminated copy */
    size_t n;
    bool partial;
    bool raw_reasoning;          /* DF_TOOL_RAW_REASONING */
    const cJSON *tools;
    buf content, reasoning;
    df_tool_call *calls;
    int n_calls, cap_calls;
    bool oom;
} ps;

static bool add_call(ps *p, const char *id, size_t idn, const char *name, size_t nn, const char *args) {
    if (p->n_calls == p->cap_calls) {
        int nc = p->cap_calls ? p->cap_calls * 2 : 4;
        df_tool_call *a = realloc(p->calls, sizeof *a * (size_t)nc);
        if (!a) { p->oom = true; return false; }
        p->calls = a;
        p->cap_calls = nc;
    }
    df_tool_call *c = &p->calls[p->n_calls];
    c->id = id ? df_strndup(id, idn) : NULL;
    c->name = df_strndup(name, nn);
    c->arguments = strdup(args);
    if ((id && !c->id) || !c->name || !c->arguments) {
        free(c->id); free(c->name); free(c->arguments);
        p->oom = true;
        return false;
    }
    p->n_calls++;
    return true;
}

static bool starts(const ps *p, size_t at, const char *m) {
    size_t l = strlen(m);
    return at + l <= p->n && !memcmp(p->t + at, m, l);
}
/* the text from at is a proper prefix of m (more may complete it) */
static bool prefix_of(const ps *p, size_t at, const char *m) {
    size_t l = strlen(m), r = p->n - at;
    return r < l && !memcmp(p->t + at, m, r);
}
static size_t find(const ps *p, size_t from, const char *m) {
    const char *h = from <= p->n ? memmem(p->t + from, p->n - from, m, strlen(m)) : NULL;
    return h ? (size_t)(h - p->t) : (size_t)-1;
}
static size_t skip_ws(const ps *p, size_t at) {
    while (at < p->n && (p->t[at] == ' ' || p->t[at] == '\n' || p->t[at] == '\r' || p->t[at] == '\t')) at++;
    return at;
}
/* length of the longest tail of t[from..to) that is a proper prefix of a marker */
static size_t holdback(const ps *p, size_t from, size_t to, const char *const *ms) {
    size_t best = 0;
    for (int i = 0; ms[i]; i++) {
        size_t l = strlen(ms[i]);
        for (size_t k = l - 1; k > best; k--)
            if (k <= to - from && !memcmp(p->t + to - k, ms[i], k)) { best = k; break; }
    }
    return best;
}

enum { SEC_OK = 1, SEC_INCOMPLETE = 0, SEC_BAD = -1 };

/* Scan one JSON value at s[0..n): 1 complete (*end after it), 0 the text ends inside it (a
 * valid prefix), -1 not JSON. Objects and arrays nest at most 256 deep. */
static int json_scan(const char *s, size_t n, size_t *end) {
    char stack[256];
    int depth = 0;
    enum { VALUE, AFTER, KEY, COLON } want = VALUE;
    bool fresh = false; /* just inside { or [: it may close empty */
    size_t i = 0;
    for (;;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        if (i >= n) return 0;
        char c = s[i];
        if (want == AFTER) {
            if (!depth) { *end = i; return 1; }
            if (c == ',') { want = stack[depth - 1] == '{' ? KEY : VALUE; i++; continue; }
            if ((c == '}' && stack[depth - 1] == '{') || (c == ']' && stack[depth - 1] == '[')) {
                depth--;
                i++;
                if (!depth) { *end = i; return 1; }
                continue;
            }
            return -1;
        }
        if (want == COLON) {
            if (c != ':') return -1;
            want = VALUE;
            i++;
            continue;
        }
        if ((c == '}' || c == ']') && fresh) { /* empty {} or [] */
            if ((c == '}') != (stack[depth - 1] == '{')) return -1;
            fresh = false;
            depth--;
            i++;
            want = AFTER;
            if (!depth) { *end = i; return 1; }
            continue;
        }
        fresh = false;
        if (want == KEY && c != '"') return -1;
        if (c == '{' || c == '[') {
            if (depth == (int)sizeof stack) return -1;
            stack[depth++] = c;
            want = c == '{' ? KEY : VALUE;
            fresh = true;
            i++;
            continue;
        }
        if (c == '"') {
            for (i++;; i++) {
                if (i >= n) return 0;
                unsigned char ch = (unsigned char)s[i];
                if (ch == '"') break;
                if (ch < 0x20) return -1;
                if (ch == '\\') {
                    if (++i >= n) return 0;
                    if (s[i] == 'u') {
                        for (int k = 1; k <= 4; k++) {
                            if (i + (size_t)k >= n) return 0;
                            if (!strchr("0123456789abcdefABCDEF", s[i + k]) || !s[i + k]) return -1;
                        }
                        i += 4;
                    } else if (!strchr("\"\\/bfnrt", s[i]) || !s[i]) {
                        return -1;
                    }
                }
            }
            i++;
            want = want == KEY ? COLON : AFTER;
            if (want == AFTER && !depth) { *end = i; return 1; }
            continue;
        }
        if (want == KEY) return -1;
        if (c == '-' || (c >= '0' && c <= '9')) {
            size_t b = i;
            if (s[i] == '-') i++;
            while (i < n && ((s[i] >= '0' && s[i] <= '9') || strchr(".eE+-", s[i]))) i++;
            if (i >= n) return 0;
            char tmp[64];
            size_t l = i - b < sizeof tmp - 1 ? i - b : sizeof tmp - 1;
            memcpy(tmp, s + b, l);
            tmp[l] = 0;
            char *e;
            strtod(tmp, &e);
            if (*e || l == 0 || (tmp[0] == '-' && l == 1)) return -1;
            want = AFTER;
            if (!depth) { *end = i; return 1; }
            continue;
        }
        static const char *const lits[] = {"true", "false", "null"};
        bool hit = false;
        for (int k = 0; k < 3 && !hit; k++) {
            size_t l = strlen(lits[k]);
            if (s[i] != lits[k][0]) continue;
            size_t r = n - i < l ? n - i : l;
            if (memcmp(s + i, lits[k], r)) return -1;
            if (r < l) return 0;
            i += l;
            hit = true;
        }
        if (!hit) return -1;
        want = AFTER;
        if (!depth) { *end = i; return 1; }
    }
}

/* a JSON value at *at: SEC_OK (*v owned by the caller, *at after it), SEC_INCOMPLETE (the text
 * ends inside it), SEC_BAD */
static int json_at(const ps *p, size_t *at, cJSON **v) {
    size_t a = skip_ws(p, *at), e = 0;
    *v = NULL;
    int r = json_scan(p->t + a, p->n - a, &e);
    if (r <= 0) return r == 0 ? SEC_INCOMPLETE : SEC_BAD;
    *v = cJSON_ParseWithLength(p->t + a, e);
    if (!*v) return SEC_BAD; /* (e.g. a surrogate escape cJSON refuses) */
    *at = a + e;
    return SEC_OK;
}

/* arguments text of a call from a JSON value: an object, or a string holding one */
static char *args_text(cJSON *v) {
    if (cJSON_IsString(v)) {
        cJSON *o = cJSON_Parse(v->valuestring);
        char *s = o && cJSON_IsObject(o) ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        return s;
    }
    return cJSON_IsObject(v) ? cJSON_PrintUnformatted(v) : NULL;
}

/* expect marker m at *at (after whitespace): SEC_OK and move past it, SEC_INCOMPLETE, SEC_BAD */
static int expect(const ps *p, size_t *at, const char *m) {
    size_t a = skip_ws(p, *at);
    if (starts(p, a, m)) { *at = a + strlen(m); return SEC_OK; }
    if (a >= p->n || prefix_of(p, a, m)) return SEC_INCOMPLETE;
    return SEC_BAD;
}
/* where a section may go on with one of two markers: SEC_INCOMPLETE if the text ends in a
 * prefix of either, else SEC_BAD */
static int either(const ps *p, size_t at, const char *m1, const char *m2) {
    size_t a = skip_ws(p, at);
    return a >= p->n || prefix_of(p, a, m1) || prefix_of(p, a, m2) ? SEC_INCOMPLETE : SEC_BAD;
}

/* the type the tool's schema gives parameter key of function fn ("" when unknown) */
static const char *param_type(const ps *p, const char *fn, size_t fnl, const char *key) {
    const cJSON *t;
    cJSON_ArrayForEach(t, p->tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(nm) || strlen(nm->valuestring) != fnl || memcmp(nm->valuestring, fn, fnl)) continue;
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(f, "parameters"), "properties");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pr, key), "type");
        return cJSON_IsString(ty) ? ty->valuestring : "";
    }
    return "";
}

/* a key/value format's value: a string when the schema (or Kimi K3's type attribute) says so,
 * else JSON when it parses (Python's True/False as booleans), else the text */
static cJSON *typed_value(const char *v, size_t n, const char *type) {
    char *s = df_strndup(v, n);
    if (!s) return NULL;
    cJSON *r = NULL;
    if (strcmp(type, "string")) {
        if (!strcmp(s, "True") || !strcmp(s, "False")) r = cJSON_CreateBool(s[0] == 'T');
        else r = cJSON_Parse(s);
        if (r && !strcmp(type, "boolean") && !cJSON_IsBool(r)) { cJSON_Delete(r); r = NULL; }
    }
    if (!r) r = cJSON_CreateString(s);
    free(s);
    return r;
}

static char *unescape_attr(const char *s, size_t n) {
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(s + i, "&quot;", 6) && i + 6 <= n) { o[k++] = '"'; i += 5; }
        else if (!strncmp(s + i, "&amp;", 5) && i + 5 <= n) { o[k++] = '&'; i += 4; }
        else o[k++] = s[i];
    }
    o[k] = 0;
    return o;
}

/* ---- one section per format: from *at (where the section marker starts) ------------------- */

static int sec_hermes(ps *p, size_t *at) {
    size_t a = *at;
    int r = expect(p, &a, "<tool_call>");
    if (r != SEC_OK) return r;
    cJSON *v = NULL;
    if ((r = json_at(p, &a, &v)) != SEC_OK) return r;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(v, "name");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(v, "arguments");
    if (!ar) ar = cJSON_GetObjectItemCaseSensitive(v, "parameters");
    char *args = ar ? args_text((cJSON *)ar) : NULL;
    if (!cJSON_IsString(nm) || !args) { cJSON_Delete(v); free(args); return SEC_BAD; }
    r = expect(p, &a, "</tool_call>");
    if (r == SEC_OK) add_call(p, NULL, 0, nm->valuestring, strlen(nm->valuestring), args);
    cJSON_Delete(v);
    free(args);
    if (r == SEC_OK) *at = a;
    return r;
}

static int sec_qwen3_coder(ps *p, size_t *at) {
    size_t a = *at;
    int r;
    if ((r = expect(p, &a, "<tool_call>")) != SEC_OK) return r;
    if ((r = expect(p, &a, "<function=")) != SEC_OK) return r;
    size_t ne = find(p, a, ">");
    if (ne == (size_t)-1) return find(p, a, "\n") == (size_t)-1 ? SEC_INCOMPLETE : SEC_BAD;
    const char *fn = p->t + a;
    size_t fnl = ne - a;
    a = ne + 1;
    cJSON *o = cJSON_CreateObject();
    if (!o) { p->oom = true; return SEC_BAD; }
    for (;;) {
        size_t b = skip_ws(p, a);
        if (starts(p, b, "<parameter=")) {
            b += 11;
            size_t ke = find(p, b, ">");
            if (ke == (size_t)-1) { r = SEC_INCOMPLETE; break; }
            char *key = df_strndup(p->t + b, ke - b);
            size_t vs = ke + 1, ve = find(p, vs, "</parameter>");
            if (!key || ve == (size_t)-1) { free(key); r = key ? SEC_INCOMPLETE : SEC_BAD; break; }
            size_t v0 = vs, v1 = ve;
            if (v0 < v1 && p->t[v0] == '\n') v0++;
            if (v1 > v0 && p->t[v1 - 1] == '\n') v1--;
            cJSON *val = typed_value(p->t + v0, v1 - v0, param_type(p, fn, fnl, key));
            if (val) cJSON_AddItemToObject(o, key, val);
            free(key);
            a = ve + 12;
            continue;
        }
        if (starts(p, b, "</function>")) {
            a = b + 11;
            r = expect(p, &a, "</tool_call>");
            break;
        }
        r = b >= p->n || prefix_of(p, b, "<parameter=") || prefix_of(p, b, "</function>") ? SEC_INCOMPLETE : SEC_BAD;
        break;
    }
    if (r == SEC_OK) {
        char *args = cJSON_PrintUnformatted(o);
        if (args) add_call(p, NULL, 0, fn, fnl, args);
        free(args);
        *at = a;
    }
    cJSON_Delete(o);
    return r;
}

static int sec_kimi_k2(ps *p, size_t *at) {
    size_t a = *at;
    int r = expect(p, &a, "<|tool_calls_section_begin|>");
    if (r != SEC_OK) return r;
    int n0 = p->n_calls;
    for (;;) {
        size_t b = skip_ws(p, a);
        if (starts(p, b, "<|tool_calls_section_end|>")) { a = b + 26; r = SEC_OK; break; }
        if (!starts(p, b, "<|tool_call_begin|>")) { r = either(p, b, "<|tool_call_begin|>", "<|tool_calls_section_end|>"); break; }
        b += 19;
        size_t ie = find(p, b, "<|tool_call_argument_begin|>");
        if (ie == (size_t)-1) { r = find(p, b, "<|tool_call_end|>") == (size_t)-1 ? SEC_INCOMPLETE : SEC_BAD; break; }
        /* id "functions.NAME:IDX" */
        const char *id = p->t + b;
        size_t idl = ie - b;
        while (idl && (id[idl - 1] == ' ' || id[idl - 1] == '\n')) idl--;
        const char *nm = id, *colon = NULL;
        for (size_t i = 0; i < idl; i++) if (id[i] == ':') colon = id + i;
        if (idl > 10 && !memcmp(id, "functions.", 10)) nm = id + 10;
        size_t nml = (size_t)((colon ? colon : id + idl) - nm);
        b = ie + 28;
        cJSON *v = NULL;
        if ((r = json_at(p, &b, &v)) != SEC_OK) break;
        char *args = args_text(v);
        cJSON_Delete(v);
        if (!args) { r = SEC_BAD; break; }
        r = expect(p, &b, "<|tool_call_end|>");
        if (r == SEC_OK) add_call(p, id, idl, nm, nml, args);
        free(args);
        if (r != SEC_OK) break;
        a = b;
    }
    if (r != SEC_OK) {
        while (p->n_calls > n0) { /* the section is all or nothing */
            df_tool_call *c = &p->calls[--p->n_calls];
            free(c->id); free(c->name); free(c->arguments);
        }
        return r;
    }
    *at = a;
    return SEC_OK;
}

#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

static int sec_deepseek(ps *p, size_t *at) {
    size_t a = *at;
    int r = expect(p, &a, DS_CALLS_BEGIN);
    if (r != SEC_OK) return r;
    int n0 = p->n_calls;
    for (;;) {
        size_t b = skip_ws(p, a);
        if (starts(p, b, DS_CALLS_END)) { a = b + strlen(DS_CALLS_END); r = SEC_OK; break; }
        if (!starts(p, b, DS_CALL_BEGIN)) { r = either(p, b, DS_CALL_BEGIN, DS_CALLS_END); break; }
        b += strlen(DS_CALL_BEGIN);
        size_t se = find(p, b, DS_SEP);
        if (se == (size_t)-1) { r = find(p, b, DS_CALL_END) == (size_t)-1 ? SEC_INCOMPLETE : SEC_BAD; break; }
        const char *nm = p->t + b;
        size_t nml = se - b;
        b = se + strlen(DS_SEP);
        bool v3 = nml == 8 && !memcmp(nm, "function", 8); /* V3: function<sep>NAME\n```json\n{...}\n``` */
        if (v3) {
            size_t le = find(p, b, "\n");
            if (le == (size_t)-1) { r = SEC_INCOMPLETE; break; }
            nm = p->t + b;
            nml = le - b;
            b = le + 1;
            if ((r = expect(p, &b, "```json")) != SEC_OK) break;
        }
        cJSON *v = NULL;
        if ((r = json_at(p, &b, &v)) != SEC_OK) break;
        char *args = args_text(v);
        cJSON_Delete(v);
        if (!args) { r = SEC_BAD; break; }
        if (v3) r = expect(p, &b, "```");
        if (r == SEC_OK) r = expect(p, &b, DS_CALL_END);
        if (r == SEC_OK) add_call(p, NULL, 0, nm, nml, args);
        free(args);
        if (r != SEC_OK) break;
        a = b;
    }
    if (r != SEC_OK) {
        while (p->n_calls > n0) {
            df_tool_call *c = &p->calls[--p->n_calls];
            free(c->id); free(c->name); free(c->arguments);
        }
        return r;
    }
    *at = a;
    return SEC_OK;
}

static int sec_glm(ps *p, size_t *at) {
    size_t a = *at;
    int r = expect(p, &a, "<tool_call>");
    if (r != SEC_OK) return r;
    size_t e = a;
    while (e < p->n && p->t[e] != '\n' && p->t[e] != '<') e++;
    if (e >= p->n) return SEC_INCOMPLETE;
    const char *fn = p->t + a;
    size_t fnl = e - a;
    while (fnl && fn[fnl - 1] == ' ') fnl--;
    if (!fnl) return SEC_BAD;
    a = e;
    cJSON *o = cJSON_CreateObject();
    if (!o) { p->oom = true; return SEC_BAD; }
    for (;;) {
        size_t b = skip_ws(p, a);
        if (starts(p, b, "</tool_call>")) { a = b + 12; r = SEC_OK; break; }
        if (!starts(p, b, "<arg_key>")) { r = either(p, b, "<arg_key>", "</tool_call>"); break; }
        b += 9;
        size_t ke = find(p, b, "</arg_key>");
        if (ke == (size_t)-1) { r = SEC_INCOMPLETE; break; }
        char *key = df_strndup(p->t + b, ke - b);
        b = ke + 10;
        if (!key || (r = expect(p, &b, "<arg_value>")) != SEC_OK) { free(key); if (!key) r = SEC_BAD; break; }
        size_t ve = find(p, b, "</arg_value>");
        if (ve == (size_t)-1) { free(key); r = SEC_INCOMPLETE; break; }
        cJSON *val = typed_value(p->t + b, ve - b, param_type(p, fn, fnl, key));
        if (val) cJSON_AddItemToObject(o, key, val);
        free(key);
        a = ve + 12;
    }
    if (r == SEC_OK) {
        char *args = cJSON_PrintUnformatted(o);
        if (args) add_call(p, NULL, 0, fn, fnl, args);
        free(args);
        *at = a;
    }
    cJSON_Delete(o);
    return r;
}

static int sec_mistral(ps *p, size_t *at) {
    size_t a = *at;
    int r = expect(p, &a, "[TOOL_CALLS]");
    if (r != SEC_OK) return r;
    cJSON *v = NULL;
    if ((r = json_at(p, &a, &v)) != SEC_OK) return r;
    if (cJSON_IsObject(v)) { /* one call without the array */
        cJSON *arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, v);
        v = arr;
    }
    const cJSON *c;
    int n0 = p->n_calls;
    r = cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0 ? SEC_OK : SEC_BAD;
    cJSON_ArrayForEach(c, v) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(c, "name"), *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        char *args = args_text(cJSON_GetObjectItemCaseSensitive(c, "arguments"));
        if (!cJSON_IsString(nm) || !args) { free(args); r = SEC_BAD; break; }
        add_call(p, cJSON_IsString(id) ? id->valuestring : NULL, cJSON_IsString(id) ? strlen(id->valuestring) : 0,
                 nm->valuestring, strlen(nm->valuestring), args);
        free(args);
    }
    cJSON_Delete(v);
    if (r != SEC_OK) {
        while (p->n_calls > n0) {
            df_tool_call *k = &p->calls[--p->n_calls];
            free(k->id); free(k->name); free(k->arguments);
        }
        return r;
    }
    *at = a;
    return SEC_OK;
}

/* Kimi K3: <|open|>tools<|sep|> calls <|close|>tools<|sep|> */
static int sec_kimi_k3(ps *p, size_t *at) {
    size_t a = *at;
    int r = expect(p, &a, "<|open|>tools<|sep|>");
    if (r != SEC_OK) return r;
    int n0 = p->n_calls;
    for (;;) {
        size_t b = skip_ws(p, a);
        if (starts(p, b, "<|close|>tools<|sep|>")) { a = b + 21; r = SEC_OK; break; }
        if (!starts(p, b, "<|open|>call tool=\"")) { r = either(p, b, "<|open|>call tool=\"", "<|close|>tools<|sep|>"); break; }
        b += 19;
        size_t ne = find(p, b, "\"");
        if (ne == (size_t)-1) { r = SEC_INCOMPLETE; break; }
        char *fn = unescape_attr(p->t + b, ne - b);
        size_t he = find(p, ne, "<|sep|>");
        if (!fn || he == (size_t)-1) { free(fn); r = fn ? SEC_INCOMPLETE : SEC_BAD; break; }
        b = he + 7;
        cJSON *o = cJSON_CreateObject();
        char *json_block = NULL;
        for (;;) {
            size_t c = skip_ws(p, b);
            if (starts(p, c, "<|close|>call<|sep|>")) { b = c + 20; r = SEC_OK; break; }
            if (starts(p, c, "<|open|>json")) {
                size_t js = find(p, c, "<|sep|>"), je = js == (size_t)-1 ? js : find(p, js, "<|close|>json<|sep|>");
                if (je == (size_t)-1) { r = SEC_INCOMPLETE; break; }
                free(json_block);
                json_block = df_strndup(p->t + js + 7, je - js - 7);
                b = je + 20;
                continue;
            }
            if (!starts(p, c, "<|open|>argument key=\"")) {
                r = either(p, c, "<|open|>argument key=\"", "<|close|>call<|sep|>");
                if (r == SEC_BAD && (c >= p->n || prefix_of(p, c, "<|open|>json"))) r = SEC_INCOMPLETE;
                break;
            }
            c += 22;
            size_t ke = find(p, c, "\"");
            size_t te = ke == (size_t)-1 ? ke : find(p, ke, "<|sep|>");
            if (te == (size_t)-1) { r = SEC_INCOMPLETE; break; }
            char *key = unescape_attr(p->t + c, ke - c);
            const char *ty = strstr(p->t + ke, "type=\"");
            char type[16] = "";
            if (ty && (size_t)(ty - p->t) < te) {
                size_t k = 0;
                for (ty += 6; *ty && *ty != '"' && k + 1 < sizeof type; ty++) type[k++] = *ty;
                type[k] = 0;
            }
            size_t vs = te + 7, ve = find(p, vs, "<|close|>argument<|sep|>");
            if (!key || ve == (size_t)-1) { free(key); r = key ? SEC_INCOMPLETE : SEC_BAD; break; }
            cJSON *val = typed_value(p->t + vs, ve - vs, type[0] ? type : param_type(p, fn, strlen(fn), key));
            if (val) cJSON_AddItemToObject(o, key, val);
            free(key);
            b = ve + 24;
        }
        if (r == SEC_OK) {
            char *args = NULL;
            if (json_block) {
                cJSON *jb = cJSON_Parse(json_block);
                args = jb && cJSON_IsObject(jb) ? cJSON_PrintUnformatted(jb) : NULL;
                cJSON_Delete(jb);
            } else {
                args = cJSON_PrintUnformatted(o);
            }
            if (args) add_call(p, NULL, 0, fn, strlen(fn), args);
            else r = SEC_BAD;
            free(args);
        }
        free(json_block);
        free(fn);
        cJSON_Delete(o);
        if (r != SEC_OK) break;
        a = b;
    }
    if (r != SEC_OK) {
        while (p->n_calls > n0) {
            df_tool_call *k = &p->calls[--p->n_calls];
            free(k->id); free(k->name); free(k->arguments);
        }
        return r;
    }
    *at = a;
    return SEC_OK;
}

static int section(ps *p, size_t *at) {
    switch (p->f->kind) {
    case K_HERMES: return sec_hermes(p, at);
    case K_QWEN3_CODER: return sec_qwen3_coder(p, at);
    case K_KIMI_K2: return sec_kimi_k2(p, at);
    case K_KIMI_K3: return sec_kimi_k3(p, at);
    case K_DEEPSEEK: return sec_deepseek(p, at);
    case K_GLM: return sec_glm(p, at);
    case K_MISTRAL: return sec_mistral(p, at);
    default: return SEC_BAD;
    }
}

/* content text t[a..b): Kimi K3 wraps it in response tags and ends the message with a close */
static void add_content(ps *p, size_t a, size_t b) {
    if (p->f->kind != K_KIMI_K3) { add(&p->content, p->t + a, b - a); return; }
    static const char *const strip[] = {"<|open|>response<|sep|>", "<|close|>response<|sep|>", "<|close|>message<|sep|>"};
    while (a < b) {
        size_t best = b, bl = 0;
        for (int i = 0; i < 3; i++) {
            const char *h = memmem(p->t + a, b - a, strip[i], strlen(strip[i]));
            if (h && (size_t)(h - p->t) < best) { best = (size_t)(h - p->t); bl = strlen(strip[i]); }
        }
        add(&p->content, p->t + a, best - a);
        a = best + bl;
    }
}

/* reasoning from *at when the text opens (or the prompt left it in) the think tags */
static bool reasoning(ps *p, size_t *at, bool in_reasoning) {
    const df_tool_format *f = p->f;
    if (!f->think_open) return true;
    size_t a = skip_ws(p, *at);
    if (!in_reasoning) {
        if (starts(p, a, f->think_open)) { a += strlen(f->think_open); in_reasoning = true; }
        else if (p->partial && (a >= p->n || prefix_of(p, a, f->think_open))) return false; /* may still open */
    }
    if (!in_reasoning) return true;
    size_t e = find(p, a, f->think_close);
    if (e == (size_t)-1) {
        size_t hb = p->partial ? holdback(p, a, p->n, (const char *const[]){f->think_close, NULL}) : 0;
        add(&p->reasoning, p->t + a, p->n - a - hb);
        *at = p->n;
        return false;
    }
    add(&p->reasoning, p->t + a, e - a);
    *at = e + strlen(f->think_close);
    return true;
}

/* ---- Harmony (gpt-oss): messages with a channel and maybe a recipient -------------------- */

static void parse_harmony(ps *p) {
    static const char *const ends[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", NULL};
    size_t a = 0;
    while (a < p->n) {
        if (starts(p, a, "<|start|>")) { /* next message: its role ("assistant"), maybe " to=..." */
            a += 9;
            while (a < p->n && p->t[a] != '<' && p->t[a] != ' ') a++;
            if (a >= p->n) return;
            continue;
        }
        if (!starts(p, a, "<|channel|>") && !starts(p, a, " to=")) {
            if (p->partial && (prefix_of(p, a, "<|channel|>") || prefix_of(p, a, " to="))) return;
            /* plain text: the answer itself */
            size_t e = p->n;
            for (int i = 0; ends[i]; i++) {
                size_t x = find(p, a, ends[i]);
                if (x < e) e = x;
            }
            size_t c = find(p, a, "<|channel|>");
            if (c < e) e = c;
            size_t hb = p->partial && e == p->n ? holdback(p, a, e, p->f->markers) : 0;
            add(&p->content, p->t + a, e - a - hb);
            if (e == p->n) return;
            a = starts(p, e, "<|channel|>") || starts(p, e, "<|start|>") ? e : e + (p->t[e + 2] == 'e' ? 7 : p->t[e + 2] == 'c' ? 8 : 10);
            continue;
        }
        size_t me = find(p, a, "<|message|>");
        if (me == (size_t)-1) {
            if (!p->partial) add(&p->content, p->t + a, p->n - a);
            return;
        }
        /* header: channel name and recipient */
        char channel[32] = "", recipient[128] = "";
        const char *h = p->t + a, *he = p->t + me;
        const char *ch = memmem(h, (size_t)(he - h), "<|channel|>", 11);
        if (ch) {
            size_t k = 0;
            for (ch += 11; ch < he && *ch != ' ' && *ch != '<' && k + 1 < sizeof channel; ch++) channel[k++] = *ch;
            channel[k] = 0;
        }
        const char *to = memmem(h, (size_t)(he - h), "to=", 3);
        if (to) {
            size_t k = 0;
            for (to += 3; to < he && *to != ' ' && *to != '<' && k + 1 < sizeof recipient; to++) recipient[k++] = *to;
            recipient[k] = 0;
        }
        size_t bs = me + 11, be = p->n;
        for (int i = 0; ends[i]; i++) {
            size_t x = find(p, bs, ends[i]);
            if (x < be) be = x;
        }
        bool closed = be < p->n;
        bool is_call = !strncmp(recipient, "functions.", 10);
        if (is_call) {
            if (!closed && p->partial) return;
            cJSON *v = NULL;
            char *body = df_strndup(p->t + bs, be - bs);
            v = body ? cJSON_Parse(body) : NULL;
            char *args = v ? args_text(v) : NULL;
            if (args) add_call(p, NULL, 0, recipient + 10, strlen(recipient + 10), args);
            else add(&p->content, p->t + bs, be - bs);
            free(args);
            cJSON_Delete(v);
            free(body);
        } else if (p->raw_reasoning && !strcmp(channel, "analysis")) {
            /* llama.cpp's reasoning_format "none": the message as written, header to <|end|> */
            size_t hb = p->partial && !closed ? holdback(p, bs, be, ends) : 0;
            add(&p->content, p->t + a, be - a - hb);
            if (closed && starts(p, be, "<|end|>")) add(&p->content, "<|end|>", 7);
        } else {
            size_t hb = p->partial && !closed ? holdback(p, bs, be, ends) : 0;
            buf *dst = !strcmp(channel, "analysis") ? &p->reasoning : &p->content;
            if (dst == &p->reasoning && p->reasoning.n && (be - bs - hb)) add(dst, "\n", 1);
            add(dst, p->t + bs, be - bs - hb);
        }
        if (!closed) return;
        a = be;
        if (starts(p, a, "<|end|>")) a += 7;
        else if (starts(p, a, "<|call|>")) a += 8;
        else if (starts(p, a, "<|return|>")) a += 10;
    }
}

/* ---- Llama 3: the whole answer is the call ----------------------------------------------- */

static void parse_llama3(ps *p) {
    size_t a = skip_ws(p, 0);
    if (starts(p, a, "<|python_tag|>")) a = skip_ws(p, a + 14);
    if (a < p->n && p->t[a] == '{') {
        size_t b = a;
        cJSON *v = NULL;
        int r = json_at(p, &b, &v);
        if (r == SEC_INCOMPLETE && p->partial) return;
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(v, "name");
        const cJSON *ar = cJSON_GetObjectItemCaseSensitive(v, "parameters");
        if (!ar) ar = cJSON_GetObjectItemCaseSensitive(v, "arguments");
        char *args = ar ? args_text((cJSON *)ar) : NULL;
        if (r == SEC_OK && cJSON_IsString(nm) && args && skip_ws(p, b) == p->n) {
            add_call(p, NULL, 0, nm->valuestring, strlen(nm->valuestring), args);
            free(args);
            cJSON_Delete(v);
            return;
        }
        free(args);
        cJSON_Delete(v);
    } else if (p->partial && (a >= p->n || prefix_of(p, a, "<|python_tag|>"))) {
        return;
    }
    add(&p->content, p->t, p->n);
}

/* ---- the scan ------------------------------------------------------------------------------- */

static void parse_marked(ps *p, bool in_reasoning) {
    size_t a = 0;
    if (!p->raw_reasoning && !reasoning(p, &a, in_reasoning)) return;
    const char *const sec_plain[] = {p->f->section, NULL};
    const char *const sec_k3[] = {p->f->section, "<|open|>response<|sep|>", "<|close|>response<|sep|>",
                                  "<|close|>message<|sep|>", NULL};
    const char *const *sec = p->f->kind == K_KIMI_K3 ? sec_k3 : sec_plain;
    while (a < p->n) {
        size_t s = find(p, a, p->f->section);
        if (s == (size_t)-1) {
            size_t hb = p->partial ? holdback(p, a, p->n, sec) : 0;
            add_content(p, a, p->n - hb);
            return;
        }
        add_content(p, a, s);
        size_t e = s;
        int r = section(p, &e);
        if (r == SEC_OK) { a = e; continue; }
        if (r == SEC_INCOMPLETE && p->partial) return;
        /* malformed (or unfinished at the end): the text stays content */
        size_t next = find(p, s + 1, p->f->section);
        size_t stop = next == (size_t)-1 || r == SEC_INCOMPLETE ? p->n : next;
        add_content(p, s, stop);
        a = stop;
    }
}

static char *trimmed(buf *b, bool partial) {
    size_t s = 0, e = b->n;
    while (s < e && strchr(" \n\r\t", b->p[s])) s++;
    while (e > s && strchr(" \n\r\t", b->p[e - 1])) e--; /* partial: trailing blanks may be followed by more */
    (void)partial;
    return df_strndup(b->p ? b->p + s : "", e - s);
}

int df_tool_parse(const df_tool_format *f, const char *text, size_t n, bool partial, unsigned flags,
                  const char *tools_json, df_tool_result *out) {
    memset(out, 0, sizeof *out);
    ps p = {0};
    p.f = f;
    char *t = df_strndup(text ? text : "", text ? n : 0);
    if (!t) return df_err(DF_ERR_NOMEM, "tool calls: out of memory");
    p.t = t;
    p.n = text ? n : 0;
    p.partial = partial;
    p.raw_reasoning = flags & DF_TOOL_RAW_REASONING;
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    p.tools = tools;
    if (f->kind == K_HARMONY) parse_harmony(&p);
    else if (f->kind == K_LLAMA3) parse_llama3(&p);
    else parse_marked(&p, flags & DF_TOOL_IN_REASONING);
    cJSON_Delete(tools);
    free(t);
    out->content = trimmed(&p.content, partial);
    out->reasoning = trimmed(&p.reasoning, partial);
    free(p.content.p);
    free(p.reasoning.p);
    out->calls = p.calls;
    out->n_calls = p.n_calls;
    if (p.oom || p.content.oom || p.reasoning.oom || !out->content || !out->reasoning) {
        df_tool_result_free(out);
        return df_err(DF_ERR_NOMEM, "tool calls: out of memory");
    }
    return DF_OK;
}

void df_tool_result_free(df_tool_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i].id);
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    free(r->content);
    free(r->reasoning);
    memset(r, 0, sizeof *r);
}
