/* bench.c — `deltafin bench`: prompt-processing and generation speed like llama-bench
 * (pp: N random tokens decoded as one prompt from an empty cache; tg: N tokens decoded one at
 * a time from an empty cache; one warm-up run each, then -r repetitions, mean ± stddev).
 * Prints a config line (commit, ISA table, threads, batch, expert residency) and a table or
 * --json. `deltafin bench kernels ...` forwards to bench_kernels_main (app/cli/bench_kernels.c). */
#include "app/cli/flags.h"
#include "deltafin.h"
#include "app/cli/dist.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_kernels_main(int argc, char **argv);

static const df_cmd k_bench = {
    DF_CMD_BENCH, "bench",
    "usage: deltafin bench -m MODEL [options]\n"
    "       deltafin bench kernels [options]   (kernel throughput; see deltafin bench kernels --help)",
    "Prompt processing (pp: N random tokens as one prompt) and generation (tg: N tokens one at a time)\n"
    "speed like llama-bench: one warm-up run each, then -r repetitions, mean +- stddev.", NULL, 0};

typedef struct { const char *name; int n; double avg, sd; double ts[64]; int nr; } result;

static void summarize(result *r) {
    double s = 0, s2 = 0;
    for (int i = 0; i < r->nr; i++) s += r->ts[i];
    r->avg = r->nr ? s / r->nr : 0;
    for (int i = 0; i < r->nr; i++) s2 += (r->ts[i] - r->avg) * (r->ts[i] - r->avg);
    r->sd = r->nr > 1 ? sqrt(s2 / (r->nr - 1)) : 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "kernels")) {
        return bench_kernels_main(argc - 1, argv + 1);
    }
    df_settings S;
    int prc = df_cli_parse(&k_bench, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = S.model;
    const int n_prompt = S.n_prompt, n_gen = S.n_gen;
    int reps = S.reps;
    const bool json = S.json;
    if (!model) {
        fprintf(stderr, "bench: -m MODEL is required\n\n");
        df_cli_help(&k_bench, stderr);
        return 2;
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (n_prompt < 0 || n_gen < 0) { fprintf(stderr, "bench: -p/-n must be >= 0\n"); return 2; }

    int ret = 1;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    int32_t *toks = NULL;
    if (df_cli_log_begin(&k_bench, &S) != DF_CLI_GO) return 1;
    deltafin_model_params mp = df_cli_model_params(&S);
    mp.n_ctx = n_prompt + n_gen > 16 ? n_prompt + n_gen : 16; /* the context the tests use */
    mp.n_batch = S.n_batch;                                      /* pp is measured at -b */
    uint64_t tl = deltafin_time_ns();
    if (deltafin_model_load(model, &mp, &m) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); goto done; }
    double load_s = (deltafin_time_ns() - tl) / 1e9;
    deltafin_ctx_params cp = df_cli_ctx_params(&S);
    cp.n_ctx = n_prompt + n_gen > 16 ? n_prompt + n_gen : 16;
    if (deltafin_ctx_create(m, &cp, &c) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_apply_routing(&k_bench, &S, c)) goto done;
    const int n_vocab = deltafin_model_n_vocab(m);
    int nt = n_prompt > 1 ? n_prompt : 1;
    toks = malloc(sizeof(int32_t) * (size_t)nt);
    if (!toks) goto done;
    uint32_t rng = 42;
    for (int i = 0; i < nt; i++) {
        rng = rng * 1664525u + 1013904223u;
        toks[i] = (int32_t)((rng >> 8) % (uint32_t)n_vocab);
    }
    int bos = deltafin_token_bos(m);
    if (bos >= 0) toks[0] = bos;

    const char *commit = deltafin_commit();
    const int threads = deltafin_ctx_n_threads(c), n_batch_c = deltafin_ctx_n_batch(c);
    const char *isa = deltafin_kernel_isa();
    deltafin_plan plan;
    deltafin_model_plan(m, &plan);
    const char *residency = plan.experts_stream ? "streamed" : plan.n_experts_total ? "resident" : "none";
    char mb[32];
    if (!json)
        printf("deltafin %s | commit %s | ISA %s | threads %d | batch %d | experts %s | model %s (%s, %s, load %.2f s)\n",
               DELTAFIN_VERSION, commit, isa, threads, n_batch_c, residency, model, deltafin_model_arch(m),
               deltafin_fmt_bytes(deltafin_model_size(m), mb, sizeof mb), load_s);

    result res[2] = {{.name = "pp", .n = n_prompt}, {.name = "tg", .n = n_gen}};
    for (int ti = 0; ti < 2; ti++) {
        result *r = &res[ti];
        if (r->n <= 0) continue;
        for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
            deltafin_ctx_truncate(c, 0);
            uint64_t t0 = deltafin_time_ns();
            int rc = DELTAFIN_OK;
            if (ti == 0) rc = deltafin_decode(c, toks, r->n, false);
            else
                for (int i = 0; i < r->n && rc == DELTAFIN_OK; i++) rc = deltafin_decode(c, &toks[i % nt], 1, false);
            if (rc < 0) { fprintf(stderr, "bench: decode: %s\n", deltafin_errmsg()); goto done; }
            double dt = (deltafin_time_ns() - t0) / 1e9;
            if (rep >= 0) r->ts[r->nr++] = r->n / dt;
        }
        summarize(r);
    }
    deltafin_stats st;
    deltafin_ctx_stats(c, &st);
    deltafin_stream_stats ss;
    deltafin_model_stream_stats(m, &ss);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "version", DELTAFIN_VERSION);
        cJSON_AddStringToObject(o, "commit", commit);
        cJSON_AddStringToObject(o, "isa", isa);
        cJSON_AddNumberToObject(o, "threads", threads);
        cJSON_AddNumberToObject(o, "n_batch", n_batch_c);
        cJSON_AddStringToObject(o, "experts", residency);
        cJSON_AddStringToObject(o, "model", model);
        cJSON_AddStringToObject(o, "arch", deltafin_model_arch(m));
        cJSON_AddNumberToObject(o, "model_bytes", (double)deltafin_model_size(m));
        cJSON_AddNumberToObject(o, "load_s", load_s);
        cJSON *arr = cJSON_AddArrayToObject(o, "results");
        for (int ti = 0; ti < 2; ti++) {
            if (res[ti].n <= 0) continue;
            cJSON *e = cJSON_CreateObject();
            char nm[32];
            snprintf(nm, sizeof nm, "%s%d", res[ti].name, res[ti].n);
            cJSON_AddStringToObject(e, "test", nm);
            cJSON_AddNumberToObject(e, "n_tokens", res[ti].n);
            cJSON_AddNumberToObject(e, "avg_ts", res[ti].avg);
            cJSON_AddNumberToObject(e, "stddev_ts", res[ti].sd);
            cJSON *s = cJSON_AddArrayToObject(e, "samples_ts");
            for (int i = 0; i < res[ti].nr; i++) cJSON_AddItemToArray(s, cJSON_CreateNumber(res[ti].ts[i]));
            cJSON_AddItemToArray(arr, e);
        }
        cJSON *so = cJSON_AddObjectToObject(o, "stats");
        cJSON_AddNumberToObject(so, "expert_hits", (double)st.expert_hits);
        cJSON_AddNumberToObject(so, "expert_misses", (double)st.expert_misses);
        cJSON_AddNumberToObject(so, "bytes_read", (double)st.bytes_read);
        cJSON_AddNumberToObject(so, "io_wait_ns", (double)st.io_wait_ns);
        cJSON_AddNumberToObject(so, "peak_rss", (double)deltafin_peak_rss());
        char *sj = deltafin_stream_stats_json(&ss); /* expert streaming: cache, I/O, prefetch, look-ahead */
        cJSON *sto = sj ? cJSON_Parse(sj) : NULL;
        free(sj);
        if (sto) cJSON_AddItemToObject(so, "stream", sto);
        df_cli_dist_report(m, NULL, so); /* several ranks: communication and each rank's cache */
        char *s = cJSON_PrintUnformatted(o);
        if (s) { puts(s); free(s); }
        cJSON_Delete(o);
    } else {
        printf("| %-8s | %14s |\n", "test", "t/s");
        printf("| -------- | -------------- |\n");
        for (int ti = 0; ti < 2; ti++) {
            if (res[ti].n <= 0) continue;
            char nm[32];
            snprintf(nm, sizeof nm, "%s%d", res[ti].name, res[ti].n);
            printf("| %-8s | %7.2f ± %4.2f |\n", nm, res[ti].avg, res[ti].sd);
        }
        uint64_t acc = st.expert_hits + st.expert_misses;
        if (acc)
            printf("experts: hit rate %.1f%%, %s read\n", 100.0 * st.expert_hits / acc,
                   deltafin_fmt_bytes(st.bytes_read, mb, sizeof mb));
        if (ss.experts_stream) {
            char sb[640];
            printf("%s\n", deltafin_stream_stats_str(&ss, sb, sizeof sb));
        }
        df_cli_dist_report(m, stdout, NULL);
        printf("peak memory: %s\n", deltafin_fmt_bytes(deltafin_peak_rss(), mb, sizeof mb));
    }
    ret = 0;
done:
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    free(toks);
    df_cli_log_end(&S);
    return ret;
}
