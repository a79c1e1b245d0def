/* ops.c — see ops.h. Numerics mirror ggml's CPU ops (ops.cpp, vec.h) so that results agree
 * with llama.cpp to rounding; comments note where the order of operations matters. */
#include "forward/ops.h"
#include "kernels/kernels.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void df_rope_init(df_rope *r) {
    r->theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    float start = floorf(corr_dim(r->n_rot, r->n_ctx_orig, r->beta_fast, r->freq_base));
    float end = ceilf(corr_dim(r->n_rot, r->n_ctx_orig, r->beta_slow, r->freq_base));
    r->corr_dims[0] = start > 0 ? start : 0;
    r->corr_dims[1] = end < (float)(r->n_rot - 1) ? end : (float)(r->n_rot - 1);
}

static float yarn_ramp(float low, float high, int i0) {
    float y = (float)(i0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1 - fminf(1, fmaxf(0, y));
}

void df_rope_cache(const df_rope *r, float pos, float *cache) {
    /* theta advances by repeated F32 multiplication, exactly like ggml_rope_cache_init */
    float theta = pos;
    for (int i0 = 0; i0 < r->n_rot; i0 += 2) {
        float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
        float theta_extrap = theta / ff;
        float theta_interp = r->freq_scale * theta_extrap;
        float th = theta_interp;
        float mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            float mix = yarn_ramp(r->corr_dims[0], r->corr_dims[1], i0) * r->ext_factor;
            /* contracted as gcc does in ggml's rope_yarn (-ffp-contract=fast) */
            th = fmaf(theta_interp, 1 - mix, theta_extrap * mix);
            mscale *= fmaf(0.1f, logf(1.0f / r->freq_scale), 1.0f);
        }
        cache[i0] = cosf(th) * mscale;
        cache[i0 + 1] = sinf(th) * mscale;
        theta *= r->theta_scale;
    }
}

void df_rope_apply(const df_rope *r, const float *cache, float *x, int n_head, int head_stride) {
    int n = r->n_rot;
    for (int h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * head_stride;
        for (int i0 = 0; i0 < n; i0 += 2) {
            float c = cache[i0], s = cache[i0 + 1];
            int a, b;
            if (r->mode == DF_ROPE_NEOX) { a = i0 / 2; b = a + n / 2; }
            else { a = i0; b = i0 + 1; }
            float x0 = v[a], x1 = v[b];
            /* ggml's rotation as gcc contracts it (ops.cpp, -ffp-contract=fast) */
            v[a] = fmaf(x0, c, -(x1 * s));
            v[b] = fmaf(x0, s, x1 * c);
        }
    }
}

void df_rmsnorm(const float *x, const float *w, float *y, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    else for (int i = 0; i < n; i++) y[i] = x[i] * scale;
}

void df_softmax(const float *x, float *y, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float e = expf(x[i] - mx);
        sum += (double)e;
        y[i] = e;
    }
    const float is = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) y[i] *= is;
}

void df_swiglu(float *g, const float *u, int n) { df_swiglu_ggml(g, u, n); }

void df_silu_row(float *x, int n) {
    df_swiglu_ggml(x, NULL, n); /* ggml_vec_silu_f32 = its SwiGLU without the (exact) * u */
}

void df_swiglu_rows(float *g, const float *u, int64_t nrows, int64_t ncols) {
    for (int64_t r = 0; r < nrows; r++) df_swiglu_ggml(g + r * ncols, u + r * ncols, (int)ncols);
}

/* ---- ggml's vectorized exp / softmax / SwiGLU ------------------------------------------------
 * ggml's vec.cpp computes softmax and SwiGLU on whole SIMD vectors with its own exp
 * approximation, and only the n % width leftover elements with libm expf. Which width and which
 * approximation a -march=native ggml build uses follows the CPU; deltafin's kernel set stands for
 * the same choice: "avx512" (AVX-512F/DQ: 16 lanes), "avx2" (AVX2/FMA: 8 lanes), anything else
 * the scalar loop (libm expf everywhere, as ggml without SIMD).
 *
 * The exp approximation: x = n·ln2 + b with n = round(x·log2(e)) (rounded by adding 1.5·2^23,
 * so the float addition does the rounding), b = x − n·ln2 with ln2 split in a high and a low
 * part, each subtracted with an FMA; e^b ≈ 1 + P1·b + P2·b² + P3·b³ + P4·b⁴ + P5·b⁵ evaluated as
 * ((P5·b + P4)·b² + (P3·b + P2))·b² + (P1·b + 1), all FMAs, then scaled by 2^n. The AVX2 form
 * leaves the 1 out of the polynomial (last term P1·b, a plain multiply) and scales by
 * fma(p, 2^n, 2^n), with 2^n built from the exponent bits of n, and a two-factor scale when
 * |n| > 126; |n| > 192 gives 0 (n <= 0) or +inf. The AVX-512 form scales with vscalefps and
 * only special-cases |n| > 192 the same way. The two forms round differently, hence two paths. */
#define GX_SHIFT 0x1.8p23f
#define GX_LOG2E 0x1.715476p+0f
#define GX_LN2_HI 0x1.62e4p-1f
#define GX_LN2_LO 0x1.7f7d1cp-20f
#define GX_P1 0x1.ffffecp-1f
#define GX_P2 0x1.fffdb6p-2f
#define GX_P3 0x1.555e66p-3f
#define GX_P4 0x1.573e2ep-5f
#define GX_P5 0x1.0e4020p-7f

#if defined(__x86_64__)
enum { GX_SCALAR = 1, GX_AVX2 = 8, GX_AVX512 = 16 };

/* the selected kernel table's vector width (only the x86 forms of the ops below use it) */
static int ggml_vec_kind(void) {
    const char *isa = df_kernels()->name;
    if (!strcmp(isa, "avx512")) return GX_AVX512;
    if (!strcmp(isa, "avx2")) return GX_AVX2;
    return GX_SCALAR;
}
#endif

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512dq,fma")))
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

__attribute__((target("avx2,fma")))
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

__attribute__((target("avx512f,avx512dq,fma")))
static void swiglu_avx512(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 e = gx_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(g + i, u ? _mm512_mul_ps(s, _mm512_loadu_ps(u + i)) : s);
    }
    for (; i < n; i++) g[i] = u ? df_silu(g[i]) * u[i] : df_silu(g[i]);
}

__attribute__((target("avx2,fma")))
static void swiglu_avx2(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = gx_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(g + i, u ? _mm256_mul_ps(s, _mm256_loadu_ps(u + i)) : s);
    }
    for (; i < n; i++) g[i] = u ? df_silu(g[i]) * u[i] : df_silu(g[i]);
}

/* exp(x[i] - mx) into y, returning the sum: each vector's lanes summed in float (gcc's
 * _mm512_reduce_add_ps halving tree / ggml's 8-lane hadd order), the per-vector sums in double */
__attribute__((target("avx512f,avx512dq,fma")))
static double softmax_exp_avx512(const float *x, float *y, int n, float mx, int *done) {
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

__attribute__((target("avx2,fma")))
static double softmax_exp_avx2(const float *x, float *y, int n, float mx, int *done) {
    double sum = 0.0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = gx_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(mx)));
        _mm256_storeu_ps(y + i, e);
        /* (l0+l4 + l2+l6) + (l1+l5 + l3+l7) */
        __m128 h = _mm_add_ps(_mm256_extractf128_ps(e, 1), _mm256_castps256_ps128(e));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        sum += (double)_mm_cvtss_f32(h);
    }
    *done = i;
    return sum;
}

#endif

void df_swiglu_ggml(float *g, const float *u, int n) {
#if defined(__x86_64__)
    switch (ggml_vec_kind()) {
    case GX_AVX512: swiglu_avx512(g, u, n); return;
    case GX_AVX2: swiglu_avx2(g, u, n); return;
    default: break;
    }
#endif
    for (int i = 0; i < n; i++) g[i] = u ? df_silu(g[i]) * u[i] : df_silu(g[i]);
}

void df_softmax_ggml(const float *x, float *y, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    int i = 0;
#if defined(__x86_64__)
    switch (ggml_vec_kind()) {
    case GX_AVX512: sum = softmax_exp_avx512(x, y, n, mx, &i); break;
    case GX_AVX2: sum = softmax_exp_avx2(x, y, n, mx, &i); break;
    default: break;
    }
#endif
    for (; i < n; i++) {
        const float e = expf(x[i] - mx);
        sum += (double)e;
        y[i] = e;
    }
    const float is = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) y[j] *= is;
}

void df_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}
