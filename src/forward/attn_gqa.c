/* attn_gqa.c — grouped-query attention of a batch of queries over the F16 KV cache, with the
 * numerics of llama.cpp's CPU flash-attention kernel (formats.md §2.7): q rounded to F16,
 * s = dot(q, k)·scale in F32, online softmax, V accumulated in F16 (decode / small batches);
 * for large batches (llama.cpp's tiled path) q stays F32 and the accumulator is F32.
 * Causal mask (plus an optional sliding window), optional per-head sink logits.
 * The dots and multiply-adds are the kernel table's (kernels.h attn_*): with the avx512 / avx2
 * tables the results are bit-identical to a -march=native ggml build on the same CPU (checked
 * in tests/test_attn_gqa.c): ggml_vec_dot_f16's summation order, the V update
 * f16(fma(v, vs, acc)) and the softmax sum S = fma(S, ms, vs) as gcc contracts them in ggml
 * (the sink update stays a plain multiply-add, as there).
 * Threading: one task per (token, head) over the pool; per-thread scratch from the ctx. */
#include "forward/session.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t df_attn_scratch_per_thread(int dk, int dv) {
    size_t n = (size_t)dk * sizeof(df_f16) + (size_t)dk * 4 + (size_t)dv * 4 + (size_t)dv * sizeof(df_f16);
    return (n + 63) & ~(size_t)63;
}

static void attn_task(void *ctx, int task, int thread) {
    const df_attn_args *a = ctx;
    const int t = task / a->n_head, h = task % a->n_head;
    const int dk = a->dk, dv = a->dv;
    const int kvh = h / (a->n_head / a->n_head_kv);
    char *scr = a->scratch + (size_t)thread * a->scratch_stride;
    df_f16 *q16 = (df_f16 *)scr;
    float *q32 = (float *)(scr + (size_t)dk * sizeof(df_f16));
    float *acc32 = q32 + dk;
    df_f16 *acc16 = (df_f16 *)(acc32 + dv);
    const float *qs = a->q + (int64_t)t * a->ldq + (int64_t)h * dk;
    const int pq = a->pos0 + t;
    int p_lo = 0;
    if (a->swa > 0 && pq - a->swa + 1 > 0) p_lo = pq - a->swa + 1;

    const df_kernel_table *k = df_kernels();
    float S = 0.0f, M = -INFINITY;
    if (!a->f32_acc) {
        for (int i = 0; i < dk; i++) q16[i] = df_f32_to_f16(qs[i]);
        memset(acc16, 0, (size_t)dv * sizeof(df_f16));
        for (int p = p_lo; p <= pq; p++) {
            const df_f16 *kr = a->kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = a->vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
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
        memcpy(q32, qs, (size_t)dk * sizeof(float));
        memset(acc32, 0, (size_t)dv * sizeof(float));
        for (int p = p_lo; p <= pq; p++) {
            const df_f16 *kr = a->kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = a->vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
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
