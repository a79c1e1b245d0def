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

static const df_tensor_spec olmoe_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_GQA_IN,
    DF_TS("blk.%d.attn_q_norm.weight", DF_LF(q_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_Q), /* full q */
    DF_TS("blk.%d.attn_k_norm.weight", DF_LF(k_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_K),
    DF_SCHEMA_ATTN_OUT,
    DF_SCHEMA_FFN_NORM,
    DF_SCHEMA_MOE_ROUTER,
    DF_SCHEMA_MOE_EXPS,
    DF_SCHEMA_OUTPUT(0),
};
static const df_schema_probe olmoe_probes[] = {DF_SCHEMA_GQA_PROBES};

const df_arch df_arch_olmoe = {.name = "olmoe", .load_hparams = olmoe_hparams, DF_SCHEMA(olmoe_tensors),
                               DF_PROBES(olmoe_probes)};
