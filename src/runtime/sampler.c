/* sampler.c — llama.cpp's sampler chain (common/sampling.cpp, src/llama-sampler.cpp;
 * formats.md §6): logit bias -> the stages of params.samplers in order -> dist, or, with
 * mirostat: logit bias -> temperature -> mirostat. Each stage follows llama.cpp's math (float
 * softmax sums in candidate order, its min_keep rules, its -inf masks); see deltafin.h for what
 * each stage does.
 * Work layout: the logits are copied (raw, for deltafin_sampler_top) and again into `work`,
 * where the logit bias and the penalty / DRY stages at the head of the chain act on the whole
 * vocabulary (they only lower or raise single logits). The first other stage turns `work`
 * into candidates (top_k straight from the vocabulary with a heap), and the rest act on those.
 * temp <= 0 with only argmax-keeping stages before the temperature stage (top_k, top_p,
 * min_p, top_n_sigma) is the argmax of `work`, with no candidate list at all.
 * Candidates are kept sorted by (logit desc, id asc) whenever a stage needs an order, so a
 * given seed gives the same choice on every machine. The RNG is xoshiro256** (not
 * llama.cpp's mt19937: only greedy outputs are comparable bit for bit); XTC draws from its own
 * stream, as llama.cpp gives it its own generator.
 * Invariant: after the first sample() with a given n_vocab, sample() and accept() do not
 * allocate. Threading: one sampler per thread (or external locking). */
#include "deltafin.h"
#include "base/util.h"
#include "runtime/grammar.h"
#include "runtime/sampler.h"
#include "runtime/sampler_dry.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

typedef struct {
    int32_t id;
    float logit;
    float p;
} df_cand;

struct deltafin_sampler {
    deltafin_sampler_params par;       /* pointers (bias, breakers, vocab) not kept */
    int chain[DELTAFIN_SAMPLER_MAX_CHAIN]; /* the stages that change something, in order */
    int n_chain;
    bool penalties_on;
    uint64_t rng[4];                   /* dist and mirostat draws */
    uint64_t rng_xtc[4];               /* XTC's coin */
    float mu;                          /* mirostat's running threshold (2 tau at start) */

    /* penalty history: ring of the last `repeat_last_n` accepted ids */
    int32_t *ring;
    int ring_cap, ring_len, ring_head; /* head = index of the oldest entry */
    int32_t *counts;                   /* [n_alloc] occurrences in the ring (ids < n_alloc) */
    int32_t *pen_id;                   /* [ring_cap] ids penalized in the current sample() */
    df_dry *dry;                       /* NULL: DRY off */

    /* per-n_vocab scratch */
    int n_alloc;
    df_cand *cand, *cand2; /* [n_alloc] (cand2: typical-p's order) */
    float *raw;            /* [n_alloc] copy of the last logits (for deltafin_sampler_top) */
    float *work;           /* [n_alloc] logits after the vocabulary-wide stages */
    int n_raw;             /* vocab size of the last sample (0 = none yet) */
    int32_t last_id;

    deltafin_logit_bias *bias; /* [n_bias] (params.logit_bias, copied) */
    int n_bias;
    deltafin_grammar *grammar; /* owned; sample() goes through api_grammar.c when set */
};

/* ---- RNG: xoshiro256** seeded through splitmix64 --------------------------------------- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t rng_next(uint64_t s[4]) {
    uint64_t r = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl64(s[3], 45);
    return r;
}
/* uniform double in [0, 1) with 53 random bits */
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }
/* uniform float in [0, 1) with 24 random bits (XTC's coin is a float, as in llama.cpp) */
static float rng_uniform_f(uint64_t s[4]) { return (float)(rng_next(s) >> 40) * 0x1.0p-24f; }

/* dist's stream from the seed, then XTC's (the same splitmix sequence continued) */
static void rng_seed(uint64_t s[4], uint64_t x_out[4], uint64_t seed) {
    if (seed == UINT64_MAX) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = df_time_ns() ^ ((uint64_t)getpid() << 32);
        seed = r;
    }
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
    for (int i = 0; i < 4; i++) x_out[i] = splitmix64(&x);
}

/* ---- names and parameters ---------------------------------------------------------------- */
static const char *const k_type_names[DELTAFIN_SAMPLER_N_TYPES] = {
    "penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature",
};
static const char k_type_chars[DELTAFIN_SAMPLER_N_TYPES] = {'e', 'd', 's', 'k', 'y', 'p', 'm', 'x', 't'};

const char *deltafin_sampler_type_name(int type) {
    return type >= 0 && type < DELTAFIN_SAMPLER_N_TYPES ? k_type_names[type] : NULL;
}

deltafin_sampler_params deltafin_sampler_default_params(void) {
    deltafin_sampler_params p = {
        .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .repeat_last_n = 64, .freq_penalty = 0.0f,
        .presence_penalty = 0.0f, .seed = UINT64_MAX,
        .typical_p = 1.0f, .top_n_sigma = -1.0f, .xtc_probability = 0.0f, .xtc_threshold = 0.1f,
        .mirostat = 0, .mirostat_tau = 5.0f, .mirostat_eta = 0.1f,
        .dry_multiplier = 0.0f, .dry_base = 1.75f, .dry_allowed_length = 2, .dry_penalty_last_n = 64,
        .n_dry_sequence_breakers = -1,
        .samplers = {DELTAFIN_SAMPLER_PENALTIES, DELTAFIN_SAMPLER_DRY, DELTAFIN_SAMPLER_TOP_N_SIGMA,
                     DELTAFIN_SAMPLER_TOP_K, DELTAFIN_SAMPLER_TYPICAL_P, DELTAFIN_SAMPLER_TOP_P,
                     DELTAFIN_SAMPLER_MIN_P, DELTAFIN_SAMPLER_XTC, DELTAFIN_SAMPLER_TEMPERATURE},
        .n_samplers = 9,
    };
    return p;
}

/* One name of llama.cpp's --samplers (its canonical names, their kebab-case and no-dash
 * spellings, nucleus / temp / typ), lower-cased: the type, or -1 (-2: known to llama.cpp,
 * not offered here). */
static int type_of_name(const char *name) {
    static const struct { const char *name; int type; } alias[] = {
        {"nucleus", DELTAFIN_SAMPLER_TOP_P}, {"temp", DELTAFIN_SAMPLER_TEMPERATURE},
        {"typ", DELTAFIN_SAMPLER_TYPICAL_P}, {"infill", -2}, {"adaptive_p", -2}, {"adaptive-p", -2},
        {"adaptivep", -2},
    };
    for (int t = 0; t < DELTAFIN_SAMPLER_N_TYPES; t++) {
        const char *c = k_type_names[t];
        char kebab[32], nodash[32];
        size_t j = 0, k = 0;
        for (size_t i = 0; c[i] && i < sizeof kebab - 1; i++) {
            kebab[j++] = c[i] == '_' ? '-' : c[i];
            if (c[i] != '_') nodash[k++] = c[i];
        }
        kebab[j] = nodash[k] = 0;
        if (!strcmp(name, c) || !strcmp(name, kebab) || !strcmp(name, nodash)) return t;
    }
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(name, alias[i].name)) return alias[i].type;
    return -1;
}

int deltafin_sampler_parse_order(const char *text, bool chars, deltafin_sampler_params *p) {
    if (!text || !p) return df_err(DF_ERR_INVALID, "samplers: NULL");
    int out[DELTAFIN_SAMPLER_MAX_CHAIN], n = 0;
    const char *q = text;
    while (*q) {
        char name[32];
        size_t len = chars ? 1 : strcspn(q, ";");
        int t = -1;
        if (len && len < sizeof name) {
            for (size_t i = 0; i < len; i++) name[i] = (char)tolower((unsigned char)q[i]);
            name[len] = 0;
            if (chars) {
                for (int k = 0; k < DELTAFIN_SAMPLER_N_TYPES; k++)
                    if (k_type_chars[k] == name[0]) t = k;
                if (t < 0 && (name[0] == 'i' || name[0] == 'a')) t = -2;
            } else {
                t = type_of_name(name);
            }
        }
        if (len && t == -2)
            return df_err(DF_ERR_UNSUPPORTED, "llama.cpp's '%.*s' sampler is not offered by deltafin",
                          (int)len, q);
        if (len && t < 0)
            return df_err(DF_ERR_INVALID, chars ? "unknown sampler letter '%.*s' (e d s k y p m x t: "
                          "penalties dry top_n_sigma top_k typ_p top_p min_p xtc temperature)"
                          : "unknown sampler '%.*s' (penalties, dry, top_n_sigma, top_k, typ_p, top_p, "
                          "min_p, xtc, temperature; separated by ';')", (int)(len < 40 ? len : 40), q);
        if (len) {
            if (n == DELTAFIN_SAMPLER_MAX_CHAIN)
                return df_err(DF_ERR_INVALID, "samplers: more than %d stages", DELTAFIN_SAMPLER_MAX_CHAIN);
            out[n++] = t;
        }
        q += len;
        if (*q == ';' && !chars) q++;
    }
    memcpy(p->samplers, out, sizeof out[0] * (size_t)n);
    p->n_samplers = n;
    return DF_OK;
}

int deltafin_logit_bias_parse(const char *text, deltafin_logit_bias *out) {
    if (!text || !out) return df_err(DF_ERR_INVALID, "logit bias: NULL");
    const char *q = text;
    while (isspace((unsigned char)*q)) q++;
    char *end;
    errno = 0;
    long tok = strtol(q, &end, 10);
    if (end == q || errno || tok < 0 || tok > INT32_MAX)
        return df_err(DF_ERR_INVALID, "logit bias '%.60s': expected TOKEN_ID(+|-)BIAS with a token id >= 0 "
                      "(e.g. 15043+1 or 15043-inf)", text);
    q = end;
    while (isspace((unsigned char)*q)) q++;
    const char sign = *q;
    if (sign != '+' && sign != '-')
        return df_err(DF_ERR_INVALID, "logit bias '%.60s': expected + or - after the token id (15043+1, 15043-1)",
                      text);
    q++;
    errno = 0;
    float b = strtof(q, &end);
    while (end && isspace((unsigned char)*end)) end++;
    if (end == q || *end || isnan(b))
        return df_err(DF_ERR_INVALID, "logit bias '%.60s': expected a number after the sign (15043+1, 15043-inf)",
                      text);
    out->token = (int32_t)tok;
    out->bias = sign == '-' ? -b : b;
    return DF_OK;
}

#define DF_SAMPLER_MAX_LAST_N (1 << 24)

/* A stage that leaves the candidates unchanged with these parameters (llama.cpp's "empty"
 * samplers) is left out of the chain. */
static bool stage_on(const deltafin_sampler_params *p, int t) {
    switch (t) {
    case DELTAFIN_SAMPLER_PENALTIES:
        return p->repeat_last_n > 0 &&
               !(p->repeat_penalty == 1.0f && p->freq_penalty == 0.0f && p->presence_penalty == 0.0f);
    case DELTAFIN_SAMPLER_DRY:
        return p->dry_multiplier != 0.0f && p->dry_base >= 1.0f && p->dry_penalty_last_n > 0;
    case DELTAFIN_SAMPLER_TOP_N_SIGMA: return p->top_n_sigma > 0.0f;
    case DELTAFIN_SAMPLER_TOP_K: return p->top_k > 0;
    case DELTAFIN_SAMPLER_TYPICAL_P: return p->typical_p < 1.0f;
    case DELTAFIN_SAMPLER_TOP_P: return p->top_p < 1.0f;
    case DELTAFIN_SAMPLER_MIN_P: return p->min_p > 0.0f;
    case DELTAFIN_SAMPLER_XTC: return p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f;
    case DELTAFIN_SAMPLER_TEMPERATURE: return p->temp != 1.0f;
    default: return false;
    }
}

static int check_params(const deltafin_sampler_params *p) {
    if (p->repeat_last_n < 0 || p->repeat_last_n > DF_SAMPLER_MAX_LAST_N)
        return df_err(DF_ERR_INVALID, "sampler: repeat_last_n = %d (must be 0 .. %d)", p->repeat_last_n,
                      DF_SAMPLER_MAX_LAST_N);
    if (p->dry_penalty_last_n < 0 || p->dry_penalty_last_n > DF_SAMPLER_MAX_LAST_N)
        return df_err(DF_ERR_INVALID, "sampler: dry_penalty_last_n = %d (must be 0 .. %d)", p->dry_penalty_last_n,
                      DF_SAMPLER_MAX_LAST_N);
    const float f[] = {p->temp, p->top_p, p->min_p, p->repeat_penalty, p->freq_penalty, p->presence_penalty,
                       p->typical_p, p->top_n_sigma, p->xtc_probability, p->xtc_threshold, p->mirostat_tau,
                       p->mirostat_eta, p->dry_multiplier, p->dry_base};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (isnan(f[i])) return df_err(DF_ERR_INVALID, "sampler: NaN parameter");
    /* llama.cpp's common_sampler_init */
    if (!isfinite(p->repeat_penalty) || p->repeat_penalty <= 0.0f || !isfinite(1.0f / p->repeat_penalty))
        return df_err(DF_ERR_INVALID, "sampler: repeat_penalty must be finite and greater than 0 (got %g)",
                      (double)p->repeat_penalty);
    if (!isfinite(p->freq_penalty) || !isfinite(p->presence_penalty))
        return df_err(DF_ERR_INVALID, "sampler: frequency and presence penalties must be finite");
    if (p->mirostat < 0 || p->mirostat > 2)
        return df_err(DF_ERR_INVALID, "sampler: mirostat = %d (0 off, 1 Mirostat, 2 Mirostat 2.0)", p->mirostat);
    if (p->min_keep < 0) return df_err(DF_ERR_INVALID, "sampler: min_keep = %d (must be >= 0)", p->min_keep);
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return df_err(DF_ERR_INVALID, "sampler: %d logit biases without an array", p->n_logit_bias);
    if (p->n_samplers < 0 || p->n_samplers > DELTAFIN_SAMPLER_MAX_CHAIN)
        return df_err(DF_ERR_INVALID, "sampler: %d stages (0 .. %d)", p->n_samplers, DELTAFIN_SAMPLER_MAX_CHAIN);
    for (int i = 0; i < p->n_samplers; i++)
        if (p->samplers[i] < 0 || p->samplers[i] >= DELTAFIN_SAMPLER_N_TYPES)
            return df_err(DF_ERR_INVALID, "sampler: stage %d has an unknown type %d", i, p->samplers[i]);
    if (p->n_dry_sequence_breakers < -1 || (p->n_dry_sequence_breakers > 0 && !p->dry_sequence_breakers))
        return df_err(DF_ERR_INVALID, "sampler: %d DRY sequence breakers without an array",
                      p->n_dry_sequence_breakers);
    return DF_OK;
}

static bool chain_has(const deltafin_sampler *s, int t) {
    for (int i = 0; i < s->n_chain; i++)
        if (s->chain[i] == t) return true;
    return false;
}

static int create_dry(deltafin_sampler *s, const deltafin_sampler_params *p) {
    static const char *const dflt[] = {"\n", ":", "\"", "*"};
    const char *const *b = p->n_dry_sequence_breakers < 0 ? dflt : p->dry_sequence_breakers;
    const int nb = p->n_dry_sequence_breakers < 0 ? 4 : p->n_dry_sequence_breakers;
    s->dry = df_dry_create(p->dry_multiplier, p->dry_base, p->dry_allowed_length, p->dry_penalty_last_n,
                           p->vocab, b, nb);
    return s->dry ? DF_OK : -1;
}

deltafin_sampler *deltafin_sampler_create(const deltafin_sampler_params *p) {
    deltafin_sampler_params par = p ? *p : deltafin_sampler_default_params();
    if (check_params(&par) < 0) return NULL;
    deltafin_sampler *s = df_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->par = par;
    s->par.logit_bias = NULL; /* borrowed: not kept */
    s->par.dry_sequence_breakers = NULL;
    s->par.vocab = NULL;
    if (!par.mirostat) /* mirostat replaces the chain (llama.cpp) */
        for (int i = 0; i < par.n_samplers; i++)
            if (stage_on(&par, par.samplers[i])) s->chain[s->n_chain++] = par.samplers[i];
    s->mu = 2.0f * par.mirostat_tau;
    if (par.n_logit_bias > 0) {
        s->bias = df_malloc((size_t)par.n_logit_bias * sizeof *s->bias);
        if (!s->bias) goto fail;
        memcpy(s->bias, par.logit_bias, (size_t)par.n_logit_bias * sizeof *s->bias);
        s->n_bias = par.n_logit_bias;
    }
    s->penalties_on = chain_has(s, DELTAFIN_SAMPLER_PENALTIES);
    if (s->penalties_on) {
        s->ring_cap = par.repeat_last_n;
        s->ring = df_malloc((size_t)s->ring_cap * sizeof *s->ring);
        s->pen_id = df_malloc((size_t)s->ring_cap * sizeof *s->pen_id);
        if (!s->ring || !s->pen_id) goto fail;
    }
    if (chain_has(s, DELTAFIN_SAMPLER_DRY) && create_dry(s, p ? p : &par) < 0) goto fail;
    rng_seed(s->rng, s->rng_xtc, par.seed);
    s->last_id = -1;
    return s;
fail:
    deltafin_sampler_free(s);
    return NULL;
}

void deltafin_sampler_free(deltafin_sampler *s) {
    if (!s) return;
    free(s->ring);
    free(s->pen_id);
    free(s->counts);
    df_dry_free(s->dry);
    free(s->cand);
    free(s->cand2);
    free(s->raw);
    free(s->work);
    free(s->bias);
    deltafin_grammar_free(s->grammar);
    free(s);
}

int deltafin_sampler_set_grammar(deltafin_sampler *s, deltafin_grammar *g) {
    if (!s) return df_err(DF_ERR_INVALID, "sampler: NULL");
    deltafin_grammar_free(s->grammar);
    s->grammar = g;
    return DF_OK;
}

void deltafin_sampler_accept(deltafin_sampler *s, int32_t id) {
    if (s && s->grammar && id >= 0) (void)deltafin_grammar_accept(s->grammar, id);
    if (!s || id < 0) return;
    if (s->dry) df_dry_accept(s->dry, id);
    if (!s->penalties_on) return;
    if (s->ring_len == s->ring_cap) { /* drop the oldest */
        int32_t old = s->ring[s->ring_head];
        if (s->counts && old < s->n_alloc) s->counts[old]--;
        s->ring[s->ring_head] = id;
        s->ring_head = (s->ring_head + 1) % s->ring_cap;
    } else {
        s->ring[(s->ring_head + s->ring_len) % s->ring_cap] = id;
        s->ring_len++;
    }
    if (s->counts && id < s->n_alloc) s->counts[id]++;
}

int df_sampler_dry_add_breaker_ids(deltafin_sampler *s, const int32_t *ids, int n) {
    if (!s || !s->dry) return df_err(DF_ERR_INVALID, "sampler: DRY is off");
    return df_dry_add_breaker_ids(s->dry, ids, n);
}

float df_sampler_mirostat_mu(const deltafin_sampler *s) { return s ? s->mu : 0.0f; }

/* Size the scratch for n_vocab (only reallocates when the vocabulary grows). */
static int ensure_vocab(deltafin_sampler *s, int n_vocab) {
    if (n_vocab <= s->n_alloc) return DF_OK;
    const size_t n = (size_t)n_vocab;
    df_cand *c = df_realloc(s->cand, n * sizeof *c);
    if (!c) return DF_ERR_NOMEM;
    s->cand = c;
    c = df_realloc(s->cand2, n * sizeof *c);
    if (!c) return DF_ERR_NOMEM;
    s->cand2 = c;
    float *r = df_realloc(s->raw, n * sizeof *r);
    if (!r) return DF_ERR_NOMEM;
    s->raw = r;
    r = df_realloc(s->work, n * sizeof *r);
    if (!r) return DF_ERR_NOMEM;
    s->work = r;
    if (s->dry && df_dry_size(s->dry, n_vocab) != DF_OK) return DF_ERR_NOMEM;
    if (s->penalties_on) {
        int32_t *cnt = df_realloc(s->counts, n * sizeof *cnt);
        if (!cnt) return DF_ERR_NOMEM;
        s->counts = cnt;
        /* rebuild counts from the ring (ids accepted before the vocab size was known) */
        memset(s->counts, 0, n * sizeof *cnt);
        for (int i = 0; i < s->ring_len; i++) {
            int32_t id = s->ring[(s->ring_head + i) % s->ring_cap];
            if (id < n_vocab) s->counts[id]++;
        }
    }
    s->n_alloc = n_vocab;
    return DF_OK;
}

/* ---- ordering ------------------------------------------------------------------------------ */
/* Total order used everywhere: higher logit first, then lower id. */
static inline bool better(const df_cand *a, const df_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}
/* Sift c[i] down in the heap c[0..n) whose root is the WORST candidate. */
static void sift_down(df_cand *c, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && better(&c[w], &c[l])) w = l;
        if (r < n && better(&c[w], &c[r])) w = r;
        if (w == i) return;
        df_cand t = c[i]; c[i] = c[w]; c[w] = t;
        i = w;
    }
}

/* Move the k best of c[0..n) to c[0..k), sorted best first: a heap of the k best so far (worst
 * at the root) over the prefix, a scan of the rest, then heapsort. O(n log k), in place (no
 * qsort: glibc's may allocate). */
static void partial_sort(df_cand *c, int n, int k) {
    if (k > n) k = n;
    if (k <= 0) return;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(c, k, i);
    for (int j = k; j < n; j++) {
        if (!better(&c[j], &c[0])) continue;
        df_cand t = c[0]; c[0] = c[j]; c[j] = t;
        sift_down(c, k, 0);
    }
    for (int end = k - 1; end > 0; end--) { /* the worst goes last */
        df_cand t = c[0]; c[0] = c[end]; c[end] = t;
        sift_down(c, end, 0);
    }
}

/* The k best of raw[0..n) into c[0..k), sorted best first (NaN counts as -inf). The scan
 * compares plain floats against the worst kept candidate, so it costs about one load and one
 * compare per vocabulary entry. */
static void top_k_from(df_cand *c, const float *raw, int n, int k) {
    for (int i = 0; i < k; i++) {
        c[i].id = i;
        c[i].logit = isnan(raw[i]) ? -INFINITY : raw[i];
    }
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(c, k, i);
    for (int i = k; i < n; i++) {
        float l = raw[i];
        if (!(l > c[0].logit)) continue; /* equal logits: the lower id (already kept) wins */
        c[0].id = i;
        c[0].logit = l;
        sift_down(c, k, 0);
    }
    for (int end = k - 1; end > 0; end--) {
        df_cand t = c[0]; c[0] = c[end]; c[end] = t;
        sift_down(c, end, 0);
    }
}

/* ---- the stages ------------------------------------------------------------------------------ */
typedef struct {
    df_cand *c;
    int n;
    bool sorted;
} cands;

/* llama_sampler_softmax_impl: max-subtracted expf, float sum in candidate order, p normalized */
static void softmax_f(df_cand *c, int n) {
    float max_l = c[0].logit;
    for (int i = 1; i < n; i++) if (c[i].logit > max_l) max_l = c[i].logit;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { c[i].p = expf(c[i].logit - max_l); sum += c[i].p; }
    for (int i = 0; i < n; i++) c[i].p /= sum;
}
static void softmax_sorted(cands *k) {
    if (!k->sorted) partial_sort(k->c, k->n, k->n);
    k->sorted = true;
    softmax_f(k->c, k->n);
}

static float penalize(const deltafin_sampler_params *p, float l, int cnt) {
    if (isnan(l)) l = -INFINITY;
    if (l <= 0) l *= p->repeat_penalty;
    else l /= p->repeat_penalty;
    return l - ((float)cnt * p->freq_penalty + p->presence_penalty);
}

/* penalties over the whole vocabulary: the distinct ids of the history (counts negated while
 * visited) */
static void penalties_vocab(deltafin_sampler *s, float *w, int n_vocab) {
    int n_pen = 0;
    for (int i = 0; i < s->ring_len; i++) {
        int32_t id = s->ring[(s->ring_head + i) % s->ring_cap];
        if (id >= n_vocab || s->counts[id] <= 0) continue; /* <= 0: done already */
        const int cnt = s->counts[id];
        s->counts[id] = -cnt;
        s->pen_id[n_pen++] = id;
        w[id] = penalize(&s->par, w[id], cnt);
    }
    for (int i = 0; i < n_pen; i++) s->counts[s->pen_id[i]] *= -1;
}

static void penalties_cands(deltafin_sampler *s, cands *k) {
    for (int i = 0; i < k->n; i++) {
        const int32_t id = k->c[i].id;
        if (id < s->n_alloc && s->counts[id] > 0) k->c[i].logit = penalize(&s->par, k->c[i].logit, s->counts[id]);
    }
    k->sorted = false;
}

static void dry_sub(void *ud, int32_t id, float pen) { ((float *)ud)[id] -= pen; }

static void dry_cands(const df_dry *d, cands *k) {
    for (int i = 0; i < k->n; i++) k->c[i].logit -= df_dry_penalty(d, k->c[i].id);
    k->sorted = false;
}

/* top-n-sigma: logits below max - n * std (over the finite ones) become -inf, in place */
static void top_n_sigma(float nsig, cands *k) {
    if (k->n <= 1) return;
    df_cand *c = k->c;
    float max = c[0].logit, sum = 0.0f;
    int valid = 0;
    for (int i = 0; i < k->n; i++)
        if (c[i].logit != -INFINITY) {
            if (c[i].logit > max) max = c[i].logit;
            sum += c[i].logit;
            valid++;
        }
    const float mean = valid ? sum / (float)valid : 0.0f;
    float acc = 0.0f;
    for (int i = 0; i < k->n; i++)
        if (c[i].logit != -INFINITY) {
            const double d = (double)(c[i].logit - mean); /* llama.cpp: pow(x - mean, 2) in double */
            acc = (float)((double)acc + d * d);
        }
    const float sd = valid ? sqrtf(acc / (float)valid) : 0.0f;
    const float floor_l = max - nsig * sd;
    for (int i = 0; i < k->n; i++)
        if (c[i].logit < floor_l) c[i].logit = -INFINITY;
}

static void top_k(int topk, cands *k) {
    if (topk <= 0) return;
    if (topk > k->n) topk = k->n;
    if (!k->sorted) partial_sort(k->c, k->n, topk);
    k->n = topk;
    k->sorted = true;
}

/* locally typical: the candidates ordered by |surprise - entropy| (ties by position, a stable
 * order), the shortest prefix whose probability exceeds p (and holds min_keep) */
static void typical(deltafin_sampler *s, cands *k) {
    const float tp = s->par.typical_p;
    softmax_sorted(k);
    df_cand *c = k->c, *o = s->cand2;
    float ent = 0.0f;
    for (int i = 0; i < k->n; i++) ent += -c[i].p * logf(c[i].p);
    /* the order as candidates: logit = -score, id = position, so `better` sorts it */
    for (int i = 0; i < k->n; i++) o[i] = (df_cand){i, -fabsf(-logf(c[i].p) - ent), c[i].p};
    partial_sort(o, k->n, k->n);
    float cum = 0.0f;
    int last = k->n;
    const int mk = s->par.min_keep;
    for (int i = 0; i < k->n; i++) {
        cum += o[i].p;
        if (cum > tp && (mk == 0 || i >= mk - 1)) { last = i + 1; break; }
    }
    for (int i = 0; i < last; i++) o[i] = c[o[i].id];
    memcpy(c, o, sizeof *c * (size_t)last);
    k->n = last;
    k->sorted = false;
}

/* top_p on probabilities in c[].p: the shortest best-first prefix whose cumulative probability
 * reaches top_p and holds min_keep. Sorts only as deep as needed. Returns the new n. */
static int top_p_cut(df_cand *c, int n, float top_p, int min_keep, bool sorted) {
    int k = sorted ? n : (n > 1024 ? 256 : n);
    if (!sorted) partial_sort(c, n, k);
    float cum = 0.0f;
    int i = 0;
    for (;;) {
        for (; i < k; i++) {
            cum += c[i].p;
            if (cum >= top_p && i + 1 >= min_keep) return i + 1;
        }
        if (k == n) return n;
        /* not reached within the sorted prefix: sort deeper (the prefix stays in place) */
        int nk = k * 4 < n ? k * 4 : n;
        partial_sort(c + k, n - k, nk - k);
        k = nk;
    }
}

static void top_p(const deltafin_sampler_params *p, cands *k) {
    softmax_f(k->c, k->n);
    k->n = top_p_cut(k->c, k->n, p->top_p, p->min_keep, k->sorted);
    k->sorted = true;
}

/* min_p: keep logits >= max_logit + ln(min_p) (at least min_keep; the top token always) */
static void min_p(const deltafin_sampler_params *p, cands *k) {
    df_cand *c = k->c;
    if (!k->sorted) {
        float max_l = -FLT_MAX;
        for (int i = 0; i < k->n; i++) if (c[i].logit > max_l) max_l = c[i].logit;
        const float min_logit = max_l + logf(p->min_p);
        int m = 0;
        for (int i = 0; i < k->n; i++) if (c[i].logit >= min_logit) m++;
        if (m > 0 && m >= p->min_keep) {
            m = 0;
            for (int i = 0; i < k->n; i++) if (c[i].logit >= min_logit) c[m++] = c[i];
            k->n = m;
            return;
        }
        partial_sort(c, k->n, k->n);
        k->sorted = true;
    }
    const float min_logit = c[0].logit + logf(p->min_p);
    int i = 1;
    while (i < k->n && !(c[i].logit < min_logit && i >= p->min_keep)) i++;
    k->n = i;
}

/* XTC: with probability xtc_probability, drop the tokens of probability >= threshold but the
 * last of them */
static void xtc(deltafin_sampler *s, cands *k) {
    if (k->n < 2) return;
    if (rng_uniform_f(s->rng_xtc) > s->par.xtc_probability) return;
    softmax_sorted(k);
    int last = 0;
    for (int i = 0; i < k->n && k->c[i].p >= s->par.xtc_threshold; i++) last = i;
    if (k->n - last >= s->par.min_keep && last > 0) {
        memmove(k->c, k->c + last, sizeof *k->c * (size_t)(k->n - last));
        k->n -= last;
    }
}

/* temperature; <= 0 keeps the first best candidate alone */
static void temperature(float t, cands *k) {
    if (t <= 0.0f) {
        int best = 0;
        for (int i = 1; i < k->n; i++) if (k->c[i].logit > k->c[best].logit) best = i;
        k->c[0] = k->c[best];
        k->n = 1;
        k->sorted = true;
        return;
    }
    for (int i = 0; i < k->n; i++) k->c[i].logit /= t;
}

/* a draw by the candidates' p (llama_sample_dist): the first whose running sum reaches u * sum */
static int pick_p(uint64_t rng[4], const df_cand *c, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += c[i].p;
    const double target = sum * rng_uniform(rng);
    double run = 0.0;
    for (int i = 0; i < n; i++) {
        run += c[i].p;
        if (run >= target && c[i].p > 0.0f) return i;
    }
    return n - 1;
}

/* dist: softmax (float exp, double sum), first candidate whose running sum >= u·sum */
static int32_t dist(deltafin_sampler *s, cands *k) {
    df_cand *c = k->c;
    const int n = k->n;
    float max_l = c[0].logit;
    for (int i = 1; i < n; i++) if (c[i].logit > max_l) max_l = c[i].logit;
    if (n == 1 || max_l == -INFINITY) {
        int best = 0;
        for (int i = 1; i < n; i++) if (better(&c[i], &c[best])) best = i;
        return c[best].id;
    }
    for (int i = 0; i < n; i++) c[i].p = expf(c[i].logit - max_l);
    return c[pick_p(s->rng, c, n)].id;
}

/* the x86 conversion of a float to int (what llama.cpp's int(k) gives there): out of range
 * and NaN become INT_MIN */
static int float_to_int_x86(float x) {
    if (!(x > -2147483649.0f && x < 2147483648.0f)) return INT_MIN;
    return (int)x;
}

static void mirostat_update(deltafin_sampler *s, float p) {
    const float surprise = -log2f(p);
    s->mu = s->mu - s->par.mirostat_eta * (surprise - s->par.mirostat_tau);
}

/* Mirostat 1: estimate the Zipf exponent from the 100 best, pick k for the target surprise */
static int32_t mirostat1(deltafin_sampler *s, cands *k, int n_vocab) {
    const int m = 100;
    softmax_sorted(k);
    float sum_tb = 0.0f, sum_tt = 0.0f;
    for (int i = 0; i < m - 1 && i < k->n - 1; i++) {
        const float t = logf((float)(i + 2) / (float)(i + 1));
        const float b = logf(k->c[i].p / k->c[i + 1].p);
        sum_tb += t * b;
        sum_tt += t * t;
    }
    const float s_hat = sum_tb / sum_tt, eps = s_hat - 1.0f;
    const float kf = powf((eps * powf(2.0f, s->mu)) / (1.0f - powf((float)n_vocab, -eps)), 1.0f / s_hat);
    int ki = float_to_int_x86(kf);
    top_k(ki > 1 ? ki : 1, k);
    softmax_sorted(k);
    const int idx = pick_p(s->rng, k->c, k->n);
    mirostat_update(s, k->c[idx].p);
    return k->c[idx].id;
}

/* Mirostat 2.0: keep the candidates whose surprise is at most mu */
static int32_t mirostat2(deltafin_sampler *s, cands *k) {
    softmax_sorted(k);
    int n = 0;
    while (n < k->n && !(-log2f(k->c[n].p) > s->mu)) n++;
    k->n = n ? n : 1;
    softmax_sorted(k);
    const int idx = pick_p(s->rng, k->c, k->n);
    mirostat_update(s, k->c[idx].p);
    return k->c[idx].id;
}

/* ---- the chain ------------------------------------------------------------------------------- */
static int32_t argmax(const float *w, int n) {
    int best = -1;
    float bl = -INFINITY;
    for (int i = 0; i < n; i++)
        if (w[i] > bl) { bl = w[i]; best = i; } /* strict: ties keep the lowest id; NaN never wins */
    return best < 0 ? 0 : best;                 /* all -inf/NaN: id 0 */
}

/* temp <= 0 and, from stage `from` to the temperature stage, only stages that keep the best
 * candidate: the argmax of the logits is the answer */
static bool greedy_from(const deltafin_sampler *s, int from) {
    if (s->par.temp > 0.0f) return false;
    for (int i = from; i < s->n_chain; i++) {
        switch (s->chain[i]) {
        case DELTAFIN_SAMPLER_TEMPERATURE: return true;
        case DELTAFIN_SAMPLER_TOP_K: case DELTAFIN_SAMPLER_TOP_P: case DELTAFIN_SAMPLER_MIN_P:
        case DELTAFIN_SAMPLER_TOP_N_SIGMA: break;
        default: return false; /* a logit change after a cut, typical-p or XTC */
        }
    }
    return false; /* no temperature stage: llama.cpp samples at temperature 1 */
}

static void fill_all(cands *k, const float *w, int n_vocab) {
    for (int i = 0; i < n_vocab; i++) {
        k->c[i].id = i;
        k->c[i].logit = isnan(w[i]) ? -INFINITY : w[i];
    }
    k->n = n_vocab;
    k->sorted = false;
}

static int32_t sample_mirostat(deltafin_sampler *s, const float *w, int n_vocab) {
    cands k = {s->cand, 0, false};
    if (s->par.temp <= 0.0f) { /* the temperature stage keeps the best alone */
        const int32_t b = argmax(w, n_vocab);
        k.c[0] = (df_cand){b, w[b], 1.0f};
        k.n = 1;
        k.sorted = true;
    } else {
        fill_all(&k, w, n_vocab);
        if (s->par.temp != 1.0f) temperature(s->par.temp, &k);
    }
    return s->par.mirostat == 1 ? mirostat1(s, &k, n_vocab) : mirostat2(s, &k);
}

static void run_stage(deltafin_sampler *s, int t, cands *k, bool *dry_done) {
    const deltafin_sampler_params *p = &s->par;
    switch (t) {
    case DELTAFIN_SAMPLER_PENALTIES: penalties_cands(s, k); break;
    case DELTAFIN_SAMPLER_DRY:
        if (!*dry_done) df_dry_analyse(s->dry);
        *dry_done = true;
        dry_cands(s->dry, k);
        break;
    case DELTAFIN_SAMPLER_TOP_N_SIGMA: top_n_sigma(p->top_n_sigma, k); break;
    case DELTAFIN_SAMPLER_TOP_K: top_k(p->top_k, k); break;
    case DELTAFIN_SAMPLER_TYPICAL_P: typical(s, k); break;
    case DELTAFIN_SAMPLER_TOP_P: top_p(p, k); break;
    case DELTAFIN_SAMPLER_MIN_P: min_p(p, k); break;
    case DELTAFIN_SAMPLER_XTC: xtc(s, k); break;
    case DELTAFIN_SAMPLER_TEMPERATURE: temperature(p->temp, k); break;
    default: break;
    }
}

/* Everything but the final draw: the candidates left in s->cand[0..*n) (p unset), or the
 * chosen id in *chosen (greedy, mirostat) with *n = 0. */
static int chain_candidates(deltafin_sampler *s, const float *logits, int n_vocab, int *n, int32_t *chosen) {
    *n = 0;
    if (!s || !logits || n_vocab <= 0) return df_err(DF_ERR_INVALID, "sampler: bad arguments (n_vocab %d)", n_vocab);
    if (ensure_vocab(s, n_vocab) != DF_OK) return DF_ERR_NOMEM;
    memcpy(s->raw, logits, (size_t)n_vocab * sizeof *logits);
    s->n_raw = n_vocab;
    float *w = s->work;
    memcpy(w, logits, (size_t)n_vocab * sizeof *logits);
    for (int i = 0; i < s->n_bias; i++) /* logit bias first (llama.cpp's chain) */
        if (s->bias[i].token >= 0 && s->bias[i].token < n_vocab) w[s->bias[i].token] += s->bias[i].bias;
    if (s->par.mirostat) { *chosen = sample_mirostat(s, w, n_vocab); return DF_OK; }

    /* penalties and DRY at the head of the chain act on the whole vocabulary */
    bool dry_done = false;
    int i = 0;
    for (; i < s->n_chain; i++) {
        if (s->chain[i] == DELTAFIN_SAMPLER_PENALTIES) {
            penalties_vocab(s, w, n_vocab);
        } else if (s->chain[i] == DELTAFIN_SAMPLER_DRY) {
            if (!dry_done) df_dry_analyse(s->dry);
            dry_done = true;
            df_dry_each(s->dry, dry_sub, w);
        } else {
            break;
        }
    }
    if (greedy_from(s, i)) { *chosen = argmax(w, n_vocab); return DF_OK; }
    cands k = {s->cand, n_vocab, false};
    if (i < s->n_chain && s->chain[i] == DELTAFIN_SAMPLER_TOP_K) {
        k.n = s->par.top_k < n_vocab ? s->par.top_k : n_vocab;
        top_k_from(k.c, w, n_vocab, k.n);
        k.sorted = true;
        i++;
    } else {
        fill_all(&k, w, n_vocab);
    }
    for (; i < s->n_chain; i++) run_stage(s, s->chain[i], &k, &dry_done);
    *n = k.n;
    return DF_OK;
}

int32_t deltafin_sampler_sample(deltafin_sampler *s, const float *logits, int n_vocab) {
    if (s && s->grammar && logits && n_vocab > 0) {
        int32_t id = df_grammar_sample(s->grammar, s, logits, n_vocab);
        /* _top() reports the model's distribution, not the grammar-masked one */
        if (s->n_raw == n_vocab) memcpy(s->raw, logits, (size_t)n_vocab * sizeof *logits);
        return id;
    }
    return df_sampler_sample_chain(s, logits, n_vocab);
}

int32_t df_sampler_sample_chain(deltafin_sampler *s, const float *logits, int n_vocab) {
    int n;
    int32_t chosen = -1;
    if (chain_candidates(s, logits, n_vocab, &n, &chosen) < 0) return -1;
    if (n > 0) {
        cands k = {s->cand, n, false};
        chosen = dist(s, &k);
    }
    s->last_id = chosen;
    return chosen;
}

int df_sampler_candidates(deltafin_sampler *s, const float *logits, int n_vocab, int32_t *ids, float *probs,
                          int cap) {
    int n;
    int32_t chosen = -1;
    int rc = chain_candidates(s, logits, n_vocab, &n, &chosen);
    if (rc < 0) return rc;
    if (n == 0) { /* decided without a draw */
        if (cap > 0) { ids[0] = chosen; probs[0] = 1.0f; }
        return 1;
    }
    cands k = {s->cand, n, false};
    softmax_sorted(&k);
    for (int i = 0; i < n && i < cap; i++) { ids[i] = k.c[i].id; probs[i] = k.c[i].p; }
    return n;
}

int deltafin_sampler_describe(const deltafin_sampler *s, char *buf, size_t cap) {
    static const char *const llama_names[DELTAFIN_SAMPLER_N_TYPES] = {
        "penalties", "dry", "top-n-sigma", "top-k", "typical", "top-p", "min-p", "xtc", "temp-ext",
    };
    if (!s) return snprintf(buf, cap, "%s", "");
    size_t at = 0;
#define PUT(...) do { int w_ = snprintf(buf ? buf + (at < cap ? at : cap) : NULL, at < cap ? cap - at : 0, __VA_ARGS__); \
                      if (w_ > 0) at += (size_t)w_; } while (0)
    PUT("logits");
    if (s->n_bias) PUT(" -> logit-bias");
    if (s->par.mirostat) {
        if (s->par.temp != 1.0f) PUT(" -> temp");
        PUT(" -> %s", s->par.mirostat == 1 ? "mirostat" : "mirostat-v2");
    } else {
        for (int i = 0; i < s->n_chain; i++) PUT(" -> %s", llama_names[s->chain[i]]);
        PUT(" -> dist");
    }
#undef PUT
    return (int)at;
}

/* Logprobs of the model's own distribution (softmax of the raw logits of the last sample,
 * temperature 1, before penalties and truncation — what llama-server reports by default).
 * ids[0] is the chosen token; the rest are the most probable other tokens, best first. */
int deltafin_sampler_top(const deltafin_sampler *s, int n, int32_t *ids, float *logprobs) {
    if (!s || n <= 0 || !ids || !logprobs || s->n_raw <= 0 || s->last_id < 0) return 0;
    const float *raw = s->raw;
    int nv = s->n_raw;
    if (n > nv) n = nv;
    /* log-sum-exp in double */
    float max_l = -INFINITY;
    for (int i = 0; i < nv; i++) if (!isnan(raw[i]) && raw[i] > max_l) max_l = raw[i];
    double sum = 0.0;
    if (max_l > -INFINITY)
        for (int i = 0; i < nv; i++) if (!isnan(raw[i])) sum += exp((double)raw[i] - max_l);
    double lse = max_l > -INFINITY ? (double)max_l + log(sum) : 0.0;
#define LP(id) (isnan(raw[id]) || max_l == -INFINITY ? -INFINITY : (float)((double)raw[id] - lse))
    ids[0] = s->last_id;
    logprobs[0] = LP(s->last_id);
    /* the n-1 best others: insertion into a small sorted list (n is small in practice) */
    int m = 0;
    for (int i = 0; i < nv; i++) {
        if (i == s->last_id) continue;
        float l = isnan(raw[i]) ? -INFINITY : raw[i];
        if (m == n - 1) {
            if (m == 0) break;
            float wl = isnan(raw[ids[m]]) ? -INFINITY : raw[ids[m]];
            if (!(l > wl)) continue; /* ties: keep the lower id already present */
            m--;
        }
        int j = m + 1;
        while (j > 1) {
            float pl = isnan(raw[ids[j - 1]]) ? -INFINITY : raw[ids[j - 1]];
            if (!(l > pl)) break;
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
        m++;
    }
    for (int j = 1; j <= m; j++) logprobs[j] = LP(ids[j]);
#undef LP
    return m + 1;
}
