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
 * Use: through weights.h (df_weights_begin / _layer_acquire / _layer_release / _end), which
 * calls df_dense_begin(ds) ... df_dense_end(ds) when a model has streamed layers. Which layers
 * stream is the memory plan's decision (runtime/plan.c), from the footprint computed here. Between acquire(il) and
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
#include "model/model.h"

typedef struct df_dense_stream df_dense_stream;

/* What the memory plan needs to know about the dense weights: per layer, the bytes that could
 * stream, the layer buffer they would need (4 KiB regions per contiguous file run) and the
 * bytes a read of the layer takes; and the bytes that are always resident (embeddings,
 * output, norms, routers). Arrays [n_layer], owned (df_dense_footprint_free). */
typedef struct {
    int n_layer;
    uint64_t dense_total;        /* all dense bytes (every layer resident) */
    uint64_t global_bytes;       /* always resident */
    uint64_t *stream_bytes, *buf_bytes, *read_bytes;
} df_dense_footprint;
int df_dense_footprint_compute(const df_model *m, df_dense_footprint *fp);
void df_dense_footprint_free(df_dense_footprint *fp);

/* Layers [n_resident, n_layer) of m stream through n_buf (1 or 2) buffers of buf_bytes (the
 * plan's numbers); chunk: request bytes (0: 8 MiB). Builds the layout; no I/O yet. */
int df_dense_stream_create(df_model *m, int n_resident, int n_buf, uint64_t buf_bytes, uint64_t chunk,
                           df_dense_stream **out);
/* True if t's bytes are streamed (the resident load skips them). */
bool df_dense_stream_has(const df_dense_stream *ds, const df_tensor *t);
/* After the resident load: open the read engine (DF_IO_*, the expert store's when experts
 * stream too), allocate the buffers (mlock them if asked), check the file is long enough for
 * every streamed tensor. */
int df_dense_stream_open(df_dense_stream *ds, int engine, bool mlock_bufs);
void df_dense_stream_free(df_dense_stream *ds);

/* ---- forward pass (through weights.h) ------------------------------------------------------- */
void df_dense_begin(df_dense_stream *ds);
/* Wait for layer il's dense bytes (reading them now if no read was issued), point its tensors
 * at them, and issue the read of the next streamed layer into the other buffer. A resident
 * layer is a no-op. Errors (EIO, short read, file truncated) name layer, tensor, file and
 * offset; the pass should then end (df_dense_end) and return the error. */
int df_dense_acquire(df_dense_stream *ds, int il);
void df_dense_release(df_dense_stream *ds, int il);
void df_dense_end(df_dense_stream *ds);

typedef struct {
    uint64_t passes;             /* begin/end pairs */
    uint64_t layer_reads;        /* layer loads issued */
    uint64_t layer_ready;        /* acquires whose bytes had already landed (read fully overlapped) */
    uint64_t bytes_read;         /* payload bytes */
    uint64_t wait_ns;            /* time acquire blocked on reads */
    uint64_t io_busy_ns;         /* wall time with >= 1 dense read in flight */
    int engine;
} df_dense_stats;
int df_dense_get_stats(df_dense_stream *ds, df_dense_stats *st);
const char *df_dense_stats_str(const df_dense_stats *st, char *buf, size_t cap);
#endif
