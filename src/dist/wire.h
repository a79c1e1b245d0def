/* wire.h — inside src/dist only (MPI builds): the process's place in the job, the messages
 * between rank 0 and the workers, and the waiting discipline.
 * Messages are MPI_BYTE buffers: a fixed header, then arrays, 8-byte aligned. Every rank of a
 * job runs the same build on the same byte order (docs/distributed.md).
 *   PLAN   0 -> w   wire_plan + int16 owner[n_layer * n_expert]
 *   READY  w -> 0   wire_ready (identity, load status and error, host, pid, share)
 *   REQ    0 -> w   wire_req + int32 ids[n_exp], cnt[n_exp], row[n_pairs] + float x[n_rows][d_in]
 *                   (pairs in expert order; pair p uses row row[p] of x)
 *   REP    w -> 0   wire_rep + float y[n_pairs][d_out] in the request's pair order, or a message
 *   LOOK   0 -> w   wire_look + int32 experts[n] (router look-ahead for the owner's share)
 *   STATS  0 -> w   (empty) ; STATS_REP w -> 0: wire_stats
 *   STOP   0 -> w   (empty): leave the job
 * Waiting: never a blocking MPI call on a message that may not come; MPI_Improbe / MPI_Test
 * with a deadline (rank 0) and a backoff that spins briefly and then sleeps, so idle ranks give
 * their cores to the ranks that compute. */
#ifndef DF_DIST_WIRE_H
#define DF_DIST_WIRE_H
#include <mpi.h>
#include <pthread.h>
#include "dist/dist.h"

enum { TAG_PLAN = 101, TAG_READY, TAG_REQ, TAG_REP, TAG_LOOK, TAG_STATS, TAG_STATS_REP, TAG_STOP };
#define DF_WIRE_MAGIC 0x3154534944464400ull /* "\0DFDIST1" */
#define DF_WIRE_MSG 768

typedef struct {
    uint64_t magic, identity;
    int32_t n_layer, n_expert, n_rank, pad;
    double timeout_s;
    char placement[160];
} wire_plan;

typedef struct {
    uint64_t magic, identity;
    int32_t status, n_slots;
    uint64_t pairs, cache_bytes;
    int32_t pid, pad;
    char kernels[16];
    char host[64];
    char path[256];
    char msg[DF_WIRE_MSG];
} wire_ready;

typedef struct {
    uint64_t seq;
    int32_t layer, n_exp, n_pairs, n_rows;
    int64_t d_in, d_out;
} wire_req;

typedef struct {
    uint64_t seq;
    int32_t layer, status, n_pairs, pad;
    uint64_t busy_ns, io_wait_ns;   /* the owner's time from receipt to reply, and blocked on reads */
} wire_rep;

typedef struct { int32_t layer, n; } wire_look;

typedef struct {
    uint64_t requests, rows, busy_ns;
    uint64_t hits, misses, bytes_read, io_busy_ns, wait_ns, cache_bytes, pairs;
    int32_t n_slots, engine;
    double read_gbps;
} wire_stats;

static inline size_t wire_pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* ---- the process in the job (world.c) ----------------------------------------------------- */
typedef struct {
    bool in_job, finalized;
    int rank, size;
    df_dist_opts opts;
    char placement_path[1024];
    pthread_mutex_t mu;              /* recursive: every MPI call of rank 0 is made under it */
    bool fatal;                      /* a worker failed to answer: the protocol is out of step */
    char fatal_msg[1024];
    char lib[256];
    char host[64];
    /* workers */
    bool stopped, have_plan;
    df_dist_placement plan;          /* rank 0's placement */
    uint64_t identity0, identity;    /* rank 0's model, this one's */
    double timeout_s;                /* rank 0's */
    bool ready_sent;
} df_world;
extern df_world g_world;

/* Waiting: call df_backoff_step after every unsuccessful test. */
typedef struct { unsigned n; uint64_t t0; } df_backoff;
void df_backoff_step(df_backoff *b);
/* Tests r until it completes (true) or the deadline (df_time_ns; 0 = none) passes (false). */
bool df_wait_req(MPI_Request *r, uint64_t deadline_ns);
/* Receives the next message from `src` with `tag` (MPI_ANY_TAG allowed) into *buf (grown to
 * fit; *cap its size) by matched probe; *len its bytes, *tag_out its tag. false at the
 * deadline (nothing received). */
bool df_recv_any(int src, int tag, char **buf, size_t *cap, int *len, int *tag_out, uint64_t deadline_ns);
/* Ensures *buf holds n bytes. */
int df_grow(char **buf, size_t *cap, size_t n);
/* Records the fault that ends the job (rank 0) and returns the error. */
int df_world_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline uint64_t df_deadline(double s) { return df_time_ns() + (uint64_t)(s * 1e9); }
#endif
