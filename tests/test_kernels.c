/* test_kernels.c — every SIMD kernel table against the scalar reference (random and adversarial
 * data), df_matmul against per-row dots, and the thread pool. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "testlib.h"
#include "forward/ops.h"
#include "base/threadpool.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_uniform(void) { return (rnd_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }
static float rnd_normal(void) {
    float u = 0;
    for (int i = 0; i < 4; i++) u += rnd_uniform();
    return u * 0.8660254f;
}

enum { DATA_RANDOM, DATA_ZERO_BLOCKS, DATA_TINY, DATA_HUGE, DATA_SPIKY, DATA_NONFINITE, DATA_N };
static const char *data_name[DATA_N] = {"random", "zero-blocks", "tiny", "huge", "spiky", "nonfinite"};

/* Fill n floats of the given kind; `huge` stays in range of the weight type (F16 max 65504). */
static void gen(float *x, int64_t n, int kind, int wtype) {
    for (int64_t i = 0; i < n; i++) x[i] = rnd_normal();
    switch (kind) {
    case DATA_ZERO_BLOCKS:
        for (int64_t i = 0; i < n; i++)
            if ((i / 32) % 3 != 1) x[i] = 0;
        break;
    case DATA_TINY:
        for (int64_t i = 0; i < n; i++) x[i] *= 1e-6f;
        break;
    case DATA_HUGE: {
        float s = (wtype == DF_TYPE_F16) ? 1000.0f : 1e4f;
        for (int64_t i = 0; i < n; i++) x[i] *= s;
        break;
    }
    case DATA_SPIKY:
        for (int64_t i = 0; i < n; i++)
            if (rnd_u32() % 61 == 0) x[i] = (rnd_u32() & 1 ? 1 : -1) * 300.0f;
        break;
    case DATA_NONFINITE:
        x[rnd_u32() % n] = (rnd_u32() & 1) ? NAN : INFINITY;
        break;
    }
}

/* Tolerance of one dot relative to Σ|w_i x_i| (what rounding can move). */
static double dot_tol(int wtype) {
    switch (wtype) {
    case DF_TYPE_F32: return 1e-5;
    case DF_TYPE_F16: case DF_TYPE_BF16: return 1e-5;
    default: return 2e-5;
    }
}

/* Offset of the F16 super-block scale for types without a quantizer (-1: IQ1_M special). */
static int d_offset(int t) {
    switch (t) {
    case DF_TYPE_TQ1_0: return 52;
    case DF_TYPE_TQ2_0: return 64;
    case DF_TYPE_IQ1_M: return -1;
    default: return 0;
    }
}

/* Weight row of type t: quantized from x where a quantizer exists, else random block bytes with
 * a sane scale (magnitude following the data kind; zero-blocks kind zeroes 2 of 3 blocks). */
static bool make_weights(int t, const float *x, void *w, int64_t n, int kind) {
    if (df_type_info(t)->can_quantize && !df_quantize_needs_imatrix(t)) return df_quantize_row(t, x, w, n) == DF_OK;
    const df_type_traits *ti = df_type_info(t);
    uint8_t *b = w;
    for (int64_t i = 0; i < (int64_t)df_type_row_bytes(t, n); i++) b[i] = (uint8_t)rnd_u32();
    for (int64_t k = 0; k < n / ti->blck; k++) {
        uint8_t *blk = b + k * ti->bytes;
        if (kind == DATA_ZERO_BLOCKS && k % 3 != 1) { memset(blk, 0, ti->bytes); continue; }
        float d = 0.002f + 0.01f * (rnd_u32() % 1000) / 1000.0f;
        if (kind == DATA_TINY) d *= 1e-4f;
        if (kind == DATA_HUGE) d *= 1e3f;
        df_f16 h = df_f32_to_f16(d);
        int off = d_offset(t);
        if (off >= 0) memcpy(blk + off, &h, 2);
        else { /* IQ1_M: F16 scale spread over the top nibbles of the four u16 scales */
            uint16_t sc[4];
            memcpy(sc, blk + 48, 8);
            for (int j = 0; j < 4; j++) sc[j] = (uint16_t)((sc[j] & 0x0fff) | (((h >> (4 * j)) & 0xf) << 12));
            memcpy(blk + 48, sc, 8);
        }
    }
    return true;
}

/* Formats with a per-block min (value = d*q - m) compute Σ d*q*y and Σ m*y separately, each
 * rounded in float; both can be much larger than Σ|w*y|. Returns Σ|m_i*y_i| (0 otherwise),
 * found by dequantizing the row with all codes zeroed (value = -m). */
static double min_term_mag(int t, const void *w, int64_t n, const float *da) {
    int lo, hi;
    switch (t) {
    case DF_TYPE_Q2_K: lo = 16; hi = 80; break;
    case DF_TYPE_Q4_K: lo = 16; hi = 144; break;
    case DF_TYPE_Q5_K: lo = 16; hi = 176; break;
    case DF_TYPE_Q4_1: lo = 4; hi = 20; break;
    case DF_TYPE_Q5_1: lo = 4; hi = 24; break;
    default: return 0;
    }
    const df_type_traits *ti = df_type_info(t);
    uint64_t rb = df_type_row_bytes(t, n);
    uint8_t *c = malloc(rb);
    memcpy(c, w, rb);
    for (int64_t k = 0; k < n / ti->blck; k++) memset(c + k * ti->bytes + lo, 0, hi - lo);
    float *v = malloc(n * sizeof(float));
    df_dequantize_row(t, c, v, n);
    double m = 0;
    for (int64_t i = 0; i < n; i++) m += fabs((double)v[i] * da[i]);
    free(c);
    free(v);
    return m;
}

static int table_q8_variant(const df_kernel_table *k) {
    if (k->isa == DF_ISA_AVX2 || k->isa == DF_ISA_AVX512) return DF_Q8_X86;
    if (k->isa == DF_ISA_NEON) return DF_Q8_ARM;
    return DF_Q8_REF;
}

static void test_type_table(const df_kernel_table *k, const df_kernel_table *r, int t) {
    const df_type_traits *ti = df_type_info(t);
    const int vdt = ti->vec_dot_type;
    /* 13 blocks: an 8-block SIMD step, a 4-block one and a scalar tail */
    int64_t sizes_q[] = {ti->blck, 2 * ti->blck, 3 * ti->blck, 5 * ti->blck, 7 * ti->blck, 13 * ti->blck,
                         ti->blck * (4096 / ti->blck) + ti->blck};
    int64_t sizes_f[] = {1, 7, 15, 16, 17, 31, 33, 63, 65, 127, 200, 1000, 4097};
    const bool flt = ti->blck == 1;
    const int nsz = flt ? (int)(sizeof sizes_f / sizeof *sizes_f) : (int)(sizeof sizes_q / sizeof *sizes_q);
    int bad_act = 0, bad_dot = 0, bad_nf = 0, checked = 0;
    double worst = 0;
    for (int si = 0; si < nsz; si++) {
        int64_t n = flt ? sizes_f[si] : sizes_q[si];
        float *xw = malloc(n * 4), *xa = malloc(n * 4);
        void *w = calloc(1, df_type_row_bytes(t, n) + 64);
        void *ar = calloc(1, df_type_row_bytes(vdt, n) + 64);
        void *ak = calloc(1, df_type_row_bytes(vdt, n) + 64);
        float *dw = malloc(n * 4), *da = malloc(n * 4);
        for (int kind = 0; kind < DATA_N; kind++) {
            for (int rep = 0; rep < 3; rep++) {
                gen(xw, n, kind == DATA_NONFINITE && rep == 1 ? DATA_NONFINITE : (kind == DATA_NONFINITE ? DATA_RANDOM : kind), t);
                gen(xa, n, kind == DATA_NONFINITE && rep != 1 ? DATA_NONFINITE : (kind == DATA_NONFINITE ? DATA_RANDOM : kind), DF_TYPE_F32);
                if (!make_weights(t, xw, w, n, kind)) goto next_size;
                r->from_float[vdt](xa, ar, n);
                k->from_float[vdt](xa, ak, n);
                {   /* the table's activations must equal its platform's llama.cpp variant */
                    void *want = ar;
                    void *tmp = NULL;
                    int var = table_q8_variant(k);
                    if ((vdt == DF_TYPE_Q8_0 || vdt == DF_TYPE_Q8_1) && var != DF_Q8_REF) {
                        tmp = calloc(1, df_type_row_bytes(vdt, n) + 64);
                        if (vdt == DF_TYPE_Q8_0) df_quantize_row_q8_0_variant(xa, tmp, n, var);
                        else df_quantize_row_q8_1_variant(xa, tmp, n, var);
                        want = tmp;
                    }
                    if (memcmp(want, ak, df_type_row_bytes(vdt, n)) != 0) bad_act++;
                    free(tmp);
                }
                float sr = 0, sk = 0;
                r->vec_dot[t](n, &sr, w, ar);
                const void *akd = ar; /* what k's kernel reads: ref's activation, in k's layout */
                void *split = NULL;
                if (k->from_float_w[t]) {
                    split = calloc(1, df_type_row_bytes(vdt, n) + 64);
                    df_q8_0_split(ar, split, n);
                    akd = split;
                    /* and the table's converter = its Q8_0 conversion, split */
                    void *a1 = calloc(1, df_type_row_bytes(vdt, n) + 64), *a2 = calloc(1, df_type_row_bytes(vdt, n) + 64);
                    k->from_float_w[t](xa, a1, n);
                    df_q8_0_split(ak, a2, n);
                    if (memcmp(a1, a2, df_type_row_bytes(vdt, n)) != 0) bad_act++;
                    free(a1);
                    free(a2);
                }
                k->vec_dot[t](n, &sk, w, akd);
                free(split);
                /* magnitude scale from the dequantized operands */
                df_dequantize_row(t, w, dw, n);
                df_dequantize_row(vdt, ar, da, n);
                double mag = 0;
                bool finite = true;
                for (int64_t i = 0; i < n; i++) {
                    double p = fabs((double)dw[i] * da[i]);
                    if (!isfinite(p) || !isfinite(dw[i]) || !isfinite(da[i])) finite = false;
                    mag += p;
                }
                checked++;
                if (!finite || !isfinite(mag)) {
                    /* llama.cpp propagates NaN/Inf; both kernels must not produce a finite lie */
                    if (isfinite(sr) != isfinite(sk)) bad_nf++;
                    continue;
                }
                double err = fabs((double)sr - sk);
                double tol = dot_tol(t) * (mag + 2 * min_term_mag(t, w, n, da)) + 1e-30;
                if (err / (mag + 1e-30) > worst) worst = err / (mag + 1e-30);
                if (err > tol) {
                    if (bad_dot < 5)
                        fprintf(stderr, "  %s/%s n=%lld %s: ref %.9g simd %.9g mag %g\n", k->name,
                                ti->name, (long long)n, data_name[kind], sr, sk, mag);
                    bad_dot++;
                }
            }
        }
    next_size:
        free(xw); free(xa); free(w); free(ar); free(ak); free(dw); free(da);
    }
    CHECK_MSG(bad_act == 0, "%s: %s activation bytes differ from ref in %d cases", k->name, ti->name, bad_act);
    CHECK_MSG(bad_dot == 0, "%s: %s dot differs from ref in %d cases", k->name, ti->name, bad_dot);
    CHECK_MSG(bad_nf == 0, "%s: %s non-finite handling differs in %d cases", k->name, ti->name, bad_nf);
    CHECK_MSG(checked > 0, "%s: %s nothing checked", k->name, ti->name);
    printf("  %-7s %-8s cases %4d  worst rel err %.2e\n", k->name, ti->name, checked, worst);
}

/* The dot of quantized operands must equal the float dot of their dequantized values up to
 * rounding: this checks the reference kernel's formula (not just SIMD == ref). */
static void test_ref_formula(int t) {
    const df_type_traits *ti = df_type_info(t);
    const df_kernel_table *r = df_kernels_ref();
    const int vdt = ti->vec_dot_type;
    int64_t n = ti->blck == 1 ? 1000 : ti->blck * (1024 / ti->blck + 1);
    float *xw = malloc(n * 4), *xa = malloc(n * 4), *dw = malloc(n * 4), *da = malloc(n * 4);
    void *w = malloc(df_type_row_bytes(t, n)), *a = malloc(df_type_row_bytes(vdt, n));
    gen(xw, n, DATA_RANDOM, t);
    gen(xa, n, DATA_RANDOM, DF_TYPE_F32);
    if (make_weights(t, xw, w, n, DATA_RANDOM)) {
        r->from_float[vdt](xa, a, n);
        df_dequantize_row(t, w, dw, n);
        df_dequantize_row(vdt, a, da, n);
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) { exact += (double)dw[i] * da[i]; mag += fabs((double)dw[i] * da[i]); }
        float s = 0;
        r->vec_dot[t](n, &s, w, a);
        /* Q8_1 keeps d*Σq rounded to F16, so the Q4_1/Q5_1 min term carries ~2^-11 error */
        double tol = vdt == DF_TYPE_Q8_1 ? 2e-3 : 1e-5;
        CHECK_MSG(fabs(s - exact) <= tol * mag, "ref %s: dot %.9g vs dequantized %.9g", ti->name, s, exact);
    }
    free(xw); free(xa); free(dw); free(da); free(w); free(a);
}

/* df_matmul over a pool == per-row dots with the selected table, bit for bit. */
static void test_matmul(df_pool *pool, int t, int64_t n_in, int64_t n_out, int64_t n_tok) {
    const df_type_traits *ti = df_type_info(t);
    const df_kernel_table *k = df_kernels();
    uint64_t wrb = df_type_row_bytes(t, n_in);
    char *W = malloc(wrb * n_out);
    float *row = malloc(n_in * 4);
    for (int64_t o = 0; o < n_out; o++) {
        gen(row, n_in, DATA_RANDOM, t);
        if (!make_weights(t, row, W + o * wrb, n_in, DATA_RANDOM)) { free(W); free(row); return; }
    }
    int64_t ldx = n_in + 3, ldy = n_out + 5;
    float *X = malloc(ldx * n_tok * 4), *Y = malloc(ldy * n_tok * 4);
    for (int64_t i = 0; i < ldx * n_tok; i++) X[i] = rnd_normal();
    for (int64_t i = 0; i < ldy * n_tok; i++) Y[i] = -12345.0f;
    df_matmul(pool, W, t, n_in, n_out, X, ldx, n_tok, Y, n_tok == 1 ? 0 : ldy, NULL);
    uint64_t arb = df_type_row_bytes(ti->vec_dot_type, n_in);
    char *act = malloc(df_act_bytes(t, n_in, n_tok));
    df_quantize_act(t, X, ldx, n_in, n_tok, act);
    int bad = 0, clobber = 0;
    /* which order each token gets (kernels.h): ggml's repacked gemm for the first
     * n_tok - n_tok % 4 tokens, its gemv for the rest, when rows % 8 == 0 */
    const int r8 = n_out % 8 == 0 && k->vec_dot_r8[t];
    /* F32 / F16 / BF16 weights, a batch: llamafile's tinyBLAS where the table has it and the
     * shape fits (n_in % vector width, n_out % 4; its order: test_ggml_order) */
    float *Yt = NULL;
    const df_gemm_h_fn gh = t == DF_TYPE_F16 ? k->gemm_f16 : t == DF_TYPE_BF16 ? k->gemm_bf16 : NULL;
    if (t == DF_TYPE_F32 && n_tok >= 2 && df_gemm_f32_ggml_applies(n_in, n_out, (int)n_tok)) {
        Yt = malloc(ldy * n_tok * 4);
        df_gemm_f32_ggml((const float *)W, n_in, 0, n_out, (const float *)act, n_in, (int)n_tok, Yt, ldy);
    } else if (gh && n_tok >= 2 && n_in % k->f32_epr == 0 && n_out % 4 == 0) {
        Yt = malloc(ldy * n_tok * 4);
        gh(W, n_in, 0, n_out, act, n_in, (int)n_tok, Yt, ldy);
    }
    for (int64_t tk = 0; tk < n_tok; tk++) {
        df_vec_dot_fn dot = k->vec_dot[t];
        if (r8) dot = tk < n_tok - n_tok % 4 && k->vec_dot_r8g[t] ? k->vec_dot_r8g[t] : k->vec_dot_r8[t];
        for (int64_t o = 0; o < n_out; o++) {
            float s;
            if (Yt) s = Yt[tk * ldy + o];
            else dot(n_in, &s, W + o * wrb, act + tk * arb);
            float y = n_tok == 1 ? Y[o] : Y[tk * ldy + o];
            if (memcmp(&s, &y, 4) != 0) bad++;
        }
        if (n_tok > 1)
            for (int64_t o = n_out; o < ldy; o++)
                if (Y[tk * ldy + o] != -12345.0f) clobber++;
    }
    CHECK_MSG(bad == 0, "matmul %s %lldx%lld tok %lld: %d outputs differ", ti->name,
              (long long)n_out, (long long)n_in, (long long)n_tok, bad);
    CHECK_MSG(clobber == 0, "matmul %s wrote outside its rows", ti->name);
    free(W); free(row); free(X); free(Y); free(act); free(Yt);
}

/* vec_dot4 (one weight row, four activation rows) must give the bits of four vec_dot calls. */
static void test_dot4(const df_kernel_table *k, int t) {
    if (!k->vec_dot4[t]) return;
    const df_type_traits *ti = df_type_info(t);
    const int vdt = ti->vec_dot_type;
    int bad = 0;
    const int64_t sizes[] = {ti->blck, 3 * ti->blck, 13 * ti->blck, ti->blck * (4096 / ti->blck) + ti->blck};
    for (int si = 0; si < 4; si++) {
        int64_t n = sizes[si];
        uint64_t arb = df_type_row_bytes(vdt, n) + 32; /* odd stride on purpose */
        float *xw = malloc(n * 4), *xa = malloc(n * 4);
        char *w = malloc(df_type_row_bytes(t, n)), *a = malloc(arb * 4);
        for (int kind = 0; kind < DATA_N; kind++) {
            gen(xw, n, kind == DATA_NONFINITE ? DATA_RANDOM : kind, t);
            make_weights(t, xw, w, n, kind == DATA_NONFINITE ? DATA_RANDOM : kind);
            for (int r = 0; r < 4; r++) {
                gen(xa, n, kind, DF_TYPE_F32);
                (k->from_float_w[t] ? k->from_float_w[t] : k->from_float[vdt])(xa, a + r * arb, n);
            }
            float s4[4], s1;
            k->vec_dot4[t](n, s4, w, a, arb);
            for (int r = 0; r < 4; r++) {
                k->vec_dot[t](n, &s1, w, a + r * arb);
                if (memcmp(&s1, &s4[r], 4) != 0 && !(isnan(s1) && isnan(s4[r]))) bad++;
            }
        }
        free(xw); free(xa); free(w); free(a);
    }
    CHECK_MSG(bad == 0, "%s: %s vec_dot4 differs from vec_dot in %d rows", k->name, ti->name, bad);
}

/* ------------------------------------------------------------------ float slots */

/* relative difference, NaN-aware (both NaN = equal), |b| floored at tiny */
static double rel_diff(float a, float b) {
    if (isnan(a) && isnan(b)) return 0;
    if (a == b) return 0;
    return fabs((double)a - b) / fmax(fabs((double)b), 1e-30);
}

/* The float slots of table k against the reference table r: the row ops (ggml's vector exp is
 * within a few ulp of libm's expf) and the F16 K·Q dot (another summation order) within
 * tolerance; the F32-path attention loops and the F16 multiply-add bit for bit (the same
 * operations in every table); the KDA delta rule bit for bit except in the avx2 table, whose
 * dots take ggml_vec_dot_f32's 8-lane order once S >= 32 (close to ref's there; its bits are
 * test_ggml_order's); tinyBLAS's GEMM within tolerance of ref's dots. */
static void test_float_slots(const df_kernel_table *k, const df_kernel_table *r) {
    CHECK_MSG(k->softmax && k->swiglu && k->silu && k->attn_dot_f16 && k->attn_mad_f16 && k->attn_dot_f16_f32 &&
                  k->attn_mad_f32 && k->kda_head && k->f32_epr > 0,
              "%s: a mandatory float slot is empty", k->name);
    enum { N = 4133 };
    float *x = malloc(N * 4), *u = malloc(N * 4), *a = malloc(N * 4), *b = malloc(N * 4);
    df_f16 *h1 = malloc(N * 2), *h2 = malloc(N * 2), *h3 = malloc(N * 2);
    const int sizes[] = {1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 200, 1000, N};
    int bad_row = 0, bad_dot = 0, bad_exact = 0;
    double worst_row = 0, worst_dot = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int n = sizes[si];
        for (int rep = 0; rep < 3; rep++) {
            const float amp = rep == 0 ? 1.0f : rep == 1 ? 8.0f : 40.0f;
            for (int i = 0; i < n; i++) {
                x[i] = rnd_normal() * amp;
                u[i] = rnd_normal();
                h1[i] = df_f32_to_f16(rnd_normal());
                h2[i] = df_f32_to_f16(rnd_normal());
                h3[i] = df_f32_to_f16(rnd_normal() * 0.1f);
            }
            /* row ops */
            r->softmax(x, a, n);
            k->softmax(x, b, n);
            for (int i = 0; i < n; i++) {
                if (a[i] < 1e-30f) continue; /* underflow: flushed differently (test_ggml_order) */
                const double e = rel_diff(b[i], a[i]);
                if (e > worst_row) worst_row = e;
                bad_row += e > 1e-5;
            }
            memcpy(a, x, (size_t)n * 4);
            memcpy(b, x, (size_t)n * 4);
            r->swiglu(a, u, n);
            k->swiglu(b, u, n);
            for (int i = 0; i < n; i++) {
                const double e = fabs((double)b[i] - a[i]) / (fabs((double)a[i]) + 1e-6);
                if (e > worst_row) worst_row = e;
                bad_row += e > 1e-5;
            }
            memcpy(a, x, (size_t)n * 4);
            memcpy(b, x, (size_t)n * 4);
            r->silu(a, n);
            k->silu(b, n);
            for (int i = 0; i < n; i++) {
                const double e = fabs((double)b[i] - a[i]) / (fabs((double)a[i]) + 1e-6);
                if (e > worst_row) worst_row = e;
                bad_row += e > 1e-5;
            }
            /* attention dots: tolerance relative to sum |x_i y_i| */
            double mag = 0;
            for (int i = 0; i < n; i++) mag += fabs((double)df_f16_to_f32(h1[i]) * df_f16_to_f32(h2[i]));
            const double e16 = fabs((double)k->attn_dot_f16(h1, h2, n) - r->attn_dot_f16(h1, h2, n)) / (mag + 1e-30);
            if (e16 > worst_dot) worst_dot = e16;
            bad_dot += e16 > 1e-6;
            const float d32k = k->attn_dot_f16_f32(h1, x, n), d32r = r->attn_dot_f16_f32(h1, x, n);
            bad_exact += memcmp(&d32k, &d32r, 4) != 0;
            /* multiply-adds */
            memcpy(a, u, (size_t)n * 4);
            memcpy(b, u, (size_t)n * 4);
            r->attn_mad_f32(a, h1, 0.37f * amp, n);
            k->attn_mad_f32(b, h1, 0.37f * amp, n);
            bad_exact += memcmp(a, b, (size_t)n * 4) != 0;
            df_f16 *c1 = (df_f16 *)a, *c2 = (df_f16 *)b;
            memcpy(c1, h3, (size_t)n * 2);
            memcpy(c2, h3, (size_t)n * 2);
            r->attn_mad_f16(c1, h2, 0.61f, n);
            k->attn_mad_f16(c2, h2, 0.61f, n);
            bad_exact += memcmp(c1, c2, (size_t)n * 2) != 0;
        }
    }
    CHECK_MSG(bad_row == 0, "%s: softmax / swiglu / silu differ from ref in %d elements (worst %.2e)", k->name,
              bad_row, worst_row);
    CHECK_MSG(bad_dot == 0, "%s: attention F16 dot differs from ref in %d cases (worst %.2e)", k->name, bad_dot,
              worst_dot);
    CHECK_MSG(bad_exact == 0, "%s: %d F32-path dots / multiply-adds differ from ref's bits", k->name, bad_exact);
    /* KDA: head sizes with and without a 64-wide part, several tokens, bit for bit (avx2: its
     * 8-lane blocks start at S = 32; S = 16 is all leftovers, the same in both orders) */
    const int kda_s[] = {16, 64, 72, 128};
    int bad_kda = 0;
    double worst_kda = 0;
    for (int si = 0; si < 4; si++) {
        const int S = kda_s[si], nt = 5, H = 3;
        const int64_t DI = (int64_t)H * S;
        float *M1 = malloc(sizeof(float) * S * S), *M2 = malloc(sizeof(float) * S * S);
        float *q = malloc(sizeof(float) * DI * nt), *kk = malloc(sizeof(float) * DI * nt);
        float *v = malloc(sizeof(float) * DI * nt), *g = malloc(sizeof(float) * DI * nt);
        float *beta = malloc(sizeof(float) * H * nt);
        float *o1 = malloc(sizeof(float) * DI * nt), *o2 = malloc(sizeof(float) * DI * nt);
        for (int i = 0; i < S * S; i++) M1[i] = M2[i] = rnd_normal() * 0.1f;
        for (int64_t i = 0; i < DI * nt; i++) {
            q[i] = rnd_normal() * 0.2f;
            kk[i] = rnd_normal() * 0.2f;
            v[i] = rnd_normal();
            g[i] = -fabsf(rnd_normal()) * 0.1f;
            o1[i] = o2[i] = 0;
        }
        for (int i = 0; i < H * nt; i++) beta[i] = 0.5f + 0.4f * rnd_uniform();
        const int h = 1; /* one head of the batch: strides as the forward pass passes them */
        r->kda_head(M1, S, nt, q + h * S, kk + h * S, v + h * S, g + h * S, DI, beta + h, H, o1 + h * S);
        k->kda_head(M2, S, nt, q + h * S, kk + h * S, v + h * S, g + h * S, DI, beta + h, H, o2 + h * S);
        if (k->isa != DF_ISA_AVX2 || S < 32) {
            bad_kda += memcmp(M1, M2, sizeof(float) * S * S) != 0;
            bad_kda += memcmp(o1, o2, sizeof(float) * DI * nt) != 0;
        } else {
            for (int i = 0; i < S * S; i++) worst_kda = fmax(worst_kda, fabs((double)M1[i] - M2[i]));
            for (int64_t i = 0; i < DI * nt; i++) worst_kda = fmax(worst_kda, fabs((double)o1[i] - o2[i]));
        }
        free(M1); free(M2); free(q); free(kk); free(v); free(g); free(beta); free(o1); free(o2);
    }
    CHECK_MSG(bad_kda == 0, "%s: KDA delta rule differs from ref's bits in %d checks", k->name, bad_kda);
    CHECK_MSG(worst_kda < 1e-5, "%s: KDA delta rule %.2e from ref's", k->name, worst_kda);
    /* tinyBLAS F32 GEMM (optional) against ref's F32 dots */
    if (k->gemm_f32) {
        const int n_in = 6 * k->f32_epr, n_out = 12, nt = 7;
        float *W = malloc(sizeof(float) * n_in * n_out), *X = malloc(sizeof(float) * n_in * nt);
        float *Y = malloc(sizeof(float) * n_out * nt);
        for (int i = 0; i < n_in * n_out; i++) W[i] = rnd_normal();
        for (int i = 0; i < n_in * nt; i++) X[i] = rnd_normal();
        k->gemm_f32(W, n_in, 0, 8, X, n_in, nt, Y, n_out);
        k->gemm_f32(W, n_in, 8, n_out, X, n_in, nt, Y, n_out);
        int bad = 0;
        for (int t = 0; t < nt; t++)
            for (int o = 0; o < n_out; o++) {
                float want, m = 0;
                r->vec_dot[DF_TYPE_F32](n_in, &want, W + (int64_t)o * n_in, X + (int64_t)t * n_in);
                for (int i = 0; i < n_in; i++) m += fabsf(W[(int64_t)o * n_in + i] * X[(int64_t)t * n_in + i]);
                bad += fabsf(Y[t * n_out + o] - want) > 1e-5f * m;
            }
        CHECK_MSG(bad == 0, "%s: F32 GEMM differs from ref's dots in %d outputs", k->name, bad);
        /* the F16 / BF16 GEMMs (optional): tinyBLAS widens both operands to F32 on load, so each
         * gives the bits of the F32 GEMM on the widened values */
        for (int h = 0; h < 2; h++) {
            const df_gemm_h_fn gh = h ? k->gemm_bf16 : k->gemm_f16;
            if (!gh) continue;
            uint16_t *W16 = malloc(2 * (size_t)n_in * n_out), *X16 = malloc(2 * (size_t)n_in * nt);
            float *Y16 = malloc(sizeof(float) * n_out * nt);
            for (int i = 0; i < n_in * n_out; i++) {
                W16[i] = h ? df_f32_to_bf16(W[i]) : df_f32_to_f16(W[i]);
                W[i] = h ? df_bf16_to_f32(W16[i]) : df_f16_to_f32(W16[i]);
            }
            for (int i = 0; i < n_in * nt; i++) {
                X16[i] = h ? df_f32_to_bf16(X[i]) : df_f32_to_f16(X[i]);
                X[i] = h ? df_bf16_to_f32(X16[i]) : df_f16_to_f32(X16[i]);
            }
            k->gemm_f32(W, n_in, 0, n_out, X, n_in, nt, Y, n_out);
            gh(W16, n_in, 0, 4, X16, n_in, nt, Y16, n_out);
            gh(W16, n_in, 4, n_out, X16, n_in, nt, Y16, n_out);
            CHECK_MSG(!memcmp(Y, Y16, sizeof(float) * n_out * nt), "%s: %s GEMM differs from the F32 GEMM of its values",
                      k->name, h ? "BF16" : "F16");
            free(W16); free(X16); free(Y16);
        }
        free(W); free(X); free(Y);
    } else {
        CHECK_MSG(!k->gemm_f16 && !k->gemm_bf16, "%s: a 16-bit GEMM without the F32 one", k->name);
    }
    printf("  %-7s float slots: row ops worst rel %.2e, F16 dot worst rel %.2e\n", k->name, worst_row, worst_dot);
    free(x); free(u); free(a); free(b); free(h1); free(h2); free(h3);
}

/* ------------------------------------------------------------------ thread pool */

typedef struct {
    atomic_int *hits;
    atomic_int calls;
    int n_threads;
    atomic_int bad_thread;
} pool_ctx;

static void pool_fn(void *ctx, int task, int thread) {
    pool_ctx *c = ctx;
    atomic_fetch_add(&c->hits[task], 1);
    atomic_fetch_add(&c->calls, 1);
    if (thread < 0 || thread >= c->n_threads) atomic_fetch_add(&c->bad_thread, 1);
}

static void test_pool(int nth) {
    df_pool *p = df_pool_create(nth);
    CHECK(p != NULL);
    if (!p) return;
    CHECK_EQ_INT(df_pool_size(p), nth);
    enum { MAXT = 300 };
    atomic_int hits[MAXT];
    int bad = 0;
    for (int it = 0; it < 2000; it++) {
        int n = (it * 37) % MAXT;
        for (int i = 0; i < MAXT; i++) atomic_init(&hits[i], 0);
        pool_ctx c = {.hits = hits, .n_threads = nth};
        atomic_init(&c.calls, 0);
        atomic_init(&c.bad_thread, 0);
        df_pool_run(p, n, pool_fn, &c);
        for (int i = 0; i < MAXT; i++)
            if (atomic_load(&hits[i]) != (i < n ? 1 : 0)) bad++;
        if (atomic_load(&c.bad_thread)) bad++;
        if (it == 1000) {
            /* let the workers fall asleep, then make sure they wake up */
            struct timespec ts = {0, 3000000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK_MSG(bad == 0, "pool(%d): %d wrong task counts", nth, bad);
    df_pool_free(p);
}

/* MXFP4 in ggml's repacked (mxfp4_8x8) gemv / gemm order, vec_dot_r8 where a table has it: bit
 * for bit one FMA chain over the blocks, acc = fma(block's integer dot, e8m0_half(e) * d, acc),
 * written out here in scalar code (sizes around the kernels' 8-block steps). */
static void test_mxfp4_r8(void) {
    const char *names[] = {"avx2", "avx512", "neon"};
    const int64_t nbs[] = {1, 7, 8, 9, 16, 17, 64, 129};
    int checked = 0, bad = 0;
    for (int i = 0; i < 3; i++) {
        const df_kernel_table *k = df_kernels_by_name(names[i]);
        if (!k || !k->vec_dot_r8[DF_TYPE_MXFP4]) continue;
        for (size_t si = 0; si < sizeof nbs / sizeof *nbs; si++) {
            const int64_t nb = nbs[si], n = 32 * nb;
            float *xw = malloc(n * 4), *xa = malloc(n * 4);
            df_block_mxfp4 *w = calloc(nb, sizeof *w);
            df_block_q8_0 *a = calloc(nb, sizeof *a);
            for (int rep = 0; rep < 4; rep++) {
                gen(xw, n, DATA_RANDOM, DF_TYPE_MXFP4);
                gen(xa, n, DATA_RANDOM, DF_TYPE_F32);
                df_quantize_row(DF_TYPE_MXFP4, xw, w, n);
                k->from_float[DF_TYPE_Q8_0](xa, a, n);
                float want = 0.0f, got = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    int32_t isum = 0;
                    for (int j = 0; j < 16; j++)
                        isum += a[b].qs[j] * df_kvalues_mxfp4[w[b].qs[j] & 0xF] +
                                a[b].qs[j + 16] * df_kvalues_mxfp4[w[b].qs[j] >> 4];
                    want = fmaf((float)isum, df_e8m0_half(w[b].e) * df_f16_to_f32(a[b].d), want);
                }
                k->vec_dot_r8[DF_TYPE_MXFP4](n, &got, w, a);
                checked++;
                if (memcmp(&want, &got, 4)) {
                    if (bad++ < 5) fprintf(stderr, "  %s mxfp4 r8 n=%lld: %.9g, ggml's order %.9g\n", k->name, (long long)n, got, want);
                }
            }
            free(xw); free(xa); free(w); free(a);
        }
    }
    CHECK_MSG(bad == 0, "mxfp4 repacked order: %d of %d dots differ", bad, checked);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) CHECK(checked > 0);
#endif
    printf("  mxfp4 in ggml's repacked order: %d dots checked bit for bit, %d differ\n", checked, bad);
}

/* Q6_K in ggml_vec_dot_q6_K_q8_K's AVX2 order (the avx2 table), bit for bit: per block 8 integer
 * lanes (lane k: elements 4k..4k+3 of each 32-value group, times their sub-block scales, minus
 * 32·(bsums·scales) of sub-blocks 2k and 2k+1), each lane accumulated by FMA over the blocks,
 * then hsum_float_8 ((a4+a0)+(a6+a2)) + ((a5+a1)+(a7+a3)); written out here in scalar code. */
static void test_q6k_order(void) {
    const df_kernel_table *k = df_kernels_by_name("avx2");
    if (!k) return;
    const int64_t nbs[] = {1, 2, 5, 17};
    int checked = 0, bad = 0;
    for (size_t si = 0; si < sizeof nbs / sizeof *nbs; si++) {
        const int64_t nb = nbs[si], n = 256 * nb;
        float *xw = malloc(n * 4), *xa = malloc(n * 4);
        df_block_q6_K *w = calloc(nb, sizeof *w);
        df_block_q8_K *a = calloc(nb, sizeof *a);
        for (int rep = 0; rep < 4; rep++) {
            gen(xw, n, DATA_RANDOM, DF_TYPE_Q6_K);
            gen(xa, n, DATA_RANDOM, DF_TYPE_F32);
            df_quantize_row(DF_TYPE_Q6_K, xw, w, n);
            k->from_float[DF_TYPE_Q8_K](xa, a, n);
            float acc[8] = {0};
            for (int64_t b = 0; b < nb; b++) {
                int q[256];
                for (int h = 0; h < 2; h++)
                    for (int l = 0; l < 32; l++) {
                        const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
                        q[128 * h + l] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
                        q[128 * h + l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
                        q[128 * h + l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                        q[128 * h + l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                    }
                const float d = a[b].d * df_f16_to_f32(w[b].d);
                for (int lane = 0; lane < 8; lane++) {
                    int32_t v = 0;
                    for (int grp = 0; grp < 8; grp++)
                        for (int e = 4 * lane; e < 4 * lane + 4; e++) {
                            const int j = 32 * grp + e;
                            v += q[j] * a[b].qs[j] * w[b].scales[j / 16];
                        }
                    v -= 32 * (a[b].bsums[2 * lane] * w[b].scales[2 * lane] + a[b].bsums[2 * lane + 1] * w[b].scales[2 * lane + 1]);
                    acc[lane] = fmaf(d, (float)v, acc[lane]);
                }
            }
            const float want = ((acc[4] + acc[0]) + (acc[6] + acc[2])) + ((acc[5] + acc[1]) + (acc[7] + acc[3]));
            float got = 0.0f;
            k->vec_dot[DF_TYPE_Q6_K](n, &got, w, a);
            checked++;
            if (memcmp(&want, &got, 4) && bad++ < 5)
                fprintf(stderr, "  avx2 q6_K n=%lld: %.9g, ggml's order %.9g\n", (long long)n, got, want);
        }
        free(xw); free(xa); free(w); free(a);
    }
    CHECK_MSG(bad == 0, "q6_K in ggml's AVX2 order: %d of %d dots differ", bad, checked);
    printf("  q6_K in ggml's AVX2 order: %d dots checked bit for bit, %d differ\n", checked, bad);
}

/* Q4_K weights repacked as 8 interleaved rows (DF_TYPE_Q4_K_X8): the layout round-trips, every
 * table's x8 kernels give the bits of ggml's per-row repacked orders (vec_dot_r8 / _r8g of the
 * AVX2 table, the oracle of those orders) on the rows before repacking, and df_matmul /
 * df_matmul_id on repacked weights give the bits of the same calls on the file layout. */
static void test_q4k_x8(df_pool *pool) {
    const df_kernel_table *o = df_kernels_by_name("avx2");
    if (!o || !o->vec_dot_r8[DF_TYPE_Q4_K]) o = df_kernels_by_name("avx512");
    if (o && !o->vec_dot_r8[DF_TYPE_Q4_K]) o = NULL;
    const char *names[] = {"ref", "avx2", "avx512", "neon"};
    const int64_t sizes[] = {256, 768, 4096};
    int checked = 0;
    for (int si = 0; si < 3; si++) {
        const int64_t n = sizes[si], n_out = 24;
        const uint64_t rb = df_type_row_bytes(DF_TYPE_Q4_K, n), arb = df_type_row_bytes(DF_TYPE_Q8_K, n);
        for (int kind = 0; kind <= DATA_SPIKY + 1; kind++) {
            char *W = malloc(rb * n_out), *Wx = malloc(rb * n_out), *act = malloc(arb * 4);
            float *x = malloc(n * 4);
            for (int64_t r = 0; r < n_out; r++) {
                if (kind <= DATA_SPIKY) {
                    gen(x, n, kind, DF_TYPE_Q4_K);
                    df_quantize_row(DF_TYPE_Q4_K, x, W + r * rb, n);
                } else { /* raw bytes: every scale, min and quant value, extreme included */
                    for (uint64_t b = 0; b < rb; b++) W[r * rb + b] = (char)rnd_u32();
                    for (int64_t i = 0; i < n / 256; i++) {
                        df_block_q4_K *blk = (df_block_q4_K *)(W + r * rb) + i;
                        blk->d = df_f32_to_f16(0.01f * (float)(rnd_u32() % 1000 + 1));
                        blk->dmin = df_f32_to_f16(0.01f * (float)(rnd_u32() % 1000));
                    }
                }
            }
            memcpy(Wx, W, rb * n_out);
            CHECK_EQ_INT(df_repack_rows(pool, DF_TYPE_Q4_K, DF_TYPE_Q4_K_X8, Wx, n, n_out), DF_OK);
            char *back = malloc(rb * n_out);
            memcpy(back, Wx, rb * n_out);
            CHECK_EQ_INT(df_repack_rows(pool, DF_TYPE_Q4_K_X8, DF_TYPE_Q4_K, back, n, n_out), DF_OK);
            CHECK_MSG(memcmp(back, W, rb * n_out) == 0, "Q4_K x8 layout round trip, n %lld", (long long)n);
            free(back);
            for (int t = 0; t < 4; t++) {
                gen(x, n, t == 3 ? DATA_SPIKY : DATA_RANDOM, DF_TYPE_F32);
                df_quantize_act(DF_TYPE_Q4_K, x, n, n, 1, act + t * arb);
            }
            for (int ti = 0; o && ti < 4; ti++) {
                const df_kernel_table *k = df_kernels_by_name(names[ti]);
                if (!k || !k->vec_dot_x8[DF_TYPE_Q4_K_X8]) continue;
                int bad = 0;
                for (int64_t g = 0; g < n_out / 8; g++) {
                    float s8[8], s48[32], e;
                    const char *wg = Wx + g * 8 * rb;
                    for (int t = 0; t < 4; t++) {
                        k->vec_dot_x8[DF_TYPE_Q4_K_X8](n, s8, wg, act + t * arb);
                        for (int r = 0; r < 8; r++) {
                            o->vec_dot_r8[DF_TYPE_Q4_K](n, &e, W + (8 * g + r) * rb, act + t * arb);
                            bad += memcmp(&e, &s8[r], 4) != 0;
                        }
                    }
                    if (k->vec_dot4_x8[DF_TYPE_Q4_K_X8]) { /* gemv order, 4 tokens at once */
                        k->vec_dot4_x8[DF_TYPE_Q4_K_X8](n, s48, 8, wg, act, arb);
                        for (int t = 0; t < 4; t++)
                            for (int r = 0; r < 8; r++) {
                                o->vec_dot_r8[DF_TYPE_Q4_K](n, &e, W + (8 * g + r) * rb, act + t * arb);
                                bad += memcmp(&e, &s48[8 * t + r], 4) != 0;
                            }
                    }
                    k->vec_dot4_x8g[DF_TYPE_Q4_K_X8](n, s48, 8, wg, act, arb);
                    for (int t = 0; t < 4; t++)
                        for (int r = 0; r < 8; r++) {
                            o->vec_dot_r8g[DF_TYPE_Q4_K](n, &e, W + (8 * g + r) * rb, act + t * arb);
                            bad += memcmp(&e, &s48[8 * t + r], 4) != 0;
                        }
                }
                CHECK_MSG(bad == 0, "%s Q4_K x8 n %lld data %d: %d dots differ from ggml's per-row orders",
                          k->name, (long long)n, kind, bad);
                checked++;
            }
            /* matmuls: repacked = file layout, bit for bit, plain and per-expert */
            const int64_t ntoks[] = {1, 3, 4, 9, 12};
            for (int nti = 0; nti < 5; nti++) {
                const int64_t nt = ntoks[nti], ldy = n_out + 3;
                float *X = malloc(n * nt * 4), *Y0 = malloc(ldy * nt * 4), *Y1 = malloc(ldy * nt * 4);
                for (int64_t i = 0; i < n * nt; i++) X[i] = rnd_normal();
                for (int id = 0; id < 2; id++) {
                    for (int64_t i = 0; i < ldy * nt; i++) Y0[i] = Y1[i] = -7.0f;
                    (id ? df_matmul_id : df_matmul)(pool, W, DF_TYPE_Q4_K, n, n_out, X, n, nt, Y0, ldy, NULL);
                    (id ? df_matmul_id : df_matmul)(pool, Wx, DF_TYPE_Q4_K_X8, n, n_out, X, n, nt, Y1, ldy, NULL);
                    if (df_kernels()->vec_dot_r8[DF_TYPE_Q4_K]) /* else Q4_K runs another order */
                        CHECK_MSG(memcmp(Y0, Y1, ldy * nt * 4) == 0, "matmul%s Q4_K x8 n %lld tok %lld differs",
                                  id ? "_id" : "", (long long)n, (long long)nt);
                }
                free(X); free(Y0); free(Y1);
            }
            free(W); free(Wx); free(act); free(x);
        }
    }
    printf("Q4_K x8: %d table x size x data cases bit-equal to ggml's per-row orders\n", checked);
    if (o) CHECK_MSG(checked >= 2 * 3 * (DATA_SPIKY + 2), "x8 tables checked: %d", checked);
    CHECK(df_repack_rows(pool, DF_TYPE_Q4_K, DF_TYPE_Q4_K_X8, NULL, 256, 12) == DF_ERR_INVALID);
    CHECK(df_repack_rows(pool, DF_TYPE_Q8_0, DF_TYPE_Q4_K_X8, NULL, 256, 8) == DF_ERR_INVALID);
}

/* Token groups (df_matmul_g & co.): every token's result is bit for bit what a call on its
 * group's tokens alone gives, for plain, 3-D and per-expert matmuls, including F32 (tinyBLAS
 * from 2 tokens) and the repacked gemm/gemv split (n_out % 8 == 0, Q4_K_X8). */
static void test_groups(df_pool *pool, int t, int64_t n_in, int64_t n_out, bool repack) {
    const df_type_traits *ti = df_type_info(t);
    const uint64_t wrb = df_type_row_bytes(t, n_in);
    char *W = malloc(wrb * n_out);
    float *row = malloc(n_in * 4);
    for (int64_t o = 0; o < n_out; o++) {
        gen(row, n_in, DATA_RANDOM, t);
        if (!make_weights(t, row, W + o * wrb, n_in, DATA_RANDOM)) { free(W); free(row); return; }
    }
    int wt = t;
    if (repack) {
        if (df_repack_rows(pool, t, DF_TYPE_Q4_K_X8, W, n_in, n_out) != DF_OK) { free(W); free(row); return; }
        wt = DF_TYPE_Q4_K_X8;
    }
    static const int32_t sizes[][9] = {{3, 1, 4, 2, 5, 1, 7, 8, 0}, {1, 1, 1, 1, 1, 0, 0, 0, 0},
                                       {9, 0, 6, 1, 13, 0, 0, 0, 0}, {4, 4, 2, 2, 0, 0, 0, 0, 0}};
    for (int si = 0; si < 4; si++) {
        int32_t end[9];
        int ng = 0, nt = 0;
        for (int i = 0; i < 9 && (sizes[si][i] || (i + 1 < 9 && sizes[si][i + 1])); i++) { nt += sizes[si][i]; end[ng++] = nt; }
        const int64_t ldy = n_out + 3;
        float *X = malloc(n_in * nt * 4), *Y0 = malloc(ldy * nt * 4), *Y1 = malloc(ldy * nt * 4);
        for (int64_t i = 0; i < n_in * nt; i++) X[i] = rnd_normal();
        const df_row_groups g = {ng, end};
        for (int kind = 0; kind < 3; kind++) {
            if (kind == 1 && repack) continue; /* no 3-D use of repacked rows */
            for (int64_t i = 0; i < ldy * nt; i++) Y0[i] = Y1[i] = -7.0f;
            for (int i = 0; i < ng; i++) {
                const int64_t a = i ? end[i - 1] : 0, n = end[i] - a;
                if (!n) continue;
                if (kind == 0) df_matmul(pool, W, wt, n_in, n_out, X + a * n_in, n_in, n, Y0 + a * ldy, ldy, NULL);
                else if (kind == 1) df_matmul_3d(pool, W, wt, n_in, n_out, X + a * n_in, n_in, n, Y0 + a * ldy, ldy, NULL);
                else df_matmul_id(pool, W, wt, n_in, n_out, X + a * n_in, n_in, n, Y0 + a * ldy, ldy, NULL);
            }
            if (kind == 0) df_matmul_g(pool, W, wt, n_in, n_out, X, n_in, nt, Y1, ldy, NULL, &g);
            else if (kind == 1) df_matmul_3d_g(pool, W, wt, n_in, n_out, X, n_in, nt, Y1, ldy, NULL, &g);
            else df_matmul_id(pool, W, wt, n_in, n_out, X, n_in, nt, Y1, ldy, NULL); /* needs no groups */
            int bad = 0;
            for (int64_t i = 0; i < ldy * nt; i++) bad += memcmp(&Y0[i], &Y1[i], 4) != 0;
            CHECK_MSG(bad == 0, "grouped matmul%s %s%s %lldx%lld groups #%d: %d outputs differ from per-group calls",
                      kind == 1 ? "_3d" : kind == 2 ? "_id" : "", ti->name, repack ? " (x8)" : "", (long long)n_out,
                      (long long)n_in, si, bad);
        }
        {   /* df_matmul_q_g on one conversion of all rows */
            char *act = malloc(df_act_bytes(wt, n_in, nt));
            df_quantize_act(wt, X, n_in, n_in, nt, act);
            for (int64_t i = 0; i < ldy * nt; i++) Y1[i] = -7.0f;
            df_matmul_q_g(pool, W, wt, n_in, n_out, act, nt, Y1, ldy, &g);
            for (int i = 0; i < ng; i++) {
                const int64_t a = i ? end[i - 1] : 0, n = end[i] - a;
                if (n) df_matmul(pool, W, wt, n_in, n_out, X + a * n_in, n_in, n, Y0 + a * ldy, ldy, NULL);
            }
            CHECK_MSG(memcmp(Y0, Y1, ldy * nt * 4) == 0, "grouped matmul_q %s%s groups #%d differs", ti->name,
                      repack ? " (x8)" : "", si);
            free(act);
        }
        free(X); free(Y0); free(Y1);
    }
    free(W); free(row);
}

int main(void) {
    df_init();
    test_pool(1);
    test_pool(2);
    test_pool(5);
    {
        df_pool *p = df_pool_create(0);
        CHECK(p && df_pool_size(p) >= 1);
        df_pool_free(p);
        df_pool_free(NULL);
        CHECK_EQ_INT(df_pool_size(NULL), 1);
    }

    const df_kernel_table *r = df_kernels_ref();
    CHECK(r && df_kernels() && df_kernels_by_name("ref") == r);
    CHECK(df_kernels_by_name("nonsense") == NULL);
    printf("selected kernels: %s\n", df_kernels()->name);
    const char *names[] = {"avx2", "avx512", "neon"};
    int compute_types = 0, r8_checked = 0;
    for (int t = 0; t < DF_TYPE_COUNT; t++) {
        const df_type_traits *ti = df_type_info(t);
        if (!ti || !r->vec_dot[t]) continue;
        CHECK_MSG(ti->can_compute, "%s has a ref dot but can_compute is false", ti->name);
        CHECK_MSG(r->from_float[ti->vec_dot_type] != NULL, "%s: no from_float", ti->name);
        compute_types++;
        test_ref_formula(t);
        test_type_table(r, r, t); /* ref against itself: determinism */
        for (int i = 0; i < 3; i++) {
            const df_kernel_table *k = df_kernels_by_name(names[i]);
            if (k) test_type_table(k, r, t);
            if (k) test_dot4(k, t);
            /* ggml's repacked-weight orders (gemv / gemm):
             * within the type's tolerance of ref, and their 4-row forms bit-equal to 1-row */
            for (int g = 0; k && g < 2; g++) {
                df_vec_dot_fn d1 = g ? k->vec_dot_r8g[t] : k->vec_dot_r8[t];
                df_vec_dot4_fn d4 = g ? k->vec_dot4_r8g[t] : k->vec_dot4_r8[t];
                if (!d1) continue;
                df_kernel_table v = *k;
                v.vec_dot[t] = d1;
                v.vec_dot4[t] = d4;
                test_type_table(&v, r, t);
                test_dot4(&v, t);
                r8_checked++;
            }
        }
    }
    CHECK(compute_types >= 4);
    /* the float slots: ref fills every mandatory one; every table against it */
    test_float_slots(r, r);
    for (int i = 0; i < 3; i++)
        if (df_kernels_by_name(names[i])) test_float_slots(df_kernels_by_name(names[i]), r);
    /* Q4_K has both repacked orders on x86 (avx2 and avx512 tables): 2 each */
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        CHECK_MSG(r8_checked >= 2, "repacked-order kernels checked: %d", r8_checked);
#endif

    df_pool *pool = df_pool_create(3);
    for (int t = 0; t < DF_TYPE_COUNT; t++) {
        const df_type_traits *ti = df_type_info(t);
        if (!ti || !ti->can_compute) continue;
        int64_t n_in = ti->blck == 1 ? 67 : ti->blck * 3;
        test_matmul(pool, t, n_in, 37, 1);
        test_matmul(pool, t, n_in, 37, 11);
        test_matmul(NULL, t, n_in, 5, 3);
        test_matmul(pool, t, ti->blck == 1 ? 512 : ti->blck * (512 / ti->blck), 300, 20);
        test_matmul(pool, t, n_in, 40, 11); /* rows % 8 == 0: ggml's repacked gemm + gemv orders */
    }
    test_q4k_x8(pool);
    test_mxfp4_r8();
    test_q6k_order();
    for (int t = 0; t < DF_TYPE_COUNT; t++) {
        const df_type_traits *ti = df_type_info(t);
        if (!ti || !ti->can_compute || t == DF_TYPE_Q4_K_X8) continue;
        const int64_t n_in = ti->blck == 1 ? 64 : ti->blck * (ti->blck >= 256 ? 1 : 4);
        test_groups(pool, t, n_in, 40, false);  /* rows % 8 == 0 (repacked orders), F32 tinyBLAS */
        test_groups(pool, t, n_in, 37, false);
    }
    test_groups(pool, DF_TYPE_Q4_K, 512, 24, true);
    df_pool_free(pool);
    TEST_MAIN_END("test_kernels");
}
