/* quant.h — ggml tensor types: block layouts, sizes, (de)quantization (formats.md §2).
 * The reference quantizers reproduce llama.cpp's algorithms (Q8_0 byte-identical).
 * Threading: pure functions, thread-safe. */
#ifndef DF_QUANT_H
#define DF_QUANT_H
#include "util.h"

typedef enum {
    DF_TYPE_F32 = 0, DF_TYPE_F16 = 1, DF_TYPE_Q4_0 = 2, DF_TYPE_Q4_1 = 3, DF_TYPE_Q5_0 = 6,
    DF_TYPE_Q5_1 = 7, DF_TYPE_Q8_0 = 8, DF_TYPE_Q8_1 = 9, DF_TYPE_Q2_K = 10, DF_TYPE_Q3_K = 11,
    DF_TYPE_Q4_K = 12, DF_TYPE_Q5_K = 13, DF_TYPE_Q6_K = 14, DF_TYPE_Q8_K = 15,
    DF_TYPE_IQ2_XXS = 16, DF_TYPE_IQ2_XS = 17, DF_TYPE_IQ3_XXS = 18, DF_TYPE_IQ1_S = 19,
    DF_TYPE_IQ4_NL = 20, DF_TYPE_IQ3_S = 21, DF_TYPE_IQ2_S = 22, DF_TYPE_IQ4_XS = 23,
    DF_TYPE_I8 = 24, DF_TYPE_I16 = 25, DF_TYPE_I32 = 26, DF_TYPE_I64 = 27, DF_TYPE_F64 = 28,
    DF_TYPE_IQ1_M = 29, DF_TYPE_BF16 = 30, DF_TYPE_TQ1_0 = 34, DF_TYPE_TQ2_0 = 35,
    DF_TYPE_MXFP4 = 39, DF_TYPE_NVFP4 = 40, DF_TYPE_Q1_0 = 41, DF_TYPE_Q2_0 = 42,
    DF_TYPE_COUNT = 43
} df_type;

typedef struct {
    const char *name;     /* "Q8_0" ... ; NULL for removed/invalid ids */
    int blck;             /* elements per block (0 = invalid id) */
    int bytes;            /* bytes per block */
    int vec_dot_type;     /* activation format paired in dot products (formats.md §2.6) */
    bool can_compute;     /* this build has dequant + dot kernels for it */
    bool can_quantize;    /* this build can quantize F32 -> this type */
} df_type_traits;

/* NULL if id is out of range or a removed id. */
const df_type_traits *df_type_info(int type);
int df_type_from_name(const char *name); /* case-insensitive, -1 if unknown */
/* Bytes of n elements (n must be a multiple of the block size). */
static inline uint64_t df_row_bytes(const df_type_traits *t, int64_t n) {
    return (uint64_t)(n / t->blck) * (uint64_t)t->bytes;
}
uint64_t df_type_row_bytes(int type, int64_t n);

/* Dequantize n elements (n % blck == 0). Returns DF_ERR_UNSUPPORTED for types without code. */
int df_dequantize_row(int type, const void *src, float *dst, int64_t n);
/* Quantize n elements with llama.cpp's reference algorithm (no importance matrix). */
int df_quantize_row(int type, const float *src, void *dst, int64_t n);
#endif
