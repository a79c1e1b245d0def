/* json_schema.c — JSON schema -> GBNF (json_schema.h). Written from the behaviour of llama.cpp's
 * converter: a visit per schema node returns the name of the rule that matches it, adding the
 * rules it needs to a name -> body table (a name taken by a different body gets a number).
 * Invariant: every string made during a conversion lives in its arena and is freed with it;
 * failures longjmp to df_json_schema_to_gbnf. Threading: reentrant. */
#include "text/json_schema.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define MAX_DEPTH 64

typedef struct {
    char **name, **body;
    int n, cap;
    void **arena;
    int n_arena, cap_arena;
    const cJSON *root;
    cJSON **trees;   /* JSON made during the conversion (type lists), deleted at the end */
    int n_trees, cap_trees;
    const char *resolving[MAX_DEPTH];
    int n_resolving;
    int depth;
    jmp_buf jb;
    int status;
    char err[240];
} conv;

static _Noreturn void cfail(conv *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void cfail(conv *c, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->status = status;
    longjmp(c->jb, 1);
}

static void *keep(conv *c, void *p) {
    if (!p) cfail(c, DF_ERR_NOMEM, "out of memory");
    if (c->n_arena == c->cap_arena) {
        int nc = c->cap_arena ? c->cap_arena * 2 : 64;
        void **na = realloc(c->arena, sizeof(void *) * (size_t)nc);
        if (!na) { free(p); cfail(c, DF_ERR_NOMEM, "out of memory"); }
        c->arena = na;
        c->cap_arena = nc;
    }
    c->arena[c->n_arena++] = p;
    return p;
}

static void keep_tree(conv *c, cJSON *t) {
    if (c->n_trees == c->cap_trees) {
        int nc = c->cap_trees ? c->cap_trees * 2 : 8;
        cJSON **nt = realloc(c->trees, sizeof(cJSON *) * (size_t)nc);
        if (!nt) { cJSON_Delete(t); cfail(c, DF_ERR_NOMEM, "out of memory"); }
        c->trees = nt;
        c->cap_trees = nc;
    }
    c->trees[c->n_trees++] = t;
}

static char *str(conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *str(conv *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) cfail(c, DF_ERR_NOMEM, "out of memory");
    return keep(c, s);
}

/* a growable string in the arena */
typedef struct {
    char *p;
    size_t n, cap;
} sb;
static void sb_add(conv *c, sb *b, const char *s) {
    size_t l = strlen(s);
    if (b->n + l + 1 > b->cap) {
        size_t nc = (b->n + l + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) { free(b->p); cfail(c, DF_ERR_NOMEM, "out of memory"); }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, l + 1);
    b->n += l;
}
static char *sb_done(conv *c, sb *b) {
    if (!b->p) return str(c, "%s", "");
    return keep(c, b->p);
}

/* ---- rules --------------------------------------------------------------------------------- */

/* [^a-zA-Z0-9-]+ -> "-" */
static char *rule_name_esc(conv *c, const char *name) {
    size_t l = strlen(name);
    char *o = keep(c, malloc(l + 1));
    size_t k = 0;
    for (size_t i = 0; i < l;) {
        char ch = name[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-') {
            o[k++] = ch;
            i++;
        } else {
            o[k++] = '-';
            while (i < l && !((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                              (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
                i++;
        }
    }
    o[k] = 0;
    return o;
}

static int find_rule(const conv *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name)) return i;
    return -1;
}

static void set_rule(conv *c, const char *name, const char *body) {
    int i = find_rule(c, name);
    if (i >= 0) { c->body[i] = (char *)body; return; }
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 32;
        char **a = realloc(c->name, sizeof(char *) * (size_t)nc);
        if (!a) cfail(c, DF_ERR_NOMEM, "out of memory");
        c->name = a;
        char **b = realloc(c->body, sizeof(char *) * (size_t)nc);
        if (!b) cfail(c, DF_ERR_NOMEM, "out of memory");
        c->body = b;
        c->cap = nc;
    }
    c->name[c->n] = (char *)name;
    c->body[c->n] = (char *)body;
    c->n++;
}

/* add name ::= body; a name already holding a different body gets the first free number */
static const char *add_rule(conv *c, const char *name, const char *body) {
    char *esc = rule_name_esc(c, name);
    int i = find_rule(c, esc);
    if (i < 0 || !strcmp(c->body[i], body)) {
        set_rule(c, esc, body);
        return esc;
    }
    for (int k = 0;; k++) {
        char *nm = str(c, "%s%d", esc, k);
        int j = find_rule(c, nm);
        if (j < 0 || !strcmp(c->body[j], body)) {
            set_rule(c, nm, body);
            return nm;
        }
    }
}

typedef struct {
    const char *name, *body;
    const char *deps[6];
} prim;

static const prim PRIMS[] = {
    {"boolean", "(\"true\" | \"false\")", {0}},
    {"decimal-part", "[0-9]{1,16}", {0}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {0}},
    {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)?", {"integral-part", "decimal-part"}},
    {"integer", "(\"-\"? integral-part)", {"integral-part"}},
    {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? space \"}\"", {"string", "value"}},
    {"array", "\"[\" space ( value (\",\" space value)* )? space \"]\"", {"value"}},
    {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"", {0}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", {0}},
    {"string", "\"\\\"\" char* \"\\\"\"", {"char"}},
    {"null", "\"null\"", {0}},
    /* string formats */
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", {0}},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", {0}},
    {"date-time", "date \"T\" time", {"date", "time"}},
    {"date-string", "\"\\\"\" date \"\\\"\"", {"date"}},
    {"time-string", "\"\\\"\" time \"\\\"\"", {"time"}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\"", {"date-time"}},
};
enum { N_PRIMS = (int)(sizeof PRIMS / sizeof PRIMS[0]) };

static const prim *find_prim(const char *name) {
    for (int i = 0; i < N_PRIMS; i++)
        if (!strcmp(PRIMS[i].name, name)) return &PRIMS[i];
    return NULL;
}

static bool reserved(const char *name) { return !strcmp(name, "root") || find_prim(name); }

static const char *add_prim(conv *c, const char *name, const prim *p) {
    const char *n = add_rule(c, name, p->body);
    for (int i = 0; i < 6 && p->deps[i]; i++)
        if (find_rule(c, p->deps[i]) < 0) add_prim(c, p->deps[i], find_prim(p->deps[i]));
    return n;
}

/* a GBNF string literal for s: \r \n " \ escaped */
static char *literal(conv *c, const char *s) {
    sb b = {0};
    sb_add(c, &b, "\"");
    char one[2] = {0, 0};
    for (const char *p = s; *p; p++) {
        switch (*p) {
        case '\r': sb_add(c, &b, "\\r"); break;
        case '\n': sb_add(c, &b, "\\n"); break;
        case '"': sb_add(c, &b, "\\\""); break;
        case '\\': sb_add(c, &b, "\\\\"); break;
        default: one[0] = *p; sb_add(c, &b, one);
        }
    }
    sb_add(c, &b, "\"");
    return sb_done(c, &b);
}

/* the literal of a JSON value as the model must print it (compact JSON) */
static char *const_rule(conv *c, const cJSON *v) {
    char *js = cJSON_PrintUnformatted(v);
    if (!js) cfail(c, DF_ERR_NOMEM, "out of memory");
    keep(c, js);
    return literal(c, js);
}

static char *repetition(conv *c, const char *item, int min, int max, const char *sep) {
    bool has_max = max != -1;
    if (max == 0) return str(c, "%s", "");
    if (min == 0 && max == 1) return str(c, "%s?", item);
    if (!sep || !*sep) {
        if (min == 1 && !has_max) return str(c, "%s+", item);
        if (min == 0 && !has_max) return str(c, "%s*", item);
        if (has_max) return str(c, "%s{%d,%d}", item, min, max);
        return str(c, "%s{%d,}", item, min);
    }
    char *inner = repetition(c, str(c, "(%s %s)", sep, item), min == 0 ? 0 : min - 1, has_max ? max - 1 : -1, NULL);
    char *r = str(c, "%s %s", item, inner);
    return min == 0 ? str(c, "(%s)?", r) : r;
}

static const char *visit(conv *c, const cJSON *s, const char *name);

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int get_int(conv *c, const cJSON *s, const char *k, int dflt) {
    const cJSON *v = get(s, k);
    if (!v) return dflt;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e9 || v->valuedouble != (double)(int)v->valuedouble)
        cfail(c, DF_ERR_FORMAT, "'%s' must be a non-negative integer", k);
    return (int)v->valuedouble;
}

/* JSON pointer "#/a/b" (~0 ~1 escapes) inside the root schema */
static const cJSON *resolve_pointer(conv *c, const char *ref) {
    if (strncmp(ref, "#", 1)) cfail(c, DF_ERR_FORMAT, "$ref '%.80s': only local references (#/...) are supported", ref);
    const cJSON *n = c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char key[256];
        size_t k = 0;
        for (size_t i = 0; i < l && k + 1 < sizeof key; i++) {
            if (p[i] == '~' && i + 1 < l && (p[i + 1] == '0' || p[i + 1] == '1')) { key[k++] = p[i + 1] == '0' ? '~' : '/'; i++; }
            else key[k++] = p[i];
        }
        key[k] = 0;
        if (cJSON_IsArray(n)) {
            char *end;
            long idx = strtol(key, &end, 10);
            n = *end || idx < 0 ? NULL : cJSON_GetArrayItem(n, (int)idx);
        } else {
            n = cJSON_IsObject(n) ? get(n, key) : NULL;
        }
        if (!n) cfail(c, DF_ERR_FORMAT, "$ref '%.80s' points to nothing", ref);
        p += l;
    }
    if (*p) cfail(c, DF_ERR_FORMAT, "$ref '%.80s' is not a JSON pointer", ref);
    return n;
}

static const char *resolve_ref(conv *c, const char *ref) {
    const char *frag = strchr(ref, '#');
    char *nm = str(c, "ref%s", rule_name_esc(c, frag ? frag + 1 : ref));
    if (find_rule(c, nm) >= 0) return nm;
    for (int i = 0; i < c->n_resolving; i++)
        if (!strcmp(c->resolving[i], ref)) return nm; /* recursive: the rule is being defined */
    if (c->n_resolving == MAX_DEPTH) cfail(c, DF_ERR_FORMAT, "$ref chain deeper than %d", MAX_DEPTH);
    c->resolving[c->n_resolving++] = ref;
    const char *r = visit(c, resolve_pointer(c, ref), nm);
    c->n_resolving--;
    return r;
}

static const char *sub(conv *c, const char *name, const char *suffix) {
    return name[0] ? str(c, "%s-%s", name, suffix) : suffix;
}

/* properties (name, schema) in order; req[i] true if required */
static char *object_rule(conv *c, const cJSON **ps, const char **pn, const bool *req, int np, const char *name,
                         const cJSON *additional) {
    const char **kv = keep(c, calloc((size_t)np + 1, sizeof(char *)));
    int *opt = keep(c, calloc((size_t)np + 1, sizeof(int))), n_opt = 0;
    sb b = {0};
    sb_add(c, &b, "\"{\" space ");
    int n_req = 0;
    for (int i = 0; i < np; i++) {
        const char *vr = visit(c, ps[i], sub(c, name, pn[i]));
        cJSON *key = cJSON_CreateString(pn[i]);
        if (!key) cfail(c, DF_ERR_NOMEM, "out of memory");
        char *kj = cJSON_PrintUnformatted(key);
        cJSON_Delete(key);
        if (!kj) cfail(c, DF_ERR_NOMEM, "out of memory");
        keep(c, kj);
        kv[i] = add_rule(c, str(c, "%s-kv", sub(c, name, pn[i])), str(c, "%s space \":\" space %s", literal(c, kj), vr));
        if (!req[i]) opt[n_opt++] = i;
    }
    for (int i = 0; i < np; i++) {
        if (!req[i]) continue;
        if (n_req++) sb_add(c, &b, " \",\" space ");
        sb_add(c, &b, kv[i]);
    }
    if (additional && (cJSON_IsTrue(additional) || cJSON_IsObject(additional))) {
        const char *sn = sub(c, name, "additional");
        const char *vr = cJSON_IsObject(additional) ? visit(c, additional, str(c, "%s-value", sn))
                                                     : add_prim(c, "value", find_prim("value"));
        const char *kr = add_prim(c, "string", find_prim("string"));
        kv[np] = add_rule(c, str(c, "%s-kv", sn), str(c, "%s \":\" space %s", kr, vr));
        opt[n_opt++] = np;
    }
    if (n_opt) {
        sb_add(c, &b, " (");
        if (n_req) sb_add(c, &b, " \",\" space ( ");
        for (int i = 0; i < n_opt; i++) {
            if (i) sb_add(c, &b, " | ");
            /* optional i first, then any of the later ones, each in a "-rest" rule */
            char *res = NULL;
            for (int j = n_opt - 1; j >= i; j--) {
                int k = opt[j];
                bool star = k == np;
                const char *kn = star ? "*" : pn[k];
                char *comma = str(c, "( \",\" space %s )", kv[k]);
                char *cur = j == i ? (star ? str(c, "%s %s*", kv[k], comma) : str(c, "%s", kv[k]))
                                   : str(c, "%s%s", comma, star ? "*" : "?");
                if (res) {
                    /* the rest of the chain after this key is its own rule */
                    const char *rest = add_rule(c, str(c, "%s-rest", sub(c, name, kn)), res);
                    cur = str(c, "%s %s", cur, rest);
                }
                res = cur;
            }
            sb_add(c, &b, res);
        }
        if (n_req) sb_add(c, &b, " )");
        sb_add(c, &b, " )?");
    }
    sb_add(c, &b, " space \"}\"");
    return sb_done(c, &b);
}

static const char *visit_object(conv *c, const cJSON *s, const char *name, const char *rule_name) {
    const cJSON *props = get(s, "properties"), *rq = get(s, "required");
    int np = cJSON_IsObject(props) ? cJSON_GetArraySize(props) : 0;
    const cJSON **ps = keep(c, calloc((size_t)np + 1, sizeof *ps));
    const char **pn = keep(c, calloc((size_t)np + 1, sizeof *pn));
    bool *req = keep(c, calloc((size_t)np + 1, sizeof *req));
    int i = 0;
    const cJSON *p;
    if (np) cJSON_ArrayForEach(p, props) {
        ps[i] = p;
        pn[i] = p->string;
        const cJSON *r;
        if (cJSON_IsArray(rq)) cJSON_ArrayForEach(r, rq)
            if (cJSON_IsString(r) && !strcmp(r->valuestring, p->string)) req[i] = true;
        i++;
    }
    return add_rule(c, rule_name, object_rule(c, ps, pn, req, np, name, get(s, "additionalProperties")));
}

/* allOf: the components' properties merged (required unless the component is inside an anyOf),
 * or the enum values every component allows */
static const char *visit_all_of(conv *c, const cJSON *s, const char *name, const char *rule_name) {
    const cJSON *all = get(s, "allOf");
    int cap = 0;
    const cJSON *t, *tt, *p;
    cJSON_ArrayForEach(t, all) {
        const cJSON *any = get(t, "anyOf");
        if (any) cJSON_ArrayForEach(tt, any) cap += cJSON_GetArraySize(get(tt, "properties")) + 1;
        else cap += cJSON_GetArraySize(get(t, "properties")) + 1;
    }
    const cJSON **ps = keep(c, calloc((size_t)cap + 1, sizeof *ps));
    const char **pn = keep(c, calloc((size_t)cap + 1, sizeof *pn));
    bool *req = keep(c, calloc((size_t)cap + 1, sizeof *req));
    int np = 0, n_all = cJSON_GetArraySize(all);
    const cJSON *enums[64];
    int n_enums = 0;
    cJSON_ArrayForEach(t, all) {
        const cJSON *any = get(t, "anyOf");
        const cJSON *list[64];
        bool reqd[64];
        int nl = 0;
        if (any) cJSON_ArrayForEach(tt, any) { if (nl < 64) { list[nl] = tt; reqd[nl++] = false; } }
        else { list[nl] = t; reqd[nl++] = true; }
        for (int k = 0; k < nl; k++) {
            const cJSON *comp = list[k];
            const cJSON *ref = get(comp, "$ref");
            if (cJSON_IsString(ref)) comp = resolve_pointer(c, ref->valuestring);
            const cJSON *props = get(comp, "properties");
            if (cJSON_IsObject(props)) {
                cJSON_ArrayForEach(p, props) {
                    if (np >= cap) break;
                    ps[np] = p;
                    pn[np] = p->string;
                    req[np++] = reqd[k];
                }
            } else if (cJSON_IsArray(get(comp, "enum")) && n_enums < 64) {
                enums[n_enums++] = get(comp, "enum");
            }
        }
    }
    if (n_enums) {
        sb b = {0};
        int n_kept = 0;
        cJSON_ArrayForEach(p, enums[0]) {
            int in_all = 1;
            for (int e = 1; e < n_enums; e++) {
                bool found = false;
                cJSON_ArrayForEach(tt, enums[e]) if (cJSON_Compare(p, tt, true)) found = true;
                in_all += found;
            }
            if (in_all != n_all) continue;
            sb_add(c, &b, n_kept++ ? " | " : "(");
            sb_add(c, &b, const_rule(c, p));
        }
        if (n_kept) {
            sb_add(c, &b, ")");
            return add_rule(c, rule_name, sb_done(c, &b));
        }
        free(b.p);
    }
    return add_rule(c, rule_name, object_rule(c, ps, pn, req, np, name, NULL));
}

static const char *visit_union(conv *c, const cJSON *alts, const char *name, const char *rule_name) {
    sb b = {0};
    int i = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, alts) {
        char idx[32];
        snprintf(idx, sizeof idx, "%d", i);
        const char *nm = name[0] ? str(c, "%s-%s", name, idx) : str(c, "alternative-%s", idx);
        if (i++) sb_add(c, &b, " | ");
        sb_add(c, &b, visit(c, a, nm));
    }
    if (!i) cfail(c, DF_ERR_FORMAT, "an empty anyOf / oneOf / type list matches nothing");
    return add_rule(c, rule_name, sb_done(c, &b));
}

static const char *visit(conv *c, const cJSON *s, const char *name) {
    if (++c->depth > MAX_DEPTH) cfail(c, DF_ERR_FORMAT, "schema nested deeper than %d", MAX_DEPTH);
    const char *rule_name = reserved(name) ? str(c, "%s-", name) : name[0] ? name : "root";
    const char *r;
    if (cJSON_IsTrue(s)) { r = add_rule(c, rule_name, add_prim(c, "value", find_prim("value"))); goto out; }
    if (!cJSON_IsObject(s)) cfail(c, DF_ERR_FORMAT, "a schema must be an object or true (at '%.60s')", rule_name);
    const cJSON *type = get(s, "type"), *fmt = get(s, "format"), *v;
    const char *ts = cJSON_IsString(type) ? type->valuestring : NULL;
    const char *fs = cJSON_IsString(fmt) ? fmt->valuestring : "";
    bool untyped = !type || cJSON_IsNull(type);
    if ((v = get(s, "$ref"))) {
        if (!cJSON_IsString(v)) cfail(c, DF_ERR_FORMAT, "$ref must be a string");
        r = add_rule(c, rule_name, resolve_ref(c, v->valuestring));
    } else if ((v = get(s, "oneOf")) || (v = get(s, "anyOf"))) {
        if (!cJSON_IsArray(v)) cfail(c, DF_ERR_FORMAT, "anyOf / oneOf must be an array");
        r = visit_union(c, v, name, rule_name);
    } else if (cJSON_IsArray(type)) {
        /* one alternative per type, each the schema with that single type */
        cJSON *alts = cJSON_CreateArray();
        if (!alts) cfail(c, DF_ERR_NOMEM, "out of memory");
        const cJSON *t;
        cJSON_ArrayForEach(t, type) {
            cJSON *copy = cJSON_Duplicate(s, true);
            if (!copy) { cJSON_Delete(alts); cfail(c, DF_ERR_NOMEM, "out of memory"); }
            cJSON_ReplaceItemInObjectCaseSensitive(copy, "type", cJSON_Duplicate(t, true));
            cJSON_AddItemToArray(alts, copy);
        }
        keep_tree(c, alts);
        r = visit_union(c, alts, name, rule_name);
    } else if ((v = get(s, "const"))) {
        r = add_rule(c, rule_name, const_rule(c, v));
    } else if ((v = get(s, "enum"))) {
        if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) cfail(c, DF_ERR_FORMAT, "enum must be a non-empty array");
        sb b = {0};
        sb_add(c, &b, "(");
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (i++) sb_add(c, &b, " | ");
            sb_add(c, &b, const_rule(c, e));
        }
        sb_add(c, &b, ")");
        r = add_rule(c, rule_name, sb_done(c, &b));
    } else if ((untyped || (ts && !strcmp(ts, "object"))) &&
               (get(s, "properties") || (get(s, "additionalProperties") && !cJSON_IsTrue(get(s, "additionalProperties"))))) {
        r = visit_object(c, s, name, rule_name);
    } else if ((untyped || (ts && (!strcmp(ts, "object") || !strcmp(ts, "string")))) && get(s, "allOf")) {
        if (!cJSON_IsArray(get(s, "allOf"))) cfail(c, DF_ERR_FORMAT, "allOf must be an array");
        r = visit_all_of(c, s, name, rule_name);
    } else if ((untyped || (ts && !strcmp(ts, "array"))) && (get(s, "items") || get(s, "prefixItems"))) {
        const cJSON *items = get(s, "items") ? get(s, "items") : get(s, "prefixItems");
        if (cJSON_IsArray(items)) {
            sb b = {0};
            sb_add(c, &b, "\"[\" space ");
            int i = 0;
            const cJSON *it;
            cJSON_ArrayForEach(it, items) {
                if (i) sb_add(c, &b, " \",\" space ");
                sb_add(c, &b, visit(c, it, sub(c, name, str(c, "tuple-%d", i))));
                i++;
            }
            sb_add(c, &b, " space \"]\"");
            r = add_rule(c, rule_name, sb_done(c, &b));
        } else {
            const char *item = visit(c, items, sub(c, name, "item"));
            int mn = get_int(c, s, "minItems", 0), mx = get_int(c, s, "maxItems", -1);
            r = add_rule(c, rule_name, str(c, "\"[\" space %s space \"]\"", repetition(c, item, mn, mx, "\",\" space")));
        }
    } else if ((untyped || (ts && !strcmp(ts, "string"))) &&
               (!strcmp(fs, "uuid") || (!strncmp(fs, "uuid", 4) && fs[4] >= '1' && fs[4] <= '5' && !fs[5]))) {
        r = add_prim(c, !strcmp(rule_name, "root") ? "root" : fs, find_prim("uuid"));
    } else if ((untyped || (ts && !strcmp(ts, "string"))) &&
               (!strcmp(fs, "date") || !strcmp(fs, "time") || !strcmp(fs, "date-time"))) {
        const char *pn = str(c, "%s-string", fs);
        r = add_rule(c, rule_name, add_prim(c, pn, find_prim(pn)));
    } else if (ts && !strcmp(ts, "string") && (get(s, "minLength") || get(s, "maxLength"))) {
        const char *ch = add_prim(c, "char", find_prim("char"));
        int mn = get_int(c, s, "minLength", 0), mx = get_int(c, s, "maxLength", -1);
        r = add_rule(c, rule_name, str(c, "\"\\\"\" %s \"\\\"\"", repetition(c, ch, mn, mx, NULL)));
    } else if (cJSON_GetArraySize(s) == 0 || (ts && !strcmp(ts, "object"))) {
        r = add_rule(c, rule_name, add_prim(c, "object", find_prim("object")));
    } else if (untyped) {
        r = add_rule(c, rule_name, add_prim(c, "value", find_prim("value"))); /* only annotations: any value */
    } else {
        static const char *const types[] = {"string", "number", "integer", "boolean", "null", "array", "object"};
        bool ok = false;
        for (size_t i = 0; ts && i < sizeof types / sizeof types[0]; i++) ok |= !strcmp(ts, types[i]);
        if (!ok) cfail(c, DF_ERR_FORMAT, "unknown type '%.40s' at '%.60s'", ts ? ts : "(not a string)", rule_name);
        r = add_prim(c, !strcmp(rule_name, "root") ? "root" : ts, find_prim(ts));
    }
out:
    c->depth--;
    return r;
}

static int cmp_idx(const void *a, const void *b, void *ud) {
    const conv *c = ud;
    return strcmp(c->name[*(const int *)a], c->name[*(const int *)b]);
}

/* ---- the builder: several schemas (and hand-written rules) in one rule table ---------------- */

struct df_jsg {
    conv c;
    cJSON **roots;   /* the schemas visited (their $refs resolve inside them) */
    int n_roots;
};

int df_jsg_create(df_jsg **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return df_err(DF_ERR_NOMEM, "json schema: out of memory");
    conv *c = &(*out)->c;
    if (setjmp(c->jb)) {
        df_jsg_free(*out);
        *out = NULL;
        return df_err(DF_ERR_NOMEM, "json schema: out of memory");
    }
    set_rule(c, "space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}");
    return DF_OK;
}

void df_jsg_free(df_jsg *g) {
    if (!g) return;
    conv *c = &g->c;
    for (int i = 0; i < c->n_arena; i++) free(c->arena[i]);
    free(c->arena);
    for (int i = 0; i < c->n_trees; i++) cJSON_Delete(c->trees[i]);
    free(c->trees);
    free(c->name);
    free(c->body);
    for (int i = 0; i < g->n_roots; i++) cJSON_Delete(g->roots[i]);
    free(g->roots);
    free(g);
}

int df_jsg_visit(df_jsg *g, const char *schema_json, const char *name, const char **rule) {
    conv *c = &g->c;
    *rule = NULL;
    cJSON *root = cJSON_Parse(schema_json ? schema_json : "true");
    if (!root) return df_err(DF_ERR_FORMAT, "json schema: not valid JSON");
    cJSON **nr = realloc(g->roots, sizeof(cJSON *) * (size_t)(g->n_roots + 1));
    if (!nr) { cJSON_Delete(root); return df_err(DF_ERR_NOMEM, "json schema: out of memory"); }
    g->roots = nr;
    g->roots[g->n_roots++] = root;
    c->root = root;
    c->depth = 0;
    c->n_resolving = 0;
    if (setjmp(c->jb)) return df_err(c->status ? c->status : DF_ERR_FORMAT, "json schema: %s", c->err);
    *rule = visit(c, root, name ? name : "");
    return DF_OK;
}

int df_jsg_rule(df_jsg *g, const char *name, const char *body, const char **final_name) {
    conv *c = &g->c;
    *final_name = NULL;
    if (setjmp(c->jb)) return df_err(c->status ? c->status : DF_ERR_FORMAT, "json schema: %s", c->err);
    *final_name = add_rule(c, name, str(c, "%s", body));
    return DF_OK;
}

const char *df_jsg_literal(df_jsg *g, const char *text) {
    conv *c = &g->c;
    if (setjmp(c->jb)) return NULL;
    return literal(c, text);
}

const char *df_jsg_json_literal(df_jsg *g, const char *text) {
    conv *c = &g->c;
    if (setjmp(c->jb)) return NULL;
    cJSON *s = cJSON_CreateString(text);
    char *js = s ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(s);
    if (!js) return NULL;
    keep(c, js);
    return literal(c, js);
}

int df_jsg_print(df_jsg *g, char **out) {
    conv *c = &g->c;
    *out = NULL;
    int *idx = malloc(sizeof(int) * (size_t)(c->n ? c->n : 1));
    if (!idx) return df_err(DF_ERR_NOMEM, "json schema: out of memory");
    for (int i = 0; i < c->n; i++) idx[i] = i;
    qsort_r(idx, (size_t)c->n, sizeof(int), cmp_idx, c);
    size_t total = 1;
    for (int i = 0; i < c->n; i++) total += strlen(c->name[i]) + strlen(c->body[i]) + 6;
    char *o = malloc(total), *w = o;
    if (!o) { free(idx); return df_err(DF_ERR_NOMEM, "json schema: out of memory"); }
    for (int i = 0; i < c->n; i++) w += sprintf(w, "%s ::= %s\n", c->name[idx[i]], c->body[idx[i]]);
    *w = 0;
    free(idx);
    *out = o;
    return DF_OK;
}

int df_json_schema_to_gbnf(const char *schema_json, char **out) {
    *out = NULL;
    if (!schema_json) return df_err(DF_ERR_INVALID, "json schema: NULL");
    df_jsg *g = NULL;
    int rc = df_jsg_create(&g);
    if (rc < 0) return rc;
    const char *r;
    rc = df_jsg_visit(g, schema_json, "", &r);
    if (rc == DF_OK) rc = df_jsg_print(g, out);
    df_jsg_free(g);
    return rc;
}
