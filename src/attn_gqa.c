/* attn_gqa.c — grouped-query attention of a batch of queries over the F16 KV cache, with the
 * numerics of llama.cpp's CPU flash-attention kernel (formats.md §2.7): q rounded to F16,
 * s = dot(q, k)·scale in F32, online softmax, V accumulated in F16 (decode / small batches);
 * for large batches (llama.cpp's tiled path) q stays F32 and the accumulator is F32.
 * Causal mask (plus an optional sliding window), optional per-head sink logits.
 * Threading: one task per (token, head) over the pool; per-thread scratch from the ctx. */
#include "session.h"
#include <math.h>

size_t df_attn_scratch_per_thread(int dk, int dv) {
    size_t n = (size_t)dk * sizeof(df_f16) + (size_t)dk * 4 + (size_t)dv * 4 + (size_t)dv * sizeof(df_f16);
    return (n + 63) & ~(size_t)63;
}

static float dot_f16(const df_f16 *a, const df_f16 *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += df_f16_to_f32(a[i + j]) * df_f16_to_f32(b[i + j]);
    double s = 0.0;
    for (; i < n; i++) s += (double)(df_f16_to_f32(a[i]) * df_f16_to_f32(b[i]));
    float t = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    return (float)(t + s);
}

static float dot_f16_f32(const df_f16 *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += df_f16_to_f32(a[i + j]) * b[i + j];
    for (; i < n; i++) acc[0] += df_f16_to_f32(a[i]) * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
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

    float S = 0.0f, M = -INFINITY;
    if (!a->f32_acc) {
        for (int i = 0; i < dk; i++) q16[i] = df_f32_to_f16(qs[i]);
        memset(acc16, 0, (size_t)dv * sizeof(df_f16));
        for (int p = p_lo; p <= pq; p++) {
            const df_f16 *kr = a->kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = a->vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
            float s = dot_f16(kr, q16, dk) * a->scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int d = 0; d < dv; d++) acc16[d] = df_f32_to_f16(df_f16_to_f32(acc16[d]) * ms);
            } else {
                vs = expf(s - M);
            }
            for (int d = 0; d < dv; d++)
                acc16[d] = df_f32_to_f16(fmaf(df_f16_to_f32(vr[d]), vs, df_f16_to_f32(acc16[d])));
            S = S * ms + vs;
        }
        for (int d = 0; d < dv; d++) acc32[d] = df_f16_to_f32(acc16[d]);
    } else {
        memcpy(q32, qs, (size_t)dk * sizeof(float));
        memset(acc32, 0, (size_t)dv * sizeof(float));
        for (int p = p_lo; p <= pq; p++) {
            const df_f16 *kr = a->kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = a->vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
            float s = dot_f16_f32(kr, q32, dk) * a->scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int d = 0; d < dv; d++) acc32[d] *= ms;
            } else {
                vs = expf(s - M);
            }
            for (int d = 0; d < dv; d++) acc32[d] = fmaf(df_f16_to_f32(vr[d]), vs, acc32[d]);
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
