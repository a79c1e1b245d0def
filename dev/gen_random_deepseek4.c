/* gen_random_deepseek4.c — `deltafin-dev gen-random --arch deepseek4 ...`: a random DeepSeek-V4
 * model with the keys convert_hf_to_gguf.py writes for DeepseekV4ForCausalLM (compress_ratios as
 * an INT32 array, the SwiGLU limits as F32 arrays per layer, the hyper-connection / indexer /
 * grouped-output keys, YaRN) and the tensors of the schema (src/model/arch_deepseek4.c):
 * attn_output_a stored 2-D as the converter writes it, ffn_gate_tid2eid as I32 rows of distinct
 * expert ids, hyper-connection mixers and position embeddings in F32. Deterministic like
 * gen_random.c. Called from cmd_gen_random when --arch deepseek4 is given. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/gen_random.h"

#include <errno.h>

typedef struct {
    int type, exp_type;
    int64_t n_embd, n_layer, n_head, head_dim, n_rot, q_lora, o_groups, o_lora, n_expert, n_used, n_ff_exp,
        n_shared, swa, idx_heads, idx_dim, idx_top_k, hash, hc_iters, nextn, n_ctx, yarn_orig;
    float rope_base, comp_rope_base, yarn_factor, eps, hc_eps, limit, scale, out_scale, router_scale;
    int64_t ratio[DF_MAX_LAYERS + 8];
    int n_ratio;                 /* entries given by --ratios (0: the default pattern) */
    bool sparse, raw_experts, flash;
    uint64_t seed;
    const char *vocab, *out, *name;
} d4_opts;

static void d4_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin-dev gen-random --arch deepseek4 [options] OUT.gguf\n\n"
        "Random DeepSeek-V4 model (hyper-connections, compressed KV with ratios 4 / 128, the lightning\n"
        "indexer, sliding window, sinks, grouped output LoRA, hash-routed first layers, sqrt-softplus\n"
        "MoE with a clamped SwiGLU, optional NextN / MTP blocks). Deterministic.\n"
        "  --type T           f32 | f16 | q8_0 | q4_k | mxfp4 for weight matrices (default f32; rows\n"
        "                     off the type's block fall back to Q8_0, else F16)\n"
        "  --expert-type T    type of the routed experts (*_exps) (default: --type)\n"
        "  --n-embd N (64)  --n-layer N (4)  --n-head N (4)  --head-dim N (128)  --rope-dim N (32)\n"
        "  --q-lora N (32)  --o-groups N (2)  --o-lora N (32)\n"
        "  --n-expert N (8)  --n-expert-used N (2)  --n-ff-exp N (32)  --n-shared N (1)\n"
        "  --ratios R,R,...   compress ratio per layer, 0 / 4 / 128 (default: 0, then 4 and 128\n"
        "                     alternating); more entries than layers are written too (as V4's\n"
        "                     config lists its draft stages)\n"
        "  --swa N (8)  --indexer-heads N (4)  --indexer-dim N (64)  --indexer-top-k N (4)\n"
        "  --hash-layers N (1)  --hc-iters N (20)  --hc-eps F (1e-6)  --swiglu-limit F (10)\n"
        "  --scale F (1.5, routed scaling)  --nextn N (0: NextN / MTP blocks after the layers)\n"
        "  --rope-base F (10000)  --compress-rope-base F (160000)  --yarn-factor F (16; 0: none)\n"
        "  --yarn-orig-ctx N (65536)  --eps F (1e-6)\n"
        "  --preset v4-flash  DeepSeek V4 Flash's widths (hidden 4096, 64 heads of 512, q LoRA 1024,\n"
        "                     8 output groups of 1024, 256 experts top-6 of 2048, window 128, indexer\n"
        "                     64 x 128 top-512, 3 hash layers; 43 layers: use --n-layer / --sparse)\n"
        "  --sparse           header only, data section a hole (for `info` / memory plans)\n"
        "  --raw-experts      q8_0 / mxfp4 experts filled with random valid blocks directly (fast)\n"
        "  --vocab PATH|bytes  --seed S (1)  --out-scale F (4)  --router-scale F (3)  --ctx N (4096)\n"
        "  --name NAME\n");
}

/* the keys convert_hf_to_gguf.py writes (its order) */
static int d4_keys(df_gguf_writer *w, const d4_opts *o, int64_t n_blocks) {
    const char *A = "deepseek4";
    char key[128];
    int rc = DF_OK;
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    float lim[DF_MAX_LAYERS];
    int32_t ratios[DF_MAX_LAYERS + 8];
    const int n_rat = o->n_ratio > n_blocks ? o->n_ratio : (int)n_blocks;
    for (int64_t il = 0; il < n_blocks; il++) lim[il] = o->limit;
    for (int i = 0; i < n_rat; i++) ratios[i] = (int32_t)o->ratio[i];
    if ((rc = KU32("context_length", o->n_ctx)) || (rc = KU32("embedding_length", o->n_embd)) ||
        (rc = KU32("block_count", n_blocks)) || (rc = KU32("attention.head_count", o->n_head)) ||
        (rc = KU32("attention.head_count_kv", 1)) || (rc = KF32("rope.freq_base", o->rope_base)) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", o->eps)) || (rc = KU32("expert_count", o->n_expert)) ||
        (rc = KU32("expert_used_count", o->n_used)) || (rc = KU32("expert_gating_func", 4)) ||
        (rc = KU32("attention.key_length", o->head_dim)) || (rc = KU32("attention.value_length", o->head_dim)))
        return rc;
    if (o->yarn_factor > 0.0f &&
        ((rc = (snprintf(key, sizeof key, "%s.rope.scaling.type", A), df_gguf_w_str(w, key, "yarn"))) ||
         (rc = KF32("rope.scaling.factor", o->yarn_factor)) ||
         (rc = KU32("rope.scaling.original_context_length", o->yarn_orig)) ||
         (rc = KF32("rope.scaling.yarn_beta_fast", 32.0f)) || (rc = KF32("rope.scaling.yarn_beta_slow", 1.0f))))
        return rc;
    if ((rc = KU32("rope.dimension_count", o->n_rot)) || (rc = KU32("attention.q_lora_rank", o->q_lora)) ||
        (rc = KU32("attention.sliding_window", o->swa)) || (rc = KU32("expert_feed_forward_length", o->n_ff_exp)) ||
        (rc = KU32("expert_shared_count", o->n_shared)) || (rc = KF32("expert_weights_scale", o->scale)) ||
        (rc = (snprintf(key, sizeof key, "%s.expert_weights_norm", A), df_gguf_w_bool(w, key, true))) ||
        (rc = (snprintf(key, sizeof key, "%s.swiglu_clamp_exp", A), df_gguf_w_arr(w, key, DF_GGUF_F32, lim, (uint64_t)n_blocks))) ||
        (rc = (snprintf(key, sizeof key, "%s.swiglu_clamp_shexp", A), df_gguf_w_arr(w, key, DF_GGUF_F32, lim, (uint64_t)n_blocks))) ||
        (rc = KU32("attention.indexer.head_count", o->idx_heads)) ||
        (rc = KU32("attention.indexer.key_length", o->idx_dim)) ||
        (rc = KU32("attention.indexer.top_k", o->idx_top_k)) ||
        (rc = KU32("attention.output_group_count", o->o_groups)) ||
        (rc = KU32("attention.output_lora_rank", o->o_lora)) ||
        (rc = (snprintf(key, sizeof key, "%s.attention.compress_ratios", A), df_gguf_w_arr(w, key, DF_GGUF_I32, ratios, (uint64_t)n_rat))) ||
        (rc = KF32("attention.compress_rope_freq_base", o->comp_rope_base)) ||
        (rc = KU32("hyper_connection.count", 4)) || (rc = KU32("hyper_connection.sinkhorn_iterations", o->hc_iters)) ||
        (rc = KF32("hyper_connection.epsilon", o->hc_eps)) || (rc = KU32("hash_layer_count", o->hash)) ||
        (rc = KU32("embedding_length_out", 4 * o->n_embd)) ||
        (o->nextn > 0 && (rc = KU32("nextn_predict_layers", o->nextn))))
        return rc;
#undef KU32
#undef KF32
    return DF_OK;
}

static int d4_write(d4_opts o) {
    char vbuf[4096];
    gr_default_vocab(&o.vocab, vbuf, sizeof vbuf);
    int rc = DF_OK;
    df_gguf_writer *w = df_gguf_writer_new(GR_ALIGN);
    if (!w) return 1;
    const char *A = "deepseek4";
    const int64_t n_blocks = o.n_layer + o.nextn;
    int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : o.type == DF_TYPE_Q8_0 ? 7 : 15;
    if (o.exp_type == DF_TYPE_MXFP4) ftype = 38;
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) ||
        (rc = df_gguf_w_str(w, "general.name", o.name ? o.name : "deltafin-random-deepseek4")) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type != DF_TYPE_F32 && o.type != DF_TYPE_F16 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))) ||
        (rc = d4_keys(w, &o, n_blocks)))
        goto done;
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, A, o.vocab, &n_vocab))) goto done;
    gr_model g = {.arch = A, .type = o.type, .exp_type = o.exp_type, .type_fallback = true,
                  .out_scale = o.out_scale, .router_scale = o.router_scale, .mat_scale = 1.0f, .res_scale = 1.0f,
                  .seed = o.seed, .sparse = o.sparse, .pad_end = !o.sparse, .raw_experts = o.raw_experts,
                  .ud = &o, .out = o.out}; /* no optional tensors (NextN embeddings / head) */
    df_hparams *hp = &g.hp;
    hp->n_vocab = (int)n_vocab;
    hp->n_embd = (int)o.n_embd;
    hp->n_layer = (int)n_blocks;
    hp->n_layer_nextn = (int)o.nextn;
    hp->n_head = (int)o.n_head;
    hp->n_head_kv = 1;
    hp->n_embd_head_k = hp->n_embd_head_v = (int)o.head_dim;
    hp->n_rot = (int)o.n_rot;
    hp->n_lora_q = (int)o.q_lora;
    hp->o_groups = (int)o.o_groups;
    hp->o_lora = (int)o.o_lora;
    hp->hc_mult = 4;
    hp->n_expert = (int)o.n_expert;
    hp->n_expert_used = (int)o.n_used;
    hp->n_ff_exp = (int)o.n_ff_exp;
    hp->n_ff_shexp = (int)(o.n_ff_exp * o.n_shared);
    hp->indexer_n_head = (int)o.idx_heads;
    hp->indexer_head_size = (int)o.idx_dim;
    hp->n_hash_layers = (int)o.hash;
    for (int64_t il = 0; il < n_blocks; il++) hp->comp_ratio[il] = (uint8_t)o.ratio[il];
    gr_stats st;
    rc = gr_write_model(w, &g, &st);
    if (!rc)
        fprintf(stderr, "gen-random: wrote %s (deepseek4, %s / experts %s, %lld layers%s, n_embd %lld, %lld experts "
                "top-%lld, window %lld, indexer top-%lld, %.3f M params, vocab %lld from %s%s)\n", o.out,
                df_gguf_tensor_type_name(o.type), df_gguf_tensor_type_name(o.exp_type), (long long)o.n_layer,
                o.nextn ? " + NextN" : "", (long long)o.n_embd, (long long)o.n_expert, (long long)o.n_used,
                (long long)o.swa, (long long)o.idx_top_k, (double)st.n_params / 1e6, (long long)n_vocab, o.vocab,
                o.sparse ? ", sparse" : "");
done:
    if (rc) fprintf(stderr, "gen-random: %s\n", deltafin_errmsg());
    df_gguf_writer_free(w);
    return rc ? 1 : 0;
}

/* --ratios R,R,...: up to DF_MAX_LAYERS + 8 entries of 0 / 4 / 128 */
static bool d4_parse_ratios(d4_opts *o, const char *v) {
    o->n_ratio = 0;
    for (const char *p = v; *p;) {
        char *e;
        errno = 0;
        long r = strtol(p, &e, 10);
        if (errno || e == p || (r != 0 && r != 4 && r != 128) || o->n_ratio >= DF_MAX_LAYERS + 8) return false;
        o->ratio[o->n_ratio++] = r;
        if (*e == ',') e++;
        else if (*e) return false;
        p = e;
    }
    return o->n_ratio > 0;
}

/* V4 Flash's widths where the option was not given (-1) */
static void d4_preset(d4_opts *o) {
    const int64_t v[] = {4096, 43, 64, 512, 64, 1024, 8, 1024, 256, 6, 2048, 1, 128, 64, 128, 512, 3, 1048576};
    int64_t *f[] = {&o->n_embd, &o->n_layer, &o->n_head, &o->head_dim, &o->n_rot, &o->q_lora, &o->o_groups,
                    &o->o_lora, &o->n_expert, &o->n_used, &o->n_ff_exp, &o->n_shared, &o->swa, &o->idx_heads,
                    &o->idx_dim, &o->idx_top_k, &o->hash, &o->n_ctx};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (*f[i] < 0) *f[i] = v[i];
}

/* defaults, the layer pattern and the checks gen-random makes before writing; NULL or why not */
static const char *d4_finish(d4_opts *o) {
    const int64_t def[] = {64, 4, 4, 128, 32, 32, 2, 32, 8, 2, 32, 1, 8, 4, 64, 4, 1, 4096};
    int64_t *f[] = {&o->n_embd, &o->n_layer, &o->n_head, &o->head_dim, &o->n_rot, &o->q_lora, &o->o_groups,
                    &o->o_lora, &o->n_expert, &o->n_used, &o->n_ff_exp, &o->n_shared, &o->swa, &o->idx_heads,
                    &o->idx_dim, &o->idx_top_k, &o->hash, &o->n_ctx};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (*f[i] < 0) *f[i] = def[i];
    if (o->exp_type < 0) o->exp_type = o->type;
    const int64_t nb = o->n_layer + o->nextn;
    if (o->n_layer < 1 || nb > DF_MAX_LAYERS) return "need 1 <= n-layer and n-layer + nextn <= 512";
    /* 0 on the first layer (V4 Flash: two), then 4 and 128 alternating (Flash: 4 on even layers);
     * NextN blocks 0 */
    const int64_t lead = o->flash ? 2 : 1;
    if (o->n_ratio == 0)
        for (int64_t il = 0; il < nb; il++)
            o->ratio[il] = il < lead || il >= o->n_layer ? 0 : (il % 2 == 0) == o->flash ? 4 : 128;
    else if (o->n_ratio < nb) return "--ratios needs an entry per layer (NextN blocks included)";
    if (o->n_embd < 1 || o->n_head < 1 || o->head_dim < 2 || o->n_rot < 2 || (o->n_rot & 1) || o->n_rot > o->head_dim ||
        o->q_lora < 1 || o->o_lora < 1 || o->n_ff_exp < 1 || o->n_shared < 1 || o->swa < 1 || o->n_ctx < 1)
        return "dims must be positive, rope-dim even and <= head-dim";
    if (o->o_groups < 1 || o->n_head % o->o_groups) return "o-groups must divide n-head";
    if (o->n_used < 1 || o->n_used > o->n_expert || o->n_expert > 1024) return "need 1 <= n-expert-used <= n-expert <= 1024";
    if (o->idx_dim < 64 || (o->idx_dim & (o->idx_dim - 1)) || o->idx_dim < o->n_rot || o->idx_heads < 1 || o->idx_top_k < 1)
        return "indexer-dim must be a power of two >= 64 and >= rope-dim, indexer heads and top-k >= 1";
    if (o->hash > o->n_layer) return "hash-layers must be <= n-layer";
    if (o->hc_iters < 1) return "hc-iters must be >= 1";
    return NULL;
}

/* the options the table does not take (gen_random.h's gr_args.other) */
static int d4_other(void *ud, const char *a, const char *v) {
    d4_opts *o = ud;
    if (!strcmp(a, "--arch")) {
        if (strcmp(v, "deepseek4")) { fprintf(stderr, "gen-random: --arch %s\n", v); return 2; }
    } else if (!strcmp(a, "--preset")) {
        if (strcmp(v, "v4-flash")) { fprintf(stderr, "gen-random: deepseek4 --preset: v4-flash\n"); return 2; }
        d4_preset(o);
        o->flash = true;
    } else if (!strcmp(a, "--ratios")) {
        if (!d4_parse_ratios(o, v)) { fprintf(stderr, "gen-random: --ratios: bad value '%s'\n", v); return 2; }
    } else {
        return -1;
    }
    return 0;
}

int df_gen_random_deepseek4(int argc, char **argv) {
    d4_opts o = {.type = DF_TYPE_F32, .exp_type = -1, .rope_base = 10000.0f, .comp_rope_base = 160000.0f,
                 .yarn_factor = 16.0f, .yarn_orig = 65536, .eps = 1e-6f, .hc_eps = 1e-6f, .limit = 10.0f,
                 .scale = 1.5f, .hc_iters = 20, .out_scale = 4.0f, .router_scale = 3.0f, .seed = 1};
    int64_t *neg[] = {&o.n_embd, &o.n_layer, &o.n_head, &o.head_dim, &o.n_rot, &o.q_lora, &o.o_groups, &o.o_lora,
                      &o.n_expert, &o.n_used, &o.n_ff_exp, &o.n_shared, &o.swa, &o.idx_heads, &o.idx_dim,
                      &o.idx_top_k, &o.hash, &o.n_ctx};
    for (size_t i = 0; i < sizeof neg / sizeof neg[0]; i++) *neg[i] = -1;
    const gr_opt opts[] = {
        {"--sparse", GR_FLAG, &o.sparse, 1}, {"--raw-experts", GR_FLAG, &o.raw_experts, 1},
        {"--n-embd", GR_I64, &o.n_embd, 0}, {"--n-layer", GR_I64, &o.n_layer, 0}, {"--n-head", GR_I64, &o.n_head, 0},
        {"--head-dim", GR_I64, &o.head_dim, 0}, {"--rope-dim", GR_I64, &o.n_rot, 0}, {"--q-lora", GR_I64, &o.q_lora, 0},
        {"--o-groups", GR_I64, &o.o_groups, 0}, {"--o-lora", GR_I64, &o.o_lora, 0}, {"--n-expert", GR_I64, &o.n_expert, 0},
        {"--n-expert-used", GR_I64, &o.n_used, 0}, {"--n-ff-exp", GR_I64, &o.n_ff_exp, 0},
        {"--n-shared", GR_I64, &o.n_shared, 0}, {"--swa", GR_I64, &o.swa, 0}, {"--indexer-heads", GR_I64, &o.idx_heads, 0},
        {"--indexer-dim", GR_I64, &o.idx_dim, 0}, {"--indexer-top-k", GR_I64, &o.idx_top_k, 0},
        {"--hash-layers", GR_I64, &o.hash, 0}, {"--hc-iters", GR_I64, &o.hc_iters, 0}, {"--nextn", GR_I64, &o.nextn, 0},
        {"--ctx", GR_I64, &o.n_ctx, 0}, {"--yarn-orig-ctx", GR_I64, &o.yarn_orig, 0},
        {"--rope-base", GR_F32, &o.rope_base, 0}, {"--compress-rope-base", GR_F32, &o.comp_rope_base, 0},
        {"--yarn-factor", GR_F32, &o.yarn_factor, 0}, {"--eps", GR_F32, &o.eps, 0}, {"--hc-eps", GR_F32, &o.hc_eps, 0},
        {"--swiglu-limit", GR_F32, &o.limit, 0}, {"--scale", GR_F32, &o.scale, 0},
        {"--out-scale", GR_F32, &o.out_scale, 0}, {"--router-scale", GR_F32, &o.router_scale, 0},
        {"--type", GR_TYPE, &o.type, 0}, {"--expert-type", GR_TYPE, &o.exp_type, 0},
        {"--vocab", GR_STR, &o.vocab, 0}, {"--name", GR_STR, &o.name, 0}, {"--seed", GR_SEED, &o.seed, 0},
    };
    const gr_args ga = {"deepseek4", opts, sizeof opts / sizeof opts[0], GR_T_F32 | GR_T_F16 | GR_T_Q8_0 | GR_T_Q4_K | GR_T_MXFP4,
                        d4_usage, d4_other, &o, &o.out};
    int prc = gr_parse_args(&ga, argc, argv);
    if (prc != 1) return prc;
    if (!o.out) { d4_usage(stderr); return 2; }
    const char *why = d4_finish(&o);
    if (why) { fprintf(stderr, "gen-random: %s\n", why); return 2; }
    return d4_write(o);
}
