/* progress.c — see progress.h. Rates are measured over the bytes moved in this run only, so
 * a resumed download shows its real speed and a fair ETA. */
#include "app/progress.h"
#include "deltafin.h"

#include <string.h>

#include <unistd.h>

void df_progress_init(df_progress *p, FILE *out, int mode, const char *label, uint64_t total, uint64_t base) {
    memset(p, 0, sizeof *p);
    p->out = out ? out : stderr;
    if (mode == DF_PROGRESS_AUTO) mode = isatty(fileno(p->out)) ? DF_PROGRESS_BAR : DF_PROGRESS_LINES;
    p->mode = mode;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->base = p->done = base;
    p->t_start = p->t_last = deltafin_time_ns();
    p->line_interval_s = 5.0;
}

void df_progress_set_total(df_progress *p, uint64_t total) { p->total = total; }

const char *df_progress_fmt_eta(double s, char *buf, size_t cap) {
    if (s < 0 || s > 99 * 3600.0) { snprintf(buf, cap, "?"); return buf; }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%lu:%02lu", t / 60, t % 60);
    return buf;
}

static void draw(df_progress *p, bool final) {
    const double el = (double)(deltafin_time_ns() - p->t_start) / 1e9;
    const double rate = el > 0 ? (double)(p->done - p->base) / el : 0;
    char db[32], tb[32], rb[32], eb[32];
    deltafin_fmt_bytes(p->done, db, sizeof db);
    deltafin_fmt_bytes(p->total, tb, sizeof tb);
    deltafin_fmt_bytes((uint64_t)rate, rb, sizeof rb);
    double eta = -1;
    if (p->total && rate > 0 && p->done <= p->total) eta = (double)(p->total - p->done) / rate;
    if (final) eta = el;
    df_progress_fmt_eta(eta, eb, sizeof eb);
    const double frac = p->total ? (double)p->done / (double)p->total : 0;
    if (p->mode == DF_PROGRESS_BAR) {
        char bar[31];
        int n = p->total ? (int)(frac * 30 + 0.5) : 0;
        if (n > 30) n = 30;
        for (int i = 0; i < 30; i++) bar[i] = i < n ? '#' : '-';
        bar[30] = 0;
        if (p->total)
            fprintf(p->out, "\r%s [%s] %5.1f%% %s / %s  %s/s  %s %s\033[K", p->label, bar, 100 * frac, db, tb, rb,
                    final ? "in" : "ETA", eb);
        else
            fprintf(p->out, "\r%s %s  %s/s\033[K", p->label, db, rb);
        if (final) fputc('\n', p->out);
    } else {
        if (p->total)
            fprintf(p->out, "%s: %.1f%% %s / %s, %s/s, %s %s\n", p->label, 100 * frac, db, tb, rb,
                    final ? "done in" : "ETA", eb);
        else
            fprintf(p->out, "%s: %s, %s/s%s\n", p->label, db, rb, final ? ", done" : "");
    }
    fflush(p->out);
    p->drawn = true;
}

void df_progress_update(df_progress *p, uint64_t done) {
    p->done = done;
    if (p->mode == DF_PROGRESS_QUIET) return;
    const uint64_t now = deltafin_time_ns();
    const double since = (double)(now - p->t_last) / 1e9;
    if (since < (p->mode == DF_PROGRESS_BAR ? 0.1 : p->line_interval_s)) return;
    p->t_last = now;
    draw(p, false);
}

void df_progress_finish(df_progress *p) {
    if (p->mode == DF_PROGRESS_QUIET) return;
    draw(p, true);
}
