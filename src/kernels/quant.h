/* quant.h — what the engine computes on each ggml tensor type: the file facts (name, block
 * size and bytes, block layouts) come from format/ggml_types.h, this adds the activation type
 * a weight type is dotted with, whether kernels and quantizers exist, (de)quantization
 * (formats.md §2) and the in-memory layouts (DF_TYPE_Q4_K_X8). The reference quantizers
 * reproduce llama.cpp's algorithms (Q8_0 byte-identical).
 * Threading: pure functions, thread-safe. */
#ifndef DF_QUANT_H
#define DF_QUANT_H
#include "format/ggml_types.h"

/* Types beyond the file's (format/ggml_types.h): in-memory layouts of the matrix kernels. */
enum {
    /* Q4_K weights repacked in memory as groups of 8 interleaved rows (df_block_q4_Kx8,
     * kernels.h) for the matrix kernels. Same bytes per row as Q4_K; rows only make sense 8 at
     * a time; no dequantization. GGUF files cannot carry it. */
    DF_TYPE_Q4_K_X8 = DF_GGML_TYPE_COUNT,
    DF_TYPE_COUNT
};

typedef struct {
    const char *name;     /* "Q8_0" ... (file types: as format/ggml_types.c) */
    int blck;             /* elements per block */
    int bytes;            /* bytes per block */
    int vec_dot_type;     /* activation format paired in dot products (formats.md §2.6) */
    bool can_compute;     /* this build has dequant + dot kernels for it */
    bool can_quantize;    /* this build can quantize F32 -> this type */
} df_type_traits;

/* NULL if id is out of range or a removed id. */
const df_type_traits *df_type_info(int type);
int df_type_from_name(const char *name); /* file types only (df_ggml_type_from_name), -1 if unknown */
/* Bytes of n elements (n must be a multiple of the block size). */
static inline uint64_t df_row_bytes(const df_type_traits *t, int64_t n) {
    return (uint64_t)(n / t->blck) * (uint64_t)t->bytes;
}
uint64_t df_type_row_bytes(int type, int64_t n);

/* Dequantize n elements (n % blck == 0). Returns DF_ERR_UNSUPPORTED for types without code. */
int df_dequantize_row(int type, const void *src, float *dst, int64_t n);
/* True if df_dequantize_row supports this type. */
bool df_can_dequantize(int type);
/* Quantize n elements with llama.cpp's reference algorithm (no importance matrix). */
int df_quantize_row(int type, const float *src, void *dst, int64_t n);
/* ggml_quantize_chunk: nrows rows of n_per_row values with an importance matrix imatrix
 * [n_per_row] (one weight per column; NULL: none), as llama-quantize converts a matrix — the
 * importance-weighted search of the k-quants, legacy types, IQ4 and the grid i-quants, byte for
 * byte; the types that take no imatrix (Q8_0, MXFP4, TQ*, F16 ...) ignore it. DF_ERR_INVALID for
 * IQ2_XXS, IQ2_XS and IQ1_S without one (df_quantize_needs_imatrix). */
int df_quantize_rows(int type, const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *imatrix);
bool df_quantize_needs_imatrix(int type);

/* llama.cpp's nearest_int: round to nearest even via the 1.5*2^23 trick (|x| < 2^22). */
static inline int df_nearest_int(float fval) {
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}
/* Reference activation quantizers (also reachable through df_quantize_row). */
void df_quantize_row_q8_0_ref(const float *x, void *dst, int64_t n);
void df_quantize_row_q8_1_ref(const float *x, void *dst, int64_t n);
void df_quantize_row_q8_K_ref(const float *x, void *dst, int64_t n);

/* Platform variants of the Q8_0/Q8_1 activation quantizers of llama.cpp's CPU backend
 * (formats.md §2.6); d = amax/127 stored as F16 in all of them:
 *   DF_Q8_REF  quantize_row_q8_0_ref: q = roundf(x * (1/d))   (half away from zero)
 *   DF_Q8_X86  AVX/AVX2 path:         q = rint(x * (127/amax)) (half to even)
 *   DF_Q8_ARM  NEON path:             q = rint(x * (1/d))
 * The x86/NEON kernel tables produce their platform's variant so results track llama.cpp on
 * the same machine. */
enum { DF_Q8_REF = 0, DF_Q8_X86 = 1, DF_Q8_ARM = 2 };
void df_quantize_row_q8_0_variant(const float *x, void *dst, int64_t n, int variant);
void df_quantize_row_q8_1_variant(const float *x, void *dst, int64_t n, int variant);

/* Codebooks shared by quant.c and the kernels (formats.md §2.3). */
extern const int8_t df_kvalues_iq4nl[16];
extern const int8_t df_kvalues_mxfp4[16];
/* i-quant codebooks (kernels/iq_tables.c, verbatim from ggml-common.h; formats.md §2.5). */
extern const uint64_t df_iq2xxs_grid[256];
extern const uint64_t df_iq2xs_grid[512];
extern const uint64_t df_iq2s_grid[1024];
extern const uint32_t df_iq3xxs_grid[256];
extern const uint32_t df_iq3s_grid[512];
extern const uint64_t df_iq1s_grid[2048]; /* bytes are int8 in {-1, 0, 1} */
extern const uint8_t df_ksigns_iq2xs[128];
#define DF_IQ1S_DELTA 0.125f
/* 6-bit scale *d and min *m of sub-block j (0..7) from the 12 packed scale bytes q of a Q4_K /
 * Q5_K block (ggml's get_scale_min_k4). */
static inline void df_scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
/* E8M0 "half" scale of MXFP4: 2^(e-128) as float (denormal for e < 2). */
static inline float df_e8m0_half(uint8_t e) {
    return e < 2 ? df_bits_f32(0x00200000u << e) : df_bits_f32((uint32_t)(e - 1) << 23);
}
#endif
