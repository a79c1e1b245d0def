/* gbnf_vocab.c — the vocabulary index grammars are matched against (df_gtok_index, gbnf.h):
 * every token's piece as llama.cpp's grammar sees it (control tokens with their text, the SPM
 * space marker as a space, byte tokens as their byte), the ids with a non-empty piece that are
 * not end-of-generation sorted by bytes, and the common prefix of neighbours.
 * Built lazily once per tokenizer (df_tokenizer_gtok_index) and immutable afterwards, so every
 * grammar of every request shares it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "text/gbnf.h"
#include "text/tokenizer_impl.h"

static int cmp_piece(const void *a, const void *b, void *ud) {
    const df_gtok_index *ix = ud;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int lx = ix->len[x], ly = ix->len[y];
    int c = memcmp(ix->blob + ix->off[x], ix->blob + ix->off[y], (size_t)(lx < ly ? lx : ly));
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

void df_gtok_index_free(df_gtok_index *ix) {
    if (!ix) return;
    free(ix->order);
    free(ix->lcp);
    free(ix->off);
    free(ix->len);
    free(ix->blob);
    free(ix->eog);
    free(ix);
}

static int build(const df_tokenizer *t, df_gtok_index **out) {
    *out = NULL;
    const int nv = df_tokenizer_n_vocab(t);
    df_gtok_index *ix = calloc(1, sizeof *ix);
    if (!ix) return df_err(DF_ERR_NOMEM, "grammar index: out of memory");
    ix->n_vocab = nv;
    ix->off = malloc(sizeof(uint32_t) * (size_t)nv);
    ix->len = malloc(sizeof(uint16_t) * (size_t)nv);
    ix->eog = calloc((size_t)nv, 1);
    ix->order = malloc(sizeof(int32_t) * (size_t)nv);
    ix->lcp = malloc(sizeof(uint16_t) * (size_t)nv);
    size_t cap = (size_t)nv * 8 + 64, used = 0;
    ix->blob = malloc(cap);
    char buf[1024];
    if (!ix->off || !ix->len || !ix->eog || !ix->order || !ix->lcp || !ix->blob) goto nomem;
    for (int id = 0; id < nv; id++) {
        int n = df_token_to_piece(t, id, true, buf, (int)sizeof buf);
        if (n < 0 || n > (int)sizeof buf) n = 0; /* > 1 KiB: never matched (no real token is) */
        if (used + (size_t)n > cap) {
            size_t nc = (used + (size_t)n) * 2;
            char *nb = realloc(ix->blob, nc);
            if (!nb) goto nomem;
            ix->blob = nb;
            cap = nc;
        }
        memcpy(ix->blob + used, buf, (size_t)n);
        ix->off[id] = (uint32_t)used;
        ix->len[id] = (uint16_t)n;
        used += (size_t)n;
        ix->eog[id] = df_token_is_eog(t, id);
        if (n > 0 && !ix->eog[id]) ix->order[ix->n_order++] = id;
        if (n > ix->max_len) ix->max_len = n;
    }
    qsort_r(ix->order, (size_t)ix->n_order, sizeof(int32_t), cmp_piece, ix);
    for (int k = 0; k < ix->n_order; k++) {
        if (k == 0) { ix->lcp[k] = 0; continue; }
        int32_t a = ix->order[k - 1], b = ix->order[k];
        int l = 0, m = ix->len[a] < ix->len[b] ? ix->len[a] : ix->len[b];
        const char *pa = ix->blob + ix->off[a], *pb = ix->blob + ix->off[b];
        while (l < m && pa[l] == pb[l]) l++;
        ix->lcp[k] = (uint16_t)l;
    }
    *out = ix;
    return DF_OK;
nomem:
    df_gtok_index_free(ix);
    return df_err(DF_ERR_NOMEM, "grammar index: out of memory");
}

int df_tokenizer_gtok_index(const df_tokenizer *tc, const df_gtok_index **out) {
    df_tokenizer *t = (df_tokenizer *)tc; /* the index is a cache: built once, then immutable */
    pthread_mutex_lock(&t->gtok_mu);
    int rc = DF_OK;
    if (!t->gtok) rc = build(t, &t->gtok);
    *out = t->gtok;
    pthread_mutex_unlock(&t->gtok_mu);
    return rc;
}
