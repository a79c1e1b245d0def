/* quantize.c — `deltafin quantize IN.gguf OUT.gguf TYPE`: the options of deltafin_quantize
 * (include/deltafin.h, which converts tensor by tensor as llama-quantize does) and a progress
 * display: a bar on a terminal, else a line every 5 s. Output goes to OUT.tmp, renamed to OUT
 * on success. */
#include "app/cli/flags.h"
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const df_cmd k_quantize = {
    DF_CMD_QUANTIZE, "quantize", "usage: deltafin quantize IN.gguf OUT.gguf TYPE [options]",
    "Convert weight matrices to TYPE (Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS\n"
    "MXFP4 F16 BF16 F32), or to llama-quantize's Q4_K_M mixture (Q4_K, with Q6_K / Q8_0 / Q5_K for\n"
    "the tensors llama-quantize picks them for). Norms, routers (ffn_gate_inp), biases and other 1-D\n"
    "tensors stay as they are (F32), as llama-quantize does.", NULL, 3};

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
    df_settings S;
    int prc = df_cli_parse(&k_quantize, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    if (S.n_pos != 3) return df_cli_usage_error(&k_quantize, "IN.gguf, OUT.gguf and TYPE are required");
    if (df_cli_given(&S, &k_quantize, "--threads") && S.n_threads <= 0)
        return df_cli_usage_error(&k_quantize, "-t must be at least 1");
    deltafin_quantize_params qp = deltafin_quantize_default_params();
    if (!strcasecmp(S.pos[2], "Q4_K_M")) {
        if (S.pure || S.type_experts || S.type_dense || S.output_type)
            return df_cli_usage_error(&k_quantize, "Q4_K_M is a mixture: no --pure, --type-experts, --type-dense "
                                      "or --output-type with it");
        qp.mix = DELTAFIN_QMIX_Q4_K_M;
        S.pos[2] = "Q4_K";
    }
    if (!target_type(S.pos[2], &qp.type) || (S.type_experts && !target_type(S.type_experts, &qp.type_experts)) ||
        (S.type_dense && !target_type(S.type_dense, &qp.type_dense)) ||
        (S.output_type && !target_type(S.output_type, &qp.output_type)))
        return 2;
    qp.pure = S.pure;
    qp.n_threads = S.n_threads;
    progress pr = {.tty = isatty(2), .t0 = deltafin_time_ns()};
    qp.progress_cb = on_progress;
    qp.progress_ud = &pr;
    deltafin_quantize_result res;
    int rc = deltafin_quantize(S.pos[0], S.pos[1], &qp, &res);
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
