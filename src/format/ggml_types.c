/* ggml_types.c — the table of ggml file types (see ggml_types.h).
 * Threading: constant data. */
#include "format/ggml_types.h"

#include <strings.h>

static const df_ggml_type_info g_types[DF_GGML_TYPE_COUNT] = {
    [DF_TYPE_F32] = {"F32", 1, 4},          [DF_TYPE_F16] = {"F16", 1, 2},
    [DF_TYPE_Q4_0] = {"Q4_0", 32, 18},      [DF_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [DF_TYPE_Q5_0] = {"Q5_0", 32, 22},      [DF_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [DF_TYPE_Q8_0] = {"Q8_0", 32, 34},      [DF_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [DF_TYPE_Q2_K] = {"Q2_K", 256, 84},     [DF_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [DF_TYPE_Q4_K] = {"Q4_K", 256, 144},    [DF_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [DF_TYPE_Q6_K] = {"Q6_K", 256, 210},    [DF_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [DF_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66}, [DF_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [DF_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98}, [DF_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [DF_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},  [DF_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [DF_TYPE_IQ2_S] = {"IQ2_S", 256, 82},   [DF_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [DF_TYPE_I8] = {"I8", 1, 1},            [DF_TYPE_I16] = {"I16", 1, 2},
    [DF_TYPE_I32] = {"I32", 1, 4},          [DF_TYPE_I64] = {"I64", 1, 8},
    [DF_TYPE_F64] = {"F64", 1, 8},          [DF_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [DF_TYPE_BF16] = {"BF16", 1, 2},        [DF_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [DF_TYPE_TQ2_0] = {"TQ2_0", 256, 66},   [DF_TYPE_MXFP4] = {"MXFP4", 32, 17},
    [DF_TYPE_NVFP4] = {"NVFP4", 64, 36},    [DF_TYPE_Q1_0] = {"Q1_0", 128, 18},
    [DF_TYPE_Q2_0] = {"Q2_0", 64, 18},
};

const df_ggml_type_info *df_ggml_type(int type) {
    if (type < 0 || type >= DF_GGML_TYPE_COUNT || !g_types[type].name) return NULL;
    return &g_types[type];
}

int df_ggml_type_from_name(const char *name) {
    if (!name) return -1;
    for (int t = 0; t < DF_GGML_TYPE_COUNT; t++)
        if (g_types[t].name && !strcasecmp(g_types[t].name, name)) return t;
    return -1;
}
