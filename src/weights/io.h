/* io.h — read engines for streaming expert bytes from model files.
 * Engines: buffered pread, O_DIRECT pread (4 KiB-aligned ranges, excess discarded, buffered
 * fallback per file where O_DIRECT is refused, e.g. tmpfs), io_uring (when built with
 * DF_HAVE_URING; O_DIRECT where possible), and mmap+memcpy (the llama.cpp-style baseline).
 * `auto` measures the engines on the file once and caches the winner in a profile file.
 *
 * Placement rule (the same for every engine, so callers never care which one ran): a request
 * for [offset, offset+len) writes into `buf` (4 KiB aligned, capacity >= df_io_buf_need(offset,
 * len)) and the requested bytes land at buf + (offset % 4096) = req->data.
 *
 * Faults: DELTAFIN_FAULT=eio:N | short:N | corrupt:N (or df_io_set_fault) makes the N-th read
 * (1-based, counted per df_io) fail with EIO, come back short, or have one byte flipped.
 *
 * Threading: df_io_submit may be called from any thread; completion callbacks run on an I/O
 * thread and must not call df_io_submit recursively with a lock held that the caller needs. */
#ifndef DF_IO_H
#define DF_IO_H
#include "base/util.h"

typedef enum {
    DF_IO_AUTO = 0, DF_IO_PREAD = 1, DF_IO_DIRECT = 2, DF_IO_URING = 3, DF_IO_MMAP = 4,
    DF_IO_NENGINES = 5
} df_io_engine;

enum { DF_IO_ALIGN = 4096 };

const char *df_io_engine_name(int engine);
/* "auto" "pread" "direct" "uring" "mmap" -> engine. DF_ERR_INVALID with a message otherwise. */
int df_io_engine_parse(const char *s, int *engine);
/* True if this build/kernel supports the engine (uring may be compiled out or refused). */
bool df_io_engine_available(int engine);

static inline uint64_t df_io_buf_need(uint64_t offset, uint64_t len) {
    return df_pad((offset % DF_IO_ALIGN) + len, DF_IO_ALIGN);
}

typedef struct df_io df_io;

typedef struct {
    int engine;               /* df_io_engine; AUTO = measure (or use cached profile) */
    int n_threads;            /* pread/direct/mmap worker threads; <= 0: 8 */
    int queue_depth;          /* io_uring queue depth; <= 0: 64 */
    uint64_t probe_bytes;     /* AUTO: size of one probe read (typical request); 0: 8 MiB */
    const char *fault;        /* injected faults "eio:N" / "short:N" / "corrupt:N" (tests), or NULL;
                               * default: $DELTAFIN_FAULT */
    const char *profile_path; /* AUTO cache; NULL: $DELTAFIN_IO_PROFILE or ~/.cache/deltafin/io-profile */
} df_io_params;

df_io_params df_io_default_params(void);

/* Low priority (speculative reads: router look-ahead): started only while no normal request
 * waits, at most DF_IO_LOW_INFLIGHT at once, so they use idle disk time and delay demand
 * reads by at most the reads already running. */
enum { DF_IO_PRIO_LOW = 1, DF_IO_LOW_INFLIGHT = 4 };

typedef struct df_io_req {
    /* in */
    int file;                 /* index into the paths given to df_io_open */
    uint64_t offset, len;
    uint8_t *buf;             /* DF_IO_ALIGN-aligned, capacity >= df_io_buf_need(offset, len) */
    void (*done)(struct df_io_req *r); /* called once on an I/O thread (may be NULL) */
    void *ud;
    int prio;                 /* 0 (normal) or DF_IO_PRIO_LOW */
    /* out */
    uint8_t *data;            /* = buf + offset % 4096 */
    int status;               /* DF_OK or negative; err names file and offset */
    char err[256];
    /* internal */
    struct df_io_req *next;
    uint64_t t_submit;
} df_io_req;

int df_io_open(const char *const *paths, int n_files, const df_io_params *p, df_io **out);
void df_io_close(df_io *io); /* waits for in-flight requests */

int df_io_get_engine(const df_io *io); /* the engine in use (never AUTO) */
uint64_t df_io_file_size(const df_io *io, int file);
/* Drops every cached page of the open files (posix_fadvise DONTNEED): what the model loader
 * left in the page cache is not charged to the process (memory cgroup) while streaming. */
void df_io_drop_cache(df_io *io);
/* Withdraws the n requests if none of them has started (all-or-nothing): returns n, and
 * no callback will come for them; else 0 and nothing changes. */
int df_io_cancel(df_io *io, df_io_req *const *reqs, int n);
/* Moves still-queued low-priority requests among these to the normal queue (in order). */
void df_io_promote(df_io *io, df_io_req *const *reqs, int n);
const char *df_io_file_path(const df_io *io, int file);

/* Queue a read; returns at once (DF_OK), or an error for a request that can't be queued
 * (bad file index, range past end of file: the message names file and offset; `done` is
 * NOT called then). */
int df_io_submit(df_io *io, df_io_req *r);

/* Synchronous read of [offset, offset+len) into any dst (bounce buffer inside). */
int df_io_read(df_io *io, int file, uint64_t offset, uint64_t len, void *dst);

/* Fault injection. kind: 0 none, 1 eio, 2 short, 3 corrupt. nth: 1-based read index. */
enum { DF_FAULT_NONE = 0, DF_FAULT_EIO = 1, DF_FAULT_SHORT = 2, DF_FAULT_CORRUPT = 3 };
void df_io_set_fault(df_io *io, int kind, uint64_t nth);
/* Parse "eio:N" etc. */
int df_io_parse_fault(const char *s, int *kind, uint64_t *nth);

typedef struct {
    uint64_t reads, bytes;    /* requested bytes (not the rounded-out excess) */
    uint64_t busy_ns;         /* wall time with >= 1 read in flight */
    uint64_t read_ns;         /* sum of per-request latency */
} df_io_stats;
void df_io_get_stats(df_io *io, df_io_stats *st);

/* Measure each available engine on `file` (random reads of probe_bytes, cache dropped with
 * fadvise first, two rounds in alternating order, the better kept) and return df_io_pick's
 * choice; gbps[] (may be NULL) receives GB/s per engine. */
int df_io_measure(const char *path, uint64_t probe_bytes, int n_threads, int *best, double gbps[DF_IO_NENGINES]);
/* The engine --io auto takes for measured rates (GB/s per engine, 0 = not measured): the
 * faster bypass engine (direct, uring) unless pread or mmap is 1.25x faster than it. */
int df_io_pick(const double gbps[DF_IO_NENGINES]);
/* The engine --io auto takes for `path` with p's probe size and profile when that is known
 * without measuring: pread for a file under 4 probes, else the profile's choice; DF_IO_AUTO
 * when df_io_open would measure. */
int df_io_auto_known(const char *path, const df_io_params *p);
/* The --io auto profile: path resolution (given, else $DELTAFIN_IO_PROFILE, else
 * $XDG_CACHE_HOME/deltafin/io-profile or ~/.cache/deltafin/io-profile) and storing one line
 * "KEY engine=NAME rule=2 pread=X.XXGB/s ..." per key (other lines kept; written via tmp +
 * rename; a line without rule=2 was chosen by an older rule and is re-measured).
 * KEY is "dev=MAJ:MIN probe=BYTES" of the file's device, from df_io_profile_key (used by
 * `deltafin doctor` too). */
void df_io_profile_path(const char *given, char *buf, size_t cap);
struct stat;
void df_io_profile_key(const struct stat *st, uint64_t probe, char *buf, size_t cap);
int df_io_profile_store(const char *ppath, const char *key, int engine, const double *gbps);

#endif
