/* sampler_dry.c — see sampler_dry.h. */
#include "runtime/sampler_dry.h"
#include "base/util.h"
#include "text/tokenizer.h"

#include <math.h>
#include <string.h>

enum { DRY_MAX_BREAKER_CHARS = 40, DRY_MAX_TAIL = 20 };

typedef struct {
    int32_t head;
    int off, len; /* tail ids: tails[off .. off + len) */
} dry_breaker;

struct df_dry {
    float mult, base;
    int allowed, last_n;
    int max_exp;             /* exponent clamp: base^max_exp stays below FLT_MAX */
    dry_breaker *brk;        /* sorted by head (then by insertion) after finish_breakers */
    int n_brk, cap_brk;
    int32_t *tails;
    int n_tails, cap_tails;
    int32_t *ring;           /* the last `last_n` accepted ids */
    int ring_len, ring_head; /* head: index of the oldest */
    int *rep;                /* [last_n] repeat length ending at each recent position */
    int *best;               /* [n_vocab] longest repeat a token would extend (-1: none) */
    int32_t *touched;        /* [last_n] ids with best >= 0 */
    int n_touched, n_vocab;
};

/* i-th most recent id (0 = the last accepted) */
static inline int32_t recent(const df_dry *d, int i) {
    return d->ring[(d->ring_head + d->ring_len - 1 - i) % d->last_n];
}

static int add_entry(df_dry *d, int32_t head, const int32_t *tail, int n) {
    /* an identical (head, tail) pair is kept once; a token's entries are added together, so
     * they are the last ones */
    for (int i = d->n_brk - 1; i >= 0 && d->brk[i].head == head; i--)
        if (d->brk[i].len == n && (n == 0 || !memcmp(d->tails + d->brk[i].off, tail, sizeof *tail * (size_t)n)))
            return DF_OK;
    if (d->n_brk == d->cap_brk) {
        int cap = d->cap_brk ? 2 * d->cap_brk : 64;
        dry_breaker *b = df_realloc(d->brk, sizeof *b * (size_t)cap);
        if (!b) return DF_ERR_NOMEM;
        d->brk = b;
        d->cap_brk = cap;
    }
    if (d->n_tails + n > d->cap_tails) {
        int cap = d->cap_tails ? 2 * d->cap_tails : 64;
        while (cap < d->n_tails + n) cap *= 2;
        int32_t *t = df_realloc(d->tails, sizeof *t * (size_t)cap);
        if (!t) return DF_ERR_NOMEM;
        d->tails = t;
        d->cap_tails = cap;
    }
    if (n) memcpy(d->tails + d->n_tails, tail, sizeof *tail * (size_t)n);
    d->brk[d->n_brk++] = (dry_breaker){head, d->n_tails, n};
    d->n_tails += n;
    return DF_OK;
}

/* Does word[pos..] (to its end) equal the start of s? Returns how many bytes matched (the
 * rest of s is the tail), or 0 when it does not. */
static size_t tail_match(const char *word, size_t wlen, size_t pos, const char *s, size_t slen) {
    size_t k = 0;
    while (k < slen && pos + k < wlen) {
        if (word[pos + k] != s[k]) return 0;
        k++;
    }
    return k;
}

/* Entries for one breaker `s` and one token whose text is word[0..wlen). */
static int breaker_token(df_dry *d, const df_tokenizer *t, int32_t id, const char *word, size_t wlen,
                         const char *s, size_t slen) {
    if (wlen >= slen && memmem(word, wlen, s, slen)) return add_entry(d, id, NULL, 0);
    for (size_t pos = 0; pos < wlen; pos++) {
        if (word[pos] != s[0]) continue;
        size_t k = tail_match(word, wlen, pos, s, slen);
        if (!k) continue;
        int32_t tail[DRY_MAX_TAIL * 4 + 8];
        int n = df_tokenize(t, s + k, slen - k, false, false, tail, (int)(sizeof tail / sizeof tail[0]));
        if (n < 0) return n;
        if (n > DRY_MAX_TAIL) n = DRY_MAX_TAIL;
        int rc = add_entry(d, id, tail, n);
        if (rc < 0) return rc;
    }
    return DF_OK;
}

static int process_breakers(df_dry *d, const df_tokenizer *t, const char *const *breakers, int n_breakers) {
    const int nv = df_tokenizer_n_vocab(t);
    int cap = df_tokenizer_max_piece_len(t) + 16;
    char *word = df_malloc((size_t)cap);
    if (!word) return DF_ERR_NOMEM;
    int rc = DF_OK;
    for (int32_t id = 0; id < nv && rc >= 0; id++) {
        int w = df_detokenize(t, &id, 1, false, true, word, cap);
        if (w < 0 || w > cap) { rc = df_err(DF_ERR_INVALID, "DRY: cannot read the text of token %d", id); break; }
        for (int b = 0; b < n_breakers && rc >= 0; b++) {
            size_t slen = breakers[b] ? strlen(breakers[b]) : 0;
            if (!slen) continue; /* llama.cpp skips empty breakers */
            if (slen > DRY_MAX_BREAKER_CHARS) slen = DRY_MAX_BREAKER_CHARS;
            rc = breaker_token(d, t, id, word, (size_t)w, breakers[b], slen);
        }
    }
    free(word);
    return rc;
}

static void sort_breakers(df_dry *d) { /* insertion sort by head: stable, few entries */
    for (int i = 1; i < d->n_brk; i++) {
        dry_breaker x = d->brk[i];
        int j = i;
        while (j > 0 && d->brk[j - 1].head > x.head) { d->brk[j] = d->brk[j - 1]; j--; }
        d->brk[j] = x;
    }
}

df_dry *df_dry_create(float multiplier, float base, int allowed_length, int last_n,
                      const deltafin_vocab *vocab, const char *const *breakers, int n_breakers) {
    if (n_breakers > 0 && !vocab) {
        df_err(DF_ERR_INVALID, "sampler: DRY sequence breakers need the vocabulary (params.vocab)");
        return NULL;
    }
    df_dry *d = df_calloc(1, sizeof *d);
    if (!d) return NULL;
    d->mult = multiplier;
    d->base = base;
    d->allowed = allowed_length;
    d->last_n = last_n;
    /* llama.cpp: FLOAT_MAX_LOG / log(base), truncated */
    if (base > 1.000001f) d->max_exp = (int)(88.7228391f / logf(base));
    d->ring = df_malloc(sizeof *d->ring * (size_t)last_n);
    d->rep = df_malloc(sizeof *d->rep * (size_t)last_n);
    d->touched = df_malloc(sizeof *d->touched * (size_t)last_n);
    if (!d->ring || !d->rep || !d->touched ||
        (n_breakers > 0 && process_breakers(d, (const df_tokenizer *)vocab, breakers, n_breakers) < 0)) {
        df_dry_free(d);
        return NULL;
    }
    sort_breakers(d);
    return d;
}

void df_dry_free(df_dry *d) {
    if (!d) return;
    free(d->brk);
    free(d->tails);
    free(d->ring);
    free(d->rep);
    free(d->best);
    free(d->touched);
    free(d);
}

int df_dry_add_breaker_ids(df_dry *d, const int32_t *ids, int n) {
    if (!d || !ids || n <= 0) return df_err(DF_ERR_INVALID, "DRY: empty breaker");
    int rc = add_entry(d, ids[0], ids + 1, n - 1);
    if (rc == DF_OK) sort_breakers(d);
    return rc;
}

int df_dry_size(df_dry *d, int n_vocab) {
    if (n_vocab <= d->n_vocab) return DF_OK;
    int *b = df_realloc(d->best, sizeof *b * (size_t)n_vocab);
    if (!b) return DF_ERR_NOMEM;
    for (int i = d->n_vocab; i < n_vocab; i++) b[i] = -1;
    d->best = b;
    d->n_vocab = n_vocab;
    return DF_OK;
}

void df_dry_accept(df_dry *d, int32_t id) {
    if (d->ring_len == d->last_n) {
        d->ring[d->ring_head] = id;
        d->ring_head = (d->ring_head + 1) % d->last_n;
    } else {
        d->ring[(d->ring_head + d->ring_len) % d->last_n] = id;
        d->ring_len++;
    }
}

/* first entry with this head, or -1 */
static int first_of(const df_dry *d, int32_t head) {
    int lo = 0, hi = d->n_brk;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (d->brk[mid].head < head) lo = mid + 1;
        else hi = mid;
    }
    return lo < d->n_brk && d->brk[lo].head == head ? lo : -1;
}

/* Step 1: how far back a repeat may reach — up to the most recent complete breaker. */
static int repeat_limit(const df_dry *d, int n) {
    for (int i = 0; i < n; i++) {
        int e = first_of(d, recent(d, i));
        if (e < 0) continue;
        int longest = -1;
        for (; e < d->n_brk && d->brk[e].head == recent(d, i); e++) {
            const dry_breaker *b = &d->brk[e];
            if (b->len <= longest || b->len > i) continue;
            /* the tail precedes the head in time: recent(i-1), recent(i-2), ... */
            int k = 0;
            while (k < b->len && d->tails[b->off + k] == recent(d, i - 1 - k)) k++;
            if (k == b->len) longest = b->len;
        }
        if (longest >= 0) return i - longest;
    }
    return n;
}

/* Step 2: rep[n-1-k] = length of the longest suffix of the recent ids that also ends k ids
 * earlier (capped at limit), by the Z-algorithm run from the most recent id backwards. */
static void repeat_lengths(df_dry *d, int n, int limit) {
    const int last = n - 1;
    int zl = 0, zr = 0; /* the current Z-box [zl, zr] */
    for (int k = 1; k < n; k++) {
        int len;
        if (k > zr) {
            len = 0;
            while (len + k < n && recent(d, len) == recent(d, len + k)) len++;
            if (len > 0) { zl = k; zr = k + len - 1; }
            d->rep[last - k] = len < limit ? len : limit;
            continue;
        }
        const int pair = d->rep[last - (k - zl)], inside = zr - k + 1;
        if (pair < inside) {
            d->rep[last - k] = pair < limit ? pair : limit;
            continue;
        }
        int end = zr + 1;
        while (end < n && recent(d, end) == recent(d, end - k)) end++;
        len = end - k;
        d->rep[last - k] = len < limit ? len : limit;
        zl = k;
        zr = end - 1;
    }
}

void df_dry_analyse(df_dry *d) {
    for (int i = 0; i < d->n_touched; i++) d->best[d->touched[i]] = -1;
    d->n_touched = 0;
    const int n = d->ring_len < d->last_n ? d->ring_len : d->last_n;
    if (n <= d->allowed) return;
    const int limit = repeat_limit(d, n);
    if (limit < d->allowed) return;
    for (int i = 0; i < n; i++) d->rep[i] = 0;
    repeat_lengths(d, n, limit);
    /* Step 3: the id right after each repeat would extend it; keep each id's longest */
    for (int i = 0; i < n - 1; i++) {
        const int len = d->rep[i];
        if (len < d->allowed) continue;
        const int32_t id = recent(d, n - 2 - i);
        if (id < 0 || id >= d->n_vocab) continue;
        if (d->best[id] < 0) d->touched[d->n_touched++] = id;
        if (d->best[id] < len) d->best[id] = len;
    }
}

float df_dry_penalty(const df_dry *d, int32_t id) {
    if (id < 0 || id >= d->n_vocab || d->best[id] < 0) return 0.0f;
    for (int e = first_of(d, id); e >= 0 && e < d->n_brk && d->brk[e].head == id; e++)
        if (d->brk[e].len == 0) return 0.0f; /* a single-token breaker */
    int x = d->best[id] - d->allowed;
    if (d->max_exp > 0 && x > d->max_exp) x = d->max_exp;
    /* llama.cpp: multiplier * std::pow(base, exponent), evaluated in double, stored as float */
    return (float)((double)d->mult * pow((double)d->base, (double)x));
}

void df_dry_each(const df_dry *d, void (*fn)(void *ud, int32_t id, float penalty), void *ud) {
    for (int i = 0; i < d->n_touched; i++) {
        float pen = df_dry_penalty(d, d->touched[i]);
        if (pen != 0.0f) fn(ud, d->touched[i], pen);
    }
}
