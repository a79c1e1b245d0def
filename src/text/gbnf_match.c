/* gbnf_match.c — running a df_gbnf: the set of pushdown stacks (llama.cpp's semantics, see
 * gbnf.h), advanced by code points and whole tokens, and the mask of every token of a
 * vocabulary the grammar allows now.
 * Representation: a stack is a chain of nodes (position in g->el, parent node), hash-consed,
 * so equal stacks are the same node id and a state (a list of node ids; -1 = the empty stack)
 * is deduplicated by marking nodes. Nodes and lists live in arenas used last-in first-out:
 * the mask walks the vocabulary sorted by bytes (df_gtok_index) keeping one state per prefix
 * depth, and going back to a shorter prefix truncates the arenas to that depth's marks (a
 * truncated node is always the newest one of its hash chain, so unlinking is O(1)). After each
 * accepted token the live stacks are rebuilt into empty arenas (compaction).
 * Invariant: the committed state is sl[0 .. cur_n) with the partial character (cur_val,
 * cur_rem); every stack top in a state is a terminal element.
 * Threading: one matcher per thread. */
#include "text/gbnf.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

typedef struct {
    int b, n;         /* stack list sl[b .. b+n) */
    uint32_t val;     /* bits of a pending UTF-8 character */
    int rem;          /* its bytes still to come (0: none pending) */
} gstate;

struct df_gmatch {
    const df_gbnf *g;
    int32_t *npos, *npar, *nnext;
    uint32_t *nseen;
    int n_nodes, cap_nodes;
    int32_t *bucket;
    uint32_t bmask;
    int32_t *sl;
    int n_sl, cap_sl;
    int32_t *work;
    int cap_work;
    uint32_t epoch, empty_seen;
    int cur_n;
    uint32_t cur_val;
    int cur_rem;
    bool oom;
    /* per prefix depth of the mask walk */
    gstate *dst;
    int *dnodes, *dsl;
    int cap_depth;
    int32_t *tmp;     /* compaction: the live stacks as position sequences */
    int cap_tmp;
};

/* ---- arenas ------------------------------------------------------------------------------ */

static bool grow(df_gmatch *m, void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) { m->oom = true; return false; }
    *p = q;
    *cap = nc;
    return true;
}

static inline uint32_t nhash(int32_t pos, int32_t par) {
    uint64_t h = (uint64_t)(uint32_t)pos * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)(par + 1) * 0xC2B2AE3D27D4EB4Full;
    return (uint32_t)(h >> 32);
}

static bool rehash(df_gmatch *m, uint32_t nb) {
    int32_t *b = malloc(sizeof(int32_t) * nb);
    if (!b) { m->oom = true; return false; }
    for (uint32_t i = 0; i < nb; i++) b[i] = -1;
    free(m->bucket);
    m->bucket = b;
    m->bmask = nb - 1;
    for (int i = 0; i < m->n_nodes; i++) { /* in creation order: the newest node heads its chain */
        uint32_t h = nhash(m->npos[i], m->npar[i]) & m->bmask;
        m->nnext[i] = m->bucket[h];
        m->bucket[h] = i;
    }
    return true;
}

/* the node (pos, par), created if new; -2 when out of memory */
static int32_t intern(df_gmatch *m, int32_t pos, int32_t par) {
    uint32_t h = nhash(pos, par) & m->bmask;
    for (int32_t i = m->bucket[h]; i >= 0; i = m->nnext[i])
        if (m->npos[i] == pos && m->npar[i] == par) return i;
    if (m->n_nodes == m->cap_nodes) {
        int c = m->cap_nodes;
        if (!grow(m, (void **)&m->npos, &c, m->n_nodes + 1, sizeof(int32_t))) return -2;
        c = m->cap_nodes;
        if (!grow(m, (void **)&m->npar, &c, m->n_nodes + 1, sizeof(int32_t))) return -2;
        c = m->cap_nodes;
        if (!grow(m, (void **)&m->nnext, &c, m->n_nodes + 1, sizeof(int32_t))) return -2;
        c = m->cap_nodes;
        if (!grow(m, (void **)&m->nseen, &c, m->n_nodes + 1, sizeof(uint32_t))) return -2;
        m->cap_nodes = c;
        if ((uint32_t)m->cap_nodes > (m->bmask + 1) * 2 && !rehash(m, (m->bmask + 1) * 4)) return -2;
        h = nhash(pos, par) & m->bmask;
    }
    int32_t i = m->n_nodes++;
    m->npos[i] = pos;
    m->npar[i] = par;
    m->nseen[i] = 0;
    m->nnext[i] = m->bucket[h];
    m->bucket[h] = i;
    return i;
}

static void truncate_nodes(df_gmatch *m, int n) {
    while (m->n_nodes > n) {
        int32_t i = --m->n_nodes;
        uint32_t h = nhash(m->npos[i], m->npar[i]) & m->bmask;
        m->bucket[h] = m->nnext[i]; /* LIFO: i heads its chain */
    }
}

static bool sl_push(df_gmatch *m, int32_t x) {
    if (m->n_sl == m->cap_sl && !grow(m, (void **)&m->sl, &m->cap_sl, m->n_sl + 1, sizeof(int32_t))) return false;
    m->sl[m->n_sl++] = x;
    return true;
}

static void begin_construction(df_gmatch *m) {
    if (++m->epoch == 0) { /* wrapped: forget every mark */
        for (int i = 0; i < m->n_nodes; i++) m->nseen[i] = 0;
        m->empty_seen = 0;
        m->epoch = 1;
    }
}

/* ---- the grammar ------------------------------------------------------------------------- */

static inline bool is_eos(const df_gelem *e) { return e->type == DF_GE_END || e->type == DF_GE_ALT; }
static inline bool is_token(const df_gelem *e) { return e->type == DF_GE_TOKEN || e->type == DF_GE_TOKEN_NOT; }

/* Append to sl every terminal-topped stack that stack x stands for (rule references at the
 * top replaced by each alternative of the rule), skipping stacks already in this construction. */
static bool expand(df_gmatch *m, int32_t x) {
    const df_gbnf *g = m->g;
    int nw = 0;
    if (!grow(m, (void **)&m->work, &m->cap_work, 1, sizeof(int32_t))) return false;
    m->work[nw++] = x;
    while (nw > 0) {
        int32_t s = m->work[--nw];
        if (s == -1) {
            if (m->empty_seen != m->epoch) {
                m->empty_seen = m->epoch;
                if (!sl_push(m, -1)) return false;
            }
            continue;
        }
        if (m->nseen[s] == m->epoch) continue;
        m->nseen[s] = m->epoch;
        int32_t pos = m->npos[s];
        const df_gelem *e = &g->el[pos];
        if (e->type != DF_GE_RULE_REF) {
            if (!sl_push(m, s)) return false;
            continue;
        }
        int32_t cont = m->npar[s];
        if (!is_eos(e + 1)) {
            cont = intern(m, pos + 1, cont);
            if (cont < -1) return false;
        }
        int32_t a = g->rule_off[e->value];
        for (;;) {
            int32_t y = cont;
            if (!is_eos(&g->el[a])) {
                y = intern(m, a, cont);
                if (y < -1) return false;
            }
            if (!grow(m, (void **)&m->work, &m->cap_work, nw + 1, sizeof(int32_t))) return false;
            m->work[nw++] = y;
            while (!is_eos(&g->el[a])) a++;
            if (g->el[a].type != DF_GE_ALT) break;
            a++;
        }
    }
    return true;
}

/* Does code point c match the class at pos? *after = the element after the class. */
static bool match_char(const df_gelem *el, int32_t pos, uint32_t c, int32_t *after) {
    const df_gelem *p = &el[pos];
    bool positive = p->type == DF_GE_CHAR || p->type == DF_GE_CHAR_ANY, found = false;
    do {
        if (p[1].type == DF_GE_CHAR_RNG_UPPER) {
            found = found || (p->value <= c && c <= p[1].value);
            p += 2;
        } else if (p->type == DF_GE_CHAR_ANY) {
            found = true;
            p += 1;
        } else {
            found = found || p->value == c;
            p += 1;
        }
    } while (p->type == DF_GE_CHAR_ALT);
    *after = (int32_t)(p - el);
    return found == positive;
}

/* Could some completion of the pending UTF-8 bits (val, rem more bytes) match the class? */
static bool match_partial(const df_gelem *el, int32_t pos, uint32_t val, int rem) {
    const df_gelem *p = &el[pos];
    bool positive = p->type == DF_GE_CHAR || p->type == DF_GE_CHAR_ANY;
    if (rem < 0 || (rem == 1 && val < 2)) return false; /* invalid, or an overlong 2-byte form */
    uint32_t lo = val << (rem * 6), hi = lo | ((1u << (rem * 6)) - 1);
    if (lo == 0) lo = rem == 2 ? 1u << 11 : rem == 3 ? 1u << 16 : lo;
    do {
        if (p[1].type == DF_GE_CHAR_RNG_UPPER) {
            if (p->value <= hi && lo <= p[1].value) return positive;
            p += 2;
        } else if (p->type == DF_GE_CHAR_ANY) {
            return true;
        } else {
            if (lo <= p->value && p->value <= hi) return positive;
            p += 1;
        }
    } while (p->type == DF_GE_CHAR_ALT);
    return !positive;
}

/* The state after code point c from s, as a new list at the end of sl. false: out of memory. */
static bool accept_cp(df_gmatch *m, const gstate *s, uint32_t c, gstate *o) {
    const df_gbnf *g = m->g;
    begin_construction(m);
    o->b = m->n_sl;
    o->val = 0;
    o->rem = 0;
    for (int i = 0; i < s->n; i++) {
        int32_t x = m->sl[s->b + i];
        if (x < 0 || is_token(&g->el[m->npos[x]])) continue;
        int32_t after;
        if (!match_char(g->el, m->npos[x], c, &after)) continue;
        int32_t y = m->npar[x];
        if (!is_eos(&g->el[after])) {
            y = intern(m, after, y);
            if (y < -1) return false;
        }
        if (!expand(m, y)) return false;
    }
    o->n = m->n_sl - o->b;
    return true;
}

static bool partial_possible(const df_gmatch *m, const gstate *s) {
    for (int i = 0; i < s->n; i++) {
        int32_t x = m->sl[s->b + i];
        if (x < 0 || is_token(&m->g->el[m->npos[x]])) continue;
        if (match_partial(m->g->el, m->npos[x], s->val, s->rem)) return true;
    }
    return false;
}

/* One byte from s: 1 = alive (*o), 0 = dead, < 0 = out of memory. */
static int step_byte(df_gmatch *m, const gstate *s, unsigned char b, gstate *o) {
    uint32_t cp;
    if (s->rem > 0) {
        if ((b & 0xC0) != 0x80) return 0;
        uint32_t v = (s->val << 6) | (b & 0x3F);
        if (s->rem > 1) {
            *o = *s;
            o->val = v;
            o->rem = s->rem - 1;
            return partial_possible(m, o);
        }
        cp = v;
    } else if (b < 0x80) {
        cp = b;
    } else if (b >= 0xC0) {
        *o = *s;
        o->rem = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
        o->val = b & (0x7F >> (o->rem + 1));
        return partial_possible(m, o);
    } else {
        return 0; /* a continuation byte with nothing to continue */
    }
    if (!accept_cp(m, s, cp, o)) return DF_ERR_NOMEM;
    return o->n > 0;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

df_gmatch *df_gmatch_create(const df_gbnf *g) {
    df_gmatch *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = g;
    if (!rehash(m, 1024) || df_gmatch_reset(m) < 0) {
        df_gmatch_free(m);
        return NULL;
    }
    return m;
}

void df_gmatch_free(df_gmatch *m) {
    if (!m) return;
    free(m->npos); free(m->npar); free(m->nnext); free(m->nseen); free(m->bucket);
    free(m->sl); free(m->work); free(m->dst); free(m->dnodes); free(m->dsl); free(m->tmp);
    free(m);
}

int df_gmatch_reset(df_gmatch *m) {
    const df_gbnf *g = m->g;
    truncate_nodes(m, 0);
    m->n_sl = 0;
    m->cur_val = 0;
    m->cur_rem = 0;
    begin_construction(m);
    int32_t a = g->rule_off[g->root];
    for (;;) { /* every alternative of the start rule */
        int32_t y = -1;
        if (!is_eos(&g->el[a])) {
            y = intern(m, a, -1);
            if (y < -1) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
        }
        if (!expand(m, y)) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
        while (!is_eos(&g->el[a])) a++;
        if (g->el[a].type != DF_GE_ALT) break;
        a++;
    }
    m->cur_n = m->n_sl;
    return DF_OK;
}

static gstate committed(const df_gmatch *m) {
    gstate s = {.b = 0, .n = m->cur_n, .val = m->cur_val, .rem = m->cur_rem};
    return s;
}

bool df_gmatch_can_end(const df_gmatch *m) {
    if (m->cur_rem) return false;
    for (int i = 0; i < m->cur_n; i++)
        if (m->sl[i] == -1) return true;
    return false;
}

bool df_gmatch_done(const df_gmatch *m) {
    for (int i = 0; i < m->cur_n; i++)
        if (m->sl[i] != -1) return false;
    return true;
}

/* The state after `bytes` (and the token elements matching token_id) from the committed
 * state, as a list at the end of sl: 1 alive, 0 rejected, < 0 out of memory. */
static int consume(df_gmatch *m, const char *bytes, size_t n, int32_t token_id, gstate *out) {
    const df_gbnf *g = m->g;
    gstate s = committed(m);
    int alive = 1;
    for (size_t i = 0; i < n && alive > 0; i++) {
        gstate o;
        alive = step_byte(m, &s, (unsigned char)bytes[i], &o);
        if (alive > 0) s = o;
    }
    if (alive < 0) return alive;
    bool has_tok = false;
    for (int i = 0; i < m->cur_n && token_id >= 0; i++)
        if (m->sl[i] >= 0 && is_token(&g->el[m->npos[m->sl[i]]])) has_tok = true;
    if (!has_tok) {
        *out = s;
        return alive > 0 && s.n > 0;
    }
    /* the union of the character path and the token elements that match token_id */
    gstate u = {.b = m->n_sl, .n = 0, .val = alive > 0 ? s.val : 0, .rem = alive > 0 ? s.rem : 0};
    begin_construction(m);
    for (int i = 0; alive > 0 && i < s.n; i++) {
        int32_t x = m->sl[s.b + i];
        if (x >= 0 && n == 0 && is_token(&g->el[m->npos[x]])) continue; /* only the token path moves these */
        if (x >= 0) {
            if (m->nseen[x] == m->epoch) continue;
            m->nseen[x] = m->epoch;
        } else {
            if (m->empty_seen == m->epoch) continue;
            m->empty_seen = m->epoch;
        }
        if (!sl_push(m, x)) return DF_ERR_NOMEM;
    }
    for (int i = 0; i < m->cur_n; i++) {
        int32_t x = m->sl[i];
        if (x < 0) continue;
        const df_gelem *e = &g->el[m->npos[x]];
        if (!is_token(e)) continue;
        bool hit = e->type == DF_GE_TOKEN ? e->value == (uint32_t)token_id : e->value != (uint32_t)token_id;
        if (!hit) continue;
        if (u.rem) continue; /* a token cannot follow half a character */
        int32_t y = m->npar[x];
        if (!is_eos(e + 1)) {
            y = intern(m, m->npos[x] + 1, y);
            if (y < -1) return DF_ERR_NOMEM;
        }
        if (!expand(m, y)) return DF_ERR_NOMEM;
    }
    u.n = m->n_sl - u.b;
    *out = u;
    return u.n > 0;
}

bool df_gmatch_allows(df_gmatch *m, const char *bytes, size_t n, int32_t token_id) {
    int nn = m->n_nodes, ns = m->n_sl;
    gstate o;
    int rc = consume(m, bytes, n, token_id, &o);
    truncate_nodes(m, nn);
    m->n_sl = ns;
    return rc > 0;
}

/* Rebuild the arenas holding only the stacks of s, which becomes the committed state. */
static int compact(df_gmatch *m, const gstate *s) {
    /* each stack as [depth, pos_bottom .. pos_top] in tmp */
    int need = 0;
    for (int i = 0; i < s->n; i++) {
        need++;
        for (int32_t x = m->sl[s->b + i]; x >= 0; x = m->npar[x]) need++;
    }
    if (!grow(m, (void **)&m->tmp, &m->cap_tmp, need + 1, sizeof(int32_t))) return DF_ERR_NOMEM;
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        int d = 0;
        for (int32_t x = m->sl[s->b + i]; x >= 0; x = m->npar[x]) d++;
        m->tmp[k] = d;
        int j = k + d;
        for (int32_t x = m->sl[s->b + i]; x >= 0; x = m->npar[x]) m->tmp[j--] = m->npos[x];
        k += d + 1;
    }
    truncate_nodes(m, 0);
    m->n_sl = 0;
    for (int i = 0, at = 0; i < s->n; i++) {
        int d = m->tmp[at];
        int32_t x = -1;
        for (int j = 1; j <= d; j++) {
            x = intern(m, m->tmp[at + j], x);
            if (x < -1) return DF_ERR_NOMEM;
        }
        if (!sl_push(m, x)) return DF_ERR_NOMEM;
        at += d + 1;
    }
    m->cur_n = m->n_sl;
    m->cur_val = s->val;
    m->cur_rem = s->rem;
    return DF_OK;
}

int df_gmatch_accept(df_gmatch *m, const char *bytes, size_t n, int32_t token_id) {
    int nn = m->n_nodes, ns = m->n_sl;
    gstate o;
    int rc = consume(m, bytes, n, token_id, &o);
    if (rc <= 0) {
        truncate_nodes(m, nn);
        m->n_sl = ns;
        if (rc < 0) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
        return df_err(DF_ERR_INVALID, "grammar: '%.*s' is not allowed here", (int)(n > 40 ? 40 : n), bytes);
    }
    if (compact(m, &o) < 0) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
    return DF_OK;
}

/* ---- the mask ---------------------------------------------------------------------------- */

int df_gmatch_mask(df_gmatch *m, const df_gtok_index *ix, uint8_t *allowed) {
    const df_gbnf *g = m->g;
    memset(allowed, 0, (size_t)ix->n_vocab);
    int n_allowed = 0;
    if (df_gmatch_can_end(m))
        for (int i = 0; i < ix->n_vocab; i++)
            if (ix->eog[i]) { allowed[i] = 1; n_allowed++; }
    /* token elements on top of committed stacks */
    if (!m->cur_rem)
        for (int i = 0; i < m->cur_n; i++) {
            int32_t x = m->sl[i];
            if (x < 0) continue;
            const df_gelem *e = &g->el[m->npos[x]];
            if (e->type == DF_GE_TOKEN) {
                if (e->value < (uint32_t)ix->n_vocab && ix->len[e->value] && !ix->eog[e->value] && !allowed[e->value]) {
                    allowed[e->value] = 1;
                    n_allowed++;
                }
            } else if (e->type == DF_GE_TOKEN_NOT) {
                for (int k = 0; k < ix->n_order; k++) {
                    int32_t id = ix->order[k];
                    if ((uint32_t)id != e->value && !allowed[id]) { allowed[id] = 1; n_allowed++; }
                }
            }
        }
    int md = ix->max_len + 1;
    if (md > m->cap_depth) {
        gstate *a = realloc(m->dst, sizeof(gstate) * (size_t)md);
        if (a) m->dst = a;
        int *b = realloc(m->dnodes, sizeof(int) * (size_t)md);
        if (b) m->dnodes = b;
        int *c = realloc(m->dsl, sizeof(int) * (size_t)md);
        if (c) m->dsl = c;
        if (!a || !b || !c) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
        m->cap_depth = md;
    }
    const int base_nodes = m->n_nodes, base_sl = m->n_sl;
    m->dst[0] = committed(m);
    m->dnodes[0] = base_nodes;
    m->dsl[0] = base_sl;
    int valid = 0;           /* states dst[0 .. valid] belong to the previous piece's prefix */
    int dead_at = 1 << 30;   /* the previous piece died consuming its byte dead_at */
    int rc = DF_OK;
    for (int k = 0; k < ix->n_order; k++) {
        const int32_t id = ix->order[k];
        const unsigned char *p = (const unsigned char *)ix->blob + ix->off[id];
        const int len = ix->len[id];
        const int l = ix->lcp[k];
        if (l > dead_at) continue; /* shares the byte that killed the previous piece */
        int d = l < valid ? l : valid;
        truncate_nodes(m, m->dnodes[d]);
        m->n_sl = m->dsl[d];
        valid = d;
        dead_at = 1 << 30;
        for (; d < len; d++) {
            gstate o;
            int a = step_byte(m, &m->dst[d], p[d], &o);
            if (a < 0) { rc = df_err(DF_ERR_NOMEM, "grammar: out of memory"); goto out; }
            if (a == 0) { dead_at = d; break; }
            m->dst[d + 1] = o;
            m->dnodes[d + 1] = m->n_nodes;
            m->dsl[d + 1] = m->n_sl;
            valid = d + 1;
        }
        if (d == len && !allowed[id]) { allowed[id] = 1; n_allowed++; }
    }
out:
    truncate_nodes(m, base_nodes);
    m->n_sl = base_sl;
    if (m->oom) { m->oom = false; return df_err(DF_ERR_NOMEM, "grammar: out of memory"); }
    return rc < 0 ? rc : n_allowed;
}
