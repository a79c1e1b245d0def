/* tokenizer_impl.h — internals shared by the tokenizer's files (not an interface: include
 * only from src/text/{vocab,pretok,bpe,spm,detok,tokenizer}.c).
 *   vocab.c     df_tokenizer_load_ex: tokenizer.ggml.* KVs -> struct df_tokenizer; the
 *               string table; special ids, EOG set, attribute quirks
 *   pretok.c    the PCRE2 pre-tokenizers (table, compilation, streamed split)
 *   bpe.c       byte-level BPE: byte map, merges, the per-piece merge loop
 *   spm.c       SentencePiece: escape, score-ordered merges, byte fallback
 *   detok.c     token -> bytes (pieces built at load), llama_detokenize, streaming detok
 *   tokenizer.c special-token partition, df_tokenize, accessors
 * Invariant: a df_tokenizer is immutable after load; per-call scratch lives in work_t and
 * idvec values owned by the call. */
#ifndef DF_TOKENIZER_IMPL_H
#define DF_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/utf8.h"
#include "text/tokenizer.h"

/* ---- string intern table: text -> sid (dense ids), binary-safe, NUL-terminated copies ---- */
typedef struct {
    char *arena;
    size_t arena_len, arena_cap;
    size_t *off;      /* [cap] start of string sid in arena */
    uint32_t *len;    /* [cap] */
    int32_t n, cap;
    int32_t *ht;      /* open addressing, -1 = empty */
    uint64_t *hh;     /* hash per sid (rehash without recomputing) */
    size_t ht_mask;
} strtab;

static inline uint64_t df_tok_hash(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w ^ (uint64_t)n << 56) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static inline int32_t strtab_find_h(const strtab *st, const char *s, size_t n, uint64_t h) {
    size_t i = h & st->ht_mask;
    for (;;) {
        int32_t id = st->ht[i];
        if (id < 0) return -1;
        if (st->hh[id] == h && st->len[id] == n && !memcmp(st->arena + st->off[id], s, n)) return id;
        i = (i + 1) & st->ht_mask;
    }
}

static inline int32_t strtab_find(const strtab *st, const char *s, size_t n) {
    if (!st->hh) return -1;
    return strtab_find_h(st, s, n, df_tok_hash(s, n));
}

static inline const char *strtab_str(const strtab *st, int32_t sid) { return st->arena + st->off[sid]; }

int strtab_init(strtab *st, int32_t expect);
int32_t strtab_intern(strtab *st, const char *s, size_t n); /* sid (>= 0) or < 0 */
void strtab_free(strtab *st);

/* ---- BPE merges: (sid_left, sid_right) -> (rank, sid_merged) ---- */
typedef struct {
    uint64_t key; /* UINT64_MAX = empty */
    int32_t rank;
    int32_t sid;
} merge_ent;

static inline uint64_t df_tok_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* ---- pre-tokenizers (pretok.c) ---- */
enum { PF_IGNORE_MERGES = 1, PF_ADD_BOS = 2, PF_NO_CLEAN_SPACES = 4, PF_BOS_NULL = 8 };
#define DF_PRETOK_MAX_RE 6

typedef struct {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    int flags;
    const char *re[DF_PRETOK_MAX_RE];
} pre_def;

/* ---- the tokenizer object ---- */
struct df_tokenizer {
    int type;
    char pre_name[64];
    const pre_def *pre;
    int32_t n_vocab;
    strtab st;              /* token texts (+ BPE merge parts) */
    int32_t *tok_sid;       /* [n_vocab] sid of token text */
    int32_t *sid_tok;       /* [st.n] token id with that text (last one), -1 */
    float *score;           /* [n_vocab] */
    uint16_t *attr;         /* [n_vocab] DF_TATTR_* */
    char *piece_blob;       /* decoded pieces (special=true rendering) */
    size_t *piece_off;      /* [n_vocab + 1] */
    int max_piece;          /* longest piece, bytes (clamped to INT_MAX / 4) */

    merge_ent *merges;
    size_t merges_mask;
    int32_t n_merges;
    int32_t byte_sid[256];  /* sid of the byte-level char for each byte (-1) */
    int32_t byte_tok1[256]; /* token whose text is that single raw byte (-1) */
    char byte_enc[256][3];  /* UTF-8 of the byte-level char, 1-2 bytes, NUL-terminated */
    uint8_t byte_enc_len[256];

    pcre2_code *re[DF_PRETOK_MAX_RE];
    int n_re;

    int32_t *special;       /* control/user-defined/unknown ids, longest text first */
    int n_special;
    int32_t *eog;
    int n_eog;

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_space_prefix, ignore_merges, clean_spaces;
    bool spm_split_ws; /* no token has U+2581 right after a non-U+2581 char: see spm.c */
};

static inline int32_t text_to_token(const df_tokenizer *t, const char *s, size_t n) {
    int32_t sid = strtab_find(&t->st, s, n);
    return sid >= 0 ? t->sid_tok[sid] : -1;
}

static inline const merge_ent *merge_find(const df_tokenizer *t, int32_t a, int32_t b) {
    if (!t->merges) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = df_tok_mix64(key) & t->merges_mask;
    for (;;) {
        const merge_ent *e = &t->merges[i];
        if (e->key == UINT64_MAX) return NULL;
        if (e->key == key) return e;
        i = (i + 1) & t->merges_mask;
    }
}

static inline const char *piece_ptr(const df_tokenizer *t, int32_t id, size_t *n) {
    *n = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece_blob + t->piece_off[id];
}

/* ---- growable id vector (err set on OOM, later pushes ignored) ---- */
typedef struct {
    int32_t *v;
    size_t n, cap;
    int err;
} idvec;

static inline void iv_push(idvec *a, int32_t id) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 256;
        int32_t *p = realloc(a->v, nc * sizeof *p);
        if (!p) { a->err = DF_ERR_NOMEM; return; }
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n++] = id;
}

/* ---- merge scratch: a symbol list and a heap of candidate bigrams (SPM and BPE) ---- */
typedef struct {
    int32_t prev, next;
    size_t start;   /* byte offset in the word */
    size_t n;       /* bytes; 0 = merged away */
    int32_t sid;    /* BPE: interned text id (-1 unknown) */
} sym_t;

typedef struct {
    float score;    /* SPM: higher first */
    int32_t rank;   /* BPE: lower first */
    int32_t left, right;
    size_t size;    /* SPM validity check */
    int32_t lsid, rsid;
} bigram_t;

typedef struct {
    sym_t *sym;
    size_t nsym, capsym;
    bigram_t *heap;
    size_t nheap, capheap;
    char *buf;      /* text scratch */
    size_t capbuf;
    int err;
} work_t;

static inline bool work_reserve_sym(work_t *w, size_t n) {
    if (n <= w->capsym) return true;
    size_t nc = w->capsym ? w->capsym : 64;
    while (nc < n) nc *= 2;
    sym_t *p = realloc(w->sym, nc * sizeof *p);
    if (!p) { w->err = DF_ERR_NOMEM; return false; }
    w->sym = p;
    w->capsym = nc;
    return true;
}

static inline bool work_reserve_buf(work_t *w, size_t n) {
    if (n <= w->capbuf) return true;
    size_t nc = w->capbuf ? w->capbuf : 256;
    while (nc < n) nc *= 2;
    char *p = realloc(w->buf, nc);
    if (!p) { w->err = DF_ERR_NOMEM; return false; }
    w->buf = p;
    w->capbuf = nc;
    return true;
}

static inline void work_free(work_t *w) {
    free(w->sym);
    free(w->heap);
    free(w->buf);
}

/* heap order ("before" pops first): SPM by score then position, BPE by rank then position.
 * spm is a constant at every call site, so each file gets its own specialised copy. */
static inline bool bigram_before(const bigram_t *a, const bigram_t *b, bool spm) {
    if (spm) return a->score > b->score || (a->score == b->score && a->left < b->left);
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static inline void heap_push(work_t *w, const bigram_t *x, bool spm) {
    if (w->nheap == w->capheap) {
        size_t nc = w->capheap ? w->capheap * 2 : 64;
        bigram_t *p = realloc(w->heap, nc * sizeof *p);
        if (!p) { w->err = DF_ERR_NOMEM; return; }
        w->heap = p;
        w->capheap = nc;
    }
    size_t i = w->nheap++;
    while (i > 0) {
        size_t pa = (i - 1) / 2;
        if (!bigram_before(x, &w->heap[pa], spm)) break;
        w->heap[i] = w->heap[pa];
        i = pa;
    }
    w->heap[i] = *x;
}

static inline bigram_t heap_pop(work_t *w, bool spm) {
    bigram_t top = w->heap[0];
    bigram_t last = w->heap[--w->nheap];
    size_t n = w->nheap, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&w->heap[c + 1], &w->heap[c], spm)) c++;
        if (!bigram_before(&w->heap[c], &last, spm)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* ---- cross-file internals ---- */
/* pretok.c */
const pre_def *df_pretok_lookup(const char *name);
int df_pretok_compile(df_tokenizer *t);            /* t->re[] from t->pre */
/* Sanitized text (*own set when allocated) and the text the regexes see (*mtext, *mown). */
int df_pretok_prepare(const char *raw, size_t len, const char **txt, char **own, const char **mtext,
                      char **mown, size_t *n);
/* Split mtext[0..len) with t's regexes; emit(ud, off, len) for every final piece, in order. */
int df_pretok_split(const df_tokenizer *t, const char *mtext, size_t len,
                    void (*emit)(void *ud, size_t off, size_t len), void *ud, size_t *count);
/* bpe.c */
void df_bpe_byte_map(char enc[256][3], uint8_t len[256]);
int df_bpe_byte_inv(uint32_t cp);                  /* code point -> byte, -1 */
int df_bpe_tokenize(const df_tokenizer *t, work_t *w, const char *raw, size_t len, idvec *out);
/* spm.c */
int32_t df_spm_byte_token(const df_tokenizer *t, unsigned char b);
bool df_spm_can_split(const df_tokenizer *t);
/* One raw-text fragment: escape (spaces -> U+2581, optional dummy prefix) and tokenize. */
int df_spm_fragment(const df_tokenizer *t, work_t *w, const char *text, size_t len, bool prefix,
                    char **esc, size_t *esc_cap, idvec *out);
/* detok.c */
int df_detok_build_pieces(df_tokenizer *t);        /* piece_blob, piece_off, max_piece */

#endif
