/* ref.c — scalar reference kernels: the oracle every SIMD table is tested against.
 * Formulas are those of llama.cpp's generic CPU kernels (formats.md §2.6): exact integer sums per
 * block, scaled in F32; F32/F16/BF16 dots accumulate in double (ggml_float).
 * Threading: pure functions. */
#include <math.h>

#include "kernels_impl.h"

/* ------------------------------------------------------------------ float types */

static void dot_f32(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

static void dot_f16(int64_t n, float *s, const void *w, const void *xq) {
    const df_f16 *a = w, *b = xq;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(df_f16_to_f32(a[i]) * df_f16_to_f32(b[i]));
    *s = (float)sum;
}

static void dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
    const df_bf16 *a = w, *b = xq;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(df_bf16_to_f32(a[i]) * df_bf16_to_f32(b[i]));
    *s = (float)sum;
}

static void from_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * 4); }
static void from_f16(const float *x, void *dst, int64_t n) {
    df_f16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_f16(x[i]);
}
static void from_bf16(const float *x, void *dst, int64_t n) {
    df_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_bf16(x[i]);
}

/* ------------------------------------------------------------------ Q8_0 */

static void dot_q8_0_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q8_0 *x = w, *y = xq;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (df_f16_to_f32(x[ib].d) * df_f16_to_f32(y[ib].d));
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ table */

void df_kernels_fill_ref(df_kernel_table *t) {
    memset(t, 0, sizeof *t);
    t->name = "ref";
    t->vec_dot[DF_TYPE_F32] = dot_f32;
    t->vec_dot[DF_TYPE_F16] = dot_f16;
    t->vec_dot[DF_TYPE_BF16] = dot_bf16;
    t->vec_dot[DF_TYPE_Q8_0] = dot_q8_0_q8_0;

    t->from_float[DF_TYPE_F32] = from_f32;
    t->from_float[DF_TYPE_F16] = from_f16;
    t->from_float[DF_TYPE_BF16] = from_bf16;
    t->from_float[DF_TYPE_Q8_0] = df_quantize_row_q8_0_ref;
    t->from_float[DF_TYPE_Q8_1] = df_quantize_row_q8_1_ref;
    t->from_float[DF_TYPE_Q8_K] = df_quantize_row_q8_K_ref;
}
