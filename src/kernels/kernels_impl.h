/* kernels_impl.h — private glue between the kernel tables (ref.c, x86_*.c, arm_neon.c) and
 * dispatch.c. Each SIMD file overwrites the slots it accelerates in a table that starts as a
 * copy of the reference table (AVX-512: of the AVX2 table). CPU features are detected in
 * dispatch.c only and handed to the fill functions. */
#ifndef DF_KERNELS_IMPL_H
#define DF_KERNELS_IMPL_H
#include "kernels/kernels.h"
#include <string.h>

/* optional extensions inside an ISA level, found by dispatch.c */
typedef struct {
    bool avx512vbmi, avx512bitalg;
} df_cpu_caps;

void df_kernels_fill_ref(df_kernel_table *t);
#if defined(__x86_64__)
void df_kernels_fill_avx2(df_kernel_table *t);
void df_kernels_fill_avx512(df_kernel_table *t, const df_cpu_caps *caps);
/* the float slots (x86_avx2_f32.c, x86_avx512_f32.c), called by the two above */
void df_kernels_fill_avx2_f32(df_kernel_table *t);
void df_kernels_fill_avx512_f32(df_kernel_table *t);
#endif
#if defined(__aarch64__)
void df_kernels_fill_neon(df_kernel_table *t);
#endif

/* ---- ggml's vector exp (x86_avx2.c gx_exp8, x86_avx512.c gx_exp16) ------------------------
 * ggml's vec.cpp computes softmax, SwiGLU and silu on whole SIMD vectors with its own exp
 * approximation, and only the n % width leftover elements with libm expf; which width and which
 * approximation a -march=native ggml build uses follows the CPU, and each table reproduces its
 * own (the reference and NEON tables: libm expf everywhere, as ggml without SIMD).
 * The approximation: x = n·ln2 + b with n = round(x·log2(e)) (rounded by adding 1.5·2^23,
 * so the float addition does the rounding), b = x − n·ln2 with ln2 split in a high and a low
 * part, each subtracted with an FMA; e^b ≈ 1 + P1·b + P2·b² + P3·b³ + P4·b⁴ + P5·b⁵ evaluated as
 * ((P5·b + P4)·b² + (P3·b + P2))·b² + (P1·b + 1), all FMAs, then scaled by 2^n. The AVX2 form
 * leaves the 1 out of the polynomial (last term P1·b, a plain multiply) and scales by
 * fma(p, 2^n, 2^n), with 2^n built from the exponent bits of n, and a two-factor scale when
 * |n| > 126; |n| > 192 gives 0 (n <= 0) or +inf. The AVX-512 form scales with vscalefps and
 * only special-cases |n| > 192 the same way. The two forms round differently, hence two. */
#define GX_SHIFT 0x1.8p23f
#define GX_LOG2E 0x1.715476p+0f
#define GX_LN2_HI 0x1.62e4p-1f
#define GX_LN2_LO 0x1.7f7d1cp-20f
#define GX_P1 0x1.ffffecp-1f
#define GX_P2 0x1.fffdb6p-2f
#define GX_P3 0x1.555e66p-3f
#define GX_P4 0x1.573e2ep-5f
#define GX_P5 0x1.0e4020p-7f


/* ---- the KDA delta rule (df_kda_head_fn), one body for every table, with the table's dot ----
 * df_kda_dot: ggml_vec_dot_f32 as llama.cpp's AVX-512 build computes it (the dot of the ref,
 * neon and avx512 tables; the avx2 table passes its vec_dot[F32], ggml's AVX2 order, x86_avx2.c):
 * 4 x 16-lane FMA accumulators over blocks of 64, reduced x0+x2, x1+x3, then
 * x0+x1, then gcc's _mm512_reduce_add_ps tree (8 + 8, 4 + 4, 2 + 2, 1 + 1); leftovers added one
 * by one (not contracted: checked against llama.cpp on head size 16, where every term is a
 * leftover). Written with fmaf in scalar code, it gives the same bits on any CPU; ref.c compiles
 * it as plain C, x86_avx2.c with AVX2/FMA (fmaf becomes vfmadd and the loops vectorise; nothing
 * else is contracted under -std=c11, so the bits are the same). */
static inline __attribute__((always_inline)) float df_kda_dot(int n, const float *x, const float *y) {
    const int np = n & ~63;
    float sumf = 0.0f;
    if (np) {
        float acc[4][16];
        memset(acc, 0, sizeof acc);
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++) acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
        float r[16], t8[8], t4[4];
        for (int l = 0; l < 16; l++) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
        for (int l = 0; l < 8; l++) t8[l] = r[8 + l] + r[l];
        for (int l = 0; l < 4; l++) t4[l] = t8[4 + l] + t8[l];
        sumf = (t4[0] + t4[2]) + (t4[1] + t4[3]);
    }
    for (int i = np; i < n; i++) sumf += x[i] * y[i];
    return sumf;
}
static inline void df_kda_dot_vd(int64_t n, float *s, const void *x, const void *y) {
    *s = df_kda_dot((int)n, x, y);
}

static inline __attribute__((always_inline)) void df_kda_head_body(float *M, int S, int nt, const float *q,
                                                                   const float *k, const float *v, const float *g,
                                                                   int64_t ld, const float *beta, int64_t ldb,
                                                                   float *o, const df_vec_dot_fn dot) {
    const float scale = 1.0f / sqrtf((float)S);
    float dec[4096], del[4096];
    for (int t = 0; t < nt; t++, q += ld, k += ld, v += ld, g += ld, o += ld) {
        const float b = beta[(int64_t)t * ldb];
        for (int i = 0; i < S; i++) dec[i] = expf(g[i]);
        for (int jv = 0; jv < S; jv++) {
            float *row = M + (int64_t)jv * S;
            for (int i = 0; i < S; i++) row[i] *= dec[i];
        }
        for (int jv = 0; jv < S; jv++) {
            float s;
            dot(S, &s, M + (int64_t)jv * S, k);
            del[jv] = (v[jv] - s) * b;
        }
        for (int jv = 0; jv < S; jv++) {
            float *row = M + (int64_t)jv * S;
            const float d = del[jv];
            for (int i = 0; i < S; i++) row[i] = fmaf(k[i], d, row[i]);
        }
        for (int jv = 0; jv < S; jv++) {
            float s;
            dot(S, &s, M + (int64_t)jv * S, q);
            o[jv] = s * scale;
        }
    }
}
#endif
