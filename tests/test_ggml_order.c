/* test_ggml_order.c — ggml's float order for the MoE block (the kernel table's row ops through forward/ops.c):
 * df_softmax_ggml (ggml_soft_max), df_swiglu_rows (ggml_swiglu) and df_gemm_f32_ggml
 * (ggml_mul_mat of F32 weights and >= 2 tokens, llamafile's tinyBLAS) on deterministic inputs.
 *   1. every kernel set: close to a double-precision reference (the exp approximation is
 *      within a few ulp; inputs reach exp's underflow / overflow ranges)
 *   2. avx512 and avx2: bit-identical to ggml. The hashes are FNV-1a over ggml's output floats
 *      on exactly these inputs (xorshift64 below, seeds i * 0x9e3779b97f4a7c15, up = seed + 1),
 *      recorded once with private harnesses against the llama.cpp build of docs/testing.md:
 *      avx512 — ggml_soft_max / ggml_swiglu_split / ggml_mul_mat through
 *      ggml_graph_compute_with_ctx (libggml-cpu, -march=native on AVX-512F/DQ, 2 threads);
 *      avx2 — ggml-cpu's vec.cpp compiled with -O3 -mavx2 -mfma -mf16c -mno-avx512f (what a
 *      -march=native build uses on an AVX2 CPU), ggml_vec_max_f32 + ggml_vec_soft_max_f32 +
 *      ggml_vec_scale_f32(1/sum) per row, ggml_vec_swiglu_f32 per row (the same harness built
 *      with -march=native reproduces the avx512 hashes). tinyBLAS under AVX2 is not recorded
 *      (it needs ggml's thread pool): there the GEMM is checked against the order written out
 *      in scalar code (one 8-lane FMA accumulator, lanes reduced (0+4 + 2+6) + (1+5 + 3+7)).
 *   3. F16 / BF16 weights through df_matmul (df_matmul_3d for a 3-D weight with permuted
 *      activations): avx2 bit-identical to ggml_mul_mat of the same weights through
 *      ggml_graph_compute_with_ctx (2 threads) on the AVX2 (-march=native) build of the llama.cpp
 *      of docs/testing.md: ggml_vec_dot_f16 / _bf16 for one token, for n_out % 4 or n_in % 8,
 *      tinyBLAS after converting the activations otherwise.
 *   4. KDA's gated delta rule (the kernel table's kda_head) and short convolution
 *      (df_ssm_conv_silu): every kernel set close to a double-precision reference; avx2
 *      bit-identical to ggml_gated_delta_net (KDA gate; output and final state) and to
 *      ggml_silu(ggml_ssm_conv) through ggml_graph_compute_with_ctx (2 threads) on the AVX2
 *      (-march=native, gcc 12) build of llama.cpp 34af94cd9ab2 (docs/kimi-k3.md): the delta
 *      rule's dots in ggml_vec_dot_f32's 8-lane order (head sizes with and without 32-wide
 *      blocks, leftovers with and without a fused n % 4 tail), the conv's taps as that build's
 *      vectorised reduction (C = 3 all fused, 4 and 8 products then adds, 5 and 15 both). */
#include "testlib.h"
#include "forward/ops.h"
#include "kernels/kernels.h"
#include "base/util.h"
#include <stdint.h>

static uint64_t rs;
static void fill(float *x, int64_t n, float amp, uint64_t seed) {
    rs = seed;
    for (int64_t i = 0; i < n; i++) x[i] = df_test_frand(&rs) * amp;
}
#define SEED(i) ((uint64_t)(i) * 0x9e3779b97f4a7c15ull)

typedef struct { int n, rows, amp, seed; uint64_t h512, h256; } vcase;
/* softmax: wide spreads reach exp's |n| > 126 and > 192 branches (results 0 / denormal) */
static const vcase SM[] = {
    {16, 7, 3, 1, 0x4c100f1d22a07546ull, 0x44534051e7a227a5ull},   /* the demo model's router */
    {69, 5, 70, 2, 0xe6b8a2454a0e9b80ull, 0x41e68daf52875b3cull},  /* vectors + scalar tail */
    {8, 3, 5, 3, 0xdfce49731eda3674ull, 0x997b54b907cc9993ull},    /* avx512: all scalar */
    {160, 4, 40, 4, 0x156177efa7feee7bull, 0x0166e38d119c2f22ull},
};
/* swiglu: gate amplitude amp (150: exp overflow to inf, silu -> -0), up amplitude 2 */
static const vcase SW[] = {
    {200, 6, 8, 5, 0x9c70088f399741d9ull, 0x739dabe5b6c28164ull},  /* rows restart the vectors */
    {192, 4, 150, 6, 0x5bfd35e3f7de891cull, 0xea4a786e376dc607ull},
    {13, 3, 4, 7, 0x36fdbbb19b1b877full, 0x7d051b19042d117dull},
    {2048, 2, 20, 8, 0xeb2fa9e1f3a67f46ull, 0x062900ca1bcd2403ull},
};
typedef struct { int n_in, n_out, nt, seed; uint64_t h512; } gcase;
static const gcase GM[] = {
    {64, 16, 11, 9, 0xfe7ec5eb1493118cull},  /* the demo model's router, an 11-token prompt */
    {96, 8, 2, 10, 0x49f7b3db4403f1e6ull},
    {256, 64, 7, 11, 0xc1031e611d1d54cbull},
};

/* 16-bit weights: type, n_in, n_out, tokens, heads (> 1: a 3-D weight, MLA's per-head matmul),
 * seed; weights fill(amp 1) rounded to the type, activations fill(amp 3, seed + 1) laid out
 * [token][head][n_in] */
typedef struct { int type, n_in, n_out, nt, heads, seed; uint64_t h256; } hcase;
static const hcase HM[] = {
    {DF_TYPE_F16, 64, 16, 1, 1, 21, 0xc86b4e43a775287cull},   /* one token: vec_dot */
    {DF_TYPE_F16, 72, 12, 1, 1, 22, 0x7f5353a22d521efdull},   /* vec_dot's leftovers */
    {DF_TYPE_F16, 64, 16, 11, 1, 23, 0xc8abc30be519a389ull},  /* tinyBLAS */
    {DF_TYPE_F16, 256, 40, 7, 1, 24, 0x15cc8e524cdb7289ull},
    {DF_TYPE_F16, 96, 18, 5, 1, 25, 0x3169067552bca311ull},   /* n_out % 4: vec_dot per row */
    {DF_TYPE_F16, 100, 16, 3, 1, 26, 0xb0c9ddd72f708485ull},  /* n_in % 8: vec_dot per row */
    {DF_TYPE_F16, 200, 8, 2, 1, 27, 0x0c27977d3ad7d805ull},
    {DF_TYPE_F16, 64, 32, 5, 3, 28, 0x5acfce4b0f6f6be1ull},   /* 3-D: tinyBLAS as well */
    {DF_TYPE_F16, 64, 32, 1, 3, 29, 0xdd1d35b2f95b62c9ull},
    {DF_TYPE_BF16, 64, 16, 1, 1, 21, 0xb17b82c97dbf41d4ull},
    {DF_TYPE_BF16, 72, 12, 1, 1, 22, 0xba95ec0893dd284cull},
    {DF_TYPE_BF16, 64, 16, 11, 1, 23, 0x9ac1008e396a5a76ull},
    {DF_TYPE_BF16, 256, 40, 7, 1, 24, 0xf646b5fc30623328ull},
    {DF_TYPE_BF16, 96, 18, 5, 1, 25, 0xec755fb927a1b997ull},
    {DF_TYPE_BF16, 100, 16, 3, 1, 26, 0xa66bc87fddb4c6e2ull},
    {DF_TYPE_BF16, 200, 8, 2, 1, 27, 0xf2a9c8e9dec0a87cull},
    {DF_TYPE_BF16, 64, 32, 5, 3, 28, 0x6fd2f8c7e012cc9dull},
    {DF_TYPE_BF16, 64, 32, 1, 3, 29, 0x771654407b96bde7ull},
};

/* KDA: head size, heads, tokens, seed; hashes of the output [token][head][S] and of the final
 * state [head][value j][key i]. Inputs: q, k amplitude 0.3, v 1, gate -|x|/2, beta 0.5 + 0.4x,
 * state 0.1 (seeds SEED(seed) + 0 ... 5). */
typedef struct { int S, H, nt, seed; uint64_t h_out, h_state; } kcase;
static const kcase KD[] = {
    {16, 3, 5, 31, 0x23506ad53b858d6dull, 0x4a27169851bbc06cull},   /* all leftovers */
    {64, 2, 4, 32, 0x908ad530fbb41deaull, 0x442d8253decc4328ull},   /* w-q4_k's head size */
    {72, 2, 3, 33, 0xd4908dd10de8cbe6ull, 0x85f72dac3b541c8full},   /* blocks + leftovers */
    {40, 2, 3, 34, 0xbea545570dc9951dull, 0x08281207682e19dcull},   /* one 8-lane block only */
    {128, 1, 3, 35, 0xb73a48084b0d2c85ull, 0xbfef99c609cad197ull},  /* the real model's */
    {19, 2, 3, 36, 0x268daedd2a2ff25full, 0xdd1fe7f445388c60ull},   /* leftovers 8 + 8, 3 fused */
    {46, 2, 3, 37, 0x484913050448ece2ull, 0x59a07d6cdce171cfull},   /* a block, then 8 + 4, 2 fused */
};
/* short conv: taps C, channels, tokens, seed; hash of silu(conv) [token][channel]. Inputs:
 * state [channel][C-1] and x [token][channel] amplitude 2, taps [channel][C] amplitude 1. */
typedef struct { int C, nc, nt, seed; uint64_t h256; } ccase;
static const ccase CV[] = {
    {3, 40, 3, 41, 0xd35a1162e14ea864ull},  {4, 40, 3, 42, 0x15e790be8a6c6a54ull},
    {5, 24, 2, 43, 0xe23e443630b2d257ull},  {8, 24, 2, 44, 0xb297e48ca84a09c6ull},
    {15, 16, 2, 45, 0x95f5a83f3eaa648aull},
};

/* one KDA case through the table's kda_head, head by head with the forward pass's strides,
 * against the recurrence in double */
static void run_kda(const char *isa, const kcase *c, bool h256) {
    const int S = c->S, H = c->H, nt = c->nt;
    const int64_t n = (int64_t)S * H * nt, ns = (int64_t)S * S * H;
    float *q = malloc(sizeof(float) * (size_t)n), *k = malloc(sizeof(float) * (size_t)n);
    float *v = malloc(sizeof(float) * (size_t)n), *g = malloc(sizeof(float) * (size_t)n);
    float *o = malloc(sizeof(float) * (size_t)n), *beta = malloc(sizeof(float) * (size_t)H * nt);
    float *st = malloc(sizeof(float) * (size_t)ns);
    double *M = malloc(sizeof(double) * (size_t)S * S);
    fill(q, n, 0.3f, SEED(c->seed));
    fill(k, n, 0.3f, SEED(c->seed) + 1);
    fill(v, n, 1.0f, SEED(c->seed) + 2);
    fill(g, n, 1.0f, SEED(c->seed) + 3);
    for (int64_t i = 0; i < n; i++) g[i] = -fabsf(g[i]) * 0.5f;
    fill(beta, (int64_t)H * nt, 1.0f, SEED(c->seed) + 4);
    for (int i = 0; i < H * nt; i++) beta[i] = 0.5f + 0.4f * beta[i];
    fill(st, ns, 0.1f, SEED(c->seed) + 5);
    double maxerr = 0;
    const int64_t DI = (int64_t)S * H;
    for (int h = 0; h < H; h++) {
        float *sh = st + (int64_t)h * S * S;
        for (int i = 0; i < S * S; i++) M[i] = sh[i];
        df_kernels()->kda_head(sh, S, nt, q + h * S, k + h * S, v + h * S, g + h * S, DI, beta + h, H, o + h * S);
        for (int t = 0; t < nt; t++) {
            const int64_t r = t * DI + h * S;
            for (int j = 0; j < S; j++) {
                double u = 0, y = 0;
                for (int i = 0; i < S; i++) u += (M[j * S + i] *= exp((double)g[r + i])) * k[r + i];
                const double d = ((double)v[r + j] - u) * beta[t * H + h];
                for (int i = 0; i < S; i++) y += (M[j * S + i] += (double)k[r + i] * d) * q[r + i];
                maxerr = fmax(maxerr, fabs(y / sqrt((double)S) - o[r + j]));
            }
        }
        for (int i = 0; i < S * S; i++) maxerr = fmax(maxerr, fabs(M[i] - sh[i]));
    }
    CHECK_MSG(maxerr < 1e-5, "%s kda S=%d: max error %g", isa, S, maxerr);
    if (h256) {
        const uint64_t ho = df_test_fnv(o, (size_t)n), hs = df_test_fnv(st, (size_t)ns);
        CHECK_MSG(ho == c->h_out && hs == c->h_state, "%s kda S=%d: hashes %016llx %016llx, ggml %016llx %016llx", isa,
                  S, (unsigned long long)ho, (unsigned long long)hs, (unsigned long long)c->h_out,
                  (unsigned long long)c->h_state);
    }
    free(q); free(k); free(v); free(g); free(o); free(beta); free(st); free(M);
}

/* one short-conv case through df_ssm_conv_silu against the sum in double; the state must end
 * as the window's last C - 1 values */
static void run_conv(const char *isa, const ccase *c, bool h256) {
    const int C = c->C, nc = c->nc, nt = c->nt;
    float *st = malloc(sizeof(float) * (size_t)nc * (C - 1)), *st0 = malloc(sizeof(float) * (size_t)nc * (C - 1));
    float *x = malloc(sizeof(float) * (size_t)nc * nt), *x0 = malloc(sizeof(float) * (size_t)nc * nt);
    float *w = malloc(sizeof(float) * (size_t)nc * C), *win = malloc(sizeof(float) * (size_t)(nt + C));
    fill(st, (int64_t)nc * (C - 1), 2.0f, SEED(c->seed));
    fill(x, (int64_t)nc * nt, 2.0f, SEED(c->seed) + 1);
    fill(w, (int64_t)nc * C, 1.0f, SEED(c->seed) + 2);
    memcpy(st0, st, sizeof(float) * (size_t)nc * (C - 1));
    memcpy(x0, x, sizeof(float) * (size_t)nc * nt);
    df_ssm_conv_silu(x, nt, nc, C, st, w, win);
    double maxerr = 0;
    int bad_state = 0;
    for (int ch = 0; ch < nc; ch++) {
        for (int t = 0; t < nt; t++) {
            double s = 0;
            for (int i = 0; i < C; i++) {
                const int p = t + i; /* window position: state below C - 1, then the tokens */
                s += (double)w[ch * C + i] * (p < C - 1 ? st0[ch * (C - 1) + p] : x0[(p - (C - 1)) * nc + ch]);
            }
            maxerr = fmax(maxerr, fabs(s / (1 + exp(-s)) - x[t * nc + ch]));
        }
        for (int i = 0; i < C - 1; i++) {
            const int p = nt + i;
            bad_state += st[ch * (C - 1) + i] != (p < C - 1 ? st0[ch * (C - 1) + p] : x0[(p - (C - 1)) * nc + ch]);
        }
    }
    CHECK_MSG(maxerr < 1e-5 && bad_state == 0, "%s conv C=%d: max error %g, %d state values wrong", isa, C, maxerr,
              bad_state);
    if (h256) {
        const uint64_t h = df_test_fnv(x, (size_t)nc * nt);
        CHECK_MSG(h == c->h256, "%s conv C=%d: hash %016llx, ggml %016llx", isa, C, (unsigned long long)h,
                  (unsigned long long)c->h256);
    }
    free(st); free(st0); free(x); free(x0); free(w); free(win);
}

/* one 16-bit case: Y [head][token][n_out] against a double reference of the rounded weights,
 * the hash on avx2 */
static void run_h16(const char *isa, const hcase *k, bool h256) {
    const int64_t nw = (int64_t)k->n_in * k->n_out * k->heads, nx = (int64_t)k->n_in * k->nt * k->heads;
    const int64_t ny = (int64_t)k->n_out * k->nt * k->heads;
    float *wf = malloc(sizeof(float) * (size_t)nw), *x = malloc(sizeof(float) * (size_t)nx);
    float *y = malloc(sizeof(float) * (size_t)ny);
    uint16_t *w = malloc(sizeof(uint16_t) * (size_t)nw);
    fill(wf, nw, 1.0f, SEED(k->seed));
    fill(x, nx, 3.0f, SEED(k->seed) + 1);
    for (int64_t i = 0; i < nw; i++) {
        w[i] = k->type == DF_TYPE_F16 ? df_f32_to_f16(wf[i]) : df_f32_to_bf16(wf[i]);
        wf[i] = k->type == DF_TYPE_F16 ? df_f16_to_f32(w[i]) : df_bf16_to_f32(w[i]);
    }
    const int64_t per = (int64_t)k->n_in * k->n_out, ldx = (int64_t)k->heads * k->n_in;
    for (int h = 0; h < k->heads; h++) {
        float *yh = y + (int64_t)h * k->n_out * k->nt;
        if (k->heads > 1)
            df_matmul_3d(NULL, w + h * per, k->type, k->n_in, k->n_out, x + (int64_t)h * k->n_in, ldx, k->nt, yh, k->n_out, NULL);
        else
            df_matmul(NULL, w, k->type, k->n_in, k->n_out, x, ldx, k->nt, yh, k->n_out, NULL);
    }
    /* activations are rounded to the weight type too: bound the error by that rounding */
    const double rel = k->type == DF_TYPE_F16 ? 1e-3 : 8e-3;
    int bad = 0;
    for (int h = 0; h < k->heads; h++)
        for (int t = 0; t < k->nt; t++)
            for (int r = 0; r < k->n_out; r++) {
                double ref = 0, mag = 0;
                for (int i = 0; i < k->n_in; i++) {
                    const double p = (double)wf[h * per + (int64_t)r * k->n_in + i] * x[(int64_t)t * ldx + (int64_t)h * k->n_in + i];
                    ref += p;
                    mag += fabs(p);
                }
                bad += !(fabs(y[((int64_t)h * k->nt + t) * k->n_out + r] - ref) <= rel * mag);
            }
    CHECK_MSG(bad == 0, "%s %s matmul %dx%dx%d (%d heads): %d outputs off", isa, df_type_info(k->type)->name, k->n_in,
              k->n_out, k->nt, k->heads, bad);
    const uint64_t hh = df_test_fnv(y, (size_t)ny);
    if (h256)
        CHECK_MSG(hh == k->h256, "%s %s matmul %dx%dx%d (%d heads): hash %016llx, ggml %016llx", isa,
                  df_type_info(k->type)->name, k->n_in, k->n_out, k->nt, k->heads, (unsigned long long)hh,
                  (unsigned long long)k->h256);
    free(wf); free(x); free(y); free(w);
}

/* tinyBLAS's AVX2 order written out: 8 lane accumulators, fma, then the 8 -> 1 reduction */
static float gemm_avx2_order(const float *w, const float *x, int n) {
    float l[8] = {0};
    for (int i = 0; i < n; i += 8)
        for (int j = 0; j < 8; j++) l[j] = fmaf(w[i + j], x[i + j], l[j]);
    float h[4];
    for (int j = 0; j < 4; j++) h[j] = l[j + 4] + l[j];
    return (h[0] + h[2]) + (h[1] + h[3]);
}

static void run_set(const char *isa) {
    const bool h512 = df_kernels()->isa == DF_ISA_AVX512, h256 = df_kernels()->isa == DF_ISA_AVX2;
    for (size_t c = 0; c < sizeof SM / sizeof SM[0]; c++) {
        const vcase *k = &SM[c];
        const int64_t N = (int64_t)k->n * k->rows;
        float *x = malloc(sizeof(float) * (size_t)N), *y = malloc(sizeof(float) * (size_t)N);
        fill(x, N, (float)k->amp, SEED(k->seed));
        double maxrel = 0;
        for (int r = 0; r < k->rows; r++) {
            const float *xr = x + (int64_t)r * k->n;
            float *yr = y + (int64_t)r * k->n;
            df_softmax_ggml(xr, yr, k->n);
            double mx = -INFINITY, s = 0;
            for (int i = 0; i < k->n; i++) mx = xr[i] > mx ? xr[i] : mx;
            for (int i = 0; i < k->n; i++) s += exp((double)xr[i] - mx);
            for (int i = 0; i < k->n; i++) {
                const double ref = exp((double)xr[i] - mx) / s;
                if (ref < 1e-30) continue; /* underflow region: flushed differently, checked by hash */
                const double e = fabs(yr[i] - ref) / ref;
                if (!(e <= maxrel)) maxrel = e;
            }
        }
        CHECK_MSG(maxrel < 1e-5, "%s softmax n=%d: max relative error %g", isa, k->n, maxrel);
        const uint64_t h = df_test_fnv(y, N);
        if (h512) CHECK_MSG(h == k->h512, "%s softmax n=%d: hash %016llx, ggml %016llx", isa, k->n, (unsigned long long)h, (unsigned long long)k->h512);
        if (h256) CHECK_MSG(h == k->h256, "%s softmax n=%d: hash %016llx, ggml %016llx", isa, k->n, (unsigned long long)h, (unsigned long long)k->h256);
        /* in place gives the same */
        for (int r = 0; r < k->rows; r++) df_softmax_ggml(x + (int64_t)r * k->n, x + (int64_t)r * k->n, k->n);
        CHECK_MSG(!memcmp(x, y, sizeof(float) * (size_t)N), "%s softmax n=%d in place", isa, k->n);
        free(x);
        free(y);
    }
    for (size_t c = 0; c < sizeof SW / sizeof SW[0]; c++) {
        const vcase *k = &SW[c];
        const int64_t N = (int64_t)k->n * k->rows;
        float *g = malloc(sizeof(float) * (size_t)N), *u = malloc(sizeof(float) * (size_t)N);
        float *g0 = malloc(sizeof(float) * (size_t)N);
        fill(g, N, (float)k->amp, SEED(k->seed));
        fill(u, N, 2.0f, SEED(k->seed) + 1);
        memcpy(g0, g, sizeof(float) * (size_t)N);
        df_swiglu_rows(g, u, k->rows, k->n);
        double maxerr = 0;
        for (int64_t i = 0; i < N; i++) {
            const double ref = (double)g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
            const double e = fabs(g[i] - ref) / (fabs(ref) + 1e-30);
            if (fabs(ref) > 1e-30 && !(e <= maxerr)) maxerr = e;
        }
        CHECK_MSG(maxerr < 2e-6, "%s swiglu n=%d: max relative error %g", isa, k->n, maxerr);
        const uint64_t h = df_test_fnv(g, N);
        if (h512) CHECK_MSG(h == k->h512, "%s swiglu n=%d: hash %016llx, ggml %016llx", isa, k->n, (unsigned long long)h, (unsigned long long)k->h512);
        if (h256) CHECK_MSG(h == k->h256, "%s swiglu n=%d: hash %016llx, ggml %016llx", isa, k->n, (unsigned long long)h, (unsigned long long)k->h256);
        /* silu alone (ggml_vec_silu_f32, KDA's convolution) = SwiGLU against u = 1, bit for bit */
        for (int64_t i = 0; i < N; i++) u[i] = 1.0f;
        memcpy(g, g0, sizeof(float) * (size_t)N);
        df_swiglu_rows(g, u, k->rows, k->n);
        for (int r = 0; r < k->rows; r++) df_silu_row(g0 + (int64_t)r * k->n, k->n);
        CHECK_MSG(!memcmp(g, g0, sizeof(float) * (size_t)N), "%s silu row n=%d = swiglu with u = 1", isa, k->n);
        free(g);
        free(u);
        free(g0);
    }
    for (size_t c = 0; c < sizeof GM / sizeof GM[0]; c++) {
        const gcase *k = &GM[c];
        const bool ok = df_gemm_f32_ggml_applies(k->n_in, k->n_out, k->nt);
        CHECK_MSG(ok == (h512 || h256), "%s gemm %dx%d: applies %d", isa, k->n_in, k->n_out, ok);
        if (!ok) continue;
        float *w = malloc(sizeof(float) * (size_t)k->n_in * k->n_out);
        float *x = malloc(sizeof(float) * (size_t)k->n_in * k->nt);
        float *y = malloc(sizeof(float) * (size_t)k->n_out * k->nt);
        fill(w, (int64_t)k->n_in * k->n_out, 1.0f, SEED(k->seed));
        fill(x, (int64_t)k->n_in * k->nt, 3.0f, SEED(k->seed) + 1);
        /* in two row ranges, as the pool splits it */
        df_gemm_f32_ggml(w, k->n_in, 0, 4, x, k->n_in, k->nt, y, k->n_out);
        df_gemm_f32_ggml(w, k->n_in, 4, k->n_out, x, k->n_in, k->nt, y, k->n_out);
        double maxerr = 0;
        int order_diff = 0;
        for (int t = 0; t < k->nt; t++)
            for (int r = 0; r < k->n_out; r++) {
                double ref = 0;
                for (int i = 0; i < k->n_in; i++) ref += (double)w[(int64_t)r * k->n_in + i] * x[(int64_t)t * k->n_in + i];
                const double e = fabs(y[(int64_t)t * k->n_out + r] - ref);
                if (!(e <= maxerr)) maxerr = e;
                if (h256) {
                    const float o = gemm_avx2_order(w + (int64_t)r * k->n_in, x + (int64_t)t * k->n_in, k->n_in);
                    order_diff += memcmp(&o, &y[(int64_t)t * k->n_out + r], 4) != 0;
                }
            }
        CHECK_MSG(maxerr < 1e-4 * sqrt((double)k->n_in), "%s gemm %dx%d: max error %g", isa, k->n_in, k->n_out, maxerr);
        const uint64_t h = df_test_fnv(y, (size_t)k->n_out * k->nt);
        if (h512) CHECK_MSG(h == k->h512, "%s gemm %dx%dx%d: hash %016llx, ggml %016llx", isa, k->n_in, k->n_out, k->nt, (unsigned long long)h, (unsigned long long)k->h512);
        if (h256) CHECK_MSG(order_diff == 0, "%s gemm %dx%d: %d outputs not in tinyBLAS's AVX2 order", isa, k->n_in, k->n_out, order_diff);
        free(w);
        free(x);
        free(y);
    }
    for (size_t c = 0; c < sizeof HM / sizeof HM[0]; c++) run_h16(isa, &HM[c], h256);
    for (size_t c = 0; c < sizeof KD / sizeof KD[0]; c++) run_kda(isa, &KD[c], h256);
    for (size_t c = 0; c < sizeof CV / sizeof CV[0]; c++) run_conv(isa, &CV[c], h256);
    /* what tinyBLAS does not take: one token, n_in not a multiple of the vector, n_out % 4 */
    CHECK(!df_gemm_f32_ggml_applies(64, 16, 1));
    CHECK(!df_gemm_f32_ggml_applies(64, 18, 4));
    CHECK(df_gemm_f32_ggml_applies(72, 16, 4) == h256);
}

int main(void) {
    df_init();
    const char *sets[] = {"avx512", "avx2", "ref", "neon"};
    int checked = 0;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        if (df_kernels_select(sets[i]) != DF_OK) continue;
        run_set(sets[i]);
        if (df_kernels()->isa == DF_ISA_AVX512 || df_kernels()->isa == DF_ISA_AVX2) checked++;
    }
    if (!checked) printf("test_ggml_order: no avx512/avx2 kernel set here: ggml bit-parity hashes not checked\n");
    TEST_MAIN_END("test_ggml_order");
}
