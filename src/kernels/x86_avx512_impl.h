/* x86_avx512_impl.h — helpers the AVX-512 quantized-dot files share (x86_avx512.c,
 * x86_avx512_kq.c); compiled only into them, with their -mavx512* flags. */
#ifndef DF_X86_AVX512_IMPL_H
#define DF_X86_AVX512_IMPL_H
#include <immintrin.h>
#include <string.h>
#include <math.h>

#include "kernels/kernels_impl.h"

static inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

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

/* Nibbles of two 16-byte blocks as [lo0 | hi0 | lo1 | hi1] bytes (element order of Q8_0). */
static inline __m512i nibbles2(const uint8_t *q0, const uint8_t *q1) {
    const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                              _mm_loadu_si128((const __m128i *)q1), 1);
    const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
    /* w = [lo0 lo1 hi0 hi1] (128-bit lanes) -> [lo0 hi0 lo1 hi1] */
    const __m512i p = _mm512_shuffle_i64x2(w, w, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm512_and_si512(p, _mm512_set1_epi8(0x0F));
}

/* Codebook formats (IQ4_NL, MXFP4): nibble -> int8 by an in-lane byte shuffle. */
static inline __m512i lut16(const int8_t *kv) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kv));
}

/* 8 scales (low 8 bytes) and 8 mins (high 8 bytes), 6-bit, of a Q4_K/Q5_K block. Built from
 * registers: reloading freshly stored bytes as a vector would stall store forwarding. */
static inline __m128i k4_scales(const uint8_t *q) {
    uint32_t u[3];
    memcpy(u, q, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    uint32_t s0 = u[0] & k1, m0 = u[1] & k1;
    uint32_t s1 = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    uint32_t m1 = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    return _mm_set_epi32((int)m1, (int)m0, (int)s1, (int)s0);
}

/* Q2_K, Q3_K, Q5_K, Q6_K, IQ4_XS and IQ2_XXS (x86_avx512_kq.c). */
void df_kernels_fill_avx512_kq(df_kernel_table *t, const df_cpu_caps *caps);
#endif
