/* jinja_impl.h — internals of the Jinja2-subset interpreter behind chat.h (not an interface:
 * include only from src/text/jinja_*.c and chat.c).
 *
 * Pipeline: source -> lexer (jinja_lex.c: whitespace control, trim_blocks/lstrip_blocks
 * exactly as jinja2's lexer) -> recursive-descent parser (jinja_parse.c, jinja2's
 * precedence) -> AST -> tree-walking evaluator (jinja_eval.c) over Python-like values
 * (jinja_values.c: undefined, none, bool, int, float, str, list/tuple, dict, namespace,
 * macro, builtin function, bound method; str()/repr(), json.dumps, JSON input through cJSON)
 * with the filters, tests, methods and global functions as tables (jinja_builtins.c).
 *
 * Memory: everything of one render (tokens, AST, values, output pieces) lives in one arena
 * that is freed at the end, so values need no reference counting and mutation (list.append,
 * namespace attributes) is shared the Python way. Errors longjmp back to the entry point
 * (chat.c) after recording a message with the template line:col. Limits: arena bytes, output
 * bytes, evaluation steps, macro recursion depth, parser nesting depth, JSON nesting depth.
 * Threading: one render = one jx, used by one thread; no global mutable state. */
#ifndef DF_JINJA_IMPL_H
#define DF_JINJA_IMPL_H

#include <setjmp.h>
#include <stdarg.h>

#include "base/utf8.h"
#include "base/util.h"
#include "text/chat.h"

#define ARENA_LIMIT (512u << 20)
#define OUTPUT_LIMIT_DEFAULT (64u << 20)
#define STEP_LIMIT 20000000LL
#define CALL_DEPTH_LIMIT 96
#define PARSE_DEPTH_LIMIT 200
#define JSON_DEPTH_LIMIT 200
#define RANGE_LIMIT 1000000
#define EVAL_DEPTH_LIMIT 1000 /* nested eval/exec frames (C stack bound) */

/* ---- arena + error context (jinja_values.c) ----------------------------------------------- */
typedef struct ablk {
    struct ablk *next;
    size_t used, cap;
    max_align_t data[];
} ablk;

typedef struct jstr jstr;
typedef struct jx {
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
    void *json_tmp;      /* cJSON tree being converted (freed on error too) */
} jx;

_Noreturn void jfail(jx *J, int status, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void *amalloc(jx *J, size_t n);
void arena_free(jx *J);

/* ---- values ------------------------------------------------------------------------------ */
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
typedef struct method_def method_def;

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
        int fn;   /* V_FUNC: index into the global functions (jinja_builtins.c) */
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
    const method_def *def;
};

static const jval UNDEF = {.t = V_UNDEF};
static const jval NONE = {.t = V_NONE};

static inline jval mk_bool(bool b) { jval v = {.t = V_BOOL}; v.b = b; return v; }
static inline jval mk_int(int64_t i) { jval v = {.t = V_INT}; v.i = i; return v; }
static inline jval mk_float(double f) { jval v = {.t = V_FLOAT}; v.f = f; return v; }
static inline jval mk_sv(jstr *s) { jval v = {.t = V_STR}; v.s = s; return v; }
static inline jval mk_list(jlist *l) { jval v = {.t = V_LIST}; v.l = l; return v; }
static inline jval mk_dict(jdict *d, int t) { jval v = {.t = (uint8_t)t}; v.d = d; return v; }
static inline bool is_num(jval v) { return v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL; }
static inline double num_f(jval v) { return v.t == V_FLOAT ? v.f : v.t == V_INT ? (double)v.i : (double)v.b; }
static inline int64_t num_i(jval v) { return v.t == V_INT ? v.i : (int64_t)v.b; }

jstr *jstr_new(jx *J, const char *s, size_t n);
jval mk_strn(jx *J, const char *s, size_t n);
jval mk_str(jx *J, const char *s);
jlist *list_new(jx *J, int cap);
void list_push(jx *J, jlist *l, jval v);
jdict *dict_new(jx *J);
int dict_find(const jdict *d, const char *k, size_t kl);
void dict_grow(jx *J, jdict *d);
jval dict_key(const jdict *d, int i);
jval *dict_get(const jdict *d, const char *k);
void dict_set(jx *J, jdict *d, jstr *k, jval v);
void dict_setc(jx *J, jdict *d, const char *k, jval v);

/* growable byte buffer in the arena (bounded by J->max_output) */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;
void sb_put(jx *J, sbuf *b, const char *s, size_t n);
void sb_puts(jx *J, sbuf *b, const char *s);
void sb_putc(jx *J, sbuf *b, char c);
void sb_printf(jx *J, sbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
jval sb_val(jx *J, sbuf *b);

/* ---- UTF-8 as Jinja strings see it ---------------------------------------------------------
 * Python str semantics over UTF-8 decoded with llama.cpp's permissive rules; a byte that
 * starts no sequence is one character whose value is the byte. */
static inline int u8_next(const char *s, size_t n, uint32_t *cp) {
    int l = df_utf8_decode(s, n, DF_UTF8_PERMISSIVE, cp);
    if (l > 0) return l;
    *cp = (unsigned char)s[0];
    return 1;
}
/* byte length of the character ending at s[n-1], n >= 1 */
static inline int u8_prev(const char *s, size_t n, uint32_t *cp) {
    size_t i = n - 1;
    int back = 0;
    while (i > 0 && back < 3 && ((unsigned char)s[i] & 0xC0) == 0x80) i--, back++;
    int l = u8_next(s + i, n - i, cp);
    if ((size_t)l != n - i) { *cp = (unsigned char)s[n - 1]; return 1; }
    return l;
}
static inline size_t u8_count(const char *s, size_t n) { return df_utf8_count(s, n, DF_UTF8_PERMISSIVE); }
static inline bool is_py_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}
static inline bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* ---- tokens (jinja_lex.c) ------------------------------------------------------------------ */
enum { T_TEXT, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF };

typedef struct {
    int t;
    int line, col;
    jstr *s; /* TEXT, NAME, STR, OP */
    int64_t i;
    double f;
} tok;

/* Tokens of src[0..n) (newlines already normalized), ending with T_EOF. */
tok *df_jinja_lex(jx *J, const char *src, size_t n, int *ntok);

/* ---- AST (jinja_parse.c) ------------------------------------------------------------------- */
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

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_POW,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

/* The template's statement list (an S_BODY node). */
node *df_jinja_parse(jx *J, tok *t, int nt);

/* ---- evaluation (jinja_eval.c) ------------------------------------------------------------- */
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

typedef struct {
    jx *J;
    sbuf *out;   /* where output goes (a macro call or block set redirects it) */
} ev;

typedef struct {
    int npos, nkw;
    jval *pos;
    jstr **kwn;
    jval *kwv;
} args_t;

_Noreturn void rt_fail(ev *E, node *x, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
scope *scope_new(ev *E, scope *parent);
jval eval(ev *E, scope *S, node *x);
int exec_body(ev *E, scope *S, node *body);
jval binop(ev *E, node *at, int op, jval a, jval b);
jval get_attr(ev *E, node *at, jval obj, const char *name);
jval call_macro(ev *E, node *at, macro *m, const args_t *a);
/* argument by position or keyword; false if absent */
bool arg(const args_t *a, int idx, const char *kw, jval *out);
jval arg_or(const args_t *a, int idx, const char *kw, jval dflt);
jstr *arg_str(ev *E, node *at, const args_t *a, int idx, const char *kw, const char *what);

/* ---- Python semantics of values (jinja_values.c) ------------------------------------------- */
const char *type_name(jval v);
bool truthy(jval v);
void fmt_float(char *buf, size_t cap, double x);  /* Python repr(float) */
void py_str(ev *E, sbuf *b, jval v, int depth);
void py_repr(ev *E, sbuf *b, jval v, int depth);
jval to_str(ev *E, jval v);
bool py_eq(jval a, jval b, int depth);
int py_cmp(ev *E, node *at, jval a, jval b);
int dict_find_val(const jdict *d, jval key);
void dict_set_val(ev *E, node *at, jdict *d, jval key, jval v);
jlist *iter_list(ev *E, node *at, jval v);        /* strings -> characters, dict -> keys */
int64_t py_len(ev *E, node *at, jval v);
size_t *str_offsets(ev *E, jstr *s, int64_t *count);
jval do_slice(ev *E, node *at, jval obj, jval st, jval en, jval sp);
jval undef_named(ev *E, const char *name);
_Noreturn void undef_fail(ev *E, node *at, jval u, const char *what);
const char *memmem_s(const char *h, size_t hn, const char *n, size_t nn);
/* Python's str.strip (mode 1 left, 2 right, 3 both; chars NULL = whitespace), replace
 * (count < 0: all), split / rsplit (sep NULL = whitespace runs; maxsplit < 0: all) and case
 * changes (0 upper, 1 lower, 2 title, 3 capitalize; ASCII letters only) */
jval str_strip(ev *E, jstr *s, jstr *chars, int mode);
jval str_replace(ev *E, jstr *s, jstr *old, jstr *nw, int64_t count);
jval str_split(ev *E, jstr *s, jstr *sep, int64_t maxsplit, bool right);
jval str_case(ev *E, jstr *s, int mode);

/* json.dumps: indent NULL = none */
typedef struct {
    const char *indent;
    const char *item_sep, *key_sep;
    bool ensure_ascii, sort_keys;
} jsonopt;
void json_dump(ev *E, node *at, sbuf *b, jval v, const jsonopt *o, int level);
/* Python json.loads of s (through cJSON); what names the input in errors. */
jval df_jinja_from_json(jx *J, const char *s, const char *what);

/* ---- filters, tests, methods, global functions (jinja_builtins.c) -------------------------- */
jval apply_filter(ev *E, node *at, const char *name, jval v, const args_t *a);
bool apply_test(ev *E, node *at, const char *name, jval v, const args_t *a);
const method_def *find_method(jval obj, const char *name);
jval call_method(ev *E, node *at, jval self, const method_def *m, const args_t *a);
jval call_function(ev *E, node *at, int fn, const args_t *a);
void df_jinja_add_globals(jx *J, scope *G); /* raise_exception, namespace, range, ... */

#endif
