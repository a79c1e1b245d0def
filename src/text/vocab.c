/* vocab.c — df_tokenizer_load_ex: the tokenizer.ggml.* KVs of a GGUF become a df_tokenizer
 * (token texts in a string intern table, scores, attributes, BPE merges, special ids, the
 * end-of-generation set), with llama.cpp's defaults and per-model quirks (llama-vocab.cpp
 * llama_vocab::impl::load). Each step below is one function, run in llama.cpp's order: later
 * steps read what earlier ones decided (attributes before the special-token cache, the cache
 * before the pieces, everything before the newline token is tokenized).
 * Invariant: on failure nothing leaks and *out stays NULL. */
#include <ctype.h>
#include <limits.h>

#include "text/tokenizer_impl.h"

/* ---- string intern table ------------------------------------------------------------------ */
void strtab_free(strtab *st) {
    free(st->arena);
    free(st->off);
    free(st->len);
    free(st->ht);
    free(st->hh);
    memset(st, 0, sizeof *st);
}

int strtab_init(strtab *st, int32_t expect) {
    memset(st, 0, sizeof *st);
    size_t cap = 64;
    while (cap < (size_t)expect * 2 + 16) cap <<= 1;
    st->ht = df_malloc(cap * sizeof(int32_t));
    if (!st->ht) return DF_ERR_NOMEM;
    memset(st->ht, 0xff, cap * sizeof(int32_t));
    st->ht_mask = cap - 1;
    return DF_OK;
}

static int strtab_grow_ht(strtab *st) {
    size_t cap = (st->ht_mask + 1) * 2;
    int32_t *ht = df_malloc(cap * sizeof(int32_t));
    if (!ht) return DF_ERR_NOMEM;
    memset(ht, 0xff, cap * sizeof(int32_t));
    for (int32_t id = 0; id < st->n; id++) {
        size_t i = st->hh[id] & (cap - 1);
        while (ht[i] >= 0) i = (i + 1) & (cap - 1);
        ht[i] = id;
    }
    free(st->ht);
    st->ht = ht;
    st->ht_mask = cap - 1;
    return DF_OK;
}

static int strtab_grow_ids(strtab *st) {
    int32_t nc = st->cap ? (st->cap > INT32_MAX / 2 ? INT32_MAX : st->cap * 2) : 1024;
    size_t *o = df_realloc(st->off, (size_t)nc * sizeof *o);
    if (!o) return DF_ERR_NOMEM;
    st->off = o;
    uint32_t *l = df_realloc(st->len, (size_t)nc * sizeof *l);
    if (!l) return DF_ERR_NOMEM;
    st->len = l;
    uint64_t *hh = df_realloc(st->hh, (size_t)nc * sizeof *hh);
    if (!hh) return DF_ERR_NOMEM;
    st->hh = hh;
    st->cap = nc;
    return DF_OK;
}

int32_t strtab_intern(strtab *st, const char *s, size_t n) {
    if (n > UINT32_MAX) return df_err(DF_ERR_RANGE, "token text too long");
    uint64_t h = df_tok_hash(s, n);
    if (st->hh) {
        int32_t id = strtab_find_h(st, s, n, h);
        if (id >= 0) return id;
    }
    if (st->n == INT32_MAX) return df_err(DF_ERR_RANGE, "too many strings");
    int rc;
    if ((size_t)(st->n + 1) * 2 > st->ht_mask + 1 && (rc = strtab_grow_ht(st))) return rc;
    if (st->n == st->cap && (rc = strtab_grow_ids(st))) return rc;
    if (st->arena_len + n + 1 > st->arena_cap) {
        size_t nc = st->arena_cap ? st->arena_cap : 65536;
        while (nc < st->arena_len + n + 1) nc *= 2;
        char *a = df_realloc(st->arena, nc);
        if (!a) return DF_ERR_NOMEM;
        st->arena = a;
        st->arena_cap = nc;
    }
    int32_t id = st->n++;
    st->off[id] = st->arena_len;
    st->len[id] = (uint32_t)n;
    st->hh[id] = h;
    memcpy(st->arena + st->arena_len, s, n);
    st->arena[st->arena_len + n] = 0;
    st->arena_len += n + 1;
    size_t i = h & st->ht_mask;
    while (st->ht[i] >= 0) i = (i + 1) & st->ht_mask;
    st->ht[i] = id;
    return id;
}

/* ---- helpers ------------------------------------------------------------------------------ */
static bool tok_is(const df_tokenizer *t, int32_t id, const char *s) {
    int32_t sid = t->tok_sid[id];
    size_t l = strlen(s);
    return t->st.len[sid] == l && !memcmp(strtab_str(&t->st, sid), s, l);
}

/* The token id of each text of a NULL-terminated list (the last id of duplicate texts, i.e.
 * llama.cpp's token_to_id, the only ids its text scans can find): calls fn(t, id, ud). */
static void each_token_of(df_tokenizer *t, const char *const *list, void (*fn)(df_tokenizer *, int32_t, void *),
                          void *ud) {
    for (int i = 0; list[i]; i++) {
        int32_t id = text_to_token(t, list[i], strlen(list[i]));
        if (id >= 0) fn(t, id, ud);
    }
}

static void keep_max(df_tokenizer *t, int32_t id, void *ud) {
    int32_t *best = ud;
    if (id > *best) *best = id;
}

static void warn(const df_tokenizer_opts *o, const char *fmt, const char *a, long b) {
    if (o && o->quiet) return;
    df_log(DF_LOG_WARN, fmt, a, b);
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* tokenizer.ggml.model and .pre: the type, llama.cpp's defaults for it, the pre-tokenizer. */
static int load_type(const df_gguf *g, const df_tokenizer_opts *opts, df_tokenizer *t) {
    const char *model = NULL;
    int rc = df_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.model missing");
    if (rc) return rc;
    if (!strcmp(model, "llama")) t->type = DF_TOK_SPM;
    else if (!strcmp(model, "gpt2")) t->type = DF_TOK_BPE;
    else return df_err(DF_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%s' is not supported (llama, gpt2 are)", model);
    t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = t->mask = t->nl = -1;
    t->fim_pre = t->fim_suf = t->fim_mid = t->fim_pad = t->fim_rep = t->fim_sep = -1;

    const char *pre = NULL;
    if (opts && opts->pre_override) pre = opts->pre_override;
    else {
        rc = df_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
        if (rc && rc != DF_ERR_NOTFOUND) return rc;
    }
    if (t->type == DF_TOK_SPM) {
        t->bos = 1; t->eos = 2; t->unk = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
        t->clean_spaces = false;
    } else {
        t->bos = 11; t->eos = 11;
        t->clean_spaces = true;
        if (!pre || !*pre) {
            if (!(opts && opts->quiet))
                df_log(DF_LOG_WARN, "tokenizer: tokenizer.ggml.pre missing, using 'default' (generation quality will be degraded)");
            pre = "default";
        }
        t->pre = df_pretok_lookup(pre);
        if (!t->pre) return df_err(DF_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported", pre);
        snprintf(t->pre_name, sizeof t->pre_name, "%s", pre);
        int f = t->pre->flags;
        if (f & PF_IGNORE_MERGES) t->ignore_merges = true;
        if (f & PF_ADD_BOS) t->add_bos = true;
        if (f & PF_NO_CLEAN_SPACES) t->clean_spaces = false;
        if (f & PF_BOS_NULL) t->bos = -1;
    }
    bool b;
    rc = df_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b);
    if (rc == DF_OK) t->add_space_prefix = b;
    else if (rc != DF_ERR_NOTFOUND) return rc;
    return DF_OK;
}

static int token_attr_of_type(int32_t type) {
    switch (type) {
    case 2: return DF_TATTR_UNKNOWN;
    case 5: return DF_TATTR_UNUSED;
    case 1: return DF_TATTR_NORMAL;
    case 3: return DF_TATTR_CONTROL;
    case 4: return DF_TATTR_USER_DEFINED;
    case 6: return DF_TATTR_BYTE;
    default: return DF_TATTR_UNDEFINED;
    }
}

/* tokenizer.ggml.scores / token_type: NULL when absent, DF_ERR_FORMAT when short/ill-typed. */
static int load_scores_types(const df_gguf *g, uint64_t n_tok, const float **scores, const int32_t **types) {
    uint64_t ns;
    *scores = NULL;
    *types = NULL;
    int rc = df_gguf_get_arr(g, "tokenizer.ggml.scores", DF_GGUF_F32, (const void **)scores, &ns);
    if (rc == DF_ERR_NOTFOUND) *scores = NULL;
    else if (rc) return rc;
    else if (ns < n_tok)
        return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores has %llu < %llu entries",
                      (unsigned long long)ns, (unsigned long long)n_tok);
    const df_gguf_kv *kv = df_gguf_find(g, "tokenizer.ggml.token_type");
    if (!kv) return DF_OK;
    if (kv->type != DF_GGUF_ARRAY || (kv->arr_type != DF_GGUF_I32 && kv->arr_type != DF_GGUF_U32))
        return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type must be an i32 array");
    if (kv->arr_n < n_tok)
        return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type has %llu < %llu entries",
                      (unsigned long long)kv->arr_n, (unsigned long long)n_tok);
    *types = kv->arr;
    return DF_OK;
}

/* tokenizer.ggml.tokens (+ scores, token types): texts interned, attributes from types. */
static int load_tokens(const df_gguf *g, df_tokenizer *t) {
    const df_gguf_str *toks;
    uint64_t n_tok;
    int rc = df_gguf_get_arr(g, "tokenizer.ggml.tokens", DF_GGUF_STRING, (const void **)&toks, &n_tok);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens missing");
    if (rc) return rc;
    if (n_tok == 0 || n_tok > (uint64_t)INT32_MAX / 2)
        return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu entries", (unsigned long long)n_tok);
    t->n_vocab = (int32_t)n_tok;
    const int32_t nv = t->n_vocab;
    const float *scores;
    const int32_t *types;
    if ((rc = load_scores_types(g, n_tok, &scores, &types))) return rc;
    if ((rc = strtab_init(&t->st, nv))) return rc;
    t->tok_sid = df_malloc((size_t)nv * sizeof(int32_t));
    t->score = df_malloc((size_t)nv * sizeof(float));
    t->attr = df_malloc((size_t)nv * sizeof(uint16_t));
    if (!t->tok_sid || !t->score || !t->attr) return DF_ERR_NOMEM;
    for (int32_t i = 0; i < nv; i++) {
        const char *s = toks[i].data;
        size_t l = toks[i].len;
        char emp[32];
        if (l == 0) {
            l = (size_t)snprintf(emp, sizeof emp, "[EMPTY_%d]", (int)i);
            s = emp;
        }
        int32_t sid = strtab_intern(&t->st, s, l);
        if (sid < 0) return sid;
        t->tok_sid[i] = sid;
        t->score[i] = scores ? scores[i] : 0.0f;
        t->attr[i] = (uint16_t)(types ? token_attr_of_type(types[i]) : DF_TATTR_NORMAL);
    }
    return DF_OK;
}

/* Insert merge rank i ("a b"): interns both parts and their concatenation (cat: scratch). */
static int add_merge(df_tokenizer *t, const df_gguf_str *m, uint64_t i, char **cat, size_t *catcap) {
    const char *s = m->data;
    size_t l = m->len;
    const char *sp = l > 1 ? memchr(s + 1, ' ', l - 1) : NULL;
    const char *a = "", *b = "";
    size_t la = 0, lb = 0;
    if (sp) { a = s; la = (size_t)(sp - s); b = sp + 1; lb = l - la - 1; }
    if (la + lb > *catcap) {
        size_t nc = (la + lb) * 2 + 64;
        char *p = realloc(*cat, nc);
        if (!p) return df_err(DF_ERR_NOMEM, "out of memory");
        *cat = p;
        *catcap = nc;
    }
    int32_t sa = strtab_intern(&t->st, a, la);
    int32_t sb = sa >= 0 ? strtab_intern(&t->st, b, lb) : sa;
    if (la + lb) memcpy(*cat, a, la), memcpy(*cat + la, b, lb);
    int32_t sab = sb >= 0 ? strtab_intern(&t->st, *cat, la + lb) : sb;
    if (sab < 0) return sab;
    uint64_t key = ((uint64_t)(uint32_t)sa << 32) | (uint32_t)sb;
    size_t h = df_tok_mix64(key) & t->merges_mask;
    while (t->merges[h].key != UINT64_MAX && t->merges[h].key != key) h = (h + 1) & t->merges_mask;
    if (t->merges[h].key == UINT64_MAX) { /* first (lowest rank) wins */
        t->merges[h].key = key;
        t->merges[h].rank = (int32_t)i;
        t->merges[h].sid = sab;
        t->n_merges++;
    }
    return DF_OK;
}

/* tokenizer.ggml.merges (BPE; kimi-k2/k3 files may have none). */
static int load_merges(const df_gguf *g, df_tokenizer *t) {
    const df_gguf_str *mg = NULL;
    uint64_t nm = 0;
    int rc = df_gguf_get_arr(g, "tokenizer.ggml.merges", DF_GGUF_STRING, (const void **)&mg, &nm);
    if (rc == DF_ERR_NOTFOUND) {
        if (strcmp(t->pre_name, "kimi-k2") && strcmp(t->pre_name, "kimi-k3"))
            return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges missing");
        nm = 0;
    } else if (rc) return rc;
    if (nm > (uint64_t)INT32_MAX / 4) return df_err(DF_ERR_FORMAT, "tokenizer: too many merges");
    if (!nm) return DF_OK;
    size_t cap = 16;
    while (cap < nm * 2 + 16) cap <<= 1;
    t->merges = df_malloc(cap * sizeof(merge_ent));
    if (!t->merges) return DF_ERR_NOMEM;
    memset(t->merges, 0xff, cap * sizeof(merge_ent));
    t->merges_mask = cap - 1;
    char *cat = NULL;
    size_t catcap = 0;
    for (uint64_t i = 0; i < nm && !rc; i++) rc = add_merge(t, &mg[i], i, &cat, &catcap);
    free(cat);
    return rc;
}

/* text -> id map (last id wins), the SPM split rule, byte-level maps. */
static int index_tokens(df_tokenizer *t) {
    t->sid_tok = df_malloc((size_t)t->st.n * sizeof(int32_t));
    if (!t->sid_tok) return DF_ERR_NOMEM;
    memset(t->sid_tok, 0xff, (size_t)t->st.n * sizeof(int32_t));
    for (int32_t i = 0; i < t->n_vocab; i++) t->sid_tok[t->tok_sid[i]] = i;
    if (t->type == DF_TOK_SPM) t->spm_split_ws = df_spm_can_split(t);
    df_bpe_byte_map(t->byte_enc, t->byte_enc_len);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_tok1[b] = text_to_token(t, &c, 1);
        t->byte_sid[b] = strtab_find(&t->st, t->byte_enc[b], t->byte_enc_len[b]);
    }
    return DF_OK;
}

static void load_special_id(const df_gguf *g, const char *key, int32_t n_vocab, int32_t *id,
                            const df_tokenizer_opts *o) {
    if (*id >= 0 && *id >= n_vocab) *id = -1; /* default out of range: disabled */
    uint32_t v;
    int rc = df_gguf_get_u32(g, key, &v);
    if (rc == DF_ERR_NOTFOUND) return;
    if (rc) { df_err_clear(); warn(o, "tokenizer: %s has a bad value, ignored (%ld)", key, 0L); return; }
    if (v >= (uint32_t)n_vocab) { warn(o, "tokenizer: %s = %ld out of vocab range, ignored", key, (long)v); return; }
    *id = (int32_t)v;
}

/* tokenizer.ggml.*_token_id, add_bos / add_eos. */
static void load_special_ids(const df_gguf *g, const df_tokenizer_opts *opts, df_tokenizer *t) {
    static const struct { const char *key; size_t off; } keys[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(df_tokenizer, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(df_tokenizer, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(df_tokenizer, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(df_tokenizer, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(df_tokenizer, unk)},
        {"tokenizer.ggml.seperator_token_id", offsetof(df_tokenizer, sep)},
        {"tokenizer.ggml.padding_token_id", offsetof(df_tokenizer, pad)},
        {"tokenizer.ggml.mask_token_id", offsetof(df_tokenizer, mask)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(df_tokenizer, fim_pre)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(df_tokenizer, fim_suf)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(df_tokenizer, fim_mid)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(df_tokenizer, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(df_tokenizer, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(df_tokenizer, fim_sep)},
        {"tokenizer.ggml.prefix_token_id", offsetof(df_tokenizer, fim_pre)},
        {"tokenizer.ggml.suffix_token_id", offsetof(df_tokenizer, fim_suf)},
        {"tokenizer.ggml.middle_token_id", offsetof(df_tokenizer, fim_mid)},
    };
    const int32_t nv = t->n_vocab;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        load_special_id(g, keys[i].key, nv, (int32_t *)((char *)t + keys[i].off), opts);
    bool b;
    if (df_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == DF_OK) t->add_bos = b;
    if (df_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b) == DF_OK) t->add_eos = b;
    df_err_clear();
}

/* Special tokens found by text when the file names none (llama.cpp iterates its token_to_id
 * hash map; where several candidates exist "first in hash order" is not reproducible: we take
 * the highest id, which libstdc++'s iteration order usually visits first). */
static void detect_special(df_tokenizer *t) {
    static const char *eot_txt[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                    "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                    "<end_of_utterance>", NULL};
    static const char *eom_txt[] = {"<|eom_id|>", NULL};
    static const char *fpre_txt[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                     "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                     "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *fsuf_txt[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                     "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
                                     "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *fmid_txt[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                     "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                     "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
    static const char *fpad_txt[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *frep_txt[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
    static const char *fsep_txt[] = {"<|file_sep|>", NULL};
    struct { int32_t *id; const char *const *txt; } det[] = {
        {&t->eot, eot_txt}, {&t->eom, eom_txt}, {&t->fim_pre, fpre_txt}, {&t->fim_suf, fsuf_txt},
        {&t->fim_mid, fmid_txt}, {&t->fim_pad, fpad_txt}, {&t->fim_rep, frep_txt}, {&t->fim_sep, fsep_txt},
    };
    for (size_t d = 0; d < sizeof det / sizeof det[0]; d++) {
        if (*det[d].id >= 0) continue;
        int32_t best = -1;
        each_token_of(t, det[d].txt, keep_max, &best);
        if (best < 0) continue;
        *det[d].id = best;
        t->attr[best] |= DF_TATTR_CONTROL;
    }
}

/* o200k_harmony / solar-open: <|end|> is not EOG when <|return|>+<|call|> (or
 * <|calls|>+<|flush|>) are; with <|tool_response>, </s> is a normal token. */
static void eog_exceptions(df_tokenizer *t, uint8_t *in) {
    const int32_t nv = t->n_vocab;
    bool has_ret = false, has_call = false, has_flush = false;
    int32_t end_id = -1, tr_id = -1, s_id = -1;
    for (int32_t i = 0; i < nv; i++) {
        if (!in[i]) continue;
        if (tok_is(t, i, "<|return|>")) has_ret = true;
        else if (tok_is(t, i, "<|call|>") || tok_is(t, i, "<|calls|>")) has_call = true;
        else if (tok_is(t, i, "<|flush|>")) has_flush = true;
        else if (tok_is(t, i, "<|end|>")) end_id = i;
    }
    if (end_id >= 0 && ((has_ret && has_call) || (has_call && has_flush))) {
        in[end_id] = 0;
        t->attr[end_id] = DF_TATTR_USER_DEFINED;
    }
    for (int32_t i = 0; i < nv; i++) {
        if (!in[i]) continue;
        if (tok_is(t, i, "<|tool_response>")) tr_id = i;
        else if (tok_is(t, i, "</s>")) s_id = i;
    }
    if (tr_id >= 0 && s_id >= 0) {
        in[s_id] = 0;
        t->attr[s_id] = DF_TATTR_NORMAL;
    }
}

static void mark_eog(df_tokenizer *t, int32_t id, void *ud) {
    ((uint8_t *)ud)[id] = 1;
    t->attr[id] |= DF_TATTR_CONTROL;
}

static void mark_user_defined(df_tokenizer *t, int32_t id, void *ud) { t->attr[id] = DF_TATTR_USER_DEFINED; }

/* The end-of-generation set (sorted ascending). */
static int build_eog(df_tokenizer *t) {
    static const char *eog_txt[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[", NULL};
    const int32_t nv = t->n_vocab;
    t->eog = df_malloc(((size_t)nv + 8) * sizeof(int32_t));
    if (!t->eog) return DF_ERR_NOMEM;
    uint8_t *in = df_calloc((size_t)nv, 1);
    if (!in) return DF_ERR_NOMEM;
    int32_t fims[3] = {t->fim_pad, t->fim_rep, t->fim_sep};
    for (int k = 0; k < 3; k++)
        if (fims[k] >= 0) in[fims[k]] = 1;
    each_token_of(t, eog_txt, mark_eog, in);
    /* gpt-oss: always render these */
    static const char *uddef[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    each_token_of(t, uddef, mark_user_defined, NULL);
    if (t->eos >= 0) in[t->eos] = 1;
    if (t->eot >= 0) in[t->eot] = 1;
    if (t->eom >= 0) in[t->eom] = 1;
    eog_exceptions(t, in);
    for (int32_t i = 0; i < nv; i++)
        if (in[i]) t->eog[t->n_eog++] = i;
    free(in);
    return DF_OK;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const df_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->st.len[t->tok_sid[x]], ly = t->st.len[t->tok_sid[y]];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Ids matched by text in df_tokenize's partition, longest text first. */
static int build_special_cache(df_tokenizer *t) {
    const int32_t nv = t->n_vocab;
    t->special = df_malloc(((size_t)nv + 1) * sizeof(int32_t));
    if (!t->special) return DF_ERR_NOMEM;
    for (int32_t i = 0; i < nv; i++)
        if (t->attr[i] & (DF_TATTR_CONTROL | DF_TATTR_USER_DEFINED | DF_TATTR_UNKNOWN)) t->special[t->n_special++] = i;
    qsort_r(t->special, (size_t)t->n_special, sizeof(int32_t), cmp_special, t);
    return DF_OK;
}

/* Per-model attribute quirks (llama.cpp: by general.name). */
static void name_quirks(const df_gguf *g, df_tokenizer *t) {
    const char *name = NULL;
    if (df_gguf_get_str(g, "general.name", &name) == DF_OK && name) {
        char low[256];
        size_t l = strlen(name);
        if (l >= sizeof low) l = sizeof low - 1;
        for (size_t i = 0; i < l; i++) low[i] = (char)tolower((unsigned char)name[i]);
        low[l] = 0;
        if (strstr(low, "phi-3") || strstr(low, "phi3")) {
            for (int i = 0; i < t->n_special; i++) t->attr[t->special[i]] |= DF_TATTR_RSTRIP;
            int32_t id = text_to_token(t, "</s>", 4);
            if (id >= 0) t->attr[id] |= DF_TATTR_RSTRIP;
            static const char *no[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (int k = 0; k < 3; k++) {
                id = text_to_token(t, no[k], strlen(no[k]));
                if (id >= 0) t->attr[id] &= (uint16_t)~DF_TATTR_RSTRIP;
            }
        }
    }
    df_err_clear();
}

/* The newline token: SPM's byte token, BPE's tokenization of "\n" (else the pad id). */
static void find_newline(df_tokenizer *t) {
    if (t->type == DF_TOK_SPM) {
        t->nl = df_spm_byte_token(t, '\n');
    } else {
        int32_t ids[4];
        int n = df_tokenize(t, "\n", 1, false, false, ids, 4);
        t->nl = n > 0 ? ids[0] : t->pad;
    }
    df_err_clear();
}

int df_tokenizer_load_ex(const df_gguf *g, const df_tokenizer_opts *opts, df_tokenizer **out) {
    if (!g || !out) return df_err(DF_ERR_INVALID, "tokenizer: bad arguments");
    *out = NULL;
    df_tokenizer *t = df_calloc(1, sizeof *t);
    if (!t) return DF_ERR_NOMEM;
    int rc;
    if ((rc = load_type(g, opts, t))) goto fail;
    if ((rc = load_tokens(g, t))) goto fail;
    if (t->type == DF_TOK_BPE && (rc = load_merges(g, t))) goto fail;
    if ((rc = index_tokens(t))) goto fail;
    if (t->type == DF_TOK_BPE && (rc = df_pretok_compile(t))) goto fail;
    load_special_ids(g, opts, t);
    detect_special(t);
    if ((rc = build_eog(t))) goto fail;
    if ((rc = build_special_cache(t))) goto fail;
    name_quirks(g, t);
    if ((rc = df_detok_build_pieces(t))) goto fail;
    find_newline(t);
    *out = t;
    return DF_OK;
fail:
    df_tokenizer_free(t);
    return rc ? rc : DF_ERR_INTERNAL;
}

int df_tokenizer_load(const df_gguf *g, df_tokenizer **out) { return df_tokenizer_load_ex(g, NULL, out); }

void df_tokenizer_free(df_tokenizer *t) {
    if (!t) return;
    strtab_free(&t->st);
    free(t->tok_sid);
    free(t->sid_tok);
    free(t->score);
    free(t->attr);
    free(t->piece_blob);
    free(t->piece_off);
    free(t->merges);
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    free(t->special);
    free(t->eog);
    free(t);
}
