/* gen_random_deepseek2.c — `deltafin-dev gen-random --arch deepseek2 [--variant V] ...`: a small
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


typedef struct {
    int type, exp_type;   /* matrices / routed experts (-1: type) */
    int64_t n_embd, n_layer, n_head, q_lora, kv_lora, d_nope, d_rope, d_v, n_ff, n_expert, n_used;
    int64_t n_ff_exp, n_shared, n_dense, groups, groups_used, n_ctx;
    int64_t idx_heads, idx_dim, idx_top_k; /* deepseek32 / glm-dsa lightning indexer */
    int64_t n_nextn;      /* NextN / MTP layers at the end (deepseek32, glm-dsa) */
    const char *arch;     /* deepseek2 | deepseek32 | glm-dsa */
    const char *idx_types; /* glm-dsa attention.indexer.types: "1,0,..." per layer that runs, or NULL */
    int gating;           /* 0 no key, 1 softmax, 2 sigmoid */
    bool bias, norm, legacy, hf_betas_keys, fused, sparse, yarn, shared_idx_tensors, raw_experts;
    float scale, rope_base, yarn_factor, yarn_log_mul, beta_fast, beta_slow;
    float out_scale, router_scale;
    uint64_t seed;
    const char *vocab, *out, *variant;
} ds_opts;


static void ds_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin-dev gen-random --arch deepseek2 [--variant V] [options] OUT.gguf\n\n"
        "Small random deepseek2 model (DeepSeek-V2/V3, Kimi-K2 layout). Deterministic.\n"
        "  --variant V        v3 (default: q LoRA, MLA, sigmoid + exp_probs_b + 4 groups keep 2,\n"
        "                     norm, scale 2.5, YaRN 40) | k2 (v3 with 1 group, base 50000, YaRN 32,\n"
        "                     scale 2.827, HF beta keys 1/1) | lite (attn_q, softmax, no norm,\n"
        "                     2 shared experts) | legacy (v3 with attn_kv_b, no *_mla keys)\n"
        "  --type T           f32 | f16 | q8_0 | q4_k (default f32; rows off the block: q8_0, f16)\n"
        "  --n-embd N (64)  --n-layer N (3)  --n-head N (4)  --q-lora N (32; 0 = Lite attn_q)\n"
        "  --kv-lora N (64)  --d-nope N (32)  --d-rope N (16)  --d-v N (32)  --n-ff N (96)\n"
        "  --n-expert N (8)  --n-expert-used N (2)  --n-ff-exp N (32)  --n-shared N (1)\n"
        "  --n-dense N (1)  --groups G (v3 4)  --groups-used U (v3 2)  --gating softmax|sigmoid\n"
        "  --no-bias  --no-norm  --legacy  --fused (ffn_gate_up_exps)  --scale F  --rope-base F\n"
        "  --yarn-factor F\n"
        "  --expert-type T    routed experts' type: f32 | f16 | q8_0 | mxfp4 (default --type)\n"
        "  --raw-experts      q8_0 / mxfp4 experts filled with random valid blocks directly (fast)\n"
        "  --preset kimi-k2    Kimi-K2 widths (61 layers, 384 experts; ~1 TB: use with --sparse)\n"
        "  --preset glm-5      GLM-5 widths (--arch glm-dsa: 78 layers + 1 NextN, hidden 6144, 64 heads,\n"
        "                      q/kv LoRA 2048/512, nope/rope/v 192/64/256, 3 dense layers of 12288,\n"
        "                      256 experts top-8 of 2048 + 1 shared, indexer 32 x 128 top-2048,\n"
        "                      context 202752; use --sparse, or --n-layer / --n-expert to shrink)\n"
        "  --sparse            write the header only and extend the file with a hole (all-zero\n"
        "                      weights, no disk use): for `deltafin info` / memory plans at real shapes\n"
        "  --vocab PATH|bytes  --seed S (1)  --out-scale F (4)  --router-scale F (3)  --ctx N (4096)\n"
        "  --arch deepseek32   DeepSeek-V3.2: v3 plus the DSA lightning indexer per layer\n"
        "                      (variants v3 / k2 only; --d-rope defaults to indexer-dim / 2):\n"
        "                      --indexer-heads N (8)  --indexer-dim N (64, a power of two >= 64)\n"
        "                      --indexer-top-k N (8: below the prompt length, so the sparse key\n"
        "                      selection is exercised)  --nextn N (0: NextN / MTP layers at the end)\n"
        "  --arch glm-dsa      GLM-5: deepseek32's layout, variant glm5 (v3 with 1 expert group, no\n"
        "                      YaRN keys unless --yarn-factor, rope base 1e6, 5 layers of which the\n"
        "                      last is a NextN layer, --nextn 1) and\n"
        "                      --indexer-types L (1,0,1,0: per layer that runs, 1 = full indexer,\n"
        "                      0 = shared, reusing the previous full layer's keys; 'none' omits the\n"
        "                      key: every layer full below --ctx 1048576, else GLM-5.2's pattern)\n"
        "                      --shared-indexer-tensors (shared layers carry indexer tensors too)\n"
        "  --gating none       write no expert_gating_func (the architecture's default applies)\n"
        "  --no-yarn           write no rope.scaling keys\n");
}

/* "1,0,1" -> flags[0..n); nonzero when the list is not n comma-separated 0 / 1. */
static int parse_flags(const char *s, uint8_t *flags, int64_t n) {
    int64_t k = 0;
    for (const char *p = s; *p; p++) {
        if ((*p == '0' || *p == '1') && k < n && (p[1] == ',' || !p[1])) flags[k++] = (uint8_t)(*p - '0');
        else if (*p != ',' || p == s || p[-1] == ',') return 1;
    }
    return k != n || s[strlen(s) - 1] == ',';
}

/* The file's alternatives and optional tensors: fused gate_up (--fused), exp_probs_b (not
 * --no-bias), the output head, the indexer tensors of shared layers (--shared-indexer-tensors),
 * a NextN layer's shared_head_norm (as GLM GGUFs carry it). */
static bool ds_has(void *ud, uint32_t bit, const char *name) {
    (void)name;
    return bit == DF_W_FUSED_GATE_UP && ((const ds_opts *)ud)->fused;
}

static bool ds_want(void *ud, const df_tensor_spec *s, int il) {
    (void)il;
    const ds_opts *o = ud;
    if (s->field == DF_LF(exp_probs_b)) return o->bias;
    if (strstr(s->name, ".indexer.")) return o->shared_idx_tensors;
    if (strstr(s->name, "nextn.shared_head_norm")) return true;
    return s->field == DF_MF(output);
}

/* KVs, then the tensors from the schema (gen_random_schema.c). */
static int ds_write(ds_opts o) {
    char vbuf[4096];
    gr_default_vocab(&o.vocab, vbuf, sizeof vbuf);

    const char *A = o.arch;
    const bool dsa = strcmp(A, "deepseek2") != 0;
    uint8_t types[DF_MAX_LAYERS];
    const int64_t n_run = o.n_layer - o.n_nextn;
    if (o.idx_types && parse_flags(o.idx_types, types, n_run)) {
        fprintf(stderr, "gen-random: --indexer-types needs %lld comma-separated 0/1 (one per layer that runs)\n",
                (long long)n_run);
        return 2;
    }
    int rc = DF_OK;
    df_gguf_writer *w = df_gguf_writer_new(GR_ALIGN);
    if (!w) return 1;
    char key[128];
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    const int64_t H = o.n_embd, nh = o.n_head, dq = o.d_nope + o.d_rope;
    int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : o.type == DF_TYPE_Q4_K ? 15 : 7;
    if (o.exp_type == DF_TYPE_MXFP4) ftype = 38;
    char nm[64];
    snprintf(nm, sizeof nm, "deltafin-random-%s-%s", A, o.variant);
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) || (rc = df_gguf_w_str(w, "general.name", nm)) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type != DF_TYPE_F32 && o.type != DF_TYPE_F16 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))) ||
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
        (o.yarn && (rc = (snprintf(key, sizeof key, "%s.rope.scaling.type", A), df_gguf_w_str(w, key, "yarn")))) ||
        (o.yarn && (rc = KF32("rope.scaling.factor", o.yarn_factor))) ||
        (o.yarn && (rc = KU32("rope.scaling.original_context_length", 4096))) ||
        (o.yarn && (rc = KF32("rope.scaling.yarn_log_multiplier", o.yarn_log_mul))) ||
        (o.hf_betas_keys && (rc = KF32("rope.scaling.yarn_beta_fast", o.beta_fast))) ||
        (o.hf_betas_keys && (rc = KF32("rope.scaling.yarn_beta_slow", o.beta_slow))) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", 1e-6f)) ||
        (rc = KU32("leading_dense_block_count", o.n_dense)) || (rc = KU32("expert_count", o.n_expert)) ||
        (rc = KU32("expert_used_count", o.n_used)) || (rc = KU32("expert_shared_count", o.n_shared)) ||
        (rc = KU32("expert_feed_forward_length", o.n_ff_exp)) || (rc = KF32("expert_weights_scale", o.scale)) ||
        (rc = (snprintf(key, sizeof key, "%s.expert_weights_norm", A), df_gguf_w_bool(w, key, o.norm))) ||
        (o.gating && (rc = KU32("expert_gating_func", o.gating))) || (rc = KU32("expert_group_count", o.groups)) ||
        (rc = KU32("expert_group_used_count", o.groups_used)) ||
        (dsa && (rc = KU32("attention.indexer.head_count", o.idx_heads))) ||
        (dsa && (rc = KU32("attention.indexer.key_length", o.idx_dim))) ||
        (dsa && (rc = KU32("attention.indexer.top_k", o.idx_top_k))) ||
        (o.n_nextn && (rc = KU32("nextn_predict_layers", o.n_nextn))) ||
        (o.idx_types && (rc = (snprintf(key, sizeof key, "%s.attention.indexer.types", A),
                               df_gguf_w_arr(w, key, DF_GGUF_BOOL, types, (uint64_t)n_run)))))
        goto done;
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, A, o.vocab, &n_vocab))) goto done;
#undef KU32
#undef KF32
    gr_model g = {.arch = A, .type = o.type, .exp_type = o.exp_type, .raw_experts = o.raw_experts,
                  .type_fallback = o.type == DF_TYPE_Q4_K || o.exp_type == DF_TYPE_Q4_K, .out_scale = o.out_scale,
                  .router_scale = o.router_scale, .mat_scale = 1.0f, .res_scale = 1.0f, .seed = o.seed,
                  .sparse = o.sparse, .pad_end = !o.sparse, .has = ds_has, .want = ds_want, .ud = &o,
                  .out = o.out};
    df_hparams *hp = &g.hp;
    hp->n_vocab = (int)n_vocab;
    hp->n_embd = (int)H;
    hp->n_layer = (int)o.n_layer;
    hp->n_head = (int)nh;
    hp->n_head_kv = o.legacy ? (int)nh : 1;
    hp->n_rot = (int)o.d_rope;
    hp->n_embd_head_k = (int)(o.legacy ? dq : o.kv_lora + o.d_rope);
    hp->n_embd_head_v = (int)(o.legacy ? o.d_v : o.kv_lora);
    hp->n_embd_head_k_mla = (int)dq;
    hp->n_embd_head_v_mla = (int)o.d_v;
    hp->is_mla = !o.legacy;
    hp->n_lora_q = (int)o.q_lora;
    hp->n_lora_kv = (int)o.kv_lora;
    hp->n_ff = (int)o.n_ff;
    hp->n_layer_dense_lead = (int)o.n_dense;
    hp->n_expert = (int)o.n_expert;
    hp->n_ff_exp = (int)o.n_ff_exp;
    hp->n_expert_shared = (int)o.n_shared;
    hp->n_ff_shexp = (int)(o.n_ff_exp * o.n_shared);
    if (dsa) {
        hp->indexer_n_head = (int)o.idx_heads;
        hp->indexer_head_size = (int)o.idx_dim;
        hp->indexer_top_k = (int)o.idx_top_k;
        hp->n_layer_nextn = (int)o.n_nextn;
        /* the binder's view (arch_deepseek2.c): the key, else every layer full below a 1M
         * training context (GLM-5 / 5.1), else GLM-5.2's pattern */
        const bool glm52 = !strcmp(A, "glm-dsa") && o.n_ctx >= 1048576;
        for (int64_t il = 0; il < o.n_layer; il++)
            hp->layer_dsa_shared[il] = il >= n_run ? !!strcmp(A, "deepseek32")
                                       : o.idx_types ? !types[il] : glm52 && !df_dsa_glm52_full((int)il);
    }
    gr_stats st;
    rc = gr_write_model(w, &g, &st);
    if (!rc)
        fprintf(stderr, "gen-random: wrote %s (%s %s, %s, %lld layers, n_embd %lld, vocab %lld from %s)\n",
                o.out, A, o.variant, df_gguf_tensor_type_name(o.type),
                (long long)o.n_layer, (long long)H, (long long)n_vocab, o.vocab);
done:
    df_gguf_writer_free(w);
    if (rc) { fprintf(stderr, "gen-random: %s\n", df_errmsg()); return 1; }
    return 0;
}

/* The command line before the variant's defaults (ds_resolve): -1 = not given. A --d-rope
 * given (or set by --preset glm-5) also holds for deepseek32 / glm-dsa, whose default is
 * indexer-dim / 2 (kimi-k2's preset width does not count as given, as before the table). */
typedef struct {
    ds_opts o;
    int64_t q_lora, n_shared, n_layer, d_rope;
    float rope_base, yarn_factor;
    bool no_bias, no_norm, legacy, no_yarn, no_gating;
    const char *variant, *idx_types;
} ds_cli;

/* --preset (applied where it stands: later options override it), --arch, --variant, --gating */
static int ds_other(void *ud, const char *a, const char *v) {
    ds_cli *c = ud;
    ds_opts *o = &c->o;
    if (!strcmp(a, "--preset") && !strcmp(v, "glm-5")) {
        o->arch = "glm-dsa"; c->variant = "glm5";
        o->n_embd = 6144; c->n_layer = 79; o->n_nextn = 1; o->n_head = 64; c->q_lora = 2048; o->kv_lora = 512;
        o->d_nope = 192; c->d_rope = 64; o->d_v = 256; o->n_ff = 12288; o->n_expert = 256;
        o->n_used = 8; o->n_ff_exp = 2048; c->n_shared = 1; o->n_dense = 3; o->n_ctx = 202752; o->idx_heads = 32;
        o->idx_dim = 128; o->idx_top_k = 2048;
    } else if (!strcmp(a, "--preset")) {
        if (strcmp(v, "kimi-k2")) { fprintf(stderr, "gen-random: deepseek2 --preset: kimi-k2 | glm-5\n"); return 2; }
        c->variant = "k2";
        o->n_embd = 7168; c->n_layer = 61; o->n_head = 64; c->q_lora = 1536; o->kv_lora = 512; o->d_nope = 128;
        *(c->d_rope >= 0 ? &c->d_rope : &o->d_rope) = 64;
        o->d_v = 128; o->n_ff = 18432; o->n_expert = 384; o->n_used = 8; o->n_ff_exp = 2048;
        c->n_shared = 1; o->n_dense = 1; o->n_ctx = 131072;
    } else if (!strcmp(a, "--arch")) {
        if (strcmp(v, "deepseek2") && strcmp(v, "deepseek32") && strcmp(v, "glm-dsa")) {
            fprintf(stderr, "gen-random: --arch %s\n", v);
            return 2;
        }
        o->arch = v;
    } else if (!strcmp(a, "--variant")) {
        if (strcmp(v, "v3") && strcmp(v, "k2") && strcmp(v, "lite") && strcmp(v, "legacy") && strcmp(v, "glm5")) {
            fprintf(stderr, "gen-random: unknown --variant '%s'\n", v);
            return 2;
        }
        c->variant = v;
    } else if (!strcmp(a, "--gating")) {
        if (!strcmp(v, "softmax")) o->gating = 1;
        else if (!strcmp(v, "sigmoid")) o->gating = 2;
        else if (!strcmp(v, "none")) c->no_gating = true;
        else { fprintf(stderr, "gen-random: --gating softmax|sigmoid|none\n"); return 2; }
    } else {
        return -1;
    }
    return 0;
}

/* The variant's defaults (glm-dsa: glm5), then the options given explicitly. */
static void ds_resolve(ds_cli *c) {
    ds_opts *o = &c->o;
    const bool glm = !strcmp(o->arch, "glm-dsa");
    o->variant = c->variant ? c->variant : glm ? "glm5" : "v3";
    const bool k2 = !strcmp(o->variant, "k2"), lite = !strcmp(o->variant, "lite"), glm5 = !strcmp(o->variant, "glm5");
    o->rope_base = k2 ? 50000.0f : glm5 ? 1000000.0f : 10000.0f;
    o->yarn_factor = k2 ? 32.0f : 40.0f;
    o->yarn_log_mul = lite ? 0.0707f : 0.1f;
    o->hf_betas_keys = k2;
    o->beta_fast = 1.0f;
    o->beta_slow = 1.0f;
    if (lite) { o->q_lora = 0; o->n_shared = 2; o->bias = false; o->norm = false; }
    if (!strcmp(o->variant, "legacy")) o->legacy = true;
    if (o->gating < 0) o->gating = lite ? 1 : 2;
    if (o->groups < 0) o->groups = (lite || k2 || glm5) ? 1 : 4;
    if (o->groups_used < 0) o->groups_used = (lite || k2 || glm5) ? 1 : 2;
    if (o->scale < 0) o->scale = lite ? 1.0f : k2 ? 2.827f : 2.5f;
    if (c->d_rope >= 0) o->d_rope = c->d_rope;
    else if (strcmp(o->arch, "deepseek2")) o->d_rope = o->idx_dim / 2;
    o->n_layer = c->n_layer > 0 ? c->n_layer : glm5 ? 5 : o->n_layer;
    if (o->n_nextn < 0) o->n_nextn = glm5 ? 1 : 0;
    o->idx_types = c->idx_types ? (strcmp(c->idx_types, "none") ? c->idx_types : NULL)
                                : glm && o->n_layer - o->n_nextn == 4 ? "1,0,1,0" : NULL;
    o->yarn = !c->no_yarn && (!glm5 || c->yarn_factor > 0);
    if (c->no_gating) o->gating = 0;
    if (o->exp_type < 0) o->exp_type = o->type;
    if (c->q_lora >= 0) o->q_lora = c->q_lora;
    if (c->rope_base > 0) o->rope_base = c->rope_base;
    if (c->yarn_factor > 0) o->yarn_factor = c->yarn_factor;
    if (c->n_shared >= 0) o->n_shared = c->n_shared;
    if (c->no_bias) o->bias = false;
    if (c->no_norm) o->norm = false;
    if (c->legacy) o->legacy = true;
}

/* NULL, or why the resolved options make no model llama.cpp loads */
static const char *ds_check(const ds_opts *o) {
    const bool dsa = strcmp(o->arch, "deepseek2") != 0;
    if (o->n_embd < 1 || o->n_layer < 1 || o->n_head < 1 || o->kv_lora < 1 || o->d_nope < 1 || o->d_v < 1 ||
        o->d_rope < 2 || (o->d_rope & 1))
        return "dims must be positive and d-rope even";
    if (o->n_dense > o->n_layer) return "n-dense must be <= n-layer";
    if (o->n_used < 1 || o->n_used > o->n_expert || o->n_expert > 512) return "need 1 <= n-expert-used <= n-expert <= 512";
    if (o->groups > 1 && (o->n_expert % o->groups || o->groups_used < 1 || o->groups_used > o->groups))
        return "groups must divide n-expert and 1 <= groups-used <= groups";
    if (dsa && (o->legacy || o->q_lora < 1)) return "deepseek32 / glm-dsa need MLA and q LoRA (variants v3 / k2 / glm5)";
    if (dsa && (o->idx_dim < 64 || (o->idx_dim & (o->idx_dim - 1)) || o->idx_dim != 2 * o->d_rope || o->idx_heads < 1 ||
                o->idx_top_k < 1))
        return "indexer-dim must be a power of two >= 64 and 2 x d-rope (llama.cpp's graph), indexer "
               "heads and top-k >= 1";
    if (o->n_nextn && (!dsa || o->n_nextn >= o->n_layer || o->n_dense > o->n_layer - o->n_nextn))
        return "--nextn: deepseek32 / glm-dsa only, fewer than n-layer, n-dense <= the layers that run";
    if (o->idx_types && strcmp(o->arch, "glm-dsa")) return "--indexer-types is glm-dsa's";
    if (o->n_layer > DF_MAX_LAYERS) return "n-layer too large";
    return NULL;
}

int df_gen_random_deepseek2(int argc, char **argv) {
    ds_cli c = {.o = {.type = DF_TYPE_F32, .exp_type = -1, .n_embd = 64, .n_layer = 3, .n_head = 4, .q_lora = 32,
                      .kv_lora = 64, .d_nope = 32, .d_rope = 16, .d_v = 32, .n_ff = 96, .n_expert = 8, .n_used = 2,
                      .n_ff_exp = 32, .n_shared = 1, .n_dense = 1, .groups = -1, .groups_used = -1,
                      .n_ctx = 4096, .gating = -1, .bias = true, .norm = true, .scale = -1.0f,
                      .out_scale = 4.0f, .router_scale = 3.0f, .seed = 1, .variant = "v3",
                      .idx_heads = 8, .idx_dim = 64, .idx_top_k = 8, .n_nextn = -1, .arch = "deepseek2"},
                .q_lora = -1, .n_shared = -1, .n_layer = -1, .d_rope = -1, .rope_base = -1.0f, .yarn_factor = -1.0f};
    ds_opts *o = &c.o;
    const int64_t M = 1 << 20;
    const unsigned types = GR_T_F32 | GR_T_F16 | GR_T_Q8_0 | GR_T_Q4_K;
    const gr_opt opts[] = {
        {"--no-bias", GR_FLAG, &c.no_bias, 1}, {"--no-norm", GR_FLAG, &c.no_norm, 1}, {"--legacy", GR_FLAG, &c.legacy, 1},
        {"--fused", GR_FLAG, &o->fused, 1}, {"--sparse", GR_FLAG, &o->sparse, 1}, {"--no-yarn", GR_FLAG, &c.no_yarn, 1},
        {"--shared-indexer-tensors", GR_FLAG, &o->shared_idx_tensors, 1}, {"--raw-experts", GR_FLAG, &o->raw_experts, 1},
        {"--n-embd", GR_I64, &o->n_embd, M}, {"--n-layer", GR_I64, &c.n_layer, M}, {"--n-head", GR_I64, &o->n_head, M},
        {"--q-lora", GR_I64, &c.q_lora, M}, {"--kv-lora", GR_I64, &o->kv_lora, M}, {"--d-nope", GR_I64, &o->d_nope, M},
        {"--d-rope", GR_I64, &c.d_rope, M}, {"--d-v", GR_I64, &o->d_v, M}, {"--n-ff", GR_I64, &o->n_ff, M},
        {"--n-expert", GR_I64, &o->n_expert, M}, {"--n-expert-used", GR_I64, &o->n_used, M},
        {"--n-ff-exp", GR_I64, &o->n_ff_exp, M}, {"--n-shared", GR_I64, &c.n_shared, M},
        {"--n-dense", GR_I64, &o->n_dense, M}, {"--groups", GR_I64, &o->groups, M},
        {"--groups-used", GR_I64, &o->groups_used, M}, {"--ctx", GR_I64, &o->n_ctx, M},
        {"--indexer-heads", GR_I64, &o->idx_heads, M}, {"--indexer-dim", GR_I64, &o->idx_dim, M},
        {"--indexer-top-k", GR_I64, &o->idx_top_k, M}, {"--nextn", GR_I64, &o->n_nextn, M},
        {"--rope-base", GR_F32_POS, &c.rope_base, 0}, {"--yarn-factor", GR_F32_POS, &c.yarn_factor, 0},
        {"--scale", GR_F32, &o->scale, 0}, {"--out-scale", GR_F32, &o->out_scale, 0},
        {"--router-scale", GR_F32, &o->router_scale, 0},
        {"--type", GR_TYPE, &o->type, types}, {"--expert-type", GR_TYPE, &o->exp_type, types | GR_T_MXFP4},
        {"--vocab", GR_STR, &o->vocab, 0}, {"--indexer-types", GR_STR, &c.idx_types, 0}, {"--seed", GR_SEED, &o->seed, 0},
    };
    const gr_args ga = {"deepseek2", opts, sizeof opts / sizeof opts[0], types, ds_usage, ds_other, &c, &o->out};
    int prc = gr_parse_args(&ga, argc, argv);
    if (prc != 1) return prc;
    if (!o->out) { ds_usage(stderr); return 2; }
    ds_resolve(&c);
    const char *why = ds_check(o);
    if (why) { fprintf(stderr, "gen-random: %s\n", why); return 2; }
    return ds_write(c.o);
}
