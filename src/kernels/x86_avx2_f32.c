/* x86_avx2_f32.c — the float slots of the AVX2 table (AVX2 + FMA + F16C), in the orders of a
 * -march=native ggml build on an AVX2 CPU: softmax / SwiGLU / silu with ggml's 8-lane exp,
 * the F16 / BF16 weight-row dots (ggml_vec_dot_f16 / _bf16; the F16 one is also flash
 * attention's K·Q) and F32-path multiply-adds, llamafile's tinyBLAS GEMMs for F32, F16 and
 * BF16 weights, and the SSM_CONV tap order. Filled by df_kernels_fill_avx2 (the
 * AVX-512 table inherits what it does not replace). Only called after dispatch.c checked the
 * CPU flags. Threading: pure functions. */
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels_impl.h"

/* the 8 lanes summed as llamafile's / ggml's AVX hsum: the 128-bit halves added, then
 * (l0+l2) + (l1+l3) */
static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* ------------------------------------------------------------------ F32 row ops (ggml's AVX2 forms) */

static inline __m256 gx_exp8(__m256 x) {
    const __m256 shift = _mm256_set1_ps(GX_SHIFT);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(GX_LOG2E), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(GX_LN2_HI), x);
    b = _mm256_fnmadd_ps(n, _mm256_set1_ps(GX_LN2_LO), b);
    const __m256 b2 = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(GX_P5), b, _mm256_set1_ps(GX_P4)), b2,
                                      _mm256_fmadd_ps(_mm256_set1_ps(GX_P3), b, _mm256_set1_ps(GX_P2)));
    const __m256 p = _mm256_fmadd_ps(hi, b2, _mm256_mul_ps(_mm256_set1_ps(GX_P1), b));
    /* the low bits of z hold n: shifted into the exponent field and added to 1.0f's bits, 2^n */
    const __m256i nexp = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 two_n = _mm256_castsi256_ps(_mm256_add_epi32(nexp, _mm256_set1_epi32(0x3f800000)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 fast = _mm256_fmadd_ps(p, two_n, two_n);
    if (!_mm256_movemask_ps(big)) return fast;
    /* |n| > 126: 2^n = s1 · s2 with s1 = 2^127 (n > 0) or 2^-125 (n <= 0) */
    const __m256i adj = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                         _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(adj, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(nexp, adj));
    const __m256 huge = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 twofac = _mm256_mul_ps(_mm256_fmadd_ps(s2, p, s2), s1);
    const __m256 r = _mm256_blendv_ps(fast, twofac, big);
    return _mm256_blendv_ps(r, _mm256_mul_ps(s1, s1), huge);
}

static inline __attribute__((always_inline)) void swiglu8(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = gx_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(g + i, u ? _mm256_mul_ps(s, _mm256_loadu_ps(u + i)) : s);
    }
    for (; i < n; i++) g[i] = u ? df_silu(g[i]) * u[i] : df_silu(g[i]);
}

/* exp(x[i] - mx) into y, returning the sum: each vector's lanes summed in float (ggml's
 * 8-lane hadd order), the per-vector sums in double */
static inline double softmax_exp8(const float *x, float *y, int n, float mx, int *done) {
    double sum = 0.0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = gx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(mx)));
        _mm256_storeu_ps(y + i, e);
        sum += (double)hsum8(e); /* (l0+l4 + l2+l6) + (l1+l5 + l3+l7) */
    }
    *done = i;
    return sum;
}

static void softmax_avx2(const float *x, float *y, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    int i = 0;
    double sum = softmax_exp8(x, y, n, mx, &i);
    for (; i < n; i++) {
        const float e = expf(x[i] - mx);
        sum += (double)e;
        y[i] = e;
    }
    const float is = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) y[j] *= is;
}
static void swiglu_avx2(float *g, const float *u, int n) { swiglu8(g, u, n); }
static void silu_avx2(float *x, int n) { swiglu8(x, NULL, n); }

/* ------------------------------------------------------------------ attention */

/* ------------------------------------------------------------------ F16 / BF16 rows */

static inline __m256 ld8_f16(const df_f16 *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }
static inline __m256 ld8_bf16(const df_bf16 *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
}

/* ggml_vec_dot_f16 under AVX2/F16C (GGML_F16_STEP 32, 4 accumulators of GGML_F16_EPR 8): FMA
 * over n & ~31, reduced s0+s2, s1+s3, then their sum; the 8 lanes as (l0+l4 + l1+l5) +
 * (l2+l6 + l3+l7) (the 128-bit halves added, then two hadds); the leftovers n % 32 added in
 * double. Weight rows (vec_dot) and flash attention's K·Q (attn_dot_f16) alike. */
static inline float dot_f16_ggml(const df_f16 *x, const df_f16 *y, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32) {
        s0 = _mm256_fmadd_ps(ld8_f16(x + i), ld8_f16(y + i), s0);
        s1 = _mm256_fmadd_ps(ld8_f16(x + i + 8), ld8_f16(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(ld8_f16(x + i + 16), ld8_f16(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(ld8_f16(x + i + 24), ld8_f16(y + i + 24), s3);
    }
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    double sum = (double)_mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int64_t i = np; i < n; i++) sum += (double)(df_f16_to_f32(x[i]) * df_f16_to_f32(y[i]));
    return (float)sum;
}
static float attn_dot_f16(const df_f16 *x, const df_f16 *y, int n) { return dot_f16_ggml(x, y, n); }
static void dot_f16(int64_t n, float *s, const void *w, const void *xq) { *s = dot_f16_ggml(w, xq, n); }

/* ggml_vec_dot_bf16's AVX2 branch: 4 accumulators over n & ~31 of mul + add, which gcc
 * contracts to FMA in ggml's build; reduced (c1+c3) + (c2+c4), the 128-bit halves added, then
 * (l0+l2) + (l1+l3) (movehl, movehdup); the leftovers added in double. */
static void dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
    const df_bf16 *x = w, *y = xq;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        c0 = _mm256_fmadd_ps(ld8_bf16(x + i), ld8_bf16(y + i), c0);
        c1 = _mm256_fmadd_ps(ld8_bf16(x + i + 8), ld8_bf16(y + i + 8), c1);
        c2 = _mm256_fmadd_ps(ld8_bf16(x + i + 16), ld8_bf16(y + i + 16), c2);
        c3 = _mm256_fmadd_ps(ld8_bf16(x + i + 24), ld8_bf16(y + i + 24), c3);
    }
    double sum = (double)hsum8(_mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3)));
    for (; i < n; i++) sum += (double)(df_bf16_to_f32(x[i]) * df_bf16_to_f32(y[i]));
    *s = (float)sum;
}

/* the F32-accumulator path's dot and acc = fma(v, vs, acc) with F16C / FMA instructions: the
 * same operations lane for lane as ref.c's (bit-identical), without a libm fmaf call and an F16
 * table lookup per element. */
static float attn_dot_f16_f32(const df_f16 *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(a + i))),
                                               _mm256_loadu_ps(b + i)));
    float v[8];
    _mm256_storeu_ps(v, acc);
    for (; i < n; i++) v[0] += df_f16_to_f32(a[i]) * b[i];
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}
static void attn_mad_f32(float *acc, const df_f16 *v, float vs, int n) {
    const __m256 b = _mm256_set1_ps(vs);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(v + i))), b,
                                                  _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] = __builtin_fmaf(df_f16_to_f32(v[i]), vs, acc[i]);
}

/* ggml_vec_mad_f32 of an FMA build: acc = fma(v, vs, acc) lane by lane (the same bits at any
 * vector width) */
static void attn_mad_f32f(float *acc, const float *v, float vs, int n) {
    const __m256 b = _mm256_set1_ps(vs);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_loadu_ps(v + i), b, _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] = __builtin_fmaf(v[i], vs, acc[i]);
}

/* ------------------------------------------------------------------ tinyBLAS GEMMs */

enum { GT_F32, GT_F16, GT_BF16 }; /* the element type of W and X */

static inline __attribute__((always_inline)) __m256 ld8_as(const void *p, int64_t i, const int et) {
    if (et == GT_F16) return ld8_f16((const df_f16 *)p + i);
    if (et == GT_BF16) return ld8_bf16((const df_bf16 *)p + i);
    return _mm256_loadu_ps((const float *)p + i);
}

/* llamafile's tinyBLAS under AVX2 (tinyBLAS<8, __m256, ...>: F32, and F16 / BF16 weights
 * against activations converted to the same type, both widened to F32 on load): every output
 * is one 8-lane accumulator walked over n_in with FMA, then hsum8. Tiles of 4 weight rows x 2
 * tokens only for speed: each output has its own accumulator, so the tiling does not change the
 * result. Rows [r0, r1), r1 - r0 a multiple of 4; ldx in elements. */
#define UNROLL _Pragma("GCC unroll 8")
static inline __attribute__((always_inline)) void gemm8_body(const void *W, int64_t n_in, int64_t r0, int64_t r1,
                                                             const void *X, int64_t ldx, int nt, float *Y,
                                                             int64_t ldy, const int et) {
    for (int64_t r = r0; r < r1; r += 4)
        for (int t0 = 0; t0 < nt; t0 += 2) {
            int64_t xo[2];
            UNROLL for (int j = 0; j < 2; j++) xo[j] = (int64_t)(t0 + j < nt ? t0 + j : nt - 1) * ldx;
            __m256 acc[2][4];
            UNROLL for (int j = 0; j < 2; j++)
                UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm256_setzero_ps();
            for (int64_t l = 0; l < n_in; l += 8) {
                __m256 w[4];
                UNROLL for (int i = 0; i < 4; i++) w[i] = ld8_as(W, (r + i) * n_in + l, et);
                UNROLL for (int j = 0; j < 2; j++) {
                    const __m256 x = ld8_as(X, xo[j] + l, et);
                    UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm256_fmadd_ps(w[i], x, acc[j][i]);
                }
            }
            for (int j = 0; j < 2 && t0 + j < nt; j++)
                UNROLL for (int i = 0; i < 4; i++) Y[(int64_t)(t0 + j) * ldy + r + i] = hsum8(acc[j][i]);
        }
}
#undef UNROLL

static void gemm_f32_avx2(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx,
                          int nt, float *Y, int64_t ldy) {
    gemm8_body(W, n_in, r0, r1, X, ldx, nt, Y, ldy, GT_F32);
}
static void gemm_f16_avx2(const void *W, int64_t n_in, int64_t r0, int64_t r1, const void *X, int64_t ldx, int nt,
                          float *Y, int64_t ldy) {
    gemm8_body(W, n_in, r0, r1, X, ldx, nt, Y, ldy, GT_F16);
}
static void gemm_bf16_avx2(const void *W, int64_t n_in, int64_t r0, int64_t r1, const void *X, int64_t ldx, int nt,
                           float *Y, int64_t ldy) {
    gemm8_body(W, n_in, r0, r1, X, ldx, nt, Y, ldy, GT_BF16);
}

void df_kernels_fill_avx2_f32(df_kernel_table *t) {
    t->softmax = softmax_avx2;
    t->swiglu = swiglu_avx2;
    t->silu = silu_avx2;
    t->attn_dot_f16 = attn_dot_f16;
    t->attn_fma_sum = true; /* gcc contracts ggml's S = S*ms + vs in an FMA build */
    t->attn_dot_f16_f32 = attn_dot_f16_f32;
    t->attn_mad_f32 = attn_mad_f32;
    t->attn_mad_f32f = attn_mad_f32f;
    t->ssm_conv_vec = 4; /* llama.cpp's AVX2 build: vmulps + vaddss, the C % 4 last taps fused */
    t->gemm_f32 = gemm_f32_avx2;
    t->gemm_f16 = gemm_f16_avx2;
    t->gemm_bf16 = gemm_bf16_avx2;
    t->vec_dot[DF_TYPE_F16] = dot_f16;
    t->vec_dot[DF_TYPE_BF16] = dot_bf16;
    t->f32_epr = 8;
}
