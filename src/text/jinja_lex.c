/* jinja_lex.c — template source -> tokens, with jinja2's whitespace control as Hugging Face
 * configures it (trim_blocks, lstrip_blocks; '-' and '+' modifiers; {% raw %}; comments).
 * Text between tags is one T_TEXT token; inside a tag: names, strings (Python escapes),
 * numbers, operators, with bracket balance checked. Errors name line:col (code points). */
#include <ctype.h>
#include <errno.h>

#include "text/jinja_impl.h"

typedef struct {
    jx *J;
    const char *s;
    size_t n;
    size_t cur;          /* scan position */
    bool line_starting;  /* only whitespace since the last newline (for lstrip_blocks) */
    size_t pos;          /* mktok's line tracking: offset of (line, line_start) */
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
    *col = (int)u8_count(s + ls, off - ls) + 1;
}

static _Noreturn void lx_fail(lexer *L, size_t off, const char *msg) {
    int line, col;
    pos_of(L->s, off, &line, &col);
    jfail(L->J, DF_ERR_FORMAT, line, col, "%s", msg);
}


/* Python-style rstrip of all whitespace */
static size_t rstrip_len(const char *s, size_t n) {
    while (n > 0) {
        uint32_t cp;
        int l = u8_prev(s, n, &cp);
        if (!is_py_space(cp)) break;
        n -= (size_t)l;
    }
    return n;
}
static size_t lstrip_off(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = u8_next(s + i, n - i, &cp);
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
            sb_put(J, &b, tmp, (size_t)df_utf8_encode(cp, tmp));
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < end && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[++i] - '0');
                sb_put(J, &b, tmp, (size_t)df_utf8_encode(cp, tmp));
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
    col = (int)u8_count(L->s + L->line_start, off - L->line_start) + 1;
    k.line = line;
    k.col = col;
    return k;
}


/* Text before the tag at `start` (kind '{', '%', '#' or -1 at the end), after this tag's '-'
 * (rstrip) or lstrip_blocks, as one T_TEXT token. (A previous tag's '-' was applied when
 * that tag ended.) */
static void lex_text(lexer *L, size_t start, int kind, char sign) {
    const char *s = L->s;
    size_t tb = L->cur, te = start;
    if (kind >= 0) {
        if (sign == '-') {
            te = tb + rstrip_len(s + tb, te - tb);
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks */
            size_t lp = te;
            while (lp > tb && s[lp - 1] != '\n') lp--;
            if (lp > tb || L->line_starting) {
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
}

/* {# ... #}: p is after the opener */
static void lex_comment(lexer *L, size_t start, size_t p) {
    const char *s = L->s;
    size_t n = L->n, e = p;
    while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
    if (e + 1 >= n) lx_fail(L, start, "missing end of comment tag '#}'");
    char es = e > p ? s[e - 1] : 0;
    size_t pos = e + 2;
    if (es == '-') {
        /* jinja: -#}\s* — consumed whitespace decides line_starting */
        size_t q = pos + lstrip_off(s + pos, n - pos);
        L->line_starting = q > pos ? s[q - 1] == '\n' : false;
        pos = q;
    } else if (es != '+' && pos < n && s[pos] == '\n') {
        pos++;
        L->line_starting = true;
    } else {
        L->line_starting = false;
    }
    L->cur = pos;
}

/* The end of the body of {% raw %} (whose tag ends at q): finds {%[-+]? endraw [-+]?%},
 * sets *body_end (after its whitespace control); returns the position after it, 0 if none. */
static size_t find_endraw(lexer *L, size_t q, size_t *body_end) {
    const char *s = L->s;
    size_t n = L->n;
    for (size_t r = q; r + 1 < n; r++) {
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
        *body_end = r;
        if (sg == '-') *body_end = q + rstrip_len(s + q, r - q);
        else if (sg != '+') { /* lstrip_blocks before {% endraw %} */
            size_t lp = r;
            while (lp > q && s[lp - 1] != '\n') lp--;
            bool allws = true;
            for (size_t k = lp; k < r; k++)
                if (!is_ws(s[k])) { allws = false; break; }
            if (allws && (lp > q || s[lp - 1] == '\n')) *body_end = lp;
        }
        if (eg == '-') t += lstrip_off(s + t, n - t);
        else if (eg != '+' && t < n && s[t] == '\n') t++;
        return t;
    }
    return 0;
}

/* {% raw %} ... {% endraw %}: verbatim text. Returns false if the tag at p is not raw. */
static bool lex_raw(lexer *L, size_t start, size_t p) {
    const char *s = L->s;
    size_t n = L->n, q = p;
    while (q < n && is_ws(s[q])) q++;
    if (!(n - q >= 3 && !memcmp(s + q, "raw", 3) && (q + 3 >= n || !(isalnum((unsigned char)s[q + 3]) || s[q + 3] == '_'))))
        return false;
    q += 3;
    while (q < n && is_ws(s[q])) q++;
    bool strip_after = false;
    if (q < n && s[q] == '-') { strip_after = true; q++; }
    else if (q < n && s[q] == '+') q++;
    if (q + 1 >= n || s[q] != '%' || s[q + 1] != '}') lx_fail(L, start, "malformed {% raw %} tag");
    q += 2;
    if (strip_after) q += lstrip_off(s + q, n - q); /* no trim_blocks after raw (as jinja2) */
    size_t body_end = 0, after = find_endraw(L, q, &body_end);
    if (!after) lx_fail(L, start, "missing {% endraw %}");
    if (body_end > q) {
        tok tt = mktok(L, T_TEXT, q);
        tt.s = jstr_new(L->J, s + q, body_end - q);
        lx_push(L, tt);
    }
    L->cur = after;
    L->line_starting = s[after - 1] == '\n';
    return true;
}

/* A number literal at p (a digit): pushes T_INT / T_FLOAT, returns the end. */
static size_t lex_number(lexer *L, size_t p) {
    const char *s = L->s;
    size_t n = L->n, q = p;
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
    return q;
}

/* An operator at p (with bracket balance in bal[0..*nb)): pushes T_OP, returns its end. */
static size_t lex_op(lexer *L, size_t p, char *bal, int *nb, int bal_cap) {
    const char *s = L->s;
    size_t n = L->n;
    char c = s[p];
    int ol = 0;
    for (int i = 0; OPS2[i]; i++)
        if (p + 1 < n && s[p] == OPS2[i][0] && s[p + 1] == OPS2[i][1]) { ol = 2; break; }
    if (!ol && strchr(OPS1, c) && c) ol = 1;
    if (!ol) lx_fail(L, p, "unexpected character in tag");
    if (ol == 1) {
        if (c == '(' || c == '[' || c == '{') {
            if (*nb >= bal_cap) lx_fail(L, p, "brackets nested too deeply");
            bal[(*nb)++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (c == ')' || c == ']' || c == '}') {
            if (*nb == 0 || bal[*nb - 1] != c) lx_fail(L, p, "unbalanced bracket");
            (*nb)--;
        }
    }
    tok t = mktok(L, T_OP, p);
    t.s = jstr_new(L->J, s + p, (size_t)ol);
    lx_push(L, t);
    return p + (size_t)ol;
}

/* The tokens of a {{ }} or {% %} tag from p (after the opener) through its end marker. */
static void lex_tag(lexer *L, size_t start, size_t p, bool is_var) {
    const char *s = L->s;
    size_t n = L->n;
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
                size_t pos = q + 2;
                if (es == '-') {
                    size_t r = pos + lstrip_off(s + pos, n - pos);
                    L->line_starting = r > pos ? s[r - 1] == '\n' : false;
                    pos = r;
                } else if (!is_var && es != '+' && pos < n && s[pos] == '\n') {
                    pos++;
                    L->line_starting = true;
                } else {
                    L->line_starting = false;
                }
                L->cur = pos;
                return;
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
        } else if (c >= '0' && c <= '9') {
            p = lex_number(L, p);
        } else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            size_t q = p;
            while (q < n && (s[q] == '_' || (s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z') ||
                             (s[q] >= '0' && s[q] <= '9')))
                q++;
            tok t = mktok(L, T_NAME, p);
            t.s = jstr_new(L->J, s + p, q - p);
            lx_push(L, t);
            p = q;
        } else {
            p = lex_op(L, p, bal, &nb, (int)sizeof bal);
        }
    }
}

tok *df_jinja_lex(jx *J, const char *src, size_t n, int *ntok) {
    lexer Lx = {.J = J, .s = src, .n = n, .line = 1, .line_starting = true};
    lexer *L = &Lx;
    const char *s = src;
    while (L->cur <= n) {
        /* find next tag opener */
        size_t start = L->cur;
        int kind = -1;
        while (start + 1 < n) {
            if (s[start] == '{' && (s[start + 1] == '{' || s[start + 1] == '%' || s[start + 1] == '#')) {
                kind = s[start + 1];
                break;
            }
            start++;
        }
        if (kind < 0) start = n;
        char sign = 0;
        if (kind >= 0 && start + 2 < n && (s[start + 2] == '-' || s[start + 2] == '+')) sign = s[start + 2];
        lex_text(L, start, kind, sign);
        if (kind < 0) break;
        size_t p = start + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            lex_comment(L, start, p);
            continue;
        }
        if (kind == '%' && lex_raw(L, start, p)) continue;
        lex_tag(L, start, p, kind == '{');
    }
    lx_push(L, mktok(L, T_EOF, n));
    *ntok = L->nt;
    return L->v;
}
