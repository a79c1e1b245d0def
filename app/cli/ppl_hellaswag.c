/* ppl_hellaswag.c — llama-perplexity's HellaSwag score (perplexity.h). The task file is
 * llama.cpp's: 6 lines per task — "activity_label: ctx", the gold ending's index (0..3), the 4
 * endings. Tasks are drawn as llama-perplexity draws them (std::mt19937 seeded 1, and libstdc++'s
 * uniform_int_distribution over the tasks not drawn yet), so the running score of task i is the
 * same task's in both tools. Each ending is scored by the mean log-probability of its tokens
 * after the common prefix of the four "context + ' ' + ending" token sequences (acc_norm); the
 * running accuracy is printed with its Wilson 95% interval.
 * Decoding: the common prefix once, then each ending after it (the cache truncated back to the
 * prefix), so a task costs the prefix plus its four endings, as in llama-perplexity's batch. */
#include "app/cli/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- std::mt19937 and libstdc++'s uniform_int_distribution<size_t> ------------------------ */
enum { MT_N = 624, MT_M = 397 };
typedef struct {
    uint32_t s[MT_N];
    int i;
} mt19937;

static void mt_seed(mt19937 *g, uint32_t seed) {
    g->s[0] = seed;
    for (uint32_t k = 1; k < MT_N; k++) g->s[k] = 1812433253u * (g->s[k - 1] ^ (g->s[k - 1] >> 30)) + k;
    g->i = MT_N;
}

static uint32_t mt_next(mt19937 *g) {
    if (g->i >= MT_N) {
        for (int k = 0; k < MT_N; k++) {
            const uint32_t y = (g->s[k] & 0x80000000u) | (g->s[(k + 1) % MT_N] & 0x7fffffffu);
            g->s[k] = g->s[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        g->i = 0;
    }
    uint32_t y = g->s[g->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* uniform in [0, n), n <= 2^32: Lemire's multiply-and-reject, as libstdc++ downscales a 32-bit
 * generator (bits/uniform_int_dist.h, _S_nd) */
static uint32_t mt_below(mt19937 *g, uint32_t n) {
    uint64_t prod = (uint64_t)mt_next(g) * n;
    uint32_t low = (uint32_t)prod;
    if (low < n) {
        const uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            prod = (uint64_t)mt_next(g) * n;
            low = (uint32_t)prod;
        }
    }
    return (uint32_t)(prod >> 32);
}

/* ---- tasks ----------------------------------------------------------------------------------- */
typedef struct {
    int line;                     /* first line of the task in the file (1-based) */
    int gold;
    int32_t *seq[4];              /* "context ending_s" tokens */
    int n[4];
    int prefix;                   /* tokens all four share */
} hs_task;

static void task_free(hs_task *t) {
    for (int s = 0; s < 4; s++) free(t->seq[s]);
}

/* Task `idx` of the file's lines into t: its tokens and common prefix. 0, or 1 (printed). */
static int task_load(const deltafin_model *m, char **lines, int idx, hs_task *t) {
    memset(t, 0, sizeof *t);
    t->line = idx * 6 + 1;
    const char *g = lines[idx * 6 + 1];
    if (!(g[0] >= '0' && g[0] <= '3' && (g[1] == 0 || g[1] == '\r'))) {
        fprintf(stderr, "perplexity: hellaswag: line %d: the gold ending must be 0, 1, 2 or 3, got '%s'\n",
                t->line + 1, g);
        return 1;
    }
    t->gold = g[0] - '0';
    const char *ctx = lines[idx * 6];
    for (int s = 0; s < 4; s++) {
        const char *end = lines[idx * 6 + 2 + s];
        const size_t a = strlen(ctx), b = strlen(end);
        char *txt = malloc(a + b + 2);
        if (!txt) { fprintf(stderr, "perplexity: out of memory\n"); return 1; }
        memcpy(txt, ctx, a);
        txt[a] = ' ';
        memcpy(txt + a + 1, end, b + 1);
        t->n[s] = deltafin_vocab_tokenize_alloc(deltafin_model_vocab(m), txt, a + b + 1, true, false, &t->seq[s]);
        free(txt);
        if (t->n[s] < 0) { fprintf(stderr, "perplexity: tokenize: %s\n", deltafin_errmsg()); return 1; }
    }
    int shortest = t->n[0];
    for (int s = 1; s < 4; s++) shortest = t->n[s] < shortest ? t->n[s] : shortest;
    while (t->prefix < shortest && t->seq[0][t->prefix] == t->seq[1][t->prefix] &&
           t->seq[0][t->prefix] == t->seq[2][t->prefix] && t->seq[0][t->prefix] == t->seq[3][t->prefix])
        t->prefix++;
    if (t->prefix == 0 || t->prefix == shortest) {
        fprintf(stderr, "perplexity: hellaswag: task at line %d: %s\n", t->line,
                t->prefix ? "an ending adds no token to the context" : "the endings share no first token");
        return 1;
    }
    return 0;
}

/* log p(tok) from logits in llama-perplexity's compute_logprobs steps (float sum) */
static float logprob_f(const float *logits, int n_vocab, int tok) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    float sum = 0.f;
    for (int i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    return logits[tok] - mx - logf(sum);
}

/* Scores the task: the index of its best ending (mean log-probability), or -1 (printed). */
static int task_score(deltafin_ctx *c, int n_vocab, const hs_task *t, float *first) {
    const int p = t->prefix;
    if (deltafin_ctx_truncate(c, 0) < 0 || deltafin_decode(c, t->seq[0], p, false) < 0) goto fail;
    memcpy(first, deltafin_logits(c, -1), sizeof(float) * (size_t)n_vocab);
    /* softmax of the prefix's last logits, as llama-perplexity's softmax(): float exps, double sum */
    float mx = first[0];
    for (int i = 1; i < n_vocab; i++) mx = first[i] > mx ? first[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += expf(first[i] - mx);
    int best = 0;
    double best_lp = 0;
    for (int s = 0; s < 4; s++) {
        const float p0 = (float)(expf(first[t->seq[s][p]] - mx) / sum);
        double lp = logf(p0); /* std::log of a float */
        if (deltafin_ctx_truncate(c, p) < 0 || deltafin_decode(c, t->seq[s] + p, t->n[s] - p, true) < 0) goto fail;
        for (int j = p; j < t->n[s] - 1; j++) lp += logprob_f(deltafin_logits(c, j - p), n_vocab, t->seq[s][j + 1]);
        lp /= t->n[s] - p;
        if (s == 0 || lp > best_lp) { best = s; best_lp = lp; }
    }
    return best;
fail:
    fprintf(stderr, "perplexity: hellaswag: task at line %d: decode: %s\n", t->line, deltafin_errmsg());
    return -1;
}

int ppl_hellaswag(deltafin_ctx *c, const deltafin_model *m, const char *text, size_t len, int n_tasks) {
    int ret = 1, n_lines = 0;
    char *buf = malloc(len + 1), **lines = NULL;
    float *first = malloc(sizeof(float) * (size_t)deltafin_model_n_vocab(m));
    if (!buf || !first) goto oom;
    memcpy(buf, text, len);
    buf[len] = 0;
    for (size_t i = 0; i < len; i++) n_lines += buf[i] == '\n';
    n_lines += len > 0; /* std::getline: no empty line after the last newline */
    lines = malloc(sizeof(char *) * (size_t)(n_lines + 1));
    if (!lines) goto oom;
    for (int i = 0, at = 0; i < n_lines; i++) {
        lines[i] = buf + at;
        char *nl = memchr(buf + at, '\n', len - (size_t)at);
        if (nl) *nl = 0;
        at = nl ? (int)(nl - buf) + 1 : (int)len;
    }
    if (n_lines == 0 || n_lines % 6) {
        fprintf(stderr, "perplexity: hellaswag: %d lines: a task file has 6 lines per task (context, gold ending "
                        "0-3, four endings)\n", n_lines);
        goto done;
    }
    int n_all = n_lines / 6;
    fprintf(stderr, "hellaswag_score : loaded %d tasks from prompt.\n", n_all);
    if (n_tasks > n_all) n_tasks = n_all;
    fprintf(stderr, "hellaswag_score : selecting %d randomized tasks.\n", n_tasks);
    /* llama-perplexity draws task i from those left and removes it: keep the undrawn indices */
    int *left = malloc(sizeof(int) * (size_t)n_all);
    if (!left) goto oom;
    for (int i = 0; i < n_all; i++) left[i] = i;
    mt19937 g;
    mt_seed(&g, 1);
    const int n_ctx = deltafin_ctx_n_ctx(c), n_vocab = deltafin_model_n_vocab(m);
    printf("\ntask\tacc_norm\t95%% confidence interval\n");
    double acc = 0;
    for (int i = 0; i < n_tasks; i++) {
        const int k = (int)mt_below(&g, (uint32_t)(n_all - i));
        const int idx = left[k];
        memmove(left + k, left + k + 1, sizeof(int) * (size_t)(n_all - i - 1 - k));
        hs_task t;
        if (task_load(m, lines, idx, &t)) { task_free(&t); free(left); goto done; }
        int need = 0;
        for (int s = 0; s < 4; s++) need = t.n[s] > need ? t.n[s] : need;
        if (need > n_ctx) {
            fprintf(stderr, "perplexity: hellaswag: task at line %d needs a context of %d tokens (-c %d)\n", t.line,
                    need, n_ctx);
            task_free(&t);
            free(left);
            goto done;
        }
        const int best = task_score(c, n_vocab, &t, first);
        task_free(&t);
        if (best < 0) { free(left); goto done; }
        acc += best == t.gold;
        /* the running accuracy and its Wilson score interval (95%) */
        const double n = i + 1, freq = acc / n, za = 1.95996398454, z = za * za / n;
        const double cnf = z * sqrt(n * (4.0 * freq * (1 - freq) + z)) / (za + za);
        printf("%d\t%3.8lf%%\t[%3.4lf%%, %3.4lf%%]\n", i + 1, freq * 100.0, (freq + z * 0.5 - cnf) / (1.0 + z) * 100.0,
               (freq + z * 0.5 + cnf) / (1.0 + z) * 100.0);
        fflush(stdout);
    }
    free(left);
    printf("\n");
    ret = 0;
    goto done;
oom:
    fprintf(stderr, "perplexity: out of memory\n");
done:
    free(lines);
    free(buf);
    free(first);
    return ret;
}
