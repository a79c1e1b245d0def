/* x86_avx2.c — AVX2 + FMA + F16C kernels of quantized dots (Haswell/Zen and later; the float
 * slots: x86_avx2_f32.c), the F32 dot and KDA's delta rule on it. Only called after dispatch.c
 * checked the CPU flags.
 * Integer formats use maddubs (u8 x s8 -> s16 pairs; |q| <= 128 and |y| <= 127 so no
 * saturation) + madd to int32, scaled per block in float as llama.cpp's AVX2 code does.
 * Threading: pure functions. */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_impl.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ------------------------------------------------------------------ float types */

/* ggml_vec_dot_f32 of a -march=native AVX2 ggml build: 4 x 8-lane FMA accumulators over the
 * n & ~31 head, reduced (a0+a2) + (a1+a3), halves added, two hadds; the leftovers as gcc
 * vectorises ggml's `sumf += x[i]*y[i]`: blocks of 8 then of 4 whose products are rounded and
 * added one by one, the last n % 4 with scalar FMAs. */
static void dot_f32(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    const __m256 r = _mm256_add_ps(_mm256_add_ps(acc0, acc2), _mm256_add_ps(acc1, acc3));
    __m128 t = _mm_add_ps(_mm256_extractf128_ps(r, 1), _mm256_castps256_ps128(r));
    t = _mm_hadd_ps(t, t);
    float sum = _mm_cvtss_f32(_mm_hadd_ps(t, t));
    int64_t i = np;
    for (; n - i >= 8; i += 8) {
        float p[8];
        _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        for (int j = 0; j < 8; j++) sum += p[j];
    }
    if (n - i >= 4) {
        float p[4];
        _mm_storeu_ps(p, _mm_mul_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
        for (int j = 0; j < 4; j++) sum += p[j];
        i += 4;
    }
    for (; i < n; i++) sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a[i]), _mm_set_ss(b[i]), _mm_set_ss(sum)));
    *s = sum;
}

/* KDA's delta rule (kernels_impl.h's body) with dot_f32: llama.cpp's AVX2 build runs the fused
 * GATED_DELTA_NET's dots through this ggml_vec_dot_f32 */
static void kda_head_avx2(float *M, int S, int nt, const float *q, const float *k, const float *v, const float *g,
                          int64_t ld, const float *beta, int64_t ldb, float *o) {
    df_kda_head_body(M, S, nt, q, k, v, g, ld, beta, ldb, o, dot_f32);
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

/* ggml_vec_dot_q8_0_q8_0's AVX2 order (and tinyBLAS_Q0_AVX's): one
 * accumulator, block after block, then hsum_float_8 (x86_avx512.c has the same). */
static void dot_q8_0_q8_0_ggml(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q8_0 *x = w, *y = xq;
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        __m256i p = dot_s8(_mm256_loadu_si256((const __m256i *)x[ib].qs),
                           _mm256_loadu_si256((const __m256i *)y[ib].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                              _mm256_set1_ps(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)), acc);
    }
    *s = hsum256(acc);
}

/* ------------------------------------------------------------------ 4-bit 32-blocks x Q8_0 */

/* 32 nibbles of a 16-byte block in element order: [low nibbles | high nibbles]. */
static inline __m256i nibbles(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q);
    const __m256i w = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(w, _mm256_set1_epi8(0x0F));
}

static inline int32_t hsum_i32_8_int(__m256i p) {
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
    return _mm_cvtsi128_si32(q);
}

static inline float hsum_i32_8(__m256i p) { return (float)hsum_i32_8_int(p); }

static void dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_0 *x = w;
    const df_block_q8_0 *y = xq;
    const int64_t nb = n / 32;
    const __m256i eight = _mm256_set1_epi8(8);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        __m256i p0 = dot_s8(_mm256_sub_epi8(nibbles(x[ib].qs), eight),
                            _mm256_loadu_si256((const __m256i *)y[ib].qs));
        __m256i p1 = dot_s8(_mm256_sub_epi8(nibbles(x[ib + 1].qs), eight),
                            _mm256_loadu_si256((const __m256i *)y[ib + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0),
                               _mm256_set1_ps(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1),
                               _mm256_set1_ps(df_f16_to_f32(x[ib + 1].d) * df_f16_to_f32(y[ib + 1].d)), acc1);
    }
    float sumf = hsum256(_mm256_add_ps(acc0, acc1));
    for (; ib < nb; ib++) {
        __m256i p = dot_s8(_mm256_sub_epi8(nibbles(x[ib].qs), eight), _mm256_loadu_si256((const __m256i *)y[ib].qs));
        sumf += hsum_i32_8(p) * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}

static inline __m256i lut16(const int8_t *kv) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kv));
}

static void dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_nl *x = w;
    const df_block_q8_0 *y = xq;
    const int64_t nb = n / 32;
    const __m256i lut = lut16(df_kvalues_iq4nl);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        __m256i p = dot_s8(_mm256_shuffle_epi8(lut, nibbles(x[ib].qs)), _mm256_loadu_si256((const __m256i *)y[ib].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                              _mm256_set1_ps(df_f16_to_f32(y[ib].d) * df_f16_to_f32(x[ib].d)), acc);
    }
    *s = hsum256(acc);
}

/* E8M0 half scales 2^(e-128) as floats (filled by df_kernels_fill_avx2, before any use). */
static float k_e8m0_half[256];

/* MXFP4, two blocks per step as [lo0 | lo1] and [hi0 | hi1] nibble vectors against the
 * matching activation halves; the lo and hi int16 pair sums are added before one madd
 * (|sum| <= 4*12*127, no overflow). Scales of 4 blocks at a time, table-driven. */
static inline __m256i mxfp4_isum2(const df_block_mxfp4 *x, const df_block_q8_0 *y, __m256i lut, __m256i m4, __m256i ones) {
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)x[0].qs)),
                                              _mm_loadu_si128((const __m128i *)x[1].qs), 1);
    const __m256i ql = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
    const __m256i qh = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    const __m256i yl = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)y[0].qs)),
                                               _mm_loadu_si128((const __m128i *)y[1].qs), 1);
    const __m256i yh = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(y[0].qs + 16))),
                                               _mm_loadu_si128((const __m128i *)(y[1].qs + 16)), 1);
    const __m256i pl = _mm256_maddubs_epi16(_mm256_sign_epi8(ql, ql), _mm256_sign_epi8(yl, ql));
    const __m256i ph = _mm256_maddubs_epi16(_mm256_sign_epi8(qh, qh), _mm256_sign_epi8(yh, qh));
    return _mm256_madd_epi16(_mm256_add_epi16(pl, ph), ones);
}

static void dot_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_mxfp4 *x = w;
    const df_block_q8_0 *y = xq;
    const int64_t nb = n / 32;
    const __m256i lut = lut16(df_kvalues_mxfp4);
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i pi0 = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0), pi1 = _mm256_set_epi32(3, 3, 3, 3, 2, 2, 2, 2);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t ib = 0;
    for (; ib + 4 <= nb; ib += 4) {
        const __m256 s4 = _mm256_castps128_ps256(_mm_set_ps(
            df_f16_to_f32(y[ib + 3].d) * k_e8m0_half[x[ib + 3].e], df_f16_to_f32(y[ib + 2].d) * k_e8m0_half[x[ib + 2].e],
            df_f16_to_f32(y[ib + 1].d) * k_e8m0_half[x[ib + 1].e], df_f16_to_f32(y[ib].d) * k_e8m0_half[x[ib].e]));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mxfp4_isum2(&x[ib], &y[ib], lut, m4, ones)), _mm256_permutevar8x32_ps(s4, pi0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mxfp4_isum2(&x[ib + 2], &y[ib + 2], lut, m4, ones)), _mm256_permutevar8x32_ps(s4, pi1), acc1);
    }
    float sumf = hsum256(_mm256_add_ps(acc0, acc1));
    for (; ib < nb; ib++) {
        __m256i p = dot_s8(_mm256_shuffle_epi8(lut, nibbles(x[ib].qs)), _mm256_loadu_si256((const __m256i *)y[ib].qs));
        sumf += hsum_i32_8(p) * (df_f16_to_f32(y[ib].d) * k_e8m0_half[x[ib].e]);
    }
    *s = sumf;
}

/* MXFP4 weights with rows % 8 == 0 are repacked by ggml's CPU backend on AVX2 / AVX-512 CPUs
 * (mxfp4_8x8), and its gemv (every token of an expert matmul) and gemm (plain matmuls) sum each
 * output as one FMA chain over the blocks: acc = fma((float)isum_b, e8m0_half(e_b) * d_b, acc),
 * isum_b the block's exact integer dot. Here per row, the integer sums of 8 blocks at a time
 * gathered into one vector (one token, or 4 sharing the weight decode). */
static inline __m256 mxfp4_isum8(const __m256i p[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    /* a = [s0 s1 s2 s3 | s0' s1' s2' s3'] (lane halves), likewise b for blocks 4..7 */
    const __m256i lo = _mm256_permute2x128_si256(a, b, 0x20), hi = _mm256_permute2x128_si256(a, b, 0x31);
    return _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
}

static inline __attribute__((always_inline)) void mxfp4_dot_r8_nt(int64_t n, float *s, const void *w,
                                                                  const char *xq, size_t stride, const int NT) {
    const df_block_mxfp4 *x = w;
    const int64_t nb = n / 32;
    const __m256i lut = lut16(df_kvalues_mxfp4);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t ib = 0;
    for (; ib + 8 <= nb; ib += 8) {
        __m256i q[8], p[8];
        float e[8], f[8];
        for (int b = 0; b < 8; b++) {
            q[b] = _mm256_shuffle_epi8(lut, nibbles(x[ib + b].qs));
            e[b] = k_e8m0_half[x[ib + b].e];
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const df_block_q8_0 *y = (const df_block_q8_0 *)(xq + t * stride) + ib;
            for (int b = 0; b < 8; b++) p[b] = dot_s8(q[b], _mm256_loadu_si256((const __m256i *)y[b].qs));
            _mm256_storeu_ps(f, mxfp4_isum8(p));
            for (int b = 0; b < 8; b++) acc[t] = fmaf(f[b], e[b] * df_f16_to_f32(y[b].d), acc[t]);
        }
    }
    for (; ib < nb; ib++) {
        const __m256i q = _mm256_shuffle_epi8(lut, nibbles(x[ib].qs));
        const float e = k_e8m0_half[x[ib].e];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const df_block_q8_0 *y = (const df_block_q8_0 *)(xq + t * stride) + ib;
            const int32_t isum = hsum_i32_8_int(dot_s8(q, _mm256_loadu_si256((const __m256i *)y->qs)));
            acc[t] = fmaf((float)isum, e * df_f16_to_f32(y->d), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) s[t] = acc[t];
}

static void dot_mxfp4_q8_0_ggml8(int64_t n, float *s, const void *w, const void *xq) {
    mxfp4_dot_r8_nt(n, s, w, xq, 0, 1);
}
static void dot4_mxfp4_q8_0_ggml8(int64_t n, float *s, const void *w, const void *xq, size_t stride) {
    mxfp4_dot_r8_nt(n, s, w, xq, stride, 4);
}

/* ------------------------------------------------------------------ Q4_K x Q8_K */

static inline void k4_scales(const uint8_t *q, uint8_t sc[8], uint8_t m[8]) {
    uint32_t u[3];
    memcpy(u, q, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    uint32_t s0 = u[0] & k1, m0 = u[1] & k1;
    uint32_t s1 = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    uint32_t m1 = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    memcpy(sc, &s0, 4);
    memcpy(sc + 4, &s1, 4);
    memcpy(m, &m0, 4);
    memcpy(m + 4, &m1, 4);
}

/* GG: float order, as q4k_dot_nt in x86_avx512.c (1 ggml_vec_dot_q4_K_q8_K's, 2 ggml's
 * repacked q4_K_8x8 gemv, 3 its gemm); the integer sums are exact in all of them. */
static inline __attribute__((always_inline)) void q4k_dot(int64_t n, float *s, const void *w,
                                                          const void *xq, const int GG) {
    const df_block_q4_K *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i dup = _mm256_set_epi8(15, 14, 15, 14, 13, 12, 13, 12, 11, 10, 11, 10, 9, 8, 9, 8,
                                        7, 6, 7, 6, 5, 4, 5, 4, 3, 2, 3, 2, 1, 0, 1, 0);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm4 = _mm_setzero_ps();
    float accs = 0.0f, accms = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        k4_scales(x[i].scales, sc, mn);
        /* mins as int16 pairs [m0 m0 m1 m1 ...] against bsums */
        uint32_t mw[2];
        memcpy(mw, mn, 8);
        const __m128i mn16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)mw[1], (int)mw[0]));
        const __m256i mrep = _mm256_shuffle_epi8(_mm256_set_m128i(_mm_unpackhi_epi64(mn16, mn16), mn16), dup);
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), mrep);
        __m256i isum = _mm256_setzero_si256();
        int32_t isc[4];
        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            const __m256i ylo = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c));
            const __m256i yhi = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c + 32));
            const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16(sc[2 * c]));
            const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), _mm256_set1_epi16(sc[2 * c + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(plo, phi));
            if (GG == 3) {
                isc[c] = hsum_i32_8_int(_mm256_add_epi32(plo, phi));
            }
        }
        const float dx = df_f16_to_f32(x[i].d), dmx = df_f16_to_f32(x[i].dmin);
        if (GG == 1) {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * dx), _mm256_cvtepi32_ps(isum), acc);
            const __m256i h = _mm256_hadd_epi32(mprod, mprod);
            const __m128i p4 = _mm_unpacklo_epi64(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            accm4 = _mm_fmadd_ps(_mm_set1_ps(-y[i].d * dmx), _mm_cvtepi32_ps(p4), accm4);
        } else if (GG == 3) {
            int32_t mk[8];
            _mm256_storeu_si256((__m256i *)mk, mprod);
            for (int c = 0; c < 4; c++) {
                accs = __builtin_fmaf((float)isc[c], dx * y[i].d, accs);
                accms = __builtin_fmaf((float)(mk[2 * c] + mk[2 * c + 1]), dmx * y[i].d, accms);
            }
        } else {
            __m256i t = _mm256_add_epi32(isum, _mm256_permute2x128_si256(isum, isum, 1));
            __m256i u = _mm256_add_epi32(mprod, _mm256_permute2x128_si256(mprod, mprod, 1));
            t = _mm256_hadd_epi32(t, u); /* [i01 i23 m01 m23 ...] */
            t = _mm256_hadd_epi32(t, t); /* [isum msum ...] */
            const __m128i r = _mm256_castsi256_si128(t);
            accs = __builtin_fmaf((float)_mm_cvtsi128_si32(r), dx * y[i].d, accs);
            accms = __builtin_fmaf((float)_mm_extract_epi32(r, 1), dmx * y[i].d, accms);
        }
    }
    if (GG == 1) {
        __m128 a = _mm_add_ps(accm4, _mm_movehl_ps(accm4, accm4));
        a = _mm_add_ss(a, _mm_movehdup_ps(a));
        *s = hsum256(acc) + _mm_cvtss_f32(a);
    } else {
        *s = accs - accms;
    }
}

static void dot_q4_K_q8_K_ggml(int64_t n, float *s, const void *w, const void *xq) { q4k_dot(n, s, w, xq, 1); }
static void dot_q4_K_q8_K_ggml8(int64_t n, float *s, const void *w, const void *xq) { q4k_dot(n, s, w, xq, 2); }
static void dot_q4_K_q8_K_ggml8g(int64_t n, float *s, const void *w, const void *xq) { q4k_dot(n, s, w, xq, 3); }

/* ------------------------------------------------------------------ Q5_K x Q8_K */

static void dot_q5_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_K *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
    const __m256i dup = _mm256_set_epi8(15, 14, 15, 14, 13, 12, 13, 12, 11, 10, 11, 10, 9, 8, 9, 8,
                                        7, 6, 7, 6, 5, 4, 5, 4, 3, 2, 3, 2, 1, 0, 1, 0);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        k4_scales(x[i].scales, sc, mn);
        uint32_t mw[2];
        memcpy(mw, mn, 8);
        const __m128i mn16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)mw[1], (int)mw[0]));
        const __m256i mrep = _mm256_shuffle_epi8(_mm256_set_m128i(_mm_unpackhi_epi64(mn16, mn16), mn16), dup);
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), mrep);
        const __m256i H = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const __m128i s0 = _mm_cvtsi32_si128(2 * c), s1 = _mm_cvtsi32_si128(2 * c + 1);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(H, s0), m1), 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(H, s1), m1), 4));
            const __m256i ylo = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c));
            const __m256i yhi = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c + 32));
            const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16(sc[2 * c]));
            const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), _mm256_set1_epi16(sc[2 * c + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(plo, phi));
        }
        /* ggml_vec_dot_q5_K_q8_K's AVX2 order: acc = fma(d, lane sums, acc) per block; the
         * mins as one exact integer per block, summs = fma(-y.d·dmin, it, summs) (gcc contracts
         * ggml's summs += dmin * i), added after the lanes' hsum_float_8 */
        const float d = y[i].d * df_f16_to_f32(x[i].d);
        const float dmin = -y[i].d * df_f16_to_f32(x[i].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        summs = __builtin_fmaf(dmin, (float)hsum_i32_8_int(mprod), summs);
    }
    *s = hsum256(acc) + summs;
}

/* ------------------------------------------------------------------ IQ4_XS x Q8_K */

static void dot_iq4_xs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_xs *x = w;
    const df_block_q8_K *y = xq;
    const __m256i lut = lut16(df_kvalues_iq4nl);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4)) - 32;
            const __m256i p = dot_s8(_mm256_shuffle_epi8(lut, nibbles(x[i].qs + 16 * ib)),
                                     _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib)));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, _mm256_set1_epi32(ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(df_f16_to_f32(x[i].d) * y[i].d), acc);
    }
    *s = hsum256(acc);
}

/* ------------------------------------------------------------------ Q2_K / Q3_K x Q8_K */

static void dot_q2_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q2_K *x = w;
    const df_block_q8_K *y = xq;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xF)));
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), mn16);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int j = 0; j < 4; j++) {
                const int k = 8 * h + 2 * j;
                const __m256i q = _mm256_and_si256(_mm256_srl_epi16(Q, _mm_cvtsi32_si128(2 * j)), m3);
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * j));
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(x[i].scales[k + 1] & 0xF), _mm_set1_epi16(x[i].scales[k] & 0xF));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), scv));
            }
        }
        const float d = df_f16_to_f32(x[i].d) * y[i].d, dm = df_f16_to_f32(x[i].dmin) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mprod), _mm256_set1_ps(-dm), accm);
    }
    *s = hsum256(_mm256_add_ps(acc, accm));
}

static void dot_q3_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q3_K *x = w;
    const df_block_q8_K *y = xq;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        uint8_t sc[16]; /* 6-bit codes 0..63; the scale is code - 32 */
        __m256i scv16;
        {
            uint32_t a[4];
            memcpy(a, x[i].scales, 12);
            const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f, t = a[2];
            a[2] = ((a[0] >> 4) & k2) | (((t >> 4) & k1) << 4);
            a[3] = ((a[1] >> 4) & k2) | (((t >> 6) & k1) << 4);
            a[0] = (a[0] & k2) | (((t >> 0) & k1) << 4);
            a[1] = (a[1] & k2) | (((t >> 2) & k1) << 4);
            memcpy(sc, a, 16);
            scv16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_set_epi32((int)a[3], (int)a[2], (int)a[1], (int)a[0])),
                                     _mm256_set1_epi16(32));
        }
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), scv16);
        const __m256i H = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int j = 0; j < 4; j++) {
                const int k = 8 * h + 2 * j;
                const __m256i q2 = _mm256_and_si256(_mm256_srl_epi16(Q, _mm_cvtsi32_si128(2 * j)), m3);
                const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(H, _mm_cvtsi32_si128(4 * h + j)), m1), 2);
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * j));
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16((int16_t)(sc[k + 1] - 32)), _mm_set1_epi16((int16_t)(sc[k] - 32)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_or_si256(q2, hb), yv), scv));
            }
        }
        /* offset removed in integers and summed to one exact integer per block, like ref.c */
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * hsum_i32_8(_mm256_sub_epi32(isum, _mm256_slli_epi32(mprod, 2)));
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q6_K x Q8_K */

static void dot_q6_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q6_K *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), sc16);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const int8_t *sc = x[i].scales + 8 * h;
            const __m256i L0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i L1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i H = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_slli_epi16(_mm256_and_si256(H, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(L1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), m3), 4));
            for (int g = 0; g < 4; g++) {
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * g));
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], yv), scv));
            }
        }
        /* ggml_vec_dot_q6_K_q8_K's AVX2 order: the offset removed from the 8 integer lanes, each
         * lane accumulated by FMA across blocks, one horizontal sum at the end */
        const __m256i lanes = _mm256_sub_epi32(isum, _mm256_slli_epi32(mprod, 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * df_f16_to_f32(x[i].d)), _mm256_cvtepi32_ps(lanes), acc);
    }
    *s = hsum256(acc);
}

/* ------------------------------------------------------------------ i-quants x Q8_K
 * Grid entries (8 or 4 unsigned levels) gathered with 64/32-bit loads, signs applied to the
 * activations with sign_epi8 through a table of 0x01/0xFF bytes per 7-bit sign index (ksigns
 * parity included), maddubs + madd by the integer sub-block scale. The integer sum of a
 * super-block is exact and scaled by the same float expression as ref.c, so results are
 * bit-identical to the reference. */
static uint64_t k_signs64[128]; /* byte j: 0xFF if bit j of ksigns_iq2xs[i], else 0x01 */

static inline __m256i signs4(uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
    return _mm256_set_epi64x((long long)k_signs64[i3], (long long)k_signs64[i2], (long long)k_signs64[i1], (long long)k_signs64[i0]);
}

static void dot_iq2_xxs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_xxs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint32_t a[2];
            memcpy(a, x[i].qs + 4 * ib, 8);
            const uint8_t *a8 = (const uint8_t *)a;
            const __m256i g = _mm256_set_epi64x((long long)df_iq2xxs_grid[a8[3]], (long long)df_iq2xxs_grid[a8[2]],
                                                (long long)df_iq2xxs_grid[a8[1]], (long long)df_iq2xxs_grid[a8[0]]);
            const __m256i sv = signs4(a[1] & 127, (a[1] >> 7) & 127, (a[1] >> 14) & 127, (a[1] >> 21) & 127);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(g, _mm256_sign_epi8(yv, sv)), _mm256_set1_epi16((short)(2 * (a[1] >> 28) + 1)));
            isum = _mm256_add_epi32(isum, p);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * hsum_i32_8(isum) * 0.125f;
    }
    *s = sumf;
}

static void dot_iq2_xs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_xs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t *v = x[i].qs + 4 * ib;
            const __m256i g = _mm256_set_epi64x((long long)df_iq2xs_grid[v[3] & 511], (long long)df_iq2xs_grid[v[2] & 511],
                                                (long long)df_iq2xs_grid[v[1] & 511], (long long)df_iq2xs_grid[v[0] & 511]);
            const __m256i sv = signs4(v[0] >> 9, v[1] >> 9, v[2] >> 9, v[3] >> 9);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (x[i].scales[ib] >> 4) + 1)),
                                                _mm_set1_epi16((short)(2 * (x[i].scales[ib] & 0xf) + 1)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(g, _mm256_sign_epi8(yv, sv)), sc));
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * hsum_i32_8(isum) * 0.125f;
    }
    *s = sumf;
}

static void dot_iq3_xxs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq3_xxs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *q = x[i].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++, q += 8) {
            uint32_t a;
            memcpy(&a, x[i].qs + 64 + 4 * ib, 4);
            const __m256i g = _mm256_set_epi32((int)df_iq3xxs_grid[q[7]], (int)df_iq3xxs_grid[q[6]], (int)df_iq3xxs_grid[q[5]],
                                               (int)df_iq3xxs_grid[q[4]], (int)df_iq3xxs_grid[q[3]], (int)df_iq3xxs_grid[q[2]],
                                               (int)df_iq3xxs_grid[q[1]], (int)df_iq3xxs_grid[q[0]]);
            const __m256i sv = signs4(a & 127, (a >> 7) & 127, (a >> 14) & 127, (a >> 21) & 127);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(g, _mm256_sign_epi8(yv, sv)), _mm256_set1_epi16((short)(2 * (a >> 28) + 1)));
            isum = _mm256_add_epi32(isum, p);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * hsum_i32_8(isum) * 0.25f;
    }
    *s = sumf;
}

/* IQ1_S / IQ1_M: grid bytes are -1/0/1, so sign_epi8(y, g) is y*g exactly; the delta term
 * uses sums of the activations (bsums per 16 for IQ1_S, sign_epi8 by +-1 per 8 for IQ1_M). */
static void dot_iq1_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq1_s *x = w;
    const df_block_q8_K *y = xq;
    const __m256i ones8 = _mm256_set1_epi8(1);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *qs = x[i].qs;
        __m256i isum = _mm256_setzero_si256();
        int sumi1 = 0;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            const uint16_t h = x[i].qh[ib];
            const int ls = 2 * ((h >> 12) & 7) + 1;
            const __m256i g = _mm256_set_epi64x((long long)df_iq1s_grid[qs[3] | (((h >> 9) & 7) << 8)],
                                                (long long)df_iq1s_grid[qs[2] | (((h >> 6) & 7) << 8)],
                                                (long long)df_iq1s_grid[qs[1] | (((h >> 3) & 7) << 8)],
                                                (long long)df_iq1s_grid[qs[0] | ((h & 7) << 8)]);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_sign_epi8(yv, g)), _mm256_set1_epi16((short)ls)));
            sumi1 += ls * (h & 0x8000 ? -1 : 1) * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
        }
        sumf += df_f16_to_f32(x[i].d) * y[i].d * (hsum_i32_8(isum) + DF_IQ1S_DELTA * sumi1);
    }
    *s = sumf;
}

static void dot_iq1_m_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq1_m *x = w;
    const df_block_q8_K *y = xq;
    const __m256i ones8 = _mm256_set1_epi8(1);
    const long long pos = 0x0101010101010101ll, neg = -1ll;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const uint16_t du = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const uint8_t *qs = x[i].qs, *qh = x[i].qh;
        __m256i s1 = _mm256_setzero_si256(), s2 = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
            const int ls1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1;
            const int ls2 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1;
            const __m256i g = _mm256_set_epi64x((long long)df_iq1s_grid[qs[3] | ((qh[1] << 4) & 0x700)],
                                                (long long)df_iq1s_grid[qs[2] | ((qh[1] << 8) & 0x700)],
                                                (long long)df_iq1s_grid[qs[1] | ((qh[0] << 4) & 0x700)],
                                                (long long)df_iq1s_grid[qs[0] | ((qh[0] << 8) & 0x700)]);
            const __m256i dl = _mm256_set_epi64x(qh[1] & 0x80 ? neg : pos, qh[1] & 0x08 ? neg : pos,
                                                 qh[0] & 0x80 ? neg : pos, qh[0] & 0x08 ? neg : pos);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i scv = _mm256_set_m128i(_mm_set1_epi16((short)ls2), _mm_set1_epi16((short)ls1));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_sign_epi8(yv, g)), scv));
            s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_sign_epi8(yv, dl)), scv));
        }
        sumf += df_f16_to_f32(du) * y[i].d * (hsum_i32_8(s1) + DF_IQ1S_DELTA * hsum_i32_8(s2));
    }
    *s = sumf;
}

/* 0xFF in byte e where bit e of x is set, 0x00 elsewhere. */
static inline __m256i bits_to_bytes(uint32_t x) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bm = _mm256_set1_epi64x(0x8040201008040201ll);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bm), bm);
}

static void dot_iq2_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_s *x = w;
    const df_block_q8_K *y = xq;
    const __m256i one = _mm256_set1_epi8(1);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = qs + 32;
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
            const __m256i g = _mm256_set_epi64x((long long)df_iq2s_grid[qs[3] | ((qh[ib] << 2) & 0x300)],
                                                (long long)df_iq2s_grid[qs[2] | ((qh[ib] << 4) & 0x300)],
                                                (long long)df_iq2s_grid[qs[1] | ((qh[ib] << 6) & 0x300)],
                                                (long long)df_iq2s_grid[qs[0] | ((qh[ib] << 8) & 0x300)]);
            uint32_t sb;
            memcpy(&sb, signs, 4);
            const __m256i sv = _mm256_or_si256(bits_to_bytes(sb), one);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (x[i].scales[ib] >> 4) + 1)),
                                                _mm_set1_epi16((short)(2 * (x[i].scales[ib] & 0xf) + 1)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(g, _mm256_sign_epi8(yv, sv)), sc));
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * hsum_i32_8(isum) * 0.125f;
    }
    *s = sumf;
}

static void dot_iq3_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq3_s *x = w;
    const df_block_q8_K *y = xq;
    const __m256i one = _mm256_set1_epi8(1);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = x[i].signs;
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
            const int h = qh[ib];
            const __m256i g = _mm256_set_epi32((int)df_iq3s_grid[qs[7] | ((h << 1) & 256)], (int)df_iq3s_grid[qs[6] | ((h << 2) & 256)],
                                               (int)df_iq3s_grid[qs[5] | ((h << 3) & 256)], (int)df_iq3s_grid[qs[4] | ((h << 4) & 256)],
                                               (int)df_iq3s_grid[qs[3] | ((h << 5) & 256)], (int)df_iq3s_grid[qs[2] | ((h << 6) & 256)],
                                               (int)df_iq3s_grid[qs[1] | ((h << 7) & 256)], (int)df_iq3s_grid[qs[0] | ((h << 8) & 256)]);
            uint32_t sb;
            memcpy(&sb, signs, 4);
            const __m256i sv = _mm256_or_si256(bits_to_bytes(sb), one);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            const int ls = 2 * ((x[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1;
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(g, _mm256_sign_epi8(yv, sv)), _mm256_set1_epi16((short)ls)));
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * hsum_i32_8(isum);
    }
    *s = sumf;
}

/* TQ2_0: codes 0..2 (value code-1): Σ code*y by maddubs, minus Σ y from the bsums. */
static void dot_tq2_0_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_tq2_0 *x = w;
    const df_block_q8_K *y = xq;
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int l = 0; l < 4; l++) {
                const __m256i q = _mm256_and_si256(_mm256_srl_epi16(Q, _mm_cvtsi32_si128(2 * l)), m3);
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * l));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), ones));
            }
        }
        const __m256i b = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), ones);
        const int sumi = (int)hsum_i32_8(_mm256_sub_epi32(isum, b));
        sumf += (float)sumi * (df_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sumf;
}

/* TQ1_0: five (four) base-3 digits per byte, digit k = ((uint8)(q * 3^k) * 3) >> 8, value
 * digit-1. Digits by 16-bit multiplies on the even and odd bytes (per-lane multipliers),
 * maddubs with the activations, Σ y from the bsums removed in integers (exact, as ref.c). */
static inline __m256i tq1_digits(__m256i q, __m256i pe, __m256i po) {
    const __m256i ff = _mm256_set1_epi16(0xFF), three = _mm256_set1_epi16(3);
    const __m256i e = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(q, ff), pe), ff), three), 8);
    const __m256i o = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_and_si256(_mm256_mullo_epi16(_mm256_srli_epi16(q, 8), po), ff), three), 8);
    return _mm256_or_si256(e, _mm256_slli_epi16(o, 8));
}

static void dot_tq1_0_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_tq1_0 *x = w;
    const df_block_q8_K *y = xq;
    static const int16_t pow3[6] = {1, 3, 9, 27, 81, 243};
    const __m256i ones = _mm256_set1_epi16(1);
    /* last 32 elements: digit 4 of qs[32..47] (16), then digit k of qh[j] at 4k+j (16) */
    const __m256i pl = _mm256_set_epi16(27, 27, 9, 9, 3, 3, 1, 1, 81, 81, 81, 81, 81, 81, 81, 81); /* per byte pair */
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const __m256i Q = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m128i Q2 = _mm_loadu_si128((const __m128i *)(x[i].qs + 32));
        const __m256i Q22 = _mm256_set_m128i(Q2, Q2);
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < 5; k++) {
            const __m256i p = _mm256_set1_epi16(pow3[k]);
            const __m256i v = tq1_digits(Q, p, p);
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(q8 + 32 * k))), ones));
        }
        for (int k = 0; k < 4; k += 2) {
            const __m256i p = _mm256_set_m128i(_mm_set1_epi16(pow3[k + 1]), _mm_set1_epi16(pow3[k]));
            const __m256i v = tq1_digits(Q22, p, p);
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(q8 + 160 + 16 * k))), ones));
        }
        {
            uint32_t qh;
            memcpy(&qh, x[i].qh, 4);
            const __m256i QL = _mm256_set_m128i(_mm_set1_epi32((int)qh), Q2);
            const __m256i v = tq1_digits(QL, pl, pl);
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(q8 + 224))), ones));
        }
        const __m256i b = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), ones);
        const int sumi = (int)hsum_i32_8(_mm256_sub_epi32(isum, b));
        sumf += (float)sumi * (df_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q4_1 / Q5_0 / Q5_1
 * One exact integer per block, then ref.c's float expression: bit-identical to it. */
static void dot_q4_1_q8_1(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_1 *x = w;
    const df_block_q8_1 *y = xq;
    const __m256i ones = _mm256_set1_epi16(1);
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles(x[ib].qs), _mm256_loadu_si256((const __m256i *)y[ib].qs)), ones);
        const int sumi = (int)hsum_i32_8(p);
        sumf += (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)) * sumi + df_f16_to_f32(x[ib].m) * df_f16_to_f32(y[ib].s);
    }
    *s = sumf;
}

/* ggml_vec_dot_q5_0_q8_0's AVX2 order (and tinyBLAS_Q0_AVX's for
 * batches): one 8-lane accumulator, acc = fma(d_x*d_y, lane sums, acc), then hsum_float_8. */
static void dot_q5_0_q8_0_ggml(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_0 *x = w;
    const df_block_q8_0 *y = xq;
    const __m256i h16 = _mm256_set1_epi8(0x10), off = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 32; ib++) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, 4);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles(x[ib].qs), _mm256_and_si256(bits_to_bytes(qh), h16)), off);
        const __m256i p = dot_s8(q, _mm256_loadu_si256((const __m256i *)y[ib].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)),
                              _mm256_cvtepi32_ps(p), acc);
    }
    *s = hsum256(acc);
}

static void dot_q5_1_q8_1(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_1 *x = w;
    const df_block_q8_1 *y = xq;
    const __m256i h16 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, 4);
        const __m256i q = _mm256_or_si256(nibbles(x[ib].qs), _mm256_and_si256(bits_to_bytes(qh), h16));
        const int sumi = (int)hsum_i32_8(_mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y[ib].qs)), ones));
        sumf += (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)) * sumi + df_f16_to_f32(x[ib].m) * df_f16_to_f32(y[ib].s);
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q8_K activations */

/* Bit-identical to df_quantize_row_q8_K_ref (see x86_avx512.c). */
static void from_q8_K(const float *x, void *dst, int64_t n) {
    df_block_q8_K *y = dst;
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m256 am = _mm256_setzero_ps();
        int bad = 0;
        for (int k = 0; k < 32; k++) {
            const __m256 v = _mm256_loadu_ps(x + 8 * k);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            am = _mm256_max_ps(am, _mm256_andnot_ps(sgn, v));
        }
        if (bad) {
            df_quantize_row_q8_K_ref(x, &y[i], 256);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!amax) {
            y[i].d = 0;
            memset(y[i].qs, 0, 256);
            memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        float max = 0;
        const __m256 va = _mm256_set1_ps(amax);
        for (int k = 0; k < 32; k++) {
            int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sgn, _mm256_loadu_ps(x + 8 * k)), va, _CMP_EQ_OQ));
            if (m) { max = x[8 * k + __builtin_ctz((unsigned)m)]; break; }
        }
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.f);
        const __m256i mant = _mm256_set1_epi32(0x007fffff), off = _mm256_set1_epi32(0x00400000);
        const __m256i lim = _mm256_set1_epi32(127);
        for (int k = 0; k < 16; k++) {
            __m256i q[2];
            for (int h = 0; h < 2; h++) {
                const __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * k + 8 * h), vs), magic);
                q[h] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(t), mant), off), lim);
            }
            /* 16 int32 -> 16 int8 in order */
            __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xd8);
            __m128i p8 = _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1));
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * k), p8);
            __m256i sm = _mm256_add_epi32(q[0], q[1]);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sm), _mm256_extracti128_si256(sm, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
            y[i].bsums[k] = (int16_t)_mm_cvtsi128_si32(s4);
        }
        y[i].d = 1 / iscale;
    }
}

/* ------------------------------------------------------------------ Q8_0 / Q8_1 activations */

/* As llama.cpp's x86 path (DF_Q8_X86): id = 127/amax, round half to even. */
static void from_q8_0(const float *x, void *dst, int64_t n) {
    df_block_q8_0 *y = dst;
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 v[4];
        __m256 am = _mm256_setzero_ps();
        int bad = 0;
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
            am = _mm256_max_ps(am, _mm256_andnot_ps(sgn, v[k]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (bad || !(amax <= 3.4028235e38f)) {
            df_quantize_row_q8_0_variant(x, &y[i], 32, DF_Q8_X86);
            continue;
        }
        y[i].d = df_f32_to_f16(amax / 127);
        const __m256 vid = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
    }
}

static void from_q8_1(const float *x, void *dst, int64_t n) { df_quantize_row_q8_1_variant(x, dst, n, DF_Q8_X86); }

/* ------------------------------------------------------------------ Q4_K x8 (repacked) x Q8_K */

/* 8 interleaved rows (df_block_q4_Kx8) with 256-bit vectors: a 64-byte quant chunk is two halves
 * of 4 rows; pmaddubsw against the broadcast 8-byte activation chunk, the 4 pair sums of a
 * sub-block added in int16 (< 2^14), pmaddwd by the sub-block scales (pshufb from the decoded
 * scale bytes) leaves 2 int32 lanes per row. Exact integer sums; the float operations are ggml's
 * gemv (GEMM 0) or gemm (GEMM 1) order with the 8 rows as lanes, as in the AVX-512 form. */
static _Alignas(32) uint8_t k_q4kx8_scidx[8][32]; /* pshufb: int16 k of a 128-bit lane <- byte 8(k/4) + j */

/* lanes (2r, 2r+1) of half 0 (rows 0-3) and of half 1 (rows 4-7) -> the 8 row sums in order */
static inline __attribute__((always_inline)) __m256i q4kx8_rows(__m256i h0, __m256i h1) {
    return _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(h0, h1), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

static inline __attribute__((always_inline)) void q4kx8_nt(int64_t n, float *s, size_t lds, const void *w,
                                                            const char *xq, size_t stride, const int NT, const int GEMM) {
    const df_block_q4_Kx8 *x = w;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3), m63 = _mm256_set1_epi8(63);
    const __m256i ord = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 acc[4], accm[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const df_block_q8_K *y[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) y[t] = (const df_block_q8_K *)(xq + t * stride) + i;
        /* scales (byte 8r + j, per half) and mins */
        const __m256i S0 = _mm256_loadu_si256((const __m256i *)x[i].sc), S1 = _mm256_loadu_si256((const __m256i *)(x[i].sc + 32));
        const __m256i sc0 = _mm256_and_si256(S0, m63), sc1 = _mm256_and_si256(S1, m63);
        const __m256i L = _mm256_loadu_si256((const __m256i *)x[i].mlo);
        const __m256i mn0 = _mm256_or_si256(_mm256_and_si256(L, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(S0, 6), m3), 4));
        const __m256i mn1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L, 4), m4),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(S1, 6), m3), 4));
        const __m256i mp[4] = {_mm256_cvtepu8_epi16(_mm256_castsi256_si128(mn0)), _mm256_cvtepu8_epi16(_mm256_extracti128_si256(mn0, 1)),
                               _mm256_cvtepu8_epi16(_mm256_castsi256_si128(mn1)), _mm256_cvtepu8_epi16(_mm256_extracti128_si256(mn1, 1))};
        __m256i U[4][4]; /* [token][chunk]: min terms of the chunk's 2 sub-blocks, rows in order 0,2,4,6,1,3,5,7 */
        __m256 D[4], DM[4];
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[i].d));
        const __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[i].dmin));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const __m256i ys32 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[t]->bsums), _mm256_set1_epi16(1));
            const __m256i ys = _mm256_permute4x64_epi64(_mm256_packs_epi32(ys32, ys32), 0x88); /* [ys0..7 | ys0..7] */
            __m256i A[4];
            for (int q = 0; q < 4; q++) A[q] = _mm256_madd_epi16(mp[q], ys); /* rows 2q, 2q+1: 4 chunks each */
            const __m256i t0 = _mm256_unpacklo_epi32(A[0], A[1]), t1 = _mm256_unpackhi_epi32(A[0], A[1]);
            const __m256i t2 = _mm256_unpacklo_epi32(A[2], A[3]), t3 = _mm256_unpackhi_epi32(A[2], A[3]);
            U[t][0] = _mm256_unpacklo_epi64(t0, t2);
            U[t][1] = _mm256_unpackhi_epi64(t0, t2);
            U[t][2] = _mm256_unpacklo_epi64(t1, t3);
            U[t][3] = _mm256_unpackhi_epi64(t1, t3);
            D[t] = _mm256_mul_ps(d8, _mm256_set1_ps(y[t]->d));
            DM[t] = _mm256_mul_ps(dm8, _mm256_set1_ps(y[t]->d));
        }
        __m256i I[4][2];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) I[t][0] = I[t][1] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            for (int jj = 0; jj < 2; jj++) {
                const int j = 2 * c + jj;
                const __m256i ctl = _mm256_load_si256((const __m256i *)k_q4kx8_scidx[j]);
                for (int h = 0; h < 2; h++) {
                    const __m256i sc16 = _mm256_shuffle_epi8(h ? sc1 : sc0, ctl);
                    __m256i P[4];
#pragma GCC unroll 4
                    for (int t = 0; t < NT; t++) P[t] = _mm256_setzero_si256();
                    for (int zz = 0; zz < 2; zz++) {
                        const int z = 2 * j + zz;
                        const __m256i W = _mm256_loadu_si256((const __m256i *)(x[i].qs + 64 * z + 32 * h));
                        const __m256i lo = _mm256_and_si256(W, m4), hi = _mm256_and_si256(_mm256_srli_epi16(W, 4), m4);
#pragma GCC unroll 4
                        for (int t = 0; t < NT; t++) {
                            int64_t a, b;
                            memcpy(&a, y[t]->qs + 16 * z, 8);
                            memcpy(&b, y[t]->qs + 16 * z + 8, 8);
                            P[t] = _mm256_add_epi16(P[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi64x(a)),
                                                                           _mm256_maddubs_epi16(hi, _mm256_set1_epi64x(b))));
                        }
                    }
#pragma GCC unroll 4
                    for (int t = 0; t < NT; t++) I[t][h] = _mm256_add_epi32(I[t][h], _mm256_madd_epi16(P[t], sc16));
                }
            }
            if (GEMM) {
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q4kx8_rows(I[t][0], I[t][1])), D[t], acc[t]);
                    accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(U[t][c], ord)), DM[t], accm[t]);
                    I[t][0] = I[t][1] = _mm256_setzero_si256();
                }
            }
        }
        if (!GEMM) {
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const __m256i M = _mm256_add_epi32(_mm256_add_epi32(U[t][0], U[t][1]), _mm256_add_epi32(U[t][2], U[t][3]));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q4kx8_rows(I[t][0], I[t][1])), D[t], acc[t]);
                accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(M, ord)), DM[t], accm[t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) _mm256_storeu_ps(s + t * lds, _mm256_sub_ps(acc[t], accm[t]));
}

static void dot_q4_Kx8_q8_K(int64_t n, float *s, const void *w, const void *xq) { q4kx8_nt(n, s, 0, w, xq, 0, 1, 0); }
static void dot4_q4_Kx8_q8_K(int64_t n, float *s, size_t lds, const void *w, const void *xq, size_t stride) {
    q4kx8_nt(n, s, lds, w, xq, stride, 4, 0);
}
static void dot4_q4_Kx8_q8_K_g(int64_t n, float *s, size_t lds, const void *w, const void *xq, size_t stride) {
    q4kx8_nt(n, s, lds, w, xq, stride, 4, 1);
}

void df_kernels_fill_avx2(df_kernel_table *t) {
    t->name = "avx2";
    t->isa = DF_ISA_AVX2;
    for (int e = 0; e < 256; e++) k_e8m0_half[e] = df_e8m0_half((uint8_t)e);
    for (int i = 0; i < 128; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 8; j++) v |= (uint64_t)((df_ksigns_iq2xs[i] >> j) & 1 ? 0xFF : 0x01) << (8 * j);
        k_signs64[i] = v;
    }
    t->vec_dot[DF_TYPE_F32] = dot_f32;
    t->kda_head = kda_head_avx2;
    t->vec_dot[DF_TYPE_Q8_0] = dot_q8_0_q8_0_ggml;
    t->vec_dot[DF_TYPE_Q4_0] = dot_q4_0_q8_0;
    t->vec_dot[DF_TYPE_IQ4_NL] = dot_iq4_nl_q8_0;
    t->vec_dot[DF_TYPE_MXFP4] = dot_mxfp4_q8_0;
    /* ggml's gemm and gemv orders are the same for MXFP4 (one chain per output): _r8 for all */
    t->vec_dot_r8[DF_TYPE_MXFP4] = dot_mxfp4_q8_0_ggml8;
    t->vec_dot4_r8[DF_TYPE_MXFP4] = dot4_mxfp4_q8_0_ggml8;
    t->vec_dot[DF_TYPE_Q4_K] = dot_q4_K_q8_K_ggml;
    t->vec_dot_r8[DF_TYPE_Q4_K] = dot_q4_K_q8_K_ggml8;
    t->vec_dot_r8g[DF_TYPE_Q4_K] = dot_q4_K_q8_K_ggml8g;
    for (int j = 0; j < 8; j++)
        for (int b = 0; b < 32; b++) {
            const int k = (b % 16) / 2; /* int16 k of the 128-bit lane */
            k_q4kx8_scidx[j][b] = b % 2 ? 0x80 : (uint8_t)(8 * (k / 4) + j);
        }
    t->vec_dot_x8[DF_TYPE_Q4_K_X8] = dot_q4_Kx8_q8_K;
    t->vec_dot4_x8[DF_TYPE_Q4_K_X8] = dot4_q4_Kx8_q8_K;
    t->vec_dot4_x8g[DF_TYPE_Q4_K_X8] = dot4_q4_Kx8_q8_K_g;
    t->repack[DF_TYPE_Q4_K] = DF_TYPE_Q4_K_X8;
    t->vec_dot[DF_TYPE_Q6_K] = dot_q6_K_q8_K;
    t->vec_dot[DF_TYPE_Q5_K] = dot_q5_K_q8_K;
    t->vec_dot[DF_TYPE_IQ4_XS] = dot_iq4_xs_q8_K;
    t->vec_dot[DF_TYPE_Q2_K] = dot_q2_K_q8_K;
    t->vec_dot[DF_TYPE_Q3_K] = dot_q3_K_q8_K;
    t->vec_dot[DF_TYPE_IQ2_XXS] = dot_iq2_xxs_q8_K;
    t->vec_dot[DF_TYPE_IQ2_XS] = dot_iq2_xs_q8_K;
    t->vec_dot[DF_TYPE_IQ3_XXS] = dot_iq3_xxs_q8_K;
    t->vec_dot[DF_TYPE_IQ1_S] = dot_iq1_s_q8_K;
    t->vec_dot[DF_TYPE_IQ1_M] = dot_iq1_m_q8_K;
    t->vec_dot[DF_TYPE_IQ2_S] = dot_iq2_s_q8_K;
    t->vec_dot[DF_TYPE_IQ3_S] = dot_iq3_s_q8_K;
    t->vec_dot[DF_TYPE_TQ2_0] = dot_tq2_0_q8_K;
    t->vec_dot[DF_TYPE_TQ1_0] = dot_tq1_0_q8_K;
    t->vec_dot[DF_TYPE_Q4_1] = dot_q4_1_q8_1;
    t->vec_dot[DF_TYPE_Q5_0] = dot_q5_0_q8_0_ggml;
    t->vec_dot[DF_TYPE_Q5_1] = dot_q5_1_q8_1;
    t->from_float[DF_TYPE_F16] = from_f16;
    t->from_float[DF_TYPE_Q8_K] = from_q8_K;
    t->from_float[DF_TYPE_Q8_0] = from_q8_0;
    t->from_float[DF_TYPE_Q8_1] = from_q8_1;
    df_kernels_fill_avx2_f32(t);
}
