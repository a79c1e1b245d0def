/* load_progress.h — the model-load progress display shared by run, chat and serve: a bar on
 * a terminal, plain lines every few seconds otherwise; loads that end before the first
 * redraw print nothing. Use: df_load_progress lp = {0}; mp.progress_cb = df_load_progress_cb;
 * mp.progress_ud = &lp; */
#ifndef DF_LOAD_PROGRESS_H
#define DF_LOAD_PROGRESS_H
#include "app/progress.h"

typedef struct { df_progress p; bool started; } df_load_progress;

static inline void df_load_progress_cb(void *ud, uint64_t done, uint64_t total) {
    df_load_progress *lp = ud;
    if (!lp->started) {
        df_progress_init(&lp->p, stderr, DF_PROGRESS_AUTO, "loading model", total, 0);
        lp->started = true;
    }
    df_progress_update(&lp->p, done);
    if (done >= total && lp->p.drawn) df_progress_finish(&lp->p);
}
#endif
