/* dist.c — the CLI under mpirun (dist.h, docs/distributed.md). Ranks > 0 read only the flags
 * that say how to hold their share of the experts (model, --config, memory limit, cache size,
 * I/O engine, prefetch, hot set, threads, logging) from the same command line rank 0 runs,
 * so `mpirun -np 4 deltafin run -m M.gguf --mem-limit 8G -p ...` needs nothing else; per-rank
 * values come from mpirun's MPMD form (`-np 1 deltafin ... : -np 3 deltafin ... --mem-limit 4G`).
 * The --dist-* flags are removed before the subcommand parses its argv. */
#include "app/cli/dist.h"
#include "app/config.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void drop(int *argc, char **argv, int i, int n) {
    for (int j = i; j + n < *argc; j++) argv[j] = argv[j + n];
    *argc -= n;
    argv[*argc] = NULL;
}

/* --dist-timeout SEC, --dist-placement FILE (also --flag=value); exit 2 on a bad value */
static int take_dist_flags(int *argc, char **argv, deltafin_dist_params *p) {
    for (int i = 1; i < *argc;) {
        const char *a = argv[i], *v = NULL;
        int n = 1;
        size_t k = 0;
        if (!strncmp(a, "--dist-timeout", k = 14) || !strncmp(a, "--dist-placement", k = 16)) {
            if (a[k] == '=') v = a + k + 1;
            else if (!a[k] && i + 1 < *argc) { v = argv[i + 1]; n = 2; }
            else if (!a[k]) { fprintf(stderr, "deltafin: %s needs a value\n", a); return 2; }
            else { i++; continue; }
        } else { i++; continue; }
        if (k == 14) {
            char *end = NULL;
            double s = strtod(v, &end);
            if (!*v || *end || !(s > 0)) { fprintf(stderr, "deltafin: --dist-timeout: expected seconds > 0, got '%s'\n", v); return 2; }
            p->timeout_s = s;
        } else {
            p->placement = v;
        }
        drop(argc, argv, i, n);
    }
    return 0;
}

/* The worker's model parameters from the command line (the same flags the commands read). */
static int worker_params(int argc, char **argv, const char **model, deltafin_model_params *mp, df_config *cfg) {
    const char *cp = df_config_find_arg(argc, argv);
    if (cp) {
        if (df_config_load(cp, cfg) < 0) { fprintf(stderr, "deltafin: %s\n", deltafin_errmsg()); return 2; }
        if (cfg->set & DF_CFG_MODEL_PATH) *model = cfg->model_path;
        if (cfg->set & DF_CFG_THREADS) mp->n_threads = cfg->threads;
        if (cfg->set & DF_CFG_MEM_LIMIT) mp->mem_limit = cfg->memory_limit;
        if (cfg->set & DF_CFG_MEM_RESERVE) mp->mem_reserve = cfg->memory_reserve;
        if (cfg->set & DF_CFG_IO_ENGINE) mp->io_engine = cfg->io_engine;
        if (cfg->set & DF_CFG_CACHE_SIZE) mp->cache_bytes = cfg->cache_size;
        if (cfg->set & DF_CFG_PRELOAD) mp->preload = cfg->preload_experts;
        if (cfg->set & DF_CFG_HOT_SET) mp->hot_file = cfg->hot_set;
        if (cfg->set & DF_CFG_PREFETCH) mp->prefetch = cfg->prefetch;
    }
    int level = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s, l) ((!strcmp(a, s) || !strcmp(a, l)) && v && (i++, 1))
        int bad = 0;
        if (IS("-m", "--model")) *model = v;
        else if (IS("-t", "--threads")) mp->n_threads = atoi(v);
        else if (IS("--mem-limit", "--mem_limit")) bad = deltafin_parse_size(v, &mp->mem_limit) < 0;
        else if (IS("--mem-reserve", "--mem_reserve")) bad = deltafin_parse_size(v, &mp->mem_reserve) < 0;
        else if (IS("--cache-size", "--cache_size")) bad = deltafin_parse_size(v, &mp->cache_bytes) < 0;
        else if (IS("--io", "--io-engine")) { mp->io_engine = v; bad = deltafin_io_engine_check(v) < 0; }
        else if (IS("--prefetch", "--prefetch")) bad = deltafin_prefetch_parse(v, &mp->prefetch) < 0;
        else if (IS("--hot", "--hot")) mp->hot_file = v;
        else if (IS("--preload", "--preload")) mp->preload = v;
        else if (IS("--log-level", "--log_level")) {
            static const char *lv[] = {"error", "warn", "info", "debug"};
            for (int k = 0; k < 4; k++) if (!strcmp(v, lv[k])) level = k;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            if (level < DELTAFIN_LOG_INFO) level = DELTAFIN_LOG_INFO;
        }
#undef IS
        if (bad) { fprintf(stderr, "deltafin[rank %d]: %s\n", deltafin_dist_rank(), deltafin_errmsg()); return 2; }
    }
    if (level >= 0) deltafin_log_set_level(level);
    return 0;
}

int df_cli_dist_start(int *argc, char **argv) {
    deltafin_dist_params p = deltafin_dist_default_params();
    int rc = take_dist_flags(argc, argv, &p);
    if (rc) return rc;
    if (deltafin_dist_init(NULL, NULL, &p) < 0) {
        fprintf(stderr, "deltafin: %s\n", deltafin_errmsg());
        return 1;
    }
    if (deltafin_dist_rank() == 0) return -1;
    const char *model = NULL;
    deltafin_model_params mp = deltafin_model_default_params();
    df_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return 1;
    df_config_init(cfg);
    rc = worker_params(*argc, argv, &model, &mp, cfg);
    if (rc == 0) {
        rc = deltafin_dist_worker(model, &mp) < 0 ? 1 : 0;
        if (rc) fprintf(stderr, "deltafin[rank %d]: %s\n", deltafin_dist_rank(), deltafin_errmsg());
    }
    free(cfg);
    return deltafin_dist_finalize(rc);
}

int df_cli_dist_end(int status) { return deltafin_dist_finalize(status); }

static double mib(double b) { return b / 1048576.0; }

void df_cli_dist_report(deltafin_model *m, FILE *f, void *json) {
    deltafin_dist_stats st;
    if (!m || deltafin_model_dist_stats(m, &st) < 0) return;
    if (json) {
        char *s = deltafin_model_dist_json(m);
        cJSON *o = s ? cJSON_Parse(s) : NULL;
        if (o) cJSON_AddItemToObject((cJSON *)json, "dist", o);
        free(s);
    }
    if (!f) return;
    const double ex = st.exchanges ? (double)st.exchanges : 1.0;
    fprintf(f, "dist: %d ranks (%s), %llu layer exchanges: %.2f MiB out, %.2f MiB in | per exchange: rtt %.3f ms, "
               "comm %.3f ms, rank 0 waited %.3f ms\n",
            st.n_rank, st.placement, (unsigned long long)st.exchanges, mib((double)st.bytes_out), mib((double)st.bytes_in),
            st.rtt_ns / ex / 1e6, st.comm_ns / ex / 1e6, st.wait_ns / ex / 1e6);
    fprintf(f, "dist per layer: layer  calls   out MiB    in MiB   rtt ms  comm ms  wait ms   (sums)\n");
    for (int l = 0; l < deltafin_model_n_layer(m); l++) {
        uint64_t c, bo, bi, r, w, cm;
        if (deltafin_model_dist_layer_stats(m, l, &c, &bo, &bi, &r, &w, &cm) < 0 || !c) continue;
        fprintf(f, "               %5d %6llu %9.3f %9.3f %8.2f %8.2f %8.2f\n", l, (unsigned long long)c, mib((double)bo),
                mib((double)bi), r / 1e6, cm / 1e6, w / 1e6);
    }
    const int n = deltafin_dist_size();
    deltafin_dist_rank_stats *rs = calloc((size_t)n, sizeof *rs);
    if (rs && deltafin_model_dist_rank_stats(m, rs, n) == n)
        for (int r = 0; r < n; r++) {
            const deltafin_dist_rank_stats *x = &rs[r];
            const uint64_t acc = x->hits + x->misses;
            fprintf(f, "dist rank %d (%s): %llu expert pairs, %llu requests, %llu rows, busy %.3f s | %d slots, hit %.1f%%, "
                       "read %.2f MiB at %.2f GB/s, I/O wait %.3f s\n",
                    r, x->host, (unsigned long long)x->pairs, (unsigned long long)x->requests, (unsigned long long)x->rows,
                    x->busy_ns / 1e9, x->n_slots, acc ? 100.0 * (double)x->hits / (double)acc : 0.0,
                    mib((double)x->bytes_read), x->read_gbps, x->wait_ns / 1e9);
        }
    free(rs);
}
