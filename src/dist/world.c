/* world.c — the process's place in an MPI job (dist.h, wire.h): joining it when an MPI
 * launcher started the process, leaving it (telling the workers to stop, or aborting the job
 * after a fault), and the waiting primitives every exchange uses.
 * Threading: init/finalize on the main thread; the rest under g_world.mu where rank 0 may be
 * used from several threads. */
#include "dist/wire.h"
#include "base/util.h"
#include "base/env.h"
#include <stdarg.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

df_world g_world = {.rank = 0, .size = 1};

bool df_dist_built(void) { return true; }
int df_dist_rank(void) { return g_world.rank; }
int df_dist_size(void) { return g_world.size; }
const df_dist_opts *df_dist_options(void) { return &g_world.opts; }
const char *df_dist_library(void) { return g_world.lib[0] ? g_world.lib : "MPI (not started)"; }
bool df_dist_stopped(void) { return g_world.stopped; }

/* Started by mpirun / mpiexec / srun (Open MPI, MPICH's hydra, PMIx, PMI-2)? */
static bool launched(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return true;
    return false;
}

static void at_exit(void) {
    /* a path that exit()s without finalizing (usage errors) must not leave workers waiting */
    if (g_world.in_job && !g_world.finalized) (void)df_dist_finalize(1);
}

int df_dist_init(int *argc, char ***argv, const df_dist_opts *o) {
    if (o) {
        g_world.opts = *o;
        if (o->placement) {
            snprintf(g_world.placement_path, sizeof g_world.placement_path, "%s", o->placement);
            g_world.opts.placement = g_world.placement_path;
        }
    }
    if (g_world.opts.timeout_s <= 0) g_world.opts.timeout_s = 60.0;
    if (g_world.in_job || !launched()) return DF_OK;
    int have = 0, provided = 0;
    MPI_Initialized(&have);
    if (!have && MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return df_err(DF_ERR_IO, "MPI_Init_thread failed");
    if (!have && provided < MPI_THREAD_SERIALIZED)
        df_log(DF_LOG_WARN, "MPI gives thread level %d < MPI_THREAD_SERIALIZED; calls stay on one thread", provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
    int len = 0;
    MPI_Get_library_version(g_world.lib, &len);
    g_world.lib[strcspn(g_world.lib, ",\n")] = 0;
    if (gethostname(g_world.host, sizeof g_world.host) != 0) snprintf(g_world.host, sizeof g_world.host, "?");
    g_world.host[sizeof g_world.host - 1] = 0;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_world.mu, &a);
    pthread_mutexattr_destroy(&a);
    g_world.in_job = true;
    if (g_world.rank > 0) {
        char tag[32];
        snprintf(tag, sizeof tag, "rank %d", g_world.rank);
        df_log_set_tag(tag);
    }
    atexit(at_exit);
    df_log(DF_LOG_DEBUG, "rank %d of %d on %s (pid %d), %s", g_world.rank, g_world.size, g_world.host, (int)getpid(),
           g_world.lib);
    return DF_OK;
}

int df_dist_finalize(int status) {
    if (!g_world.in_job || g_world.finalized) return status;
    pthread_mutex_lock(&g_world.mu);
    if (g_world.rank == 0 && g_world.size > 1) {
        if (g_world.fatal) {
            df_log(DF_LOG_ERROR, "%s: aborting all %d ranks", g_world.fatal_msg, g_world.size);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* stop every worker; one that cannot take the message is hung: abort */
        MPI_Request *rq = df_calloc((size_t)g_world.size, sizeof *rq);
        bool ok = rq != NULL;
        for (int r = 1; ok && r < g_world.size; r++)
            ok = MPI_Isend(NULL, 0, MPI_BYTE, r, TAG_STOP, MPI_COMM_WORLD, &rq[r]) == MPI_SUCCESS;
        const uint64_t dl = df_deadline(g_world.opts.timeout_s);
        for (int r = 1; ok && r < g_world.size; r++)
            if (!df_wait_req(&rq[r], dl)) {
                df_log(DF_LOG_ERROR, "rank %d did not take the stop message within %.1f s: aborting all %d ranks", r,
                       g_world.opts.timeout_s, g_world.size);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        free(rq);
    }
    g_world.finalized = true;
    pthread_mutex_unlock(&g_world.mu);
    MPI_Finalize();
    return status;
}

/* ---- waiting ---------------------------------------------------------------------------- */
void df_backoff_step(df_backoff *b) {
    /* Spin (yielding the core to whoever else wants it) for DELTAFIN_DIST_SPIN_US, default
     * 1 ms — a reply or the next layer's request is usually that close — then sleep 20 us
     * doubling to 200 us, so a rank that idles for long (a server between requests) costs
     * nothing. Measured on the shared 2-core box: sleeping at once cost ~2 ms per exchange. */
    const int spin_us = df_env()->dist_spin_us >= 0 ? df_env()->dist_spin_us : 1000;
    if (!b->t0) b->t0 = df_time_ns();
    if (df_time_ns() - b->t0 < (uint64_t)spin_us * 1000) { sched_yield(); return; }
    long us = 20l << (b->n < 4 ? b->n : 4);
    if (us > 200) us = 200;
    b->n++;
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

bool df_wait_req(MPI_Request *r, uint64_t deadline_ns) {
    df_backoff b = {0};
    for (;;) {
        int done = 0;
        if (*r == MPI_REQUEST_NULL) return true;
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done) return true;
        if (deadline_ns && df_time_ns() > deadline_ns) return false;
        df_backoff_step(&b);
    }
}

int df_grow(char **buf, size_t *cap, size_t n) {
    if (n <= *cap) return DF_OK;
    size_t c = *cap ? *cap : 4096;
    while (c < n) c *= 2;
    char *nb = realloc(*buf, c);
    if (!nb) return df_err(DF_ERR_NOMEM, "cannot allocate %zu bytes for a message", c);
    *buf = nb;
    *cap = c;
    return DF_OK;
}

bool df_recv_any(int src, int tag, char **buf, size_t *cap, int *len, int *tag_out, uint64_t deadline_ns) {
    df_backoff b = {0};
    MPI_Message msg;
    MPI_Status st;
    for (;;) {
        int found = 0;
        MPI_Improbe(src, tag, MPI_COMM_WORLD, &found, &msg, &st);
        if (found) break;
        if (deadline_ns && df_time_ns() > deadline_ns) return false;
        df_backoff_step(&b);
    }
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    if (df_grow(buf, cap, (size_t)n + 8) < 0) {
        MPI_Mrecv(NULL, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE); /* drop it; the caller sees len -1 */
        n = -1;
    } else {
        MPI_Request r;
        MPI_Imrecv(*buf, n, MPI_BYTE, &msg, &r);
        if (!df_wait_req(&r, deadline_ns)) return false;
    }
    *len = n;
    if (tag_out) *tag_out = st.MPI_TAG;
    return true;
}

int df_world_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_world.fatal_msg, sizeof g_world.fatal_msg, fmt, ap);
    va_end(ap);
    g_world.fatal = true;
    return df_err(DF_ERR_IO, "%s", g_world.fatal_msg);
}
