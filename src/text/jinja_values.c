/* jinja_values.c — the interpreter's values: the render arena and its error exit, strings,
 * lists and dicts (insertion-ordered, Python keys), Python's str()/repr()/==/<, iteration
 * and slicing, str's strip / replace / split / case algorithms, and JSON both ways:
 * json.dumps for tojson (byte-identical to Python's) and json.loads for the messages /
 * tools / extra variables (cJSON parses; see from_cjson).
 * Invariant: every allocation is in the render's arena (jx), freed all at once. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>

#include "text/jinja_impl.h"

/* ------------------------------------------------------------------------------------------ */
/* arena + error exit                                                                           */

_Noreturn void jfail(jx *J, int status, int line, int col, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(J->err, sizeof J->err, "template %d:%d: %s", line, col, msg);
    else
        snprintf(J->err, sizeof J->err, "%s", msg);
    J->status = status;
    longjmp(J->jb, 1);
}

void *amalloc(jx *J, size_t n) {
    n = (n + 15) & ~(size_t)15;
    ablk *b = J->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > (64u << 10) ? n : (64u << 10);
        if (J->total + cap > ARENA_LIMIT)
            jfail(J, DF_ERR_RANGE, 0, 0, "memory limit (%u MiB) exceeded",
                  ARENA_LIMIT >> 20);
        ablk *nb = malloc(sizeof(ablk) + cap);
        if (!nb) jfail(J, DF_ERR_NOMEM, 0, 0, "out of memory");
        nb->next = J->blocks;
        nb->used = 0;
        nb->cap = cap;
        J->blocks = nb;
        J->total += cap;
        b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void arena_free(jx *J) {
    ablk *b = J->blocks;
    while (b) {
        ablk *n = b->next;
        free(b);
        b = n;
    }
    J->blocks = NULL;
}
/* ------------------------------------------------------------------------------------------ */
/* strings, lists, dicts, byte buffers                                                          */

jstr *jstr_new(jx *J, const char *s, size_t n) {
    jstr *r = amalloc(J, sizeof(jstr) + n + 1);
    r->len = n;
    r->safe = false;
    if (n) memcpy(r->s, s, n);
    r->s[n] = 0;
    return r;
}
jval mk_strn(jx *J, const char *s, size_t n) {
    jval v = {.t = V_STR};
    v.s = jstr_new(J, s, n);
    return v;
}
jval mk_str(jx *J, const char *s) { return mk_strn(J, s, strlen(s)); }

jlist *list_new(jx *J, int cap) {
    jlist *l = amalloc(J, sizeof(jlist));
    l->n = 0;
    l->cap = cap < 4 ? 4 : cap;
    l->tuple = false;
    l->v = amalloc(J, sizeof(jval) * (size_t)l->cap);
    return l;
}
void list_push(jx *J, jlist *l, jval v) {
    if (l->n == l->cap) {
        if (l->cap > (1 << 26)) jfail(J, DF_ERR_RANGE, 0, 0, "list too long");
        int nc = l->cap * 2;
        jval *nv = amalloc(J, sizeof(jval) * (size_t)nc);
        memcpy(nv, l->v, sizeof(jval) * (size_t)l->n);
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = v;
}

jdict *dict_new(jx *J) {
    jdict *d = amalloc(J, sizeof(jdict));
    d->n = 0;
    d->cap = 0;
    d->k = NULL;
    d->v = NULL;
    d->kv = NULL;
    return d;
}
int dict_find(const jdict *d, const char *k, size_t kl) {
    for (int i = 0; i < d->n; i++)
        if (d->k[i]->len == kl && !memcmp(d->k[i]->s, k, kl) && (!d->kv || d->kv[i].t == V_STR)) return i;
    return -1;
}
void dict_grow(jx *J, jdict *d) {
    if (d->n < d->cap) return;
    int nc = d->cap ? d->cap * 2 : 8;
    jstr **nk = amalloc(J, sizeof(jstr *) * (size_t)nc);
    jval *nv = amalloc(J, sizeof(jval) * (size_t)nc);
    jval *nkv = d->kv ? amalloc(J, sizeof(jval) * (size_t)nc) : NULL;
    if (d->n) {
        memcpy(nk, d->k, sizeof(jstr *) * (size_t)d->n);
        memcpy(nv, d->v, sizeof(jval) * (size_t)d->n);
        if (nkv) memcpy(nkv, d->kv, sizeof(jval) * (size_t)d->n);
    }
    d->k = nk;
    d->v = nv;
    d->kv = nkv;
    d->cap = nc;
}
jval dict_key(const jdict *d, int i) { return d->kv ? d->kv[i] : mk_sv(d->k[i]); }
jval *dict_get(const jdict *d, const char *k) {
    int i = dict_find(d, k, strlen(k));
    return i < 0 ? NULL : &d->v[i];
}
void dict_set(jx *J, jdict *d, jstr *k, jval v) {
    int i = dict_find(d, k->s, k->len);
    if (i >= 0) {
        d->v[i] = v;
        return;
    }
    dict_grow(J, d);
    d->k[d->n] = k;
    d->v[d->n] = v;
    if (d->kv) d->kv[d->n] = mk_sv(k);
    d->n++;
}
void dict_setc(jx *J, jdict *d, const char *k, jval v) { dict_set(J, d, jstr_new(J, k, strlen(k)), v); }

void sb_put(jx *J, sbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (b->n + n > J->max_output)
        jfail(J, DF_ERR_RANGE, 0, 0, "output limit (%zu bytes) exceeded",
              J->max_output);
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n) nc *= 2;
        char *np = amalloc(J, nc);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
void sb_puts(jx *J, sbuf *b, const char *s) { sb_put(J, b, s, strlen(s)); }
void sb_putc(jx *J, sbuf *b, char c) { sb_put(J, b, &c, 1); }
void sb_printf(jx *J, sbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(J, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
jval sb_val(jx *J, sbuf *b) { return mk_strn(J, b->p ? b->p : "", b->n); }

/* ------------------------------------------------------------------------------------------ */
/* Python semantics                                                                             */

const char *type_name(jval v) {
    switch (v.t) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return "str";
    case V_LIST: return v.l->tuple ? "tuple" : "list";
    case V_DICT: return "dict";
    case V_NS: return "Namespace";
    case V_MACRO: return "Macro";
    default: return "function";
    }
}

bool truthy(jval v) {
    switch (v.t) {
    case V_UNDEF: case V_NONE: return false;
    case V_BOOL: return v.b;
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0.0;
    case V_STR: return v.s->len != 0;
    case V_LIST: return v.l->n != 0;
    case V_DICT: return v.d->n != 0;
    default: return true;
    }
}

/* --- Python str()/repr() ------------------------------------------------------------------- */

void fmt_float(char *buf, size_t cap, double x) {
    if (isnan(x)) { snprintf(buf, cap, "nan"); return; }
    if (isinf(x)) { snprintf(buf, cap, x > 0 ? "inf" : "-inf"); return; }
    char tmp[64];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX */
    char digits[32];
    int nd = 0, exp10;
    bool neg = tmp[0] == '-';
    const char *q = tmp + (neg ? 1 : 0);
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = buf;
    size_t left = cap;
#define PUT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg) PUT("-");
    if (exp10 >= -5 + 1 && exp10 < 16) { /* -4 <= exp < 16: positional */
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) PUT("%c", i < nd ? digits[i] : '0');
            PUT(".");
            if (nd > exp10 + 1) PUT("%s", digits + exp10 + 1);
            else PUT("0");
        } else {
            PUT("0.");
            for (int i = 0; i < -exp10 - 1; i++) PUT("0");
            PUT("%s", digits);
        }
    } else {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
#undef PUT
}


void py_str(ev *E, sbuf *b, jval v, int depth) {
    jx *J = E->J;
    char tmp[64];
    switch (v.t) {
    case V_UNDEF: return;
    case V_NONE: sb_puts(J, b, "None"); return;
    case V_BOOL: sb_puts(J, b, v.b ? "True" : "False"); return;
    case V_INT: sb_printf(J, b, "%lld", (long long)v.i); return;
    case V_FLOAT: fmt_float(tmp, sizeof tmp, v.f); sb_puts(J, b, tmp); return;
    case V_STR: sb_put(J, b, v.s->s, v.s->len); return;
    default: py_repr(E, b, v, depth); return;
    }
}

static void repr_str(ev *E, sbuf *b, const char *s, size_t n) {
    jx *J = E->J;
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    sb_putc(J, b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') sb_puts(J, b, "\\\\");
        else if (c == (unsigned char)q) { sb_putc(J, b, '\\'); sb_putc(J, b, (char)c); }
        else if (c == '\n') sb_puts(J, b, "\\n");
        else if (c == '\r') sb_puts(J, b, "\\r");
        else if (c == '\t') sb_puts(J, b, "\\t");
        else if (c < 0x20 || c == 0x7f) sb_printf(J, b, "\\x%02x", c);
        else sb_putc(J, b, (char)c);
    }
    sb_putc(J, b, q);
}

void py_repr(ev *E, sbuf *b, jval v, int depth) {
    jx *J = E->J;
    if (depth > JSON_DEPTH_LIMIT) jfail(J, DF_ERR_RANGE, 0, 0, "value nested too deeply to print");
    switch (v.t) {
    case V_UNDEF: sb_puts(J, b, "Undefined"); return;
    case V_STR: repr_str(E, b, v.s->s, v.s->len); return;
    case V_LIST:
        sb_putc(J, b, v.l->tuple ? '(' : '[');
        for (int i = 0; i < v.l->n; i++) {
            if (i) sb_puts(J, b, ", ");
            py_repr(E, b, v.l->v[i], depth + 1);
        }
        if (v.l->tuple && v.l->n == 1) sb_putc(J, b, ',');
        sb_putc(J, b, v.l->tuple ? ')' : ']');
        return;
    case V_DICT: case V_NS:
        if (v.t == V_NS) sb_puts(J, b, "<Namespace ");
        sb_putc(J, b, '{');
        for (int i = 0; i < v.d->n; i++) {
            if (i) sb_puts(J, b, ", ");
            py_repr(E, b, dict_key(v.d, i), depth + 1);
            sb_puts(J, b, ": ");
            py_repr(E, b, v.d->v[i], depth + 1);
        }
        sb_putc(J, b, '}');
        if (v.t == V_NS) sb_putc(J, b, '>');
        return;
    case V_MACRO: sb_printf(J, b, "<Macro '%s'>", v.m->def->s->s); return;
    case V_FUNC: case V_METHOD: sb_puts(J, b, "<function>"); return;
    default: py_str(E, b, v, depth); return;
    }
}

jval to_str(ev *E, jval v) {
    if (v.t == V_STR) return v;
    sbuf b = {0};
    py_str(E, &b, v, 0);
    return sb_val(E->J, &b);
}

/* --- JSON (json.dumps) --------------------------------------------------------------------- */

static void json_str(ev *E, sbuf *b, const char *s, size_t n, bool ascii) {
    jx *J = E->J;
    sb_putc(J, b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') { sb_puts(J, b, "\\\""); i++; }
        else if (c == '\\') { sb_puts(J, b, "\\\\"); i++; }
        else if (c == '\n') { sb_puts(J, b, "\\n"); i++; }
        else if (c == '\r') { sb_puts(J, b, "\\r"); i++; }
        else if (c == '\t') { sb_puts(J, b, "\\t"); i++; }
        else if (c == '\b') { sb_puts(J, b, "\\b"); i++; }
        else if (c == '\f') { sb_puts(J, b, "\\f"); i++; }
        else if (c < 0x20 || (ascii && c == 0x7f)) { sb_printf(J, b, "\\u%04x", c); i++; }
        else if (c < 0x80 || !ascii) {
            sb_putc(J, b, (char)c);
            i++;
        } else {
            uint32_t cp;
            i += (size_t)u8_next(s + i, n - i, &cp);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                sb_printf(J, b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                sb_printf(J, b, "\\u%04x", cp);
            }
        }
    }
    sb_putc(J, b, '"');
}

static int key_cmp_plain(const void *a, const void *b) {
    const jstr *x = *(jstr *const *)a, *y = *(jstr *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len < y->len ? -1 : x->len > y->len);
}

void json_dump(ev *E, node *at, sbuf *b, jval v, const jsonopt *o, int level) {
    jx *J = E->J;
    char tmp[64];
    if (level > JSON_DEPTH_LIMIT) jfail(J, DF_ERR_RANGE, at->line, at->col, "tojson: value nested too deeply");
    switch (v.t) {
    case V_NONE: sb_puts(J, b, "null"); return;
    case V_BOOL: sb_puts(J, b, v.b ? "true" : "false"); return;
    case V_INT: sb_printf(J, b, "%lld", (long long)v.i); return;
    case V_FLOAT:
        if (isnan(v.f)) sb_puts(J, b, "NaN");
        else if (isinf(v.f)) sb_puts(J, b, v.f > 0 ? "Infinity" : "-Infinity");
        else { fmt_float(tmp, sizeof tmp, v.f); sb_puts(J, b, tmp); }
        return;
    case V_STR: json_str(E, b, v.s->s, v.s->len, o->ensure_ascii); return;
    case V_LIST: case V_DICT: {
        bool isd = v.t == V_DICT;
        int n = isd ? v.d->n : v.l->n;
        if (n == 0) { sb_puts(J, b, isd ? "{}" : "[]"); return; }
        sb_putc(J, b, isd ? '{' : '[');
        int *order = NULL;
        if (isd && o->sort_keys && v.d->kv) { /* mixed/non-string keys: Python sorts the real keys */
            order = amalloc(J, sizeof(int) * (size_t)n);
            for (int i = 0; i < n; i++) {
                int j = i;
                for (; j > 0 && py_cmp(E, at, v.d->kv[order[j - 1]], v.d->kv[i]) > 0; j--) order[j] = order[j - 1];
                order[j] = i;
            }
        } else if (isd && o->sort_keys) {
            jstr **ks = amalloc(J, sizeof(jstr *) * (size_t)n);
            memcpy(ks, v.d->k, sizeof(jstr *) * (size_t)n);
            qsort(ks, (size_t)n, sizeof(jstr *), key_cmp_plain);
            order = amalloc(J, sizeof(int) * (size_t)n);
            for (int i = 0; i < n; i++) order[i] = dict_find(v.d, ks[i]->s, ks[i]->len);
        }
        for (int i = 0; i < n; i++) {
            if (i) sb_puts(J, b, o->item_sep);
            if (o->indent) {
                sb_putc(J, b, '\n');
                for (int k = 0; k <= level; k++) sb_puts(J, b, o->indent);
            }
            if (isd) {
                int j = order ? order[i] : i;
                if (v.d->kv && v.d->kv[j].t == V_LIST)
                    rt_fail(E, at, "TypeError: keys must be str, int, float, bool or None, not tuple");
                json_str(E, b, v.d->k[j]->s, v.d->k[j]->len, o->ensure_ascii);
                sb_puts(J, b, o->key_sep);
                json_dump(E, at, b, v.d->v[j], o, level + 1);
            } else {
                json_dump(E, at, b, v.l->v[i], o, level + 1);
            }
        }
        if (o->indent) {
            sb_putc(J, b, '\n');
            for (int k = 0; k < level; k++) sb_puts(J, b, o->indent);
        }
        sb_putc(J, b, isd ? '}' : ']');
        return;
    }
    default:
        rt_fail(E, at, "Object of type %s is not JSON serializable", type_name(v));
    }
}

/* --- JSON input (json.loads of messages / tools / extra variables) --------------------------
 * cJSON parses and validates. What templates are written against is Python's json.loads, and
 * cJSON differs from it in ways that one pass over the (valid) text puts right:
 *   - cJSON keeps every number as a double; Python makes "2" an int and "2.0" / "2e0" a float
 *     (tojson, `is integer` and string conversion tell them apart): the number lexemes are
 *     collected in document order, which is the order a depth-first walk of the tree meets
 *     the number nodes;
 *   - cJSON accepts raw control characters inside strings, any byte <= 0x20 (and a UTF-8
 *     BOM) between tokens, and numbers as strtod reads them ("1.", "-.5"); json.loads
 *     rejects them, and so does this.
 * Strings holding \u0000 end at the NUL (cJSON's strings are C strings); lone surrogate
 * escapes are a syntax error (cJSON), where json.loads would keep them. */
typedef struct {
    jx *J;
    const char *what;
    const char **num;  /* number lexemes, document order */
    int n_num, cap_num, next;
} jin;

static _Noreturn void jin_fail(jin *c, const char *s, const char *p, const char *msg) {
    jfail(c->J, DF_ERR_FORMAT, 0, 0, "%s JSON: %s at offset %zu", c->what, msg, (size_t)(p - s));
}

static void jin_add_number(jin *c, const char *p) {
    if (c->n_num == c->cap_num) {
        int nc = c->cap_num ? c->cap_num * 2 : 64;
        const char **nn = amalloc(c->J, sizeof(char *) * (size_t)nc);
        if (c->n_num) memcpy(nn, c->num, sizeof(char *) * (size_t)c->n_num);
        c->num = nn;
        c->cap_num = nc;
    }
    c->num[c->n_num++] = p;
}

/* Where the number at p leaves -?D+(.D+)?([eE][+-]?D+)? (D a digit), NULL if it does not:
 * cJSON takes whatever strtod takes ("1.", "-.5", "1.e5"), json.loads does not. */
static const char *jin_bad_number(const char *p) {
    if (*p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) return p;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return p;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return p;
    }
    return NULL;
}

static void jin_scan(jin *c, const char *s) {
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            for (p++; *p != '"'; p++) {
                if ((unsigned char)*p < 0x20) jin_fail(c, s, p, "control character in string");
                if (*p == '\\') p++;
            }
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            const char *bad = jin_bad_number(p);
            if (bad) jin_fail(c, s, bad, "bad number");
            jin_add_number(c, p);
            while (p[1] && strchr("0123456789+-.eE", p[1])) p++;
        } else if ((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch >= 0x80) {
            jin_fail(c, s, p, "unexpected character");
        }
    }
}

static jval jin_number(jin *c, const cJSON *x) {
    DF_ASSERT(c->next < c->n_num);
    const char *p = c->num[c->next++];
    bool isf = false;
    for (const char *q = p; *q && strchr("0123456789+-.eE", *q); q++)
        if (*q == '.' || *q == 'e' || *q == 'E') isf = true;
    if (!isf) {
        errno = 0;
        long long v = strtoll(p, NULL, 10);
        if (!errno) return mk_int(v);
    }
    return mk_float(x->valuedouble); /* too large for int64: a float, as before */
}

static jval from_cjson(jin *c, const cJSON *x, int depth) {
    jx *J = c->J;
    if (depth > JSON_DEPTH_LIMIT) jfail(J, DF_ERR_FORMAT, 0, 0, "%s JSON: nested too deeply", c->what);
    if (cJSON_IsTrue(x)) return mk_bool(true);
    if (cJSON_IsFalse(x)) return mk_bool(false);
    if (cJSON_IsNull(x)) return NONE;
    if (cJSON_IsNumber(x)) return jin_number(c, x);
    if (cJSON_IsString(x)) return mk_str(J, x->valuestring);
    if (cJSON_IsArray(x)) {
        jlist *l = list_new(J, 4);
        for (const cJSON *e = x->child; e; e = e->next) list_push(J, l, from_cjson(c, e, depth + 1));
        return mk_list(l);
    }
    DF_ASSERT(cJSON_IsObject(x));
    jdict *d = dict_new(J);
    for (const cJSON *e = x->child; e; e = e->next) {
        jstr *k = jstr_new(J, e->string, strlen(e->string));
        dict_set(J, d, k, from_cjson(c, e, depth + 1)); /* a repeated key: last value, first place */
    }
    return mk_dict(d, V_DICT);
}

jval df_jinja_from_json(jx *J, const char *s, const char *what) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(s, &end, true);
    if (!root)
        jfail(J, DF_ERR_FORMAT, 0, 0, "%s JSON: syntax error at offset %zu", what, end ? (size_t)(end - s) : (size_t)0);
    J->json_tmp = root; /* freed by the entry point if anything below fails */
    jin c = {.J = J, .what = what};
    jin_scan(&c, s);
    jval v = from_cjson(&c, root, 0);
    J->json_tmp = NULL;
    cJSON_Delete(root);
    return v;
}

/* --- equality / comparison ----------------------------------------------------------------- */


bool py_eq(jval a, jval b, int depth) {
    if (depth > JSON_DEPTH_LIMIT) return false;
    if (is_num(a) && is_num(b)) {
        if (a.t == V_FLOAT || b.t == V_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return true;
    case V_STR: return a.s->len == b.s->len && !memcmp(a.s->s, b.s->s, a.s->len);
    case V_LIST:
        if (a.l->tuple != b.l->tuple || a.l->n != b.l->n) return false;
        for (int i = 0; i < a.l->n; i++)
            if (!py_eq(a.l->v[i], b.l->v[i], depth + 1)) return false;
        return true;
    case V_DICT:
        if (a.d->n != b.d->n) return false;
        for (int i = 0; i < a.d->n; i++) {
            int j = dict_find_val(b.d, dict_key(a.d, i));
            if (j < 0 || !py_eq(a.d->v[i], b.d->v[j], depth + 1)) return false;
        }
        return true;
    case V_NS: return a.d == b.d;
    case V_MACRO: return a.m == b.m;
    default: return false;
    }
}

/* dict lookup/insert by any hashable key (Python semantics: 1 == 1.0 == True) */
int dict_find_val(const jdict *d, jval key) {
    if (key.t == V_STR) return dict_find(d, key.s->s, key.s->len);
    if (!d->kv) return -1;
    for (int i = 0; i < d->n; i++)
        if (d->kv[i].t != V_STR && py_eq(d->kv[i], key, 0)) return i;
    return -1;
}
void dict_set_val(ev *E, node *at, jdict *d, jval key, jval v) {
    jx *J = E->J;
    if (key.t == V_STR) {
        dict_set(J, d, key.s, v);
        return;
    }
    if (!(key.t == V_INT || key.t == V_BOOL || key.t == V_FLOAT || key.t == V_NONE || (key.t == V_LIST && key.l->tuple)))
        rt_fail(E, at, "unhashable type: '%s'", type_name(key));
    int i = dict_find_val(d, key);
    if (i >= 0) {
        d->v[i] = v;
        return;
    }
    if (!d->kv) {
        d->kv = amalloc(J, sizeof(jval) * (size_t)(d->cap ? d->cap : 1));
        for (int k = 0; k < d->n; k++) d->kv[k] = mk_sv(d->k[k]);
    }
    char tmp[64];
    jstr *ks;
    if (key.t == V_INT) { snprintf(tmp, sizeof tmp, "%lld", (long long)key.i); ks = jstr_new(J, tmp, strlen(tmp)); }
    else if (key.t == V_BOOL) ks = jstr_new(J, key.b ? "true" : "false", key.b ? 4 : 5);
    else if (key.t == V_NONE) ks = jstr_new(J, "null", 4);
    else if (key.t == V_FLOAT) { fmt_float(tmp, sizeof tmp, key.f); ks = jstr_new(J, tmp, strlen(tmp)); }
    else ks = jstr_new(J, "", 0);
    dict_grow(J, d);
    d->k[d->n] = ks;
    d->v[d->n] = v;
    d->kv[d->n] = key;
    d->n++;
}

int py_cmp(ev *E, node *at, jval a, jval b) {
    if (is_num(a) && is_num(b)) {
        if (a.t == V_FLOAT || b.t == V_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
        int c = memcmp(a.s->s, b.s->s, n);
        if (c) return c < 0 ? -1 : 1;
        return a.s->len < b.s->len ? -1 : a.s->len > b.s->len;
    }
    if (a.t == V_LIST && b.t == V_LIST && a.l->tuple == b.l->tuple) {
        for (int i = 0; i < a.l->n && i < b.l->n; i++) {
            if (!py_eq(a.l->v[i], b.l->v[i], 0)) return py_cmp(E, at, a.l->v[i], b.l->v[i]);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    rt_fail(E, at, "'<' not supported between instances of '%s' and '%s'", type_name(a), type_name(b));
}

/* --- sequences ---------------------------------------------------------------------------- */

/* Convert an iterable to a list of items (strings -> characters, dict -> keys). */
jlist *iter_list(ev *E, node *at, jval v) {
    jx *J = E->J;
    switch (v.t) {
    case V_UNDEF: return list_new(J, 1);
    case V_LIST: return v.l;
    case V_DICT: {
        jlist *l = list_new(J, v.d->n);
        for (int i = 0; i < v.d->n; i++) list_push(J, l, dict_key(v.d, i));
        return l;
    }
    case V_STR: {
        jlist *l = list_new(J, (int)(v.s->len < 1000000 ? v.s->len : 1000000));
        for (size_t i = 0; i < v.s->len;) {
            uint32_t cp;
            int n = u8_next(v.s->s + i, v.s->len - i, &cp);
            list_push(J, l, mk_strn(J, v.s->s + i, (size_t)n));
            i += (size_t)n;
        }
        return l;
    }
    default:
        rt_fail(E, at, "'%s' object is not iterable", type_name(v));
    }
}

int64_t py_len(ev *E, node *at, jval v) {
    switch (v.t) {
    case V_UNDEF: return 0;
    case V_STR: return (int64_t)u8_count(v.s->s, v.s->len);
    case V_LIST: return v.l->n;
    case V_DICT: return v.d->n;
    default: rt_fail(E, at, "object of type '%s' has no len()", type_name(v));
    }
}

/* Python slice index normalization */
static void slice_indices(int64_t len, jval st, jval en, jval sp, int64_t *start, int64_t *stop, int64_t *stepv,
                          ev *E, node *at) {
    int64_t step = 1;
    if (sp.t != V_NONE && sp.t != V_UNDEF) {
        if (sp.t != V_INT) rt_fail(E, at, "slice indices must be integers");
        step = sp.i;
        if (step == 0) rt_fail(E, at, "slice step cannot be zero");
    }
    int64_t lo, hi;
    if (step > 0) { lo = 0; hi = len; } else { lo = -1; hi = len - 1; }
    int64_t s0, s1;
    if (st.t == V_NONE || st.t == V_UNDEF) s0 = step > 0 ? lo : hi;
    else {
        if (st.t != V_INT) rt_fail(E, at, "slice indices must be integers");
        s0 = st.i;
        if (s0 < 0) { s0 += len; if (s0 < lo) s0 = lo; }
        else if (s0 > hi) s0 = hi;
    }
    if (en.t == V_NONE || en.t == V_UNDEF) s1 = step > 0 ? hi : lo;
    else {
        if (en.t != V_INT) rt_fail(E, at, "slice indices must be integers");
        s1 = en.i;
        if (s1 < 0) { s1 += len; if (s1 < lo) s1 = lo; }
        else if (s1 > hi) s1 = hi;
    }
    *start = s0;
    *stop = s1;
    *stepv = step;
}

/* code point offsets of a string: off[i] = byte offset of char i, off[n] = len */
size_t *str_offsets(ev *E, jstr *s, int64_t *count) {
    size_t n = u8_count(s->s, s->len);
    size_t *off = amalloc(E->J, sizeof(size_t) * (n + 1));
    size_t k = 0;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp;
        off[k++] = i;
        i += (size_t)u8_next(s->s + i, s->len - i, &cp);
    }
    off[k] = s->len;
    *count = (int64_t)n;
    return off;
}

jval do_slice(ev *E, node *at, jval obj, jval st, jval en, jval sp) {
    jx *J = E->J;
    int64_t start, stop, stp;
    if (obj.t == V_LIST) {
        slice_indices(obj.l->n, st, en, sp, &start, &stop, &stp, E, at);
        jlist *l = list_new(J, 4);
        l->tuple = obj.l->tuple;
        for (int64_t i = start; stp > 0 ? i < stop : i > stop; i += stp) list_push(J, l, obj.l->v[i]);
        return mk_list(l);
    }
    if (obj.t == V_STR) {
        int64_t n;
        size_t *off = str_offsets(E, obj.s, &n);
        slice_indices(n, st, en, sp, &start, &stop, &stp, E, at);
        sbuf b = {0};
        for (int64_t i = start; stp > 0 ? i < stop : i > stop; i += stp)
            sb_put(J, &b, obj.s->s + off[i], off[i + 1] - off[i]);
        return sb_val(J, &b);
    }
    if (obj.t == V_UNDEF) rt_fail(E, at, "cannot slice an undefined value");
    rt_fail(E, at, "'%s' object is not subscriptable", type_name(obj));
}
jval undef_named(ev *E, const char *name) {
    jval v = UNDEF;
    v.s = jstr_new(E->J, name, strlen(name));
    return v;
}

_Noreturn void undef_fail(ev *E, node *at, jval u, const char *what) {
    if (u.s) rt_fail(E, at, "'%s' is undefined (%s)", u.s->s, what);
    rt_fail(E, at, "undefined value (%s)", what);
}


const char *memmem_s(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    if (hn < nn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

/* --- string helpers ----------------------------------------------------------------------- */

static bool in_chars(uint32_t cp, jstr *chars) {
    for (size_t i = 0; i < chars->len;) {
        uint32_t c;
        i += (size_t)u8_next(chars->s + i, chars->len - i, &c);
        if (c == cp) return true;
    }
    return false;
}
/* mode: 1 = left, 2 = right, 3 = both. chars NULL = whitespace */
jval str_strip(ev *E, jstr *s, jstr *chars, int mode) {
    size_t a = 0, b = s->len;
    if (mode & 1)
        while (a < b) {
            uint32_t cp;
            int l = u8_next(s->s + a, b - a, &cp);
            if (chars ? !in_chars(cp, chars) : !is_py_space(cp)) break;
            a += (size_t)l;
        }
    if (mode & 2)
        while (b > a) {
            uint32_t cp;
            int l = u8_prev(s->s + a, b - a, &cp);
            if (chars ? !in_chars(cp, chars) : !is_py_space(cp)) break;
            b -= (size_t)l;
        }
    return mk_strn(E->J, s->s + a, b - a);
}


jval str_replace(ev *E, jstr *s, jstr *old, jstr *nw, int64_t count) {
    jx *J = E->J;
    sbuf b = {0};
    if (old->len == 0) {
        /* Python: insert between every character */
        int64_t done = 0;
        for (size_t i = 0; i <= s->len;) {
            if (count < 0 || done < count) { sb_put(J, &b, nw->s, nw->len); done++; }
            if (i == s->len) break;
            uint32_t cp;
            int l = u8_next(s->s + i, s->len - i, &cp);
            sb_put(J, &b, s->s + i, (size_t)l);
            i += (size_t)l;
        }
        return sb_val(J, &b);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s->len) {
        const char *p = (count < 0 || done < count) ? memmem_s(s->s + i, s->len - i, old->s, old->len) : NULL;
        if (!p) break;
        size_t k = (size_t)(p - s->s);
        sb_put(J, &b, s->s + i, k - i);
        sb_put(J, &b, nw->s, nw->len);
        i = k + old->len;
        done++;
    }
    sb_put(J, &b, s->s + i, s->len - i);
    return sb_val(J, &b);
}

jval str_split(ev *E, jstr *s, jstr *sep, int64_t maxsplit, bool right) {
    jx *J = E->J;
    jlist *l = list_new(J, 4);
    if (!sep) {
        /* whitespace split */
        size_t i = 0;
        int64_t splits = 0;
        if (right) {
            /* rsplit(None): collect from the right */
            jlist *tmp = list_new(J, 4);
            size_t e = s->len;
            for (;;) {
                while (e > 0) { uint32_t cp; int k = u8_prev(s->s, e, &cp); if (!is_py_space(cp)) break; e -= (size_t)k; }
                if (e == 0) break;
                size_t st = e;
                if (maxsplit >= 0 && splits >= maxsplit) { list_push(J, tmp, mk_strn(J, s->s, e)); break; }
                while (st > 0) { uint32_t cp; int k = u8_prev(s->s, st, &cp); if (is_py_space(cp)) break; st -= (size_t)k; }
                list_push(J, tmp, mk_strn(J, s->s + st, e - st));
                splits++;
                e = st;
            }
            for (int k = tmp->n - 1; k >= 0; k--) list_push(J, l, tmp->v[k]);
            return mk_list(l);
        }
        for (;;) {
            while (i < s->len) { uint32_t cp; int k = u8_next(s->s + i, s->len - i, &cp); if (!is_py_space(cp)) break; i += (size_t)k; }
            if (i >= s->len) break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                jval rest = str_strip(E, jstr_new(J, s->s + i, s->len - i), NULL, 2);
                list_push(J, l, rest);
                break;
            }
            size_t st = i;
            while (i < s->len) { uint32_t cp; int k = u8_next(s->s + i, s->len - i, &cp); if (is_py_space(cp)) break; i += (size_t)k; }
            list_push(J, l, mk_strn(J, s->s + st, i - st));
            splits++;
        }
        return mk_list(l);
    }
    if (right && maxsplit >= 0) {
        jlist *tmp = list_new(J, 4);
        size_t e = s->len;
        int64_t splits = 0;
        while (splits < maxsplit) {
            const char *found = NULL;
            for (size_t k = e; k >= sep->len; k--) {
                if (!memcmp(s->s + k - sep->len, sep->s, sep->len)) { found = s->s + k - sep->len; break; }
                if (k == sep->len) break;
            }
            if (!found) break;
            size_t fs = (size_t)(found - s->s);
            list_push(J, tmp, mk_strn(J, found + sep->len, e - fs - sep->len));
            e = fs;
            splits++;
        }
        list_push(J, tmp, mk_strn(J, s->s, e));
        for (int k = tmp->n - 1; k >= 0; k--) list_push(J, l, tmp->v[k]);
        return mk_list(l);
    }
    size_t i = 0;
    int64_t splits = 0;
    for (;;) {
        const char *p = (maxsplit < 0 || splits < maxsplit) ? memmem_s(s->s + i, s->len - i, sep->s, sep->len) : NULL;
        if (!p) {
            list_push(J, l, mk_strn(J, s->s + i, s->len - i));
            break;
        }
        list_push(J, l, mk_strn(J, s->s + i, (size_t)(p - s->s) - i));
        i = (size_t)(p - s->s) + sep->len;
        splits++;
    }
    return mk_list(l);
}

jval str_case(ev *E, jstr *s, int mode) { /* 0 upper, 1 lower, 2 title, 3 capitalize (ASCII) */
    jstr *r = jstr_new(E->J, s->s, s->len);
    bool start = true;
    for (size_t i = 0; i < r->len; i++) {
        char c = r->s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (mode == 0 && c >= 'a' && c <= 'z') r->s[i] = (char)(c - 32);
        else if (mode == 1 && c >= 'A' && c <= 'Z') r->s[i] = (char)(c + 32);
        else if (mode == 2) {
            if (alpha) r->s[i] = start ? (char)(c >= 'a' && c <= 'z' ? c - 32 : c) : (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            start = !alpha;
        } else if (mode == 3) {
            if (i == 0 && c >= 'a' && c <= 'z') r->s[i] = (char)(c - 32);
            else if (i > 0 && c >= 'A' && c <= 'Z') r->s[i] = (char)(c + 32);
        }
    }
    return mk_sv(r);
}
