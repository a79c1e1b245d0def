/* ref.c — scalar reference kernels: the oracle every SIMD table is tested against.
 * Formulas are those of llama.cpp's generic CPU kernels (formats.md §2.6): exact integer sums per
 * block, scaled in F32; F32/F16/BF16 dots accumulate in double (ggml_float).
 * Threading: pure functions. */
#include <math.h>

#include "kernels_impl.h"

/* ------------------------------------------------------------------ float types */

static void dot_f32(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

static void dot_f16(int64_t n, float *s, const void *w, const void *xq) {
    const df_f16 *a = w, *b = xq;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(df_f16_to_f32(a[i]) * df_f16_to_f32(b[i]));
    *s = (float)sum;
}

static void dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
    const df_bf16 *a = w, *b = xq;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(df_bf16_to_f32(a[i]) * df_bf16_to_f32(b[i]));
    *s = (float)sum;
}

static void from_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * 4); }
static void from_f16(const float *x, void *dst, int64_t n) {
    df_f16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_f16(x[i]);
}
static void from_bf16(const float *x, void *dst, int64_t n) {
    df_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_bf16(x[i]);
}

/* ------------------------------------------------------------------ Q8_0 */

static void dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q8_0 *x = w, *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ legacy x Q8_0 / Q8_1 */

static void dot_q4_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_0 *x = w;
    const df_block_q8_0 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += ((x[ib].qs[j] & 0xF) - 8) * y[ib].qs[j] + ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + 16];
        sumf += sumi * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}

static void dot_q4_1_q8_1(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_1 *x = w;
    const df_block_q8_1 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += (x[ib].qs[j] & 0xF) * y[ib].qs[j] + (x[ib].qs[j] >> 4) * y[ib].qs[j + 16];
        sumf += (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)) * sumi +
                df_f16_to_f32(x[ib].m) * df_f16_to_f32(y[ib].s);
    }
    *s = sumf;
}

static void dot_q5_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_0 *x = w;
    const df_block_q8_0 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, 4);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            sumi += (((x[ib].qs[j] & 0xF) | h0) - 16) * y[ib].qs[j] +
                    (((x[ib].qs[j] >> 4) | h1) - 16) * y[ib].qs[j + 16];
        }
        sumf += sumi * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}

static void dot_q5_1_q8_1(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_1 *x = w;
    const df_block_q8_1 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, 4);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            sumi += ((x[ib].qs[j] & 0xF) | h0) * y[ib].qs[j] + ((x[ib].qs[j] >> 4) | h1) * y[ib].qs[j + 16];
        }
        sumf += (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d)) * sumi +
                df_f16_to_f32(x[ib].m) * df_f16_to_f32(y[ib].s);
    }
    *s = sumf;
}

static void dot_mxfp4_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_mxfp4 *x = w;
    const df_block_q8_0 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float d = df_f16_to_f32(y[ib].d) * df_e8m0_half(x[ib].e);
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[ib].qs[j] * df_kvalues_mxfp4[x[ib].qs[j] & 0xF] +
                    y[ib].qs[j + 16] * df_kvalues_mxfp4[x[ib].qs[j] >> 4];
        sumf += d * sumi;
    }
    *s = sumf;
}

static void dot_iq4_nl_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_nl *x = w;
    const df_block_q8_0 *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float d = df_f16_to_f32(y[ib].d) * df_f16_to_f32(x[ib].d);
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[ib].qs[j] * df_kvalues_iq4nl[x[ib].qs[j] & 0xF] +
                    y[ib].qs[j + 16] * df_kvalues_iq4nl[x[ib].qs[j] >> 4];
        sumf += d * sumi;
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ k-quants x Q8_K */

static void dot_q2_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q2_K *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int summs = 0;
        for (int k = 0; k < 16; k++) summs += y[i].bsums[k] * (x[i].scales[k] >> 4);
        int isum = 0;
        for (int e = 0; e < 256; e++) {
            int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
            int q = (x[i].qs[32 * h + l] >> (2 * j)) & 3;
            isum += (x[i].scales[8 * h + 2 * j + l / 16] & 0xF) * q * y[i].qs[e];
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
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int8_t sc[16];
        for (int k = 0; k < 16; k++) {
            int lo = k < 8 ? x[i].scales[k] & 0xF : x[i].scales[k - 8] >> 4;
            int hi = (x[i].scales[8 + k % 4] >> (2 * (k / 4))) & 3;
            sc[k] = (int8_t)((lo | (hi << 4)) - 32);
        }
        int isum = 0;
        for (int e = 0; e < 256; e++) {
            int h = e / 128, r = e % 128, j = r / 32, l = r % 32;
            int q = (x[i].qs[32 * h + l] >> (2 * j)) & 3;
            if (!(x[i].hmask[l] & (1 << (4 * h + j)))) q -= 4;
            isum += sc[8 * h + 2 * j + l / 16] * q * y[i].qs[e];
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum;
    }
    *s = sumf;
}

static inline void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void dot_q4_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_K *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0, summs = 0;
        for (int k = 0; k < 8; k++) {
            int sc, m;
            scale_min_k4(k, x[i].scales, &sc, &m);
            const uint8_t *q = x[i].qs + 32 * (k / 2);
            const int8_t *q8 = y[i].qs + 32 * k;
            int sub = 0;
            for (int l = 0; l < 32; l++) sub += ((k & 1) ? q[l] >> 4 : q[l] & 0xF) * q8[l];
            isum += sc * sub;
            summs += m * (y[i].bsums[2 * k] + y[i].bsums[2 * k + 1]);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum - (df_f16_to_f32(x[i].dmin) * y[i].d) * summs;
    }
    *s = sumf;
}

static void dot_q5_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_K *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0, summs = 0;
        for (int k = 0; k < 8; k++) {
            int sc, m;
            scale_min_k4(k, x[i].scales, &sc, &m);
            const uint8_t *q = x[i].qs + 32 * (k / 2);
            const int8_t *q8 = y[i].qs + 32 * k;
            int sub = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((k & 1) ? q[l] >> 4 : q[l] & 0xF) + ((x[i].qh[l] >> k) & 1) * 16;
                sub += v * q8[l];
            }
            isum += sc * sub;
            summs += m * (y[i].bsums[2 * k] + y[i].bsums[2 * k + 1]);
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum - (df_f16_to_f32(x[i].dmin) * y[i].d) * summs;
    }
    *s = sumf;
}

static void dot_q6_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q6_K *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *L = x[i].ql + 64 * h, *H = x[i].qh + 32 * h;
            const int8_t *sc = x[i].scales + 8 * h, *q8 = y[i].qs + 128 * h;
            for (int l = 0; l < 32; l++) {
                int t = l / 16;
                int q1 = ((L[l] & 0xF) | (((H[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
                isum += sc[t] * q1 * q8[l] + sc[t + 2] * q2 * q8[l + 32] + sc[t + 4] * q3 * q8[l + 64] +
                        sc[t + 6] * q4 * q8[l + 96];
            }
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum;
    }
    *s = sumf;
}

static void dot_iq4_xs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_xs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const uint8_t *qs = x[i].qs + 16 * ib;
            const int8_t *q8 = y[i].qs + 32 * ib;
            int sub = 0;
            for (int j = 0; j < 16; j++)
                sub += q8[j] * df_kvalues_iq4nl[qs[j] & 0xf] + q8[j + 16] * df_kvalues_iq4nl[qs[j] >> 4];
            isum += (ls - 32) * sub;
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * isum;
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ table */

void df_kernels_fill_ref(df_kernel_table *t) {
    memset(t, 0, sizeof *t);
    t->name = "ref";
    t->vec_dot[DF_TYPE_F32] = dot_f32;
    t->vec_dot[DF_TYPE_F16] = dot_f16;
    t->vec_dot[DF_TYPE_BF16] = dot_bf16;
    t->vec_dot[DF_TYPE_Q8_0] = dot_q8_0_q8_0;
    t->vec_dot[DF_TYPE_Q4_0] = dot_q4_0_q8_0;
    t->vec_dot[DF_TYPE_Q4_1] = dot_q4_1_q8_1;
    t->vec_dot[DF_TYPE_Q5_0] = dot_q5_0_q8_0;
    t->vec_dot[DF_TYPE_Q5_1] = dot_q5_1_q8_1;
    t->vec_dot[DF_TYPE_MXFP4] = dot_mxfp4_q8_0;
    t->vec_dot[DF_TYPE_IQ4_NL] = dot_iq4_nl_q8_0;
    t->vec_dot[DF_TYPE_Q2_K] = dot_q2_K_q8_K;
    t->vec_dot[DF_TYPE_Q3_K] = dot_q3_K_q8_K;
    t->vec_dot[DF_TYPE_Q4_K] = dot_q4_K_q8_K;
    t->vec_dot[DF_TYPE_Q5_K] = dot_q5_K_q8_K;
    t->vec_dot[DF_TYPE_Q6_K] = dot_q6_K_q8_K;
    t->vec_dot[DF_TYPE_IQ4_XS] = dot_iq4_xs_q8_K;

    t->from_float[DF_TYPE_F32] = from_f32;
    t->from_float[DF_TYPE_F16] = from_f16;
    t->from_float[DF_TYPE_BF16] = from_bf16;
    t->from_float[DF_TYPE_Q8_0] = df_quantize_row_q8_0_ref;
    t->from_float[DF_TYPE_Q8_1] = df_quantize_row_q8_1_ref;
    t->from_float[DF_TYPE_Q8_K] = df_quantize_row_q8_K_ref;
}
