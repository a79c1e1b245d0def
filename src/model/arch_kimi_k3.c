/* arch_kimi_k3.c — Kimi K3 (`kimi-k3`, docs/kimi-k3.md): hyperparameters, tensors, KV rows and
 * the per-sequence recurrent state size. The forward pass is src/forward/kimi_k3.c.
 * Layer kinds come from the head_count_kv array (0 = a KDA layer, else nope MLA). */
#include "model/model.h"
#include "model/kimi_k3.h"
#include <math.h>

#define TRYK(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

static int k3_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    uint32_t u, km = 0, vm = 0;
    TRYK(df_model_key_u32(m, "attention.key_length_mla", &km, true));
    TRYK(df_model_key_u32(m, "attention.value_length_mla", &vm, true));
    u = 0; TRYK(df_model_key_u32(m, "attention.q_lora_rank", &u, false)); hp->n_lora_q = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.kv_lora_rank", &u, true)); hp->n_lora_kv = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "ssm.conv_kernel", &u, true)); hp->ssm_conv = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "kda.head_dim", &u, true)); hp->kda_head_dim = (int)u;
    hp->kda_lb = -INFINITY;
    TRYK(df_model_key_f32(m, "kda.gate_lower_bound", &hp->kda_lb, false));
    hp->kda_has_lb = hp->kda_lb > -INFINITY;
    u = 0; TRYK(df_model_key_u32(m, "expert_feed_forward_length", &u, true)); hp->n_ff_exp = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_shared_count", &u, true)); hp->n_expert_shared = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "leading_dense_block_count", &u, false)); hp->n_layer_dense_lead = (int)u;
    hp->expert_weights_scale = 0.0f;
    TRYK(df_model_key_f32(m, "expert_weights_scale", &hp->expert_weights_scale, false));
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch->name);
    hp->expert_weights_norm = false;
    int rcb = df_gguf_get_bool(m->gguf, key, &hp->expert_weights_norm);
    if (rcb < 0 && rcb != DF_ERR_NOTFOUND) return rcb;
    u = 0; TRYK(df_model_key_u32(m, "expert_gating_func", &u, true));
    if (u < DF_GATING_SOFTMAX || u > DF_GATING_SQRT_SOFTPLUS)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_gating_func %u not supported", m->path, u);
    hp->gating = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_group_count", &u, false)); hp->n_expert_groups = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_group_used_count", &u, false)); hp->n_group_used = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_latent_length", &u, false)); hp->n_latent = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attn_res.block_size", &u, true)); hp->attn_res_block = (int)u;
    TRYK(df_model_key_f32(m, "activation.situ_beta", &hp->situ_beta, true));
    TRYK(df_model_key_f32(m, "activation.situ_linear_beta", &hp->situ_lbeta, true));
    hp->ffn_act = DF_ACT_SITU;
    hp->no_rope = true;
    hp->is_mla = true;
    hp->n_embd_head_k_mla = (int)km;
    hp->n_embd_head_v_mla = (int)vm;
    hp->n_embd_head_v = hp->n_lora_kv; /* llama.cpp overrides value_length to kv_lora_rank */
    hp->n_ff_shexp = hp->n_ff_exp * (hp->n_expert_shared > 0 ? hp->n_expert_shared : 1);
    const int dr = hp->n_rot, dq = (int)km, dv = (int)vm, S = hp->kda_head_dim, C = hp->ssm_conv;
    if (hp->n_lora_kv <= 0 || hp->n_lora_kv > 65536 || hp->n_lora_q < 0 || hp->n_lora_q > 65536 || dr <= 0 ||
        dq <= dr || dq > 4096 || dv <= 0 || dv > 4096)
        return df_err(DF_ERR_FORMAT, "%s: bad MLA dims (q_lora %d, kv_lora %d, k_mla %d, v_mla %d, rope %d)", m->path,
                      hp->n_lora_q, hp->n_lora_kv, dq, dv, dr);
    if (hp->n_embd_head_k != hp->n_lora_kv + dr)
        return df_err(DF_ERR_FORMAT, "%s: attention.key_length %d must be kv_lora_rank + rope dims = %d", m->path,
                      hp->n_embd_head_k, hp->n_lora_kv + dr);
    if (S <= 0 || S > 4096 || C <= 0 || C > 64 || (int64_t)S * hp->n_head > (1 << 24))
        return df_err(DF_ERR_FORMAT, "%s: bad KDA dims (head_dim %d, conv_kernel %d)", m->path, S, C);
    if (hp->n_latent < 0 || hp->n_latent > hp->n_embd)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_latent_length %d > embedding_length %d", m->path, hp->n_latent,
                      hp->n_embd);
    if (hp->attn_res_block < 0 || !(hp->situ_beta != 0.0f))
        return df_err(DF_ERR_FORMAT, "%s: bad attn_res.block_size or situ_beta", m->path);
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead > hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: leading_dense_block_count > block_count", m->path);
    if (hp->n_layer_dense_lead > 0 && hp->n_ff <= 0)
        return df_err(DF_ERR_FORMAT, "%s: dense layers need feed_forward_length", m->path);
    if (hp->n_layer_dense_lead < hp->n_layer && (hp->n_expert <= 0 || hp->n_expert_used <= 0 ||
                                                 hp->n_expert_used > hp->n_expert || hp->n_ff_exp <= 0))
        return df_err(DF_ERR_FORMAT, "%s: MoE layers need expert_count, expert_used_count and "
                      "expert_feed_forward_length", m->path);
    if (hp->n_expert_groups > 1 && (hp->n_expert % hp->n_expert_groups || hp->n_group_used <= 0 ||
                                    hp->n_group_used > hp->n_expert_groups || hp->n_expert_groups > 256))
        return df_err(DF_ERR_FORMAT, "%s: bad expert groups", m->path);
    hp->kq_scale = 1.0f / sqrtf((float)dq);
    return DF_OK;
}

/* layer properties and dims of the table below */
enum { K3_RES = DF_W_ARCH(0), K3_LATENT = DF_W_ARCH(1), K3_QLORA = DF_W_ARCH(2) /* probe */ };
enum { K3_DI = DF_D_ARCH, K3_S, K3_CONV, K3_LT };

static uint32_t k3_props(const df_hparams *hp, int il) {
    (void)il;
    return (hp->attn_res_block > 0 ? K3_RES : 0) | (hp->n_latent > 0 ? K3_LATENT : 0);
}

static void k3_dims(const df_hparams *hp, int il, int64_t *d) {
    (void)il;
    d[K3_S] = hp->kda_head_dim;
    d[K3_DI] = (int64_t)hp->n_head * hp->kda_head_dim; /* KDA inner width H·S */
    d[K3_CONV] = hp->ssm_conv;
    d[K3_LT] = hp->n_latent > 0 ? hp->n_latent : hp->n_embd; /* experts' width */
}

#define KDA DF_W_RECR
#define MLA DF_W_ATTN
#define MOE DF_W_MOE
#define F32 DF_T_NORM
#define OPT DF_T_OPTIONAL
static const df_tensor_spec k3_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_TS("blk.%d.attn_norm.weight", DF_LF(attn_norm), F32, DF_R_NORM, 0, 0, DF_D_EMBD),
    DF_TS("blk.%d.attn_res_score.weight", DF_LF(attn_res_score), F32, DF_R_RES, K3_RES, 0, DF_D_EMBD),
    /* KDA layers */
    DF_TS("blk.%d.attn_q.weight", DF_LF(wq), 0, DF_R_MAT, KDA, 0, DF_D_EMBD, K3_DI),
    DF_TS("blk.%d.attn_k.weight", DF_LF(wk), 0, DF_R_MAT, KDA, 0, DF_D_EMBD, K3_DI),
    DF_TS("blk.%d.attn_v.weight", DF_LF(wv), 0, DF_R_MAT, KDA, 0, DF_D_EMBD, K3_DI),
    DF_TS("blk.%d.ssm_conv1d_q.weight", DF_LF(ssm_conv[0]), F32, DF_R_CONV, KDA, 0, K3_CONV, DF_D_ONE, K3_DI),
    DF_TS("blk.%d.ssm_conv1d_k.weight", DF_LF(ssm_conv[1]), F32, DF_R_CONV, KDA, 0, K3_CONV, DF_D_ONE, K3_DI),
    DF_TS("blk.%d.ssm_conv1d_v.weight", DF_LF(ssm_conv[2]), F32, DF_R_CONV, KDA, 0, K3_CONV, DF_D_ONE, K3_DI),
    DF_TS("blk.%d.ssm_f_a.weight", DF_LF(ssm_f_a), 0, DF_R_MAT, KDA, 0, DF_D_EMBD, K3_S),
    DF_TS("blk.%d.ssm_f_b.weight", DF_LF(ssm_f_b), 0, DF_R_MAT, KDA, 0, K3_S, K3_DI),
    DF_TS("blk.%d.ssm_beta.weight", DF_LF(ssm_beta), 0, DF_R_MAT, KDA, 0, DF_D_EMBD, DF_D_HEAD),
    DF_TS("blk.%d.ssm_a", DF_LF(ssm_a), F32, DF_R_SSM_A, KDA, 0, DF_D_HEAD),
    DF_TS("blk.%d.ssm_dt.bias", DF_LF(ssm_dt_b), F32, DF_R_DT, KDA, 0, K3_DI),
    DF_TS("blk.%d.ssm_g.weight", DF_LF(ssm_g), 0, DF_R_MAT, KDA, 0, DF_D_EMBD, K3_DI),
    DF_TS("blk.%d.ssm_norm.weight", DF_LF(ssm_o_norm), F32, DF_R_NORM, KDA, 0, K3_S),
    DF_TS("blk.%d.attn_output.weight", DF_LF(wo), 0, DF_R_MAT, KDA, 0, K3_DI, DF_D_EMBD),
    /* MLA layers (no RoPE): q LoRA when the file has attn_q_a_norm, else attn_q */
    DF_TS("blk.%d.attn_q_a.weight", DF_LF(wq_a), 0, DF_R_MAT, MLA | K3_QLORA, 0, DF_D_EMBD, DF_D_LORA_Q),
    DF_TS("blk.%d.attn_q_a_norm.weight", DF_LF(q_a_norm), F32, DF_R_NORM, MLA | K3_QLORA, 0, DF_D_LORA_Q),
    DF_TS("blk.%d.attn_q_b.weight", DF_LF(wq_b), 0, DF_R_MAT, MLA | K3_QLORA, 0, DF_D_LORA_Q, DF_D_MLA_Q),
    DF_TS("blk.%d.attn_q.weight", DF_LF(wq), 0, DF_R_MAT, MLA, K3_QLORA, DF_D_EMBD, DF_D_MLA_Q),
    DF_TS("blk.%d.attn_kv_a_mqa.weight", DF_LF(wkv_a_mqa), 0, DF_R_MAT, MLA, 0, DF_D_EMBD, DF_D_KV_A),
    DF_TS("blk.%d.attn_kv_a_norm.weight", DF_LF(kv_a_norm), F32, DF_R_NORM, MLA, 0, DF_D_LORA_KV),
    DF_TS("blk.%d.attn_k_b.weight", DF_LF(wk_b), 0, DF_R_MAT, MLA, 0, DF_D_MLA_NOPE, DF_D_LORA_KV, DF_D_HEAD),
    DF_TS("blk.%d.attn_v_b.weight", DF_LF(wv_b), 0, DF_R_MAT, MLA, 0, DF_D_LORA_KV, DF_D_MLA_V, DF_D_HEAD),
    DF_TS("blk.%d.attn_gate.weight", DF_LF(attn_gate), OPT, DF_R_MAT, MLA, 0, DF_D_EMBD, DF_D_MLA_O),
    DF_TS("blk.%d.attn_output.weight", DF_LF(wo), 0, DF_R_MAT, MLA, 0, DF_D_MLA_O, DF_D_EMBD),
    /* FFN: dense lead layers, then latent MoE with shared experts */
    DF_SCHEMA_FFN_NORM,
    DF_TS("blk.%d.ffn_res_score.weight", DF_LF(ffn_res_score), F32, DF_R_RES, K3_RES, 0, DF_D_EMBD),
    DF_SCHEMA_FFN_DENSE,
    DF_SCHEMA_MOE_ROUTER,
    DF_TS("blk.%d.exp_probs_b.bias", DF_LF(exp_probs_b), F32, DF_R_BIAS, MOE, 0, DF_D_EXPERT),
    DF_TS("blk.%d.ffn_gate_exps.weight", DF_LF(exps[DF_EXPERT_GATE]), DF_T_EXPERT, DF_R_MAT, MOE, 0, K3_LT,
          DF_D_FF_EXP, DF_D_EXPERT),
    DF_TS("blk.%d.ffn_down_exps.weight", DF_LF(exps[DF_EXPERT_DOWN]), DF_T_EXPERT, DF_R_MAT, MOE, 0,
          DF_D_FF_EXP, K3_LT, DF_D_EXPERT),
    DF_TS("blk.%d.ffn_up_exps.weight", DF_LF(exps[DF_EXPERT_UP]), DF_T_EXPERT, DF_R_MAT, MOE, 0, K3_LT,
          DF_D_FF_EXP, DF_D_EXPERT),
    DF_TS("blk.%d.ffn_routed_down.weight", DF_LF(routed_down), 0, DF_R_MAT, MOE | K3_LATENT, 0, DF_D_EMBD, K3_LT),
    DF_TS("blk.%d.ffn_routed_up.weight", DF_LF(routed_up), 0, DF_R_MAT, MOE | K3_LATENT, 0, K3_LT, DF_D_EMBD),
    DF_TS("blk.%d.ffn_routed_norm.weight", DF_LF(routed_norm), F32 | OPT, DF_R_NORM, MOE | K3_LATENT, 0, K3_LT),
    DF_SCHEMA_SHEXP(OPT, 0),   /* optional, but all three or none (k3_post_bind) */
    DF_SCHEMA_OUTPUT(0),
    DF_TS("output_res_score.weight", DF_MF(output_res_score), F32, DF_R_RES, K3_RES, 0, DF_D_EMBD),
};
#undef KDA
#undef MLA
#undef MOE
#undef F32
#undef OPT
static const df_schema_probe k3_probes[] = {{K3_QLORA, "blk.%d.attn_q_a_norm.weight"}};

static int k3_pre_bind(df_model *m) {
    for (int il = 0; il < m->hp.n_layer; il++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blk.%d.attn_qkv.weight", il);
        if (m->hp.layer_recr[il] && df_gguf_tensor_find(m->gguf, nm))
            return df_err(DF_ERR_UNSUPPORTED, "%s: fused attn_qkv in a kimi-k3 KDA layer is not supported "
                          "(llama.cpp cannot run it either)", m->path);
    }
    return DF_OK;
}

static int k3_post_bind(df_model *m) {
    for (int il = 0; il < m->hp.n_layer; il++) {
        const df_layer *L = &m->layers[il];
        if ((!L->gate_shexp) != (!L->up_shexp))
            return df_err(DF_ERR_FORMAT, "%s: layer %d: ffn_gate_shexp and ffn_up_shexp come together", m->path, il);
        if (L->gate_shexp && !L->down_shexp)
            return df_err(DF_ERR_FORMAT, "%s: layer %d: ffn_down_shexp missing", m->path, il);
    }
    return DF_OK;
}

static void k3_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    const df_hparams *hp = &m->hp;
    *k_row = hp->layer_recr[il] ? 0 : (int64_t)hp->n_lora_kv + hp->n_rot; /* [rms(c_kv) ; k_pe] */
    *v_row = 0;                                                         /* V = first Rkv of K */
}


static uint64_t k3_state_bytes(const df_model *m) {
    const df_hparams *hp = &m->hp;
    uint64_t n = 0;
    for (int il = 0; il < hp->n_layer; il++)
        if (hp->layer_recr[il]) n += df_k3_conv_floats(hp) + df_k3_delta_floats(hp);
    return n * sizeof(float);
}

const df_arch df_arch_kimi_k3 = {
    .name = "kimi-k3",
    .load_hparams = k3_hparams,
    DF_SCHEMA(k3_tensors),
    DF_PROBES(k3_probes),
    .layer_props = k3_props,
    .dims = k3_dims,
    .pre_bind = k3_pre_bind,
    .post_bind = k3_post_bind,
    .kv_row = k3_kv_row,
    .state_bytes = k3_state_bytes,
    .head_kv_per_layer = true,
};
