/* bench_kernels.c — `deltafin bench kernels`: how close the matrix-vector kernels come to the
 * machine's memory bandwidth. Measures (1) multi-threaded streaming read bandwidth over a buffer
 * far larger than the last-level cache, (2) df_matmul_q throughput in bytes of weights per second
 * for several weight types on matrices of the same size, with all threads, and prints the ratio
 * against bandwidth passes alternated with that type's passes (so both see the same load).
 * Entry point bench_kernels_main() is called by tools/bench.c for `deltafin bench kernels`. */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "base/threadpool.h"
#include "base/util.h"

int bench_kernels_main(int argc, char **argv);

static void usage(FILE *f) {
    fprintf(f,
            "usage: deltafin bench kernels [options]\n"
            "  Memory read bandwidth, then matrix-vector throughput per weight type (bytes of\n"
            "  weights read per second) on matrices much larger than the CPU caches. Each\n"
            "  type's passes alternate with bandwidth passes; its ratio is taken against\n"
            "  the best of those (same load on a shared machine).\n"
            "options:\n"
            "  --size SIZE     bytes per buffer/matrix (default 1G; use ≥ 4x the L3 size)\n"
            "  -t, --threads N threads (default: all cores)\n"
            "  --types LIST    comma-separated weight types (default Q8_0,Q4_K,MXFP4,Q6_K,IQ2_XXS,F16)\n"
            "  --n-in N        matrix row length (default 4096)\n"
            "  --n-tok N       also time N activation rows at once (default 0 = skip)\n"
            "  --reps N        repetitions, best is reported (default 5)\n"
            "  --isa NAME      kernel table: ref | avx2 | avx512 | neon (default: best)\n"
            "  --json          one JSON object on stdout\n"
            "  -h, --help      this help\n");
}

typedef struct {
    const uint64_t *buf;
    size_t n_words;
    size_t per_task;
    uint64_t sums[256];
} bw_job;

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

static volatile uint64_t g_sink;

/* One streaming read pass over the buffer, bytes/s. */
static double bw_pass(df_pool *pool, bw_job *j) {
    const int tasks = df_pool_size(pool) * 8;
    uint64_t t0 = df_time_ns();
    df_pool_run(pool, tasks, bw_task, j);
    double dt = (df_time_ns() - t0) / 1e9;
    return (double)j->n_words * 8 / dt;
}

/* Buffer for bandwidth passes (random contents, as the kernels' inputs). */
static bool bw_setup(df_pool *pool, bw_job *j, size_t bytes) {
    memset(j, 0, sizeof *j);
    uint64_t *buf = df_aligned_alloc(4096, bytes);
    if (!buf) return false;
    size_t n = bytes / 8;
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
    j->buf = buf;
    j->n_words = n;
    const int tasks = df_pool_size(pool) * 8;
    j->per_task = (n + tasks - 1) / tasks;
    return true;
}

/* Best-of-reps read bandwidth in bytes/s. */
static double measure_bw(df_pool *pool, bw_job *j, int reps) {
    double best = 0;
    for (int r = 0; r < reps + 1; r++) {
        double b = bw_pass(pool, j);
        if (r > 0 && b > best) best = b; /* first pass warms up */
    }
    return best;
}

static void empty_task(void *ctx, int task, int thread) { (void)ctx; (void)task; (void)thread; }

/* Median cost of one df_pool_run with one empty task per thread (dispatch + barrier). */
static double measure_dispatch_us(df_pool *pool) {
    enum { N = 2000 };
    static double t[N];
    for (int i = 0; i < N; i++) {
        uint64_t t0 = df_time_ns();
        df_pool_run(pool, df_pool_size(pool), empty_task, NULL);
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

typedef struct {
    int type;
    double gbs, ratio, gbs_tok, us_per_call;
    double bw_local; /* best bandwidth of passes alternated with this type's passes */
} result;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float rnd(void) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return ((g_rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* Matrix of ~bytes of the given type: 64 quantized random rows replicated (quantizing a GiB
 * with the reference quantizers would take minutes; the kernels' speed does not depend on the
 * values). Returns best-of-reps bytes/s for one activation row. */
static int measure_matvec(df_pool *pool, bw_job *bj, int type, int64_t n_in, size_t bytes, int reps, int n_tok, result *res) {
    const df_type_traits *ti = df_type_info(type);
    if (!ti || !ti->can_compute || !df_kernels()->vec_dot[type]) return df_err(DF_ERR_UNSUPPORTED, "type %s has no kernel", ti ? ti->name : "?");
    if (n_in % ti->blck) return df_err(DF_ERR_INVALID, "--n-in %lld not a multiple of %d", (long long)n_in, ti->blck);
    const uint64_t rb = df_type_row_bytes(type, n_in);
    int64_t n_out = (int64_t)(bytes / rb) / 8 * 8;
    if (n_out < 64) n_out = 64;
    char *W = df_aligned_alloc(4096, rb * n_out);
    if (!W) return DF_ERR_NOMEM;
    float *row = malloc(n_in * sizeof(float));
    const int nseed = 64;
    for (int r = 0; r < nseed; r++) {
        for (int64_t i = 0; i < n_in; i++) row[i] = rnd();
        if (ti->can_quantize) df_quantize_row(type, row, W + r * rb, n_in);
        else if (type == DF_TYPE_IQ2_XXS || type == DF_TYPE_IQ2_XS || type == DF_TYPE_IQ2_S || type == DF_TYPE_IQ1_M || type == DF_TYPE_TQ1_0 || type == DF_TYPE_TQ2_0 ||
                 type == DF_TYPE_IQ3_XXS || type == DF_TYPE_IQ3_S || type == DF_TYPE_IQ1_S) {
            /* no quantizer for these: random codes, scale (F16 at block offset 0) set sanely */
            uint8_t *b = (uint8_t *)W + r * rb;
            for (uint64_t k = 0; k < rb; k++) b[k] = (uint8_t)(rnd() * 127.0f + 128.0f);
            df_f16 h = df_f32_to_f16(0.01f);
            for (uint64_t k = 0; k < rb; k += (uint64_t)ti->bytes) memcpy(b + k, &h, 2);
        } else { free(row); free(W); return df_err(DF_ERR_UNSUPPORTED, "cannot make %s weights", ti->name); }
    }
    for (int64_t r = nseed; r < n_out; r++) memcpy(W + r * rb, W + (r % nseed) * rb, rb);
    /* the layout a loaded model's matmul weights get (df_repack_type: Q4_K as 8 interleaved rows) */
    const int rtype = n_out % 8 == 0 ? df_repack_type(type) : -1;
    if (rtype >= 0) {
        int rc = df_repack_rows(pool, type, rtype, W, n_in, n_out);
        if (rc) { free(row); free(W); return rc; }
    }
    const int mtype = rtype >= 0 ? rtype : type;
    int nt = n_tok > 1 ? n_tok : 1;
    float *X = malloc(n_in * nt * sizeof(float));
    for (int64_t i = 0; i < n_in * nt; i++) X[i] = rnd();
    float *Y = malloc(n_out * nt * sizeof(float));
    void *act = df_aligned_alloc(64, df_act_bytes(type, n_in, nt) + 64);
    df_quantize_act(type, X, n_in, n_in, 1, act);
    const double total = (double)rb * n_out;
    /* matvec passes alternate with bandwidth passes, so that on a shared machine both see the
     * same load: the ratio is taken against this local bandwidth */
    double best = 0, bwl = 0;
    for (int r = 0; r < reps + 1; r++) {
        double b = bw_pass(pool, bj);
        uint64_t t0 = df_time_ns();
        df_matmul_q(pool, W, mtype, n_in, n_out, act, 1, Y, n_out);
        double dt = (df_time_ns() - t0) / 1e9;
        if (r > 0 && total / dt > best) best = total / dt;
        if (r > 0 && b > bwl) bwl = b;
    }
    res->bw_local = bwl;
    res->type = type;
    res->gbs = best / 1e9;
    res->us_per_call = total / best * 1e6;
    res->gbs_tok = 0;
    if (n_tok > 1) {
        df_quantize_act(type, X, n_in, n_in, n_tok, act);
        double bt = 0;
        for (int r = 0; r < reps; r++) {
            uint64_t t0 = df_time_ns();
            df_matmul_q(pool, W, mtype, n_in, n_out, act, n_tok, Y, n_out);
            double dt = (df_time_ns() - t0) / 1e9;
            if (total / dt > bt) bt = total / dt;
        }
        res->gbs_tok = bt / 1e9; /* weight bytes/s while serving n_tok rows */
    }
    free(W); free(row); free(X); free(Y); free(act);
    return DF_OK;
}

int bench_kernels_main(int argc, char **argv) {
    uint64_t size = 1ull << 30;
    int nthreads = 0, reps = 5, n_tok = 0;
    int64_t n_in = 4096;
    bool json = false;
    const char *isa_req = NULL;
    const char *types = "Q8_0,Q4_K,MXFP4,Q6_K,IQ2_XXS,F16";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "kernels")) continue;
        else if (!v) { fprintf(stderr, "bench kernels: unknown or incomplete option %s\n", a); usage(stderr); return 2; }
        else if (!strcmp(a, "--size")) { if (df_parse_size(v, &size) || size < (1u << 20)) { fprintf(stderr, "bench kernels: bad --size %s\n", v); return 2; } i++; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { nthreads = atoi(v); i++; }
        else if (!strcmp(a, "--types")) { types = v; i++; }
        else if (!strcmp(a, "--n-in")) { n_in = atoll(v); i++; }
        else if (!strcmp(a, "--n-tok")) { n_tok = atoi(v); i++; }
        else if (!strcmp(a, "--reps")) { reps = atoi(v); i++; }
        else if (!strcmp(a, "--isa")) { isa_req = v; i++; }
        else { fprintf(stderr, "bench kernels: unknown option %s\n", a); usage(stderr); return 2; }
    }
    if (reps < 1) reps = 1;
    if (n_in <= 0) { fprintf(stderr, "bench kernels: bad --n-in\n"); return 2; }
    df_init();
    if (isa_req && df_kernels_select(isa_req)) { fprintf(stderr, "bench kernels: %s\n", df_errmsg()); return 2; }
    df_pool *pool = df_pool_create(nthreads);
    if (!pool) { fprintf(stderr, "bench kernels: %s\n", df_errmsg()); return 1; }
    const int nth = df_pool_size(pool);
    const char *isa = df_kernels()->name;
    char sb[32];
    if (!json) {
        printf("bench kernels: isa %s, %d threads, buffers %s, n_in %lld\n", isa, nth,
               df_fmt_bytes(size, sb, sizeof sb), (long long)n_in);
        fflush(stdout);
    }
    double disp = measure_dispatch_us(pool);
    if (!json) printf("pool dispatch+barrier: %.2f us (median of 2000 df_pool_run)\n", disp);
    bw_job bj;
    if (!bw_setup(pool, &bj, size)) { fprintf(stderr, "bench kernels: out of memory\n"); df_pool_free(pool); return 1; }
    double bw = measure_bw(pool, &bj, reps);
    if (!json) printf("memory read bandwidth: %.2f GB/s\n", bw / 1e9);
    result res[DF_TYPE_COUNT];
    int nres = 0, rc = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", types);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int t = df_type_from_name(tok);
        if (t < 0) { fprintf(stderr, "bench kernels: unknown type %s\n", tok); rc = 2; continue; }
        if (nres >= DF_TYPE_COUNT) break;
        if (measure_matvec(pool, &bj, t, n_in, size, reps, n_tok, &res[nres])) {
            fprintf(stderr, "bench kernels: %s: %s\n", tok, df_errmsg());
            continue;
        }
        res[nres].ratio = res[nres].gbs * 1e9 / res[nres].bw_local;
        if (!json) {
            printf("matvec %-7s %7.2f GB/s  %5.1f%% of bandwidth %.2f GB/s measured alongside  (%.0f us per %s matrix)",
                   df_type_info(t)->name, res[nres].gbs, 100 * res[nres].ratio, res[nres].bw_local / 1e9,
                   res[nres].us_per_call, df_fmt_bytes(size, sb, sizeof sb));
            if (n_tok > 1) printf("  n_tok=%d: %.2f GB/s of weights (%.1f x tokens/s)", n_tok, res[nres].gbs_tok,
                                  res[nres].gbs_tok * n_tok / res[nres].gbs);
            printf("\n");
            fflush(stdout);
        }
        nres++;
    }
    if (json) {
        printf("{\"isa\":\"%s\",\"threads\":%d,\"size_bytes\":%llu,\"n_in\":%lld,\"dispatch_us\":%.3f,\"bandwidth_gbs\":%.3f,\"matvec\":[",
               isa, nth, (unsigned long long)size, (long long)n_in, disp, bw / 1e9);
        for (int i = 0; i < nres; i++)
        {
            printf("%s{\"type\":\"%s\",\"gbs\":%.3f,\"bandwidth_gbs\":%.3f,\"ratio\":%.4f", i ? "," : "",
                   df_type_info(res[i].type)->name, res[i].gbs, res[i].bw_local / 1e9, res[i].ratio);
            if (n_tok > 1) printf(",\"n_tok\":%d,\"gbs_tok\":%.3f", n_tok, res[i].gbs_tok);
            printf("}");
        }
        printf("]}\n");
    }
    for (int i = 0; i < 256; i++) g_sink += bj.sums[i];
    free((void *)bj.buf);
    df_pool_free(pool);
    return rc;
}
