/* attn_gqa.c — grouped-query attention of a batch of queries over the F16 KV cache, with the
 * numerics of llama.cpp's CPU flash-attention kernel (formats.md §2.7): q rounded to F16,
 * s = dot(q, k)·scale in F32, online softmax, V accumulated in F16 (decode / small batches);
 * for large batches (llama.cpp's tiled path) q stays F32 and the accumulator is F32.
 * Causal mask (plus an optional sliding window), optional per-head sink logits.
 * Bit parity with ggml on x86 (the avx512 / avx2 kernel sets, as a
 * -march=native ggml build on the same CPU; checked in tests/test_attn_gqa.c): the F16 dot product keeps ggml_vec_dot_f16's summation order (4 accumulators of
 * 16 / 8 lanes with FMA, pairwise reduction, then the < 64 / < 32 leftover products added in
 * double), the V update is f16(fma(v, vs, acc)) and the softmax sum S = fma(S, ms, vs) as gcc
 * contracts them in ggml (the sink update stays a plain multiply-add, as there).
 * Threading: one task per (token, head) over the pool; per-thread scratch from the ctx. */
#include "forward/session.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

#if defined(__x86_64__)
/* ggml_vec_dot_f16 under AVX-512F without AVX512-FP16: F16 -> F32 lanes, 4 x 16 accumulators,
 * s0+s2, s1+s3, then their sum, reduced by _mm512_reduce_add_ps (gcc's halving tree); the last
 * n % 64 products are rounded to float and added one by one in double. */
__attribute__((target("avx512f,fma,f16c,avx2")))
static float dot_f16_avx512(const df_f16 *x, const df_f16 *y, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int np = n & ~63;
#define DF_LD16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
    for (int i = 0; i < np; i += 64) {
        s0 = _mm512_fmadd_ps(DF_LD16(x + i), DF_LD16(y + i), s0);
        s1 = _mm512_fmadd_ps(DF_LD16(x + i + 16), DF_LD16(y + i + 16), s1);
        s2 = _mm512_fmadd_ps(DF_LD16(x + i + 32), DF_LD16(y + i + 32), s2);
        s3 = _mm512_fmadd_ps(DF_LD16(x + i + 48), DF_LD16(y + i + 48), s3);
    }
#undef DF_LD16
    s0 = _mm512_add_ps(s0, s2);
    s1 = _mm512_add_ps(s1, s3);
    s0 = _mm512_add_ps(s0, s1);
    double sum = (double)_mm512_reduce_add_ps(s0);
    for (int i = np; i < n; i++) sum += (double)(df_f16_to_f32(x[i]) * df_f16_to_f32(y[i]));
    return (float)sum;
}

/* The same under AVX2/F16C: 4 x 8 accumulators, leftovers n % 32; the 8 lanes reduce as
 * (l0+l4 + l1+l5) + (l2+l6 + l3+l7) (add of the 128-bit halves, then two hadds). */
__attribute__((target("avx2,fma,f16c")))
static float dot_f16_avx2(const df_f16 *x, const df_f16 *y, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    const int np = n & ~31;
#define DF_LD8(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
    for (int i = 0; i < np; i += 32) {
        s0 = _mm256_fmadd_ps(DF_LD8(x + i), DF_LD8(y + i), s0);
        s1 = _mm256_fmadd_ps(DF_LD8(x + i + 8), DF_LD8(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(DF_LD8(x + i + 16), DF_LD8(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(DF_LD8(x + i + 24), DF_LD8(y + i + 24), s3);
    }
#undef DF_LD8
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    double sum = (double)_mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int i = np; i < n; i++) sum += (double)(df_f16_to_f32(x[i]) * df_f16_to_f32(y[i]));
    return (float)sum;
}

/* acc = f16(fma(v, vs, acc)) and acc = f16(acc * ms), element-wise (same results as the scalar
 * loops below, just faster). */
__attribute__((target("avx512f,fma,f16c,avx2")))
static void mad_f16_avx512(df_f16 *acc, const df_f16 *v, float vs, int n) {
    const __m512 b = _mm512_set1_ps(vs);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(acc + i)));
        __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(v + i)));
        _mm256_storeu_si256((__m256i *)(void *)(acc + i),
                            _mm512_cvtps_ph(_mm512_fmadd_ps(x, b, a), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) acc[i] = df_f32_to_f16(fmaf(df_f16_to_f32(v[i]), vs, df_f16_to_f32(acc[i])));
}
#endif

typedef float (*dot16_fn)(const df_f16 *, const df_f16 *, int);

#if defined(__x86_64__)
/* dot_f16_f32 and acc = fma(v, vs, acc) of the F32-accumulator path with F16C / FMA
 * instructions: the same operations lane for lane (bit-identical), without a libm fmaf call
 * and an F16 table lookup per element. */
__attribute__((target("avx2,fma,f16c")))
static float dot_f16_f32_avx2(const df_f16 *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(a + i))),
                                               _mm256_loadu_ps(b + i)));
    float v[8];
    _mm256_storeu_ps(v, acc);
    for (; i < n; i++) v[0] += df_f16_to_f32(a[i]) * b[i];
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}
__attribute__((target("avx2,fma,f16c")))
static void mad_f32_avx2(float *acc, const df_f16 *v, float vs, int n) {
    const __m256 b = _mm256_set1_ps(vs);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(v + i))), b,
                                                  _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] = __builtin_fmaf(df_f16_to_f32(v[i]), vs, acc[i]);
}
#endif


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

    dot16_fn dot16 = dot_f16;
    bool vec512 = false, vec256 = false;
#if defined(__x86_64__)
    const char *isa = df_kernels()->name;
    vec512 = !strcmp(isa, "avx512");
    vec256 = vec512 || !strcmp(isa, "avx2");
    if (vec512) dot16 = dot_f16_avx512;
    else if (!strcmp(isa, "avx2")) dot16 = dot_f16_avx2;
#endif
    (void)vec512;
    (void)vec256;
    float S = 0.0f, M = -INFINITY;
    if (!a->f32_acc) {
        for (int i = 0; i < dk; i++) q16[i] = df_f32_to_f16(qs[i]);
        memset(acc16, 0, (size_t)dv * sizeof(df_f16));
        for (int p = p_lo; p <= pq; p++) {
            const df_f16 *kr = a->kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = a->vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
            float s = dot16(kr, q16, dk) * a->scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int d = 0; d < dv; d++) acc16[d] = df_f32_to_f16(df_f16_to_f32(acc16[d]) * ms);
            } else {
                vs = expf(s - M);
            }
#if defined(__x86_64__)
            if (vec512)
                mad_f16_avx512(acc16, vr, vs, dv);
            else
#endif
                for (int d = 0; d < dv; d++)
                    acc16[d] = df_f32_to_f16(fmaf(df_f16_to_f32(vr[d]), vs, df_f16_to_f32(acc16[d])));
            S = dot16 == dot_f16 ? S * ms + vs : fmaf(S, ms, vs);
        }
        for (int d = 0; d < dv; d++) acc32[d] = df_f16_to_f32(acc16[d]);
    } else {
        memcpy(q32, qs, (size_t)dk * sizeof(float));
        memset(acc32, 0, (size_t)dv * sizeof(float));
        for (int p = p_lo; p <= pq; p++) {
            const df_f16 *kr = a->kc + (int64_t)p * a->ldk + (int64_t)kvh * dk;
            const df_f16 *vr = a->vc + (int64_t)p * a->ldv + (int64_t)kvh * dv;
#if defined(__x86_64__)
            float s = (vec256 ? dot_f16_f32_avx2(kr, q32, dk) : dot_f16_f32(kr, q32, dk)) * a->scale;
#else
            float s = dot_f16_f32(kr, q32, dk) * a->scale;
#endif
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int d = 0; d < dv; d++) acc32[d] *= ms;
            } else {
                vs = expf(s - M);
            }
#if defined(__x86_64__)
            if (vec256)
                mad_f32_avx2(acc32, vr, vs, dv);
            else
#endif
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
