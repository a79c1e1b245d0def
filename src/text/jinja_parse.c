/* jinja_parse.c — tokens -> AST by recursive descent in jinja2's precedence: conditional
 * expression < or < and < not < comparison (chained, in / not in) < + - < ~ < * / // % < ** <
 * unary < filters and tests (| name, is [not] name) < postfix (.attr, [item / slice], call)
 * < primary (literals, names, tuples, lists, dicts). Statements dispatch on their name
 * (STATEMENTS). Nesting depth is bounded (PARSE_DEPTH_LIMIT) so hostile templates cannot
 * exhaust the C stack. */
#include "text/jinja_impl.h"

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


/* {% if %} ... {% elif %} ... {% else %} ... {% endif %} */
static node *parse_if(parser *P, tok *t) {
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

/* {% for target in iter [if cond] %} ... [{% else %} ...] {% endfor %} */
static node *parse_for(parser *P, tok *t) {
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

/* {% set target = expr %} or the block form {% set name [| filter ...] %} ... {% endset %} */
static node *parse_set(parser *P, tok *t) {
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

/* {% macro name(params, with=defaults) %} ... {% endmacro [name] %} */
static node *parse_macro(parser *P, tok *t) {
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

/* {% generation %} (HF AssistantTracker): renders its body unchanged, in its own scope */
static node *parse_generation(parser *P, tok *t) {
    expect_bend(P);
    static const char *const ends[] = {"endgeneration", NULL};
    tok *et;
    node *x = mk_node(P, S_WITH, t);
    x->body = parse_body(P, ends, &et);
    expect_bend(P);
    return x;
}

static node *parse_loopctl(parser *P, tok *t) {
    node *x = mk_node(P, t->s->s[0] == 'b' ? S_BREAK : S_CONTINUE, t);
    expect_bend(P);
    return x;
}

/* {% with a = x, b = y %} ... {% endwith %}: a new scope */
static node *parse_with(parser *P, tok *t) {
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

static const struct {
    const char *name;
    node *(*parse)(parser *P, tok *name_tok);
} STATEMENTS[] = {
    {"if", parse_if}, {"for", parse_for}, {"set", parse_set}, {"macro", parse_macro},
    {"generation", parse_generation}, {"break", parse_loopctl}, {"continue", parse_loopctl},
    {"with", parse_with},
};

/* {% name ... %}: P is at the BBEGIN token */
static node *parse_statement(parser *P) {
    P->i++;
    tok *t = pk(P);
    if (t->t != T_NAME) p_fail(P, t, "expected a statement name, got '%s'", tokdesc(t));
    const char *nm = t->s->s;
    P->i++;
    for (size_t i = 0; i < sizeof STATEMENTS / sizeof STATEMENTS[0]; i++)
        if (!strcmp(nm, STATEMENTS[i].name)) return STATEMENTS[i].parse(P, t);
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

node *df_jinja_parse(jx *J, tok *t, int nt) {
    parser P = {J, t, 0, nt, 0};
    tok *dummy;
    return parse_body(&P, NULL, &dummy);
}
