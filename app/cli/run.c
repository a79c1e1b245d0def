/* run.c — `deltafin run`: generate text from a prompt, streaming it to stdout as tokens are
 * produced (streaming detokenizer), with llama.cpp's sampler chain and prompt tokenization
 * (llama-completion: add BOS per the vocab, parse special tokens). Stops at an end-of-
 * generation token, after -n tokens, or when the context is full. A stats line goes to
 * stderr; --json prints one JSON object at the end instead of streaming. */
#include "app/cli/cli_args.h"
#include "app/cli/sampling_args.h"
#include "app/cli/load_progress.h"
#include "deltafin.h"
#include "text/tokenizer.h"
#include "model/model.h"
#include "runtime/plan.h"
#include "weights/expert_store.h"
#include "base/util.h"
#include "app/config.h"
#include "app/cli/dist.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin run -m MODEL (-p PROMPT | -f FILE) [options]\n"
        "  --config FILE           deltafin.yaml settings (docs/operations.md); flags override it\n"
        "  -m, --model FILE        GGUF model\n"
        "  -p, --prompt TEXT       prompt\n"
        "  -f, --file FILE         read the prompt from a file\n"
        "  -n, --n-predict N       tokens to generate (default -1: until EOG or context full)\n"
        "  -t, --threads N         threads (default: all cores)\n"
        "  -c, --ctx-size N        context size (default: min(training context, 4096))\n"
        "  -b, --batch-size N      prompt tokens per forward step (default 512)\n"
        "  --temp T                temperature (default 0.8; 0 = greedy)\n"
        "  --top-k N               top-k (default 40; 0 = off)\n"
        "  --top-p P               top-p (default 0.95; 1 = off)\n"
        "  --min-p P               min-p (default 0.05; 0 = off)\n"
        "  --repeat-penalty X      repetition penalty (default 1.0 = off)\n"
        "  --repeat-last-n N       penalty window (default 64)\n"
        "  -s, --seed N            sampler seed (default: random)\n"
        "  --special               print special (control) tokens' text\n"
        "  --json                  print one JSON object at the end:\n"
        "                          {\"prompt_tokens\":[...],\"tokens\":[...],\"text\":\"...\",\"stats\":{...}}\n"
        "  --mem-limit SIZE        memory limit for the process (e.g. 16G; default: available RAM)\n"
        "  --mem-reserve SIZE      with no --mem-limit: RAM left to the OS (default 1G)\n"
        "  --cache-size SIZE       expert cache bytes (default: what --mem-limit leaves)\n"
        "  --io ENGINE             expert reads: auto | pread | direct | uring | mmap (default auto;\n"
        "                          any other than auto streams routed experts from disk)\n"
        "  --prefetch MODE         auto | on | off: read a layer's routed experts ahead, and the next\n"
        "                          layer's predicted experts (router look-ahead; auto: when measured\n"
        "                          to pay, see docs/streaming.md) (default auto)\n"
        "  --hot FILE              pin the most used experts (\"layer expert count\" lines, from\n"
        "                          deltafin profile) in the expert cache\n"
        "  --preload L:E,...       pin these experts in the expert cache\n"
        "  -v, --verbose           print the memory plan and expert-cache statistics\n"
        "  --stats-file FILE       append one JSON line every --stats-every tokens and one at the end:\n"
        "                          tok/s, RSS, expert cache bytes and hit rate, SSD MB/s, compute/I/O split\n"
        "  --stats-every N         tokens between stats lines (default 16)\n"
        "  --log-file FILE         write log messages to FILE instead of stderr\n"
        "  --log-level LEVEL       error | warn | info | debug (default warn; -v = info)\n"
        "  --log-prompts           also log the prompt and the generated text (never logged otherwise)\n"
        "  -h, --help              this help\n");
}

/* --stats-file: one JSON object per line. Rates are over the window since the previous line
 * (tok_s, ssd_mb_s, io_frac) so a slowdown shows when it happens; counters are cumulative. */
typedef struct {
    FILE *f;
    deltafin_ctx *c;
    deltafin_model *m;
    uint64_t t0, t_prev;
    int gen_prev;
    uint64_t bytes_prev, io_prev, comp_prev;
} run_stats;

static void stats_line(run_stats *rs, const char *phase, int n_prompt, int n_gen, bool final) {
    const uint64_t now = df_time_ns();
    deltafin_stats st;
    deltafin_ctx_stats(rs->c, &st);
    deltafin_stream_stats ss;
    deltafin_model_stream_stats(rs->m, &ss);
    const double dt = (double)(now - (rs->t_prev ? rs->t_prev : rs->t0)) / 1e9;
    const uint64_t dbytes = st.bytes_read - rs->bytes_prev;
    const uint64_t dio = st.io_wait_ns - rs->io_prev, dcomp = st.compute_ns - rs->comp_prev;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "phase", phase);
    cJSON_AddNumberToObject(o, "t", (double)(now - rs->t0) / 1e9);
    cJSON_AddNumberToObject(o, "n_prompt", n_prompt);
    cJSON_AddNumberToObject(o, "n_gen", n_gen);
    cJSON_AddNumberToObject(o, "tok_s", dt > 0 && n_gen > rs->gen_prev ? (n_gen - rs->gen_prev) / dt : 0);
    cJSON_AddNumberToObject(o, "gen_tok_s_avg", st.gen_ns ? st.n_gen_tokens / (st.gen_ns / 1e9) : 0);
    cJSON_AddNumberToObject(o, "rss_bytes", (double)df_cur_rss());
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)df_peak_rss());
    cJSON_AddBoolToObject(o, "streaming", ss.experts_stream);
    cJSON_AddNumberToObject(o, "expert_cache_bytes", (double)ss.cache_bytes);
    cJSON_AddNumberToObject(o, "expert_hits", (double)st.expert_hits);
    cJSON_AddNumberToObject(o, "expert_misses", (double)st.expert_misses);
    const uint64_t acc = st.expert_hits + st.expert_misses;
    cJSON_AddNumberToObject(o, "expert_hit_rate", acc ? (double)st.expert_hits / (double)acc : 0);
    cJSON_AddNumberToObject(o, "bytes_read", (double)st.bytes_read);
    cJSON_AddNumberToObject(o, "dense_bytes_read", (double)st.dense_bytes_read);
    cJSON_AddNumberToObject(o, "ssd_mb_s", dt > 0 ? dbytes / dt / 1e6 : 0);
    cJSON_AddNumberToObject(o, "compute_s", dcomp / 1e9);
    cJSON_AddNumberToObject(o, "io_wait_s", dio / 1e9);
    cJSON_AddNumberToObject(o, "io_frac", dio + dcomp ? (double)dio / (double)(dio + dcomp) : 0);
    if (ss.experts_stream) {
        cJSON_AddNumberToObject(o, "lookahead_accuracy", ss.lookahead_accuracy);
        cJSON_AddNumberToObject(o, "lookahead_reads", (double)ss.lookahead_issued);
    }
    if (final) cJSON_AddBoolToObject(o, "final", true);
    char *s = cJSON_PrintUnformatted(o);
    if (s) { fputs(s, rs->f); fputc('\n', rs->f); fflush(rs->f); free(s); }
    cJSON_Delete(o);
    rs->t_prev = now;
    rs->gen_prev = n_gen;
    rs->bytes_prev = st.bytes_read;
    rs->io_prev = st.io_wait_ns;
    rs->comp_prev = st.compute_ns;
}

static volatile sig_atomic_t g_stop;
static deltafin_ctx *g_ctx;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
    if (g_ctx) deltafin_ctx_cancel(g_ctx);
}

int cmd_run(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *pfile = NULL;
    int n_predict = -1, n_threads = 0, n_ctx = 0, n_batch = 512;
    bool special = false, json = false;
    uint64_t mem_limit = 0, mem_reserve = 0;
    const char *io_engine = NULL, *hot = NULL, *preload = NULL;
    int prefetch = -1;
    bool verbose = false, log_prompts = false;
    const char *stats_path = NULL, *log_path = NULL;
    int stats_every = 16, log_level = -1;
    deltafin_sampler_params sp = deltafin_sampler_default_params();
    const char *cache_size = NULL;
    char cache_buf[32];
    df_config cfg;
    df_config_init(&cfg);
    const char *cfg_path = df_config_find_arg(argc, argv);
    if (cfg_path) {
        /* The file gives defaults; the flags below override them. */
        if (df_config_load(cfg_path, &cfg) < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); return 2; }
        if (cfg.set & DF_CFG_MODEL_PATH) model = cfg.model_path;
        if (cfg.set & DF_CFG_BATCH_SIZE) n_batch = cfg.batch_size;
        if (cfg.set & DF_CFG_MAX_SEQ_LEN) n_ctx = cfg.max_seq_len;
        if (cfg.set & DF_CFG_TEMP) sp.temp = cfg.temperature;
        if (cfg.set & DF_CFG_TOP_K) sp.top_k = cfg.top_k;
        if (cfg.set & DF_CFG_TOP_P) sp.top_p = cfg.top_p;
        if (cfg.set & DF_CFG_MIN_P) sp.min_p = cfg.min_p;
        if (cfg.set & DF_CFG_SEED) sp.seed = cfg.seed;
        if (cfg.set & DF_CFG_REPEAT_PENALTY) sp.repeat_penalty = cfg.repeat_penalty;
        if (cfg.set & DF_CFG_THREADS) n_threads = cfg.threads;
        if (cfg.set & DF_CFG_MEM_LIMIT) mem_limit = cfg.memory_limit;
        if (cfg.set & DF_CFG_MEM_RESERVE) mem_reserve = cfg.memory_reserve;
        if (cfg.set & DF_CFG_IO_ENGINE) io_engine = cfg.io_engine;
        if (cfg.set & DF_CFG_CACHE_SIZE) {
            snprintf(cache_buf, sizeof cache_buf, "%llu", (unsigned long long)cfg.cache_size);
            cache_size = cache_buf;
        }
        if (cfg.set & DF_CFG_PRELOAD) preload = cfg.preload_experts;
        if (cfg.set & DF_CFG_HOT_SET) hot = cfg.hot_set;
        if (cfg.set & DF_CFG_PREFETCH) prefetch = cfg.prefetch;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
#define ARG(s, l) ((!strcmp(a, s) || !strcmp(a, l)) && more)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (ARG("--config", "--config")) i++; /* read above */
        else if (!strncmp(a, "--config=", 9)) {}
        else if (ARG("-m", "--model")) model = argv[++i];
        else if (ARG("-p", "--prompt")) prompt = argv[++i];
        else if (ARG("-f", "--file")) pfile = argv[++i];
        else if (ARG("-n", "--n-predict")) n_predict = df_cli_int(argv, &i);
        else if (ARG("-t", "--threads")) n_threads = df_cli_int(argv, &i);
        else if (ARG("-c", "--ctx-size")) n_ctx = df_cli_int(argv, &i);
        else if (ARG("-b", "--batch-size")) n_batch = df_cli_int(argv, &i);
        else if (df_sampling_arg(argc, argv, &i, &sp)) {}
        else if (ARG("--mem-limit", "--mem_limit")) {
            if (df_parse_size(argv[++i], &mem_limit) < 0) {
                fprintf(stderr, "run: bad --mem-limit '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (ARG("--mem-reserve", "--mem_reserve")) {
            if (df_parse_size(argv[++i], &mem_reserve) < 0) {
                fprintf(stderr, "run: bad --mem-reserve '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (ARG("--cache-size", "--cache_size")) {
            uint64_t cb;
            cache_size = argv[++i];
            if (df_parse_size(cache_size, &cb) < 0) { fprintf(stderr, "run: bad --cache-size '%s'\n", cache_size); return 2; }
        }
        else if (ARG("--io", "--io-engine")) {
            int e;
            io_engine = argv[++i];
            if (df_io_engine_parse(io_engine, &e) < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); return 2; }
        }
        else if (ARG("--prefetch", "--prefetch")) {
            if (df_prefetch_parse(argv[++i], &prefetch) < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); return 2; }
        }
        else if (ARG("--hot", "--hot")) hot = argv[++i];
        else if (ARG("--preload", "--preload")) preload = argv[++i];
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) verbose = true;
        else if (ARG("--stats-file", "--stats_file")) stats_path = argv[++i];
        else if (ARG("--stats-every", "--stats_every")) {
            stats_every = df_cli_int(argv, &i);
            if (stats_every < 1) { fprintf(stderr, "run: --stats-every must be >= 1\n"); return 2; }
        }
        else if (ARG("--log-file", "--log_file")) log_path = argv[++i];
        else if (ARG("--log-level", "--log_level")) {
            static const char *lv[] = {"error", "warn", "info", "debug"};
            const char *v = argv[++i];
            for (int k = 0; k < 4; k++) if (!strcmp(v, lv[k]) || (v[0] == '0' + k && !v[1])) log_level = k;
            if (log_level < 0) { fprintf(stderr, "run: --log-level must be error, warn, info or debug\n"); return 2; }
        }
        else if (!strcmp(a, "--log-prompts")) log_prompts = true;
        else if (!strcmp(a, "--special")) special = true;
        else if (!strcmp(a, "--json")) json = true;
        else {
            fprintf(stderr, "run: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    if (!model || (!prompt && !pfile)) {
        fprintf(stderr, "run: -m MODEL and -p PROMPT (or -f FILE) are required\n");
        usage(stderr);
        return 2;
    }
    char *ptext = NULL;
    size_t plen = 0;
    if (pfile) {
        if (df_read_file(pfile, &ptext, &plen) < 0) {
            fprintf(stderr, "run: %s\n", deltafin_errmsg());
            return 1;
        }
    } else {
        ptext = df_strdup(prompt);
        plen = strlen(prompt);
    }
    int ret = 1;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    deltafin_sampler *smp = NULL;
    int32_t *pids = NULL, *gen = NULL;
    char *text = NULL;
    size_t text_len = 0, text_cap = 0;

    FILE *log_f = NULL, *stats_f = NULL;
    if (log_path) {
        log_f = fopen(log_path, "a");
        if (!log_f) { fprintf(stderr, "run: --log-file %s: %s\n", log_path, strerror(errno)); goto done; }
        setvbuf(log_f, NULL, _IOLBF, 0);
        df_log_set_file(log_f);
    }
    if (stats_path) {
        stats_f = fopen(stats_path, "w");
        if (!stats_f) { fprintf(stderr, "run: --stats-file %s: %s\n", stats_path, strerror(errno)); goto done; }
    }
    if (log_level >= 0) df_log_set_level(log_level);
    if (log_prompts && df_log_get_level() < DF_LOG_INFO) df_log_set_level(DF_LOG_INFO);

    deltafin_model_params mp = deltafin_model_default_params();
    df_load_progress load_progress = {0};
    mp.progress_cb = df_load_progress_cb;
    mp.progress_ud = &load_progress;
    mp.n_threads = n_threads;
    mp.mem_limit = mem_limit;
    mp.mem_reserve = mem_reserve;
    if (io_engine) mp.io_engine = io_engine;
    /* the memory plan sizes the expert cache exactly from this (src/runtime/plan.c) */
    if (cache_size && df_parse_size(cache_size, &mp.cache_bytes) < 0) { fprintf(stderr, "run: bad --cache-size '%s'\n", cache_size); goto done; }
    if (prefetch >= 0) mp.prefetch = prefetch;
    mp.hot_file = hot;
    mp.preload = preload;
    if (verbose && log_level < 0 && df_log_get_level() < DF_LOG_INFO) df_log_set_level(DF_LOG_INFO);
    int rc = deltafin_model_load(model, &mp, &m);
    if (rc < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); goto done; }
    if (!m->tokenizer) {
        fprintf(stderr, "run: model has no tokenizer\n");
        goto done;
    }
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = n_threads;
    rc = deltafin_ctx_create(m, &cp, &c);
    if (rc < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); goto done; }
    g_ctx = c;
    signal(SIGINT, on_sigint);

    int np = deltafin_tokenize(m, ptext, plen, true, true, NULL, 0);
    if (np < 0) { fprintf(stderr, "run: tokenize: %s\n", deltafin_errmsg()); goto done; }
    pids = malloc(sizeof(int32_t) * (size_t)(np > 0 ? np : 1));
    if (!pids) goto done;
    np = deltafin_tokenize(m, ptext, plen, true, true, pids, np);
    if (np <= 0) { fprintf(stderr, "run: empty prompt\n"); goto done; }
    if (log_prompts) df_log(DF_LOG_INFO, "prompt (%d tokens): %.*s", np, (int)plen, ptext);
    const int nctx = deltafin_ctx_n_ctx(c);
    if (np > nctx) { fprintf(stderr, "run: prompt has %d tokens, context is %d (use -c)\n", np, nctx); goto done; }
    smp = deltafin_sampler_create(&sp);
    if (!smp) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); goto done; }
    for (int i = 0; i < np; i++) deltafin_sampler_accept(smp, pids[i]);
    const int n_vocab = deltafin_model_n_vocab(m);
    const int max_gen = n_predict >= 0 ? n_predict : nctx - np + 1;
    gen = malloc(sizeof(int32_t) * (size_t)(max_gen > 0 ? max_gen : 1));
    if (!gen) goto done;
    int n_gen = 0;

    uint64_t t0 = df_time_ns();
    rc = deltafin_decode(c, pids, np, false);
    uint64_t t_prompt = df_time_ns() - t0;
    if (rc < 0) { fprintf(stderr, "\nrun: decode: %s\n", deltafin_errmsg()); goto done; }
    run_stats rs = {.f = stats_f, .c = c, .m = m, .t0 = t0};
    if (stats_f) stats_line(&rs, "prompt", np, 0, false);
    df_detok dt;
    df_detok_init(&dt, special, false);
    char piece[1024];
    uint64_t t1 = df_time_ns();
    bool failed = false;
    while (n_gen < max_gen && !g_stop) {
        const float *lg = deltafin_logits(c, -1);
        int32_t id = deltafin_sampler_sample(smp, lg, n_vocab);
        deltafin_sampler_accept(smp, id);
        if (deltafin_token_is_eog(m, id)) break;
        gen[n_gen++] = id;
        int n = df_detok_push(&dt, m->tokenizer, id, piece, (int)sizeof piece);
        if (n > 0) {
            if (!json) { fwrite(piece, 1, (size_t)n, stdout); fflush(stdout); }
            if (text_len + (size_t)n + 1 > text_cap) {
                text_cap = (text_len + (size_t)n + 1) * 2;
                char *nt = realloc(text, text_cap);
                if (!nt) goto done;
                text = nt;
            }
            memcpy(text + text_len, piece, (size_t)n);
            text_len += (size_t)n;
        }
        if (stats_f && n_gen % stats_every == 0) stats_line(&rs, "gen", np, n_gen, false);
        if (n_gen >= max_gen || deltafin_ctx_pos(c) >= nctx) break;
        rc = deltafin_decode(c, &id, 1, false);
        if (rc < 0) {
            if (rc != DF_ERR_CANCELLED) { fprintf(stderr, "\nrun: decode: %s\n", deltafin_errmsg()); failed = true; }
            break;
        }
    }
    uint64_t t_gen = df_time_ns() - t1;
    int n = df_detok_flush(&dt, piece, (int)sizeof piece);
    if (n > 0) {
        if (!json) fwrite(piece, 1, (size_t)n, stdout);
        if (text_len + (size_t)n + 1 > text_cap) {
            text_cap = text_len + (size_t)n + 1;
            char *nt = realloc(text, text_cap);
            if (!nt) goto done;
            text = nt;
        }
        memcpy(text + text_len, piece, (size_t)n);
        text_len += (size_t)n;
    }
    if (!json) { fputc('\n', stdout); fflush(stdout); }
    if (!text) text = df_strdup("");
    else text[text_len] = 0;

    if (stats_f) stats_line(&rs, "end", np, n_gen, true);
    if (log_prompts) df_log(DF_LOG_INFO, "output (%d tokens): %s", n_gen, text);
    double pps = t_prompt ? np / (t_prompt / 1e9) : 0.0;
    double gps = t_gen && n_gen ? n_gen / (t_gen / 1e9) : 0.0;
    uint64_t peak = df_peak_rss();
    char pb[32];
    deltafin_stats st;
    deltafin_ctx_stats(c, &st);
    fprintf(stderr, "prompt: %d tokens, %.2f tok/s | generation: %d tokens, %.2f tok/s | peak memory: %s\n",
            np, pps, n_gen, gps, df_fmt_bytes(peak, pb, sizeof pb));
    deltafin_stream_stats sst;
    deltafin_model_stream_stats(m, &sst);
    if (verbose && sst.experts_stream) {
        char sb[640];
        fprintf(stderr, "%s\n", deltafin_stream_stats_str(&sst, sb, sizeof sb));
        /* per layer: where the misses and the waiting happened */
        fprintf(stderr, "per layer:   layer     hits   misses    hit%%   I/O wait s\n");
        for (int l = 0; l < deltafin_model_n_layer(m); l++) {
            uint64_t h = 0, mi = 0, w = 0;
            if (deltafin_model_layer_stats(m, l, &h, &mi, &w) != DF_OK || h + mi == 0) continue;
            fprintf(stderr, "             %5d %8llu %8llu %6.1f%% %12.3f\n", l, (unsigned long long)h,
                    (unsigned long long)mi, 100.0 * (double)h / (double)(h + mi), (double)w / 1e9);
        }
    }
    if (!json) df_cli_dist_report(m, verbose ? stderr : NULL, NULL); /* several ranks: communication */
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON *pa = cJSON_AddArrayToObject(o, "prompt_tokens");
        for (int i = 0; i < np; i++) cJSON_AddItemToArray(pa, cJSON_CreateNumber(pids[i]));
        cJSON *ta = cJSON_AddArrayToObject(o, "tokens");
        for (int i = 0; i < n_gen; i++) cJSON_AddItemToArray(ta, cJSON_CreateNumber(gen[i]));
        cJSON_AddStringToObject(o, "text", text);
        cJSON *so = cJSON_AddObjectToObject(o, "stats");
        cJSON_AddNumberToObject(so, "n_prompt", np);
        cJSON_AddNumberToObject(so, "n_gen", n_gen);
        cJSON_AddNumberToObject(so, "prompt_tok_s", pps);
        cJSON_AddNumberToObject(so, "gen_tok_s", gps);
        cJSON_AddNumberToObject(so, "peak_rss", (double)peak);
        cJSON_AddNumberToObject(so, "expert_hits", (double)st.expert_hits);
        cJSON_AddNumberToObject(so, "expert_misses", (double)st.expert_misses);
        cJSON_AddNumberToObject(so, "bytes_read", (double)st.bytes_read);
        cJSON_AddNumberToObject(so, "dense_bytes_read", (double)st.dense_bytes_read);
        char *sj = deltafin_stream_stats_json(&sst); /* expert streaming: cache, I/O, prefetch, look-ahead */
        if (sj) {
            cJSON *sto = cJSON_Parse(sj);
            if (sto) cJSON_AddItemToObject(so, "stream", sto);
            free(sj);
        }
        df_cli_dist_report(m, verbose ? stderr : NULL, so);
        char *s = cJSON_PrintUnformatted(o);
        if (s) { fputs(s, stdout); fputc('\n', stdout); free(s); }
        cJSON_Delete(o);
    }
    ret = failed ? 1 : 0;
done:
    if (stats_f && fclose(stats_f)) fprintf(stderr, "run: --stats-file %s: %s\n", stats_path, strerror(errno));
    if (log_f) { df_log_set_file(stderr); fclose(log_f); }
    g_ctx = NULL;
    signal(SIGINT, SIG_DFL);
    deltafin_sampler_free(smp);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    free(pids);
    free(gen);
    free(text);
    free(ptext);
    return ret;
}
