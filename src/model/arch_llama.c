/* llama.c — the `llama` architecture: dense Llama-2/3 and Mixtral (MoE in every layer when
 * expert_count is set). RoPE NORM, optional rope_freqs (Llama-3.1), tied output allowed,
 * MoE: softmax over E, top-k, renormalized weights, no scale (formats.md §3.1). */
#include "model/model.h"

static int llama_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    hp->rope_mode = DF_ROPE_NORM;
    if (hp->n_rot != hp->n_embd_head_k)
        return df_err(DF_ERR_FORMAT, "%s: invalid n_rot: %d, expected %d", m->path, hp->n_rot,
                      hp->n_embd_head_k);
    if (hp->n_expert > 0) {
        hp->n_ff_exp = hp->n_ff;
        hp->gating = DF_GATING_SOFTMAX;
        hp->expert_weights_norm = true;
        hp->expert_weights_scale = 0.0f;
    }
    if (hp->n_ff <= 0) return df_err(DF_ERR_FORMAT, "%s: feed_forward_length missing or 0", m->path);
    return DF_OK;
}

static int llama_bind(df_model *m) {
    const df_hparams *hp = &m->hp;
    df_bind_output(m, true);
    m->rope_freqs = df_model_tensor(m, "rope_freqs.weight", 0, DF_T_OPTIONAL | DF_T_NORM, 1,
                                    hp->n_rot / 2, 0, 0);
    for (int il = 0; il < hp->n_layer; il++) {
        df_layer *L = &m->layers[il];
        df_bind_attn(m, il, true);
        L->ffn_norm = df_model_tensor(m, "blk.%d.ffn_norm.weight", il, DF_T_NORM, 1, hp->n_embd, 0, 0);
        if (hp->n_expert == 0) {
            L->ffn_gate = df_model_tensor(m, "blk.%d.ffn_gate.weight", il, 0, 2, hp->n_embd, hp->n_ff, 0);
            L->ffn_down = df_model_tensor(m, "blk.%d.ffn_down.weight", il, 0, 2, hp->n_ff, hp->n_embd, 0);
            L->ffn_up = df_model_tensor(m, "blk.%d.ffn_up.weight", il, 0, 2, hp->n_embd, hp->n_ff, 0);
            L->ffn_gate_b = df_model_tensor(m, "blk.%d.ffn_gate.bias", il, DF_T_OPTIONAL | DF_T_NORM, 1, hp->n_ff, 0, 0);
            L->ffn_down_b = df_model_tensor(m, "blk.%d.ffn_down.bias", il, DF_T_OPTIONAL | DF_T_NORM, 1, hp->n_embd, 0, 0);
            L->ffn_up_b = df_model_tensor(m, "blk.%d.ffn_up.bias", il, DF_T_OPTIONAL | DF_T_NORM, 1, hp->n_ff, 0, 0);
        } else {
            df_bind_moe_exps(m, il, hp->n_ff);
        }
    }
    return m->bind_status;
}

const df_arch df_arch_llama = {.name = "llama", .load_hparams = llama_hparams, .bind = llama_bind};
