/* x86_avx512_f32.c — the float slots of the AVX-512 table, in the orders of a -march=native ggml
 * build on an AVX-512F/DQ CPU without AVX512-FP16: softmax / SwiGLU / silu with ggml's 16-lane
 * exp (vscalefps), flash attention's F16 dot (ggml_vec_dot_f16, 4 x 16 lanes) and F16
 * multiply-add, the KDA delta rule (ggml_vec_dot_f32's 16 lanes, the reference table's bits),
 * and llamafile's tinyBLAS F32 GEMM on 16 lanes. The F32-path attention loops and the
 * softmax-sum contraction are the AVX2 table's (x86_avx2_f32.c).
 * Only called after dispatch.c checked the CPU flags. Threading: pure functions. */
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels_impl.h"

/* ------------------------------------------------------------------ F32 row ops (ggml's AVX-512 forms) */

static inline __m512 gx_exp16(__m512 x) {
    const __m512 shift = _mm512_set1_ps(GX_SHIFT);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(GX_LOG2E), shift), shift);
    __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(GX_LN2_HI), x);
    b = _mm512_fnmadd_ps(n, _mm512_set1_ps(GX_LN2_LO), b);
    const __m512 b2 = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(GX_P5), b, _mm512_set1_ps(GX_P4)), b2,
                                      _mm512_fmadd_ps(_mm512_set1_ps(GX_P3), b, _mm512_set1_ps(GX_P2)));
    const __m512 p = _mm512_fmadd_ps(hi, b2, _mm512_fmadd_ps(_mm512_set1_ps(GX_P1), b, _mm512_set1_ps(1.0f)));
    const __m512 r = _mm512_scalef_ps(p, n);
    const __mmask16 huge = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (!huge) return r;
    /* out of range: +inf where n > 0, 0 where n <= 0 */
    const __mmask16 pos = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_NLE_UQ);
    const __m512 sat = _mm512_maskz_mov_ps(pos, _mm512_set1_ps(INFINITY));
    return _mm512_mask_mov_ps(r, huge, sat);
}

static inline __attribute__((always_inline)) void swiglu16(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 e = gx_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(g + i, u ? _mm512_mul_ps(s, _mm512_loadu_ps(u + i)) : s);
    }
    for (; i < n; i++) g[i] = u ? df_silu(g[i]) * u[i] : df_silu(g[i]);
}

/* exp(x[i] - mx) into y, returning the sum: each vector's lanes summed in float (gcc's
 * _mm512_reduce_add_ps halving tree), the per-vector sums in double */
static inline double softmax_exp16(const float *x, float *y, int n, float mx, int *done) {
    double sum = 0.0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = gx_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(mx)));
        _mm512_storeu_ps(y + i, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    *done = i;
    return sum;
}

static void softmax_avx512(const float *x, float *y, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    int i = 0;
    double sum = softmax_exp16(x, y, n, mx, &i);
    for (; i < n; i++) {
        const float e = expf(x[i] - mx);
        sum += (double)e;
        y[i] = e;
    }
    const float is = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) y[j] *= is;
}
static void swiglu_avx512(float *g, const float *u, int n) { swiglu16(g, u, n); }
static void silu_avx512(float *x, int n) { swiglu16(x, NULL, n); }

/* ------------------------------------------------------------------ attention */

/* ggml_vec_dot_f16 under AVX-512F without AVX512-FP16: F16 -> F32 lanes, 4 x 16 accumulators,
 * s0+s2, s1+s3, then their sum, reduced by _mm512_reduce_add_ps (gcc's halving tree); the last
 * n % 64 products are rounded to float and added one by one in double. */
static float attn_dot_f16(const df_f16 *x, const df_f16 *y, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int np = n & ~63;
#define DF_LD16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
    for (int i = 0; i < np; i += 64) {
        s0 = _mm512_fmadd_ps(DF_LD16(x + i), DF_LD16(y + i), s0);
        s1 = _mm512_fmadd_ps(DF_LD16(x + i + 16), DF_LD16(y + i + 16), s1);
        s2 = _mm512_fmadd_ps(DF_LD16(x + i + 32), DF_LD16(y + i + 32), s2);
        s3 = _mm512_fmadd_ps(DF_LD16(x + i + 48), DF_LD16(y + i + 48), s3);
    }
#undef DF_LD16
    s0 = _mm512_add_ps(s0, s2);
    s1 = _mm512_add_ps(s1, s3);
    s0 = _mm512_add_ps(s0, s1);
    double sum = (double)_mm512_reduce_add_ps(s0);
    for (int i = np; i < n; i++) sum += (double)(df_f16_to_f32(x[i]) * df_f16_to_f32(y[i]));
    return (float)sum;
}

/* acc = f16(fma(v, vs, acc)) element-wise: the same results as ref.c's loop, just faster */
static void attn_mad_f16(df_f16 *acc, const df_f16 *v, float vs, int n) {
    const __m512 b = _mm512_set1_ps(vs);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(acc + i)));
        __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(v + i)));
        _mm256_storeu_si256((__m256i *)(void *)(acc + i),
                            _mm512_cvtps_ph(_mm512_fmadd_ps(x, b, a), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) acc[i] = df_f32_to_f16(fmaf(df_f16_to_f32(v[i]), vs, df_f16_to_f32(acc[i])));
}

/* ------------------------------------------------------------------ F32 GEMM */

/* llamafile's tinyBLAS F32 GEMM under AVX-512: every output is one 16-lane accumulator walked
 * over n_in with FMA, then reduced by _mm512_reduce_add_ps. Tiles of 4 weight rows x 6 tokens
 * only for speed: each output has its own accumulator, so the tiling does not change the
 * result. Rows [r0, r1), r1 - r0 a multiple of 4. */
#define UNROLL _Pragma("GCC unroll 8")
static void gemm_f32_avx512(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx,
                            int nt, float *Y, int64_t ldy) {
    enum { RT = 6 };
    for (int64_t r = r0; r < r1; r += 4)
        for (int t0 = 0; t0 < nt; t0 += RT) {
            const float *xs[RT];
            UNROLL for (int j = 0; j < RT; j++) xs[j] = X + (int64_t)(t0 + j < nt ? t0 + j : nt - 1) * ldx;
            __m512 acc[RT][4];
            UNROLL for (int j = 0; j < RT; j++)
                UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm512_setzero_ps();
            for (int64_t l = 0; l < n_in; l += 16) {
                __m512 w[4];
                UNROLL for (int i = 0; i < 4; i++) w[i] = _mm512_loadu_ps(W + (r + i) * n_in + l);
                UNROLL for (int j = 0; j < RT; j++) {
                    const __m512 x = _mm512_loadu_ps(xs[j] + l);
                    UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm512_fmadd_ps(w[i], x, acc[j][i]);
                }
            }
            for (int j = 0; j < RT && t0 + j < nt; j++)
                UNROLL for (int i = 0; i < 4; i++) Y[(int64_t)(t0 + j) * ldy + r + i] = _mm512_reduce_add_ps(acc[j][i]);
        }
}

#undef UNROLL

/* ------------------------------------------------------------------ KDA (kernels_impl.h's body with FMA) */

static void kda_head_avx512(float *M, int S, int nt, const float *q, const float *k, const float *v, const float *g,
                            int64_t ld, const float *beta, int64_t ldb, float *o) {
    df_kda_head_body(M, S, nt, q, k, v, g, ld, beta, ldb, o, df_kda_dot_vd);
}

void df_kernels_fill_avx512_f32(df_kernel_table *t) {
    t->softmax = softmax_avx512;
    t->swiglu = swiglu_avx512;
    t->silu = silu_avx512;
    t->attn_dot_f16 = attn_dot_f16;
    t->attn_mad_f16 = attn_mad_f16;
    t->gemm_f32 = gemm_f32_avx512;
    t->kda_head = kda_head_avx512;
    t->ssm_conv_vec = 0;
    /* not the AVX2 table's 8-lane F16 / BF16 tinyBLAS (inherited from it): this table's F16 /
     * BF16 batches stay on its per-row dots until a 16-lane form is checked on an AVX-512 CPU */
    t->gemm_f16 = t->gemm_bf16 = NULL;
    t->f32_epr = 16;
}
