/* expert_store.h — budgeted cache of routed experts streamed from the model files.
 * A fixed pool of slots (each sized for the largest expert) is allocated once at create from
 * a byte budget; a (layer, expert) lives in at most one slot. acquire() pins the slot until
 * release(); a pinned or loading slot is never evicted. Eviction is CLOCK with a small
 * frequency count (0..3). An optional hot set stays pinned for the whole run. prefetch()
 * starts reads without blocking and gives predicted experts a second chance against eviction.
 * Packed files (pack.h) give one record per expert with an XXH64 checksum, verified on the
 * I/O thread before the slot becomes readable.
 * Threading: all entry points are thread-safe (one mutex + condvar); I/O runs on df_io threads. */
#ifndef DF_EXPERT_STORE_H
#define DF_EXPERT_STORE_H
#include "weights/expert.h"
#include "weights/io.h"
#include "format/pack.h"
#include "base/hash.h"

enum { DF_PREFETCH_OFF = 0, DF_PREFETCH_ON = 1, DF_PREFETCH_AUTO = 2 };
int df_prefetch_parse(const char *s, int *mode); /* "off" "on" "auto" */


typedef struct {
    int n_layers, n_experts;
    /* [(layer * n_experts + expert) * DF_EXPERT_NPARTS + part]; nbytes 0 = part absent
     * (layers without routed experts have all parts absent). Copied at create. */
    const df_expert_loc *locs;
    /* Optional [layer * n_experts + expert]: read the record in one request and verify its
     * checksum; every present part must lie inside its record. Copied. */
    const df_expert_record *records;
    bool verify;              /* check record checksums (default true) */
    /* Optional [layer * DF_EXPERT_NPARTS + part]: columns of that part's matrices (0: unknown).
     * Where the kernels want another layout for the type (df_repack_type, e.g. Q4_K as 8
     * interleaved rows), each part is repacked in its slot after the read (and checksum), and
     * acquire() reports the repacked type. Copied. */
    const int64_t *n_in;
    const char *const *paths; /* files indexed by loc.shard / record.file */
    int n_files;
    uint64_t budget_bytes;    /* expert cache bytes: n_slots = budget / slot_bytes */
    int min_slots;            /* smallest working set (experts pinned at once); <= 0: 2 */
    int prefetch;             /* DF_PREFETCH_* */
    bool mlock;               /* lock the cache slots in RAM (--mlock) */
    df_io_params io;
} df_store_params;

df_store_params df_store_default_params(void);

typedef struct df_store df_store;

/* Slot bytes for these locs/records (what one slot costs in the budget). */
uint64_t df_store_slot_bytes(const df_store_params *p);
/* The largest single read the store issues for these locs/records (a record when records are
 * given, else a part); rounded up to DF_IO_ALIGN it is the store's --io auto probe size. */
uint64_t df_store_max_read(const df_store_params *p);

/* DF_ERR_RANGE with a message if the budget holds fewer than min_slots slots. */
int df_store_create(const df_store_params *p, df_store **out);
void df_store_free(df_store *s);

/* Blocks until the bytes of (layer, expert) are in a slot; pins it. Errors (read failure,
 * checksum mismatch, all slots pinned) name layer, expert, file and offset. */
int df_store_acquire(df_store *s, int layer, int expert, df_expert_w *out);
void df_store_release(df_store *s, int layer, int expert);
/* Starts reads for experts of `layer` not yet cached, never blocks, never evicts a pinned
 * or loading slot. A no-op when prefetch is off (or auto turned it off). */
void df_store_prefetch(df_store *s, int layer, const int *experts, int n);
void df_store_set_prefetch(df_store *s, int mode); /* DF_PREFETCH_* (also the look-ahead mode) */

/* Router look-ahead: `experts` are the experts predicted for `layer` (the next MoE layer's
 * router applied to the current layer's state), most likely first. The prediction is scored
 * against the layer's real routing when df_store_prefetch(layer, ...) arrives (accuracy in the
 * stats). Reads start for the first `depth` predicted experts not cached, into slots that hold
 * nothing routed for the layer being computed: on = all predicted; auto = only after >= 32
 * scored predictions with accuracy >= 30% and > h/(1+h) (h = hit rate), depth = measured
 * layer-boundary gap / one expert's read time (+1); off = nothing (no prediction either).
 * Cached predicted experts get a second chance against eviction. Never blocks. */
void df_store_lookahead(df_store *s, int layer, const int *experts, int n);
/* Whether predictions are wanted (prefetch not off): callers skip the router work otherwise. */
bool df_store_lookahead_wanted(df_store *s);
/* The expert is in the cache or being read into it (cache-aware routing). */
bool df_store_is_cached(df_store *s, int layer, int expert);

/* Load and pin for the whole run (hot set). Stops when the hot set would leave fewer than
 * 2 * min_slots unpinned slots; returns how many were pinned (>= 0) or an error (read). */
int df_store_pin_hot(df_store *s, const int *layers, const int *experts, int n);

/* Hot-set sources. File: lines "layer expert count" (comma or blank separated, '#' comments),
 * as written by `deltafin profile`; result sorted by count, most used first. List:
 * "L:E,L:E,...". Caller frees *layers and *experts. */
int df_store_read_hot_file(const char *path, int n_layers, int n_experts, int **layers, int **experts, int *n);
int df_store_parse_preload(const char *list, int n_layers, int n_experts, int **layers, int **experts, int *n);
/* The same file's counts, summed per (layer, expert) into counts[layer * n_experts + expert]
 * (zeroed first); `what` names the option in errors. */
int df_store_read_route_counts(const char *path, const char *what, int n_layers, int n_experts, double *counts);

typedef struct df_store_stats {
    uint64_t hits, misses;            /* acquire found the expert cached / had to read it */
    uint64_t prefetch_issued, prefetch_used, prefetch_wasted; /* wasted: evicted unused */
    uint64_t evictions;
    /* router look-ahead: predicted experts scored / correctly predicted; reads it started, of
     * which used before eviction / wasted (mispredicted or evicted unused) */
    uint64_t lookahead_predicted, lookahead_correct;
    uint64_t lookahead_issued, lookahead_used, lookahead_wasted;
    uint64_t lookahead_cancelled;     /* mispredicted reads withdrawn before they started */
    int lookahead_depth;              /* reads per layer at the last call (0: not issuing) */
    bool lookahead_active;            /* issuing reads at the last call */
    int lookahead_mode;               /* DF_PREFETCH_* */
    uint64_t boundary_gap_ns;         /* mean layer-boundary gap (last expert of L -> routing of L+1) */
    double lookahead_accuracy;        /* correct / predicted */
    uint64_t bytes_read;              /* payload bytes read from disk */
    uint64_t io_busy_ns;              /* wall time with >= 1 read in flight */
    uint64_t wait_ns;                 /* time acquire() blocked waiting for bytes */
    double hit_rate, read_gbps, prefetch_accuracy;
    int n_slots, n_hot, engine, prefetch;
    uint64_t slot_bytes, cache_bytes;
} df_store_stats;
void df_store_get_stats(df_store *s, df_store_stats *st);
/* Per-layer counters (run -v): acquires that hit / missed the cache, time blocked on reads. */
int df_store_layer_stats(df_store *s, int layer, uint64_t *hits, uint64_t *misses, uint64_t *wait_ns);
/* One-line summary: "cache 12/40 slots ... hit 83.1% read 1.23 GB at 2.1 GB/s ..." */
const char *df_store_stats_str(const df_store_stats *st, char *buf, size_t cap);

/* Adds the statistics to a cJSON object (run --json "stream", bench --json, --stats-file):
 * io, slots, hits, misses, hit_rate, bytes_read, read_gbps, wait_s, prefetch*, and
 * "lookahead": {mode, active, depth, predicted, correct, accuracy, reads, used, wasted,
 * boundary_gap_s}. */
struct cJSON;
void df_store_stats_json(const df_store_stats *st, struct cJSON *o);

#endif
