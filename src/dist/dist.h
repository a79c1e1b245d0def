/* dist.h — expert parallelism across processes and machines on MPI (docs/distributed.md).
 * Under `mpirun -np N`, rank 0 runs everything a single process runs (tokenizer, attention,
 * dense layers, routing, sampling) and computes its own share of every MoE layer's routed
 * experts; ranks 1..N-1 are workers that hold only their share, each in its own expert store
 * under its own memory limit, and compute those experts on the hidden-state rows rank 0 sends
 * them. Per MoE layer rank 0 ships the routed tokens' rows to the owners of their experts
 * right after routing (non-blocking), computes its own experts meanwhile, then receives the
 * per-(token, slot) outputs and sums them in slot order as always: tokens are the same for
 * every N. Weights never cross the network. Every rank holds the whole file: the placement
 * decides whose cache an expert lives in, and where caches hold little of a share rank 0
 * spreads a layer's experts evenly over the ranks (remote.c assign).
 * The MPI code is in this module only (world.c, remote.c, worker.c); no other file includes
 * mpi.h. Built without MPI (no DF_HAVE_MPI), none.c answers: one process, nothing to do.
 * Invariant: a worker that dies, hangs past the timeout or holds another model makes rank 0
 * fail with an error naming the rank and the cause — never a hang.
 * Threading: rank 0's entry points are serialized by one mutex (MPI is used from one thread
 * at a time); a worker is single-threaded apart from its compute and I/O pools. */
#ifndef DF_DIST_H
#define DF_DIST_H
#include "model/model.h"
#include "weights/weights.h"

/* ---- the world (world.c; one per process) ------------------------------------------------- */
typedef struct df_dist_opts {
    double timeout_s;        /* a worker's answer may take this long (default 60 s) */
    const char *placement;   /* a `deltafin profile` file: balanced placement; NULL: round robin */
} df_dist_opts;

/* Joins the MPI job when the process was started by an MPI launcher (mpirun, srun: the
 * environment says so), else stays a single process; o may be NULL (defaults). Idempotent. */
int df_dist_init(int *argc, char ***argv, const df_dist_opts *o);
bool df_dist_built(void);            /* compiled with MPI */
int df_dist_rank(void);              /* 0 when not in a job */
int df_dist_size(void);              /* 1 when not in a job */
static inline bool df_dist_active(void) { return df_dist_size() > 1; }
const df_dist_opts *df_dist_options(void);
const char *df_dist_library(void);   /* "Open MPI v4.1.4, ..." or "none" */
/* Rank 0: tells every worker to stop and leaves the job; after a fault (a worker that did not
 * answer) the whole job is aborted instead (MPI_Abort: the only way to end a hung rank).
 * Workers: leave the job. Returns status. Safe to call twice. */
int df_dist_finalize(int status);

/* ---- placement (placement.c; pure) ------------------------------------------------------- */
/* Which rank computes each (layer, expert). Round robin rotated by layer: owner = (e + l) % N,
 * so each rank holds E/N experts of every layer and the remainders move from layer to layer.
 * Balanced (a `deltafin profile` file of "layer expert count" lines): per layer, experts in
 * decreasing count go to the rank with the smallest summed count among those holding fewer
 * than ceil(E/N) (memory stays even, load evens out). */
typedef struct df_dist_placement {
    int n_layer, n_expert, n_rank;
    int16_t *owner;          /* [n_layer][n_expert]: a rank, -1 in layers without routed experts */
    char desc[160];          /* "round-robin" | "balanced by FILE" */
} df_dist_placement;
/* counts: [n_layer][n_expert] routing counts (NULL: round robin); is_moe: [n_layer]. */
int df_dist_place_counts(int n_layer, int n_expert, int n_rank, const uint8_t *is_moe, const double *counts,
                         df_dist_placement *out);
/* For model m: round robin, or balanced by the profile file when one is given. */
int df_dist_place(const df_model *m, int n_rank, const char *profile, df_dist_placement *out);
void df_dist_placement_free(df_dist_placement *p);
static inline int df_dist_owner(const df_dist_placement *p, int layer, int expert) {
    return p->owner[(int64_t)layer * p->n_expert + expert];
}

/* ---- model identity (identity.c) --------------------------------------------------------- */
/* XXH64 over what makes two files the same model whatever their layout (plain or packed):
 * the metadata (but the pack's own keys and the alignment), every tensor's name, type and
 * shape, and the first 4 KiB of every dense tensor and of the first and last expert of every
 * MoE layer's parts. Reads a few KiB per tensor. */
int df_dist_identity(const df_model *m, uint64_t *out);

/* ---- wiring (the loader, runtime/loader.c) ------------------------------------------------ */
struct df_dist;
/* Rank 0, right after describing the model: sends every worker the placement and the model's
 * identity so they set up their share while rank 0 loads; *out (which takes ownership of *p)
 * is the session the loader attaches below or frees. */
int df_dist_coord_start(const df_model *m, df_dist_placement *p, uint64_t identity, struct df_dist **out);
const df_dist_placement *df_dist_placement_of(const struct df_dist *d);
/* Rank 0, after loading its own share into w: waits for every worker's answer (its identity,
 * its load status and plan) and makes w's expert source the remote one, which keeps w's
 * source until then for rank 0's own share and owns d. Errors name the rank; on error the
 * caller still owns d. */
int df_dist_coord_attach(struct df_dist *d, df_model *m, df_weights *w);
void df_dist_free(struct df_dist *d);
/* Bytes rank 0 / a worker keeps for messages at a batch of n_batch tokens. */
uint64_t df_dist_buffer_bytes(const df_model *m, int n_batch, int n_rank, bool coordinator);
/* Workers, in the loader: waits for rank 0's placement (and checks the identity): *out is the
 * placement (owned by the world; do not free). DF_ERR_CANCELLED when rank 0 stopped first
 * (it ran a command that loads no model). */
int df_dist_worker_plan(const df_model *m, uint64_t identity, const df_dist_placement **out);
/* Workers, after loading `path` (m: the model, NULL when the load failed; load_rc: its status,
 * the error in df_errmsg()): answers rank 0 (waiting for its plan first when the load failed
 * before it came). Returns load_rc, or DF_ERR_CANCELLED when rank 0 stopped first. */
int df_dist_worker_ready(const char *path, const df_model *m, int load_rc);
/* Workers: computes rank 0's requests until it says stop. */
int df_dist_worker_serve(df_model *m);
/* Whether rank 0 told this worker to stop (before or instead of a plan). */
bool df_dist_stopped(void);

/* ---- statistics (rank 0) ------------------------------------------------------------------ */
typedef deltafin_dist_rank_stats df_dist_rank_stats;
typedef deltafin_dist_stats df_dist_stats;
/* Totals; per-layer rows (calls, bytes, times) through df_dist_layer_stats. */
int df_dist_get_stats(const struct df_dist *d, df_dist_stats *out);
int df_dist_layer_stats(const struct df_dist *d, int layer, uint64_t *calls, uint64_t *bytes_out, uint64_t *bytes_in,
                        uint64_t *rtt_ns, uint64_t *wait_ns, uint64_t *comm_ns);
/* Asks every worker for its counters (blocks briefly; not during a decode). rs: [n_rank]
 * (rank 0's row from its own store). */
int df_dist_rank_stats_get(struct df_dist *d, df_dist_rank_stats *rs, int n);
#endif
