/* test_sampler.c — the sampling chain against hand-computed distributions: the default
 * stages by observed frequencies, and each of llama.cpp's other stages (typical-p, top-n-sigma,
 * XTC, DRY, mirostat 1 and 2, min_keep, the stage order, the greedy shortcut) by the exact
 * candidate set and probabilities the chain leaves before its draw. */
#include "deltafin.h"
#include "base/util.h"
#include "runtime/sampler.h"
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

/* ---- llama.cpp's other stages: exact candidate sets ------------------------------------- */
/* Params with every stage off (and temperature 1): tests switch on what they check. */
static deltafin_sampler_params off(uint64_t seed) {
    deltafin_sampler_params p = deltafin_sampler_default_params();
    p.temp = 1.0f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = seed;
    p.n_dry_sequence_breakers = 0;
    return p;
}

/* The chain's candidates for probabilities pr[0..nv) (logits ln pr), as an array over ids
 * (0 for ids the chain dropped). Returns the number of candidates. */
static int probs_after(const deltafin_sampler_params *p, const float *pr, int nv, double *out) {
    float l[16];
    int32_t ids[16];
    float q[16];
    for (int i = 0; i < nv; i++) { l[i] = logf(pr[i]); out[i] = 0; }
    deltafin_sampler *s = deltafin_sampler_create(p);
    CHECK(s != NULL);
    if (!s) return -1;
    int n = df_sampler_candidates(s, l, nv, ids, q, 16);
    for (int i = 0; i < n && i < 16; i++) if (ids[i] >= 0 && ids[i] < nv) out[ids[i]] = q[i];
    deltafin_sampler_free(s);
    return n;
}

#define CHECK_PROBS(got, ...)                                                                \
    do {                                                                                     \
        const double want_[] = {__VA_ARGS__};                                                \
        for (size_t i_ = 0; i_ < sizeof want_ / sizeof want_[0]; i_++)                       \
            CHECK_MSG(fabs((got)[i_] - want_[i_]) < 1e-5, "id %zu: %g, want %g", i_, (got)[i_], want_[i_]); \
    } while (0)

static void order_and_parse_tests(void) {
    deltafin_sampler_params p = deltafin_sampler_default_params();
    /* llama.cpp's default order */
    const char *want[] = {"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"};
    CHECK_EQ_INT(p.n_samplers, 9);
    for (int i = 0; i < 9; i++) CHECK_STR(deltafin_sampler_type_name(p.samplers[i]), want[i]);
    CHECK(deltafin_sampler_type_name(99) == NULL);
    CHECK(p.typical_p == 1.0f && p.top_n_sigma == -1.0f && p.xtc_probability == 0.0f && p.xtc_threshold == 0.1f);
    CHECK(p.mirostat == 0 && p.mirostat_tau == 5.0f && p.mirostat_eta == 0.1f);
    CHECK(p.dry_multiplier == 0.0f && p.dry_base == 1.75f && p.dry_allowed_length == 2 && p.dry_penalty_last_n == 64);
    CHECK_EQ_INT(p.n_dry_sequence_breakers, -1);
    /* names with llama.cpp's aliases, any case; ';'-separated; empty pieces skipped */
    CHECK_EQ_INT(deltafin_sampler_parse_order("top_k;TOP-P;temp;nucleus;typ;minp;;top-n-sigma;Penalties", false, &p), 0);
    const int w2[] = {DELTAFIN_SAMPLER_TOP_K, DELTAFIN_SAMPLER_TOP_P, DELTAFIN_SAMPLER_TEMPERATURE,
                      DELTAFIN_SAMPLER_TOP_P, DELTAFIN_SAMPLER_TYPICAL_P, DELTAFIN_SAMPLER_MIN_P,
                      DELTAFIN_SAMPLER_TOP_N_SIGMA, DELTAFIN_SAMPLER_PENALTIES};
    CHECK_EQ_INT(p.n_samplers, 8);
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(p.samplers[i], w2[i]);
    /* --sampler-seq letters: llama.cpp's default sequence is "edskypmxt" */
    CHECK_EQ_INT(deltafin_sampler_parse_order("edskypmxt", true, &p), 0);
    deltafin_sampler_params d = deltafin_sampler_default_params();
    CHECK(p.n_samplers == 9 && !memcmp(p.samplers, d.samplers, sizeof(int) * 9));
    CHECK(deltafin_sampler_parse_order("top_k;bogus", false, &p) == DELTAFIN_ERR_INVALID);
    CHECK(strstr(deltafin_errmsg(), "'bogus'") != NULL);
    CHECK_EQ_INT(p.n_samplers, 9); /* unchanged on error */
    CHECK(deltafin_sampler_parse_order("kq", true, &p) == DELTAFIN_ERR_INVALID);
    CHECK(deltafin_sampler_parse_order("infill", false, &p) == DELTAFIN_ERR_UNSUPPORTED);
    CHECK(deltafin_sampler_parse_order("", false, &p) == 0 && p.n_samplers == 0);
    /* --logit-bias TOKEN(+|-)BIAS */
    deltafin_logit_bias b;
    CHECK(deltafin_logit_bias_parse("15043+1", &b) == 0 && b.token == 15043 && b.bias == 1.0f);
    CHECK(deltafin_logit_bias_parse("15043-1.5", &b) == 0 && b.token == 15043 && b.bias == -1.5f);
    CHECK(deltafin_logit_bias_parse("2-inf", &b) == 0 && b.token == 2 && b.bias == -INFINITY);
    CHECK(deltafin_logit_bias_parse(" 7 + 2", &b) == 0 && b.token == 7 && b.bias == 2.0f);
    const char *badb[] = {"", "abc", "15043", "15043*1", "15043+", "15043+1x", "-3+1", "15043+nan"};
    for (size_t i = 0; i < sizeof badb / sizeof badb[0]; i++)
        CHECK_MSG(deltafin_logit_bias_parse(badb[i], &b) == DELTAFIN_ERR_INVALID, "'%s'", badb[i]);
    /* parameters llama.cpp refuses */
    deltafin_sampler_params q = deltafin_sampler_default_params();
    q.repeat_penalty = 0.0f;
    CHECK(deltafin_sampler_create(&q) == NULL);
    q = deltafin_sampler_default_params(); q.mirostat = 3;
    CHECK(deltafin_sampler_create(&q) == NULL);
    q = deltafin_sampler_default_params(); q.dry_penalty_last_n = -1;
    CHECK(deltafin_sampler_create(&q) == NULL);
    q = deltafin_sampler_default_params(); q.presence_penalty = INFINITY;
    CHECK(deltafin_sampler_create(&q) == NULL);
    q = deltafin_sampler_default_params(); q.samplers[0] = 42;
    CHECK(deltafin_sampler_create(&q) == NULL);
    /* DRY with text breakers needs the vocabulary */
    q = deltafin_sampler_default_params(); q.dry_multiplier = 0.8f;
    CHECK(deltafin_sampler_create(&q) == NULL);
    CHECK(strstr(deltafin_errmsg(), "vocabulary") != NULL);
    /* the chain as llama.cpp prints it, stages that change nothing left out */
    q = deltafin_sampler_default_params();
    deltafin_sampler *s = deltafin_sampler_create(&q);
    char line[256];
    deltafin_sampler_describe(s, line, sizeof line);
    CHECK_STR(line, "logits -> top-k -> top-p -> min-p -> temp-ext -> dist");
    deltafin_sampler_free(s);
    q.mirostat = 2;
    s = deltafin_sampler_create(&q);
    deltafin_sampler_describe(s, line, sizeof line);
    CHECK_STR(line, "logits -> temp -> mirostat-v2");
    deltafin_sampler_free(s);
}

static void typical_sigma_xtc_tests(void) {
    const float pr[4] = {0.5f, 0.3f, 0.15f, 0.05f};
    double g[16];
    /* typical-p: entropy H = 1.14212 nats; |−ln p − H| = 0.449, 0.062, 0.755, 1.854: the order
     * is 0.3, 0.5, 0.15, 0.05; p = 0.5 keeps the first two (0.3 + 0.5 > 0.5) */
    deltafin_sampler_params p = off(1);
    p.typical_p = 0.5f;
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 2);
    CHECK_PROBS(g, 0.625, 0.375, 0, 0);
    p.typical_p = 0.2f; /* 0.3 alone exceeds 0.2: the most probable token is dropped */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 1);
    CHECK_PROBS(g, 0, 1, 0, 0);
    p.min_keep = 3; /* ... unless min_keep asks for more */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 3);
    CHECK_PROBS(g, 0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0);
    p.min_keep = 0;
    p.temp = 0.0f; /* greedy goes through typical-p: the 0.3 token, not the argmax */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 1);
    CHECK_PROBS(g, 0, 1, 0, 0);
    /* llama.cpp's vectors: {0.97, 0.01 x3} at 0.5 keeps 0.97; {0.4, 0.2 x3} keeps the three 0.2 */
    p = off(1); p.typical_p = 0.5f;
    const float t1[4] = {0.97f, 0.01f, 0.01f, 0.01f}, t2[4] = {0.4f, 0.2f, 0.2f, 0.2f};
    CHECK_EQ_INT(probs_after(&p, t1, 4, g), 1);
    CHECK_PROBS(g, 1, 0, 0, 0);
    CHECK_EQ_INT(probs_after(&p, t2, 4, g), 3);
    CHECK_PROBS(g, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3);

    /* top-n-sigma on ln {0.1, 0.2, 0.3, 0.4}: mean -1.5466, std 0.5224; n = 1 keeps ln p >=
     * -0.9163 - 0.5224: 0.3 and 0.4 (3/7, 4/7); the others stay as -inf (p 0); n = 3 keeps all */
    const float ns[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    p = off(1); p.top_n_sigma = 1.0f;
    CHECK_EQ_INT(probs_after(&p, ns, 4, g), 4);
    CHECK_PROBS(g, 0, 0, 3.0 / 7, 4.0 / 7);
    p.top_n_sigma = 3.0f;
    probs_after(&p, ns, 4, g);
    CHECK_PROBS(g, 0.1, 0.2, 0.3, 0.4);
    p.top_n_sigma = 0.0f; /* off (not greedy) */
    probs_after(&p, ns, 4, g);
    CHECK_PROBS(g, 0.1, 0.2, 0.3, 0.4);

    /* XTC with probability 1: every token >= threshold but the last of them goes */
    p = off(1); p.xtc_probability = 1.0f; p.xtc_threshold = 0.1f; /* 0.5 0.3 0.15 >= 0.1: keep 0.15, 0.05 */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 2);
    CHECK_PROBS(g, 0, 0, 0.75, 0.25);
    p.xtc_threshold = 0.4f; /* only 0.5 is above: nothing goes */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 4);
    p.xtc_threshold = 0.2f; p.min_keep = 3; /* would leave 3: allowed */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 3);
    CHECK_PROBS(g, 0, 0.3 / 0.5, 0.15 / 0.5, 0.05 / 0.5);
    p.min_keep = 4; /* would leave 3 < 4: nothing goes */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 4);
    p = off(1); p.xtc_probability = 1.0f; p.xtc_threshold = 0.6f; /* > 0.5: off */
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 4);
    /* llama.cpp's vectors: {0.4 0.3 0.2 0.1} at thresholds 0.09 / 0.19 / 0.29 / 0.39 */
    const float x4[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    const int keep[4] = {1, 2, 3, 4};
    const float thr[4] = {0.09f, 0.19f, 0.29f, 0.39f};
    for (int i = 0; i < 4; i++) {
        p = off(1); p.xtc_probability = 0.99f; p.xtc_threshold = thr[i];
        int n = 0, tries = 0;
        while (tries++ < 20 && (n = probs_after(&p, x4, 4, g)) == 4 && keep[i] != 4) p.seed++;
        CHECK_EQ_INT(n, keep[i]);
    }
    /* the coin: probability 0.5 removes in about half of the draws (seeded, so exact) */
    p = off(77); p.xtc_probability = 0.5f; p.xtc_threshold = 0.1f;
    deltafin_sampler *s = deltafin_sampler_create(&p);
    float l[4];
    for (int i = 0; i < 4; i++) l[i] = logf(pr[i]);
    int cut = 0;
    for (int i = 0; i < 4000; i++) {
        int32_t ids[4]; float q[4];
        if (df_sampler_candidates(s, l, 4, ids, q, 4) == 2) cut++;
    }
    CHECK_MSG(cut > 1800 && cut < 2200, "%d of 4000", cut);
    deltafin_sampler_free(s);
    /* greedy meets XTC where the temperature stage stands: the 0.15 token */
    p = off(1); p.xtc_probability = 1.0f; p.xtc_threshold = 0.1f; p.temp = 0.0f;
    s = deltafin_sampler_create(&p);
    CHECK_EQ_INT(deltafin_sampler_sample(s, l, 4), 2);
    deltafin_sampler_free(s);
}

/* DRY over token ids (llama.cpp's test wrapper's breakers): history h, probabilities pr */
static void dry_case(const int32_t *h, int nh, const float *pr, int nv, float mult, float base, int allowed,
                     int last_n, const int32_t *brk, int nbrk, const double *want) {
    deltafin_sampler_params p = off(1);
    p.dry_multiplier = mult; p.dry_base = base; p.dry_allowed_length = allowed; p.dry_penalty_last_n = last_n;
    deltafin_sampler *s = deltafin_sampler_create(&p);
    CHECK(s != NULL);
    if (!s) return;
    if (nbrk) CHECK_EQ_INT(df_sampler_dry_add_breaker_ids(s, brk, nbrk), 0);
    for (int i = 0; i < nh; i++) deltafin_sampler_accept(s, h[i]);
    float l[8];
    int32_t ids[8]; float q[8];
    double g[8] = {0};
    for (int i = 0; i < nv; i++) l[i] = logf(pr[i]);
    int n = df_sampler_candidates(s, l, nv, ids, q, 8);
    for (int i = 0; i < n; i++) g[ids[i]] = q[i];
    for (int i = 0; i < nv; i++) CHECK_MSG(fabs(g[i] - want[i]) < 1e-5, "DRY id %d: %g, want %g", i, g[i], want[i]);
    deltafin_sampler_free(s);
}

static void dry_tests(void) {
    const float q4[4] = {0.25f, 0.25f, 0.25f, 0.25f}, q5[5] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
    /* "0 1 2 0 1": "0 1" repeats, 2 followed it: 2 loses 1 * 1.1^(2-2) = 1 (e^-1 of its weight):
     * 0.25 / (0.75 + 0.25 / e) = 0.296923, 0.25 e^-1 / ... = 0.109232 */
    const int32_t h1[] = {0, 1, 2, 0, 1};
    const double w1[] = {0.296923, 0.296923, 0.109232, 0.296923};
    dry_case(h1, 5, q4, 4, 1.0f, 1.1f, 2, 5, NULL, 0, w1);
    /* multiplier 2: 2 loses 2 (e^-2): 0.2 / (0.8 + 0.2 e^-2) = 0.241818 */
    const double w2[] = {0.241818, 0.241818, 0.032727, 0.241818, 0.241818};
    dry_case(h1, 5, q5, 5, 2.0f, 1.1f, 2, 5, NULL, 0, w2);
    /* too short to repeat ("0 1" alone) */
    const int32_t h3[] = {0, 1};
    const double w3[] = {0.25, 0.25, 0.25, 0.25};
    dry_case(h3, 2, q4, 4, 1.0f, 1.1f, 2, 4, NULL, 0, w3);
    /* a breaker (token 3) between the repeat and the rest: no penalty for 3 itself */
    const int32_t h4[] = {0, 1, 3, 4, 0, 1}, b4[] = {3};
    const double w4[] = {0.2, 0.2, 0.2, 0.2, 0.2};
    dry_case(h4, 6, q5, 5, 1.0f, 1.1f, 2, 6, b4, 1, w4);
    /* allowed length 4: a repeat of 2 is fine */
    const int32_t h5[] = {0, 1, 2, 3, 4, 0, 1};
    dry_case(h5, 7, q5, 5, 1.0f, 1.1f, 4, 7, NULL, 0, w4);
    /* "0 1 2 3 0 1 2": the repeat "0 1 2" is 3 long, 3 followed it: 3 loses 1.5 * 2^(3-2) = 3;
     * with the window cut to 4 ids ("3 0 1 2") nothing repeats */
    const int32_t h6[] = {0, 1, 2, 3, 0, 1, 2};
    const double e3 = exp(-3.0), w6[] = {0.25 / (0.75 + 0.25 * e3), 0.25 / (0.75 + 0.25 * e3),
                                         0.25 / (0.75 + 0.25 * e3), 0.25 * e3 / (0.75 + 0.25 * e3)};
    dry_case(h6, 7, q4, 4, 1.5f, 2.0f, 2, 64, NULL, 0, w6);
    dry_case(h6, 7, q4, 4, 1.5f, 2.0f, 2, 4, NULL, 0, w3);
    /* a two-token breaker "0 3" (head first, as text tokenizes): in "0 3 1 2 5 0 3 1 2" the
     * repeat "0 3 1 2" (4 long) was followed by 5: 5 loses 1 * 2^(4-2) = 4; with the breaker a
     * repeat may reach back only to after the last "0 3" ("1 2", 2 long): 5 loses 2^0 = 1 */
    const int32_t h7[] = {0, 3, 1, 2, 5, 0, 3, 1, 2}, b7[] = {0, 3};
    const float q6[6] = {0.2f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f};
    const double e4 = exp(-4.0), z7 = 0.9 + 0.1 * e4;
    const double w7a[] = {0.2 / z7, 0.2 / z7, 0.2 / z7, 0.2 / z7, 0.1 / z7, 0.1 * e4 / z7};
    dry_case(h7, 9, q6, 6, 1.0f, 2.0f, 2, 64, NULL, 0, w7a);
    const double e1 = exp(-1.0), z7b = 0.9 + 0.1 * e1;
    const double w7b[] = {0.2 / z7b, 0.2 / z7b, 0.2 / z7b, 0.2 / z7b, 0.1 / z7b, 0.1 * e1 / z7b};
    dry_case(h7, 9, q6, 6, 1.0f, 2.0f, 2, 64, b7, 2, w7b);
}

static void mirostat_tests(void) {
    /* Mirostat 2.0, tau 5 (mu 10): every token's surprise (1, 1.74, 2.74, 4.32 bits) is below
     * mu, all four are candidates; mu then moves by eta * (tau - surprise of the pick) */
    const float pr[4] = {0.5f, 0.3f, 0.15f, 0.05f};
    float l[4];
    for (int i = 0; i < 4; i++) l[i] = logf(pr[i]);
    deltafin_sampler_params p = off(5);
    p.mirostat = 2; p.top_k = 1; /* the other stages are not run under mirostat */
    double seen[4] = {0};
    for (int i = 0; i < 2000; i++) {
        p.seed = (uint64_t)i;
        deltafin_sampler *s = deltafin_sampler_create(&p);
        int32_t id = deltafin_sampler_sample(s, l, 4);
        CHECK(id >= 0 && id < 4);
        if (id >= 0 && id < 4) {
            seen[id] += 1.0 / 2000;
            CHECK_NEAR(df_sampler_mirostat_mu(s), 10.0 - 0.1 * (-log2(pr[id]) - 5.0), 1e-5);
        }
        deltafin_sampler_free(s);
    }
    for (int i = 0; i < 4; i++) CHECK_NEAR(seen[i], pr[i], 0.035);
    /* tau 0.5 (mu 1): only the 0.5 token (surprise exactly 1) is kept; it has p 1 then, so mu
     * rises by eta * tau each step: 1.05, 1.10 */
    p = off(5); p.mirostat = 2; p.mirostat_tau = 0.5f;
    deltafin_sampler *s = deltafin_sampler_create(&p);
    CHECK_EQ_INT(deltafin_sampler_sample(s, l, 4), 0);
    CHECK_NEAR(df_sampler_mirostat_mu(s), 1.05, 1e-6);
    CHECK_EQ_INT(deltafin_sampler_sample(s, l, 4), 0);
    CHECK_NEAR(df_sampler_mirostat_mu(s), 1.10, 1e-6);
    deltafin_sampler_free(s);

    /* Mirostat 1 on a Zipf distribution p ∝ 1/i^2 (i = 1..4): the estimated exponent is exactly
     * 2, so k = (2^mu / (1 - 4^-1))^(1/2): tau 1 (mu 2) gives k = 2.31 -> the 2 best, p ∝ {1,
     * 1/4} = {0.8, 0.2}; tau 0.5 (mu 1) gives k = 1.63 -> the best alone */
    const double z = 1 + 0.25 + 1.0 / 9 + 1.0 / 16;
    const float zp[4] = {(float)(1 / z), (float)(0.25 / z), (float)(1.0 / 9 / z), (float)(1.0 / 16 / z)};
    for (int i = 0; i < 4; i++) l[i] = logf(zp[i]);
    p = off(1); p.mirostat = 1; p.mirostat_tau = 1.0f;
    double f0 = 0;
    int other = 0;
    for (int i = 0; i < 2000; i++) {
        p.seed = (uint64_t)i + 100;
        s = deltafin_sampler_create(&p);
        int32_t id = deltafin_sampler_sample(s, l, 4);
        if (id == 0) {
            f0 += 1.0 / 2000;
            CHECK_NEAR(df_sampler_mirostat_mu(s), 2.0 - 0.1 * (-log2(0.8) - 1.0), 1e-5);
        } else if (id == 1) {
            CHECK_NEAR(df_sampler_mirostat_mu(s), 2.0 - 0.1 * (-log2(0.2) - 1.0), 1e-5);
        } else {
            other++;
        }
        deltafin_sampler_free(s);
    }
    CHECK_EQ_INT(other, 0);
    CHECK_NEAR(f0, 0.8, 0.035);
    /* tau 0.5: the best alone (p 1, surprise 0), so mu rises by eta * tau per step: k reaches 2
     * only when 2^mu / 0.75 >= 4 (mu >= 1.585, the 12th step) */
    p.mirostat_tau = 0.5f;
    s = deltafin_sampler_create(&p);
    for (int i = 0; i < 11; i++) {
        CHECK_EQ_INT(deltafin_sampler_sample(s, l, 4), 0);
        CHECK_NEAR(df_sampler_mirostat_mu(s), 1.0 + 0.05 * (i + 1), 1e-5);
    }
    deltafin_sampler_free(s);
    /* temperature 0 under mirostat: the best token */
    p = off(3); p.mirostat = 2; p.temp = 0.0f;
    s = deltafin_sampler_create(&p);
    const float lz[4] = {0.1f, 0.3f, 0.2f, 0.25f};
    for (int i = 0; i < 20; i++) CHECK_EQ_INT(deltafin_sampler_sample(s, lz, 4), 1);
    deltafin_sampler_free(s);
}

static void chain_order_tests(void) {
    const float pr[4] = {0.5f, 0.3f, 0.15f, 0.05f};
    double g[16];
    /* default order: top_p (0.75) sees temperature-1 probabilities: 0.5 + 0.3 >= 0.75 keeps 2,
     * then temperature 2 flattens them: ∝ sqrt(0.5), sqrt(0.3) */
    deltafin_sampler_params p = off(1);
    p.top_p = 0.75f; p.temp = 2.0f;
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 2);
    const double a = sqrt(0.5), b = sqrt(0.3), c = sqrt(0.15), d = sqrt(0.05);
    CHECK_PROBS(g, a / (a + b), b / (a + b), 0, 0);
    /* temperature first: top_p sees ∝ sqrt(p) = 0.379 0.294 0.208 0.120: three tokens */
    CHECK_EQ_INT(deltafin_sampler_parse_order("temperature;top_p", false, &p), 0);
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 3);
    CHECK_PROBS(g, a / (a + b + c), b / (a + b + c), c / (a + b + c), 0);
    (void)d;
    /* no stage at all: dist alone, at temperature 1 even with temp 0 (as llama.cpp) */
    p = off(1); p.temp = 0.0f; p.top_k = 1;
    CHECK_EQ_INT(deltafin_sampler_parse_order("", false, &p), 0);
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 4);
    CHECK_PROBS(g, 0.5, 0.3, 0.15, 0.05);
    /* greedy with the penalties after top_k: top_k(2) keeps ids 0 and 1, the presence penalty
     * lowers both, and the best of those two is chosen (default order: id 2) */
    const float lg[3] = {3.0f, 2.9f, 2.5f};
    for (int order = 0; order < 2; order++) {
        p = deltafin_sampler_default_params();
        p.temp = 0.0f; p.top_k = 2; p.presence_penalty = 1.0f; p.seed = 1;
        if (order) CHECK_EQ_INT(deltafin_sampler_parse_order("top_k;penalties;temperature", false, &p), 0);
        deltafin_sampler *s = deltafin_sampler_create(&p);
        deltafin_sampler_accept(s, 0);
        deltafin_sampler_accept(s, 1);
        CHECK_EQ_INT(deltafin_sampler_sample(s, lg, 3), order ? 0 : 2);
        deltafin_sampler_free(s);
    }
    /* min_keep holds top_p and min_p open */
    p = off(1); p.top_p = 0.3f; p.min_keep = 3;
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 3);
    p = off(1); p.min_p = 0.9f; p.min_keep = 2;
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 2);
    CHECK_PROBS(g, 0.625, 0.375, 0, 0);
    /* a stage given twice runs twice: top_k 3 then top_p then top_k again is still 3 */
    p = off(1); p.top_k = 3;
    CHECK_EQ_INT(deltafin_sampler_parse_order("top_k;top_k", false, &p), 0);
    CHECK_EQ_INT(probs_after(&p, pr, 4, g), 3);
}

/* DRY sequence breakers from text over a real vocabulary (the llama fixture's): a token
 * holding the breaker's text stops repeats and is never penalized itself */
static void dry_vocab_tests(void) {
    char path[1024];
    df_fixture("models/llama-2-tiny-random.gguf", path, sizeof path);
    deltafin_vocab *v = NULL;
    if (deltafin_vocab_load(path, NULL, &v) < 0) {
        printf("skip: DRY vocabulary test (%s: %s)\n", path, deltafin_errmsg());
        return;
    }
    int32_t dot[4], ab[4];
    int nd = deltafin_vocab_tokenize(v, ".", 1, false, false, dot, 4);
    int na = deltafin_vocab_tokenize(v, " the cat", 8, false, false, ab, 4);
    CHECK(nd >= 1 && na >= 2);
    deltafin_vocab_info info;
    deltafin_vocab_get_info(v, &info);
    const int nv = info.n_tokens;
    float *l = calloc((size_t)nv, sizeof *l);
    int32_t *ids = malloc(sizeof *ids * (size_t)nv);
    float *q = malloc(sizeof *q * (size_t)nv);
    const int32_t brk_tok = dot[nd - 1], x = ab[0], y = ab[1];
    /* history "x y B x y" then the candidates: B followed the repeat "x y" */
    for (int with = 0; with < 2; with++) {
        const char *brk[] = {"."};
        deltafin_sampler_params p = off(1);
        p.dry_multiplier = 1.0f; p.dry_base = 2.0f; p.dry_allowed_length = 2;
        p.vocab = v;
        p.dry_sequence_breakers = brk;
        p.n_dry_sequence_breakers = with;
        p.top_k = 0;
        deltafin_sampler *s = deltafin_sampler_create(&p);
        CHECK(s != NULL);
        if (!s) break;
        const int32_t h[] = {x, y, brk_tok, x, y};
        for (int i = 0; i < 5; i++) deltafin_sampler_accept(s, h[i]);
        int n = df_sampler_candidates(s, l, nv, ids, q, nv);
        float pb = 0, px = 0;
        for (int i = 0; i < n; i++) {
            if (ids[i] == brk_tok) pb = q[i];
            if (ids[i] == x) px = q[i];
        }
        /* without breakers B loses 1 (e^-1 of its weight); as a breaker it is never penalized */
        if (with) CHECK_MSG(fabsf(pb - px) < 1e-9f, "breaker token penalized: %g vs %g", pb, px);
        else CHECK_MSG(fabsf(pb - px * expf(-1.0f)) < 1e-7f, "no DRY penalty: %g vs %g", pb, px);
        deltafin_sampler_free(s);
    }
    free(l); free(ids); free(q);
    deltafin_vocab_free(v);
}

static void stage_tests(void) {
    order_and_parse_tests();
    typical_sigma_xtc_tests();
    dry_tests();
    mirostat_tests();
    chain_order_tests();
    dry_vocab_tests();
}

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

    stage_tests();
    TEST_MAIN_END("test_sampler");
}
