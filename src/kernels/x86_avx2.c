/* x86_avx2.c — AVX2 + FMA + F16C kernels (Haswell/Zen and later). Only called after
 * dispatch.c checked the CPU flags.
 * Integer formats use maddubs (u8 x s8 -> s16 pairs; |q| <= 128 and |y| <= 127 so no
 * saturation) + madd to int32, scaled per block in float as llama.cpp's AVX2 code does.
 * Threading: pure functions. */
#include <immintrin.h>

#include "kernels_impl.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ------------------------------------------------------------------ float types */

static void dot_f32(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    double sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

static inline __m256 ld_f16(const df_f16 *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static void dot_f16(int64_t n, float *s, const void *w, const void *xq) {
    const df_f16 *a = w, *b = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(ld_f16(a + i), ld_f16(b + i), acc0);
        acc1 = _mm256_fmadd_ps(ld_f16(a + i + 8), ld_f16(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(ld_f16(a + i + 16), ld_f16(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(ld_f16(a + i + 24), ld_f16(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(ld_f16(a + i), ld_f16(b + i), acc0);
    double sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += (double)(df_f16_to_f32(a[i]) * df_f16_to_f32(b[i]));
    *s = (float)sum;
}

static inline __m256 ld_bf16(const df_bf16 *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static void dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
    const df_bf16 *a = w, *b = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(ld_bf16(a + i), ld_bf16(b + i), acc0);
        acc1 = _mm256_fmadd_ps(ld_bf16(a + i + 8), ld_bf16(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(ld_bf16(a + i + 16), ld_bf16(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(ld_bf16(a + i + 24), ld_bf16(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(ld_bf16(a + i), ld_bf16(b + i), acc0);
    double sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += (double)(df_bf16_to_f32(a[i]) * df_bf16_to_f32(b[i]));
    *s = (float)sum;
}

static void from_f16(const float *x, void *dst, int64_t n) {
    df_f16 *d = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = df_f32_to_f16(x[i]);
}

/* ------------------------------------------------------------------ integer helpers */

/* 8 int32 lanes of Σ x·y over 4-byte groups (x, y signed int8; y != -128). */
static inline __m256i dot_s8(__m256i x, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* ------------------------------------------------------------------ Q8_0 */

static void dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q8_0 *x = w, *y = xq;
    const int64_t nb = n / 32;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        __m256i p0 = dot_s8(_mm256_loadu_si256((const __m256i *)x[ib].qs),
                            _mm256_loadu_si256((const __m256i *)y[ib].qs));
        __m256i p1 = dot_s8(_mm256_loadu_si256((const __m256i *)x[ib + 1].qs),
                            _mm256_loadu_si256((const __m256i *)y[ib + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0),
                               _mm256_set1_ps(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1),
                               _mm256_set1_ps(df_f16_to_f32(x[ib + 1].d) * df_f16_to_f32(y[ib + 1].d)),
                               acc1);
    }
    for (; ib < nb; ib++) {
        __m256i p0 = dot_s8(_mm256_loadu_si256((const __m256i *)x[ib].qs),
                            _mm256_loadu_si256((const __m256i *)y[ib].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0),
                               _mm256_set1_ps(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)), acc0);
    }
    *s = hsum256(_mm256_add_ps(acc0, acc1));
}

void df_kernels_fill_avx2(df_kernel_table *t) {
    t->name = "avx2";
    t->vec_dot[DF_TYPE_F32] = dot_f32;
    t->vec_dot[DF_TYPE_F16] = dot_f16;
    t->vec_dot[DF_TYPE_BF16] = dot_bf16;
    t->vec_dot[DF_TYPE_Q8_0] = dot_q8_0_q8_0;
    t->from_float[DF_TYPE_F16] = from_f16;
}
