/* gen_random_kimi_k3.c — `deltafin-dev gen-random --arch kimi-k3 ...`: a random Kimi K3 model
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


static void k3_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin-dev gen-random --arch kimi-k3 [options] OUT.gguf\n\n"
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

/* The file's alternatives and optional tensors: q LoRA (--q-lora > 0), the MLA output gate,
 * the routed norm, shared experts (--n-shared > 0). */
static bool k3_has(void *ud, uint32_t bit, const char *name) {
    (void)bit;
    return strstr(name, ".attn_q_a_norm.") && ((const k3_opts *)ud)->q_lora > 0;
}

static bool k3_want(void *ud, const df_tensor_spec *s, int il) {
    const k3_opts *o = ud;
    (void)il;
    if (s->field == DF_LF(attn_gate)) return o->attn_gate;
    if (s->field == DF_LF(routed_norm)) return o->routed_norm;
    if (s->field == DF_LF(gate_shexp) || s->field == DF_LF(down_shexp) || s->field == DF_LF(up_shexp))
        return o->n_shared > 0;
    return false;
}

/* KVs, then the tensors from the schema (gen_random_schema.c). */
static int k3_write(k3_opts o, bool preset, const uint32_t *hkv) {
    char vbuf[4096];
    gr_default_vocab(&o.vocab, vbuf, sizeof vbuf);

    int rc = DF_OK;
    df_gguf_writer *w = df_gguf_writer_new(GR_ALIGN);
    if (!w) { rc = DF_ERR_NOMEM; goto done; }
    const char *A = "kimi-k3";
    char key[128];
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    const int64_t E = o.n_embd, H = o.n_head, S = o.head_dim, dq = o.d_nope + o.d_rope;
    const int64_t Fs = o.n_ff_exp * (o.n_shared > 0 ? o.n_shared : 1);
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
    if ((rc = gr_write_vocab(w, A, o.vocab, &n_vocab))) goto done;
#undef KU32
#undef KF32
    gr_model g = {.arch = A, .type = o.type, .exp_type = o.exp_type, .type_fallback = true,
                  .out_scale = o.out_scale, .router_scale = o.router_scale, .mat_scale = o.mat_scale,
                  .res_scale = o.res_scale, .seed = o.seed, .sparse = o.sparse, .raw_experts = o.raw_experts,
                  .has = k3_has, .want = k3_want, .ud = &o, .out = o.out};
    df_hparams *hp = &g.hp;
    hp->n_vocab = (int)n_vocab;
    hp->n_embd = (int)E;
    hp->n_layer = (int)o.n_layer;
    hp->n_head = (int)H;
    hp->n_head_kv = 1;
    for (int64_t il = 0; il < o.n_layer; il++) hp->layer_recr[il] = hkv[il] == 0;
    hp->kda_head_dim = (int)S;
    hp->ssm_conv = (int)o.conv;
    hp->n_rot = (int)o.d_rope;
    hp->n_embd_head_k_mla = (int)dq;
    hp->n_embd_head_v_mla = (int)o.d_v;
    hp->n_lora_q = (int)o.q_lora;
    hp->n_lora_kv = (int)o.kv_lora;
    hp->n_ff = (int)o.n_ff;
    hp->n_layer_dense_lead = (int)o.n_dense;
    hp->n_expert = (int)o.n_expert;
    hp->n_ff_exp = (int)o.n_ff_exp;
    hp->n_ff_shexp = (int)Fs;
    hp->n_latent = (int)o.latent;
    hp->attn_res_block = (int)o.block;
    gr_stats st;
    rc = gr_write_model(w, &g, &st);
    if (!rc) {
        int nk = 0;
        for (int64_t il = 0; il < o.n_layer; il++) nk += hkv[il] == 0;
        fprintf(stderr, "gen-random: wrote %s (kimi-k3, %s / experts %s, %lld layers: %d KDA + %lld MLA, "
                "n_embd %lld, %lld experts, vocab %lld from %s%s)\n", o.out, df_gguf_tensor_type_name(o.type),
                df_gguf_tensor_type_name(o.exp_type), (long long)o.n_layer, nk, (long long)(o.n_layer - nk),
                (long long)E, (long long)o.n_expert, (long long)n_vocab, o.vocab, o.sparse ? ", sparse" : "");
    }
done:
    if (rc) fprintf(stderr, "gen-random: %s\n", deltafin_errmsg());
    df_gguf_writer_free(w);
    return rc ? 1 : 0;
}

/* --arch, --preset (applied where it stands: later options override it) and --layers */
typedef struct { k3_opts *o; bool *preset, *layers_given; } k3_cli;
static int k3_other(void *ud, const char *a, const char *v) {
    k3_cli *c = ud;
    k3_opts *o = c->o;
    if (!strcmp(a, "--arch")) {
        if (strcmp(v, "kimi-k3")) { fprintf(stderr, "gen-random: --arch %s\n", v); return 2; }
    } else if (!strcmp(a, "--preset")) {
        if (strcmp(v, "k3")) { fprintf(stderr, "gen-random: kimi-k3 --preset: k3\n"); return 2; }
        *c->preset = true;
        o->n_embd = 7168; o->n_layer = 93; o->n_head = 96; o->head_dim = 128; o->conv = 4; o->q_lora = 1536;
        o->kv_lora = 512; o->d_nope = 128; o->d_rope = 64; o->d_v = 128; o->n_ff = 33792; o->n_expert = 896;
        o->n_used = 16; o->n_ff_exp = 3072; o->n_shared = 2; o->latent = 3584; o->n_dense = 1; o->block = 12;
        o->n_ctx = 1048576; o->scale = 1.0f;
    } else if (!strcmp(a, "--layers")) {
        if (!*v || strspn(v, "KM") != strlen(v)) { fprintf(stderr, "gen-random: --layers takes K and M only\n"); return 2; }
        o->layers = v;
        *c->layers_given = true;
    } else {
        return -1;
    }
    return 0;
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
    const gr_opt opts[] = {
        {"--no-lb", GR_FLAG, &o.has_lb, 0}, {"--no-norm", GR_FLAG, &o.norm, 0},
        {"--no-routed-norm", GR_FLAG, &o.routed_norm, 0}, {"--no-attn-gate", GR_FLAG, &o.attn_gate, 0},
        {"--sparse", GR_FLAG, &o.sparse, 1}, {"--raw-experts", GR_FLAG, &o.raw_experts, 1},
        {"--n-embd", GR_I64, &o.n_embd, 0}, {"--n-layer", GR_I64, &o.n_layer, 0}, {"--n-head", GR_I64, &o.n_head, 0},
        {"--head-dim", GR_I64, &o.head_dim, 0}, {"--conv", GR_I64, &o.conv, 0}, {"--q-lora", GR_I64, &o.q_lora, 0},
        {"--kv-lora", GR_I64, &o.kv_lora, 0}, {"--d-nope", GR_I64, &o.d_nope, 0}, {"--d-rope", GR_I64, &o.d_rope, 0},
        {"--d-v", GR_I64, &o.d_v, 0}, {"--n-ff", GR_I64, &o.n_ff, 0}, {"--n-expert", GR_I64, &o.n_expert, 0},
        {"--n-expert-used", GR_I64, &o.n_used, 0}, {"--n-ff-exp", GR_I64, &o.n_ff_exp, 0},
        {"--n-shared", GR_I64, &o.n_shared, 0}, {"--latent", GR_I64, &o.latent, 0}, {"--n-dense", GR_I64, &o.n_dense, 0},
        {"--block-size", GR_I64, &o.block, 0}, {"--ctx", GR_I64, &o.n_ctx, 0},
        {"--lb", GR_F32_ANY, &o.lb, 0}, {"--situ-beta", GR_F32, &o.situ_beta, 0},
        {"--situ-linear-beta", GR_F32_ANY, &o.situ_lbeta, 0}, {"--scale", GR_F32, &o.scale, 0}, {"--eps", GR_F32, &o.eps, 0},
        {"--out-scale", GR_F32, &o.out_scale, 0}, {"--router-scale", GR_F32, &o.router_scale, 0},
        {"--mat-scale", GR_F32, &o.mat_scale, 0}, {"--res-scale", GR_F32, &o.res_scale, 0},
        {"--type", GR_TYPE, &o.type, 0}, {"--expert-type", GR_TYPE, &o.exp_type, 0},
        {"--vocab", GR_STR, &o.vocab, 0}, {"--seed", GR_SEED, &o.seed, 0},
    };
    k3_cli cli = {&o, &preset, &layers_given};
    const gr_args ga = {"kimi-k3", opts, sizeof opts / sizeof opts[0], GR_T_F32 | GR_T_F16 | GR_T_Q8_0 | GR_T_Q4_K | GR_T_MXFP4,
                        k3_usage, k3_other, &cli, &o.out};
    int prc = gr_parse_args(&ga, argc, argv);
    if (prc != 1) return prc;
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

    int rc = k3_write(o, preset, hkv);
    free(hkv);
    return rc;
}
