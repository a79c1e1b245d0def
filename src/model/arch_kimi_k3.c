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

static int k3_bind(df_model *m) {
    const df_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, H = hp->n_head, S = hp->kda_head_dim, DI = H * S, C = hp->ssm_conv;
    const int64_t dr = hp->n_rot, dq = hp->n_embd_head_k_mla, dn = dq - dr, dv = hp->n_embd_head_v_mla;
    const int64_t rkv = hp->n_lora_kv, rq = hp->n_lora_q;
    const int64_t Lt = hp->n_latent > 0 ? hp->n_latent : E;
    const bool res = hp->attn_res_block > 0;
    df_bind_output(m, false);
    if (res) m->output_res_score = df_model_tensor(m, "output_res_score.weight", 0, DF_T_NORM, 1, E, 0, 0);
    for (int il = 0; il < hp->n_layer; il++) {
        df_layer *L = &m->layers[il];
        L->attn_norm = df_model_tensor(m, "blk.%d.attn_norm.weight", il, DF_T_NORM, 1, E, 0, 0);
        L->ffn_norm = df_model_tensor(m, "blk.%d.ffn_norm.weight", il, DF_T_NORM, 1, E, 0, 0);
        if (res) {
            L->attn_res_score = df_model_tensor(m, "blk.%d.attn_res_score.weight", il, DF_T_NORM, 1, E, 0, 0);
            L->ffn_res_score = df_model_tensor(m, "blk.%d.ffn_res_score.weight", il, DF_T_NORM, 1, E, 0, 0);
        }
        if (hp->layer_recr[il]) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.attn_qkv.weight", il);
            if (df_gguf_tensor_find(m->gguf, nm))
                return df_err(DF_ERR_UNSUPPORTED, "%s: fused attn_qkv in a kimi-k3 KDA layer is not supported "
                              "(llama.cpp cannot run it either)", m->path);
            static const char *cv[3] = {"blk.%d.ssm_conv1d_q.weight", "blk.%d.ssm_conv1d_k.weight",
                                        "blk.%d.ssm_conv1d_v.weight"};
            for (int s = 0; s < 3; s++) L->ssm_conv[s] = df_model_tensor(m, cv[s], il, DF_T_NORM, 3, C, 1, DI);
            L->wq = df_model_tensor(m, "blk.%d.attn_q.weight", il, 0, 2, E, DI, 0);
            L->wk = df_model_tensor(m, "blk.%d.attn_k.weight", il, 0, 2, E, DI, 0);
            L->wv = df_model_tensor(m, "blk.%d.attn_v.weight", il, 0, 2, E, DI, 0);
            L->ssm_f_a = df_model_tensor(m, "blk.%d.ssm_f_a.weight", il, 0, 2, E, S, 0);
            L->ssm_f_b = df_model_tensor(m, "blk.%d.ssm_f_b.weight", il, 0, 2, S, DI, 0);
            L->ssm_beta = df_model_tensor(m, "blk.%d.ssm_beta.weight", il, 0, 2, E, H, 0);
            L->ssm_a = df_model_tensor(m, "blk.%d.ssm_a", il, DF_T_NORM, 1, H, 0, 0);
            L->ssm_dt_b = df_model_tensor(m, "blk.%d.ssm_dt.bias", il, DF_T_NORM, 1, DI, 0, 0);
            L->ssm_g = df_model_tensor(m, "blk.%d.ssm_g.weight", il, 0, 2, E, DI, 0);
            L->ssm_o_norm = df_model_tensor(m, "blk.%d.ssm_norm.weight", il, DF_T_NORM, 1, S, 0, 0);
            L->wo = df_model_tensor(m, "blk.%d.attn_output.weight", il, 0, 2, DI, E, 0);
        } else {
            L->q_a_norm = df_model_tensor(m, "blk.%d.attn_q_a_norm.weight", il, DF_T_NORM | DF_T_OPTIONAL, 1, rq, 0, 0);
            if (L->q_a_norm) {
                L->wq_a = df_model_tensor(m, "blk.%d.attn_q_a.weight", il, 0, 2, E, rq, 0);
                L->wq_b = df_model_tensor(m, "blk.%d.attn_q_b.weight", il, 0, 2, rq, H * dq, 0);
            } else {
                L->wq = df_model_tensor(m, "blk.%d.attn_q.weight", il, 0, 2, E, H * dq, 0);
            }
            L->kv_a_norm = df_model_tensor(m, "blk.%d.attn_kv_a_norm.weight", il, DF_T_NORM, 1, rkv, 0, 0);
            L->wkv_a_mqa = df_model_tensor(m, "blk.%d.attn_kv_a_mqa.weight", il, 0, 2, E, rkv + dr, 0);
            L->wk_b = df_model_tensor(m, "blk.%d.attn_k_b.weight", il, 0, 3, dn, rkv, H);
            L->wv_b = df_model_tensor(m, "blk.%d.attn_v_b.weight", il, 0, 3, rkv, dv, H);
            L->attn_gate = df_model_tensor(m, "blk.%d.attn_gate.weight", il, DF_T_OPTIONAL, 2, E, H * dv, 0);
            L->wo = df_model_tensor(m, "blk.%d.attn_output.weight", il, 0, 2, H * dv, E, 0);
        }
        if (il < hp->n_layer_dense_lead) {
            L->ffn_gate = df_model_tensor(m, "blk.%d.ffn_gate.weight", il, 0, 2, E, hp->n_ff, 0);
            L->ffn_down = df_model_tensor(m, "blk.%d.ffn_down.weight", il, 0, 2, hp->n_ff, E, 0);
            L->ffn_up = df_model_tensor(m, "blk.%d.ffn_up.weight", il, 0, 2, E, hp->n_ff, 0);
        } else {
            const int64_t fe = hp->n_ff_exp, X = hp->n_expert;
            L->is_moe = true;
            L->gate_inp = df_model_tensor(m, "blk.%d.ffn_gate_inp.weight", il, 0, 2, E, X, 0);
            L->exp_probs_b = df_model_tensor(m, "blk.%d.exp_probs_b.bias", il, DF_T_NORM, 1, X, 0, 0);
            L->exps[DF_EXPERT_GATE] = df_model_tensor(m, "blk.%d.ffn_gate_exps.weight", il, DF_T_EXPERT, 3, Lt, fe, X);
            L->exps[DF_EXPERT_DOWN] = df_model_tensor(m, "blk.%d.ffn_down_exps.weight", il, DF_T_EXPERT, 3, fe, Lt, X);
            L->exps[DF_EXPERT_UP] = df_model_tensor(m, "blk.%d.ffn_up_exps.weight", il, DF_T_EXPERT, 3, Lt, fe, X);
            if (hp->n_latent > 0) {
                L->routed_down = df_model_tensor(m, "blk.%d.ffn_routed_down.weight", il, 0, 2, E, Lt, 0);
                L->routed_up = df_model_tensor(m, "blk.%d.ffn_routed_up.weight", il, 0, 2, Lt, E, 0);
                L->routed_norm = df_model_tensor(m, "blk.%d.ffn_routed_norm.weight", il, DF_T_NORM | DF_T_OPTIONAL, 1, Lt, 0, 0);
            }
            const int64_t fs = hp->n_ff_shexp;
            L->gate_shexp = df_model_tensor(m, "blk.%d.ffn_gate_shexp.weight", il, DF_T_OPTIONAL, 2, E, fs, 0);
            L->down_shexp = df_model_tensor(m, "blk.%d.ffn_down_shexp.weight", il, DF_T_OPTIONAL, 2, fs, E, 0);
            L->up_shexp = df_model_tensor(m, "blk.%d.ffn_up_shexp.weight", il, DF_T_OPTIONAL, 2, E, fs, 0);
            if (m->bind_status == DF_OK && (!L->gate_shexp) != (!L->up_shexp))
                return df_err(DF_ERR_FORMAT, "%s: layer %d: ffn_gate_shexp and ffn_up_shexp come together", m->path, il);
            if (m->bind_status == DF_OK && L->gate_shexp && !L->down_shexp)
                return df_err(DF_ERR_FORMAT, "%s: layer %d: ffn_down_shexp missing", m->path, il);
        }
    }
    return m->bind_status;
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
    .bind = k3_bind,
    .kv_row = k3_kv_row,
    .state_bytes = k3_state_bytes,
    .head_kv_per_layer = true,
};
