/* gen_random_kimi_k3.c — `deltafin gen-random --arch kimi-k3 ...`: a random Kimi K3 model
 * (docs kimi-k3.md §1-§2) with exactly the keys and tensors llama.cpp's kimi-k3 loader reads:
 * KDA and MLA layers chosen by a K/M pattern (written as the head_count_kv array), q LoRA or
 * attn_q, MLA output gate, leading dense layers, latent MoE (routed_down / routed_up /
 * routed_norm), shared experts, cross-layer residual scores (block size B), situ keys, the
 * KDA gate lower bound. Small shapes by default; --preset k3 gives the real geometry.
 * Tensors are generated and written one chunk at a time (no whole-model buffer), so real-width
 * files with a few layers can be built; --sparse writes the header and a hole instead of data
 * (for `deltafin info`), --raw-experts fills quantized expert tensors with random valid blocks
 * directly (fast, for I/O benchmarks). Deterministic: per-tensor splitmix64 streams seeded by
 * (seed, tensor name), values k·2^-23·scale + offset. Called from cmd_gen_random. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/gen_random.h"
#include "dev/llama2c.h"
#include "deltafin.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <strings.h>
#include <unistd.h>

typedef struct {
    int type, exp_type;
    int64_t n_embd, n_layer, n_head, head_dim, conv, q_lora, kv_lora, d_nope, d_rope, d_v;
    int64_t n_ff, n_expert, n_used, n_ff_exp, n_shared, latent, n_dense, block, n_ctx;
    float lb, situ_beta, situ_lbeta, scale, eps;
    bool has_lb, norm, routed_norm, attn_gate, sparse, raw_experts;
    float out_scale, router_scale, mat_scale, res_scale;
    uint64_t seed;
    const char *vocab, *out, *layers;
} k3_opts;


/* how a tensor's values are drawn */
enum { KK_NORM, KK_BIAS, KK_EMBD, KK_MAT, KK_ROUTER, KK_OUT, KK_RES, KK_CONV, KK_SSMA, KK_DT };

#define K3_MAX_T 16384
typedef struct {
    char name[64];
    int kind, type, n_dims;
    int64_t ne[3];
    bool expert;
} k3_tinfo;

typedef struct {
    df_gguf_writer *w;
    const k3_opts *o;
    k3_tinfo *t;
    int nt;
} k3_ctx;

static bool k3_f32_only(int kind, int n_dims) {
    return n_dims == 1 || kind == KK_ROUTER || kind == KK_CONV || kind == KK_NORM || kind == KK_RES ||
           kind == KK_BIAS || kind == KK_SSMA || kind == KK_DT;
}

/* the type a matrix gets: the requested one if its rows fit the block size, else Q8_0 (rows of
 * a multiple of 32, like llama-quantize's fallback for ne0 = 128 under K-quants), else F16 */
static int k3_pick_type(int want, int64_t e0) {
    const df_type_traits *tr = df_type_info(want);
    if (!tr || e0 % tr->blck == 0) return want;
    if (e0 % 32 == 0) return DF_TYPE_Q8_0;
    return DF_TYPE_F16;
}

static int k3_tensor(k3_ctx *x, int kind, int n_dims, int64_t e0, int64_t e1, int64_t e2, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static int k3_tensor(k3_ctx *x, int kind, int n_dims, int64_t e0, int64_t e1, int64_t e2, const char *fmt, ...) {
    if (x->nt >= K3_MAX_T) return df_err(DF_ERR_RANGE, "too many tensors");
    k3_tinfo *t = &x->t[x->nt];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->kind = kind;
    t->n_dims = n_dims;
    t->ne[0] = e0; t->ne[1] = e1; t->ne[2] = e2;
    t->expert = strstr(t->name, "_exps.") != NULL;
    t->type = k3_f32_only(kind, n_dims) ? DF_TYPE_F32 : k3_pick_type(t->expert ? x->o->exp_type : x->o->type, e0);
    x->nt++;
    return df_gguf_w_tensor(x->w, t->name, t->type, n_dims, t->ne, NULL);
}

static float k3_scale(const k3_opts *o, const k3_tinfo *t, float *offset) {
    const float e0 = (float)t->ne[0];
    *offset = 0.0f;
    switch (t->kind) {
    case KK_NORM: *offset = 1.0f; return 0.2f;
    case KK_BIAS: return 0.2f;
    case KK_EMBD: return 1.0f;
    case KK_MAT: return sqrtf(3.0f / e0) * o->mat_scale;
    case KK_ROUTER: return sqrtf(3.0f / e0) * o->router_scale;
    case KK_OUT: return sqrtf(3.0f / e0) * o->out_scale;
    case KK_RES: return sqrtf(3.0f / e0) * o->res_scale;
    case KK_CONV: return sqrtf(3.0f / e0);
    case KK_SSMA: return 1.0f;   /* A_log in [-1, 1); stored as -exp(A_log) */
    case KK_DT: return 0.5f;
    }
    return 1.0f;
}

/* random valid quantized blocks (no F32 intermediate): MXFP4 scale bytes 2^-3..2^0 half-scale,
 * Q8_0 scales ~ 1/64·sqrt(3/n_in)·... ; other types are quantized from floats */
static void k3_raw_row(int type, int64_t e0, uint64_t *st, uint8_t *dst, float scale) {
    if (type == DF_TYPE_MXFP4) {
        /* |values| <= 12·2^(e-128)... pick e so the largest code is ~3·scale */
        int e = 128 + (int)floorf(log2f(scale * 3.0f / 12.0f) + 0.5f);
        if (e < 2) e = 2;
        if (e > 250) e = 250;
        for (int64_t b = 0; b < e0 / 32; b++) {
            uint8_t *blk = dst + b * 17;
            blk[0] = (uint8_t)e;
            uint64_t r0 = gr_splitmix(st), r1 = gr_splitmix(st);
            memcpy(blk + 1, &r0, 8);
            memcpy(blk + 9, &r1, 8);
        }
    } else { /* Q8_0 */
        df_f16 d = df_f32_to_f16(scale / 127.0f);
        for (int64_t b = 0; b < e0 / 32; b++) {
            uint8_t *blk = dst + b * 34;
            memcpy(blk, &d, 2);
            for (int i = 0; i < 32; i += 8) {
                uint64_t r = gr_splitmix(st);
                memcpy(blk + 2 + i, &r, 8);
            }
        }
    }
}

/* generate tensor t and pwrite it at `at` (chunks of whole rows) */
static int k3_write_tensor(const k3_opts *o, const k3_tinfo *t, int fd, uint64_t at) {
    const int64_t e0 = t->ne[0], rows = t->ne[1] * t->ne[2];
    const uint64_t rb = df_type_row_bytes(t->type, e0);
    int64_t chunk = (int64_t)((8u << 20) / (uint64_t)(e0 * 4));
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    float *f = df_malloc((size_t)(chunk * e0) * sizeof(float));
    uint8_t *q = df_malloc((size_t)(rb * (uint64_t)chunk) + 64);
    if (!f || !q) { free(f); free(q); return DF_ERR_NOMEM; }
    float offset;
    const float scale = k3_scale(o, t, &offset);
    uint64_t st = o->seed ^ gr_hash(t->name);
    gr_splitmix(&st);
    const bool raw = o->raw_experts && t->expert && (t->type == DF_TYPE_MXFP4 || t->type == DF_TYPE_Q8_0);
    int rc = DF_OK;
    for (int64_t r0 = 0; r0 < rows && !rc; r0 += chunk) {
        const int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        if (raw) {
            for (int64_t r = 0; r < nr; r++) k3_raw_row(t->type, e0, &st, q + (uint64_t)r * rb, scale);
        } else {
            const int64_t n = nr * e0;
            for (int64_t i = 0; i < n; i++) f[i] = gr_urand(&st) * scale + offset;
            if (t->kind == KK_SSMA)
                for (int64_t i = 0; i < n; i++) f[i] = -expf(f[i]);
            if (t->type == DF_TYPE_F32) {
                memcpy(q, f, (size_t)n * sizeof(float));
            } else if (t->type == DF_TYPE_F16) {
                df_f16 *h = (df_f16 *)q;
                for (int64_t i = 0; i < n; i++) h[i] = df_f32_to_f16(f[i]);
            } else {
                for (int64_t r = 0; r < nr && !rc; r++)
                    rc = df_quantize_row(t->type, f + r * e0, q + (uint64_t)r * rb, e0);
            }
        }
        const uint64_t nb = rb * (uint64_t)nr;
        for (uint64_t done = 0; !rc && done < nb;) {
            ssize_t k = pwrite(fd, q + done, (size_t)(nb - done), (off_t)(at + done));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) rc = df_err(DF_ERR_IO, "%s: write: %s", o->out, strerror(errno));
            else done += (uint64_t)k;
        }
        at += nb;
    }
    free(f);
    free(q);
    return rc;
}

static void k3_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin gen-random --arch kimi-k3 [options] OUT.gguf\n\n"
        "Random Kimi K3 model (kimi-k3: KDA + MLA layers, latent MoE, block AttnRes, situ) with the\n"
        "keys and tensors llama.cpp's kimi-k3 loader reads. Deterministic (same args, same bytes).\n"
        "  --layers P         layer kinds, K = KDA, M = MLA, repeated to n-layer (default KMKK)\n"
        "  --type T           f32 | f16 | q8_0 | q4_k | mxfp4 for weight matrices (default f32);\n"
        "                     rows not a multiple of T's block fall back to q8_0, then f16\n"
        "  --expert-type T    type of the routed experts (*_exps) (default: --type)\n"
        "  --n-embd N (64)  --n-layer N (4)  --n-head N (4)  --head-dim N (KDA S, 16)  --conv N (4)\n"
        "  --q-lora N (32; 0 = attn_q)  --kv-lora N (32)  --d-nope N (16)  --d-rope N (16)  --d-v N (16)\n"
        "  --n-ff N (96)  --n-expert N (8)  --n-expert-used N (2)  --n-ff-exp N (32)\n"
        "  --n-shared N (2; 0 = no shared experts)  --latent N (32; 0 = experts at n-embd)\n"
        "  --n-dense N (1)  --block-size B (2; 0 = plain residual)  --lb F (-5)  --no-lb\n"
        "  --situ-beta F (4)  --situ-linear-beta F (25)  --scale F (routed scaling factor, 2)\n"
        "  --eps F (1e-5)  --no-norm (no top-k renorm)  --no-routed-norm  --no-attn-gate\n"
        "  --preset k3        real Kimi K3 geometry: 93 layers (KDA, MLA at il %% 4 == 3 and the\n"
        "                     last layer: 69 + 24), n-embd 7168, 96 heads of 128, q/kv LoRA\n"
        "                     1536/512, d-nope 128, d-rope 64, d-v 128, n-ff 33792, 896 experts,\n"
        "                     16 used, n-ff-exp 3072, latent 3584, 2 shared, B 12 (use --sparse, or\n"
        "                     --n-layer N for N-1 MoE layers after the dense layer 0; options after\n"
        "                     --preset override it; llama.cpp needs at least one K and one M layer)\n"
        "  --sparse           header only, data section a hole (zeros, no disk use): for `info`\n"
        "  --raw-experts      q8_0 / mxfp4 experts filled with random valid blocks directly (fast)\n"
        "  --vocab PATH|bytes llama2.c tokenizer (default fixtures models/tok512.bin)\n"
        "  --seed S (1)  --out-scale F (2)  --router-scale F (1)  --mat-scale F (1)  --res-scale F (1)\n"
        "  --ctx N (4096)\n");
}

static int k3_type(const char *v) {
    if (!strcasecmp(v, "f32")) return DF_TYPE_F32;
    if (!strcasecmp(v, "f16")) return DF_TYPE_F16;
    if (!strcasecmp(v, "q8_0")) return DF_TYPE_Q8_0;
    if (!strcasecmp(v, "q4_k")) return DF_TYPE_Q4_K;
    if (!strcasecmp(v, "mxfp4")) return DF_TYPE_MXFP4;
    return -1;
}

int df_gen_random_kimi_k3(int argc, char **argv) {
    k3_opts o = {.type = DF_TYPE_F32, .exp_type = -1, .n_embd = 64, .n_layer = 4, .n_head = 4, .head_dim = 16,
                 .conv = 4, .q_lora = 32, .kv_lora = 32, .d_nope = 16, .d_rope = 16, .d_v = 16, .n_ff = 96,
                 .n_expert = 8, .n_used = 2, .n_ff_exp = 32, .n_shared = 2, .latent = 32, .n_dense = 1,
                 .block = 2, .n_ctx = 4096, .lb = -5.0f, .situ_beta = 4.0f, .situ_lbeta = 25.0f,
                 .scale = 2.0f, .eps = 1e-5f, .has_lb = true, .norm = true, .routed_norm = true,
                 .attn_gate = true, .out_scale = 2.0f, .router_scale = 1.0f, .mat_scale = 1.0f,
                 .res_scale = 1.0f, .seed = 1, .layers = "KMKK"};
    bool preset = false, layers_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { k3_usage(stdout); return 0; }
        if (a[0] != '-' || !a[1]) {
            if (o.out) { fprintf(stderr, "gen-random: more than one output path\n"); return 2; }
            o.out = a;
            continue;
        }
        if (!strcmp(a, "--no-lb")) { o.has_lb = false; continue; }
        if (!strcmp(a, "--no-norm")) { o.norm = false; continue; }
        if (!strcmp(a, "--no-routed-norm")) { o.routed_norm = false; continue; }
        if (!strcmp(a, "--no-attn-gate")) { o.attn_gate = false; continue; }
        if (!strcmp(a, "--sparse")) { o.sparse = true; continue; }
        if (!strcmp(a, "--raw-experts")) { o.raw_experts = true; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "gen-random: %s needs a value\n", a); return 2; }
        const char *v = argv[++i];
        struct { const char *opt; int64_t *dst; } ints[] = {
            {"--n-embd", &o.n_embd}, {"--n-layer", &o.n_layer}, {"--n-head", &o.n_head},
            {"--head-dim", &o.head_dim}, {"--conv", &o.conv}, {"--q-lora", &o.q_lora},
            {"--kv-lora", &o.kv_lora}, {"--d-nope", &o.d_nope}, {"--d-rope", &o.d_rope}, {"--d-v", &o.d_v},
            {"--n-ff", &o.n_ff}, {"--n-expert", &o.n_expert}, {"--n-expert-used", &o.n_used},
            {"--n-ff-exp", &o.n_ff_exp}, {"--n-shared", &o.n_shared}, {"--latent", &o.latent},
            {"--n-dense", &o.n_dense}, {"--block-size", &o.block}, {"--ctx", &o.n_ctx},
        };
        bool done = false;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++) {
            if (strcmp(a, ints[k].opt)) continue;
            if (!gr_parse_i64(v, 1 << 24, ints[k].dst)) { fprintf(stderr, "gen-random: %s: bad value '%s'\n", a, v); return 2; }
            done = true;
        }
        if (done) continue;
        struct { const char *opt; float *dst; bool neg_ok; } flts[] = {
            {"--lb", &o.lb, true}, {"--situ-beta", &o.situ_beta, false}, {"--situ-linear-beta", &o.situ_lbeta, true},
            {"--scale", &o.scale, false}, {"--eps", &o.eps, false}, {"--out-scale", &o.out_scale, false},
            {"--router-scale", &o.router_scale, false}, {"--mat-scale", &o.mat_scale, false},
            {"--res-scale", &o.res_scale, false},
        };
        for (size_t k = 0; k < sizeof flts / sizeof flts[0] && !done; k++) {
            if (strcmp(a, flts[k].opt)) continue;
            char *e;
            float f = strtof(v, &e);
            if (e == v || *e || !isfinite(f) || (!flts[k].neg_ok && f < 0)) {
                fprintf(stderr, "gen-random: bad %s '%s'\n", a, v);
                return 2;
            }
            *flts[k].dst = f;
            done = true;
        }
        if (done) continue;
        if (!strcmp(a, "--arch")) {
            if (strcmp(v, "kimi-k3")) { fprintf(stderr, "gen-random: --arch %s\n", v); return 2; }
        } else if (!strcmp(a, "--preset")) {
            if (strcmp(v, "k3")) { fprintf(stderr, "gen-random: kimi-k3 --preset: k3\n"); return 2; }
            preset = true;
            o.n_embd = 7168; o.n_layer = 93; o.n_head = 96; o.head_dim = 128; o.conv = 4; o.q_lora = 1536;
            o.kv_lora = 512; o.d_nope = 128; o.d_rope = 64; o.d_v = 128; o.n_ff = 33792; o.n_expert = 896;
            o.n_used = 16; o.n_ff_exp = 3072; o.n_shared = 2; o.latent = 3584; o.n_dense = 1; o.block = 12;
            o.n_ctx = 1048576; o.scale = 1.0f;
        } else if (!strcmp(a, "--layers")) {
            if (!*v || strspn(v, "KM") != strlen(v)) { fprintf(stderr, "gen-random: --layers takes K and M only\n"); return 2; }
            o.layers = v;
            layers_given = true;
        } else if (!strcmp(a, "--type") || !strcmp(a, "--expert-type")) {
            int t = k3_type(v);
            if (t < 0) { fprintf(stderr, "gen-random: %s must be f32, f16, q8_0, q4_k or mxfp4\n", a); return 2; }
            if (a[2] == 't') o.type = t; else o.exp_type = t;
        } else if (!strcmp(a, "--vocab")) {
            o.vocab = v;
        } else if (!strcmp(a, "--seed")) {
            char *e;
            errno = 0;
            o.seed = strtoull(v, &e, 0);
            if (errno || e == v || *e) { fprintf(stderr, "gen-random: bad --seed '%s'\n", a); return 2; }
        } else {
            fprintf(stderr, "gen-random: unknown option %s for kimi-k3\n", a);
            k3_usage(stderr);
            return 2;
        }
    }
    if (!o.out) { k3_usage(stderr); return 2; }
    if (o.exp_type < 0) o.exp_type = o.type;
    const char *why = NULL;
    if (o.n_embd < 1 || o.n_layer < 1 || o.n_layer > 512 || o.n_head < 1 || o.head_dim < 1 || o.conv < 1 ||
        o.kv_lora < 1 || o.d_nope < 1 || o.d_v < 1 || o.d_rope < 2 || (o.d_rope & 1) || o.n_ff_exp < 1)
        why = "dims must be positive, d-rope even, n-layer <= 512";
    else if (o.n_dense > o.n_layer) why = "n-dense must be <= n-layer";
    else if (o.n_dense < o.n_layer && (o.n_used < 1 || o.n_used > o.n_expert || o.n_expert > 1024))
        why = "need 1 <= n-expert-used <= n-expert <= 1024";
    else if (o.latent > o.n_embd) why = "latent must be <= n-embd";
    if (why) { fprintf(stderr, "gen-random: %s\n", why); return 2; }

    /* layer kinds: the pattern repeated; the preset puts MLA at il % 4 == 3 and the last layer */
    uint32_t *hkv = df_calloc((size_t)o.n_layer, sizeof(uint32_t));
    if (!hkv) return 1;
    const size_t np = strlen(o.layers);
    for (int64_t il = 0; il < o.n_layer; il++) {
        if (preset && !layers_given)
            hkv[il] = (il % 4 == 3 || il == 92) ? 1 : 0;
        else
            hkv[il] = o.layers[il % (int64_t)np] == 'M';
    }

    char vbuf[4096];
    if (!o.vocab) {
        const char *root = getenv("DELTAFIN_FIXTURES");
        snprintf(vbuf, sizeof vbuf, "%s/models/tok512.bin", root ? root : "../shared/fixtures");
        o.vocab = access(vbuf, R_OK) == 0 ? vbuf : "bytes";
    }

    int rc = DF_OK, fd = -1;
    k3_ctx x = {.o = &o};
    x.t = df_calloc(K3_MAX_T, sizeof *x.t);
    x.w = df_gguf_writer_new(32);
    if (!x.t || !x.w) { rc = DF_ERR_NOMEM; goto done; }
    df_gguf_writer *w = x.w;
    const char *A = "kimi-k3";
    char key[128];
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    const int64_t E = o.n_embd, H = o.n_head, S = o.head_dim, DI = H * S, dq = o.d_nope + o.d_rope;
    const int64_t Lt = o.latent > 0 ? o.latent : E, Fs = o.n_ff_exp * (o.n_shared > 0 ? o.n_shared : 1);
    int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : o.type == DF_TYPE_Q8_0 ? 7 : 15;
    if (o.exp_type == DF_TYPE_MXFP4) ftype = 38;
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) ||
        (rc = df_gguf_w_str(w, "general.name", preset ? "deltafin-random-kimi-k3-real-geometry" : "deltafin-random-kimi-k3")) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type != DF_TYPE_F32 && o.type != DF_TYPE_F16 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))) ||
        (rc = KU32("context_length", o.n_ctx)) || (rc = KU32("embedding_length", E)) ||
        (rc = KU32("block_count", o.n_layer)) || (rc = KU32("feed_forward_length", o.n_ff)) ||
        (rc = KU32("attention.head_count", H)) ||
        (rc = (snprintf(key, sizeof key, "%s.attention.head_count_kv", A),
               df_gguf_w_arr(w, key, DF_GGUF_U32, hkv, (uint64_t)o.n_layer))) ||
        (rc = KU32("attention.key_length", o.kv_lora + o.d_rope)) ||
        (rc = KU32("attention.value_length", o.kv_lora)) ||
        (rc = KU32("attention.key_length_mla", dq)) || (rc = KU32("attention.value_length_mla", o.d_v)) ||
        (rc = KU32("attention.q_lora_rank", o.q_lora)) || (rc = KU32("attention.kv_lora_rank", o.kv_lora)) ||
        (rc = KU32("rope.dimension_count", o.d_rope)) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", o.eps)) ||
        (rc = KU32("ssm.conv_kernel", o.conv)) || (rc = KU32("kda.head_dim", S)) ||
        (o.has_lb && (rc = KF32("kda.gate_lower_bound", o.lb))) ||
        (rc = KU32("leading_dense_block_count", o.n_dense)) || (rc = KU32("expert_count", o.n_expert)) ||
        (rc = KU32("expert_used_count", o.n_used)) || (rc = KU32("expert_shared_count", o.n_shared)) ||
        (rc = KU32("expert_feed_forward_length", o.n_ff_exp)) || (rc = KF32("expert_weights_scale", o.scale)) ||
        (rc = (snprintf(key, sizeof key, "%s.expert_weights_norm", A), df_gguf_w_bool(w, key, o.norm))) ||
        (rc = KU32("expert_gating_func", 2)) || (rc = KU32("expert_latent_length", o.latent)) ||
        (rc = KU32("attn_res.block_size", o.block)) || (rc = KF32("activation.situ_beta", o.situ_beta)) ||
        (rc = KF32("activation.situ_linear_beta", o.situ_lbeta)))
        goto done;
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, o.vocab, &n_vocab))) goto done;
    if ((rc = KU32("vocab_size", n_vocab))) goto done;
#undef KU32
#undef KF32
#define T(...) do { if ((rc = k3_tensor(&x, __VA_ARGS__))) goto done; } while (0)
    T(KK_EMBD, 2, E, n_vocab, 1, "token_embd.weight");
    for (int b = 0; b < (int)o.n_layer; b++) {
        T(KK_NORM, 1, E, 1, 1, "blk.%d.attn_norm.weight", b);
        if (o.block > 0) T(KK_RES, 1, E, 1, 1, "blk.%d.attn_res_score.weight", b);
        if (!hkv[b]) {
            T(KK_MAT, 2, E, DI, 1, "blk.%d.attn_q.weight", b);
            T(KK_MAT, 2, E, DI, 1, "blk.%d.attn_k.weight", b);
            T(KK_MAT, 2, E, DI, 1, "blk.%d.attn_v.weight", b);
            T(KK_CONV, 3, o.conv, 1, DI, "blk.%d.ssm_conv1d_q.weight", b);
            T(KK_CONV, 3, o.conv, 1, DI, "blk.%d.ssm_conv1d_k.weight", b);
            T(KK_CONV, 3, o.conv, 1, DI, "blk.%d.ssm_conv1d_v.weight", b);
            T(KK_MAT, 2, E, S, 1, "blk.%d.ssm_f_a.weight", b);
            T(KK_MAT, 2, S, DI, 1, "blk.%d.ssm_f_b.weight", b);
            T(KK_MAT, 2, E, H, 1, "blk.%d.ssm_beta.weight", b);
            T(KK_SSMA, 1, H, 1, 1, "blk.%d.ssm_a", b);
            T(KK_DT, 1, DI, 1, 1, "blk.%d.ssm_dt.bias", b);
            T(KK_MAT, 2, E, DI, 1, "blk.%d.ssm_g.weight", b);
            T(KK_NORM, 1, S, 1, 1, "blk.%d.ssm_norm.weight", b);
            T(KK_MAT, 2, DI, E, 1, "blk.%d.attn_output.weight", b);
        } else {
            if (o.q_lora > 0) {
                T(KK_MAT, 2, E, o.q_lora, 1, "blk.%d.attn_q_a.weight", b);
                T(KK_NORM, 1, o.q_lora, 1, 1, "blk.%d.attn_q_a_norm.weight", b);
                T(KK_MAT, 2, o.q_lora, H * dq, 1, "blk.%d.attn_q_b.weight", b);
            } else {
                T(KK_MAT, 2, E, H * dq, 1, "blk.%d.attn_q.weight", b);
            }
            T(KK_MAT, 2, E, o.kv_lora + o.d_rope, 1, "blk.%d.attn_kv_a_mqa.weight", b);
            T(KK_NORM, 1, o.kv_lora, 1, 1, "blk.%d.attn_kv_a_norm.weight", b);
            T(KK_MAT, 3, o.d_nope, o.kv_lora, H, "blk.%d.attn_k_b.weight", b);
            T(KK_MAT, 3, o.kv_lora, o.d_v, H, "blk.%d.attn_v_b.weight", b);
            if (o.attn_gate) T(KK_MAT, 2, E, H * o.d_v, 1, "blk.%d.attn_gate.weight", b);
            T(KK_MAT, 2, H * o.d_v, E, 1, "blk.%d.attn_output.weight", b);
        }
        T(KK_NORM, 1, E, 1, 1, "blk.%d.ffn_norm.weight", b);
        if (o.block > 0) T(KK_RES, 1, E, 1, 1, "blk.%d.ffn_res_score.weight", b);
        if (b < o.n_dense) {
            T(KK_MAT, 2, E, o.n_ff, 1, "blk.%d.ffn_gate.weight", b);
            T(KK_MAT, 2, o.n_ff, E, 1, "blk.%d.ffn_down.weight", b);
            T(KK_MAT, 2, E, o.n_ff, 1, "blk.%d.ffn_up.weight", b);
        } else {
            T(KK_ROUTER, 2, E, o.n_expert, 1, "blk.%d.ffn_gate_inp.weight", b);
            T(KK_BIAS, 1, o.n_expert, 1, 1, "blk.%d.exp_probs_b.bias", b);
            T(KK_MAT, 3, Lt, o.n_ff_exp, o.n_expert, "blk.%d.ffn_gate_exps.weight", b);
            T(KK_MAT, 3, o.n_ff_exp, Lt, o.n_expert, "blk.%d.ffn_down_exps.weight", b);
            T(KK_MAT, 3, Lt, o.n_ff_exp, o.n_expert, "blk.%d.ffn_up_exps.weight", b);
            if (o.latent > 0) {
                T(KK_MAT, 2, E, Lt, 1, "blk.%d.ffn_routed_down.weight", b);
                T(KK_MAT, 2, Lt, E, 1, "blk.%d.ffn_routed_up.weight", b);
                if (o.routed_norm) T(KK_NORM, 1, Lt, 1, 1, "blk.%d.ffn_routed_norm.weight", b);
            }
            if (o.n_shared > 0) {
                T(KK_MAT, 2, E, Fs, 1, "blk.%d.ffn_gate_shexp.weight", b);
                T(KK_MAT, 2, Fs, E, 1, "blk.%d.ffn_down_shexp.weight", b);
                T(KK_MAT, 2, E, Fs, 1, "blk.%d.ffn_up_shexp.weight", b);
            }
        }
    }
    T(KK_NORM, 1, E, 1, 1, "output_norm.weight");
    T(KK_OUT, 2, E, n_vocab, 1, "output.weight");
    if (o.block > 0) T(KK_RES, 1, E, 1, 1, "output_res_score.weight");
#undef T
    {
        const uint64_t ds = df_gguf_writer_data_start(w);
        uint64_t end = ds;
        for (int i = 0; i < x.nt; i++) {
            const k3_tinfo *t = &x.t[i];
            uint64_t e = ds + df_gguf_writer_tensor_offset(w, i) +
                         df_type_row_bytes(t->type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2]);
            if (e > end) end = e;
        }
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", o.out);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) { rc = df_err(DF_ERR_IO, "%s: %s", tmp, strerror(errno)); goto done; }
        rc = df_gguf_writer_write_header(w, fd);
        if (!rc && ftruncate(fd, (off_t)end) != 0) rc = df_err(DF_ERR_IO, "%s: ftruncate: %s", tmp, strerror(errno));
        for (int i = 0; i < x.nt && !rc && !o.sparse; i++)
            rc = k3_write_tensor(&o, &x.t[i], fd, ds + df_gguf_writer_tensor_offset(w, i));
        if (close(fd) != 0 && !rc) rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno));
        fd = -1;
        if (!rc && rename(tmp, o.out) != 0) rc = df_err(DF_ERR_IO, "%s: rename: %s", o.out, strerror(errno));
        if (rc) unlink(tmp);
    }
    if (!rc) {
        int nk = 0;
        for (int64_t il = 0; il < o.n_layer; il++) nk += hkv[il] == 0;
        fprintf(stderr, "gen-random: wrote %s (kimi-k3, %s / experts %s, %lld layers: %d KDA + %lld MLA, "
                "n_embd %lld, %lld experts, vocab %lld from %s%s)\n", o.out, df_gguf_tensor_type_name(o.type),
                df_gguf_tensor_type_name(o.exp_type), (long long)o.n_layer, nk, (long long)(o.n_layer - nk),
                (long long)E, (long long)o.n_expert, (long long)n_vocab, o.vocab, o.sparse ? ", sparse" : "");
    }
done:
    if (fd >= 0) close(fd);
    if (rc) fprintf(stderr, "gen-random: %s\n", deltafin_errmsg());
    df_gguf_writer_free(x.w);
    free(x.t);
    free(hkv);
    return rc ? 1 : 0;
}
