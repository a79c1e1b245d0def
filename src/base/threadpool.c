/* threadpool.c — persistent worker pool for data-parallel jobs.
 * A job is published by bumping a generation counter; workers spin on it for a short while
 * (generation issues hundreds of jobs per token, so a futex/condvar round trip per job would
 * dominate small matmuls) and then fall back to sleeping on a condition variable, so an idle
 * pool costs no CPU. Tasks are handed out dynamically with an atomic counter (load balance on
 * oversubscribed machines). The caller participates as thread 0 and returns when every worker
 * has left the job.
 * Invariant: `active` counts workers that have not yet finished the current generation; a new
 * job is only published once it is 0, so job parameters are never overwritten while read.
 * Lost wake-ups are impossible: sleeper increments `sleepers` then re-checks `gen` under the
 * mutex; the publisher bumps `gen` then reads `sleepers` (both seq_cst), so one sees the other.
 * Threading: one df_pool_run at a time per pool (callers serialize). */
#include "base/threadpool.h"
#include "base/env.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DF_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define DF_CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define DF_CPU_RELAX() ((void)0)
#endif

/* Microseconds to spin before sleeping. DELTAFIN_SPIN_US overrides (0 = sleep at once). */
#define DF_POOL_SPIN_US_DEFAULT 100

struct df_pool {
    int n;                  /* threads including the caller */
    pthread_t *th;
    uint64_t spin_ns;
    /* job */
    df_task_fn fn;
    void *ctx;
    int n_tasks;
    _Alignas(64) atomic_uint gen;
    _Alignas(64) atomic_int next;
    _Alignas(64) atomic_int active;
    _Alignas(64) atomic_int sleepers;
    atomic_int caller_waiting;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
};

typedef struct {
    df_pool *p;
    int id;
} worker_arg;

/* Spin until *v != val (or stop) for at most spin_ns; false if the time ran out. */
static inline bool spin_wait_change_u(const df_pool *p, atomic_uint *v, unsigned val) {
    if (!p->spin_ns) return false;
    uint64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != val) return true;
        if (atomic_load_explicit(&((df_pool *)p)->stop, memory_order_relaxed)) return true;
        DF_CPU_RELAX();
        if ((i & 63) == 0) {
            uint64_t t = df_time_ns();
            if (!t0) t0 = t;
            else if (t - t0 > p->spin_ns) return false;
        }
    }
}

static inline bool spin_wait_zero(const df_pool *p, atomic_int *v) {
    if (!p->spin_ns) return atomic_load(v) == 0;
    uint64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) == 0) return true;
        DF_CPU_RELAX();
        if ((i & 63) == 0) {
            uint64_t t = df_time_ns();
            if (!t0) t0 = t;
            else if (t - t0 > p->spin_ns) return false;
        }
    }
}

static void run_tasks(df_pool *p, int thread) {
    const int n = p->n_tasks;
    df_task_fn fn = p->fn;
    void *ctx = p->ctx;
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= n) break;
        fn(ctx, t, thread);
    }
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    df_pool *p = wa.p;
    unsigned seen = 0; /* gen at creation; a job may already be published */
    for (;;) {
        spin_wait_change_u(p, &p->gen, seen);
        unsigned g = atomic_load(&p->gen);
        if (g == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv_work, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        run_tasks(p, wa.id);
        if (atomic_fetch_sub(&p->active, 1) == 1 &&
            atomic_load(&p->caller_waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

df_pool *df_pool_create(int n_threads) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 1024) n_threads = 1024;
    df_pool *p = df_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    long us = df_env()->spin_us >= 0 ? df_env()->spin_us : DF_POOL_SPIN_US_DEFAULT;
    p->spin_ns = (uint64_t)us * 1000u;
    atomic_init(&p->gen, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->active, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_waiting, 0);
    atomic_init(&p->stop, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->th = df_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->th) { df_pool_free(p); return NULL; }
        for (int i = 1; i < n_threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) {
                p->n = i;
                df_pool_free(p);
                df_err(DF_ERR_NOMEM, "thread pool: out of memory");
                return NULL;
            }
            wa->p = p;
            wa->id = i;
            if (pthread_create(&p->th[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
                p->n = i; /* threads 1..i-1 exist */
                df_pool_free(p);
                df_err(DF_ERR_INTERNAL, "thread pool: pthread_create failed");
                return NULL;
            }
        }
    }
    return p;
}

void df_pool_free(df_pool *p) {
    if (!p) return;
    if (p->th) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, true);
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->n; i++) pthread_join(p->th[i - 1], NULL);
        free(p->th);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}

int df_pool_size(const df_pool *p) { return p ? p->n : 1; }

void df_pool_run(df_pool *p, int n_tasks, df_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (!p || p->n == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->active, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes the job fields above */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
    }
    run_tasks(p, 0);
    if (!spin_wait_zero(p, &p->active)) {
        pthread_mutex_lock(&p->mu);
        /* Dekker-style handshake with the worker's fetch_sub(active) + load(caller_waiting):
         * an RMW, not a plain seq_cst store, so the following load of `active` cannot pass it
         * even where seq_cst store->load ordering is emulated weakly (qemu-user translating
         * AArch64 stlr/ldar onto x86 puts no fence between them; RMWs become locked ops). */
        (void)atomic_exchange(&p->caller_waiting, 1);
        while (atomic_load(&p->active) != 0) pthread_cond_wait(&p->cv_done, &p->mu);
        atomic_store(&p->caller_waiting, 0);
        pthread_mutex_unlock(&p->mu);
    }
}
