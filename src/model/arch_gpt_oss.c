/* arch_gpt_oss.c — OpenAI gpt-oss-20b / 120b (llama.cpp's LLM_ARCH_OPENAI_MOE, "gpt-oss"):
 * GQA with q/k/v/o biases and per-head attention sinks, sliding-window attention on the layers
 * il % period < period - 1 (period attention.sliding_window_pattern, default 2: even layers),
 * RoPE NEOX with the file's YaRN keys, post_attention_norm before the MoE, a router with a
 * bias, top-k on the raw logits then softmax over the k chosen (SOFTMAX_WEIGHT), per-expert
 * biases on gate / up / down, and the clamped SwiGLU (llama.cpp's swiglu_oai, alpha 1.702,
 * limit 7). The attention scale is 1/sqrt(head dim) (= n_rot in these files). */
#include "model/model.h"

static int gpt_oss_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    hp->rope_mode = DF_ROPE_NEOX;
    if (hp->n_expert <= 0) return df_err(DF_ERR_FORMAT, "%s: gpt-oss needs expert_count > 0", m->path);
    if (hp->n_ff_exp <= 0)
        return df_err(DF_ERR_FORMAT, "%s: gpt-oss needs expert_feed_forward_length", m->path);
    if (hp->n_rot != hp->n_embd_head_k || hp->n_embd_head_k != hp->n_embd_head_v)
        return df_err(DF_ERR_FORMAT, "%s: gpt-oss needs key_length == value_length == rope dims", m->path);
    uint32_t u = 0;
    int rc = df_model_key_u32(m, "attention.sliding_window", &u, true);
    if (rc < 0) return rc;
    if (u == 0) return df_err(DF_ERR_FORMAT, "%s: gpt-oss attention.sliding_window is 0", m->path);
    hp->n_swa = (int)u;
    uint32_t period = 2;
    rc = df_model_key_u32(m, "attention.sliding_window_pattern", &period, false);
    if (rc < 0) return rc;
    for (int il = 0; il < hp->n_layer; il++)
        hp->layer_swa[il] = period == 0 || (uint32_t)il % period < period - 1;
    /* llama.cpp lets the SWA layers have their own RoPE base; deltafin has one RoPE table */
    float base_swa = hp->rope_freq_base;
    rc = df_model_key_f32(m, "rope.freq_base_swa", &base_swa, false);
    if (rc < 0) return rc;
    if (base_swa != hp->rope_freq_base)
        return df_err(DF_ERR_UNSUPPORTED, "%s: rope.freq_base_swa %g differs from rope.freq_base %g (not supported)",
                      m->path, (double)base_swa, (double)hp->rope_freq_base);
    hp->gating = DF_GATING_SOFTMAX_WEIGHT;
    hp->expert_weights_norm = false;
    hp->expert_weights_scale = 0.0f; /* llama.cpp never reads it for gpt-oss */
    hp->ffn_act = DF_ACT_SWIGLU_OAI;
    return DF_OK;
}

#define GO_EXP_BIAS(part, name, rows) \
    DF_TS("blk.%d." name ".bias", DF_LF(exps_b[part]), DF_T_NORM, DF_R_BIAS, DF_W_MOE, 0, rows, DF_D_EXPERT)

static const df_tensor_spec gpt_oss_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_GQA_IN,
    DF_SCHEMA_ATTN_OUT,
    DF_TS("blk.%d.attn_output.bias", DF_LF(bo), DF_T_NORM, DF_R_BIAS, 0, 0, DF_D_EMBD),
    DF_TS("blk.%d.attn_sinks.weight", DF_LF(attn_sinks), DF_T_NORM, DF_R_BIAS, 0, 0, DF_D_HEAD),
    DF_TS("blk.%d.post_attention_norm.weight", DF_LF(ffn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD),
    DF_SCHEMA_MOE_ROUTER,
    DF_TS("blk.%d.ffn_gate_inp.bias", DF_LF(gate_inp_b), DF_T_NORM, DF_R_BIAS, DF_W_MOE, 0, DF_D_EXPERT),
    DF_SCHEMA_MOE_EXPS,
    GO_EXP_BIAS(DF_EXPERT_GATE, "ffn_gate_exps", DF_D_FF_EXP),
    GO_EXP_BIAS(DF_EXPERT_DOWN, "ffn_down_exps", DF_D_EMBD),
    GO_EXP_BIAS(DF_EXPERT_UP, "ffn_up_exps", DF_D_FF_EXP),
    DF_SCHEMA_OUTPUT(0),
};
static const df_schema_probe gpt_oss_probes[] = {DF_SCHEMA_GQA_PROBES};

const df_arch df_arch_gpt_oss = {.name = "gpt-oss", .load_hparams = gpt_oss_hparams, DF_SCHEMA(gpt_oss_tensors),
                                 DF_PROBES(gpt_oss_probes)};
