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

#define OPT_F32 (DF_T_OPTIONAL | DF_T_NORM)
static const df_tensor_spec llama_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_GQA_IN,
    DF_SCHEMA_ATTN_OUT,
    DF_TS("blk.%d.attn_output.bias", DF_LF(bo), OPT_F32, DF_R_BIAS, 0, 0, DF_D_EMBD),
    DF_SCHEMA_FFN_NORM,
    DF_SCHEMA_FFN_DENSE,
    DF_TS("blk.%d.ffn_gate.bias", DF_LF(ffn_gate_b), OPT_F32, DF_R_BIAS, DF_W_DENSE, 0, DF_D_FF),
    DF_TS("blk.%d.ffn_down.bias", DF_LF(ffn_down_b), OPT_F32, DF_R_BIAS, DF_W_DENSE, 0, DF_D_EMBD),
    DF_TS("blk.%d.ffn_up.bias", DF_LF(ffn_up_b), OPT_F32, DF_R_BIAS, DF_W_DENSE, 0, DF_D_FF),
    DF_SCHEMA_MOE_ROUTER,     /* Mixtral: expert width n_ff (n_ff_exp = n_ff) */
    DF_SCHEMA_MOE_EXPS,
    DF_SCHEMA_OUTPUT(DF_T_OPTIONAL),
    DF_TS("rope_freqs.weight", DF_MF(rope_freqs), OPT_F32, DF_R_NORM, 0, 0, DF_D_ROT_HALF),
};
static const df_schema_probe llama_probes[] = {DF_SCHEMA_GQA_PROBES};

const df_arch df_arch_llama = {.name = "llama", .load_hparams = llama_hparams, DF_SCHEMA(llama_tensors),
                               DF_PROBES(llama_probes)};
