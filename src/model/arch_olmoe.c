/* olmoe.c — OLMoE-1B-7B (formats.md §3.5): RMSNorm of the full q and k vectors before the
 * head split, RoPE NEOX, MoE softmax top-k without renormalization, expert width n_ff. */
#include "model/model.h"

static int olmoe_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    hp->rope_mode = DF_ROPE_NEOX;
    if (hp->n_expert <= 0) return df_err(DF_ERR_FORMAT, "%s: n_expert must be > 0", m->path);
    if (hp->n_embd_head_k != hp->n_embd_head_v || hp->n_rot != hp->n_embd_head_k)
        return df_err(DF_ERR_FORMAT, "%s: olmoe needs head_k == head_v == n_rot", m->path);
    hp->n_ff_exp = hp->n_ff;
    if (hp->n_ff_exp <= 0) return df_err(DF_ERR_FORMAT, "%s: feed_forward_length missing or 0", m->path);
    hp->gating = DF_GATING_SOFTMAX;
    hp->expert_weights_norm = false;
    /* llama.cpp passes hparams.expert_weights_scale, which olmoe never reads (stays 0) */
    hp->expert_weights_scale = 0.0f;
    hp->qk_norm = DF_QK_NORM_FULL;
    return DF_OK;
}

static int olmoe_bind(df_model *m) {
    const df_hparams *hp = &m->hp;
    df_bind_output(m, false);
    int64_t n_embd_gqa = (int64_t)hp->n_head_kv * hp->n_embd_head_k;
    for (int il = 0; il < hp->n_layer; il++) {
        df_layer *L = &m->layers[il];
        df_bind_attn(m, il, false);
        L->q_norm = df_model_tensor(m, "blk.%d.attn_q_norm.weight", il, DF_T_NORM, 1,
                                    (int64_t)hp->n_head * hp->n_embd_head_k, 0, 0);
        L->k_norm = df_model_tensor(m, "blk.%d.attn_k_norm.weight", il, DF_T_NORM, 1, n_embd_gqa, 0, 0);
        L->ffn_norm = df_model_tensor(m, "blk.%d.ffn_norm.weight", il, DF_T_NORM, 1, hp->n_embd, 0, 0);
        df_bind_moe_exps(m, il, hp->n_ff_exp);
    }
    return m->bind_status;
}

const df_arch df_arch_olmoe = {.name = "olmoe", .load_hparams = olmoe_hparams, .bind = olmoe_bind};
