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
     * | acc32 | acc16 | the split path's reduced accumulator */
    const int w = dk > dv ? dk : dv;
    size_t n = (size_t)dk * sizeof(df_f16) + (size_t)w * 4 + (size_t)dv * 4 + (size_t)dv * sizeof(df_f16) +
               (size_t)dv * 4;
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

/* One query head's online softmax over its keys, in the numerics of the kernel llama.cpp would
 * run (see the file comment): FA_QUANT a quantized / BF16 cache (one-chunk kernel, K's own dot, an
 * F16 V accumulated in F16, any other V in F32), FA_F16 F16 K and V (one-chunk kernel: q in F16,
 * F16 accumulator), FA_F32 the tiled path's F32 q and accumulator. */
enum { FA_QUANT, FA_F16, FA_F32 };
typedef struct {
    const df_kernel_table *k;
    int mode, tk, tv, dk, dv;
    float scale;
    const void *qq;             /* q in K's dot type (FA_QUANT / FA_F16) */
    const float *q32;           /* q (FA_F32) */
    df_f16 *acc16;
    float *acc32, *v32;
    bool f16v;                  /* the accumulator is F16 */
    float S, M;
} fa_run;

static void fa_reset(fa_run *f) {
    f->S = 0.0f;
    f->M = -INFINITY;
    if (f->f16v) memset(f->acc16, 0, (size_t)f->dv * sizeof(df_f16));
    else memset(f->acc32, 0, (size_t)f->dv * sizeof(float));
}

/* the online-softmax update by one key row kr and its value row vr */
static void fa_key(fa_run *f, const void *kr, const void *vr) {
    const df_kernel_table *k = f->k;
    const int dk = f->dk, dv = f->dv;
    float s;
    if (f->mode == FA_F32) s = k->attn_dot_f16_f32(kr, f->q32, dk);
    else if (f->tk == DF_TYPE_F16) s = k->attn_dot_f16(kr, f->qq, dk);
    else k->vec_dot[f->tk](dk, &s, kr, f->qq);
    s *= f->scale;
    float ms = 1.0f, vs = 1.0f;
    if (s > f->M) {
        const float Mold = f->M;
        f->M = s;
        ms = expf(Mold - f->M);
        if (f->f16v) for (int d = 0; d < dv; d++) f->acc16[d] = df_f32_to_f16(df_f16_to_f32(f->acc16[d]) * ms);
        else for (int d = 0; d < dv; d++) f->acc32[d] *= ms;
    } else {
        vs = expf(s - f->M);
    }
    if (f->mode == FA_F32) {
        k->attn_mad_f32(f->acc32, vr, vs, dv);
        f->S = f->S * ms + vs;
        return;
    }
    if (f->f16v) {
        k->attn_mad_f16(f->acc16, vr, vs, dv);
    } else {
        df_dequantize_row(f->tv, vr, f->v32, dv);
        k->attn_mad_f32f(f->acc32, f->v32, vs, dv);
    }
    f->S = k->attn_fma_sum ? fmaf(f->S, ms, vs) : f->S * ms + vs;
}

/* the accumulator as F32 in acc32, then the per-head sink logit (a plain multiply-add) */
static void fa_close(fa_run *f, const float *sink) {
    if (f->f16v) for (int d = 0; d < f->dv; d++) f->acc32[d] = df_f16_to_f32(f->acc16[d]);
    if (!sink) return;
    const float s = *sink;
    float ms = 1.0f, vs = 1.0f;
    if (s > f->M) {
        ms = expf(f->M - s);
        f->M = s;
        for (int d = 0; d < f->dv; d++) f->acc32[d] *= ms;
    } else {
        vs = expf(s - f->M);
    }
    f->S = f->S * ms + vs;
}

/* ggml_flash_attn_ext_reduce_partials, one chunk at a time in chunk order: fold f's partial
 * (M, S, acc32) into the running (*Mf, *Sf, vf) */
static void fa_fold(const fa_run *f, float *Mf, float *Sf, float *vf) {
    if (f->S == 0.0f) return;
    const float mn = fmaxf(*Mf, f->M), so = expf(*Mf - mn), sn = expf(f->M - mn);
    for (int d = 0; d < f->dv; d++) vf[d] = fmaf(vf[d], so, f->acc32[d] * sn);
    *Sf = fmaf(*Sf, so, f->S * sn);
    *Mf = mn;
}

/* the keys of query t in index order: cache positions p_lo..pq (index p), then the second
 * block's rows (index split_base + j); calls visit for each (ctx f) */
typedef struct {
    fa_run *f;
    const df_attn_args *a;
    int h;                      /* query head (its sink) */
    int64_t chunk_end;          /* split: end of the current chunk's indices */
    int64_t cs;                 /* split: chunk size */
    float Mf, Sf, *vf;          /* split: the reduced partials */
} fa_walk;

static void walk_key(fa_walk *w, int64_t idx, const void *kr, const void *vr) {
    if (w->cs > 0 && idx >= w->chunk_end) { /* close the chunks before idx */
        while (idx >= w->chunk_end) {
            fa_close(w->f, w->chunk_end == w->cs && w->a->sinks ? &w->a->sinks[w->h] : NULL);
            fa_fold(w->f, &w->Mf, &w->Sf, w->vf);
            fa_reset(w->f);
            w->chunk_end += w->cs;
        }
    }
    fa_key(w->f, kr, vr);
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
    float *vfin = (float *)(acc16 + dv);
    const float *qs = a->q + (int64_t)t * a->ldq + (int64_t)h * dk;
    const int pq = a->pos0 + t;
    int p_lo = 0;
    if (a->swa > 0 && pq - a->swa + 1 > 0) p_lo = pq - a->swa + 1;
    const uint8_t *km = a->kmask ? a->kmask + (int64_t)t * a->ldm : NULL;

    fa_run f = {.k = df_kernels(), .tk = tk, .tv = tv, .dk = dk, .dv = dv, .scale = a->scale,
                .acc16 = acc16, .acc32 = acc32, .v32 = q32};
    if (tk != DF_TYPE_F16 || tv != DF_TYPE_F16) {
        /* a quantized (or BF16) cache: llama.cpp's one-chunk kernel at every batch size (its
         * tiled kernel takes F16 / F32 caches only). Q in K's vec_dot_type and K's own dot;
         * an F16 V accumulates in F16, any other V row is dequantized to F32 and accumulated
         * in F32 (acc = fma(v, vs, acc), ggml_vec_mad_f32). */
        f.mode = FA_QUANT;
        if (tk == DF_TYPE_F16) for (int i = 0; i < dk; i++) q16[i] = df_f32_to_f16(qs[i]);
        else f.k->from_float[df_type_info(tk)->vec_dot_type](qs, q16, dk);
        f.qq = q16; /* at most 2 bytes per value (F16 / BF16 / Q8_0 / Q8_1) */
        f.f16v = tv == DF_TYPE_F16;
    } else if (!a->f32_acc) {
        f.mode = FA_F16;
        for (int i = 0; i < dk; i++) q16[i] = df_f32_to_f16(qs[i]);
        f.qq = q16;
        f.f16v = true;
    } else {
        f.mode = FA_F32;
        memcpy(q32, qs, (size_t)dk * sizeof(float));
        f.q32 = q32;
    }
    fa_reset(&f);
    fa_walk w = {.f = &f, .a = a, .h = h, .Mf = -INFINITY, .vf = vfin};
    if (a->split_n > 1 && a->n_tok == 1 && f.mode != FA_F32) {
        w.cs = (a->split_nkv + a->split_n - 1) / a->split_n;
        w.chunk_end = w.cs;
        memset(vfin, 0, (size_t)dv * sizeof(float));
    }
    const df_type_traits *fk = df_type_info(tk), *fv = df_type_info(tv);
    const int kb = fk->blck, kby = fk->bytes, vb = fv->blck, vby = fv->bytes;
    for (int p = p_lo; p <= pq; p++) {
        if (km && !km[p]) continue;
        walk_key(&w, p, kv_at(a->kc, kb, kby, (int64_t)p * a->ldk + (int64_t)kvh * dk),
                 kv_at(a->vc, vb, vby, (int64_t)p * a->ldv + (int64_t)kvh * dv));
    }
    if (a->kc2) { /* the second block: V is K */
        const int32_t n2 = a->n2[t], *sel = a->sel2 ? a->sel2 + (int64_t)t * a->ldsel2 : NULL;
        for (int32_t i = 0; i < n2; i++) {
            const int64_t j = sel ? sel[i] : i;
            const char *r = kv_at(a->kc2, kb, kby, j * a->ldk2);
            walk_key(&w, a->split_base + j, r, r);
        }
    }
    float *o = a->out + (int64_t)t * a->ldo + (int64_t)h * dv;
    if (w.cs > 0) { /* close the remaining chunks, normalise the reduced sum */
        for (int64_t end = w.chunk_end; end - w.cs < a->split_nkv; end += w.cs) {
            fa_close(&f, end == w.cs && a->sinks ? &a->sinks[h] : NULL);
            fa_fold(&f, &w.Mf, &w.Sf, vfin);
            fa_reset(&f);
        }
        const float inv = w.Sf != 0.0f ? 1.0f / w.Sf : 1.0f;
        for (int d = 0; d < dv; d++) o[d] = vfin[d] * inv;
        return;
    }
    fa_close(&f, a->sinks ? &a->sinks[h] : NULL);
    const float inv = f.S == 0.0f ? 0.0f : 1.0f / f.S;
    for (int d = 0; d < dv; d++) o[d] = acc32[d] * inv;
}

void df_attn_gqa(df_pool *pool, const df_attn_args *a) {
    df_pool_run(pool, a->n_tok * a->n_head, attn_task, (void *)a);
}
