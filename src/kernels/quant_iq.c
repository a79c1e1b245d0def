/* quant_iq.c — the lattice i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S, and the search
 * form of every i-quant codebook (also IQ1_S / IQ1_M's, used by quant_iq1.c), as ggml-quants.c
 * quantizes them: per group of 8 (IQ2) or 4 (IQ3) values the levels l = round((x/s - 1)/2)
 * must form a point of the codebook; a point off the codebook is replaced by the best of its
 * precomputed neighbours, and the block scale s is searched over a range of tries (formats.md
 * §2.8). The arithmetic follows ggml's operation for operation so that the bytes equal
 * llama-quantize's.
 * The codebooks themselves are kernels/iq_tables.c's (the dequantizers' tables): the level of a
 * coordinate is the rank of its value among the codebook's values, which is how ggml's init
 * functions build them from their packed level tables.
 * Threading: pure functions; each grid is built once (pthread_once) and read-only after. */
#include "kernels/quant_impl.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ grids */

typedef struct {
    const void *table;   /* iq_tables.c: uint64_t[n] (8 coordinates) or uint32_t[n] (4) */
    int n, coords, bits; /* points, coordinates per point, bits per level in a map index */
    int max_level;       /* the quantizers look up levels 0..max_level only */
    int nwant;           /* neighbour lists hold the nwant nearest distances */
    int8_t values[8];    /* the codebook's coordinate values by level (as int8) */
    int n_values;
} grid_spec;

static const grid_spec k_specs[DF_IQG_COUNT] = {
    [DF_IQG_IQ2XXS] = {df_iq2xxs_grid, 256, 8, 2, 2, 2, {8, 25, 43}, 3},
    [DF_IQG_IQ2XS] = {df_iq2xs_grid, 512, 8, 2, 2, 2, {8, 25, 43}, 3},
    [DF_IQG_IQ2S] = {df_iq2s_grid, 1024, 8, 2, 2, 1, {8, 25, 43}, 3},
    [DF_IQG_IQ1S] = {df_iq1s_grid, 2048, 8, 2, 2, 3, {-1, 0, 1}, 3},
    [DF_IQG_IQ3XXS] = {df_iq3xxs_grid, 256, 4, 3, 7, 2, {4, 12, 20, 28, 36, 44, 52, 62}, 8},
    [DF_IQG_IQ3S] = {df_iq3s_grid, 512, 4, 3, 7, 3, {1, 3, 5, 7, 9, 11, 13, 15}, 8},
};

static df_iq_grid g_grids[DF_IQG_COUNT];
static pthread_once_t g_once[DF_IQG_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                              PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static const int8_t *spec_coords(const grid_spec *s, int i) {
    return s->coords == 8 ? (const int8_t *)((const uint64_t *)s->table + i)
                          : (const int8_t *)((const uint32_t *)s->table + i);
}

typedef struct { int d2, idx; } dist_idx;

/* The neighbour list of the off-grid point pos: every grid point at one of the nwant smallest
 * distances, ordered by (distance, index) as ggml's qsort leaves them. Appends count and
 * indices to *nb (grown as needed); returns the offset of the list or -1 (no memory). */
static int neighbours_of(const grid_spec *s, const int8_t *grid, const int8_t *pos, dist_idx *tmp, uint16_t **nb,
                         int *len, int *cap) {
    int lim[3] = {INT32_MAX, INT32_MAX, INT32_MAX}; /* the nwant smallest distinct distances */
    for (int j = 0; j < s->n; ++j) {
        int d2 = 0;
        for (int k = 0; k < s->coords; ++k) d2 += (grid[j * s->coords + k] - pos[k]) * (grid[j * s->coords + k] - pos[k]);
        tmp[j].d2 = d2;
        tmp[j].idx = j;
        for (int w = 0; w < s->nwant; ++w) {
            if (d2 == lim[w]) break;
            if (d2 < lim[w]) {
                for (int v = s->nwant - 1; v > w; --v) lim[v] = lim[v - 1];
                lim[w] = d2;
                break;
            }
        }
    }
    int m = 0;
    for (int j = 0; j < s->n; ++j)
        if (tmp[j].d2 <= lim[s->nwant - 1]) tmp[m++] = tmp[j];
    for (int a = 1; a < m; ++a) { /* insertion sort by (d2, idx); idx already ascending */
        dist_idx v = tmp[a];
        int b = a;
        while (b > 0 && tmp[b - 1].d2 > v.d2) { tmp[b] = tmp[b - 1]; --b; }
        tmp[b] = v;
    }
    if (*len + m + 1 > *cap) {
        int nc = (*cap ? *cap * 2 : 1 << 16);
        while (nc < *len + m + 1) nc *= 2;
        uint16_t *p = realloc(*nb, (size_t)nc * sizeof(uint16_t));
        if (!p) return -1;
        *nb = p;
        *cap = nc;
    }
    const int at = *len;
    (*nb)[(*len)++] = (uint16_t)m;
    for (int j = 0; j < m; ++j) (*nb)[(*len)++] = (uint16_t)tmp[j].idx;
    return at;
}

static int level_of(const grid_spec *s, int8_t v) {
    for (int l = 0; l < s->n_values; ++l)
        if (s->values[l] == v) return l;
    return -1; /* not a codebook value: iq_tables.c is wrong (checked by test_quant) */
}

static void build(int which) {
    const grid_spec *s = &k_specs[which];
    const int n_map = 1 << (s->bits * s->coords);
    int8_t *grid = malloc((size_t)s->n * (size_t)s->coords);
    int32_t *map = malloc((size_t)n_map * sizeof(int32_t));
    dist_idx *tmp = malloc((size_t)s->n * sizeof(dist_idx));
    uint16_t *nb = NULL;
    int len = 0, cap = 0;
    if (!grid || !map || !tmp) goto fail;
    for (int u = 0; u < n_map; ++u) map[u] = INT32_MIN; /* levels the quantizers never form */
    for (int i = 0; i < s->n; ++i) {
        const int8_t *c = spec_coords(s, i);
        int u = 0;
        for (int k = 0; k < s->coords; ++k) {
            const int l = level_of(s, c[k]);
            if (l < 0) goto fail;
            grid[i * s->coords + k] = (int8_t)(2 * l + 1);
            u |= l << (s->bits * k);
        }
        map[u] = i;
    }
    for (int u = 0; u < n_map; ++u) {
        if (map[u] >= 0) continue;
        int8_t pos[8];
        bool used = true;
        for (int k = 0; k < s->coords; ++k) {
            const int l = (u >> (s->bits * k)) & ((1 << s->bits) - 1);
            used = used && l <= s->max_level;
            pos[k] = (int8_t)(2 * l + 1);
        }
        if (!used) continue;
        const int at = neighbours_of(s, grid, pos, tmp, &nb, &len, &cap);
        if (at < 0) goto fail;
        map[u] = -(at + 1);
    }
    free(tmp);
    df_iq_grid *g = &g_grids[which];
    if (s->coords == 8) {
        uint64_t *g8 = malloc((size_t)s->n * sizeof(uint64_t));
        if (!g8) goto fail_late;
        memcpy(g8, grid, (size_t)s->n * 8);
        g->grid8 = g8;
    } else {
        uint32_t *g4 = malloc((size_t)s->n * sizeof(uint32_t));
        if (!g4) goto fail_late;
        memcpy(g4, grid, (size_t)s->n * 4);
        g->grid4 = g4;
    }
    free(grid);
    g->map = map;
    g->neighbours = nb;
    g->n = s->n;
    return;
fail:
    free(tmp);
fail_late:
    free(grid);
    free(map);
    free(nb);
}

#define ONCE_FN(w) static void once_##w(void) { build(w); }
ONCE_FN(DF_IQG_IQ2XXS) ONCE_FN(DF_IQG_IQ2XS) ONCE_FN(DF_IQG_IQ2S) ONCE_FN(DF_IQG_IQ1S) ONCE_FN(DF_IQG_IQ3XXS)
ONCE_FN(DF_IQG_IQ3S)
#undef ONCE_FN
static void (*const k_once_fn[DF_IQG_COUNT])(void) = {
    once_DF_IQG_IQ2XXS, once_DF_IQG_IQ2XS, once_DF_IQG_IQ2S, once_DF_IQG_IQ1S, once_DF_IQG_IQ3XXS, once_DF_IQG_IQ3S,
};

const df_iq_grid *df_iq_grid_get(int which) {
    if (which < 0 || which >= DF_IQG_COUNT) return NULL;
    pthread_once(&g_once[which], k_once_fn[which]);
    return g_grids[which].map ? &g_grids[which] : NULL;
}

bool df_iq_ready(int type) {
    switch (type) {
    case DF_TYPE_IQ2_XXS: return df_iq_grid_get(DF_IQG_IQ2XXS) != NULL;
    case DF_TYPE_IQ2_XS: return df_iq_grid_get(DF_IQG_IQ2XS) != NULL;
    case DF_TYPE_IQ2_S: return df_iq_grid_get(DF_IQG_IQ2S) != NULL;
    case DF_TYPE_IQ1_S: case DF_TYPE_IQ1_M: return df_iq_grid_get(DF_IQG_IQ1S) != NULL;
    case DF_TYPE_IQ3_XXS: return df_iq_grid_get(DF_IQG_IQ3XXS) != NULL;
    case DF_TYPE_IQ3_S: return df_iq_grid_get(DF_IQG_IQ3S) != NULL;
    default: return true;
    }
}

/* ------------------------------------------------------------------ the lattice search */

typedef struct {
    const df_iq_grid *g;
    int gs, bits, kmaxq; /* values per point, bits per level, levels 0..kmaxq-1 */
    int bs;              /* values per block (one scale) */
    int is_lo, is_hi;    /* scale tries */
    float step;
    bool xxs;            /* IQ2_XXS: the last pass redoes every group unconditionally */
    bool redo_all;       /* IQ3_S: the last pass redoes every group */
    bool init_on;        /* groups count as on the grid before the first accepted try */
} iq_search;

static const int8_t *point(const df_iq_grid *g, int i) {
    return g->grid8 ? (const int8_t *)(g->grid8 + i) : (const int8_t *)(g->grid4 + i);
}

/* ggml's iq2/iq3_find_best_neighbour: the neighbour of u nearest xval at this scale */
static void best_neighbour(const iq_search *s, int u, const float *xval, const float *w, float scale, int8_t *L) {
    const uint16_t *nb = s->g->neighbours + (-s->g->map[u] - 1);
    float best_d2 = FLT_MAX;
    int gi = nb[1]; /* ggml asserts a winner; only NaN input finds none */
    for (int j = 1; j <= nb[0]; ++j) {
        const int8_t *pg = point(s->g, nb[j]);
        float d2 = 0;
        for (int i = 0; i < s->gs; ++i) {
            float q = pg[i];
            float diff = scale * q - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) { best_d2 = d2; gi = nb[j]; }
    }
    const int8_t *pg = point(s->g, gi);
    for (int i = 0; i < s->gs; ++i) L[i] = (int8_t)((pg[i] - 1) / 2);
}

/* levels of one group at inverse scale id into L; returns the map index */
static int group_levels(const iq_search *s, float id, const float *xval, int8_t *L) {
    int u = 0;
    for (int i = 0; i < s->gs; ++i) {
        int l = df_nearest_int(0.5f * (id * xval[i] - 1));
        L[i] = (int8_t)df_imax(0, df_imin(s->kmaxq - 1, l));
        u |= L[i] << (s->bits * i);
    }
    return u;
}

static void weighted_sums(int n, const float *weight, const float *xval, const int8_t *L, float *sumqx, float *sumq2) {
    *sumqx = *sumq2 = 0;
    for (int i = 0; i < n; ++i) {
        float w = weight[i];
        float q = 2 * L[i] + 1;
        *sumqx += w * xval[i] * q;
        *sumq2 += w * q * q;
    }
}

/* The scale of one block and its levels L (on the grid): tries of the inverse scale
 * (2·kmaxq - 1 + is·step) / base starting from scale0, then the off-grid groups redone at the
 * best scale and the scale refit. */
static float iq_block(const iq_search *s, const float *xval, const float *weight, const float *waux, float base,
                      float scale0, int8_t *L) {
    const int ng = s->bs / s->gs;
    int8_t Laux[32];
    bool on[8], on_aux[8];
    float best = 0, scale = scale0;
    for (int k = 0; k < ng; ++k) on[k] = s->init_on;
    for (int is = s->is_lo; is <= s->is_hi; ++is) {
        float id = (2 * s->kmaxq - 1 + is * s->step) / base;
        float this_scale = 1 / id;
        for (int k = 0; k < ng; ++k) {
            const int u = group_levels(s, id, xval + s->gs * k, Laux + s->gs * k);
            on_aux[k] = s->g->map[u] >= 0;
            if (!on_aux[k]) best_neighbour(s, u, xval + s->gs * k, waux + s->gs * k, this_scale, Laux + s->gs * k);
        }
        float sumqx, sumq2;
        weighted_sums(s->bs, weight, xval, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)s->bs);
            memcpy(on, on_aux, sizeof on);
        }
    }
    int n_off = 0;
    for (int k = 0; k < ng; ++k) n_off += !on[k];
    if ((s->xxs || n_off > 0) && scale > 0) {
        float id = 1 / scale;
        for (int k = 0; k < ng; ++k) {
            if (on[k] && !s->xxs && !s->redo_all) continue;
            const int u = group_levels(s, id, xval + s->gs * k, L + s->gs * k);
            if (s->g->map[u] < 0) best_neighbour(s, u, xval + s->gs * k, waux + s->gs * k, scale, L + s->gs * k);
        }
        float sumqx, sumq2;
        weighted_sums(s->bs, weight, xval, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    return scale;
}

/* grid index of the levels of group k (on the grid by construction) */
static int grid_index(const iq_search *s, const int8_t *L) {
    int u = 0;
    for (int i = 0; i < s->gs; ++i) u |= L[i] << (s->bits * i);
    const int gi = s->g->map[u];
    return gi >= 0 ? gi : 0; /* ggml aborts here; unreachable but for NaN input */
}

/* |x| of 8 values into xval and their sign bits; with parity an odd count of negatives is made
 * even by flipping the value that matters least (its xval turns negative), 7 bits kept */
static uint8_t signs8(const float *xb, const float *weight, float *xval, bool parity) {
    int nflip = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
        if (xb[i] >= 0) xval[i] = xb[i];
        else { xval[i] = -xb[i]; ++nflip; s |= (uint8_t)(1 << i); }
    }
    if (!parity) return s;
    if (nflip % 2) {
        int imin = 0;
        float min = weight[0] * xb[0] * xb[0];
        for (int i = 1; i < 8; ++i) {
            float ax = weight[i] * xb[i] * xb[i];
            if (ax < min) { min = ax; imin = i; }
        }
        xval[imin] = -xval[imin];
        s ^= (uint8_t)(1 << imin);
    }
    return s & 127;
}

/* weights of one block: qw·sqrt(σ² + x²), or without qw x² (IQ3) / σ²/4 + x² (IQ2_S); waux = sqrt */
static void block_weights(const float *xb, const float *qw, float sigma2, float *weight, float *waux, int n,
                          bool iq2s) {
    for (int i = 0; i < n; ++i)
        weight[i] = qw ? qw[i] * sqrtf(sigma2 + xb[i] * xb[i]) : iq2s ? 0.25f * sigma2 + xb[i] * xb[i] : xb[i] * xb[i];
    for (int i = 0; i < n; ++i) waux[i] = sqrtf(weight[i]);
}

static float sum_x2(const float *x) {
    float s = 0;
    for (int i = 0; i < DF_QK_K; ++i) s += x[i] * x[i];
    return s;
}
static float max8n(const float *xval, int n) {
    float max = xval[0];
    for (int i = 1; i < n; ++i) max = max > xval[i] ? max : xval[i];
    return max;
}
/* the 4-bit block scale of IQ2 / IQ3: round((s/d - 1)/2) clipped to 0..15 */
static int scale4(float id, float s) { return df_imax(0, df_imin(15, df_nearest_int(0.5f * (id * s - 1)))); }

/* ------------------------------------------------------------------ IQ2_XXS / IQ2_XS / IQ2_S */

static void iq2_xxs_row(const iq_search *s, const float *x, void *dst, int64_t n, const float *qw) {
    df_block_iq2_xxs *y = dst;
    float scales[8], weight[32], waux[32], xval[32];
    int8_t L[32];
    uint8_t block_signs[4];
    uint32_t q2[16];
    for (int64_t ibl = 0; ibl < n / DF_QK_K; ++ibl, ++y) {
        y->d = df_f32_to_f16(0.f);
        memset(q2, 0, sizeof q2);
        float max_scale = 0;
        const float *xbl = x + DF_QK_K * ibl;
        const float sigma2 = sum_x2(xbl) / DF_QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            const float *xb = xbl + 32 * ib;
            block_weights(xb, qw + DF_QK_K * ibl + 32 * ib, sigma2, weight, waux, 32, false);
            for (int k = 0; k < 4; ++k) block_signs[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
            const float max = max8n(xval, 32);
            if (max < DF_GROUP_MAX_EPS) { scales[ib] = 0; continue; }
            const float scale0 = df_make_qp_quants(32, s->kmaxq + 1, xval, (uint8_t *)L, weight);
            const float eff_max = scale0 * s->kmaxq;
            if (eff_max <= 0) { scales[ib] = 0; continue; }
            float scale = iq_block(s, xval, weight, waux, eff_max, scale0, L);
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 4; ++k) block_signs[k] = (uint8_t)(~block_signs[k] & 127);
            }
            for (int k = 0; k < 4; ++k) {
                q2[2 * ib + 0] |= (uint32_t)grid_index(s, L + 8 * k) << 8 * k;
                q2[2 * ib + 1] |= (uint32_t)block_signs[k] << 7 * k;
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) { memset(y->qs, 0, sizeof y->qs); continue; }
        const float d = max_scale / 31;
        y->d = df_f32_to_f16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) q2[2 * ib + 1] |= (uint32_t)scale4(id, scales[ib]) << 28;
        memcpy(y->qs, q2, sizeof y->qs);
    }
}

/* IQ2_XS (9-bit indices, 7 sign bits) and IQ2_S (10-bit indices, 8 sign bits): 16-value blocks */
static void iq2_16_row(const iq_search *s, const float *x, void *dst, int64_t n, const float *qw, bool is_s) {
    float scales[16], weight[16], waux[16], xval[16];
    int8_t L[16];
    for (int64_t ibl = 0; ibl < n / DF_QK_K; ++ibl) {
        df_block_iq2_xs *yx = is_s ? NULL : (df_block_iq2_xs *)dst + ibl;
        df_block_iq2_s *ys = is_s ? (df_block_iq2_s *)dst + ibl : NULL;
        uint16_t q2[32];
        memset(q2, 0, sizeof q2);
        if (is_s) memset(ys, 0, sizeof *ys);
        else memset(yx->scales, 0, sizeof yx->scales);
        df_f16 *dh = is_s ? &ys->d : &yx->d;
        uint8_t *sc = is_s ? ys->scales : yx->scales;
        *dh = df_f32_to_f16(0.f);
        float max_scale = 0;
        const float *xbl = x + DF_QK_K * ibl;
        const float sigma2 = (is_s ? 2 : 1) * sum_x2(xbl) / DF_QK_K;
        for (int ib = 0; ib < 16; ++ib) {
            const float *xb = xbl + 16 * ib;
            block_weights(xb, qw ? qw + DF_QK_K * ibl + 16 * ib : NULL, sigma2, weight, waux, 16, is_s);
            uint8_t block_signs[2];
            for (int k = 0; k < 2; ++k) block_signs[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, !is_s);
            const float max = max8n(xval, 16);
            memset(L, 0, sizeof L); /* the levels kept when no scale try is accepted */
            if (max < (is_s ? DF_GROUP_MAX_EPS_IQ2_S : DF_GROUP_MAX_EPS)) { scales[ib] = 0; continue; }
            float scale = iq_block(s, xval, weight, waux, max, max / (2 * s->kmaxq - 1), L);
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 2; ++k) block_signs[k] = (uint8_t)(is_s ? ~block_signs[k] : ~block_signs[k] & 127);
            }
            for (int k = 0; k < 2; ++k) {
                const int gi = grid_index(s, L + 8 * k);
                if (!is_s) {
                    q2[2 * ib + k] = (uint16_t)(gi | (block_signs[k] << 9));
                    continue;
                }
                const int i8 = 2 * ib + k;
                ys->qs[i8] = (uint8_t)(gi & 255);
                ys->qh[i8 / 4] |= (uint8_t)((gi >> 8) << 2 * (i8 % 4));
                ys->qs[DF_QK_K / 8 + i8] = block_signs[k];
            }
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) {
            if (!is_s) memset(yx->qs, 0, sizeof yx->qs);
            continue;
        }
        const float d = max_scale / 31;
        *dh = df_f32_to_f16(is_s ? d * 0.9875f : d);
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ++ib) {
            const int l = scale4(id, scales[ib]);
            if (ib % 2 == 0) sc[ib / 2] = (uint8_t)l;
            else sc[ib / 2] |= (uint8_t)(l << 4);
        }
        if (!is_s) memcpy(yx->qs, q2, sizeof yx->qs);
    }
}

/* ------------------------------------------------------------------ IQ3_XXS / IQ3_S */

/* one 32-value block of IQ3_XXS (xxs: signs with even parity, 7 bits each; "zero" below 1e-8)
 * or IQ3_S (8 sign bits; zero when exactly 0): weights, signs, levels L and the positive scale;
 * false for a zero block */
static bool iq3_block(const iq_search *s, const float *xb, const float *qw, float sigma2, bool xxs, int8_t *L,
                      uint8_t *block_signs, float *scale) {
    float weight[32], waux[32], xval[32];
    block_weights(xb, qw, sigma2, weight, waux, 32, false);
    for (int k = 0; k < 4; ++k) block_signs[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, xxs);
    const float max = max8n(xval, 32);
    memset(L, 0, 32);
    if (xxs ? max < DF_GROUP_MAX_EPS_IQ3_XXS : !max) return false;
    *scale = iq_block(s, xval, weight, waux, max, max / (2 * s->kmaxq - 1), L);
    if (*scale < 0) {
        *scale = -*scale;
        for (int k = 0; k < 4; ++k) block_signs[k] = (uint8_t)(xxs ? ~block_signs[k] & 127 : ~block_signs[k]);
    }
    return true;
}

static void iq3_xxs_row(const iq_search *s, const float *x, void *dst, int64_t n, const float *qw) {
    df_block_iq3_xxs *y = dst;
    float scales[8];
    int8_t L[32];
    uint8_t block_signs[4];
    uint8_t q3[96];
    uint32_t sas[8]; /* scales and signs */
    for (int64_t ibl = 0; ibl < n / DF_QK_K; ++ibl, ++y) {
        y->d = df_f32_to_f16(0.f);
        memset(q3, 0, sizeof q3);
        memset(sas, 0, sizeof sas);
        float max_scale = 0;
        const float *xbl = x + DF_QK_K * ibl;
        const float sigma2 = 2 * sum_x2(xbl) / DF_QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            float scale;
            if (!iq3_block(s, xbl + 32 * ib, qw ? qw + DF_QK_K * ibl + 32 * ib : NULL, sigma2, true, L, block_signs, &scale)) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 8; ++k) q3[8 * ib + k] = (uint8_t)grid_index(s, L + 4 * k);
            sas[ib] = block_signs[0] | (block_signs[1] << 7) | (block_signs[2] << 14) | ((uint32_t)block_signs[3] << 21);
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) { memset(y->qs, 0, sizeof y->qs); continue; }
        const float d = max_scale / 31;
        y->d = df_f32_to_f16(d * 1.0125f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) sas[ib] |= (uint32_t)scale4(id, scales[ib]) << 28;
        memcpy(y->qs, q3, 64);
        memcpy(y->qs + 64, sas, 32);
    }
}

static void iq3_s_row(const iq_search *s, const float *x, void *dst, int64_t n, const float *qw) {
    df_block_iq3_s *y = dst;
    float scales[8];
    int8_t L[32];
    uint8_t block_signs[4];
    for (int64_t ibl = 0; ibl < n / DF_QK_K; ++ibl, ++y) {
        memset(y, 0, sizeof *y);
        y->d = df_f32_to_f16(0.f);
        /* ggml advances these only past quantized blocks (an all-zero block shifts the
         * following ones); kept for identical bytes */
        uint8_t *qs = y->qs, *signs = y->signs;
        float max_scale = 0;
        const float *xbl = x + DF_QK_K * ibl;
        const float sigma2 = 2 * sum_x2(xbl) / DF_QK_K;
        for (int ib = 0; ib < 8; ++ib) {
            float scale;
            if (!iq3_block(s, xbl + 32 * ib, qw ? qw + DF_QK_K * ibl + 32 * ib : NULL, sigma2, false, L, block_signs, &scale)) {
                scales[ib] = 0;
                continue;
            }
            for (int k = 0; k < 8; ++k) {
                const int gi = grid_index(s, L + 4 * k);
                qs[k] = (uint8_t)(gi & 255);
                y->qh[(ib * 8 + k) / 8] |= (uint8_t)((gi >> 8) << ((ib * 8 + k) % 8));
            }
            qs += 8;
            memcpy(signs, block_signs, 4);
            signs += 4;
            scales[ib] = scale;
            max_scale = max_scale > scale ? max_scale : scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 31;
        y->d = df_f32_to_f16(d * 1.033f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib += 2)
            y->scales[ib / 2] = (uint8_t)(scale4(id, scales[ib]) | (scale4(id, scales[ib + 1]) << 4));
    }
}

/* ------------------------------------------------------------------ entry points */

enum { S_IQ2XXS, S_IQ2XS, S_IQ2S, S_IQ3XXS, S_IQ3S };

/* the search of a type: its grid (built on first use) and ggml's parameters; false only when
 * the grid cannot be built (out of memory) */
static bool search_of(int which, iq_search *out) {
    static const iq_search proto[5] = {
        [S_IQ2XXS] = {NULL, 8, 2, 3, 32, -6, 6, 0.1f, true, true, true},
        [S_IQ2XS] = {NULL, 8, 2, 3, 16, -9, 9, 0.1f, false, false, true},
        [S_IQ2S] = {NULL, 8, 2, 3, 16, -9, 9, 0.1f, false, false, true},
        [S_IQ3XXS] = {NULL, 4, 3, 8, 32, -15, 15, 0.2f, false, false, true},
        [S_IQ3S] = {NULL, 4, 3, 8, 32, -9, 9, 0.2f, false, true, false},
    };
    static const int grid_of[5] = {DF_IQG_IQ2XXS, DF_IQG_IQ2XS, DF_IQG_IQ2S, DF_IQG_IQ3XXS, DF_IQG_IQ3S};
    *out = proto[which];
    out->g = df_iq_grid_get(grid_of[which]);
    return out->g != NULL;
}

static void iq2_xs_row(const iq_search *s, const float *x, void *y, int64_t n, const float *qw) {
    iq2_16_row(s, x, y, n, qw, false);
}
static void iq2_s_row(const iq_search *s, const float *x, void *y, int64_t n, const float *qw) {
    iq2_16_row(s, x, y, n, qw, true);
}

typedef void (*iq_row_fn)(const iq_search *s, const float *x, void *y, int64_t n, const float *qw);
static void quantize_rows(int which, int type, iq_row_fn row, const float *x, void *dst, int64_t nrows, int64_t npr,
                          const float *qw) {
    iq_search s;
    if (!search_of(which, &s)) return; /* df_quantize_rows checked df_iq_ready */
    const size_t rb = (size_t)df_type_row_bytes(type, npr);
    for (int64_t r = 0; r < nrows; r++) row(&s, x + r * npr, (char *)dst + (size_t)r * rb, npr, qw);
}

void df_quantize_iq2_xxs(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    quantize_rows(S_IQ2XXS, DF_TYPE_IQ2_XXS, iq2_xxs_row, x, dst, nrows, npr, qw);
}
void df_quantize_iq2_xs(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    quantize_rows(S_IQ2XS, DF_TYPE_IQ2_XS, iq2_xs_row, x, dst, nrows, npr, qw);
}
void df_quantize_iq2_s(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    quantize_rows(S_IQ2S, DF_TYPE_IQ2_S, iq2_s_row, x, dst, nrows, npr, qw);
}
void df_quantize_iq3_xxs(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    quantize_rows(S_IQ3XXS, DF_TYPE_IQ3_XXS, iq3_xxs_row, x, dst, nrows, npr, qw);
}
void df_quantize_iq3_s(const float *x, void *dst, int64_t nrows, int64_t npr, const float *qw) {
    quantize_rows(S_IQ3S, DF_TYPE_IQ3_S, iq3_s_row, x, dst, nrows, npr, qw);
}
