/* test_attn_gqa.c — df_attn_gqa (src/forward/attn_gqa.c) on small deterministic inputs:
 *   1. every kernel set: close to a double-precision softmax attention (F16 Q and F16 V
 *      accumulation bound the error to a few 1e-3)
 *   2. avx512: bit-identical to llama.cpp's CPU flash attention
 *      (ggml_flash_attn_ext, one-chunk path: decode and batches < 64 queries, GQA, MLA-like
 *      widths, sinks). The hashes below are FNV-1a over ggml's output floats in deltafin's
 *      [token][head][dim] order, recorded with a private harness against the llama.cpp build
 *      of docs/testing.md (-march=native ggml, AVX-512F without AVX512-FP16, 2 threads) on
 *      exactly these inputs (xorshift64 below; Q, K, V generated in ggml's [head][row][dim]
 *      order; K, V rounded to F16 round-to-nearest-even; causal mask, scale 1/sqrt(DK)).
 *   3. the tiled F32 path: every kernel set gives the reference's bits
 *   4. quantized / BF16 caches (stored by df_kv_put): close to a double-precision attention over
 *      the dequantized rows; df_fwht = Sylvester's Hadamard / sqrt(n) and its own inverse */
#include "testlib.h"
#include "forward/session.h"
#include "kernels/kernels.h"
#include "base/threadpool.h"
#include "base/util.h"

static uint64_t rs;

typedef struct {
    int dk, dv, nh, nhkv, nkv, nq;
    float amp;
    int sinks;
    uint64_t ggml_hash;
} tcase;

/* Returns the FNV-1a hash of the output; f32: the F32-accumulator (tiled) path. */
static uint64_t run_case(df_pool *pool, const tcase *c, bool check_hash, bool f32) {
    const int DK = c->dk, DV = c->dv, NH = c->nh, NHKV = c->nhkv, NKV = c->nkv, NQ = c->nq;
    rs = 88172645463325252ull + (uint64_t)DK * 131 + (uint64_t)NKV * 7 + (uint64_t)NQ;
    float *q = malloc(sizeof(float) * DK * NQ * NH), *out = malloc(sizeof(float) * DV * NQ * NH);
    df_f16 *k = malloc(sizeof(df_f16) * DK * NKV * NHKV), *v = malloc(sizeof(df_f16) * DV * NKV * NHKV);
    float sinks[64];
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < NQ; t++)
            for (int d = 0; d < DK; d++) q[((size_t)t * NH + h) * DK + d] = df_test_frand(&rs) * c->amp;
    for (int h = 0; h < NHKV; h++)
        for (int p = 0; p < NKV; p++)
            for (int d = 0; d < DK; d++) k[((size_t)p * NHKV + h) * DK + d] = df_f32_to_f16(df_test_frand(&rs) * c->amp);
    for (int h = 0; h < NHKV; h++)
        for (int p = 0; p < NKV; p++)
            for (int d = 0; d < DV; d++) v[((size_t)p * NHKV + h) * DV + d] = df_f32_to_f16(df_test_frand(&rs));
    if (c->sinks)
        for (int h = 0; h < NH; h++) sinks[h] = df_test_frand(&rs) * 3;
    const int nth = df_pool_size(pool);
    const size_t st = df_attn_scratch_per_thread(DK, DV);
    char *scr = aligned_alloc(64, st * (size_t)nth);
    const float scale = 1.0f / sqrtf((float)DK);
    df_attn_args a = {.n_tok = NQ, .pos0 = NKV - NQ, .n_head = NH, .n_head_kv = NHKV, .dk = DK, .dv = DV,
                      .scale = scale, .q = q, .ldq = (int64_t)NH * DK, .kc = k, .vc = v,
                      .ldk = (int64_t)NHKV * DK, .ldv = (int64_t)NHKV * DV, .out = out,
                      .ldo = (int64_t)NH * DV, .f32_acc = f32, .sinks = c->sinks ? sinks : NULL,
                      .swa = 0, .scratch = scr, .scratch_stride = st};
    df_attn_gqa(pool, &a);

    /* 1. double-precision reference */
    double maxerr = 0;
    double *w = malloc(sizeof(double) * NKV);
    for (int t = 0; t < NQ; t++)
        for (int h = 0; h < NH; h++) {
            const int kvh = h / (NH / NHKV), pq = NKV - NQ + t;
            double mx = c->sinks ? sinks[h] : -INFINITY, sum = 0;
            for (int p = 0; p <= pq; p++) {
                double s = 0;
                for (int d = 0; d < DK; d++)
                    s += (double)q[((size_t)t * NH + h) * DK + d] * df_f16_to_f32(k[((size_t)p * NHKV + kvh) * DK + d]);
                w[p] = s * scale;
                if (w[p] > mx) mx = w[p];
            }
            for (int p = 0; p <= pq; p++) sum += (w[p] = exp(w[p] - mx));
            if (c->sinks) sum += exp(sinks[h] - mx);
            for (int d = 0; d < DV; d++) {
                double o = 0;
                for (int p = 0; p <= pq; p++) o += w[p] * df_f16_to_f32(v[((size_t)p * NHKV + kvh) * DV + d]);
                double e = fabs(o / sum - out[((size_t)t * NH + h) * DV + d]);
                if (!(e <= maxerr)) maxerr = e;
            }
        }
    CHECK_MSG(maxerr < 5e-3, "DK=%d DV=%d NQ=%d: max error %g vs double reference", DK, DV, NQ, maxerr);

    /* 2. bit parity with ggml */
    const uint64_t hh = df_test_fnv(out, (size_t)DV * NH * NQ);
    if (check_hash && !f32) {
        CHECK_MSG(hh == c->ggml_hash, "DK=%d DV=%d NH=%d NHKV=%d NKV=%d NQ=%d sinks=%d: hash %016llx, ggml %016llx",
                  DK, DV, NH, NHKV, NKV, NQ, c->sinks, (unsigned long long)hh, (unsigned long long)c->ggml_hash);
    }
    free(w);
    free(scr);
    free(q);
    free(out);
    free(k);
    free(v);
    return hh;
}

/* 4. quantized caches (-ctk / -ctv): K and V rows stored with df_kv_put in Q8_0 / Q4_0 / BF16 and
 * mixed with F16, attended on llama.cpp's one-chunk path at 70 queries (no tiled kernel for
 * them): close to a double-precision attention over the dequantized rows (the error left is
 * Q's conversion to K's dot type and the F16 / F32 accumulators). */
static void quant_case(df_pool *pool, int tk, int tv, int DK, int DV) {
    const int NH = 4, NHKV = 2, NKV = 70, NQ = 70;
    rs = 0x9e3779b97f4a7c15ull + (uint64_t)tk * 977 + (uint64_t)tv;
    float *q = malloc(sizeof(float) * DK * NQ * NH), *out = malloc(sizeof(float) * DV * NQ * NH);
    float *kf = malloc(sizeof(float) * DK * NHKV), *vf = malloc(sizeof(float) * DV * NHKV);
    float *kd = malloc(sizeof(float) * DK * NKV * NHKV), *vd = malloc(sizeof(float) * DV * NKV * NHKV);
    const uint64_t kb = df_type_row_bytes(tk, (int64_t)DK * NHKV), vb = df_type_row_bytes(tv, (int64_t)DV * NHKV);
    char *kc = malloc(kb * NKV), *vc = malloc(vb * NKV);
    for (int i = 0; i < DK * NQ * NH; i++) q[i] = df_test_frand(&rs) * 2.0f;
    for (int p = 0; p < NKV; p++) {
        for (int i = 0; i < DK * NHKV; i++) kf[i] = df_test_frand(&rs) * 2.0f;
        for (int i = 0; i < DV * NHKV; i++) vf[i] = df_test_frand(&rs) * 2.0f;
        df_kv_put(tk, kf, kc + p * kb, (int64_t)DK * NHKV);
        df_kv_put(tv, vf, vc + p * vb, (int64_t)DV * NHKV);
        CHECK(df_dequantize_row(tk, kc + p * kb, kd + (size_t)p * DK * NHKV, (int64_t)DK * NHKV) == DF_OK);
        CHECK(df_dequantize_row(tv, vc + p * vb, vd + (size_t)p * DV * NHKV, (int64_t)DV * NHKV) == DF_OK);
    }
    const size_t stride = df_attn_scratch_per_thread(DK, DV);
    char *scr = malloc(stride * (size_t)df_pool_size(pool));
    const float scale = 1.0f / sqrtf((float)DK);
    df_attn_args a = {.n_tok = NQ, .pos0 = 0, .n_head = NH, .n_head_kv = NHKV, .dk = DK, .dv = DV, .scale = scale,
                      .q = q, .ldq = (int64_t)NH * DK, .kc = kc, .vc = vc, .ldk = (int64_t)NHKV * DK,
                      .ldv = (int64_t)NHKV * DV, .type_k = tk, .type_v = tv, .out = out, .ldo = (int64_t)NH * DV,
                      .f32_acc = true /* ignored for a quantized cache */, .scratch = scr, .scratch_stride = stride};
    df_attn_gqa(pool, &a);
    double maxerr = 0;
    for (int t = 0; t < NQ; t++)
        for (int h = 0; h < NH; h++) {
            const int g = h / (NH / NHKV);
            double w[70], mx = -1e300, sum = 0;
            for (int p = 0; p <= t; p++) {
                double d = 0;
                for (int e = 0; e < DK; e++)
                    d += (double)q[((size_t)t * NH + h) * DK + e] * kd[((size_t)p * NHKV + g) * DK + e];
                w[p] = d * scale;
                if (w[p] > mx) mx = w[p];
            }
            for (int p = 0; p <= t; p++) sum += (w[p] = exp(w[p] - mx));
            for (int e = 0; e < DV; e++) {
                double o = 0;
                for (int p = 0; p <= t; p++) o += w[p] * vd[((size_t)p * NHKV + g) * DV + e];
                const double err = fabs(o / sum - out[((size_t)t * NH + h) * DV + e]);
                if (err > maxerr) maxerr = err;
            }
        }
    CHECK_MSG(maxerr < (tk == DF_TYPE_Q4_0 ? 0.1 : 0.03), "K %s V %s DK=%d: max error %g vs double reference",
              df_type_info(tk)->name, df_type_info(tv)->name, DK, maxerr);
    free(q); free(out); free(kf); free(vf); free(kd); free(vd); free(kc); free(vc); free(scr);
}

/* df_fwht is ggml's fast Walsh-Hadamard transform: H x / sqrt(n) with Sylvester's H, its own
 * inverse (llama.cpp rotates by it before a quantized cache and back after the attention) */
static void fwht_checks(void) {
    for (int n = 64; n <= 256; n *= 2) {
        float x[512], y[512];
        for (int i = 0; i < 2 * n; i++) x[i] = y[i] = df_test_frand(&rs);
        df_fwht(y, 2 * n, n);
        double maxerr = 0;
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < n; i++) {
                double d = 0;
                for (int j = 0; j < n; j++) d += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * x[r * n + j];
                d /= sqrt((double)n);
                if (fabs(d - y[r * n + i]) > maxerr) maxerr = fabs(d - y[r * n + i]);
            }
        CHECK_MSG(maxerr < 1e-5, "fwht %d: max error %g vs Sylvester H / sqrt(n)", n, maxerr);
        df_fwht(y, 2 * n, n);
        maxerr = 0;
        for (int i = 0; i < 2 * n; i++) if (fabs((double)y[i] - x[i]) > maxerr) maxerr = fabs((double)y[i] - x[i]);
        CHECK_MSG(maxerr < 1e-5, "fwht %d twice: max error %g vs the input", n, maxerr);
    }
}

int main(void) {
    df_init();
    const tcase cases[] = {
        {72, 64, 4, 2, 40, 1, 2.0f, 0, 0x18ae0def7c8e19b8ull},   /* decode, GQA, DK % 64 = 8 */
        {144, 128, 4, 1, 33, 5, 2.0f, 0, 0xed75a50168b638a4ull}, /* MLA-like, 5 queries */
        {64, 64, 4, 4, 20, 3, 2.0f, 1, 0x940fb7cda4354985ull},   /* sinks */
        {576, 512, 16, 1, 40, 1, 1.0f, 0, 0x47642a9f0cf5f450ull}, /* DeepSeek-V3 MLA widths */
    };
    const bool exact = df_kernels()->isa == DF_ISA_AVX512;
    if (!exact) printf("test_attn_gqa: kernel set %s: ggml bit-parity hashes (AVX-512) not checked\n", df_kernels()->name);
    df_pool *pool = df_pool_create(2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(pool, &cases[i], exact, false);
    /* 3. the F32-accumulator path (batches >= 64 queries): its F16C/FMA loops give the scalar
     * loops' bits */
    const tcase tiled[] = {{128, 128, 4, 2, 80, 70, 2.0f, 0, 0}, {72, 64, 4, 4, 66, 66, 2.0f, 1, 0},
                           {192, 128, 8, 1, 70, 64, 1.0f, 0, 0}};
    const char *sel = df_kernels()->name;
    for (size_t i = 0; i < sizeof tiled / sizeof tiled[0]; i++) {
        const uint64_t h_sel = run_case(pool, &tiled[i], false, true);
        CHECK(df_kernels_select("ref") == DF_OK);
        const uint64_t h_ref = run_case(pool, &tiled[i], false, true);
        CHECK(df_kernels_select(sel) == DF_OK);
        CHECK_MSG(h_sel == h_ref, "F32 path DK=%d DV=%d NQ=%d: %s and ref differ", tiled[i].dk, tiled[i].dv,
                  tiled[i].nq, sel);
    }
    const int qt[][2] = {{DF_TYPE_Q8_0, DF_TYPE_Q8_0}, {DF_TYPE_Q4_0, DF_TYPE_Q4_0}, {DF_TYPE_Q8_0, DF_TYPE_F16},
                         {DF_TYPE_F16, DF_TYPE_Q8_0}, {DF_TYPE_BF16, DF_TYPE_BF16}, {DF_TYPE_Q5_1, DF_TYPE_IQ4_NL}};
    for (size_t i = 0; i < sizeof qt / sizeof qt[0]; i++) {
        quant_case(pool, qt[i][0], qt[i][1], 64, 64);
        quant_case(pool, qt[i][0], qt[i][1], 96, 32);
    }
    fwht_checks();
    df_pool_free(pool);
    TEST_MAIN_END("test_attn_gqa");
}
