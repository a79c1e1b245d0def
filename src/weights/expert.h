/* expert.h — the narrow interface between the MoE forward pass and wherever routed expert
 * weights live (resident RAM, or the SSD expert store with its budgeted cache).
 * Invariant: weights returned by acquire() stay valid and unchanged until the matching
 * release(); the store never evicts a slot between the two (pinning).
 * Threading: acquire/release may be called from the forward-pass thread while the store's
 * I/O threads run; a provider must be safe for that. */
#ifndef DF_EXPERT_H
#define DF_EXPERT_H
#include "base/util.h"

enum { DF_EXPERT_GATE = 0, DF_EXPERT_UP = 1, DF_EXPERT_DOWN = 2, DF_EXPERT_NPARTS = 3 };

/* One routed expert's matrices. For fused gate_up files, gate and up point into the same
 * record (up = gate + n_ff rows). Types/shapes come from the layer's expert tensors. */
typedef struct {
    const void *w[DF_EXPERT_NPARTS];
    int type[DF_EXPERT_NPARTS];
} df_expert_w;

/* Where to find expert e of layer l part p in the model files (for streaming providers). */
typedef struct {
    int shard;          /* file index (df_gguf shards, or a packed file) */
    uint64_t offset;    /* absolute byte offset */
    uint64_t nbytes;
    int type;
} df_expert_loc;

typedef struct df_expert_provider {
    void *ud;
    /* Blocks until the expert's bytes are available; pins them. */
    int (*acquire)(void *ud, int layer, int expert, df_expert_w *out);
    void (*release)(void *ud, int layer, int expert);
    /* Optional hint: these experts of `layer` will be needed soon (prompt batch union,
     * router look-ahead). May be NULL. Must not block on I/O. */
    void (*prefetch)(void *ud, int layer, const int *experts, int n);
    /* Optional: fill stats. May be NULL. */
    void (*stats)(void *ud, uint64_t *hits, uint64_t *misses, uint64_t *bytes_read,
                  uint64_t *io_wait_ns);
    void (*destroy)(void *ud);
} df_expert_provider;
#endif
