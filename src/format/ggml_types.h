/* ggml_types.h — the ggml tensor types as files store them (formats.md §1.6, §2): GGUF's type
 * ids, each type's name, elements per block and bytes per block, and the block layouts
 * (byte-exact with ggml's structs). These are facts of the file format only; what the engine
 * can compute on a type (its activation type, dot kernels, quantizers) is the kernel layer's
 * (kernels/quant.h, df_type_info), which also adds in-memory layouts no file carries.
 * Threading: constant tables; thread-safe. */
#ifndef DF_GGML_TYPES_H
#define DF_GGML_TYPES_H
#include "base/util.h"

/* GGUF tensor type ids; gaps (4, 5, 31-33, 36-38) are ids ggml removed */
enum {
    DF_TYPE_F32 = 0, DF_TYPE_F16 = 1, DF_TYPE_Q4_0 = 2, DF_TYPE_Q4_1 = 3, DF_TYPE_Q5_0 = 6,
    DF_TYPE_Q5_1 = 7, DF_TYPE_Q8_0 = 8, DF_TYPE_Q8_1 = 9, DF_TYPE_Q2_K = 10, DF_TYPE_Q3_K = 11,
    DF_TYPE_Q4_K = 12, DF_TYPE_Q5_K = 13, DF_TYPE_Q6_K = 14, DF_TYPE_Q8_K = 15,
    DF_TYPE_IQ2_XXS = 16, DF_TYPE_IQ2_XS = 17, DF_TYPE_IQ3_XXS = 18, DF_TYPE_IQ1_S = 19,
    DF_TYPE_IQ4_NL = 20, DF_TYPE_IQ3_S = 21, DF_TYPE_IQ2_S = 22, DF_TYPE_IQ4_XS = 23,
    DF_TYPE_I8 = 24, DF_TYPE_I16 = 25, DF_TYPE_I32 = 26, DF_TYPE_I64 = 27, DF_TYPE_F64 = 28,
    DF_TYPE_IQ1_M = 29, DF_TYPE_BF16 = 30, DF_TYPE_TQ1_0 = 34, DF_TYPE_TQ2_0 = 35,
    DF_TYPE_MXFP4 = 39, DF_TYPE_NVFP4 = 40, DF_TYPE_Q1_0 = 41, DF_TYPE_Q2_0 = 42,
    DF_GGML_TYPE_COUNT = 43 /* file type ids are below this */
};

typedef struct {
    const char *name; /* "Q8_0" ... */
    int blck;         /* elements per block */
    int bytes;        /* bytes per block */
} df_ggml_type_info;

/* The file type `type`, or NULL for an id outside [0, DF_GGML_TYPE_COUNT) or a removed one. */
const df_ggml_type_info *df_ggml_type(int type);
/* The id of a file type by name (case-insensitive), -1 if unknown. */
int df_ggml_type_from_name(const char *name);

/* ---- Block layouts (formats.md §2), byte-exact with ggml's structs. ---- */
#define DF_QK 32    /* legacy block */
#define DF_QK_K 256 /* k-quant super-block */
typedef struct { df_f16 d; uint8_t qs[16]; } df_block_q4_0;
typedef struct { df_f16 d, m; uint8_t qs[16]; } df_block_q4_1;
typedef struct { df_f16 d; uint8_t qh[4]; uint8_t qs[16]; } df_block_q5_0;
typedef struct { df_f16 d, m; uint8_t qh[4]; uint8_t qs[16]; } df_block_q5_1;
typedef struct { df_f16 d; int8_t qs[32]; } df_block_q8_0;
typedef struct { df_f16 d, s; int8_t qs[32]; } df_block_q8_1;
typedef struct { uint8_t e; uint8_t qs[16]; } df_block_mxfp4;
typedef struct { df_f16 d; uint8_t qs[16]; } df_block_iq4_nl;
typedef struct { uint8_t scales[16]; uint8_t qs[64]; df_f16 d, dmin; } df_block_q2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; df_f16 d; } df_block_q3_K;
typedef struct { df_f16 d, dmin; uint8_t scales[12]; uint8_t qs[128]; } df_block_q4_K;
typedef struct { df_f16 d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } df_block_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; df_f16 d; } df_block_q6_K;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } df_block_q8_K;
typedef struct { df_f16 d; df_f16 scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } df_block_iq4_xs;
typedef struct { df_f16 d; uint16_t qs[32]; } df_block_iq2_xxs;
typedef struct { df_f16 d; uint16_t qs[32]; uint8_t scales[8]; } df_block_iq2_xs;
typedef struct { df_f16 d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; } df_block_iq2_s;
typedef struct { df_f16 d; uint8_t qs[96]; } df_block_iq3_xxs;
typedef struct { df_f16 d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; } df_block_iq3_s;
typedef struct { df_f16 d; uint8_t qs[32]; uint16_t qh[8]; } df_block_iq1_s;
typedef struct { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; } df_block_iq1_m;
typedef struct { uint8_t qs[48]; uint8_t qh[4]; df_f16 d; } df_block_tq1_0;
typedef struct { uint8_t qs[64]; df_f16 d; } df_block_tq2_0;
#endif
