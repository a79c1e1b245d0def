/* gbnf.c — the GBNF parser: source text -> df_gbnf (rules as element arrays, gbnf.h).
 * Same language and the same rewrites as llama.cpp's parser (src/llama-grammar.cpp there):
 * a group becomes a helper rule, S{m,n} becomes m copies of S then a chain of n-m optional
 * helper rules, S{m,} m copies then a recursive helper, * + ? are {0,} {1,} {0,1}.
 * Invariant: every failure longjmps to df_gbnf_parse with a message naming line:column; all
 * memory of a failed parse is freed there. Threading: reentrant. */
#include "text/gbnf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define MAX_REPETITION 2000

typedef struct {
    df_gelem *e;
    int n, cap;
    bool defined;
} rvec;

#define MAX_NESTING 256

typedef struct {
    const char *src;
    rvec pend[MAX_NESTING + 2]; /* rules being built by the nested parse_alternates calls */
    int n_pend;
    df_gelem *tmp;   /* repeat()'s copy of the repeated item */
    rvec tmp_rule;   /* repeat()'s helper rule being built */
    rvec *rules;     /* by rule id */
    char **names;    /* by rule id */
    int n_rules, cap_rules;
    df_gbnf_token_fn tok;
    void *tok_ud;
    jmp_buf jb;
    int status;
    char err[200];
    df_gbnf *g;      /* the result being assembled (freed if the parse fails) */
    uint8_t *st;     /* left-recursion marks */
} gp;

static _Noreturn void fail(gp *p, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void fail(gp *p, const char *at, const char *fmt, ...) {
    int line = 1, col = 1;
    if (at)
        for (const char *s = p->src; s < at && *s; s++) {
            if (*s == '\n') { line++; col = 1; }
            else col++;
        }
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at) snprintf(p->err, sizeof p->err, "grammar %d:%d: %s", line, col, msg);
    else snprintf(p->err, sizeof p->err, "grammar: %s", msg);
    if (!p->status) p->status = DF_ERR_FORMAT;
    longjmp(p->jb, 1);
}

static void *xrealloc(gp *p, void *ptr, size_t n) {
    void *q = realloc(ptr, n ? n : 1);
    if (!q) { p->status = DF_ERR_NOMEM; fail(p, NULL, "out of memory"); }
    return q;
}

static void push(gp *p, rvec *r, uint32_t type, uint32_t value) {
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->e = xrealloc(p, r->e, sizeof(df_gelem) * (size_t)r->cap);
    }
    r->e[r->n].type = type;
    r->e[r->n].value = value;
    r->n++;
}

static void append(gp *p, rvec *r, const df_gelem *e, int n) {
    for (int i = 0; i < n; i++) push(p, r, e[i].type, e[i].value);
}

/* id of a rule name, creating it (undefined) when new */
static int symbol(gp *p, const char *s, size_t n) {
    for (int i = 0; i < p->n_rules; i++)
        if (strlen(p->names[i]) == n && !memcmp(p->names[i], s, n)) return i;
    if (p->n_rules == p->cap_rules) {
        p->cap_rules = p->cap_rules ? p->cap_rules * 2 : 32;
        p->rules = xrealloc(p, p->rules, sizeof(rvec) * (size_t)p->cap_rules);
        p->names = xrealloc(p, p->names, sizeof(char *) * (size_t)p->cap_rules);
    }
    char *nm = malloc(n + 1);
    if (!nm) { p->status = DF_ERR_NOMEM; fail(p, NULL, "out of memory"); }
    memcpy(nm, s, n);
    nm[n] = 0;
    memset(&p->rules[p->n_rules], 0, sizeof(rvec));
    p->names[p->n_rules] = nm;
    return p->n_rules++;
}

/* a fresh helper rule named base_ID */
static int helper(gp *p, const char *base) {
    char nm[128];
    snprintf(nm, sizeof nm, "%.100s_%d", base, p->n_rules);
    return symbol(p, nm, strlen(nm));
}

static void define(gp *p, int id, rvec *r) {
    /* the rule table may have grown since r was filled: copy by value */
    rvec v = *r;
    v.defined = true;
    free(p->rules[id].e);
    p->rules[id] = v;
}

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}
static bool digit(char c) { return c >= '0' && c <= '9'; }

static const char *space(const char *s, bool newline_ok) {
    for (;;) {
        if (*s == ' ' || *s == '\t') s++;
        else if (*s == '#') { while (*s && *s != '\n' && *s != '\r') s++; }
        else if (newline_ok && (*s == '\n' || *s == '\r')) s++;
        else return s;
    }
}

static const char *name_end(gp *p, const char *s) {
    const char *e = s;
    while (word_char(*e)) e++;
    if (e == s) fail(p, s, "expecting a rule name");
    return e;
}

static uint64_t parse_uint(gp *p, const char **s) {
    const char *q = *s;
    if (!digit(*q)) fail(p, q, "expecting an integer");
    uint64_t v = 0;
    while (digit(*q)) {
        if (v > (UINT64_MAX - 9) / 10) fail(p, *s, "integer too large");
        v = v * 10 + (uint64_t)(*q - '0');
        q++;
    }
    *s = q;
    return v;
}

static uint32_t hex(gp *p, const char **s, int n) {
    uint32_t v = 0;
    const char *q = *s;
    for (int i = 0; i < n; i++, q++) {
        char c = *q;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) fail(p, *s, "expecting %d hex digits", n);
        v = v * 16 + (uint32_t)d;
    }
    *s = q;
    return v;
}

/* one character of a literal or class: an escape or one UTF-8 sequence (lenient, as llama.cpp:
 * a truncated sequence takes what is there) */
static uint32_t parse_char(gp *p, const char **s) {
    const unsigned char *q = (const unsigned char *)*s;
    if (!*q) fail(p, *s, "unexpected end of input");
    if (*q == '\\') {
        const char *r = (const char *)q + 2;
        uint32_t v;
        switch (q[1]) {
        case 'x': v = hex(p, &r, 2); break;
        case 'u': v = hex(p, &r, 4); break;
        case 'U': v = hex(p, &r, 8); break;
        case 't': v = '\t'; break;
        case 'r': v = '\r'; break;
        case 'n': v = '\n'; break;
        case '\\': case '"': case '[': case ']': v = q[1]; break;
        default: fail(p, *s, "unknown escape '\\%c'", q[1] ? q[1] : '0');
        }
        *s = r;
        return v;
    }
    int len = *q < 0x80 ? 1 : *q < 0xC0 ? 1 : *q < 0xE0 ? 2 : *q < 0xF0 ? 3 : 4;
    uint32_t v = len == 1 ? *q : (uint32_t)(*q & (0x7F >> len));
    int i = 1;
    for (; i < len && q[i]; i++) v = (v << 6) | (q[i] & 0x3F);
    *s = (const char *)q + i;
    return v;
}

static const char *parse_alternates(gp *p, const char *s, const char *rule_name, int rule_id, bool nested);

typedef struct {
    rvec *r;
    int last_start;        /* start of the last symbol in r (r->n: none) */
    uint64_t n_prev_rules; /* helper rules the last symbol stands for (the blow-up check) */
} seqst;

static void repeat(gp *p, const char *at, seqst *q, const char *rule_name, uint64_t min, uint64_t max) {
    rvec *r = q->r;
    bool no_max = max == UINT64_MAX;
    if (q->last_start >= r->n) fail(p, at, "expecting an item before */+/?/{");
    uint64_t total = !no_max && max > 0 ? max : min > 0 ? min : 1;
    if (q->n_prev_rules * total >= MAX_REPETITION)
        fail(p, at, "the repetition makes too many rules (reduce the count or the repeated item)");
    int plen = r->n - q->last_start;
    df_gelem *prev = p->tmp = xrealloc(p, NULL, sizeof(df_gelem) * (size_t)plen);
    memcpy(prev, r->e + q->last_start, sizeof(df_gelem) * (size_t)plen);
    if (min == 0) r->n = q->last_start;
    else
        for (uint64_t i = 1; i < min; i++) append(p, r, prev, plen);
    uint64_t n_opt = no_max ? 1 : max - min;
    int last_id = 0;
    for (uint64_t i = 0; i < n_opt; i++) {
        int id = helper(p, rule_name);
        rvec *rr = &p->tmp_rule;
        memset(rr, 0, sizeof *rr);
        append(p, rr, prev, plen);
        if (i > 0 || no_max) push(p, rr, DF_GE_RULE_REF, (uint32_t)(no_max ? id : last_id));
        push(p, rr, DF_GE_ALT, 0);
        push(p, rr, DF_GE_END, 0);
        define(p, id, rr);
        memset(rr, 0, sizeof *rr);
        last_id = id;
    }
    free(prev);
    p->tmp = NULL;
    if (n_opt > 0) push(p, r, DF_GE_RULE_REF, (uint32_t)last_id);
    q->n_prev_rules *= total;
}

static const char *parse_sequence(gp *p, const char *s, const char *rule_name, rvec *r, bool nested) {
    seqst q = {.r = r, .last_start = r->n, .n_prev_rules = 1};
    while (*s) {
        if (*s == '"') {
            s++;
            q.last_start = r->n;
            q.n_prev_rules = 1;
            while (*s != '"') {
                if (!*s) fail(p, s, "unterminated string literal");
                push(p, r, DF_GE_CHAR, parse_char(p, &s));
            }
            s = space(s + 1, nested);
        } else if (*s == '[') {
            s++;
            uint32_t first = DF_GE_CHAR;
            if (*s == '^') { s++; first = DF_GE_CHAR_NOT; }
            q.last_start = r->n;
            q.n_prev_rules = 1;
            while (*s != ']') {
                if (!*s) fail(p, s, "unterminated character class");
                uint32_t c = parse_char(p, &s);
                push(p, r, q.last_start < r->n ? DF_GE_CHAR_ALT : first, c);
                if (s[0] == '-' && s[1] != ']') {
                    if (!s[1]) fail(p, s, "unterminated character class");
                    s++;
                    push(p, r, DF_GE_CHAR_RNG_UPPER, parse_char(p, &s));
                }
            }
            s = space(s + 1, nested);
        } else if (*s == '<' || *s == '!') {
            uint32_t type = DF_GE_TOKEN;
            const char *at = s;
            if (*s == '!') { type = DF_GE_TOKEN_NOT; s++; }
            if (*s != '<') fail(p, s, "expecting '<' after '!'");
            uint32_t id;
            if (s[1] == '[') {
                const char *t = s + 2;
                uint64_t v = parse_uint(p, &t);
                if (v > INT32_MAX) fail(p, s, "token id too large");
                if (*t != ']' || t[1] != '>') fail(p, t, "expecting ']>'");
                id = (uint32_t)v;
                s = t + 2;
            } else {
                const char *t = s + 1;
                while (*t && *t != '>') t++;
                if (*t != '>') fail(p, t, "expecting '>'");
                t++;
                if (!p->tok) fail(p, at, "token '%.*s' needs a vocabulary", (int)(t - s > 60 ? 60 : t - s), s);
                int32_t v = p->tok(p->tok_ud, s, (size_t)(t - s));
                if (v < 0) fail(p, at, "'%.*s' is not exactly one token", (int)(t - s > 60 ? 60 : t - s), s);
                id = (uint32_t)v;
                s = t;
            }
            q.last_start = r->n;
            q.n_prev_rules = 1;
            push(p, r, type, id);
            s = space(s, nested);
        } else if (word_char(*s)) {
            const char *e = name_end(p, s);
            int id = symbol(p, s, (size_t)(e - s));
            s = space(e, nested);
            q.last_start = r->n;
            q.n_prev_rules = 1;
            push(p, r, DF_GE_RULE_REF, (uint32_t)id);
        } else if (*s == '(') {
            if (p->n_pend >= MAX_NESTING) fail(p, s, "groups nested more than %d deep", MAX_NESTING);
            s = space(s + 1, true);
            int before = p->n_rules;
            int id = helper(p, rule_name);
            s = parse_alternates(p, s, rule_name, id, true);
            q.n_prev_rules = p->n_rules - before > 1 ? (uint64_t)(p->n_rules - before) : 1;
            q.last_start = r->n;
            push(p, r, DF_GE_RULE_REF, (uint32_t)id);
            if (*s != ')') fail(p, s, "expecting ')'");
            s = space(s + 1, nested);
        } else if (*s == '.') {
            q.last_start = r->n;
            q.n_prev_rules = 1;
            push(p, r, DF_GE_CHAR_ANY, 0);
            s = space(s + 1, nested);
        } else if (*s == '*' || *s == '+' || *s == '?') {
            const char *at = s;
            char c = *s;
            s = space(s + 1, nested);
            repeat(p, at, &q, rule_name, c == '+' ? 1 : 0, c == '?' ? 1 : UINT64_MAX);
        } else if (*s == '{') {
            const char *at = s;
            s = space(s + 1, nested);
            uint64_t min = parse_uint(p, &s), max = UINT64_MAX;
            s = space(s, nested);
            if (*s == '}') {
                max = min;
                s = space(s + 1, nested);
            } else if (*s == ',') {
                s = space(s + 1, nested);
                if (digit(*s)) {
                    max = parse_uint(p, &s);
                    s = space(s, nested);
                }
                if (*s != '}') fail(p, s, "expecting '}'");
                s = space(s + 1, nested);
            } else {
                fail(p, s, "expecting ',' or '}'");
            }
            if (min > MAX_REPETITION) fail(p, at, "more than %d repetitions", MAX_REPETITION);
            if (max != UINT64_MAX && max > MAX_REPETITION) max = UINT64_MAX;
            if (max < min) fail(p, at, "repetition {%llu,%llu}: the maximum is below the minimum",
                                (unsigned long long)min, (unsigned long long)max);
            repeat(p, at, &q, rule_name, min, max);
        } else {
            break;
        }
    }
    return s;
}

static const char *parse_alternates(gp *p, const char *s, const char *rule_name, int rule_id, bool nested) {
    /* the rule under construction lives in the parser (a failed parse frees it there) */
    rvec *r = &p->pend[p->n_pend++];
    memset(r, 0, sizeof *r);
    s = parse_sequence(p, s, rule_name, r, nested);
    while (*s == '|') {
        push(p, r, DF_GE_ALT, 0);
        s = space(s + 1, true);
        s = parse_sequence(p, s, rule_name, r, nested);
    }
    push(p, r, DF_GE_END, 0);
    define(p, rule_id, r);
    memset(r, 0, sizeof *r);
    p->n_pend--;
    return s;
}

static const char *parse_rule(gp *p, const char *s) {
    const char *e = name_end(p, s);
    char nm[128];
    size_t nl = (size_t)(e - s);
    if (nl >= sizeof nm) fail(p, s, "rule name too long");
    memcpy(nm, s, nl);
    nm[nl] = 0;
    int id = symbol(p, s, nl);
    const char *q = space(e, false);
    if (strncmp(q, "::=", 3)) fail(p, q, "expecting '::='");
    q = space(q + 3, true);
    q = parse_alternates(p, q, nm, id, false);
    if (*q == '\r') q += q[1] == '\n' ? 2 : 1;
    else if (*q == '\n') q++;
    else if (*q) fail(p, q, "expecting a newline or the end after the rule");
    return space(q, true);
}

/* ---- checks ---------------------------------------------------------------------------- */

static bool eos(const df_gelem *e) { return e->type == DF_GE_END || e->type == DF_GE_ALT; }

/* left recursion: a rule reachable from itself through leftmost symbols (skipping rules that
 * may be empty). state: 0 unvisited, 1 in progress, 2 done; may_be_empty per rule. */
static bool left_rec(const gp *p, int r, uint8_t *state, uint8_t *empty, int depth) {
    if (state[r] == 1) return true;
    if (state[r] == 2) return false;
    if (depth > 10000) return true; /* reported as left recursion: no real grammar is that deep */
    state[r] = 1;
    const rvec *v = &p->rules[r];
    bool at_start = true;
    for (int i = 0; i < v->n; i++) {
        if (eos(&v->e[i])) {
            if (at_start) { empty[r] = 1; break; }
            at_start = true;
        } else {
            at_start = false;
        }
    }
    bool leftmost = true;
    for (int i = 0; i < v->n; i++) {
        const df_gelem *e = &v->e[i];
        if (e->type == DF_GE_RULE_REF && leftmost) {
            if (left_rec(p, (int)e->value, state, empty, depth + 1)) return true;
            if (!empty[e->value]) leftmost = false;
        } else if (eos(e)) {
            leftmost = true;
        } else {
            leftmost = false;
        }
    }
    state[r] = 2;
    return false;
}

static void parser_free(gp *p) {
    for (int i = 0; i < p->n_pend; i++) free(p->pend[i].e);
    free(p->tmp);
    free(p->tmp_rule.e);
    for (int i = 0; i < p->n_rules; i++) {
        free(p->rules[i].e);
        free(p->names[i]);
    }
    free(p->rules);
    free(p->names);
}

static void assemble(gp *p, const char *root) {
    const char *s = space(p->src, true);
    while (*s) s = parse_rule(p, s);
    if (p->n_rules == 0) fail(p, NULL, "no rules");
    for (int i = 0; i < p->n_rules; i++)
        if (!p->rules[i].defined) fail(p, NULL, "undefined rule '%.80s'", p->names[i]);
    int rid = -1;
    for (int i = 0; i < p->n_rules; i++)
        if (!strcmp(p->names[i], root)) rid = i;
    if (rid < 0) fail(p, NULL, "no rule named '%.80s' (the start rule)", root);
    p->st = calloc((size_t)p->n_rules * 2, 1);
    if (!p->st) { p->status = DF_ERR_NOMEM; fail(p, NULL, "out of memory"); }
    for (int i = 0; i < p->n_rules; i++)
        if (left_rec(p, i, p->st, p->st + p->n_rules, 0))
            fail(p, NULL, "left recursion in rule '%.80s' (not supported)", p->names[i]);
    /* flatten */
    df_gbnf *g = p->g = calloc(1, sizeof *g);
    if (!g) { p->status = DF_ERR_NOMEM; fail(p, NULL, "out of memory"); }
    int total = 0;
    for (int i = 0; i < p->n_rules; i++) total += p->rules[i].n;
    g->el = malloc(sizeof(df_gelem) * (size_t)total);
    g->rule_off = malloc(sizeof(int32_t) * (size_t)p->n_rules);
    if (!g->el || !g->rule_off) { p->status = DF_ERR_NOMEM; fail(p, NULL, "out of memory"); }
    int k = 0;
    for (int i = 0; i < p->n_rules; i++) {
        g->rule_off[i] = k;
        memcpy(g->el + k, p->rules[i].e, sizeof(df_gelem) * (size_t)p->rules[i].n);
        k += p->rules[i].n;
    }
    g->n_el = total;
    g->root = rid;
}

int df_gbnf_parse(const char *src, const char *root, df_gbnf_token_fn tok, void *ud, df_gbnf **out) {
    *out = NULL;
    if (!src) return df_err(DF_ERR_INVALID, "grammar: no text");
    gp *p = calloc(1, sizeof *p);
    if (!p) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
    p->src = src;
    p->tok = tok;
    p->tok_ud = ud;
    if (setjmp(p->jb)) {
        int rc = df_err(p->status, "%s", p->err);
        free(p->st);
        if (p->g) { free(p->g->el); free(p->g->rule_off); free(p->g); }
        parser_free(p);
        free(p);
        return rc;
    }
    assemble(p, root && *root ? root : "root");
    df_gbnf *g = p->g;
    g->n_rules = p->n_rules;
    g->names = p->names;
    for (int i = 0; i < p->n_rules; i++) free(p->rules[i].e);
    free(p->rules);
    free(p->st);
    free(p);
    *out = g;
    return DF_OK;
}

void df_gbnf_free(df_gbnf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_rules; i++) free(g->names ? g->names[i] : NULL);
    free(g->names);
    free(g->el);
    free(g->rule_off);
    free(g);
}
