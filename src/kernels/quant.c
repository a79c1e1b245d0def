/* quant.c — compute facts of the ggml tensor types (quant.h), row (de)quantization (formats.md §2).
 * Quantizers follow llama.cpp's reference algorithms (quantize_row_*_ref, no importance matrix)
 * so files we write match llama-quantize: Q8_0 byte-identical, k-quants near-identical.
 * Invariant: every function here is pure; n is a multiple of the type's block size (callers
 * check with df_type_info()->blck; violations return DF_ERR_INVALID).
 * Threading: thread-safe (no mutable state). */
#include "kernels/quant_impl.h"

#include <math.h>
#include <pthread.h>

const int8_t df_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
const int8_t df_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* The activation type each weight type is dotted with (formats.md §2.6); the file facts
 * (name, block size, bytes) come from format/ggml_types.c, can_compute / can_quantize from the
 * function tables below, at first lookup. Types not listed pair with themselves. */
static const int8_t g_vec_dot_type[DF_TYPE_COUNT] = {
    [DF_TYPE_Q4_0] = DF_TYPE_Q8_0,    [DF_TYPE_Q4_1] = DF_TYPE_Q8_1,    [DF_TYPE_Q5_0] = DF_TYPE_Q8_0,
    [DF_TYPE_Q5_1] = DF_TYPE_Q8_1,    [DF_TYPE_Q2_K] = DF_TYPE_Q8_K,    [DF_TYPE_Q3_K] = DF_TYPE_Q8_K,
    [DF_TYPE_Q4_K] = DF_TYPE_Q8_K,    [DF_TYPE_Q5_K] = DF_TYPE_Q8_K,    [DF_TYPE_Q6_K] = DF_TYPE_Q8_K,
    [DF_TYPE_IQ2_XXS] = DF_TYPE_Q8_K, [DF_TYPE_IQ2_XS] = DF_TYPE_Q8_K,  [DF_TYPE_IQ3_XXS] = DF_TYPE_Q8_K,
    [DF_TYPE_IQ1_S] = DF_TYPE_Q8_K,   [DF_TYPE_IQ4_NL] = DF_TYPE_Q8_0,  [DF_TYPE_IQ3_S] = DF_TYPE_Q8_K,
    [DF_TYPE_IQ2_S] = DF_TYPE_Q8_K,   [DF_TYPE_IQ4_XS] = DF_TYPE_Q8_K,  [DF_TYPE_IQ1_M] = DF_TYPE_Q8_K,
    [DF_TYPE_TQ1_0] = DF_TYPE_Q8_K,   [DF_TYPE_TQ2_0] = DF_TYPE_Q8_K,   [DF_TYPE_MXFP4] = DF_TYPE_Q8_0,
    [DF_TYPE_NVFP4] = DF_TYPE_Q8_0,   [DF_TYPE_Q1_0] = DF_TYPE_Q8_0,    [DF_TYPE_Q2_0] = DF_TYPE_Q8_0,
    [DF_TYPE_Q4_K_X8] = DF_TYPE_Q8_K,
};

/* ------------------------------------------------------------------ helpers */

static inline float maxf_ggml(float a, float b) { return a > b ? a : b; } /* ggml's MAX() */

/* float -> int8 as llama.cpp's `y = roundf(v)` (v already in [-127.x, 127.x]); NaN -> 0
 * (what the x86 conversion produces for the low byte), avoiding C undefined behaviour. */
static inline int8_t to_i8(float v) {
    if (!(v > -128.5f && v < 127.5f)) return 0;
    return (int8_t)(int)v;
}

/* ------------------------------------------------------------------ F32/F16/BF16 */

static void deq_f32(const void *src, float *y, int64_t n) { memcpy(y, src, (size_t)n * 4); }
static void q_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * 4); }
static void deq_f16(const void *src, float *y, int64_t n) {
    const df_f16 *s = src;
    for (int64_t i = 0; i < n; i++) y[i] = df_f16_to_f32(s[i]);
}
static void q_f16(const float *x, void *dst, int64_t n) {
    df_f16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_f16(x[i]);
}
static void deq_bf16(const void *src, float *y, int64_t n) {
    const df_bf16 *s = src;
    for (int64_t i = 0; i < n; i++) y[i] = df_bf16_to_f32(s[i]);
}
static void q_bf16(const float *x, void *dst, int64_t n) {
    df_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_bf16(x[i]);
}

/* ------------------------------------------------------------------ Q8_0 / Q8_1 / Q8_K */

void df_quantize_row_q8_0_ref(const float *x, void *dst, int64_t n) {
    df_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = maxf_ggml(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = to_i8(roundf(x[j] * id));
    }
}
void df_quantize_row_q8_0_variant(const float *x, void *dst, int64_t n, int variant) {
    if (variant == DF_Q8_REF) { df_quantize_row_q8_0_ref(x, dst, n); return; }
    df_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = maxf_ggml(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = variant == DF_Q8_X86 ? (amax != 0.0f ? 127.f / amax : 0.0f) : (d ? 1.0f / d : 0.0f);
        y[i].d = df_f32_to_f16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = to_i8(rintf(x[j] * id));
    }
}

void df_quantize_row_q8_1_variant(const float *x, void *dst, int64_t n, int variant) {
    if (variant == DF_Q8_REF) { df_quantize_row_q8_1_ref(x, dst, n); return; }
    df_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = maxf_ggml(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = variant == DF_Q8_X86 ? (amax != 0.0f ? 127.f / amax : 0.0f) : (d ? 1.0f / d : 0.0f);
        y[i].d = df_f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            y[i].qs[j] = to_i8(rintf(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = df_f32_to_f16((float)sum * d);
    }
}

static void deq_q8_0(const void *src, float *y, int64_t n) {
    const df_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        const float d = df_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) *y++ = d * b[i].qs[j];
    }
}

void df_quantize_row_q8_1_ref(const float *x, void *dst, int64_t n) {
    df_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = maxf_ggml(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < 16; j++) {
            y[i].qs[j] = to_i8(roundf(x[j] * id));
            y[i].qs[16 + j] = to_i8(roundf(x[16 + j] * id));
            sum += y[i].qs[j] + y[i].qs[16 + j];
        }
        y[i].s = df_f32_to_f16((float)sum * d);
    }
}
static void deq_q8_1(const void *src, float *y, int64_t n) {
    const df_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        const float d = df_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) *y++ = d * b[i].qs[j];
    }
}

void df_quantize_row_q8_K_ref(const float *x, void *dst, int64_t n) {
    df_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float max = 0, amax = 0;
        for (int j = 0; j < 256; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (!amax) {
            y[i].d = 0;
            memset(y[i].qs, 0, 256);
            memset(y[i].bsums, 0, sizeof y[i].bsums); /* llama.cpp leaves them stale */
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) {
            int v = df_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? (v > -128 ? v : -128) : 127);
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += y[i].qs[16 * j + k];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
static void deq_q8_K(const void *src, float *y, int64_t n) {
    const df_block_q8_K *b = src;
    for (int64_t i = 0; i < n / 256; i++)
        for (int j = 0; j < 256; j++) *y++ = b[i].d * b[i].qs[j];
}

/* ------------------------------------------------------------------ legacy 32-blocks */

/* (int8_t)(v) of llama.cpp for v known to be in range; NaN/out of range -> 0 (no UB). */
static inline int trunc_i8(float v) {
    if (!(v > -129.0f && v < 128.0f)) return 0;
    return (int8_t)v;
}

static void q_q4_0(const float *x, void *dst, int64_t n) {
    df_block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int a = trunc_i8(x[j] * id + 8.5f), b = trunc_i8(x[16 + j] * id + 8.5f);
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
            y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
        }
    }
}
static void deq_q4_0(const void *src, float *y, int64_t n) {
    const df_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = df_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = ((b[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void q_q4_1(const float *x, void *dst, int64_t n) {
    df_block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float min = 3.4028235e38f, max = -3.4028235e38f;
        for (int j = 0; j < 32; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        y[i].m = df_f32_to_f16(min);
        for (int j = 0; j < 16; j++) {
            int a = trunc_i8((x[j] - min) * id + 0.5f), b = trunc_i8((x[16 + j] - min) * id + 0.5f);
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
            y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
        }
    }
}
static void deq_q4_1(const void *src, float *y, int64_t n) {
    const df_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = df_f16_to_f32(b[i].d), m = df_f16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (b[i].qs[j] & 0xF) * d + m;
            y[j + 16] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

void df_q5_pack(const uint8_t *L, uint8_t *qs, uint8_t *qh4) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0xF) | ((L[16 + j] & 0xF) << 4));
        qh |= ((L[j] & 0x10u) >> 4) << j;
        qh |= ((L[16 + j] & 0x10u) >> 4) << (j + 16);
    }
    memcpy(qh4, &qh, 4);
}

static void q_q5_0(const float *x, void *dst, int64_t n) {
    df_block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        uint8_t L[32];
        for (int j = 0; j < 16; j++) {
            int a = trunc_i8(x[j] * id + 16.5f), b = trunc_i8(x[16 + j] * id + 16.5f);
            L[j] = (uint8_t)(a < 31 ? a : 31);
            L[16 + j] = (uint8_t)(b < 31 ? b : 31);
        }
        df_q5_pack(L, y[i].qs, y[i].qh);
    }
}
static void deq_q5_0(const void *src, float *y, int64_t n) {
    const df_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = df_f16_to_f32(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            y[j] = (((b[i].qs[j] & 0xF) | h0) - 16) * d;
            y[j + 16] = (((b[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

static void q_q5_1(const float *x, void *dst, int64_t n) {
    df_block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float min = 3.4028235e38f, max = -3.4028235e38f;
        for (int j = 0; j < 32; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        y[i].m = df_f32_to_f16(min);
        uint8_t L[32];
        for (int j = 0; j < 32; j++) {
            float f = (x[j] - min) * id + 0.5f;
            L[j] = (uint8_t)(f >= 0 && f < 256 ? (int)f : 0);
        }
        df_q5_pack(L, y[i].qs, y[i].qh);
    }
}
static void deq_q5_1(const void *src, float *y, int64_t n) {
    const df_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = df_f16_to_f32(b[i].d), m = df_f16_to_f32(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            y[j] = ((b[i].qs[j] & 0xF) | h0) * d + m;
            y[j + 16] = ((b[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

/* ------------------------------------------------------------------ MXFP4 */

static inline int best_index_mxfp4(float x, float e) {
    int best = 0;
    float best_err = fabsf(df_kvalues_mxfp4[0] * e - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(df_kvalues_mxfp4[i] * e - x);
        if (err < best_err) { best = i; best_err = err; }
    }
    return best;
}
static void q_mxfp4(const float *x, void *dst, int64_t n) {
    df_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        uint8_t e = 0;
        if (amax > 0.0f) {
            float le = floorf(log2f(amax)) - 2 + 127; /* llama.cpp: (uint8_t) of this */
            e = (uint8_t)(le >= 0 && le < 256 ? (int)le : (le < 0 ? 0 : 255));
        }
        const float d = df_e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(best_index_mxfp4(x[j], d) | (best_index_mxfp4(x[16 + j], d) << 4));
    }
}
static void deq_mxfp4(const void *src, float *y, int64_t n) {
    const df_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = df_e8m0_half(b[i].e);
        for (int j = 0; j < 16; j++) {
            y[j] = df_kvalues_mxfp4[b[i].qs[j] & 0xF] * d;
            y[j + 16] = df_kvalues_mxfp4[b[i].qs[j] >> 4] * d;
        }
    }
}

/* ------------------------------------------------------------------ IQ4_NL / IQ4_XS */


static void deq_iq4_nl(const void *src, float *y, int64_t n) {
    const df_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = df_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * df_kvalues_iq4nl[b[i].qs[j] & 0xF];
            y[j + 16] = d * df_kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}
static void deq_iq4_xs(const void *src, float *y, int64_t n) {
    const df_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(b[i].d);
        const uint8_t *qs = b[i].qs;
        for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
            const int ls = ((b[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * df_kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * df_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

/* ------------------------------------------------------------------ Q2_K */

/* 4 levels of 2 bits per byte: qs[j/4 + l] holds L[j+l], L[j+l+32], L[j+l+64], L[j+l+96] */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

void df_q2k_finish(const float *x, df_block_q2_K *y, uint8_t *L) {
    const float dm = df_f16_to_f32(y->d), mm = df_f16_to_f32(y->dmin);
    for (int j = 0; j < 16; ++j) {
        const float d = dm * (y->scales[j] & 0xF);
        if (!d) continue;
        const float m = mm * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            int l = df_nearest_int((x[16 * j + ii] + m) / d);
            L[16 * j + ii] = (uint8_t)df_imax(0, df_imin(3, l));
        }
    }
    pack_2bit(L, y->qs);
}

static void q_q2_K(const float *x, void *dst, int64_t n) {
    df_block_q2_K *y = dst;
    uint8_t L[256], Laux[16];
    float weights[16], mins[16], scales[16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = df_make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < 16; ++j) y[i].scales[j] = (uint8_t)df_nearest_int(iscale * scales[j]);
            y[i].d = df_f32_to_f16(max_scale / q4scale);
        } else {
            for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
            y[i].d = df_f32_to_f16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < 16; ++j) {
                int l = df_nearest_int(iscale * mins[j]);
                y[i].scales[j] |= (uint8_t)(l << 4);
            }
            y[i].dmin = df_f32_to_f16(max_min / q4scale);
        } else {
            y[i].dmin = df_f32_to_f16(0.f);
        }
        df_q2k_finish(x, &y[i], L);
    }
}
static void deq_q2_K(const void *src, float *y, int64_t n) {
    const df_block_q2_K *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(b[i].d), min = df_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int k = 0; k < 256; k += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = b[i].scales[is++];
                float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l] >> shift) & 3) - ml;
                sc = b[i].scales[is++];
                dl = d * (sc & 0xF);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16] >> shift) & 3) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

/* ------------------------------------------------------------------ Q3_K */

void df_q3k_set_scale(uint8_t *scales, int j, int l) {
    if (j < 8) scales[j] = l & 0xF;
    else scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
    l >>= 4;
    scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
}

void df_q3k_finish(const float *x, df_block_q3_K *y, int8_t *L) {
    for (int j = 0; j < 16; ++j) {
        int8_t sc = (int8_t)(j < 8 ? y->scales[j] & 0xF : y->scales[j - 8] >> 4);
        sc = (int8_t)((sc | (((y->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
        float d = df_f16_to_f32(y->d) * sc;
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = df_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(df_imax(-4, df_imin(3, l)) + 4);
        }
    }
    memset(y->hmask, 0, 32);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < 256; ++j) {
        if (L[j] > 3) {
            y->hmask[m] |= hm;
            L[j] -= 4;
        }
        if (++m == 32) { m = 0; hm <<= 1; }
    }
    pack_2bit((const uint8_t *)L, y->qs);
}

static void q_q3_K(const float *x, void *dst, int64_t n) {
    df_block_q3_K *y = dst;
    int8_t L[256];
    float scales[16];
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; ++j) {
            scales[j] = df_make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            float scale = fabsf(scales[j]);
            if (scale > amax) { amax = scale; max_scale = scales[j]; }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; ++j) {
                int8_t l = (int8_t)df_nearest_int(iscale * scales[j]);
                df_q3k_set_scale(y[i].scales, j, (int8_t)(df_imax(-32, df_imin(31, l)) + 32));
            }
            y[i].d = df_f32_to_f16(1 / iscale);
        } else {
            y[i].d = df_f32_to_f16(0.f);
        }
        df_q3k_finish(x, &y[i], L);
    }
}
/* Signed 6-bit scales of a Q3_K block. */
static inline void q3k_scales(const uint8_t *s, int8_t out[16]) {
    for (int k = 0; k < 16; k++) {
        int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
        int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        out[k] = (int8_t)((lo | (hi << 4)) - 32);
    }
}
static void deq_q3_K(const void *src, float *y, int64_t n) {
    const df_block_q3_K *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d_all = df_f16_to_f32(b[i].d);
        int8_t sc[16];
        q3k_scales(b[i].scales, sc);
        for (int e = 0; e < 256; e++) {
            int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
            int q = (b[i].qs[32 * h + l] >> (2 * j)) & 3;
            if (!(b[i].hmask[l] & (1 << (4 * h + j)))) q -= 4;
            y[e] = d_all * sc[8 * h + 2 * j + l / 16] * q;
        }
        y += 256;
    }
}

/* ------------------------------------------------------------------ Q4_K / Q5_K */

void df_qk45_set_scales(uint8_t *scales12, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        scales12[j] = ls;
        scales12[j + 4] = lm;
    } else {
        scales12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        scales12[j - 4] |= (uint8_t)((ls >> 4) << 6);
        scales12[j - 0] |= (uint8_t)((lm >> 4) << 6);
    }
}

void df_qk45_levels(const float *x, int nmax, const uint8_t *scales12, df_f16 dd, df_f16 dmin, uint8_t *L) {
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        df_scale_min_k4(j, scales12, &sc, &m);
        const float d = df_f16_to_f32(dd) * sc;
        if (!d) continue;
        const float dm = df_f16_to_f32(dmin) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = df_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)df_imax(0, df_imin(nmax, l));
        }
    }
}

void df_q4k_pack(const uint8_t *L, uint8_t *q) {
    for (int j = 0; j < 256; j += 64, q += 32)
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

void df_q5k_pack(const uint8_t *L, uint8_t *qh, uint8_t *ql) {
    memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int k = 0; k < 256; k += 64) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[k + j];
            if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
            int l2 = L[k + j + 32];
            if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 <<= 2;
        m2 <<= 2;
        ql += 32;
    }
}

/* Shared first half of the Q4_K/Q5_K reference quantizers: sub-block scales/mins, packed
 * 6-bit scales, d/dmin, and final levels L (0..nmax). */
static void qk45_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *scales12,
                        df_f16 *dd, df_f16 *dmin, uint8_t *L) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = df_make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
        uint8_t ls = (uint8_t)df_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)df_nearest_int(inv_min * mins[j]);
        df_qk45_set_scales(scales12, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *dd = df_f32_to_f16(max_scale / 63.f);
    *dmin = df_f32_to_f16(max_min / 63.f);
    df_qk45_levels(x, nmax, scales12, *dd, *dmin, L);
}

static void q_q4_K(const float *x, void *dst, int64_t n) {
    df_block_q4_K *y = dst;
    uint8_t L[256];
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        qk45_scales(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        df_q4k_pack(L, y[i].qs);
    }
}
static void deq_q4_K(const void *src, float *y, int64_t n) {
    const df_block_q4_K *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(b[i].d), min = df_f16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int j = 0; j < 256; j += 64, q += 32, is += 2) {
            int sc, m;
            df_scale_min_k4(is + 0, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            df_scale_min_k4(is + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void q_q5_K(const float *x, void *dst, int64_t n) {
    df_block_q5_K *y = dst;
    uint8_t L[256];
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        qk45_scales(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        df_q5k_pack(L, y[i].qh, y[i].qs);
    }
}
static void deq_q5_K(const void *src, float *y, int64_t n) {
    const df_block_q5_K *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const uint8_t *ql = b[i].qs, *qh = b[i].qh;
        const float d = df_f16_to_f32(b[i].d), min = df_f16_to_f32(b[i].dmin);
        int is = 0;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 256; j += 64) {
            int sc, m;
            df_scale_min_k4(is + 0, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            df_scale_min_k4(is + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

/* ------------------------------------------------------------------ Q6_K */

void df_q6k_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    df_block_q6_K *y = dst;
    int8_t L[256];
    float scales[16];
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            const float scale = df_make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + 256 * i + 16 * ib : NULL);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) { max_abs_scale = abs_scale; max_scale = scale; }
        }
        if (max_abs_scale < DF_GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(df_block_q6_K));
            y[i].d = df_f32_to_f16(0.f);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = df_f32_to_f16(1 / iscale);
        for (int ib = 0; ib < 16; ++ib) y[i].scales[ib] = (int8_t)df_imin(127, df_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < 16; ++j) {
            float d = df_f16_to_f32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = df_nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(df_imax(-32, df_imin(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < 256; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}
static void q_q6_K(const float *x, void *dst, int64_t n) { df_q6k_quantize(x, dst, n, NULL); }
static void deq_q6_K(const void *src, float *y, int64_t n) {
    const df_block_q6_K *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int k = 0; k < 256; k += 128) {
            for (int l = 0; l < 32; ++l) {
                int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* ------------------------------------------------------------------ i-quants (dequant only) */

static inline float sgn8(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }

static void deq_iq2_xxs(const void *src, float *y, int64_t n) {
    const df_block_iq2_xxs *x = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(x[i].d);
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t a[2];
            memcpy(a, x[i].qs + 4 * ib, 8);
            const uint8_t *a8 = (const uint8_t *)a;
            const float db = d * (0.5f + (a[1] >> 28)) * 0.25f;
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint8_t *g = (const uint8_t *)(df_iq2xxs_grid + a8[l]);
                const uint8_t signs = df_ksigns_iq2xs[(a[1] >> 7 * l) & 127];
                for (int j = 0; j < 8; ++j) y[j] = db * g[j] * sgn8(signs, j);
            }
        }
    }
}

static void deq_iq2_xs(const void *src, float *y, int64_t n) {
    const df_block_iq2_xs *x = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(x[i].d);
        for (int ib = 0; ib < 8; ++ib) {
            float db[2] = {d * (0.5f + (x[i].scales[ib] & 0xf)) * 0.25f, d * (0.5f + (x[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint16_t v = x[i].qs[4 * ib + l];
                const uint8_t *g = (const uint8_t *)(df_iq2xs_grid + (v & 511));
                const uint8_t signs = df_ksigns_iq2xs[v >> 9];
                for (int j = 0; j < 8; ++j) y[j] = db[l / 2] * g[j] * sgn8(signs, j);
            }
        }
    }
}

static void deq_iq2_s(const void *src, float *y, int64_t n) {
    const df_block_iq2_s *x = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = qs + 32;
        for (int ib = 0; ib < 8; ++ib, qs += 4, signs += 4) {
            float db[2] = {d * (0.5f + (x[i].scales[ib] & 0xf)) * 0.25f, d * (0.5f + (x[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint8_t *g = (const uint8_t *)(df_iq2s_grid + (qs[l] | ((qh[ib] << (8 - 2 * l)) & 0x300)));
                for (int j = 0; j < 8; ++j) y[j] = db[l / 2] * g[j] * sgn8(signs[l], j);
            }
        }
    }
}

static void deq_iq3_xxs(const void *src, float *y, int64_t n) {
    const df_block_iq3_xxs *x = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs, *ss = x[i].qs + 64;
        for (int ib = 0; ib < 8; ++ib, qs += 8) {
            uint32_t a;
            memcpy(&a, ss + 4 * ib, 4);
            const float db = d * (0.5f + (a >> 28)) * 0.5f;
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint8_t signs = df_ksigns_iq2xs[(a >> 7 * l) & 127];
                const uint8_t *g1 = (const uint8_t *)(df_iq3xxs_grid + qs[2 * l]);
                const uint8_t *g2 = (const uint8_t *)(df_iq3xxs_grid + qs[2 * l + 1]);
                for (int j = 0; j < 4; ++j) {
                    y[j] = db * g1[j] * sgn8(signs, j);
                    y[j + 4] = db * g2[j] * sgn8(signs, j + 4);
                }
            }
        }
    }
}

static void deq_iq3_s(const void *src, float *y, int64_t n) {
    const df_block_iq3_s *x = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = x[i].signs;
        for (int ib = 0; ib < 8; ++ib) {
            const float db = d * (1 + 2 * ((x[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf));
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint8_t *g1 = (const uint8_t *)(df_iq3s_grid + (qs[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256)));
                const uint8_t *g2 = (const uint8_t *)(df_iq3s_grid + (qs[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256)));
                for (int j = 0; j < 4; ++j) {
                    y[j] = db * g1[j] * sgn8(signs[l], j);
                    y[j + 4] = db * g2[j] * sgn8(signs[l], j + 4);
                }
            }
            qs += 8;
            signs += 4;
        }
    }
}

static void deq_iq1_s(const void *src, float *y, int64_t n) {
    const df_block_iq1_s *x = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = df_f16_to_f32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < 8; ++ib, qs += 4) {
            const uint16_t h = x[i].qh[ib];
            const float dl = d * (2 * ((h >> 12) & 7) + 1);
            const float delta = h & 0x8000 ? -DF_IQ1S_DELTA : DF_IQ1S_DELTA;
            for (int l = 0; l < 4; ++l, y += 8) {
                const int8_t *g = (const int8_t *)(df_iq1s_grid + (qs[l] | (((h >> 3 * l) & 7) << 8)));
                for (int j = 0; j < 8; ++j) y[j] = dl * (g[j] + delta);
            }
        }
    }
}

static inline float iq1m_d(const df_block_iq1_m *x) {
    uint16_t sc[4];
    memcpy(sc, x->scales, 8);
    uint16_t u = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    return df_f16_to_f32(u);
}

static void deq_iq1_m(const void *src, float *y, int64_t n) {
    const df_block_iq1_m *x = src;
    for (int64_t i = 0; i < n / 256; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const float d = iq1m_d(&x[i]);
        const uint8_t *qs = x[i].qs, *qh = x[i].qh;
        for (int ib = 0; ib < 8; ++ib, qs += 4, qh += 2) {
            const float dl1 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
            const float dl2 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
            const uint16_t idx[4] = {(uint16_t)(qs[0] | ((qh[0] << 8) & 0x700)), (uint16_t)(qs[1] | ((qh[0] << 4) & 0x700)),
                                     (uint16_t)(qs[2] | ((qh[1] << 8) & 0x700)), (uint16_t)(qs[3] | ((qh[1] << 4) & 0x700))};
            const float delta[4] = {qh[0] & 0x08 ? -DF_IQ1S_DELTA : DF_IQ1S_DELTA, qh[0] & 0x80 ? -DF_IQ1S_DELTA : DF_IQ1S_DELTA,
                                    qh[1] & 0x08 ? -DF_IQ1S_DELTA : DF_IQ1S_DELTA, qh[1] & 0x80 ? -DF_IQ1S_DELTA : DF_IQ1S_DELTA};
            for (int l = 0; l < 4; ++l, y += 8) {
                const int8_t *g = (const int8_t *)(df_iq1s_grid + idx[l]);
                const float dl = l < 2 ? dl1 : dl2;
                for (int j = 0; j < 8; ++j) y[j] = dl * (g[j] + delta[l]);
            }
        }
    }
}

/* TQ1_0: 5 trits per byte (base-3 fixed point); element order as llama.cpp's dequantizer. */
static inline int tq_trit(uint8_t b, int n) {
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    uint8_t q = (uint8_t)(b * pow3[n]);
    return (int)(((uint16_t)q * 3) >> 8) - 1;
}
static void deq_tq1_0(const void *src, float *y, int64_t n) {
    const df_block_tq1_0 *x = src;
    for (int64_t i = 0; i < n / 256; ++i) {
        const float d = df_f16_to_f32(x[i].d);
        for (int j = 0; j < 32; j += 32)
            for (int k = 0; k < 5; ++k)
                for (int m = 0; m < 32; ++m) *y++ = (float)tq_trit(x[i].qs[j + m], k) * d;
        for (int j = 32; j < 48; j += 16)
            for (int k = 0; k < 5; ++k)
                for (int m = 0; m < 16; ++m) *y++ = (float)tq_trit(x[i].qs[j + m], k) * d;
        for (int k = 0; k < 4; ++k)
            for (int j = 0; j < 4; ++j) *y++ = (float)tq_trit(x[i].qh[j], k) * d;
    }
}
static void deq_tq2_0(const void *src, float *y, int64_t n) {
    const df_block_tq2_0 *x = src;
    for (int64_t i = 0; i < n / 256; ++i) {
        const float d = df_f16_to_f32(x[i].d);
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m) *y++ = (float)(((x[i].qs[j + m] >> (l * 2)) & 3) - 1) * d;
    }
}

/* ------------------------------------------------------------------ tables */

typedef void (*deq_fn)(const void *, float *, int64_t);
typedef void (*q_fn)(const float *, void *, int64_t);

static const deq_fn g_deq[DF_TYPE_COUNT] = {
    [DF_TYPE_F32] = deq_f32,   [DF_TYPE_F16] = deq_f16,   [DF_TYPE_BF16] = deq_bf16,
    [DF_TYPE_Q8_0] = deq_q8_0, [DF_TYPE_Q8_1] = deq_q8_1, [DF_TYPE_Q8_K] = deq_q8_K,
    [DF_TYPE_Q4_0] = deq_q4_0, [DF_TYPE_Q4_1] = deq_q4_1, [DF_TYPE_Q5_0] = deq_q5_0,
    [DF_TYPE_Q5_1] = deq_q5_1, [DF_TYPE_MXFP4] = deq_mxfp4, [DF_TYPE_IQ4_NL] = deq_iq4_nl,
    [DF_TYPE_IQ4_XS] = deq_iq4_xs, [DF_TYPE_Q2_K] = deq_q2_K, [DF_TYPE_Q3_K] = deq_q3_K,
    [DF_TYPE_Q4_K] = deq_q4_K, [DF_TYPE_Q5_K] = deq_q5_K, [DF_TYPE_Q6_K] = deq_q6_K,
    [DF_TYPE_IQ2_XXS] = deq_iq2_xxs, [DF_TYPE_IQ2_XS] = deq_iq2_xs, [DF_TYPE_IQ2_S] = deq_iq2_s,
    [DF_TYPE_IQ3_XXS] = deq_iq3_xxs, [DF_TYPE_IQ3_S] = deq_iq3_s, [DF_TYPE_IQ1_S] = deq_iq1_s,
    [DF_TYPE_IQ1_M] = deq_iq1_m, [DF_TYPE_TQ1_0] = deq_tq1_0, [DF_TYPE_TQ2_0] = deq_tq2_0,
};
static const q_fn g_q[DF_TYPE_COUNT] = {
    [DF_TYPE_F32] = q_f32,
    [DF_TYPE_F16] = q_f16,
    [DF_TYPE_BF16] = q_bf16,
    [DF_TYPE_Q8_0] = df_quantize_row_q8_0_ref,
    [DF_TYPE_Q8_1] = df_quantize_row_q8_1_ref,
    [DF_TYPE_Q8_K] = df_quantize_row_q8_K_ref,
    [DF_TYPE_Q4_0] = q_q4_0, [DF_TYPE_Q4_1] = q_q4_1, [DF_TYPE_Q5_0] = q_q5_0,
    [DF_TYPE_Q5_1] = q_q5_1, [DF_TYPE_MXFP4] = q_mxfp4, [DF_TYPE_Q2_K] = q_q2_K, [DF_TYPE_Q3_K] = q_q3_K,
    [DF_TYPE_Q4_K] = q_q4_K, [DF_TYPE_Q5_K] = q_q5_K, [DF_TYPE_Q6_K] = q_q6_K,
    [DF_TYPE_TQ1_0] = df_quantize_tq1_0, [DF_TYPE_TQ2_0] = df_quantize_tq2_0,
};

/* Types whose weights have dot kernels in kernels/ref.c (activation-only types excluded). */
static bool has_dot(int t) {
    switch (t) {
    case DF_TYPE_F32: case DF_TYPE_F16: case DF_TYPE_BF16: case DF_TYPE_Q8_0:
    case DF_TYPE_Q4_0: case DF_TYPE_Q4_1: case DF_TYPE_Q5_0: case DF_TYPE_Q5_1:
    case DF_TYPE_MXFP4: case DF_TYPE_IQ4_NL: case DF_TYPE_Q2_K: case DF_TYPE_Q3_K:
    case DF_TYPE_Q4_K: case DF_TYPE_Q5_K: case DF_TYPE_Q6_K: case DF_TYPE_IQ4_XS:
    case DF_TYPE_IQ2_XXS: case DF_TYPE_IQ2_XS: case DF_TYPE_IQ2_S: case DF_TYPE_IQ3_XXS:
    case DF_TYPE_IQ3_S: case DF_TYPE_IQ1_S: case DF_TYPE_IQ1_M: case DF_TYPE_TQ1_0: case DF_TYPE_TQ2_0:
        return true;
    default:
        return false;
    }
}

static df_type_traits g_info[DF_TYPE_COUNT];
static pthread_once_t g_info_once = PTHREAD_ONCE_INIT;
static void info_init(void) {
    for (int t = 0; t < DF_TYPE_COUNT; t++) {
        /* the repacked layout has Q4_K's block size and bytes per row */
        const df_ggml_type_info *f = df_ggml_type(t == DF_TYPE_Q4_K_X8 ? DF_TYPE_Q4_K : t);
        if (!f) continue;
        df_type_traits *ti = &g_info[t];
        ti->name = t == DF_TYPE_Q4_K_X8 ? "Q4_K_X8" : f->name;
        ti->blck = f->blck;
        ti->bytes = f->bytes;
        ti->vec_dot_type = g_vec_dot_type[t] ? g_vec_dot_type[t] : t;
        ti->can_compute = g_deq[t] && has_dot(t);
        ti->can_quantize = (g_q[t] || df_qrows_weighted[t]) && t != DF_TYPE_Q8_1 && t != DF_TYPE_Q8_K;
    }
}

const df_type_traits *df_type_info(int type) {
    if (type < 0 || type >= DF_TYPE_COUNT) return NULL;
    pthread_once(&g_info_once, info_init);
    return g_info[type].name ? &g_info[type] : NULL;
}

int df_type_from_name(const char *name) { return df_ggml_type_from_name(name); }

uint64_t df_type_row_bytes(int type, int64_t n) {
    const df_type_traits *t = df_type_info(type);
    if (!t || n < 0) return 0;
    return df_row_bytes(t, n);
}

static int check_args(int type, int64_t n, const char *what) {
    const df_type_traits *t = df_type_info(type);
    if (!t) return df_err(DF_ERR_INVALID, "%s: invalid tensor type id %d", what, type);
    if (n < 0 || n % t->blck)
        return df_err(DF_ERR_INVALID, "%s: %s row of %lld elements is not a multiple of %d", what,
                      t->name, (long long)n, t->blck);
    return DF_OK;
}

bool df_can_dequantize(int type) { return df_type_info(type) && g_deq[type]; }

int df_dequantize_row(int type, const void *src, float *dst, int64_t n) {
    int rc = check_args(type, n, "dequantize");
    if (rc) return rc;
    if (!g_deq[type])
        return df_err(DF_ERR_UNSUPPORTED, "dequantize: type %s not supported", df_type_info(type)->name);
    g_deq[type](src, dst, n);
    return DF_OK;
}

bool df_quantize_needs_imatrix(int type) {
    return type == DF_TYPE_IQ2_XXS || type == DF_TYPE_IQ2_XS || type == DF_TYPE_IQ1_S;
}

int df_quantize_rows(int type, const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *imatrix) {
    int rc = check_args(type, n_per_row, "quantize");
    if (rc) return rc;
    const df_type_traits *ti = df_type_info(type);
    const df_qrows_fn w = df_qrows_weighted[type];
    if (!imatrix && df_quantize_needs_imatrix(type))
        return df_err(DF_ERR_INVALID, "quantize: %s needs an importance matrix (llama.cpp refuses it without one)",
                      ti->name);
    if (w && (imatrix || !g_q[type])) {
        if (!df_iq_ready(type)) return df_err(DF_ERR_NOMEM, "quantize: out of memory (%s codebook)", ti->name);
        w(src, dst, nrows, n_per_row, imatrix);
        return DF_OK;
    }
    if (!g_q[type]) return df_err(DF_ERR_UNSUPPORTED, "quantize: type %s not supported", ti->name);
    const uint64_t rb = df_row_bytes(ti, n_per_row);
    for (int64_t r = 0; r < nrows; r++) g_q[type](src + r * n_per_row, (char *)dst + r * rb, n_per_row);
    return DF_OK;
}

int df_quantize_row(int type, const float *src, void *dst, int64_t n) {
    return df_quantize_rows(type, src, dst, 1, n, NULL);
}
