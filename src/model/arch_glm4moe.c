/* arch_glm4moe.c — GLM-4.5 / 4.5-Air / 4.6 / 4.7 (llama.cpp LLM_ARCH_GLM4_MOE): GQA with q/k/v
 * biases, optional per-head QK RMSNorm, partial RoPE NEOX (rope.dimension_count < head dim),
 * leading dense layers, MoE with sigmoid gating, the selection bias exp_probs_b, weight
 * renormalisation and the routed scaling factor, a shared expert of n_ff_exp · expert_shared_count,
 * and the NextN / MTP layers the files carry as their last nextn_predict_layers blocks: bound
 * (llama.cpp's tensor count) and flagged DF_T_UNUSED, never read nor run. The FFN input norm is
 * named post_attention_norm in these files. Everything runs on the generic GQA / MoE blocks. */
#include "model/model.h"

#define TRYK(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

static int glm4moe_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    hp->rope_mode = DF_ROPE_NEOX;
    /* M-RoPE (rope.dimension_sections) is the vision variant: not supported */
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch->name);
    const df_gguf_kv *sec = df_gguf_find(m->gguf, key);
    if (sec) {
        uint32_t v[4] = {0, 0, 0, 0};
        const int n = sec->type == DF_GGUF_ARRAY ? (int)(sec->arr_n <= 4 ? sec->arr_n : 5) : 1;
        if (n > 4) return df_err(DF_ERR_FORMAT, "%s: '%s' has more than 4 sections", m->path, key);
        if (n > 0) TRYK(df_gguf_get_u32_per_layer(m->gguf, key, v, n));
        if (v[0] | v[1] | v[2] | v[3])
            return df_err(DF_ERR_UNSUPPORTED, "%s: glm4moe with M-RoPE sections (multimodal) is not supported", m->path);
    }
    uint32_t u;
    u = 0; TRYK(df_model_key_u32(m, "leading_dense_block_count", &u, false)); hp->n_layer_dense_lead = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "nextn_predict_layers", &u, false)); hp->n_layer_nextn = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_shared_count", &u, true)); hp->n_expert_shared = (int)u;
    if (hp->n_expert <= 0 || hp->n_expert_used <= 0)
        return df_err(DF_ERR_FORMAT, "%s: glm4moe needs expert_count and expert_used_count > 0", m->path);
    if (hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    if (hp->n_ff_exp <= 0)
        return df_err(DF_ERR_FORMAT, "%s: expert width unknown (expert_feed_forward_length)", m->path);
    if (hp->n_expert_shared < 0 || hp->n_expert_shared > 64)
        return df_err(DF_ERR_FORMAT, "%s: expert_shared_count %d out of range", m->path, hp->n_expert_shared);
    hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared;
    hp->expert_weights_scale = 0.0f;
    TRYK(df_model_key_f32(m, "expert_weights_scale", &hp->expert_weights_scale, false));
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch->name);
    hp->expert_weights_norm = false;
    int rcb = df_gguf_get_bool(m->gguf, key, &hp->expert_weights_norm);
    if (rcb < 0 && rcb != DF_ERR_NOTFOUND) return rcb;
    u = 0; TRYK(df_model_key_u32(m, "expert_gating_func", &u, false));
    if (u == 0) u = DF_GATING_SIGMOID; /* llama.cpp's default for GLM-4.5 */
    if (u != DF_GATING_SOFTMAX && u != DF_GATING_SIGMOID)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_gating_func %u not supported for glm4moe", m->path, u);
    hp->gating = (int)u;
    if (hp->n_layer_nextn < 0 || hp->n_layer_nextn >= hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: nextn_predict_layers %d must be < block_count %d", m->path,
                      hp->n_layer_nextn, hp->n_layer);
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead > hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: leading_dense_block_count %d > block_count", m->path, hp->n_layer_dense_lead);
    if (hp->n_layer_dense_lead > 0 && hp->n_ff <= 0)
        return df_err(DF_ERR_FORMAT, "%s: dense layers need feed_forward_length", m->path);
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return df_err(DF_ERR_FORMAT, "%s: glm4moe needs key_length == value_length", m->path);
    return DF_OK;
}

/* QK norm: llama.cpp applies attn_q_norm / attn_k_norm where the file has them; deltafin runs
 * them as one model-wide flag, so they must come as a pair in every layer that runs. */
static int glm4moe_post_bind(df_model *m) {
    df_hparams *hp = &m->hp;
    const int n = df_hp_n_run_layers(hp);
    const bool qn = m->layers[0].q_norm != NULL;
    for (int il = 0; il < n; il++) {
        const df_layer *L = &m->layers[il];
        if ((L->q_norm != NULL) != qn || (L->k_norm != NULL) != qn)
            return df_err(DF_ERR_UNSUPPORTED, "%s: layer %d: attn_q_norm / attn_k_norm must be present in every "
                          "layer or in none", m->path, il);
    }
    hp->qk_norm = qn ? DF_QK_NORM_HEAD : DF_QK_NORM_NONE;
    return DF_OK;
}

enum { GLM_SHEXP = DF_W_ARCH(0) };

static uint32_t glm4moe_props(const df_hparams *hp, int il) {
    (void)il;
    return hp->n_expert_shared > 0 ? GLM_SHEXP : 0;
}

#define MOE DF_W_MOE
static const df_tensor_spec glm4moe_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_GQA_IN,
    DF_SCHEMA_ATTN_OUT,
    DF_TS("blk.%d.attn_q_norm.weight", DF_LF(q_norm), DF_T_OPTIONAL | DF_T_NORM, DF_R_NORM, 0, 0, DF_D_HEAD_K),
    DF_TS("blk.%d.attn_k_norm.weight", DF_LF(k_norm), DF_T_OPTIONAL | DF_T_NORM, DF_R_NORM, 0, 0, DF_D_HEAD_K),
    /* the FFN input norm */
    DF_TS("blk.%d.post_attention_norm.weight", DF_LF(ffn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD),
    DF_SCHEMA_FFN_DENSE,
    DF_SCHEMA_MOE_ROUTER,
    DF_TS("blk.%d.exp_probs_b.bias", DF_LF(exp_probs_b), DF_T_NORM, DF_R_BIAS, MOE, 0, DF_D_EXPERT),
    DF_SCHEMA_MOE_EXPS,
    DF_SCHEMA_SHEXP(0, GLM_SHEXP),
    /* NextN / MTP heads: loaded for the tensor count, never read (DF_T_UNUSED) */
    DF_SCHEMA_NEXTN,
    DF_SCHEMA_OUTPUT(DF_T_OPTIONAL),
};
#undef MOE
static const df_schema_probe glm4moe_probes[] = {DF_SCHEMA_GQA_PROBES};

const df_arch df_arch_glm4moe = {.name = "glm4moe", .load_hparams = glm4moe_hparams,
                                 DF_SCHEMA(glm4moe_tensors), DF_PROBES(glm4moe_probes),
                                 .layer_props = glm4moe_props, .post_bind = glm4moe_post_bind};
