/* spm.c — SentencePiece (tokenizer.ggml.model "llama") as llama.cpp's llm_tokenizer_spm:
 * spaces become U+2581 (plus a dummy prefix after BOS/special tokens when add_space_prefix),
 * symbols are code points by lead-byte length, merges follow the best score (leftmost on
 * ties) over the whole fragment, and unmerged symbols fall back to byte tokens.
 * Invariant: reads the immutable df_tokenizer only; scratch is the caller's work_t. */
#include "text/tokenizer_impl.h"

#define LOWER_ONE_EIGHTH_BLOCK "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* Byte fallback (llama.cpp byte_to_token): "<0xXX>", else the single byte as text. */
int32_t df_spm_byte_token(const df_tokenizer *t, unsigned char b) {
    static const char hex[] = "0123456789ABCDEF";
    char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = text_to_token(t, buf, 6);
    if (id >= 0) return id;
    return t->byte_tok1[b];
}

static void spm_try_add(const df_tokenizer *t, work_t *w, const char *text, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    size_t n = w->sym[l].n + w->sym[r].n;
    int32_t id = text_to_token(t, text + w->sym[l].start, n);
    if (id < 0) return;
    bigram_t b = {.score = t->score[id], .left = l, .right = r, .size = n};
    heap_push(w, &b, true);
}

static void spm_emit_symbol(const df_tokenizer *t, const char *text, const sym_t *s, idvec *out) {
    int32_t id = text_to_token(t, text + s->start, s->n);
    if (id >= 0) { iv_push(out, id); return; }
    /* Every merged symbol is a token; what is left is an unmerged character: bytes. */
    for (size_t j = 0; j < s->n; j++) {
        int32_t b = df_spm_byte_token(t, (unsigned char)text[s->start + j]);
        if (b < 0) b = t->unk; /* llama.cpp would throw here */
        if (b >= 0) iv_push(out, b);
    }
}

/* text: already escaped (spaces -> U+2581) */
static void spm_tokenize(const df_tokenizer *t, work_t *w, const char *text, size_t len, idvec *out) {
    if (!len) return;
    if (!work_reserve_sym(w, len)) return;
    size_t nsym = 0, off = 0;
    while (off < len) {
        size_t l = (size_t)df_utf8_lead_len((unsigned char)text[off]);
        if (l > len - off) l = len - off;
        sym_t *s = &w->sym[nsym];
        s->start = off;
        s->n = l;
        s->prev = (int32_t)nsym - 1;
        off += l;
        s->next = off == len ? -1 : (int32_t)nsym + 1;
        s->sid = -1;
        nsym++;
    }
    w->nheap = 0;
    for (size_t i = 1; i < nsym; i++) spm_try_add(t, w, text, (int32_t)i - 1, (int32_t)i);
    while (w->nheap && !w->err) {
        bigram_t b = heap_pop(w, true);
        sym_t *L = &w->sym[b.left], *R = &w->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.size) continue;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) w->sym[R->next].prev = b.left;
        spm_try_add(t, w, text, L->prev, b.left);
        spm_try_add(t, w, text, b.left, L->next);
    }
    for (int32_t i = 0; i != -1; i = w->sym[i].next) spm_emit_symbol(t, text, &w->sym[i], out);
}

/* SPM merges are global (one priority queue over the whole fragment), which is quadratic-ish
 * in cache misses for long texts. When no vocabulary token contains U+2581 directly after a
 * different character, no merge can ever span the symbol boundary in front of a U+2581 that
 * follows a non-U+2581 symbol; merges on either side then commute, so cutting the text there
 * and running each segment alone gives exactly the same tokens. Symbols are llama.cpp's
 * (lead-byte length), so an invalid lead byte that swallows a following U+2581 is respected. */
static void spm_tokenize_split(const df_tokenizer *t, work_t *w, const char *text, size_t len, idvec *out) {
    if (!t->spm_split_ws) { spm_tokenize(t, w, text, len, out); return; }
    size_t seg = 0, off = 0;
    bool prev_lb = false;
    while (off < len) {
        size_t l = (size_t)df_utf8_lead_len((unsigned char)text[off]);
        if (l > len - off) l = len - off;
        bool lb = l == 3 && !memcmp(text + off, LOWER_ONE_EIGHTH_BLOCK, 3);
        if (lb && !prev_lb && off > seg) {
            spm_tokenize(t, w, text + seg, off - seg, out);
            seg = off;
        }
        prev_lb = lb;
        off += l;
    }
    spm_tokenize(t, w, text + seg, len - seg, out);
}

/* The condition of spm_tokenize_split, checked once at load. */
bool df_spm_can_split(const df_tokenizer *t) {
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const char *s = strtab_str(&t->st, t->tok_sid[i]);
        size_t l = t->st.len[t->tok_sid[i]];
        for (size_t k = 1; k + 3 <= l; k++) {
            if (memcmp(s + k, LOWER_ONE_EIGHTH_BLOCK, 3)) continue;
            if (k >= 3 && !memcmp(s + k - 3, LOWER_ONE_EIGHTH_BLOCK, 3)) continue;
            return false; /* e.g. "a\u2581b": cannot cut safely */
        }
    }
    return true;
}

int df_spm_fragment(const df_tokenizer *t, work_t *w, const char *text, size_t len, bool prefix,
                    char **esc, size_t *esc_cap, idvec *out) {
    size_t need = 3 * (len + 1);
    if (need > *esc_cap) {
        char *p = realloc(*esc, need);
        if (!p) return df_err(DF_ERR_NOMEM, "tokenizer: out of memory");
        *esc = p;
        *esc_cap = need;
    }
    char *e = *esc;
    size_t o = 0;
    if (prefix) { memcpy(e, LOWER_ONE_EIGHTH_BLOCK, 3); o = 3; }
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == ' ') { memcpy(e + o, LOWER_ONE_EIGHTH_BLOCK, 3); o += 3; }
        else e[o++] = c;
    }
    spm_tokenize_split(t, w, e, o, out);
    return DF_OK;
}
