/* arch_minimax_m2.c — MiniMax-M2 (llama.cpp LLM_ARCH_MINIMAX_M2): GQA without biases, RMSNorm of
 * q and k over the whole projection (n_head · head_dim, not per head) before a partial RoPE NEOX
 * (rope.dimension_count 64 of head dim 128), MoE of every layer with sigmoid gating, the
 * selection bias exp_probs_b and renormalised weights (256 experts top-8 in the real model).
 * llama.cpp shapes the experts with feed_forward_length and ignores expert_weights_scale and
 * q/k/v biases; so does this. Runs on the generic GQA / MoE blocks. */
#include "model/model.h"

#define TRYK(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

static int minimax_m2_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    hp->rope_mode = DF_ROPE_NEOX;
    if (hp->n_expert <= 0 || hp->n_expert_used <= 0)
        return df_err(DF_ERR_FORMAT, "%s: minimax-m2 needs expert_count and expert_used_count > 0", m->path);
    if (hp->n_ff <= 0) hp->n_ff = hp->n_ff_exp;
    if (hp->n_ff <= 0) return df_err(DF_ERR_FORMAT, "%s: expert width unknown (feed_forward_length)", m->path);
    hp->n_ff_exp = hp->n_ff; /* llama.cpp: ffn_*_exps are {n_embd, n_ff, E} */
    uint32_t u = 0;
    TRYK(df_model_key_u32(m, "expert_gating_func", &u, false));
    if (u == 0) u = DF_GATING_SIGMOID; /* what MiniMax-M2 uses (llama.cpp would refuse an unset one) */
    if (u != DF_GATING_SOFTMAX && u != DF_GATING_SIGMOID)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_gating_func %u not supported for minimax-m2", m->path, u);
    hp->gating = (int)u;
    hp->expert_weights_norm = true;
    hp->expert_weights_scale = 0.0f;
    hp->qk_norm = DF_QK_NORM_FULL;
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return df_err(DF_ERR_FORMAT, "%s: minimax-m2 needs key_length == value_length", m->path);
    return DF_OK;
}

static const df_tensor_spec minimax_m2_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_TS("blk.%d.attn_norm.weight", DF_LF(attn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD),
    DF_TS("blk.%d.attn_q.weight", DF_LF(wq), 0, DF_R_MAT, 0, 0, DF_D_EMBD, DF_D_Q),
    DF_TS("blk.%d.attn_k.weight", DF_LF(wk), 0, DF_R_MAT, 0, 0, DF_D_EMBD, DF_D_K),
    DF_TS("blk.%d.attn_v.weight", DF_LF(wv), 0, DF_R_MAT, 0, 0, DF_D_EMBD, DF_D_V),
    DF_TS("blk.%d.attn_q_norm.weight", DF_LF(q_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_Q), /* whole projection */
    DF_TS("blk.%d.attn_k_norm.weight", DF_LF(k_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_K),
    DF_SCHEMA_ATTN_OUT,
    DF_SCHEMA_FFN_NORM,
    DF_SCHEMA_MOE_ROUTER,
    DF_TS("blk.%d.exp_probs_b.bias", DF_LF(exp_probs_b), DF_T_NORM, DF_R_BIAS, DF_W_MOE, 0, DF_D_EXPERT),
    DF_SCHEMA_MOE_EXPS,
    DF_SCHEMA_OUTPUT(0),
};

const df_arch df_arch_minimax_m2 = {.name = "minimax-m2", .load_hparams = minimax_m2_hparams,
                                    DF_SCHEMA(minimax_m2_tensors)};
