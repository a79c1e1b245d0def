/* quant_impl.h — private glue between the quantizers of kernels/: quant.c (the type table, the
 * reference quantizers), quant_weighted.c (the searches the k-quants share and the
 * importance-weighted paths), quant_iq.c (the grid i-quants IQ2 / IQ3) and quant_iq1.c (IQ1_S,
 * IQ1_M, TQ1_0, TQ2_0). Every function computes what the ggml-quants.c function of the same
 * purpose computes, operation for operation (formats.md §2.8), so the bytes equal
 * llama-quantize's. Threading: pure functions, except the i-quant grids built once on first use
 * (pthread_once). */
#ifndef DF_QUANT_IMPL_H
#define DF_QUANT_IMPL_H
#include "kernels/quant.h"

/* ggml's thresholds below which a group counts as all zero */
#define DF_GROUP_MAX_EPS 1e-15f
#define DF_GROUP_MAX_EPS_IQ3_XXS 1e-8f
#define DF_GROUP_MAX_EPS_IQ2_S 1e-8f
#define DF_GROUP_MAX_EPS_IQ1_M 1e-7f
#define DF_GROUP_MAX_EPS_IQ1_S 1e-12f

static inline int df_imax(int a, int b) { return a > b ? a : b; }
static inline int df_imin(int a, int b) { return a < b ? a : b; }

/* A quantizer of nrows rows of n_per_row values with an importance matrix qw [n_per_row]
 * (NULL: the type's unweighted search), as ggml's quantize_<type>(). */
typedef void (*df_qrows_fn)(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);

/* ---- searches shared by the k-quants (quant_weighted.c) ---- */
/* Index of the codebook value nearest x in the sorted val[0..n). */
int df_best_index_int8(int n, const int8_t *val, float x);
/* Symmetric levels L in [0, 2·nmax) and the scale: rmse_type 0 (plain), 1..4 (weights x², 1,
 * |x|, sqrt|x| unless qw is given), negative: one weighted pass only. */
float df_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw);
/* Q3_K's symmetric levels with the coordinate-descent refinement (do_rmse). */
float df_make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse);
/* Asymmetric levels L in [0, nmax], scale returned, -min in *the_min (ggml's make_qkx2_quants,
 * and make_qkx3_quants when weights is NULL: weights x²). */
float df_make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                         uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);
/* Non-negative levels L in [0, nmax] for non-negative x under weights qw (sub-block scales). */
float df_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw);
/* One IQ4_NL block (sbs 32) or IQ4_XS super-block (sbs 256) of non-linear 4-bit values:
 * weights qw[sbs] or x² (qw NULL), ntry scale tries each side. */
void df_iq4_quantize_block(int sbs, const float *x, df_f16 *dh, uint8_t *q4, uint16_t *scales_h, uint8_t *scales_l,
                           const float *qw, int ntry);

/* ---- block pieces the reference and weighted quantizers share (quant.c) ---- */
/* Q5_0 / Q5_1: low nibbles of values j and j+16 in qs[j], their fifth bits in the 4 bytes qh */
void df_q5_pack(const uint8_t *L, uint8_t *qs, uint8_t *qh4);
/* Q2_K: final levels from the block's d, dmin and scales, packed into qs (L: 256 scratch) */
void df_q2k_finish(const float *x, df_block_q2_K *y, uint8_t *L);
/* Q3_K: 6-bit scale l (0..63) of sub-block j; final levels, hmask and qs from d and scales */
void df_q3k_set_scale(uint8_t *scales, int j, int l);
void df_q3k_finish(const float *x, df_block_q3_K *y, int8_t *L);
/* Q4_K / Q5_K: scale ls and min lm (6 bits) of sub-block j; final levels L in [0, nmax];
 * levels packed into Q4_K's qs, Q5_K's qh and qs */
void df_qk45_set_scales(uint8_t *scales12, int j, uint8_t ls, uint8_t lm);
void df_qk45_levels(const float *x, int nmax, const uint8_t *scales12, df_f16 dd, df_f16 dmin, uint8_t *L);
void df_q4k_pack(const uint8_t *L, uint8_t *qs);
void df_q5k_pack(const uint8_t *L, uint8_t *qh, uint8_t *qs);
/* Q6_K of n values (qw: the row's importance, NULL for the reference search) */
void df_q6k_quantize(const float *x, void *dst, int64_t n, const float *qw);

/* ---- the importance-weighted quantizers, by type (NULL: no weighted path) ---- */
extern const df_qrows_fn df_qrows_weighted[DF_TYPE_COUNT];
/* the grid i-quants (quant_iq.c, quant_iq1.c): qw may be NULL except for IQ2_XXS, IQ2_XS and
 * IQ1_S (df_quantize_needs_imatrix) */
void df_quantize_iq2_xxs(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);
void df_quantize_iq2_xs(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);
void df_quantize_iq2_s(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);
void df_quantize_iq3_xxs(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);
void df_quantize_iq3_s(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);
void df_quantize_iq1_s(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);
void df_quantize_iq1_m(const float *x, void *dst, int64_t nrows, int64_t n_per_row, const float *qw);
void df_quantize_tq1_0(const float *x, void *dst, int64_t n);
void df_quantize_tq2_0(const float *x, void *dst, int64_t n);

/* ---- i-quant grids (quant_iq.c) ---- */
/* The search form of a codebook as ggml's iq2xs_init_impl / iq3xs_init_impl build it: grid[i]
 * holds 8 (IQ2, IQ1) or 4 (IQ3) coordinates 2l+1 as int8 bytes; map[u] for the packed levels u
 * (2 or 3 bits each) is the grid index of that point, or -(o+1) where neighbours[o] = count and
 * neighbours[o+1..] the nearest grid indices (the nwant nearest distances, ties by index). */
typedef struct df_iq_grid {
    const uint64_t *grid8;   /* IQ2 / IQ1: [n] */
    const uint32_t *grid4;   /* IQ3: [n] */
    const int32_t *map;
    const uint16_t *neighbours;
    int n;
} df_iq_grid;
enum { DF_IQG_IQ2XXS, DF_IQG_IQ2XS, DF_IQG_IQ2S, DF_IQG_IQ1S, DF_IQG_IQ3XXS, DF_IQG_IQ3S, DF_IQG_COUNT };
/* Built on first use (pthread_once); NULL only when out of memory. */
const df_iq_grid *df_iq_grid_get(int which);
/* The grid a type's quantizer searches is built (true for types without one). */
bool df_iq_ready(int type);
#endif
