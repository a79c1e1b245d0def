/* attn_gqa.h — switch for llama.cpp's (ggml's) float summation orders.
 * df_attn_gqa itself is declared in session.h. */
#ifndef DF_ATTN_GQA_H
#define DF_ATTN_GQA_H

/* Non-zero when env DELTAFIN_GGML_ORDER is set (and not "0"): attn_gqa.c's flash attention and
 * the x86 Q8_0 dot (kernel tables filled after the first call) follow ggml's summation order,
 * bit-identical to a -march=native llama.cpp CPU build on the same machine (docs/testing.md,
 * "Quantized parity"). Read once. */
int df_ggml_order(void);

#endif
