/* env.h — every DELTAFIN_* environment variable the engine reads, read once (at the first
 * df_env() call) and parsed here; the README's "Environment" section lists them. Library code
 * never calls getenv() for its own settings elsewhere.
 * Threading: df_env() is thread-safe; the struct is immutable after the first call. */
#ifndef DF_ENV_H
#define DF_ENV_H
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int log_level;             /* DELTAFIN_LOG: 0..3, -1 unset */
    const char *isa;           /* DELTAFIN_ISA: ref | avx2 | avx512 | neon, NULL unset */
    bool repack_off;           /* DELTAFIN_REPACK=0 */
    int spin_us;               /* DELTAFIN_SPIN_US: thread-pool spin before sleeping, -1 unset */
    int io_threads;            /* DELTAFIN_IO_THREADS (1..256), 0 unset */
    int io_qd;                 /* DELTAFIN_IO_QD (1..4096), 0 unset */
    const char *io_profile;    /* DELTAFIN_IO_PROFILE: the `--io auto` profile file, NULL unset */
    const char *fault;         /* DELTAFIN_FAULT: injected read faults (tests), NULL unset */
    int stream;                /* DELTAFIN_STREAM: 1 stream experts, 0 keep resident, -1 unset */
    bool dense_stream_off;     /* DELTAFIN_DENSE_STREAM=0 */
    int dense_resident;        /* DELTAFIN_DENSE_RESIDENT: dense layers kept resident, -1 unset */
    int embd_rows;             /* DELTAFIN_EMBD_ROWS: 1 token embeddings read by row, 0 resident, -1 auto */
    uint64_t dense_chunk;      /* DELTAFIN_DENSE_CHUNK: dense read request bytes, 0 unset */
    const char *expert_cache;  /* DELTAFIN_EXPERT_CACHE: exact expert cache size (tests), NULL */
    int plan_ctx;              /* DELTAFIN_PLAN_CTX: context the memory plan assumes, 0 unset */
    bool yarn_hf_betas;        /* DELTAFIN_YARN_HF_BETAS=1: the file's YaRN betas (HF) */
    int dist_spin_us;          /* DELTAFIN_DIST_SPIN_US: MPI ranks poll before sleeping, -1 unset */
    int dist_balance;          /* DELTAFIN_DIST_BALANCE: 0 off, 1 on for every rank, -1 unset (auto) */
    bool cache_clock;          /* DELTAFIN_CACHE_POLICY=clock: the expert cache's previous policy (A/B) */
} df_env_t;

const df_env_t *df_env(void);
#endif
