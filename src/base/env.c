/* env.c — the engine's environment variables, read once (see env.h). */
#include "base/env.h"
#include "base/util.h"
#include <pthread.h>

static df_env_t g_env;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *str(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int int_in(const char *name, int lo, int hi, int unset) {
    const char *v = str(name);
    if (!v) return unset;
    int x = atoi(v);
    return x >= lo && x <= hi ? x : unset;
}

static bool is_zero(const char *name) {
    const char *v = getenv(name);
    return v && !strcmp(v, "0");
}

static void read_env(void) {
    df_env_t *e = &g_env;
    const char *v = str("DELTAFIN_LOG");
    e->log_level = v ? atoi(v) : -1;
    e->isa = str("DELTAFIN_ISA");
    e->repack_off = is_zero("DELTAFIN_REPACK");
    v = getenv("DELTAFIN_SPIN_US");
    e->spin_us = v ? (atol(v) < 0 ? 0 : (int)atol(v)) : -1;
    e->io_threads = int_in("DELTAFIN_IO_THREADS", 1, 256, 0);
    e->io_qd = int_in("DELTAFIN_IO_QD", 1, 4096, 0);
    e->io_profile = str("DELTAFIN_IO_PROFILE");
    e->fault = str("DELTAFIN_FAULT");
    v = getenv("DELTAFIN_STREAM");
    e->stream = v && !strcmp(v, "1") ? 1 : v && !strcmp(v, "0") ? 0 : -1;
    e->dense_stream_off = is_zero("DELTAFIN_DENSE_STREAM");
    v = str("DELTAFIN_DENSE_RESIDENT");
    e->dense_resident = v ? atoi(v) : -1;
    e->embd_rows = int_in("DELTAFIN_EMBD_ROWS", 0, 1, -1);
    v = str("DELTAFIN_DENSE_CHUNK");
    uint64_t c = 0;
    if (v && df_parse_size(v, &c) == DF_OK && c >= 4096 && c <= (1ull << 30)) e->dense_chunk = c & ~(uint64_t)4095;
    df_err_clear();
    e->expert_cache = str("DELTAFIN_EXPERT_CACHE");
    v = str("DELTAFIN_PLAN_CTX");
    e->plan_ctx = v && atoi(v) > 0 ? atoi(v) : 0;
    e->dist_spin_us = int_in("DELTAFIN_DIST_SPIN_US", 0, 10000000, -1);
    e->dist_balance = int_in("DELTAFIN_DIST_BALANCE", 0, 1, -1);
    v = getenv("DELTAFIN_YARN_HF_BETAS");
    e->yarn_hf_betas = v && *v && strcmp(v, "0");
    v = str("DELTAFIN_CACHE_POLICY");
    e->cache_clock = v && !strcmp(v, "clock");
}

const df_env_t *df_env(void) {
    pthread_once(&g_once, read_env);
    return &g_env;
}
