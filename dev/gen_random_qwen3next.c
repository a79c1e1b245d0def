/* gen_random_qwen3next.c — `deltafin-dev gen-random --arch qwen3next|qwen35moe ...`: a random
 * Qwen3-Next / Qwen3.5 MoE model with exactly the keys and tensors llama.cpp's loaders read:
 * Gated DeltaNet layers (fused attn_qkv + attn_gate, or qwen3next's legacy ssm_in with
 * --ssm-in; qwen35moe's separate ssm_beta / ssm_alpha) and a gated full attention layer every
 * --interval layers (qwen35moe: rope.dimension_sections), softmax MoE with a sigmoid-gated
 * shared expert.
 * Tensors come from the architecture's schema (gen_random_schema.c); deterministic. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/gen_random.h"
#include "deltafin.h"

#include <errno.h>
#include <math.h>

typedef struct {
    int type, exp_type;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, interval, state, groups, v_heads, conv;
    int64_t n_nextn;              /* NextN / MTP layers at the end (attention layers + nextn tensors) */
    int64_t n_expert, n_used, n_ff_exp, n_ff_shexp, n_ctx;
    float eps, out_scale, router_scale, mat_scale, rope_base;
    bool ssm_in, sparse, raw_experts;
    uint64_t seed;
    int32_t sections[4];
    const char *arch, *vocab, *out;
} qn_opts;

static void qn_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin-dev gen-random --arch qwen3next|qwen35moe [options] OUT.gguf\n\n"
        "Random Qwen3-Next / Qwen3.5 MoE model (Gated DeltaNet + gated attention every --interval\n"
        "layers, MoE with a sigmoid-gated shared expert) with the keys and tensors llama.cpp reads.\n"
        "  --sections A,B,C,D  qwen35moe rope.dimension_sections (default 3,3,2,0)\n"
        "  --preset qwen3.5-397b  Qwen3.5-397B-A17B geometry (qwen35moe): 60 layers (attention every\n"
        "                   4th), n-embd 4096, 32 heads of 256 (2 KV), 64 rotary dims in 11,11,10,0,\n"
        "                   DeltaNet 16 k / 64 v heads of 128, 512 experts top-10 of width 1024,\n"
        "                   shared expert 1024 (use --n-layer / --n-expert to shrink)\n"
        "  --type T         f32 | f16 | q8_0 | q4_k | mxfp4 (default f32; rows off the block: q8_0, f16)\n"
        "  --expert-type T  type of the routed experts (default: --type)\n"
        "  --n-embd N (64)  --n-layer N (4)  --interval N (4)  --n-head N (4)  --n-head-kv N (2)\n"
        "  --head-dim N (32)  --n-rot N (16)  --state N (DeltaNet head size, 32)  --groups N (k heads, 2)\n"
        "  --v-heads N (4)  --conv N (4)  --n-expert N (8)  --n-expert-used N (2)  --n-ff-exp N (32)\n"
        "  --n-ff-shexp N (64)  --ssm-in (legacy fused qkvz projection)  --eps F (1e-6)\n"
        "  --rope-base F (10000000)  --vocab PATH|bytes  --seed S (1)  --out-scale F (2)\n"
        "  --router-scale F (1)  --mat-scale F (1)  --ctx N (4096)  --sparse\n"
        "  --nextn N (0)    the last N layers are NextN / MTP heads (attention layers + nextn tensors)\n"
        "  --raw-experts    q8_0 / mxfp4 experts filled with random valid blocks directly (fast)\n");
}

static bool qn_has(void *ud, uint32_t bit, const char *name) {
    (void)bit;
    const qn_opts *o = ud;
    return strstr(name, ".attn_qkv.") && (!o->ssm_in || strcmp(o->arch, "qwen3next"));
}

static bool qn_want(void *ud, const df_tensor_spec *s, int il) {
    (void)ud; (void)il;
    return s->field == DF_MF(output);
}

static int qn_write(qn_opts o) {
    char vbuf[4096];
    gr_default_vocab(&o.vocab, vbuf, sizeof vbuf);
    int rc = DF_OK;
    df_gguf_writer *w = df_gguf_writer_new(GR_ALIGN);
    if (!w) { rc = DF_ERR_NOMEM; goto done; }
    const char *A = o.arch;
    char key[128];
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : o.type == DF_TYPE_Q8_0 ? 7 : 15;
    if (o.exp_type == DF_TYPE_MXFP4) ftype = 38;
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) ||
        (rc = df_gguf_w_str(w, "general.name", strcmp(A, "qwen3next") ? "deltafin-random-qwen35moe" : "deltafin-random-qwen3next")) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type != DF_TYPE_F32 && o.type != DF_TYPE_F16 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))) ||
        (rc = KU32("context_length", o.n_ctx)) || (rc = KU32("embedding_length", o.n_embd)) ||
        (rc = KU32("block_count", o.n_layer)) || (rc = KU32("feed_forward_length", o.n_ff_shexp)) ||
        (rc = KU32("attention.head_count", o.n_head)) || (rc = KU32("attention.head_count_kv", o.n_head_kv)) ||
        (rc = KU32("attention.key_length", o.head_dim)) || (rc = KU32("attention.value_length", o.head_dim)) ||
        (rc = KU32("rope.dimension_count", o.n_rot)) || (rc = KF32("rope.freq_base", o.rope_base)) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", o.eps)) ||
        (rc = KU32("expert_count", o.n_expert)) || (rc = KU32("expert_used_count", o.n_used)) ||
        (rc = KU32("expert_feed_forward_length", o.n_ff_exp)) ||
        (rc = KU32("expert_shared_feed_forward_length", o.n_ff_shexp)) ||
        (rc = KU32("ssm.conv_kernel", o.conv)) || (rc = KU32("ssm.state_size", o.state)) ||
        (rc = KU32("ssm.group_count", o.groups)) || (rc = KU32("ssm.time_step_rank", o.v_heads)) ||
        (rc = KU32("ssm.inner_size", o.state * o.v_heads)) || (rc = KU32("full_attention_interval", o.interval)) ||
        (strcmp(A, "qwen3next") && (rc = (snprintf(key, sizeof key, "%s.rope.dimension_sections", A),
                                          df_gguf_w_arr(w, key, DF_GGUF_I32, o.sections, 4)))) ||
        (o.n_nextn && (rc = KU32("nextn_predict_layers", o.n_nextn))))
        goto done;
#undef KU32
#undef KF32
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, A, o.vocab, &n_vocab))) goto done;
    gr_model g = {.arch = A, .type = o.type, .exp_type = o.exp_type, .type_fallback = true,
                  .out_scale = o.out_scale, .router_scale = o.router_scale, .mat_scale = o.mat_scale,
                  .res_scale = 1.0f, .seed = o.seed, .sparse = o.sparse, .raw_experts = o.raw_experts,
                  .has = qn_has, .want = qn_want,
                  .ud = &o, .out = o.out};
    df_hparams *hp = &g.hp;
    hp->n_vocab = (int)n_vocab;
    hp->n_embd = (int)o.n_embd;
    hp->n_layer = (int)o.n_layer;
    hp->n_head = (int)o.n_head;
    hp->n_head_kv = (int)o.n_head_kv;
    hp->n_embd_head_k = hp->n_embd_head_v = (int)o.head_dim;
    hp->n_rot = (int)o.n_rot;
    hp->n_expert = (int)o.n_expert;
    hp->n_expert_used = (int)o.n_used;
    hp->n_ff_exp = (int)o.n_ff_exp;
    hp->n_ff_shexp = (int)o.n_ff_shexp;
    hp->ssm_conv = (int)o.conv;
    hp->ssm_d_state = (int)o.state;
    hp->ssm_n_group = (int)o.groups;
    hp->ssm_dt_rank = (int)o.v_heads;
    hp->ssm_d_inner = (int)(o.state * o.v_heads);
    hp->n_layer_nextn = (int)o.n_nextn;
    for (int64_t il = 0; il < o.n_layer; il++)
        hp->layer_recr[il] = (uint8_t)(il < o.n_layer - o.n_nextn && (il + 1) % o.interval != 0);
    gr_stats st;
    rc = gr_write_model(w, &g, &st);
    if (!rc)
        fprintf(stderr, "gen-random: wrote %s (%s, %s / experts %s, %lld layers, n_embd %lld, %lld experts, "
                "vocab %lld from %s)\n", o.out, A, df_gguf_tensor_type_name(o.type), df_gguf_tensor_type_name(o.exp_type),
                (long long)o.n_layer, (long long)o.n_embd, (long long)o.n_expert, (long long)n_vocab, o.vocab);
done:
    if (rc) fprintf(stderr, "gen-random: %s\n", deltafin_errmsg());
    df_gguf_writer_free(w);
    return rc ? 1 : 0;
}

int df_gen_random_qwen3next(int argc, char **argv) {
    qn_opts o = {.type = DF_TYPE_F32, .exp_type = -1, .n_embd = 64, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
                 .head_dim = 32, .n_rot = 16, .interval = 4, .state = 32, .groups = 2, .v_heads = 4, .conv = 4,
                 .n_expert = 8, .n_used = 2, .n_ff_exp = 32, .n_ff_shexp = 64, .n_ctx = 4096, .eps = 1e-6f,
                 .out_scale = 2.0f, .router_scale = 1.0f, .mat_scale = 1.0f, .rope_base = 10000000.0f, .seed = 1,
                 .sections = {3, 3, 2, 0}, .arch = "qwen3next"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { qn_usage(stdout); return 0; }
        if (a[0] != '-' || !a[1]) {
            if (o.out) { fprintf(stderr, "gen-random: more than one output path\n"); return 2; }
            o.out = a;
            continue;
        }
        if (!strcmp(a, "--ssm-in")) { o.ssm_in = true; continue; }
        if (!strcmp(a, "--sparse")) { o.sparse = true; continue; }
        if (!strcmp(a, "--raw-experts")) { o.raw_experts = true; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "gen-random: %s needs a value\n", a); return 2; }
        const char *v = argv[++i];
        struct { const char *opt; int64_t *dst; } ints[] = {
            {"--n-embd", &o.n_embd}, {"--n-layer", &o.n_layer}, {"--n-head", &o.n_head},
            {"--n-head-kv", &o.n_head_kv}, {"--head-dim", &o.head_dim}, {"--n-rot", &o.n_rot},
            {"--interval", &o.interval}, {"--state", &o.state}, {"--groups", &o.groups},
            {"--v-heads", &o.v_heads}, {"--conv", &o.conv}, {"--n-expert", &o.n_expert},
            {"--n-expert-used", &o.n_used}, {"--n-ff-exp", &o.n_ff_exp}, {"--n-ff-shexp", &o.n_ff_shexp},
            {"--ctx", &o.n_ctx}, {"--nextn", &o.n_nextn},
        };
        bool done = false;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++) {
            if (strcmp(a, ints[k].opt)) continue;
            if (!gr_parse_i64(v, 1 << 24, ints[k].dst)) { fprintf(stderr, "gen-random: %s: bad value '%s'\n", a, v); return 2; }
            done = true;
        }
        if (done) continue;
        struct { const char *opt; float *dst; } flts[] = {
            {"--eps", &o.eps}, {"--out-scale", &o.out_scale}, {"--router-scale", &o.router_scale},
            {"--mat-scale", &o.mat_scale}, {"--rope-base", &o.rope_base},
        };
        for (size_t k = 0; k < sizeof flts / sizeof flts[0] && !done; k++) {
            if (strcmp(a, flts[k].opt)) continue;
            char *e;
            float f = strtof(v, &e);
            if (e == v || *e || !isfinite(f) || f < 0) { fprintf(stderr, "gen-random: bad %s '%s'\n", a, v); return 2; }
            *flts[k].dst = f;
            done = true;
        }
        if (done) continue;
        if (!strcmp(a, "--arch")) {
            if (strcmp(v, "qwen3next") && strcmp(v, "qwen35moe")) { fprintf(stderr, "gen-random: --arch %s\n", v); return 2; }
            o.arch = !strcmp(v, "qwen3next") ? "qwen3next" : "qwen35moe";
        } else if (!strcmp(a, "--preset")) {
            if (strcmp(v, "qwen3.5-397b")) { fprintf(stderr, "gen-random: --preset: qwen3.5-397b\n"); return 2; }
            /* Qwen3.5-397B-A17B (qwen35moe): options after --preset override it */
            o.arch = "qwen35moe"; o.n_embd = 4096; o.n_layer = 60; o.interval = 4; o.n_head = 32; o.n_head_kv = 2;
            o.head_dim = 256; o.n_rot = 64; o.state = 128; o.groups = 16; o.v_heads = 64; o.conv = 4;
            o.n_expert = 512; o.n_used = 10; o.n_ff_exp = 1024; o.n_ff_shexp = 1024; o.n_ctx = 262144;
            o.sections[0] = 11; o.sections[1] = 11; o.sections[2] = 10; o.sections[3] = 0;
        } else if (!strcmp(a, "--sections")) {
            int n = sscanf(v, "%d,%d,%d,%d", &o.sections[0], &o.sections[1], &o.sections[2], &o.sections[3]);
            if (n != 4) { fprintf(stderr, "gen-random: --sections takes A,B,C,D\n"); return 2; }
        } else if (!strcmp(a, "--type") || !strcmp(a, "--expert-type")) {
            int t = gr_parse_type(v, GR_T_F32 | GR_T_F16 | GR_T_Q8_0 | GR_T_Q4_K | GR_T_MXFP4);
            if (t < 0) { fprintf(stderr, "gen-random: %s must be f32, f16, q8_0, q4_k or mxfp4\n", a); return 2; }
            if (a[2] == 't') o.type = t; else o.exp_type = t;
        } else if (!strcmp(a, "--vocab")) {
            o.vocab = v;
        } else if (!strcmp(a, "--seed")) {
            char *e;
            errno = 0;
            o.seed = strtoull(v, &e, 0);
            if (errno || e == v || *e) { fprintf(stderr, "gen-random: bad --seed '%s'\n", v); return 2; }
        } else {
            fprintf(stderr, "gen-random: unknown option %s for %s\n", a, o.arch);
            qn_usage(stderr);
            return 2;
        }
    }
    if (!o.out) { qn_usage(stderr); return 2; }
    if (o.exp_type < 0) o.exp_type = o.type;
    if (o.n_embd < 1 || o.n_layer < 1 || o.n_layer > 512 || o.n_head < 1 || o.n_head_kv < 1 || o.n_head % o.n_head_kv ||
        o.head_dim < 2 || o.n_rot > o.head_dim || (o.n_rot & 1) || o.interval < 1 || o.state < 1 || o.groups < 1 ||
        o.v_heads % o.groups || o.conv < 1 || o.n_used < 1 || o.n_used > o.n_expert || o.n_ff_exp < 1 ||
        o.n_ff_shexp < 1 || o.n_nextn < 0 || o.n_nextn >= o.n_layer) {
        fprintf(stderr, "gen-random: bad qwen3next dims\n");
        return 2;
    }
    return qn_write(o);
}
