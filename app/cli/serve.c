/* serve.c — `deltafin serve`: OpenAI-compatible HTTP server (src/server.c). Starts listening
 * first (/health answers 503 while the model loads), prints the address on stdout, then
 * serves until SIGINT/SIGTERM, on which it drains running requests and exits cleanly. */
#include "app/cli/flags.h"
#include "app/cli/load_progress.h"
#include "deltafin.h"
#include "app/server.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const df_cmd k_serve = {
    DF_CMD_SERVE, "serve", "usage: deltafin serve -m MODEL [options]",
    "OpenAI-compatible HTTP server (docs/server.md). It listens at once (/health answers 503 while\n"
    "the model loads) and serves until SIGINT/SIGTERM, then drains running requests. The sampling\n"
    "options set the defaults of requests that do not set them (as llama-server's).",
    "endpoints: POST /v1/chat/completions /v1/completions /tokenize /detokenize,\n"
    "           GET /v1/models /health /metrics", 0};

static char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    char *s = strdup(b);
    if (!s) return NULL;
    size_t n = strlen(s);
    if (n > 5 && !strcmp(s + n - 5, ".gguf")) s[n - 5] = 0;
    return s;
}

int cmd_serve(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_serve, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    df_server_params p = df_server_default_params();
    const char *model = S.model, *alias = S.alias;
    const uint64_t max_body = S.max_body;
    const int drain_s = S.drain_s;
    const char *env_key = getenv("DELTAFIN_API_KEY");
    if (env_key && env_key[0]) p.api_key = env_key;
    if (S.api_key) p.api_key = S.api_key;
    p.host = S.host;
    p.port = S.port;
    p.chat_template = S.chat_template;
    p.routing = S.routing;
    p.model_path = S.model;
    p.n_parallel = S.n_parallel;
    p.n_queue = S.n_queue;
    p.timeout_s = S.timeout_s;
    p.n_ctx = S.n_ctx;
    p.n_batch = S.n_batch;
    p.step_tokens = S.step_tokens;
    p.default_max_tokens = S.n_predict;
    p.n_threads = S.n_threads;
    p.cache_prompt = !S.no_cache_prompt;
    p.verbose = S.verbose;
    if (!model) {
        fprintf(stderr, "serve: -m MODEL is required\n\n");
        df_cli_help(&k_serve, stderr);
        return 2;
    }
    if (max_body < 16) return df_cli_usage_error(&k_serve, "--max-body must be at least 16 bytes");
    /* a template every chat request would fail with is refused now, not per request */
    if (p.chat_template && p.chat_template[0] && deltafin_chat_template_check(p.chat_template) < 0)
        return df_cli_usage_error(&k_serve, "--chat-template: %s", deltafin_errmsg());
    p.max_body = (size_t)max_body;
    char *id = alias ? strdup(alias) : base_name(model);
    p.model_id = id;
    char *tmpl_src = NULL, *gbnf = NULL;
    size_t tmpl_len = 0;
    if (S.chat_template_file && deltafin_read_file(S.chat_template_file, &tmpl_src, &tmpl_len) < 0) {
        fprintf(stderr, "serve: --chat-template-file: %s\n", deltafin_errmsg());
        free(id);
        return 1;
    }
    if (df_cli_grammar(&k_serve, &S, &gbnf)) { free(id); free(tmpl_src); return 1; }
    p.chat_template_src = tmpl_src;
    p.default_grammar = gbnf;
    if (df_cli_log_begin(&k_serve, &S) != DF_CLI_GO) { free(id); free(tmpl_src); free(gbnf); return 1; }

    /* every thread inherits the blocked mask; the main thread waits for the signals */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int ret = 1;
    df_server *s = NULL;
    deltafin_model *m = NULL;
    int rc = df_server_start(&p, &s);
    if (rc < 0) { fprintf(stderr, "serve: %s\n", deltafin_errmsg()); goto done; }
    printf("deltafin serve: listening on http://%s:%d (model %s loading)\n", p.host, df_server_port(s), id);
    fflush(stdout);

    deltafin_model_params mp = df_cli_model_params(&S);
    mp.n_seq = p.n_parallel; /* KV and scratch for every slot: the plan counts them all */
    df_load_progress load_progress = {0};
    mp.progress_cb = df_load_progress_cb;
    mp.progress_ud = &load_progress;
    rc = deltafin_model_load(model, &mp, &m);
    if (rc < 0) { fprintf(stderr, "serve: %s\n", deltafin_errmsg()); goto done; }
    deltafin_sampler_params sp; /* --temp ...: the defaults of requests that do not set them */
    if (df_cli_sampler(&k_serve, &S, m, &sp)) { ret = 2; goto done; }
    df_server_set_sampling(s, &sp);
    rc = df_server_set_model(s, m);
    if (rc < 0) { fprintf(stderr, "serve: %s\n", deltafin_errmsg()); goto done; }
    printf("deltafin serve: ready (%d slots, model id '%s')\n", p.n_parallel, id);
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "serve: %s received, draining (up to %d s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM", drain_s);
    df_server_stop(s, drain_s * 1000);
    ret = 0;
done:
    df_server_free(s);
    deltafin_model_free(m);
    free(id);
    free(tmpl_src);
    free(gbnf);
    if (ret == 0) fprintf(stderr, "serve: stopped\n");
    df_cli_log_end(&S);
    return ret;
}
