/* arm_neon.c — AArch64 NEON kernels using the dot-product extension (sdot) and FP16
 * conversions (compiled with -march=armv8.2-a+dotprod+fp16; dispatch.c enables this table only
 * when the CPU reports asimddp and fphp/asimdhp).
 * Same formulas as ref.c: exact int8 sums per block, scaled in F32 (different float order).
 * Threading: pure functions. */
#include <arm_neon.h>

#include "kernels/kernels_impl.h"

/* ------------------------------------------------------------------ F16 */

static void dot_f16(int64_t n, float *s, const void *w, const void *xq) {
    const __fp16 *a = (const __fp16 *)w, *b = (const __fp16 *)xq;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0), acc2 = vdupq_n_f32(0), acc3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float16x8_t a0 = vld1q_f16(a + i), a1 = vld1q_f16(a + i + 8);
        float16x8_t b0 = vld1q_f16(b + i), b1 = vld1q_f16(b + i + 8);
        acc0 = vfmaq_f32(acc0, vcvt_f32_f16(vget_low_f16(a0)), vcvt_f32_f16(vget_low_f16(b0)));
        acc1 = vfmaq_f32(acc1, vcvt_high_f32_f16(a0), vcvt_high_f32_f16(b0));
        acc2 = vfmaq_f32(acc2, vcvt_f32_f16(vget_low_f16(a1)), vcvt_f32_f16(vget_low_f16(b1)));
        acc3 = vfmaq_f32(acc3, vcvt_high_f32_f16(a1), vcvt_high_f32_f16(b1));
    }
    double sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    const df_f16 *ua = w, *ub = xq;
    for (; i < n; i++) sum += (double)(df_f16_to_f32(ua[i]) * df_f16_to_f32(ub[i]));
    *s = (float)sum;
}

static void from_f16(const float *x, void *dst, int64_t n) {
    __fp16 *d = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_f16(d + i, vcvt_f16_f32(vld1q_f32(x + i)));
    df_f16 *u = dst;
    for (; i < n; i++) u[i] = df_f32_to_f16(x[i]);
}

static void dot_f32(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0), acc2 = vdupq_n_f32(0), acc3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
        acc1 = vfmaq_f32(acc1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        acc2 = vfmaq_f32(acc2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        acc3 = vfmaq_f32(acc3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    double sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

static inline float32x4_t bf16_lo(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16)); }
static inline float32x4_t bf16_hi(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_high_n_u16(v, 16)); }

static void dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
    const uint16_t *a = w, *b = xq;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0), acc2 = vdupq_n_f32(0), acc3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const uint16x8_t a0 = vld1q_u16(a + i), a1 = vld1q_u16(a + i + 8);
        const uint16x8_t b0 = vld1q_u16(b + i), b1 = vld1q_u16(b + i + 8);
        acc0 = vfmaq_f32(acc0, bf16_lo(a0), bf16_lo(b0));
        acc1 = vfmaq_f32(acc1, bf16_hi(a0), bf16_hi(b0));
        acc2 = vfmaq_f32(acc2, bf16_lo(a1), bf16_lo(b1));
        acc3 = vfmaq_f32(acc3, bf16_hi(a1), bf16_hi(b1));
    }
    double sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += (double)(df_bf16_to_f32(a[i]) * df_bf16_to_f32(b[i]));
    *s = (float)sum;
}

/* ------------------------------------------------------------------ Q8_0 */

static void dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q8_0 *x = w, *y = xq;
    const int64_t nb = n / 32;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        int32x4_t p0 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(x[ib].qs), vld1q_s8(y[ib].qs)),
                                 vld1q_s8(x[ib].qs + 16), vld1q_s8(y[ib].qs + 16));
        int32x4_t p1 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(x[ib + 1].qs), vld1q_s8(y[ib + 1].qs)),
                                 vld1q_s8(x[ib + 1].qs + 16), vld1q_s8(y[ib + 1].qs + 16));
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(p1), df_f16_to_f32(x[ib + 1].d) * df_f16_to_f32(y[ib + 1].d));
    }
    for (; ib < nb; ib++) {
        int32x4_t p0 = vdotq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(x[ib].qs), vld1q_s8(y[ib].qs)),
                                 vld1q_s8(x[ib].qs + 16), vld1q_s8(y[ib].qs + 16));
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = vaddvq_f32(vaddq_f32(acc0, acc1));
}

/* ------------------------------------------------------------------ 4-bit 32-blocks x Q8_0 */

static inline int32x4_t dot_nib(uint8x16_t q, int8x16_t lut, const int8_t *y) {
    const int8x16_t lo = vqtbl1q_s8(lut, vandq_u8(q, vdupq_n_u8(0x0F)));
    const int8x16_t hi = vqtbl1q_s8(lut, vshrq_n_u8(q, 4));
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(y)), hi, vld1q_s8(y + 16));
}

static const int8_t k_q4_0_lut[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

static void dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_0 *x = w;
    const df_block_q8_0 *y = xq;
    const int8x16_t lut = vld1q_s8(k_q4_0_lut);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int32x4_t p = dot_nib(vld1q_u8(x[ib].qs), lut, y[ib].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = vaddvq_f32(acc);
}

static void dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_nl *x = w;
    const df_block_q8_0 *y = xq;
    const int8x16_t lut = vld1q_s8(df_kvalues_iq4nl);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int32x4_t p = dot_nib(vld1q_u8(x[ib].qs), lut, y[ib].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), df_f16_to_f32(y[ib].d) * df_f16_to_f32(x[ib].d));
    }
    *s = vaddvq_f32(acc);
}

static void dot_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_mxfp4 *x = w;
    const df_block_q8_0 *y = xq;
    const int8x16_t lut = vld1q_s8(df_kvalues_mxfp4);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int32x4_t p = dot_nib(vld1q_u8(x[ib].qs), lut, y[ib].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), df_f16_to_f32(y[ib].d) * df_e8m0_half(x[ib].e));
    }
    *s = vaddvq_f32(acc);
}

/* ------------------------------------------------------------------ Q4_K x Q8_K */

static void dot_q4_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_K *x = w;
    const df_block_q8_K *y = xq;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        uint32_t u[3];
        memcpy(u, x[i].scales, 12);
        const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
        uint32_t sc32[2] = {u[0] & k1, (u[2] & k2) | (((u[0] >> 6) & k3) << 4)};
        uint32_t mn32[2] = {u[1] & k1, ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4)};
        const uint8_t *sc = (const uint8_t *)sc32, *mn = (const uint8_t *)mn32;
        /* Σ m_k (bsums[2k] + bsums[2k+1]) */
        const int16x8_t b0 = vld1q_s16(y[i].bsums), b1 = vld1q_s16(y[i].bsums + 8);
        const int16x8_t bp = vpaddq_s16(b0, b1); /* pairwise sums: k = 0..7 */
        const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
        const int32_t summs = vaddvq_s32(vmull_s16(vget_low_s16(bp), vget_low_s16(m16))) +
                              vaddvq_s32(vmull_high_s16(bp, m16));
        int32_t isum = 0;
        const uint8_t *q = x[i].qs;
        const int8_t *q8 = y[i].qs;
        for (int c = 0; c < 4; c++, q += 32, q8 += 64) {
            const uint8x16_t v0 = vld1q_u8(q), v1 = vld1q_u8(q + 16);
            int32x4_t plo = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(v0, m4)), vld1q_s8(q8));
            plo = vdotq_s32(plo, vreinterpretq_s8_u8(vandq_u8(v1, m4)), vld1q_s8(q8 + 16));
            int32x4_t phi = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), vld1q_s8(q8 + 32));
            phi = vdotq_s32(phi, vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)), vld1q_s8(q8 + 48));
            isum += vaddvq_s32(plo) * sc[2 * c] + vaddvq_s32(phi) * sc[2 * c + 1];
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum - (df_f16_to_f32(x[i].dmin) * y[i].d) * summs;
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q6_K x Q8_K */

static void dot_q6_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q6_K *x = w;
    const df_block_q8_K *y = xq;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const int8x16_t m32 = vdupq_n_s8(32);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int32_t isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *L = x[i].ql + 64 * h, *H = x[i].qh + 32 * h;
            const int8_t *sc = x[i].scales + 8 * h, *q8 = y[i].qs + 128 * h;
            for (int l = 0; l < 32; l += 16) {
                const int t = l / 16;
                const uint8x16_t l0 = vld1q_u8(L + l), l1 = vld1q_u8(L + l + 32), hh = vld1q_u8(H + l);
                const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hh, m3), 4))), m32);
                const int8x16_t q2 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hh, 2), m3), 4))), m32);
                const int8x16_t q3 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hh, 4), m3), 4))), m32);
                const int8x16_t q4 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hh, 6), 4))), m32);
                const int32x4_t z = vdupq_n_s32(0);
                isum += vaddvq_s32(vdotq_s32(z, q1, vld1q_s8(q8 + l))) * sc[t] +
                        vaddvq_s32(vdotq_s32(z, q2, vld1q_s8(q8 + l + 32))) * sc[t + 2] +
                        vaddvq_s32(vdotq_s32(z, q3, vld1q_s8(q8 + l + 64))) * sc[t + 4] +
                        vaddvq_s32(vdotq_s32(z, q4, vld1q_s8(q8 + l + 96))) * sc[t + 6];
            }
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum;
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q2_K / Q3_K x Q8_K
 * 16-element sub-blocks: one sdot per 16 codes, the integer scale applied to its sum; the
 * super-block integer is exact, so the result equals ref.c bit for bit. */

static void dot_q2_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q2_K *x = w;
    const df_block_q8_K *y = xq;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8x16_t sc = vld1q_u8(x[i].scales);
        const int16x8_t mn0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(sc, 4))));
        const int16x8_t mn1 = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8(sc, 4)));
        const int16x8_t b0 = vld1q_s16(y[i].bsums), b1 = vld1q_s16(y[i].bsums + 8);
        const int32_t summs = vaddvq_s32(vaddq_s32(vaddq_s32(vmull_s16(vget_low_s16(b0), vget_low_s16(mn0)), vmull_high_s16(b0, mn0)),
                                                   vaddq_s32(vmull_s16(vget_low_s16(b1), vget_low_s16(mn1)), vmull_high_s16(b1, mn1))));
        int32_t isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * h), q1 = vld1q_u8(x[i].qs + 32 * h + 16);
            const int8_t *q8 = y[i].qs + 128 * h;
            const uint8_t *scl = x[i].scales + 8 * h;
            for (int j = 0; j < 4; j++, q8 += 32) {
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
                const int8x16_t qa = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, shift), m3));
                const int8x16_t qb = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, shift), m3));
                isum += (scl[2 * j] & 0xF) * vaddvq_s32(vdotq_s32(vdupq_n_s32(0), qa, vld1q_s8(q8))) +
                        (scl[2 * j + 1] & 0xF) * vaddvq_s32(vdotq_s32(vdupq_n_s32(0), qb, vld1q_s8(q8 + 16)));
            }
        }
        const float dall = y[i].d * df_f16_to_f32(x[i].d);
        const float dmin = y[i].d * df_f16_to_f32(x[i].dmin);
        sumf += dall * isum - dmin * summs;
    }
    *s = sumf;
}

static void dot_q3_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q3_K *x = w;
    const df_block_q8_K *y = xq;
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int8_t sc[16];
        for (int k = 0; k < 16; k++) {
            int lo = k < 8 ? x[i].scales[k] & 0xF : x[i].scales[k - 8] >> 4;
            int hi = (x[i].scales[8 + k % 4] >> (2 * (k / 4))) & 3;
            sc[k] = (int8_t)((lo | (hi << 4)) - 32);
        }
        const uint8x16_t hm0 = vld1q_u8(x[i].hmask), hm1 = vld1q_u8(x[i].hmask + 16);
        int32_t isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * h), q1 = vld1q_u8(x[i].qs + 32 * h + 16);
            const int8_t *q8 = y[i].qs + 128 * h;
            for (int j = 0; j < 4; j++, q8 += 32) {
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + j)));
                /* q - 4 where the high bit is clear */
                const int8x16_t qa = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshlq_u8(q0, shift), m3), vbicq_u8(four, vtstq_u8(hm0, bit))));
                const int8x16_t qb = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshlq_u8(q1, shift), m3), vbicq_u8(four, vtstq_u8(hm1, bit))));
                isum += sc[8 * h + 2 * j] * vaddvq_s32(vdotq_s32(vdupq_n_s32(0), qa, vld1q_s8(q8))) +
                        sc[8 * h + 2 * j + 1] * vaddvq_s32(vdotq_s32(vdupq_n_s32(0), qb, vld1q_s8(q8 + 16)));
            }
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum;
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ i-quants x Q8_K
 * Grid entries loaded as 64-bit lanes, signs applied to them by multiplying with +-1 bytes
 * from a table per 7-bit sign index (ksigns parity included), sdot against the activations,
 * integer sub-block scales on exact sums: bit-identical to ref.c. */
static uint64_t k_signs64[128]; /* byte j: 0xFF (-1) if bit j of ksigns_iq2xs[i], else 0x01 */

static inline int8x16_t u64x2(uint64_t lo, uint64_t hi) {
    return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
}

static void dot_iq2_xxs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_xxs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++, q8 += 32) {
            uint32_t a[2];
            memcpy(a, x[i].qs + 4 * ib, 8);
            const uint8_t *a8 = (const uint8_t *)a;
            const int8x16_t g0 = vmulq_s8(u64x2(df_iq2xxs_grid[a8[0]], df_iq2xxs_grid[a8[1]]),
                                          u64x2(k_signs64[a[1] & 127], k_signs64[(a[1] >> 7) & 127]));
            const int8x16_t g1 = vmulq_s8(u64x2(df_iq2xxs_grid[a8[2]], df_iq2xxs_grid[a8[3]]),
                                          u64x2(k_signs64[(a[1] >> 14) & 127], k_signs64[(a[1] >> 21) & 127]));
            const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), g0, vld1q_s8(q8)), g1, vld1q_s8(q8 + 16));
            bsum += vaddvq_s32(p) * (int32_t)(2 * (a[1] >> 28) + 1);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum * 0.125f;
    }
    *s = sumf;
}

static void dot_iq2_xs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_xs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++, q8 += 32) {
            const uint16_t *v = x[i].qs + 4 * ib;
            const int8x16_t g0 = vmulq_s8(u64x2(df_iq2xs_grid[v[0] & 511], df_iq2xs_grid[v[1] & 511]),
                                          u64x2(k_signs64[v[0] >> 9], k_signs64[v[1] >> 9]));
            const int8x16_t g1 = vmulq_s8(u64x2(df_iq2xs_grid[v[2] & 511], df_iq2xs_grid[v[3] & 511]),
                                          u64x2(k_signs64[v[2] >> 9], k_signs64[v[3] >> 9]));
            const int32_t s1 = vaddvq_s32(vdotq_s32(vdupq_n_s32(0), g0, vld1q_s8(q8)));
            const int32_t s2 = vaddvq_s32(vdotq_s32(vdupq_n_s32(0), g1, vld1q_s8(q8 + 16)));
            bsum += s1 * (2 * (x[i].scales[ib] & 0xf) + 1) + s2 * (2 * (x[i].scales[ib] >> 4) + 1);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum * 0.125f;
    }
    *s = sumf;
}

static void dot_iq3_xxs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq3_xxs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *q = x[i].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++, q += 8, q8 += 32) {
            uint32_t a;
            memcpy(&a, x[i].qs + 64 + 4 * ib, 4);
            const uint64_t e0 = df_iq3xxs_grid[q[0]] | (uint64_t)df_iq3xxs_grid[q[1]] << 32;
            const uint64_t e1 = df_iq3xxs_grid[q[2]] | (uint64_t)df_iq3xxs_grid[q[3]] << 32;
            const uint64_t e2 = df_iq3xxs_grid[q[4]] | (uint64_t)df_iq3xxs_grid[q[5]] << 32;
            const uint64_t e3 = df_iq3xxs_grid[q[6]] | (uint64_t)df_iq3xxs_grid[q[7]] << 32;
            const int8x16_t g0 = vmulq_s8(u64x2(e0, e1), u64x2(k_signs64[a & 127], k_signs64[(a >> 7) & 127]));
            const int8x16_t g1 = vmulq_s8(u64x2(e2, e3), u64x2(k_signs64[(a >> 14) & 127], k_signs64[(a >> 21) & 127]));
            const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), g0, vld1q_s8(q8)), g1, vld1q_s8(q8 + 16));
            bsum += vaddvq_s32(p) * (int32_t)(2 * (a >> 28) + 1);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum * 0.25f;
    }
    *s = sumf;
}

/* IQ1_S / IQ1_M: grid bytes are -1/0/1 (signed already); the delta term needs sums of the
 * activations: bsums per 16 (IQ1_S) or an sdot with +-1 bytes per group of 8 (IQ1_M). */
static void dot_iq1_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq1_s *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs;
        int sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < 8; ib++, qs += 4, q8 += 32) {
            const uint16_t h = x[i].qh[ib];
            const int ls = 2 * ((h >> 12) & 7) + 1;
            const int8x16_t g0 = u64x2(df_iq1s_grid[qs[0] | ((h & 7) << 8)], df_iq1s_grid[qs[1] | (((h >> 3) & 7) << 8)]);
            const int8x16_t g1 = u64x2(df_iq1s_grid[qs[2] | (((h >> 6) & 7) << 8)], df_iq1s_grid[qs[3] | (((h >> 9) & 7) << 8)]);
            const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), g0, vld1q_s8(q8)), g1, vld1q_s8(q8 + 16));
            sumi += ls * vaddvq_s32(p);
            sumi1 += ls * (h & 0x8000 ? -1 : 1) * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
        }
        sumf += df_f16_to_f32(x[i].d) * y[i].d * (sumi + DF_IQ1S_DELTA * sumi1);
    }
    *s = sumf;
}

static void dot_iq1_m_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq1_m *x = w;
    const df_block_q8_K *y = xq;
    const uint64_t pos = 0x0101010101010101ull, neg = ~0ull;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const uint16_t du = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh;
        int sumi1 = 0, sumi2 = 0;
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2, q8 += 32) {
            const int ls1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1;
            const int ls2 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1;
            const int8x16_t g0 = u64x2(df_iq1s_grid[qs[0] | ((qh[0] << 8) & 0x700)], df_iq1s_grid[qs[1] | ((qh[0] << 4) & 0x700)]);
            const int8x16_t g1 = u64x2(df_iq1s_grid[qs[2] | ((qh[1] << 8) & 0x700)], df_iq1s_grid[qs[3] | ((qh[1] << 4) & 0x700)]);
            const int8x16_t d0 = u64x2(qh[0] & 0x08 ? neg : pos, qh[0] & 0x80 ? neg : pos);
            const int8x16_t d1 = u64x2(qh[1] & 0x08 ? neg : pos, qh[1] & 0x80 ? neg : pos);
            const int8x16_t y0 = vld1q_s8(q8), y1 = vld1q_s8(q8 + 16);
            const int32x4_t z = vdupq_n_s32(0);
            sumi1 += ls1 * vaddvq_s32(vdotq_s32(z, g0, y0)) + ls2 * vaddvq_s32(vdotq_s32(z, g1, y1));
            sumi2 += ls1 * vaddvq_s32(vdotq_s32(z, d0, y0)) + ls2 * vaddvq_s32(vdotq_s32(z, d1, y1));
        }
        sumf += df_f16_to_f32(du) * y[i].d * (sumi1 + DF_IQ1S_DELTA * sumi2);
    }
    *s = sumf;
}

/* 0xFF in byte j where bit j%8 of b0 (j < 8) / b1 (j >= 8) is set. */
static inline uint8x16_t bits2_to_bytes(uint8_t b0, uint8_t b1) {
    static const uint8_t bm[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vtstq_u8(vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1)), vld1q_u8(bm));
}
/* +-1 bytes from two explicit sign bytes */
static inline int8x16_t signs2(uint8_t b0, uint8_t b1) {
    return vreinterpretq_s8_u8(vorrq_u8(bits2_to_bytes(b0, b1), vdupq_n_u8(1)));
}

static void dot_iq2_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_s *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *sg = qs + 32;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++, qs += 4, sg += 4, q8 += 32) {
            const int8x16_t g0 = vmulq_s8(u64x2(df_iq2s_grid[qs[0] | ((qh[ib] << 8) & 0x300)], df_iq2s_grid[qs[1] | ((qh[ib] << 6) & 0x300)]),
                                          signs2(sg[0], sg[1]));
            const int8x16_t g1 = vmulq_s8(u64x2(df_iq2s_grid[qs[2] | ((qh[ib] << 4) & 0x300)], df_iq2s_grid[qs[3] | ((qh[ib] << 2) & 0x300)]),
                                          signs2(sg[2], sg[3]));
            const int32_t s1 = vaddvq_s32(vdotq_s32(vdupq_n_s32(0), g0, vld1q_s8(q8)));
            const int32_t s2 = vaddvq_s32(vdotq_s32(vdupq_n_s32(0), g1, vld1q_s8(q8 + 16)));
            bsum += s1 * (2 * (x[i].scales[ib] & 0xf) + 1) + s2 * (2 * (x[i].scales[ib] >> 4) + 1);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum * 0.125f;
    }
    *s = sumf;
}

static void dot_iq3_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq3_s *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *sg = x[i].signs;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++, qs += 8, sg += 4, q8 += 32) {
            const int h = x[i].qh[ib];
            const uint64_t e0 = df_iq3s_grid[qs[0] | ((h << 8) & 256)] | (uint64_t)df_iq3s_grid[qs[1] | ((h << 7) & 256)] << 32;
            const uint64_t e1 = df_iq3s_grid[qs[2] | ((h << 6) & 256)] | (uint64_t)df_iq3s_grid[qs[3] | ((h << 5) & 256)] << 32;
            const uint64_t e2 = df_iq3s_grid[qs[4] | ((h << 4) & 256)] | (uint64_t)df_iq3s_grid[qs[5] | ((h << 3) & 256)] << 32;
            const uint64_t e3 = df_iq3s_grid[qs[6] | ((h << 2) & 256)] | (uint64_t)df_iq3s_grid[qs[7] | ((h << 1) & 256)] << 32;
            const int8x16_t g0 = vmulq_s8(u64x2(e0, e1), signs2(sg[0], sg[1]));
            const int8x16_t g1 = vmulq_s8(u64x2(e2, e3), signs2(sg[2], sg[3]));
            const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), g0, vld1q_s8(q8)), g1, vld1q_s8(q8 + 16));
            bsum += vaddvq_s32(p) * (2 * ((x[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum;
    }
    *s = sumf;
}

/* TQ2_0: codes 0..2 (value code-1): sdot of the codes minus the bsums. */
static void dot_tq2_0_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_tq2_0 *x = w;
    const df_block_q8_K *y = xq;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * h), q1 = vld1q_u8(x[i].qs + 32 * h + 16);
            const int8_t *q8 = y[i].qs + 128 * h;
            for (int l = 0; l < 4; l++, q8 += 32) {
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * l));
                acc = vdotq_s32(acc, vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, sh), m3)), vld1q_s8(q8));
                acc = vdotq_s32(acc, vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, sh), m3)), vld1q_s8(q8 + 16));
            }
        }
        const int16x8_t b0 = vld1q_s16(y[i].bsums), b1 = vld1q_s16(y[i].bsums + 8);
        const int sumi = vaddvq_s32(acc) - (vaddlvq_s16(b0) + vaddlvq_s16(b1));
        sumf += (float)sumi * (df_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sumf;
}

/* TQ1_0: base-3 digit k of a byte = ((uint8)(q * 3^k) * 3) >> 8 (value digit-1); sdot of the
 * digits minus the bsums, exact as ref.c. */
static inline int8x16_t tq1_digits(uint8x16_t q, uint8x16_t mul) {
    const uint8x16_t t = vmulq_u8(q, mul);
    const uint8x8_t three = vdup_n_u8(3);
    return vreinterpretq_s8_u8(vcombine_u8(vshrn_n_u16(vmull_u8(vget_low_u8(t), three), 8),
                                           vshrn_n_u16(vmull_high_u8(t, vdupq_n_u8(3)), 8)));
}

static void dot_tq1_0_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_tq1_0 *x = w;
    const df_block_q8_K *y = xq;
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    static const uint8_t mh[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8x16_t q0 = vld1q_u8(x[i].qs), q1 = vld1q_u8(x[i].qs + 16), q2 = vld1q_u8(x[i].qs + 32);
        int32x4_t acc = vdupq_n_s32(0);
        for (int k = 0; k < 5; k++) {
            const uint8x16_t m = vdupq_n_u8(pow3[k]);
            acc = vdotq_s32(acc, tq1_digits(q0, m), vld1q_s8(q8 + 32 * k));
            acc = vdotq_s32(acc, tq1_digits(q1, m), vld1q_s8(q8 + 32 * k + 16));
            acc = vdotq_s32(acc, tq1_digits(q2, m), vld1q_s8(q8 + 160 + 16 * k));
        }
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        acc = vdotq_s32(acc, tq1_digits(vreinterpretq_u8_u32(vdupq_n_u32(qh)), vld1q_u8(mh)), vld1q_s8(q8 + 240));
        const int16x8_t b0 = vld1q_s16(y[i].bsums), b1 = vld1q_s16(y[i].bsums + 8);
        const int sumi = vaddvq_s32(acc) - (vaddlvq_s16(b0) + vaddlvq_s16(b1));
        sumf += (float)sumi * (df_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q5_K / IQ4_XS x Q8_K */

static void dot_q5_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_K *x = w;
    const df_block_q8_K *y = xq;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m1 = vdupq_n_u8(1);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        uint32_t u[3];
        memcpy(u, x[i].scales, 12);
        const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
        uint32_t sc32[2] = {u[0] & k1, (u[2] & k2) | (((u[0] >> 6) & k3) << 4)};
        uint32_t mn32[2] = {u[1] & k1, ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4)};
        const uint8_t *sc = (const uint8_t *)sc32, *mn = (const uint8_t *)mn32;
        const int16x8_t bp = vpaddq_s16(vld1q_s16(y[i].bsums), vld1q_s16(y[i].bsums + 8));
        const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
        const int32_t summs = vaddvq_s32(vmull_s16(vget_low_s16(bp), vget_low_s16(m16))) + vaddvq_s32(vmull_high_s16(bp, m16));
        const uint8x16_t h0 = vld1q_u8(x[i].qh), h1 = vld1q_u8(x[i].qh + 16);
        int32_t isum = 0;
        const uint8_t *q = x[i].qs;
        const int8_t *q8 = y[i].qs;
        for (int c = 0; c < 4; c++, q += 32, q8 += 64) {
            const uint8x16_t v0 = vld1q_u8(q), v1 = vld1q_u8(q + 16);
            const int8x16_t sa = vdupq_n_s8((int8_t)(-2 * c)), sb = vdupq_n_s8((int8_t)(-2 * c - 1));
            const int8x16_t lo0 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v0, m4), vshlq_n_u8(vandq_u8(vshlq_u8(h0, sa), m1), 4)));
            const int8x16_t lo1 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v1, m4), vshlq_n_u8(vandq_u8(vshlq_u8(h1, sa), m1), 4)));
            const int8x16_t hi0 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v0, 4), vshlq_n_u8(vandq_u8(vshlq_u8(h0, sb), m1), 4)));
            const int8x16_t hi1 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v1, 4), vshlq_n_u8(vandq_u8(vshlq_u8(h1, sb), m1), 4)));
            const int32x4_t plo = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo0, vld1q_s8(q8)), lo1, vld1q_s8(q8 + 16));
            const int32x4_t phi = vdotq_s32(vdotq_s32(vdupq_n_s32(0), hi0, vld1q_s8(q8 + 32)), hi1, vld1q_s8(q8 + 48));
            isum += vaddvq_s32(plo) * sc[2 * c] + vaddvq_s32(phi) * sc[2 * c + 1];
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum - (df_f16_to_f32(x[i].dmin) * y[i].d) * summs;
    }
    *s = sumf;
}

static void dot_iq4_xs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_xs *x = w;
    const df_block_q8_K *y = xq;
    const int8x16_t lut = vld1q_s8(df_kvalues_iq4nl);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            isum += (ls - 32) * vaddvq_s32(dot_nib(vld1q_u8(x[i].qs + 16 * ib), lut, y[i].qs + 32 * ib));
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum;
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q4_1 / Q5_0 / Q5_1
 * One exact integer per block, then ref.c's float expression: bit-identical to it. */
static void dot_q4_1_q8_1(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_1 *x = w;
    const df_block_q8_1 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const uint8x16_t q = vld1q_u8(x[ib].qs);
        const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vld1q_s8(y[ib].qs)),
                                      vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vld1q_s8(y[ib].qs + 16));
        const int sumi = vaddvq_s32(p);
        sumf += (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)) * sumi + df_f16_to_f32(x[ib].m) * df_f16_to_f32(y[ib].s);
    }
    *s = sumf;
}

/* the 32 five-bit codes of a Q5 block as [lo | hi] (bit e of qh -> 0x10 on element e) */
static inline void q5_codes(const uint8_t *qs, const uint8_t qh[4], int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(qs), h16 = vdupq_n_u8(0x10);
    *lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), vandq_u8(bits2_to_bytes(qh[0], qh[1]), h16)));
    *hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(bits2_to_bytes(qh[2], qh[3]), h16)));
}

static void dot_q5_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_0 *x = w;
    const df_block_q8_0 *y = xq;
    const int8x16_t off = vdupq_n_s8(16);
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int8x16_t lo, hi;
        q5_codes(x[ib].qs, x[ib].qh, &lo, &hi);
        const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), vsubq_s8(lo, off), vld1q_s8(y[ib].qs)), vsubq_s8(hi, off), vld1q_s8(y[ib].qs + 16));
        sumf += vaddvq_s32(p) * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}

static void dot_q5_1_q8_1(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_1 *x = w;
    const df_block_q8_1 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int8x16_t lo, hi;
        q5_codes(x[ib].qs, x[ib].qh, &lo, &hi);
        const int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(y[ib].qs)), hi, vld1q_s8(y[ib].qs + 16));
        const int sumi = vaddvq_s32(p);
        sumf += (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)) * sumi + df_f16_to_f32(x[ib].m) * df_f16_to_f32(y[ib].s);
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q8_0 / Q8_1 activations */

/* As llama.cpp's NEON path (DF_Q8_ARM): id = 1/d, round half to even. */
static void from_q8_0(const float *x, void *dst, int64_t n) {
    df_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float32x4_t v[8];
        float32x4_t am = vdupq_n_f32(0);
        uint32x4_t bad = vdupq_n_u32(0);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(x + 4 * k);
            bad = vorrq_u32(bad, vmvnq_u32(vceqq_f32(v[k], v[k])));
            am = vmaxq_f32(am, vabsq_f32(v[k]));
        }
        const float amax = vmaxvq_f32(am);
        if (vmaxvq_u32(bad) || !(amax <= 3.4028235e38f)) {
            df_quantize_row_q8_0_variant(x, &y[i], 32, DF_Q8_ARM);
            continue;
        }
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        for (int k = 0; k < 8; k += 2) {
            const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(v[k], id)), b = vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id));
            const int16x8_t h = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
            vst1_s8(y[i].qs + 4 * k, vqmovn_s16(h));
        }
    }
}

static void from_q8_1(const float *x, void *dst, int64_t n) { df_quantize_row_q8_1_variant(x, dst, n, DF_Q8_ARM); }

void df_kernels_fill_neon(df_kernel_table *t) {
    t->name = "neon";
    t->isa = DF_ISA_NEON;
    /* the float slots stay the reference table's: deltafin has no NEON forms of ggml's vector
     * exp / F16 dots yet (ggml's NEON build would use its own; results are ref's here) */
    for (int i = 0; i < 128; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 8; j++) v |= (uint64_t)((df_ksigns_iq2xs[i] >> j) & 1 ? 0xFF : 0x01) << (8 * j);
        k_signs64[i] = v;
    }
    t->vec_dot[DF_TYPE_F32] = dot_f32;
    t->vec_dot[DF_TYPE_F16] = dot_f16;
    t->vec_dot[DF_TYPE_BF16] = dot_bf16;
    t->vec_dot[DF_TYPE_Q8_0] = dot_q8_0_q8_0;
    t->vec_dot[DF_TYPE_Q4_0] = dot_q4_0_q8_0;
    t->vec_dot[DF_TYPE_IQ4_NL] = dot_iq4_nl_q8_0;
    t->vec_dot[DF_TYPE_MXFP4] = dot_mxfp4_q8_0;
    t->vec_dot[DF_TYPE_Q4_K] = dot_q4_K_q8_K;
    t->vec_dot[DF_TYPE_Q6_K] = dot_q6_K_q8_K;
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
    t->vec_dot[DF_TYPE_Q5_K] = dot_q5_K_q8_K;
    t->vec_dot[DF_TYPE_IQ4_XS] = dot_iq4_xs_q8_K;
    t->vec_dot[DF_TYPE_Q4_1] = dot_q4_1_q8_1;
    t->vec_dot[DF_TYPE_Q5_0] = dot_q5_0_q8_0;
    t->vec_dot[DF_TYPE_Q5_1] = dot_q5_1_q8_1;
    t->from_float[DF_TYPE_F16] = from_f16;
    t->from_float[DF_TYPE_Q8_0] = from_q8_0;
    t->from_float[DF_TYPE_Q8_1] = from_q8_1;
}
