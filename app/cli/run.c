/* run.c — `deltafin run`: generate text from a prompt, streaming it to stdout as tokens are
 * produced (streaming detokenizer), with llama.cpp's sampler chain and prompt tokenization
 * (llama-completion: add BOS per the vocab, parse special tokens). Stops at an end-of-
 * generation token, after -n tokens, or when the context is full. A stats line goes to
 * stderr; --json prints one JSON object at the end instead of streaming. */
#include "app/cli/flags.h"
#include "app/cli/load_progress.h"
#include "app/cli/textbuf.h"
#include "deltafin.h"
#include "app/config.h"
#include "app/cli/dist.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const df_cmd k_run = {
    DF_CMD_RUN, "run", "usage: deltafin run -m MODEL (-p PROMPT | -f FILE) [options]",
    "Generate text from a prompt, streamed to stdout as it is produced.", 
    "--json prints one JSON object at the end instead of the streamed text:\n"
    "  {\"prompt_tokens\":[...],\"tokens\":[...],\"text\":\"...\",\"stats\":{...}}", 0};

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
    const uint64_t now = deltafin_time_ns();
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
    cJSON_AddNumberToObject(o, "rss_bytes", (double)deltafin_cur_rss());
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)deltafin_peak_rss());
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

/* "stream": the expert store's statistics object, when experts stream */
static void add_stream_json(cJSON *parent, const deltafin_stream_stats *ss) {
    char *txt = deltafin_stream_stats_json(ss);
    cJSON *sto = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (sto) cJSON_AddItemToObject(parent, "stream", sto);
}

static volatile sig_atomic_t g_stop;
static deltafin_ctx *g_ctx;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
    if (g_ctx) deltafin_ctx_cancel(g_ctx);
}

/* the prompt text: -p, or the whole of -f FILE */
static int read_prompt(const df_settings *S, char **text, size_t *len) {
    if (S->file) {
        if (deltafin_read_file(S->file, text, len) < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); return -1; }
        return 0;
    }
    /* -p: llama.cpp's escapes (\n ...) unless --no-escape; -f is taken as it is */
    if (!(*text = strdup(S->prompt))) return -1;
    if (S->escape || !S->no_escape) df_cli_unescape(*text);
    *len = strlen(*text);
    return 0;
}

typedef struct {
    deltafin_model *m;
    deltafin_ctx *c;
    deltafin_sampler *smp;
    deltafin_detok *dt;
    bool json;                  /* keep the text (printed at the end) instead of streaming it */
    int max_gen, nctx, np, stats_every;
    run_stats *rs;              /* --stats-file, or NULL */
} gen_loop;

/* Sample, stream and decode until an end-of-generation token, max_gen tokens, the full
 * context, Ctrl-C or an error (*failed). The ids go to gen, the text (whole characters) to
 * text. Returns the number of tokens, -1 when out of memory. */
static int generate(const gen_loop *g, int32_t *gen, df_textbuf *text, bool *failed) {
    const int n_vocab = deltafin_model_n_vocab(g->m);
    const char *piece;
    int n_gen = 0;
    *failed = false;
    while (n_gen < g->max_gen && !g_stop) {
        const float *lg = deltafin_logits(g->c, -1);
        int32_t id = deltafin_sampler_sample(g->smp, lg, n_vocab);
        if (id < 0) { fprintf(stderr, "\nrun: %s\n", deltafin_errmsg()); *failed = true; break; }
        deltafin_sampler_accept(g->smp, id);
        if (deltafin_token_is_eog(g->m, id)) break;
        gen[n_gen++] = id;
        int n = deltafin_detok_push(g->dt, id, &piece);
        if (n > 0) {
            if (!g->json) { fwrite(piece, 1, (size_t)n, stdout); fflush(stdout); }
            if (df_textbuf_put(text, piece, (size_t)n) < 0) return -1;
        }
        if (g->rs && n_gen % g->stats_every == 0) stats_line(g->rs, "gen", g->np, n_gen, false);
        if (n_gen >= g->max_gen || deltafin_ctx_pos(g->c) >= g->nctx) break;
        int rc = deltafin_decode(g->c, &id, 1, false);
        if (rc < 0) {
            if (rc != DELTAFIN_ERR_CANCELLED) { fprintf(stderr, "\nrun: decode: %s\n", deltafin_errmsg()); *failed = true; }
            break;
        }
    }
    int n = deltafin_detok_flush(g->dt, &piece);
    if (n > 0) {
        if (!g->json) fwrite(piece, 1, (size_t)n, stdout);
        if (df_textbuf_put(text, piece, (size_t)n) < 0) return -1;
    }
    if (!g->json) { fputc('\n', stdout); fflush(stdout); }
    return n_gen;
}

/* -v: the expert store per layer, the routing, the memory against the plan */
static void report_verbose(deltafin_model *m, deltafin_ctx *c, const df_settings *S, const deltafin_stream_stats *ss) {
    if (ss->experts_stream) {
        char sb[640];
        fprintf(stderr, "%s\n", deltafin_stream_stats_str(ss, sb, sizeof sb));
        /* per layer: where the misses and the waiting happened */
        fprintf(stderr, "per layer:   layer     hits   misses    hit%%   I/O wait s\n");
        for (int l = 0; l < deltafin_model_n_layer(m); l++) {
            uint64_t h = 0, mi = 0, w = 0;
            if (deltafin_model_layer_stats(m, l, &h, &mi, &w) != DELTAFIN_OK || h + mi == 0) continue;
            fprintf(stderr, "             %5d %8llu %8llu %6.1f%% %12.3f\n", l, (unsigned long long)h,
                    (unsigned long long)mi, 100.0 * (double)h / (double)(h + mi), (double)w / 1e9);
        }
    }
    df_cli_routing_report(S, c, stderr);
    deltafin_memory_use mu;
    char mb[512];
    deltafin_model_memory_use(m, &mu);
    fprintf(stderr, "%s\n", deltafin_memory_use_str(&mu, mb, sizeof mb));
}

typedef struct {
    const int32_t *pids, *gen;
    int np, n_gen;
    const char *text;
    double pps, gps;            /* prompt / generation tok/s */
    uint64_t peak;              /* peak RSS */
} run_result;

/* --json: the one object printed at the end */
static void print_json(deltafin_model *m, deltafin_ctx *c, const run_result *r, bool verbose) {
    deltafin_stats st;
    deltafin_ctx_stats(c, &st);
    deltafin_stream_stats ss;
    deltafin_model_stream_stats(m, &ss);
    cJSON *o = cJSON_CreateObject();
    cJSON *pa = cJSON_AddArrayToObject(o, "prompt_tokens");
    for (int i = 0; i < r->np; i++) cJSON_AddItemToArray(pa, cJSON_CreateNumber(r->pids[i]));
    cJSON *ta = cJSON_AddArrayToObject(o, "tokens");
    for (int i = 0; i < r->n_gen; i++) cJSON_AddItemToArray(ta, cJSON_CreateNumber(r->gen[i]));
    cJSON_AddStringToObject(o, "text", r->text);
    cJSON *so = cJSON_AddObjectToObject(o, "stats");
    cJSON_AddNumberToObject(so, "n_prompt", r->np);
    cJSON_AddNumberToObject(so, "n_gen", r->n_gen);
    cJSON_AddNumberToObject(so, "prompt_tok_s", r->pps);
    cJSON_AddNumberToObject(so, "gen_tok_s", r->gps);
    cJSON_AddNumberToObject(so, "peak_rss", (double)r->peak);
    cJSON_AddNumberToObject(so, "expert_hits", (double)st.expert_hits);
    cJSON_AddNumberToObject(so, "expert_misses", (double)st.expert_misses);
    cJSON_AddNumberToObject(so, "bytes_read", (double)st.bytes_read);
    cJSON_AddNumberToObject(so, "dense_bytes_read", (double)st.dense_bytes_read);
    add_stream_json(so, &ss); /* expert streaming: cache, I/O, prefetch and look-ahead */
    /* budget use, as -v prints it */
    deltafin_memory_use mu;
    deltafin_model_memory_use(m, &mu);
    cJSON *mo = cJSON_AddObjectToObject(so, "memory");
    cJSON_AddNumberToObject(mo, "dense", (double)mu.dense_bytes);
    cJSON_AddNumberToObject(mo, "experts", (double)mu.experts_bytes);
    cJSON_AddNumberToObject(mo, "cache", (double)mu.cache_bytes);
    cJSON_AddNumberToObject(mo, "kv", (double)mu.kv_bytes);
    cJSON_AddNumberToObject(mo, "scratch", (double)mu.scratch_bytes);
    cJSON_AddNumberToObject(mo, "peak_rss", (double)mu.peak_rss_bytes);
    cJSON_AddNumberToObject(mo, "plan", (double)mu.plan_bytes);
    cJSON_AddNumberToObject(mo, "limit", (double)mu.limit);
    cJSON_AddNumberToObject(mo, "locked", (double)mu.locked_bytes);
    df_cli_dist_report(m, verbose ? stderr : NULL, so);
    char *s = cJSON_PrintUnformatted(o);
    if (s) { fputs(s, stdout); fputc('\n', stdout); free(s); }
    cJSON_Delete(o);
}

int cmd_run(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_run, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const int n_predict = S.n_predict;
    const bool json = S.json, verbose = S.verbose;
    deltafin_sampler_params sp;
    if (!S.model || (!S.prompt && !S.file)) {
        fprintf(stderr, "run: -m MODEL and -p PROMPT (or -f FILE) are required\n\n");
        df_cli_help(&k_run, stderr);
        return 2;
    }
    if (S.stats_every < 1) return df_cli_usage_error(&k_run, "--stats-every must be >= 1");
    char *ptext = NULL, *gbnf = NULL;
    size_t plen = 0;
    if (df_cli_grammar(&k_run, &S, &gbnf)) return 1;
    if (read_prompt(&S, &ptext, &plen) < 0) { free(gbnf); return 1; }
    int ret = 1;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    deltafin_sampler *smp = NULL;
    deltafin_detok *dt = NULL;
    int32_t *pids = NULL, *gen = NULL;
    df_textbuf text = {0};

    FILE *stats_f = NULL;
    if (df_cli_log_begin(&k_run, &S) != DF_CLI_GO) goto done;
    if (S.stats_file) {
        stats_f = fopen(S.stats_file, "w");
        if (!stats_f) { fprintf(stderr, "run: --stats-file %s: %s\n", S.stats_file, strerror(errno)); goto done; }
    }

    deltafin_model_params mp = df_cli_model_params(&S);
    df_load_progress load_progress = {0};
    mp.progress_cb = df_load_progress_cb;
    mp.progress_ud = &load_progress;
    int rc = deltafin_model_load(S.model, &mp, &m);
    if (rc < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); goto done; }
    deltafin_stream_stats ss;
    deltafin_model_stream_stats(m, &ss);
    if ((S.hot || S.preload) && !ss.experts_stream)
        deltafin_log(DELTAFIN_LOG_INFO, "experts are resident: --hot/--preload have no effect");
    if (!deltafin_model_vocab(m)) {
        fprintf(stderr, "run: model has no tokenizer\n");
        goto done;
    }
    deltafin_ctx_params cp = df_cli_ctx_params(&S);
    rc = deltafin_ctx_create(m, &cp, &c);
    if (rc < 0) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_apply_routing(&k_run, &S, c)) goto done;
    g_ctx = c;
    signal(SIGINT, on_sigint);

    int np = deltafin_tokenize(m, ptext, plen, true, true, NULL, 0);
    if (np < 0) { fprintf(stderr, "run: tokenize: %s\n", deltafin_errmsg()); goto done; }
    pids = malloc(sizeof(int32_t) * (size_t)(np > 0 ? np : 1));
    if (!pids) goto done;
    np = deltafin_tokenize(m, ptext, plen, true, true, pids, np);
    if (np <= 0) { fprintf(stderr, "run: empty prompt\n"); goto done; }
    if (S.log_prompts) deltafin_log(DELTAFIN_LOG_INFO, "prompt (%d tokens): %.*s", np, (int)plen, ptext);
    const int nctx = deltafin_ctx_n_ctx(c);
    if (np > nctx) { fprintf(stderr, "run: prompt has %d tokens, context is %d (use -c)\n", np, nctx); goto done; }
    if (df_cli_sampler(&k_run, &S, m, &sp)) { ret = 2; goto done; }
    smp = deltafin_sampler_create(&sp);
    if (!smp) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); goto done; }
    if (verbose) { /* llama.cpp's line */
        char chain[320];
        deltafin_sampler_describe(smp, chain, sizeof chain);
        fprintf(stderr, "sampler chain: %s\n", chain);
    }
    for (int i = 0; i < np; i++) deltafin_sampler_accept(smp, pids[i]);
    if (gbnf) { /* after the prompt: its tokens feed the penalties only */
        deltafin_grammar *g = NULL;
        if (deltafin_grammar_create(deltafin_model_vocab(m), gbnf, NULL, &g) < 0 || deltafin_sampler_set_grammar(smp, g) < 0) {
            fprintf(stderr, "run: grammar: %s\n", deltafin_errmsg());
            goto done;
        }
    }
    const int max_gen = n_predict >= 0 ? n_predict : nctx - np + 1;
    gen = malloc(sizeof(int32_t) * (size_t)(max_gen > 0 ? max_gen : 1));
    if (!gen) goto done;

    uint64_t t0 = deltafin_time_ns();
    rc = deltafin_decode(c, pids, np, false);
    uint64_t t_prompt = deltafin_time_ns() - t0;
    if (rc < 0) { fprintf(stderr, "\nrun: decode: %s\n", deltafin_errmsg()); goto done; }
    run_stats rs = {.f = stats_f, .c = c, .m = m, .t0 = t0};
    if (stats_f) stats_line(&rs, "prompt", np, 0, false);
    dt = deltafin_detok_create(m, S.special);
    if (!dt) { fprintf(stderr, "run: %s\n", deltafin_errmsg()); goto done; }
    uint64_t t1 = deltafin_time_ns();
    const gen_loop gl = {.m = m, .c = c, .smp = smp, .dt = dt, .json = json, .max_gen = max_gen, .nctx = nctx,
                         .np = np, .stats_every = S.stats_every, .rs = stats_f ? &rs : NULL};
    bool failed;
    int n_gen = generate(&gl, gen, &text, &failed);
    if (n_gen < 0) goto done;
    uint64_t t_gen = deltafin_time_ns() - t1;

    if (stats_f) stats_line(&rs, "end", np, n_gen, true);
    if (S.log_prompts) deltafin_log(DELTAFIN_LOG_INFO, "output (%d tokens): %s", n_gen, text.p ? text.p : "");
    const run_result r = {.pids = pids, .gen = gen, .np = np, .n_gen = n_gen, .text = text.p ? text.p : "",
                          .pps = t_prompt ? np / (t_prompt / 1e9) : 0.0,
                          .gps = t_gen && n_gen ? n_gen / (t_gen / 1e9) : 0.0, .peak = deltafin_peak_rss()};
    char pb[32];
    fprintf(stderr, "prompt: %d tokens, %.2f tok/s | generation: %d tokens, %.2f tok/s | peak memory: %s\n",
            np, r.pps, n_gen, r.gps, deltafin_fmt_bytes(r.peak, pb, sizeof pb));
    deltafin_model_stream_stats(m, &ss);
    if (verbose) report_verbose(m, c, &S, &ss);
    if (!json) df_cli_dist_report(m, verbose ? stderr : NULL, NULL); /* several ranks: communication */
    if (json) print_json(m, c, &r, verbose);
    ret = failed ? 1 : 0;
done:
    if (stats_f && fclose(stats_f)) fprintf(stderr, "run: --stats-file %s: %s\n", S.stats_file, strerror(errno));
    df_cli_log_end(&S);
    g_ctx = NULL;
    signal(SIGINT, SIG_DFL);
    deltafin_sampler_free(smp);
    deltafin_detok_free(dt);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    free(pids);
    free(gen);
    free(text.p);
    free(ptext);
    free(gbnf);
    return ret;
}
