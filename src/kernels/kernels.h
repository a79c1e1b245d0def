/* kernels.h — the kernel table: every SIMD operation of the engine, chosen once at start by
 * CPU detection in dispatch.c (env DELTAFIN_ISA=ref|avx2|avx512|neon overrides, for tests).
 * Slots: dot products of quantized weight rows with converted activations (vec_dot and its
 * 4-token / repacked / ggml-order forms), the activation converters, the F32 row ops in ggml's
 * vector orders (softmax, SwiGLU, silu), flash attention's F16 dots and multiply-adds, the KDA
 * delta rule, the F32 batch GEMM, and the facts the callers need about the table (the F32
 * vector width ggml's build uses, which weights to repack).
 * Every mandatory slot has a scalar reference (kernels/ref.c, the oracle, which is the table of
 * a ggml build without SIMD); SIMD tables (x86_avx2.c, x86_avx512.c, arm_neon.c) start as a
 * copy of the reference table (AVX-512: of the AVX2 table) and override the slots they
 * accelerate. Optional slots (marked so) are float orders of a particular ggml build; NULL
 * means "the plain slot", which is what that build does too.
 * Numerics follow llama.cpp (formats.md §2.6): activations are converted to the weight type's
 * vec_dot_type (Q8_0 / Q8_1 / Q8_K / F16 / BF16 / F32) and dotted with exact integer sums.
 * Callers outside kernels/ contain no intrinsics and no CPU checks; they call the table.
 * Threading: tables are immutable after df_kernels_init(); kernels are reentrant. */
#ifndef DF_KERNELS_H
#define DF_KERNELS_H
#include "kernels/quant.h"
#include "base/threadpool.h"
#include <math.h>

/* s = dot(weight row w (type T, n elements), activation row xq (vec_dot_type of T, n elems)) */
typedef void (*df_vec_dot_fn)(int64_t n, float *s, const void *w, const void *xq);
/* s[t] = dot(w, activation row at xq + t*stride) for t < 4: one weight row against four
 * activation rows, decoding the weights once (prompt processing). Must give the same bits as
 * four vec_dot calls of the same table. */
typedef void (*df_vec_dot4_fn)(int64_t n, float *s, const void *w, const void *xq, size_t stride);
/* Weights repacked as groups of 8 interleaved rows (DF_TYPE_Q4_K_X8, see df_repack_type):
 * s[r] = row r of the group at w (n elements each) · activation row xq, r < 8, in ggml's gemv
 * order for its repacked layout (bit-identical to vec_dot_r8 on the rows before repacking). */
typedef void (*df_vec_dot_x8_fn)(int64_t n, float *s, const void *w, const void *xq);
/* s[t*lds + r] for r < 8 and the 4 activation rows at xq + t*stride, in ggml's gemm order
 * (bit-identical to vec_dot_r8g / vec_dot4_r8g before repacking). */
typedef void (*df_vec_dot4_x8_fn)(int64_t n, float *s, size_t lds, const void *w, const void *xq, size_t stride);
/* Convert an F32 activation row into a vec_dot_type (Q8_0/Q8_1/Q8_K/F16/BF16/F32 copy). */
typedef void (*df_from_float_fn)(const float *x, void *dst, int64_t n);

/* y = softmax(x) over n (y may alias x) as ggml_vec_soft_max_f32 + ggml_vec_scale_f32: max,
 * exp(x - max) with the vector exp on whole vectors and libm expf on the leftover, the
 * per-vector lane sums added in double, then y *= 1/sum. */
typedef void (*df_softmax_fn)(const float *x, float *y, int n);
/* g[i] = silu(g[i]) * u[i] over one row as ggml_vec_swiglu_f32 (vector exp on whole vectors,
 * df_silu on the leftover); the row restarts the vectors. */
typedef void (*df_swiglu_fn)(float *g, const float *u, int n);
/* x[i] = silu(x[i]) over one row as ggml_vec_silu_f32 (= the SwiGLU above without the exact
 * product by u) */
typedef void (*df_silu_fn)(float *x, int n);
/* dot of two F16 rows of n (flash attention's K·Q) */
typedef float (*df_dot_f16_fn)(const df_f16 *x, const df_f16 *y, int n);
/* dot of an F16 row with an F32 row of n (the F32-accumulator attention path) */
typedef float (*df_dot_f16_f32_fn)(const df_f16 *x, const float *y, int n);
/* acc[i] = f16(fma(v[i], s, acc[i])) for i < n (F16 accumulator) */
typedef void (*df_mad_f16_fn)(df_f16 *acc, const df_f16 *v, float s, int n);
/* acc[i] = fma(v[i], s, acc[i]) for i < n (F32 accumulator, F16 values) */
typedef void (*df_mad_f32_fn)(float *acc, const df_f16 *v, float s, int n);
/* acc[i] += v[i] * s for i < n, F32 values (a dequantized V row of a quantized cache), as
 * ggml_vec_mad_f32: fused (fma) in an FMA build, a plain multiply-add in the reference */
typedef void (*df_mad_f32f_fn)(float *acc, const float *v, float s, int n);
/* The gated delta rule of one KDA head over nt tokens, sequentially (llama.cpp's fused op):
 * for each token t, with q, k, v, g, o the S-wide rows at q + t*ld ..., b = beta[t*ldb]:
 *   M[jv][i] *= exp(g[i]); del[jv] = (v[jv] - dot(M[jv], k)) * b; M[jv][i] = fma(k[i], del[jv],
 *   M[jv][i]); o[jv] = dot(M[jv], q) / sqrt(S)
 * with dot ggml_vec_dot_f32's order: AVX-512's (kernels_impl.h df_kda_dot: 4 x 16 lanes over
 * n & ~63, its reduction tree, the leftovers one by one) in the avx512, ref and neon tables,
 * AVX2's (the avx2 table's vec_dot[F32], x86_avx2.c dot_f32) in the avx2 table. M is the
 * head's S x S state (row jv = value jv over keys i), updated in place; S <= 4096. */
typedef void (*df_kda_head_fn)(float *M, int S, int nt, const float *q, const float *k, const float *v,
                               const float *g, int64_t ld, const float *beta, int64_t ldb, float *o);
/* F32 batch product as llamafile's tinyBLAS (ggml's mul_mat for F32 weights and 2+ tokens):
 * Y[t*ldy + r] = W[r] . X[t*ldx] for rows r in [r0, r1) (a multiple of 4) and t < nt, W
 * row-major [.][n_in], n_in a multiple of the table's f32_epr. */
typedef void (*df_gemm_f32_fn)(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx,
                               int nt, float *Y, int64_t ldy);
/* The same for 16-bit weights (F16 or BF16) against activations converted to that type (their
 * vec_dot_type): ggml converts src1 and then runs tinyBLAS on both, for 2-D and 3-D weights. */
typedef void (*df_gemm_h_fn)(const void *W, int64_t n_in, int64_t r0, int64_t r1, const void *X, int64_t ldx,
                             int nt, float *Y, int64_t ldy);

enum df_isa { DF_ISA_REF, DF_ISA_AVX2, DF_ISA_AVX512, DF_ISA_NEON };

typedef struct df_kernel_table {
    const char *name;                        /* "ref", "avx2", "avx512", "neon" (reports) */
    int isa;                                 /* enum df_isa: which build's orders (tests, reports) */
    df_vec_dot_fn vec_dot[DF_TYPE_COUNT];    /* indexed by weight type */
    df_from_float_fn from_float[DF_TYPE_COUNT]; /* indexed by vec_dot_type */
    df_vec_dot4_fn vec_dot4[DF_TYPE_COUNT];  /* optional (NULL: vec_dot per row) */
    /* Optional: the float orders ggml uses for weights it repacks to 8 interleaved rows on
     * this CPU (2-D or expert tensors with rows % 8 == 0, e.g. Q4_K as q4_K_8x8 on
     * AVX2/AVX-512): _r8 its gemv (one token, the last n_tok % 4 tokens of
     * a plain matmul, every token of an expert matmul), _r8g its gemm (the first
     * n_tok - n_tok % 4 tokens of a plain matmul). df_matmul uses them for n_out % 8 == 0,
     * df_matmul_3d never (ggml does not repack weights of 3-D plain matmuls). NULL: vec_dot. */
    df_vec_dot_fn vec_dot_r8[DF_TYPE_COUNT];
    df_vec_dot4_fn vec_dot4_r8[DF_TYPE_COUNT];
    df_vec_dot_fn vec_dot_r8g[DF_TYPE_COUNT];
    df_vec_dot4_fn vec_dot4_r8g[DF_TYPE_COUNT];
    /* Indexed by a repacked type (DF_TYPE_Q4_K_X8). The reference table has scalar forms. */
    df_vec_dot_x8_fn vec_dot_x8[DF_TYPE_COUNT];
    df_vec_dot4_x8_fn vec_dot4_x8[DF_TYPE_COUNT];  /* 4 tokens in the gemv order (optional) */
    df_vec_dot4_x8_fn vec_dot4_x8g[DF_TYPE_COUNT]; /* 4 tokens in the gemm order */
    /* Indexed by a file type: the in-memory type this table's kernels want its matmul weights
     * repacked to (DF_TYPE_Q4_K_X8 for Q4_K where the table has native x8 kernels), 0 = keep
     * the file's layout (the scalar x8 forms are slower than the per-row SIMD kernels). */
    uint8_t repack[DF_TYPE_COUNT];
    /* Optional, indexed by weight type: this table's activation layout for that type's kernels
     * (same bytes per row as its vec_dot_type; df_quantize_act uses it). Set for MXFP4 on
     * AVX-512 VBMI: Q8_0 split into the row's n quants then its n/32 F16 scales
     * (df_q8_0_split), so the kernel loads 64 quants at once and 8 scales as one vector. */
    df_from_float_fn from_float_w[DF_TYPE_COUNT];

    /* F32 row ops in ggml's vector orders: the vector width and exp approximation follow the
     * table (16 lanes AVX-512, 8 AVX2; the reference and NEON tables use libm expf on every
     * element, as ggml without SIMD) */
    df_softmax_fn softmax;
    df_swiglu_fn swiglu;
    df_silu_fn silu;
    /* flash attention (forward/attn_gqa.c), llama.cpp's one-chunk kernel: K·Q as
     * ggml_vec_dot_f16 (x86: 4 accumulators of 16 / 8 lanes with FMA, pairwise, lane
     * reduction, leftovers in double; ref: 8 float lanes then the leftovers in double), V
     * accumulated in F16; attn_fma_sum: the softmax sum is S = fma(S, ms, vs), as gcc
     * contracts ggml's S*ms + vs in an FMA build (else a plain multiply-add). */
    df_dot_f16_fn attn_dot_f16;
    df_mad_f16_fn attn_mad_f16;
    bool attn_fma_sum;
    /* and its tiled path (F32 Q and accumulator): the same results in every table */
    df_dot_f16_f32_fn attn_dot_f16_f32;
    df_mad_f32_fn attn_mad_f32;
    df_mad_f32f_fn attn_mad_f32f; /* the one-chunk kernel's F32 V accumulation (quantized V) */
    df_kda_head_fn kda_head; /* KDA's / Gated DeltaNet's delta rule (forward/kimi_k3.c, qwen3next.c) */
    /* ggml's SSM_CONV tap sum (forward/ops.c df_ssm_conv_silu), in tap order. gcc 12's AVX2
     * build vectorises ggml's `sumf += s*c` loop as an in-order reduction: the first C & ~3
     * products in vectors (vmulps, 8 then 4 lanes), each added on its own (vaddss), then the
     * C % 4 left in the scalar epilogue, contracted (vfmadd231ss): ssm_conv_vec = 4. 0: the whole
     * sum an FMA chain (the AVX-512 build the root recordings come from; ref, neon). */
    int ssm_conv_vec;
    /* Optional: F32 weights x 2+ tokens in tinyBLAS's order (NULL: vec_dot per output, as
     * ggml without tinyBLAS); df_matmul uses it when df_gemm_f32_ggml_applies() */
    df_gemm_f32_fn gemm_f32;
    /* Optional: F16 / BF16 weights x 2+ tokens in tinyBLAS's order (NULL: vec_dot per output);
     * df_matmul and df_matmul_3d use them under the same shape rule */
    df_gemm_h_fn gemm_f16, gemm_bf16;
    /* floats per vector register in the ggml build this table stands for (GGML_F32_EPR: 16
     * AVX-512, 8 AVX2; the reference and NEON tables say 8): decides llama.cpp's tiled
     * attention (DV % f32_epr == 0) and tinyBLAS's shapes (n_in % f32_epr == 0) */
    int f32_epr;
} df_kernel_table;

/* ggml's scalar silu / sigmoid (libm expf) */
static inline float df_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float df_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Rewrite one Q8_0 row of n elements into the split layout (n int8 quants, then n/32 F16
 * scales, same bytes); src and dst must not overlap. */
void df_q8_0_split(const void *src, void *dst, int64_t n);

/* One super-block (256 columns) of 8 consecutive Q4_K rows r = 0..7, repacked (DF_TYPE_Q4_K_X8;
 * same 144 bytes per row and block). q(r, e) is the 4-bit quant of element e of row r:
 *   qs[64 z + 8 r + b] = q(r, 16 z + b) | q(r, 16 z + 8 + b) << 4       (z < 16, b < 8)
 *   sc[8 r + j] = 6-bit scale of sub-block j | (bits 4-5 of its 6-bit min) << 6
 *   mlo[k] = bits 0-3 of min k | bits 0-3 of min k + 32 << 4             (min index 8 r + j)
 * so one 64-byte load holds 8 elements of each row in its low nibbles and the next 8 in its high
 * nibbles, against one 8-byte activation chunk broadcast to all rows. A group of 8 rows of n
 * columns is n / 256 such records in column order. */
typedef struct {
    uint8_t qs[1024];
    df_f16 d[8], dmin[8];
    uint8_t sc[64];
    uint8_t mlo[32];
} df_block_q4_Kx8;
/* the 6-bit min of sub-block j of row r, k = 8 r + j (its scale is sc[k] & 63) */
static inline int df_q4kx8_min(const df_block_q4_Kx8 *x, int k) {
    return (k < 32 ? x->mlo[k] & 0xF : x->mlo[k - 32] >> 4) | (x->sc[k] >> 6) << 4;
}

/* The in-memory layout the selected table wants for weights of file type wtype that are only
 * used by df_matmul / df_matmul_id (not df_matmul_3d, not row lookups), or -1 to keep the
 * file's layout (the table's repack slot). Env DELTAFIN_REPACK=0 turns repacking off (A/B
 * measurements, tests). */
int df_repack_type(int wtype);
/* Repack n_rows (a multiple of 8) rows of n_in columns in place from type `from` to `to`
 * (Q4_K -> Q4_K_X8 or back), 8-row groups spread over the pool (may be NULL).
 * DF_ERR_INVALID for other pairs or shapes, DF_ERR_NOMEM. */
int df_repack_rows(df_pool *pool, int from, int to, void *data, int64_t n_in, int64_t n_rows);

/* Choose the table (CPU detection, DELTAFIN_ISA); calls df_init() first. Idempotent and
 * thread-safe; the model loader calls it, and df_kernels() does on first use. */
void df_kernels_init(void);
const df_kernel_table *df_kernels(void);        /* the selected table */
const df_kernel_table *df_kernels_ref(void);    /* the scalar oracle */
const df_kernel_table *df_kernels_by_name(const char *name); /* NULL if not available here */
/* Switch the table df_kernels()/df_matmul use (benchmarks, tests). Not safe while another
 * thread runs kernels. Returns DF_ERR_UNSUPPORTED if `name` is not available here. */
int df_kernels_select(const char *name);

/* F32 matrix product of a batch as llamafile's tinyBLAS (ggml's mul_mat for F32 weights and
 * nt >= 2 tokens when n_in is a multiple of the vector width and n_out of 4), with the selected
 * table's gemm_f32: Y[t*ldy + r] = W[r] . X[t*ldx] for rows r in [r0, r1) (a multiple of 4
 * rows) and t < nt, W row-major [n_out][n_in]. Only when df_gemm_f32_ggml_applies(). */
bool df_gemm_f32_ggml_applies(int64_t n_in, int64_t n_out, int nt);
void df_gemm_f32_ggml(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx, int nt,
                      float *Y, int64_t ldy);
/* Bytes needed to hold n_tok activation rows of n_in elements converted for weight type wtype. */
uint64_t df_act_bytes(int wtype, int64_t n_in, int64_t n_tok);

/* Y[t*ldy + o] = Σ_i W[o][i]·X[t*ldx + i] for t < n_tok, o < n_out.
 * W: n_out rows of n_in elements of type wtype (row stride df_type_row_bytes(wtype, n_in));
 * a repacked type (DF_TYPE_Q4_K_X8) needs n_out % 8 == 0 and is not for df_matmul_3d.
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

/* Token groups of one call: group i is tokens [end[i-1], end[i]) (end[-1] = 0, end[n-1] =
 * n_tok; empty groups allowed). With groups, every token's result is bit for bit what the same
 * function gives when called on its group's tokens alone: the choices ggml makes by the number
 * of tokens in a call (tinyBLAS for F32 from 2 tokens on, the gemm order of repacked rows for
 * the first n - n % 4 tokens of a plain matmul) are made per group, while the weights are still
 * read once for all of them. A multi-sequence batch (forward/session.c) passes one group per
 * sequence so its tokens compute as that sequence's own pass would. Expert matmuls (_id) make
 * no such choice and need none. */
typedef struct df_row_groups { int n; const int32_t *end; } df_row_groups;
void df_matmul_g(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                 const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act,
                 const df_row_groups *g);
void df_matmul_q_g(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                   const void *act, int64_t n_tok, float *Y, int64_t ldy, const df_row_groups *g);
void df_matmul_3d_g(df_pool *pool, const void *W, int wtype, int64_t n_in, int64_t n_out,
                    const float *X, int64_t ldx, int64_t n_tok, float *Y, int64_t ldy, void *act,
                    const df_row_groups *g);
#endif
