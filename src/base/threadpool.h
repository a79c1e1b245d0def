/* threadpool.h — fixed pool of worker threads (default: all cores) executing
 * data-parallel jobs: df_pool_run(pool, n_tasks, fn, ctx) calls fn(ctx, task, thread) for
 * task in [0, n_tasks) spread over the threads (the caller participates) and returns when all
 * are done. Threading: one df_pool_run at a time per pool (callers serialize). */
#ifndef DF_THREADPOOL_H
#define DF_THREADPOOL_H
#include "base/util.h"
typedef struct df_pool df_pool;
typedef void (*df_task_fn)(void *ctx, int task, int thread);
df_pool *df_pool_create(int n_threads); /* n_threads <= 0: number of online CPUs */
void df_pool_free(df_pool *p);
int df_pool_size(const df_pool *p);
void df_pool_run(df_pool *p, int n_tasks, df_task_fn fn, void *ctx);
#endif
