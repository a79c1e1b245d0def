/* bench.c — `deltafin bench`: prompt-processing and generation speed like llama-bench
 * (pp: N random tokens decoded as one prompt from an empty cache; tg: N tokens decoded one at
 * a time from an empty cache; one warm-up run each, then -r repetitions, mean ± stddev).
 * Prints a config line (commit, ISA table, threads, batch, expert residency) and a table or
 * --json. `deltafin bench kernels ...` forwards to bench_kernels_main (tools/bench_kernels.c). */
#include "app/cli/cli_args.h"
#include "deltafin.h"
#include "weights/expert_store.h"
#include "weights/io.h"
#include "kernels/kernels.h"
#include "runtime/plan.h"
#include "model/model.h"
#include "forward/session.h"
#include "base/util.h"
#include "app/cli/dist.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_kernels_main(int argc, char **argv);

static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin bench -m MODEL [options]\n"
        "       deltafin bench kernels [options]   (kernel throughput; see bench kernels --help)\n"
        "  -m, --model FILE      GGUF model\n"
        "  -p, --n-prompt N      prompt tokens for the pp test (default 512; 0 = skip)\n"
        "  -n, --n-gen N         generated tokens for the tg test (default 128; 0 = skip)\n"
        "  -t, --threads N       threads (default: all cores)\n"
        "  -b, --batch-size N    prompt tokens per forward step (default 512)\n"
        "  -r, --repetitions N   repetitions per test (default 5)\n"
        "  --mem-limit SIZE      memory limit for the process\n"
        "  --io ENGINE           expert reads when streaming: auto | pread | direct | uring | mmap\n"
        "                        (default auto; any other value forces streaming)\n"
        "  --prefetch MODE       auto | on | off: expert prefetch and router look-ahead (default auto)\n"
        "  --json                print one JSON object\n"
        "  -h, --help            this help\n");
}

static const char *commit_id(char *buf, size_t cap) {
#ifdef DF_GIT_COMMIT
    snprintf(buf, cap, "%s", DF_GIT_COMMIT);
#else
    snprintf(buf, cap, "unknown");
    FILE *p = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (p) {
        if (fgets(buf, (int)cap, p)) buf[strcspn(buf, "\r\n")] = 0;
        else snprintf(buf, cap, "unknown");
        pclose(p);
    }
#endif
    return buf;
}

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
    const char *model = NULL;
    int n_prompt = 512, n_gen = 128, n_threads = 0, n_batch = 512, reps = 5;
    bool json = false;
    uint64_t mem_limit = 0;
    const char *io_engine = NULL;
    int prefetch = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
#define ARG(s, l) ((!strcmp(a, s) || !strcmp(a, l)) && more)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (ARG("-m", "--model")) model = argv[++i];
        else if (ARG("-p", "--n-prompt")) n_prompt = df_cli_int(argv, &i);
        else if (ARG("-n", "--n-gen")) n_gen = df_cli_int(argv, &i);
        else if (ARG("-t", "--threads")) n_threads = df_cli_int(argv, &i);
        else if (ARG("-b", "--batch-size")) n_batch = df_cli_int(argv, &i);
        else if (ARG("-r", "--repetitions")) reps = df_cli_int(argv, &i);
        else if (ARG("--mem-limit", "--mem_limit")) {
            if (df_parse_size(argv[++i], &mem_limit) < 0) { fprintf(stderr, "bench: bad --mem-limit\n"); return 2; }
        }
        else if (ARG("--io", "--io-engine")) {
            int e;
            io_engine = argv[++i];
            if (df_io_engine_parse(io_engine, &e) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); return 2; }
        }
        else if (ARG("--prefetch", "--prefetch")) {
            if (df_prefetch_parse(argv[++i], &prefetch) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); return 2; }
        }
        else if (!strcmp(a, "--json")) json = true;
        else { fprintf(stderr, "bench: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
#undef ARG
    }
    if (!model) { fprintf(stderr, "bench: -m MODEL is required\n"); usage(stderr); return 2; }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (n_prompt < 0 || n_gen < 0) { fprintf(stderr, "bench: -p/-n must be >= 0\n"); return 2; }

    int ret = 1;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    int32_t *toks = NULL;
    deltafin_model_params mp = deltafin_model_default_params();
    mp.n_threads = n_threads;
    mp.mem_limit = mem_limit;
    if (io_engine) mp.io_engine = io_engine;
    if (prefetch >= 0) mp.prefetch = prefetch;
    uint64_t tl = df_time_ns();
    if (deltafin_model_load(model, &mp, &m) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); goto done; }
    double load_s = (df_time_ns() - tl) / 1e9;
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = n_prompt + n_gen > 16 ? n_prompt + n_gen : 16;
    cp.n_batch = n_batch;
    cp.n_threads = n_threads;
    if (deltafin_ctx_create(m, &cp, &c) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); goto done; }
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

    char commit[64];
    commit_id(commit, sizeof commit);
    int threads = deltafin_ctx_n_threads(c);
    const char *isa = deltafin_kernels_name();
    deltafin_plan plan;
    deltafin_model_plan(m, &plan);
    const char *residency = !deltafin_model_n_expert(m) ? "none" : plan.experts_stream ? "streamed" : "resident";
    char mb[32];
    if (!json)
        printf("deltafin %s | commit %s | ISA %s | threads %d | batch %d | experts %s | model %s (%s, %s, load %.2f s)\n",
               DELTAFIN_VERSION, commit, isa, threads, deltafin_ctx_n_batch(c), residency, model, deltafin_model_arch(m),
               df_fmt_bytes(deltafin_model_size(m), mb, sizeof mb), load_s);

    result res[2] = {{.name = "pp", .n = n_prompt}, {.name = "tg", .n = n_gen}};
    for (int ti = 0; ti < 2; ti++) {
        result *r = &res[ti];
        if (r->n <= 0) continue;
        for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
            deltafin_ctx_truncate(c, 0);
            uint64_t t0 = df_time_ns();
            int rc = DF_OK;
            if (ti == 0) rc = deltafin_decode(c, toks, r->n, false);
            else
                for (int i = 0; i < r->n && rc == DF_OK; i++) rc = deltafin_decode(c, &toks[i % nt], 1, false);
            if (rc < 0) { fprintf(stderr, "bench: decode: %s\n", deltafin_errmsg()); goto done; }
            double dt = (df_time_ns() - t0) / 1e9;
            if (rep >= 0) r->ts[r->nr++] = r->n / dt;
        }
        summarize(r);
    }
    deltafin_stats st;
    deltafin_ctx_stats(c, &st);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "version", DELTAFIN_VERSION);
        cJSON_AddStringToObject(o, "commit", commit);
        cJSON_AddStringToObject(o, "isa", isa);
        cJSON_AddNumberToObject(o, "threads", threads);
        cJSON_AddNumberToObject(o, "n_batch", deltafin_ctx_n_batch(c));
        cJSON_AddStringToObject(o, "experts", residency);
        cJSON_AddStringToObject(o, "model", model);
        cJSON_AddStringToObject(o, "arch", deltafin_model_arch(m));
        cJSON_AddNumberToObject(o, "model_bytes", (double)(deltafin_model_size(m)));
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
        cJSON_AddNumberToObject(so, "peak_rss", (double)df_peak_rss());
        deltafin_stream_stats ss;
        deltafin_model_stream_stats(m, &ss);
        char *sj = deltafin_stream_stats_json(&ss); /* expert streaming: cache, I/O, prefetch, look-ahead */
        if (sj) {
            cJSON *sto = cJSON_Parse(sj);
            if (sto) cJSON_AddItemToObject(so, "stream", sto);
            free(sj);
        }
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
                   df_fmt_bytes(st.bytes_read, mb, sizeof mb));
        deltafin_stream_stats ss;
        deltafin_model_stream_stats(m, &ss);
        if (ss.experts_stream) {
            char sb[640];
            printf("%s\n", deltafin_stream_stats_str(&ss, sb, sizeof sb));
        }
        df_cli_dist_report(m, stdout, NULL);
        printf("peak memory: %s\n", df_fmt_bytes(df_peak_rss(), mb, sizeof mb));
    }
    ret = 0;
done:
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    free(toks);
    return ret;
}
