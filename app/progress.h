/* progress.h — one progress display for long tools (pull, verify, doctor, pack ...): a bar
 * with rate and ETA redrawn in place when the output is a terminal, otherwise a plain line
 * every few seconds (logs and CI stay readable), or nothing.
 * Not for library code paths that must stay silent: only tools create one.
 * Threading: one df_progress per thread (no locking). */
#ifndef DF_PROGRESS_H
#define DF_PROGRESS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { DF_PROGRESS_AUTO = 0, DF_PROGRESS_BAR = 1, DF_PROGRESS_LINES = 2, DF_PROGRESS_QUIET = 3 };

typedef struct {
    FILE *out;
    int mode;                 /* BAR, LINES or QUIET after init (AUTO resolved) */
    char label[64];
    uint64_t total;           /* 0 = unknown */
    uint64_t base;            /* bytes already there at start (resumed): not counted in the rate */
    uint64_t done;
    uint64_t t_start, t_last;
    double line_interval_s;   /* LINES: seconds between lines (default 5) */
    bool drawn;
} df_progress;

/* mode AUTO: BAR if `out` is a terminal, else LINES. base = bytes already done (resume). */
void df_progress_init(df_progress *p, FILE *out, int mode, const char *label, uint64_t total, uint64_t base);
void df_progress_set_total(df_progress *p, uint64_t total);
/* Report `done` bytes (absolute, including base); redraws at most ~10 times a second. */
void df_progress_update(df_progress *p, uint64_t done);
/* Final state (a last line/bar and a newline for the bar). */
void df_progress_finish(df_progress *p);
/* "1:02:03" / "4:05" into buf; "?" for unknown (negative). */
const char *df_progress_fmt_eta(double seconds, char *buf, size_t cap);
#endif
