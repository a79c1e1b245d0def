/* detok.c — token ids back to bytes: the pieces (built once at load, llama.cpp's
 * token_to_piece with special=true), df_token_to_piece, llama.cpp's llama_detokenize with its
 * clean_spaces rules, and the streaming detokenizer that only ever releases whole, valid
 * UTF-8 characters (the engine's one place for that; deltafin_detok wraps it).
 * Invariant: pieces are immutable after load; a df_detok is owned by one stream. */
#include <limits.h>

#include "text/tokenizer_impl.h"

/* ---- pieces, built at load ------------------------------------------------------------------ */
typedef struct {
    char *p;
    size_t n, cap;
    int err;
} sbuf;

static void sb_put(sbuf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) { b->err = DF_ERR_NOMEM; return; }
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* BPE: byte-level code points back to bytes; anything else becomes llama.cpp's
 * llama_decode_text fallback text "[UNK_BYTE_0x<utf8 hex><token text>]". */
static void bpe_piece(const char *txt, size_t n, sbuf *b) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = df_utf8_decode(txt + i, n - i, DF_UTF8_PERMISSIVE, &cp);
        if (l <= 0) { cp = 0xFFFD; l = 1; }
        i += (size_t)l;
        int by = df_bpe_byte_inv(cp);
        if (by >= 0) {
            unsigned char c = (unsigned char)by;
            sb_put(b, &c, 1);
            continue;
        }
        char u[4], hx[16];
        int ul = df_utf8_encode(cp > 0x10FFFF ? 0xFFFD : cp, u);
        sb_put(b, "[UNK_BYTE_0x", 12);
        for (int k = 0; k < ul; k++) {
            snprintf(hx, sizeof hx, "%02x", (unsigned char)u[k]);
            sb_put(b, hx, 2);
        }
        sb_put(b, txt, n);
        sb_put(b, "]", 1);
    }
}

static void build_piece(const df_tokenizer *t, int32_t id, sbuf *b) {
    const char *txt = strtab_str(&t->st, t->tok_sid[id]);
    size_t n = t->st.len[t->tok_sid[id]];
    int a = t->attr[id];
    if (a & (DF_TATTR_UNKNOWN | DF_TATTR_CONTROL | DF_TATTR_USER_DEFINED)) { sb_put(b, txt, n); return; }
    if (a & DF_TATTR_NORMAL) {
        if (t->type == DF_TOK_BPE) { bpe_piece(txt, n, b); return; }
        for (size_t i = 0; i < n; i++) { /* SPM: U+2581 -> space */
            if (i + 3 <= n && !memcmp(txt + i, "\xE2\x96\x81", 3)) { sb_put(b, " ", 1); i += 2; }
            else sb_put(b, txt + i, 1);
        }
        return;
    }
    if (a & DF_TATTR_BYTE) {
        /* llama.cpp: strtol of text[3..5) in base 16 */
        char hx[3] = {0};
        if (n >= 4) { hx[0] = txt[3]; hx[1] = n >= 5 ? txt[4] : 0; }
        unsigned char c = (unsigned char)strtol(hx, NULL, 16);
        sb_put(b, &c, 1);
        return;
    }
    /* unused / undefined: empty */
}

int df_detok_build_pieces(df_tokenizer *t) {
    const int32_t nv = t->n_vocab;
    sbuf b = {0};
    t->piece_off = df_malloc(((size_t)nv + 1) * sizeof(size_t));
    if (!t->piece_off) return DF_ERR_NOMEM;
    size_t longest = 0;
    for (int32_t i = 0; i < nv; i++) {
        t->piece_off[i] = b.n;
        build_piece(t, i, &b);
        if (b.n - t->piece_off[i] > longest) longest = b.n - t->piece_off[i];
    }
    t->piece_off[nv] = b.n;
    if (b.err) { free(b.p); return df_err(DF_ERR_NOMEM, "out of memory"); }
    t->piece_blob = b.p ? b.p : df_malloc(1);
    if (!t->piece_blob) return DF_ERR_NOMEM;
    t->max_piece = longest > INT_MAX / 4 ? INT_MAX / 4 : (int)longest;
    return DF_OK;
}

int df_token_to_piece_ex(const df_tokenizer *t, int32_t id, bool special, int lstrip, char *buf, int cap) {
    if (!t || id < 0 || id >= t->n_vocab) return df_err(DF_ERR_INVALID, "token id %d out of range", (int)id);
    if (!special && (t->attr[id] & (DF_TATTR_UNKNOWN | DF_TATTR_CONTROL))) return 0;
    size_t n;
    const char *p = piece_ptr(t, id, &n);
    for (int i = 0; i < lstrip && n && *p == ' '; i++) { p++; n--; }
    if (n > INT_MAX) return df_err(DF_ERR_RANGE, "piece too long");
    if (buf && cap > 0) memcpy(buf, p, n < (size_t)cap ? n : (size_t)cap);
    return (int)n;
}

int df_token_to_piece(const df_tokenizer *t, int32_t id, bool special, char *buf, int cap) {
    return df_token_to_piece_ex(t, id, special, 0, buf, cap);
}

int df_detokenize(const df_tokenizer *t, const int32_t *ids, int n, bool remove_special,
                  bool unparse_special, char *buf, int cap) {
    if (!t || (n > 0 && !ids) || n < 0) return df_err(DF_ERR_INVALID, "detokenize: bad arguments");
    int lstrip = t->add_space_prefix ? 1 : 0;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) { lstrip = 0; ids++; n--; }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    size_t total = 0;
    char *tmp = NULL;
    /* assemble into tmp (clean_spaces rewrites in place) */
    for (int pass = 0; pass < 2; pass++) {
        size_t o = 0;
        int ls = lstrip;
        for (int i = 0; i < n; i++) {
            int r = df_token_to_piece_ex(t, ids[i], unparse_special, ls, pass ? tmp + o : NULL, pass ? INT_MAX : 0);
            ls = 0;
            if (r < 0) { free(tmp); return r; }
            o += (size_t)r;
        }
        if (!pass) {
            total = o;
            tmp = malloc(total + 1);
            if (!tmp) return df_err(DF_ERR_NOMEM, "out of memory");
        }
    }
    if (t->clean_spaces && total) {
        char *x = tmp;
        size_t n1 = total, m = 1;
        for (size_t i = 1; i < n1; i++) { /* " ?", " !", " .", " ," */
            char c = x[i];
            if (x[i - 1] == ' ' && (c == '?' || c == '!' || c == '.' || c == ',')) m--;
            x[m++] = c;
        }
        size_t n2 = m;
        m = 1;
        for (size_t i = 1; i < n2; i++) { /* " ' " -> "'" */
            char c = x[i];
            if (c == '\'' && i + 1 < n2 && x[i - 1] == ' ' && x[i + 1] == ' ') {
                m--;
                x[++i] = '\0';
            }
            x[m++] = c;
        }
        size_t n3 = m;
        m = 1;
        for (size_t i = 1; i < n3; i++) { /* " 's" " 'm" " 're" " 've" */
            char c = x[i];
            if (x[i - 1] == ' ' && c == '\'' && i + 1 < n3) {
                char c1 = x[i + 1];
                if (c1 == 's' || c1 == 'm') m--;
                else if (i + 2 < n3) {
                    char c2 = x[i + 2];
                    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e')) m--;
                }
            }
            x[m++] = c;
        }
        total = m;
    }
    if (total > INT_MAX) { free(tmp); return df_err(DF_ERR_RANGE, "detokenize: text too long"); }
    if (buf && cap > 0) memcpy(buf, tmp, total < (size_t)cap ? total : (size_t)cap);
    free(tmp);
    return (int)total;
}

/* ---- streaming detokenizer ------------------------------------------------------------------ */
void df_detok_init(df_detok *d, bool special, bool strip_leading_space) {
    memset(d, 0, sizeof *d);
    d->special = special;
    d->strip_space = strip_leading_space;
}

/* Process pend ++ p: write complete characters (U+FFFD for each maximal invalid subpart) to
 * out (if non-NULL), return bytes produced; *keep receives the number of trailing bytes to
 * hold (a valid but incomplete sequence, at most 3 bytes). */
static size_t detok_run(const unsigned char *pend, int np, const unsigned char *p, size_t n,
                        char *out, int *keep) {
    char tmp[4];
    size_t total = (size_t)np + n, i = 0, o = 0;
    while (i < total) {
        size_t avail = total - i < 4 ? total - i : 4;
        for (size_t k = 0; k < avail; k++) {
            size_t idx = i + k;
            tmp[k] = (char)(idx < (size_t)np ? pend[idx] : p[idx - (size_t)np]);
        }
        uint32_t cp;
        int l = df_utf8_decode(tmp, avail, DF_UTF8_STRICT, &cp);
        if (l > 0) {
            if (out) memcpy(out + o, tmp, (size_t)l);
            o += (size_t)l;
            i += (size_t)l;
        } else if (l < 0) {
            break; /* incomplete tail: hold */
        } else {
            if (out) memcpy(out + o, DF_UTF8_REPLACEMENT, 3);
            o += 3;
            i += df_utf8_bad_span(tmp, avail);
        }
    }
    *keep = (int)(total - i);
    return o;
}

int df_detok_push(df_detok *d, const df_tokenizer *t, int32_t id, char *out, int cap) {
    if (!d || !t || id < 0 || id >= t->n_vocab) return df_err(DF_ERR_INVALID, "detok: token id %d out of range", (int)id);
    size_t n = 0;
    const char *p = "";
    if (d->special || !(t->attr[id] & (DF_TATTR_UNKNOWN | DF_TATTR_CONTROL))) p = piece_ptr(t, id, &n);
    if (d->strip_space && n && *p == ' ') { p++; n--; }
    int keep;
    size_t need = detok_run(d->pend, d->n_pend, (const unsigned char *)p, n, NULL, &keep);
    if (need > (size_t)(cap < 0 ? 0 : cap)) return df_err(DF_ERR_RANGE, "detok: output buffer too small (%zu needed)", need);
    d->strip_space = false;
    size_t got = detok_run(d->pend, d->n_pend, (const unsigned char *)p, n, out, &keep);
    unsigned char tail[8];
    size_t total = (size_t)d->n_pend + n;
    for (int k = 0; k < keep; k++) {
        size_t idx = total - (size_t)keep + (size_t)k;
        tail[k] = idx < (size_t)d->n_pend ? d->pend[idx] : (unsigned char)p[idx - (size_t)d->n_pend];
    }
    memcpy(d->pend, tail, (size_t)keep);
    d->n_pend = keep;
    return (int)got;
}

int df_detok_flush(df_detok *d, char *out, int cap) {
    if (!d) return df_err(DF_ERR_INVALID, "detok: NULL");
    if (!d->n_pend) return 0;
    if (cap < 3) return df_err(DF_ERR_RANGE, "detok: output buffer too small");
    memcpy(out, DF_UTF8_REPLACEMENT, 3); /* an incomplete sequence is one maximal subpart */
    d->n_pend = 0;
    return 3;
}
