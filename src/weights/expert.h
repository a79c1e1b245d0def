/* expert.h — one routed expert's weights as the forward pass receives them from an expert
 * source (weights.h): resident RAM, the SSD expert store with its budgeted cache, or others.
 * Invariant: weights returned by acquire() stay valid and unchanged until the matching
 * release(); the store never evicts a slot between the two (pinning).
 * Threading: acquire/release may be called from the forward-pass thread while the store's
 * I/O threads run; a provider must be safe for that. */
#ifndef DF_EXPERT_H
#define DF_EXPERT_H
#include "model/model.h"

/* One routed expert's matrices. For fused gate_up files, gate and up point into the same
 * record (up = gate + n_ff rows). Types/shapes come from the layer's expert tensors. */
typedef struct {
    const void *w[DF_EXPERT_NPARTS];
    int type[DF_EXPERT_NPARTS];
} df_expert_w;

#endif
