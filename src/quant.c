/* quant.c — ggml tensor type table, row (de)quantization (formats.md §1.6, §2).
 * Quantizers follow llama.cpp's reference algorithms (quantize_row_*_ref, no importance matrix)
 * so files we write match llama-quantize: Q8_0 byte-identical, k-quants near-identical.
 * Invariant: every function here is pure; n is a multiple of the type's block size (callers
 * check with df_type_info()->blck; violations return DF_ERR_INVALID).
 * Threading: thread-safe (no mutable state). */
#include "quant.h"

#include <math.h>
#include <pthread.h>
#include <strings.h>

const int8_t df_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
const int8_t df_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* name, blck, bytes, vec_dot_type, can_compute, can_quantize — compute/quantize flags are
 * completed from the function tables below at lookup time. */
static const df_type_traits g_types[DF_TYPE_COUNT] = {
    [DF_TYPE_F32] = {"F32", 1, 4, DF_TYPE_F32, 0, 0},
    [DF_TYPE_F16] = {"F16", 1, 2, DF_TYPE_F16, 0, 0},
    [DF_TYPE_Q4_0] = {"Q4_0", 32, 18, DF_TYPE_Q8_0, 0, 0},
    [DF_TYPE_Q4_1] = {"Q4_1", 32, 20, DF_TYPE_Q8_1, 0, 0},
    [DF_TYPE_Q5_0] = {"Q5_0", 32, 22, DF_TYPE_Q8_0, 0, 0},
    [DF_TYPE_Q5_1] = {"Q5_1", 32, 24, DF_TYPE_Q8_1, 0, 0},
    [DF_TYPE_Q8_0] = {"Q8_0", 32, 34, DF_TYPE_Q8_0, 0, 0},
    [DF_TYPE_Q8_1] = {"Q8_1", 32, 36, DF_TYPE_Q8_1, 0, 0},
    [DF_TYPE_Q2_K] = {"Q2_K", 256, 84, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_Q3_K] = {"Q3_K", 256, 110, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_Q4_K] = {"Q4_K", 256, 144, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_Q5_K] = {"Q5_K", 256, 176, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_Q6_K] = {"Q6_K", 256, 210, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_Q8_K] = {"Q8_K", 256, 292, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_IQ1_S] = {"IQ1_S", 256, 50, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18, DF_TYPE_Q8_0, 0, 0},
    [DF_TYPE_IQ3_S] = {"IQ3_S", 256, 110, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_IQ2_S] = {"IQ2_S", 256, 82, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_I8] = {"I8", 1, 1, DF_TYPE_I8, 0, 0},
    [DF_TYPE_I16] = {"I16", 1, 2, DF_TYPE_I16, 0, 0},
    [DF_TYPE_I32] = {"I32", 1, 4, DF_TYPE_I32, 0, 0},
    [DF_TYPE_I64] = {"I64", 1, 8, DF_TYPE_I64, 0, 0},
    [DF_TYPE_F64] = {"F64", 1, 8, DF_TYPE_F64, 0, 0},
    [DF_TYPE_IQ1_M] = {"IQ1_M", 256, 56, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_BF16] = {"BF16", 1, 2, DF_TYPE_BF16, 0, 0},
    [DF_TYPE_TQ1_0] = {"TQ1_0", 256, 54, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_TQ2_0] = {"TQ2_0", 256, 66, DF_TYPE_Q8_K, 0, 0},
    [DF_TYPE_MXFP4] = {"MXFP4", 32, 17, DF_TYPE_Q8_0, 0, 0},
    [DF_TYPE_NVFP4] = {"NVFP4", 64, 36, DF_TYPE_Q8_0, 0, 0},
    [DF_TYPE_Q1_0] = {"Q1_0", 128, 18, DF_TYPE_Q8_0, 0, 0},
    [DF_TYPE_Q2_0] = {"Q2_0", 64, 18, DF_TYPE_Q8_0, 0, 0},
};

/* ------------------------------------------------------------------ helpers */

static inline float maxf_ggml(float a, float b) { return a > b ? a : b; } /* ggml's MAX() */

/* float -> int8 as llama.cpp's `y = roundf(v)` (v already in [-127.x, 127.x]); NaN -> 0
 * (what the x86 conversion produces for the low byte), avoiding C undefined behaviour. */
static inline int8_t to_i8(float v) {
    if (!(v > -128.5f && v < 127.5f)) return 0;
    return (int8_t)(int)v;
}

/* ------------------------------------------------------------------ F32/F16/BF16 */

static void deq_f32(const void *src, float *y, int64_t n) { memcpy(y, src, (size_t)n * 4); }
static void q_f32(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * 4); }
static void deq_f16(const void *src, float *y, int64_t n) {
    const df_f16 *s = src;
    for (int64_t i = 0; i < n; i++) y[i] = df_f16_to_f32(s[i]);
}
static void q_f16(const float *x, void *dst, int64_t n) {
    df_f16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_f16(x[i]);
}
static void deq_bf16(const void *src, float *y, int64_t n) {
    const df_bf16 *s = src;
    for (int64_t i = 0; i < n; i++) y[i] = df_bf16_to_f32(s[i]);
}
static void q_bf16(const float *x, void *dst, int64_t n) {
    df_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = df_f32_to_bf16(x[i]);
}

/* ------------------------------------------------------------------ Q8_0 / Q8_1 / Q8_K */

void df_quantize_row_q8_0_ref(const float *x, void *dst, int64_t n) {
    df_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = maxf_ggml(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = to_i8(roundf(x[j] * id));
    }
}
static void deq_q8_0(const void *src, float *y, int64_t n) {
    const df_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        const float d = df_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) *y++ = d * b[i].qs[j];
    }
}

void df_quantize_row_q8_1_ref(const float *x, void *dst, int64_t n) {
    df_block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = maxf_ggml(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = df_f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < 16; j++) {
            y[i].qs[j] = to_i8(roundf(x[j] * id));
            y[i].qs[16 + j] = to_i8(roundf(x[16 + j] * id));
            sum += y[i].qs[j] + y[i].qs[16 + j];
        }
        y[i].s = df_f32_to_f16((float)sum * d);
    }
}
static void deq_q8_1(const void *src, float *y, int64_t n) {
    const df_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        const float d = df_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) *y++ = d * b[i].qs[j];
    }
}

void df_quantize_row_q8_K_ref(const float *x, void *dst, int64_t n) {
    df_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float max = 0, amax = 0;
        for (int j = 0; j < 256; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (!amax) {
            y[i].d = 0;
            memset(y[i].qs, 0, 256);
            memset(y[i].bsums, 0, sizeof y[i].bsums); /* llama.cpp leaves them stale */
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) {
            int v = df_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? (v > -128 ? v : -128) : 127);
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += y[i].qs[16 * j + k];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
static void deq_q8_K(const void *src, float *y, int64_t n) {
    const df_block_q8_K *b = src;
    for (int64_t i = 0; i < n / 256; i++)
        for (int j = 0; j < 256; j++) *y++ = b[i].d * b[i].qs[j];
}

/* ------------------------------------------------------------------ tables */

typedef void (*deq_fn)(const void *, float *, int64_t);
typedef void (*q_fn)(const float *, void *, int64_t);

static const deq_fn g_deq[DF_TYPE_COUNT] = {
    [DF_TYPE_F32] = deq_f32,   [DF_TYPE_F16] = deq_f16,   [DF_TYPE_BF16] = deq_bf16,
    [DF_TYPE_Q8_0] = deq_q8_0, [DF_TYPE_Q8_1] = deq_q8_1, [DF_TYPE_Q8_K] = deq_q8_K,
};
static const q_fn g_q[DF_TYPE_COUNT] = {
    [DF_TYPE_F32] = q_f32,
    [DF_TYPE_F16] = q_f16,
    [DF_TYPE_BF16] = q_bf16,
    [DF_TYPE_Q8_0] = df_quantize_row_q8_0_ref,
    [DF_TYPE_Q8_1] = df_quantize_row_q8_1_ref,
    [DF_TYPE_Q8_K] = df_quantize_row_q8_K_ref,
};

/* Types whose weights have dot kernels in kernels/ref.c (activation-only types excluded). */
static bool has_dot(int t) {
    switch (t) {
    case DF_TYPE_F32: case DF_TYPE_F16: case DF_TYPE_BF16: case DF_TYPE_Q8_0:
        return true;
    default:
        return false;
    }
}

static df_type_traits g_info[DF_TYPE_COUNT];
static pthread_once_t g_info_once = PTHREAD_ONCE_INIT;
static void info_init(void) {
    for (int t = 0; t < DF_TYPE_COUNT; t++) {
        g_info[t] = g_types[t];
        if (!g_info[t].name) continue;
        g_info[t].can_compute = g_deq[t] && has_dot(t);
        g_info[t].can_quantize = g_q[t] != NULL && t != DF_TYPE_Q8_1 && t != DF_TYPE_Q8_K;
    }
}

const df_type_traits *df_type_info(int type) {
    if (type < 0 || type >= DF_TYPE_COUNT || !g_types[type].name) return NULL;
    pthread_once(&g_info_once, info_init);
    return &g_info[type];
}

int df_type_from_name(const char *name) {
    if (!name) return -1;
    for (int t = 0; t < DF_TYPE_COUNT; t++)
        if (g_types[t].name && !strcasecmp(g_types[t].name, name)) return t;
    return -1;
}

uint64_t df_type_row_bytes(int type, int64_t n) {
    const df_type_traits *t = df_type_info(type);
    if (!t || n < 0) return 0;
    return df_row_bytes(t, n);
}

static int check_args(int type, int64_t n, const char *what) {
    const df_type_traits *t = df_type_info(type);
    if (!t) return df_err(DF_ERR_INVALID, "%s: invalid tensor type id %d", what, type);
    if (n < 0 || n % t->blck)
        return df_err(DF_ERR_INVALID, "%s: %s row of %lld elements is not a multiple of %d", what,
                      t->name, (long long)n, t->blck);
    return DF_OK;
}

int df_dequantize_row(int type, const void *src, float *dst, int64_t n) {
    int rc = check_args(type, n, "dequantize");
    if (rc) return rc;
    if (!g_deq[type])
        return df_err(DF_ERR_UNSUPPORTED, "dequantize: type %s not supported", g_types[type].name);
    g_deq[type](src, dst, n);
    return DF_OK;
}

int df_quantize_row(int type, const float *src, void *dst, int64_t n) {
    int rc = check_args(type, n, "quantize");
    if (rc) return rc;
    if (!g_q[type])
        return df_err(DF_ERR_UNSUPPORTED, "quantize: type %s not supported", g_types[type].name);
    g_q[type](src, dst, n);
    return DF_OK;
}
