/* api_grammar.c — constrained sampling in the public API (deltafin.h "grammars"): a GBNF
 * grammar (text/gbnf.h) compiled against a vocabulary's pieces, the allowed-token mask per
 * step, lazy grammars that start at a trigger word (tool calls under tool_choice "auto"), and
 * the JSON-schema converter's entry point.
 * Invariant: the matcher's committed state is the grammar after every token accepted so far;
 * a lazy grammar that cannot take the text after its trigger turns itself off (generation goes
 * on unconstrained) rather than failing the request.
 * Threading: a grammar is one generation, used by one thread at a time; the vocabulary index
 * it points to is shared and immutable. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/grammar.h"
#include "text/gbnf.h"
#include "text/json_schema.h"
#include "text/tokenizer.h"

struct deltafin_grammar {
    df_gbnf *g;
    df_gmatch *m;
    const df_tokenizer *tok;
    const df_gtok_index *ix;
    uint8_t *allowed;      /* [n_vocab] */
    float *masked;         /* [n_vocab] */
    int n_vocab;
    /* lazy: unconstrained until one of the triggers appears in the accepted text */
    char **triggers;
    int n_triggers;
    size_t max_trigger;
    bool awaiting, off;
    char *tbuf;            /* the tail of the accepted text while awaiting */
    size_t tlen, tcap;
};

static int32_t token_of(void *ud, const char *text, size_t len) {
    const df_tokenizer *t = ud;
    int32_t ids[2];
    int n = df_tokenize(t, text, len, false, true, ids, 2);
    return n == 1 ? ids[0] : -1;
}

int deltafin_grammar_create(const deltafin_vocab *v, const char *gbnf, const char *root, deltafin_grammar **out) {
    *out = NULL;
    if (!v || !gbnf) return df_err(DF_ERR_INVALID, "grammar: no vocabulary or no grammar text");
    const df_tokenizer *t = (const df_tokenizer *)v;
    deltafin_grammar *g = calloc(1, sizeof *g);
    if (!g) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
    int rc = df_gbnf_parse(gbnf, root, token_of, (void *)t, &g->g);
    if (rc < 0) { free(g); return rc; }
    rc = df_tokenizer_gtok_index(t, &g->ix);
    if (rc < 0) { deltafin_grammar_free(g); return rc; }
    g->tok = t;
    g->n_vocab = g->ix->n_vocab;
    g->m = df_gmatch_create(g->g);
    g->allowed = malloc((size_t)g->n_vocab);
    g->masked = malloc(sizeof(float) * (size_t)g->n_vocab);
    if (!g->m || !g->allowed || !g->masked) {
        deltafin_grammar_free(g);
        return df_err(DF_ERR_NOMEM, "grammar: out of memory");
    }
    *out = g;
    return DF_OK;
}

int deltafin_grammar_check(const char *gbnf, const char *root) {
    df_gbnf *g = NULL;
    int rc = df_gbnf_parse(gbnf, root, NULL, NULL, &g);
    df_gbnf_free(g);
    return rc;
}

void deltafin_grammar_free(deltafin_grammar *g) {
    if (!g) return;
    df_gmatch_free(g->m);
    df_gbnf_free(g->g);
    free(g->allowed);
    free(g->masked);
    for (int i = 0; i < g->n_triggers; i++) free(g->triggers[i]);
    free(g->triggers);
    free(g->tbuf);
    free(g);
}

int deltafin_grammar_set_triggers(deltafin_grammar *g, const char *const *words, int n) {
    if (!g || n < 0 || (n > 0 && !words)) return df_err(DF_ERR_INVALID, "grammar: bad triggers");
    if (n == 0) return DF_OK;
    g->triggers = calloc((size_t)n, sizeof(char *));
    if (!g->triggers) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
    for (int i = 0; i < n; i++) {
        size_t l = words[i] ? strlen(words[i]) : 0;
        if (!l) return df_err(DF_ERR_INVALID, "grammar: empty trigger word");
        g->triggers[i] = strdup(words[i]);
        if (!g->triggers[i]) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
        g->n_triggers = i + 1;
        if (l > g->max_trigger) g->max_trigger = l;
    }
    g->tcap = g->max_trigger + (size_t)g->ix->max_len + 16;
    g->tbuf = malloc(g->tcap);
    if (!g->tbuf) return df_err(DF_ERR_NOMEM, "grammar: out of memory");
    g->awaiting = true;
    return DF_OK;
}

static const char *piece(const deltafin_grammar *g, int32_t id, int *len) {
    *len = g->ix->len[id];
    return g->ix->blob + g->ix->off[id];
}

bool deltafin_grammar_allows(deltafin_grammar *g, int32_t id) {
    if (!g || id < 0 || id >= g->n_vocab) return false;
    if (g->awaiting || g->off) return true;
    if (g->ix->eog[id]) return df_gmatch_can_end(g->m);
    int n;
    const char *p = piece(g, id, &n);
    return n > 0 && df_gmatch_allows(g->m, p, (size_t)n, id);
}

bool deltafin_grammar_done(const deltafin_grammar *g) {
    return g && !g->awaiting && !g->off && df_gmatch_done(g->m);
}

bool deltafin_grammar_active(const deltafin_grammar *g) { return g && !g->awaiting && !g->off; }

/* While awaiting a trigger: keep the text's tail, and when a trigger shows up, start the
 * grammar on the text from the trigger on. */
static int await_trigger(deltafin_grammar *g, const char *p, int n) {
    size_t keep = g->max_trigger - 1;
    if (g->tlen + (size_t)n > g->tcap) { /* keep only what a trigger could still start in */
        size_t drop = g->tlen > keep ? g->tlen - keep : 0;
        memmove(g->tbuf, g->tbuf + drop, g->tlen - drop);
        g->tlen -= drop;
    }
    if (g->tlen + (size_t)n > g->tcap) return DF_OK; /* (a piece longer than the buffer cannot hold) */
    size_t from = g->tlen > keep ? g->tlen - keep : 0;
    memcpy(g->tbuf + g->tlen, p, (size_t)n);
    g->tlen += (size_t)n;
    const char *best = NULL;
    for (int i = 0; i < g->n_triggers; i++) {
        const char *hit = memmem(g->tbuf + from, g->tlen - from, g->triggers[i], strlen(g->triggers[i]));
        if (hit && (!best || hit < best)) best = hit;
    }
    if (!best) return DF_OK;
    g->awaiting = false;
    int rc = df_gmatch_reset(g->m);
    if (rc < 0) return rc;
    rc = df_gmatch_accept(g->m, best, (size_t)(g->tbuf + g->tlen - best), -1);
    if (rc == DF_ERR_INVALID) {
        deltafin_log(DELTAFIN_LOG_DEBUG, "grammar: the text after the trigger does not fit the grammar; unconstrained");
        g->off = true;
        return DF_OK;
    }
    return rc;
}

int deltafin_grammar_accept(deltafin_grammar *g, int32_t id) {
    if (!g || id < 0 || id >= g->n_vocab) return df_err(DF_ERR_INVALID, "grammar: token id %d out of range", id);
    if (g->off) return DF_OK;
    int n;
    const char *p = piece(g, id, &n);
    if (g->awaiting) return g->ix->eog[id] ? DF_OK : await_trigger(g, p, n);
    if (g->ix->eog[id]) {
        if (df_gmatch_can_end(g->m)) return DF_OK;
        return df_err(DF_ERR_INVALID, "grammar: end of generation before the grammar is complete");
    }
    return df_gmatch_accept(g->m, p, (size_t)n, id);
}

int deltafin_grammar_apply(deltafin_grammar *g, float *logits, int n_vocab) {
    if (!g || !logits || n_vocab <= 0) return df_err(DF_ERR_INVALID, "grammar: bad arguments");
    if (g->awaiting || g->off) return n_vocab;
    int n = df_gmatch_mask(g->m, g->ix, g->allowed);
    if (n < 0) return n;
    for (int i = 0; i < n_vocab; i++)
        if (i >= g->n_vocab || !g->allowed[i]) logits[i] = -INFINITY;
    return n;
}

int32_t df_grammar_sample(deltafin_grammar *g, deltafin_sampler *s, const float *logits, int n_vocab) {
    int32_t id = df_sampler_sample_chain(s, logits, n_vocab);
    if (id < 0 || g->awaiting || g->off || deltafin_grammar_allows(g, id)) return id;
    if (n_vocab > g->n_vocab) {
        df_err(DF_ERR_INVALID, "grammar: %d logits for a vocabulary of %d", n_vocab, g->n_vocab);
        return -1;
    }
    memcpy(g->masked, logits, sizeof(float) * (size_t)n_vocab);
    int n = deltafin_grammar_apply(g, g->masked, n_vocab);
    if (n < 0) return -1;
    if (n == 0) {
        df_err(DF_ERR_INVALID, "grammar: no token of the vocabulary can continue the grammar here");
        return -1;
    }
    id = df_sampler_sample_chain(s, g->masked, n_vocab);
    if (id >= 0 && !g->allowed[id]) { /* every allowed token had -inf (e.g. a logit bias banned them) */
        df_err(DF_ERR_INVALID, "grammar: every token the grammar allows here is banned");
        return -1;
    }
    return id;
}

int deltafin_json_schema_to_grammar(const char *schema_json, char **out) {
    return df_json_schema_to_gbnf(schema_json, out);
}
