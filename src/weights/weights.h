/* weights.h — the one interface between the forward pass and wherever a model's weight bytes
 * live. Dense tensors are resident (read at load into anonymous memory) or, layer by layer,
 * streamed through two layer buffers (dense_stream.h); routed experts come from an expert
 * source: resident memory, the SSD expert store with its budgeted cache (expert_store.h), or
 * any other implementation of df_expert_source (a test's provider, a remote one).
 *
 * One forward pass over a batch uses it like this (forward/session.c):
 *     df_weights_begin(w);                         // serializes passes when dense layers stream
 *     for (il ...) {
 *         df_weights_layer_acquire(w, il);         // the layer's dense bytes are in memory
 *         ... df_weights_expert_prefetch / _lookahead / _acquire / _release (forward/moe.c) ...
 *         df_weights_layer_release(w, il);
 *     }
 *     df_weights_end(w);                           // always, also after an error
 *
 * Invariant: bytes returned by an acquire stay valid and unchanged until the matching release
 * (the store pins the slot; a streamed layer's buffer is not reused). Between layer acquire and
 * release the layer's df_tensor data pointers point at its bytes; a streamed tensor's data is
 * NULL outside (a stray use crashes loudly instead of reading another layer).
 * Threading: acquire/release may run on the forward-pass thread while I/O threads complete
 * reads; every implementation is safe for that. Statistics may be read from any thread. */
#ifndef DF_WEIGHTS_H
#define DF_WEIGHTS_H
#include "model/model.h"
#include "weights/expert.h"

struct df_store_stats;
struct df_dense_stream;
struct df_store;

/* One MoE layer's routed work as forward/moe.c holds it, for a source that computes experts
 * itself (dist/: the experts' owners in other processes run them on the shipped rows and send
 * the outputs back). Pair i = t * k + j is token t's j-th selected expert. */
typedef struct df_expert_job {
    int layer, nt, k;                  /* tokens, experts per token */
    const int32_t *sel;                /* [nt][k] selected experts */
    const int32_t *e_off, *e_list;     /* expert e's pairs: e_list[e_off[e] .. e_off[e + 1]) */
    const int32_t *e_union;            /* experts with >= 1 pair, ascending */
    int n_union;
    const float *x;                    /* [nt][d_in] expert inputs */
    int64_t d_in;
    float *y;                          /* [nt * k][d_out]: pair i's output at row i */
    int64_t d_out;
} df_expert_job;

/* Routed-expert access. acquire/release are required; the rest may be NULL. */
typedef struct df_expert_source {
    void *ud;
    /* Blocks until the expert's bytes are available; pins them. Errors name layer, expert,
     * file and offset. */
    int (*acquire)(void *ud, int layer, int expert, df_expert_w *out);
    void (*release)(void *ud, int layer, int expert);
    /* These experts of `layer` are needed now (the batch's union): start reading, never block. */
    void (*prefetch)(void *ud, int layer, const int *experts, int n);
    /* Router look-ahead: experts predicted for `layer` (most likely first); never blocks. */
    void (*lookahead)(void *ud, int layer, const int *experts, int n);
    /* Whether look-ahead predictions are wanted (callers skip the router work otherwise). */
    bool (*lookahead_wanted)(void *ud);
    /* Cache and I/O counters (zeroed struct for sources without a cache). */
    void (*stats)(void *ud, struct df_store_stats *st);
    void (*destroy)(void *ud);
    /* Optional, all three or none: experts computed by the source (remote owners).
     * submit starts the job's experts that are not local without waiting for them and sets
     * local[u] = 1 for the e_union entries the caller computes itself (acquire/release),
     * 0 for those the source computes; poll lets their transfers progress (the caller calls
     * it between its own experts); complete waits for them and writes their pairs' rows of
     * job->y. A submit that succeeded is followed by exactly one complete with the same job,
     * also when the caller fails in between. Errors name the rank, layer and cause. */
    int (*submit)(void *ud, const df_expert_job *job, uint8_t *local);
    void (*poll)(void *ud);
    int (*complete)(void *ud, const df_expert_job *job);
} df_expert_source;

typedef struct df_weights {
    df_model *m;
    /* resident bytes (anonymous mappings owned here) */
    void *dense_mem; uint64_t dense_bytes;
    void *expert_mem; uint64_t expert_bytes;   /* routed experts, when resident */
    /* routed experts */
    df_expert_source ex;
    bool has_ex;
    struct df_store *store;                    /* the expert store when experts stream, else NULL */
    struct df_dist *dist;                      /* experts spread over processes (dist/dist.h): the
                                                * source is remote, `store` holds this one's share */
    /* streamed dense layers, or NULL when every dense tensor is resident */
    struct df_dense_stream *ds;
    /* the model files as they were when loading finished (df_weights_watch_files) */
    struct df_file_id *files;
    int n_files;
} df_weights;

/* ---- setup (runtime/loader.c) ------------------------------------------------------------- */
/* Which tensors to read at load: skip_experts leaves routed experts on disk; streamed(t) true
 * leaves t to the dense stream. progress(ud, done, total) after each tensor (may be NULL). */
typedef struct {
    bool skip_experts;
    const struct df_dense_stream *ds;        /* its tensors are not read */
    bool (*only)(const df_model *m, const df_tensor *t); /* or NULL; else read only where true */
    bool skip_embd;                          /* token embeddings: read by row (df_weights_embd_row) */
    uint64_t mem_limit;                      /* > 0: refuse when resident bytes exceed it and
                                              * drop the file's page-cache pages after reading */
    bool mlock;
    bool verify;                             /* check each tensor against the pack's checksums */
    void (*progress)(void *ud, uint64_t done, uint64_t total);
    void *progress_ud;
    bool progress_log;
    int n_threads;                           /* for the repack */
} df_resident_opts;
int df_weights_create(df_model *m, df_weights **out);
/* Read the resident tensors into anonymous memory and give the kernels their layout (Q4_K
 * rows interleaved by 8 where the kernels want it). Sets the tensors' data pointers. */
int df_weights_load_resident(df_weights *w, const df_resident_opts *o);
/* Row id of the token embeddings into buf (its row bytes) from the file, for a table left on
 * disk (skip_embd: its data is NULL); under --mem-limit the page cache it filled is dropped.
 * Any thread (pread). */
int df_weights_embd_row(const df_model *m, int64_t id, void *buf);
/* Routed experts from the resident memory loaded above. */
void df_weights_use_resident_experts(df_weights *w);
/* Install an expert source (replaces the current one, destroying it). */
void df_weights_set_experts(df_weights *w, const df_expert_source *src);
/* The expert store as the expert source; w takes ownership of s. */
void df_weights_use_store(df_weights *w, struct df_store *s);
/* Dense-layer streaming; w takes ownership of ds. */
void df_weights_use_dense_stream(df_weights *w, struct df_dense_stream *ds);
void df_weights_free(df_weights *w);

/* After loading: remember the model files' identity (size, modification time, link count), so
 * a pass that read from a file truncated, rewritten, replaced or deleted since then fails
 * instead of computing with other bytes (checked at df_weights_end when anything streams). */
int df_weights_watch_files(df_weights *w);

/* ---- the forward pass ---------------------------------------------------------------------- */
void df_weights_begin(df_weights *w);
/* Ends the pass: DF_OK, or DF_ERR_IO naming the file when a model file that weights are read
 * from during passes changed since load (the pass's results must be discarded). */
int df_weights_end(df_weights *w);
int df_weights_layer_acquire(df_weights *w, int il);
void df_weights_layer_release(df_weights *w, int il);
static inline int df_weights_expert_acquire(df_weights *w, int layer, int expert, df_expert_w *out) {
    return w->ex.acquire(w->ex.ud, layer, expert, out);
}
static inline void df_weights_expert_release(df_weights *w, int layer, int expert) {
    w->ex.release(w->ex.ud, layer, expert);
}
static inline void df_weights_expert_prefetch(df_weights *w, int layer, const int *experts, int n) {
    if (w->ex.prefetch) w->ex.prefetch(w->ex.ud, layer, experts, n);
}
static inline void df_weights_expert_lookahead(df_weights *w, int layer, const int *experts, int n) {
    if (w->ex.lookahead) w->ex.lookahead(w->ex.ud, layer, experts, n);
}
/* Whether the source computes some experts itself (df_expert_source.submit). */
static inline bool df_weights_expert_remote(const df_weights *w) { return w->has_ex && w->ex.submit; }
static inline int df_weights_expert_submit(df_weights *w, const df_expert_job *job, uint8_t *local) {
    return w->ex.submit(w->ex.ud, job, local);
}
static inline void df_weights_expert_poll(df_weights *w) { w->ex.poll(w->ex.ud); }
static inline int df_weights_expert_complete(df_weights *w, const df_expert_job *job) {
    return w->ex.complete(w->ex.ud, job);
}
static inline bool df_weights_lookahead_wanted(const df_weights *w) {
    return w->has_ex && w->ex.lookahead_wanted && w->ex.lookahead_wanted(w->ex.ud);
}

/* ---- statistics ---------------------------------------------------------------------------- */
/* Expert-source counters (zero when experts are resident). */
void df_weights_expert_stats(const df_weights *w, struct df_store_stats *st);
/* Whether reading the expert now would cost nothing: resident, or in the store's cache (or on
 * its way there). Sources other than the store answer true. */
bool df_weights_expert_cached(const df_weights *w, int layer, int expert);
#endif
