/* serve.c — `deltafin serve`: OpenAI-compatible HTTP server (src/server.c). Starts listening
 * first (/health answers 503 while the model loads), prints the address on stdout, then
 * serves until SIGINT/SIGTERM, on which it drains running requests and exits cleanly. */
#include "app/cli/cli_args.h"
#include "app/cli/load_progress.h"
#include "deltafin.h"
#include "app/server.h"
#include "weights/expert_store.h"
#include "weights/io.h"
#include "runtime/plan.h"
#include "base/util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin serve -m MODEL [options]\n"
        "  -m, --model FILE        GGUF model\n"
        "  --host ADDR             address to bind (default 127.0.0.1)\n"
        "  --port N                port (default 8080; 0 = pick a free port, printed on stdout)\n"
        "  --api-key KEY           require 'Authorization: Bearer KEY' on every endpoint but\n"
        "                          /health (default: env DELTAFIN_API_KEY, else none)\n"
        "  --alias NAME            model id shown in /v1/models (default: the file's base name)\n"
        "  --chat-template NAME    builtin chat template (chatml, llama3, qwen3, ...; default: the\n"
        "                          model's tokenizer.chat_template, else chatml)\n"
        "  -np, --parallel N       parallel slots, each with its own KV cache (default 2)\n"
        "  --queue N               requests waiting for a slot before 429 (default 64)\n"
        "  --max-body SIZE         largest request body (default 1M; larger: 413)\n"
        "  --timeout S             idle connection timeout in seconds (default 60)\n"
        "  --drain-timeout S       on SIGINT/SIGTERM, wait this long for running requests (default 30)\n"
        "  -c, --ctx-size N        context per slot (default: min(training context, 4096))\n"
        "  -b, --batch-size N      prompt tokens per decode step (default 512)\n"
        "  -n, --n-predict N       max_tokens when a request gives none (default -1: until the\n"
        "                          end of generation or a full context)\n"
        "  -t, --threads N         threads (default: all cores)\n"
        "  --no-cache-prompt       do not reuse a slot's KV cache across requests\n"
        "  --mem-limit SIZE        memory limit for the process (default: available RAM)\n"
        "  --io ENGINE             expert reads: auto | pread | direct | uring | mmap (default auto;\n"
        "                          any other than auto streams routed experts from disk)\n"
        "  --prefetch MODE         auto | on | off: read a layer's routed experts ahead (default auto)\n"
        "  --hot FILE              pin the most used experts (from deltafin profile) in the cache\n"
        "  --preload L:E,...       pin these experts in the expert cache\n"
        "  -v, --verbose           log requests\n"
        "  -h, --help              this help\n"
        "endpoints: POST /v1/chat/completions /v1/completions /tokenize /detokenize,\n"
        "           GET /v1/models /health /metrics\n");
}

static char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    char *s = df_strdup(b);
    if (!s) return NULL;
    size_t n = strlen(s);
    if (n > 5 && !strcmp(s + n - 5, ".gguf")) s[n - 5] = 0;
    return s;
}

int cmd_serve(int argc, char **argv) {
    df_server_params p = df_server_default_params();
    const char *model = NULL, *alias = NULL, *io_engine = NULL, *hot = NULL, *preload = NULL;
    int prefetch = -1;
    uint64_t mem_limit = 0, max_body = p.max_body;
    int drain_s = 30;
    const char *env_key = getenv("DELTAFIN_API_KEY");
    if (env_key && env_key[0]) p.api_key = env_key;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
#define ARG(s, l) ((!strcmp(a, s) || !strcmp(a, l)) && more)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (ARG("-m", "--model")) model = argv[++i];
        else if (ARG("--host", "--host")) p.host = argv[++i];
        else if (ARG("--port", "--port")) p.port = df_cli_int(argv, &i);
        else if (ARG("--api-key", "--api_key")) p.api_key = argv[++i];
        else if (ARG("--alias", "-a")) alias = argv[++i];
        else if (ARG("--chat-template", "--chat_template")) p.chat_template = argv[++i];
        else if (ARG("-np", "--parallel")) p.n_parallel = df_cli_int(argv, &i);
        else if (ARG("--queue", "--queue")) p.n_queue = df_cli_int(argv, &i);
        else if (ARG("--max-body", "--max_body")) {
            if (df_parse_size(argv[++i], &max_body) < 0 || max_body < 16) {
                fprintf(stderr, "serve: bad --max-body '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (ARG("--timeout", "-to")) p.timeout_s = df_cli_int(argv, &i);
        else if (ARG("--drain-timeout", "--drain_timeout")) drain_s = df_cli_int(argv, &i);
        else if (ARG("-c", "--ctx-size")) p.n_ctx = df_cli_int(argv, &i);
        else if (ARG("-b", "--batch-size")) p.n_batch = df_cli_int(argv, &i);
        else if (ARG("-n", "--n-predict")) p.default_max_tokens = df_cli_int(argv, &i);
        else if (ARG("-t", "--threads")) p.n_threads = df_cli_int(argv, &i);
        else if (!strcmp(a, "--no-cache-prompt")) p.cache_prompt = false;
        else if (ARG("--mem-limit", "--mem_limit")) {
            if (df_parse_size(argv[++i], &mem_limit) < 0) { fprintf(stderr, "serve: bad --mem-limit '%s'\n", argv[i]); return 2; }
        }
        else if (ARG("--io", "--io-engine")) {
            int e;
            io_engine = argv[++i];
            if (df_io_engine_parse(io_engine, &e) < 0) { fprintf(stderr, "serve: %s\n", deltafin_errmsg()); return 2; }
        }
        else if (ARG("--prefetch", "--prefetch")) {
            if (df_prefetch_parse(argv[++i], &prefetch) < 0) { fprintf(stderr, "serve: %s\n", deltafin_errmsg()); return 2; }
        }
        else if (ARG("--hot", "--hot")) hot = argv[++i];
        else if (ARG("--preload", "--preload")) preload = argv[++i];
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) p.verbose = 1;
        else {
            fprintf(stderr, "serve: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
#undef ARG
    }
    if (!model) { fprintf(stderr, "serve: -m MODEL is required\n"); usage(stderr); return 2; }
    p.max_body = (size_t)max_body;
    char *id = alias ? df_strdup(alias) : base_name(model);
    p.model_id = id;
    if (p.verbose && df_log_get_level() < DF_LOG_INFO) df_log_set_level(DF_LOG_INFO);

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

    deltafin_model_params mp = deltafin_model_default_params();
    df_load_progress load_progress = {0};
    mp.progress_cb = df_load_progress_cb;
    mp.progress_ud = &load_progress;
    mp.n_threads = p.n_threads;
    mp.mem_limit = mem_limit;
    mp.n_ctx = p.n_ctx; /* KV and scratch for every slot (the plan counts them all) */
    mp.n_batch = p.n_batch;
    mp.n_seq = p.n_parallel;
    if (io_engine) mp.io_engine = io_engine;
    if (prefetch >= 0) mp.prefetch = prefetch;
    mp.hot_file = hot;
    mp.preload = preload;
    rc = deltafin_model_load(model, &mp, &m);
    if (rc < 0) { fprintf(stderr, "serve: %s\n", deltafin_errmsg()); goto done; }
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
    if (ret == 0) fprintf(stderr, "serve: stopped\n");
    return ret;
}
