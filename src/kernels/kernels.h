/* kernels.h — compute kernels over quantized weights, chosen once at start by CPU detection
 * (env DELTAFIN_ISA=ref|avx2|avx512|neon overrides, for tests).
 * Every slot has a scalar reference (kernels/ref.c, the oracle); SIMD tables (x86_avx2.c,
 * x86_avx512.c, arm_neon.c) fill the slots they accelerate; the others fall back to ref (AVX-512:
 * to the AVX2 kernel).
 * Numerics follow llama.cpp (formats.md §2.6): activations are converted to the weight type's
 * vec_dot_type (Q8_0 / Q8_1 / Q8_K / F16 / BF16 / F32) and dotted with exact integer sums.
 * Threading: tables are immutable after df_kernels_init(); kernels are reentrant. */
#ifndef DF_KERNELS_H
#define DF_KERNELS_H
#include "quant.h"
#include "threadpool.h"

/* s = dot(weight row w (type T, n elements), activation row xq (vec_dot_type of T, n elems)) */
typedef void (*df_vec_dot_fn)(int64_t n, float *s, const void *w, const void *xq);
/* s[t] = dot(w, activation row at xq + t*stride) for t < 4: one weight row against four
 * activation rows, decoding the weights once (prompt processing). Must give the same bits as
 * four vec_dot calls of the same table. */
typedef void (*df_vec_dot4_fn)(int64_t n, float *s, const void *w, const void *xq, size_t stride);
/* Convert an F32 activation row into a vec_dot_type (Q8_0/Q8_1/Q8_K/F16/BF16/F32 copy). */
typedef void (*df_from_float_fn)(const float *x, void *dst, int64_t n);

typedef struct df_kernel_table {
    const char *name;                        /* "ref", "avx2", "avx512", "neon" */
    df_vec_dot_fn vec_dot[DF_TYPE_COUNT];    /* indexed by weight type */
    df_from_float_fn from_float[DF_TYPE_COUNT]; /* indexed by vec_dot_type */
    df_vec_dot4_fn vec_dot4[DF_TYPE_COUNT];  /* optional (NULL: vec_dot per row) */
    /* Optional, set only with DELTAFIN_GGML_ORDER: the float orders ggml uses for weights it
     * repacks to 8 interleaved rows on this CPU (2-D or expert tensors with rows % 8 == 0, e.g.
     * Q4_K as q4_K_8x8 on AVX2/AVX-512): _r8 its gemv (one token, the last n_tok % 4 tokens of
     * a plain matmul, every token of an expert matmul), _r8g its gemm (the first
     * n_tok - n_tok % 4 tokens of a plain matmul). df_matmul uses them for n_out % 8 == 0,
     * df_matmul_3d never (ggml does not repack weights of 3-D plain matmuls). NULL: vec_dot. */
    df_vec_dot_fn vec_dot_r8[DF_TYPE_COUNT];
    df_vec_dot4_fn vec_dot4_r8[DF_TYPE_COUNT];
    df_vec_dot_fn vec_dot_r8g[DF_TYPE_COUNT];
    df_vec_dot4_fn vec_dot4_r8g[DF_TYPE_COUNT];
} df_kernel_table;

/* Non-zero (the default) unless env DELTAFIN_GGML_ORDER is "0": every float summation order
 * that matters for parity follows ggml's, bit-identical to a -march=native llama.cpp CPU build
 * on the same machine (docs/testing.md, "Quantized parity"). Read once; kernel tables are
 * filled according to it. */
int df_ggml_order(void);

void df_kernels_init(void);                     /* called by df_init() */
const df_kernel_table *df_kernels(void);        /* the selected table */
const df_kernel_table *df_kernels_ref(void);    /* the scalar oracle */
const df_kernel_table *df_kernels_by_name(const char *name); /* NULL if not available here */
/* Switch the table df_kernels()/df_matmul use (benchmarks, tests). Not safe while another
 * thread runs kernels. Returns DF_ERR_UNSUPPORTED if `name` is not available here. */
int df_kernels_select(const char *name);

/* Bytes needed to hold n_tok activation rows of n_in elements converted for weight type wtype. */
uint64_t df_act_bytes(int wtype, int64_t n_in, int64_t n_tok);

/* Y[t*ldy + o] = Σ_i W[o][i]·X[t*ldx + i] for t < n_tok, o < n_out.
 * W: n_out rows of n_in elements of type wtype (row stride df_type_row_bytes(wtype, n_in)).
 * act: scratch of df_act_bytes(wtype, n_in, n_tok) bytes (NULL: the call allocates; avoid on
 * hot paths). Rows are split across the pool (pool may be NULL = calling thread only). */
void df_matmul(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
               const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act);
/* Same with X already converted (act filled by df_quantize_act); lets several weights that
 * share one input (gate/up, q/k/v) reuse one conversion. */
void df_quantize_act(int wtype, const float *X, int64_t ldx, int64_t n_in, int64_t n_tok, void *act);
/* df_quantize_act with the rows spread over the pool (worth it for n_tok >= a few). */
void df_quantize_act_mt(df_pool *pool, int wtype, const float *X, int64_t ldx, int64_t n_in,
                        int64_t n_tok, void *act);
void df_matmul_q(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                 const void *act, int64_t n_tok, float *Y, int64_t ldy);
/* df_matmul for one matrix of a 3-D weight used by a plain (not per-expert) matmul, such as
 * MLA's per-head attn_k_b / attn_v_b: same result except for the float order (see vec_dot_r8). */
/* df_matmul(_q) for one expert's matrix (ggml's MUL_MAT_ID): same except for the float order. */
void df_matmul_id(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                  const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act);
void df_matmul_q_id(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                    const void *act, int64_t n_tok, float *Y, int64_t ldy);
void df_matmul_3d(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                  const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act);
#endif
