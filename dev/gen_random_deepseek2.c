/* gen_random_deepseek2.c — `deltafin gen-random --arch deepseek2 [--variant V] ...`: a small
 * random deepseek2 model (formats.md §3.4) with the exact names, shapes and keys llama.cpp
 * expects: q LoRA or the Lite attn_q, MLA (attn_k_b / attn_v_b + *_mla keys) or the legacy
 * attn_kv_b, leading dense layers, sigmoid/softmax gating, exp_probs_b, expert groups, shared
 * experts, YaRN keys. Deterministic like gen_random.c (per-tensor splitmix64 streams, values
 * k·2^-23·scale + offset, correctly rounded sqrtf only). Small models only (built in memory).
 * Called from cmd_gen_random when --arch deepseek2 is given. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/gen_random.h"
#include "dev/llama2c.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <strings.h>
#include <unistd.h>

typedef struct {
    int type;
    int64_t n_embd, n_layer, n_head, q_lora, kv_lora, d_nope, d_rope, d_v, n_ff, n_expert, n_used;
    int64_t n_ff_exp, n_shared, n_dense, groups, groups_used, n_ctx;
    int gating;           /* 1 softmax, 2 sigmoid */
    bool bias, norm, legacy, hf_betas_keys, fused, sparse;
    float scale, rope_base, yarn_factor, yarn_log_mul, beta_fast, beta_slow;
    float out_scale, router_scale;
    uint64_t seed;
    const char *vocab, *out, *variant;
} ds_opts;


enum { DK_NORM, DK_BIAS, DK_EMBD, DK_MAT, DK_ROUTER, DK_OUT };

typedef struct {
    df_gguf_writer *w;
    const ds_opts *o;
    void **bufs;
    int n, cap;
    uint64_t tbytes[8192];      /* data bytes of each tensor added (for --sparse) */
    int nt;
} ds_ctx;

static int ds_tensor(ds_ctx *x, int kind, int n_dims, int64_t e0, int64_t e1, int64_t e2, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static int ds_tensor(ds_ctx *x, int kind, int n_dims, int64_t e0, int64_t e1, int64_t e2, const char *fmt, ...) {
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const ds_opts *o = x->o;
    int type = (n_dims == 1 || kind == DK_ROUTER) ? DF_TYPE_F32 : o->type;
    if (type == DF_TYPE_Q8_0 && e0 % 32)
        return df_err(DF_ERR_INVALID, "tensor %s: row length %lld not a multiple of 32 (q8_0)", name, (long long)e0);
    const int64_t n = e0 * e1 * e2;
    if (x->nt >= 8192) return df_err(DF_ERR_RANGE, "too many tensors");
    x->tbytes[x->nt++] = df_type_row_bytes(type, e0) * (uint64_t)(e1 * e2);
    if (o->sparse) { /* header only; the data section is a hole (zeros) */
        int64_t ne[3] = {e0, e1, e2};
        return df_gguf_w_tensor(x->w, name, type, n_dims, ne, NULL);
    }
    float *f = df_malloc((size_t)n * sizeof(float));
    if (!f) return DF_ERR_NOMEM;
    float scale = 1.0f, offset = 0.0f;
    switch (kind) {
    case DK_NORM: scale = 0.2f; offset = 1.0f; break;
    case DK_BIAS: scale = 0.2f; break;
    case DK_EMBD: scale = 1.0f; break;
    case DK_MAT: scale = sqrtf(3.0f / (float)e0); break;
    case DK_ROUTER: scale = sqrtf(3.0f / (float)e0) * o->router_scale; break;
    case DK_OUT: scale = sqrtf(3.0f / (float)e0) * o->out_scale; break;
    }
    uint64_t st = o->seed ^ gr_hash(name);
    gr_splitmix(&st);
    for (int64_t i = 0; i < n; i++) f[i] = gr_urand(&st) * scale + offset;
    void *data = f;
    if (type == DF_TYPE_F16) {
        df_f16 *h = df_malloc((size_t)n * sizeof(df_f16));
        if (!h) { free(f); return DF_ERR_NOMEM; }
        for (int64_t i = 0; i < n; i++) h[i] = df_f32_to_f16(f[i]);
        free(f);
        data = h;
    } else if (type != DF_TYPE_F32) {
        uint64_t rb = df_type_row_bytes(type, e0);
        uint8_t *q = df_malloc((size_t)(rb * (uint64_t)(n / e0)));
        if (!q) { free(f); return DF_ERR_NOMEM; }
        for (int64_t r = 0; r < n / e0; r++) {
            int rc = df_quantize_row(type, f + r * e0, q + (uint64_t)r * rb, e0);
            if (rc) { free(f); free(q); return rc; }
        }
        free(f);
        data = q;
    }
    if (x->n == x->cap) {
        int nc = x->cap ? 2 * x->cap : 64;
        void **p = df_realloc(x->bufs, (size_t)nc * sizeof *p);
        if (!p) { free(data); return DF_ERR_NOMEM; }
        x->bufs = p;
        x->cap = nc;
    }
    x->bufs[x->n++] = data;
    int64_t ne[3] = {e0, e1, e2};
    return df_gguf_w_tensor(x->w, name, type, n_dims, ne, data);
}

static void ds_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin gen-random --arch deepseek2 [--variant V] [options] OUT.gguf\n\n"
        "Small random deepseek2 model (DeepSeek-V2/V3, Kimi-K2 layout). Deterministic.\n"
        "  --variant V        v3 (default: q LoRA, MLA, sigmoid + exp_probs_b + 4 groups keep 2,\n"
        "                     norm, scale 2.5, YaRN 40) | k2 (v3 with 1 group, base 50000, YaRN 32,\n"
        "                     scale 2.827, HF beta keys 1/1) | lite (attn_q, softmax, no norm,\n"
        "                     2 shared experts) | legacy (v3 with attn_kv_b, no *_mla keys)\n"
        "  --type T           f32 | f16 | q8_0 (default f32)\n"
        "  --n-embd N (64)  --n-layer N (3)  --n-head N (4)  --q-lora N (32; 0 = Lite attn_q)\n"
        "  --kv-lora N (64)  --d-nope N (32)  --d-rope N (16)  --d-v N (32)  --n-ff N (96)\n"
        "  --n-expert N (8)  --n-expert-used N (2)  --n-ff-exp N (32)  --n-shared N (1)\n"
        "  --n-dense N (1)  --groups G (v3 4)  --groups-used U (v3 2)  --gating softmax|sigmoid\n"
        "  --no-bias  --no-norm  --legacy  --fused (ffn_gate_up_exps)  --scale F  --rope-base F\n"
        "  --yarn-factor F\n"
        "  --preset kimi-k2    Kimi-K2 widths (61 layers, 384 experts; ~1 TB: use with --sparse)\n"
        "  --sparse            write the header only and extend the file with a hole (all-zero\n"
        "                      weights, no disk use): for `deltafin info` / memory plans at real shapes\n"
        "  --vocab PATH|bytes  --seed S (1)  --out-scale F (4)  --router-scale F (3)  --ctx N (4096)\n");
}

int df_gen_random_deepseek2(int argc, char **argv) {
    ds_opts o = {.type = DF_TYPE_F32, .n_embd = 64, .n_layer = 3, .n_head = 4, .q_lora = 32, .kv_lora = 64,
                 .d_nope = 32, .d_rope = 16, .d_v = 32, .n_ff = 96, .n_expert = 8, .n_used = 2,
                 .n_ff_exp = 32, .n_shared = 1, .n_dense = 1, .groups = -1, .groups_used = -1,
                 .n_ctx = 4096, .gating = -1, .bias = true, .norm = true, .scale = -1.0f,
                 .out_scale = 4.0f, .router_scale = 3.0f, .seed = 1, .variant = "v3"};
    int64_t q_lora = -1, n_shared = -1;
    float rope_base = -1.0f, yarn_factor = -1.0f;
    bool no_bias = false, no_norm = false, legacy = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { ds_usage(stdout); return 0; }
        if (a[0] != '-' || !a[1]) {
            if (o.out) { fprintf(stderr, "gen-random: more than one output path\n"); return 2; }
            o.out = a;
            continue;
        }
        if (!strcmp(a, "--no-bias")) { no_bias = true; continue; }
        if (!strcmp(a, "--no-norm")) { no_norm = true; continue; }
        if (!strcmp(a, "--legacy")) { legacy = true; continue; }
        if (!strcmp(a, "--fused")) { o.fused = true; continue; }
        if (!strcmp(a, "--sparse")) { o.sparse = true; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "gen-random: %s needs a value\n", a); return 2; }
        const char *v = argv[++i];
        struct { const char *opt; int64_t *dst; } ints[] = {
            {"--n-embd", &o.n_embd}, {"--n-layer", &o.n_layer}, {"--n-head", &o.n_head},
            {"--q-lora", &q_lora}, {"--kv-lora", &o.kv_lora}, {"--d-nope", &o.d_nope},
            {"--d-rope", &o.d_rope}, {"--d-v", &o.d_v}, {"--n-ff", &o.n_ff}, {"--n-expert", &o.n_expert},
            {"--n-expert-used", &o.n_used}, {"--n-ff-exp", &o.n_ff_exp}, {"--n-shared", &n_shared},
            {"--n-dense", &o.n_dense}, {"--groups", &o.groups}, {"--groups-used", &o.groups_used},
            {"--ctx", &o.n_ctx},
        };
        bool done = false;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++) {
            if (strcmp(a, ints[k].opt)) continue;
            if (!gr_parse_i64(v, 1 << 20, ints[k].dst)) { fprintf(stderr, "gen-random: %s: bad value '%s'\n", a, v); return 2; }
            done = true;
        }
        if (done) continue;
        if (!strcmp(a, "--preset")) {
            if (strcmp(v, "kimi-k2")) { fprintf(stderr, "gen-random: deepseek2 --preset: kimi-k2\n"); return 2; }
            o.variant = "k2";
            o.n_embd = 7168; o.n_layer = 61; o.n_head = 64; q_lora = 1536; o.kv_lora = 512; o.d_nope = 128;
            o.d_rope = 64; o.d_v = 128; o.n_ff = 18432; o.n_expert = 384; o.n_used = 8; o.n_ff_exp = 2048;
            n_shared = 1; o.n_dense = 1; o.n_ctx = 131072;
        } else if (!strcmp(a, "--arch")) {
            if (strcmp(v, "deepseek2")) { fprintf(stderr, "gen-random: --arch %s\n", v); return 2; }
        } else if (!strcmp(a, "--variant")) {
            if (strcmp(v, "v3") && strcmp(v, "k2") && strcmp(v, "lite") && strcmp(v, "legacy")) {
                fprintf(stderr, "gen-random: unknown --variant '%s'\n", v);
                return 2;
            }
            o.variant = v;
        } else if (!strcmp(a, "--type")) {
            if (!strcasecmp(v, "f32")) o.type = DF_TYPE_F32;
            else if (!strcasecmp(v, "f16")) o.type = DF_TYPE_F16;
            else if (!strcasecmp(v, "q8_0")) o.type = DF_TYPE_Q8_0;
            else { fprintf(stderr, "gen-random: --type must be f32, f16 or q8_0\n"); return 2; }
        } else if (!strcmp(a, "--gating")) {
            if (!strcmp(v, "softmax")) o.gating = 1;
            else if (!strcmp(v, "sigmoid")) o.gating = 2;
            else { fprintf(stderr, "gen-random: --gating softmax|sigmoid\n"); return 2; }
        } else if (!strcmp(a, "--vocab")) {
            o.vocab = v;
        } else if (!strcmp(a, "--seed")) {
            char *e;
            errno = 0;
            o.seed = strtoull(v, &e, 0);
            if (errno || e == v || *e) { fprintf(stderr, "gen-random: bad --seed '%s'\n", v); return 2; }
        } else if (!strcmp(a, "--rope-base") || !strcmp(a, "--yarn-factor")) {
            char *e;
            float f = strtof(v, &e);
            if (e == v || *e || !(f > 0) || !isfinite(f)) { fprintf(stderr, "gen-random: bad %s '%s'\n", a, v); return 2; }
            if (a[2] == 'r') rope_base = f; else yarn_factor = f;
        } else if (!strcmp(a, "--scale") || !strcmp(a, "--out-scale") || !strcmp(a, "--router-scale")) {
            char *e;
            float f = strtof(v, &e);
            if (e == v || *e || !(f >= 0) || !isfinite(f)) { fprintf(stderr, "gen-random: bad %s '%s'\n", a, v); return 2; }
            if (a[2] == 's') o.scale = f; else if (a[2] == 'o') o.out_scale = f; else o.router_scale = f;
        } else {
            fprintf(stderr, "gen-random: unknown option %s for deepseek2\n", a);
            ds_usage(stderr);
            return 2;
        }
    }
    if (!o.out) { ds_usage(stderr); return 2; }
    /* variant defaults, then explicit options */
    const bool k2 = !strcmp(o.variant, "k2"), lite = !strcmp(o.variant, "lite");
    o.rope_base = k2 ? 50000.0f : 10000.0f;
    o.yarn_factor = k2 ? 32.0f : 40.0f;
    o.yarn_log_mul = lite ? 0.0707f : 0.1f;
    o.hf_betas_keys = k2;
    o.beta_fast = 1.0f;
    o.beta_slow = 1.0f;
    if (lite) { o.q_lora = 0; o.n_shared = 2; o.bias = false; o.norm = false; }
    if (!strcmp(o.variant, "legacy")) o.legacy = true;
    if (o.gating < 0) o.gating = lite ? 1 : 2;
    if (o.groups < 0) o.groups = (lite || k2) ? 1 : 4;
    if (o.groups_used < 0) o.groups_used = (lite || k2) ? 1 : 2;
    if (o.scale < 0) o.scale = lite ? 1.0f : k2 ? 2.827f : 2.5f;
    if (q_lora >= 0) o.q_lora = q_lora;
    if (rope_base > 0) o.rope_base = rope_base;
    if (yarn_factor > 0) o.yarn_factor = yarn_factor;
    if (n_shared >= 0) o.n_shared = n_shared;
    if (no_bias) o.bias = false;
    if (no_norm) o.norm = false;
    if (legacy) o.legacy = true;
    const char *why = NULL;
    if (o.n_embd < 1 || o.n_layer < 1 || o.n_head < 1 || o.kv_lora < 1 || o.d_nope < 1 || o.d_v < 1 ||
        o.d_rope < 2 || (o.d_rope & 1))
        why = "dims must be positive and d-rope even";
    else if (o.n_dense > o.n_layer) why = "n-dense must be <= n-layer";
    else if (o.n_used < 1 || o.n_used > o.n_expert || o.n_expert > 512) why = "need 1 <= n-expert-used <= n-expert <= 512";
    else if (o.groups > 1 && (o.n_expert % o.groups || o.groups_used < 1 || o.groups_used > o.groups))
        why = "groups must divide n-expert and 1 <= groups-used <= groups";
    if (why) { fprintf(stderr, "gen-random: %s\n", why); return 2; }

    char vbuf[4096];
    if (!o.vocab) {
        const char *root = getenv("DELTAFIN_FIXTURES");
        snprintf(vbuf, sizeof vbuf, "%s/models/tok512.bin", root ? root : "../shared/fixtures");
        o.vocab = access(vbuf, R_OK) == 0 ? vbuf : "bytes";
    }

    int rc = DF_OK;
    static ds_ctx x;
    memset(&x, 0, sizeof x);
    x.o = &o;
    x.w = df_gguf_writer_new(32);
    if (!x.w) return 1;
    df_gguf_writer *w = x.w;
    const char *A = "deepseek2";
    char key[128];
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    const int64_t H = o.n_embd, nh = o.n_head, dq = o.d_nope + o.d_rope;
    int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : 7;
    char nm[64];
    snprintf(nm, sizeof nm, "deltafin-random-deepseek2-%s", o.variant);
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) || (rc = df_gguf_w_str(w, "general.name", nm)) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type == DF_TYPE_Q8_0 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))) ||
        (rc = KU32("context_length", o.n_ctx)) || (rc = KU32("embedding_length", H)) ||
        (rc = KU32("block_count", o.n_layer)) || (rc = KU32("feed_forward_length", o.n_ff)) ||
        (rc = KU32("attention.head_count", nh)) ||
        (rc = KU32("attention.head_count_kv", o.legacy ? nh : 1)) ||
        (rc = KU32("attention.key_length", o.legacy ? dq : o.kv_lora + o.d_rope)) ||
        (rc = KU32("attention.value_length", o.legacy ? o.d_v : o.kv_lora)) ||
        (!o.legacy && (rc = KU32("attention.key_length_mla", dq))) ||
        (!o.legacy && (rc = KU32("attention.value_length_mla", o.d_v))) ||
        (rc = KU32("attention.q_lora_rank", o.q_lora)) || (rc = KU32("attention.kv_lora_rank", o.kv_lora)) ||
        (rc = KU32("rope.dimension_count", o.d_rope)) || (rc = KF32("rope.freq_base", o.rope_base)) ||
        (rc = (snprintf(key, sizeof key, "%s.rope.scaling.type", A), df_gguf_w_str(w, key, "yarn"))) ||
        (rc = KF32("rope.scaling.factor", o.yarn_factor)) ||
        (rc = KU32("rope.scaling.original_context_length", 4096)) ||
        (rc = KF32("rope.scaling.yarn_log_multiplier", o.yarn_log_mul)) ||
        (o.hf_betas_keys && (rc = KF32("rope.scaling.yarn_beta_fast", o.beta_fast))) ||
        (o.hf_betas_keys && (rc = KF32("rope.scaling.yarn_beta_slow", o.beta_slow))) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", 1e-6f)) ||
        (rc = KU32("leading_dense_block_count", o.n_dense)) || (rc = KU32("expert_count", o.n_expert)) ||
        (rc = KU32("expert_used_count", o.n_used)) || (rc = KU32("expert_shared_count", o.n_shared)) ||
        (rc = KU32("expert_feed_forward_length", o.n_ff_exp)) || (rc = KF32("expert_weights_scale", o.scale)) ||
        (rc = (snprintf(key, sizeof key, "%s.expert_weights_norm", A), df_gguf_w_bool(w, key, o.norm))) ||
        (rc = KU32("expert_gating_func", o.gating)) || (rc = KU32("expert_group_count", o.groups)) ||
        (rc = KU32("expert_group_used_count", o.groups_used)))
        goto done;
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, o.vocab, &n_vocab))) goto done;
    if ((rc = KU32("vocab_size", n_vocab))) goto done;
#undef KU32
#undef KF32
#define T(...) do { if ((rc = ds_tensor(&x, __VA_ARGS__))) goto done; } while (0)
    T(DK_EMBD, 2, H, n_vocab, 1, "token_embd.weight");
    for (int b = 0; b < (int)o.n_layer; b++) {
        T(DK_NORM, 1, H, 1, 1, "blk.%d.attn_norm.weight", b);
        if (o.q_lora > 0) {
            T(DK_MAT, 2, H, o.q_lora, 1, "blk.%d.attn_q_a.weight", b);
            T(DK_NORM, 1, o.q_lora, 1, 1, "blk.%d.attn_q_a_norm.weight", b);
            T(DK_MAT, 2, o.q_lora, nh * dq, 1, "blk.%d.attn_q_b.weight", b);
        } else {
            T(DK_MAT, 2, H, nh * dq, 1, "blk.%d.attn_q.weight", b);
        }
        T(DK_MAT, 2, H, o.kv_lora + o.d_rope, 1, "blk.%d.attn_kv_a_mqa.weight", b);
        T(DK_NORM, 1, o.kv_lora, 1, 1, "blk.%d.attn_kv_a_norm.weight", b);
        if (o.legacy) {
            T(DK_MAT, 2, o.kv_lora, nh * (o.d_nope + o.d_v), 1, "blk.%d.attn_kv_b.weight", b);
        } else {
            T(DK_MAT, 3, o.d_nope, o.kv_lora, nh, "blk.%d.attn_k_b.weight", b);
            T(DK_MAT, 3, o.kv_lora, o.d_v, nh, "blk.%d.attn_v_b.weight", b);
        }
        T(DK_MAT, 2, nh * o.d_v, H, 1, "blk.%d.attn_output.weight", b);
        T(DK_NORM, 1, H, 1, 1, "blk.%d.ffn_norm.weight", b);
        if (b < o.n_dense) {
            T(DK_MAT, 2, H, o.n_ff, 1, "blk.%d.ffn_gate.weight", b);
            T(DK_MAT, 2, o.n_ff, H, 1, "blk.%d.ffn_down.weight", b);
            T(DK_MAT, 2, H, o.n_ff, 1, "blk.%d.ffn_up.weight", b);
        } else {
            T(DK_ROUTER, 2, H, o.n_expert, 1, "blk.%d.ffn_gate_inp.weight", b);
            if (o.bias) T(DK_BIAS, 1, o.n_expert, 1, 1, "blk.%d.exp_probs_b.bias", b);
            if (o.fused) {
                T(DK_MAT, 3, H, 2 * o.n_ff_exp, o.n_expert, "blk.%d.ffn_gate_up_exps.weight", b);
                T(DK_MAT, 3, o.n_ff_exp, H, o.n_expert, "blk.%d.ffn_down_exps.weight", b);
            } else {
                T(DK_MAT, 3, H, o.n_ff_exp, o.n_expert, "blk.%d.ffn_gate_exps.weight", b);
                T(DK_MAT, 3, o.n_ff_exp, H, o.n_expert, "blk.%d.ffn_down_exps.weight", b);
                T(DK_MAT, 3, H, o.n_ff_exp, o.n_expert, "blk.%d.ffn_up_exps.weight", b);
            }
            if (o.n_shared > 0) {
                T(DK_MAT, 2, H, o.n_ff_exp * o.n_shared, 1, "blk.%d.ffn_gate_shexp.weight", b);
                T(DK_MAT, 2, o.n_ff_exp * o.n_shared, H, 1, "blk.%d.ffn_down_shexp.weight", b);
                T(DK_MAT, 2, H, o.n_ff_exp * o.n_shared, 1, "blk.%d.ffn_up_shexp.weight", b);
            }
        }
    }
    T(DK_NORM, 1, H, 1, 1, "output_norm.weight");
    T(DK_OUT, 2, H, n_vocab, 1, "output.weight");
#undef T
    if (o.sparse) {
        uint64_t end = df_gguf_writer_data_start(w);
        for (int i = 0; i < x.nt; i++) {
            uint64_t e = df_gguf_writer_data_start(w) + df_gguf_writer_tensor_offset(w, i) + x.tbytes[i];
            if (e > end) end = e;
        }
        int fd = open(o.out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) { rc = df_err(DF_ERR_IO, "%s: %s", o.out, strerror(errno)); goto done; }
        rc = df_gguf_writer_write_header(w, fd);
        if (!rc && ftruncate(fd, (off_t)end) != 0) rc = df_err(DF_ERR_IO, "%s: ftruncate: %s", o.out, strerror(errno));
        if (close(fd) != 0 && !rc) rc = df_err(DF_ERR_IO, "%s: close: %s", o.out, strerror(errno));
    } else {
        rc = df_gguf_writer_save(w, o.out);
    }
    if (!rc)
        fprintf(stderr, "gen-random: wrote %s (deepseek2 %s, %s, %lld layers, n_embd %lld, vocab %lld from %s)\n",
                o.out, o.variant, o.type == DF_TYPE_F32 ? "F32" : o.type == DF_TYPE_F16 ? "F16" : "Q8_0",
                (long long)o.n_layer, (long long)H, (long long)n_vocab, o.vocab);
done:
    df_gguf_writer_free(w);
    for (int i = 0; i < x.n; i++) free(x.bufs[i]);
    free(x.bufs);
    if (rc) { fprintf(stderr, "gen-random: %s\n", df_errmsg()); return 1; }
    return 0;
}
