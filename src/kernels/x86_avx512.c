/* x86_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) kernels of quantized dots (the float slots:
 * x86_avx512_f32.c). Compiled with -mavx512*; only called after dispatch.c has checked the CPU
 * flags (VBMI / BITALG forms: the caps it hands over).
 * Integer formats use vpdpbusd (u8 x s8): the weight's |q| goes in the unsigned operand and its
 * sign is moved onto the activation (activations never hold -128, so negation is exact).
 * Per-block integer sums are converted to float and scaled per lane, as llama.cpp's SIMD code
 * does — same formulas as ref.c, different float summation order.
 * Threading: pure functions. */
#include <immintrin.h>
#include <string.h>
#include <math.h>

#include "kernels/x86_avx512_impl.h"

/* ------------------------------------------------------------------ float types */

/* ggml_vec_dot_f32's order under AVX-512 (the decode matvec): 4 x 16 accumulators over the
 * first n & ~63, reduced (0+2) + (1+3) and by _mm512_reduce_add_ps, then the m leftovers one by
 * one as gcc 12 compiles ggml's `sumf += x[i]*y[i]`: its vectorised loop rounds the products of
 * the first m & ~7 and adds them in order, the last m & 7 are scalar FMAs. */
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
    float sum = hsum512(_mm512_add_ps(_mm512_add_ps(acc0, acc2), _mm512_add_ps(acc1, acc3)));
    const int64_t iv = i + ((n - i) & ~(int64_t)7);
    for (; i < iv; i++) {
        const float p = a[i] * b[i]; /* rounded, then added (no contraction: ISO C) */
        sum += p;
    }
    for (; i < n; i++) sum = fmaf(a[i], b[i], sum);
    *s = sum;
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

/* ------------------------------------------------------------------ Q8_0 */

/* Summation order: two 8-lane accumulators (even / odd blocks) of per-lane int32 sums scaled by
 * d_x*d_y, added and reduced as hsum_float_8 — the AVX2 table's order. Measured against
 * llama.cpp (scripts/logits_diff.sh on the demo model and the e2e Q8_0 models) it agrees to
 * ~1e-6 per logit, while both a 16-lane form and a single-accumulator form drifted by ~0.1
 * within a few tokens (docs/experiments.tsv). Matvec is memory-bound, so the narrower
 * vectors cost nothing there. */
static inline float hsum_f8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

static inline __m256 q8_block_dot(const df_block_q8_0 *x, const df_block_q8_0 *y) {
    __m256i ax = _mm256_loadu_si256((const __m256i *)x->qs);
    __m256i ay = _mm256_loadu_si256((const __m256i *)y->qs);
    return _mm256_cvtepi32_ps(
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(ax), _mm256_sign_epi8(ay, ax)));
}

/* The order of ggml_vec_dot_q8_0_q8_0 (its AVX2 branch, which ggml's AVX-512 builds use too)
 * and of llamafile's tinyBLAS_Q0_AVX (batches): one 8-lane accumulator, block after block,
 * acc = fma(lane int32 sums as float, d_x*d_y, acc), then hsum_float_8 (docs/testing.md). */
static void dot_q8_0_q8_0_ggml(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q8_0 *x = w, *y = xq;
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++)
        acc = _mm256_fmadd_ps(q8_block_dot(&x[ib], &y[ib]),
                              _mm256_set1_ps(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)), acc);
    *s = hsum_f8(acc);
}

/* Q8_0 activations as llama.cpp's x86 path (DF_Q8_X86): id = 127/amax, round half to even. */
static void from_q8_0(const float *x, void *dst, int64_t n) {
    df_block_q8_0 *y = dst;
    const __m512 sgn = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sgn, v0), _mm512_andnot_ps(sgn, v1)));
        /* NaN/Inf blocks: the scalar emulation defines the (meaningless) bytes; stay identical */
        if (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q) ||
            !(amax <= 3.4028235e38f)) {
            df_quantize_row_q8_0_variant(x, &y[i], 32, DF_Q8_X86);
            continue;
        }
        y[i].d = df_f32_to_f16(amax / 127);
        const __m512 vid = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtsepi32_epi8(q1));
    }
}

/* Q8_0 activations in the split layout (df_q8_0_split) for the VBMI MXFP4 kernels */
static void from_q8_0_split(const float *x, void *dst, int64_t n) {
    int8_t *q = dst;
    df_f16 *d = (df_f16 *)(q + n);
    for (int64_t i = 0; i < n / 32; i++) {
        df_block_q8_0 b;
        from_q8_0(x + 32 * i, &b, 32);
        memcpy(q + 32 * i, b.qs, 32);
        memcpy(&d[i], &b.d, sizeof b.d);
    }
}

static void from_q8_1(const float *x, void *dst, int64_t n) { df_quantize_row_q8_1_variant(x, dst, n, DF_Q8_X86); }

/* ------------------------------------------------------------------ 4-bit 32-blocks x Q8_0 */


static void dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_0 *x = w;
    const df_block_q8_0 *y = xq;
    const int64_t nb = n / 32;
    const __m512i eight = _mm512_set1_epi8(8);
    __m512 acc = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        const __m512i q = nibbles2(x[ib].qs, x[ib + 1].qs);
        const __m512i v = ld2x256(y[ib].qs, y[ib + 1].qs);
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, v);
        p = _mm512_sub_epi32(p, _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, v));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p),
                              scale2(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d),
                                     df_f16_to_f32(x[ib + 1].d) * df_f16_to_f32(y[ib + 1].d)),
                              acc);
    }
    float sumf = hsum512(acc);
    for (; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += ((x[ib].qs[j] & 0xF) - 8) * y[ib].qs[j] + ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + 16];
        sumf += sumi * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}


static void dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_nl *x = w;
    const df_block_q8_0 *y = xq;
    const int64_t nb = n / 32;
    const __m512i lut = lut16(df_kvalues_iq4nl);
    __m512 acc = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        const __m512i q = _mm512_shuffle_epi8(lut, nibbles2(x[ib].qs, x[ib + 1].qs));
        const __m512i p = dot_s8(q, ld2x256(y[ib].qs, y[ib + 1].qs));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p),
                              scale2(df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d),
                                     df_f16_to_f32(x[ib + 1].d) * df_f16_to_f32(y[ib + 1].d)),
                              acc);
    }
    float sumf = hsum512(acc);
    for (; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[ib].qs[j] * df_kvalues_iq4nl[x[ib].qs[j] & 0xF] +
                    y[ib].qs[j + 16] * df_kvalues_iq4nl[x[ib].qs[j] >> 4];
        sumf += sumi * (df_f16_to_f32(y[ib].d) * df_f16_to_f32(x[ib].d));
    }
    *s = sumf;
}

static inline __attribute__((always_inline)) void mxfp4_dot_nt(int64_t n, float *s, const void *w,
                                                               const char *xq, size_t stride, const int NT) {
    const df_block_mxfp4 *x = w;
    const int64_t nb = n / 32;
    const __m512i lut = lut16(df_kvalues_mxfp4);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        const __m512i q = _mm512_shuffle_epi8(lut, nibbles2(x[ib].qs, x[ib + 1].qs));
        /* dot_s8 split: |q| and the sign mask are shared by all rows */
        const __mmask64 neg = _mm512_movepi8_mask(q);
        const __m512i aq = _mm512_abs_epi8(q);
        const float e0 = df_e8m0_half(x[ib].e), e1 = df_e8m0_half(x[ib + 1].e);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const df_block_q8_0 *y = (const df_block_q8_0 *)(xq + t * stride);
            const __m512i yv = ld2x256(y[ib].qs, y[ib + 1].qs);
            const __m512i sy = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aq, sy);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p),
                                     scale2(df_f16_to_f32(y[ib].d) * e0, df_f16_to_f32(y[ib + 1].d) * e1), acc[t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
        const df_block_q8_0 *y = (const df_block_q8_0 *)(xq + t * stride);
        float sumf = hsum512(acc[t]);
        for (int64_t jb = ib; jb < nb; jb++) {
            int sumi = 0;
            for (int j = 0; j < 16; j++)
                sumi += y[jb].qs[j] * df_kvalues_mxfp4[x[jb].qs[j] & 0xF] +
                        y[jb].qs[j + 16] * df_kvalues_mxfp4[x[jb].qs[j] >> 4];
            sumf += (df_f16_to_f32(y[jb].d) * df_e8m0_half(x[jb].e)) * sumi;
        }
        s[t] = sumf;
    }
}

static void dot_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    mxfp4_dot_nt(n, s, w, xq, 0, 1);
}
static void dot4_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *xq, size_t stride) {
    mxfp4_dot_nt(n, s, w, xq, stride, 4);
}

/* VBMI form (Ice Lake, Zen 4 and later; chosen at fill time), 8 blocks per step, then 4:
 * - one 64-byte load per block pair, vpermb to [qs0 qs0 qs1 qs1] and a per-lane shift
 *   0/4 put every code in the low nibble of its byte (upper bits are junk);
 * - |value| by vpermb from a 16-entry table repeated 4x (index bits 4-7 ignored), sign = bit 3
 *   tested directly, moved onto the activation (exact: activations never hold -128);
 * - the 4 block scales as one vector: d words and e bytes picked out of registers by two-source
 *   permutes, F16 -> F32 in hardware, 2^(e-128) by vscalefps (exact, denormals included);
 *   8 blocks a step share that work (one vector of 8 scales; +10% per core over 4).
 * Each activation row's arithmetic is the same sequence in the 1-row and 4-row forms. */
#define DF_VBMI __attribute__((target("avx512vbmi")))

static inline __attribute__((always_inline)) DF_VBMI void mxfp4_dot_vbmi_nt(int64_t n, float *s, const void *w,
                                                                             const char *xq, size_t stride, const int NT) {
    const df_block_mxfp4 *x = w;
    const int64_t nb = n / 32;
    static const int8_t absk[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12};
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)absk));
    const __m512i perm = _mm512_set_epi8(33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
                                         33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
                                         16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1,
                                         16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
    const __m512i sh = _mm512_set_epi64(0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
                                        0x0004000400040004ll, 0x0004000400040004ll, 0, 0);
    const __m512i m8 = _mm512_set1_epi8(0x08);
    const __m512i pi0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i pi1 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m256i ie = _mm256_castsi128_si256(_mm_set_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32 + 17, 32, 17, 0));
    const __mmask64 two_blocks = 0x3FFFFFFFFull;
    /* 8-block step: e of blocks 0-3 at bytes 0/17/34/51 of x[ib], of blocks 4-7 of x[ib+4];
     * d words of blocks 0-3 from (y[ib], y[ib+2]) into words 0-3, of 4-7 from (y[ib+4], y[ib+6])
     * into words 4-7 */
    const __m512i pi2 = _mm512_set_epi32(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4);
    const __m512i pi3 = _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6);
    const __m512i ie8 = _mm512_castsi128_si512(_mm_set_epi8(0, 0, 0, 0, 0, 0, 0, 0, 64 + 51, 64 + 34, 64 + 17, 64, 51, 34, 17, 0));
    __m512 acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) { acc0[t] = _mm512_setzero_ps(); acc1[t] = _mm512_setzero_ps(); }
    int64_t ib = 0;
    for (; ib + 8 <= nb; ib += 8) {
        const __m512i r0 = _mm512_loadu_si512((const void *)&x[ib]);
        const __m512i r1 = _mm512_loadu_si512((const void *)&x[ib + 2]);
        const __m512i r2 = _mm512_loadu_si512((const void *)&x[ib + 4]);
        __m512i r3; /* as r1 below: the last load of a row is masked */
        if (ib + 10 <= nb) r3 = _mm512_loadu_si512((const void *)&x[ib + 6]);
        else r3 = _mm512_maskz_loadu_epi8(two_blocks, &x[ib + 6]);
        const __m512i n0 = _mm512_srlv_epi16(_mm512_permutexvar_epi8(perm, r0), sh);
        const __m512i n1 = _mm512_srlv_epi16(_mm512_permutexvar_epi8(perm, r1), sh);
        const __m512i n2 = _mm512_srlv_epi16(_mm512_permutexvar_epi8(perm, r2), sh);
        const __m512i n3 = _mm512_srlv_epi16(_mm512_permutexvar_epi8(perm, r3), sh);
        const __m512i a0 = _mm512_permutexvar_epi8(n0, lut), a1 = _mm512_permutexvar_epi8(n1, lut);
        const __m512i a2 = _mm512_permutexvar_epi8(n2, lut), a3 = _mm512_permutexvar_epi8(n3, lut);
        const __mmask64 g0 = _mm512_test_epi8_mask(n0, m8), g1 = _mm512_test_epi8_mask(n1, m8);
        const __mmask64 g2 = _mm512_test_epi8_mask(n2, m8), g3 = _mm512_test_epi8_mask(n3, m8);
        const __m128i eb = _mm512_castsi512_si128(_mm512_permutex2var_epi8(r0, ie8, r2));
        const __m256 e8 = _mm256_scalef_ps(_mm256_set1_ps(1.0f), _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(eb), _mm256_set1_epi32(128))));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const int8_t *yq = (const int8_t *)(xq + t * stride) + 32 * ib;
            const df_f16 *yd = (const df_f16 *)(xq + t * stride + n) + ib;
            const __m512i y0 = _mm512_loadu_si512((const void *)yq), y1 = _mm512_loadu_si512((const void *)(yq + 64));
            const __m512i y2 = _mm512_loadu_si512((const void *)(yq + 128)), y3 = _mm512_loadu_si512((const void *)(yq + 192));
            const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a0, _mm512_mask_sub_epi8(y0, g0, _mm512_setzero_si512(), y0));
            const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a1, _mm512_mask_sub_epi8(y1, g1, _mm512_setzero_si512(), y1));
            const __m512i p2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a2, _mm512_mask_sub_epi8(y2, g2, _mm512_setzero_si512(), y2));
            const __m512i p3 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a3, _mm512_mask_sub_epi8(y3, g3, _mm512_setzero_si512(), y3));
            const __m256 s8 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)yd)), e8);
            const __m512 sz = _mm512_castps256_ps512(s8);
            acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), _mm512_permutexvar_ps(pi0, sz), acc0[t]);
            acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), _mm512_permutexvar_ps(pi1, sz), acc1[t]);
            acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p2), _mm512_permutexvar_ps(pi2, sz), acc0[t]);
            acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p3), _mm512_permutexvar_ps(pi3, sz), acc1[t]);
        }
    }
    for (; ib + 4 <= nb; ib += 4) {
        /* plain 64-byte loads (a masked load costs ~5x when its masked-off bytes fall on a
         * page not in the TLB, i.e. on matrices larger than the caches); the second one
         * would read past the row on the last step, so that one is masked */
        const __m512i r0 = _mm512_loadu_si512((const void *)&x[ib]);
        __m512i r1;
        if (ib + 6 <= nb) r1 = _mm512_loadu_si512((const void *)&x[ib + 2]);
        else r1 = _mm512_maskz_loadu_epi8(two_blocks, &x[ib + 2]);
        const __m512i n0 = _mm512_srlv_epi16(_mm512_permutexvar_epi8(perm, r0), sh);
        const __m512i n1 = _mm512_srlv_epi16(_mm512_permutexvar_epi8(perm, r1), sh);
        const __m512i a0 = _mm512_permutexvar_epi8(n0, lut), a1 = _mm512_permutexvar_epi8(n1, lut);
        const __mmask64 g0 = _mm512_test_epi8_mask(n0, m8), g1 = _mm512_test_epi8_mask(n1, m8);
        const __m128i eb = _mm256_castsi256_si128(_mm256_permutex2var_epi8(_mm512_castsi512_si256(r0), ie, _mm512_castsi512_si256(r1)));
        const __m128 e4 = _mm_scalef_ps(_mm_set1_ps(1.0f), _mm_cvtepi32_ps(_mm_sub_epi32(_mm_cvtepu8_epi32(eb), _mm_set1_epi32(128))));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const int8_t *yq = (const int8_t *)(xq + t * stride) + 32 * ib;
            const df_f16 *yd = (const df_f16 *)(xq + t * stride + n) + ib;
            const __m512i y0 = _mm512_loadu_si512((const void *)yq), y1 = _mm512_loadu_si512((const void *)(yq + 64));
            const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a0, _mm512_mask_sub_epi8(y0, g0, _mm512_setzero_si512(), y0));
            const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a1, _mm512_mask_sub_epi8(y1, g1, _mm512_setzero_si512(), y1));
            const __m128 s4 = _mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)yd)), e4);
            acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), _mm512_permutexvar_ps(pi0, _mm512_castps128_ps512(s4)), acc0[t]);
            acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), _mm512_permutexvar_ps(pi1, _mm512_castps128_ps512(s4)), acc1[t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
        const int8_t *yq = (const int8_t *)(xq + t * stride);
        const df_f16 *yd = (const df_f16 *)(xq + t * stride + n);
        float sumf = hsum512(_mm512_add_ps(acc0[t], acc1[t]));
        for (int64_t jb = ib; jb < nb; jb++) {
            int sumi = 0;
            for (int j = 0; j < 16; j++)
                sumi += yq[32 * jb + j] * df_kvalues_mxfp4[x[jb].qs[j] & 0xF] +
                        yq[32 * jb + j + 16] * df_kvalues_mxfp4[x[jb].qs[j] >> 4];
            df_f16 d;
            memcpy(&d, &yd[jb], sizeof d);
            sumf += (df_f16_to_f32(d) * df_e8m0_half(x[jb].e)) * sumi;
        }
        s[t] = sumf;
    }
}

DF_VBMI static void dot_mxfp4_q8_0_vbmi(int64_t n, float *s, const void *w, const void *xq) {
    mxfp4_dot_vbmi_nt(n, s, w, xq, 0, 1);
}
DF_VBMI static void dot4_mxfp4_q8_0_vbmi(int64_t n, float *s, const void *w, const void *xq, size_t stride) {
    mxfp4_dot_vbmi_nt(n, s, w, xq, stride, 4);
}

/* ------------------------------------------------------------------ Q4_K x Q8_K */


/* GG selects the float order (the integer sums are exact in every form):
 *   1  ggml_vec_dot_q4_K_q8_K's AVX2 branch (ggml's AVX-512 builds use it): 8 lanes (lane l =
 *      bytes 4l..4l+3 of each 32-byte chunk, low and high nibbles), acc = fma(d, lanes, acc) with
 *      d = d_y*d_x; mins as 4 lanes (m_2k s_2k + m_2k+1 s_2k+1), acc_m = fma(-d_y*dmin, ., acc_m);
 *      hsum_float_8(acc) + ((m0+m2) + (m1+m3));
 *   2  ggml's repacked q4_K_8x8 gemv (weights with rows % 8 == 0 on AVX2 machines; one token,
 *      the last n_tok % 4 tokens of a batch, and every row of MUL_MAT_ID): the block's whole
 *      sums as one float each, acc = fma(sum, d_x*d_y, acc), accm = fma(min sum, dmin_x*d_y,
 *      accm), result acc - accm;
 *   3  ggml's repacked q4_K_8x8 gemm (the first n_tok - n_tok % 4 tokens of a plain matmul):
 *      as 2 but one fma per 64 elements (two sub-blocks) instead of per block. */
static inline __attribute__((always_inline)) void q4k_dot_nt(int64_t n, float *s, const void *w,
                                                             const char *xq, size_t stride, const int NT,
                                                             const int GG) {
    const df_block_q4_K *x = w;
    const int64_t nb = n / 256;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* int16 lane -> scale index: first 16 lanes sub-block 2c, last 16 sub-block 2c+1 */
    const __m512i idx0 = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i two = _mm512_set1_epi16(2);
    __m256 acc8[4];
    __m128 accm4[4];
    float accs[4], accms[4];
    __m128 accv = _mm_setzero_ps(), accmv = _mm_setzero_ps(); /* GG 3, NT 4 */
    __m256i gi[4][4], gm[4][4]; /* GG 2: a group of 4 blocks per token */
    float gd[4][4], gdm[4][4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
        acc8[t] = _mm256_setzero_ps(); accm4[t] = _mm_setzero_ps();
        accs[t] = 0.0f; accms[t] = 0.0f;
    }
    for (int64_t i = 0; i < nb; i++) {
        const __m128i scm = k4_scales(x[i].scales);
        const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_srli_si128(scm, 8));
        /* Σ_k m_k (bsums[2k] + bsums[2k+1]): bsums pairs x mins repeated twice */
        const __m256i mrep = _mm256_permutexvar_epi16(
            _mm256_set_epi16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0), mn16);
        __m512i isum[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
        __m512i idx = idx0;
        __m256i pc[4][4]; /* GG 3: per 64-element chunk sums, halves added */
        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const __m512i q = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), m4);
            const __m512i scv = _mm512_permutexvar_epi16(idx, sc16);
            idx = _mm512_add_epi16(idx, two);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const df_block_q8_K *y = (const df_block_q8_K *)(xq + t * stride) + i;
                const __m512i yv = _mm512_loadu_si512((const void *)(y->qs + 64 * c));
                const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(q, yv), scv);
                if (GG == 3) pc[t][c] = _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
                else isum[t] = _mm512_add_epi32(isum[t], p);
            }
        }
        const float dx = df_f16_to_f32(x[i].d), dmx = df_f16_to_f32(x[i].dmin);
        if (GG == 3 && NT == 4) {
            /* the four tokens' chains as the lanes of one vector (same fma per lane) */
            const df_block_q8_K *y0 = (const df_block_q8_K *)xq + i, *y1 = (const df_block_q8_K *)(xq + stride) + i,
                                *y2 = (const df_block_q8_K *)(xq + 2 * stride) + i,
                                *y3 = (const df_block_q8_K *)(xq + 3 * stride) + i;
            const __m128 yd = _mm_set_ps(y3->d, y2->d, y1->d, y0->d);
            const __m128 D4 = _mm_mul_ps(_mm_set1_ps(dx), yd), DM4 = _mm_mul_ps(_mm_set1_ps(dmx), yd);
            const __m256i mp0 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y0->bsums), mrep);
            const __m256i mp1 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y1->bsums), mrep);
            const __m256i mp2 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y2->bsums), mrep);
            const __m256i mp3 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y3->bsums), mrep);
            /* A/B lanes: [t c0, t c1, t' c0, t' c1 | t c2, t c3, t' c2, t' c3] */
            const __m256 A = _mm256_castsi256_ps(_mm256_hadd_epi32(mp0, mp1));
            const __m256 B = _mm256_castsi256_ps(_mm256_hadd_epi32(mp2, mp3));
            const __m128 Al = _mm256_castps256_ps128(A), Ah = _mm256_extractf128_ps(A, 1);
            const __m128 Bl = _mm256_castps256_ps128(B), Bh = _mm256_extractf128_ps(B, 1);
            __m128i M[4];
            M[0] = _mm_castps_si128(_mm_shuffle_ps(Al, Bl, _MM_SHUFFLE(2, 0, 2, 0)));
            M[1] = _mm_castps_si128(_mm_shuffle_ps(Al, Bl, _MM_SHUFFLE(3, 1, 3, 1)));
            M[2] = _mm_castps_si128(_mm_shuffle_ps(Ah, Bh, _MM_SHUFFLE(2, 0, 2, 0)));
            M[3] = _mm_castps_si128(_mm_shuffle_ps(Ah, Bh, _MM_SHUFFLE(3, 1, 3, 1)));
            for (int c = 0; c < 4; c++) {
                const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(pc[0][c], pc[1][c]),
                                                    _mm256_hadd_epi32(pc[2][c], pc[3][c]));
                const __m128i S = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                accv = _mm_fmadd_ps(_mm_cvtepi32_ps(S), D4, accv);
                accmv = _mm_fmadd_ps(_mm_cvtepi32_ps(M[c]), DM4, accmv);
            }
            continue;
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const df_block_q8_K *y = (const df_block_q8_K *)(xq + t * stride) + i;
            const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mrep);
            if (GG == 1) {
                /* lane l (< 8) of isum holds low-nibble bytes 4l.., lane l+8 the high ones */
                const __m256i i8 = _mm256_add_epi32(_mm512_castsi512_si256(isum[t]),
                                                    _mm512_extracti64x4_epi64(isum[t], 1));
                acc8[t] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dx), _mm256_cvtepi32_ps(i8), acc8[t]);
                /* mprod lane k = m_k s_k; ggml's 4 lanes pair (2j, 2j+1) */
                const __m256i h = _mm256_hadd_epi32(mprod, mprod);
                const __m128i p4 = _mm_unpacklo_epi64(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                accm4[t] = _mm_fmadd_ps(_mm_set1_ps(-y->d * dmx), _mm_cvtepi32_ps(p4), accm4[t]);
            } else if (GG == 3) {
                /* the 4 chunk sums at once (integer adds: any order is exact) */
                const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(pc[t][0], pc[t][1]),
                                                    _mm256_hadd_epi32(pc[t][2], pc[t][3]));
                const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                int32_t isc[4], mk[8];
                _mm_storeu_si128((__m128i *)isc, s4);
                _mm256_storeu_si256((__m256i *)mk, mprod);
                for (int c = 0; c < 4; c++) {
                    accs[t] = __builtin_fmaf((float)isc[c], dx * y->d, accs[t]);
                    accms[t] = __builtin_fmaf((float)(mk[2 * c] + mk[2 * c + 1]), dmx * y->d, accms[t]);
                }
            } else {
                /* GG 2: the block sums of 4 blocks reduced together (exact integer adds),
                 * then the per-block fma chain in block order */
                const int j = (int)(i & 3);
                gi[t][j] = _mm256_add_epi32(_mm512_castsi512_si256(isum[t]), _mm512_extracti64x4_epi64(isum[t], 1));
                gm[t][j] = mprod;
                gd[t][j] = dx * y->d;
                gdm[t][j] = dmx * y->d;
                if (j == 3 || i == nb - 1) {
                    for (int b = j + 1; b < 4; b++) gi[t][b] = gm[t][b] = _mm256_setzero_si256();
                    const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(gi[t][0], gi[t][1]),
                                                         _mm256_hadd_epi32(gi[t][2], gi[t][3]));
                    const __m256i hm = _mm256_hadd_epi32(_mm256_hadd_epi32(gm[t][0], gm[t][1]),
                                                         _mm256_hadd_epi32(gm[t][2], gm[t][3]));
                    int32_t is[4], im[4];
                    _mm_storeu_si128((__m128i *)is, _mm_add_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)));
                    _mm_storeu_si128((__m128i *)im, _mm_add_epi32(_mm256_castsi256_si128(hm), _mm256_extracti128_si256(hm, 1)));
                    for (int b = 0; b <= j; b++) {
                        accs[t] = __builtin_fmaf((float)is[b], gd[t][b], accs[t]);
                        accms[t] = __builtin_fmaf((float)im[b], gdm[t][b], accms[t]);
                    }
                }
            }
        }
    }
    if (GG == 3 && NT == 4) {
        _mm_storeu_ps(s, _mm_sub_ps(accv, accmv));
        return;
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
        if (GG == 1) {
            __m128 a = _mm_add_ps(accm4[t], _mm_movehl_ps(accm4[t], accm4[t]));
            a = _mm_add_ss(a, _mm_movehdup_ps(a));
            s[t] = hsum_f8(acc8[t]) + _mm_cvtss_f32(a);
        } else {
            s[t] = accs[t] - accms[t]; /* GG 2 and 3 */
        }
    }
}

static void dot_q4_K_q8_K_ggml(int64_t n, float *s, const void *w, const void *xq) {
    q4k_dot_nt(n, s, w, xq, 0, 1, 1);
}
static void dot4_q4_K_q8_K_ggml(int64_t n, float *s, const void *w, const void *xq, size_t stride) {
    q4k_dot_nt(n, s, w, xq, stride, 4, 1);
}
/* One block's exact sums for GG 2: scale-weighted products (8 lanes) and mins x bsums (8 lanes). */
static inline __attribute__((always_inline)) void q4k_block_sums(const df_block_q4_K *x, const df_block_q8_K *y,
                                                                 __m256i *is, __m256i *ms) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i idx0 = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i two = _mm512_set1_epi16(2);
    const __m128i scm = k4_scales(x->scales);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_srli_si128(scm, 8));
    const __m256i mrep = _mm256_permutexvar_epi16(
        _mm256_set_epi16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0), mn16);
    __m512i isum = _mm512_setzero_si512(), idx = idx0;
    for (int c = 0; c < 4; c++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
        const __m512i q = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), m4);
        const __m512i scv = _mm512_permutexvar_epi16(idx, sc16);
        idx = _mm512_add_epi16(idx, two);
        const __m512i yv = _mm512_loadu_si512((const void *)(y->qs + 64 * c));
        isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yv), scv));
    }
    *is = _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));
    *ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mrep);
}

/* GG 2 for one activation row, 4 blocks per step: their integer sums reduced together, then
 * the per-block fma chain (lane 0 of a vector, shifted along) — the same float operations as
 * q4k_dot_nt's GG 2, with fewer instructions around them. */
static void dot_q4_K_q8_K_ggml8(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_K *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    __m128 acc = _mm_setzero_ps(), accm = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m256i I[4], M[4];
#pragma GCC unroll 1
        for (int b = 0; b < 4; b++) q4k_block_sums(&x[i + b], &y[i + b], &I[b], &M[b]);
        const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(I[0], I[1]), _mm256_hadd_epi32(I[2], I[3]));
        const __m256i hm = _mm256_hadd_epi32(_mm256_hadd_epi32(M[0], M[1]), _mm256_hadd_epi32(M[2], M[3]));
        __m128 S = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)));
        __m128 Sm = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(hm), _mm256_extracti128_si256(hm, 1)));
        const __m128 yd = _mm_setr_ps(y[i].d, y[i + 1].d, y[i + 2].d, y[i + 3].d);
        __m128 D = _mm_mul_ps(_mm_setr_ps(df_f16_to_f32(x[i].d), df_f16_to_f32(x[i + 1].d),
                                          df_f16_to_f32(x[i + 2].d), df_f16_to_f32(x[i + 3].d)), yd);
        __m128 DM = _mm_mul_ps(_mm_setr_ps(df_f16_to_f32(x[i].dmin), df_f16_to_f32(x[i + 1].dmin),
                                           df_f16_to_f32(x[i + 2].dmin), df_f16_to_f32(x[i + 3].dmin)), yd);
        for (int b = 0; b < 4; b++) {
            acc = _mm_fmadd_ss(S, D, acc);
            accm = _mm_fmadd_ss(Sm, DM, accm);
            S = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(S), 4));
            Sm = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(Sm), 4));
            D = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(D), 4));
            DM = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(DM), 4));
        }
    }
    for (; i < nb; i++) {
        __m256i I, M;
        q4k_block_sums(&x[i], &y[i], &I, &M);
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(I, M), _mm256_setzero_si256());
        const __m128i r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128 f = _mm_cvtepi32_ps(r); /* [isum, msum, 0, 0] */
        acc = _mm_fmadd_ss(f, _mm_set_ss(df_f16_to_f32(x[i].d) * y[i].d), acc);
        accm = _mm_fmadd_ss(_mm_movehdup_ps(f), _mm_set_ss(df_f16_to_f32(x[i].dmin) * y[i].d), accm);
    }
    *s = _mm_cvtss_f32(_mm_sub_ss(acc, accm));
}
static void dot4_q4_K_q8_K_ggml8(int64_t n, float *s, const void *w, const void *xq, size_t stride) {
    q4k_dot_nt(n, s, w, xq, stride, 4, 2);
}
static void dot_q4_K_q8_K_ggml8g(int64_t n, float *s, const void *w, const void *xq) {
    q4k_dot_nt(n, s, w, xq, 0, 1, 3);
}
static void dot4_q4_K_q8_K_ggml8g(int64_t n, float *s, const void *w, const void *xq, size_t stride) {
    q4k_dot_nt(n, s, w, xq, stride, 4, 3);
}

/* ------------------------------------------------------------------ Q4_K x8 (repacked) x Q8_K */

/* 8 interleaved rows (df_block_q4_Kx8): one 64-byte load holds 8 quants of each row in its low
 * nibbles and the next 8 in its high ones; vpdpbusd against an 8-byte activation chunk broadcast
 * to all rows gives 2 int32 lanes per row (2r, 2r+1), the 4 products of a sub-block stay below
 * 2^15, so vpdpwssd applies the 6-bit sub-block scales (zero-extended into the lanes by one masked
 * vpermb) and accumulates the block's exact integer sum. The float operations are ggml's (one fma
 * per block and row for its gemv, per 64 columns for its gemm), with the 8 rows as vector lanes. */
static inline __attribute__((always_inline)) DF_VBMI void q4kx8_scales(const df_block_q4_Kx8 *x, __m512i *scv,
                                                                        __m512i *mnA, __m512i *mnB) {
    const __m512i S = _mm512_loadu_si512((const void *)x->sc);
    *scv = _mm512_and_si512(S, _mm512_set1_epi8(63));
    const __m512i mh = _mm512_and_si512(_mm512_srli_epi16(S, 6), _mm512_set1_epi8(3));
    const __m256i L = _mm256_loadu_si256((const __m256i *)x->mlo), m4 = _mm256_set1_epi8(0xF);
    const __m512i ml = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(L, m4)),
                                          _mm256_and_si256(_mm256_srli_epi16(L, 4), m4), 1);
    const __m512i mn = _mm512_or_si512(ml, _mm512_slli_epi16(mh, 4)); /* byte 8r+j: min j of row r */
    *mnA = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(mn));           /* rows 0-3 as int16 */
    *mnB = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(mn, 1));     /* rows 4-7 */
}
/* the 8 sub-block sums bsums[2j] + bsums[2j+1] as int16, repeated in each 128-bit lane */
static inline __attribute__((always_inline)) __m512i q8k_ysums(const df_block_q8_K *y) {
    const __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
    return _mm512_broadcast_i32x4(_mm256_cvtepi32_epi16(s));
}
/* lanes 2r + 2r+1 -> lane r */
static inline __attribute__((always_inline)) __m256i pairsum8(__m512i v) {
    return _mm512_cvtepi64_epi32(_mm512_add_epi32(v, _mm512_srli_epi64(v, 32)));
}
static inline __attribute__((always_inline)) __m512i bcast8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}
/* scale of sub-block j of each row r, zero-extended into int32 lanes 2r and 2r+1 */
static inline __attribute__((always_inline)) DF_VBMI __m512i q4kx8_scale_j(__m512i scv, int j) {
    const __m512i idx = _mm512_add_epi32(_mm512_set_epi32(56, 56, 48, 48, 40, 40, 32, 32, 24, 24, 16, 16, 8, 8, 0, 0),
                                         _mm512_set1_epi32(j));
    return _mm512_maskz_permutexvar_epi8(0x1111111111111111ull, idx, scv);
}
/* NT activation rows (at `stride` bytes) share the weight decode; GEMM 0: ggml's gemv order
 * (one fma per block), 1: its gemm order (one fma per 64 columns). Each row's float operations
 * are the same for every NT. */
static inline __attribute__((always_inline)) DF_VBMI void q4kx8_nt(int64_t n, float *s, size_t lds, const void *w,
                                                                    const char *xq, size_t stride, const int NT,
                                                                    const int GEMM) {
    const df_block_q4_Kx8 *x = w;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    __m256 acc[4], accm[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const df_block_q8_K *y[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) y[t] = (const df_block_q8_K *)(xq + t * stride) + i;
        __m512i scv, mnA, mnB;
        q4kx8_scales(&x[i], &scv, &mnA, &mnB);
        __m512i A[4], B[4];
        __m256 D[4], DM[4];
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[i].d));
        const __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[i].dmin));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const __m512i ys = q8k_ysums(y[t]);
            A[t] = _mm512_madd_epi16(mnA, ys); /* lane 4r+p: min pair p of row r (rows 0-3) */
            B[t] = _mm512_madd_epi16(mnB, ys); /* rows 4-7 */
            D[t] = _mm256_mul_ps(d8, _mm256_set1_ps(y[t]->d));
            DM[t] = _mm256_mul_ps(dm8, _mm256_set1_ps(y[t]->d));
        }
        __m512i I[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) I[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            for (int jj = 0; jj < 2; jj++) {
                const int j = 2 * c + jj;
                __m512i P[4];
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) P[t] = _mm512_setzero_si512();
                for (int h = 0; h < 2; h++) {
                    const int z = 2 * j + h;
                    const __m512i W = _mm512_loadu_si512((const void *)(x[i].qs + 64 * z));
                    const __m512i lo = _mm512_and_si512(W, m4), hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), m4);
#pragma GCC unroll 4
                    for (int t = 0; t < NT; t++) {
                        P[t] = _mm512_dpbusd_epi32(P[t], lo, bcast8(y[t]->qs + 16 * z));
                        P[t] = _mm512_dpbusd_epi32(P[t], hi, bcast8(y[t]->qs + 16 * z + 8));
                    }
                }
                const __m512i sc = q4kx8_scale_j(scv, j);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) I[t] = _mm512_dpwssd_epi32(I[t], P[t], sc);
            }
            if (GEMM) {
                /* min terms of sub-blocks 2c, 2c+1: lane 4r + c of A / B */
                const __m512i ic = _mm512_add_epi32(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 28, 24, 20, 16, 12, 8, 4, 0),
                                                    _mm512_set1_epi32(c));
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const __m256i Mc = _mm512_castsi512_si256(_mm512_permutex2var_epi32(A[t], ic, B[t]));
                    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pairsum8(I[t])), D[t], acc[t]);
                    accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Mc), DM[t], accm[t]);
                    I[t] = _mm512_setzero_si512();
                }
            }
        }
        if (!GEMM) {
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const __m512i M = _mm512_add_epi32(_mm512_permutex2var_epi32(A[t], ev, B[t]),
                                                   _mm512_permutex2var_epi32(A[t], od, B[t]));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pairsum8(I[t])), D[t], acc[t]);
                accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pairsum8(M)), DM[t], accm[t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) _mm256_storeu_ps(s + t * lds, _mm256_sub_ps(acc[t], accm[t]));
}

DF_VBMI static void dot_q4_Kx8_q8_K_vbmi(int64_t n, float *s, const void *w, const void *xq) {
    q4kx8_nt(n, s, 0, w, xq, 0, 1, 0);
}
DF_VBMI static void dot4_q4_Kx8_q8_K_vbmi(int64_t n, float *s, size_t lds, const void *w, const void *xq, size_t stride) {
    q4kx8_nt(n, s, lds, w, xq, stride, 4, 0);
}
DF_VBMI static void dot4_q4_Kx8_q8_K_g_vbmi(int64_t n, float *s, size_t lds, const void *w, const void *xq, size_t stride) {
    q4kx8_nt(n, s, lds, w, xq, stride, 4, 1);
}

/* ------------------------------------------------------------------ Q8_K activations */

/* Bit-identical to df_quantize_row_q8_K_ref: first element of largest |x| sets the sign of
 * the scale; nearest_int via the 1.5*2^23 trick (mul then add, two roundings as in C). */
static void from_q8_K(const float *x, void *dst, int64_t n) {
    df_block_q8_K *y = dst;
    const __m512 sgn = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m512 am = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int k = 0; k < 16; k++) {
            const __m512 v = _mm512_loadu_ps(x + 16 * k);
            bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            am = _mm512_max_ps(am, _mm512_andnot_ps(sgn, v));
        }
        if (bad) { /* NaN: the reference's comparison order defines the result */
            df_quantize_row_q8_K_ref(x, &y[i], 256);
            continue;
        }
        const float amax = _mm512_reduce_max_ps(am);
        if (!amax) {
            y[i].d = 0;
            memset(y[i].qs, 0, 256);
            memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        float max = 0;
        const __m512 va = _mm512_set1_ps(amax);
        for (int k = 0; k < 16; k++) {
            __mmask16 m = _mm512_cmp_ps_mask(_mm512_andnot_ps(sgn, _mm512_loadu_ps(x + 16 * k)), va, _CMP_EQ_OQ);
            if (m) { max = x[16 * k + __builtin_ctz(m)]; break; }
        }
        const float iscale = -127.f / max;
        const __m512 vs = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(12582912.f);
        const __m512i mant = _mm512_set1_epi32(0x007fffff), off = _mm512_set1_epi32(0x00400000);
        const __m512i lim = _mm512_set1_epi32(127);
        for (int k = 0; k < 16; k++) {
            const __m512 prod = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), vs);
            const __m512 t = _mm512_add_ps(prod, magic);
            __m512i q = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(t), mant), off);
            q = _mm512_min_epi32(q, lim);
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * k), _mm512_cvtsepi32_epi8(q));
            y[i].bsums[k] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1 / iscale;
    }
}

void df_kernels_fill_avx512(df_kernel_table *t, const df_cpu_caps *caps) {
    t->name = "avx512";
    t->isa = DF_ISA_AVX512;
    t->vec_dot[DF_TYPE_F32] = dot_f32;
    t->vec_dot[DF_TYPE_F16] = dot_f16;
    t->vec_dot[DF_TYPE_BF16] = dot_bf16;
    t->vec_dot[DF_TYPE_Q8_0] = dot_q8_0_q8_0_ggml;
    t->vec_dot[DF_TYPE_Q4_0] = dot_q4_0_q8_0;
    t->vec_dot[DF_TYPE_IQ4_NL] = dot_iq4_nl_q8_0;
    t->vec_dot[DF_TYPE_MXFP4] = dot_mxfp4_q8_0;
    t->vec_dot[DF_TYPE_Q4_K] = dot_q4_K_q8_K_ggml;
    t->vec_dot4[DF_TYPE_Q4_K] = dot4_q4_K_q8_K_ggml;
    t->vec_dot_r8[DF_TYPE_Q4_K] = dot_q4_K_q8_K_ggml8;
    t->vec_dot4_r8[DF_TYPE_Q4_K] = dot4_q4_K_q8_K_ggml8;
    t->vec_dot_r8g[DF_TYPE_Q4_K] = dot_q4_K_q8_K_ggml8g;
    t->vec_dot4_r8g[DF_TYPE_Q4_K] = dot4_q4_K_q8_K_ggml8g;
    t->vec_dot4[DF_TYPE_MXFP4] = dot4_mxfp4_q8_0;
    df_kernels_fill_avx512_kq(t, caps); /* Q2_K, Q3_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS */
    t->from_float[DF_TYPE_F16] = from_f16;
    t->from_float[DF_TYPE_Q8_0] = from_q8_0;
    t->from_float[DF_TYPE_Q8_1] = from_q8_1;
    t->from_float[DF_TYPE_Q8_K] = from_q8_K;
    df_kernels_fill_avx512_f32(t);
    /* last: these replace the plain AVX-512 forms where the CPU has the extensions */
    if (caps->avx512vbmi) {
        t->vec_dot[DF_TYPE_MXFP4] = dot_mxfp4_q8_0_vbmi;
        t->vec_dot4[DF_TYPE_MXFP4] = dot4_mxfp4_q8_0_vbmi;
        t->from_float_w[DF_TYPE_MXFP4] = from_q8_0_split; /* the layout these two read */
        t->vec_dot_x8[DF_TYPE_Q4_K_X8] = dot_q4_Kx8_q8_K_vbmi;
        t->vec_dot4_x8[DF_TYPE_Q4_K_X8] = dot4_q4_Kx8_q8_K_vbmi;
        t->vec_dot4_x8g[DF_TYPE_Q4_K_X8] = dot4_q4_Kx8_q8_K_g_vbmi;
    }
}
