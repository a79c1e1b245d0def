/* quant_recipe.h — llama-quantize's recipes (tools/quantize's ftype table) and its choice of a
 * type for every tensor of a model under a recipe (llama-quant.cpp llama_tensor_get_type and
 * its helpers, d32676d): which tensors may be quantized, the mixtures of the _S/_M/_L and i-quant
 * recipes by tensor category, layer and model shape, the manual overrides, the fallback for
 * rows the block size does not divide, and which tensors llama-quantize refuses to quantize
 * without an importance matrix. Used by quantize.c; a pure function of the file's metadata.
 * Threading: pure functions. */
#ifndef DF_QUANT_RECIPE_H
#define DF_QUANT_RECIPE_H
#include "format/gguf.h"

/* llama_ftype values (general.file_type) of the recipes */
enum {
    DF_FT_ALL_F32 = 0, DF_FT_F16 = 1, DF_FT_Q4_0 = 2, DF_FT_Q4_1 = 3, DF_FT_Q8_0 = 7, DF_FT_Q5_0 = 8,
    DF_FT_Q5_1 = 9, DF_FT_Q2_K = 10, DF_FT_Q3_K_S = 11, DF_FT_Q3_K_M = 12, DF_FT_Q3_K_L = 13,
    DF_FT_Q4_K_S = 14, DF_FT_Q4_K_M = 15, DF_FT_Q5_K_S = 16, DF_FT_Q5_K_M = 17, DF_FT_Q6_K = 18,
    DF_FT_IQ2_XXS = 19, DF_FT_IQ2_XS = 20, DF_FT_Q2_K_S = 21, DF_FT_IQ3_XS = 22, DF_FT_IQ3_XXS = 23,
    DF_FT_IQ1_S = 24, DF_FT_IQ4_NL = 25, DF_FT_IQ3_S = 26, DF_FT_IQ3_M = 27, DF_FT_IQ2_S = 28,
    DF_FT_IQ2_M = 29, DF_FT_IQ4_XS = 30, DF_FT_IQ1_M = 31, DF_FT_BF16 = 32, DF_FT_TQ1_0 = 36,
    DF_FT_TQ2_0 = 37, DF_FT_MXFP4_MOE = 38,
    DF_FT_GUESSED = 1024,
    /* deltafin's own: every matrix in one type that has no llama-quantize recipe (MXFP4) */
    DF_FT_PLAIN = 2048,
};

typedef struct {
    const char *name;   /* as llama-quantize spells it: "Q4_K_M" */
    int ftype;          /* DF_FT_*; written to general.file_type (DF_FT_PLAIN: 1024) */
    int type;           /* the default tensor type; -1: COPY */
    const char *desc;
} df_qr_recipe;

/* By name, case-insensitive, or by llama-quantize's ftype number ("15"); NULL if unknown. */
const df_qr_recipe *df_qr_recipe_find(const char *name);
/* The i-th recipe (i >= 0), NULL past the end: the list the hints print. */
const df_qr_recipe *df_qr_recipe_at(int i);

typedef struct {
    const df_qr_recipe *r;
    int output_type, token_embd_type; /* --output-tensor-type / --token-embedding-type; < 0 none */
    int type_experts, type_dense;     /* deltafin's overrides of 3-D / other matrices; < 0 none */
    bool pure, leave_output, has_imatrix;
} df_qr_opts;

typedef struct {
    int type;            /* the type it gets (its own when not quantized) */
    bool quantizable;    /* llama-quantize's tensor_allows_quantization */
    bool needs_imatrix;  /* llama-quantize's tensor_requires_imatrix for that type */
} df_qr_choice;

/* The choice for every tensor of g (out[i] for g->tensors[i]); *n_fallback: tensors whose row
 * length the chosen type's block does not divide. DF_ERR_FORMAT naming the tensor when an
 * expert model's tensor has no layer number llama-quantize can read. */
int df_qr_plan(const df_gguf *g, const df_qr_opts *o, df_qr_choice *out, int *n_fallback);
#endif
