/* bpe.c — byte-level BPE (tokenizer.ggml.model "gpt2") as llama.cpp's llm_tokenizer_bpe:
 * bytes are mapped to GPT-2's printable code points, each pre-tokenized piece is merged by
 * rank (lowest first, leftmost on ties), and symbols left without a token fall back to their
 * one-byte tokens. Long texts repeat the same words, so a per-call cache maps short pieces to
 * the ids they produced the first time.
 * Invariant: reads the immutable df_tokenizer only; scratch is the caller's work_t. */
#include "text/tokenizer_impl.h"

/* ---- GPT-2 byte <-> code point map ------------------------------------------------------- */
static bool byte_is_printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

void df_bpe_byte_map(char enc[256][3], uint8_t len[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = byte_is_printable(b) ? (uint32_t)b : 256u + (uint32_t)n++;
        len[b] = (uint8_t)df_utf8_encode(cp, enc[b]);
        enc[b][len[b]] = 0;
    }
}

int df_bpe_byte_inv(uint32_t cp) {
    if (cp < 256 && byte_is_printable((int)cp)) return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        if (byte_is_printable(b)) continue;
        if ((uint32_t)(256 + n) == cp) return b;
        n++;
    }
    return -1;
}

/* ---- merging one piece --------------------------------------------------------------------- */
static void bpe_try_add(const df_tokenizer *t, work_t *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t a = w->sym[l].sid, b = w->sym[r].sid;
    if (a < 0 || b < 0) return;
    const merge_ent *m = merge_find(t, a, b);
    if (!m) return;
    bigram_t bg = {.rank = m->rank, .left = l, .right = r, .lsid = a, .rsid = b};
    heap_push(w, &bg, false);
}

/* A symbol without a token: llama.cpp looks up every byte of its byte-encoded text as a
 * one-byte token, silently dropping the ones that are not tokens. */
static void bpe_emit_bytes(const df_tokenizer *t, const unsigned char *p, const sym_t *s, idvec *out) {
    for (size_t j = 0; j < s->n; j++) {
        unsigned char b = p[s->start + j];
        for (int k = 0; k < t->byte_enc_len[b]; k++) {
            int32_t b1 = t->byte_tok1[(unsigned char)t->byte_enc[b][k]];
            if (b1 >= 0) iv_push(out, b1);
        }
    }
}

/* One pre-tokenized piece of raw (sanitized) bytes. */
static void bpe_word(const df_tokenizer *t, work_t *w, const unsigned char *p, size_t n, idvec *out) {
    if (!n) return;
    if (t->ignore_merges) {
        if (!work_reserve_buf(w, 2 * n)) return;
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(w->buf + o, t->byte_enc[p[i]], t->byte_enc_len[p[i]]);
            o += t->byte_enc_len[p[i]];
        }
        int32_t id = text_to_token(t, w->buf, o);
        if (id >= 0) { iv_push(out, id); return; }
    }
    if (!work_reserve_sym(w, n)) return;
    for (size_t i = 0; i < n; i++) {
        sym_t *s = &w->sym[i];
        s->start = i;
        s->n = 1;
        s->prev = (int32_t)i - 1;
        s->next = i + 1 == n ? -1 : (int32_t)i + 1;
        s->sid = t->byte_sid[p[i]];
    }
    w->nheap = 0;
    for (size_t i = 1; i < n; i++) bpe_try_add(t, w, (int32_t)i - 1, (int32_t)i);
    while (w->nheap && !w->err) {
        bigram_t b = heap_pop(w, false);
        sym_t *L = &w->sym[b.left], *R = &w->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->sid != b.lsid || R->sid != b.rsid || L->next != b.right)
            continue;
        const merge_ent *m = merge_find(t, b.lsid, b.rsid);
        L->sid = m->sid;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) w->sym[R->next].prev = b.left;
        bpe_try_add(t, w, L->prev, b.left);
        bpe_try_add(t, w, b.left, L->next);
    }
    for (int32_t i = 0; i != -1; i = w->sym[i].next) {
        const sym_t *s = &w->sym[i];
        int32_t id = s->sid >= 0 ? t->sid_tok[s->sid] : -1;
        if (id >= 0) iv_push(out, id);
        else bpe_emit_bytes(t, p, s, out);
    }
}

/* ---- the piece cache ------------------------------------------------------------------------ */
/* Per-call cache of short pieces -> their ids (copied from where they were first emitted). */
enum { CACHE_BITS = 16, CACHE_MAXLEN = 48 };
typedef struct {
    uint64_t h;
    size_t off, out_pos;
    uint32_t len, nid;
} centry;

typedef struct {
    const df_tokenizer *t;
    work_t *w;
    idvec *out;
    const char *txt;
    centry *cache;
    size_t cache_used;
} bpe_ctx;

static void bpe_emit(void *ud, size_t off, size_t pl) {
    bpe_ctx *C = ud;
    if (C->w->err || C->out->err) return;
    const unsigned char *p = (const unsigned char *)C->txt + off;
    centry *ce = NULL;
    if (C->cache && pl <= CACHE_MAXLEN) {
        uint64_t h = df_tok_hash(p, pl) | 1;
        size_t mask = ((size_t)1 << CACHE_BITS) - 1, k = h & mask;
        for (;;) {
            centry *e = &C->cache[k];
            if (!e->h) { ce = e; break; }
            if (e->h == h && e->len == pl && !memcmp(C->txt + e->off, p, pl)) {
                for (uint32_t j = 0; j < e->nid; j++) iv_push(C->out, C->out->v[e->out_pos + j]);
                return;
            }
            k = (k + 1) & mask;
        }
        if (C->cache_used * 4 >= ((size_t)3 << CACHE_BITS)) ce = NULL; /* 75% full: stop adding */
    }
    size_t before = C->out->n;
    bpe_word(C->t, C->w, p, pl, C->out);
    if (ce && !C->w->err && !C->out->err) {
        ce->h = df_tok_hash(p, pl) | 1;
        ce->off = off;
        ce->len = (uint32_t)pl;
        ce->out_pos = before;
        ce->nid = (uint32_t)(C->out->n - before);
        C->cache_used++;
    }
}

int df_bpe_tokenize(const df_tokenizer *t, work_t *w, const char *raw, size_t len, idvec *out) {
    if (!len) return DF_OK;
    const char *txt, *mtext;
    char *own, *mown;
    size_t n;
    int rc = df_pretok_prepare(raw, len, &txt, &own, &mtext, &mown, &n);
    if (rc) return rc;
    bpe_ctx C = {.t = t, .w = w, .out = out, .txt = txt};
    if (n > 256) C.cache = calloc((size_t)1 << CACHE_BITS, sizeof(centry));
    rc = df_pretok_split(t, mtext, n, bpe_emit, &C, NULL);
    free(C.cache);
    free(own);
    free(mown);
    return rc;
}
