/* arch_deepseek2.c — DeepSeek-V2(-Lite) / V3 / R1 and Kimi-K2 (formats.md §3.4): multi-head latent
 * attention (q LoRA or the Lite attn_q, compressed KV of kv_lora_rank + rope dims per token),
 * RoPE NORM with YaRN of magnitude 1 and kq_scale = mscale²/sqrt(dq), leading dense layers,
 * MoE with sigmoid/softmax gating, selection bias, expert groups, renormalisation and the
 * routed scaling factor, plus ungated shared experts (moe.c does the routing and experts).
 * The attention itself is src/forward/attn_mla.c (absorbed MLA and the legacy attn_kv_b form).
 * deepseek32 (DeepSeek-V3.2) and glm-dsa (GLM-5) add DeepSeek Sparse Attention (below). 
 * DELTAFIN_YARN_HF_BETAS=1 uses the file's rope.scaling.yarn_beta_fast/slow (HF semantics,
 * e.g. Kimi-K2's 1/1) instead of llama.cpp's fixed 32/1; off by default for llama.cpp parity. */
#include "model/model.h"
#include "base/env.h"
#include <math.h>
#include <stdlib.h>

#define TRYK(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

/* deepseek2's hyperparameters, shared by deepseek32 and glm-dsa; where llama.cpp's loaders of
 * these architectures differ: the gating function of files without expert_gating_func
 * (deepseek2: softmax, the old V2 files; glm-dsa: sigmoid) and rope.scaling.yarn_log_multiplier
 * (0.1 · mscale_all_dim): deepseek2 / deepseek32 read it and divide it by 0.1 before kq_scale
 * ([TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]); glm-dsa never reads it (0: no mscale_all_dim term, and
 * llama_context's YaRN attn_factor without it). */
static int ds2_hparams(df_model *m, int gating_default, bool log_mul_fix) {
    df_hparams *hp = &m->hp;
    if (!log_mul_fix && hp->yarn_log_mul != 0.0f) {
        hp->yarn_log_mul = 0.0f;
        TRYK(df_model_rope_attn_factor(m));
    }
    hp->rope_mode = DF_ROPE_NORM;
    uint32_t u;
    u = 0; TRYK(df_model_key_u32(m, "leading_dense_block_count", &u, false)); hp->n_layer_dense_lead = (int)u;
    /* llama.cpp requires q_lora_rank except for the Lite layer counts; 0 or absent = attn_q */
    u = 0; TRYK(df_model_key_u32(m, "attention.q_lora_rank", &u, false)); hp->n_lora_q = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.kv_lora_rank", &u, true)); hp->n_lora_kv = (int)u;
    uint32_t km = 0, vm = 0;
    TRYK(df_model_key_u32(m, "attention.key_length_mla", &km, false));
    TRYK(df_model_key_u32(m, "attention.value_length_mla", &vm, false));
    hp->is_mla = km != 0 && vm != 0;
    hp->n_embd_head_k_mla = km ? (int)km : hp->n_embd_head_k;
    hp->n_embd_head_v_mla = vm ? (int)vm : hp->n_embd_head_v;
    u = 0; TRYK(df_model_key_u32(m, "expert_shared_count", &u, false)); hp->n_expert_shared = (int)u;
    hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared; /* shared experts side by side */
    hp->expert_weights_scale = 0.0f;
    TRYK(df_model_key_f32(m, "expert_weights_scale", &hp->expert_weights_scale, false));
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch->name);
    hp->expert_weights_norm = false;
    int rcb = df_gguf_get_bool(m->gguf, key, &hp->expert_weights_norm);
    if (rcb < 0 && rcb != DF_ERR_NOTFOUND) return rcb;
    u = 0; TRYK(df_model_key_u32(m, "expert_gating_func", &u, false));
    if (u == 0) u = (uint32_t)gating_default;
    if (u != DF_GATING_SOFTMAX && u != DF_GATING_SIGMOID)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_gating_func %u not supported for %s", m->path, u,
                      m->arch->name);
    hp->gating = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_group_count", &u, false)); hp->n_expert_groups = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_group_used_count", &u, false)); hp->n_group_used = (int)u;

    const int dr = hp->n_rot, dq = hp->n_embd_head_k_mla, dv = hp->n_embd_head_v_mla;
    if (hp->n_lora_kv <= 0 || hp->n_lora_kv > 65536 || hp->n_lora_q < 0 || hp->n_lora_q > 65536 ||
        dr <= 0 || dq <= dr || dq > 4096 || dv <= 0 || dv > 4096)
        return df_err(DF_ERR_FORMAT, "%s: bad MLA dims (q_lora %d, kv_lora %d, k_mla %d, v_mla %d, rope %d)",
                      m->path, hp->n_lora_q, hp->n_lora_kv, dq, dv, dr);
    if (hp->is_mla && (hp->n_head_kv != 1 || hp->n_embd_head_k != hp->n_lora_kv + dr ||
                       hp->n_embd_head_v != hp->n_lora_kv))
        return df_err(DF_ERR_FORMAT, "%s: MLA file needs head_count_kv 1, key_length %d, value_length %d "
                      "(got %d, %d, %d)", m->path, hp->n_lora_kv + dr, hp->n_lora_kv, hp->n_head_kv,
                      hp->n_embd_head_k, hp->n_embd_head_v);
    if (!hp->is_mla && hp->n_head_kv != hp->n_head)
        return df_err(DF_ERR_FORMAT, "%s: legacy (attn_kv_b) deepseek2 file needs head_count_kv == "
                      "head_count", m->path);
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead > hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: leading_dense_block_count %d > block_count", m->path,
                      hp->n_layer_dense_lead);
    if (hp->n_layer_dense_lead < hp->n_layer) {
        if (hp->n_expert <= 0 || hp->n_ff_exp <= 0)
            return df_err(DF_ERR_FORMAT, "%s: deepseek2 MoE layers need expert_count and "
                          "expert_feed_forward_length", m->path);
        if (hp->n_expert_groups > 1 &&
            (hp->n_expert % hp->n_expert_groups || hp->n_group_used <= 0 ||
             hp->n_group_used > hp->n_expert_groups || hp->n_expert_groups > 256 ||
             hp->n_expert / hp->n_expert_groups < 2))
            return df_err(DF_ERR_FORMAT, "%s: bad expert groups (%d experts, %d groups, %d used)", m->path,
                          hp->n_expert, hp->n_expert_groups, hp->n_group_used);
    }
    if (hp->n_layer_dense_lead > 0 && hp->n_ff <= 0)
        return df_err(DF_ERR_FORMAT, "%s: dense layers need feed_forward_length", m->path);

    /* YaRN betas: llama.cpp ignores the file's keys for deepseek2 (formats.md §3.4) */
    if (df_env()->yarn_hf_betas) {
        TRYK(df_model_key_f32(m, "rope.scaling.yarn_beta_fast", &hp->yarn_beta_fast, false));
        TRYK(df_model_key_f32(m, "rope.scaling.yarn_beta_slow", &hp->yarn_beta_slow, false));
    }
    /* kq_scale = mscale² / sqrt(dq) exactly as llama.cpp's deepseek2 graph computes it:
     * the context attn_factor with the YaRN adjustment cancelled, times the mscale_all_dim
     * term (the stored yarn_log_multiplier is 0.1·mscale_all_dim). */
    const float fs = hp->rope_freq_scale;
    const float attn_factor_org = hp->rope_attn_factor * (1.0f + 0.1f * logf(1.0f / fs));
    const float log_mul = hp->yarn_log_mul / 0.1f;
    const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * logf(1.0f / fs));
    hp->kq_scale = 1.0f * mscale * mscale / sqrtf((float)dq);
    return DF_OK;
}

static int deepseek2_hparams(df_model *m) { return ds2_hparams(m, DF_GATING_SOFTMAX, true); }

/* layer properties of the tables below; DSA_FULL: a layer with its own lightning indexer */
enum { DS2_QLORA = DF_W_ARCH(0), DS2_MLA = DF_W_ARCH(1), DS2_SHEXP = DF_W_ARCH(2), DSA_FULL = DF_W_ARCH(3) };

static uint32_t deepseek2_props(const df_hparams *hp, int il) {
    return (hp->n_lora_q > 0 ? DS2_QLORA : 0) | (hp->is_mla ? DS2_MLA : 0) |
           ((int64_t)hp->n_ff_exp * hp->n_expert_shared > 0 ? DS2_SHEXP : 0) |
           (hp->indexer_top_k > 0 && il >= 0 && !hp->layer_dsa_shared[il] ? DSA_FULL : 0);
}

#define MOE DF_W_MOE
#define FUSED DF_W_FUSED_GATE_UP
#define DS2_ATTN_TENSORS \
    DF_SCHEMA_TOK_EMBD, \
    DF_TS("blk.%d.attn_norm.weight", DF_LF(attn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD), \
    /* q LoRA (V2/V3/K2), or the Lite attn_q */ \
    DF_TS("blk.%d.attn_q_a.weight", DF_LF(wq_a), 0, DF_R_MAT, DS2_QLORA, 0, DF_D_EMBD, DF_D_LORA_Q), \
    DF_TS("blk.%d.attn_q_a_norm.weight", DF_LF(q_a_norm), DF_T_NORM, DF_R_NORM, DS2_QLORA, 0, DF_D_LORA_Q), \
    DF_TS("blk.%d.attn_q_b.weight", DF_LF(wq_b), 0, DF_R_MAT, DS2_QLORA, 0, DF_D_LORA_Q, DF_D_MLA_Q), \
    DF_TS("blk.%d.attn_q.weight", DF_LF(wq), 0, DF_R_MAT, 0, DS2_QLORA, DF_D_EMBD, DF_D_MLA_Q), \
    /* compressed KV + shared rope key; absorbed k_b / v_b (MLA files) or the legacy kv_b */ \
    DF_TS("blk.%d.attn_kv_a_mqa.weight", DF_LF(wkv_a_mqa), 0, DF_R_MAT, 0, 0, DF_D_EMBD, DF_D_KV_A), \
    DF_TS("blk.%d.attn_kv_a_norm.weight", DF_LF(kv_a_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_LORA_KV), \
    DF_TS("blk.%d.attn_kv_b.weight", DF_LF(wkv_b), 0, DF_R_MAT, 0, DS2_MLA, DF_D_LORA_KV, DF_D_MLA_KV_B), \
    DF_TS("blk.%d.attn_k_b.weight", DF_LF(wk_b), 0, DF_R_MAT, DS2_MLA, 0, DF_D_MLA_NOPE, DF_D_LORA_KV, DF_D_HEAD), \
    DF_TS("blk.%d.attn_v_b.weight", DF_LF(wv_b), 0, DF_R_MAT, DS2_MLA, 0, DF_D_LORA_KV, DF_D_MLA_V, DF_D_HEAD), \
    DF_TS("blk.%d.attn_output.weight", DF_LF(wo), 0, DF_R_MAT, 0, 0, DF_D_MLA_O, DF_D_EMBD),
#define DS2_FFN_TENSORS \
    DF_SCHEMA_FFN_NORM, \
    DF_SCHEMA_FFN_DENSE,       /* the leading dense layers */ \
    DF_SCHEMA_MOE_ROUTER, \
    DF_TS("blk.%d.exp_probs_b.bias", DF_LF(exp_probs_b), DF_T_OPTIONAL | DF_T_NORM, DF_R_BIAS, MOE, 0, \
          DF_D_EXPERT), \
    /* fused ffn_gate_up_exps {n_embd, 2 n_ff_exp, E}: exps[GATE] == exps[UP] (model.h) */ \
    {"blk.%d.ffn_gate_up_exps.weight", DF_LF(exps[DF_EXPERT_GATE]), DF_LF(exps[DF_EXPERT_UP]), DF_T_EXPERT, \
     DF_R_MAT, MOE | FUSED, 0, {DF_D_EMBD, DF_DX(2, DF_D_FF_EXP), DF_D_EXPERT}}, \
    DF_TS("blk.%d.ffn_gate_exps.weight", DF_LF(exps[DF_EXPERT_GATE]), DF_T_EXPERT, DF_R_MAT, MOE, FUSED, \
          DF_D_EMBD, DF_D_FF_EXP, DF_D_EXPERT), \
    DF_TS("blk.%d.ffn_down_exps.weight", DF_LF(exps[DF_EXPERT_DOWN]), DF_T_EXPERT, DF_R_MAT, MOE, 0, \
          DF_D_FF_EXP, DF_D_EMBD, DF_D_EXPERT), \
    DF_TS("blk.%d.ffn_up_exps.weight", DF_LF(exps[DF_EXPERT_UP]), DF_T_EXPERT, DF_R_MAT, MOE, FUSED, \
          DF_D_EMBD, DF_D_FF_EXP, DF_D_EXPERT), \
    DF_SCHEMA_SHEXP(0, DS2_SHEXP),  /* n_ff_shexp = n_ff_exp · expert_shared_count */
static const df_tensor_spec deepseek2_tensors[] = {
    DS2_ATTN_TENSORS
    DS2_FFN_TENSORS
    DF_SCHEMA_OUTPUT(DF_T_OPTIONAL),
};
/* deepseek32 (DeepSeek-V3.2) and glm-dsa (GLM-5): deepseek2's tensors plus the DSA lightning
 * indexer of each full indexer layer; glm-dsa's shared layers may carry indexer tensors too
 * (llama.cpp loads them and never reads them: bound here, not loaded), then the NextN / MTP
 * heads' own tensors (the last nextn_predict_layers blocks, never run). */
enum { DS32_IH = DF_D_ARCH, DS32_ID, DS32_IQ };
#define DSA_INDEXER(f_norm, f_norm_b, f_proj, f_k, f_q_b, flags, when, unless) \
    DF_TS("blk.%d.indexer.k_norm.weight", f_norm, (flags) | DF_T_NORM, DF_R_NORM, when, unless, DS32_ID), \
    DF_TS("blk.%d.indexer.k_norm.bias", f_norm_b, (flags) | DF_T_NORM, DF_R_BIAS, when, unless, DS32_ID), \
    DF_TS("blk.%d.indexer.proj.weight", f_proj, flags, DF_R_MAT, when, unless, DF_D_EMBD, DS32_IH), \
    DF_TS("blk.%d.indexer.attn_k.weight", f_k, flags, DF_R_MAT, when, unless, DF_D_EMBD, DS32_ID), \
    DF_TS("blk.%d.indexer.attn_q_b.weight", f_q_b, flags, DF_R_MAT, when, unless, DF_D_LORA_Q, DS32_IQ)
static const df_tensor_spec deepseek32_tensors[] = {
    DS2_ATTN_TENSORS
    DSA_INDEXER(DF_LF(idx_k_norm), DF_LF(idx_k_norm_b), DF_LF(idx_proj), DF_LF(idx_k), DF_LF(idx_q_b), 0,
                DSA_FULL, 0),
    DSA_INDEXER(0, 0, 0, 0, 0, DF_T_OPTIONAL | DF_T_UNUSED, 0, DSA_FULL),
    DS2_FFN_TENSORS
    DF_SCHEMA_NEXTN,
    DF_SCHEMA_OUTPUT(DF_T_OPTIONAL),
};
#undef DSA_INDEXER
#undef MOE
#undef FUSED
static const df_schema_probe deepseek2_probes[] = {{DF_W_FUSED_GATE_UP, "blk.%d.ffn_gate_up_exps.weight"}};

static void deepseek2_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    (void)il;
    const df_hparams *hp = &m->hp;
    if (hp->is_mla) {
        /* compressed latent + shared rope key; V is a view of the first kv_lora_rank dims */
        *k_row = (int64_t)hp->n_lora_kv + hp->n_rot;
        *v_row = 0;
    } else {
        *k_row = (int64_t)hp->n_head * hp->n_embd_head_k_mla;
        *v_row = (int64_t)hp->n_head * hp->n_embd_head_v_mla;
    }
}

const df_arch df_arch_deepseek2 = {
    .name = "deepseek2",
    .load_hparams = deepseek2_hparams,
    DF_SCHEMA(deepseek2_tensors),
    DF_PROBES(deepseek2_probes),
    .layer_props = deepseek2_props,
    .kv_row = deepseek2_kv_row,
};

/* ---- DSA: deepseek32 (DeepSeek-V3.2) and glm-dsa (GLM-5), MLA + DeepSeek Sparse Attention --
 * llama.cpp's deepseek32 / glm-dsa: deepseek2's hyperparameters (MLA and q LoRA required) plus
 * attention.indexer.{head_count, key_length, top_k} and nextn_predict_layers (the last blocks
 * are NextN / MTP heads: bound, never run); the indexer keys are cached per position behind the
 * MLA latent row of each full indexer layer (kv_row), F16 / F32 / BF16 caches only
 * (df_model_kv_check). glm-dsa's shared indexer layers (attention.indexer.types) have no
 * indexer: they attend the keys the previous full layer selected (attn_mla.c). */
static int dsa_hparams(df_model *m, int gating_default, bool log_mul_fix) {
    TRYK(ds2_hparams(m, gating_default, log_mul_fix));
    df_hparams *hp = &m->hp;
    uint32_t ih = 0, id = 0, tk = 0, nx = 0;
    TRYK(df_model_key_u32(m, "attention.indexer.head_count", &ih, true));
    TRYK(df_model_key_u32(m, "attention.indexer.key_length", &id, true));
    TRYK(df_model_key_u32(m, "attention.indexer.top_k", &tk, true));
    TRYK(df_model_key_u32(m, "nextn_predict_layers", &nx, false));
    if (!hp->is_mla || hp->n_lora_q <= 0)
        return df_err(DF_ERR_FORMAT, "%s: %s needs MLA (key_length_mla / value_length_mla) and "
                      "q_lora_rank", m->path, m->arch->name);
    /* llama.cpp multiplies q and k by one Hadamard matrix of the indexer key size (a power of
     * two >= 64); the first n_rot dims are the rotated ones, and its graph takes the others at
     * offset key_length - n_rot, which is their place only when key_length == 2·n_rot (V3.2,
     * GLM-5: 128 and 64; other shapes read the wrong dims or abort there) */
    if (ih < 1 || ih > 4096 || id < 64 || id > 4096 || (id & (id - 1)) || (int)id != 2 * hp->n_rot || tk < 1)
        return df_err(DF_ERR_FORMAT, "%s: bad indexer (head_count %u, key_length %u: a power of two >= 64 "
                      "and 2 x rope dims %d, top_k %u)", m->path, ih, id, hp->n_rot, tk);
    if (nx >= (uint32_t)hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: nextn_predict_layers %u must be < block_count %d", m->path, nx,
                      hp->n_layer);
    hp->n_layer_nextn = (int)nx;
    if (hp->n_layer_dense_lead > df_hp_n_run_layers(hp))
        return df_err(DF_ERR_FORMAT, "%s: leading_dense_block_count %d > the %d layers that run", m->path,
                      hp->n_layer_dense_lead, df_hp_n_run_layers(hp));
    hp->indexer_n_head = (int)ih;
    hp->indexer_head_size = (int)id;
    hp->indexer_top_k = (int)tk;
    return DF_OK;
}

static int deepseek32_hparams(df_model *m) {
    TRYK(dsa_hparams(m, DF_GATING_SOFTMAX, true));
    m->hp.indexer_norm_eps = 1e-6f;           /* llama.cpp's f_norm_eps for deepseek32 */
    m->hp.indexer_rope_mode = DF_ROPE_NEOX;
    return DF_OK; /* every layer a full indexer layer (layer_dsa_shared all 0) */
}

/* GLM-5.2's indexer pattern when the file has no attention.indexer.types (llama.cpp d32676d,
 * from its config.json): layers 0-2 full, then one full layer in every 4; layers past the
 * table shared */
bool df_dsa_glm52_full(int il) { return il < 2 || (il < 78 && (il - 2) % 4 == 0); }

static int glm_dsa_hparams(df_model *m) {
    TRYK(dsa_hparams(m, DF_GATING_SIGMOID, false));
    df_hparams *hp = &m->hp;
    /* llama.cpp never reads a LayerNorm epsilon for glm-dsa: ggml_norm gets f_norm_eps = 0 */
    hp->indexer_norm_eps = 0.0f;
    hp->indexer_rope_mode = DF_ROPE_NORM;
    const int n = df_hp_n_run_layers(hp);
    /* GLM-5 / 5.1 files (no indexer.types key) have a full indexer in every layer; llama.cpp
     * tells them from 5.2 by a training context below 1M */
    const bool pre_5_2 = hp->n_ctx_train < 1048576;
    uint32_t full[DF_MAX_LAYERS];
    for (int il = 0; il < n; il++) full[il] = pre_5_2 || df_dsa_glm52_full(il);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.indexer.types", m->arch->name);
    int rc = df_gguf_get_u32_per_layer(m->gguf, key, full, n);
    if (rc < 0 && rc != DF_ERR_NOTFOUND) return rc;
    for (int il = 0; il < hp->n_layer; il++) hp->layer_dsa_shared[il] = il >= n || !full[il];
    if (n > 0 && hp->layer_dsa_shared[0])
        return df_err(DF_ERR_FORMAT, "%s: '%s': layer 0 is a shared indexer layer, but a shared layer "
                      "reuses the keys of an earlier full layer", m->path, key);
    return DF_OK;
}

static void deepseek32_dims(const df_hparams *hp, int il, int64_t *d) {
    (void)il;
    d[DS32_IH] = hp->indexer_n_head;
    d[DS32_ID] = hp->indexer_head_size;
    d[DS32_IQ] = (int64_t)hp->indexer_n_head * hp->indexer_head_size;
}

static void deepseek32_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    const df_hparams *hp = &m->hp;
    /* [c_kv ; k_pe ; indexer key]: the MLA row (V its first n_lora_kv dims), then, in a full
     * indexer layer, the key the lightning indexer scores against */
    *k_row = (int64_t)hp->n_lora_kv + hp->n_rot + (hp->layer_dsa_shared[il] ? 0 : hp->indexer_head_size);
    *v_row = 0;
}

const df_arch df_arch_deepseek32 = {
    .name = "deepseek32",
    .load_hparams = deepseek32_hparams,
    DF_SCHEMA(deepseek32_tensors),
    DF_PROBES(deepseek2_probes),
    .layer_props = deepseek2_props,
    .dims = deepseek32_dims,
    .kv_row = deepseek32_kv_row,
};

const df_arch df_arch_glm_dsa = {
    .name = "glm-dsa",
    .load_hparams = glm_dsa_hparams,
    DF_SCHEMA(deepseek32_tensors),
    DF_PROBES(deepseek2_probes),
    .layer_props = deepseek2_props,
    .dims = deepseek32_dims,
    .kv_row = deepseek32_kv_row,
};
