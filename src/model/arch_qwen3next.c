/* arch_qwen3next.c — Qwen3-Next (`qwen3next`): hyperparameters, tensors, KV rows and the
 * per-sequence recurrent state. A hybrid stack: Gated DeltaNet layers (fused attn_qkv +
 * attn_gate, or the legacy ssm_in qkvz projection; a short conv over q|k|v; per-head decay
 * from A and dt bias; a gated RMS norm on the output) and, every full_attention_interval-th
 * layer, gated full attention (attn_q gives query and a sigmoid output gate per head, QK RMS
 * norm, partial RoPE NEOX). Every layer: post_attention_norm, softmax top-k MoE with
 * renormalized weights plus a shared expert gated by sigmoid(ffn_gate_inp_shexp · x).
 * The forward pass is src/forward/qwen3next.c; the FFN is the generic one (post_attention_norm
 * is bound as ffn_norm). The hooks below are shared with qwen35moe (arch_qwen35moe.c). */
#include "model/model.h"
#include "model/qwen3next.h"

#define TRYQ(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

int df_qn_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    uint32_t u;
    hp->rope_mode = DF_ROPE_NEOX;
    u = 0; TRYQ(df_model_key_u32(m, "ssm.conv_kernel", &u, true)); hp->ssm_conv = (int)u;
    u = 0; TRYQ(df_model_key_u32(m, "ssm.inner_size", &u, true)); hp->ssm_d_inner = (int)u;
    u = 0; TRYQ(df_model_key_u32(m, "ssm.state_size", &u, true)); hp->ssm_d_state = (int)u;
    u = 0; TRYQ(df_model_key_u32(m, "ssm.time_step_rank", &u, true)); hp->ssm_dt_rank = (int)u;
    u = 0; TRYQ(df_model_key_u32(m, "ssm.group_count", &u, true)); hp->ssm_n_group = (int)u;
    u = 0; TRYQ(df_model_key_u32(m, "expert_feed_forward_length", &u, false)); hp->n_ff_exp = (int)u;
    u = 0; TRYQ(df_model_key_u32(m, "expert_shared_feed_forward_length", &u, false)); hp->n_ff_shexp = (int)u;
    /* NextN / MTP heads (Qwen3.5 / 3.6 files carry one): the last blocks, full-attention layers
     * plus the nextn tensors, bound and never run (DF_W_NEXTN) */
    u = 0; TRYQ(df_model_key_u32(m, "nextn_predict_layers", &u, false));
    if (u >= (uint32_t)hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: nextn_predict_layers %u must be < block_count %d", m->path, u, hp->n_layer);
    hp->n_layer_nextn = (int)u;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", m->arch->name);
    if (df_gguf_find(m->gguf, key))
        return df_err(DF_ERR_UNSUPPORTED, "%s: %s is not supported (full_attention_interval only)", m->path, key);
    u = 4; TRYQ(df_model_key_u32(m, "full_attention_interval", &u, false));
    if (u == 0) return df_err(DF_ERR_FORMAT, "%s: full_attention_interval 0", m->path);
    for (int il = 0; il < hp->n_layer; il++)
        hp->layer_recr[il] = (uint8_t)(il < df_hp_n_run_layers(hp) && (il + 1) % (int)u != 0);
    if (hp->n_expert <= 0 || hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert)
        return df_err(DF_ERR_FORMAT, "%s: %s needs expert_count > 0 and expert_used_count", m->path, m->arch->name);
    if (hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    if (hp->n_ff_shexp == 0) hp->n_ff_shexp = hp->n_ff;
    if (hp->n_ff_exp <= 0 || hp->n_ff_shexp <= 0)
        return df_err(DF_ERR_FORMAT, "%s: expert widths unknown (expert_feed_forward_length)", m->path);
    const int S = hp->ssm_d_state, Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank, C = hp->ssm_conv;
    if (S <= 0 || S > 4096 || Hk <= 0 || Hv <= 0 || Hv % Hk || C < 1 || C > 64 ||
        (int64_t)hp->ssm_d_inner != (int64_t)S * Hv || (int64_t)S * Hv > (1 << 24))
        return df_err(DF_ERR_FORMAT, "%s: bad Gated DeltaNet dims (state %d, groups %d, dt_rank %d, inner %d, "
                      "conv %d)", m->path, S, Hk, Hv, hp->ssm_d_inner, C);
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return df_err(DF_ERR_FORMAT, "%s: key_length %d != value_length %d", m->path, hp->n_embd_head_k,
                      hp->n_embd_head_v);
    hp->gating = DF_GATING_SOFTMAX;
    hp->expert_weights_norm = true;
    hp->expert_weights_scale = 0.0f;
    hp->shexp_sigmoid = true;
    hp->qk_norm = DF_QK_NORM_HEAD;
    hp->kq_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);
    return DF_OK;
}

enum { QN_FUSED = DF_W_ARCH(0) /* probe: attn_qkv in a DeltaNet layer */ };

void df_qn_dims(const df_hparams *hp, int il, int64_t *d) {
    (void)il;
    const int64_t S = hp->ssm_d_state, Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank;
    d[QN_CONV_DIM] = 2 * S * Hk + S * Hv;
    d[QN_QKVZ] = 2 * S * Hk + 2 * S * Hv;
    d[QN_VDIM] = S * Hv;
    d[QN_S] = S;
    d[QN_C] = hp->ssm_conv;
    d[QN_HV] = Hv;
    d[QN_BA] = 2 * Hv;
    d[QN_QG] = 2 * (int64_t)hp->n_head * hp->n_embd_head_k;
}

#define RECR DF_W_RECR
#define F32 DF_T_NORM
static const df_tensor_spec qn_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_QN_ATTN,
    /* Gated DeltaNet */
    DF_TS("blk.%d.ssm_in.weight", DF_LF(ssm_in), 0, DF_R_MAT, RECR, QN_FUSED, DF_D_EMBD, QN_QKVZ),
    DF_TS("blk.%d.attn_qkv.weight", DF_LF(wqkv), 0, DF_R_MAT, RECR | QN_FUSED, 0, DF_D_EMBD, QN_CONV_DIM),
    DF_TS("blk.%d.attn_gate.weight", DF_LF(attn_gate), 0, DF_R_MAT, RECR | QN_FUSED, 0, DF_D_EMBD, QN_VDIM),
    DF_SCHEMA_QN_CONV,
    DF_TS("blk.%d.ssm_ba.weight", DF_LF(ssm_ba), 0, DF_R_MAT, RECR, 0, DF_D_EMBD, QN_BA),
    DF_TS("blk.%d.ssm_norm.weight", DF_LF(ssm_o_norm), F32, DF_R_NORM, RECR, 0, QN_S),
    DF_TS("blk.%d.ssm_out.weight", DF_LF(wo), 0, DF_R_MAT, RECR, 0, QN_VDIM, DF_D_EMBD),
    DF_SCHEMA_QN_MOE_OUT,
};
#undef RECR
#undef F32
static const df_schema_probe qn_probes[] = {{QN_FUSED, "blk.%d.attn_qkv.weight"}};

void df_qn_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    const df_hparams *hp = &m->hp;
    *k_row = hp->layer_recr[il] ? 0 : (int64_t)hp->n_head_kv * hp->n_embd_head_k;
    *v_row = hp->layer_recr[il] ? 0 : (int64_t)hp->n_head_kv * hp->n_embd_head_v;
}

uint64_t df_qn_state_bytes(const df_model *m) {
    const df_hparams *hp = &m->hp;
    uint64_t n = 0;
    for (int il = 0; il < hp->n_layer; il++)
        if (hp->layer_recr[il]) n += df_qn_conv_floats(hp) + df_qn_delta_floats(hp);
    return n * sizeof(float);
}

const df_arch df_arch_qwen3next = {
    .name = "qwen3next",
    .load_hparams = df_qn_hparams,
    DF_SCHEMA(qn_tensors),
    DF_PROBES(qn_probes),
    .dims = df_qn_dims,
    .kv_row = df_qn_kv_row,
    .state_bytes = df_qn_state_bytes,
};
