/* ppl_kld.c — llama-perplexity's KL-divergence mode (perplexity.h): the base model's
 * log-probabilities file and the statistics of another model against it. The arithmetic is
 * llama-perplexity's step for step (its float and double intermediates, the 16-nat floor of the
 * stored log-probabilities, its percentile interpolation), so both tools print the same figures
 * for the same logits and either tool reads the other's file. */
#include "app/cli/perplexity.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HDR_MAGIC = 8, HDR_BYTES = 8 + 3 * 4 };

static int base_err(const ppl_base *b, const char *what) {
    fprintf(stderr, "perplexity: %s: %s%s%s\n", b->path, what, errno ? ": " : "", errno ? strerror(errno) : "");
    return -1;
}

static int write_all(ppl_base *b, const void *p, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t k = write(b->fd, (const char *)p + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return base_err(b, "cannot write");
        done += (size_t)k;
    }
    b->off += n;
    return 0;
}

static int read_all(ppl_base *b, void *p, size_t n, const char *what) {
    for (size_t done = 0; done < n;) {
        ssize_t k = read(b->fd, (char *)p + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return base_err(b, what);
        if (k == 0) { errno = 0; return base_err(b, "truncated"); }
        done += (size_t)k;
    }
    b->off += n;
    return 0;
}

static int row_alloc(ppl_base *b) {
    b->nv = 2 * ((b->n_vocab + 1) / 2) + 4;
    b->row = calloc((size_t)b->nv, sizeof(uint16_t));
    if (!b->row) { errno = ENOMEM; return base_err(b, "cannot allocate a row"); }
    return 0;
}

int ppl_base_create(ppl_base *b, const char *path, int n_ctx, int n_vocab, int n_chunk, const int32_t *toks) {
    memset(b, 0, sizeof *b);
    b->path = path;
    b->n_ctx = n_ctx;
    b->n_vocab = n_vocab;
    b->n_chunk = n_chunk;
    errno = 0;
    b->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (b->fd < 0) return base_err(b, "cannot create");
    b->writer = true;
    struct stat st; /* a regular file we truncated is ours: removed if the run fails (never a device) */
    b->remove_on_fail = fstat(b->fd, &st) == 0 && S_ISREG(st.st_mode);
    if (row_alloc(b)) return -1;
    const int32_t hdr[3] = {n_ctx, n_vocab, n_chunk};
    if (write_all(b, "_logits_", HDR_MAGIC) || write_all(b, hdr, sizeof hdr) ||
        write_all(b, toks, sizeof(int32_t) * (size_t)n_chunk * (size_t)n_ctx))
        return -1;
    b->chunk_off = 0; /* the first chunk's drop takes the header too */
    return 0;
}

/* llama-perplexity's log_softmax when it saves logits: the row, and -log p(tok) in float steps */
int ppl_base_write_row(ppl_base *b, const float *logits, int tok, double *nll) {
    const int nv = b->n_vocab;
    float mx = logits[0], mn = logits[0];
    for (int i = 1; i < nv; i++) {
        mx = logits[i] > mx ? logits[i] : mx;
        mn = logits[i] < mn ? logits[i] : mn;
    }
    mn = mx - 16 > mn ? mx - 16 : mn; /* probabilities below e^-16 of the top one are stored as 0 */
    double sum = 0.0;
    for (int i = 0; i < nv; i++) sum += expf(logits[i] - mx);
    const float lse = (float)log(sum);
    const float min_log_prob = mn - mx - lse;
    const float scale = (mx - mn) / 65535.f;
    memcpy(b->row, &scale, sizeof scale);
    memcpy(b->row + 2, &min_log_prob, sizeof min_log_prob);
    uint16_t *q = b->row + 4;
    if (scale != 0) {
        const float inv = 1 / scale;
        for (int i = 0; i < nv; i++) q[i] = logits[i] > mn ? (uint16_t)lrintf(inv * (logits[i] - mn)) : 0;
    } else {
        memset(q, 0, sizeof(uint16_t) * (size_t)nv);
    }
    *nll = mx + lse - logits[tok];
    return write_all(b, b->row, sizeof(uint16_t) * (size_t)b->nv);
}

int ppl_base_open(ppl_base *b, const char *path) {
    memset(b, 0, sizeof *b);
    b->path = path;
    errno = 0;
    b->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (b->fd < 0) return base_err(b, "cannot open");
    char magic[HDR_MAGIC];
    int32_t hdr[3];
    if (read_all(b, magic, sizeof magic, "cannot read") || memcmp(magic, "_logits_", HDR_MAGIC)) {
        errno = 0;
        return base_err(b, "not a log-probabilities file (llama-perplexity --kl-divergence-base writes them: it "
                           "starts with \"_logits_\")");
    }
    if (read_all(b, hdr, sizeof hdr, "cannot read")) return -1;
    b->n_ctx = hdr[0];
    b->n_vocab = hdr[1];
    b->n_chunk = hdr[2];
    errno = 0;
    char msg[160];
    if (b->n_ctx < 4 || b->n_ctx > (1 << 24) || b->n_vocab < 1 || b->n_vocab > (1 << 28) || b->n_chunk < 1) {
        snprintf(msg, sizeof msg, "header says n_ctx %d, n_vocab %d, n_chunk %d: not a valid file", hdr[0], hdr[1],
                 hdr[2]);
        return base_err(b, msg);
    }
    b->nv = 2 * ((b->n_vocab + 1) / 2) + 4;
    const uint64_t n_tok = (uint64_t)b->n_chunk * (uint64_t)b->n_ctx;
    const uint64_t rows = (uint64_t)b->n_chunk * (uint64_t)(b->n_ctx - 1 - b->n_ctx / 2);
    const uint64_t want = HDR_BYTES + 4 * n_tok + rows * 2 * (uint64_t)b->nv;
    struct stat st;
    if (fstat(b->fd, &st) < 0) return base_err(b, "cannot stat");
    if ((uint64_t)st.st_size != want) {
        errno = 0;
        snprintf(msg, sizeof msg, "%s: %llu bytes, but its header (n_ctx %d, n_vocab %d, %d chunks) needs %llu",
                 (uint64_t)st.st_size < want ? "truncated" : "too long", (unsigned long long)st.st_size, b->n_ctx,
                 b->n_vocab, b->n_chunk, (unsigned long long)want);
        return base_err(b, msg);
    }
    b->tokens = malloc(sizeof(int32_t) * n_tok);
    if (!b->tokens) { errno = ENOMEM; return base_err(b, "cannot allocate the tokens"); }
    if (read_all(b, b->tokens, sizeof(int32_t) * n_tok, "cannot read the tokens")) return -1;
    for (uint64_t i = 0; i < n_tok; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= b->n_vocab) {
            errno = 0;
            snprintf(msg, sizeof msg, "token %llu is %d, outside the vocabulary of %d", (unsigned long long)i,
                     b->tokens[i], b->n_vocab);
            return base_err(b, msg);
        }
    if (row_alloc(b)) return -1;
    b->chunk_off = 0;
    (void)posix_fadvise(b->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

int ppl_base_read_row(ppl_base *b) {
    return read_all(b, b->row, sizeof(uint16_t) * (size_t)b->nv, "cannot read a row");
}

int ppl_base_chunk_done(ppl_base *b) {
    const off_t at = (off_t)b->chunk_off, n = (off_t)(b->off - b->chunk_off);
    errno = 0;
    /* written pages must reach the disk before they can be dropped */
    if (b->writer && sync_file_range(b->fd, at, n, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                                               SYNC_FILE_RANGE_WAIT_AFTER) < 0)
        return base_err(b, "cannot write");
    (void)posix_fadvise(b->fd, at, n, POSIX_FADV_DONTNEED);
    b->chunk_off = b->off;
    return 0;
}

int ppl_base_close(ppl_base *b) {
    int rc = 0;
    errno = 0;
    if (b->fd >= 0 && close(b->fd) < 0 && b->writer) rc = base_err(b, "cannot write");
    b->fd = -1;
    free(b->row);
    free(b->tokens);
    b->row = NULL;
    b->tokens = NULL;
    return rc;
}

/* ---- the statistics ------------------------------------------------------------------------ */
typedef struct {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    float max_p_diff;
    size_t n_same_top, count;
    float *kld, *p_diff;          /* per scored token, for the percentiles */
} kld_sums;

/* One scored position: logits of the model against the base row; llama-perplexity's float steps */
static void kld_add(kld_sums *k, const float *logits, const uint16_t *row, int n_vocab, int tok) {
    float mx = logits[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > mx) { mx = logits[i]; imax = i; }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - mx);
    const float lse = (float)log(sum_exp);
    float scale, min_lp;
    memcpy(&scale, row, sizeof scale);
    memcpy(&min_lp, row + 2, sizeof min_lp);
    const uint16_t *q = row + 4;
    const float nll = mx + lse - logits[tok];
    const float nll_base = -(scale * q[tok] + min_lp);
    k->sum_nll += nll;
    k->sum_nll2 += nll * nll;
    k->sum_nll_base += nll_base;
    k->sum_nll_base2 += nll_base * nll_base;
    k->sum_nll_nll_base += nll * nll_base;
    const float norm = mx + lse;
    double kl = 0;
    int imax_base = 0;
    float lp_base_max = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float lp_base = scale * q[i] + min_lp;
        if (i == 0 || lp_base > lp_base_max) { lp_base_max = lp_base; imax_base = i; }
        if (lp_base > -16.f) kl += expf(lp_base) * (lp_base - logits[i] + norm);
    }
    k->sum_kld += kl;
    k->sum_kld2 += kl * kl;
    k->n_same_top += imax == imax_base;
    const float p_diff = expf(-nll) - expf(-nll_base);
    const double d2 = p_diff * p_diff;
    k->sum_p_diff += p_diff;
    k->sum_p_diff2 += d2;
    k->sum_p_diff4 += d2 * d2;
    k->max_p_diff = fabsf(p_diff) > k->max_p_diff ? fabsf(p_diff) : k->max_p_diff;
    k->kld[k->count] = (float)kl;
    k->p_diff[k->count] = p_diff;
    k->count++;
}

typedef struct { double val, unc; } est;

/* mean and its standard error (0 for 10 values or fewer) */
static est mean_unc(double sum, double sum2, size_t n) {
    if (n < 1) return (est){0, 0};
    const double f = sum / (double)n;
    double d = sum2 / (double)n - f * f;
    d = d > 0 && n > 10 ? sqrt(d / (double)(n - 1)) : 0;
    return (est){f, d};
}

static double covariance(double a, double b, double ab, size_t n) {
    if (n < 10) return 0;
    return (ab / (double)n - (a / (double)n) * (b / (double)n)) / (double)(n - 1);
}

typedef struct {
    est log_ppl, log_base, ratio, kl, p_rms;
    double cov;
    double top, top_unc;
} kld_summary;

static kld_summary summarize(const kld_sums *k) {
    kld_summary s;
    s.log_ppl = mean_unc(k->sum_nll, k->sum_nll2, k->count);
    s.log_base = mean_unc(k->sum_nll_base, k->sum_nll_base2, k->count);
    s.cov = covariance(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, k->count);
    s.ratio.val = s.log_ppl.val - s.log_base.val;
    s.ratio.unc = sqrt(s.log_ppl.unc * s.log_ppl.unc + s.log_base.unc * s.log_base.unc - 2.0 * s.cov);
    s.kl = mean_unc(k->sum_kld, k->sum_kld2, k->count);
    const est mse = mean_unc(k->sum_p_diff2, k->sum_p_diff4, k->count);
    s.p_rms.val = sqrt(mse.val);
    s.p_rms.unc = 0.5 / s.p_rms.val * mse.unc;
    s.top = 1.0 * (double)k->n_same_top / (double)k->count;
    s.top_unc = sqrt(s.top * (1 - s.top) / (double)(k->count - 1));
    return s;
}

static void print_chunk(const kld_sums *k, int chunk) {
    const kld_summary s = summarize(k);
    const double ppl = exp(s.log_ppl.val);
    printf("%4d    %9.4lf ± %9.4lf    %10.5lf ± %10.5lf    %10.5lf ± %10.5lf    %6.3lf ± %6.3lf %%    %6.3lf ± %6.3lf %%\n",
           chunk, ppl, ppl * s.log_ppl.unc, s.ratio.val, s.ratio.unc, s.kl.val, s.kl.unc, 100.0 * s.p_rms.val,
           100.0 * s.p_rms.unc, 100.0 * s.top, 100.0 * s.top_unc);
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* sorted v[0..n): linear interpolation between neighbours, in float as llama-perplexity */
static float percentile(const float *v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    const size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static float median(const float *v, size_t n) {
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

static void print_final(kld_sums *k) {
    const size_t n = k->count;
    qsort(k->kld, n, sizeof(float), cmp_float);
    qsort(k->p_diff, n, sizeof(float), cmp_float);
    const kld_summary s = summarize(k);
    const double ppl = exp(s.log_ppl.val), ppl_unc = ppl * s.log_ppl.unc;
    const double base = exp(s.log_base.val), base_unc = base * s.log_base.unc;
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", ppl, ppl_unc);
    printf("Mean PPL(base)                : %10.6lf ± %10.6lf\n", base, base_unc);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * s.cov / (s.log_ppl.unc * s.log_base.unc));
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", s.ratio.val, s.ratio.unc);
    const double ratio = exp(s.ratio.val);
    printf("Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", ratio, ratio * s.ratio.unc);
    const double ppl_cov = ppl * base * s.cov;
    printf("Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", ppl - base,
           sqrt(ppl_unc * ppl_unc + base_unc * base_unc - 2.0 * ppl_cov));
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6lf ± %10.6lf\n", s.kl.val, s.kl.unc);
    static const struct { const char *label; float f; } kq[] = {
        {"99.9%   KLD", 0.999f}, {"99.0%   KLD", 0.990f}, {"95.0%   KLD", 0.950f}, {"90.0%   KLD", 0.900f},
        {NULL, 0}, {"10.0%   KLD", 0.100f}, {" 5.0%   KLD", 0.050f}, {" 1.0%   KLD", 0.010f}, {" 0.1%   KLD", 0.001f}};
    printf("Maximum KLD: %10.6f\n", (double)k->kld[n - 1]);
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) {
        if (kq[i].label) printf("%s: %10.6f\n", kq[i].label, (double)percentile(k->kld, n, kq[i].f));
        else printf("Median  KLD: %10.6f\n", (double)median(k->kld, n));
    }
    printf("Minimum KLD: %10.6f\n", (double)k->kld[0]);
    printf("\n====== Token probability statistics ======\n");
    const est pd = mean_unc(k->sum_p_diff, k->sum_p_diff2, n);
    printf("Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * pd.val, 100.0 * pd.unc);
    static const struct { const char *label; float f; } pq[] = {
        {"99.9%   Δp", 0.999f}, {"99.0%   Δp", 0.990f}, {"95.0%   Δp", 0.950f}, {"90.0%   Δp", 0.900f},
        {"75.0%   Δp", 0.750f}, {NULL, 0}, {"25.0%   Δp", 0.250f}, {"10.0%   Δp", 0.100f}, {" 5.0%   Δp", 0.050f},
        {" 1.0%   Δp", 0.010f}, {" 0.1%   Δp", 0.001f}};
    printf("Maximum Δp: %6.3lf%%\n", 100.0 * k->p_diff[n - 1]);
    for (size_t i = 0; i < sizeof pq / sizeof pq[0]; i++) {
        if (pq[i].label) printf("%s: %6.3lf%%\n", pq[i].label, 100.0 * percentile(k->p_diff, n, pq[i].f));
        else printf("Median  Δp: %6.3lf%%\n", 100.0 * median(k->p_diff, n));
    }
    printf("Minimum Δp: %6.3lf%%\n", 100.0 * k->p_diff[0]);
    printf("RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * s.p_rms.val, 100.0 * s.p_rms.unc);
    printf("Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * s.top, 100.0 * s.top_unc);
}

int ppl_kl_divergence(deltafin_ctx *c, const deltafin_model *m, ppl_base *b) {
    const int n_ctx = b->n_ctx, first = n_ctx / 2, n_score = n_ctx - 1 - first;
    const int n_vocab = deltafin_model_n_vocab(m);
    if (n_vocab != b->n_vocab) {
        fprintf(stderr, "perplexity: %s was written for a vocabulary of %d tokens, the model has %d\n", b->path,
                b->n_vocab, n_vocab);
        return 1;
    }
    deltafin_vocab_info vi;
    deltafin_vocab_get_info(deltafin_model_vocab(m), &vi);
    const int32_t bos = vi.add_bos ? deltafin_token_bos(m) : -1;
    const size_t n_all = (size_t)b->n_chunk * (size_t)n_score;
    kld_sums k = {0};
    k.kld = malloc(sizeof(float) * n_all);
    k.p_diff = malloc(sizeof(float) * n_all);
    int32_t *tmp = malloc(sizeof(int32_t) * (size_t)n_ctx);
    int ret = 1;
    if (!k.kld || !k.p_diff || !tmp) { fprintf(stderr, "perplexity: out of memory\n"); goto done; }
    fprintf(stderr, "kl_divergence: computing over %d chunks, n_ctx=%d, batch_size=%d\n", b->n_chunk, n_ctx,
            deltafin_ctx_n_batch(c));
    for (int i = 0; i < b->n_chunk; i++) {
        const int32_t *toks = b->tokens + (size_t)i * (size_t)n_ctx;
        const uint64_t t0 = deltafin_time_ns();
        if (ppl_decode_chunk(c, toks, n_ctx, bos, tmp) < 0) {
            fprintf(stderr, "\nperplexity: decode: %s\n", deltafin_errmsg());
            goto done;
        }
        if (i == 0) {
            ppl_eta("kl_divergence", t0, b->n_chunk);
            printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
                   "Δp RMS            Same top p\n");
        }
        for (int j = 0; j < n_score; j++) {
            if (ppl_base_read_row(b)) goto done;
            kld_add(&k, deltafin_logits(c, first + j), b->row, n_vocab, toks[first + j + 1]);
        }
        if (ppl_base_chunk_done(b)) goto done;
        print_chunk(&k, i + 1);
        fflush(stdout);
    }
    printf("\n");
    if (k.count >= 100) print_final(&k); /* as llama-perplexity: no statistics on fewer values */
    else fprintf(stderr, "kl_divergence: %zu scored tokens; the statistics need at least 100\n", k.count);
    fflush(stdout);
    ret = 0;
done:
    free(k.kld);
    free(k.p_diff);
    free(tmp);
    return ret;
}
