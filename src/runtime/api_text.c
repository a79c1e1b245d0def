/* api_text.c — the public text API (deltafin.h): tokenize, pieces, special ids, chat
 * rendering with the model's template, the streaming detokenizer, UTF-8 validity. Thin
 * wrappers: the work is in src/text (tokenizer, detok.c, chat) and src/base/utf8; what is
 * added here is only the model (its tokenizer, chat template and BOS/EOS text).
 * Threading: as the functions wrapped (a model's tokenizer is immutable; a detokenizer is one
 * stream). */
#include "deltafin.h"
#include "base/utf8.h"
#include "model/model.h"
#include "text/chat.h"
#include "text/tokenizer.h"

/* ---- vocabulary / chat wrappers ------------------------------------------------------------ */

static int no_tok(const deltafin_model *m) {
    if (!m->tokenizer) return df_err(DF_ERR_UNSUPPORTED, "model has no tokenizer");
    return DF_OK;
}

int deltafin_tokenize(const deltafin_model *m, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *ids, int cap) {
    int rc = no_tok(m);
    if (rc < 0) return rc;
    return df_tokenize(m->tokenizer, text, len, add_special, parse_special, ids, cap);
}
int deltafin_token_to_piece(const deltafin_model *m, int32_t id, bool special, char *buf, int cap) {
    int rc = no_tok(m);
    if (rc < 0) return rc;
    return df_token_to_piece(m->tokenizer, id, special, buf, cap);
}
bool deltafin_token_is_eog(const deltafin_model *m, int32_t id) {
    return m->tokenizer && df_token_is_eog(m->tokenizer, id);
}
int32_t deltafin_token_bos(const deltafin_model *m) {
    return m->tokenizer ? df_tokenizer_bos(m->tokenizer) : -1;
}
int32_t deltafin_token_eos(const deltafin_model *m) {
    return m->tokenizer ? df_tokenizer_eos(m->tokenizer) : -1;
}

static char *piece_str(const deltafin_model *m, int32_t id) {
    if (id < 0) return NULL;
    char buf[256];
    int n = deltafin_token_to_piece(m, id, true, buf, (int)sizeof buf - 1);
    if (n < 0 || n >= (int)sizeof buf) return NULL;
    return df_strndup(buf, (size_t)n);
}

int deltafin_chat_render(const deltafin_model *m, const char *template_name,
                         const deltafin_chat_msg *msgs, int n_msgs, const char *tools_json,
                         bool add_generation_prompt, char **out) {
    *out = NULL;
    char *bos = piece_str(m, deltafin_token_bos(m));
    char *eos = piece_str(m, deltafin_token_eos(m));
    int rc = df_chat_render_msgs(deltafin_model_meta_str(m, "tokenizer.chat_template"), template_name, msgs,
                                 n_msgs, tools_json, add_generation_prompt, bos ? bos : "", eos ? eos : "",
                                 NULL, out);
    free(bos);
    free(eos);
    return rc;
}

/* ---- streaming detokenizer ------------------------------------------------------------------ */

struct deltafin_detok {
    const df_tokenizer *t;
    bool special;
    df_detok st;
    int cap;      /* bytes of buf: enough for any push (see df_detok_push) */
    char buf[];
};

deltafin_detok *deltafin_detok_create(const deltafin_model *m, bool special) {
    if (!m || no_tok(m) < 0) {
        if (!m) df_err(DF_ERR_INVALID, "deltafin_detok_create: no model");
        return NULL;
    }
    int cap = 3 * (df_tokenizer_max_piece_len(m->tokenizer) + 3);
    deltafin_detok *d = df_malloc(sizeof *d + (size_t)cap);
    if (!d) return NULL;
    d->t = m->tokenizer;
    d->special = special;
    d->cap = cap;
    df_detok_init(&d->st, special, false);
    return d;
}

int deltafin_detok_push(deltafin_detok *d, int32_t id, const char **text) {
    int n = df_detok_push(&d->st, d->t, id, d->buf, d->cap);
    *text = d->buf;
    return n;
}

int deltafin_detok_flush(deltafin_detok *d, const char **text) {
    int n = df_detok_flush(&d->st, d->buf, d->cap);
    *text = d->buf;
    return n;
}

void deltafin_detok_reset(deltafin_detok *d) { df_detok_init(&d->st, d->special, false); }

void deltafin_detok_free(deltafin_detok *d) { free(d); }

/* ---- UTF-8 ------------------------------------------------------------------------------------ */

size_t deltafin_utf8_valid_prefix(const char *s, size_t n) { return df_utf8_valid_prefix(s, n, NULL); }

size_t deltafin_utf8_sanitize(const char *s, size_t n, char *out) { return df_utf8_sanitize(s, n, out); }
