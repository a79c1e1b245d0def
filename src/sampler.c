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
#include "util.h"

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

    /* per-n_vocab scratch */
    int n_alloc;
    df_cand *cand;  /* [n_alloc] */
    float *raw;     /* [n_alloc] copy of the last logits (for deltafin_sampler_top) */
    int n_raw;      /* vocab size of the last sample (0 = none yet) */
    int32_t last_id;
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
    deltafin_sampler *s = df_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->par = par;
    s->penalties_on = par.repeat_last_n > 0 &&
                      !(par.repeat_penalty == 1.0f && par.freq_penalty == 0.0f &&
                        par.presence_penalty == 0.0f);
    if (s->penalties_on) {
        s->ring_cap = par.repeat_last_n;
        s->ring = df_malloc((size_t)s->ring_cap * sizeof *s->ring);
        if (!s->ring) { free(s); return NULL; }
    }
    rng_seed(s->rng, par.seed);
    s->last_id = -1;
    return s;
}

void deltafin_sampler_free(deltafin_sampler *s) {
    if (!s) return;
    free(s->ring);
    free(s->counts);
    free(s->cand);
    free(s->raw);
    free(s);
}

void deltafin_sampler_accept(deltafin_sampler *s, int32_t id) {
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
static int cmp_cand(const void *pa, const void *pb) {
    const df_cand *a = pa, *b = pb;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

/* Move the k best of c[0..n) to c[0..k), sorted best first. O(n log k): a min-heap (worst
 * kept candidate at the root) of size k over the prefix. */
static void partial_sort(df_cand *c, int n, int k) {
    if (k >= n) { qsort(c, (size_t)n, sizeof *c, cmp_cand); return; }
    if (k <= 0) return;
    /* build heap over c[0..k): parent is "worse or equal" than children */
    for (int start = k / 2 - 1; start >= 0; start--) {
        int i = start;
        for (;;) {
            int l = 2 * i + 1, r = l + 1, w = i;
            if (l < k && better(&c[w], &c[l])) w = l;
            if (r < k && better(&c[w], &c[r])) w = r;
            if (w == i) break;
            df_cand t = c[i]; c[i] = c[w]; c[w] = t; i = w;
        }
    }
    for (int j = k; j < n; j++) {
        if (!better(&c[j], &c[0])) continue;
        df_cand t = c[0]; c[0] = c[j]; c[j] = t;
        int i = 0;
        for (;;) {
            int l = 2 * i + 1, r = l + 1, w = i;
            if (l < k && better(&c[w], &c[l])) w = l;
            if (r < k && better(&c[w], &c[r])) w = r;
            if (w == i) break;
            df_cand u = c[i]; c[i] = c[w]; c[w] = u; i = w;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_cand);
}

/* llama_sampler_softmax_impl: max-subtracted expf, float sum, p normalized. */
static void softmax_f(df_cand *c, int n) {
    float max_l = c[0].logit;
    for (int i = 1; i < n; i++) if (c[i].logit > max_l) max_l = c[i].logit;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { c[i].p = expf(c[i].logit - max_l); sum += c[i].p; }
    for (int i = 0; i < n; i++) c[i].p /= sum;
}

int32_t deltafin_sampler_sample(deltafin_sampler *s, const float *logits, int n_vocab) {
    if (!s || !logits || n_vocab <= 0) {
        df_err(DF_ERR_INVALID, "sampler: bad arguments (n_vocab %d)", n_vocab);
        return -1;
    }
    if (ensure_vocab(s, n_vocab) != DF_OK) return -1;
    const deltafin_sampler_params *p = &s->par;
    df_cand *c = s->cand;
    memcpy(s->raw, logits, (size_t)n_vocab * sizeof *logits);
    s->n_raw = n_vocab;
    for (int i = 0; i < n_vocab; i++) {
        float l = logits[i];
        c[i].id = i;
        c[i].logit = isnan(l) ? -INFINITY : l;
        c[i].p = 0.0f;
    }

    /* penalties (llama_sampler_penalties_apply): c[id] is still indexed by id here */
    if (s->penalties_on) {
        for (int i = 0; i < s->ring_len; i++) {
            int32_t id = s->ring[(s->ring_head + i) % s->ring_cap];
            if (id >= n_vocab || s->counts[id] <= 0 || c[id].p != 0.0f) continue;
            c[id].p = 1.0f; /* mark: penalize each distinct id once */
            int cnt = s->counts[id];
            if (c[id].logit <= 0) c[id].logit *= p->repeat_penalty;
            else c[id].logit /= p->repeat_penalty;
            c[id].logit -= (float)cnt * p->freq_penalty + p->presence_penalty;
        }
    }

    int n = n_vocab;
    if (p->temp <= 0.0f) { /* greedy */
        int best = 0;
        for (int i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i; /* strict: ties keep the lowest id */
        s->last_id = c[best].id;
        return s->last_id;
    }

    bool sorted = false;
    /* top_k */
    if (p->top_k > 0) {
        int k = p->top_k < n ? p->top_k : n;
        partial_sort(c, n, k);
        n = k;
        sorted = true;
    }
    /* top_p (min_keep 0): shortest sorted prefix whose cumulative probability >= top_p */
    if (p->top_p < 1.0f) {
        softmax_f(c, n);
        if (!sorted) {
            /* adaptive like llama.cpp: sort the best 256 first, the rest only if needed */
            int k = n > 1024 ? 256 : n;
            partial_sort(c, n, k);
            float cum = 0.0f;
            int last = -1;
            for (int i = 0; i < k; i++) {
                cum += c[i].p;
                if (cum >= p->top_p) { last = i + 1; break; }
            }
            if (last < 0 && k < n) {
                qsort(c, (size_t)n, sizeof *c, cmp_cand);
                cum = 0.0f;
                for (int i = 0; i < n; i++) {
                    cum += c[i].p;
                    if (cum >= p->top_p) { last = i + 1; break; }
                }
            }
            n = last < 0 ? n : last;
            sorted = true;
        } else {
            float cum = 0.0f;
            for (int i = 0; i < n; i++) {
                cum += c[i].p;
                if (cum >= p->top_p) { n = i + 1; break; }
            }
        }
    }
    /* min_p: keep logits >= max_logit + ln(min_p); the top token always stays */
    if (p->min_p > 0.0f && n > 0) {
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
        s->last_id = c[best].id;
        return s->last_id;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) { c[i].p = expf(c[i].logit - max_l); sum += c[i].p; }
    double target = sum * rng_uniform(s->rng), run = 0.0;
    int sel = n - 1;
    for (int i = 0; i < n; i++) {
        run += c[i].p;
        if (run >= target && c[i].p > 0.0f) { sel = i; break; }
    }
    s->last_id = c[sel].id;
    return s->last_id;
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
