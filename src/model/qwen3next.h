/* qwen3next.h — sizes of the per-sequence recurrent state of a Gated DeltaNet layer
 * (qwen3next, qwen35moe), shared by the architecture description (state bytes for the memory
 * plan) and the forward pass (state layout: conv state, then the delta state). */
#ifndef DF_MODEL_QWEN3NEXT_H
#define DF_MODEL_QWEN3NEXT_H
#include "model/model.h"
#include <math.h>

/* conv state: (C-1) taps per channel of q|k|v (2·S·Hk + S·Hv channels) */
static inline uint64_t df_qn_conv_floats(const df_hparams *hp) {
    const uint64_t S = (uint64_t)hp->ssm_d_state;
    return (uint64_t)(hp->ssm_conv - 1) * (2 * S * (uint64_t)hp->ssm_n_group + S * (uint64_t)hp->ssm_dt_rank);
}
/* delta state: Hv heads of S x S */
static inline uint64_t df_qn_delta_floats(const df_hparams *hp) {
    return (uint64_t)hp->ssm_dt_rank * (uint64_t)hp->ssm_d_state * (uint64_t)hp->ssm_d_state;
}

/* Shared by arch_qwen3next.c and arch_qwen35moe.c: hyperparameters (ssm.* keys,
 * full_attention_interval, expert widths, MoE flags), the symbolic dims below, KV rows (0 for
 * DeltaNet layers) and the state size. */
enum { QN_CONV_DIM = DF_D_ARCH, QN_QKVZ, QN_VDIM, QN_S, QN_C, QN_HV, QN_BA, QN_QG };

/* Their tensor schemas' common parts (the rest differs: qwen3next's ssm_in / ssm_ba, qwen35moe's
 * ssm_beta / ssm_alpha): a layer's norms and its gated full attention (attn_q rows are
 * [query ; gate] per head), the DeltaNet convolution, decay and A, and the MoE with a
 * sigmoid-gated shared expert, the (bound, never run) NextN tensors and the output. */
#define DF_SCHEMA_QN_ATTN \
    DF_TS("blk.%d.attn_norm.weight", DF_LF(attn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD), \
    DF_TS("blk.%d.post_attention_norm.weight", DF_LF(ffn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD), \
    DF_TS("blk.%d.attn_q.weight", DF_LF(wq), 0, DF_R_MAT, DF_W_ATTN, 0, DF_D_EMBD, QN_QG), \
    DF_TS("blk.%d.attn_k.weight", DF_LF(wk), 0, DF_R_MAT, DF_W_ATTN, 0, DF_D_EMBD, DF_D_K), \
    DF_TS("blk.%d.attn_v.weight", DF_LF(wv), 0, DF_R_MAT, DF_W_ATTN, 0, DF_D_EMBD, DF_D_V), \
    DF_TS("blk.%d.attn_output.weight", DF_LF(wo), 0, DF_R_MAT, DF_W_ATTN, 0, DF_D_O, DF_D_EMBD), \
    DF_TS("blk.%d.attn_q_norm.weight", DF_LF(q_norm), DF_T_NORM, DF_R_NORM, DF_W_ATTN, 0, DF_D_HEAD_K), \
    DF_TS("blk.%d.attn_k_norm.weight", DF_LF(k_norm), DF_T_NORM, DF_R_NORM, DF_W_ATTN, 0, DF_D_HEAD_K)
#define DF_SCHEMA_QN_CONV \
    DF_TS("blk.%d.ssm_conv1d.weight", DF_LF(ssm_conv[0]), DF_T_NORM, DF_R_CONV, DF_W_RECR, 0, QN_C, QN_CONV_DIM), \
    DF_TS("blk.%d.ssm_dt.bias", DF_LF(ssm_dt_b), DF_T_NORM, DF_R_DT, DF_W_RECR, 0, QN_HV), \
    DF_TS("blk.%d.ssm_a", DF_LF(ssm_a), DF_T_NORM, DF_R_SSM_A, DF_W_RECR, 0, QN_HV)
#define DF_SCHEMA_QN_MOE_OUT \
    DF_SCHEMA_MOE_ROUTER, \
    DF_SCHEMA_MOE_EXPS, \
    DF_TS("blk.%d.ffn_gate_inp_shexp.weight", DF_LF(gate_inp_shexp), 0, DF_R_MAT, DF_W_MOE, 0, DF_D_EMBD), \
    DF_SCHEMA_SHEXP(0, 0), \
    DF_SCHEMA_NEXTN, \
    DF_SCHEMA_OUTPUT(DF_T_OPTIONAL)
int df_qn_hparams(df_model *m);
void df_qn_dims(const df_hparams *hp, int il, int64_t *d);
void df_qn_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row);
uint64_t df_qn_state_bytes(const df_model *m);
#endif
