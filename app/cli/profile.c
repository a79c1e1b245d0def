/* profile.c — `deltafin profile`: count how often the router picks each (layer, expert) over a
 * file of prompts and write the counts as a `--hot` file (src/expert_store.c,
 * df_store_read_hot_file: "layer expert count" lines, `#` comments), most used first, so
 * `deltafin run --hot FILE` pins the hottest experts that fit in the expert cache. Every
 * non-empty line of the file is one prompt (--whole: the whole file is one prompt), processed
 * from an empty context (BOS and special tokens as `deltafin run`), then -n tokens are
 * generated greedily; the router's choices for every decoded token are counted
 * (deltafin_ctx_count_routes). As in llama.cpp, the last layer runs only the rows whose
 * logits are needed (the last prompt token, each generated token), so only those are counted
 * there. A summary (top experts, per-layer skew) goes to stderr. */
#include "app/cli/flags.h"
#include "deltafin.h"
#include "app/cli/load_progress.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const df_cmd k_profile = {
    DF_CMD_PROFILE, "profile", "usage: deltafin profile -m MODEL -f PROMPTS.txt [options]",
    "Count the experts the router picks over a prompt file and write a --hot file for\n"
    "`deltafin run --hot FILE` (lines \"layer expert count\", most used first).", NULL, 0};

typedef struct { int l, e; uint32_t c; } ent;
static int cmp_ent(const void *a, const void *b) {
    const ent *x = a, *y = b;
    if (x->c != y->c) return x->c < y->c ? 1 : -1;
    if (x->l != y->l) return x->l - y->l;
    return x->e - y->e;
}

/* --trace: one line per forward pass, MoE layer and row: "pass layer e1 ... ek" (the store sees
 * a pass's rows of a layer together: their union is what it reads). */
typedef struct { FILE *f; int last_layer; uint64_t pass; } trace_st;
static void trace_cb(void *ud, int layer, int n_tokens, int k, const int32_t *experts) {
    trace_st *t = ud;
    if (layer <= t->last_layer) t->pass++;
    t->last_layer = layer;
    for (int r = 0; r < n_tokens; r++) {
        fprintf(t->f, "%llu %d", (unsigned long long)t->pass, layer);
        for (int j = 0; j < k; j++) fprintf(t->f, " %d", experts[(int64_t)r * k + j]);
        fputc('\n', t->f);
    }
}

/* Decode one prompt (+ n_gen greedy tokens) from position 0; adds to *n_tok the tokens decoded. */
static int profile_prompt(deltafin_model *m, deltafin_ctx *c, const char *text, size_t len, int n_gen,
                          int32_t **buf, int *cap, uint64_t *n_tok, uint64_t *n_gen_tok, int *n_cut) {
    int np = deltafin_tokenize(m, text, len, true, true, NULL, 0);
    if (np < 0) return np;
    if (np > *cap) {
        int32_t *nb = realloc(*buf, sizeof(int32_t) * (size_t)np);
        if (!nb) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory");
        *buf = nb;
        *cap = np;
    }
    np = deltafin_tokenize(m, text, len, true, true, *buf, np);
    if (np < 0) return np;
    if (np == 0) return DELTAFIN_OK;
    const int room = deltafin_ctx_n_ctx(c) - n_gen;
    if (np > room) { np = room; (*n_cut)++; }
    int rc = deltafin_ctx_truncate(c, 0);
    if (rc < 0) return rc;
    rc = deltafin_decode(c, *buf, np, false);
    if (rc < 0) return rc;
    *n_tok += (uint64_t)np;
    const int nv = deltafin_model_n_vocab(m);
    for (int i = 0; i < n_gen; i++) {
        const float *lg = deltafin_logits(c, -1);
        int32_t best = 0;
        for (int v = 1; v < nv; v++)
            if (lg[v] > lg[best]) best = v;
        if (deltafin_token_is_eog(m, best)) break;
        rc = deltafin_decode(c, &best, 1, false);
        if (rc < 0) return rc;
        (*n_tok)++;
        (*n_gen_tok)++;
    }
    return DELTAFIN_OK;
}

/* The summary on stderr: totals, the top experts, per-layer skew. */
static void profile_summary(const uint32_t *cnt, int L, int E, const ent *v, int n, int n_top, int n_prompts,
                            uint64_t n_tok, double secs, uint64_t total, int n_moe) {
    fprintf(stderr, "profile: %d prompts, %llu tokens in %.2f s, %llu expert selections in %d MoE layers, "
                    "%d of %d (layer, expert) pairs used\n",
            n_prompts, (unsigned long long)n_tok, secs, (unsigned long long)total, n_moe, n, n_moe * E);
    if (n_top > n) n_top = n;
    if (n_top > 0) {
        fprintf(stderr, "top experts:");
        for (int i = 0; i < n_top; i++) {
            uint64_t lt = 0;
            for (int e = 0; e < E; e++) lt += cnt[(size_t)v[i].l * E + e];
            fprintf(stderr, " %d:%d %.1f%%", v[i].l, v[i].e, lt ? 100.0 * v[i].c / (double)lt : 0.0);
        }
        fprintf(stderr, "  (share of the layer's selections)\n");
    }
    fprintf(stderr, "per layer: used experts, top expert share, max/mean, effective experts (exp entropy)\n");
    for (int l = 0; l < L; l++) {
        const uint32_t *r = cnt + (size_t)l * E;
        uint64_t lt = 0;
        uint32_t mx = 0;
        int nu = 0;
        for (int e = 0; e < E; e++) { lt += r[e]; if (r[e] > mx) mx = r[e]; nu += r[e] > 0; }
        if (!lt) continue;
        double h = 0;
        for (int e = 0; e < E; e++)
            if (r[e]) { double p = r[e] / (double)lt; h -= p * log(p); }
        fprintf(stderr, "  layer %3d: %4d/%d used, top %5.1f%%, max/mean %.2f, effective %.1f\n", l, nu, E,
                100.0 * mx / (double)lt, mx * (double)E / (double)lt, exp(h));
    }
}

int cmd_profile(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_profile, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = S.model, *pfile = S.file, *out_path = S.output;
    const int n_gen = S.n_predict, n_ctx = S.n_ctx;
    int n_top = S.top;
    const bool whole = S.whole;
    if (!model || !pfile) {
        fprintf(stderr, "profile: -m MODEL and -f PROMPTS are required\n\n");
        df_cli_help(&k_profile, stderr);
        return 2;
    }
    if (n_gen < 0 || n_ctx < 0 || n_top < 0) { fprintf(stderr, "profile: -n, -c and --top must be >= 0\n"); return 2; }

    int ret = 1;
    char *text = NULL;
    size_t tlen = 0;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    int32_t *buf = NULL;
    int cap = 0;
    ent *v = NULL;
    FILE *out = NULL;
    trace_st tr = {NULL, 1 << 30, 0};

    if (deltafin_read_file(pfile, &text, &tlen) < 0) { fprintf(stderr, "profile: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_log_begin(&k_profile, &S) != DF_CLI_GO) goto done;
    deltafin_model_params mp = df_cli_model_params(&S);
    df_load_progress load_progress = {0};
    mp.progress_cb = df_load_progress_cb;
    mp.progress_ud = &load_progress;
    int rc = deltafin_model_load(model, &mp, &m);
    if (rc < 0) { fprintf(stderr, "profile: %s\n", deltafin_errmsg()); goto done; }
    deltafin_ctx_params cp = df_cli_ctx_params(&S);
    cp.n_batch = deltafin_ctx_default_params().n_batch;
    rc = deltafin_ctx_create(m, &cp, &c);
    if (rc < 0) { fprintf(stderr, "profile: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_apply_routing(&k_profile, &S, c)) goto done;
    if (n_gen >= deltafin_ctx_n_ctx(c)) {
        fprintf(stderr, "profile: -n %d leaves no room for a prompt in a context of %d\n", n_gen, deltafin_ctx_n_ctx(c));
        goto done;
    }
    rc = deltafin_ctx_count_routes(c);
    if (rc < 0) { fprintf(stderr, "profile: %s\n", deltafin_errmsg()); goto done; }
    if (S.trace) {
        const uint32_t *c0;
        int L0, E0;
        deltafin_ctx_route_counts(c, &c0, &L0, &E0);
        tr.f = fopen(S.trace, "w");
        if (!tr.f) { fprintf(stderr, "profile: --trace %s: %s\n", S.trace, strerror(errno)); goto done; }
        fprintf(tr.f, "# deltafin routing trace v1 of %s over %s\n# n_layer %d n_expert %d\n"
                      "# pass layer experts (one line per row of a forward pass; the router's order)\n",
                model, pfile, L0, E0);
        rc = deltafin_ctx_set_route_trace(c, trace_cb, &tr);
        if (rc < 0) { fprintf(stderr, "profile: %s\n", deltafin_errmsg()); goto done; }
    }

    uint64_t n_tok = 0, n_gtok = 0;
    int n_prompts = 0, n_cut = 0;
    const uint64_t t0 = deltafin_time_ns();
    if (whole) {
        rc = profile_prompt(m, c, text, tlen, n_gen, &buf, &cap, &n_tok, &n_gtok, &n_cut);
        n_prompts = 1;
    } else {
        for (size_t p = 0; p < tlen && rc >= 0;) {
            size_t e = p;
            while (e < tlen && text[e] != '\n') e++;
            size_t l = e;
            if (l > p && text[l - 1] == '\r') l--;
            bool blank = true;
            for (size_t k = p; k < l && blank; k++) blank = text[k] == ' ' || text[k] == '\t';
            if (!blank) {
                rc = profile_prompt(m, c, text + p, l - p, n_gen, &buf, &cap, &n_tok, &n_gtok, &n_cut);
                n_prompts++;
            }
            p = e + 1;
        }
    }
    if (rc < 0) { fprintf(stderr, "profile: prompt %d: %s\n", n_prompts, deltafin_errmsg()); goto done; }
    if (n_tok == 0) { fprintf(stderr, "profile: %s has no prompt text\n", pfile); goto done; }
    const double secs = (double)(deltafin_time_ns() - t0) / 1e9;
    if (n_cut) fprintf(stderr, "profile: warning: %d prompt(s) cut to fit the context of %d\n", n_cut, deltafin_ctx_n_ctx(c));

    const uint32_t *cnt;
    int L, E;
    if (deltafin_ctx_route_counts(c, &cnt, &L, &E) < 0) { fprintf(stderr, "profile: %s\n", deltafin_errmsg()); goto done; }
    v = malloc(sizeof *v * (size_t)L * (size_t)E);
    if (!v) { fprintf(stderr, "profile: out of memory\n"); goto done; }
    int n = 0, n_moe = 0;
    uint64_t total = 0;
    for (int l = 0; l < L; l++) {
        bool used = false;
        for (int e = 0; e < E; e++) {
            uint32_t k = cnt[(size_t)l * E + e];
            if (k) { v[n++] = (ent){l, e, k}; used = true; total += k; }
        }
        n_moe += used;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_ent);

    out = strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
    if (!out) { fprintf(stderr, "profile: %s: %s\n", out_path, strerror(errno)); goto done; }
    fprintf(out, "# deltafin profile of %s over %s: %d prompts, %llu tokens (%llu prompt + %llu generated), "
                 "%d MoE layers, %d experts, %llu selections\n"
                 "# layer expert count (most used first; for deltafin run --hot)\n",
            model, pfile, n_prompts, (unsigned long long)n_tok, (unsigned long long)(n_tok - n_gtok),
            (unsigned long long)n_gtok, n_moe, E, (unsigned long long)total);
    for (int i = 0; i < n; i++) fprintf(out, "%d %d %u\n", v[i].l, v[i].e, v[i].c);
    if (out != stdout ? fclose(out) != 0 : fflush(out) != 0) {
        out = NULL;
        fprintf(stderr, "profile: writing %s failed\n", out_path);
        goto done;
    }
    out = NULL;

    profile_summary(cnt, L, E, v, n, n_top, n_prompts, n_tok, secs, total, n_moe);
    ret = 0;
done:
    if (tr.f && fclose(tr.f) != 0 && ret == 0) { fprintf(stderr, "profile: writing %s failed\n", S.trace); ret = 1; }
    if (out && out != stdout) fclose(out);
    free(v);
    free(buf);
    free(text);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    df_cli_log_end(&S);
    return ret;
}
