/* x86_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) kernels. Compiled with -mavx512*; only called
 * after dispatch.c has checked the CPU flags.
 * Integer formats use vpdpbusd (u8 x s8): the weight's |q| goes in the unsigned operand and its
 * sign is moved onto the activation (activations never hold -128, so negation is exact).
 * Per-block integer sums are converted to float and scaled per lane, as llama.cpp's SIMD code
 * does — same formulas as ref.c, different float summation order.
 * Threading: pure functions. */
#include <immintrin.h>

#include "kernels_impl.h"

static inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

/* ------------------------------------------------------------------ float types */

static void dot_f32(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), acc3);
    }
    for (; i + 16 <= n; i += 16)
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
    }
    *s = hsum512(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

static inline __m512 ld_f16(const df_f16 *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline __m512 ld_f16_mask(const df_f16 *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

static void dot_f16(int64_t n, float *s, const void *w, const void *xq) {
    const df_f16 *a = w, *b = xq;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(ld_f16(a + i), ld_f16(b + i), acc0);
        acc1 = _mm512_fmadd_ps(ld_f16(a + i + 16), ld_f16(b + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(ld_f16(a + i + 32), ld_f16(b + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(ld_f16(a + i + 48), ld_f16(b + i + 48), acc3);
    }
    for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(ld_f16(a + i), ld_f16(b + i), acc0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(ld_f16_mask(a + i, m), ld_f16_mask(b + i, m), acc1);
    }
    *s = hsum512(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

static inline __m512 bf16_to_ps(__m256i v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}
static inline __m512 ld_bf16(const df_bf16 *p) {
    return bf16_to_ps(_mm256_loadu_si256((const __m256i *)p));
}

static void dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
    const df_bf16 *a = w, *b = xq;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(ld_bf16(a + i), ld_bf16(b + i), acc0);
        acc1 = _mm512_fmadd_ps(ld_bf16(a + i + 16), ld_bf16(b + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(ld_bf16(a + i + 32), ld_bf16(b + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(ld_bf16(a + i + 48), ld_bf16(b + i + 48), acc3);
    }
    for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(ld_bf16(a + i), ld_bf16(b + i), acc0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(bf16_to_ps(_mm256_maskz_loadu_epi16(m, a + i)),
                               bf16_to_ps(_mm256_maskz_loadu_epi16(m, b + i)), acc1);
    }
    *s = hsum512(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

static void from_f16(const float *x, void *dst, int64_t n) {
    df_f16 *d = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = df_f32_to_f16(x[i]);
}

/* ------------------------------------------------------------------ integer helpers */

/* Σ over 4-byte groups of x·y (both signed int8, y != -128) into 16 int32 lanes. */
static inline __m512i dot_s8(__m512i x, __m512i y) {
    const __mmask64 neg = _mm512_movepi8_mask(x);
    const __m512i ax = _mm512_abs_epi8(x);
    const __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy);
}

static inline __m512i ld2x256(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* 8 lanes of f0 then 8 lanes of f1. */
static inline __m512 scale2(float f0, float f1) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(f0)), _mm256_set1_ps(f1), 1);
}

/* ------------------------------------------------------------------ Q8_0 */

static void dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q8_0 *x = w, *y = xq;
    const int64_t nb = n / 32;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 4 <= nb; ib += 4) {
        __m512i p0 = dot_s8(ld2x256(x[ib].qs, x[ib + 1].qs), ld2x256(y[ib].qs, y[ib + 1].qs));
        __m512i p1 = dot_s8(ld2x256(x[ib + 2].qs, x[ib + 3].qs), ld2x256(y[ib + 2].qs, y[ib + 3].qs));
        __m512 d0 = scale2(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d),
                           df_f16_to_f32(x[ib + 1].d) * df_f16_to_f32(y[ib + 1].d));
        __m512 d1 = scale2(df_f16_to_f32(x[ib + 2].d) * df_f16_to_f32(y[ib + 2].d),
                           df_f16_to_f32(x[ib + 3].d) * df_f16_to_f32(y[ib + 3].d));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), d0, acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), d1, acc1);
    }
    float sumf = hsum512(_mm512_add_ps(acc0, acc1));
    for (; ib < nb; ib++) {
        __m256i ax = _mm256_loadu_si256((const __m256i *)x[ib].qs);
        __m256i ay = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(ax),
                                        _mm256_sign_epi8(ay, ax));
        __m128i q = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
        q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
        q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
        sumf += (float)_mm_cvtsi128_si32(q) * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}

/* Q8_0 activation quantizer with the reference semantics (id = 1/d, round half away from
 * zero), so every table produces the same activation bytes. */
static void from_q8_0(const float *x, void *dst, int64_t n) {
    df_block_q8_0 *y = dst;
    const __m512 sgn = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        __m512 a0 = _mm512_andnot_ps(sgn, v0), a1 = _mm512_andnot_ps(sgn, v1);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        /* NaN/Inf blocks: the reference defines the (meaningless) bytes; stay identical. */
        if (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q) ||
            !(amax <= 3.4028235e38f)) {
            df_quantize_row_q8_0_ref(x, &y[i], 32);
            continue;
        }
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        const __m512 vid = _mm512_set1_ps(id);
        __m512 s0 = _mm512_mul_ps(v0, vid), s1 = _mm512_mul_ps(v1, vid);
        /* roundf: trunc(|s|) + (frac >= 0.5), with the sign put back */
        __m512 b0 = _mm512_andnot_ps(sgn, s0), b1 = _mm512_andnot_ps(sgn, s1);
        __m512 t0 = _mm512_roundscale_ps(b0, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m512 t1 = _mm512_roundscale_ps(b1, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
        t0 = _mm512_mask_add_ps(t0, _mm512_cmp_ps_mask(_mm512_sub_ps(b0, t0), half, _CMP_GE_OQ), t0, one);
        t1 = _mm512_mask_add_ps(t1, _mm512_cmp_ps_mask(_mm512_sub_ps(b1, t1), half, _CMP_GE_OQ), t1, one);
        t0 = _mm512_or_ps(t0, _mm512_and_ps(s0, sgn));
        t1 = _mm512_or_ps(t1, _mm512_and_ps(s1, sgn));
        __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(t0));
        __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(t1));
        _mm_storeu_si128((__m128i *)y[i].qs, q0);
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), q1);
    }
}

void df_kernels_fill_avx512(df_kernel_table *t) {
    t->name = "avx512";
    t->vec_dot[DF_TYPE_F32] = dot_f32;
    t->vec_dot[DF_TYPE_F16] = dot_f16;
    t->vec_dot[DF_TYPE_BF16] = dot_bf16;
    t->vec_dot[DF_TYPE_Q8_0] = dot_q8_0_q8_0;
    t->from_float[DF_TYPE_F16] = from_f16;
    t->from_float[DF_TYPE_Q8_0] = from_q8_0;
}
