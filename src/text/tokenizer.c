/* tokenizer.c — df_tokenize: special-token partition (control / user-defined tokens found by
 * text, llama.cpp's tokenizer_st_partition), then SPM (spm.c) or byte-level BPE (bpe.c) on
 * every raw-text fragment; plus the tokenizer's accessors. The pieces are in vocab.c
 * (loading), pretok.c, bpe.c, spm.c and detok.c; tokenizer_impl.h holds what they share.
 * Ground truth for every behaviour is llama.cpp (src/llama-vocab.cpp, src/unicode.cpp).
 * Invariant: immutable after load; all entry points are thread-safe (scratch per call). */
#include <ctype.h>
#include <limits.h>

#include "text/tokenizer_impl.h"

/* ------------------------------------------------------------------------------------------
 * special-token partitioning
 * ---------------------------------------------------------------------------------------- */
typedef struct {
    int32_t tok; /* -1: raw text */
    size_t off, len;
} frag_t;

typedef struct {
    frag_t *v;
    size_t n, cap;
    int err;
} fragvec;

static void fv_push(fragvec *a, int32_t tok, size_t off, size_t len) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 16;
        frag_t *p = realloc(a->v, nc * sizeof *p);
        if (!p) { a->err = DF_ERR_NOMEM; return; }
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n].tok = tok;
    a->v[a->n].off = off;
    a->v[a->n].len = len;
    a->n++;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0 || nn > hn) return NULL;
    return memmem(h, hn, nd, nn);
}

static int partition(const df_tokenizer *t, const char *text, size_t len, bool parse_special, fragvec *out) {
    fragvec cur = {0}, nxt = {0};
    fv_push(&cur, -1, 0, len);
    for (int si = 0; si < t->n_special && !cur.err && !nxt.err; si++) {
        int32_t id = t->special[si];
        int a = t->attr[id];
        if (!parse_special && (a & (DF_TATTR_CONTROL | DF_TATTR_UNKNOWN))) continue;
        const char *tt = strtab_str(&t->st, t->tok_sid[id]);
        size_t tl = t->st.len[t->tok_sid[id]];
        if (!find_bytes(text, len, tt, tl)) continue; /* fast reject */
        nxt.n = 0;
        for (size_t k = 0; k < cur.n; k++) {
            frag_t f = cur.v[k];
            if (f.tok >= 0) { fv_push(&nxt, f.tok, 0, 0); continue; }
            size_t base = f.off, blen = f.len;
            for (;;) {
                const char *m = find_bytes(text + base, blen, tt, tl);
                if (!m) { fv_push(&nxt, -1, base, blen); break; }
                size_t mo = (size_t)(m - text);
                if (mo > base) {
                    size_t ll = mo - base;
                    if (a & DF_TATTR_LSTRIP)
                        while (ll > 0 && isspace((unsigned char)text[base + ll - 1])) ll--;
                    if (ll > 0) fv_push(&nxt, -1, base, ll);
                }
                fv_push(&nxt, id, 0, 0);
                size_t ro = mo + tl, rl = base + blen - ro;
                if (rl == 0) break;
                if (a & DF_TATTR_RSTRIP)
                    while (rl > 0 && isspace((unsigned char)text[ro])) { ro++; rl--; }
                if (rl == 0) break;
                base = ro;
                blen = rl;
            }
        }
        fragvec tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    free(nxt.v);
    if (cur.err || nxt.err) { free(cur.v); return df_err(DF_ERR_NOMEM, "tokenizer: out of memory"); }
    *out = cur;
    return DF_OK;
}

/* ------------------------------------------------------------------------------------------
 * tokenize
 * ---------------------------------------------------------------------------------------- */
static int tokenize_vec(const df_tokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, idvec *out) {
    if (!t || (!text && len)) return df_err(DF_ERR_INVALID, "tokenize: bad arguments");
    fragvec fr = {0};
    if (len) {
        int rc = partition(t, text, len, parse_special, &fr);
        if (rc) return rc;
    }
    work_t w = {0};
    int rc = DF_OK;
    if (t->type == DF_TOK_SPM) {
        bool prev_special = true;
        if (add_special && t->add_bos && t->bos >= 0) iv_push(out, t->bos);
        char *esc = NULL;
        size_t esc_cap = 0;
        for (size_t k = 0; k < fr.n && !rc; k++) {
            frag_t f = fr.v[k];
            if (f.tok >= 0) { iv_push(out, f.tok); prev_special = true; continue; }
            rc = df_spm_fragment(t, &w, text + f.off, f.len, t->add_space_prefix && prev_special, &esc, &esc_cap, out);
            prev_special = false;
        }
        free(esc);
        if (add_special && t->add_eos && t->eos >= 0) iv_push(out, t->eos);
    } else {
        if (add_special && t->add_bos && t->bos >= 0) iv_push(out, t->bos);
        for (size_t k = 0; k < fr.n && !rc && !w.err && !out->err; k++) {
            frag_t f = fr.v[k];
            if (f.tok >= 0) { iv_push(out, f.tok); continue; }
            rc = df_bpe_tokenize(t, &w, text + f.off, f.len, out);
        }
        if (add_special && t->add_eos && t->eos >= 0) iv_push(out, t->eos);
    }
    if (!rc && (w.err || out->err)) rc = df_err(DF_ERR_NOMEM, "tokenizer: out of memory");
    work_free(&w);
    free(fr.v);
    return rc;
}

int df_tokenize(const df_tokenizer *t, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t *ids, int cap) {
    idvec out = {0};
    int rc = tokenize_vec(t, text, len, add_special, parse_special, &out);
    if (rc) { free(out.v); return rc; }
    if (out.n > INT_MAX) { free(out.v); return df_err(DF_ERR_RANGE, "tokenize: too many tokens"); }
    size_t nc = cap > 0 ? (size_t)cap : 0;
    if (ids && nc && out.n) memcpy(ids, out.v, (out.n < nc ? out.n : nc) * sizeof *ids);
    int n = (int)out.n;
    free(out.v);
    return n;
}

int df_tokenize_alloc(const df_tokenizer *t, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t **ids) {
    if (!ids) return df_err(DF_ERR_INVALID, "tokenize: ids is NULL");
    *ids = NULL;
    idvec out = {0};
    int rc = tokenize_vec(t, text, len, add_special, parse_special, &out);
    if (rc) { free(out.v); return rc; }
    if (out.n > INT_MAX) { free(out.v); return df_err(DF_ERR_RANGE, "tokenize: too many tokens"); }
    if (!out.n) { free(out.v); return 0; }
    *ids = out.v;
    return (int)out.n;
}

/* ------------------------------------------------------------------------------------------
 * accessors
 * ---------------------------------------------------------------------------------------- */
int32_t df_token_lookup(const df_tokenizer *t, const char *s, size_t len) { return text_to_token(t, s, len); }
int df_token_attr(const df_tokenizer *t, int32_t id) {
    return (t && id >= 0 && id < t->n_vocab) ? t->attr[id] : 0;
}
bool df_token_is_eog(const df_tokenizer *t, int32_t id) {
    if (!t || id < 0) return false;
    int lo = 0, hi = t->n_eog - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t->eog[mid] == id) return true;
        if (t->eog[mid] < id) lo = mid + 1;
        else hi = mid - 1;
    }
    return false;
}
bool df_token_is_control(const df_tokenizer *t, int32_t id) {
    return (t && id >= 0 && id < t->n_vocab) && (t->attr[id] & DF_TATTR_CONTROL);
}
int df_tokenizer_type(const df_tokenizer *t) { return t->type; }
const char *df_tokenizer_pre(const df_tokenizer *t) { return t->pre_name; }
int df_tokenizer_n_vocab(const df_tokenizer *t) { return t->n_vocab; }
int df_tokenizer_max_piece_len(const df_tokenizer *t) { return t->max_piece; }
int32_t df_tokenizer_bos(const df_tokenizer *t) { return t->bos; }
int32_t df_tokenizer_eos(const df_tokenizer *t) { return t->eos; }
int32_t df_tokenizer_eot(const df_tokenizer *t) { return t->eot; }
int32_t df_tokenizer_nl(const df_tokenizer *t) { return t->nl; }
bool df_tokenizer_add_bos(const df_tokenizer *t) { return t->add_bos; }
bool df_tokenizer_add_eos(const df_tokenizer *t) { return t->add_eos; }
bool df_tokenizer_add_space_prefix(const df_tokenizer *t) { return t->add_space_prefix; }
int df_tokenizer_eog_ids(const df_tokenizer *t, const int32_t **ids) {
    *ids = t->eog;
    return t->n_eog;
}
