/* ref.c — scalar reference kernels: the oracle every SIMD table is tested against; fills every
 * mandatory slot of the table (the optional ones are float orders of particular ggml builds).
 * Formulas are those of llama.cpp's generic CPU kernels (formats.md §2.6): exact integer sums per
 * block, scaled in F32; F32/F16/BF16 dots accumulate in double (ggml_float); row ops use libm
 * expf on every element.
 * Threading: pure functions. */
#include <math.h>

#include "kernels/kernels_impl.h"

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

static void dot_q4_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_K *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int isum = 0, summs = 0;
        for (int k = 0; k < 8; k++) {
            int sc, m;
            df_scale_min_k4(k, x[i].scales, &sc, &m);
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
            df_scale_min_k4(k, x[i].scales, &sc, &m);
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

/* ------------------------------------------------------------------ i-quants x Q8_K
 * Integer sums per 8-element sub-group times the integer part of the sub-scale, then
 * d·dy·(format constant), as llama.cpp's generic kernels. */

static inline int sdot8(const uint8_t *g, uint8_t signs, const int8_t *q8) {
    int s = 0;
    for (int j = 0; j < 8; ++j) s += ((signs >> j) & 1) ? -(g[j] * q8[j]) : g[j] * q8[j];
    return s;
}

static void dot_iq2_xxs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_xxs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        int bsum = 0;
        for (int ib = 0; ib < 8; ++ib) {
            uint32_t a[2];
            memcpy(a, x[i].qs + 4 * ib, 8);
            const uint8_t *a8 = (const uint8_t *)a;
            const int ls = 2 * (a[1] >> 28) + 1;
            int sumi = 0;
            for (int l = 0; l < 4; ++l, q8 += 8)
                sumi += sdot8((const uint8_t *)(df_iq2xxs_grid + a8[l]), df_ksigns_iq2xs[(a[1] >> 7 * l) & 127], q8);
            bsum += sumi * ls;
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
        int bsum = 0;
        for (int ib = 0; ib < 8; ++ib) {
            const int ls1 = 2 * (x[i].scales[ib] & 0xf) + 1, ls2 = 2 * (x[i].scales[ib] >> 4) + 1;
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 4; ++l, q8 += 8) {
                const uint16_t v = x[i].qs[4 * ib + l];
                int t = sdot8((const uint8_t *)(df_iq2xs_grid + (v & 511)), df_ksigns_iq2xs[v >> 9], q8);
                if (l < 2) s1 += t;
                else s2 += t;
            }
            bsum += s1 * ls1 + s2 * ls2;
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum * 0.125f;
    }
    *s = sumf;
}

static void dot_iq2_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_s *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = qs + 32;
        int bsum = 0;
        for (int ib = 0; ib < 8; ++ib, qs += 4, signs += 4) {
            const int ls1 = 2 * (x[i].scales[ib] & 0xf) + 1, ls2 = 2 * (x[i].scales[ib] >> 4) + 1;
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 4; ++l, q8 += 8) {
                int t = sdot8((const uint8_t *)(df_iq2s_grid + (qs[l] | ((qh[ib] << (8 - 2 * l)) & 0x300))), signs[l], q8);
                if (l < 2) s1 += t;
                else s2 += t;
            }
            bsum += s1 * ls1 + s2 * ls2;
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum * 0.125f;
    }
    *s = sumf;
}

static inline int sdot4x2(const uint8_t *g1, const uint8_t *g2, uint8_t signs, const int8_t *q8) {
    uint8_t g[8];
    memcpy(g, g1, 4);
    memcpy(g + 4, g2, 4);
    return sdot8(g, signs, q8);
}

static void dot_iq3_xxs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq3_xxs *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *ss = x[i].qs + 64;
        int bsum = 0;
        for (int ib = 0; ib < 8; ++ib, qs += 8) {
            uint32_t a;
            memcpy(&a, ss + 4 * ib, 4);
            const int ls = 2 * (a >> 28) + 1;
            int sumi = 0;
            for (int l = 0; l < 4; ++l, q8 += 8)
                sumi += sdot4x2((const uint8_t *)(df_iq3xxs_grid + qs[2 * l]), (const uint8_t *)(df_iq3xxs_grid + qs[2 * l + 1]),
                                df_ksigns_iq2xs[(a >> 7 * l) & 127], q8);
            bsum += sumi * ls;
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum * 0.25f;
    }
    *s = sumf;
}

static void dot_iq3_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq3_s *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = x[i].signs;
        int bsum = 0;
        for (int ib = 0; ib < 8; ++ib, qs += 8, signs += 4) {
            const int ls = 2 * ((x[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf) + 1;
            int sumi = 0;
            for (int l = 0; l < 4; ++l, q8 += 8)
                sumi += sdot4x2((const uint8_t *)(df_iq3s_grid + (qs[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256))),
                                (const uint8_t *)(df_iq3s_grid + (qs[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256))), signs[l], q8);
            bsum += sumi * ls;
        }
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * bsum;
    }
    *s = sumf;
}

static void dot_iq1_s_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq1_s *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs;
        int sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < 8; ++ib, qs += 4) {
            const uint16_t h = x[i].qh[ib];
            const int ls = 2 * ((h >> 12) & 7) + 1;
            const int delta = h & 0x8000 ? -1 : 1;
            int lsum = 0, ysum = 0;
            for (int l = 0; l < 4; ++l, q8 += 8) {
                const int8_t *g = (const int8_t *)(df_iq1s_grid + (qs[l] | (((h >> 3 * l) & 7) << 8)));
                for (int j = 0; j < 8; ++j) { lsum += g[j] * q8[j]; ysum += q8[j]; }
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * ysum;
        }
        sumf += df_f16_to_f32(x[i].d) * y[i].d * (sumi + DF_IQ1S_DELTA * sumi1);
    }
    *s = sumf;
}

static void dot_iq1_m_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq1_m *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const uint16_t du = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs, *qh = x[i].qh;
        int sumi1 = 0, sumi2 = 0;
        for (int ib = 0; ib < 8; ++ib, qs += 4, qh += 2) {
            const int ls1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1;
            const int ls2 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1;
            const int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                                qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
            const int dl[4] = {qh[0] & 0x08 ? -1 : 1, qh[0] & 0x80 ? -1 : 1, qh[1] & 0x08 ? -1 : 1, qh[1] & 0x80 ? -1 : 1};
            int lsum[2] = {0, 0}, dsum[2] = {0, 0};
            for (int l = 0; l < 4; ++l, q8 += 8) {
                const int8_t *g = (const int8_t *)(df_iq1s_grid + idx[l]);
                int a = 0, b = 0;
                for (int j = 0; j < 8; ++j) { a += g[j] * q8[j]; b += q8[j]; }
                lsum[l / 2] += a;
                dsum[l / 2] += dl[l] * b;
            }
            sumi1 += ls1 * lsum[0] + ls2 * lsum[1];
            sumi2 += ls1 * dsum[0] + ls2 * dsum[1];
        }
        sumf += df_f16_to_f32(du) * y[i].d * (sumi1 + DF_IQ1S_DELTA * sumi2);
    }
    *s = sumf;
}

static void dot_tq1_0_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_tq1_0 *x = w;
    const df_block_q8_K *y = xq;
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        int sumi = 0, e = 0;
        for (int k = 0; k < 5; ++k)
            for (int m = 0; m < 32; ++m, ++e) sumi += ((((uint16_t)(uint8_t)(x[i].qs[m] * pow3[k]) * 3) >> 8) - 1) * q8[e];
        for (int k = 0; k < 5; ++k)
            for (int m = 0; m < 16; ++m, ++e) sumi += ((((uint16_t)(uint8_t)(x[i].qs[32 + m] * pow3[k]) * 3) >> 8) - 1) * q8[e];
        for (int k = 0; k < 4; ++k)
            for (int j = 0; j < 4; ++j, ++e) sumi += ((((uint16_t)(uint8_t)(x[i].qh[j] * pow3[k]) * 3) >> 8) - 1) * q8[e];
        sumf += (float)sumi * (df_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sumf;
}

static void dot_tq2_0_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_tq2_0 *x = w;
    const df_block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const int8_t *q8 = y[i].qs;
        int sumi = 0, e = 0;
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m, ++e) sumi += (((x[i].qs[j + m] >> (2 * l)) & 3) - 1) * q8[e];
        sumf += (float)sumi * (df_f16_to_f32(x[i].d) * y[i].d);
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q4_K x8 (repacked) x Q8_K */

/* Exact integer sums of one x8 record for row r against y: per sub-block j the scale-weighted
 * product sum is[j] and the min term ms[j] = m_j * (bsums[2j] + bsums[2j+1]). */
static void q4kx8_sums(const df_block_q4_Kx8 *x, const df_block_q8_K *y, int r, int is[8], int ms[8]) {
    for (int j = 0; j < 8; j++) {
        int dot = 0;
        for (int h = 0; h < 2; h++) {
            const int z = 2 * j + h;
            for (int k = 0; k < 8; k++) {
                const uint8_t v = x->qs[64 * z + 8 * r + k];
                dot += (v & 0xF) * y->qs[16 * z + k] + (v >> 4) * y->qs[16 * z + 8 + k];
            }
        }
        const int i = 8 * r + j;
        is[j] = (x->sc[i] & 63) * dot;
        ms[j] = df_q4kx8_min(x, i) * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
}

/* ggml's gemv order: per block, one fma of the block's integer sum (and of its min term). */
static void dot_q4_Kx8_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q4_Kx8 *x = w;
    const df_block_q8_K *y = xq;
    for (int r = 0; r < 8; r++) {
        float acc = 0, accm = 0;
        for (int64_t i = 0; i < n / 256; i++) {
            int is[8], ms[8], I = 0, M = 0;
            q4kx8_sums(&x[i], &y[i], r, is, ms);
            for (int j = 0; j < 8; j++) { I += is[j]; M += ms[j]; }
            acc = fmaf((float)I, df_f16_to_f32(x[i].d[r]) * y[i].d, acc);
            accm = fmaf((float)M, df_f16_to_f32(x[i].dmin[r]) * y[i].d, accm);
        }
        s[r] = acc - accm;
    }
}

/* ggml's gemm order: one fma per 64 columns (sub-blocks 2c, 2c+1). */
static void dot4_q4_Kx8_q8_K(int64_t n, float *s, size_t lds, const void *w, const void *xq, size_t stride) {
    const df_block_q4_Kx8 *x = w;
    for (int t = 0; t < 4; t++) {
        const df_block_q8_K *y = (const df_block_q8_K *)((const char *)xq + t * stride);
        for (int r = 0; r < 8; r++) {
            float acc = 0, accm = 0;
            for (int64_t i = 0; i < n / 256; i++) {
                int is[8], ms[8];
                q4kx8_sums(&x[i], &y[i], r, is, ms);
                const float D = df_f16_to_f32(x[i].d[r]) * y[i].d, DM = df_f16_to_f32(x[i].dmin[r]) * y[i].d;
                for (int c = 0; c < 4; c++) {
                    acc = fmaf((float)(is[2 * c] + is[2 * c + 1]), D, acc);
                    accm = fmaf((float)(ms[2 * c] + ms[2 * c + 1]), DM, accm);
                }
            }
            s[t * lds + r] = acc - accm;
        }
    }
}

/* ------------------------------------------------------------------ F32 row ops
 * ggml without SIMD: libm expf on every element, the sum in double. */

static void softmax_ref(const float *x, float *y, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        const float e = expf(x[i] - mx);
        sum += (double)e;
        y[i] = e;
    }
    const float is = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) y[i] *= is;
}

static void swiglu_ref(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = df_silu(g[i]) * u[i];
}

static void silu_ref(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = df_silu(x[i]);
}

/* ------------------------------------------------------------------ attention
 * K·Q in 8 float lanes, (l0+l4 + l1+l5) + (l2+l6 + l3+l7), plus the n % 8 leftover products
 * added in double; the softmax sum stays a plain multiply-add (attn_fma_sum false). */
static float attn_dot_f16(const df_f16 *a, const df_f16 *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += df_f16_to_f32(a[i + j]) * df_f16_to_f32(b[i + j]);
    double s = 0.0;
    for (; i < n; i++) s += (double)(df_f16_to_f32(a[i]) * df_f16_to_f32(b[i]));
    float t = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    return (float)(t + s);
}

static float attn_dot_f16_f32(const df_f16 *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += df_f16_to_f32(a[i + j]) * b[i + j];
    for (; i < n; i++) acc[0] += df_f16_to_f32(a[i]) * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static void attn_mad_f16(df_f16 *acc, const df_f16 *v, float s, int n) {
    for (int i = 0; i < n; i++) acc[i] = df_f32_to_f16(fmaf(df_f16_to_f32(v[i]), s, df_f16_to_f32(acc[i])));
}

static void attn_mad_f32f(float *acc, const float *v, float s, int n) {
    for (int i = 0; i < n; i++) acc[i] += v[i] * s;
}

static void attn_mad_f32(float *acc, const df_f16 *v, float s, int n) {
    for (int i = 0; i < n; i++) acc[i] = fmaf(df_f16_to_f32(v[i]), s, acc[i]);
}

/* ------------------------------------------------------------------ KDA */

static void kda_head_ref(float *M, int S, int nt, const float *q, const float *k, const float *v, const float *g,
                         int64_t ld, const float *beta, int64_t ldb, float *o) {
    df_kda_head_body(M, S, nt, q, k, v, g, ld, beta, ldb, o, df_kda_dot_vd);
}

/* ------------------------------------------------------------------ table */

void df_kernels_fill_ref(df_kernel_table *t) {
    memset(t, 0, sizeof *t);
    t->name = "ref";
    t->isa = DF_ISA_REF;
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
    t->vec_dot[DF_TYPE_IQ2_XXS] = dot_iq2_xxs_q8_K;
    t->vec_dot[DF_TYPE_IQ2_XS] = dot_iq2_xs_q8_K;
    t->vec_dot[DF_TYPE_IQ2_S] = dot_iq2_s_q8_K;
    t->vec_dot[DF_TYPE_IQ3_XXS] = dot_iq3_xxs_q8_K;
    t->vec_dot[DF_TYPE_IQ3_S] = dot_iq3_s_q8_K;
    t->vec_dot[DF_TYPE_IQ1_S] = dot_iq1_s_q8_K;
    t->vec_dot[DF_TYPE_IQ1_M] = dot_iq1_m_q8_K;
    t->vec_dot[DF_TYPE_TQ1_0] = dot_tq1_0_q8_K;
    t->vec_dot[DF_TYPE_TQ2_0] = dot_tq2_0_q8_K;
    t->vec_dot_x8[DF_TYPE_Q4_K_X8] = dot_q4_Kx8_q8_K;
    t->vec_dot4_x8g[DF_TYPE_Q4_K_X8] = dot4_q4_Kx8_q8_K;

    t->from_float[DF_TYPE_F32] = from_f32;
    t->from_float[DF_TYPE_F16] = from_f16;
    t->from_float[DF_TYPE_BF16] = from_bf16;
    t->from_float[DF_TYPE_Q8_0] = df_quantize_row_q8_0_ref;
    t->from_float[DF_TYPE_Q8_1] = df_quantize_row_q8_1_ref;
    t->from_float[DF_TYPE_Q8_K] = df_quantize_row_q8_K_ref;

    t->softmax = softmax_ref;
    t->swiglu = swiglu_ref;
    t->silu = silu_ref;
    t->attn_dot_f16 = attn_dot_f16;
    t->attn_mad_f16 = attn_mad_f16;
    t->attn_fma_sum = false;
    t->attn_dot_f16_f32 = attn_dot_f16_f32;
    t->attn_mad_f32 = attn_mad_f32;
    t->attn_mad_f32f = attn_mad_f32f;
    t->kda_head = kda_head_ref;
    t->ssm_conv_vec = 0;
    t->gemm_f32 = NULL; /* optional: F32 batches take vec_dot per output */
    t->gemm_f16 = t->gemm_bf16 = NULL;
    t->f32_epr = 8;
}
