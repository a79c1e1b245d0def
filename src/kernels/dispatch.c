/* dispatch.c — picks the kernel table once (the only CPU detection of the engine; env
 * DELTAFIN_ISA=ref|avx2|avx512|neon overrides) and runs matrix products over the thread pool.
 * Matmul work split: output rows are cut into chunks handed out dynamically; inside a chunk the
 * weight rows are walked once per tile of activation rows, so for n_tok > 1 each weight byte
 * comes from DRAM once per chunk (the chunk stays in L2) instead of once per token.
 * Threading: tables are built under pthread_once and immutable afterwards. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "kernels/kernels_impl.h"
#include "base/env.h"

static df_kernel_table g_ref, g_avx2, g_avx512, g_neon;
static bool g_have_avx2, g_have_avx512, g_have_neon;
static const df_kernel_table *g_sel;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Lookup without initialization: init_tables() runs inside pthread_once and must not call
 * back into df_kernels_init() (that re-enters the same once-guard and deadlocks). */
static const df_kernel_table *table_by_name(const char *name) {
    if (!strcasecmp(name, "ref")) return &g_ref;
    if (!strcasecmp(name, "avx2")) return g_have_avx2 ? &g_avx2 : NULL;
    if (!strcasecmp(name, "avx512")) return g_have_avx512 ? &g_avx512 : NULL;
    if (!strcasecmp(name, "neon")) return g_have_neon ? &g_neon : NULL;
    return NULL;
}

static void init_tables(void) {
    df_init(); /* the F16 table the kernels read, the log level */
    df_kernels_fill_ref(&g_ref);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        g_avx2 = g_ref;
        df_kernels_fill_avx2(&g_avx2);
        g_have_avx2 = true;
    }
    if (g_have_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni")) {
        /* starts from the AVX2 table: slots without an AVX-512 kernel keep the AVX2 one
         * (an AVX-512 CPU has AVX2/FMA/F16C) instead of falling back to scalar */
        g_avx512 = g_avx2;
        const df_cpu_caps caps = {.avx512vbmi = __builtin_cpu_supports("avx512vbmi"),
                                  .avx512bitalg = __builtin_cpu_supports("avx512bitalg")};
        df_kernels_fill_avx512(&g_avx512, &caps);
        g_have_avx512 = true;
    }
#endif
#if defined(__aarch64__)
    bool dp = true;
#if defined(__linux__)
    /* the NEON table uses sdot and FP16 conversions (ARMv8.2 dotprod + fp16) */
    unsigned long hw = getauxval(AT_HWCAP);
    dp = (hw & HWCAP_ASIMDDP) && (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
#endif
    if (dp) {
        g_neon = g_ref;
        df_kernels_fill_neon(&g_neon);
        g_have_neon = true;
    }
#endif
    g_sel = g_have_avx512 ? &g_avx512 : g_have_avx2 ? &g_avx2 : g_have_neon ? &g_neon : &g_ref;
    const char *isa = df_env()->isa;
    if (isa) {
        const df_kernel_table *t = table_by_name(isa);
        if (t) g_sel = t;
        else
            df_log(DF_LOG_WARN, "DELTAFIN_ISA=%s not available on this CPU/build; using %s", isa,
                   g_sel->name);
    }
    df_log(DF_LOG_DEBUG, "kernels: %s", g_sel->name);
}

void df_kernels_init(void) { pthread_once(&g_once, init_tables); }

const df_kernel_table *df_kernels(void) {
    df_kernels_init();
    return g_sel;
}

const df_kernel_table *df_kernels_ref(void) {
    df_kernels_init();
    return &g_ref;
}

const df_kernel_table *df_kernels_by_name(const char *name) {
    if (!name) return NULL;
    df_kernels_init();
    return table_by_name(name);
}

int df_kernels_select(const char *name) {
    const df_kernel_table *t = df_kernels_by_name(name);
    if (!t) return df_err(DF_ERR_UNSUPPORTED, "kernel table '%s' is not available on this CPU/build", name ? name : "(null)");
    g_sel = t;
    return DF_OK;
}

/* ------------------------------------------------------------------ matmul */

uint64_t df_act_bytes(int wtype, int64_t n_in, int64_t n_tok) {
    const df_type_traits *t = df_type_info(wtype);
    if (!t || n_tok < 0) return 0;
    uint64_t rb = df_type_row_bytes(t->vec_dot_type, n_in), out;
    if (!df_mul_ok(rb, (uint64_t)n_tok, &out)) return 0;
    return out;
}

void df_q8_0_split(const void *src, void *dst, int64_t n) {
    const df_block_q8_0 *b = src;
    int8_t *q = dst;
    df_f16 *d = (df_f16 *)(q + n);
    for (int64_t i = 0; i < n / 32; i++) {
        memcpy(q + 32 * i, b[i].qs, 32);
        memcpy(&d[i], &b[i].d, sizeof(df_f16));
    }
}

/* the activation converter of the table's kernels for weight type wtype */
static df_from_float_fn act_fn(const df_kernel_table *k, int wtype, int vdt) {
    return k->from_float_w[wtype] ? k->from_float_w[wtype] : k->from_float[vdt];
}

void df_quantize_act(int wtype, const float *X, int64_t ldx, int64_t n_in, int64_t n_tok, void *act) {
    const df_type_traits *t = df_type_info(wtype);
    DF_ASSERT(t && n_in % t->blck == 0);
    const df_kernel_table *k = df_kernels();
    df_from_float_fn ff = act_fn(k, wtype, t->vec_dot_type);
    DF_ASSERT(ff);
    const uint64_t rb = df_type_row_bytes(t->vec_dot_type, n_in);
    for (int64_t i = 0; i < n_tok; i++) ff(X + i * ldx, (char *)act + i * rb, n_in);
}

typedef struct {
    df_from_float_fn ff;
    const float *X;
    int64_t ldx, n_in, n_tok, per_task;
    uint64_t rb;
    char *act;
} qa_job;

static void qa_task(void *ctx, int task, int thread) {
    const qa_job *j = ctx;
    int64_t t0 = (int64_t)task * j->per_task, t1 = t0 + j->per_task;
    if (t1 > j->n_tok) t1 = j->n_tok;
    for (int64_t t = t0; t < t1; t++) j->ff(j->X + t * j->ldx, j->act + t * j->rb, j->n_in);
}

void df_quantize_act_mt(df_pool *pool, int wtype, const float *X, int64_t ldx, int64_t n_in,
                        int64_t n_tok, void *act) {
    const int nth = df_pool_size(pool);
    if (nth <= 1 || n_tok < 2) {
        df_quantize_act(wtype, X, ldx, n_in, n_tok, act);
        return;
    }
    const df_type_traits *t = df_type_info(wtype);
    DF_ASSERT(t && n_in % t->blck == 0);
    qa_job j = {.ff = act_fn(df_kernels(), wtype, t->vec_dot_type), .X = X, .ldx = ldx, .n_in = n_in,
                .n_tok = n_tok, .rb = df_type_row_bytes(t->vec_dot_type, n_in), .act = act};
    DF_ASSERT(j.ff);
    j.per_task = (n_tok + nth - 1) / nth;
    df_pool_run(pool, (int)((n_tok + j.per_task - 1) / j.per_task), qa_task, &j);
}

typedef struct {
    df_vec_dot_fn dot;
    df_vec_dot4_fn dot4;
    df_vec_dot_fn dot_g;   /* gemm-order tokens (NULL: dot / dot4 for all) */
    df_vec_dot4_fn dot4_g;
    bool gemm;             /* some tokens take ggml's gemm order (dot_g or dot4_x8g) */
    const int32_t *gend;   /* token groups: group i is [gend[i-1], gend[i]) (df_row_groups) */
    int ng;
    int32_t one_end;       /* the single group when the caller gave none */
    const char *W;
    const char *act;
    uint64_t wrb, arb;
    int64_t n_in, n_out, n_tok, ldy;
    int64_t rows_per_task;
    float *Y;
    df_vec_dot_x8_fn dot_x8; /* repacked weights: 8 rows per call */
    df_vec_dot4_x8_fn dot4_x8, dot4_x8g;
} mm_job;

#define MM_TOK_TILE 8

/* row r against tokens [t, t1): four at a time where dot4 exists; returns t1 */
static int64_t mm_tokens(const mm_job *j, df_vec_dot_fn dot, df_vec_dot4_fn dot4, const char *w, int64_t r,
                         int64_t t, int64_t t1) {
    if (dot4)
        for (; t + 4 <= t1; t += 4) {
            float o[4];
            dot4(j->n_in, o, w, j->act + t * j->arb, j->arb);
            for (int k = 0; k < 4; k++) j->Y[(t + k) * j->ldy + r] = o[k];
        }
    for (; t < t1; t++) dot(j->n_in, &j->Y[t * j->ldy + r], w, j->act + t * j->arb);
    return t;
}

/* repacked weights, 8 rows at w, tokens [t, t1) in one order: gemm (4 at a time) or gemv */
static void mm_tokens_x8(const mm_job *j, bool gemm, const char *w, int64_t r, int64_t t, int64_t t1) {
    if (gemm)
        for (; t + 4 <= t1; t += 4)
            j->dot4_x8g(j->n_in, &j->Y[t * j->ldy + r], (size_t)j->ldy, w, j->act + t * j->arb, j->arb);
    if (j->dot4_x8) /* its gemv order, 4 tokens sharing the weight decode */
        for (; t + 4 <= t1; t += 4)
            j->dot4_x8(j->n_in, &j->Y[t * j->ldy + r], (size_t)j->ldy, w, j->act + t * j->arb, j->arb);
    for (; t < t1; t++) j->dot_x8(j->n_in, &j->Y[t * j->ldy + r], w, j->act + t * j->arb);
}

/* Row r (8 rows for x8) against the tokens [t0, t1) of a tile, group g0 holding t0: ggml's
 * gemm order for the first len - len % 4 tokens of each group (a call of that group alone
 * would take it for them), its gemv order for the rest. */
static void mm_tile_row(const mm_job *j, const char *w, int64_t r, int64_t t0, int64_t t1, int g0) {
    if (!j->gemm) {
        if (j->dot_x8) mm_tokens_x8(j, false, w, r, t0, t1);
        else mm_tokens(j, j->dot, j->dot4, w, r, t0, t1);
        return;
    }
    for (int g = g0; t0 < t1; g++) {
        const int64_t gs = g ? j->gend[g - 1] : 0, ge = j->gend[g], len = ge - gs;
        const int64_t gb = gs + len - len % 4, e = ge < t1 ? ge : t1, m = gb < e ? gb : e;
        if (t0 < m) {
            if (j->dot_x8) mm_tokens_x8(j, true, w, r, t0, m);
            else mm_tokens(j, j->dot_g, j->dot4_g, w, r, t0, m);
            t0 = m;
        }
        if (t0 < e) {
            if (j->dot_x8) mm_tokens_x8(j, false, w, r, t0, e);
            else mm_tokens(j, j->dot, j->dot4, w, r, t0, e);
            t0 = e;
        }
    }
}

static void mm_task(void *ctx, int task, int thread) {
    const mm_job *j = ctx;
    const int64_t r0 = (int64_t)task * j->rows_per_task;
    int64_t r1 = r0 + j->rows_per_task;
    if (r1 > j->n_out) r1 = j->n_out;
    if (j->n_tok == 1) {
        if (j->dot_x8) for (int64_t r = r0; r < r1; r += 8) j->dot_x8(j->n_in, &j->Y[r], j->W + r * j->wrb, j->act);
        else for (int64_t r = r0; r < r1; r++) j->dot(j->n_in, &j->Y[r], j->W + r * j->wrb, j->act);
        return;
    }
    const int64_t step = j->dot_x8 ? 8 : 1;
    int g = 0;
    for (int64_t t0 = 0; t0 < j->n_tok;) {
        while (j->gend[g] <= t0) g++; /* the group holding t0 */
        int64_t t1 = t0 + MM_TOK_TILE < j->n_tok ? t0 + MM_TOK_TILE : j->n_tok;
        if (j->gemm) {
            /* a tile never cuts a group's gemm tokens off their 4-token alignment (the x8
             * gemm kernel takes 4 tokens at a time) */
            int h = g;
            while (j->gend[h] < t1) h++;
            const int64_t gs = h ? j->gend[h - 1] : 0, len = j->gend[h] - gs, gb = gs + len - len % 4;
            if (t1 > gs && t1 < gb) t1 = gs + (t1 - gs + 3) / 4 * 4;
        }
        for (int64_t r = r0; r < r1; r += step) mm_tile_row(j, j->W + r * j->wrb, r, t0, t1, g);
        t0 = t1;
    }
}

bool df_gemm_f32_ggml_applies(int64_t n_in, int64_t n_out, int nt) {
    const df_kernel_table *k = df_kernels();
    return k->gemm_f32 && nt >= 2 && n_in > 0 && n_in % k->f32_epr == 0 && n_out % 4 == 0;
}

void df_gemm_f32_ggml(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx, int nt,
                      float *Y, int64_t ldy) {
    const df_kernel_table *k = df_kernels();
    DF_ASSERT(k->gemm_f32);
    k->gemm_f32(W, n_in, r0, r1, X, ldx, nt, Y, ldy);
}

typedef struct {
    const float *w, *x;
    int64_t n_in, ldy;
    int nt;
    float *y;
} f32_gemm_job;

static void f32_gemm_task(void *ctx, int task, int thread) {
    (void)thread;
    const f32_gemm_job *g = ctx;
    df_gemm_f32_ggml(g->w, g->n_in, 4 * (int64_t)task, 4 * (int64_t)task + 4, g->x, g->n_in, g->nt, g->y, g->ldy);
}

enum { MM_PLAIN, MM_3D, MM_ID }; /* ggml's MUL_MAT of a 2-D weight, of a 3-D one, MUL_MAT_ID */

/* The weight types whose result for a token depends on the other tokens of the call (which
 * kernel a call of that many tokens takes): F32 through tinyBLAS from 2 tokens on, repacked
 * rows in ggml's gemm order for the first n - n % 4 tokens of a plain matmul. */
static void matmul_rows(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out, const void *act,
                        int64_t n_tok, float *Y, int64_t ldy, int kind, const int32_t *gend, int ng) {
    const df_type_traits *t = df_type_info(wtype);
    const df_kernel_table *k = df_kernels();
    const int x8 = wtype == DF_TYPE_Q4_K_X8;
    if (x8) {
        DF_ASSERT(kind != MM_3D && n_out % 8 == 0);
        if (!k->vec_dot_x8[wtype]) k = df_kernels_ref(); /* table switched after the weights were repacked */
    }
    const int r8 = !x8 && kind != MM_3D && n_out % 8 == 0 && k->vec_dot_r8[wtype];
    const int gemm = r8 && kind == MM_PLAIN && k->vec_dot_r8g[wtype];
    mm_job j = {
        .dot = r8 ? k->vec_dot_r8[wtype] : k->vec_dot[wtype],
        .dot4 = r8 ? k->vec_dot4_r8[wtype] : k->vec_dot4[wtype],
        .dot_g = gemm ? k->vec_dot_r8g[wtype] : NULL,
        .dot4_g = gemm ? k->vec_dot4_r8g[wtype] : NULL,
        .gemm = gemm,
        .gend = gend,
        .ng = ng,
        .one_end = (int32_t)n_tok,
        .W = W,
        .act = act,
        .wrb = df_type_row_bytes(wtype, n_in),
        .arb = df_type_row_bytes(t->vec_dot_type, n_in),
        .n_in = n_in,
        .n_out = n_out,
        .n_tok = n_tok,
        .ldy = ldy,
        .Y = Y,
    };
    if (!gend) { j.gend = &j.one_end; j.ng = 1; }
    if (x8) {
        j.dot_x8 = k->vec_dot_x8[wtype];
        j.dot4_x8 = k->vec_dot4_x8[wtype];
        j.dot4_x8g = k->vec_dot4_x8g[wtype];
        j.gemm = kind == MM_PLAIN && j.dot4_x8g;
    }
    DF_ASSERT(j.dot || j.dot_x8);
    const int nth = df_pool_size(pool);
    /* ~4 chunks per thread for balance; for several tokens also cap a chunk at ~256 KiB of
     * weights so it stays in L2 while the token tiles sweep over it. */
    int64_t rpt = (n_out + 4 * nth - 1) / (4 * nth);
    if (n_tok > 1) {
        int64_t cap = (int64_t)(262144 / (j.wrb ? j.wrb : 1));
        if (cap < 4) cap = 4;
        if (rpt > cap) rpt = cap;
    }
    if (rpt < 1) rpt = 1;
    if (x8) rpt = (rpt + 7) / 8 * 8;
    j.rows_per_task = rpt;
    int64_t n_tasks = (n_out + rpt - 1) / rpt;
    DF_ASSERT(n_tasks <= 0x7fffffff);
    df_pool_run(pool, (int)n_tasks, mm_task, &j);
}

static void f32_gemm(df_pool *pool, const void *W, int64_t n_in, int64_t n_out, const void *act, int64_t n_tok,
                     float *Y, int64_t ldy) {
    DF_ASSERT(n_tok <= 0x7fffffff);
    f32_gemm_job g = {W, act, n_in, ldy, (int)n_tok, Y};
    df_pool_run(pool, (int)(n_out / 4), f32_gemm_task, &g);
}

static void matmul_q(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                     const void *act, int64_t n_tok, float *Y, int64_t ldy, int kind, const df_row_groups *grp) {
    if (n_out <= 0 || n_tok <= 0) return;
    const df_type_traits *t = df_type_info(wtype);
    DF_ASSERT(t && n_in % t->blck == 0);
    const int32_t *gend = grp && grp->n > 0 ? grp->end : NULL;
    const int ng = gend ? grp->n : 0;
    DF_ASSERT(!gend || gend[ng - 1] == n_tok);
    if (wtype == DF_TYPE_F32 && kind == MM_PLAIN && df_gemm_f32_ggml_applies(n_in, n_out, 2)) {
        /* ggml's mul_mat of F32 weights runs a batch (2+ tokens) through llamafile's tinyBLAS,
         * a single token through vec_dot: each group as a call of its own would. A 3-D weight's
         * matmul takes a permuted (non-contiguous) activation in llama.cpp's graphs (MLA's
         * q_nope, deepseek4's grouped output), which tinyBLAS does not take: vec_dot there. */
        if (!gend) {
            if (n_tok >= 2) f32_gemm(pool, W, n_in, n_out, act, n_tok, Y, ldy);
            else matmul_rows(pool, W, wtype, n_in, n_out, act, n_tok, Y, ldy, kind, NULL, 0);
            return;
        }
        const uint64_t arb = df_type_row_bytes(t->vec_dot_type, n_in);
        /* runs of consecutive groups of one kind: 2+ tokens each (tinyBLAS) or single tokens */
        int64_t a = 0;
        int run = -1;
        for (int g = 0; g <= ng; g++) {
            const int64_t gs = g ? gend[g - 1] : 0;
            int cls = -1;
            if (g < ng) {
                if (gend[g] == gs) continue; /* empty group */
                cls = gend[g] - gs >= 2;
            }
            if (cls == run) continue;
            if (run >= 0 && gs > a) {
                const char *ax = (const char *)act + (uint64_t)a * arb;
                if (run) f32_gemm(pool, W, n_in, n_out, ax, gs - a, Y + a * ldy, ldy);
                else matmul_rows(pool, W, wtype, n_in, n_out, ax, gs - a, Y + a * ldy, ldy, kind, NULL, 0);
            }
            a = gs;
            run = cls;
        }
        return;
    }
    matmul_rows(pool, W, wtype, n_in, n_out, act, n_tok, Y, ldy, kind, gend, ng);
}

void df_matmul_q(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                 const void *act, int64_t n_tok, float *Y, int64_t ldy) {
    matmul_q(pool, W, wtype, n_in, n_out, act, n_tok, Y, ldy, MM_PLAIN, NULL);
}

void df_matmul_q_g(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                   const void *act, int64_t n_tok, float *Y, int64_t ldy, const df_row_groups *g) {
    matmul_q(pool, W, wtype, n_in, n_out, act, n_tok, Y, ldy, MM_PLAIN, g);
}

void df_matmul_q_id(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                    const void *act, int64_t n_tok, float *Y, int64_t ldy) {
    matmul_q(pool, W, wtype, n_in, n_out, act, n_tok, Y, ldy, MM_ID, NULL);
}

static void matmul(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                   const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act,
                   int kind, const df_row_groups *g) {
    void *own = NULL;
    if (!act) {
        uint64_t nb = df_act_bytes(wtype, n_in, n_tok);
        own = df_aligned_alloc(64, nb ? nb : 64);
        DF_ASSERT(own); /* callers on hot paths pass scratch; this path is for tools/tests */
        act = own;
    }
    df_quantize_act_mt(pool, wtype, X, ldx, n_in, n_tok, act);
    matmul_q(pool, W, wtype, n_in, n_out, act, n_tok, Y, ldy, kind, g);
    free(own);
}

void df_matmul(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
               const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act) {
    matmul(pool, W, wtype, n_in, n_out, X, ldx, n_tok, Y, ldy, act, MM_PLAIN, NULL);
}

void df_matmul_id(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                  const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act) {
    matmul(pool, W, wtype, n_in, n_out, X, ldx, n_tok, Y, ldy, act, MM_ID, NULL);
}

void df_matmul_3d(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                  const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act) {
    matmul(pool, W, wtype, n_in, n_out, X, ldx, n_tok, Y, ldy, act, MM_3D, NULL);
}

void df_matmul_g(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                 const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act,
                 const df_row_groups *g) {
    matmul(pool, W, wtype, n_in, n_out, X, ldx, n_tok, Y, ldy, act, MM_PLAIN, g);
}

void df_matmul_3d_g(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                    const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act,
                    const df_row_groups *g) {
    matmul(pool, W, wtype, n_in, n_out, X, ldx, n_tok, Y, ldy, act, MM_3D, g);
}
