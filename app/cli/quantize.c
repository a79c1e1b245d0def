/* quantize.c — `deltafin quantize IN.gguf [OUT.gguf] RECIPE [NTHREADS]`: llama-quantize's
 * command line on deltafin_quantize (include/deltafin.h): its recipe names, its options, its
 * argument order (OUT may be left out: IN's folder/ggml-model-RECIPE.gguf), a dry run that
 * prints each tensor's conversion and the sizes, and a progress display (a bar on a terminal,
 * else a line every 5 s). Output goes to OUT.tmp, renamed to OUT on success. */
#include "app/cli/flags.h"
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static char g_recipes_help[4096]; /* the help's recipe table, filled by cmd_quantize */
static const df_cmd k_quantize = {
    DF_CMD_QUANTIZE, "quantize", "usage: deltafin quantize IN.gguf [OUT.gguf] RECIPE [NTHREADS] [options]",
    "Convert a model's weight matrices as llama-quantize does with the same RECIPE: the same type for every\n"
    "tensor and byte-identical tensor data (with or without --imatrix). Norms, routers (ffn_gate_inp), biases\n"
    "and other 1-D tensors stay as they are. Without OUT the result is IN's folder/ggml-model-RECIPE.gguf.",
    g_recipes_help, 4};

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

/* the recipes, as llama-quantize lists them */
static void list_recipes(FILE *f, bool with_desc) {
    const char *name, *desc;
    int ft;
    for (int i = 0; deltafin_quantize_recipe_info(i, &name, &desc, &ft); i++) {
        if (with_desc && ft >= 0) fprintf(f, "  %4d  or  %-9s : %s\n", ft, name, desc);
        else if (with_desc) fprintf(f, "            %-9s : %s\n", name, desc);
        else fprintf(f, "%s%s", i ? " " : "", name);
    }
    if (!with_desc) fputc('\n', f);
}

/* a TYPE argument: a tensor type, else a usage error */
static bool tensor_type(const char *flag, const char *v, int *out) {
    *out = deltafin_type_from_name(v);
    if (*out < 0 || !deltafin_type_can_quantize(*out)) {
        fprintf(stderr, "quantize: %s: cannot quantize to type '%s' (see deltafin quantize --help)\n", flag, v);
        return false;
    }
    return true;
}

/* dry run: llama-quantize's per-tensor line */
static void on_tensor(void *ud, const deltafin_quantize_tensor *t) {
    (void)ud;
    printf("[%4d/%4d] %-36s - [%6lld, %6lld, %6lld, %6lld], type = %6s, ", t->index + 1, t->n_tensors, t->name,
           (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
           deltafin_type_name(t->type_in));
    if (t->type_out == t->type_in) printf("size = %8.3f MiB\n", t->bytes_in / 1048576.0);
    else printf("size = %8.2f MiB -> %8.2f MiB (%s)\n", t->bytes_in / 1048576.0, t->bytes_out / 1048576.0,
                deltafin_type_name(t->type_out));
}

static int run(const df_settings *S, const char *in, const char *out, deltafin_quantize_params *qp) {
    progress pr = {.tty = isatty(2), .t0 = deltafin_time_ns()};
    if (qp->dry_run) {
        qp->tensor_cb = on_tensor;
    } else {
        qp->progress_cb = on_progress;
        qp->progress_ud = &pr;
    }
    deltafin_quantize_result res;
    int rc = deltafin_quantize(in, out, qp, &res);
    if (rc) {
        if (pr.tty && pr.last) fputc('\n', stderr);
        fprintf(stderr, "quantize: %s\n", deltafin_errmsg());
        return 1;
    }
    const double n = res.n_elements > 0 ? (double)res.n_elements : 1.0;
    if (qp->dry_run) {
        printf("model size  = %8.2f MiB (%.2f BPW)\n", res.bytes_in / 1048576.0, res.bytes_in * 8.0 / n);
        printf("quant size  = %8.2f MiB (%.2f BPW)\n", res.bytes_out / 1048576.0, res.bytes_out * 8.0 / n);
        if (res.needs_imatrix)
            printf("warning: the dry run completed, but this quantization needs an importance matrix (--imatrix)\n");
    } else {
        progress_show(&pr, "done", true);
        if (pr.tty) fputc('\n', stderr);
        fprintf(stderr, "quantize: %d tensors converted, %d copied, %.2f -> %.2f MiB (%.2f BPW)%s, %.1f s\n",
                res.n_converted, res.n_copied, res.bytes_in / 1048576.0, res.bytes_out / 1048576.0,
                res.bytes_out * 8.0 / n, res.imatrix_entries ? ", with an importance matrix" : "",
                (deltafin_time_ns() - pr.t0) / 1e9);
    }
    if (res.n_fallback)
        fprintf(stderr, "quantize: warning: %d tensor(s) needed a fallback type (row length not a multiple of the block)\n",
                res.n_fallback);
    (void)S;
    return 0;
}

/* the recipe table of --help */
static void fill_recipes_help(void) {
    FILE *f = fmemopen(g_recipes_help, sizeof g_recipes_help, "w");
    if (!f) return;
    fprintf(f, "recipes (llama-quantize's; the number is its ftype, written to general.file_type):\n");
    list_recipes(f, true);
    fclose(f);
    size_t n = strlen(g_recipes_help);
    if (n && g_recipes_help[n - 1] == '\n') g_recipes_help[n - 1] = 0;
}

int cmd_quantize(int argc, char **argv) {
    fill_recipes_help();
    df_settings S;
    int prc = df_cli_parse(&k_quantize, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    if (S.n_pos < 2) {
        fprintf(stderr, "quantize: IN.gguf and RECIPE are required (see deltafin quantize --help); the recipes:\n");
        list_recipes(stderr, true);
        return 2;
    }
    /* llama-quantize's order: IN RECIPE [NTHREADS] or IN OUT RECIPE [NTHREADS] */
    const char *in = S.pos[0], *out = NULL, *recipe, *nthreads = NULL;
    char auto_out[4096];
    int ri = 1;
    if (deltafin_quantize_recipe(S.pos[1]) >= 0 && S.n_pos <= 3) {
        recipe = S.pos[1];
        nthreads = S.n_pos == 3 ? S.pos[2] : NULL;
        const char *slash = strrchr(in, '/');
        char name[32];
        snprintf(name, sizeof name, "%s", recipe);
        for (char *c = name; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        snprintf(auto_out, sizeof auto_out, "%.*sggml-model-%s.gguf", slash ? (int)(slash - in + 1) : 0, in, name);
        out = auto_out;
    } else {
        if (S.n_pos < 3) return df_cli_usage_error(&k_quantize, "RECIPE is required after OUT.gguf");
        out = S.pos[1];
        recipe = S.pos[2];
        nthreads = S.n_pos == 4 ? S.pos[3] : NULL;
        ri = 2;
    }
    deltafin_quantize_params qp = deltafin_quantize_default_params();
    qp.recipe = deltafin_quantize_recipe(recipe);
    if (qp.recipe < 0) {
        fprintf(stderr, "quantize: unknown recipe '%s'; llama-quantize's recipes are:\n  ", S.pos[ri]);
        list_recipes(stderr, false);
        fprintf(stderr, "(deltafin quantize --help shows their sizes)\n");
        return 2;
    }
    if (nthreads) {
        char *end;
        long v = strtol(nthreads, &end, 10);
        if (*end || v < 1 || v > 4096) return df_cli_usage_error(&k_quantize, "NTHREADS '%s' is not a thread count", nthreads);
        S.n_threads = (int)v;
    }
    if (df_cli_given(&S, &k_quantize, "--threads") && S.n_threads <= 0)
        return df_cli_usage_error(&k_quantize, "-t must be at least 1");
    if ((S.type_experts && !tensor_type("--type-experts", S.type_experts, &qp.type_experts)) ||
        (S.type_dense && !tensor_type("--type-dense", S.type_dense, &qp.type_dense)) ||
        (S.output_type && !tensor_type("--output-tensor-type", S.output_type, &qp.output_type)) ||
        (S.token_embd_type && !tensor_type("--token-embedding-type", S.token_embd_type, &qp.token_embd_type)))
        return 2;
    if (!S.dry_run && !strcmp(in, out)) {
        fprintf(stderr, "quantize: input and output files are the same: '%s'\n", in);
        return 1;
    }
    qp.pure = S.pure;
    qp.leave_output = S.leave_output;
    qp.allow_requantize = S.allow_requantize;
    qp.dry_run = S.dry_run;
    qp.imatrix = S.imatrix;
    qp.n_threads = S.n_threads;
    return run(&S, in, out, &qp);
}
