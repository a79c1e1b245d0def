/* quant_oracle.c — ggml's quantizers on the rows of tests/quant_cases.h: one line per type and
 * importance matrix ("TYPE imatrix-kind FNV-1a-64 of the bytes", kind -1 = none), what
 * tests/test_quant.c compares deltafin's quantizers with. Built and run by
 * tests/data/expected/quantize/make.sh against the llama.cpp build's libggml-base:
 *   cc -O2 -I$LLAMA_CPP/ggml/include scripts/quant_oracle.c -lggml-base */
#include "ggml.h"
#include "../tests/quant_cases.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
    static const enum ggml_type types[] = {
        GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q2_K,
        GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS,
        GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_IQ4_NL,
        GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4,
    };
    float *x = malloc(sizeof(float) * QC_ROWS * QC_N), w[QC_N];
    char *dst = malloc((size_t)QC_ROWS * ggml_row_size(GGML_TYPE_F32, QC_N));
    if (!x || !dst) return 1;
    for (int r = 0; r < QC_ROWS; r++) qc_row(r, x + (size_t)r * QC_N);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (int kind = -1; kind < 2; kind++) {
            if (kind < 0 && ggml_quantize_requires_imatrix(types[t])) continue;
            if (kind >= 0) qc_imatrix(kind, w);
            const size_t n = ggml_quantize_chunk(types[t], x, dst, 0, QC_ROWS, QC_N, kind >= 0 ? w : NULL);
            printf("%s\t%d\t%016llx\n", ggml_type_name(types[t]), kind, (unsigned long long)qc_fnv(dst, n, QC_FNV0));
        }
    free(x);
    free(dst);
    return 0;
}
