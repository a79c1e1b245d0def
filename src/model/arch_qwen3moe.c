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

static const df_tensor_spec qwen3moe_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_GQA_IN,
    DF_TS("blk.%d.attn_q_norm.weight", DF_LF(q_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_HEAD_K), /* per head */
    DF_TS("blk.%d.attn_k_norm.weight", DF_LF(k_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_HEAD_K),
    DF_SCHEMA_ATTN_OUT,
    DF_SCHEMA_FFN_NORM,
    DF_SCHEMA_MOE_ROUTER,
    DF_SCHEMA_MOE_EXPS,
    DF_SCHEMA_OUTPUT(DF_T_OPTIONAL),
};
static const df_schema_probe qwen3moe_probes[] = {DF_SCHEMA_GQA_PROBES};

const df_arch df_arch_qwen3moe = {.name = "qwen3moe", .load_hparams = qwen3moe_hparams,
                                  DF_SCHEMA(qwen3moe_tensors), DF_PROBES(qwen3moe_probes)};
