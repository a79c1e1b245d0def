/* pretok.c — the byte-level BPE pre-tokenizers (tokenizer.ggml.pre) on PCRE2 (UTF + UCP, JIT).
 *
 * llama.cpp runs its own hand-written splitters (gpt2, llama3, qwen2, qwen35, kimi-k2) or
 * std::regex on a "collapsed" text where every non-ASCII code point is replaced by a category
 * placeholder. The PCRE2 patterns below are written to reproduce those semantics, not Hugging
 * Face's:
 *   - \s is llama.cpp's whitespace set (White_Space property), spelled out as WS (PCRE2's UCP
 *     \s would add U+180E);
 *   - \p{Lu}/\p{Ll} distinctions do not exist for non-ASCII letters (gpt-4o, tekken):
 *     "upper" = any letter but a-z, "lower" = any letter but A-Z;
 *   - \p{M} is not part of words where llama.cpp's adapted regex dropped it (gpt-4o, kimi-k2);
 *   - ASCII '~' is neither \p{P} nor \p{S} in llama.cpp's collapsed mode (deepseek-v3);
 *   - in std::wregex paths non-ASCII whitespace was replaced by 0x0B, so literal ranges that
 *     span whitespace code points (deepseek-llm/-coder) exclude them here;
 *   - Han for kimi-k2 is llama.cpp's unicode_cpt_is_han() ranges, not the Han script;
 *   - invalid UTF-8 becomes U+FFFD before splitting (llama.cpp's unicode_cpts_from_utf8).
 * Unicode category tables are PCRE2's (10.42: Unicode 14); llama.cpp's are generated from the
 * latest UCD, so code points assigned after Unicode 14 may split differently.
 *
 * Invariant: the compiled patterns are read-only after load; each split owns its match data
 * (and JIT stack), so splitting is thread-safe. */
#include <limits.h>

#include "text/tokenizer_impl.h"

/* ------------------------------------------------------------------------------------------
 * pre-tokenizer definitions
 * ---------------------------------------------------------------------------------------- */
#define WS "\\t-\\r\\x20\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define WS_TAIL "|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"
#define HAN                                                                                   \
    "\\x{4e00}-\\x{9fff}\\x{3400}-\\x{4dbf}\\x{20000}-\\x{2a6df}\\x{2a700}-\\x{2b73f}"        \
    "\\x{2b740}-\\x{2b81f}\\x{2b820}-\\x{2ceaf}\\x{2ceb0}-\\x{2ebef}\\x{f900}-\\x{faff}"      \
    "\\x{2f800}-\\x{2fa1f}"
/* [ࠀ-一] etc. from llama.cpp's std::wregex classes, minus the whitespace code points that
 * llama.cpp replaced by 0x0B before matching. */
#define CJK_WREGEX                                                                            \
    "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{167f}\\x{1681}-\\x{1fff}\\x{200b}-\\x{2027}"             \
    "\\x{202a}-\\x{202e}\\x{2030}-\\x{205e}\\x{2060}-\\x{2fff}\\x{3001}-\\x{4e00}"             \
    "\\x{ac00}-\\x{d7ff}]+"

#define RE_GPT2                                                                               \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])"
#define RE_LLAMA3                                                                             \
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*" WS_TAIL
#define RE_QWEN2 CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*" WS_TAIL
#define RE_QWEN35                                                                             \
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^" WS "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*" WS_TAIL
#define RE_KIMI_K2                                                                            \
    "[" HAN "]+|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}" HAN "]+" CONTR "?|\\p{N}{1,3}"                \
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*" WS_TAIL
#define RE_GPT4O                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]*[^\\P{L}A-Z]+" CONTR "?"                               \
    "|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]+[^\\P{L}A-Z]*" CONTR "?"                              \
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*" WS_TAIL
#define RE_TEKKEN                                                                             \
    "[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]*[^\\P{L}A-Z]+|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]+[^\\P{L}A-Z]*" \
    "|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*" WS_TAIL
#define RE_SEED_CODER                                                                         \
    CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}\\r\\n]+" WS_TAIL
#define RE_DSV3_3                                                                             \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"                                      \
    "|(?:~|[^\\r\\n\\p{L}\\p{P}\\p{S}])?[\\p{L}\\p{M}]+"                                        \
    "| ?(?:(?!~)[\\p{P}\\p{S}])+[\\r\\n]*" WS_TAIL
#define RE_DSLLM_2                                                                            \
    "[" WS "]?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"    \
    "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}"     \
    "\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}" \
    "\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}" \
    "\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}"              \
    "\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}"              \
    "\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"     \
    "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}"     \
    "\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}"              \
    "\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}"     \
    "\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}"               \
    "\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}"     \
    "\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}"              \
    "\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}"              \
    "\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}"              \
    "\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}"       \
    "\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+"
/* U+3000 was whitespace (0x0B) in llama.cpp's wregex text, so the range starts at U+3001. */
#define RE_DSLLM_3                                                                            \
    "[" WS "]?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3001}-\\x{3002}]+"


static const pre_def k_pre[] = {
    {"default", 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano",
     PF_IGNORE_MERGES | PF_ADD_BOS, {RE_LLAMA3}},
    {"dbrx|smaug-bpe", 0, {RE_LLAMA3}},
    {"glm4|chatglm-bpe", PF_BOS_NULL, {RE_LLAMA3}},
    {"deepseek-llm", PF_NO_CLEAN_SPACES,
     {"[\\r\\n]", RE_DSLLM_2, RE_DSLLM_3, "[" WS "]+\\z", CJK_WREGEX, "\\p{N}+"}},
    {"deepseek-coder", PF_NO_CLEAN_SPACES,
     {"[\\r\\n]", "[" WS "]?\\p{L}+", "[" WS "]?\\p{P}+", CJK_WREGEX, "\\p{N}"}},
    {"deepseek-v3|hunyuan-dense|joyai-llm", PF_NO_CLEAN_SPACES,
     {"\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+", RE_DSV3_3}},
    {"falcon", 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|codeshell|exaone|minerva-7b|mellum2", 0, {"\\p{N}", RE_GPT2}},
    {"command-r|smollm", PF_NO_CLEAN_SPACES, {"\\p{N}", RE_GPT2}},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|"
     "exaone4|mpt|olmo|jais",
     0, {RE_GPT2}},
    {"trillion|granite-docling", PF_NO_CLEAN_SPACES, {RE_GPT2}},
    {"stablelm2|megrez", 0, {RE_QWEN2}},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open|grok-2", PF_NO_CLEAN_SPACES,
     {RE_QWEN2}},
    {"qwen35", PF_NO_CLEAN_SPACES, {RE_QWEN35}},
    {"tekken", PF_IGNORE_MERGES | PF_ADD_BOS | PF_NO_CLEAN_SPACES, {RE_TEKKEN}},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", PF_NO_CLEAN_SPACES, {RE_GPT4O}},
    /* kimi-k3 is not a llama.cpp id (K3 GGUFs carry "kimi-k2"); accepted as an alias. */
    {"kimi-k2|kimi-k3", PF_NO_CLEAN_SPACES, {RE_KIMI_K2}},
    {"seed-coder", PF_NO_CLEAN_SPACES, {RE_SEED_CODER}},
};

const pre_def *df_pretok_lookup(const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
        const char *p = k_pre[i].names;
        while (*p) {
            const char *e = strchr(p, '|');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == nl && !memcmp(p, name, l)) return &k_pre[i];
            p += l + (e ? 1 : 0);
        }
    }
    return NULL;
}

int df_pretok_compile(df_tokenizer *t) {
    uint32_t jit_ok = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &jit_ok);
    for (int i = 0; i < DF_PRETOK_MAX_RE && t->pre->re[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)t->pre->re[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return df_err(DF_ERR_INTERNAL, "tokenizer: pre-tokenizer '%s' regex %d: %s at %zu",
                          t->pre_name, i, (char *)msg, (size_t)eo);
        }
        if (jit_ok) pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to interpreter */
        t->re[t->n_re++] = re;
    }
    return DF_OK;
}

/* ------------------------------------------------------------------------------------------
 * the text the regexes see
 * ---------------------------------------------------------------------------------------- */

/* Copy for the regex engine: each surrogate (ED A0..BF xx) becomes U+E000 (EE 80 80), same
 * length, and like a surrogate in llama.cpp's tables neither letter, number, mark,
 * punctuation, symbol nor space (PCRE2 cannot match surrogates). NULL on OOM. */
static char *match_copy(const char *txt, size_t n) {
    char *m = malloc(n ? n : 1);
    if (!m) return NULL;
    memcpy(m, txt, n);
    for (size_t i = 0; i + 2 < n; i++) {
        if ((unsigned char)m[i] == 0xED && (unsigned char)m[i + 1] >= 0xA0) {
            m[i] = (char)0xEE; m[i + 1] = (char)0x80; m[i + 2] = (char)0x80;
            i += 2;
        }
    }
    return m;
}

static bool has_surrogate(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)s[i] == 0xED && (unsigned char)s[i + 1] >= 0xA0) return true;
    return false;
}

int df_pretok_prepare(const char *raw, size_t len, const char **txt, char **own, const char **mtext,
                      char **mown, size_t *n) {
    *own = *mown = NULL;
    if (df_utf8_valid_prefix(raw, len, NULL) == len) { /* most text: used in place */
        *txt = *mtext = raw;
        *n = len;
        return DF_OK;
    }
    if (len > SIZE_MAX / 3) return df_err(DF_ERR_RANGE, "text too long");
    char *b = malloc(3 * len);
    if (!b) return df_err(DF_ERR_NOMEM, "tokenizer: out of memory");
    *n = df_utf8_recode_permissive(raw, len, b);
    *own = b;
    *txt = *mtext = b;
    if (has_surrogate(b, *n)) {
        char *m = match_copy(b, *n);
        if (!m) { free(b); *own = NULL; return df_err(DF_ERR_NOMEM, "tokenizer: out of memory"); }
        *mown = m;
        *mtext = m;
    }
    return DF_OK;
}

/* ------------------------------------------------------------------------------------------
 * split, streamed: regex k runs inside every piece regex k-1 produced (its matches and the
 * gaps between them are pieces), and each piece of the last regex goes straight to emit() —
 * no piece lists, O(1) memory beyond the text.
 * ---------------------------------------------------------------------------------------- */
typedef struct {
    const df_tokenizer *t;
    const char *mtext; /* text the regexes see */
    pcre2_match_data *md[DF_PRETOK_MAX_RE];
    pcre2_match_context *mctx;
    pcre2_jit_stack *js;
    void (*emit)(void *ud, size_t off, size_t len);
    void *ud;
    size_t count;
    int err;
} splitter;

static void split_piece(splitter *S, int level, size_t off, size_t len) {
    if (!len) return;
    if (level == S->t->n_re) { S->emit(S->ud, off, len); S->count++; return; }
    const pcre2_code *re = S->t->re[level];
    pcre2_match_data *md = S->md[level];
    const char *subj = S->mtext + off;
    size_t pos = 0, last = 0;
    while (pos < len && !S->err) {
        int m = pcre2_match(re, (PCRE2_SPTR)subj, len, pos, PCRE2_NO_UTF_CHECK, md, S->mctx);
        if (m == PCRE2_ERROR_JIT_STACKLIMIT && !S->js) {
            S->js = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
            if (!S->mctx) S->mctx = pcre2_match_context_create(NULL);
            if (S->js && S->mctx) {
                pcre2_jit_stack_assign(S->mctx, NULL, S->js);
                continue;
            }
        }
        if (m < 0) {
            if (m != PCRE2_ERROR_NOMATCH)
                df_log(DF_LOG_WARN, "tokenizer: pre-tokenizer regex failed (%d); rest of piece kept whole", m);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (e <= s) { /* empty match: never produced by our patterns; skip a char */
            pos = s + 1;
            while (pos < len && ((unsigned char)subj[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (s > last) split_piece(S, level + 1, off + last, s - last);
        split_piece(S, level + 1, off + s, e - s);
        last = pos = e;
    }
    if (last < len) split_piece(S, level + 1, off + last, len - last);
}

int df_pretok_split(const df_tokenizer *t, const char *mtext, size_t len,
                    void (*emit)(void *, size_t, size_t), void *ud, size_t *count) {
    splitter S = {.t = t, .mtext = mtext, .emit = emit, .ud = ud};
    int rc = DF_OK;
    for (int i = 0; i < t->n_re; i++) {
        S.md[i] = pcre2_match_data_create_from_pattern(t->re[i], NULL);
        if (!S.md[i]) rc = df_err(DF_ERR_NOMEM, "pcre2 match data");
    }
    if (!rc) split_piece(&S, 0, 0, len);
    for (int i = 0; i < t->n_re; i++)
        if (S.md[i]) pcre2_match_data_free(S.md[i]);
    if (S.mctx) pcre2_match_context_free(S.mctx);
    if (S.js) pcre2_jit_stack_free(S.js);
    if (!rc && S.err) rc = S.err;
    if (count) *count = S.count;
    return rc;
}

/* ---- df_tokenizer_presplit (tests, debugging) ---------------------------------------------- */
typedef struct {
    const char *txt;
    void (*cb)(void *ud, const char *piece, size_t n);
    void *ud;
} presplit_ctx;

static void presplit_emit(void *ud, size_t off, size_t len) {
    presplit_ctx *P = ud;
    P->cb(P->ud, P->txt + off, len);
}

int df_tokenizer_presplit(const df_tokenizer *t, const char *text, size_t len,
                          void (*cb)(void *ud, const char *piece, size_t n), void *ud) {
    if (!t || t->type != DF_TOK_BPE || !cb || (!text && len)) return df_err(DF_ERR_INVALID, "presplit: bad arguments");
    if (!len) return 0;
    const char *txt, *mtext;
    char *own, *mown;
    size_t n, count = 0;
    int rc = df_pretok_prepare(text, len, &txt, &own, &mtext, &mown, &n);
    if (rc) return rc;
    presplit_ctx P = {.txt = txt, .cb = cb, .ud = ud};
    rc = df_pretok_split(t, mtext, n, presplit_emit, &P, &count);
    free(own);
    free(mown);
    if (rc) return rc;
    return count > INT_MAX ? INT_MAX : (int)count;
}
