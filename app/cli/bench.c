/* bench.c — `deltafin bench`: prompt-processing and generation speed as llama-bench measures
 * and prints it (tools/llama-bench/llama-bench.cpp, llama.cpp d32676d):
 *   tests: pp N (N random tokens decoded as one prompt, in -b chunks, from an empty cache),
 *     tg N (N tokens decoded one at a time from an empty cache), pp+tg (-pg PP,TG: both, timed
 *     together); one per value of -p, -n, -pg, for every -b x -t pair (comma lists and
 *     llama-bench's ranges); one warm-up run each, then -r repetitions; t/s = tokens / time,
 *     mean ± sample standard deviation over the repetitions;
 *   -o md: llama-bench's table (model, size, params, backend, threads, [n_batch], test, t/s) plus
 *     deltafin's streaming columns (bytes read per token, expert hit rate) when the model
 *     streams; -o csv | json | jsonl: llama-bench's field names where they apply, and deltafin's
 *     own fields (isa, experts, bytes_read, expert_hit_rate ...);
 *   --json: deltafin's earlier single object (results[] with test, n_tokens, avg_ts, stddev_ts,
 *     samples_ts; stats with the expert cache and streaming figures), kept for scripts.
 * `deltafin bench kernels ...` forwards to bench_kernels_main (app/cli/bench_kernels.c). */
#include "app/cli/flags.h"
#include "deltafin.h"
#include "app/cli/dist.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int bench_kernels_main(int argc, char **argv);

static const df_cmd k_bench = {
    DF_CMD_BENCH, "bench",
    "usage: deltafin bench -m MODEL [options]\n"
    "       deltafin bench kernels [options]   (kernel throughput; see deltafin bench kernels --help)",
    "Prompt processing (pp: N random tokens as one prompt) and generation (tg: N tokens one at a time)\n"
    "speed like llama-bench: one warm-up run each, then -r repetitions, mean +- stddev. -p, -n, -t and -b\n"
    "take lists (32,64) and ranges (first-last, first-last+step, first-last*mult); every -b x -t pair\n"
    "runs every test.", NULL, 0};

enum { OUT_MD, OUT_CSV, OUT_JSON, OUT_JSONL, OUT_LEGACY };

/* one test of one (batch, threads) pair */
typedef struct {
    int n_prompt, n_gen, n_batch, n_threads;
    int nr;
    uint64_t *ns;                 /* per repetition */
    uint64_t hits, misses, bytes_read; /* the measured repetitions' expert accesses and reads */
    char time[32];                /* test_time: RFC 3339 */
} btest;

/* what every row shares */
typedef struct {
    const char *model_path, *commit, *isa, *residency;
    char desc[128], cpu[128];
    uint64_t size, n_params;
    const char *type_k, *type_v;
    bool streams;                 /* experts or dense layers are read from disk: streaming columns */
} binfo;

static double ts_of(const btest *t, int i) { return 1e9 * (t->n_prompt + t->n_gen) / (double)t->ns[i]; }

static void mean_sd(const btest *t, bool ns, double *avg, double *sd) {
    double s = 0, s2 = 0;
    for (int i = 0; i < t->nr; i++) s += ns ? (double)t->ns[i] : ts_of(t, i);
    *avg = t->nr ? s / t->nr : 0;
    for (int i = 0; i < t->nr; i++) {
        const double d = (ns ? (double)t->ns[i] : ts_of(t, i)) - *avg;
        s2 += d * d;
    }
    *sd = t->nr > 1 ? sqrt(s2 / (t->nr - 1)) : 0;
}

static void test_name(const btest *t, char *buf, size_t cap) {
    if (t->n_gen == 0) snprintf(buf, cap, "pp%d", t->n_prompt);
    else if (t->n_prompt == 0) snprintf(buf, cap, "tg%d", t->n_gen);
    else snprintf(buf, cap, "pp%d+tg%d", t->n_prompt, t->n_gen);
}

static void cpu_name(char *out, size_t cap) {
    char *d = NULL;
    size_t n = 0;
    snprintf(out, cap, "unknown CPU");
    if (deltafin_read_file("/proc/cpuinfo", &d, &n) != DELTAFIN_OK) return;
    const char *p = strstr(d, "model name");
    if (p && (p = strchr(p, ':'))) {
        p += strspn(p, ": \t");
        snprintf(out, cap, "%.*s", (int)strcspn(p, "\n"), p);
    }
    free(d);
}

/* ---- csv, json, jsonl: one row per test, llama-bench's fields where they apply ---------------- */
enum { F_STR, F_INT, F_FLOAT, F_BOOL, F_NULLABLE };
typedef struct { const char *name; int kind; char v[160]; } field;

static int fields_of(const binfo *bi, const btest *t, field *f) {
    double ats, sts, ans, sns;
    mean_sd(t, false, &ats, &sts);
    mean_sd(t, true, &ans, &sns);
    const uint64_t acc = t->hits + t->misses, tok = (uint64_t)t->nr * (uint64_t)(t->n_prompt + t->n_gen);
    int n = 0;
#define FS(nm, ...) (f[n].name = (nm), f[n].kind = F_STR, snprintf(f[n].v, sizeof f[n].v, __VA_ARGS__), n++)
#define FK(nm, k, ...) (f[n].name = (nm), f[n].kind = (k), snprintf(f[n].v, sizeof f[n].v, __VA_ARGS__), n++)
    FS("build_commit", "%s", bi->commit);
    FS("version", "%s", DELTAFIN_VERSION);
    FS("cpu_info", "%s", bi->cpu);
    FS("backends", "CPU");
    FS("model_filename", "%s", bi->model_path);
    FS("model_type", "%s", bi->desc);
    FK("model_size", F_INT, "%llu", (unsigned long long)bi->size);
    FK("model_n_params", F_INT, "%llu", (unsigned long long)bi->n_params);
    FK("n_batch", F_INT, "%d", t->n_batch);
    FK("n_ubatch", F_INT, "%d", t->n_batch);
    FK("n_threads", F_INT, "%d", t->n_threads);
    FS("type_k", "%s", bi->type_k);
    FS("type_v", "%s", bi->type_v);
    FK("n_gpu_layers", F_INT, "0");
    FK("flash_attn", F_INT, "1");
    FK("n_prompt", F_INT, "%d", t->n_prompt);
    FK("n_gen", F_INT, "%d", t->n_gen);
    FK("n_depth", F_INT, "0");
    FS("test_time", "%s", t->time);
    FK("avg_ns", F_INT, "%llu", (unsigned long long)llround(ans));
    FK("stddev_ns", F_INT, "%llu", (unsigned long long)llround(sns));
    FK("avg_ts", F_FLOAT, "%f", ats);
    FK("stddev_ts", F_FLOAT, "%f", sts);
    FS("isa", "%s", bi->isa);
    FS("experts", "%s", bi->residency);
    FK("expert_hits", F_INT, "%llu", (unsigned long long)t->hits);
    FK("expert_misses", F_INT, "%llu", (unsigned long long)t->misses);
    FK("expert_hit_rate", F_NULLABLE, "%f", acc ? (double)t->hits / (double)acc : 0.0);
    if (!acc) f[n - 1].v[0] = 0; /* no expert was used: null */
    FK("bytes_read", F_INT, "%llu", (unsigned long long)t->bytes_read);
    FK("bytes_read_per_token", F_FLOAT, "%f", tok ? (double)t->bytes_read / (double)tok : 0.0);
#undef FS
#undef FK
    return n;
}
enum { MAX_FIELDS = 40 };

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void json_value(FILE *f, const field *x) {
    if (x->kind == F_STR) json_str(f, x->v);
    else if (x->kind == F_NULLABLE && !x->v[0]) fputs("null", f);
    else fputs(x->v, f);
}

static void print_row(int fmt, const binfo *bi, const btest *t, bool first) {
    field f[MAX_FIELDS];
    const int n = fields_of(bi, t, f);
    if (fmt == OUT_CSV) {
        if (first)
            for (int i = 0; i < n; i++) printf("%s%s", f[i].name, i + 1 < n ? "," : "\n");
        for (int i = 0; i < n; i++) {
            putchar('"');
            for (const char *s = f[i].v; *s; s++) {
                if (*s == '"') putchar('"'); /* CSV doubles a quote */
                putchar(*s);
            }
            printf("\"%s", i + 1 < n ? "," : "\n");
        }
        return;
    }
    const bool pretty = fmt == OUT_JSON;
    const char *pre = pretty ? "    " : "", *sep = pretty ? ",\n" : ", ";
    printf(pretty ? (first ? "[\n  {\n" : ",\n  {\n") : "{");
    for (int i = 0; i < n; i++) {
        printf("%s\"%s\": ", pre, f[i].name);
        json_value(stdout, &f[i]);
        fputs(sep, stdout);
    }
    printf("%s\"samples_ns\": [ ", pre);
    for (int i = 0; i < t->nr; i++) printf("%s%llu", i ? ", " : "", (unsigned long long)t->ns[i]);
    printf(" ]%s%s\"samples_ts\": [ ", pretty ? ",\n" : ",", pre);
    for (int i = 0; i < t->nr; i++) printf("%s%f", i ? ", " : "", ts_of(t, i));
    printf(pretty ? " ]\n  }" : " ]}\n");
}

/* ---- md: llama-bench's table ------------------------------------------------------------------ */
typedef struct { const char *head; int width; } col; /* width < 0: left-aligned */
enum { C_MODEL, C_SIZE, C_PARAMS, C_BACKEND, C_THREADS, C_BATCH, C_TEST, C_TS, C_READ, C_HIT, C_COUNT };

static void md_cols(const binfo *bi, const df_settings *S, col *c, bool *on) {
    static const col def[C_COUNT] = {{"model", -30}, {"size", 10},     {"params", 10},   {"backend", -10},
                                     {"threads", 7}, {"n_batch", 7},   {"test", 15},     {"t/s", 20},
                                     {"read/token", 12}, {"hit rate", 8}};
    memcpy(c, def, sizeof def);
    const int ml = (int)strlen(bi->desc);
    if (ml > 30) c[C_MODEL].width = -ml;
    for (int i = 0; i < C_COUNT; i++) on[i] = true;
    /* as llama-bench: n_batch only when it is not the default, streaming columns are deltafin's */
    on[C_BATCH] = S->bench_batch.n != 1 || S->bench_batch.v[0] != 512;
    on[C_READ] = on[C_HIT] = bi->streams;
}

static void md_header(const col *c, const bool *on) {
    printf("|");
    for (int i = 0; i < C_COUNT; i++)
        if (on[i]) printf(" %*s |", c[i].width, c[i].head);
    printf("\n|");
    for (int i = 0; i < C_COUNT; i++) {
        if (!on[i]) continue;
        const int w = abs(c[i].width);
        printf(" ");
        for (int k = 0; k < w - 1; k++) putchar('-');
        printf("%s |", c[i].width > 0 ? ":" : "-");
    }
    printf("\n");
}

static void md_row(const col *c, const bool *on, const binfo *bi, const btest *t) {
    char v[C_COUNT][160]; /* the model column holds binfo.desc (128) */
    double ats, sts;
    mean_sd(t, false, &ats, &sts);
    snprintf(v[C_MODEL], sizeof v[0], "%s", bi->desc);
    if (bi->size < (1ull << 30)) snprintf(v[C_SIZE], sizeof v[0], "%.2f MiB", bi->size / 1048576.0);
    else snprintf(v[C_SIZE], sizeof v[0], "%.2f GiB", bi->size / 1073741824.0);
    if (bi->n_params < 1000000000ull) snprintf(v[C_PARAMS], sizeof v[0], "%.2f M", bi->n_params / 1e6);
    else snprintf(v[C_PARAMS], sizeof v[0], "%.2f B", bi->n_params / 1e9);
    snprintf(v[C_BACKEND], sizeof v[0], "CPU");
    snprintf(v[C_THREADS], sizeof v[0], "%d", t->n_threads);
    snprintf(v[C_BATCH], sizeof v[0], "%d", t->n_batch);
    test_name(t, v[C_TEST], sizeof v[0]);
    snprintf(v[C_TS], sizeof v[0], "%.2f ± %.2f", ats, sts);
    const uint64_t acc = t->hits + t->misses, tok = (uint64_t)t->nr * (uint64_t)(t->n_prompt + t->n_gen);
    deltafin_fmt_bytes(tok ? t->bytes_read / tok : 0, v[C_READ], sizeof v[0]);
    if (acc) snprintf(v[C_HIT], sizeof v[0], "%.1f%%", 100.0 * (double)t->hits / (double)acc);
    else snprintf(v[C_HIT], sizeof v[0], "-");
    printf("|");
    for (int i = 0; i < C_COUNT; i++)
        if (on[i]) printf(" %*s |", c[i].width + (i == C_TS ? 1 : 0), v[i]); /* '±' is 2 bytes */
    printf("\n");
}

/* ---- running ---------------------------------------------------------------------------------- */
/* One run of test t on c (empty cache first): its nanoseconds, or 0 on an error (printed). */
static uint64_t run_once(deltafin_ctx *c, const btest *t, const int32_t *toks, int nt) {
    deltafin_ctx_truncate(c, 0);
    const uint64_t t0 = deltafin_time_ns();
    int rc = DELTAFIN_OK;
    if (t->n_prompt > 0) rc = deltafin_decode(c, toks, t->n_prompt, false);
    for (int i = 0; i < t->n_gen && rc == DELTAFIN_OK; i++)
        rc = deltafin_decode(c, &toks[(t->n_prompt + i) % nt], 1, false);
    if (rc < 0) {
        fprintf(stderr, "bench: decode: %s\n", deltafin_errmsg());
        return 0;
    }
    const uint64_t dt = deltafin_time_ns() - t0;
    return dt ? dt : 1;
}

/* Warm-up run, then the repetitions, with the expert figures of the repetitions. */
static int run_test(deltafin_ctx *c, btest *t, int reps, const int32_t *toks, int nt) {
    if (!run_once(c, t, toks, nt)) return -1;
    deltafin_stats a, b;
    deltafin_ctx_stats(c, &a);
    const time_t now = time(NULL);
    strftime(t->time, sizeof t->time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    for (t->nr = 0; t->nr < reps; t->nr++)
        if (!(t->ns[t->nr] = run_once(c, t, toks, nt))) return -1;
    deltafin_ctx_stats(c, &b);
    t->hits = b.expert_hits - a.expert_hits;
    t->misses = b.expert_misses - a.expert_misses;
    t->bytes_read = b.bytes_read - a.bytes_read;
    return 0;
}

/* The tests in llama-bench's order: for each -b, each -t: every -p, every -n, every -pg. */
static btest *make_tests(const df_settings *S, int reps, int *n_out) {
    const df_int_list *P = &S->n_prompt, *G = &S->n_gen, *PG = &S->bench_pg;
    const int nb = S->bench_batch.n, nt = S->bench_threads.n ? S->bench_threads.n : 1;
    const int per = P->n + G->n + PG->n / 2;
    btest *t = calloc((size_t)(nb * nt * per + 1), sizeof *t);
    if (!t) return NULL;
    int n = 0;
    for (int b = 0; b < nb; b++)
        for (int h = 0; h < nt; h++) {
            const btest base = {.n_batch = S->bench_batch.v[b], .n_threads = S->bench_threads.n ? S->bench_threads.v[h] : 0};
            for (int i = 0; i < P->n; i++)
                if (P->v[i] > 0) { t[n] = base; t[n++].n_prompt = P->v[i]; }
            for (int i = 0; i < G->n; i++)
                if (G->v[i] > 0) { t[n] = base; t[n++].n_gen = G->v[i]; }
            for (int i = 0; i + 1 < PG->n; i += 2) {
                t[n] = base;
                t[n].n_prompt = PG->v[i];
                t[n++].n_gen = PG->v[i + 1];
            }
        }
    for (int i = 0; i < n; i++)
        if (!(t[i].ns = calloc((size_t)reps, sizeof(uint64_t)))) {
            for (int k = 0; k < i; k++) free(t[k].ns);
            free(t);
            return NULL;
        }
    *n_out = n;
    return t;
}

static int parse_output(const df_settings *S, bool *ok) {
    static const char *names[] = {"md", "csv", "json", "jsonl"};
    *ok = true;
    if (S->json) return OUT_LEGACY;
    for (int i = 0; i < 4; i++)
        if (!strcmp(S->bench_output, names[i])) return i;
    *ok = false;
    return OUT_MD;
}

/* --json: deltafin's earlier object, every test in results[] */
static void print_legacy(const binfo *bi, const btest *t, int n, deltafin_model *m, deltafin_ctx *c, double load_s) {
    deltafin_stats st;
    deltafin_ctx_stats(c, &st);
    deltafin_stream_stats ss;
    deltafin_model_stream_stats(m, &ss);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", DELTAFIN_VERSION);
    cJSON_AddStringToObject(o, "commit", bi->commit);
    cJSON_AddStringToObject(o, "isa", bi->isa);
    cJSON_AddNumberToObject(o, "threads", deltafin_ctx_n_threads(c));
    cJSON_AddNumberToObject(o, "n_batch", deltafin_ctx_n_batch(c));
    cJSON_AddStringToObject(o, "experts", bi->residency);
    cJSON_AddStringToObject(o, "model", bi->model_path);
    cJSON_AddStringToObject(o, "arch", deltafin_model_arch(m));
    cJSON_AddNumberToObject(o, "model_bytes", (double)bi->size);
    cJSON_AddNumberToObject(o, "load_s", load_s);
    cJSON *arr = cJSON_AddArrayToObject(o, "results");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        char nm[48];
        test_name(&t[i], nm, sizeof nm);
        double avg, sd;
        mean_sd(&t[i], false, &avg, &sd);
        cJSON_AddStringToObject(e, "test", nm);
        cJSON_AddNumberToObject(e, "n_tokens", t[i].n_prompt + t[i].n_gen);
        cJSON_AddNumberToObject(e, "n_threads", t[i].n_threads);
        cJSON_AddNumberToObject(e, "n_batch", t[i].n_batch);
        cJSON_AddNumberToObject(e, "avg_ts", avg);
        cJSON_AddNumberToObject(e, "stddev_ts", sd);
        cJSON *s = cJSON_AddArrayToObject(e, "samples_ts");
        for (int k = 0; k < t[i].nr; k++) cJSON_AddItemToArray(s, cJSON_CreateNumber(ts_of(&t[i], k)));
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
}

/* md: what follows the table (the build, the last context's cache and streaming figures) */
static void print_md_tail(deltafin_model *m, deltafin_ctx *c, const binfo *bi) {
    printf("\nbuild: %s (deltafin %s)\n", bi->commit, DELTAFIN_VERSION); /* llama-bench's footer */
    deltafin_stats st;
    deltafin_ctx_stats(c, &st);
    deltafin_stream_stats ss;
    deltafin_model_stream_stats(m, &ss);
    char mb[32];
    const uint64_t acc = st.expert_hits + st.expert_misses;
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

static int list_max(const df_int_list *l, int dflt) {
    int mx = l->n ? l->v[0] : dflt;
    for (int i = 1; i < l->n; i++) mx = l->v[i] > mx ? l->v[i] : mx;
    return mx;
}

/* the options' own checks: 0, or the exit status */
static int check_args(const df_settings *S, int *fmt) {
    bool ok;
    *fmt = parse_output(S, &ok);
    if (!ok) return df_cli_usage_error(&k_bench, "-o: expected md, csv, json or jsonl, got '%s'", S->bench_output);
    if (S->json && df_cli_given(S, &k_bench, "--output"))
        return df_cli_usage_error(&k_bench, "use one of --json (deltafin's object) and -o");
    if (S->bench_pg.n % 2) return df_cli_usage_error(&k_bench, "-pg takes pairs PP,TG");
    for (int i = 0; i < S->bench_pg.n; i += 2)
        if (S->bench_pg.v[i] < 1 || S->bench_pg.v[i + 1] < 1)
            return df_cli_usage_error(&k_bench, "-pg %d,%d: both counts must be >= 1", S->bench_pg.v[i],
                                      S->bench_pg.v[i + 1]);
    for (int i = 0; i < S->bench_batch.n; i++)
        if (S->bench_batch.v[i] < 1) return df_cli_usage_error(&k_bench, "-b must be >= 1");
    return 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "kernels")) return bench_kernels_main(argc - 1, argv + 1);
    df_settings S;
    int prc = df_cli_parse(&k_bench, argc, argv, &S), fmt;
    if (prc != DF_CLI_GO) return prc;
    if (!S.model) {
        fprintf(stderr, "bench: -m MODEL is required\n\n");
        df_cli_help(&k_bench, stderr);
        return 2;
    }
    if ((prc = check_args(&S, &fmt))) return prc;
    const int reps = S.reps < 1 ? 1 : S.reps;
    int n_tests = 0, ret = 1;
    btest *tests = make_tests(&S, reps, &n_tests);
    if (!tests) { fprintf(stderr, "bench: out of memory\n"); return 1; }
    if (n_tests == 0) {
        free(tests);
        return df_cli_usage_error(&k_bench, "no test: -p, -n and -pg are all 0 or empty");
    }
    int max_tok = 16, max_p = 1;
    for (int i = 0; i < n_tests; i++) {
        max_tok = tests[i].n_prompt + tests[i].n_gen > max_tok ? tests[i].n_prompt + tests[i].n_gen : max_tok;
        max_p = tests[i].n_prompt > max_p ? tests[i].n_prompt : max_p;
    }
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    int32_t *toks = NULL;
    if (df_cli_log_begin(&k_bench, &S) != DF_CLI_GO) goto done;
    deltafin_model_params mp = df_cli_model_params(&S);
    mp.n_ctx = max_tok;                                  /* the longest test */
    mp.n_batch = list_max(&S.bench_batch, 512);          /* pp is measured at -b: the largest's scratch */
    mp.n_threads = list_max(&S.bench_threads, 0);
    const uint64_t tl = deltafin_time_ns();
    if (deltafin_model_load(S.model, &mp, &m) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); goto done; }
    const double load_s = (deltafin_time_ns() - tl) / 1e9;
    const int n_vocab = deltafin_model_n_vocab(m);
    const int nt = max_p > max_tok ? max_p : max_tok;
    toks = malloc(sizeof(int32_t) * (size_t)nt);
    if (!toks) goto done;
    uint32_t rng = 42;
    for (int i = 0; i < nt; i++) {
        rng = rng * 1664525u + 1013904223u;
        toks[i] = (int32_t)((rng >> 8) % (uint32_t)n_vocab);
    }
    if (deltafin_token_bos(m) >= 0) toks[0] = deltafin_token_bos(m);

    binfo bi = {.model_path = S.model, .commit = deltafin_commit(), .isa = deltafin_kernel_isa(),
                .size = deltafin_model_size(m), .n_params = deltafin_model_n_params(m),
                .type_k = deltafin_kv_type_name(S.cache_type_k), .type_v = deltafin_kv_type_name(S.cache_type_v)};
    deltafin_model_desc(m, bi.desc, sizeof bi.desc);
    cpu_name(bi.cpu, sizeof bi.cpu);
    deltafin_plan plan;
    deltafin_model_plan(m, &plan);
    bi.residency = plan.experts_stream ? "streamed" : plan.n_experts_total ? "resident" : "none";
    bi.streams = plan.experts_stream || plan.dense_layers_streamed > 0;
    col cols[C_COUNT];
    bool on[C_COUNT];
    md_cols(&bi, &S, cols, on);
    for (int i = 0; i < n_tests; i++) {
        btest *t = &tests[i];
        if (!c || t->n_batch != tests[i - 1].n_batch || t->n_threads != tests[i - 1].n_threads) {
            deltafin_ctx_free(c); /* one context at a time: the plan holds one */
            c = NULL;
            deltafin_ctx_params cp = df_cli_ctx_params(&S);
            cp.n_ctx = max_tok;
            cp.n_batch = t->n_batch;
            cp.n_threads = t->n_threads;
            if (deltafin_ctx_create(m, &cp, &c) < 0) { fprintf(stderr, "bench: %s\n", deltafin_errmsg()); goto done; }
            if (df_cli_apply_routing(&k_bench, &S, c)) goto done;
        }
        t->n_threads = deltafin_ctx_n_threads(c);
        t->n_batch = deltafin_ctx_n_batch(c);
        if (fmt == OUT_MD && i == 0) {
            char mb[32];
            printf("deltafin %s | commit %s | ISA %s | threads %d | batch %d | experts %s | model %s (%s, %s, load %.2f s)\n",
                   DELTAFIN_VERSION, bi.commit, bi.isa, t->n_threads, t->n_batch, bi.residency, S.model,
                   deltafin_model_arch(m), deltafin_fmt_bytes(bi.size, mb, sizeof mb), load_s);
            md_header(cols, on);
        }
        if (run_test(c, t, reps, toks, nt)) goto done;
        if (fmt == OUT_MD) md_row(cols, on, &bi, t);
        else if (fmt != OUT_LEGACY) print_row(fmt, &bi, t, i == 0);
        fflush(stdout);
    }
    if (fmt == OUT_JSON) printf("\n]\n");
    else if (fmt == OUT_MD) print_md_tail(m, c, &bi);
    else if (fmt == OUT_LEGACY) print_legacy(&bi, tests, n_tests, m, c, load_s);
    ret = 0;
done:
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    free(toks);
    for (int i = 0; i < n_tests; i++) free(tests[i].ns);
    free(tests);
    df_cli_log_end(&S);
    return ret;
}
