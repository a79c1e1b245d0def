/* quant_weighted.c — the level searches of the k-quants and IQ4 (shared with the reference
 * quantizers of quant.c) and the importance-weighted quantizers llama-quantize runs when it
 * is given an imatrix: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS (ggml-quants.c's
 * quantize_row_*_impl). Each keeps ggml's operation order to the letter — a*b*c is (a*b)*c,
 * sums run in index order, levels are stored through the same integer types (a negative level
 * wraps in a uint8_t as it does there) — so the bytes equal llama-quantize's (formats.md §2.8,
 * tests/test_quantize_recipes.sh).
 * The importance of column j is qw[j] (the imatrix entry, one value per column of the row);
 * the quantizers combine it with the row's own spread as ggml does: w = qw·sqrt(σ² + x²).
 * Threading: pure functions. */
#include "kernels/quant_impl.h"

#include <math.h>

/* ------------------------------------------------------------------ searches */

int df_best_index_int8(int n, const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[n - 1]) return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

static inline float rmse_weight(int rmse_type, const float *qw, const float *x, int i) {
    if (qw) return qw[i];
    switch (rmse_type) {
    case 1: return x[i] * x[i];
    case 2: return 1;
    case 3: return fabsf(x[i]);
    default: return sqrtf(fabsf(x[i]));
    }
}

/* the value of largest magnitude, its sign kept; false (L zeroed) when even it is below ggml's
 * "all zero" threshold */
static bool signed_max(int n, const float *x, int8_t *L, float *max) {
    float amax = 0;
    *max = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; *max = x[i]; }
    }
    if (amax >= DF_GROUP_MAX_EPS) return true;
    memset(L, 0, (size_t)n);
    return false;
}

float df_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw) {
    float max;
    if (!signed_max(n, x, L, &max)) return 0.f;
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            int l = df_nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + df_imax(-nmax, df_imin(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    const bool return_early = rmse_type < 0;
    if (rmse_type < 0) rmse_type = -rmse_type;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = df_nearest_int(iscale * x[i]);
        l = df_imax(-nmax, df_imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = rmse_weight(rmse_type, qw, x, i);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = df_nearest_int(iscale * x[i]);
            l = df_imax(-nmax, df_imin(nmax - 1, l));
            float w = rmse_weight(rmse_type, qw, x, i);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = df_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + df_imax(-nmax, df_imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float df_make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse) {
    float max;
    if (!signed_max(n, x, L, &max)) return 0.f;
    float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = df_nearest_int(iscale * x[i]);
            l = df_imax(-nmax, df_imin(nmax - 1, l));
            L[i] = (int8_t)l;
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int new_l = df_nearest_int(x[i] * sl2 / slx);
                    new_l = df_imax(-nmax, df_imin(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * new_l;
                        sl2 += w * new_l * new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = df_nearest_int(iscale * x[i]);
        l = df_imax(-nmax, df_imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

/* ggml's make_qkx2_quants (weights given) and make_qkx3_quants (weights NULL: x²) are one
 * algorithm: their only difference, max == min against max <= min, cannot tell apart after
 * min is clipped to <= 0 */
float df_make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                         uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
#define W(i) (weights ? weights[i] : x[i] * x[i])
    float min = x[0], max = x[0];
    float sum_w = W(0);
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = W(i);
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = df_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)df_imax(0, df_imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += W(i) * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = df_nearest_int(iscale * (x[i] - min));
            l = df_imax(0, df_imin(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = W(i);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += W(i) * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
#undef W
}

float df_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
    if (max < DF_GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)df_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        float diff = x[i] - scale * L[i];
        float w = qw[i];
        best_mse += w * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = (0.1f * is + nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = df_imin(nmax, df_nearest_int(iscale_is * x[i]));
            float diff = x[i] - scale_is * l;
            float w = qw[i];
            mse += w * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = df_imin(nmax, df_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        float w = qw[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = qw[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = df_imin(nmax, df_nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ------------------------------------------------------------------ IQ4_NL / IQ4_XS */

/* the scale of one 32-block: a first guess from the largest value, then 2·ntry+1 tries */
static float iq4_block_scale(const float *xb, const float *weight, uint8_t *Lb, int ntry) {
    const int8_t *values = df_kvalues_iq4nl;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        float ax = fabsf(xb[j]);
        if (ax > amax) { amax = ax; max = xb[j]; }
    }
    if (amax < DF_GROUP_MAX_EPS) return 0;
    float d = ntry > 0 ? -max / values[0] : max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        float al = id * xb[j];
        int l = df_best_index_int8(16, values, al);
        Lb[j] = (uint8_t)l;
        float q = values[l];
        float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        id = (itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            float al = id * xb[j];
            int l = df_best_index_int8(16, values, al);
            float q = values[l];
            float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

void df_iq4_quantize_block(int sbs, const float *x, df_f16 *dh, uint8_t *q4, uint16_t *scales_h, uint8_t *scales_l,
                           const float *qw, int ntry) {
    const int8_t *values = df_kvalues_iq4nl;
    float scales[DF_QK_K / 32] = {0}, weight[32];
    uint8_t L[DF_QK_K];
    memset(L, 0, sizeof L);
    float sigma2 = 0;
    for (int j = 0; j < sbs; ++j) sigma2 += x[j] * x[j];
    sigma2 *= 2.f / sbs;
    memset(q4, 0, (size_t)sbs / 2);
    dh[0] = df_f32_to_f16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sbs / 32; ++ib) {
        const float *xb = x + ib * 32;
        if (qw)
            for (int j = 0; j < 32; ++j) weight[j] = qw[ib * 32 + j] * sqrtf(sigma2 + xb[j] * xb[j]);
        else
            for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
        scales[ib] = iq4_block_scale(xb, weight, L + ib * 32, ntry);
        float abs_d = fabsf(scales[ib]);
        if (abs_d > amax_scale) { amax_scale = abs_d; max_scale = scales[ib]; }
    }
    if (sbs / 32 > 1) {
        int nb = sbs / 32;
        memset(scales_h, 0, ((nb + 7) / 8) * sizeof(uint16_t));
        float d = -max_scale / 32;
        dh[0] = df_f32_to_f16(d);
        float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < nb; ++ib) {
            int l = df_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * 32;
            const float *xb = x + ib * 32;
            for (int j = 0; j < 32; ++j) Lb[j] = (uint8_t)df_best_index_int8(16, values, idl * xb[j]);
            l += 32;
            uint8_t l_l = l & 0xf, l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            scales_h[ib / 8] |= (uint16_t)(l_h << 2 * (ib % 8));
        }
    } else {
        dh[0] = df_f32_to_f16(scales[0]);
        if (ntry > 0) {
            float id = scales[0] ? 1 / scales[0] : 0;
            for (int j = 0; j < sbs; ++j) L[j] = (uint8_t)df_best_index_int8(16, values, id * x[j]);
        }
    }
    for (int i = 0; i < sbs / 32; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

static void w_iq4_nl(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    df_block_iq4_nl *y = dst;
    uint16_t uh;
    uint8_t ul[4];
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < npr / 32; i++, y++)
            df_iq4_quantize_block(32, x + r * npr + 32 * i, &y->d, y->qs, &uh, ul, qw ? qw + 32 * i : NULL, 7);
}

static void w_iq4_xs(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    df_block_iq4_xs *y = dst;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < npr / 256; i++, y++) {
            uint16_t sh;
            df_iq4_quantize_block(256, x + r * npr + 256 * i, &y->d, y->qs, &sh, y->scales_l, qw ? qw + 256 * i : NULL, 7);
            y->scales_h = sh;
        }
}

/* ------------------------------------------------------------------ legacy 32-blocks */

/* w = qw·sqrt(σ² + x²) with σ² the row's mean square (ggml's legacy types use the whole row) */
static float row_sigma2(const float *x, int64_t n, float times) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return times * sum_x2 / n;
}
/* ... and their sum, in order */
static float importance(const float *xb, const float *qw, float sigma2, float *weight, int n) {
    float sum = 0;
    for (int j = 0; j < n; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
    for (int j = 0; j < n; ++j) sum += weight[j];
    return sum;
}

/* Q4_0 (nmax 8) and Q5_0 (nmax 16): symmetric levels by make_qx_quants */
static void w_sym_row(const float *x, void *dst, int64_t npr, const float *qw, int nmax) {
    const float sigma2 = row_sigma2(x, npr, 1);
    float weight[32];
    int8_t L[32];
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        const float *xb = x + 32 * ib;
        importance(xb, qw + 32 * ib, sigma2, weight, 32);
        const float d = df_make_qx_quants(32, nmax, xb, L, 1, weight);
        if (nmax == 8) {
            df_block_q4_0 *y = (df_block_q4_0 *)dst + ib;
            y->d = df_f32_to_f16(d);
            for (int j = 0; j < 16; ++j) y->qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
        } else {
            df_block_q5_0 *y = (df_block_q5_0 *)dst + ib;
            y->d = df_f32_to_f16(d);
            df_q5_pack((const uint8_t *)L, y->qs, y->qh);
        }
    }
}

/* Q4_1 (nmax 15) and Q5_1 (nmax 31): levels and a minimum by make_qkx3_quants */
static void w_asym_row(const float *x, void *dst, int64_t npr, const float *qw, int nmax) {
    const float sigma2 = row_sigma2(x, npr, 1);
    float weight[32];
    uint8_t L[32], Laux[32];
    for (int64_t ib = 0; ib < npr / 32; ++ib) {
        const float *xb = x + 32 * ib;
        importance(xb, qw + 32 * ib, sigma2, weight, 32);
        float min;
        const float d = df_make_qkx_quants(32, nmax, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
        if (nmax == 15) {
            df_block_q4_1 *y = (df_block_q4_1 *)dst + ib;
            y->d = df_f32_to_f16(d);
            y->m = df_f32_to_f16(-min);
            for (int j = 0; j < 16; ++j) y->qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
        } else {
            df_block_q5_1 *y = (df_block_q5_1 *)dst + ib;
            y->d = df_f32_to_f16(d);
            y->m = df_f32_to_f16(-min);
            df_q5_pack(L, y->qs, y->qh);
        }
    }
}

/* ------------------------------------------------------------------ k-quants */

static void w_q2_K_row(const float *x, void *dst, int64_t npr, const float *qw, int nmax) {
    (void)nmax; /* 3 */
    df_block_q2_K *y = dst;
    uint8_t L[256], Laux[16], Ls[16], Lm[16];
    float mins[16], scales[16], sw[16], weight[16];
    for (int64_t i = 0; i < npr / 256; i++, x += 256) {
        memset(sw, 0, sizeof sw);
        const float sigma2 = row_sigma2(x, 256, 1);
        for (int j = 0; j < 16; ++j) {
            sw[j] += importance(x + 16 * j, qw + 256 * i + 16 * j, sigma2, weight, 16);
            scales[j] = df_make_qkx_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        const float dm = df_make_qp_quants(16, 15, scales, Ls, sw);
        const float mm = df_make_qp_quants(16, 15, mins, Lm, sw);
        y[i].d = df_f32_to_f16(dm);
        y[i].dmin = df_f32_to_f16(mm);
        for (int j = 0; j < 16; ++j) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        df_q2k_finish(x, &y[i], L);
    }
}

static void w_q3_K_row(const float *x, void *dst, int64_t npr, const float *qw, int nmax) {
    (void)nmax; /* 4 */
    df_block_q3_K *y = dst;
    int8_t L[256], Ls[16];
    float scales[16], weight[16], sw[16];
    for (int64_t i = 0; i < npr / 256; i++, x += 256) {
        const float sigma2 = row_sigma2(x, 256, 2);
        for (int j = 0; j < 16; ++j) {
            sw[j] = importance(x + 16 * j, qw + 256 * i + 16 * j, sigma2, weight, 16);
            scales[j] = df_make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
        }
        memset(y[i].scales, 0, 12);
        const float d_block = df_make_qx_quants(16, 32, scales, Ls, 1, sw);
        for (int j = 0; j < 16; ++j) df_q3k_set_scale(y[i].scales, j, Ls[j]);
        y[i].d = df_f32_to_f16(d_block);
        df_q3k_finish(x, &y[i], L);
    }
}

/* Q4_K (nmax 15) and Q5_K (nmax 31) */
static void w_qk45_row(const float *x, void *dst, int64_t npr, const float *qw, int nmax) {
    uint8_t L[256], Laux[32], Ls[8], Lm[8];
    float weights[32], sw[8], mins[8], scales[8];
    for (int64_t i = 0; i < npr / 256; i++, x += 256) {
        const float sigma2 = row_sigma2(x, 256, 2);
        for (int j = 0; j < 8; ++j) {
            sw[j] = importance(x + 32 * j, qw + 256 * i + 32 * j, sigma2, weights, 32);
            scales[j] = df_make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        const float d_block = df_make_qp_quants(8, 63, scales, Ls, sw);
        const float m_block = df_make_qp_quants(8, 63, mins, Lm, sw);
        /* Q5_K clips the 6-bit scales, Q4_K does not (ggml) */
        uint8_t *sc12 = nmax == 15 ? ((df_block_q4_K *)dst)[i].scales : ((df_block_q5_K *)dst)[i].scales;
        for (int j = 0; j < 8; ++j)
            df_qk45_set_scales(sc12, j, nmax == 15 ? Ls[j] : (uint8_t)df_imin(63, Ls[j]),
                               nmax == 15 ? Lm[j] : (uint8_t)df_imin(63, Lm[j]));
        const df_f16 d = df_f32_to_f16(d_block), dmin = df_f32_to_f16(m_block);
        df_qk45_levels(x, nmax, sc12, d, dmin, L);
        if (nmax == 15) {
            df_block_q4_K *y = (df_block_q4_K *)dst + i;
            y->d = d;
            y->dmin = dmin;
            df_q4k_pack(L, y->qs);
        } else {
            df_block_q5_K *y = (df_block_q5_K *)dst + i;
            y->d = d;
            y->dmin = dmin;
            df_q5k_pack(L, y->qh, y->qs);
        }
    }
}

/* ------------------------------------------------------------------ rows */

typedef void (*row_fn)(const float *x, void *dst, int64_t npr, const float *qw, int nmax);
static void each_row(int type, row_fn f, int nmax, const float *x, void *dst, int64_t nrows, int64_t npr,
                     const float *qw) {
    const size_t rb = (size_t)df_type_row_bytes(type, npr);
    for (int64_t r = 0; r < nrows; r++) f(x + r * npr, (char *)dst + (size_t)r * rb, npr, qw, nmax);
}
static void q6_K_row(const float *x, void *dst, int64_t npr, const float *qw, int nmax) {
    (void)nmax;
    df_q6k_quantize(x, dst, npr, qw);
}
#define ROWS(name, type, f, nmax)                                                              \
    static void name(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) { \
        each_row(type, f, nmax, x, dst, nrows, npr, qw);                                       \
    }
ROWS(w_q4_0, DF_TYPE_Q4_0, w_sym_row, 8)
ROWS(w_q5_0, DF_TYPE_Q5_0, w_sym_row, 16)
ROWS(w_q4_1, DF_TYPE_Q4_1, w_asym_row, 15)
ROWS(w_q5_1, DF_TYPE_Q5_1, w_asym_row, 31)
ROWS(w_q2_K, DF_TYPE_Q2_K, w_q2_K_row, 3)
ROWS(w_q3_K, DF_TYPE_Q3_K, w_q3_K_row, 4)
ROWS(w_q4_K, DF_TYPE_Q4_K, w_qk45_row, 15)
ROWS(w_q5_K, DF_TYPE_Q5_K, w_qk45_row, 31)
ROWS(w_q6_K, DF_TYPE_Q6_K, q6_K_row, 32)
#undef ROWS

const df_qrows_fn df_qrows_weighted[DF_TYPE_COUNT] = {
    [DF_TYPE_Q4_0] = w_q4_0,       [DF_TYPE_Q4_1] = w_q4_1,       [DF_TYPE_Q5_0] = w_q5_0,
    [DF_TYPE_Q5_1] = w_q5_1,       [DF_TYPE_Q2_K] = w_q2_K,       [DF_TYPE_Q3_K] = w_q3_K,
    [DF_TYPE_Q4_K] = w_q4_K,       [DF_TYPE_Q5_K] = w_q5_K,       [DF_TYPE_Q6_K] = w_q6_K,
    [DF_TYPE_IQ4_NL] = w_iq4_nl,   [DF_TYPE_IQ4_XS] = w_iq4_xs,
    [DF_TYPE_IQ2_XXS] = df_quantize_iq2_xxs, [DF_TYPE_IQ2_XS] = df_quantize_iq2_xs,
    [DF_TYPE_IQ2_S] = df_quantize_iq2_s,     [DF_TYPE_IQ3_XXS] = df_quantize_iq3_xxs,
    [DF_TYPE_IQ3_S] = df_quantize_iq3_s,     [DF_TYPE_IQ1_S] = df_quantize_iq1_s,
    [DF_TYPE_IQ1_M] = df_quantize_iq1_m,
};
