/* tokenizer.c — SPM and byte-level BPE tokenizers from GGUF tokenizer.ggml.* keys, matching
 * llama.cpp (src/llama-vocab.cpp, src/unicode.cpp) token for token.
 *
 * Pre-tokenizers run on PCRE2 (UTF + UCP, JIT). llama.cpp runs its own hand-written splitters
 * (gpt2, llama3, qwen2, qwen35, kimi-k2) or std::regex on a "collapsed" text where every
 * non-ASCII code point is replaced by a category placeholder. The PCRE2 patterns below are
 * written to reproduce those semantics, not Hugging Face's:
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
 * Invariant: immutable after load; all entry points are thread-safe (scratch per call).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <ctype.h>
#include <limits.h>

#include "text/tokenizer.h"

/* ------------------------------------------------------------------------------------------
 * string intern table: text -> sid (dense ids), binary-safe, NUL-terminated copies
 * ---------------------------------------------------------------------------------------- */
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

static uint64_t hash_bytes(const void *p, size_t n) {
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

static void strtab_free(strtab *st) {
    free(st->arena);
    free(st->off);
    free(st->len);
    free(st->ht);
    free(st->hh);
    memset(st, 0, sizeof *st);
}

static int strtab_init(strtab *st, int32_t expect) {
    memset(st, 0, sizeof *st);
    size_t cap = 64;
    while (cap < (size_t)expect * 2 + 16) cap <<= 1;
    st->ht = df_malloc(cap * sizeof(int32_t));
    if (!st->ht) return DF_ERR_NOMEM;
    memset(st->ht, 0xff, cap * sizeof(int32_t));
    st->ht_mask = cap - 1;
    return DF_OK;
}

static int32_t strtab_find_h(const strtab *st, const char *s, size_t n, uint64_t h) {
    size_t i = h & st->ht_mask;
    for (;;) {
        int32_t id = st->ht[i];
        if (id < 0) return -1;
        if (st->hh[id] == h && st->len[id] == n && !memcmp(st->arena + st->off[id], s, n)) return id;
        i = (i + 1) & st->ht_mask;
    }
}

static int32_t strtab_find(const strtab *st, const char *s, size_t n) {
    if (!st->hh) return -1;
    return strtab_find_h(st, s, n, hash_bytes(s, n));
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

/* Returns sid (>= 0) or a negative status. */
static int32_t strtab_intern(strtab *st, const char *s, size_t n) {
    if (n > UINT32_MAX) return df_err(DF_ERR_RANGE, "token text too long");
    uint64_t h = hash_bytes(s, n);
    if (st->hh) {
        int32_t id = strtab_find_h(st, s, n, h);
        if (id >= 0) return id;
    }
    if (st->n == INT32_MAX) return df_err(DF_ERR_RANGE, "too many strings");
    if ((size_t)(st->n + 1) * 2 > st->ht_mask + 1) {
        int rc = strtab_grow_ht(st);
        if (rc) return rc;
    }
    if (st->n == st->cap) {
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
    }
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

static inline const char *strtab_str(const strtab *st, int32_t sid) { return st->arena + st->off[sid]; }

/* ------------------------------------------------------------------------------------------
 * merges: (sid_left, sid_right) -> (rank, sid_merged)
 * ---------------------------------------------------------------------------------------- */
typedef struct {
    uint64_t key; /* UINT64_MAX = empty */
    int32_t rank;
    int32_t sid;
} merge_ent;

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

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

enum { PF_IGNORE_MERGES = 1, PF_ADD_BOS = 2, PF_NO_CLEAN_SPACES = 4, PF_BOS_NULL = 8 };

typedef struct {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    int flags;
    const char *re[6];
} pre_def;

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

static const pre_def *pre_lookup(const char *name) {
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

/* ------------------------------------------------------------------------------------------
 * tokenizer object
 * ---------------------------------------------------------------------------------------- */
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

    merge_ent *merges;
    size_t merges_mask;
    int32_t n_merges;
    int32_t byte_sid[256];  /* sid of the byte-level char for each byte (-1) */
    int32_t byte_tok1[256]; /* token whose text is that single raw byte (-1) */
    char byte_enc[256][3];  /* UTF-8 of the byte-level char, 1-2 bytes, NUL-terminated */
    uint8_t byte_enc_len[256];

    pcre2_code *re[6];
    int n_re;

    int32_t *special;       /* control/user-defined/unknown ids, longest text first */
    int n_special;
    int32_t *eog;
    int n_eog;
    int32_t *suppress;
    int n_suppress;

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_sep, add_space_prefix, ignore_merges, clean_spaces;
    bool spm_split_ws; /* no token has U+2581 right after a non-U+2581 char: see spm_tokenize_split */
};

/* ---- UTF-8 helpers ---------------------------------------------------------------------- */

static inline int utf8_len_lead(unsigned char c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

static int utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Strict decoder (no overlongs, no surrogates, <= U+10FFFF). Returns length >= 1 and *cp, or
 * 0 if invalid at s[0] (need_more set if s[0..n) is a valid incomplete prefix). */
static int utf8_dec_strict(const unsigned char *s, size_t n, uint32_t *cp, bool *need_more) {
    *need_more = false;
    unsigned char c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int L;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) { L = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        L = 3; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        L = 4; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    for (int i = 1; i < L; i++) {
        if ((size_t)i >= n) { *need_more = true; return 0; }
        unsigned char d = s[i];
        if (d < lo || d > hi) return 0;
        lo = 0x80; hi = 0xBF;
        v = (v << 6) | (d & 0x3F);
    }
    *cp = v;
    return L;
}

/* Length of a maximal invalid subpart starting at s[0] (WHATWG / Unicode "substitution of
 * maximal subparts"): the longest prefix that is a valid incomplete sequence, at least 1. */
static int utf8_bad_span(const unsigned char *s, size_t n) {
    for (size_t k = (n < 3 ? n : 3); k >= 2; k--) {
        uint32_t cp;
        bool more;
        if (utf8_dec_strict(s, k, &cp, &more) == 0 && more) return (int)k;
    }
    return 1;
}

size_t df_utf8_valid_prefix(const unsigned char *s, size_t n, bool *need_more) {
    size_t i = 0;
    bool more = false;
    while (i < n) {
        uint32_t cp;
        int l = utf8_dec_strict(s + i, n - i, &cp, &more);
        if (l == 0) break;
        i += (size_t)l;
    }
    if (need_more) *need_more = (i < n) && more;
    return i;
}

/* llama.cpp's unicode_cpts_from_utf8 + unicode_cpt_to_utf8 round trip: bytes that do not
 * decode (by its permissive rules) become U+FFFD, overlong forms are re-encoded shortest,
 * surrogates are kept (3 bytes; *n_surr counts them: PCRE2 cannot match them, see
 * match_copy). Deviation: code points above U+10FFFF (llama.cpp throws) become U+FFFD.
 * out needs 3*n bytes. */
static size_t utf8_sanitize(const unsigned char *s, size_t n, char *out, size_t *n_surr) {
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { out[o++] = (char)c; i++; continue; }
        uint32_t cp = 0xFFFD;
        size_t adv = 1;
        int L = 0;
        if ((c & 0x40) == 0) L = 0;
        else if ((c & 0x20) == 0) L = 2;
        else if ((c & 0x10) == 0) L = 3;
        else if ((c & 0x08) == 0) L = 4;
        if (L) {
            bool ok = i + (size_t)L <= n;
            for (int k = 1; ok && k < L; k++) ok = (s[i + k] & 0xC0) == 0x80;
            if (ok) {
                uint32_t v = L == 2 ? (c & 0x1Fu) : L == 3 ? (c & 0x0Fu) : (c & 0x07u);
                for (int k = 1; k < L; k++) v = (v << 6) | (s[i + k] & 0x3Fu);
                adv = (size_t)L;
                cp = v > 0x10FFFF ? 0xFFFD : v;
                if (cp >= 0xD800 && cp <= 0xDFFF) (*n_surr)++;
            }
        }
        o += (size_t)utf8_put(cp, out + o);
        i += adv;
    }
    return o;
}

/* Copy for the regex engine: each surrogate (ED A0..BF xx) becomes U+E000 (EE 80 80), same
 * length, and like a surrogate in llama.cpp's tables neither letter, number, mark,
 * punctuation, symbol nor space. Returns NULL on OOM. */
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

/* ---- growable id vector ---------------------------------------------------------------- */
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

/* ---- lookups ----------------------------------------------------------------------------- */

static inline int32_t text_to_token(const df_tokenizer *t, const char *s, size_t n) {
    int32_t sid = strtab_find(&t->st, s, n);
    return sid >= 0 ? t->sid_tok[sid] : -1;
}

int32_t df_token_lookup(const df_tokenizer *t, const char *s, size_t len) {
    return text_to_token(t, s, len);
}

static inline const merge_ent *merge_find(const df_tokenizer *t, int32_t a, int32_t b) {
    if (!t->merges) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = mix64(key) & t->merges_mask;
    for (;;) {
        const merge_ent *e = &t->merges[i];
        if (e->key == UINT64_MAX) return NULL;
        if (e->key == key) return e;
        i = (i + 1) & t->merges_mask;
    }
}

/* SPM byte fallback (llama.cpp byte_to_token): "<0xXX>", else the single byte as text. */
static int32_t spm_byte_token(const df_tokenizer *t, unsigned char b) {
    static const char hex[] = "0123456789ABCDEF";
    char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = text_to_token(t, buf, 6);
    if (id >= 0) return id;
    return t->byte_tok1[b];
}

/* ------------------------------------------------------------------------------------------
 * SPM
 * ---------------------------------------------------------------------------------------- */
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

static bool work_reserve_sym(work_t *w, size_t n) {
    if (n <= w->capsym) return true;
    size_t nc = w->capsym ? w->capsym : 64;
    while (nc < n) nc *= 2;
    sym_t *p = realloc(w->sym, nc * sizeof *p);
    if (!p) { w->err = DF_ERR_NOMEM; return false; }
    w->sym = p;
    w->capsym = nc;
    return true;
}

static bool work_reserve_buf(work_t *w, size_t n) {
    if (n <= w->capbuf) return true;
    size_t nc = w->capbuf ? w->capbuf : 256;
    while (nc < n) nc *= 2;
    char *p = realloc(w->buf, nc);
    if (!p) { w->err = DF_ERR_NOMEM; return false; }
    w->buf = p;
    w->capbuf = nc;
    return true;
}

static void work_free(work_t *w) {
    free(w->sym);
    free(w->heap);
    free(w->buf);
}

/* heap "less" = pops first */
static inline bool spm_before(const bigram_t *a, const bigram_t *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}
static inline bool bpe_before(const bigram_t *a, const bigram_t *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(work_t *w, const bigram_t *x, bool spm) {
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
        bool before = spm ? spm_before(x, &w->heap[pa]) : bpe_before(x, &w->heap[pa]);
        if (!before) break;
        w->heap[i] = w->heap[pa];
        i = pa;
    }
    w->heap[i] = *x;
}

static bigram_t heap_pop(work_t *w, bool spm) {
    bigram_t top = w->heap[0];
    bigram_t last = w->heap[--w->nheap];
    size_t n = w->nheap, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n &&
            (spm ? spm_before(&w->heap[c + 1], &w->heap[c]) : bpe_before(&w->heap[c + 1], &w->heap[c])))
            c++;
        bool before = spm ? spm_before(&w->heap[c], &last) : bpe_before(&w->heap[c], &last);
        if (!before) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
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
        int32_t b = spm_byte_token(t, (unsigned char)text[s->start + j]);
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
        size_t l = (size_t)utf8_len_lead((unsigned char)text[off]);
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
        size_t l = (size_t)utf8_len_lead((unsigned char)text[off]);
        if (l > len - off) l = len - off;
        bool lb = l == 3 && !memcmp(text + off, "\xE2\x96\x81", 3);
        if (lb && !prev_lb && off > seg) {
            spm_tokenize(t, w, text + seg, off - seg, out);
            seg = off;
        }
        prev_lb = lb;
        off += l;
    }
    spm_tokenize(t, w, text + seg, len - seg, out);
}

/* ------------------------------------------------------------------------------------------
 * byte-level BPE
 * ---------------------------------------------------------------------------------------- */
static void bpe_try_add(const df_tokenizer *t, work_t *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t a = w->sym[l].sid, b = w->sym[r].sid;
    if (a < 0 || b < 0) return;
    const merge_ent *m = merge_find(t, a, b);
    if (!m) return;
    bigram_t bg = {.rank = m->rank, .left = l, .right = r, .lsid = a, .rsid = b};
    heap_push(w, &bg, false);
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
        if (id >= 0) { iv_push(out, id); continue; }
        /* llama.cpp: look up every byte of the symbol's byte-encoded text as a one-byte
         * token, silently dropping the ones that are not tokens. */
        for (size_t j = 0; j < s->n; j++) {
            unsigned char b = p[s->start + j];
            for (int k = 0; k < t->byte_enc_len[b]; k++) {
                int32_t b1 = t->byte_tok1[(unsigned char)t->byte_enc[b][k]];
                if (b1 >= 0) iv_push(out, b1);
            }
        }
    }
}

/* Pre-tokenizer split, streamed: regex k runs inside every piece regex k-1 produced (its
 * matches and the gaps between them are pieces), and each piece of the last regex goes
 * straight to emit() — no piece lists, O(1) memory beyond the text. */
typedef struct {
    const df_tokenizer *t;
    const char *mtext; /* text the regexes see */
    pcre2_match_data *md[6];
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

static int split_run(const df_tokenizer *t, const char *mtext, size_t len,
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

/* Does utf8_sanitize change anything (invalid, overlong, > U+10FFFF) or are there
 * surrogates? Most text is valid UTF-8 and is then used in place. */
static bool utf8_needs_work(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) { i += 8; continue; }
        }
        if (s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        bool more;
        int l = utf8_dec_strict(s + i, n - i, &cp, &more);
        if (l == 0) return true;
        i += (size_t)l;
    }
    return false;
}

/* Sanitized text (*own set when allocated) and the text the regexes see (*mtext). */
static int prepare_text(const char *raw, size_t len, const char **txt, char **own, const char **mtext, char **mown, size_t *n) {
    *own = *mown = NULL;
    if (!utf8_needs_work((const unsigned char *)raw, len)) {
        *txt = *mtext = raw;
        *n = len;
        return DF_OK;
    }
    if (len > SIZE_MAX / 3) return df_err(DF_ERR_RANGE, "text too long");
    char *b = malloc(3 * len);
    if (!b) return df_err(DF_ERR_NOMEM, "tokenizer: out of memory");
    size_t n_surr = 0;
    *n = utf8_sanitize((const unsigned char *)raw, len, b, &n_surr);
    *own = b;
    *txt = *mtext = b;
    if (n_surr) {
        char *m = match_copy(b, *n);
        if (!m) { free(b); *own = NULL; return df_err(DF_ERR_NOMEM, "tokenizer: out of memory"); }
        *mown = m;
        *mtext = m;
    }
    return DF_OK;
}

/* Per-call cache of short pieces -> their ids (long texts repeat the same words; the ids are
 * copied from where they were first emitted in out). */
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
        uint64_t h = hash_bytes(p, pl) | 1;
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
        ce->h = hash_bytes(p, pl) | 1;
        ce->off = off;
        ce->len = (uint32_t)pl;
        ce->out_pos = before;
        ce->nid = (uint32_t)(C->out->n - before);
        C->cache_used++;
    }
}

static int bpe_tokenize(const df_tokenizer *t, work_t *w, const char *raw, size_t len, idvec *out) {
    if (!len) return DF_OK;
    const char *txt, *mtext;
    char *own, *mown;
    size_t n;
    int rc = prepare_text(raw, len, &txt, &own, &mtext, &mown, &n);
    if (rc) return rc;
    bpe_ctx C = {.t = t, .w = w, .out = out, .txt = txt};
    if (n > 256) C.cache = calloc((size_t)1 << CACHE_BITS, sizeof(centry));
    rc = split_run(t, mtext, n, bpe_emit, &C, NULL);
    free(C.cache);
    free(own);
    free(mown);
    return rc;
}

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
            size_t need = 3 * (f.len + 1);
            if (need > esc_cap) {
                char *p = realloc(esc, need);
                if (!p) { rc = df_err(DF_ERR_NOMEM, "tokenizer: out of memory"); break; }
                esc = p;
                esc_cap = need;
            }
            size_t o = 0;
            if (t->add_space_prefix && prev_special) { memcpy(esc, "\xE2\x96\x81", 3); o = 3; }
            for (size_t i = 0; i < f.len; i++) {
                char c = text[f.off + i];
                if (c == ' ') { memcpy(esc + o, "\xE2\x96\x81", 3); o += 3; }
                else esc[o++] = c;
            }
            spm_tokenize_split(t, &w, esc, o, out);
            prev_special = false;
        }
        free(esc);
        if (add_special && t->add_eos && t->eos >= 0) iv_push(out, t->eos);
    } else {
        if (add_special && t->add_bos && t->bos >= 0) iv_push(out, t->bos);
        for (size_t k = 0; k < fr.n && !rc && !w.err && !out->err; k++) {
            frag_t f = fr.v[k];
            if (f.tok >= 0) { iv_push(out, f.tok); continue; }
            rc = bpe_tokenize(t, &w, text + f.off, f.len, out);
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
    int rc = prepare_text(text, len, &txt, &own, &mtext, &mown, &n);
    if (rc) return rc;
    presplit_ctx P = {.txt = txt, .cb = cb, .ud = ud};
    rc = split_run(t, mtext, n, presplit_emit, &P, &count);
    free(own);
    free(mown);
    if (rc) return rc;
    return count > INT_MAX ? INT_MAX : (int)count;
}

/* ------------------------------------------------------------------------------------------
 * pieces / detokenize
 * ---------------------------------------------------------------------------------------- */
static inline const char *piece_ptr(const df_tokenizer *t, int32_t id, size_t *n) {
    *n = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece_blob + t->piece_off[id];
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

/* ---- streaming detokenizer ------------------------------------------------------------- */
void df_detok_init(df_detok *d, bool special, bool strip_leading_space) {
    memset(d, 0, sizeof *d);
    d->special = special;
    d->strip_space = strip_leading_space;
}

/* Process pend ++ p: write complete characters (FFFD for invalid subparts) to out (if out
 * non-NULL), return bytes produced; *keep receives the number of trailing bytes to hold. */
static size_t detok_run(const unsigned char *pend, int np, const unsigned char *p, size_t n,
                        char *out, int *keep) {
    unsigned char tmp[8];
    size_t total = (size_t)np + n, i = 0, o = 0;
#define BYTE_AT(k) ((k) < (size_t)np ? pend[(k)] : p[(k) - (size_t)np])
    while (i < total) {
        size_t avail = total - i < 4 ? total - i : 4;
        for (size_t k = 0; k < avail; k++) tmp[k] = BYTE_AT(i + k);
        uint32_t cp;
        bool more;
        int l = utf8_dec_strict(tmp, avail, &cp, &more);
        if (l > 0) {
            if (out) memcpy(out + o, tmp, (size_t)l);
            o += (size_t)l;
            i += (size_t)l;
        } else if (more) {
            break; /* incomplete tail: hold */
        } else {
            if (out) memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)utf8_bad_span(tmp, avail);
        }
    }
#undef BYTE_AT
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
    /* keep the held tail (at most 3 bytes: an incomplete valid sequence) */
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
    memcpy(out, "\xEF\xBF\xBD", 3); /* an incomplete sequence is one maximal subpart */
    d->n_pend = 0;
    return 3;
}

/* ------------------------------------------------------------------------------------------
 * accessors
 * ---------------------------------------------------------------------------------------- */
const char *df_token_text(const df_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_vocab) return NULL;
    return strtab_str(&t->st, t->tok_sid[id]);
}
int df_token_attr(const df_tokenizer *t, int32_t id) {
    return (t && id >= 0 && id < t->n_vocab) ? t->attr[id] : 0;
}
float df_token_score(const df_tokenizer *t, int32_t id) {
    return (t && id >= 0 && id < t->n_vocab) ? t->score[id] : 0.0f;
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
int df_tokenizer_max_piece_len(const df_tokenizer *t) {
    size_t m = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        size_t l = t->piece_off[i + 1] - t->piece_off[i];
        if (l > m) m = l;
    }
    return m > INT_MAX / 4 ? INT_MAX / 4 : (int)m;
}
int32_t df_tokenizer_bos(const df_tokenizer *t) { return t->bos; }
int32_t df_tokenizer_eos(const df_tokenizer *t) { return t->eos; }
int32_t df_tokenizer_eot(const df_tokenizer *t) { return t->eot; }
int32_t df_tokenizer_eom(const df_tokenizer *t) { return t->eom; }
int32_t df_tokenizer_unk(const df_tokenizer *t) { return t->unk; }
int32_t df_tokenizer_pad(const df_tokenizer *t) { return t->pad; }
int32_t df_tokenizer_sep(const df_tokenizer *t) { return t->sep; }
int32_t df_tokenizer_nl(const df_tokenizer *t) { return t->nl; }
bool df_tokenizer_add_bos(const df_tokenizer *t) { return t->add_bos; }
bool df_tokenizer_add_eos(const df_tokenizer *t) { return t->add_eos; }
bool df_tokenizer_add_space_prefix(const df_tokenizer *t) { return t->add_space_prefix; }
int df_tokenizer_eog_ids(const df_tokenizer *t, const int32_t **ids) {
    *ids = t->eog;
    return t->n_eog;
}
int df_tokenizer_suppress_ids(const df_tokenizer *t, const int32_t **ids) {
    *ids = t->suppress;
    return t->n_suppress;
}

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
    free(t->suppress);
    free(t);
}

/* ------------------------------------------------------------------------------------------
 * load
 * ---------------------------------------------------------------------------------------- */
static void byte_level_map(char enc[256][3], uint8_t len[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp;
        if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) cp = (uint32_t)b;
        else cp = 256u + (uint32_t)n++;
        len[b] = (uint8_t)utf8_put(cp, enc[b]);
        enc[b][len[b]] = 0;
    }
}

/* inverse byte-level map: code point -> byte, -1 if none */
static int byte_level_inv(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) continue;
        if ((uint32_t)(256 + n) == cp) return b;
        n++;
    }
    return -1;
}

/* llama.cpp's permissive decoder (unicode_cpt_from_utf8 + FFFD on error). */
static uint32_t cp_next_permissive(const unsigned char *s, size_t n, size_t *i) {
    unsigned char c = s[*i];
    if (c < 0x80) { (*i)++; return c; }
    int L = 0;
    if ((c & 0x40) == 0) L = 0;
    else if ((c & 0x20) == 0) L = 2;
    else if ((c & 0x10) == 0) L = 3;
    else if ((c & 0x08) == 0) L = 4;
    if (L && *i + (size_t)L <= n) {
        bool ok = true;
        for (int k = 1; k < L; k++) ok = ok && (s[*i + k] & 0xC0) == 0x80;
        if (ok) {
            uint32_t v = L == 2 ? (c & 0x1Fu) : L == 3 ? (c & 0x0Fu) : (c & 0x07u);
            for (int k = 1; k < L; k++) v = (v << 6) | (s[*i + k] & 0x3Fu);
            *i += (size_t)L;
            return v;
        }
    }
    (*i)++;
    return 0xFFFD;
}

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

static void build_piece(const df_tokenizer *t, int32_t id, sbuf *b) {
    const char *txt = strtab_str(&t->st, t->tok_sid[id]);
    size_t n = t->st.len[t->tok_sid[id]];
    int a = t->attr[id];
    if (a & (DF_TATTR_UNKNOWN | DF_TATTR_CONTROL | DF_TATTR_USER_DEFINED)) { sb_put(b, txt, n); return; }
    if (a & DF_TATTR_NORMAL) {
        if (t->type == DF_TOK_SPM) {
            for (size_t i = 0; i < n; i++) {
                if (i + 3 <= n && !memcmp(txt + i, "\xE2\x96\x81", 3)) { sb_put(b, " ", 1); i += 2; }
                else sb_put(b, txt + i, 1);
            }
        } else {
            size_t i = 0;
            while (i < n) {
                size_t st0 = i;
                uint32_t cp = cp_next_permissive((const unsigned char *)txt, n, &i);
                int by = byte_level_inv(cp);
                if (by >= 0) {
                    unsigned char c = (unsigned char)by;
                    sb_put(b, &c, 1);
                } else { /* llama.cpp's llama_decode_text fallback text */
                    char u[4], hx[16];
                    int ul = cp == 0xFFFD && (i - st0 == 1) ? utf8_put(0xFFFD, u) : utf8_put(cp > 0x10FFFF ? 0xFFFD : cp, u);
                    sb_put(b, "[UNK_BYTE_0x", 12);
                    for (int k = 0; k < ul; k++) {
                        snprintf(hx, sizeof hx, "%02x", (unsigned char)u[k]);
                        sb_put(b, hx, 2);
                    }
                    sb_put(b, txt, n);
                    sb_put(b, "]", 1);
                }
            }
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

static int cmp_special(const void *a, const void *b, void *ctx) {
    const df_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->st.len[t->tok_sid[x]], ly = t->st.len[t->tok_sid[y]];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool tok_is(const df_tokenizer *t, int32_t id, const char *s) {
    int32_t sid = t->tok_sid[id];
    size_t l = strlen(s);
    return t->st.len[sid] == l && !memcmp(strtab_str(&t->st, sid), s, l);
}

static bool text_in(const df_tokenizer *t, int32_t id, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (tok_is(t, id, list[i])) return true;
    return false;
}

/* Token ids reachable by text (the last id for duplicate texts), i.e. llama.cpp's
 * token_to_id values. */
static inline bool tok_canonical(const df_tokenizer *t, int32_t id) { return t->sid_tok[t->tok_sid[id]] == id; }

static void warn(const df_tokenizer_opts *o, const char *fmt, const char *a, long b) {
    if (o && o->quiet) return;
    df_log(DF_LOG_WARN, fmt, a, b);
}

static int load_special_id(const df_gguf *g, const char *key, int32_t n_vocab, int32_t *id,
                           const df_tokenizer_opts *o) {
    if (*id >= 0 && *id >= n_vocab) *id = -1; /* default out of range: disabled */
    uint32_t v;
    int rc = df_gguf_get_u32(g, key, &v);
    if (rc == DF_ERR_NOTFOUND) return DF_OK;
    if (rc) { df_err_clear(); warn(o, "tokenizer: %s has a bad value, ignored (%ld)", key, 0L); return DF_OK; }
    if (v >= (uint32_t)n_vocab) { warn(o, "tokenizer: %s = %ld out of vocab range, ignored", key, (long)v); return DF_OK; }
    *id = (int32_t)v;
    return DF_OK;
}

int df_tokenizer_load_ex(const df_gguf *g, const df_tokenizer_opts *opts, df_tokenizer **out) {
    if (!g || !out) return df_err(DF_ERR_INVALID, "tokenizer: bad arguments");
    *out = NULL;
    const char *model = NULL;
    int rc = df_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.model missing");
    if (rc) return rc;
    int type;
    if (!strcmp(model, "llama")) type = DF_TOK_SPM;
    else if (!strcmp(model, "gpt2")) type = DF_TOK_BPE;
    else return df_err(DF_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%s' is not supported (llama, gpt2 are)", model);

    df_tokenizer *t = df_calloc(1, sizeof *t);
    if (!t) return DF_ERR_NOMEM;
    t->type = type;
    t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = t->mask = t->nl = -1;
    t->fim_pre = t->fim_suf = t->fim_mid = t->fim_pad = t->fim_rep = t->fim_sep = -1;

    /* ---- pre-tokenizer / defaults ---- */
    const char *pre = NULL;
    if (opts && opts->pre_override) pre = opts->pre_override;
    else {
        rc = df_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
        if (rc && rc != DF_ERR_NOTFOUND) goto fail;
        rc = DF_OK;
    }
    if (type == DF_TOK_SPM) {
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
        t->pre = pre_lookup(pre);
        if (!t->pre) {
            rc = df_err(DF_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported", pre);
            goto fail;
        }
        snprintf(t->pre_name, sizeof t->pre_name, "%s", pre);
        int f = t->pre->flags;
        if (f & PF_IGNORE_MERGES) t->ignore_merges = true;
        if (f & PF_ADD_BOS) t->add_bos = true;
        if (f & PF_NO_CLEAN_SPACES) t->clean_spaces = false;
        if (f & PF_BOS_NULL) t->bos = -1;
    }
    {
        bool b;
        rc = df_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b);
        if (rc == DF_OK) t->add_space_prefix = b;
        else if (rc != DF_ERR_NOTFOUND) goto fail;
        rc = DF_OK;
    }

    /* ---- vocabulary ---- */
    const df_gguf_str *toks;
    uint64_t n_tok;
    rc = df_gguf_get_arr(g, "tokenizer.ggml.tokens", DF_GGUF_STRING, (const void **)&toks, &n_tok);
    if (rc == DF_ERR_NOTFOUND) { rc = df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens missing"); goto fail; }
    if (rc) goto fail;
    if (n_tok == 0 || n_tok > (uint64_t)INT32_MAX / 2) {
        rc = df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu entries", (unsigned long long)n_tok);
        goto fail;
    }
    t->n_vocab = (int32_t)n_tok;
    int32_t nv = t->n_vocab;
    const float *scores = NULL;
    {
        uint64_t ns;
        rc = df_gguf_get_arr(g, "tokenizer.ggml.scores", DF_GGUF_F32, (const void **)&scores, &ns);
        if (rc == DF_ERR_NOTFOUND) scores = NULL;
        else if (rc) goto fail;
        else if (ns < n_tok) {
            rc = df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores has %llu < %llu entries",
                        (unsigned long long)ns, (unsigned long long)n_tok);
            goto fail;
        }
    }
    const int32_t *types = NULL;
    {
        const df_gguf_kv *kv = df_gguf_find(g, "tokenizer.ggml.token_type");
        if (kv) {
            if (kv->type != DF_GGUF_ARRAY || (kv->arr_type != DF_GGUF_I32 && kv->arr_type != DF_GGUF_U32)) {
                rc = df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type must be an i32 array");
                goto fail;
            }
            if (kv->arr_n < n_tok) {
                rc = df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type has %llu < %llu entries",
                            (unsigned long long)kv->arr_n, (unsigned long long)n_tok);
                goto fail;
            }
            types = kv->arr;
        }
    }
    rc = strtab_init(&t->st, nv);
    if (rc) goto fail;
    t->tok_sid = df_malloc((size_t)nv * sizeof(int32_t));
    t->score = df_malloc((size_t)nv * sizeof(float));
    t->attr = df_malloc((size_t)nv * sizeof(uint16_t));
    if (!t->tok_sid || !t->score || !t->attr) { rc = DF_ERR_NOMEM; goto fail; }
    for (int32_t i = 0; i < nv; i++) {
        const char *s = toks[i].data;
        size_t l = toks[i].len;
        char emp[32];
        if (l == 0) {
            l = (size_t)snprintf(emp, sizeof emp, "[EMPTY_%d]", (int)i);
            s = emp;
        }
        int32_t sid = strtab_intern(&t->st, s, l);
        if (sid < 0) { rc = sid; goto fail; }
        t->tok_sid[i] = sid;
        t->score[i] = scores ? scores[i] : 0.0f;
        int a = DF_TATTR_NORMAL;
        if (types) {
            switch (types[i]) {
            case 2: a = DF_TATTR_UNKNOWN; break;
            case 5: a = DF_TATTR_UNUSED; break;
            case 1: a = DF_TATTR_NORMAL; break;
            case 3: a = DF_TATTR_CONTROL; break;
            case 4: a = DF_TATTR_USER_DEFINED; break;
            case 6: a = DF_TATTR_BYTE; break;
            default: a = DF_TATTR_UNDEFINED; break;
            }
        }
        t->attr[i] = (uint16_t)a;
    }

    /* ---- merges (BPE) ---- */
    if (type == DF_TOK_BPE) {
        const df_gguf_str *mg = NULL;
        uint64_t nm = 0;
        rc = df_gguf_get_arr(g, "tokenizer.ggml.merges", DF_GGUF_STRING, (const void **)&mg, &nm);
        if (rc == DF_ERR_NOTFOUND) {
            if (strcmp(t->pre_name, "kimi-k2") && strcmp(t->pre_name, "kimi-k3")) {
                rc = df_err(DF_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges missing");
                goto fail;
            }
            rc = DF_OK;
            nm = 0;
        } else if (rc) goto fail;
        if (nm > (uint64_t)INT32_MAX / 4) { rc = df_err(DF_ERR_FORMAT, "tokenizer: too many merges"); goto fail; }
        size_t cap = 16;
        while (cap < nm * 2 + 16) cap <<= 1;
        if (nm) {
            t->merges = df_malloc(cap * sizeof(merge_ent));
            if (!t->merges) { rc = DF_ERR_NOMEM; goto fail; }
            memset(t->merges, 0xff, cap * sizeof(merge_ent));
            t->merges_mask = cap - 1;
        }
        char *cat = NULL;
        size_t catcap = 0;
        for (uint64_t i = 0; i < nm; i++) {
            const char *s = mg[i].data;
            size_t l = mg[i].len;
            const char *sp = l > 1 ? memchr(s + 1, ' ', l - 1) : NULL;
            const char *a = "", *b = "";
            size_t la = 0, lb = 0;
            if (sp) { a = s; la = (size_t)(sp - s); b = sp + 1; lb = l - la - 1; }
            if (la + lb > catcap) {
                catcap = (la + lb) * 2 + 64;
                char *p = realloc(cat, catcap);
                if (!p) { free(cat); rc = df_err(DF_ERR_NOMEM, "out of memory"); goto fail; }
                cat = p;
            }
            int32_t sa = strtab_intern(&t->st, a, la);
            int32_t sb = sa >= 0 ? strtab_intern(&t->st, b, lb) : sa;
            if (la + lb) memcpy(cat, a, la), memcpy(cat + la, b, lb);
            int32_t sab = sb >= 0 ? strtab_intern(&t->st, cat, la + lb) : sb;
            if (sab < 0) { free(cat); rc = sab; goto fail; }
            uint64_t key = ((uint64_t)(uint32_t)sa << 32) | (uint32_t)sb;
            size_t h = mix64(key) & t->merges_mask;
            while (t->merges[h].key != UINT64_MAX && t->merges[h].key != key) h = (h + 1) & t->merges_mask;
            if (t->merges[h].key == UINT64_MAX) { /* first (lowest rank) wins */
                t->merges[h].key = key;
                t->merges[h].rank = (int32_t)i;
                t->merges[h].sid = sab;
                t->n_merges++;
            }
        }
        free(cat);
    }
    t->sid_tok = df_malloc((size_t)t->st.n * sizeof(int32_t));
    if (!t->sid_tok) { rc = DF_ERR_NOMEM; goto fail; }
    memset(t->sid_tok, 0xff, (size_t)t->st.n * sizeof(int32_t));
    for (int32_t i = 0; i < nv; i++) t->sid_tok[t->tok_sid[i]] = i; /* last id wins */

    if (type == DF_TOK_SPM) {
        t->spm_split_ws = true;
        for (int32_t i = 0; i < nv && t->spm_split_ws; i++) {
            const char *s = strtab_str(&t->st, t->tok_sid[i]);
            size_t l = t->st.len[t->tok_sid[i]];
            for (size_t k = 1; k + 3 <= l; k++) {
                if (memcmp(s + k, "\xE2\x96\x81", 3)) continue;
                if (k >= 3 && !memcmp(s + k - 3, "\xE2\x96\x81", 3)) continue;
                t->spm_split_ws = false; /* e.g. "a\u2581b": cannot cut safely */
                break;
            }
        }
    }
    byte_level_map(t->byte_enc, t->byte_enc_len);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_tok1[b] = text_to_token(t, &c, 1);
        t->byte_sid[b] = strtab_find(&t->st, t->byte_enc[b], t->byte_enc_len[b]);
    }

    /* ---- regexes ---- */
    if (type == DF_TOK_BPE) {
        uint32_t jit_ok = 0;
        pcre2_config(PCRE2_CONFIG_JIT, &jit_ok);
        for (int i = 0; i < 6 && t->pre->re[i]; i++) {
            int ec;
            PCRE2_SIZE eo;
            pcre2_code *re = pcre2_compile((PCRE2_SPTR)t->pre->re[i], PCRE2_ZERO_TERMINATED,
                                           PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
            if (!re) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(ec, msg, sizeof msg);
                rc = df_err(DF_ERR_INTERNAL, "tokenizer: pre-tokenizer '%s' regex %d: %s at %zu",
                            t->pre_name, i, (char *)msg, (size_t)eo);
                goto fail;
            }
            if (jit_ok) pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to interpreter */
            t->re[t->n_re++] = re;
        }
    }

    /* ---- special ids ---- */
    {
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
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            load_special_id(g, keys[i].key, nv, (int32_t *)((char *)t + keys[i].off), opts);
        bool b;
        if (df_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == DF_OK) t->add_bos = b;
        if (df_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b) == DF_OK) t->add_eos = b;
        if (df_gguf_get_bool(g, "tokenizer.ggml.add_sep_token", &b) == DF_OK) t->add_sep = b;
        df_err_clear();
    }

    /* suppress tokens */
    {
        const df_gguf_kv *kv = df_gguf_find(g, "tokenizer.ggml.suppress_tokens");
        if (kv && kv->type == DF_GGUF_ARRAY && (kv->arr_type == DF_GGUF_I32 || kv->arr_type == DF_GGUF_U32) &&
            kv->arr_n <= (uint64_t)INT32_MAX) {
            t->suppress = df_malloc((kv->arr_n + 1) * sizeof(int32_t));
            if (!t->suppress) { rc = DF_ERR_NOMEM; goto fail; }
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                int32_t id = ((const int32_t *)kv->arr)[i];
                if (id >= 0 && id < nv) t->suppress[t->n_suppress++] = id;
            }
        }
    }

    /* ---- auto-detected special tokens (llama.cpp iterates its token_to_id hash map; where
     * several candidates exist "first in hash order" is not reproducible: we take the
     * highest id, which libstdc++'s iteration order usually visits first) ---- */
    {
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
            for (int32_t i = nv - 1; i >= 0; i--) {
                if (!tok_canonical(t, i) || !text_in(t, i, det[d].txt)) continue;
                *det[d].id = i;
                t->attr[i] |= DF_TATTR_CONTROL;
                break;
            }
        }
    }

    /* ---- EOG set ---- */
    {
        static const char *eog_txt[] = {
            "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
            "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
            "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
            "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[", NULL};
        t->eog = df_malloc(((size_t)nv + 8) * sizeof(int32_t));
        if (!t->eog) { rc = DF_ERR_NOMEM; goto fail; }
        uint8_t *in = df_calloc((size_t)nv, 1);
        if (!in) { rc = DF_ERR_NOMEM; goto fail; }
        int32_t fims[3] = {t->fim_pad, t->fim_rep, t->fim_sep};
        for (int k = 0; k < 3; k++)
            if (fims[k] >= 0) in[fims[k]] = 1;
        for (int32_t i = 0; i < nv; i++) {
            if (!tok_canonical(t, i) || !text_in(t, i, eog_txt)) continue;
            in[i] = 1;
            t->attr[i] |= DF_TATTR_CONTROL;
        }
        /* gpt-oss: always render these */
        static const char *uddef[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
        for (int32_t i = 0; i < nv; i++)
            if (tok_canonical(t, i) && text_in(t, i, uddef)) t->attr[i] = DF_TATTR_USER_DEFINED;
        if (t->eos >= 0) in[t->eos] = 1;
        if (t->eot >= 0) in[t->eot] = 1;
        if (t->eom >= 0) in[t->eom] = 1;
        /* o200k_harmony / solar-open: <|end|> is not EOG when <|return|>+<|call|> (or
         * <|calls|>+<|flush|>) are */
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
        for (int32_t i = 0; i < nv; i++)
            if (in[i]) t->eog[t->n_eog++] = i;
        free(in);
    }

    /* ---- special-token cache (longest text first) ---- */
    {
        t->special = df_malloc(((size_t)nv + 1) * sizeof(int32_t));
        if (!t->special) { rc = DF_ERR_NOMEM; goto fail; }
        for (int32_t i = 0; i < nv; i++)
            if (t->attr[i] & (DF_TATTR_CONTROL | DF_TATTR_USER_DEFINED | DF_TATTR_UNKNOWN)) t->special[t->n_special++] = i;
        qsort_r(t->special, (size_t)t->n_special, sizeof(int32_t), cmp_special, t);
    }

    /* ---- per-model attribute quirks (llama.cpp: by general.name) ---- */
    {
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

    /* ---- decoded pieces ---- */
    {
        sbuf b = {0};
        t->piece_off = df_malloc(((size_t)nv + 1) * sizeof(size_t));
        if (!t->piece_off) { rc = DF_ERR_NOMEM; goto fail; }
        for (int32_t i = 0; i < nv; i++) {
            t->piece_off[i] = b.n;
            build_piece(t, i, &b);
        }
        t->piece_off[nv] = b.n;
        if (b.err) { free(b.p); rc = df_err(DF_ERR_NOMEM, "out of memory"); goto fail; }
        t->piece_blob = b.p ? b.p : df_malloc(1);
        if (!t->piece_blob) { rc = DF_ERR_NOMEM; goto fail; }
    }

    /* ---- newline token ---- */
    if (type == DF_TOK_SPM) {
        t->nl = spm_byte_token(t, '\n');
    } else {
        int32_t ids[4];
        int n = df_tokenize(t, "\n", 1, false, false, ids, 4);
        t->nl = n > 0 ? ids[0] : t->pad;
    }
    df_err_clear();
    *out = t;
    return DF_OK;
fail:
    df_tokenizer_free(t);
    return rc ? rc : DF_ERR_INTERNAL;
}

int df_tokenizer_load(const df_gguf *g, df_tokenizer **out) { return df_tokenizer_load_ex(g, NULL, out); }
