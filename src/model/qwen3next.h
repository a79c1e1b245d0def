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
int df_qn_hparams(df_model *m);
void df_qn_dims(const df_hparams *hp, int il, int64_t *d);
void df_qn_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row);
uint64_t df_qn_state_bytes(const df_model *m);
#endif
