/* replay_trace.c — `deltafin-dev replay-trace TRACE`: replay a routing trace (`deltafin profile
 * --trace`) through cache replacement policies at several cache sizes and through Belady's
 * optimal replacement (evict the expert whose next use is furthest away), which no online policy
 * can beat, so a policy's hit rate is judged against what is possible at that size.
 *
 * A step is what the expert store is asked for at once: the distinct experts of one row of one
 * layer (--unit token: decode, one token per pass) or the union of a forward pass's rows of a
 * layer (--unit pass: prompt chunks as they ran). A step's experts are all needed together, so no
 * policy may evict one of them to make room for another (the store marks the union as needed:
 * expert_store.c find_victim's `spare`). Hits are counted per expert of a step, as the store
 * counts acquires.
 *
 * Policies: clock (the store's until this replay: a reference count 0..3, +1 per hit, 1 on
 * insertion, the hand decrements until it finds 0; DELTAFIN_CACHE_POLICY=clock), lru, lfu (most uses since insertion; ties least recent), lrfu
 * (uses decayed by half every --half-life steps, counted since insertion), plrfu (the same count
 * kept across evictions: the expert's decayed popularity; the store's policy, expert_store.c
 * find_victim, with the half-life 1024 layer calls), pin+clock (the most used experts of the whole
 * trace pinned in half of the slots — an offline profile of the same workload — clock for the
 * rest), each with one budget for all layers (global) or the slots split evenly per layer
 * (--budget layer). */
#include "base/util.h"
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t *key;      /* accesses: layer * E + expert, step by step */
    int64_t *step_at;  /* step s is key[step_at[s] .. step_at[s + 1]) */
    int64_t n_acc, n_steps, cap_acc, cap_steps;
    int64_t *tok_at;   /* --unit token: token i is steps [tok_at[i], tok_at[i + 1]) */
    int64_t n_tok, cap_tok;
    int n_layer, n_expert, n_moe_layers;
    int max_step;      /* most experts in one step */
} trace;

enum { P_CLOCK, P_LRU, P_LFU, P_LRFU, P_PLRFU, P_PIN, P_BELADY, P_N };
static const char *const k_pol[P_N] = {"clock", "lru", "lfu", "lrfu", "plrfu", "pin+clock", "belady"};

static int push_acc(trace *t, int32_t k) {
    if (t->n_acc == t->cap_acc) {
        int64_t nc = t->cap_acc ? 2 * t->cap_acc : 4096;
        int32_t *nk = realloc(t->key, sizeof(int32_t) * (size_t)nc);
        if (!nk) return -1;
        t->key = nk;
        t->cap_acc = nc;
    }
    t->key[t->n_acc++] = k;
    return 0;
}

/* room for `need` entries in an int64_t array that doubles (from 4096) */
static int grow_i64(int64_t **a, int64_t *cap, int64_t need) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? 2 * *cap : 4096;
    int64_t *na = realloc(*a, sizeof(int64_t) * (size_t)nc);
    if (!na) return -1;
    *a = na;
    *cap = nc;
    return 0;
}

static int push_step(trace *t) {
    if (grow_i64(&t->step_at, &t->cap_steps, t->n_steps + 2)) return -1;
    if (t->n_steps == 0) t->step_at[0] = 0;
    t->step_at[++t->n_steps] = t->n_acc;
    return 0;
}

/* --unit token: a token (a row of a pass, all its layers) is steps [s0, s1) */
static int push_tok(trace *t, int64_t s0, int64_t s1) {
    if (grow_i64(&t->tok_at, &t->cap_tok, t->n_tok + 2)) return -1;
    t->tok_at[t->n_tok++] = s0;
    t->tok_at[t->n_tok] = s1;
    return 0;
}

/* The trace's lines as read: line i is (pass, layer) with experts ex[off[i] .. off[i + 1]). */
typedef struct {
    long long *pass;
    int *layer;
    int64_t *off;
    int32_t *ex;
    int64_t n, cap, n_ex, cap_ex;
} lines;

/* Lines [a, b) of one layer as one step: their distinct experts (a step holds each once). */
static int add_step(trace *t, const lines *L, int64_t a, int64_t b) {
    const int64_t s0 = t->n_acc;
    for (int64_t i = a; i < b; i++)
        for (int64_t q = L->off[i]; q < L->off[i + 1]; q++) {
            const int32_t k = L->layer[i] * t->n_expert + L->ex[q];
            bool dup = false;
            for (int64_t x = s0; x < t->n_acc && !dup; x++) dup = t->key[x] == k;
            if (!dup && push_acc(t, k)) return -1;
        }
    return t->n_acc > s0 ? push_step(t) : 0;
}

/* Steps from the lines. pass: a pass's rows of a layer together (their union). token: one row
 * at a time, layer after layer as decode runs them — the trace lists a pass layer by layer, so
 * its rows are regrouped; a layer with fewer rows (the last one computes only the rows whose
 * logits are needed) is aligned to the pass's last rows. */
static int build_steps(trace *t, const lines *L, bool per_pass) {
    int *rows = calloc((size_t)t->n_layer, sizeof(int)), *order = malloc(sizeof(int) * (size_t)t->n_layer);
    int64_t *first = malloc(sizeof(int64_t) * (size_t)t->n_layer);
    int rc = rows && order && first ? 0 : -1;
    for (int64_t i = 0; !rc && i < L->n;) {
        int64_t e = i;
        while (e < L->n && L->pass[e] == L->pass[i]) e++;
        if (per_pass) {
            for (int64_t a = i; a < e && !rc;) {
                int64_t b = a;
                while (b < e && L->layer[b] == L->layer[a]) b++;
                rc = add_step(t, L, a, b);
                a = b;
            }
        } else {
            int nl = 0, R = 0;
            for (int64_t a = i; a < e; a++) {
                const int l = L->layer[a];
                if (!rows[l]) { order[nl++] = l; first[l] = a; }
                rows[l]++;
                if (rows[l] > R) R = rows[l];
            }
            for (int r = 0; r < R && !rc; r++) {
                const int64_t s0 = t->n_steps;
                for (int j = 0; j < nl && !rc; j++) {
                    const int l = order[j], idx = r - (R - rows[l]);
                    if (idx >= 0) rc = add_step(t, L, first[l] + idx, first[l] + idx + 1);
                }
                if (!rc && t->n_steps > s0) rc = push_tok(t, s0, t->n_steps);
            }
            for (int j = 0; j < nl; j++) rows[order[j]] = 0;
        }
        i = e;
    }
    free(rows);
    free(order);
    free(first);
    return rc;
}

static int read_trace(const char *path, bool per_pass, trace *t) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "replay-trace: %s: cannot open\n", path); return -1; }
    char line[1 << 14];
    int lineno = 0, rc = 0;
    bool *seen_layer = NULL;
    lines L = {0};
    memset(t, 0, sizeof *t);
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#') {
            int nl, ne;
            if (!t->n_expert && sscanf(line, "# n_layer %d n_expert %d", &nl, &ne) == 2 && nl > 0 && ne > 0 &&
                nl <= 4096 && ne <= 65536) {
                t->n_layer = nl;
                t->n_expert = ne;
                seen_layer = calloc((size_t)nl, 1);
                if (!seen_layer) rc = -1;
            }
            continue;
        }
        if (!t->n_expert) { fprintf(stderr, "replay-trace: %s: no '# n_layer L n_expert E' header\n", path); rc = -1; break; }
        char *p = line, *e;
        long long pass = strtoll(p, &e, 10);
        if (e == p) continue; /* blank */
        p = e;
        long layer = strtol(p, &e, 10);
        if (e == p || layer < 0 || layer >= t->n_layer) {
            fprintf(stderr, "replay-trace: %s:%d: bad layer\n", path, lineno);
            rc = -1;
            break;
        }
        p = e;
        if (L.n + 2 > L.cap) {
            int64_t nc = L.cap ? 2 * L.cap : 4096;
            long long *np = realloc(L.pass, sizeof(long long) * (size_t)nc);
            if (np) L.pass = np;
            int *nly = realloc(L.layer, sizeof(int) * (size_t)nc);
            if (nly) L.layer = nly;
            int64_t *no = realloc(L.off, sizeof(int64_t) * (size_t)nc);
            if (no) L.off = no;
            if (!np || !nly || !no) { rc = -1; break; }
            L.cap = nc;
            if (L.n == 0) L.off[0] = 0;
        }
        L.pass[L.n] = pass;
        L.layer[L.n] = (int)layer;
        seen_layer[layer] = true;
        for (;;) {
            long x = strtol(p, &e, 10);
            if (e == p) break;
            p = e;
            if (x == -1) continue; /* a slot dropped by lossy routing */
            if (x < 0 || x >= t->n_expert) {
                fprintf(stderr, "replay-trace: %s:%d: expert %ld out of range\n", path, lineno, x);
                rc = -1;
                break;
            }
            if (L.n_ex == L.cap_ex) {
                int64_t nc = L.cap_ex ? 2 * L.cap_ex : 16384;
                int32_t *nx = realloc(L.ex, sizeof(int32_t) * (size_t)nc);
                if (!nx) { rc = -1; break; }
                L.ex = nx;
                L.cap_ex = nc;
            }
            L.ex[L.n_ex++] = (int32_t)x;
        }
        L.off[++L.n] = L.n_ex;
    }
    fclose(f);
    if (!rc && L.n == 0) { fprintf(stderr, "replay-trace: %s: no routing lines\n", path); rc = -1; }
    if (!rc && build_steps(t, &L, per_pass)) rc = -1;
    for (int l = 0; !rc && l < t->n_layer; l++) t->n_moe_layers += seen_layer[l];
    for (int64_t s = 0; !rc && s < t->n_steps; s++) {
        int n = (int)(t->step_at[s + 1] - t->step_at[s]);
        if (n > t->max_step) t->max_step = n;
    }
    free(seen_layer);
    free(L.pass);
    free(L.layer);
    free(L.off);
    free(L.ex);
    return rc;
}

typedef struct {
    int pol, slots;
    bool per_layer;
    double half_life;
    const bool *pinned;  /* [keys] for P_PIN */
} sim_opts;

/* One cache (a layer's share or the whole budget). */
typedef struct {
    int cap, n;
    int32_t *slot_key;   /* [cap] */
    int hand;
} pool;

/* Replay; returns the hit count. */
static int64_t simulate(const trace *t, const sim_opts *o, const int64_t *next_use) {
    const int K = t->n_layer * t->n_expert;
    int *where = malloc(sizeof(int) * (size_t)K);  /* slot index in its pool, -1 */
    uint8_t *ref = calloc((size_t)K, 1);
    int64_t *last = calloc((size_t)K, sizeof(int64_t)), *cnt = calloc((size_t)K, sizeof(int64_t));
    double *score = calloc((size_t)K, sizeof(double));
    int64_t *nxt = calloc((size_t)K, sizeof(int64_t));
    int64_t *stamp = calloc((size_t)K, sizeof(int64_t)); /* step that needs the key now (+1) */
    const int np = o->per_layer ? t->n_layer : 1;
    pool *pl = calloc((size_t)np, sizeof(pool));
    int64_t hits = -1;
    if (!where || !ref || !last || !cnt || !score || !nxt || !stamp || !pl) goto done;
    for (int k = 0; k < K; k++) where[k] = -1;
    int n_pin = 0;
    if (o->pol == P_PIN)
        for (int k = 0; k < K; k++) n_pin += o->pinned[k];
    for (int i = 0; i < np; i++) {
        int cap = o->per_layer ? o->slots / t->n_moe_layers : o->slots - n_pin;
        pl[i].cap = cap > 0 ? cap : 0;
        pl[i].slot_key = malloc(sizeof(int32_t) * (size_t)(pl[i].cap + 1));
        if (!pl[i].slot_key) goto done;
    }
    const double decay = o->half_life > 0 ? pow(0.5, 1.0 / o->half_life) : 1.0;
    hits = 0;
    for (int64_t s = 0; s < t->n_steps; s++) {
        const int64_t a0 = t->step_at[s], a1 = t->step_at[s + 1];
        for (int64_t i = a0; i < a1; i++) stamp[t->key[i]] = s + 1;
        for (int64_t i = a0; i < a1; i++) {
            const int32_t k = t->key[i];
            pool *P = &pl[o->per_layer ? k / t->n_expert : 0];
            if (o->pol == P_PIN && o->pinned[k]) { hits++; continue; }
            if (o->pol == P_BELADY) nxt[k] = next_use[i];
            if (where[k] >= 0) {
                hits++;
                if (ref[k] < 3) ref[k]++;
            } else {
                int v;
                if (P->n < P->cap) v = P->n++;
                else {
                    v = -1;
                    if (o->pol == P_CLOCK || o->pol == P_PIN) {
                        for (int it = 0; it < 4 * P->cap + 1 && v < 0; it++) {
                            const int j = P->hand;
                            P->hand = (P->hand + 1) % P->cap;
                            const int32_t q = P->slot_key[j];
                            if (stamp[q] == s + 1) continue;
                            if (ref[q] > 0) { ref[q]--; continue; }
                            v = j;
                        }
                    } else {
                        double best = 0;
                        for (int j = 0; j < P->cap; j++) {
                            const int32_t q = P->slot_key[j];
                            if (stamp[q] == s + 1) continue;
                            double sc;
                            switch (o->pol) {
                            case P_LRU: sc = (double)last[q]; break;
                            case P_LFU: sc = (double)cnt[q] * 1e12 + (double)last[q]; break;
                            case P_LRFU:
                            case P_PLRFU: sc = score[q] * pow(decay, (double)(s - last[q])); break;
                            default: sc = -(double)nxt[q]; break; /* belady: furthest next use */
                            }
                            if (v < 0 || sc < best) { v = j; best = sc; }
                        }
                    }
                    if (v < 0) continue; /* every slot holds an expert this step needs: a miss, not cached */
                    where[P->slot_key[v]] = -1;
                }
                P->slot_key[v] = k;
                where[k] = v;
                ref[k] = 1;
                cnt[k] = 0;
                if (o->pol != P_PLRFU) score[k] = 0; /* plrfu: the decayed count survives eviction */
            }
            cnt[k]++;
            score[k] = score[k] * pow(decay, (double)(s - last[k])) + 1.0;
            last[k] = s;
        }
    }
done:
    for (int i = 0; pl && i < np; i++) free(pl[i].slot_key);
    free(pl);
    free(where);
    free(ref);
    free(last);
    free(cnt);
    free(score);
    free(nxt);
    free(stamp);
    return hits;
}

/* --iid SEED: a trace of as many tokens, each drawn with replacement from t's tokens (xorshift
 * stream from SEED), so consecutive tokens are independent and online_bound() holds for it. */
static int resample(const trace *t, uint64_t seed, trace *o) {
    memset(o, 0, sizeof *o);
    o->n_layer = t->n_layer;
    o->n_expert = t->n_expert;
    o->n_moe_layers = t->n_moe_layers;
    o->max_step = t->max_step;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < t->n_tok; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const int64_t j = (int64_t)(x % (uint64_t)t->n_tok), s0 = o->n_steps;
        for (int64_t s = t->tok_at[j]; s < t->tok_at[j + 1]; s++) {
            for (int64_t a = t->step_at[s]; a < t->step_at[s + 1]; a++)
                if (push_acc(o, t->key[a])) return -1;
            if (push_step(o)) return -1;
        }
        if (push_tok(o, s0, o->n_steps)) return -1;
    }
    return 0;
}

typedef struct { int64_t uses; int32_t key; } key_uses;
static int by_uses_desc(const void *a, const void *b) {
    const key_uses *x = a, *y = b;
    return x->uses != y->uses ? (x->uses < y->uses ? 1 : -1) : (x->key > y->key) - (x->key < y->key);
}

/* The most any online policy can hit per access when tokens are independent draws from t's
 * tokens (--iid), even one that knows the whole current token: the cache at a token's start was
 * filled before that token was drawn, so its expected hits are the sum over the experts it holds
 * of P(a token uses the expert) = uses / n_tok. It holds the previous token's last step (just
 * used; a miss is what evicts) and at best the slots - |that step| most used other experts.
 * Averaged over the previous token, divided by the accesses per token. by[]: keys, most used
 * first. */
static double online_bound(const trace *t, const key_uses *by, int K, int slots) {
    double sum = 0;
    for (int64_t i = 0; i < t->n_tok; i++) {
        const int64_t last = t->tok_at[i + 1] - 1, a0 = t->step_at[last], a1 = t->step_at[last + 1];
        double h = 0;
        int got = 0;
        for (int j = 0; j < K && by[j].uses > 0; j++) {
            bool in_last = false;
            for (int64_t a = a0; a < a1 && !in_last; a++) in_last = t->key[a] == by[j].key;
            if (in_last) h += (double)by[j].uses;
            else if (got < slots - (int)(a1 - a0)) { h += (double)by[j].uses; got++; }
        }
        sum += h;
    }
    return t->n_tok && t->n_acc ? sum / (double)t->n_tok / (double)t->n_acc : 0.0;
}

static void trace_free(trace *t) {
    free(t->key);
    free(t->step_at);
    free(t->tok_at);
}

/* One replay setting: the trace, its Belady next uses and use counts, and scratch. */
typedef struct {
    const trace *t;           /* replayed */
    const trace *dist;        /* its tokens are drawn from this one (= t without --iid) */
    int K;
    const char *budget;
    double half_life;
    bool token;               /* --unit token: the iid bound applies */
    int64_t *next_use, *uses;
    bool *pinned;
    int32_t *order;
    key_uses *by;             /* dist's keys, most used first */
} replay;

/* The rows of one cache size (global and / or per-layer budget); -1: out of memory. */
static int replay_size(const replay *rp, double pct) {
    const trace *t = rp->t;
    const int K = rp->K, slots = (int)lround(pct / 100.0 * t->n_moe_layers * t->n_expert);
    if (slots < t->max_step) {
        printf("%g\t%d\t-\t(smaller than a step's %d experts: not replayed)\n", pct, slots, t->max_step);
        return 0;
    }
    /* pin+clock: the trace's most used experts in half of the slots */
    for (int k = 0; k < K; k++) { rp->order[k] = k; rp->pinned[k] = false; }
    for (int i = 0; i < slots / 2 && i < K; i++) { /* partial selection sort: slots/2 small */
        int b = i;
        for (int j = i + 1; j < K; j++) if (rp->uses[rp->order[j]] > rp->uses[rp->order[b]]) b = j;
        int32_t x = rp->order[i]; rp->order[i] = rp->order[b]; rp->order[b] = x;
        if (rp->uses[rp->order[i]] > 0) rp->pinned[rp->order[i]] = true;
    }
    for (int bl = 0; bl < 2; bl++) {
        if ((bl == 0 && !strcmp(rp->budget, "layer")) || (bl == 1 && !strcmp(rp->budget, "global"))) continue;
        if (bl == 1 && slots / t->n_moe_layers < t->max_step) {
            printf("%g\t%d\tlayer\t(a layer's share is smaller than a step: not replayed)\n", pct, slots);
            continue;
        }
        printf("%g\t%d\t%s", pct, slots, bl ? "layer" : "global");
        double hr[P_N];
        for (int p = 0; p < P_N; p++) {
            sim_opts o = {.pol = p, .slots = slots, .per_layer = bl == 1, .half_life = rp->half_life, .pinned = rp->pinned};
            if (p == P_PIN && bl == 1) { hr[p] = NAN; printf("\t-"); continue; }
            int64_t h = simulate(t, &o, rp->next_use);
            if (h < 0) return -1;
            hr[p] = (double)h / (double)t->n_acc;
            printf("\t%.4f", hr[p]);
        }
        printf("\t%.3f", hr[P_BELADY] > 0 ? hr[P_PLRFU] / hr[P_BELADY] : 0.0);
        if (rp->token && bl == 0) {
            const double ub = online_bound(rp->dist, rp->by, K, slots);
            printf("\t%.4f\t%.3f", ub, hr[P_BELADY] > 0 ? ub / hr[P_BELADY] : 0.0);
        } else if (rp->token) {
            printf("\t-\t-"); /* the bound is for one budget over all layers */
        }
        printf("\n");
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: deltafin-dev replay-trace TRACE [options]\n\n"
               "Replay a routing trace (deltafin profile --trace) through expert-cache policies and\n"
               "through Belady's optimal replacement; prints hit rates per cache size.\n\n"
               "  --sizes LIST      cache sizes in %% of the routed experts (default 5,10,20)\n"
               "  --unit U          token (one row of a layer per step, as decode) | pass (a\n"
               "                    forward pass's union, as prompt chunks ran); default token\n"
               "  --budget B        global (one budget, as the store) | layer | both (default both)\n"
               "  --half-life N     lrfu, plrfu: steps for a use to count half (default 1024)\n"
               "  --iid SEED        --unit token: replay as many tokens drawn with replacement from\n"
               "                    the trace's (independent tokens, same popularity); the column\n"
               "                    iid-bound is then the most any online policy can hit\n");
}

int cmd_replay_trace(int argc, char **argv) {
    const char *path = NULL, *sizes = "5,10,20", *unit = "token", *budget = "both";
    double half_life = 1024;
    long long iid = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (a[0] != '-') { path = a; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "replay-trace: %s needs a value\n", a); return 2; }
        const char *v = argv[++i];
        if (!strcmp(a, "--sizes")) sizes = v;
        else if (!strcmp(a, "--unit")) unit = v;
        else if (!strcmp(a, "--budget")) budget = v;
        else if (!strcmp(a, "--half-life")) half_life = atof(v);
        else if (!strcmp(a, "--iid")) iid = atoll(v);
        else { fprintf(stderr, "replay-trace: unknown option %s\n", a); usage(stderr); return 2; }
    }
    if (!path) { usage(stderr); return 2; }
    if (strcmp(unit, "token") && strcmp(unit, "pass")) { fprintf(stderr, "replay-trace: --unit token|pass\n"); return 2; }
    if (strcmp(budget, "global") && strcmp(budget, "layer") && strcmp(budget, "both")) {
        fprintf(stderr, "replay-trace: --budget global|layer|both\n");
        return 2;
    }
    if (!(half_life > 0)) { fprintf(stderr, "replay-trace: --half-life must be > 0\n"); return 2; }
    if (iid >= 0 && strcmp(unit, "token")) { fprintf(stderr, "replay-trace: --iid needs --unit token\n"); return 2; }
    trace t0, t;
    if (read_trace(path, !strcmp(unit, "pass"), &t0)) return 1;
    if (iid >= 0) {
        if (resample(&t0, (uint64_t)iid, &t)) { fprintf(stderr, "replay-trace: out of memory\n"); trace_free(&t0); trace_free(&t); return 1; }
    } else {
        t = t0;
    }
    const int K = t.n_layer * t.n_expert;
    replay rp = {.t = &t, .dist = &t0, .K = K, .budget = budget, .half_life = half_life, .token = !strcmp(unit, "token")};
    rp.next_use = malloc(sizeof(int64_t) * (size_t)(t.n_acc ? t.n_acc : 1));
    int64_t *seen = malloc(sizeof(int64_t) * (size_t)K);
    rp.uses = calloc((size_t)K, sizeof(int64_t));
    rp.pinned = calloc((size_t)K, sizeof(bool));
    rp.order = malloc(sizeof(int32_t) * (size_t)K);
    rp.by = calloc((size_t)K, sizeof(key_uses));
    int ret = 1;
    if (!rp.next_use || !seen || !rp.uses || !rp.pinned || !rp.order || !rp.by) { fprintf(stderr, "replay-trace: out of memory\n"); goto done; }
    for (int k = 0; k < K; k++) seen[k] = INT64_MAX;
    for (int64_t i = t.n_acc - 1; i >= 0; i--) { rp.next_use[i] = seen[t.key[i]]; seen[t.key[i]] = i; }
    for (int64_t i = 0; i < t.n_acc; i++) rp.uses[t.key[i]]++;
    for (int k = 0; k < K; k++) rp.by[k].key = k;
    for (int64_t i = 0; i < t0.n_acc; i++) rp.by[t0.key[i]].uses++; /* the distribution tokens are drawn from */
    qsort(rp.by, (size_t)K, sizeof *rp.by, by_uses_desc);
    int n_used = 0;
    for (int k = 0; k < K; k++) n_used += rp.uses[k] > 0;
    printf("# trace %s%s: %lld steps (%s), %lld expert accesses, %d MoE layers x %d experts, %d used, "
           "at most %d per step\n", path, iid >= 0 ? " resampled (--iid)" : "", (long long)t.n_steps, unit,
           (long long)t.n_acc, t.n_moe_layers, t.n_expert, n_used, t.max_step);
    printf("size%%\tslots\tbudget");
    for (int p = 0; p < P_N; p++) printf("\t%s", k_pol[p]);
    printf("\tplrfu/belady%s\n", rp.token ? "\tiid-bound\tbound/belady" : "");
    for (const char *sp = sizes; *sp;) {
        char *e;
        double pct = strtod(sp, &e);
        if (e == sp || !(pct > 0 && pct <= 100)) { fprintf(stderr, "replay-trace: bad --sizes '%s'\n", sizes); goto done; }
        sp = *e == ',' ? e + 1 : e;
        if (replay_size(&rp, pct)) { fprintf(stderr, "replay-trace: out of memory\n"); goto done; }
    }
    ret = 0;
done:
    free(rp.next_use);
    free(seen);
    free(rp.uses);
    free(rp.pinned);
    free(rp.order);
    free(rp.by);
    if (iid >= 0) trace_free(&t);
    trace_free(&t0);
    return ret;
}
