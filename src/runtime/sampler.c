/* sampler.c — llama.cpp's default sampling chain (formats.md §6):
 *   penalties(repeat/freq/presence over the last N accepted ids) → top_k → top_p → min_p
 *   → temperature → dist (random draw).
 * temp <= 0 is greedy: argmax of the penalized logits, ties → lowest id (the truncation
 * steps never remove the argmax, so they are skipped).
 * Candidates are kept sorted by (logit desc, id asc) whenever a step needs an order, so a
 * given seed gives the same choice on every machine. The RNG is xoshiro256** (not
 * llama.cpp's mt19937: only greedy outputs are comparable bit for bit).
 * Invariant: after the first sample() with a given n_vocab, sample() and accept() do not
 * allocate. Threading: one sampler per thread (or external locking). */
#include "deltafin.h"
#include "base/util.h"
#include "runtime/grammar.h"

#include <float.h>
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
    deltafin_sampler_params par;
    bool penalties_on;
    uint64_t rng[4];

    /* penalty history: ring of the last `repeat_last_n` accepted ids */
    int32_t *ring;
    int ring_cap, ring_len, ring_head; /* head = index of the oldest entry */
    int32_t *counts;                   /* [n_alloc] occurrences in the ring (ids < n_alloc) */
    int32_t *pen_id;                   /* [ring_cap] ids penalized in the current sample() */
    float *pen_orig;                   /*            and their unpenalized logits */

    /* per-n_vocab scratch */
    int n_alloc;
    df_cand *cand;  /* [n_alloc] */
    float *raw;     /* [n_alloc] copy of the last logits (for deltafin_sampler_top) */
    int n_raw;      /* vocab size of the last sample (0 = none yet) */
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

static void rng_seed(uint64_t s[4], uint64_t seed) {
    if (seed == UINT64_MAX) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = df_time_ns() ^ ((uint64_t)getpid() << 32);
        seed = r;
    }
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

/* ---- API ---------------------------------------------------------------------------------- */
deltafin_sampler_params deltafin_sampler_default_params(void) {
    deltafin_sampler_params p = {
        .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .repeat_last_n = 64, .freq_penalty = 0.0f,
        .presence_penalty = 0.0f, .seed = UINT64_MAX,
    };
    return p;
}

#define DF_SAMPLER_MAX_LAST_N (1 << 24)

deltafin_sampler *deltafin_sampler_create(const deltafin_sampler_params *p) {
    deltafin_sampler_params par = p ? *p : deltafin_sampler_default_params();
    if (par.repeat_last_n < 0 || par.repeat_last_n > DF_SAMPLER_MAX_LAST_N) {
        df_err(DF_ERR_INVALID, "sampler: repeat_last_n = %d (must be 0 .. %d)", par.repeat_last_n,
               DF_SAMPLER_MAX_LAST_N);
        return NULL;
    }
    if (isnan(par.temp) || isnan(par.top_p) || isnan(par.min_p) || isnan(par.repeat_penalty) ||
        isnan(par.freq_penalty) || isnan(par.presence_penalty)) {
        df_err(DF_ERR_INVALID, "sampler: NaN parameter");
        return NULL;
    }
    if (par.n_logit_bias < 0 || (par.n_logit_bias > 0 && !par.logit_bias)) {
        df_err(DF_ERR_INVALID, "sampler: %d logit biases without an array", par.n_logit_bias);
        return NULL;
    }
    deltafin_sampler *s = df_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->par = par;
    s->par.logit_bias = NULL; /* borrowed: not kept */
    if (par.n_logit_bias > 0) {
        s->bias = df_malloc((size_t)par.n_logit_bias * sizeof *s->bias);
        if (!s->bias) { free(s); return NULL; }
        memcpy(s->bias, par.logit_bias, (size_t)par.n_logit_bias * sizeof *s->bias);
        s->n_bias = par.n_logit_bias;
    }
    s->penalties_on = par.repeat_last_n > 0 &&
                      !(par.repeat_penalty == 1.0f && par.freq_penalty == 0.0f &&
                        par.presence_penalty == 0.0f);
    if (s->penalties_on) {
        s->ring_cap = par.repeat_last_n;
        s->ring = df_malloc((size_t)s->ring_cap * sizeof *s->ring);
        s->pen_id = df_malloc((size_t)s->ring_cap * sizeof *s->pen_id);
        s->pen_orig = df_malloc((size_t)s->ring_cap * sizeof *s->pen_orig);
        if (!s->ring || !s->pen_id || !s->pen_orig) {
            free(s->ring); free(s->pen_id); free(s->pen_orig); free(s->bias); free(s);
            return NULL;
        }
    }
    rng_seed(s->rng, par.seed);
    s->last_id = -1;
    return s;
}

void deltafin_sampler_free(deltafin_sampler *s) {
    if (!s) return;
    free(s->ring);
    free(s->pen_id);
    free(s->pen_orig);
    free(s->counts);
    free(s->cand);
    free(s->raw);
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
    if (!s || !s->penalties_on || id < 0) return;
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

/* Size the scratch for n_vocab (only reallocates when the vocabulary grows). */
static int ensure_vocab(deltafin_sampler *s, int n_vocab) {
    if (n_vocab <= s->n_alloc) return DF_OK;
    df_cand *c = df_realloc(s->cand, (size_t)n_vocab * sizeof *c);
    if (!c) return DF_ERR_NOMEM;
    s->cand = c;
    float *r = df_realloc(s->raw, (size_t)n_vocab * sizeof *r);
    if (!r) return DF_ERR_NOMEM;
    s->raw = r;
    if (s->penalties_on) {
        int32_t *cnt = df_realloc(s->counts, (size_t)n_vocab * sizeof *cnt);
        if (!cnt) return DF_ERR_NOMEM;
        s->counts = cnt;
        /* rebuild counts from the ring (ids accepted before the vocab size was known) */
        memset(s->counts, 0, (size_t)n_vocab * sizeof *cnt);
        for (int i = 0; i < s->ring_len; i++) {
            int32_t id = s->ring[(s->ring_head + i) % s->ring_cap];
            if (id < n_vocab) s->counts[id]++;
        }
    }
    s->n_alloc = n_vocab;
    return DF_OK;
}

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

/* llama_sampler_softmax_impl: max-subtracted expf, float sum, p normalized. */
static void softmax_f(df_cand *c, int n) {
    float max_l = c[0].logit;
    for (int i = 1; i < n; i++) if (c[i].logit > max_l) max_l = c[i].logit;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { c[i].p = expf(c[i].logit - max_l); sum += c[i].p; }
    for (int i = 0; i < n; i++) c[i].p /= sum;
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

/* top_p on c[0..n) (probabilities in c[].p): keep the shortest best-first prefix whose
 * cumulative probability reaches top_p. Sorts only as deep as needed. Returns the new n. */
static int top_p_cut(df_cand *c, int n, float top_p, bool sorted) {
    int k = sorted ? n : (n > 1024 ? 256 : n);
    if (!sorted) partial_sort(c, n, k);
    float cum = 0.0f;
    int i = 0;
    for (;;) {
        for (; i < k; i++) {
            cum += c[i].p;
            if (cum >= top_p) return i + 1;
        }
        if (k == n) return n;
        /* not reached within the sorted prefix: sort deeper (the prefix stays in place) */
        int nk = k * 4 < n ? k * 4 : n;
        partial_sort(c + k, n - k, nk - k);
        k = nk;
    }
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
    if (!s || !logits || n_vocab <= 0) {
        df_err(DF_ERR_INVALID, "sampler: bad arguments (n_vocab %d)", n_vocab);
        return -1;
    }
    if (ensure_vocab(s, n_vocab) != DF_OK) return -1;
    const deltafin_sampler_params *p = &s->par;
    df_cand *c = s->cand;
    float *raw = s->raw;
    memcpy(raw, logits, (size_t)n_vocab * sizeof *logits);
    s->n_raw = n_vocab;
    /* logit bias first (llama.cpp's chain); undone at the end from logits */
    for (int i = 0; i < s->n_bias; i++)
        if (s->bias[i].token >= 0 && s->bias[i].token < n_vocab) raw[s->bias[i].token] += s->bias[i].bias;

    /* penalties (llama_sampler_penalties_apply), written into raw for the distinct ids of the
     * history and undone before returning, so raw stays the model's logits for _top() */
    int n_pen = 0;
    if (s->penalties_on) {
        for (int i = 0; i < s->ring_len; i++) {
            int32_t id = s->ring[(s->ring_head + i) % s->ring_cap];
            if (id >= n_vocab || s->counts[id] <= 0) continue; /* <= 0: done already */
            int cnt = s->counts[id];
            s->counts[id] = -cnt;
            s->pen_id[n_pen] = id;
            s->pen_orig[n_pen++] = raw[id];
            float l = isnan(raw[id]) ? -INFINITY : raw[id];
            if (l <= 0) l *= p->repeat_penalty;
            else l /= p->repeat_penalty;
            raw[id] = l - ((float)cnt * p->freq_penalty + p->presence_penalty);
        }
        for (int i = 0; i < n_pen; i++) s->counts[s->pen_id[i]] *= -1;
    }

    int32_t chosen;
    if (p->temp <= 0.0f) { /* greedy: the truncation steps never remove the argmax */
        int best = -1;
        float bl = -INFINITY;
        for (int i = 0; i < n_vocab; i++)
            if (raw[i] > bl) { bl = raw[i]; best = i; } /* strict: ties keep the lowest id */
        chosen = best < 0 ? 0 : best;                   /* all -inf/NaN: id 0 */
        goto out;
    }

    int n = n_vocab;
    bool sorted = false;
    if (p->top_k > 0) {
        n = p->top_k < n_vocab ? p->top_k : n_vocab;
        top_k_from(c, raw, n_vocab, n);
        sorted = true;
    } else {
        for (int i = 0; i < n; i++) {
            c[i].id = i;
            c[i].logit = isnan(raw[i]) ? -INFINITY : raw[i];
        }
    }
    /* top_p (min_keep 0) */
    if (p->top_p < 1.0f) {
        softmax_f(c, n);
        n = top_p_cut(c, n, p->top_p, sorted);
        sorted = true;
    }
    /* min_p: keep logits >= max_logit + ln(min_p); the top token always stays */
    if (p->min_p > 0.0f) {
        if (sorted) {
            float min_logit = c[0].logit + logf(p->min_p);
            int i = 1;
            while (i < n && c[i].logit >= min_logit) i++;
            n = i;
        } else {
            float max_l = -FLT_MAX;
            for (int i = 0; i < n; i++) if (c[i].logit > max_l) max_l = c[i].logit;
            float min_logit = max_l + logf(p->min_p);
            int m = 0;
            for (int i = 0; i < n; i++) if (c[i].logit >= min_logit) c[m++] = c[i];
            if (m > 0) n = m;
        }
    }
    /* temperature */
    for (int i = 0; i < n; i++) c[i].logit /= p->temp;

    /* dist: softmax (float exp, double sum), first candidate whose running sum >= u·sum */
    float max_l = c[0].logit;
    for (int i = 1; i < n; i++) if (c[i].logit > max_l) max_l = c[i].logit;
    if (n == 1 || max_l == -INFINITY) {
        int best = 0;
        for (int i = 1; i < n; i++) if (better(&c[i], &c[best])) best = i;
        chosen = c[best].id;
        goto out;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) { c[i].p = expf(c[i].logit - max_l); sum += c[i].p; }
    double target = sum * rng_uniform(s->rng), run = 0.0;
    int sel = n - 1;
    for (int i = 0; i < n; i++) {
        run += c[i].p;
        if (run >= target && c[i].p > 0.0f) { sel = i; break; }
    }
    chosen = c[sel].id;
out:
    for (int i = 0; i < n_pen; i++) raw[s->pen_id[i]] = s->pen_orig[i];
    for (int i = 0; i < s->n_bias; i++)
        if (s->bias[i].token >= 0 && s->bias[i].token < n_vocab) raw[s->bias[i].token] = logits[s->bias[i].token];
    s->last_id = chosen;
    return chosen;
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
