/* chat.c — Jinja2-subset interpreter for Hugging Face chat templates.
 *
 * Pipeline: source -> lexer (whitespace control, trim_blocks/lstrip_blocks exactly as jinja2's
 * lexer) -> recursive-descent parser (jinja2's precedence) -> AST -> tree-walking evaluator over
 * Python-like values (undefined, none, bool, int, float, str, list/tuple, dict, namespace, macro,
 * builtin function, bound method).
 *
 * Memory: everything of one render (tokens, AST, values, output pieces) lives in one arena that
 * is freed at the end, so values need no reference counting and mutation (list.append, namespace
 * attributes) is shared the Python way. Errors longjmp back to the entry point after recording a
 * message with the template line:col. Limits: arena bytes, output bytes, evaluation steps, macro
 * recursion depth, parser nesting depth, JSON nesting depth.
 */
#include "text/chat.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <time.h>

#include "base/util.h"

#define ARENA_LIMIT (512u << 20)
#define OUTPUT_LIMIT_DEFAULT (64u << 20)
#define STEP_LIMIT 20000000LL
#define CALL_DEPTH_LIMIT 96
#define PARSE_DEPTH_LIMIT 200
#define JSON_DEPTH_LIMIT 200
#define RANGE_LIMIT 1000000
#define EVAL_DEPTH_LIMIT 1000 /* nested eval/exec frames (C stack bound) */

/* ------------------------------------------------------------------------------------------ */
/* arena + error context                                                                        */

typedef struct ablk {
    struct ablk *next;
    size_t used, cap;
    max_align_t data[];
} ablk;

typedef struct jx jx;
typedef struct jstr jstr;
struct jx {
    ablk *blocks;
    size_t total;
    jmp_buf jb;
    int status;
    char err[512];
    long long steps, max_steps;
    jstr *loopkeys[11];
    int depth, edepth;
    size_t max_output;
    int64_t now;
    const char *src; /* normalized template source (for error positions) */
};

static _Noreturn void jfail(jx *J, int status, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static _Noreturn void jfail(jx *J, int status, int line, int col, const char *fmt, ...) {
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

static void *amalloc(jx *J, size_t n) {
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

static void arena_free(jx *J) {
    ablk *b = J->blocks;
    while (b) {
        ablk *n = b->next;
        free(b);
        b = n;
    }
    J->blocks = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* values                                                                                       */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_MACRO, V_FUNC,
       V_METHOD };

struct jstr {
    size_t len;
    bool safe; /* Markup */
    char s[];
};

typedef struct jval jval;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct macro macro;
typedef struct method method;

struct jval {
    uint8_t t;
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s; /* V_STR; V_UNDEF: name hint or NULL */
        jlist *l;
        jdict *d; /* V_DICT, V_NS */
        macro *m;
        int fn;
        method *bm;
    };
};

struct jlist {
    int n, cap;
    bool tuple;
    jval *v;
};

struct jdict {
    int n, cap;
    jstr **k; /* key text (for non-string keys: their JSON object-key form) */
    jval *v;
    jval *kv; /* NULL while all keys are strings; else the real key of every entry */
};

struct method {
    jval self;
    const char *name;
};

static const jval UNDEF = {.t = V_UNDEF};
static const jval NONE = {.t = V_NONE};

static jval mk_bool(bool b) { jval v = {.t = V_BOOL}; v.b = b; return v; }
static jval mk_int(int64_t i) { jval v = {.t = V_INT}; v.i = i; return v; }
static jval mk_float(double f) { jval v = {.t = V_FLOAT}; v.f = f; return v; }

static jstr *jstr_new(jx *J, const char *s, size_t n) {
    jstr *r = amalloc(J, sizeof(jstr) + n + 1);
    r->len = n;
    r->safe = false;
    if (n) memcpy(r->s, s, n);
    r->s[n] = 0;
    return r;
}
static jval mk_strn(jx *J, const char *s, size_t n) {
    jval v = {.t = V_STR};
    v.s = jstr_new(J, s, n);
    return v;
}
static jval mk_str(jx *J, const char *s) { return mk_strn(J, s, strlen(s)); }
static jval mk_sv(jstr *s) { jval v = {.t = V_STR}; v.s = s; return v; }
static void fmt_float(char *buf, size_t cap, double x);

static jlist *list_new(jx *J, int cap) {
    jlist *l = amalloc(J, sizeof(jlist));
    l->n = 0;
    l->cap = cap < 4 ? 4 : cap;
    l->tuple = false;
    l->v = amalloc(J, sizeof(jval) * (size_t)l->cap);
    return l;
}
static void list_push(jx *J, jlist *l, jval v) {
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
static jval mk_list(jlist *l) { jval v = {.t = V_LIST}; v.l = l; return v; }

static jdict *dict_new(jx *J) {
    jdict *d = amalloc(J, sizeof(jdict));
    d->n = 0;
    d->cap = 0;
    d->k = NULL;
    d->v = NULL;
    d->kv = NULL;
    return d;
}
static int dict_find(const jdict *d, const char *k, size_t kl) {
    for (int i = 0; i < d->n; i++)
        if (d->k[i]->len == kl && !memcmp(d->k[i]->s, k, kl) && (!d->kv || d->kv[i].t == V_STR)) return i;
    return -1;
}
static void dict_grow(jx *J, jdict *d) {
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
static jval mk_sv(jstr *s);
static jval dict_key(const jdict *d, int i) { return d->kv ? d->kv[i] : mk_sv(d->k[i]); }
static jval *dict_get(const jdict *d, const char *k) {
    int i = dict_find(d, k, strlen(k));
    return i < 0 ? NULL : &d->v[i];
}
static void dict_set(jx *J, jdict *d, jstr *k, jval v) {
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
static void dict_setc(jx *J, jdict *d, const char *k, jval v) { dict_set(J, d, jstr_new(J, k, strlen(k)), v); }
static jval mk_dict(jdict *d, int t) { jval v = {.t = (uint8_t)t}; v.d = d; return v; }

/* growable byte buffer in the arena */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(jx *J, sbuf *b, const char *s, size_t n) {
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
static void sb_puts(jx *J, sbuf *b, const char *s) { sb_put(J, b, s, strlen(s)); }
static void sb_putc(jx *J, sbuf *b, char c) { sb_put(J, b, &c, 1); }
static void sb_printf(jx *J, sbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sb_printf(jx *J, sbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(J, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
static jval sb_val(jx *J, sbuf *b) { return mk_strn(J, b->p ? b->p : "", b->n); }

/* ------------------------------------------------------------------------------------------ */
/* UTF-8 helpers                                                                                */

static int utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;
}
/* decode one code point at s (n bytes available); returns byte length */
static int utf8_dec(const char *s, size_t n, uint32_t *cp) {
    unsigned char c = (unsigned char)s[0];
    int l = utf8_len(c);
    if ((size_t)l > n) l = 1;
    if (l == 1) {
        *cp = c;
        return 1;
    }
    uint32_t v = c & (0x7F >> l);
    for (int i = 1; i < l; i++) {
        unsigned char d = (unsigned char)s[i];
        if ((d & 0xC0) != 0x80) {
            *cp = c;
            return 1;
        }
        v = (v << 6) | (d & 0x3F);
    }
    *cp = v;
    return l;
}
static int utf8_enc(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
static size_t utf8_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)utf8_dec(s + i, n - i, &cp);
        c++;
    }
    return c;
}
static bool is_py_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}
/* byte length of the last code point ending at s[n-1] */
static int utf8_last(const char *s, size_t n, uint32_t *cp) {
    size_t i = n - 1;
    int back = 0;
    while (i > 0 && back < 3 && ((unsigned char)s[i] & 0xC0) == 0x80) i--, back++;
    int l = utf8_dec(s + i, n - i, cp);
    if ((size_t)l != n - i) { *cp = (unsigned char)s[n - 1]; return 1; }
    return l;
}

/* ------------------------------------------------------------------------------------------ */
/* lexer                                                                                        */

enum { T_TEXT, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF };

typedef struct {
    int t;
    int line, col;
    jstr *s; /* TEXT, NAME, STR, OP */
    int64_t i;
    double f;
} tok;

typedef struct {
    jx *J;
    const char *s;
    size_t n, pos;
    int line;
    size_t line_start;
    tok *v;
    int nt, cap;
} lexer;

static void lx_push(lexer *L, tok t) {
    if (L->nt == L->cap) {
        int nc = L->cap ? L->cap * 2 : 256;
        tok *nv = amalloc(L->J, sizeof(tok) * (size_t)nc);
        if (L->nt) memcpy(nv, L->v, sizeof(tok) * (size_t)L->nt);
        L->v = nv;
        L->cap = nc;
    }
    L->v[L->nt++] = t;
}

static void pos_of(const char *s, size_t off, int *line, int *col) {
    int l = 1;
    size_t ls = 0;
    for (size_t i = 0; i < off; i++)
        if (s[i] == '\n') l++, ls = i + 1;
    *line = l;
    *col = (int)utf8_count(s + ls, off - ls) + 1;
}

static _Noreturn void lx_fail(lexer *L, size_t off, const char *msg) {
    int line, col;
    pos_of(L->s, off, &line, &col);
    jfail(L->J, DF_ERR_FORMAT, line, col, "%s", msg);
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python-style rstrip of all whitespace */
static size_t rstrip_len(const char *s, size_t n) {
    while (n > 0) {
        uint32_t cp;
        int l = utf8_last(s, n, &cp);
        if (!is_py_space(cp)) break;
        n -= (size_t)l;
    }
    return n;
}
static size_t lstrip_off(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = utf8_dec(s + i, n - i, &cp);
        if (!is_py_space(cp)) break;
        i += (size_t)l;
    }
    return i;
}

static const char *OPS2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
static const char OPS1[] = "+-*/%~<>=.,:|()[]{}";

/* decode a Python/jinja string literal body with escapes */
static jstr *decode_string(lexer *L, size_t start, size_t end) {
    jx *J = L->J;
    sbuf b = {0};
    const char *s = L->s;
    for (size_t i = start; i < end; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= end) {
            sb_putc(J, &b, c);
            continue;
        }
        char e = s[++i];
        char tmp[4];
        switch (e) {
        case 'n': sb_putc(J, &b, '\n'); break;
        case 't': sb_putc(J, &b, '\t'); break;
        case 'r': sb_putc(J, &b, '\r'); break;
        case '\\': sb_putc(J, &b, '\\'); break;
        case '\'': sb_putc(J, &b, '\''); break;
        case '"': sb_putc(J, &b, '"'); break;
        case 'a': sb_putc(J, &b, '\a'); break;
        case 'b': sb_putc(J, &b, '\b'); break;
        case 'f': sb_putc(J, &b, '\f'); break;
        case 'v': sb_putc(J, &b, '\v'); break;
        case '\n': break; /* line continuation */
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            if (i + (size_t)nd >= end + 0 && i + (size_t)nd > end - 0) lx_fail(L, i, "truncated \\x/\\u escape in string");
            for (int k = 1; k <= nd; k++) {
                char h = s[i + (size_t)k];
                int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (d < 0) lx_fail(L, i, "bad hex digit in string escape");
                cp = cp * 16 + (uint32_t)d;
            }
            if (cp > 0x10FFFF) lx_fail(L, i, "code point out of range in string escape");
            i += (size_t)nd;
            sb_put(J, &b, tmp, (size_t)utf8_enc(cp, tmp));
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < end && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[++i] - '0');
                sb_put(J, &b, tmp, (size_t)utf8_enc(cp, tmp));
            } else {
                sb_putc(J, &b, '\\');
                sb_putc(J, &b, e);
            }
        }
    }
    return jstr_new(J, b.p ? b.p : "", b.n);
}

static tok mktok(lexer *L, int t, size_t off) {
    tok k = {0};
    k.t = t;
    int line, col;
    /* incremental line tracking */
    while (L->pos < off) {
        if (L->s[L->pos] == '\n') L->line++, L->line_start = L->pos + 1;
        L->pos++;
    }
    line = L->line;
    col = (int)utf8_count(L->s + L->line_start, off - L->line_start) + 1;
    k.line = line;
    k.col = col;
    return k;
}

static void lex(lexer *L) {
    const char *s = L->s;
    size_t n = L->n, pos = 0;
    bool line_starting = true;
    bool strip_next = false; /* previous tag ended with '-' */
    L->pos = 0;
    L->line = 1;
    L->line_start = 0;
    while (pos <= n) {
        /* find next tag opener */
        size_t start = pos;
        int kind = -1;
        while (start + 1 < n) {
            if (s[start] == '{' && (s[start + 1] == '{' || s[start + 1] == '%' || s[start + 1] == '#')) {
                kind = s[start + 1];
                break;
            }
            start++;
        }
        if (kind < 0) start = n;
        size_t tb = pos, te = start;
        if (strip_next) tb += lstrip_off(s + tb, te - tb);
        strip_next = false;
        char sign = 0;
        if (kind >= 0 && start + 2 < n && (s[start + 2] == '-' || s[start + 2] == '+')) sign = s[start + 2];
        if (kind >= 0) {
            if (sign == '-') {
                te = tb + rstrip_len(s + tb, te - tb);
            } else if (sign != '+' && kind != '{') {
                /* lstrip_blocks */
                size_t lp = te;
                while (lp > tb && s[lp - 1] != '\n') lp--;
                if (lp > tb || line_starting) {
                    bool allws = true;
                    for (size_t i = lp; i < te; i++)
                        if (!is_ws(s[i])) { allws = false; break; }
                    if (allws) te = lp;
                }
            }
        }
        if (te > tb) {
            tok t = mktok(L, T_TEXT, tb);
            t.s = jstr_new(L->J, s + tb, te - tb);
            lx_push(L, t);
        }
        if (kind < 0) break;
        size_t p = start + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t e = p;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) lx_fail(L, start, "missing end of comment tag '#}'");
            char es = e > p ? s[e - 1] : 0;
            pos = e + 2;
            if (es == '-') {
                strip_next = true;
                /* jinja: -#}\s* — consumed whitespace decides line_starting */
                size_t q = pos + lstrip_off(s + pos, n - pos);
                line_starting = q > pos ? s[q - 1] == '\n' : false;
                pos = q;
                strip_next = false;
            } else if (es != '+' && pos < n && s[pos] == '\n') {
                pos++;
                line_starting = true;
            } else {
                line_starting = false;
            }
            continue;
        }
        if (kind == '%') { /* {% raw %} ... {% endraw %}: verbatim text */
            size_t q = p;
            while (q < n && is_ws(s[q])) q++;
            if (n - q >= 3 && !memcmp(s + q, "raw", 3) && (q + 3 >= n || !(isalnum((unsigned char)s[q + 3]) || s[q + 3] == '_'))) {
                q += 3;
                while (q < n && is_ws(s[q])) q++;
                bool strip_after = false;
                if (q < n && s[q] == '-') { strip_after = true; q++; }
                else if (q < n && s[q] == '+') q++;
                if (q + 1 >= n || s[q] != '%' || s[q + 1] != '}') lx_fail(L, start, "malformed {% raw %} tag");
                q += 2;
                if (strip_after) q += lstrip_off(s + q, n - q); /* no trim_blocks after raw (as jinja2) */
                /* find {%[-+]? endraw [-+]?%} */
                size_t r = q, body_end = 0, after = 0;
                for (; r + 1 < n; r++) {
                    if (s[r] != '{' || s[r + 1] != '%') continue;
                    size_t t = r + 2;
                    char sg = 0;
                    if (t < n && (s[t] == '-' || s[t] == '+')) sg = s[t++];
                    while (t < n && is_ws(s[t])) t++;
                    if (n - t < 6 || memcmp(s + t, "endraw", 6)) continue;
                    t += 6;
                    while (t < n && is_ws(s[t])) t++;
                    char eg = 0;
                    if (t < n && (s[t] == '-' || s[t] == '+')) eg = s[t++];
                    if (t + 1 >= n || s[t] != '%' || s[t + 1] != '}') continue;
                    t += 2;
                    body_end = r;
                    if (sg == '-') body_end = q + rstrip_len(s + q, r - q);
                    else if (sg != '+') { /* lstrip_blocks before {% endraw %} */
                        size_t lp = r;
                        while (lp > q && s[lp - 1] != '\n') lp--;
                        bool allws = true;
                        for (size_t k = lp; k < r; k++)
                            if (!is_ws(s[k])) { allws = false; break; }
                        if (allws && (lp > q || s[lp - 1] == '\n')) body_end = lp;
                    }
                    if (eg == '-') t += lstrip_off(s + t, n - t);
                    else if (eg != '+' && t < n && s[t] == '\n') t++;
                    after = t;
                    break;
                }
                if (!after) lx_fail(L, start, "missing {% endraw %}");
                if (body_end > q) {
                    tok tt = mktok(L, T_TEXT, q);
                    tt.s = jstr_new(L->J, s + q, body_end - q);
                    lx_push(L, tt);
                }
                pos = after;
                line_starting = s[after - 1] == '\n';
                continue;
            }
        }
        int is_var = kind == '{';
        lx_push(L, mktok(L, is_var ? T_VBEGIN : T_BBEGIN, start));
        char bal[64];
        int nb = 0;
        for (;;) {
            while (p < n && is_ws(s[p])) p++;
            if (p >= n) lx_fail(L, start, is_var ? "unclosed '{{' (missing '}}')" : "unclosed '{%' (missing '%}')");
            if (nb == 0) {
                char c2 = is_var ? '}' : '%';
                size_t q = p;
                char es = 0;
                if ((s[q] == '-' || (s[q] == '+' && !is_var)) && q + 2 < n + 0 && s[q + 1] == c2 && s[q + 2] == '}') es = s[q], q++;
                if (q + 1 < n && s[q] == c2 && s[q + 1] == '}') {
                    lx_push(L, mktok(L, is_var ? T_VEND : T_BEND, p));
                    pos = q + 2;
                    if (es == '-') {
                        size_t r = pos + lstrip_off(s + pos, n - pos);
                        line_starting = r > pos ? s[r - 1] == '\n' : false;
                        pos = r;
                    } else if (!is_var && es != '+' && pos < n && s[pos] == '\n') {
                        pos++;
                        line_starting = true;
                    } else {
                        line_starting = false;
                    }
                    break;
                }
            }
            char c = s[p];
            if (c == '\'' || c == '"') {
                size_t q = p + 1;
                while (q < n && s[q] != c) {
                    if (s[q] == '\\') q++;
                    q++;
                }
                if (q >= n) lx_fail(L, p, "unterminated string literal");
                tok t = mktok(L, T_STR, p);
                t.s = decode_string(L, p + 1, q);
                lx_push(L, t);
                p = q + 1;
                continue;
            }
            if (c >= '0' && c <= '9') {
                size_t q = p;
                bool isf = false;
                while (q < n && ((s[q] >= '0' && s[q] <= '9') || s[q] == '_')) q++;
                if (q + 1 < n && s[q] == '.' && s[q + 1] >= '0' && s[q + 1] <= '9') {
                    isf = true;
                    q++;
                    while (q < n && ((s[q] >= '0' && s[q] <= '9') || s[q] == '_')) q++;
                }
                if (q < n && (s[q] == 'e' || s[q] == 'E')) {
                    size_t r = q + 1;
                    if (r < n && (s[r] == '+' || s[r] == '-')) r++;
                    if (r < n && s[r] >= '0' && s[r] <= '9') {
                        isf = true;
                        q = r;
                        while (q < n && s[q] >= '0' && s[q] <= '9') q++;
                    }
                }
                char num[64];
                size_t k = 0;
                for (size_t i = p; i < q && k < sizeof num - 1; i++)
                    if (s[i] != '_') num[k++] = s[i];
                num[k] = 0;
                tok t = mktok(L, isf ? T_FLOAT : T_INT, p);
                if (isf) t.f = strtod(num, NULL);
                else {
                    errno = 0;
                    long long v = strtoll(num, NULL, 10);
                    if (errno) lx_fail(L, p, "integer literal too large");
                    t.i = v;
                }
                lx_push(L, t);
                p = q;
                continue;
            }
            if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
                size_t q = p;
                while (q < n && (s[q] == '_' || (s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z') ||
                                 (s[q] >= '0' && s[q] <= '9')))
                    q++;
                tok t = mktok(L, T_NAME, p);
                t.s = jstr_new(L->J, s + p, q - p);
                lx_push(L, t);
                p = q;
                continue;
            }
            int ol = 0;
            for (int i = 0; OPS2[i]; i++)
                if (p + 1 < n && s[p] == OPS2[i][0] && s[p + 1] == OPS2[i][1]) { ol = 2; break; }
            if (!ol && strchr(OPS1, c) && c) ol = 1;
            if (!ol) lx_fail(L, p, "unexpected character in tag");
            if (ol == 1) {
                if (c == '(' || c == '[' || c == '{') {
                    if (nb >= (int)sizeof bal) lx_fail(L, p, "brackets nested too deeply");
                    bal[nb++] = c == '(' ? ')' : c == '[' ? ']' : '}';
                } else if (c == ')' || c == ']' || c == '}') {
                    if (nb == 0 || bal[nb - 1] != c) lx_fail(L, p, "unbalanced bracket");
                    nb--;
                }
            }
            tok t = mktok(L, T_OP, p);
            t.s = jstr_new(L->J, s + p, (size_t)ol);
            lx_push(L, t);
            p += (size_t)ol;
        }
    }
    tok e = mktok(L, T_EOF, n);
    lx_push(L, e);
}

/* ------------------------------------------------------------------------------------------ */
/* AST                                                                                          */

enum {
    /* expressions */
    E_LIT, E_NAME, E_LIST, E_TUPLE, E_DICT, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST,
    E_NEG, E_POS, E_NOT, E_AND, E_OR, E_BIN, E_CMP, E_COND, E_CONCAT,
    /* statements */
    S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_BREAK, S_CONTINUE, S_BODY, S_WITH
};

typedef struct node node;
struct node {
    int k, line, col;
    int op;           /* E_BIN/E_CMP operator code; E_TEST negate */
    jstr *s;          /* name / attribute / filter / test / text */
    jval lit;         /* E_LIT */
    node *a, *b, *c;  /* operands; S_FOR: a = target, b = iter, c = filter cond */
    node **v;         /* children (list items, args, statements) */
    int nv;
    jstr **kw;        /* E_CALL/E_FILTER/E_TEST keyword names for v[npos..] */
    int npos;         /* number of positional args in v */
    node *body, *els; /* statement blocks (S_BODY) */
};

typedef struct {
    node **v;
    int n, cap;
} nvec;

static void nv_push(jx *J, nvec *a, node *x) {
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 4;
        node **nv = amalloc(J, sizeof(node *) * (size_t)nc);
        if (a->n) memcpy(nv, a->v, sizeof(node *) * (size_t)a->n);
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = x;
}

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_POW,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

/* ------------------------------------------------------------------------------------------ */
/* parser                                                                                       */

typedef struct {
    jx *J;
    tok *t;
    int i, nt;
    int depth;
} parser;

static tok *pk(parser *P) { return &P->t[P->i]; }
static tok *pk2(parser *P) { return P->i + 1 < P->nt ? &P->t[P->i + 1] : &P->t[P->nt - 1]; }

static _Noreturn void p_fail(parser *P, tok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void p_fail(parser *P, tok *t, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jfail(P->J, DF_ERR_FORMAT, t->line, t->col, "%s", msg);
}

static bool is_op(tok *t, const char *op) { return t->t == T_OP && !strcmp(t->s->s, op); }
static bool is_name(tok *t, const char *nm) { return t->t == T_NAME && !strcmp(t->s->s, nm); }
static const char *tokdesc(tok *t) {
    switch (t->t) {
    case T_TEXT: return "template text";
    case T_VBEGIN: return "'{{'";
    case T_VEND: return "'}}'";
    case T_BBEGIN: return "'{%'";
    case T_BEND: return "'%}'";
    case T_NAME: case T_OP: return t->s->s;
    case T_STR: return "string";
    case T_INT: case T_FLOAT: return "number";
    default: return "end of template";
    }
}
static void expect_op(parser *P, const char *op) {
    tok *t = pk(P);
    if (!is_op(t, op)) p_fail(P, t, "expected '%s', got '%s'", op, tokdesc(t));
    P->i++;
}
static jstr *expect_name(parser *P) {
    tok *t = pk(P);
    if (t->t != T_NAME) p_fail(P, t, "expected a name, got '%s'", tokdesc(t));
    P->i++;
    return t->s;
}
static void expect_bend(parser *P) {
    tok *t = pk(P);
    if (t->t != T_BEND) p_fail(P, t, "expected end of statement '%%}', got '%s'", tokdesc(t));
    P->i++;
}

static node *mk_node(parser *P, int k, tok *at) {
    node *x = amalloc(P->J, sizeof(node));
    memset(x, 0, sizeof *x);
    x->k = k;
    x->line = at->line;
    x->col = at->col;
    return x;
}

static node *parse_expr(parser *P);
static node *parse_or(parser *P);
static node *parse_unary(parser *P, bool with_filter);
static node *parse_primary(parser *P);
static node *parse_postfix(parser *P, node *x);

static void enter(parser *P) {
    if (++P->depth > PARSE_DEPTH_LIMIT) p_fail(P, pk(P), "expression nested too deeply");
}

/* ( args ) after '(' was consumed: fills v/kw/npos of x */
static void parse_call_args(parser *P, node *x) {
    nvec args = {0}, kws = {0};
    jstr **kwn = NULL;
    int nkw = 0, kwcap = 0;
    while (!is_op(pk(P), ")")) {
        if (args.n + kws.n) expect_op(P, ",");
        if (is_op(pk(P), ")")) break;
        tok *t = pk(P);
        if (t->t == T_NAME && is_op(pk2(P), "=")) {
            P->i += 2;
            if (nkw == kwcap) {
                int nc = kwcap ? kwcap * 2 : 4;
                jstr **nn = amalloc(P->J, sizeof(jstr *) * (size_t)nc);
                if (nkw) memcpy(nn, kwn, sizeof(jstr *) * (size_t)nkw);
                kwn = nn;
                kwcap = nc;
            }
            kwn[nkw++] = t->s;
            nv_push(P->J, &kws, parse_expr(P));
        } else {
            if (is_op(t, "*")) p_fail(P, t, "*args / **kwargs in calls are not supported");
            if (kws.n) p_fail(P, t, "positional argument after keyword argument");
            nv_push(P->J, &args, parse_expr(P));
        }
    }
    expect_op(P, ")");
    x->npos = args.n;
    for (int i = 0; i < kws.n; i++) nv_push(P->J, &args, kws.v[i]);
    x->v = args.v;
    x->nv = args.n;
    x->kw = kwn;
}

static node *parse_tuple_or_expr(parser *P, bool condexpr) {
    tok *at = pk(P);
    node *e = condexpr ? parse_expr(P) : parse_or(P);
    if (!is_op(pk(P), ",")) return e;
    nvec items = {0};
    nv_push(P->J, &items, e);
    while (is_op(pk(P), ",")) {
        P->i++;
        tok *t = pk(P);
        if (t->t == T_VEND || t->t == T_BEND || is_op(t, "=") || is_name(t, "in") || is_name(t, "if")) break;
        nv_push(P->J, &items, condexpr ? parse_expr(P) : parse_or(P));
    }
    node *x = mk_node(P, E_TUPLE, at);
    x->v = items.v;
    x->nv = items.n;
    return x;
}

static node *parse_primary(parser *P) {
    tok *t = pk(P);
    enter(P);
    node *x;
    if (t->t == T_NAME) {
        P->i++;
        const char *s = t->s->s;
        if (!strcmp(s, "true") || !strcmp(s, "True")) { x = mk_node(P, E_LIT, t); x->lit = mk_bool(true); }
        else if (!strcmp(s, "false") || !strcmp(s, "False")) { x = mk_node(P, E_LIT, t); x->lit = mk_bool(false); }
        else if (!strcmp(s, "none") || !strcmp(s, "None")) { x = mk_node(P, E_LIT, t); x->lit = NONE; }
        else { x = mk_node(P, E_NAME, t); x->s = t->s; }
    } else if (t->t == T_STR) {
        P->i++;
        sbuf b = {0};
        sb_put(P->J, &b, t->s->s, t->s->len);
        while (pk(P)->t == T_STR) {
            sb_put(P->J, &b, pk(P)->s->s, pk(P)->s->len);
            P->i++;
        }
        x = mk_node(P, E_LIT, t);
        x->lit = sb_val(P->J, &b);
    } else if (t->t == T_INT) {
        P->i++;
        x = mk_node(P, E_LIT, t);
        x->lit = mk_int(t->i);
    } else if (t->t == T_FLOAT) {
        P->i++;
        x = mk_node(P, E_LIT, t);
        x->lit = mk_float(t->f);
    } else if (is_op(t, "(")) {
        P->i++;
        if (is_op(pk(P), ")")) {
            P->i++;
            x = mk_node(P, E_TUPLE, t);
        } else {
            node *e = parse_expr(P);
            if (is_op(pk(P), ",")) {
                nvec items = {0};
                nv_push(P->J, &items, e);
                while (is_op(pk(P), ",")) {
                    P->i++;
                    if (is_op(pk(P), ")")) break;
                    nv_push(P->J, &items, parse_expr(P));
                }
                x = mk_node(P, E_TUPLE, t);
                x->v = items.v;
                x->nv = items.n;
            } else {
                x = e;
            }
            expect_op(P, ")");
        }
    } else if (is_op(t, "[")) {
        P->i++;
        nvec items = {0};
        while (!is_op(pk(P), "]")) {
            if (items.n) expect_op(P, ",");
            if (is_op(pk(P), "]")) break;
            nv_push(P->J, &items, parse_expr(P));
        }
        P->i++;
        x = mk_node(P, E_LIST, t);
        x->v = items.v;
        x->nv = items.n;
    } else if (is_op(t, "{")) {
        P->i++;
        nvec items = {0};
        while (!is_op(pk(P), "}")) {
            if (items.n) expect_op(P, ",");
            if (is_op(pk(P), "}")) break;
            nv_push(P->J, &items, parse_expr(P));
            expect_op(P, ":");
            nv_push(P->J, &items, parse_expr(P));
        }
        P->i++;
        x = mk_node(P, E_DICT, t);
        x->v = items.v;
        x->nv = items.n;
    } else {
        p_fail(P, t, "unexpected '%s'", tokdesc(t));
    }
    P->depth--;
    return x;
}

static node *parse_subscript_part(parser *P, tok *at) {
    /* returns expr or slice node (E_SLICE with v[3] possibly NULL) */
    node *parts[3] = {NULL, NULL, NULL};
    bool slice = false;
    if (!is_op(pk(P), ":")) parts[0] = parse_expr(P);
    if (is_op(pk(P), ":")) {
        slice = true;
        P->i++;
        if (!is_op(pk(P), "]") && !is_op(pk(P), ":")) parts[1] = parse_expr(P);
        if (is_op(pk(P), ":")) {
            P->i++;
            if (!is_op(pk(P), "]")) parts[2] = parse_expr(P);
        }
    }
    if (!slice) return parts[0];
    node *x = mk_node(P, E_SLICE, at);
    x->v = amalloc(P->J, sizeof(node *) * 3);
    memcpy(x->v, parts, sizeof parts);
    x->nv = 3;
    return x;
}

static node *parse_postfix(parser *P, node *x) {
    for (;;) {
        tok *t = pk(P);
        if (is_op(t, ".")) {
            P->i++;
            tok *nt = pk(P);
            if (nt->t == T_NAME) {
                P->i++;
                node *y = mk_node(P, E_ATTR, t);
                y->a = x;
                y->s = nt->s;
                x = y;
            } else if (nt->t == T_INT) {
                P->i++;
                node *y = mk_node(P, E_ITEM, t);
                y->a = x;
                y->b = mk_node(P, E_LIT, nt);
                y->b->lit = mk_int(nt->i);
                x = y;
            } else {
                p_fail(P, nt, "expected attribute name after '.'");
            }
        } else if (is_op(t, "[")) {
            P->i++;
            node *sub = parse_subscript_part(P, t);
            expect_op(P, "]");
            if (sub->k == E_SLICE) {
                sub->a = x;
                x = sub;
            } else {
                node *y = mk_node(P, E_ITEM, t);
                y->a = x;
                y->b = sub;
                x = y;
            }
        } else if (is_op(t, "(")) {
            P->i++;
            node *y = mk_node(P, E_CALL, t);
            y->a = x;
            parse_call_args(P, y);
            x = y;
        } else {
            return x;
        }
    }
}

static node *parse_filter_expr(parser *P, node *x) {
    for (;;) {
        tok *t = pk(P);
        if (is_op(t, "|")) {
            P->i++;
            tok *nt = pk(P);
            jstr *name = expect_name(P);
            while (is_op(pk(P), ".")) { /* dotted filter names: keep last part */
                P->i++;
                name = expect_name(P);
            }
            node *y = mk_node(P, E_FILTER, nt);
            y->a = x;
            y->s = name;
            if (is_op(pk(P), "(")) {
                P->i++;
                parse_call_args(P, y);
            }
            x = y;
        } else if (is_name(t, "is")) {
            P->i++;
            bool neg = false;
            if (is_name(pk(P), "not")) {
                P->i++;
                neg = true;
            }
            tok *nt = pk(P);
            jstr *name = expect_name(P);
            node *y = mk_node(P, E_TEST, nt);
            y->a = x;
            y->s = name;
            y->op = neg;
            tok *a = pk(P);
            if (is_op(a, "(")) {
                P->i++;
                parse_call_args(P, y);
            } else if ((a->t == T_NAME || a->t == T_STR || a->t == T_INT || a->t == T_FLOAT ||
                        is_op(a, "[") || is_op(a, "{")) &&
                       !is_name(a, "else") && !is_name(a, "or") && !is_name(a, "and") &&
                       !is_name(a, "if") && !is_name(a, "in") && !is_name(a, "is") &&
                       !is_name(a, "not") && !is_name(a, "recursive")) {
                node *arg = parse_postfix(P, parse_primary(P));
                y->v = amalloc(P->J, sizeof(node *));
                y->v[0] = arg;
                y->nv = 1;
                y->npos = 1;
            }
            x = y;
        } else if (is_op(t, "(")) {
            P->i++;
            node *y = mk_node(P, E_CALL, t);
            y->a = x;
            parse_call_args(P, y);
            x = y;
        } else {
            return x;
        }
    }
}

static node *parse_unary(parser *P, bool with_filter) {
    tok *t = pk(P);
    enter(P);
    node *x;
    if (is_op(t, "-") || is_op(t, "+")) {
        P->i++;
        x = mk_node(P, is_op(t, "-") ? E_NEG : E_POS, t);
        x->a = parse_unary(P, false);
    } else {
        x = parse_primary(P);
    }
    x = parse_postfix(P, x);
    if (with_filter) x = parse_filter_expr(P, x);
    P->depth--;
    return x;
}

static node *mk_bin(parser *P, int k, int op, tok *t, node *a, node *b) {
    node *x = mk_node(P, k, t);
    x->op = op;
    x->a = a;
    x->b = b;
    return x;
}

static node *parse_pow(parser *P) {
    node *x = parse_unary(P, true);
    while (is_op(pk(P), "**")) {
        tok *t = pk(P);
        P->i++;
        x = mk_bin(P, E_BIN, OP_POW, t, x, parse_unary(P, true));
    }
    return x;
}
static node *parse_math2(parser *P) {
    node *x = parse_pow(P);
    for (;;) {
        tok *t = pk(P);
        int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FDIV
                 : is_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return x;
        P->i++;
        x = mk_bin(P, E_BIN, op, t, x, parse_pow(P));
    }
}
static node *parse_concat(parser *P) {
    node *x = parse_math2(P);
    while (is_op(pk(P), "~")) {
        tok *t = pk(P);
        P->i++;
        x = mk_bin(P, E_CONCAT, 0, t, x, parse_math2(P));
    }
    return x;
}
static node *parse_math1(parser *P) {
    node *x = parse_concat(P);
    for (;;) {
        tok *t = pk(P);
        int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return x;
        P->i++;
        x = mk_bin(P, E_BIN, op, t, x, parse_concat(P));
    }
}
static node *parse_compare(parser *P) {
    node *x = parse_math1(P);
    node *last = NULL; /* last comparison of a chain: a < b < c == (a < b) and (b < c) */
    for (;;) {
        tok *t = pk(P);
        int op = -1;
        if (t->t == T_OP) {
            const char *s = t->s->s;
            op = !strcmp(s, "==") ? OP_EQ : !strcmp(s, "!=") ? OP_NE : !strcmp(s, "<") ? OP_LT
                 : !strcmp(s, "<=") ? OP_LE : !strcmp(s, ">") ? OP_GT : !strcmp(s, ">=") ? OP_GE : -1;
            if (op >= 0) P->i++;
        } else if (is_name(t, "in")) {
            op = OP_IN;
            P->i++;
        } else if (is_name(t, "not") && is_name(pk2(P), "in")) {
            op = OP_NOTIN;
            P->i += 2;
        }
        if (op < 0) return x;
        if (!last) {
            x = last = mk_bin(P, E_CMP, op, t, x, parse_math1(P));
        } else {
            node *c = mk_bin(P, E_CMP, op, t, last->b, parse_math1(P));
            x = mk_bin(P, E_AND, 0, t, x, c);
            last = c;
        }
    }
}
static node *parse_not(parser *P) {
    tok *t = pk(P);
    if (is_name(t, "not")) {
        P->i++;
        enter(P);
        node *x = mk_node(P, E_NOT, t);
        x->a = parse_not(P);
        P->depth--;
        return x;
    }
    return parse_compare(P);
}
static node *parse_and(parser *P) {
    node *x = parse_not(P);
    while (is_name(pk(P), "and")) {
        tok *t = pk(P);
        P->i++;
        x = mk_bin(P, E_AND, 0, t, x, parse_not(P));
    }
    return x;
}
static node *parse_or(parser *P) {
    node *x = parse_and(P);
    while (is_name(pk(P), "or")) {
        tok *t = pk(P);
        P->i++;
        x = mk_bin(P, E_OR, 0, t, x, parse_and(P));
    }
    return x;
}
static node *parse_expr(parser *P) {
    enter(P);
    node *x = parse_or(P);
    while (is_name(pk(P), "if")) {
        tok *t = pk(P);
        P->i++;
        node *c = mk_node(P, E_COND, t);
        c->a = parse_or(P);
        c->b = x;
        if (is_name(pk(P), "else")) {
            P->i++;
            c->c = parse_expr(P);
        }
        x = c;
    }
    P->depth--;
    return x;
}

/* statements */
static node *parse_body(parser *P, const char *const *ends, tok **endtok);

static node *parse_assign_target(parser *P) {
    tok *t = pk(P);
    node *x;
    if (is_op(t, "(")) {
        P->i++;
        x = parse_assign_target(P);
        expect_op(P, ")");
        return x;
    }
    jstr *nm = expect_name(P);
    x = mk_node(P, E_NAME, t);
    x->s = nm;
    if (is_op(pk(P), ".")) {
        tok *d = pk(P);
        P->i++;
        node *y = mk_node(P, E_ATTR, d);
        y->a = x;
        y->s = expect_name(P);
        x = y;
    }
    if (is_op(pk(P), ",")) {
        nvec items = {0};
        nv_push(P->J, &items, x);
        while (is_op(pk(P), ",")) {
            P->i++;
            tok *n2 = pk(P);
            if (n2->t != T_NAME || is_name(n2, "in")) break;
            node *y = mk_node(P, E_NAME, n2);
            y->s = expect_name(P);
            nv_push(P->J, &items, y);
        }
        node *tp = mk_node(P, E_TUPLE, t);
        tp->v = items.v;
        tp->nv = items.n;
        return tp;
    }
    return x;
}

static node *parse_statement(parser *P) {
    tok *bt = pk(P); /* BBEGIN */
    P->i++;
    tok *t = pk(P);
    if (t->t != T_NAME) p_fail(P, t, "expected a statement name, got '%s'", tokdesc(t));
    const char *nm = t->s->s;
    P->i++;
    (void)bt;
    if (!strcmp(nm, "if")) {
        node *x = mk_node(P, S_IF, t);
        x->a = parse_tuple_or_expr(P, false);
        expect_bend(P);
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        tok *et;
        x->body = parse_body(P, ends, &et);
        node *cur = x;
        for (;;) {
            if (is_name(et, "elif")) {
                node *y = mk_node(P, S_IF, et);
                y->a = parse_tuple_or_expr(P, false);
                expect_bend(P);
                y->body = parse_body(P, ends, &et);
                cur->els = y;
                cur = y;
            } else if (is_name(et, "else")) {
                expect_bend(P);
                static const char *const ends2[] = {"endif", NULL};
                cur->els = parse_body(P, ends2, &et);
                expect_bend(P);
                break;
            } else {
                expect_bend(P);
                break;
            }
        }
        return x;
    }
    if (!strcmp(nm, "for")) {
        node *x = mk_node(P, S_FOR, t);
        x->a = parse_assign_target(P);
        if (x->a->k == E_ATTR) p_fail(P, t, "cannot assign to an attribute in a for loop");
        if (!is_name(pk(P), "in")) p_fail(P, pk(P), "expected 'in' in for loop, got '%s'", tokdesc(pk(P)));
        P->i++;
        x->b = parse_tuple_or_expr(P, false);
        if (is_name(pk(P), "if")) {
            P->i++;
            x->c = parse_expr(P);
        }
        if (is_name(pk(P), "recursive")) p_fail(P, pk(P), "recursive for loops are not supported");
        expect_bend(P);
        static const char *const ends[] = {"else", "endfor", NULL};
        tok *et;
        x->body = parse_body(P, ends, &et);
        if (is_name(et, "else")) {
            expect_bend(P);
            static const char *const ends2[] = {"endfor", NULL};
            x->els = parse_body(P, ends2, &et);
        }
        expect_bend(P);
        return x;
    }
    if (!strcmp(nm, "set")) {
        node *target = parse_assign_target(P);
        if (is_op(pk(P), "=")) {
            P->i++;
            node *x = mk_node(P, S_SET, t);
            x->a = target;
            x->b = parse_tuple_or_expr(P, true);
            expect_bend(P);
            return x;
        }
        if (target->k != E_NAME && target->k != E_ATTR) p_fail(P, t, "block set needs a single target");
        node *x = mk_node(P, S_SETBLOCK, t);
        x->a = target;
        while (is_op(pk(P), "|")) { /* {% set x | filter %} */
            P->i++;
            tok *ft = pk(P);
            node *f = mk_node(P, E_FILTER, ft);
            f->s = expect_name(P);
            if (is_op(pk(P), "(")) {
                P->i++;
                parse_call_args(P, f);
            }
            f->a = x->b; /* chain: innermost first, operand filled at run time */
            x->b = f;
        }
        expect_bend(P);
        static const char *const ends[] = {"endset", NULL};
        tok *et;
        x->body = parse_body(P, ends, &et);
        expect_bend(P);
        return x;
    }
    if (!strcmp(nm, "macro")) {
        node *x = mk_node(P, S_MACRO, t);
        x->s = expect_name(P);
        expect_op(P, "(");
        nvec params = {0}, defs = {0};
        while (!is_op(pk(P), ")")) {
            if (params.n) expect_op(P, ",");
            if (is_op(pk(P), ")")) break;
            tok *pt = pk(P);
            node *pn = mk_node(P, E_NAME, pt);
            pn->s = expect_name(P);
            nv_push(P->J, &params, pn);
            node *d = NULL;
            if (is_op(pk(P), "=")) {
                P->i++;
                d = parse_expr(P);
            } else if (defs.n && defs.v[defs.n - 1]) {
                p_fail(P, pt, "non-default argument follows default argument");
            }
            nv_push(P->J, &defs, d);
        }
        P->i++;
        expect_bend(P);
        x->v = params.v;
        x->nv = params.n;
        x->a = (node *)defs.v; /* parallel array of defaults (NULL = none) */
        static const char *const ends[] = {"endmacro", NULL};
        tok *et;
        x->body = parse_body(P, ends, &et);
        if (pk(P)->t == T_NAME) P->i++; /* {% endmacro name %} */
        expect_bend(P);
        return x;
    }
    if (!strcmp(nm, "generation")) { /* HF AssistantTracker: renders its body unchanged */
        expect_bend(P);
        static const char *const ends[] = {"endgeneration", NULL};
        tok *et;
        node *x = mk_node(P, S_WITH, t); /* body in its own scope, like HF's call block */
        x->body = parse_body(P, ends, &et);
        expect_bend(P);
        return x;
    }
    if (!strcmp(nm, "break") || !strcmp(nm, "continue")) {
        node *x = mk_node(P, nm[0] == 'b' ? S_BREAK : S_CONTINUE, t);
        expect_bend(P);
        return x;
    }
    if (!strcmp(nm, "with")) { /* {% with a = x, b = y %} ... {% endwith %}: a new scope */
        node *x = mk_node(P, S_WITH, t);
        nvec assigns = {0};
        while (pk(P)->t != T_BEND) {
            if (assigns.n) expect_op(P, ",");
            node *a = mk_node(P, S_SET, pk(P));
            a->a = mk_node(P, E_NAME, pk(P));
            a->a->s = expect_name(P);
            expect_op(P, "=");
            a->b = parse_expr(P);
            nv_push(P->J, &assigns, a);
        }
        expect_bend(P);
        x->v = assigns.v;
        x->nv = assigns.n;
        static const char *const ends[] = {"endwith", NULL};
        tok *et;
        x->body = parse_body(P, ends, &et);
        expect_bend(P);
        return x;
    }
    p_fail(P, t, "unknown or unsupported tag '%s'", nm);
}

/* Parse statements until {% <one of ends> ... ; leaves P after the end name; *endtok = name tok.
 * ends == NULL: until EOF. */
static node *parse_body(parser *P, const char *const *ends, tok **endtok) {
    node *body = mk_node(P, S_BODY, pk(P));
    nvec st = {0};
    if (++P->depth > PARSE_DEPTH_LIMIT) p_fail(P, pk(P), "blocks nested too deeply");
    for (;;) {
        tok *t = pk(P);
        if (t->t == T_EOF) {
            if (ends) p_fail(P, t, "unexpected end of template, expected '%s'", ends[0][0] == 'e' ? ends[0] : ends[1] ? ends[1] : ends[0]);
            break;
        }
        if (t->t == T_TEXT) {
            node *x = mk_node(P, S_TEXT, t);
            x->s = t->s;
            nv_push(P->J, &st, x);
            P->i++;
        } else if (t->t == T_VBEGIN) {
            P->i++;
            node *x = mk_node(P, S_OUT, t);
            x->a = parse_tuple_or_expr(P, true);
            tok *e = pk(P);
            if (e->t != T_VEND) p_fail(P, e, "expected '}}', got '%s'", tokdesc(e));
            P->i++;
            nv_push(P->J, &st, x);
        } else if (t->t == T_BBEGIN) {
            tok *nt = pk2(P);
            bool is_end = false;
            if (nt->t == T_NAME) {
                if (ends)
                    for (int i = 0; ends[i]; i++)
                        if (!strcmp(nt->s->s, ends[i])) is_end = true;
                if (!is_end && (!strncmp(nt->s->s, "end", 3) || !strcmp(nt->s->s, "elif") || !strcmp(nt->s->s, "else")))
                    p_fail(P, nt, "unexpected '%s'%s", nt->s->s, ends ? "" : " (no block open)");
            }
            if (is_end) {
                P->i += 2;
                *endtok = nt;
                break;
            }
            nv_push(P->J, &st, parse_statement(P));
        } else {
            p_fail(P, t, "unexpected '%s'", tokdesc(t));
        }
    }
    P->depth--;
    body->v = st.v;
    body->nv = st.n;
    return body;
}

/* ------------------------------------------------------------------------------------------ */
/* evaluator                                                                                    */

typedef struct scope scope;
struct scope {
    scope *parent;
    jdict vars;
    bool captured; /* a macro closes over it: cannot be recycled */
};

struct macro {
    node *def;
    scope *closure;
};

enum { F_RAISE = 1, F_NAMESPACE, F_RANGE, F_STRFTIME, F_DICT };

typedef struct {
    jx *J;
    scope *root;
    sbuf *out;
} ev;

static jval eval(ev *E, scope *S, node *x);
static int exec_body(ev *E, scope *S, node *body);
static int py_cmp(ev *E, node *at, jval a, jval b);
static int dict_find_val(const jdict *d, jval key);

static _Noreturn void rt_fail(ev *E, node *x, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void rt_fail(ev *E, node *x, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jfail(E->J, DF_ERR_INVALID, x ? x->line : 0, x ? x->col : 0, "%s", msg);
}

static void step(ev *E, node *x) {
    if (++E->J->steps > E->J->max_steps)
        jfail(E->J, DF_ERR_RANGE, x ? x->line : 0, x ? x->col : 0,
              "evaluation step limit (%lld) exceeded", E->J->max_steps);
}

static scope *scope_new(ev *E, scope *parent) {
    scope *s = amalloc(E->J, sizeof(scope));
    s->parent = parent;
    memset(&s->vars, 0, sizeof s->vars);
    s->captured = false;
    return s;
}
static jval lookup(scope *S, const char *name, size_t len) {
    for (scope *s = S; s; s = s->parent) {
        int i = dict_find(&s->vars, name, len);
        if (i >= 0) return s->vars.v[i];
    }
    return UNDEF;
}

static const char *type_name(jval v) {
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

static bool truthy(jval v) {
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

static void fmt_float(char *buf, size_t cap, double x) {
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

static void py_repr(ev *E, sbuf *b, jval v, int depth);

static void py_str(ev *E, sbuf *b, jval v, int depth) {
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

static void py_repr(ev *E, sbuf *b, jval v, int depth) {
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

static jval to_str(ev *E, jval v) {
    if (v.t == V_STR) return v;
    sbuf b = {0};
    py_str(E, &b, v, 0);
    return sb_val(E->J, &b);
}

/* --- JSON (json.dumps) --------------------------------------------------------------------- */

typedef struct {
    const char *indent; /* NULL: no indent */
    const char *item_sep, *key_sep;
    bool ensure_ascii, sort_keys;
} jsonopt;

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
            i += (size_t)utf8_dec(s + i, n - i, &cp);
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

static void json_dump(ev *E, node *at, sbuf *b, jval v, const jsonopt *o, int level) {
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

/* --- JSON parsing (input messages/tools/extra vars) --------------------------------------- */

typedef struct {
    jx *J;
    const char *s, *what;
    size_t n, i;
} jparse;

static _Noreturn void jp_fail(jparse *p, const char *msg) {
    jfail(p->J, DF_ERR_FORMAT, 0, 0, "%s JSON: %s at offset %zu", p->what, msg, p->i);
}
static void jp_ws(jparse *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}
static unsigned jp_hex4(jparse *p) {
    if (p->i + 4 > p->n) jp_fail(p, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char h = p->s[p->i++];
        int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) jp_fail(p, "bad \\u escape");
        v = v * 16 + (unsigned)d;
    }
    return v;
}
static jstr *jp_string(jparse *p) {
    jx *J = p->J;
    sbuf b = {0};
    p->i++; /* opening quote */
    for (;;) {
        if (p->i >= p->n) jp_fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') { p->i++; break; }
        if (c < 0x20) jp_fail(p, "control character in string");
        if (c != '\\') { sb_putc(J, &b, (char)c); p->i++; continue; }
        p->i++;
        if (p->i >= p->n) jp_fail(p, "truncated escape");
        char e = p->s[p->i++];
        char tmp[4];
        switch (e) {
        case '"': sb_putc(J, &b, '"'); break;
        case '\\': sb_putc(J, &b, '\\'); break;
        case '/': sb_putc(J, &b, '/'); break;
        case 'b': sb_putc(J, &b, '\b'); break;
        case 'f': sb_putc(J, &b, '\f'); break;
        case 'n': sb_putc(J, &b, '\n'); break;
        case 'r': sb_putc(J, &b, '\r'); break;
        case 't': sb_putc(J, &b, '\t'); break;
        case 'u': {
            uint32_t cp = jp_hex4(p);
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 1 < p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                uint32_t lo = jp_hex4(p);
                if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else p->i = save;
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
            sb_put(J, &b, tmp, (size_t)utf8_enc(cp, tmp));
            break;
        }
        default: jp_fail(p, "bad escape");
        }
    }
    return jstr_new(J, b.p ? b.p : "", b.n);
}
static jval jp_value(jparse *p, int depth) {
    jx *J = p->J;
    if (depth > JSON_DEPTH_LIMIT) jp_fail(p, "nested too deeply");
    jp_ws(p);
    if (p->i >= p->n) jp_fail(p, "unexpected end");
    char c = p->s[p->i];
    if (c == '{') {
        p->i++;
        jdict *d = dict_new(J);
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') { p->i++; return mk_dict(d, V_DICT); }
        for (;;) {
            jp_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"') jp_fail(p, "expected object key");
            jstr *k = jp_string(p);
            jp_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') jp_fail(p, "expected ':'");
            p->i++;
            jval v = jp_value(p, depth + 1);
            dict_set(J, d, k, v);
            jp_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == '}') { p->i++; break; }
            jp_fail(p, "expected ',' or '}'");
        }
        return mk_dict(d, V_DICT);
    }
    if (c == '[') {
        p->i++;
        jlist *l = list_new(J, 4);
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') { p->i++; return mk_list(l); }
        for (;;) {
            list_push(J, l, jp_value(p, depth + 1));
            jp_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == ']') { p->i++; break; }
            jp_fail(p, "expected ',' or ']'");
        }
        return mk_list(l);
    }
    if (c == '"') return mk_sv(jp_string(p));
    if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "true", 4)) { p->i += 4; return mk_bool(true); }
    if (p->n - p->i >= 5 && !memcmp(p->s + p->i, "false", 5)) { p->i += 5; return mk_bool(false); }
    if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "null", 4)) { p->i += 4; return NONE; }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = p->i;
        bool isf = false;
        if (p->s[p->i] == '-') p->i++;
        if (p->i >= p->n || !(p->s[p->i] >= '0' && p->s[p->i] <= '9')) jp_fail(p, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        if (p->i < p->n && p->s[p->i] == '.') {
            isf = true;
            p->i++;
            if (p->i >= p->n || !(p->s[p->i] >= '0' && p->s[p->i] <= '9')) jp_fail(p, "bad number");
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        }
        if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
            isf = true;
            p->i++;
            if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
            if (p->i >= p->n || !(p->s[p->i] >= '0' && p->s[p->i] <= '9')) jp_fail(p, "bad number");
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
        }
        char num[64];
        size_t l = p->i - st;
        if (l >= sizeof num) { if (!isf) isf = true; l = sizeof num - 1; }
        memcpy(num, p->s + st, l);
        num[l] = 0;
        if (!isf) {
            errno = 0;
            long long v = strtoll(num, NULL, 10);
            if (!errno) return mk_int(v);
        }
        return mk_float(strtod(num, NULL));
    }
    jp_fail(p, "unexpected character");
}
static jval parse_json(jx *J, const char *s, const char *what) {
    jparse p = {J, s, what, strlen(s), 0};
    jval v = jp_value(&p, 0);
    jp_ws(&p);
    if (p.i != p.n) jp_fail(&p, "trailing characters");
    return v;
}

/* --- equality / comparison ----------------------------------------------------------------- */

static bool is_num(jval v) { return v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL; }
static double num_f(jval v) { return v.t == V_FLOAT ? v.f : v.t == V_INT ? (double)v.i : (double)v.b; }
static int64_t num_i(jval v) { return v.t == V_INT ? v.i : (int64_t)v.b; }

static bool py_eq(jval a, jval b, int depth) {
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
static int dict_find_val(const jdict *d, jval key) {
    if (key.t == V_STR) return dict_find(d, key.s->s, key.s->len);
    if (!d->kv) return -1;
    for (int i = 0; i < d->n; i++)
        if (d->kv[i].t != V_STR && py_eq(d->kv[i], key, 0)) return i;
    return -1;
}
static void dict_set_val(ev *E, node *at, jdict *d, jval key, jval v) {
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

static int py_cmp(ev *E, node *at, jval a, jval b) {
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
static jlist *iter_list(ev *E, node *at, jval v) {
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
            int n = utf8_dec(v.s->s + i, v.s->len - i, &cp);
            list_push(J, l, mk_strn(J, v.s->s + i, (size_t)n));
            i += (size_t)n;
        }
        return l;
    }
    default:
        rt_fail(E, at, "'%s' object is not iterable", type_name(v));
    }
}

static int64_t py_len(ev *E, node *at, jval v) {
    switch (v.t) {
    case V_UNDEF: return 0;
    case V_STR: return (int64_t)utf8_count(v.s->s, v.s->len);
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
static size_t *str_offsets(ev *E, jstr *s, int64_t *count) {
    size_t n = utf8_count(s->s, s->len);
    size_t *off = amalloc(E->J, sizeof(size_t) * (n + 1));
    size_t k = 0;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp;
        off[k++] = i;
        i += (size_t)utf8_dec(s->s + i, s->len - i, &cp);
    }
    off[k] = s->len;
    *count = (int64_t)n;
    return off;
}

static jval do_slice(ev *E, node *at, jval obj, jval st, jval en, jval sp) {
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

/* --- attribute / item access --------------------------------------------------------------- */

static const char *const STR_METHODS[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
                                          "replace", "upper", "lower", "title", "capitalize", "find", "count",
                                          "join", "splitlines", "isdigit", "isalpha", "isspace", "format", NULL};
static const char *const LIST_METHODS[] = {"append", "pop", "index", "count", "insert", "extend", "remove",
                                           "reverse", "copy", "clear", NULL};
static const char *const DICT_METHODS[] = {"get", "items", "keys", "values", "pop", "update", "copy",
                                           "setdefault", "clear", NULL};

static const char *find_method(jval obj, const char *name) {
    const char *const *tab = obj.t == V_STR ? STR_METHODS : obj.t == V_LIST ? LIST_METHODS
                             : obj.t == V_DICT ? DICT_METHODS : NULL;
    if (!tab) return NULL;
    for (int i = 0; tab[i]; i++)
        if (!strcmp(tab[i], name)) return tab[i];
    return NULL;
}

static jval mk_method(ev *E, jval self, const char *name) {
    method *m = amalloc(E->J, sizeof(method));
    m->self = self;
    m->name = name;
    jval v = {.t = V_METHOD};
    v.bm = m;
    return v;
}

static jval undef_named(ev *E, const char *name) {
    jval v = UNDEF;
    v.s = jstr_new(E->J, name, strlen(name));
    return v;
}

static _Noreturn void undef_fail(ev *E, node *at, jval u, const char *what) {
    if (u.s) rt_fail(E, at, "'%s' is undefined (%s)", u.s->s, what);
    rt_fail(E, at, "undefined value (%s)", what);
}

static jval get_attr(ev *E, node *at, jval obj, const char *name) {
    if (obj.t == V_UNDEF) {
        char w[128];
        snprintf(w, sizeof w, "accessing attribute '%s'", name);
        undef_fail(E, at, obj, w);
    }
    const char *m = find_method(obj, name);
    if (m) return mk_method(E, obj, m);
    if (obj.t == V_DICT || obj.t == V_NS) {
        jval *p = dict_get(obj.d, name);
        if (p) return *p;
    }
    char w[160];
    snprintf(w, sizeof w, "%s object has no attribute '%s'", type_name(obj), name);
    return undef_named(E, w);
}

static jval get_item(ev *E, node *at, jval obj, jval key) {
    if (obj.t == V_UNDEF) undef_fail(E, at, obj, "subscripting");
    if (obj.t == V_DICT && key.t != V_STR && key.t != V_UNDEF) {
        int i = dict_find_val(obj.d, key);
        if (i >= 0) return obj.d->v[i];
    }
    if (obj.t == V_DICT || obj.t == V_NS) {
        if (key.t == V_STR) {
            int i = dict_find(obj.d, key.s->s, key.s->len);
            if (i >= 0) return obj.d->v[i];
            if (obj.t == V_DICT) {
                const char *m = find_method(obj, key.s->s);
                if (m) return mk_method(E, obj, m);
            }
        }
        char w[160];
        snprintf(w, sizeof w, "%s object has no element %s", type_name(obj), key.t == V_STR ? key.s->s : "?");
        return undef_named(E, w);
    }
    if ((obj.t == V_LIST || obj.t == V_STR) && (key.t == V_INT || key.t == V_BOOL)) {
        int64_t i = num_i(key);
        if (obj.t == V_LIST) {
            if (i < 0) i += obj.l->n;
            if (i >= 0 && i < obj.l->n) return obj.l->v[i];
        } else {
            int64_t n;
            size_t *off = str_offsets(E, obj.s, &n);
            if (i < 0) i += n;
            if (i >= 0 && i < n) return mk_strn(E->J, obj.s->s + off[i], off[i + 1] - off[i]);
        }
        return undef_named(E, "index out of range");
    }
    if (key.t == V_STR) return get_attr(E, at, obj, key.s->s);
    return undef_named(E, "no such element");
}

/* --- output helpers ----------------------------------------------------------------------- */

static void emit(ev *E, jval v) {
    if (v.t == V_STR) sb_put(E->J, E->out, v.s->s, v.s->len);
    else py_str(E, E->out, v, 0);
}

/* --- string helpers ----------------------------------------------------------------------- */

static bool in_chars(uint32_t cp, jstr *chars) {
    for (size_t i = 0; i < chars->len;) {
        uint32_t c;
        i += (size_t)utf8_dec(chars->s + i, chars->len - i, &c);
        if (c == cp) return true;
    }
    return false;
}
/* mode: 1 = left, 2 = right, 3 = both. chars NULL = whitespace */
static jval str_strip(ev *E, jstr *s, jstr *chars, int mode) {
    size_t a = 0, b = s->len;
    if (mode & 1)
        while (a < b) {
            uint32_t cp;
            int l = utf8_dec(s->s + a, b - a, &cp);
            if (chars ? !in_chars(cp, chars) : !is_py_space(cp)) break;
            a += (size_t)l;
        }
    if (mode & 2)
        while (b > a) {
            uint32_t cp;
            int l = utf8_last(s->s + a, b - a, &cp);
            if (chars ? !in_chars(cp, chars) : !is_py_space(cp)) break;
            b -= (size_t)l;
        }
    return mk_strn(E->J, s->s + a, b - a);
}

static const char *memmem_s(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    if (hn < nn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nn)) return h + i;
    return NULL;
}

static jval str_replace(ev *E, jstr *s, jstr *old, jstr *nw, int64_t count) {
    jx *J = E->J;
    sbuf b = {0};
    if (old->len == 0) {
        /* Python: insert between every character */
        int64_t done = 0;
        for (size_t i = 0; i <= s->len;) {
            if (count < 0 || done < count) { sb_put(J, &b, nw->s, nw->len); done++; }
            if (i == s->len) break;
            uint32_t cp;
            int l = utf8_dec(s->s + i, s->len - i, &cp);
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

static jval str_split(ev *E, jstr *s, jstr *sep, int64_t maxsplit, bool right) {
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
                while (e > 0) { uint32_t cp; int k = utf8_last(s->s, e, &cp); if (!is_py_space(cp)) break; e -= (size_t)k; }
                if (e == 0) break;
                size_t st = e;
                if (maxsplit >= 0 && splits >= maxsplit) { list_push(J, tmp, mk_strn(J, s->s, e)); break; }
                while (st > 0) { uint32_t cp; int k = utf8_last(s->s, st, &cp); if (is_py_space(cp)) break; st -= (size_t)k; }
                list_push(J, tmp, mk_strn(J, s->s + st, e - st));
                splits++;
                e = st;
            }
            for (int k = tmp->n - 1; k >= 0; k--) list_push(J, l, tmp->v[k]);
            return mk_list(l);
        }
        for (;;) {
            while (i < s->len) { uint32_t cp; int k = utf8_dec(s->s + i, s->len - i, &cp); if (!is_py_space(cp)) break; i += (size_t)k; }
            if (i >= s->len) break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                jval rest = str_strip(E, jstr_new(J, s->s + i, s->len - i), NULL, 2);
                list_push(J, l, rest);
                break;
            }
            size_t st = i;
            while (i < s->len) { uint32_t cp; int k = utf8_dec(s->s + i, s->len - i, &cp); if (is_py_space(cp)) break; i += (size_t)k; }
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

static jval str_case(ev *E, jstr *s, int mode) { /* 0 upper, 1 lower, 2 title, 3 capitalize (ASCII) */
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

/* --- call arguments ----------------------------------------------------------------------- */

typedef struct {
    int npos, nkw;
    jval *pos;
    jstr **kwn;
    jval *kwv;
} args_t;

static args_t eval_args(ev *E, scope *S, node *x) {
    args_t a = {0};
    a.npos = x->npos;
    a.nkw = x->nv - x->npos;
    a.pos = a.npos ? amalloc(E->J, sizeof(jval) * (size_t)a.npos) : NULL;
    a.kwv = a.nkw ? amalloc(E->J, sizeof(jval) * (size_t)a.nkw) : NULL;
    a.kwn = x->kw;
    for (int i = 0; i < a.npos; i++) a.pos[i] = eval(E, S, x->v[i]);
    for (int i = 0; i < a.nkw; i++) a.kwv[i] = eval(E, S, x->v[a.npos + i]);
    return a;
}

/* argument by position or keyword; returns false if absent */
static bool arg(const args_t *a, int idx, const char *kw, jval *out) {
    if (idx >= 0 && idx < a->npos) { *out = a->pos[idx]; return true; }
    if (kw)
        for (int i = 0; i < a->nkw; i++)
            if (!strcmp(a->kwn[i]->s, kw)) { *out = a->kwv[i]; return true; }
    return false;
}
static jval arg_or(const args_t *a, int idx, const char *kw, jval dflt) {
    jval v;
    return arg(a, idx, kw, &v) ? v : dflt;
}
static jstr *arg_str(ev *E, node *at, const args_t *a, int idx, const char *kw, const char *what) {
    jval v;
    if (!arg(a, idx, kw, &v)) rt_fail(E, at, "%s: missing argument", what);
    if (v.t != V_STR) rt_fail(E, at, "%s: expected a string argument, got %s", what, type_name(v));
    return v.s;
}

/* --- macros -------------------------------------------------------------------------------- */

static jval call_macro(ev *E, node *at, macro *m, const args_t *a) {
    jx *J = E->J;
    node *def = m->def;
    if (a->npos > def->nv) rt_fail(E, at, "macro '%s' takes not more than %d argument(s)", def->s->s, def->nv);
    if (++J->depth > CALL_DEPTH_LIMIT)
        jfail(J, DF_ERR_RANGE, at->line, at->col, "macro recursion depth limit (%d) exceeded", CALL_DEPTH_LIMIT);
    scope *S = scope_new(E, m->closure);
    node **defs = (node **)def->a;
    for (int i = 0; i < a->nkw; i++) {
        bool ok = false;
        for (int p = 0; p < def->nv; p++)
            if (!strcmp(def->v[p]->s->s, a->kwn[i]->s)) ok = true;
        if (!ok) rt_fail(E, at, "macro '%s' has no argument named '%s'", def->s->s, a->kwn[i]->s);
    }
    for (int p = 0; p < def->nv; p++) {
        jval v;
        if (!arg(a, p, def->v[p]->s->s, &v)) v = defs[p] ? eval(E, S, defs[p]) : undef_named(E, def->v[p]->s->s);
        dict_set(J, &S->vars, def->v[p]->s, v);
    }
    sbuf *saved = E->out;
    sbuf buf = {0};
    E->out = &buf;
    exec_body(E, S, def->body);
    E->out = saved;
    J->depth--;
    return sb_val(J, &buf);
}

/* --- filters ------------------------------------------------------------------------------- */

static jval apply_filter(ev *E, node *at, const char *name, jval v, const args_t *a);
static jval binop(ev *E, node *at, int op, jval a, jval b);
static bool apply_test(ev *E, node *at, const char *name, jval v, const args_t *a);

static jval tojson_val(ev *E, node *at, jval v, const args_t *a) {
    jsonopt o = {NULL, ", ", ": ", false, false};
    jval t;
    char ind[64];
    if (arg(a, 1, "indent", &t) && t.t != V_NONE) {
        if (t.t == V_INT) {
            int n = (int)(t.i < 0 ? 0 : t.i > 32 ? 32 : t.i);
            memset(ind, ' ', (size_t)n);
            ind[n] = 0;
            o.indent = ind;
        } else if (t.t == V_STR) {
            o.indent = t.s->s;
        }
        o.item_sep = ",";
    }
    if (arg(a, 0, "ensure_ascii", &t)) o.ensure_ascii = truthy(t);
    if (arg(a, 3, "sort_keys", &t)) o.sort_keys = truthy(t);
    if (arg(a, 2, "separators", &t) && t.t == V_LIST && t.l->n == 2 && t.l->v[0].t == V_STR && t.l->v[1].t == V_STR) {
        o.item_sep = t.l->v[0].s->s;
        o.key_sep = t.l->v[1].s->s;
    }
    sbuf b = {0};
    json_dump(E, at, &b, v, &o, 0);
    return sb_val(E->J, &b);
}

static int cmp_ci_keys(const jstr *x, const jstr *y) {
    size_t n = x->len < y->len ? x->len : y->len;
    for (size_t i = 0; i < n; i++) {
        unsigned char a = (unsigned char)x->s[i], b = (unsigned char)y->s[i];
        if (a >= 'A' && a <= 'Z') a = (unsigned char)(a + 32);
        if (b >= 'A' && b <= 'Z') b = (unsigned char)(b + 32);
        if (a != b) return a < b ? -1 : 1;
    }
    return x->len < y->len ? -1 : x->len > y->len;
}

static jval items_of(ev *E, node *at, jval v) {
    jx *J = E->J;
    if (v.t == V_UNDEF) return mk_list(list_new(J, 1));
    if (v.t != V_DICT) rt_fail(E, at, "items: expected a mapping, got %s", type_name(v));
    jlist *l = list_new(J, v.d->n);
    for (int i = 0; i < v.d->n; i++) {
        jlist *p = list_new(J, 2);
        p->tuple = true;
        list_push(J, p, dict_key(v.d, i));
        list_push(J, p, v.d->v[i]);
        list_push(J, l, mk_list(p));
    }
    return mk_list(l);
}

/* select/reject/selectattr/rejectattr */
static jval filter_select(ev *E, node *at, jval v, const args_t *a, bool attr, bool want) {
    jx *J = E->J;
    if (!truthy(v)) return mk_list(list_new(J, 1)); /* jinja2: `if value:` guard (none -> empty) */
    jlist *in = iter_list(E, at, v);
    jlist *out = list_new(J, in->n);
    int first = attr ? 1 : 0;
    const char *attrname = NULL;
    if (attr) attrname = arg_str(E, at, a, 0, NULL, "selectattr")->s;
    const char *test = NULL;
    if (a->npos > first) {
        if (a->pos[first].t != V_STR) rt_fail(E, at, "select: test name must be a string");
        test = a->pos[first].s->s;
    }
    args_t ta = {0};
    if (a->npos > first + 1) {
        ta.npos = a->npos - first - 1;
        ta.pos = a->pos + first + 1;
    }
    for (int i = 0; i < in->n; i++) {
        jval item = in->v[i];
        jval x = attr ? get_attr(E, at, item, attrname) : item;
        bool r = test ? apply_test(E, at, test, x, &ta) : truthy(x);
        if (r == want) list_push(J, out, item);
    }
    return mk_list(out);
}

static jval apply_filter(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    if (!strcmp(name, "safe")) {
        jval s = to_str(E, v);
        jstr *r = jstr_new(J, s.s->s, s.s->len);
        r->safe = true;
        return mk_sv(r);
    }
    if (!strcmp(name, "string")) {
        if (v.t == V_STR) return v;
        return to_str(E, v);
    }
    if (!strcmp(name, "trim")) {
        jval s = to_str(E, v);
        jval c;
        return str_strip(E, s.s, arg(a, 0, "chars", &c) && c.t == V_STR ? c.s : NULL, 3);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return mk_int(py_len(E, at, v));
    if (!strcmp(name, "tojson")) return tojson_val(E, at, v, a);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jval dflt = arg_or(a, 0, "default_value", mk_str(J, ""));
        bool boolean = truthy(arg_or(a, 1, "boolean", mk_bool(false)));
        if (v.t == V_UNDEF || (boolean && !truthy(v))) return dflt;
        return v;
    }
    if (!strcmp(name, "list")) {
        jlist *src = iter_list(E, at, v);
        jlist *l = list_new(J, src->n);
        for (int i = 0; i < src->n; i++) list_push(J, l, src->v[i]);
        return mk_list(l);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jlist *src = iter_list(E, at, v);
        if (!src->n) return undef_named(E, "no first/last item");
        return src->v[name[0] == 'f' ? 0 : src->n - 1];
    }
    if (!strcmp(name, "join")) {
        jval sepv = arg_or(a, 0, "d", mk_str(J, ""));
        jval attr;
        bool has_attr = arg(a, 1, "attribute", &attr);
        jval sep = to_str(E, sepv);
        jlist *src = iter_list(E, at, v);
        sbuf b = {0};
        for (int i = 0; i < src->n; i++) {
            if (i) sb_put(J, &b, sep.s->s, sep.s->len);
            jval x = src->v[i];
            if (has_attr && attr.t == V_STR) x = get_attr(E, at, x, attr.s->s);
            py_str(E, &b, x, 0);
        }
        return sb_val(J, &b);
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize")) {
        jval s = to_str(E, v);
        return str_case(E, s.s, name[0] == 'u' ? 0 : name[0] == 'l' ? 1 : name[0] == 't' ? 2 : 3);
    }
    if (!strcmp(name, "replace")) {
        jval s = to_str(E, v);
        jstr *old = arg_str(E, at, a, 0, "old", "replace");
        jstr *nw = arg_str(E, at, a, 1, "new", "replace");
        jval c = arg_or(a, 2, "count", NONE);
        return str_replace(E, s.s, old, nw, c.t == V_INT ? c.i : -1);
    }
    if (!strcmp(name, "items")) return items_of(E, at, v);
    if (!strcmp(name, "dictsort")) {
        if (v.t != V_DICT) rt_fail(E, at, "dictsort: expected a mapping, got %s", type_name(v));
        bool cs = truthy(arg_or(a, 0, "case_sensitive", mk_bool(false)));
        jval by = arg_or(a, 1, "by", mk_str(J, "key"));
        bool rev = truthy(arg_or(a, 2, "reverse", mk_bool(false)));
        bool byval = by.t == V_STR && !strcmp(by.s->s, "value");
        jval items = items_of(E, at, v);
        jlist *l = items.l;
        /* stable insertion sort (Python's sort is stable) */
        for (int i = 1; i < l->n; i++) {
            jval cur = l->v[i];
            int j = i - 1;
            for (; j >= 0; j--) {
                jval x = l->v[j].l->v[byval], y = cur.l->v[byval];
                int c;
                if (!cs && x.t == V_STR && y.t == V_STR) c = cmp_ci_keys(x.s, y.s);
                else c = py_cmp(E, at, x, y);
                if (rev ? c >= 0 : c <= 0) break;
                l->v[j + 1] = l->v[j];
            }
            l->v[j + 1] = cur;
        }
        return items;
    }
    if (!strcmp(name, "selectattr")) return filter_select(E, at, v, a, true, true);
    if (!strcmp(name, "rejectattr")) return filter_select(E, at, v, a, true, false);
    if (!strcmp(name, "select")) return filter_select(E, at, v, a, false, true);
    if (!strcmp(name, "reject")) return filter_select(E, at, v, a, false, false);
    if (!strcmp(name, "map")) {
        if (!truthy(v)) return mk_list(list_new(J, 1)); /* jinja2: `if value:` guard */
        jlist *src = iter_list(E, at, v);
        jlist *out = list_new(J, src->n);
        jval attr;
        if (arg(a, -1, "attribute", &attr)) {
            if (attr.t != V_STR) rt_fail(E, at, "map: attribute must be a string");
            jval dflt;
            bool hasd = arg(a, -1, "default", &dflt);
            for (int i = 0; i < src->n; i++) {
                jval x = get_attr(E, at, src->v[i], attr.s->s);
                if (x.t == V_UNDEF && hasd) x = dflt;
                list_push(J, out, x);
            }
            return mk_list(out);
        }
        if (a->npos < 1 || a->pos[0].t != V_STR) rt_fail(E, at, "map: expected a filter name or attribute=");
        args_t fa = {0};
        fa.npos = a->npos - 1;
        fa.pos = a->pos + 1;
        fa.nkw = a->nkw;
        fa.kwn = a->kwn;
        fa.kwv = a->kwv;
        for (int i = 0; i < src->n; i++) list_push(J, out, apply_filter(E, at, a->pos[0].s->s, src->v[i], &fa));
        return mk_list(out);
    }
    if (!strcmp(name, "int")) {
        if (v.t == V_INT) return v;
        if (v.t == V_BOOL) return mk_int(v.b);
        if (v.t == V_FLOAT) return mk_int((int64_t)v.f);
        if (v.t == V_STR) {
            char *e;
            long long r = strtoll(v.s->s, &e, 10);
            if (e != v.s->s) return mk_int(r);
        }
        return arg_or(a, 0, "default", mk_int(0));
    }
    if (!strcmp(name, "float")) {
        if (is_num(v)) return mk_float(num_f(v));
        if (v.t == V_STR) {
            char *e;
            double r = strtod(v.s->s, &e);
            if (e != v.s->s) return mk_float(r);
        }
        return arg_or(a, 0, "default", mk_float(0.0));
    }
    if (!strcmp(name, "abs")) {
        if (v.t == V_INT) return mk_int(v.i < 0 ? -v.i : v.i);
        if (v.t == V_FLOAT) return mk_float(fabs(v.f));
        rt_fail(E, at, "abs: bad operand type %s", type_name(v));
    }
    if (!strcmp(name, "unique")) {
        jlist *src = iter_list(E, at, v);
        jlist *out = list_new(J, src->n);
        for (int i = 0; i < src->n; i++) {
            bool dup = false;
            for (int k = 0; k < out->n && !dup; k++) dup = py_eq(out->v[k], src->v[i], 0);
            if (!dup) list_push(J, out, src->v[i]);
        }
        return mk_list(out);
    }
    if (!strcmp(name, "sort")) {
        jlist *src = iter_list(E, at, v);
        jlist *l = list_new(J, src->n);
        for (int i = 0; i < src->n; i++) list_push(J, l, src->v[i]);
        bool rev = truthy(arg_or(a, 0, "reverse", mk_bool(false)));
        jval attr;
        bool has_attr = arg(a, 2, "attribute", &attr) && attr.t == V_STR;
        for (int i = 1; i < l->n; i++) {
            jval cur = l->v[i];
            int j = i - 1;
            for (; j >= 0; j--) {
                jval x = l->v[j], y = cur;
                if (has_attr) x = get_attr(E, at, x, attr.s->s), y = get_attr(E, at, y, attr.s->s);
                int c = (x.t == V_STR && y.t == V_STR) ? cmp_ci_keys(x.s, y.s) : py_cmp(E, at, x, y);
                if (rev ? c >= 0 : c <= 0) break;
                l->v[j + 1] = l->v[j];
            }
            l->v[j + 1] = cur;
        }
        return mk_list(l);
    }
    if (!strcmp(name, "indent")) {
        jval s = to_str(E, v);
        jval w = arg_or(a, 0, "width", mk_int(4));
        bool first = truthy(arg_or(a, 1, "first", mk_bool(false)));
        bool blank = truthy(arg_or(a, 2, "blank", mk_bool(false)));
        sbuf pre = {0};
        if (w.t == V_STR) sb_put(J, &pre, w.s->s, w.s->len);
        else for (int64_t i = 0; i < (w.t == V_INT ? w.i : 4) && i < 256; i++) sb_putc(J, &pre, ' ');
        sbuf b = {0};
        const char *p = s.s->s, *end = p + s.s->len;
        bool firstline = true;
        while (p <= end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *le = nl ? nl : end;
            bool emptyl = le == p;
            if ((firstline ? first : true) && (blank || !emptyl)) sb_put(J, &b, pre.p ? pre.p : "", pre.n);
            sb_put(J, &b, p, (size_t)(le - p));
            if (!nl) break;
            sb_putc(J, &b, '\n');
            p = nl + 1;
            firstline = false;
        }
        return sb_val(J, &b);
    }
    if (!strcmp(name, "e") || !strcmp(name, "escape")) {
        jval s = to_str(E, v);
        if (s.s->safe) return s;
        sbuf b = {0};
        for (size_t i = 0; i < s.s->len; i++) {
            char c = s.s->s[i];
            if (c == '&') sb_puts(J, &b, "&amp;");
            else if (c == '<') sb_puts(J, &b, "&lt;");
            else if (c == '>') sb_puts(J, &b, "&gt;");
            else if (c == '"') sb_puts(J, &b, "&#34;");
            else if (c == '\'') sb_puts(J, &b, "&#39;");
            else sb_putc(J, &b, c);
        }
        jval r = sb_val(J, &b);
        r.s->safe = true;
        return r;
    }
    if (!strcmp(name, "reverse")) {
        if (v.t == V_STR) {
            jval r = do_slice(E, at, v, NONE, NONE, mk_int(-1));
            return r;
        }
        jlist *src = iter_list(E, at, v);
        jlist *l = list_new(J, src->n);
        for (int i = src->n - 1; i >= 0; i--) list_push(J, l, src->v[i]);
        return mk_list(l);
    }
    if (!strcmp(name, "sum")) {
        jlist *src = iter_list(E, at, v);
        jval attr;
        bool has_attr = arg(a, -1, "attribute", &attr) && attr.t == V_STR;
        jval acc = arg_or(a, 1, "start", mk_int(0));
        for (int i = 0; i < src->n; i++)
            acc = binop(E, at, OP_ADD, acc, has_attr ? get_attr(E, at, src->v[i], attr.s->s) : src->v[i]);
        return acc;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) {
        jlist *src = iter_list(E, at, v);
        if (!src->n) return undef_named(E, "empty sequence");
        bool cs = truthy(arg_or(a, 0, "case_sensitive", mk_bool(false)));
        jval best = src->v[0];
        for (int i = 1; i < src->n; i++) {
            jval x = src->v[i];
            int c = (!cs && x.t == V_STR && best.t == V_STR) ? cmp_ci_keys(x.s, best.s) : py_cmp(E, at, x, best);
            if (name[1] == 'i' ? c < 0 : c > 0) best = x;
        }
        return best;
    }
    if (!strcmp(name, "round")) {
        jval pr = arg_or(a, 0, "precision", mk_int(0));
        jval method = arg_or(a, 1, "method", mk_str(J, "common"));
        if (!is_num(v) || pr.t != V_INT) rt_fail(E, at, "round: expected a number");
        double x = num_f(v), m = pow(10.0, (double)pr.i);
        const char *md = method.t == V_STR ? method.s->s : "common";
        double r = !strcmp(md, "ceil") ? ceil(x * m) / m : !strcmp(md, "floor") ? floor(x * m) / m : nearbyint(x * m) / m;
        return mk_float(r);
    }
    if (!strcmp(name, "attr")) {
        jstr *nm = arg_str(E, at, a, 0, NULL, "attr");
        if (v.t == V_NS || v.t == V_DICT) {
            jval *p = dict_get(v.d, nm->s);
            if (v.t == V_NS && p) return *p;
        }
        return undef_named(E, nm->s);
    }
    if (!strcmp(name, "format")) {
        jval s = to_str(E, v);
        jlist *l = list_new(J, a->npos);
        l->tuple = true;
        for (int i = 0; i < a->npos; i++) list_push(J, l, a->pos[i]);
        return binop(E, at, OP_MOD, s, mk_list(l));
    }
    rt_fail(E, at, "no filter named '%s'", name);
}

/* --- tests -------------------------------------------------------------------------------- */

static bool apply_test(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jval x;
    if (!strcmp(name, "defined")) return v.t != V_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == V_UNDEF;
    if (!strcmp(name, "none")) return v.t == V_NONE;
    if (!strcmp(name, "boolean")) return v.t == V_BOOL;
    if (!strcmp(name, "true")) return v.t == V_BOOL && v.b;
    if (!strcmp(name, "false")) return v.t == V_BOOL && !v.b;
    if (!strcmp(name, "integer")) return v.t == V_INT;
    if (!strcmp(name, "float")) return v.t == V_FLOAT;
    if (!strcmp(name, "number")) return is_num(v);
    if (!strcmp(name, "string")) return v.t == V_STR;
    if (!strcmp(name, "mapping")) return v.t == V_DICT;
    if (!strcmp(name, "iterable")) return v.t == V_UNDEF || v.t == V_STR || v.t == V_LIST || v.t == V_DICT;
    if (!strcmp(name, "sequence")) return v.t == V_UNDEF || v.t == V_STR || v.t == V_LIST || v.t == V_DICT;
    if (!strcmp(name, "callable")) return v.t == V_MACRO || v.t == V_FUNC || v.t == V_METHOD;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != V_STR) return false;
        jval c = str_case(E, v.s, name[0] == 'l' ? 1 : 0);
        return c.s->len == v.s->len && !memcmp(c.s->s, v.s->s, v.s->len);
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v.t != V_INT && v.t != V_BOOL) rt_fail(E, at, "test '%s' needs an integer", name);
        int64_t i = num_i(v);
        return ((i % 2) != 0) == (name[0] == 'o');
    }
    if (!arg(a, 0, NULL, &x)) {
        if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "sameas") || !strcmp(name, "in") ||
            !strcmp(name, "ne") || !strcmp(name, "lt") || !strcmp(name, "le") || !strcmp(name, "gt") ||
            !strcmp(name, "ge") || !strcmp(name, "divisibleby"))
            rt_fail(E, at, "test '%s' needs an argument", name);
        rt_fail(E, at, "no test named '%s'", name);
    }
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return py_eq(v, x, 0);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !py_eq(v, x, 0);
    if (!strcmp(name, "sameas")) {
        if (v.t != x.t) return false;
        if (v.t == V_NONE || v.t == V_UNDEF) return true;
        if (v.t == V_BOOL) return v.b == x.b;
        if (v.t == V_LIST) return v.l == x.l;
        if (v.t == V_DICT || v.t == V_NS) return v.d == x.d;
        if (v.t == V_STR) return v.s == x.s;
        return py_eq(v, x, 0);
    }
    if (!strcmp(name, "lt")) return py_cmp(E, at, v, x) < 0;
    if (!strcmp(name, "le")) return py_cmp(E, at, v, x) <= 0;
    if (!strcmp(name, "gt")) return py_cmp(E, at, v, x) > 0;
    if (!strcmp(name, "ge")) return py_cmp(E, at, v, x) >= 0;
    if (!strcmp(name, "divisibleby")) {
        if (v.t != V_INT || x.t != V_INT || x.i == 0) rt_fail(E, at, "divisibleby needs non-zero integers");
        return v.i % x.i == 0;
    }
    if (!strcmp(name, "in")) {
        if (x.t == V_STR && v.t == V_STR) return memmem_s(x.s->s, x.s->len, v.s->s, v.s->len) != NULL;
        jlist *l = iter_list(E, at, x);
        for (int i = 0; i < l->n; i++)
            if (py_eq(l->v[i], v, 0)) return true;
        return false;
    }
    rt_fail(E, at, "no test named '%s'", name);
}

/* --- methods ------------------------------------------------------------------------------ */

static jval call_method(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jval x;
    if (self.t == V_STR) {
        jstr *s = self.s;
        if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "%s() takes at least 1 argument", m);
            jlist *cands;
            if (x.t == V_STR) { cands = list_new(J, 1); list_push(J, cands, x); }
            else if (x.t == V_LIST && x.l->tuple) cands = x.l;
            else rt_fail(E, at, "%s first arg must be str or a tuple of str", m);
            for (int i = 0; i < cands->n; i++) {
                jval c = cands->v[i];
                if (c.t != V_STR) rt_fail(E, at, "%s: tuple items must be str", m);
                if (c.s->len > s->len) continue;
                if (m[0] == 's' ? !memcmp(s->s, c.s->s, c.s->len) : !memcmp(s->s + s->len - c.s->len, c.s->s, c.s->len))
                    return mk_bool(true);
            }
            return mk_bool(false);
        }
        if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
            jval sep = arg_or(a, 0, "sep", NONE);
            jval mx = arg_or(a, 1, "maxsplit", mk_int(-1));
            if (sep.t != V_NONE && sep.t != V_STR) rt_fail(E, at, "split: sep must be str or None");
            if (sep.t == V_STR && sep.s->len == 0) rt_fail(E, at, "ValueError: empty separator");
            if (mx.t != V_INT) rt_fail(E, at, "split: maxsplit must be an integer");
            return str_split(E, s, sep.t == V_STR ? sep.s : NULL, mx.i, m[0] == 'r');
        }
        if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
            jval c = arg_or(a, 0, "chars", NONE);
            if (c.t != V_NONE && c.t != V_STR) rt_fail(E, at, "%s arg must be None or str", m);
            return str_strip(E, s, c.t == V_STR ? c.s : NULL, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
        }
        if (!strcmp(m, "replace")) {
            jstr *old = arg_str(E, at, a, 0, NULL, "replace");
            jstr *nw = arg_str(E, at, a, 1, NULL, "replace");
            jval c = arg_or(a, 2, "count", mk_int(-1));
            return str_replace(E, s, old, nw, c.t == V_INT ? c.i : -1);
        }
        if (!strcmp(m, "upper")) return str_case(E, s, 0);
        if (!strcmp(m, "lower")) return str_case(E, s, 1);
        if (!strcmp(m, "title")) return str_case(E, s, 2);
        if (!strcmp(m, "capitalize")) return str_case(E, s, 3);
        if (!strcmp(m, "find") || !strcmp(m, "count")) {
            jstr *sub = arg_str(E, at, a, 0, NULL, m);
            if (m[0] == 'f') {
                const char *p = memmem_s(s->s, s->len, sub->s, sub->len);
                return mk_int(p ? (int64_t)utf8_count(s->s, (size_t)(p - s->s)) : -1);
            }
            if (sub->len == 0) return mk_int((int64_t)utf8_count(s->s, s->len) + 1);
            int64_t c = 0;
            for (size_t i = 0; i < s->len;) {
                const char *p = memmem_s(s->s + i, s->len - i, sub->s, sub->len);
                if (!p) break;
                c++;
                i = (size_t)(p - s->s) + sub->len;
            }
            return mk_int(c);
        }
        if (!strcmp(m, "join")) {
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "join() takes exactly one argument");
            jlist *l = iter_list(E, at, x);
            sbuf b = {0};
            for (int i = 0; i < l->n; i++) {
                if (l->v[i].t != V_STR) rt_fail(E, at, "join: sequence item %d: expected str", i);
                if (i) sb_put(J, &b, s->s, s->len);
                sb_put(J, &b, l->v[i].s->s, l->v[i].s->len);
            }
            return sb_val(J, &b);
        }
        if (!strcmp(m, "splitlines")) {
            jlist *l = list_new(J, 4);
            size_t st = 0;
            for (size_t i = 0; i < s->len; i++)
                if (s->s[i] == '\n') { list_push(J, l, mk_strn(J, s->s + st, i - st)); st = i + 1; }
            if (st < s->len) list_push(J, l, mk_strn(J, s->s + st, s->len - st));
            return mk_list(l);
        }
        if (!strcmp(m, "isdigit") || !strcmp(m, "isalpha") || !strcmp(m, "isspace")) {
            if (!s->len) return mk_bool(false);
            for (size_t i = 0; i < s->len; i++) {
                char c = s->s[i];
                bool ok = m[2] == 'd' ? (c >= '0' && c <= '9') : m[2] == 'a' ? ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) : is_ws(c);
                if (!ok) return mk_bool(false);
            }
            return mk_bool(true);
        }
        if (!strcmp(m, "format")) {
            sbuf b = {0};
            int auto_i = 0;
            for (size_t i = 0; i < s->len; i++) {
                char c = s->s[i];
                if (c == '{' && i + 1 < s->len && s->s[i + 1] == '{') { sb_putc(J, &b, '{'); i++; continue; }
                if (c == '}' && i + 1 < s->len && s->s[i + 1] == '}') { sb_putc(J, &b, '}'); i++; continue; }
                if (c != '{') { sb_putc(J, &b, c); continue; }
                size_t e = i + 1;
                while (e < s->len && s->s[e] != '}') e++;
                if (e >= s->len) rt_fail(E, at, "format: single '{' in format string");
                jval val;
                if (e == i + 1) {
                    if (!arg(a, auto_i++, NULL, &val)) rt_fail(E, at, "format: not enough arguments");
                } else if (s->s[i + 1] >= '0' && s->s[i + 1] <= '9') {
                    if (!arg(a, atoi(s->s + i + 1), NULL, &val)) rt_fail(E, at, "format: index out of range");
                } else {
                    char key[64];
                    size_t kl = e - i - 1 < sizeof key - 1 ? e - i - 1 : sizeof key - 1;
                    memcpy(key, s->s + i + 1, kl);
                    key[kl] = 0;
                    if (!arg(a, -1, key, &val)) rt_fail(E, at, "format: missing key '%s'", key);
                }
                py_str(E, &b, val, 0);
                i = e;
            }
            return sb_val(J, &b);
        }
    } else if (self.t == V_LIST) {
        jlist *l = self.l;
        if (l->tuple && strcmp(m, "index") && strcmp(m, "count"))
            rt_fail(E, at, "'tuple' object has no attribute '%s'", m);
        if (!strcmp(m, "append")) {
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "append() takes exactly one argument");
            list_push(J, l, x);
            return NONE;
        }
        if (!strcmp(m, "extend")) {
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "extend() takes exactly one argument");
            jlist *src = iter_list(E, at, x);
            int n = src->n;
            for (int i = 0; i < n; i++) list_push(J, l, src->v[i]);
            return NONE;
        }
        if (!strcmp(m, "pop")) {
            jval iv = arg_or(a, 0, NULL, mk_int(-1));
            if (iv.t != V_INT) rt_fail(E, at, "pop: index must be an integer");
            int64_t i = iv.i < 0 ? iv.i + l->n : iv.i;
            if (l->n == 0 || i < 0 || i >= l->n) rt_fail(E, at, "pop index out of range");
            jval r = l->v[i];
            memmove(l->v + i, l->v + i + 1, sizeof(jval) * (size_t)(l->n - i - 1));
            l->n--;
            return r;
        }
        if (!strcmp(m, "insert")) {
            jval iv, val;
            if (!arg(a, 0, NULL, &iv) || !arg(a, 1, NULL, &val) || iv.t != V_INT) rt_fail(E, at, "insert(index, value)");
            int64_t i = iv.i < 0 ? iv.i + l->n : iv.i;
            if (i < 0) i = 0;
            if (i > l->n) i = l->n;
            list_push(J, l, val);
            memmove(l->v + i + 1, l->v + i, sizeof(jval) * (size_t)(l->n - 1 - i));
            l->v[i] = val;
            return NONE;
        }
        if (!strcmp(m, "remove") || !strcmp(m, "index") || !strcmp(m, "count")) {
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "%s() takes exactly one argument", m);
            int64_t c = 0;
            for (int i = 0; i < l->n; i++)
                if (py_eq(l->v[i], x, 0)) {
                    if (m[0] == 'i') return mk_int(i);
                    if (m[0] == 'r') {
                        memmove(l->v + i, l->v + i + 1, sizeof(jval) * (size_t)(l->n - i - 1));
                        l->n--;
                        return NONE;
                    }
                    c++;
                }
            if (m[0] == 'c') return mk_int(c);
            rt_fail(E, at, "ValueError: value not in list");
        }
        if (!strcmp(m, "reverse")) {
            for (int i = 0, j = l->n - 1; i < j; i++, j--) { jval t = l->v[i]; l->v[i] = l->v[j]; l->v[j] = t; }
            return NONE;
        }
        if (!strcmp(m, "copy")) {
            jlist *c = list_new(J, l->n);
            for (int i = 0; i < l->n; i++) list_push(J, c, l->v[i]);
            return mk_list(c);
        }
        if (!strcmp(m, "clear")) { l->n = 0; return NONE; }
    } else if (self.t == V_DICT) {
        jdict *d = self.d;
        if (!strcmp(m, "get")) {
            jstr *k = NULL;
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "get expected at least 1 argument");
            jval dflt = arg_or(a, 1, NULL, NONE);
            (void)k;
            int i = dict_find_val(d, x);
            return i >= 0 ? d->v[i] : dflt;
        }
        if (!strcmp(m, "items")) return items_of(E, at, self);
        if (!strcmp(m, "keys") || !strcmp(m, "values")) {
            jlist *l = list_new(J, d->n);
            for (int i = 0; i < d->n; i++) list_push(J, l, m[0] == 'k' ? dict_key(d, i) : d->v[i]);
            return mk_list(l);
        }
        if (!strcmp(m, "pop")) {
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "pop expected at least 1 argument");
            int i = dict_find_val(d, x);
            if (i < 0) {
                jval dflt;
                if (arg(a, 1, NULL, &dflt)) return dflt;
                rt_fail(E, at, "KeyError: %s", x.t == V_STR ? x.s->s : "(key)");
            }
            jval r = d->v[i];
            memmove(d->k + i, d->k + i + 1, sizeof(jstr *) * (size_t)(d->n - i - 1));
            memmove(d->v + i, d->v + i + 1, sizeof(jval) * (size_t)(d->n - i - 1));
            if (d->kv) memmove(d->kv + i, d->kv + i + 1, sizeof(jval) * (size_t)(d->n - i - 1));
            d->n--;
            return r;
        }
        if (!strcmp(m, "setdefault")) {
            if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "setdefault expected at least 1 argument");
            int i = dict_find_val(d, x);
            if (i >= 0) return d->v[i];
            jval dflt = arg_or(a, 1, NULL, NONE);
            dict_set_val(E, at, d, x, dflt);
            return dflt;
        }
        if (!strcmp(m, "update")) {
            if (arg(a, 0, NULL, &x)) {
                if (x.t != V_DICT) rt_fail(E, at, "update: expected a mapping");
                for (int i = 0; i < x.d->n; i++) dict_set_val(E, at, d, dict_key(x.d, i), x.d->v[i]);
            }
            for (int i = 0; i < a->nkw; i++) dict_set(J, d, a->kwn[i], a->kwv[i]);
            return NONE;
        }
        if (!strcmp(m, "copy")) {
            jdict *c = dict_new(J);
            for (int i = 0; i < d->n; i++) dict_set_val(E, at, c, dict_key(d, i), d->v[i]);
            return mk_dict(c, V_DICT);
        }
        if (!strcmp(m, "clear")) { d->n = 0; return NONE; }
    }
    rt_fail(E, at, "'%s' object has no method '%s'", type_name(self), m);
}

/* --- builtin functions -------------------------------------------------------------------- */

static jval call_builtin(ev *E, node *at, int fn, const args_t *a) {
    jx *J = E->J;
    jval x;
    switch (fn) {
    case F_RAISE: {
        jval msg = arg_or(a, 0, NULL, mk_str(J, ""));
        jval s = to_str(E, msg);
        rt_fail(E, at, "raise_exception: %s", s.s->s);
    }
    case F_NAMESPACE: case F_DICT: {
        jdict *d = dict_new(J);
        if (arg(a, 0, NULL, &x)) {
            if (x.t != V_DICT) rt_fail(E, at, "namespace()/dict(): positional argument must be a mapping");
            for (int i = 0; i < x.d->n; i++) dict_set_val(E, at, d, dict_key(x.d, i), x.d->v[i]);
        }
        for (int i = 0; i < a->nkw; i++) dict_set(J, d, a->kwn[i], a->kwv[i]);
        return mk_dict(d, fn == F_NAMESPACE ? V_NS : V_DICT);
    }
    case F_RANGE: {
        int64_t st = 0, en, sp = 1;
        jval v0, v1, v2;
        if (!arg(a, 0, NULL, &v0) || v0.t != V_INT) rt_fail(E, at, "range() expects integer arguments");
        if (arg(a, 1, NULL, &v1)) {
            if (v1.t != V_INT) rt_fail(E, at, "range() expects integer arguments");
            st = v0.i;
            en = v1.i;
            if (arg(a, 2, NULL, &v2)) {
                if (v2.t != V_INT || v2.i == 0) rt_fail(E, at, "range() step must be a non-zero integer");
                sp = v2.i;
            }
        } else {
            en = v0.i;
        }
        jlist *l = list_new(J, 4);
        int64_t cnt = 0;
        for (int64_t i = st; sp > 0 ? i < en : i > en; i += sp) {
            if (++cnt > RANGE_LIMIT) jfail(J, DF_ERR_RANGE, at->line, at->col, "range() too large (limit %d)", RANGE_LIMIT);
            list_push(J, l, mk_int(i));
        }
        return mk_list(l);
    }
    case F_STRFTIME: {
        jstr *fmt = arg_str(E, at, a, 0, NULL, "strftime_now");
        struct tm tmv;
        time_t t = E->J->now ? (time_t)E->J->now : time(NULL);
        if (E->J->now) gmtime_r(&t, &tmv);
        else localtime_r(&t, &tmv);
        char buf[512];
        size_t n = fmt->len ? strftime(buf, sizeof buf, fmt->s, &tmv) : 0;
        return mk_strn(J, buf, n);
    }
    }
    rt_fail(E, at, "unknown builtin");
}

static jval call_value(ev *E, node *at, jval f, const args_t *a) {
    switch (f.t) {
    case V_MACRO: return call_macro(E, at, f.m, a);
    case V_FUNC: return call_builtin(E, at, f.fn, a);
    case V_METHOD: return call_method(E, at, f.bm->self, f.bm->name, a);
    case V_UNDEF: undef_fail(E, at, f, "called as a function");
    default: rt_fail(E, at, "'%s' object is not callable", type_name(f));
    }
}

/* --- binary operators ---------------------------------------------------------------------- */

static jval html_escape_str(ev *E, jval s) {
    args_t none = {0};
    return apply_filter(E, NULL, "escape", s, &none);
}

static jval binop(ev *E, node *at, int op, jval a, jval b) {
    jx *J = E->J;
    if (a.t == V_UNDEF) undef_fail(E, at, a, "used in arithmetic");
    if (b.t == V_UNDEF) undef_fail(E, at, b, "used in arithmetic");
    if (op == OP_ADD) {
        if (a.t == V_STR && b.t == V_STR) {
            jstr *x = a.s, *y = b.s;
            bool safe = x->safe || y->safe;
            if (x->safe && !y->safe) y = html_escape_str(E, b).s;
            else if (y->safe && !x->safe) x = html_escape_str(E, a).s;
            if (x->len + y->len > J->max_output)
                jfail(J, DF_ERR_RANGE, at->line, at->col, "string too long");
            jstr *r = amalloc(J, sizeof(jstr) + x->len + y->len + 1);
            r->len = x->len + y->len;
            r->safe = safe;
            memcpy(r->s, x->s, x->len);
            memcpy(r->s + x->len, y->s, y->len);
            r->s[r->len] = 0;
            return mk_sv(r);
        }
        if (a.t == V_LIST && b.t == V_LIST && a.l->tuple == b.l->tuple) {
            jlist *l = list_new(J, a.l->n + b.l->n);
            l->tuple = a.l->tuple;
            for (int i = 0; i < a.l->n; i++) list_push(J, l, a.l->v[i]);
            for (int i = 0; i < b.l->n; i++) list_push(J, l, b.l->v[i]);
            return mk_list(l);
        }
    }
    if (op == OP_MUL) {
        jval s = a, n = b;
        if (is_num(a) && !is_num(b)) s = b, n = a;
        if ((s.t == V_STR || s.t == V_LIST) && (n.t == V_INT || n.t == V_BOOL)) {
            int64_t k = num_i(n);
            if (k < 0) k = 0;
            size_t unit = s.t == V_STR ? s.s->len : (size_t)s.l->n * sizeof(jval);
            if (unit && (uint64_t)k > J->max_output / unit)
                jfail(J, DF_ERR_RANGE, at->line, at->col, "repetition result too large");
            if (s.t == V_STR) {
                sbuf bb = {0};
                for (int64_t i = 0; i < k; i++) sb_put(J, &bb, s.s->s, s.s->len);
                return sb_val(J, &bb);
            }
            jlist *l = list_new(J, 4);
            l->tuple = s.l->tuple;
            for (int64_t i = 0; i < k; i++)
                for (int j = 0; j < s.l->n; j++) list_push(J, l, s.l->v[j]);
            return mk_list(l);
        }
    }
    if (op == OP_MOD && a.t == V_STR) {
        /* printf-style formatting: support %s / %d with a value or tuple */
        jlist *args;
        if (b.t == V_LIST && b.l->tuple) args = b.l;
        else { args = list_new(J, 1); list_push(J, args, b); }
        sbuf bb = {0};
        int ai = 0;
        for (size_t i = 0; i < a.s->len; i++) {
            char c = a.s->s[i];
            if (c != '%' || i + 1 >= a.s->len) { sb_putc(J, &bb, c); continue; }
            /* %[flags][width][.precision]conversion */
            char spec[32];
            int sl = 0;
            spec[sl++] = '%';
            i++;
            while (i < a.s->len && strchr("-+ #0", a.s->s[i]) && sl < 8) spec[sl++] = a.s->s[i++];
            while (i < a.s->len && a.s->s[i] >= '0' && a.s->s[i] <= '9' && sl < 16) spec[sl++] = a.s->s[i++];
            if (i < a.s->len && a.s->s[i] == '.') {
                spec[sl++] = a.s->s[i++];
                while (i < a.s->len && a.s->s[i] >= '0' && a.s->s[i] <= '9' && sl < 24) spec[sl++] = a.s->s[i++];
            }
            if (i >= a.s->len) rt_fail(E, at, "incomplete format");
            char f = a.s->s[i];
            if (f == '%' && sl == 1) { sb_putc(J, &bb, '%'); continue; }
            if (ai >= args->n) rt_fail(E, at, "not enough arguments for format string");
            jval v = args->v[ai++];
            char tmp[400];
            if (f == 's' || f == 'r') {
                sbuf sv = {0};
                if (f == 's') py_str(E, &sv, v, 0);
                else py_repr(E, &sv, v, 0);
                if (sl == 1) { sb_put(J, &bb, sv.p ? sv.p : "", sv.n); continue; }
                jval t = sb_val(J, &sv);
                spec[sl++] = 's';
                spec[sl] = 0;
                int w = snprintf(tmp, sizeof tmp, spec, t.s->s);
                sb_put(J, &bb, tmp, w < 0 ? 0 : (size_t)w < sizeof tmp ? (size_t)w : sizeof tmp - 1);
            } else if (strchr("dixXo", f)) {
                if (!is_num(v)) rt_fail(E, at, "%%%c format: a number is required, not %s", f, type_name(v));
                spec[sl++] = 'l';
                spec[sl++] = 'l';
                spec[sl++] = f == 'i' ? 'd' : f;
                spec[sl] = 0;
                long long iv = (long long)(v.t == V_FLOAT ? (int64_t)v.f : num_i(v));
                int w = snprintf(tmp, sizeof tmp, spec, iv);
                sb_put(J, &bb, tmp, w < 0 ? 0 : (size_t)w < sizeof tmp ? (size_t)w : sizeof tmp - 1);
            } else if (strchr("feEgG", f)) {
                if (!is_num(v)) rt_fail(E, at, "%%%c format: a number is required, not %s", f, type_name(v));
                spec[sl++] = f;
                spec[sl] = 0;
                int w = snprintf(tmp, sizeof tmp, spec, num_f(v));
                sb_put(J, &bb, tmp, w < 0 ? 0 : (size_t)w < sizeof tmp ? (size_t)w : sizeof tmp - 1);
            } else {
                rt_fail(E, at, "unsupported format character '%c'", f);
            }
        }
        return sb_val(J, &bb);
    }
    if (!is_num(a) || !is_num(b)) {
        static const char *opn[] = {"+", "-", "*", "/", "//", "%", "**"};
        rt_fail(E, at, "unsupported operand type(s) for %s: '%s' and '%s'", opn[op], type_name(a), type_name(b));
    }
    bool fl = a.t == V_FLOAT || b.t == V_FLOAT;
    if (op == OP_DIV) {
        double y = num_f(b);
        if (y == 0) rt_fail(E, at, "ZeroDivisionError: division by zero");
        return mk_float(num_f(a) / y);
    }
    if (fl) {
        double x = num_f(a), y = num_f(b);
        switch (op) {
        case OP_ADD: return mk_float(x + y);
        case OP_SUB: return mk_float(x - y);
        case OP_MUL: return mk_float(x * y);
        case OP_FDIV: if (y == 0) rt_fail(E, at, "ZeroDivisionError: float floor division by zero"); return mk_float(floor(x / y));
        case OP_MOD: {
            if (y == 0) rt_fail(E, at, "ZeroDivisionError: float modulo");
            double r = fmod(x, y);
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return mk_float(r);
        }
        case OP_POW: return mk_float(pow(x, y));
        }
    }
    int64_t x = num_i(a), y = num_i(b), r;
    switch (op) {
    case OP_ADD: if (__builtin_add_overflow(x, y, &r)) return mk_float((double)x + (double)y); return mk_int(r);
    case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) return mk_float((double)x - (double)y); return mk_int(r);
    case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) return mk_float((double)x * (double)y); return mk_int(r);
    case OP_FDIV: case OP_MOD: {
        if (y == 0) rt_fail(E, at, "ZeroDivisionError: integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return op == OP_FDIV ? mk_float(9223372036854775808.0) : mk_int(0);
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
        return mk_int(op == OP_FDIV ? q : m);
    }
    case OP_POW: {
        if (y < 0) return mk_float(pow((double)x, (double)y));
        int64_t acc = 1;
        for (int64_t i = 0; i < y; i++)
            if (__builtin_mul_overflow(acc, x, &acc)) return mk_float(pow((double)x, (double)y));
        return mk_int(acc);
    }
    }
    rt_fail(E, at, "bad operator");
}

static bool contains(ev *E, node *at, jval item, jval seq) {
    switch (seq.t) {
    case V_UNDEF: return false;
    case V_STR:
        if (item.t != V_STR) rt_fail(E, at, "'in <string>' requires string as left operand, not %s", type_name(item));
        return memmem_s(seq.s->s, seq.s->len, item.s->s, item.s->len) != NULL;
    case V_LIST:
        for (int i = 0; i < seq.l->n; i++)
            if (py_eq(seq.l->v[i], item, 0)) return true;
        return false;
    case V_DICT:
        return dict_find_val(seq.d, item) >= 0;
    default:
        rt_fail(E, at, "argument of type '%s' is not iterable", type_name(seq));
    }
}

/* --- expression evaluation ---------------------------------------------------------------- */

static jval eval_inner(ev *E, scope *S, node *x);
static jval eval(ev *E, scope *S, node *x) {
    jx *J = E->J;
    if (++J->edepth > EVAL_DEPTH_LIMIT)
        jfail(J, DF_ERR_RANGE, x->line, x->col, "evaluation nested too deeply (limit %d)", EVAL_DEPTH_LIMIT);
    jval v = eval_inner(E, S, x);
    J->edepth--;
    return v;
}

static jval eval_inner(ev *E, scope *S, node *x) {
    jx *J = E->J;
    step(E, x);
    switch (x->k) {
    case E_LIT: return x->lit;
    case E_NAME: {
        jval v = lookup(S, x->s->s, x->s->len);
        if (v.t == V_UNDEF) return undef_named(E, x->s->s);
        return v;
    }
    case E_LIST: case E_TUPLE: {
        jlist *l = list_new(J, x->nv);
        l->tuple = x->k == E_TUPLE;
        for (int i = 0; i < x->nv; i++) list_push(J, l, eval(E, S, x->v[i]));
        return mk_list(l);
    }
    case E_DICT: {
        jdict *d = dict_new(J);
        for (int i = 0; i + 1 < x->nv; i += 2) {
            jval k = eval(E, S, x->v[i]);
            dict_set_val(E, x->v[i], d, k, eval(E, S, x->v[i + 1]));
        }
        return mk_dict(d, V_DICT);
    }
    case E_ATTR: return get_attr(E, x, eval(E, S, x->a), x->s->s);
    case E_ITEM: {
        jval o = eval(E, S, x->a);
        return get_item(E, x, o, eval(E, S, x->b));
    }
    case E_SLICE: {
        jval o = eval(E, S, x->a);
        jval p[3];
        for (int i = 0; i < 3; i++) p[i] = x->v[i] ? eval(E, S, x->v[i]) : NONE;
        return do_slice(E, x, o, p[0], p[1], p[2]);
    }
    case E_CALL: {
        if (x->a->k == E_ATTR) {
            jval self = eval(E, S, x->a->a);
            const char *m = self.t != V_UNDEF ? find_method(self, x->a->s->s) : NULL;
            if (m) {
                args_t a = eval_args(E, S, x);
                return call_method(E, x, self, m, &a);
            }
            jval f = get_attr(E, x->a, self, x->a->s->s);
            args_t a = eval_args(E, S, x);
            return call_value(E, x, f, &a);
        }
        jval f = eval(E, S, x->a);
        args_t a = eval_args(E, S, x);
        return call_value(E, x, f, &a);
    }
    case E_FILTER: {
        jval v = eval(E, S, x->a);
        args_t a = eval_args(E, S, x);
        return apply_filter(E, x, x->s->s, v, &a);
    }
    case E_TEST: {
        jval v = eval(E, S, x->a);
        args_t a = eval_args(E, S, x);
        bool r = apply_test(E, x, x->s->s, v, &a);
        return mk_bool(x->op ? !r : r);
    }
    case E_NEG: case E_POS: {
        jval v = eval(E, S, x->a);
        if (v.t == V_INT) return x->k == E_NEG ? (v.i == INT64_MIN ? mk_float(9223372036854775808.0) : mk_int(-v.i)) : v;
        if (v.t == V_BOOL) return mk_int(x->k == E_NEG ? -(int64_t)v.b : v.b);
        if (v.t == V_FLOAT) return mk_float(x->k == E_NEG ? -v.f : v.f);
        if (v.t == V_UNDEF) undef_fail(E, x, v, "unary operator");
        rt_fail(E, x, "bad operand type for unary -: '%s'", type_name(v));
    }
    case E_NOT: return mk_bool(!truthy(eval(E, S, x->a)));
    case E_AND: {
        jval a = eval(E, S, x->a);
        return truthy(a) ? eval(E, S, x->b) : a;
    }
    case E_OR: {
        jval a = eval(E, S, x->a);
        return truthy(a) ? a : eval(E, S, x->b);
    }
    case E_COND:
        if (truthy(eval(E, S, x->a))) return eval(E, S, x->b);
        return x->c ? eval(E, S, x->c) : undef_named(E, "conditional expression had no else");
    case E_CONCAT: {
        sbuf b = {0};
        py_str(E, &b, eval(E, S, x->a), 0);
        py_str(E, &b, eval(E, S, x->b), 0);
        return sb_val(J, &b);
    }
    case E_BIN: {
        jval a = eval(E, S, x->a);
        jval b = eval(E, S, x->b);
        return binop(E, x, x->op, a, b);
    }
    case E_CMP: {
        jval a = eval(E, S, x->a);
        jval b = eval(E, S, x->b);
        switch (x->op) {
        case OP_EQ: return mk_bool(py_eq(a, b, 0));
        case OP_NE: return mk_bool(!py_eq(a, b, 0));
        case OP_IN: return mk_bool(contains(E, x, a, b));
        case OP_NOTIN: return mk_bool(!contains(E, x, a, b));
        default: {
            if (a.t == V_UNDEF) undef_fail(E, x, a, "compared");
            if (b.t == V_UNDEF) undef_fail(E, x, b, "compared");
            int c = py_cmp(E, x, a, b);
            switch (x->op) {
            case OP_LT: return mk_bool(c < 0);
            case OP_LE: return mk_bool(c <= 0);
            case OP_GT: return mk_bool(c > 0);
            default: return mk_bool(c >= 0);
            }
        }
        }
    }
    default:
        rt_fail(E, x, "internal: bad expression node %d", x->k);
    }
}

/* --- statements ---------------------------------------------------------------------------- */

enum { FLOW_NORMAL = 0, FLOW_BREAK = 1, FLOW_CONTINUE = 2 };

static void assign(ev *E, scope *S, node *target, jval v, node *at) {
    jx *J = E->J;
    if (target->k == E_NAME) {
        dict_set(J, &S->vars, target->s, v);
    } else if (target->k == E_ATTR) {
        jval obj = eval(E, S, target->a);
        if (obj.t != V_NS) rt_fail(E, at, "can only assign attributes of namespace objects (got %s)", type_name(obj));
        dict_set(J, obj.d, target->s, v);
    } else if (target->k == E_TUPLE) {
        jlist *l = iter_list(E, at, v);
        if (l->n != target->nv)
            rt_fail(E, at, "cannot unpack %d value(s) into %d target(s)", l->n, target->nv);
        for (int i = 0; i < target->nv; i++) assign(E, S, target->v[i], l->v[i], at);
    } else {
        rt_fail(E, at, "cannot assign to this expression");
    }
}

static int exec_node(ev *E, scope *S, node *x);

static int exec_body(ev *E, scope *S, node *body) {
    for (int i = 0; i < body->nv; i++) {
        int f = exec_node(E, S, body->v[i]);
        if (f) return f;
    }
    return FLOW_NORMAL;
}

static int exec_for(ev *E, scope *S, node *x) {
    jx *J = E->J;
    jval seq = eval(E, S, x->b);
    if (seq.t == V_NONE || !(seq.t == V_UNDEF || seq.t == V_STR || seq.t == V_LIST || seq.t == V_DICT))
        rt_fail(E, x->b, "'%s' object is not iterable", type_name(seq));
    jlist *items = iter_list(E, x, seq);
    /* snapshot (the body may mutate the list) */
    jlist *snap = list_new(J, items->n);
    for (int i = 0; i < items->n; i++) list_push(J, snap, items->v[i]);
    if (x->c) { /* loop filter: evaluated with the target bound */
        jlist *f = list_new(J, snap->n);
        scope *fs = NULL;
        for (int i = 0; i < snap->n; i++) {
            if (!fs || fs->captured) fs = scope_new(E, S);
            fs->vars.n = 0;
            assign(E, fs, x->a, snap->v[i], x);
            if (truthy(eval(E, fs, x->c))) list_push(J, f, snap->v[i]);
        }
        snap = f;
    }
    int n = snap->n;
    if (n == 0) {
        if (x->els) return exec_body(E, S, x->els);
        return FLOW_NORMAL;
    }
    static const char *const LK[11] = {"index", "index0", "revindex", "revindex0", "first", "last",
                                       "length", "depth", "depth0", "previtem", "nextitem"};
    if (!J->loopkeys[0])
        for (int k = 0; k < 11; k++) J->loopkeys[k] = jstr_new(J, LK[k], strlen(LK[k]));
    jstr *const *K = J->loopkeys;
    scope *it = NULL;
    jdict *loop = NULL;
    jstr *loopname = NULL;
    for (int i = 0; i < n; i++) {
        step(E, x);
        if (!it || it->captured) {
            it = scope_new(E, S);
            loop = dict_new(J);
        }
        it->vars.n = 0;
        loop->n = 0;
        dict_set(J, loop, K[0], mk_int(i + 1));
        dict_set(J, loop, K[1], mk_int(i));
        dict_set(J, loop, K[2], mk_int(n - i));
        dict_set(J, loop, K[3], mk_int(n - i - 1));
        dict_set(J, loop, K[4], mk_bool(i == 0));
        dict_set(J, loop, K[5], mk_bool(i == n - 1));
        dict_set(J, loop, K[6], mk_int(n));
        dict_set(J, loop, K[7], mk_int(1));
        dict_set(J, loop, K[8], mk_int(0));
        if (i > 0) dict_set(J, loop, K[9], snap->v[i - 1]);
        if (i + 1 < n) dict_set(J, loop, K[10], snap->v[i + 1]);
        if (!loopname) loopname = jstr_new(J, "loop", 4);
        dict_set(J, &it->vars, loopname, mk_dict(loop, V_NS));
        assign(E, it, x->a, snap->v[i], x);
        int f = exec_body(E, it, x->body);
        if (f == FLOW_BREAK) break;
    }
    return FLOW_NORMAL;
}

static int exec_node_inner(ev *E, scope *S, node *x);
static int exec_node(ev *E, scope *S, node *x) {
    jx *J = E->J;
    if (++J->edepth > EVAL_DEPTH_LIMIT)
        jfail(J, DF_ERR_RANGE, x->line, x->col, "evaluation nested too deeply (limit %d)", EVAL_DEPTH_LIMIT);
    int f = exec_node_inner(E, S, x);
    J->edepth--;
    return f;
}

static int exec_node_inner(ev *E, scope *S, node *x) {
    jx *J = E->J;
    step(E, x);
    switch (x->k) {
    case S_TEXT: sb_put(J, E->out, x->s->s, x->s->len); return FLOW_NORMAL;
    case S_OUT: emit(E, eval(E, S, x->a)); return FLOW_NORMAL;
    case S_IF:
        for (node *c = x; c;) {
            if (truthy(eval(E, S, c->a))) return exec_body(E, S, c->body);
            if (!c->els) return FLOW_NORMAL;
            if (c->els->k == S_IF) c = c->els;
            else return exec_body(E, S, c->els);
        }
        return FLOW_NORMAL;
    case S_FOR: return exec_for(E, S, x);
    case S_SET: assign(E, S, x->a, eval(E, S, x->b), x); return FLOW_NORMAL;
    case S_SETBLOCK: {
        sbuf *saved = E->out;
        sbuf buf = {0};
        E->out = &buf;
        int f = exec_body(E, S, x->body);
        E->out = saved;
        (void)f;
        jval v = sb_val(J, &buf);
        /* filters were chained outermost-first in x->b; apply innermost first */
        node *chain[32];
        int nc = 0;
        for (node *fnode = x->b; fnode && nc < 32; fnode = fnode->a) chain[nc++] = fnode;
        for (int i = nc - 1; i >= 0; i--) {
            args_t a = eval_args(E, S, chain[i]);
            v = apply_filter(E, chain[i], chain[i]->s->s, v, &a);
        }
        assign(E, S, x->a, v, x);
        return FLOW_NORMAL;
    }
    case S_MACRO: {
        macro *m = amalloc(J, sizeof(macro));
        m->def = x;
        m->closure = S;
        S->captured = true;
        jval v = {.t = V_MACRO};
        v.m = m;
        dict_set(J, &S->vars, x->s, v);
        return FLOW_NORMAL;
    }
    case S_WITH: {
        scope *W = scope_new(E, S);
        for (int i = 0; i < x->nv; i++) /* values are evaluated in the outer scope */
            dict_set(J, &W->vars, x->v[i]->a->s, eval(E, S, x->v[i]->b));
        return exec_body(E, W, x->body);
    }
    case S_BREAK: return FLOW_BREAK;
    case S_CONTINUE: return FLOW_CONTINUE;
    default: rt_fail(E, x, "internal: bad statement node %d", x->k);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* entry points                                                                                 */

static void set_global_json(jx *J, scope *S, const char *name, const char *json, const char *what) {
    dict_setc(J, &S->vars, name, json ? parse_json(J, json, what) : NONE);
}

int df_chat_render_ex(const char *template_src, const char *messages_json, const df_chat_opts *o,
                      char **out) {
    if (!template_src || !messages_json || !o || !out)
        return df_err(DF_ERR_INVALID, "df_chat_render: NULL argument");
    *out = NULL;
    jx *J = calloc(1, sizeof(jx));
    if (!J) return df_err(DF_ERR_NOMEM, "df_chat_render: out of memory");
    J->max_output = o->max_output ? o->max_output : OUTPUT_LIMIT_DEFAULT;
    J->now = o->now;
    J->max_steps = o->max_steps > 0 ? o->max_steps : STEP_LIMIT;
    int rc = DF_OK;
    if (setjmp(J->jb)) {
        rc = df_err(J->status ? J->status : DF_ERR_INTERNAL, "chat template: %s", J->err);
        arena_free(J);
        free(J);
        return rc;
    }
    /* normalize newlines, drop one trailing newline (keep_trailing_newline=False) */
    size_t sl = strlen(template_src);
    char *src = amalloc(J, sl + 1);
    size_t n = 0;
    for (size_t i = 0; i < sl; i++) {
        if (template_src[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < sl && template_src[i + 1] == '\n') i++;
        } else {
            src[n++] = template_src[i];
        }
    }
    if (n > 0 && src[n - 1] == '\n') n--;
    src[n] = 0;
    J->src = src;

    lexer L = {0};
    L.J = J;
    L.s = src;
    L.n = n;
    lex(&L);
    parser P = {J, L.v, 0, L.nt, 0};
    tok *dummy;
    node *root = parse_body(&P, NULL, &dummy);

    ev E = {0};
    E.J = J;
    scope *G = scope_new(&E, NULL);
    E.root = G;
    jval f = {.t = V_FUNC};
    f.fn = F_RAISE; dict_setc(J, &G->vars, "raise_exception", f);
    f.fn = F_NAMESPACE; dict_setc(J, &G->vars, "namespace", f);
    f.fn = F_RANGE; dict_setc(J, &G->vars, "range", f);
    f.fn = F_STRFTIME; dict_setc(J, &G->vars, "strftime_now", f);
    f.fn = F_DICT; dict_setc(J, &G->vars, "dict", f);
    scope *T = scope_new(&E, G); /* template context: kwargs shadow globals */
    jval msgs = parse_json(J, messages_json, "messages");
    if (msgs.t != V_LIST) jfail(J, DF_ERR_FORMAT, 0, 0, "messages JSON must be an array");
    dict_setc(J, &T->vars, "messages", msgs);
    set_global_json(J, T, "tools", o->tools_json, "tools");
    dict_setc(J, &T->vars, "documents", NONE);
    dict_setc(J, &T->vars, "add_generation_prompt", mk_bool(o->add_generation_prompt));
    if (o->bos_token) dict_setc(J, &T->vars, "bos_token", mk_str(J, o->bos_token));
    if (o->eos_token) dict_setc(J, &T->vars, "eos_token", mk_str(J, o->eos_token));
    if (o->extra_vars_json) {
        jval ex = parse_json(J, o->extra_vars_json, "extra variables");
        if (ex.t != V_DICT) jfail(J, DF_ERR_FORMAT, 0, 0, "extra variables JSON must be an object");
        for (int i = 0; i < ex.d->n; i++) dict_set(J, &T->vars, ex.d->k[i], ex.d->v[i]);
    }
    sbuf buf = {0};
    E.out = &buf;
    exec_body(&E, T, root);

    char *res = malloc(buf.n + 1);
    if (!res) {
        rc = df_err(DF_ERR_NOMEM, "chat template: out of memory");
    } else {
        if (buf.n) memcpy(res, buf.p, buf.n);
        res[buf.n] = 0;
        *out = res;
    }
    arena_free(J);
    free(J);
    return rc;
}

int df_chat_render_json(const char *template_src, const char *messages_json,
                        const char *tools_json, bool add_generation_prompt, const char *bos_token,
                        const char *eos_token, const char *extra_vars_json, char **out) {
    df_chat_opts o = {0};
    o.add_generation_prompt = add_generation_prompt;
    o.bos_token = bos_token;
    o.eos_token = eos_token;
    o.tools_json = tools_json;
    o.extra_vars_json = extra_vars_json;
    return df_chat_render_ex(template_src, messages_json, &o, out);
}

static const struct {
    const char *alias, *name;
} ALIASES[] = {{"deepseek-v3.1", "deepseek-v3"}, {"deepseek", "deepseek-v3"}, {"llama3.1", "llama3"},
               {"llama-3", "llama3"}, {"mistral-nemo", "mistral"}, {"glm4.6", "glm-4.6"},
               {"kimi-k2-instruct", "kimi-k2"}, {"harmony", "gpt-oss"}, {NULL, NULL}};

const char *df_chat_builtin_template(const char *name) {
    if (!name) return NULL;
    for (int i = 0; ALIASES[i].alias; i++)
        if (!strcmp(name, ALIASES[i].alias)) name = ALIASES[i].name;
    for (int i = 0; i < df_chat_n_builtins; i++)
        if (!strcmp(df_chat_builtins[i].name, name)) return df_chat_builtins[i].source;
    return NULL;
}

const char *const *df_chat_builtin_names(void) {
    static const char *const names[] = {"kimi-k3", "kimi-k2", "kimi-k2-base", "deepseek-v3", "qwen3",
                                        "qwen3-coder", "gpt-oss", "llama3", "mistral", "glm-4.6",
                                        "chatml", NULL};
    return names;
}

const char *df_chat_detect(const char *t) {
    if (!t) return NULL;
    for (int i = 0; i < df_chat_n_builtins; i++)
        if (!strcmp(df_chat_builtins[i].source, t)) return df_chat_builtins[i].name;
    if (strstr(t, "<|open|>") && strstr(t, "<|end_of_msg|>")) return "kimi-k3";
    if (strstr(t, "<|im_middle|>")) return strstr(t, "render_content") ? "kimi-k2" : "kimi-k2-base";
    if (strstr(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>")) return "deepseek-v3";
    if (strstr(t, "<|start|>") && strstr(t, "<|channel|>")) return "gpt-oss";
    if (strstr(t, "<|start_header_id|>")) return "llama3";
    if (strstr(t, "[gMASK]")) return "glm-4.6";
    if (strstr(t, "[INST]")) return "mistral";
    if (strstr(t, "<|im_start|>")) {
        if (strstr(t, "<function=")) return "qwen3-coder";
        if (strstr(t, "<think>") || strstr(t, "enable_thinking")) return "qwen3";
        return "chatml";
    }
    return NULL;
}

int df_chat_msgs_to_json(const deltafin_chat_msg *msgs, int n, char **out) {
    if (!out || n < 0 || (n > 0 && !msgs)) return df_err(DF_ERR_INVALID, "df_chat_msgs_to_json: bad arguments");
    *out = NULL;
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return df_err(DF_ERR_NOMEM, "df_chat_msgs_to_json: out of memory");
    for (int i = 0; i < n; i++) {
        const deltafin_chat_msg *m = &msgs[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) goto nomem;
        cJSON_AddItemToArray(arr, o);
        if (!m->role) {
            cJSON_Delete(arr);
            return df_err(DF_ERR_INVALID, "chat message %d has no role", i);
        }
        if (!cJSON_AddStringToObject(o, "role", m->role)) goto nomem;
        if (m->content ? !cJSON_AddStringToObject(o, "content", m->content) : !cJSON_AddNullToObject(o, "content"))
            goto nomem;
        if (m->tool_calls_json) {
            cJSON *tc = cJSON_Parse(m->tool_calls_json);
            if (!tc) {
                cJSON_Delete(arr);
                return df_err(DF_ERR_FORMAT, "chat message %d: tool_calls is not valid JSON", i);
            }
            /* OpenAI sends function.arguments as a JSON string; HF templates expect a mapping
             * (they iterate it or tojson it). Parse strings that hold a JSON object. */
            cJSON *call;
            cJSON_ArrayForEach(call, tc) {
                cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
                cJSON *args = fn ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
                if (args && cJSON_IsString(args)) {
                    cJSON *obj = cJSON_Parse(args->valuestring);
                    if (obj && cJSON_IsObject(obj)) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
                    else cJSON_Delete(obj);
                }
            }
            cJSON_AddItemToObject(o, "tool_calls", tc);
        }
        if (m->tool_call_id && !cJSON_AddStringToObject(o, "tool_call_id", m->tool_call_id)) goto nomem;
        if (m->name && !cJSON_AddStringToObject(o, "name", m->name)) goto nomem;
    }
    *out = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    if (!*out) return df_err(DF_ERR_NOMEM, "df_chat_msgs_to_json: out of memory");
    return DF_OK;
nomem:
    cJSON_Delete(arr);
    return df_err(DF_ERR_NOMEM, "df_chat_msgs_to_json: out of memory");
}

int df_chat_render_msgs(const char *template_src, const char *template_name,
                        const deltafin_chat_msg *msgs, int n, const char *tools_json,
                        bool add_generation_prompt, const char *bos_token, const char *eos_token,
                        const char *extra_vars_json, char **out) {
    if (!out) return df_err(DF_ERR_INVALID, "df_chat_render_msgs: NULL out");
    *out = NULL;
    const char *src = template_src;
    if (template_name) {
        src = df_chat_builtin_template(template_name);
        if (!src) return df_err(DF_ERR_NOTFOUND, "unknown chat template name '%s'", template_name);
    }
    if (!src || !*src) src = df_chat_builtin_template("chatml");
    char *js = NULL;
    int rc = df_chat_msgs_to_json(msgs, n, &js);
    if (rc) return rc;
    df_chat_opts o = {0};
    o.add_generation_prompt = add_generation_prompt;
    o.bos_token = bos_token;
    o.eos_token = eos_token;
    o.tools_json = tools_json;
    o.extra_vars_json = extra_vars_json;
    rc = df_chat_render_ex(src, js, &o, out);
    free(js);
    return rc;
}
