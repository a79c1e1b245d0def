/* qwen3moe.c — Qwen3-30B-A3B / 235B-A22B / Coder (formats.md §3.3): head_dim from the
 * key_length keys, per-head RMSNorm of q and k before RoPE NEOX, MoE softmax top-k with
 * renormalized weights, tied output allowed. */
#include "model/model.h"

static int qwen3moe_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    hp->rope_mode = DF_ROPE_NEOX;
    if (hp->n_expert <= 0) return df_err(DF_ERR_FORMAT, "%s: qwen3moe needs expert_count > 0", m->path);
    if (hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    if (hp->n_ff_exp <= 0)
        return df_err(DF_ERR_FORMAT, "%s: expert width unknown (expert_feed_forward_length)", m->path);
    hp->gating = DF_GATING_SOFTMAX;
    hp->expert_weights_norm = true;
    hp->qk_norm = DF_QK_NORM_HEAD;
    return DF_OK;
}

static int qwen3moe_bind(df_model *m) {
    const df_hparams *hp = &m->hp;
    df_bind_output(m, true);
    for (int il = 0; il < hp->n_layer; il++) {
        df_layer *L = &m->layers[il];
        df_bind_attn(m, il, false);
        L->k_norm = df_model_tensor(m, "blk.%d.attn_k_norm.weight", il, DF_T_NORM, 1, hp->n_embd_head_k, 0, 0);
        L->q_norm = df_model_tensor(m, "blk.%d.attn_q_norm.weight", il, DF_T_NORM, 1, hp->n_embd_head_k, 0, 0);
        L->ffn_norm = df_model_tensor(m, "blk.%d.ffn_norm.weight", il, DF_T_NORM, 1, hp->n_embd, 0, 0);
        df_bind_moe_exps(m, il, hp->n_ff_exp);
    }
    return m->bind_status;
}

const df_arch df_arch_qwen3moe = {.name = "qwen3moe", .load_hparams = qwen3moe_hparams, .bind = qwen3moe_bind};
