/* plan.h — the memory plan: a pure function from what a model needs (its footprint) and the
 * user's limits to how the memory limit is spent — which dense layers stay resident and which
 * stream through layer buffers, whether routed experts stream, and how many expert cache
 * slots the rest buys. The loader gathers the footprint (model/, weights/, forward/), calls
 * df_plan_make and builds the weights the plan describes; `info` prints the same plan.
 * Order: 1. do routed experts stream, 2. the prompt chunk, 3. which dense layers stream,
 * 4. the expert cache.
 * Invariant: the plan never assigns more than the limit; it refuses (DF_ERR_RANGE, a message
 * with the bytes needed) only when the smallest working set does not fit.
 * Threading: pure functions. */
#ifndef DF_PLAN_H
#define DF_PLAN_H
#include "base/util.h"

typedef struct {
    /* footprint */
    bool has_experts;            /* the model has routed experts */
    bool experts_packed;         /* they are in a packed file: only the store reads them */
    uint64_t dense_total;        /* all dense (non-expert) bytes */
    uint64_t dense_global;       /* dense bytes that are always resident (not per-layer matrices) */
    uint64_t embd_bytes;         /* the token embedding table when a forward pass can read its rows
                                  * from the file instead (not tied to the output head), else 0;
                                  * part of dense_global */
    int embd_rows;               /* -1: read by row when experts stream and the table is at least
                                  * one expert slot; 0: never; 1: whenever embd_bytes (tests) */
    int n_layer;
    /* [n_layer]: per-layer streamable bytes, the layer buffer they need, the bytes a read takes */
    const uint64_t *layer_stream_bytes, *layer_buf_bytes, *layer_read_bytes;
    uint64_t expert_bytes;       /* routed experts as stored */
    uint64_t slot_bytes;         /* one expert cache slot */
    int n_expert_pairs;          /* (layer, expert) pairs with weights */
    int n_expert_used;           /* experts per token */
    uint64_t kv_bytes;           /* KV cache of all sequences at the planned context (+ state) */
    /* activations of all sequences for prompt chunks of batch[i] tokens, i = 0..n_batch_opts-1:
     * batch[0] is what was asked for, the others smaller choices (descending) the plan may take
     * under memory pressure */
    int n_batch_opts;
    const int *batch;
    const uint64_t *batch_scratch;
    uint64_t scratch_bytes;      /* with n_batch_opts == 0: the scratch, fixed */
    bool batch_fixed;            /* the caller chose batch[0]: keep it */
    uint64_t overhead_bytes;     /* what the process needs besides the plan's parts (code,
                                  * libraries, tokenizer, store tables, thread stacks, slack),
                                  * measured by the loader; 0: DF_PLAN_OVERHEAD */
    uint64_t page_cache_bytes;   /* page cache of a buffered read engine's reads in flight
                                  * (--io pread / mmap): added to the overhead when the
                                  * routed experts stream, shown apart */
    /* limits and choices */
    uint64_t mem_limit;          /* 0: mem_available - mem_reserve */
    uint64_t mem_reserve;        /* 0: 1 GiB */
    uint64_t mem_available;      /* what the machine gives the process */
    uint64_t cache_bytes;        /* > 0: exactly this expert cache, on top of the dense weights */
    int stream_experts;          /* -1: when they do not fit; 0: resident; 1: stream */
    bool dense_stream;           /* dense layers may stream when they do not fit */
    int force_resident;          /* >= 0: exactly this many dense layers resident (tests) */
} df_plan_in;

typedef struct {
    uint64_t limit;              /* the effective limit */
    bool limit_from_ram;         /* limit = available - reserve */
    bool experts_stream;
    /* dense weights */
    int n_layer;
    int n_resident;              /* layers [0, n_resident) keep their dense matrices */
    int n_streamed;              /* layers [n_resident, n_layer) stream (0: none) */
    int n_buf;                   /* layer buffers: 2 (double-buffered) or 1 (no overlap) */
    uint64_t dense_total, dense_global;
    bool embd_rows;              /* token embeddings read by row from the file: embd_bytes less
                                  * dense (not in dense_total / dense_global) */
    uint64_t embd_bytes;
    uint64_t layers_bytes;       /* streamable bytes of the resident layers */
    uint64_t buf_bytes;          /* one layer buffer */
    uint64_t read_per_pass;      /* dense bytes read per forward pass */
    uint64_t dense_bytes;        /* what the dense weights occupy (global + layers + buffers) */
    uint64_t kv_bytes, scratch_bytes, overhead_bytes;
    uint64_t page_cache_bytes;   /* of overhead_bytes: df_plan_in's, when experts stream */
    int n_batch;                 /* the prompt chunk chosen (batch[i]), 0 with a fixed scratch */
    /* routed experts */
    uint64_t expert_total_bytes;
    int n_experts_total;
    uint64_t slot_bytes, cache_bytes;
    int n_slots;
    bool all_resident;           /* every expert has a slot */
    double frac_resident;
    uint64_t fixed_bytes;        /* dense + KV + scratch + overhead */
    uint64_t need_min;           /* fixed + the smallest working set of slots */
} df_plan;

/* The overhead assumed when none is given (tests of the pure plan). */
#define DF_PLAN_OVERHEAD (64ull << 20)

int df_plan_make(const df_plan_in *in, df_plan *out);
/* Multi-line plan ("memory plan: limit ...", one line per use) and the dense line. */
const char *df_plan_str(const df_plan *p, char *buf, size_t cap);
const char *df_plan_dense_str(const df_plan *p, char *buf, size_t cap);
#endif
