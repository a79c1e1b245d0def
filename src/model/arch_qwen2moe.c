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

static int qwen2moe_bind(df_model *m) {
    const df_hparams *hp = &m->hp;
    df_bind_output(m, false);
    for (int il = 0; il < hp->n_layer; il++) {
        df_layer *L = &m->layers[il];
        df_bind_attn(m, il, false);
        L->ffn_norm = df_model_tensor(m, "blk.%d.ffn_norm.weight", il, DF_T_NORM, 1, hp->n_embd, 0, 0);
        df_bind_moe_exps(m, il, hp->n_ff_exp);
        L->gate_inp_shexp = df_model_tensor(m, "blk.%d.ffn_gate_inp_shexp.weight", il, 0, 1, hp->n_embd, 0, 0);
        L->gate_shexp = df_model_tensor(m, "blk.%d.ffn_gate_shexp.weight", il, 0, 2, hp->n_embd, hp->n_ff_shexp, 0);
        L->down_shexp = df_model_tensor(m, "blk.%d.ffn_down_shexp.weight", il, 0, 2, hp->n_ff_shexp, hp->n_embd, 0);
        L->up_shexp = df_model_tensor(m, "blk.%d.ffn_up_shexp.weight", il, 0, 2, hp->n_embd, hp->n_ff_shexp, 0);
    }
    return m->bind_status;
}

const df_arch df_arch_qwen2moe = {.name = "qwen2moe", .load_hparams = qwen2moe_hparams, .bind = qwen2moe_bind};
