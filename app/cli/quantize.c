/* quantize.c — `deltafin quantize IN.gguf OUT.gguf TYPE`: the options of deltafin_quantize
 * (include/deltafin.h, which converts tensor by tensor as llama-quantize does) and a progress
 * display: a bar on a terminal, else a line every 5 s. Output goes to OUT.tmp, renamed to OUT
 * on success. */
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: deltafin quantize IN.gguf OUT.gguf TYPE [options]\n"
            "  Convert weight matrices to TYPE (Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K\n"
            "  IQ4_NL IQ4_XS MXFP4 F16 BF16 F32). Norms, routers (ffn_gate_inp), biases and other\n"
            "  1-D tensors stay as they are (F32), as llama-quantize does.\n"
            "options:\n"
            "  --type-experts T   type for 3-D weight tensors: routed experts (*_exps), and deepseek2's\n"
            "                     attn_k_b / attn_v_b, as llama-quantize's MXFP4_MOE (default: TYPE)\n"
            "  --type-dense T     type for all other weight matrices (default: TYPE)\n"
            "  --output-type T    type for output.weight (default: Q6_K, or Q8_0 if TYPE is Q8_0)\n"
            "  --pure             no special type for output.weight\n"
            "  -t, --threads N    threads (default: all cores)\n"
            "  -h, --help         this help\n");
}

typedef struct {
    bool tty;
    uint64_t total, done;
    uint64_t t0, last;
} progress;

static void progress_show(progress *p, const char *name, bool force) {
    uint64_t now = deltafin_time_ns();
    if (!force && now - p->last < (p->tty ? 100000000ull : 5000000000ull)) return;
    p->last = now;
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    double el = (now - p->t0) / 1e9;
    char a[32], b[32];
    deltafin_fmt_bytes(p->done, a, sizeof a);
    deltafin_fmt_bytes(p->total, b, sizeof b);
    if (p->tty) {
        char bar[41];
        int k = (int)(frac * 40);
        for (int i = 0; i < 40; i++) bar[i] = i < k ? '#' : '.';
        bar[40] = 0;
        fprintf(stderr, "\r[%s] %5.1f%% %s / %s  %.0fs  %-40.40s", bar, 100 * frac, a, b, el, name);
    } else {
        fprintf(stderr, "quantize: %5.1f%% %s / %s  %.0fs  %s\n", 100 * frac, a, b, el, name);
    }
    fflush(stderr);
}

static void on_progress(void *ud, const char *tensor, uint64_t done, uint64_t total) {
    progress *p = ud;
    p->done = done;
    p->total = total;
    progress_show(p, tensor, false);
}

/* a TYPE argument: a type deltafin_quantize can produce, else a usage error */
static bool target_type(const char *v, int *out) {
    *out = deltafin_type_from_name(v);
    if (*out < 0 || !deltafin_type_can_quantize(*out)) {
        fprintf(stderr, "quantize: cannot quantize to type '%s'\n", v);
        return false;
    }
    return true;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {0};
    int npos = 0, nthreads = 0, t_exp = -1, t_dense = -1, t_out = -1;
    bool pure = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "--pure")) { pure = true; continue; }
        if (a[0] == '-' && a[1]) {
            if (i + 1 >= argc) { fprintf(stderr, "quantize: %s needs a value\n", a); return 2; }
            const char *v = argv[++i];
            int *dst = NULL;
            if (!strcmp(a, "--type-experts")) dst = &t_exp;
            else if (!strcmp(a, "--type-dense")) dst = &t_dense;
            else if (!strcmp(a, "--output-type")) dst = &t_out;
            else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
                nthreads = atoi(v);
                if (nthreads <= 0) { fprintf(stderr, "quantize: bad thread count '%s'\n", v); return 2; }
                continue;
            } else { fprintf(stderr, "quantize: unknown option %s\n", a); usage(stderr); return 2; }
            if (!target_type(v, dst)) return 2;
            continue;
        }
        if (npos == 3) { fprintf(stderr, "quantize: too many arguments\n"); usage(stderr); return 2; }
        pos[npos++] = a;
    }
    if (npos != 3) { usage(stderr); return 2; }
    deltafin_quantize_params qp = deltafin_quantize_default_params();
    if (!target_type(pos[2], &qp.type)) return 2;
    qp.type_experts = t_exp;
    qp.type_dense = t_dense;
    qp.output_type = t_out;
    qp.pure = pure;
    qp.n_threads = nthreads;
    progress pr = {.tty = isatty(2), .t0 = deltafin_time_ns()};
    qp.progress_cb = on_progress;
    qp.progress_ud = &pr;
    deltafin_quantize_result res;
    int rc = deltafin_quantize(pos[0], pos[1], &qp, &res);
    if (rc) {
        if (pr.tty && pr.last) fputc('\n', stderr);
        fprintf(stderr, "quantize: %s\n", deltafin_errmsg());
        return 1;
    }
    progress_show(&pr, "done", true);
    if (pr.tty) fputc('\n', stderr);
    fprintf(stderr, "quantize: %d tensors converted, %d copied, %.1f s\n", res.n_converted, res.n_copied,
            (deltafin_time_ns() - pr.t0) / 1e9);
    return 0;
}
