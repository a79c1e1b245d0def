/* kbench.c — the engine side of `deltafin bench kernels` (include/deltafin_debug.h): how close
 * the matrix-vector kernels come to the machine's memory bandwidth. A streaming read over a
 * buffer far larger than the last-level cache gives the bandwidth; df_matmul_q on matrices of
 * the same size gives bytes of weights per second, its passes alternated with bandwidth passes
 * so that on a shared machine both see the same load. The tool prints; this file measures.
 * Threading: one caller per deltafin_kbench; the work fans out over its own df_pool. */
#include "deltafin_debug.h"
#include "base/threadpool.h"
#include "base/util.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

#include <math.h>

typedef struct {
    const uint64_t *buf;
    size_t n_words;
    size_t per_task;
    uint64_t sums[256];
} bw_job;

struct deltafin_kbench {
    df_pool *pool;
    bw_job bj;
    uint64_t bytes;        /* bandwidth buffer (and matrix) size */
};

static volatile uint64_t g_sink;

static void bw_task(void *ctx, int task, int thread) {
    bw_job *j = ctx;
    size_t a = (size_t)task * j->per_task, b = a + j->per_task;
    if (b > j->n_words) b = j->n_words;
    const uint64_t *p = j->buf;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    size_t i = a;
    for (; i + 8 <= b; i += 8) {
        s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
        s4 += p[i + 4]; s5 += p[i + 5]; s6 += p[i + 6]; s7 += p[i + 7];
    }
    for (; i < b; i++) s0 += p[i];
    j->sums[thread & 255] += s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

/* One streaming read pass over the buffer, bytes/s. */
static double bw_pass(df_pool *pool, bw_job *j) {
    const int tasks = df_pool_size(pool) * 8;
    uint64_t t0 = df_time_ns();
    df_pool_run(pool, tasks, bw_task, j);
    double dt = (df_time_ns() - t0) / 1e9;
    return (double)j->n_words * 8 / dt;
}

int deltafin_kbench_create(const char *isa, int n_threads, deltafin_kbench **out) {
    *out = NULL;
    df_init();
    if (isa) {
        int rc = df_kernels_select(isa);
        if (rc) return rc < 0 ? rc : DF_ERR_INVALID;
    }
    deltafin_kbench *kb = df_calloc(1, sizeof *kb);
    if (!kb) return DF_ERR_NOMEM;
    kb->pool = df_pool_create(n_threads);
    if (!kb->pool) { free(kb); return DF_ERR_NOMEM; }
    *out = kb;
    return DF_OK;
}

void deltafin_kbench_free(deltafin_kbench *kb) {
    if (!kb) return;
    for (int i = 0; i < 256; i++) g_sink += kb->bj.sums[i];
    free((void *)kb->bj.buf);
    df_pool_free(kb->pool);
    free(kb);
}

int deltafin_kbench_threads(const deltafin_kbench *kb) { return df_pool_size(kb->pool); }

static void empty_task(void *ctx, int task, int thread) { (void)ctx; (void)task; (void)thread; }

double deltafin_kbench_dispatch_us(deltafin_kbench *kb) {
    enum { N = 2000 };
    static double t[N];
    for (int i = 0; i < N; i++) {
        uint64_t t0 = df_time_ns();
        df_pool_run(kb->pool, df_pool_size(kb->pool), empty_task, NULL);
        t[i] = (df_time_ns() - t0) / 1e3;
    }
    for (int i = 1; i < N; i++) { /* insertion sort is fine for 2000 */
        double v = t[i];
        int j = i - 1;
        while (j >= 0 && t[j] > v) { t[j + 1] = t[j]; j--; }
        t[j + 1] = v;
    }
    return t[N / 2];
}

double deltafin_kbench_bandwidth(deltafin_kbench *kb, uint64_t bytes, int reps) {
    bw_job *j = &kb->bj;
    if (!j->buf) { /* random contents, as the kernels' inputs */
        uint64_t *buf = df_aligned_alloc(4096, bytes);
        if (!buf) return -1;
        size_t n = bytes / 8;
        for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
        j->buf = buf;
        j->n_words = n;
        const int tasks = df_pool_size(kb->pool) * 8;
        j->per_task = (n + tasks - 1) / tasks;
        kb->bytes = bytes;
    }
    double best = 0;
    for (int r = 0; r < reps + 1; r++) {
        double b = bw_pass(kb->pool, j);
        if (r > 0 && b > best) best = b; /* first pass warms up */
    }
    return best;
}

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float rnd(void) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return ((g_rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static bool no_quantizer_type(int type) {
    return type == DF_TYPE_IQ2_XXS || type == DF_TYPE_IQ2_XS || type == DF_TYPE_IQ2_S || type == DF_TYPE_IQ1_M ||
           type == DF_TYPE_TQ1_0 || type == DF_TYPE_TQ2_0 || type == DF_TYPE_IQ3_XXS || type == DF_TYPE_IQ3_S ||
           type == DF_TYPE_IQ1_S;
}

/* 64 quantized random rows replicated to n_out rows (quantizing a GiB with the reference
 * quantizers would take minutes; the kernels' speed does not depend on the values). */
static int fill_matrix(int type, char *W, uint64_t rb, int64_t n_in, int64_t n_out) {
    const df_type_traits *ti = df_type_info(type);
    float *row = malloc(n_in * sizeof(float));
    if (!row) return DF_ERR_NOMEM;
    const int nseed = 64;
    for (int r = 0; r < nseed; r++) {
        for (int64_t i = 0; i < n_in; i++) row[i] = rnd();
        if (ti->can_quantize) df_quantize_row(type, row, W + r * rb, n_in);
        else if (no_quantizer_type(type)) {
            /* no quantizer for these: random codes, scale (F16 at block offset 0) set sanely */
            uint8_t *b = (uint8_t *)W + r * rb;
            for (uint64_t k = 0; k < rb; k++) b[k] = (uint8_t)(rnd() * 127.0f + 128.0f);
            df_f16 h = df_f32_to_f16(0.01f);
            for (uint64_t k = 0; k < rb; k += (uint64_t)ti->bytes) memcpy(b + k, &h, 2);
        } else { free(row); return df_err(DF_ERR_UNSUPPORTED, "cannot make %s weights", ti->name); }
    }
    free(row);
    for (int64_t r = nseed; r < n_out; r++) memcpy(W + r * rb, W + (r % nseed) * rb, rb);
    return DF_OK;
}

/* Best-of-reps weight bytes/s of df_matmul_q over W with n_tok activation rows. */
static double time_matmul(deltafin_kbench *kb, const char *W, int mtype, int64_t n_in, int64_t n_out,
                          const void *act, int n_tok, float *Y, int reps, double total, double *bw_local) {
    double best = 0, bwl = 0;
    const int warm = bw_local ? 1 : 0;
    for (int r = 0; r < reps + warm; r++) {
        double b = bw_local ? bw_pass(kb->pool, &kb->bj) : 0;
        uint64_t t0 = df_time_ns();
        df_matmul_q(kb->pool, W, mtype, n_in, n_out, act, n_tok, Y, n_out);
        double dt = (df_time_ns() - t0) / 1e9;
        if (r >= warm && total / dt > best) best = total / dt;
        if (r >= warm && b > bwl) bwl = b;
    }
    if (bw_local) *bw_local = bwl;
    return best;
}

int deltafin_kbench_matvec(deltafin_kbench *kb, int type, int64_t n_in, int reps, int n_tok,
                           deltafin_kbench_result *res) {
    memset(res, 0, sizeof *res);
    const df_type_traits *ti = type >= 0 && type < DF_TYPE_COUNT ? df_type_info(type) : NULL;
    if (!ti || !ti->can_compute || !df_kernels()->vec_dot[type])
        return df_err(DF_ERR_UNSUPPORTED, "type %s has no kernel", ti && ti->name ? ti->name : "?");
    if (n_in % ti->blck) return df_err(DF_ERR_INVALID, "--n-in %lld not a multiple of %d", (long long)n_in, ti->blck);
    if (!kb->bj.buf) return df_err(DF_ERR_INVALID, "kbench: measure the bandwidth first");
    const uint64_t rb = df_type_row_bytes(type, n_in);
    int64_t n_out = (int64_t)(kb->bytes / rb) / 8 * 8;
    if (n_out < 64) n_out = 64;
    char *W = df_aligned_alloc(4096, rb * n_out);
    if (!W) return DF_ERR_NOMEM;
    int rc = fill_matrix(type, W, rb, n_in, n_out);
    /* the layout a loaded model's matmul weights get (df_repack_type: Q4_K as 8 interleaved rows) */
    const int rtype = n_out % 8 == 0 ? df_repack_type(type) : -1;
    if (!rc && rtype >= 0) rc = df_repack_rows(kb->pool, type, rtype, W, n_in, n_out);
    if (rc) { free(W); return rc; }
    const int mtype = rtype >= 0 ? rtype : type;
    int nt = n_tok > 1 ? n_tok : 1;
    float *X = malloc(n_in * nt * sizeof(float));
    float *Y = malloc(n_out * nt * sizeof(float));
    void *act = df_aligned_alloc(64, df_act_bytes(type, n_in, nt) + 64);
    if (!X || !Y || !act) { free(W); free(X); free(Y); free(act); return DF_ERR_NOMEM; }
    for (int64_t i = 0; i < n_in * nt; i++) X[i] = rnd();
    df_quantize_act(type, X, n_in, n_in, 1, act);
    const double total = (double)rb * n_out;
    double best = time_matmul(kb, W, mtype, n_in, n_out, act, 1, Y, reps, total, &res->bw_local);
    res->type = type;
    res->gbs = best / 1e9;
    res->us_per_call = total / best * 1e6;
    if (n_tok > 1) {
        df_quantize_act(type, X, n_in, n_in, n_tok, act);
        res->gbs_tok = time_matmul(kb, W, mtype, n_in, n_out, act, n_tok, Y, reps, total, NULL) / 1e9;
    }
    free(W); free(X); free(Y); free(act);
    return DF_OK;
}
