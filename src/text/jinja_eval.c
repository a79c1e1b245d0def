/* jinja_eval.c — the evaluator: scopes, attribute / item access, calls (macros, global
 * functions, bound methods), Python's binary operators (int overflow -> float as in Python's
 * unbounded ints where it matters, str % formatting, Markup escaping on +), expressions and
 * statements (if, for with loop.*, set / block set, macro, with, break / continue).
 * Every node evaluated counts one step (max_steps) and one C stack frame (EVAL_DEPTH_LIMIT). */
#include <math.h>

#include "text/jinja_impl.h"

_Noreturn void rt_fail(ev *E, node *x, const char *fmt, ...) {
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

scope *scope_new(ev *E, scope *parent) {
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

static jval mk_method(ev *E, jval self, const method_def *def) {
    method *m = amalloc(E->J, sizeof(method));
    m->self = self;
    m->def = def;
    jval v = {.t = V_METHOD};
    v.bm = m;
    return v;
}

jval get_attr(ev *E, node *at, jval obj, const char *name) {
    if (obj.t == V_UNDEF) {
        char w[128];
        snprintf(w, sizeof w, "accessing attribute '%s'", name);
        undef_fail(E, at, obj, w);
    }
    const method_def *m = find_method(obj, name);
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
                const method_def *m = find_method(obj, key.s->s);
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

/* --- call arguments ----------------------------------------------------------------------- */

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
bool arg(const args_t *a, int idx, const char *kw, jval *out) {
    if (idx >= 0 && idx < a->npos) { *out = a->pos[idx]; return true; }
    if (kw)
        for (int i = 0; i < a->nkw; i++)
            if (!strcmp(a->kwn[i]->s, kw)) { *out = a->kwv[i]; return true; }
    return false;
}
jval arg_or(const args_t *a, int idx, const char *kw, jval dflt) {
    jval v;
    return arg(a, idx, kw, &v) ? v : dflt;
}
jstr *arg_str(ev *E, node *at, const args_t *a, int idx, const char *kw, const char *what) {
    jval v;
    if (!arg(a, idx, kw, &v)) rt_fail(E, at, "%s: missing argument", what);
    if (v.t != V_STR) rt_fail(E, at, "%s: expected a string argument, got %s", what, type_name(v));
    return v.s;
}

/* --- macros -------------------------------------------------------------------------------- */

jval call_macro(ev *E, node *at, macro *m, const args_t *a) {
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

static jval call_value(ev *E, node *at, jval f, const args_t *a) {
    switch (f.t) {
    case V_MACRO: return call_macro(E, at, f.m, a);
    case V_FUNC: return call_function(E, at, f.fn, a);
    case V_METHOD: return call_method(E, at, f.bm->self, f.bm->def, a);
    case V_UNDEF: undef_fail(E, at, f, "called as a function");
    default: rt_fail(E, at, "'%s' object is not callable", type_name(f));
    }
}


/* --- binary operators ---------------------------------------------------------------------- */

static jval html_escape_str(ev *E, jval s) {
    args_t none = {0};
    return apply_filter(E, NULL, "escape", s, &none);
}

/* str % value-or-tuple: printf-style %s %r %d %i %x %X %o %f %e %E %g %G (flags, width,
 * precision) and %% */
static jval percent_format(ev *E, node *at, jval a, jval b) {
    jx *J = E->J;
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

/* int / float arithmetic (bools count as ints) */
static jval num_binop(ev *E, node *at, int op, jval a, jval b) {
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

jval binop(ev *E, node *at, int op, jval a, jval b) {
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
    if (op == OP_MOD && a.t == V_STR) return percent_format(E, at, a, b);
    return num_binop(E, at, op, a, b);
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
jval eval(ev *E, scope *S, node *x) {
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
            const method_def *m = self.t != V_UNDEF ? find_method(self, x->a->s->s) : NULL;
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

int exec_body(ev *E, scope *S, node *body) {
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

