/* test_attn_gqa.c — df_attn_gqa (src/forward/attn_gqa.c) on small deterministic inputs:
 *   1. every kernel set: close to a double-precision softmax attention (F16 Q and F16 V
 *      accumulation bound the error to a few 1e-3)
 *   2. avx512: bit-identical to llama.cpp's CPU flash attention
 *      (ggml_flash_attn_ext, one-chunk path: decode and batches < 64 queries, GQA, MLA-like
 *      widths, sinks). The hashes below are FNV-1a over ggml's output floats in deltafin's
 *      [token][head][dim] order, recorded with a private harness against the llama.cpp build
 *      of docs/testing.md (-march=native ggml, AVX-512F without AVX512-FP16, 2 threads) on
 *      exactly these inputs (xorshift64 below; Q, K, V generated in ggml's [head][row][dim]
 *      order; K, V rounded to F16 round-to-nearest-even; causal mask, scale 1/sqrt(DK)). */
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
    df_pool_free(pool);
    TEST_MAIN_END("test_attn_gqa");
}
