/* test_sampler.c — the default sampling chain against hand-computed distributions. */
#include "deltafin.h"
#include "base/util.h"
#include "testlib.h"

#include <math.h>
#include <stdint.h>

static deltafin_sampler_params plain(float temp, uint64_t seed) {
    deltafin_sampler_params p = deltafin_sampler_default_params();
    p.temp = temp; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = seed;
    return p;
}

/* Draw `n` samples and return the observed frequency of each id in freq[0..nv). */
static void freqs(const deltafin_sampler_params *p, const float *logits, int nv, int n, double *freq) {
    deltafin_sampler *s = deltafin_sampler_create(p);
    CHECK(s != NULL);
    for (int i = 0; i < nv; i++) freq[i] = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = deltafin_sampler_sample(s, logits, nv);
        CHECK(id >= 0 && id < nv);
        if (id >= 0 && id < nv) freq[id] += 1.0 / n;
    }
    deltafin_sampler_free(s);
}

#define N_DRAWS 40000
#define TOL 0.012 /* ~5 sigma of a binomial frequency at N_DRAWS */

int main(void) {
    df_init();

    /* defaults = llama.cpp common_params_sampling */
    deltafin_sampler_params d = deltafin_sampler_default_params();
    CHECK_NEAR(d.temp, 0.8, 1e-7);
    CHECK_EQ_INT(d.top_k, 40);
    CHECK_NEAR(d.top_p, 0.95, 1e-7);
    CHECK_NEAR(d.min_p, 0.05, 1e-7);
    CHECK_NEAR(d.repeat_penalty, 1.0, 0);
    CHECK_EQ_INT(d.repeat_last_n, 64);
    CHECK(d.seed == UINT64_MAX);

    /* invalid parameters */
    {
        deltafin_sampler_params p = d;
        p.repeat_last_n = -1;
        CHECK(deltafin_sampler_create(&p) == NULL);
        p = d; p.temp = NAN;
        CHECK(deltafin_sampler_create(&p) == NULL);
        deltafin_sampler *s = deltafin_sampler_create(NULL); /* NULL = defaults */
        CHECK(s != NULL);
        CHECK_EQ_INT(deltafin_sampler_sample(s, NULL, 4), -1);
        float one = 1.0f;
        CHECK_EQ_INT(deltafin_sampler_sample(s, &one, 0), -1);
        CHECK_EQ_INT(deltafin_sampler_sample(s, &one, 1), 0);
        deltafin_sampler_free(s);
        deltafin_sampler_free(NULL);
    }

    /* greedy: argmax, ties → lowest id, truncation settings irrelevant, NaN never chosen */
    {
        float l[6] = {1.0f, 3.0f, NAN, 3.0f, 2.0f, -INFINITY};
        deltafin_sampler_params p = d;
        p.temp = 0.0f; p.seed = 1;
        deltafin_sampler *s = deltafin_sampler_create(&p);
        for (int i = 0; i < 5; i++) CHECK_EQ_INT(deltafin_sampler_sample(s, l, 6), 1);
        deltafin_sampler_free(s);
        p.temp = -1.0f;
        s = deltafin_sampler_create(&p);
        float l2[3] = {-5.0f, -2.0f, -3.0f};
        CHECK_EQ_INT(deltafin_sampler_sample(s, l2, 3), 1);
        deltafin_sampler_free(s);
    }

    double f[8];
    /* plain softmax at temp 1: probabilities 0.1 0.2 0.3 0.4 */
    {
        float l[4] = {logf(0.1f), logf(0.2f), logf(0.3f), logf(0.4f)};
        deltafin_sampler_params p = plain(1.0f, 42);
        freqs(&p, l, 4, N_DRAWS, f);
        for (int i = 0; i < 4; i++) CHECK_NEAR(f[i], 0.1 * (i + 1), TOL);
    }
    /* temperature: logits {0, ln 2} at temp 0.5 → ∝ {1, 4} */
    {
        float l[2] = {0.0f, logf(2.0f)};
        deltafin_sampler_params p = plain(0.5f, 7);
        freqs(&p, l, 2, N_DRAWS, f);
        CHECK_NEAR(f[1], 0.8, TOL);
        p.temp = 2.0f; /* ∝ {1, sqrt 2} */
        freqs(&p, l, 2, N_DRAWS, f);
        CHECK_NEAR(f[1], sqrt(2.0) / (1 + sqrt(2.0)), TOL);
    }
    /* top_k = 2 on {0,1,2,3}: only ids 3 and 2, p(3) = e/(e+1) */
    {
        float l[4] = {0, 1, 2, 3};
        deltafin_sampler_params p = plain(1.0f, 3);
        p.top_k = 2;
        freqs(&p, l, 4, N_DRAWS, f);
        CHECK(f[0] == 0 && f[1] == 0);
        CHECK_NEAR(f[3], exp(1.0) / (exp(1.0) + 1), TOL);
        p.top_k = 1;
        freqs(&p, l, 4, 1000, f);
        CHECK(f[3] > 0.99999);
        p.top_k = 100; /* capped at the vocabulary */
        freqs(&p, l, 4, 2000, f);
        CHECK(f[0] > 0);
    }
    /* top_p on probabilities {0.5, 0.3, 0.15, 0.05} (ids shuffled) */
    {
        float l[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
        deltafin_sampler_params p = plain(1.0f, 11);
        p.top_p = 0.75f; /* 0.5 < 0.75 <= 0.8: keep ids 1, 3 → 0.625 / 0.375 */
        freqs(&p, l, 4, N_DRAWS, f);
        CHECK(f[0] == 0 && f[2] == 0);
        CHECK_NEAR(f[1], 0.625, TOL);
        p.top_p = 0.9f; /* keep 3 → 0.5/0.95, 0.3/0.95, 0.15/0.95 */
        freqs(&p, l, 4, N_DRAWS, f);
        CHECK(f[2] == 0);
        CHECK_NEAR(f[0], 0.15 / 0.95, TOL);
        CHECK_NEAR(f[1], 0.5 / 0.95, TOL);
        p.top_p = 0.3f; /* the first token alone reaches it */
        freqs(&p, l, 4, 1000, f);
        CHECK(f[1] > 0.99999);
        /* temperature comes after top_p: top_p sees temp-1 probabilities */
        p.top_p = 0.75f; p.temp = 2.0f; /* keep ids 1,3; then ∝ sqrt(0.5), sqrt(0.3) */
        freqs(&p, l, 4, N_DRAWS, f);
        CHECK(f[0] == 0 && f[2] == 0);
        CHECK_NEAR(f[1], sqrt(0.5) / (sqrt(0.5) + sqrt(0.3)), TOL);
    }
    /* min_p: keep p >= min_p * p_max */
    {
        float l[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
        deltafin_sampler_params p = plain(1.0f, 5);
        p.min_p = 0.2f; /* threshold 0.1: drop 0.05 */
        freqs(&p, l, 4, N_DRAWS, f);
        CHECK(f[2] == 0);
        CHECK_NEAR(f[0], 0.15 / 0.95, TOL);
        p.min_p = 0.5f; /* threshold 0.25: keep 0.5, 0.3 */
        p.top_k = 3;    /* sorted path */
        freqs(&p, l, 4, N_DRAWS, f);
        CHECK(f[0] == 0 && f[2] == 0);
        CHECK_NEAR(f[1], 0.625, TOL);
        p.min_p = 0.99f; /* only the top */
        freqs(&p, l, 4, 1000, f);
        CHECK(f[1] > 0.99999);
    }
    /* penalties */
    {
        deltafin_sampler_params p = d;
        p.temp = 0; p.repeat_penalty = 2.0f; p.repeat_last_n = 64;
        deltafin_sampler *s = deltafin_sampler_create(&p);
        float l[3] = {2.0f, -1.0f, 1.5f};
        CHECK_EQ_INT(deltafin_sampler_sample(s, l, 3), 0);
        deltafin_sampler_accept(s, 0);  /* 2 → 1 */
        deltafin_sampler_accept(s, 0);  /* still divided once */
        CHECK_EQ_INT(deltafin_sampler_sample(s, l, 3), 2);
        deltafin_sampler_free(s);
        /* negative logits are multiplied: {-1, -1.5} with id 0 penalized → -2 < -1.5 */
        s = deltafin_sampler_create(&p);
        float l2[2] = {-1.0f, -1.5f};
        deltafin_sampler_accept(s, 0); /* accepted before the vocab size is known */
        CHECK_EQ_INT(deltafin_sampler_sample(s, l2, 2), 1);
        deltafin_sampler_free(s);

        /* presence: subtract once; frequency: subtract count times */
        p = d; p.temp = 0; p.presence_penalty = 0.5f;
        s = deltafin_sampler_create(&p);
        float l3[2] = {2.0f, 1.6f};
        deltafin_sampler_accept(s, 0);
        deltafin_sampler_accept(s, 0);
        CHECK_EQ_INT(deltafin_sampler_sample(s, l3, 2), 1); /* 1.5 < 1.6 */
        deltafin_sampler_free(s);
        p = d; p.temp = 0; p.freq_penalty = 0.15f;
        s = deltafin_sampler_create(&p);
        deltafin_sampler_accept(s, 0);
        deltafin_sampler_accept(s, 0);
        CHECK_EQ_INT(deltafin_sampler_sample(s, l3, 2), 0); /* 2 - 0.3 = 1.7 > 1.6 */
        deltafin_sampler_accept(s, 0);
        CHECK_EQ_INT(deltafin_sampler_sample(s, l3, 2), 1); /* 2 - 0.45 = 1.55 < 1.6 */
        deltafin_sampler_free(s);

        /* window: only the last repeat_last_n ids count */
        p = d; p.temp = 0; p.presence_penalty = 1.0f; p.repeat_last_n = 2;
        s = deltafin_sampler_create(&p);
        float l4[3] = {3.0f, 2.5f, 0.0f};
        deltafin_sampler_accept(s, 0);
        CHECK_EQ_INT(deltafin_sampler_sample(s, l4, 3), 1);
        deltafin_sampler_accept(s, 2);
        deltafin_sampler_accept(s, 2); /* 0 leaves the window */
        CHECK_EQ_INT(deltafin_sampler_sample(s, l4, 3), 0);
        deltafin_sampler_accept(s, 1);  /* window {2,1}: 0 wins */
        CHECK_EQ_INT(deltafin_sampler_sample(s, l4, 3), 0);
        deltafin_sampler_free(s);

        /* repeat_last_n = 0 disables */
        p = d; p.temp = 0; p.presence_penalty = 10.0f; p.repeat_last_n = 0;
        s = deltafin_sampler_create(&p);
        deltafin_sampler_accept(s, 0);
        CHECK_EQ_INT(deltafin_sampler_sample(s, l4, 3), 0);
        deltafin_sampler_free(s);

        /* penalties apply before top_k: a penalized top token can fall out of top-1 */
        p = plain(1.0f, 9); p.top_k = 1; p.presence_penalty = 1.0f;
        s = deltafin_sampler_create(&p);
        deltafin_sampler_accept(s, 0);
        for (int i = 0; i < 50; i++) CHECK_EQ_INT(deltafin_sampler_sample(s, l4, 3), 1);
        deltafin_sampler_free(s);
    }
    /* determinism per seed */
    {
        enum { NV = 300, NS = 200 };
        static float l[NV];
        for (int i = 0; i < NV; i++) l[i] = sinf((float)i * 1.7f) * 2.0f;
        deltafin_sampler_params p = d;
        p.seed = 1234;
        int32_t a[NS], b[NS], c[NS];
        deltafin_sampler *s1 = deltafin_sampler_create(&p), *s2 = deltafin_sampler_create(&p);
        p.seed = 1235;
        deltafin_sampler *s3 = deltafin_sampler_create(&p);
        for (int i = 0; i < NS; i++) {
            a[i] = deltafin_sampler_sample(s1, l, NV);
            b[i] = deltafin_sampler_sample(s2, l, NV);
            c[i] = deltafin_sampler_sample(s3, l, NV);
        }
        CHECK(!memcmp(a, b, sizeof a));
        CHECK(memcmp(a, c, sizeof a) != 0);
        deltafin_sampler_free(s1); deltafin_sampler_free(s2); deltafin_sampler_free(s3);
        /* random seed: two samplers almost surely differ */
        p.seed = UINT64_MAX;
        s1 = deltafin_sampler_create(&p); s2 = deltafin_sampler_create(&p);
        for (int i = 0; i < NS; i++) {
            a[i] = deltafin_sampler_sample(s1, l, NV);
            b[i] = deltafin_sampler_sample(s2, l, NV);
        }
        CHECK(memcmp(a, b, sizeof a) != 0);
        deltafin_sampler_free(s1); deltafin_sampler_free(s2);
    }
    /* large vocabulary: heap top-k and adaptive top-p give exactly the truncated set */
    {
        enum { NV = 50000 };
        static float l[NV];
        static int rank_of[NV];
        uint64_t x = 99;
        for (int i = 0; i < NV; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            l[i] = (float)((x >> 40) % 100000) / 10000.0f; /* 0 .. 10, many ties */
        }
        /* reference ranks by (logit desc, id asc), with a shell sort */
        static int idx[NV];
        for (int i = 0; i < NV; i++) idx[i] = i;
        int gaps[] = {30301, 11681, 4711, 1968, 815, 339, 135, 55, 23, 10, 4, 1};
        for (int g = 0; g < 12; g++)
            for (int i = gaps[g]; i < NV; i++) {
                int t = idx[i], j = i;
                while (j >= gaps[g] && (l[idx[j - gaps[g]]] < l[t] ||
                                        (l[idx[j - gaps[g]]] == l[t] && idx[j - gaps[g]] > t))) {
                    idx[j] = idx[j - gaps[g]]; j -= gaps[g];
                }
                idx[j] = t;
            }
        for (int i = 0; i < NV; i++) rank_of[idx[i]] = i;
        deltafin_sampler_params p = plain(1.0f, 17);
        p.top_k = 40;
        deltafin_sampler *s = deltafin_sampler_create(&p);
        int max_rank = 0;
        for (int i = 0; i < 1500; i++) {
            int32_t id = deltafin_sampler_sample(s, l, NV);
            CHECK(id >= 0 && id < NV);
            if (id >= 0 && rank_of[id] > max_rank) max_rank = rank_of[id];
        }
        CHECK(max_rank < 40 && max_rank > 20);
        deltafin_sampler_free(s);
        /* top_p without top_k: compute the expected cut by hand */
        double sum = 0, mx = l[idx[0]];
        for (int i = 0; i < NV; i++) sum += exp(l[i] - mx);
        double cum = 0; int cut = 0;
        for (int i = 0; i < NV; i++) { cum += exp(l[idx[i]] - mx) / sum; if (cum >= 0.02) { cut = i + 1; break; } }
        p = plain(1.0f, 18); p.top_p = 0.02f;
        s = deltafin_sampler_create(&p);
        max_rank = 0;
        for (int i = 0; i < 1500; i++) {
            int32_t id = deltafin_sampler_sample(s, l, NV);
            if (id >= 0 && rank_of[id] > max_rank) max_rank = rank_of[id];
        }
        CHECK_MSG(max_rank < cut && max_rank >= cut - 3, "max_rank %d cut %d", max_rank, cut);
        deltafin_sampler_free(s);
        /* top_p beyond the first 256 sorted (full-sort fallback) */
        p.top_p = 0.5f;
        s = deltafin_sampler_create(&p);
        int seen_deep = 0;
        for (int i = 0; i < 200; i++) {
            int32_t id = deltafin_sampler_sample(s, l, NV);
            if (id >= 0 && rank_of[id] >= 256) seen_deep = 1;
        }
        CHECK(seen_deep);
        deltafin_sampler_free(s);
    }
    /* logprobs of the raw distribution: chosen first, then the best others */
    {
        float l[5] = {logf(0.1f), logf(0.4f), logf(0.2f), logf(0.25f), logf(0.05f)};
        deltafin_sampler_params p = d;
        p.temp = 0; p.seed = 1;
        deltafin_sampler *s = deltafin_sampler_create(&p);
        int32_t ids[8]; float lp[8];
        CHECK_EQ_INT(deltafin_sampler_top(s, 3, ids, lp), 0); /* nothing sampled yet */
        CHECK_EQ_INT(deltafin_sampler_sample(s, l, 5), 1);
        int n = deltafin_sampler_top(s, 3, ids, lp);
        CHECK_EQ_INT(n, 3);
        CHECK_EQ_INT(ids[0], 1); CHECK_NEAR(lp[0], log(0.4), 1e-5);
        CHECK_EQ_INT(ids[1], 3); CHECK_NEAR(lp[1], log(0.25), 1e-5);
        CHECK_EQ_INT(ids[2], 2); CHECK_NEAR(lp[2], log(0.2), 1e-5);
        n = deltafin_sampler_top(s, 8, ids, lp);
        CHECK_EQ_INT(n, 5);
        CHECK_EQ_INT(ids[4], 4); CHECK_NEAR(lp[4], log(0.05), 1e-5);
        n = deltafin_sampler_top(s, 1, ids, lp);
        CHECK_EQ_INT(n, 1); CHECK_EQ_INT(ids[0], 1);
        deltafin_sampler_free(s);
        /* chosen token not the most probable: penalty pushed it away */
        p.presence_penalty = 5.0f;
        s = deltafin_sampler_create(&p);
        deltafin_sampler_accept(s, 1);
        CHECK_EQ_INT(deltafin_sampler_sample(s, l, 5), 3);
        n = deltafin_sampler_top(s, 3, ids, lp);
        CHECK_EQ_INT(ids[0], 3); CHECK_NEAR(lp[0], log(0.25), 1e-5);
        CHECK_EQ_INT(ids[1], 1); CHECK_EQ_INT(ids[2], 2);
        deltafin_sampler_free(s);
    }
    /* growing the vocabulary between calls */
    {
        deltafin_sampler_params p = d; p.temp = 0; p.presence_penalty = 10.0f;
        deltafin_sampler *s = deltafin_sampler_create(&p);
        float a[2] = {1, 0}, b[6] = {0, 0, 0, 0, 0, 5};
        deltafin_sampler_accept(s, 5);
        CHECK_EQ_INT(deltafin_sampler_sample(s, a, 2), 0);
        CHECK_EQ_INT(deltafin_sampler_sample(s, b, 6), 0); /* 5 penalized: 5 - 10 < 0 */
        deltafin_sampler_free(s);
    }
    TEST_MAIN_END("test_sampler");
}
