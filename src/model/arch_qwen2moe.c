/* qwen2moe.c — Qwen1.5-MoE / Qwen2-57B-A14B (formats.md §3.2): attention with q/k/v biases,
 * RoPE NEOX, MoE softmax top-k without renormalization, plus a shared expert gated by
 * sigmoid(ffn_gate_inp_shexp · x) (computed as silu(z)/z like llama.cpp). */
#include "model/model.h"

static int qwen2moe_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    hp->rope_mode = DF_ROPE_NEOX;
    if (hp->n_expert <= 0) return df_err(DF_ERR_FORMAT, "%s: qwen2moe needs expert_count > 0", m->path);
    if (hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    if (hp->n_ff_shexp == 0) hp->n_ff_shexp = hp->n_ff;
    if (hp->n_ff_exp <= 0 || hp->n_ff_shexp <= 0)
        return df_err(DF_ERR_FORMAT, "%s: expert widths unknown (expert_feed_forward_length)", m->path);
    hp->gating = DF_GATING_SOFTMAX;
    hp->expert_weights_norm = false;
    hp->shexp_gated = true;
    return DF_OK;
}

static const df_tensor_spec qwen2moe_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_GQA_IN,          /* q/k/v biases: optional here, present in Qwen files */
    DF_SCHEMA_ATTN_OUT,
    DF_SCHEMA_FFN_NORM,
    DF_SCHEMA_MOE_ROUTER,
    DF_SCHEMA_MOE_EXPS,
    /* the shared expert's gate: one row used as a dot product (any type) */
    DF_TS("blk.%d.ffn_gate_inp_shexp.weight", DF_LF(gate_inp_shexp), 0, DF_R_MAT, DF_W_MOE, 0, DF_D_EMBD),
    DF_SCHEMA_SHEXP(0, 0),
    DF_SCHEMA_OUTPUT(0),
};
static const df_schema_probe qwen2moe_probes[] = {DF_SCHEMA_GQA_PROBES};

const df_arch df_arch_qwen2moe = {.name = "qwen2moe", .load_hparams = qwen2moe_hparams,
                                  DF_SCHEMA(qwen2moe_tensors), DF_PROBES(qwen2moe_probes)};
