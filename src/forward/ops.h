/* ops.h — elementwise / row operations of the forward pass, with llama.cpp's numerics
 * (formats.md §2.7, §3.0): RMSNorm with a double sum, RoPE (NORM / NEOX pairing, YaRN,
 * rope_freqs divisors, angles by repeated F32 multiplication), softmax with a double sum; the
 * vector ops (ggml's softmax, SwiGLU, silu) go to the kernel table.
 * Threading: pure functions on caller-owned buffers; reentrant. */
#ifndef DF_OPS_H
#define DF_OPS_H
#include "base/util.h"
#include "kernels/kernels.h" /* df_silu, df_sigmoid */
#include "model/rope.h"
#include <math.h>

void df_rope_init(df_rope *r);
/* cos/sin table for one position: cache[2i] = cos, cache[2i+1] = sin (n_rot floats). */
void df_rope_cache(const df_rope *r, float pos, float *cache);
/* Rotate the first n_rot dims of each of n_head heads of x (head h at x + h*head_stride). */
void df_rope_apply(const df_rope *r, const float *cache, float *x, int n_head, int head_stride);

/* y = (x * 1/sqrt(mean(x^2) + eps)) * w   (w may be NULL: no weight). y may alias x. */
void df_rmsnorm(const float *x, const float *w, float *y, int n, float eps);
/* y = softmax(x) over n (y may alias x): max, libm expf, the sum in double (deltafin's own
 * scalar form, where llama.cpp's op is not ggml_soft_max). */
void df_softmax(const float *x, float *y, int n);
/* ggml_soft_max of one row (ggml_vec_soft_max_f32 + scale) in the selected kernel table's
 * order: bit-identical to a -march=native ggml CPU build on the same machine for the avx512 and
 * avx2 tables; the others use libm expf, as ggml without SIMD. y may alias x. */
void df_softmax_ggml(const float *x, float *y, int n);
/* g[i] = silu(g[i]) * u[i] over nrows rows of ncols, row by row as ggml_swiglu (the vectors
 * restart at each row: matters when ncols is not a multiple of the SIMD width) */
void df_swiglu_rows(float *g, const float *u, int64_t nrows, int64_t ncols);
/* x[i] = silu(x[i]) over one row of n as ggml_vec_silu_f32 (SIMD exp on whole vectors, libm
 * expf for the n % width leftover) */
void df_silu_row(float *x, int n);
/* ggml's SSM_CONV then SILU over one stream of nt tokens (KDA's and Gated DeltaNet's short
 * convolution): x holds nt rows of nc channels, replaced by the output; per channel ch the
 * window [state (C-1 values, oldest first) | this call's x], output t = Σ_i win[t+i]·taps[ch·C+i]
 * summed in tap order: products then adds for the first C & ~(v - 1) taps, an FMA chain for the
 * rest (v the kernel table's ssm_conv_vec; 0: all fused); the state becomes the window's last
 * C-1 values; then df_silu_row on each token's row. win holds nt + C floats. */
void df_ssm_conv_silu(float *x, int nt, int64_t nc, int C, float *state, const float *taps, float *win);
/* y[i] += x[i] */
void df_add(float *y, const float *x, int n);
/* The k of positions 0..n-1 (k <= n) that ggml_top_k keeps for scores s: its
 * std::partial_sort over the indices with comp(a, b) = s[a] > s[b], i.e. libstdc++'s heap
 * select (a heap of the first k, then each later index that beats the heap's top replaces it),
 * which decides which of several equal scores at the threshold are kept. Writes the k indices
 * to idx (heap order) using hs[k] as scratch. */
void df_top_k_select(const float *s, int n, int k, int32_t *idx, float *hs);
#endif
