/* attn_gqa.c — grouped-query attention of a batch of queries over the KV cache, with the
 * numerics of llama.cpp's CPU flash-attention kernel (formats.md §2.7): q rounded to F16,
 * s = dot(q, k)·scale in F32, online softmax, V accumulated in F16 (decode / small batches);
 * for large batches (llama.cpp's tiled path) q stays F32 and the accumulator is F32.
 * A quantized or BF16 cache (-ctk / -ctv) always takes llama.cpp's one-chunk kernel: q in K's
 * vec_dot_type (Q8_0 for Q8_0 / Q4_0 ..., as ggml's from_float), K's own vec_dot, V rows
 * dequantized to F32 and accumulated in F32 (an F16 V still accumulates in F16).
 * Causal mask (plus an optional sliding window), optional per-head sink logits.
 * The dots and multiply-adds are the kernel table's (kernels.h attn_*): with the avx512 / avx2
 * tables the results are bit-identical to a -march=native ggml build on the same CPU (checked
 * in tests/test_attn_gqa.c): ggml_vec_dot_f16's summation order, the V update
 * f16(fma(v, vs, acc)) and the softmax sum S = fma(S, ms, vs) as gcc contracts them in ggml
 * (the sink update stays a plain multiply-add, as there).
 * Threading: one task per (token, head) over the pool; per-thread scratch from the ctx. */
#include "forward/session.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t df_attn_scratch_per_thread(int dk, int dv) {
    /* q16 (also Q in K's dot type: at most 2 bytes per value) | q32 (also the dequantized V row)
     * | acc32 | acc16 */
    const int w = dk > dv ? dk : dv;
    size_t n = (size_t)dk * sizeof(df_f16) + (size_t)w * 4 + (size_t)dv * 4 + (size_t)dv * sizeof(df_f16);
    return (n + 63) & ~(size_t)63;
}

static int kv_type(int t) { return t == DF_TYPE_F32 ? DF_TYPE_F16 : t; }

/* element offset e of a cache whose blocks are blck values in bytes bytes (e a multiple of blck) */
static inline const char *kv_at(const void *base, int blck, int bytes, int64_t e) {
    return (const char *)base + (uint64_t)(e / blck) * (uint64_t)bytes;
}

void df_kv_put(int type, const float *x, void *dst, int64_t n) {
    if (type == DF_TYPE_F16 || type == DF_TYPE_F32) {
        df_f16 *d = dst;
        for (int64_t e = 0; e < n; e++) d[e] = df_f32_to_f16(x[e]);
        return;
    }
    /* ggml-cpu's from_float for the type: Q8_0 / BF16 are the kernel table's converters (the
     * CPU's Q8_0 rounding), the others its reference quantizers */
    const df_kernel_table *k = df_kernels();
    if ((type == DF_TYPE_Q8_0 || type == DF_TYPE_BF16) && k->from_float[type]) k->from_float[type](x, dst, n);
    else df_quantize_row(type, x, dst, n);
}

void df_fwht(float *x, int64_t n, int nrot) {
    const float scale = 1.0f / sqrtf((float)nrot);
    for (int64_t r = 0; r + nrot <= n; r += nrot) {
        float *y = x + r;
        for (int j = 0; j < nrot; j++) y[j] *= scale;
        for (int len = 1; len < nrot; len <<= 1)
            for (int i = 0; i < nrot; i += 2 * len)
                for (int j = 0; j < len; j++) {
                    const float u = y[i + j], v = y[i + len + j];
                    y[i + j] = u + v;
                    y[i + len + j] = u - v;
                }
    }
}

static void attn_task(void *ctx, int task, int thread) {
    const df_attn_args *a = ctx;
    const int t = task / a->n_head, h = task % a->n_head;
    const int dk = a->dk, dv = a->dv;
    const int kvh = h / (a->n_head / a->n_head_kv);
    const int tk = kv_type(a->type_k), tv = kv_type(a->type_v);
    char *scr = a->scratch + (size_t)thread * a->scratch_stride;
    df_f16 *q16 = (df_f16 *)scr;
    float *q32 = (float *)(scr + (size_t)dk * sizeof(df_f16));
    float *acc32 = q32 + (dk > dv ? dk : dv);
    df_f16 *acc16 = (df_f16 *)(acc32 + dv);
    const float *qs = a->q + (int64_t)t * a->ldq + (int64_t)h * dk;
    const int pq = a->pos0 + t;
    int p_lo = 0;
    if (a->swa > 0 && pq - a->swa + 1 > 0) p_lo = pq - a->swa + 1;
    const uint8_t *km = a->kmask ? a->kmask + (int64_t)t * a->ldm : NULL;

    const df_kernel_table *k = df_kernels();
    float S = 0.0f, M = -INFINITY;
    if (tk != DF_TYPE_F16 || tv != DF_TYPE_F16) {
        /* a quantized (or BF16) cache: llama.cpp's one-chunk kernel at every batch size (its
         * tiled kernel takes F16 / F32 caches only). Q in K's vec_dot_type and K's own dot;
         * an F16 V accumulates in F16 as below, any other V row is dequantized to F32 and
         * accumulated in F32 (acc = fma(v, vs, acc), ggml_vec_mad_f32). */
        const int qt = df_type_info(tk)->vec_dot_type;
        void *qq = q16; /* at most 2 bytes per value (F16 / BF16 / Q8_0 / Q8_1) */
        if (tk == DF_TYPE_F16) for (int i = 0; i < dk; i++) q16[i] = df_f32_to_f16(qs[i]);
        else k->from_float[qt](qs, qq, dk);
        const bool f16v = tv == DF_TYPE_F16;
        float *v32 = q32;
        if (f16v) memset(acc16, 0, (size_t)dv * sizeof(df_f16));
        else memset(acc32, 0, (size_t)dv * sizeof(float));
        const df_type_traits *fk = df_type_info(tk), *fv = df_type_info(tv);
        const int kb = fk->blck, kby = fk->bytes, vb = fv->blck, vby = fv->bytes;
        for (int p = p_lo; p <= pq; p++) {
            if (km && !km[p]) continue;
            const void *kr = kv_at(a->kc, kb, kby, (int64_t)p * a->ldk + (int64_t)kvh * dk);
            const void *vr = kv_at(a->vc, vb, vby, (int64_t)p * a->ldv + (int64_t)kvh * dv);
            float s;
            if (tk == DF_TYPE_F16) s = k->attn_dot_f16(kr, q16, dk);
            else k->vec_dot[tk](dk, &s, kr, qq);
            s *= a->scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                float Mold = M;
                M = s;
                ms = expf(Mold - M);
                if (f16v) for (int d = 0; d < dv; d++) acc16[d] = df_f32_to_f16(df_f16_to_f32(acc16[d]) * ms);
                else for (int d = 0; d < dv; d++) acc32[d] *= ms;
            } else {
                vs = expf(s - M);
            }
            if (f16v) {
                k->attn_mad_f16(acc16, vr, vs, dv);
            } else {
                df_dequantize_row(tv, vr, v32, dv);
                k->attn_mad_f32f(acc32, v32, vs, dv);
            }
            S = k->attn_fma_sum ? fmaf(S, ms, vs) : S * ms + vs;
        }
        if (f16v) for (int d = 0; d < dv; d++) acc32[d] = df_f16_to_f32(acc16[d]);
    } else if (!a->f32_acc) {
        const df_f16 *kc = a->kc, *vc = a->vc;
        for (int i = 0; i < dk; i++) q16[i] = df_f32_to_f16(qs[i]);
        memset(acc16, 0, (size_t)dv * sizeof(df_f16));
        for (int p = p_lo; p <= pq; p++) {
            if (km && !km[p]) continue;
            const df_f16 *kr = kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
            float s = k->attn_dot_f16(kr, q16, dk) * a->scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int d = 0; d < dv; d++) acc16[d] = df_f32_to_f16(df_f16_to_f32(acc16[d]) * ms);
            } else {
                vs = expf(s - M);
            }
            k->attn_mad_f16(acc16, vr, vs, dv);
            S = k->attn_fma_sum ? fmaf(S, ms, vs) : S * ms + vs;
        }
        for (int d = 0; d < dv; d++) acc32[d] = df_f16_to_f32(acc16[d]);
    } else {
        const df_f16 *kc = a->kc, *vc = a->vc;
        memcpy(q32, qs, (size_t)dk * sizeof(float));
        memset(acc32, 0, (size_t)dv * sizeof(float));
        for (int p = p_lo; p <= pq; p++) {
            if (km && !km[p]) continue;
            const df_f16 *kr = kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
            float s = k->attn_dot_f16_f32(kr, q32, dk) * a->scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int d = 0; d < dv; d++) acc32[d] *= ms;
            } else {
                vs = expf(s - M);
            }
            k->attn_mad_f32(acc32, vr, vs, dv);
            S = S * ms + vs;
        }
    }
    if (a->sinks) {
        float s = a->sinks[h], ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms = expf(M - s);
            M = s;
            for (int d = 0; d < dv; d++) acc32[d] *= ms;
        } else {
            vs = expf(s - M);
        }
        S = S * ms + vs;
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    float *o = a->out + (int64_t)t * a->ldo + (int64_t)h * dv;
    for (int d = 0; d < dv; d++) o[d] = acc32[d] * inv;
}

void df_attn_gqa(df_pool *pool, const df_attn_args *a) {
    df_pool_run(pool, a->n_tok * a->n_head, attn_task, (void *)a);
}
