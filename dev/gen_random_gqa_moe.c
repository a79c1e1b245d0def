/* gen_random_gqa_moe.c — `deltafin-dev gen-random --arch glm4moe|minimax-m2 ...`: small random
 * models of the two GQA + sigmoid-routed MoE families with the names, shapes and keys llama.cpp
 * expects (src/model/arch_glm4moe.c, arch_minimax_m2.c; the tensors come from their schemas):
 *   glm4moe     q/k/v biases, optional per-head QK norm, partial RoPE, leading dense layers,
 *               shared expert, sigmoid + exp_probs_b, norm, routed scale, NextN layers;
 *   minimax-m2  QK norm over the whole projection, partial RoPE, sigmoid + exp_probs_b.
 * Deterministic like gen_random.c (per-tensor splitmix64 streams). --preset glm-4.6 / minimax-m2
 * gives the real widths (use --n-layer, --n-expert and --sparse to keep them small). */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/gen_random.h"

#include <errno.h>
#include <math.h>
#include <strings.h>

typedef struct {
    const char *arch;
    int type;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ff, n_expert, n_used, n_ff_exp;
    int64_t n_shared, n_dense, n_nextn, n_ctx;
    bool qk_norm, bias, sparse;
    float scale, rope_base, out_scale, router_scale;
    uint64_t seed;
    const char *vocab, *out;
} gm_opts;

static bool is_glm(const gm_opts *o) { return !strcmp(o->arch, "glm4moe"); }

static void gm_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin-dev gen-random --arch glm4moe|minimax-m2 [options] OUT.gguf\n\n"
        "Small random GLM-4.5/4.6 (glm4moe) or MiniMax-M2 (minimax-m2) model. Deterministic.\n"
        "  --type T        f32 | f16 | q8_0 (default f32)\n"
        "  --n-embd N (64)  --n-layer N (glm 4 incl. NextN, minimax 3)  --n-head N (4)  --n-head-kv N (2)\n"
        "  --head-dim N (32)  --n-rot N (16: partial RoPE)  --n-ff N (96)  --n-expert N (8)\n"
        "  --n-expert-used N (2)  --n-ff-exp N (32; minimax: the experts are --n-ff wide)\n"
        "  glm4moe only: --n-shared N (1)  --n-dense N (1)  --n-nextn N (1)  --no-qk-norm  --no-bias\n"
        "                --scale F (routed scaling, 2.5)\n"
        "  --preset glm-4.6|minimax-m2   the real widths (GLM-4.6: 5120, 96 heads x 128, 8 KV, 160\n"
        "                  experts top-8 of 1536, dense 12288; MiniMax-M2: 3072, 48 x 128, 8 KV,\n"
        "                  256 experts top-8 of 1536)\n"
        "  --sparse        header only, the data a hole  --rope-base F  --vocab PATH|bytes  --seed S (1)\n"
        "  --out-scale F (4)  --router-scale F (3)  --ctx N (4096)\n");
}

static bool gm_want(void *ud, const df_tensor_spec *s, int il) {
    const gm_opts *o = ud;
    (void)il;
    if (s->field == DF_LF(q_norm) || s->field == DF_LF(k_norm)) return o->qk_norm;
    if (s->field == DF_LF(bq) || s->field == DF_LF(bk) || s->field == DF_LF(bv)) return o->bias;
    if (strstr(s->name, "nextn.shared_head_norm")) return true; /* as GLM-4.6 GGUFs carry it */
    return s->field == DF_MF(output);
}

static int gm_write(gm_opts o) {
    char vbuf[4096];
    gr_default_vocab(&o.vocab, vbuf, sizeof vbuf);
    const char *A = o.arch;
    const bool glm = is_glm(&o);
    df_gguf_writer *w = df_gguf_writer_new(GR_ALIGN);
    if (!w) return 1;
    char key[128], nm[64];
    int rc;
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    const int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : 7;
    snprintf(nm, sizeof nm, "deltafin-random-%s", A);
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) || (rc = df_gguf_w_str(w, "general.name", nm)) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type == DF_TYPE_Q8_0 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))) ||
        (rc = KU32("context_length", o.n_ctx)) || (rc = KU32("embedding_length", o.n_embd)) ||
        (rc = KU32("block_count", o.n_layer)) || (rc = KU32("feed_forward_length", o.n_ff)) ||
        (rc = KU32("attention.head_count", o.n_head)) || (rc = KU32("attention.head_count_kv", o.n_head_kv)) ||
        (rc = KU32("attention.key_length", o.head_dim)) || (rc = KU32("attention.value_length", o.head_dim)) ||
        (rc = KU32("rope.dimension_count", o.n_rot)) || (rc = KF32("rope.freq_base", o.rope_base)) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", 1e-5f)) ||
        (rc = KU32("expert_count", o.n_expert)) || (rc = KU32("expert_used_count", o.n_used)) ||
        (rc = KU32("expert_feed_forward_length", glm ? o.n_ff_exp : o.n_ff)) ||
        (rc = KU32("expert_gating_func", 2)))
        goto done;
    if (glm && ((rc = KU32("expert_shared_count", o.n_shared)) || (rc = KU32("leading_dense_block_count", o.n_dense)) ||
                (rc = KF32("expert_weights_scale", o.scale)) ||
                (rc = (snprintf(key, sizeof key, "%s.expert_weights_norm", A), df_gguf_w_bool(w, key, true))) ||
                (rc = KU32("nextn_predict_layers", o.n_nextn))))
        goto done;
#undef KU32
#undef KF32
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, A, o.vocab, &n_vocab))) goto done;
    gr_model g = {.arch = A, .type = o.type, .exp_type = o.type, .out_scale = o.out_scale,
                  .router_scale = o.router_scale, .mat_scale = 1.0f, .res_scale = 1.0f, .seed = o.seed,
                  .sparse = o.sparse, .pad_end = !o.sparse, .want = gm_want, .ud = &o, .out = o.out};
    df_hparams *hp = &g.hp;
    hp->n_vocab = (int)n_vocab;
    hp->n_embd = (int)o.n_embd;
    hp->n_layer = (int)o.n_layer;
    hp->n_head = (int)o.n_head;
    hp->n_head_kv = (int)o.n_head_kv;
    hp->n_embd_head_k = hp->n_embd_head_v = (int)o.head_dim;
    hp->n_rot = (int)o.n_rot;
    hp->n_ff = (int)o.n_ff;
    hp->n_expert = (int)o.n_expert;
    hp->n_expert_used = (int)o.n_used;
    hp->n_ff_exp = (int)(glm ? o.n_ff_exp : o.n_ff);
    if (glm) {
        hp->n_layer_dense_lead = (int)o.n_dense;
        hp->n_layer_nextn = (int)o.n_nextn;
        hp->n_expert_shared = (int)o.n_shared;
        hp->n_ff_shexp = (int)(o.n_ff_exp * o.n_shared);
    }
    gr_stats st;
    rc = gr_write_model(w, &g, &st);
    if (!rc)
        fprintf(stderr, "gen-random: wrote %s (%s, %s, %lld layers, n_embd %lld, %d tensors, vocab %lld from %s)\n",
                o.out, A, o.type == DF_TYPE_F32 ? "F32" : o.type == DF_TYPE_F16 ? "F16" : "Q8_0",
                (long long)o.n_layer, (long long)o.n_embd, st.n_tensors, (long long)n_vocab, o.vocab);
done:
    df_gguf_writer_free(w);
    if (rc) { fprintf(stderr, "gen-random: %s\n", df_errmsg()); return 1; }
    return 0;
}

static void gm_preset(gm_opts *o, const char *v, bool *ok) {
    *ok = true;
    if (!strcmp(v, "glm-4.6")) {
        o->arch = "glm4moe";
        o->n_embd = 5120; o->n_layer = 93; o->n_head = 96; o->n_head_kv = 8; o->head_dim = 128; o->n_rot = 64;
        o->n_ff = 12288; o->n_expert = 160; o->n_used = 8; o->n_ff_exp = 1536; o->n_shared = 1; o->n_dense = 3;
        o->n_nextn = 1; o->scale = 2.5f; o->rope_base = 1000000.0f; o->n_ctx = 202752;
    } else if (!strcmp(v, "minimax-m2")) {
        o->arch = "minimax-m2";
        o->n_embd = 3072; o->n_layer = 62; o->n_head = 48; o->n_head_kv = 8; o->head_dim = 128; o->n_rot = 64;
        o->n_ff = 1536; o->n_expert = 256; o->n_used = 8; o->rope_base = 5000000.0f; o->n_ctx = 196608;
    } else {
        *ok = false;
    }
}

/* --preset (applied before the other options) and --arch (must agree with it) */
static int gm_other(void *ud, const char *a, const char *v) {
    gm_opts *o = ud;
    if (!strcmp(a, "--preset")) return 0;
    if (strcmp(a, "--arch")) return -1;
    if (strcmp(v, "glm4moe") && strcmp(v, "minimax-m2")) { fprintf(stderr, "gen-random: --arch %s\n", v); return 2; }
    if (o->arch && strcmp(o->arch, v)) { fprintf(stderr, "gen-random: --arch %s vs the preset's %s\n", v, o->arch); return 2; }
    o->arch = v;
    return 0;
}

int df_gen_random_gqa_moe(int argc, char **argv) {
    gm_opts o = {.arch = NULL, .type = DF_TYPE_F32, .n_embd = 64, .n_layer = -1, .n_head = 4, .n_head_kv = 2,
                 .head_dim = 32, .n_rot = 16, .n_ff = 96, .n_expert = 8, .n_used = 2, .n_ff_exp = 32,
                 .n_shared = 1, .n_dense = 1, .n_nextn = 1, .n_ctx = 4096, .qk_norm = true, .bias = true,
                 .scale = 2.5f, .rope_base = 10000.0f, .out_scale = 4.0f, .router_scale = 3.0f, .seed = 1};
    /* the preset first, so explicit options override it */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset")) {
            bool ok;
            gm_preset(&o, argv[i + 1], &ok);
            if (!ok) { fprintf(stderr, "gen-random: --preset glm-4.6|minimax-m2\n"); return 2; }
        }
    const int64_t M = 1 << 20;
    const gr_opt opts[] = {
        {"--no-qk-norm", GR_FLAG, &o.qk_norm, 0}, {"--no-bias", GR_FLAG, &o.bias, 0}, {"--sparse", GR_FLAG, &o.sparse, 1},
        {"--n-embd", GR_I64, &o.n_embd, M}, {"--n-layer", GR_I64, &o.n_layer, M}, {"--n-head", GR_I64, &o.n_head, M},
        {"--n-head-kv", GR_I64, &o.n_head_kv, M}, {"--head-dim", GR_I64, &o.head_dim, M}, {"--n-rot", GR_I64, &o.n_rot, M},
        {"--n-ff", GR_I64, &o.n_ff, M}, {"--n-expert", GR_I64, &o.n_expert, M}, {"--n-expert-used", GR_I64, &o.n_used, M},
        {"--n-ff-exp", GR_I64, &o.n_ff_exp, M}, {"--n-shared", GR_I64, &o.n_shared, M}, {"--n-dense", GR_I64, &o.n_dense, M},
        {"--n-nextn", GR_I64, &o.n_nextn, M}, {"--ctx", GR_I64, &o.n_ctx, M},
        {"--scale", GR_F32, &o.scale, 0}, {"--out-scale", GR_F32, &o.out_scale, 0},
        {"--router-scale", GR_F32, &o.router_scale, 0}, {"--rope-base", GR_F32, &o.rope_base, 0},
        {"--type", GR_TYPE, &o.type, 0}, {"--vocab", GR_STR, &o.vocab, 0}, {"--seed", GR_SEED, &o.seed, 0},
    };
    const gr_args ga = {"glm4moe / minimax-m2", opts, sizeof opts / sizeof opts[0], GR_T_F32 | GR_T_F16 | GR_T_Q8_0, gm_usage,
                        gm_other, &o, &o.out};
    int prc = gr_parse_args(&ga, argc, argv);
    if (prc != 1) return prc;
    if (!o.out || !o.arch) { gm_usage(stderr); return 2; }
    const bool glm = is_glm(&o);
    if (o.n_layer < 0) o.n_layer = glm ? 4 : 3;
    if (!glm) { o.n_dense = 0; o.n_nextn = 0; o.n_shared = 0; o.bias = false; o.qk_norm = true; }
    const char *why = NULL;
    if (o.n_embd < 1 || o.n_layer < 1 || o.n_head < 1 || o.n_head_kv < 1 || o.head_dim < 2 || o.n_ff < 1 ||
        o.n_ff_exp < 1)
        why = "dims must be positive";
    else if (o.n_head % o.n_head_kv) why = "n-head must be a multiple of n-head-kv";
    else if (o.n_rot < 2 || (o.n_rot & 1) || o.n_rot > o.head_dim) why = "n-rot must be even and <= head-dim";
    else if (o.n_nextn >= o.n_layer || o.n_dense > o.n_layer - o.n_nextn) why = "need n-nextn < n-layer and n-dense <= the layers run";
    else if (o.n_used < 1 || o.n_used > o.n_expert || o.n_expert > 512) why = "need 1 <= n-expert-used <= n-expert <= 512";
    if (why) { fprintf(stderr, "gen-random: %s\n", why); return 2; }
    return gm_write(o);
}
