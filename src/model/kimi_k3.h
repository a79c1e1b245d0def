/* kimi_k3.h — sizes of Kimi K3's per-sequence recurrent state, shared by the architecture
 * description (state bytes for the memory plan) and the forward pass (state layout). */
#ifndef DF_MODEL_KIMI_K3_H
#define DF_MODEL_KIMI_K3_H
#include "model/model.h"

/* Recurrent state floats of one KDA layer: conv (3 blocks of (C-1)·DI) + delta (H·S·S). */
static inline uint64_t df_k3_conv_floats(const df_hparams *hp) {
    return 3ull * (uint64_t)(hp->ssm_conv - 1) * (uint64_t)hp->n_head * (uint64_t)hp->kda_head_dim;
}
static inline uint64_t df_k3_delta_floats(const df_hparams *hp) {
    return (uint64_t)hp->n_head * (uint64_t)hp->kda_head_dim * (uint64_t)hp->kda_head_dim;
}
#endif
