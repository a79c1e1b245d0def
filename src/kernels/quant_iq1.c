/* quant_iq1.c — IQ1_S and IQ1_M (ternary values ±1, 0 shifted by ±δ, 8 of them one point of
 * the 2048-point codebook) and the ternary TQ1_0 / TQ2_0, as ggml-quants.c quantizes them:
 * for IQ1 the best split of a block's sorted values into the three levels is found
 * exhaustively from prefix sums, groups that are not codebook points are replaced by their
 * best neighbour, and the block scales are refit (formats.md §2.8). Same operation order as
 * ggml, so the bytes equal llama-quantize's.
 * Threading: pure functions (the codebook's search form is built once, quant_iq.c). */
#include "kernels/quant_impl.h"

#include <float.h>
#include <math.h>

#define IQ1_DELTA 0.125f /* IQ1S_DELTA = IQ1M_DELTA */

typedef struct { float x; int i; } val_idx; /* ggml's float "pairs" with the index behind */

/* the n values of xb with their indices, ascending by value, equal values in index order: what
 * glibc's (merge sort) qsort gives ggml's iq1_sort_helper on these arrays */
static void sort_values(const float *xb, val_idx *p, int n) {
    for (int j = 0; j < n; ++j) p[j] = (val_idx){xb[j], j};
    for (int a = 1; a < n; ++a) {
        val_idx v = p[a];
        int b = a;
        while (b > 0 && p[b - 1].x > v.x) { p[b] = p[b - 1]; --b; }
        p[b] = v;
    }
}

static const int8_t *point(const df_iq_grid *g, int i) { return (const int8_t *)(g->grid8 + i); }

/* ggml's iq1_find_best_neighbour2: the neighbour of u nearest xval with level values xg at this
 * scale; its levels into L */
static int best_neighbour(const df_iq_grid *g, int u, const float *xval, const float *weight, float scale,
                          const float *xg, int8_t *L) {
    const uint16_t *nb = g->neighbours + (-g->map[u] - 1);
    float best_score = FLT_MAX;
    int gi = -1;
    for (int j = 1; j <= nb[0]; ++j) {
        const int8_t *pg = point(g, nb[j]);
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            float q = xg[(pg[i] - 1) / 2];
            float w = weight[i];
            float diff = scale * q - xval[i];
            d2 += w * diff * diff;
        }
        if (d2 < best_score) { best_score = d2; gi = nb[j]; }
    }
    if (gi < 0) { /* every distance non-finite: ggml then scans the whole codebook */
        for (int k = 0; k < g->n; ++k) {
            const int8_t *pg = point(g, k);
            float d2 = 0;
            for (int j = 0; j < 8; ++j) {
                float w = weight[j];
                float q = xg[(pg[j] - 1) / 2];
                float diff = scale * q - xval[j];
                d2 += w * diff * diff;
            }
            if (d2 < best_score) { best_score = d2; gi = k; }
        }
        if (gi < 0) gi = nb[1];
    }
    const int8_t *pg = point(g, gi);
    for (int i = 0; i < 8; ++i) L[i] = (int8_t)((pg[i] - 1) / 2);
    return gi;
}

/* codebook indices of the groups of 8 of L (levels 0..2), replacing off-grid groups by their
 * best neighbour at this scale; xx_of(k) gives group k's level values. True when all were on. */
static bool iq1_indices(const df_iq_grid *g, int ngroups, const float *xb, const float *weight, float scale,
                        const float *const *xx, int8_t *L, uint16_t *index) {
    bool all_on_grid = true;
    for (int k = 0; k < ngroups; ++k) {
        int u = 0;
        for (int j = 0; j < 8; ++j) u |= L[8 * k + j] << 2 * j;
        int gi = g->map[u];
        if (gi < 0) {
            all_on_grid = false;
            gi = best_neighbour(g, u, xb + 8 * k, weight + 8 * k, scale, xx[k], L + 8 * k);
        }
        index[k] = (uint16_t)gi;
    }
    return all_on_grid;
}

/* refit of the scale to the chosen points: sumqx / sumq2 when both are positive */
static float iq1_refit(const df_iq_grid *g, int ngroups, const float *xb, const float *weight,
                       const float *const *xx, const uint16_t *index, float scale) {
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < ngroups; ++k) {
        const int8_t *pg = point(g, index[k]);
        for (int j = 0; j < 8; ++j) {
            float w = weight[8 * k + j];
            float q = xx[k][(pg[j] - 1) / 2];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

static float block_sigma2(const float *xbl) {
    float sumx2 = 0;
    for (int i = 0; i < DF_QK_K; ++i) sumx2 += xbl[i] * xbl[i];
    return 2 * sumx2 / DF_QK_K;
}
static void iq1_weights(const float *xb, const float *qw, float sigma2, float *weight, int n) {
    for (int i = 0; i < n; ++i) weight[i] = qw ? qw[i] * sqrtf(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}
static float absmax(const float *xb, int n) {
    float max = fabsf(xb[0]);
    for (int i = 1; i < n; ++i) max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
    return max;
}
/* sort the block's values and assign the levels 0 / 1 / 2 to the three runs [0,i1) [i1,i2) [i2,n) */
static void split_levels(const val_idx *p, int n, int i1, int i2, int8_t *L) {
    for (int j = 0; j < i1; ++j) L[p[j].i] = 0;
    for (int j = i1; j < i2; ++j) L[p[j].i] = 1;
    for (int j = i2; j < n; ++j) L[p[j].i] = 2;
}

/* ------------------------------------------------------------------ IQ1_S */

static const float x_p[3] = {-1 + IQ1_DELTA, IQ1_DELTA, 1 + IQ1_DELTA};
static const float x_m[3] = {-1 - IQ1_DELTA, -IQ1_DELTA, 1 - IQ1_DELTA};

/* the best (i1, i2) split and shift of one 32-block from its prefix sums; false if none */
static bool iq1s_split(const float *sumx, const float *sumw, int n, float *scale, int *bi1, int *bi2, int *shift) {
    float best_score = -FLT_MAX;
    *bi1 = *bi2 = -1;
    *shift = 0;
    for (int i1 = 0; i1 <= n; ++i1) {
        for (int i2 = i1; i2 <= n; ++i2) {
            for (int sgn = 1; sgn >= -1; sgn -= 2) {
                const float *xv = sgn == 1 ? x_p : x_m;
                float sumqx = (sumx[i1] - sumx[0]) * xv[0] + (sumx[i2] - sumx[i1]) * xv[1] + (sumx[n] - sumx[i2]) * xv[2];
                float sumq2 = (sumw[i1] - sumw[0]) * xv[0] * xv[0] + (sumw[i2] - sumw[i1]) * xv[1] * xv[1] +
                              (sumw[n] - sumw[i2]) * xv[2] * xv[2];
                if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                    *scale = sumqx / sumq2;
                    best_score = *scale * sumqx;
                    *bi1 = i1;
                    *bi2 = i2;
                    *shift = sgn;
                }
            }
        }
    }
    return *bi1 >= 0 && *bi2 >= 0 && *shift != 0;
}

static void iq1_s_row(const df_iq_grid *g, const float *x, df_block_iq1_s *y, int64_t n, const float *qw) {
    float scales[8], weight[32], sumx[33], sumw[33];
    int8_t L[32], shifts[8];
    uint16_t index[4];
    val_idx p[32];
    for (int64_t ibl = 0; ibl < n / DF_QK_K; ++ibl, ++y) {
        y->d = df_f32_to_f16(0.f);
        memset(y->qs, 0, sizeof y->qs);
        memset(y->qh, 0, sizeof y->qh);
        float max_scale = 0;
        const float *xbl = x + DF_QK_K * ibl;
        const float sigma2 = block_sigma2(xbl);
        for (int ib = 0; ib < 8; ++ib) {
            const float *xb = xbl + 32 * ib;
            iq1_weights(xb, qw ? qw + DF_QK_K * ibl + 32 * ib : NULL, sigma2, weight, 32);
            const float max = absmax(xb, 32);
            scales[ib] = 0;
            shifts[ib] = 1;
            if (max < DF_GROUP_MAX_EPS_IQ1_S) continue;
            sort_values(xb, p, 32);
            sumx[0] = sumw[0] = 0;
            for (int j = 0; j < 32; ++j) {
                const int i = p[j].i;
                sumx[j + 1] = sumx[j] + weight[i] * xb[i];
                sumw[j + 1] = sumw[j] + weight[i];
            }
            float scale = max;
            int i1, i2, shift;
            if (!iq1s_split(sumx, sumw, 32, &scale, &i1, &i2, &shift)) continue;
            split_levels(p, 32, i1, i2, L);
            if (scale < 0) {
                for (int j = 0; j < 32; ++j) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                shift = -shift;
            }
            const float *xx = shift == 1 ? x_p : x_m;
            const float *const xxs[4] = {xx, xx, xx, xx};
            if (!iq1_indices(g, 4, xb, weight, scale, xxs, L, index)) scale = iq1_refit(g, 4, xb, weight, xxs, index, scale);
            uint16_t h = 0;
            for (int k = 0; k < 4; ++k) {
                y->qs[4 * ib + k] = (uint8_t)(index[k] & 255);
                h |= (uint16_t)((index[k] >> 8) << 3 * k);
            }
            y->qh[ib] = h;
            scales[ib] = scale;
            shifts[ib] = (int8_t)shift;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 15;
        y->d = df_f32_to_f16(d * 1.125f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) {
            int l = df_imax(0, df_imin(7, df_nearest_int(0.5f * (id * scales[ib] - 1))));
            if (shifts[ib] == -1) l |= 8;
            y->qh[ib] |= (uint16_t)(l << 12);
        }
    }
}

/* ------------------------------------------------------------------ IQ1_M */

/* level values of group h (0: first 8 values, 1: last 8) under shift pattern k: 0 (+,+), 1 (+,-),
 * 2 (-,+), 3 (-,-) */
static const float *m_values(int k, int h) { return (h == 0 ? k < 2 : k % 2 == 0) ? x_p : x_m; }

/* the best split and shift pattern of one 16-block, summing each candidate split as ggml does */
static bool iq1m_split(const val_idx *p, const float *xb, const float *weight, float *scale, int *bi1, int *bi2,
                       int *bk) {
    float best_score = -FLT_MAX;
    *bi1 = *bi2 = *bk = -1;
    for (int i1 = 0; i1 <= 16; ++i1) {
        for (int i2 = i1; i2 <= 16; ++i2) {
            float sumqx[4] = {0, 0, 0, 0}, sumq2[4] = {0, 0, 0, 0};
            for (int j = 0; j < 16; ++j) {
                const int i = p[j].i, seg = j < i1 ? 0 : j < i2 ? 1 : 2;
                for (int k = 0; k < 4; ++k) {
                    const float v = m_values(k, i >= 8)[seg];
                    sumqx[k] += weight[i] * v * xb[i];
                    sumq2[k] += weight[i] * v * v;
                }
            }
            for (int k = 0; k < 4; ++k) {
                if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                    *scale = sumqx[k] / sumq2[k];
                    best_score = *scale * sumqx[k];
                    *bi1 = i1;
                    *bi2 = i2;
                    *bk = k;
                }
            }
        }
    }
    return *bi1 >= 0 && *bi2 >= 0 && *bk >= 0;
}

/* the super-block scale *d refit to the chosen points and 3-bit block scales ls (ggml: kept
 * when the weighted norm is 0) */
static void iq1m_refit_d(const df_iq_grid *g, const df_block_iq1_m *y, const float *xbl, const float *qw,
                         float sigma2, const int8_t *shifts, const int *ls, float *d) {
    float weight[16], sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ++ib) {
        const float *xb = xbl + 16 * ib;
        iq1_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, weight, 16);
        for (int k = 0; k < 2; ++k) {
            const float *xx = m_values(shifts[ib], k);
            const int8_t *pg = point(g, y->qs[2 * ib + k] + ((y->qh[ib] << (8 - 4 * k)) & 0x700));
            for (int j = 0; j < 8; ++j) {
                float w = weight[8 * k + j];
                float q = xx[(pg[j] - 1) / 2] * (2 * ls[ib] + 1);
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
    }
    if (sumq2 > 0) *d = sumqx / sumq2;
}

static void iq1_m_row(const df_iq_grid *g, const float *x, df_block_iq1_m *y, int64_t n, const float *qw) {
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    float scales[16], weight[16];
    int8_t L[16], shifts[16];
    uint16_t index[2];
    val_idx p[16];
    for (int64_t ibl = 0; ibl < n / DF_QK_K; ++ibl, ++y) {
        memset(y, 0, sizeof *y);
        float max_scale = 0;
        const float *xbl = x + DF_QK_K * ibl;
        const float *qwb = qw ? qw + DF_QK_K * ibl : NULL;
        const float sigma2 = block_sigma2(xbl);
        for (int ib = 0; ib < 16; ++ib) {
            const float *xb = xbl + 16 * ib;
            iq1_weights(xb, qwb ? qwb + 16 * ib : NULL, sigma2, weight, 16);
            const float max = absmax(xb, 16);
            scales[ib] = 0;
            shifts[ib] = 0;
            if (max < DF_GROUP_MAX_EPS_IQ1_M) continue;
            sort_values(xb, p, 16);
            float scale = max;
            int i1, i2, k;
            if (!iq1m_split(p, xb, weight, &scale, &i1, &i2, &k)) continue;
            split_levels(p, 16, i1, i2, L);
            if (scale < 0) {
                for (int j = 0; j < 16; ++j) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                k = 3 - k;
            }
            const float *const xxs[2] = {m_values(k, 0), m_values(k, 1)};
            if (!iq1_indices(g, 2, xb, weight, scale, xxs, L, index)) scale = iq1_refit(g, 2, xb, weight, xxs, index, scale);
            y->qs[2 * ib + 0] = (uint8_t)(index[0] & 255);
            y->qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
            y->qh[ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
            scales[ib] = scale;
            shifts[ib] = (int8_t)k;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        uint16_t sc[4] = {0, 0, 0, 0};
        float d = max_scale / 15;
        const float id = 1 / d;
        int ls[16];
        for (int ib = 0; ib < 16; ++ib) {
            ls[ib] = df_imax(0, df_imin(7, df_nearest_int(0.5f * (id * scales[ib + 0] - 1))));
            sc[ib / 4] |= (uint16_t)(ls[ib] << 3 * (ib % 4));
            y->qh[ib] |= masks[shifts[ib]];
        }
        iq1m_refit_d(g, y, xbl, qwb, sigma2, shifts, ls, &d);
        const uint16_t s = df_f32_to_f16(d * 1.1125f);
        sc[0] |= (uint16_t)((s & 0x000f) << 12);
        sc[1] |= (uint16_t)((s & 0x00f0) << 8);
        sc[2] |= (uint16_t)((s & 0x0f00) << 4);
        sc[3] |= (uint16_t)(s & 0xf000);
        memcpy(y->scales, sc, sizeof sc);
    }
}

/* ------------------------------------------------------------------ entry points */

void df_quantize_iq1_s(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    const df_iq_grid *g = df_iq_grid_get(DF_IQG_IQ1S);
    if (!g) return;
    for (int64_t r = 0; r < nrows; r++) iq1_s_row(g, x + r * npr, (df_block_iq1_s *)dst + r * (npr / DF_QK_K), npr, qw);
}

void df_quantize_iq1_m(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    const df_iq_grid *g = df_iq_grid_get(DF_IQG_IQ1S);
    if (!g) return;
    for (int64_t r = 0; r < nrows; r++) iq1_m_row(g, x + r * npr, (df_block_iq1_m *)dst + r * (npr / DF_QK_K), npr, qw);
}

/* ------------------------------------------------------------------ TQ1_0 / TQ2_0 */

static float tq_scale(const float *x, df_f16 *d) {
    float amax = 0.0f;
    for (int j = 0; j < DF_QK_K; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    *d = df_f32_to_f16(amax);
    return amax ? 1.0f / amax : 0.0f;
}
static inline int trit(float v, float id) { return (int)lroundf(v * id) + 1; } /* -1, 0, 1 -> 0, 1, 2 */
/* n trits of x[0], x[stride], ... as base-3 digits, first most significant, in 8-bit fixed point
 * (ceiling of q·256/243) */
static uint8_t tq_byte(const float *x, int stride, int n, int shift3, float id) {
    uint8_t q = 0;
    for (int k = 0; k < n; ++k) q = (uint8_t)(q * 3 + trit(x[k * stride], id));
    for (int k = 0; k < shift3; ++k) q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}

void df_quantize_tq1_0(const float *x, void *dst, int64_t n) {
    df_block_tq1_0 *y = dst;
    for (int64_t i = 0; i < n / DF_QK_K; i++, x += DF_QK_K) {
        const float id = tq_scale(x, &y[i].d);
        for (int m = 0; m < 32; ++m) y[i].qs[m] = tq_byte(x + m, 32, 5, 0, id);
        for (int m = 0; m < 16; ++m) y[i].qs[32 + m] = tq_byte(x + 160 + m, 16, 5, 0, id);
        for (int j = 0; j < 4; ++j) y[i].qh[j] = tq_byte(x + 240 + j, 4, 4, 1, id);
    }
}

void df_quantize_tq2_0(const float *x, void *dst, int64_t n) {
    df_block_tq2_0 *y = dst;
    for (int64_t i = 0; i < n / DF_QK_K; i++, x += DF_QK_K) {
        const float id = tq_scale(x, &y[i].d);
        for (int j = 0; j < 64; j += 32)
            for (int m = 0; m < 32; ++m) {
                uint8_t q = 0;
                for (int k = 0; k < 4; ++k) q = (uint8_t)(q + ((trit(x[4 * j + m + 32 * k], id) & 3) << 2 * k));
                y[i].qs[j + m] = q;
            }
    }
}
