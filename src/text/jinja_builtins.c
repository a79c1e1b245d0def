/* jinja_builtins.c — what templates can call: the filters (FILTERS), tests (TESTS), str /
 * list / dict methods (STR_METHODS, LIST_METHODS, DICT_METHODS) and global functions
 * (FUNCTIONS: raise_exception, namespace, range, strftime_now, dict), each a table from name
 * to function (the string algorithms they share are in jinja_values.c).
 * Deviations from jinja2 are listed in chat.h. */
#include <math.h>
#include <time.h>

#include "text/jinja_impl.h"

/* --- filters ------------------------------------------------------------------------------- */

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

static jval f_safe(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    jval s = to_str(E, v);
    jstr *r = jstr_new(J, s.s->s, s.s->len);
    r->safe = true;
    return mk_sv(r);
}

static jval f_string(ev *E, node *at, const char *name, jval v, const args_t *a) {
    if (v.t == V_STR) return v;
    return to_str(E, v);
}

static jval f_trim(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jval s = to_str(E, v);
    jval c;
    return str_strip(E, s.s, arg(a, 0, "chars", &c) && c.t == V_STR ? c.s : NULL, 3);
}

static jval f_length(ev *E, node *at, const char *name, jval v, const args_t *a) {
    return mk_int(py_len(E, at, v));
}

static jval f_tojson(ev *E, node *at, const char *name, jval v, const args_t *a) {
    return tojson_val(E, at, v, a);
}

static jval f_default(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    jval dflt = arg_or(a, 0, "default_value", mk_str(J, ""));
    bool boolean = truthy(arg_or(a, 1, "boolean", mk_bool(false)));
    if (v.t == V_UNDEF || (boolean && !truthy(v))) return dflt;
    return v;
}

static jval f_list(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    jlist *src = iter_list(E, at, v);
    jlist *l = list_new(J, src->n);
    for (int i = 0; i < src->n; i++) list_push(J, l, src->v[i]);
    return mk_list(l);
}

static jval f_first_last(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jlist *src = iter_list(E, at, v);
    if (!src->n) return undef_named(E, "no first/last item");
    return src->v[name[0] == 'f' ? 0 : src->n - 1];
}

static jval f_join(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
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

static jval f_case(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jval s = to_str(E, v);
    return str_case(E, s.s, name[0] == 'u' ? 0 : name[0] == 'l' ? 1 : name[0] == 't' ? 2 : 3);
}

static jval f_replace(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jval s = to_str(E, v);
    jstr *old = arg_str(E, at, a, 0, "old", "replace");
    jstr *nw = arg_str(E, at, a, 1, "new", "replace");
    jval c = arg_or(a, 2, "count", NONE);
    return str_replace(E, s.s, old, nw, c.t == V_INT ? c.i : -1);
}

static jval f_items(ev *E, node *at, const char *name, jval v, const args_t *a) {
    return items_of(E, at, v);
}

static jval f_dictsort(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
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

static jval f_selectattr(ev *E, node *at, const char *name, jval v, const args_t *a) {
    return filter_select(E, at, v, a, true, true);
}

static jval f_rejectattr(ev *E, node *at, const char *name, jval v, const args_t *a) {
    return filter_select(E, at, v, a, true, false);
}

static jval f_select(ev *E, node *at, const char *name, jval v, const args_t *a) {
    return filter_select(E, at, v, a, false, true);
}

static jval f_reject(ev *E, node *at, const char *name, jval v, const args_t *a) {
    return filter_select(E, at, v, a, false, false);
}

static jval f_map(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
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

static jval f_int(ev *E, node *at, const char *name, jval v, const args_t *a) {
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

static jval f_float(ev *E, node *at, const char *name, jval v, const args_t *a) {
    if (is_num(v)) return mk_float(num_f(v));
    if (v.t == V_STR) {
        char *e;
        double r = strtod(v.s->s, &e);
        if (e != v.s->s) return mk_float(r);
    }
    return arg_or(a, 0, "default", mk_float(0.0));
}

static jval f_abs(ev *E, node *at, const char *name, jval v, const args_t *a) {
    if (v.t == V_INT) return mk_int(v.i < 0 ? -v.i : v.i);
    if (v.t == V_FLOAT) return mk_float(fabs(v.f));
    rt_fail(E, at, "abs: bad operand type %s", type_name(v));
}

static jval f_unique(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    jlist *src = iter_list(E, at, v);
    jlist *out = list_new(J, src->n);
    for (int i = 0; i < src->n; i++) {
        bool dup = false;
        for (int k = 0; k < out->n && !dup; k++) dup = py_eq(out->v[k], src->v[i], 0);
        if (!dup) list_push(J, out, src->v[i]);
    }
    return mk_list(out);
}

static jval f_sort(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
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

static jval f_indent(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
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

static jval f_escape(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
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

static jval f_reverse(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    if (v.t == V_STR) {
        jval r = do_slice(E, at, v, NONE, NONE, mk_int(-1));
        return r;
    }
    jlist *src = iter_list(E, at, v);
    jlist *l = list_new(J, src->n);
    for (int i = src->n - 1; i >= 0; i--) list_push(J, l, src->v[i]);
    return mk_list(l);
}

static jval f_sum(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jlist *src = iter_list(E, at, v);
    jval attr;
    bool has_attr = arg(a, -1, "attribute", &attr) && attr.t == V_STR;
    jval acc = arg_or(a, 1, "start", mk_int(0));
    for (int i = 0; i < src->n; i++)
        acc = binop(E, at, OP_ADD, acc, has_attr ? get_attr(E, at, src->v[i], attr.s->s) : src->v[i]);
    return acc;
}

static jval f_min_max(ev *E, node *at, const char *name, jval v, const args_t *a) {
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

static jval f_round(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    jval pr = arg_or(a, 0, "precision", mk_int(0));
    jval method = arg_or(a, 1, "method", mk_str(J, "common"));
    if (!is_num(v) || pr.t != V_INT) rt_fail(E, at, "round: expected a number");
    double x = num_f(v), m = pow(10.0, (double)pr.i);
    const char *md = method.t == V_STR ? method.s->s : "common";
    double r = !strcmp(md, "ceil") ? ceil(x * m) / m : !strcmp(md, "floor") ? floor(x * m) / m : nearbyint(x * m) / m;
    return mk_float(r);
}

static jval f_attr(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jstr *nm = arg_str(E, at, a, 0, NULL, "attr");
    if (v.t == V_NS || v.t == V_DICT) {
        jval *p = dict_get(v.d, nm->s);
        if (v.t == V_NS && p) return *p;
    }
    return undef_named(E, nm->s);
}

static jval f_format(ev *E, node *at, const char *name, jval v, const args_t *a) {
    jx *J = E->J;
    jval s = to_str(E, v);
    jlist *l = list_new(J, a->npos);
    l->tuple = true;
    for (int i = 0; i < a->npos; i++) list_push(J, l, a->pos[i]);
    return binop(E, at, OP_MOD, s, mk_list(l));
}

static const struct {
    const char *name;
    jval (*fn)(ev *E, node *at, const char *name, jval v, const args_t *a);
} FILTERS[] = {
    {"safe", f_safe}, {"string", f_string}, {"trim", f_trim}, {"length", f_length},
    {"count", f_length}, {"tojson", f_tojson}, {"default", f_default}, {"d", f_default},
    {"list", f_list}, {"first", f_first_last}, {"last", f_first_last}, {"join", f_join},
    {"upper", f_case}, {"lower", f_case}, {"title", f_case}, {"capitalize", f_case},
    {"replace", f_replace}, {"items", f_items}, {"dictsort", f_dictsort},
    {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"select", f_select},
    {"reject", f_reject}, {"map", f_map}, {"int", f_int}, {"float", f_float}, {"abs", f_abs},
    {"unique", f_unique}, {"sort", f_sort}, {"indent", f_indent}, {"e", f_escape},
    {"escape", f_escape}, {"reverse", f_reverse}, {"sum", f_sum}, {"min", f_min_max},
    {"max", f_min_max}, {"round", f_round}, {"attr", f_attr}, {"format", f_format},
};

jval apply_filter(ev *E, node *at, const char *name, jval v, const args_t *a) {
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(name, FILTERS[i].name)) return FILTERS[i].fn(E, at, name, v, a);
    rt_fail(E, at, "no filter named '%s'", name);
}

/* --- tests -------------------------------------------------------------------------------- */

static bool t_defined(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t != V_UNDEF;
}

static bool t_undefined(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_UNDEF;
}

static bool t_none(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_NONE;
}

static bool t_boolean(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_BOOL;
}

static bool t_true(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_BOOL && v.b;
}

static bool t_false(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_BOOL && !v.b;
}

static bool t_integer(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_INT;
}

static bool t_float(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_FLOAT;
}

static bool t_number(ev *E, node *at, const char *name, jval v, jval x) {
    return is_num(v);
}

static bool t_string(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_STR;
}

static bool t_mapping(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_DICT;
}

static bool t_iterable(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_UNDEF || v.t == V_STR || v.t == V_LIST || v.t == V_DICT;
}

static bool t_sequence(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_UNDEF || v.t == V_STR || v.t == V_LIST || v.t == V_DICT;
}

static bool t_callable(ev *E, node *at, const char *name, jval v, jval x) {
    return v.t == V_MACRO || v.t == V_FUNC || v.t == V_METHOD;
}

static bool t_case(ev *E, node *at, const char *name, jval v, jval x) {
    if (v.t != V_STR) return false;
    jval c = str_case(E, v.s, name[0] == 'l' ? 1 : 0);
    return c.s->len == v.s->len && !memcmp(c.s->s, v.s->s, v.s->len);
}

static bool t_odd_even(ev *E, node *at, const char *name, jval v, jval x) {
    if (v.t != V_INT && v.t != V_BOOL) rt_fail(E, at, "test '%s' needs an integer", name);
    int64_t i = num_i(v);
    return ((i % 2) != 0) == (name[0] == 'o');
}

static bool t_eq(ev *E, node *at, const char *name, jval v, jval x) {
    return py_eq(v, x, 0);
}

static bool t_ne(ev *E, node *at, const char *name, jval v, jval x) {
    return !py_eq(v, x, 0);
}

static bool t_sameas(ev *E, node *at, const char *name, jval v, jval x) {
    if (v.t != x.t) return false;
    if (v.t == V_NONE || v.t == V_UNDEF) return true;
    if (v.t == V_BOOL) return v.b == x.b;
    if (v.t == V_LIST) return v.l == x.l;
    if (v.t == V_DICT || v.t == V_NS) return v.d == x.d;
    if (v.t == V_STR) return v.s == x.s;
    return py_eq(v, x, 0);
}

static bool t_lt(ev *E, node *at, const char *name, jval v, jval x) {
    return py_cmp(E, at, v, x) < 0;
}

static bool t_le(ev *E, node *at, const char *name, jval v, jval x) {
    return py_cmp(E, at, v, x) <= 0;
}

static bool t_gt(ev *E, node *at, const char *name, jval v, jval x) {
    return py_cmp(E, at, v, x) > 0;
}

static bool t_ge(ev *E, node *at, const char *name, jval v, jval x) {
    return py_cmp(E, at, v, x) >= 0;
}

static bool t_divisibleby(ev *E, node *at, const char *name, jval v, jval x) {
    if (v.t != V_INT || x.t != V_INT || x.i == 0) rt_fail(E, at, "divisibleby needs non-zero integers");
    return v.i % x.i == 0;
}

static bool t_in(ev *E, node *at, const char *name, jval v, jval x) {
    if (x.t == V_STR && v.t == V_STR) return memmem_s(x.s->s, x.s->len, v.s->s, v.s->len) != NULL;
    jlist *l = iter_list(E, at, x);
    for (int i = 0; i < l->n; i++)
        if (py_eq(l->v[i], v, 0)) return true;
    return false;
}

/* arg: 0 none, 1 needed ("test 'x' needs an argument" without), 2 needed (jinja2 reports an
 * unknown test when it is missing: the operator aliases) */
static const struct {
    const char *name;
    bool (*fn)(ev *E, node *at, const char *name, jval v, jval x);
    int arg;
} TESTS[] = {
    {"defined", t_defined, 0}, {"undefined", t_undefined, 0}, {"none", t_none, 0},
    {"boolean", t_boolean, 0}, {"true", t_true, 0}, {"false", t_false, 0},
    {"integer", t_integer, 0}, {"float", t_float, 0}, {"number", t_number, 0},
    {"string", t_string, 0}, {"mapping", t_mapping, 0}, {"iterable", t_iterable, 0},
    {"sequence", t_sequence, 0}, {"callable", t_callable, 0}, {"lower", t_case, 0},
    {"upper", t_case, 0}, {"odd", t_odd_even, 0}, {"even", t_odd_even, 0}, {"eq", t_eq, 1},
    {"equalto", t_eq, 1}, {"==", t_eq, 2}, {"ne", t_ne, 1}, {"!=", t_ne, 2},
    {"sameas", t_sameas, 1}, {"lt", t_lt, 1}, {"le", t_le, 1}, {"gt", t_gt, 1}, {"ge", t_ge, 1},
    {"divisibleby", t_divisibleby, 1}, {"in", t_in, 1},
};

bool apply_test(ev *E, node *at, const char *name, jval v, const args_t *a) {
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++) {
        if (strcmp(name, TESTS[i].name)) continue;
        jval x = UNDEF;
        if (TESTS[i].arg && !arg(a, 0, NULL, &x)) {
            if (TESTS[i].arg == 1) rt_fail(E, at, "test '%s' needs an argument", name);
            break;
        }
        return TESTS[i].fn(E, at, name, v, x);
    }
    rt_fail(E, at, "no test named '%s'", name);
}

/* --- methods ------------------------------------------------------------------------------ */

static jval m_str_starts_ends(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jstr *s = self.s;
    jval x;
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

static jval m_str_split(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    jval sep = arg_or(a, 0, "sep", NONE);
    jval mx = arg_or(a, 1, "maxsplit", mk_int(-1));
    if (sep.t != V_NONE && sep.t != V_STR) rt_fail(E, at, "split: sep must be str or None");
    if (sep.t == V_STR && sep.s->len == 0) rt_fail(E, at, "ValueError: empty separator");
    if (mx.t != V_INT) rt_fail(E, at, "split: maxsplit must be an integer");
    return str_split(E, s, sep.t == V_STR ? sep.s : NULL, mx.i, m[0] == 'r');
}

static jval m_str_strip(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    jval c = arg_or(a, 0, "chars", NONE);
    if (c.t != V_NONE && c.t != V_STR) rt_fail(E, at, "%s arg must be None or str", m);
    return str_strip(E, s, c.t == V_STR ? c.s : NULL, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
}

static jval m_str_replace(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    jstr *old = arg_str(E, at, a, 0, NULL, "replace");
    jstr *nw = arg_str(E, at, a, 1, NULL, "replace");
    jval c = arg_or(a, 2, "count", mk_int(-1));
    return str_replace(E, s, old, nw, c.t == V_INT ? c.i : -1);
}

static jval m_str_upper(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    return str_case(E, s, 0);
}

static jval m_str_lower(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    return str_case(E, s, 1);
}

static jval m_str_title(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    return str_case(E, s, 2);
}

static jval m_str_capitalize(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    return str_case(E, s, 3);
}

static jval m_str_find_count(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    jstr *sub = arg_str(E, at, a, 0, NULL, m);
    if (m[0] == 'f') {
        const char *p = memmem_s(s->s, s->len, sub->s, sub->len);
        return mk_int(p ? (int64_t)u8_count(s->s, (size_t)(p - s->s)) : -1);
    }
    if (sub->len == 0) return mk_int((int64_t)u8_count(s->s, s->len) + 1);
    int64_t c = 0;
    for (size_t i = 0; i < s->len;) {
        const char *p = memmem_s(s->s + i, s->len - i, sub->s, sub->len);
        if (!p) break;
        c++;
        i = (size_t)(p - s->s) + sub->len;
    }
    return mk_int(c);
}

static jval m_str_join(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jstr *s = self.s;
    jval x;
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

static jval m_str_splitlines(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jstr *s = self.s;
    jlist *l = list_new(J, 4);
    size_t st = 0;
    for (size_t i = 0; i < s->len; i++)
        if (s->s[i] == '\n') { list_push(J, l, mk_strn(J, s->s + st, i - st)); st = i + 1; }
    if (st < s->len) list_push(J, l, mk_strn(J, s->s + st, s->len - st));
    return mk_list(l);
}

static jval m_str_isclass(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jstr *s = self.s;
    if (!s->len) return mk_bool(false);
    for (size_t i = 0; i < s->len; i++) {
        char c = s->s[i];
        bool ok = m[2] == 'd' ? (c >= '0' && c <= '9') : m[2] == 'a' ? ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) : is_ws(c);
        if (!ok) return mk_bool(false);
    }
    return mk_bool(true);
}

static jval m_str_format(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jstr *s = self.s;
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

static jval m_list_append(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jlist *l = self.l;
    jval x;
    if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "append() takes exactly one argument");
    list_push(J, l, x);
    return NONE;
}

static jval m_list_extend(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jlist *l = self.l;
    jval x;
    if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "extend() takes exactly one argument");
    jlist *src = iter_list(E, at, x);
    int n = src->n;
    for (int i = 0; i < n; i++) list_push(J, l, src->v[i]);
    return NONE;
}

static jval m_list_pop(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jlist *l = self.l;
    jval iv = arg_or(a, 0, NULL, mk_int(-1));
    if (iv.t != V_INT) rt_fail(E, at, "pop: index must be an integer");
    int64_t i = iv.i < 0 ? iv.i + l->n : iv.i;
    if (l->n == 0 || i < 0 || i >= l->n) rt_fail(E, at, "pop index out of range");
    jval r = l->v[i];
    memmove(l->v + i, l->v + i + 1, sizeof(jval) * (size_t)(l->n - i - 1));
    l->n--;
    return r;
}

static jval m_list_insert(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jlist *l = self.l;
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

static jval m_list_search(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jlist *l = self.l;
    jval x;
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

static jval m_list_reverse(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jlist *l = self.l;
    for (int i = 0, j = l->n - 1; i < j; i++, j--) { jval t = l->v[i]; l->v[i] = l->v[j]; l->v[j] = t; }
    return NONE;
}

static jval m_list_copy(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jlist *l = self.l;
    jlist *c = list_new(J, l->n);
    for (int i = 0; i < l->n; i++) list_push(J, c, l->v[i]);
    return mk_list(c);
}

static jval m_list_clear(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jlist *l = self.l;
    l->n = 0;
    return NONE;
}

static jval m_dict_get(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jdict *d = self.d;
    jval x;
    jstr *k = NULL;
    if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "get expected at least 1 argument");
    jval dflt = arg_or(a, 1, NULL, NONE);
    (void)k;
    int i = dict_find_val(d, x);
    return i >= 0 ? d->v[i] : dflt;
}

static jval m_dict_items(ev *E, node *at, jval self, const char *m, const args_t *a) {
    return items_of(E, at, self);
}

static jval m_dict_keys_values(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jdict *d = self.d;
    jlist *l = list_new(J, d->n);
    for (int i = 0; i < d->n; i++) list_push(J, l, m[0] == 'k' ? dict_key(d, i) : d->v[i]);
    return mk_list(l);
}

static jval m_dict_pop(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jdict *d = self.d;
    jval x;
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

static jval m_dict_setdefault(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jdict *d = self.d;
    jval x;
    if (!arg(a, 0, NULL, &x)) rt_fail(E, at, "setdefault expected at least 1 argument");
    int i = dict_find_val(d, x);
    if (i >= 0) return d->v[i];
    jval dflt = arg_or(a, 1, NULL, NONE);
    dict_set_val(E, at, d, x, dflt);
    return dflt;
}

static jval m_dict_update(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jdict *d = self.d;
    jval x;
    if (arg(a, 0, NULL, &x)) {
        if (x.t != V_DICT) rt_fail(E, at, "update: expected a mapping");
        for (int i = 0; i < x.d->n; i++) dict_set_val(E, at, d, dict_key(x.d, i), x.d->v[i]);
    }
    for (int i = 0; i < a->nkw; i++) dict_set(J, d, a->kwn[i], a->kwv[i]);
    return NONE;
}

static jval m_dict_copy(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jx *J = E->J;
    jdict *d = self.d;
    jdict *c = dict_new(J);
    for (int i = 0; i < d->n; i++) dict_set_val(E, at, c, dict_key(d, i), d->v[i]);
    return mk_dict(c, V_DICT);
}

static jval m_dict_clear(ev *E, node *at, jval self, const char *m, const args_t *a) {
    jdict *d = self.d;
    d->n = 0;
    return NONE;
}

struct method_def {
    const char *name;
    jval (*fn)(ev *E, node *at, jval self, const char *m, const args_t *a);
    bool tuple_ok; /* list methods that tuples have too */
};

static const method_def STR_METHODS[] = {
    {"startswith", m_str_starts_ends, false}, {"endswith", m_str_starts_ends, false},
    {"split", m_str_split, false}, {"rsplit", m_str_split, false}, {"strip", m_str_strip, false},
    {"lstrip", m_str_strip, false}, {"rstrip", m_str_strip, false},
    {"replace", m_str_replace, false}, {"upper", m_str_upper, false}, {"lower", m_str_lower, false},
    {"title", m_str_title, false}, {"capitalize", m_str_capitalize, false},
    {"find", m_str_find_count, false}, {"count", m_str_find_count, false},
    {"join", m_str_join, false}, {"splitlines", m_str_splitlines, false},
    {"isdigit", m_str_isclass, false}, {"isalpha", m_str_isclass, false},
    {"isspace", m_str_isclass, false}, {"format", m_str_format, false}, {NULL, NULL, false},
};

static const method_def LIST_METHODS[] = {
    {"append", m_list_append, false}, {"extend", m_list_extend, false}, {"pop", m_list_pop, false},
    {"insert", m_list_insert, false}, {"remove", m_list_search, false},
    {"index", m_list_search, true}, {"count", m_list_search, true},
    {"reverse", m_list_reverse, false}, {"copy", m_list_copy, false},
    {"clear", m_list_clear, false}, {NULL, NULL, false},
};

static const method_def DICT_METHODS[] = {
    {"get", m_dict_get, false}, {"items", m_dict_items, false}, {"keys", m_dict_keys_values, false},
    {"values", m_dict_keys_values, false}, {"pop", m_dict_pop, false},
    {"setdefault", m_dict_setdefault, false}, {"update", m_dict_update, false},
    {"copy", m_dict_copy, false}, {"clear", m_dict_clear, false}, {NULL, NULL, false},
};

const method_def *find_method(jval obj, const char *name) {
    const method_def *tab = obj.t == V_STR ? STR_METHODS : obj.t == V_LIST ? LIST_METHODS
                            : obj.t == V_DICT ? DICT_METHODS : NULL;
    if (!tab) return NULL;
    for (int i = 0; tab[i].name; i++)
        if (!strcmp(tab[i].name, name)) return &tab[i];
    return NULL;
}

jval call_method(ev *E, node *at, jval self, const method_def *m, const args_t *a) {
    if (self.t == V_LIST && self.l->tuple && !m->tuple_ok)
        rt_fail(E, at, "'tuple' object has no attribute '%s'", m->name);
    return m->fn(E, at, self, m->name, a);
}

/* --- global functions ------------------------------------------------------------------------ */

static jval fn_raise(ev *E, node *at, const args_t *a) {
    jval msg = arg_or(a, 0, NULL, mk_str(E->J, ""));
    jval s = to_str(E, msg);
    rt_fail(E, at, "raise_exception: %s", s.s->s);
}

/* namespace(mapping?, **kw) / dict(mapping?, **kw) */
static jval make_mapping(ev *E, node *at, const args_t *a, int type) {
    jx *J = E->J;
    jval x;
    jdict *d = dict_new(J);
    if (arg(a, 0, NULL, &x)) {
        if (x.t != V_DICT) rt_fail(E, at, "namespace()/dict(): positional argument must be a mapping");
        for (int i = 0; i < x.d->n; i++) dict_set_val(E, at, d, dict_key(x.d, i), x.d->v[i]);
    }
    for (int i = 0; i < a->nkw; i++) dict_set(J, d, a->kwn[i], a->kwv[i]);
    return mk_dict(d, type);
}
static jval fn_namespace(ev *E, node *at, const args_t *a) { return make_mapping(E, at, a, V_NS); }
static jval fn_dict(ev *E, node *at, const args_t *a) { return make_mapping(E, at, a, V_DICT); }

static jval fn_range(ev *E, node *at, const args_t *a) {
    jx *J = E->J;
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

/* strftime_now(format): local time, or the UTC instant df_chat_opts.now when set */
static jval fn_strftime(ev *E, node *at, const args_t *a) {
    jstr *fmt = arg_str(E, at, a, 0, NULL, "strftime_now");
    struct tm tmv;
    time_t t = E->J->now ? (time_t)E->J->now : time(NULL);
    if (E->J->now) gmtime_r(&t, &tmv);
    else localtime_r(&t, &tmv);
    char buf[512];
    size_t n = fmt->len ? strftime(buf, sizeof buf, fmt->s, &tmv) : 0;
    return mk_strn(E->J, buf, n);
}

static const struct {
    const char *name;
    jval (*fn)(ev *E, node *at, const args_t *a);
} FUNCTIONS[] = {
    {"raise_exception", fn_raise}, {"namespace", fn_namespace}, {"range", fn_range},
    {"strftime_now", fn_strftime}, {"dict", fn_dict},
};

jval call_function(ev *E, node *at, int fn, const args_t *a) {
    DF_ASSERT(fn >= 0 && fn < (int)(sizeof FUNCTIONS / sizeof FUNCTIONS[0]));
    return FUNCTIONS[fn].fn(E, at, a);
}

void df_jinja_add_globals(jx *J, scope *G) {
    for (int i = 0; i < (int)(sizeof FUNCTIONS / sizeof FUNCTIONS[0]); i++) {
        jval f = {.t = V_FUNC};
        f.fn = i;
        dict_setc(J, &G->vars, FUNCTIONS[i].name, f);
    }
}
