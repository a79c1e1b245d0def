/* dense_stream.h — streaming the dense weights of the layers that do not fit the memory limit.
 * When the dense part alone (Kimi K3: ~34 GB at 4 bits) exceeds the limit, layers [0, k) keep
 * their dense matrices resident and layers [k, n_layer) are "streamed": their matrices are
 * read from the model file into one of two layer buffers just before the layer computes, and
 * the read of the next streamed layer (cyclically: after the last one, the first one of the
 * next token) is issued as soon as a layer is acquired, so it overlaps that layer's compute.
 * What streams: every per-layer tensor with >= 2 dims except the routed experts (the expert
 * store's business) and the router (ffn_gate_inp: router look-ahead reads layer L+1's router
 * while L computes). Norms, biases and routers stay resident (small).
 *
 * Use (one pass = one batch through the layers; session.c's forward_batch does it):
 *     df_dense_begin(m);                      // serializes passes over this model
 *     for (il ...) { rc = df_dense_acquire(m, il); if (rc) break; ...layer il...; df_dense_release(m, il); }
 *     df_dense_end(m);                        // always, also after an error
 * All four are no-ops (DF_OK) for a model without streamed layers. Between acquire(il) and
 * release(il) the layer's df_tensor data pointers point into a buffer; outside, a streamed
 * tensor's data is NULL (a stray use crashes loudly instead of reading another layer).
 *
 * Invariant: at most n_buf (1 or 2) streamed layers are in memory; buffers are allocated once
 * at load (no allocation per token); the plan never exceeds the limit.
 * Threading: a model with streamed layers serializes forward passes (begin takes a per-model
 * mutex until end): contexts sharing it take turns batch by batch. Reads complete on df_io
 * threads (io.c); only acquire waits for them. */
#ifndef DF_DENSE_STREAM_H
#define DF_DENSE_STREAM_H
#include "base/util.h"

struct deltafin_model;
struct df_tensor;

typedef struct {
    int n_layer;
    int n_resident;              /* layers [0, n_resident) keep their dense matrices */
    int n_streamed;              /* layers [n_resident, n_layer) stream (0: nothing streams) */
    int n_buf;                   /* layer buffers: 2 (double-buffered) or 1 (no overlap) */
    uint64_t global_bytes;       /* always resident: embeddings, output, norms, routers, ... */
    uint64_t layers_bytes;       /* streamable bytes of the resident layers */
    uint64_t buf_bytes;          /* one layer buffer (largest streamed layer, 4 KiB regions) */
    uint64_t read_per_pass;      /* bytes read per forward pass (one token in generation) */
    uint64_t resident_bytes;     /* global + layers + n_buf * buf: what the memory plan counts */
    uint64_t dense_total;        /* all dense bytes (every layer resident) */
} df_dense_plan;

/* Inputs of the plan besides the model: everything that is not dense. */
typedef struct {
    uint64_t limit;              /* the effective memory limit */
    uint64_t other_bytes;        /* KV + scratch + overhead (+ resident experts) */
    uint64_t slot_bytes;         /* one expert cache slot (0: experts do not stream) */
    int want_slots;              /* slots kept for experts before more layers go resident */
    int min_slots;               /* smallest working set in slots (refuse below) */
    int force_resident;          /* >= 0: exactly this many resident layers (tests); -1: plan */
} df_dense_plan_in;

/* Plan which layers stream. Needs only the bound tensors (works on DF_LOAD_META_ONLY models).
 * Most layers resident such that want_slots expert slots still fit; failing that, no layer
 * resident with 2 buffers and >= min_slots slots, then with 1 buffer; else DF_ERR_RANGE with
 * the bytes needed. out->n_streamed == 0 when everything fits. */
int df_dense_plan_compute(const struct deltafin_model *m, const df_dense_plan_in *in, df_dense_plan *out);
/* One line: "dense: 3 of 8 layers resident (1.2 MiB), 5 streamed through 2 buffers of ...". */
const char *df_dense_plan_str(const df_dense_plan *p, char *buf, size_t cap);

/* The plan df_dense_decide would make for m at m->params.mem_limit (0: available RAM - reserve);
 * experts_stream: routed experts go to the expert store (df_stream_decide). For `info`. */
int df_dense_plan_model(struct deltafin_model *m, bool experts_stream, df_dense_plan *out);

/* ---- model load (model.c) ----------------------------------------------------------------- */
/* Before loading data: decide from the limit (params.mem_limit, else available RAM - reserve)
 * whether layers stream; experts_stream says whether routed experts go to the expert store.
 * $DELTAFIN_DENSE_STREAM=0 turns it off; $DELTAFIN_DENSE_RESIDENT=K forces K resident layers
 * (tests). Logs the plan (INFO) when layers stream. */
int df_dense_decide(struct deltafin_model *m, bool experts_stream);
/* True if t's bytes are streamed (load_data skips them). */
bool df_dense_tensor_streamed(const struct deltafin_model *m, const struct df_tensor *t);
/* Dense bytes the memory plan counts: `all_dense` when nothing streams, else resident_bytes. */
uint64_t df_dense_plan_bytes(const struct deltafin_model *m, uint64_t all_dense);
/* After loading (and after the expert store is attached, whose engine it reuses): allocate the
 * buffers, open the read engine, check the file is long enough for every streamed tensor. */
int df_dense_open(struct deltafin_model *m);
void df_dense_free(struct deltafin_model *m);
/* The plan in use, or NULL when nothing streams. */
const df_dense_plan *df_dense_get_plan(const struct deltafin_model *m);

/* ---- forward pass ---------------------------------------------------------------------------- */
void df_dense_begin(struct deltafin_model *m);
/* Wait for layer il's dense bytes (reading them now if no read was issued), point its tensors
 * at them, and issue the read of the next streamed layer into the other buffer. Errors (EIO,
 * short read, file truncated) name layer, tensor, file and offset; the pass should then end
 * (df_dense_end) and return the error. */
int df_dense_acquire(struct deltafin_model *m, int il);
void df_dense_release(struct deltafin_model *m, int il);
void df_dense_end(struct deltafin_model *m);

typedef struct {
    uint64_t passes;             /* begin/end pairs */
    uint64_t layer_reads;        /* layer loads issued */
    uint64_t layer_ready;        /* acquires whose bytes had already landed (read fully overlapped) */
    uint64_t bytes_read;         /* payload bytes */
    uint64_t wait_ns;            /* time acquire blocked on reads */
    uint64_t io_busy_ns;         /* wall time with >= 1 dense read in flight */
    int engine;
} df_dense_stats;
/* DF_ERR_INVALID if nothing streams. */
int df_dense_get_stats(struct deltafin_model *m, df_dense_stats *st);
const char *df_dense_stats_str(const df_dense_stats *st, char *buf, size_t cap);
#endif
