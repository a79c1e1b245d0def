/* doctor.c — `deltafin doctor [MODEL]`: measure this machine (disk read bandwidth on the
 * model's filesystem per engine and queue depth, memory bandwidth, RAM, CPU features, clock
 * and temperature hints), recommend settings, estimate tok/s for MODEL, and save the I/O
 * engine choice in the profile that `--io auto` reads, so runs skip measuring. The disk and
 * plan measurements are the library's (deltafin_debug.h); CPU and memory probes are here. */
#include "app/cli/flags.h"
#include "deltafin_debug.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const df_cmd k_doctor = {
    DF_CMD_DOCTOR, "doctor", "usage: deltafin doctor [options] [MODEL.gguf]",
    "Measure this machine and recommend settings for MODEL:\n"
    "  - disk reads on MODEL's filesystem: buffered, O_DIRECT and io_uring, expert-sized\n"
    "    requests, queue depths 1, 4 and 16 (page cache dropped with fadvise first);\n"
    "  - memory bandwidth, available RAM, CPU features and kernels, clock/thermal hints;\n"
    "  - recommended --mem-limit, -t, --io and --prefetch, and the expected tok/s range\n"
    "    for MODEL from its memory plan and the measured I/O floor.\n"
    "The winning I/O engine is saved in the profile `--io auto` reads, so runs skip the\n"
    "measurement. Without MODEL only memory and CPU are measured.", NULL, 1};

/* ---- memory ---------------------------------------------------------------------------- */

typedef struct { const uint64_t *p; size_t n; uint64_t sum; } rd_arg;
static void *rd_thread(void *a) {
    rd_arg *r = a;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= r->n; i += 4) { s0 += r->p[i]; s1 += r->p[i + 1]; s2 += r->p[i + 2]; s3 += r->p[i + 3]; }
    r->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* Read GB/s with n threads over `buf` (well above the caches: the decode path's pattern). */
static double mem_read_gbps(const uint64_t *buf, size_t bytes, int n_threads) {
    pthread_t th[256];
    rd_arg args[256];
    if (n_threads > 256) n_threads = 256;
    double best = 0;
    for (int rep = 0; rep < 2; rep++) {
        uint64_t t0 = deltafin_time_ns();
        size_t per = bytes / 8 / (size_t)n_threads;
        for (int t = 0; t < n_threads; t++) {
            args[t] = (rd_arg){buf + (size_t)t * per, per, 0};
            pthread_create(&th[t], NULL, rd_thread, &args[t]);
        }
        uint64_t sink = 0;
        for (int t = 0; t < n_threads; t++) { pthread_join(th[t], NULL); sink += args[t].sum; }
        double dt = (double)(deltafin_time_ns() - t0);
        double g = (double)per * 8 * n_threads / dt;
        if (g > best && sink != 1) best = g;
    }
    return best;
}

/* ---- CPU and system hints ----------------------------------------------------------------- */

static int physical_cores(void) {
    char *d = NULL;
    size_t n = 0;
    int online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (deltafin_read_file("/proc/cpuinfo", &d, &n) != DELTAFIN_OK) return online;
    /* distinct (physical id, core id) pairs */
    int ids[4096], nid = 0, phys = 0;
    for (char *line = d; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!strncmp(line, "physical id", 11)) phys = atoi(strchr(line, ':') ? strchr(line, ':') + 1 : "0");
        else if (!strncmp(line, "core id", 7) && strchr(line, ':')) {
            int id = phys * 65536 + atoi(strchr(line, ':') + 1), seen = 0;
            for (int i = 0; i < nid; i++) seen |= ids[i] == id;
            if (!seen && nid < 4096) ids[nid++] = id;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(d);
    return nid > 0 && nid <= online ? nid : online;
}

static void cpu_flags(char *out, size_t cap) {
    static const char *want[] = {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                 "avx512_vnni", "avx512_bf16", "amx_tile", "asimd", "asimddp", "fphp", "sve"};
    char *d = NULL;
    size_t n = 0;
    out[0] = 0;
    if (deltafin_read_file("/proc/cpuinfo", &d, &n) != DELTAFIN_OK) { snprintf(out, cap, "(unknown)"); return; }
    char *fl = strstr(d, "\nflags");
    if (!fl) fl = strstr(d, "\nFeatures");
    char *end = fl ? strchr(fl + 1, '\n') : NULL;
    if (end) *end = 0;
    size_t used = 0;
    for (size_t i = 0; fl && i < sizeof want / sizeof want[0]; i++) {
        char pat[32];
        snprintf(pat, sizeof pat, " %s", want[i]);
        char *h = strstr(fl, pat);
        if (h && (h[strlen(pat)] == ' ' || h[strlen(pat)] == 0) && used + strlen(want[i]) + 2 < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? " " : "", want[i]);
    }
    char *mn = strstr(d, "model name");
    if (mn && (mn = strchr(mn, ':'))) {
        char *e2 = strchr(mn, '\n');
        if (e2) *e2 = 0;
        if (used + strlen(mn) + 4 < cap) snprintf(out + used, cap - used, " (%s)", mn + 2);
    }
    free(d);
}

static bool read_u64_file(const char *p, uint64_t *v) {
    char *d = NULL;
    size_t n = 0;
    if (deltafin_read_file(p, &d, &n) != DELTAFIN_OK) return false;
    *v = strtoull(d, NULL, 10);
    free(d);
    return true;
}

static void system_hints(void) {
    uint64_t cur, max;
    char *gov = NULL;
    size_t n = 0;
    if (read_u64_file("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", &cur) &&
        read_u64_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", &max) && max)
        printf("  cpu0 clock          %.2f GHz of %.2f GHz max%s\n", cur / 1e6, max / 1e6,
               cur < max * 6 / 10 ? " (well below max: power saving or thermal throttling)" : "");
    else printf("  cpu clock           not readable here (no cpufreq in /sys)\n");
    if (deltafin_read_file("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", &gov, &n) == DELTAFIN_OK) {
        gov[strcspn(gov, "\n")] = 0;
        printf("  governor            %s%s\n", gov, strcmp(gov, "performance") ? " ('performance' gives steadier tok/s)" : "");
        free(gov);
    }
    int nz = 0;
    for (int z = 0; z < 16; z++) {
        char p[128], *ty = NULL;
        uint64_t t;
        snprintf(p, sizeof p, "/sys/class/thermal/thermal_zone%d/temp", z);
        if (!read_u64_file(p, &t)) continue;
        snprintf(p, sizeof p, "/sys/class/thermal/thermal_zone%d/type", z);
        if (deltafin_read_file(p, &ty, &n) == DELTAFIN_OK) ty[strcspn(ty, "\n")] = 0;
        printf("  thermal zone %-2d     %.1f C (%s)%s\n", z, t / 1000.0, ty ? ty : "?", t > 90000 ? " HOT" : "");
        free(ty);
        nz++;
    }
    if (!nz) printf("  temperatures        not readable here (no /sys/class/thermal zones)\n");
}

typedef struct {
    double mem1, memn;            /* memory read GB/s: 1 thread, one per core */
    double best_gbps, qd1_best, qd16_best;
    const char *best_engine;      /* io auto's choice, NULL if not measured */
    int cores;
} doctor_run;

static void measure_machine(doctor_run *d, uint64_t avail) {
    char b1[32], b2[32];
    const int online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t total_ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    d->cores = physical_cores();
    printf("machine:\n");
    char flags[512];
    cpu_flags(flags, sizeof flags);
    printf("  cpus                %d online, %d physical cores\n", online, d->cores);
    printf("  cpu features        %s\n", flags);
    printf("  kernels             %s\n", deltafin_kernel_isa());
    printf("  ram                 %s available of %s\n", deltafin_fmt_bytes(avail, b1, sizeof b1),
           deltafin_fmt_bytes(total_ram, b2, sizeof b2));
    size_t mbytes = 128u << 20; /* above any L3 we target */
    if (avail && mbytes > avail / 8) mbytes = (size_t)(avail / 8) & ~(size_t)4095;
    if (mbytes < (16u << 20)) mbytes = 16u << 20;
    d->mem1 = d->memn = -1;
    uint64_t *mbuf = aligned_alloc(4096, mbytes);
    if (mbuf) {
        memset(mbuf, 1, mbytes);
        d->mem1 = mem_read_gbps(mbuf, mbytes, 1);
        d->memn = mem_read_gbps(mbuf, mbytes, d->cores);
        free(mbuf);
    }
    printf("  memory read         %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n", d->mem1, d->memn, d->cores);
    system_hints();
}

/* The engine table (buffered / O_DIRECT / io_uring x queue depth 1, 4, 16), io auto's choice
 * and, with save, the profile `--io auto` reads. */
static int measure_disk(doctor_run *d, const deltafin_model *m, double secs, const char *profile, bool save) {
    char b1[32], b2[32];
    deltafin_gguf_info gi;
    deltafin_model_gguf_info(m, &gi);
    const char *path = gi.path;
    struct stat st;
    if (stat(path, &st) < 0) { fprintf(stderr, "doctor: %s: %s\n", path, strerror(errno)); return 1; }
    uint64_t probe = deltafin_model_expert_read_bytes(m);
    if (!probe) probe = 8u << 20; /* no routed experts: io auto's default probe */
    printf("\ndisk (%s, device %u:%u, %s random reads, cache dropped before each):\n", path, major(st.st_dev),
           minor(st.st_dev), deltafin_fmt_bytes(probe, b1, sizeof b1));
    /* A sparse file (gen-random --sparse, an interrupted download) reads its holes at
     * memory speed: the numbers below would not be the disk's. */
    if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 10 * 9)
        printf("  warning             %s is sparse (%s of %s allocated): holes read at memory speed, so the\n"
               "                      numbers below overstate the disk; measure a fully written file\n",
               path, deltafin_fmt_bytes((uint64_t)st.st_blocks * 512, b1, sizeof b1),
               deltafin_fmt_bytes((uint64_t)st.st_size, b2, sizeof b2));
    static const char *engines[] = {"pread", "direct", "uring"};
    static const int qds[] = {1, 4, 16};
    const double cell = secs * 0.7 / 9;
    printf("  %-8s %10s %10s %10s   GB/s\n", "engine", "qd 1", "qd 4", "qd 16");
    for (int ei = 0; ei < 3; ei++) {
        if (deltafin_io_engine_check(engines[ei]) != DELTAFIN_OK) {
            printf("  %-8s not available in this build/kernel\n", engines[ei]);
            continue;
        }
        printf("  %-8s", ei == 0 ? "buffered" : engines[ei]);
        for (int qi = 0; qi < 3; qi++) {
            double g = deltafin_disk_read_gbps(path, engines[ei], qds[qi], probe, cell);
            if (g < 0) printf(" %10s", "n/a");
            else printf(" %10.2f", g);
            fflush(stdout);
            if (qi == 0 && g > d->qd1_best) d->qd1_best = g;
            if (qi == 2 && g > d->qd16_best) d->qd16_best = g;
        }
        printf("\n");
    }
    /* The choice `--io auto` would make (the same measurement), saved for it. */
    deltafin_io_measurement ms;
    if (deltafin_io_measure(path, probe, &ms) != DELTAFIN_OK) {
        fprintf(stderr, "doctor: I/O measurement failed: %s\n", deltafin_errmsg());
        return 0;
    }
    d->best_engine = ms.best;
    d->best_gbps = ms.best_gbps;
    printf("  io auto choice      %s (%.2f GB/s with 8 parallel reads)\n", ms.best, ms.best_gbps);
    if ((uint64_t)st.st_size < 4 * probe)
        printf("  note                file smaller than 4 expert reads: `--io auto` uses pread without a profile\n");
    if (save) {
        char ppath[1024];
        if (deltafin_io_profile_save(profile, &ms, ppath, sizeof ppath) != DELTAFIN_OK)
            fprintf(stderr, "doctor: %s\n", deltafin_errmsg());
        else printf("  profile saved       %s (%s engine=%s)\n", ppath, ms.key, ms.best);
    }
    return 0;
}

static void recommend(const doctor_run *d, uint64_t limit) {
    char b1[32];
    printf("\nrecommended:\n");
    printf("  --mem-limit %-12s available RAM minus 1 GiB for the OS and page cache\n",
           deltafin_fmt_bytes(limit, b1, sizeof b1));
    printf("  -t %-21d one thread per physical core\n", d->cores);
    if (d->best_engine) {
        printf("  --io %-19s fastest engine here (saved; `--io auto` picks it without measuring)\n", d->best_engine);
        bool parallel = d->qd1_best > 0 && d->qd16_best >= 1.5 * d->qd1_best;
        printf("  --prefetch %-13s %s\n", parallel ? "on" : "auto",
               parallel ? "the disk serves parallel reads much faster than one at a time, so reading the next "
                          "layer's experts ahead is nearly free"
                        : "parallel reads gain little here; let the store decide");
    }
}

/* A short greedy decode of the model under the memory plan at `limit` (context 512, the thread
 * count run and bench use by default), then the same tokens decoded again and timed: the time
 * per token minus the time spent waiting for reads is the compute per token, measured — what the memory-bandwidth floor cannot
 * see on a small model (hundreds of kernel launches and synchronisations per token, attention,
 * the sampler). Only for models whose resident part loads in moments (<= 2 GiB). */
typedef struct { bool done; int n; double compute_s, wall_s, io_wait_s; char why[600]; } measured;
enum { MEASURE_MAX_RESIDENT = 2048, MEASURE_TOKENS = 32, MEASURE_SKIP = 8 };

static void measure_decode(const char *model, deltafin_model *meta, uint64_t limit, measured *out) {
    memset(out, 0, sizeof *out);
    deltafin_limit_plan lp;
    deltafin_model_plan_limit(meta, limit, &lp);
    if (lp.status != DELTAFIN_OK) { snprintf(out->why, sizeof out->why, "%s", lp.error); return; }
    if (lp.dense_resident_bytes > ((uint64_t)MEASURE_MAX_RESIDENT << 20)) {
        char b[32];
        snprintf(out->why, sizeof out->why, "not measured: the resident part (%s) takes too long to load for a check",
                 deltafin_fmt_bytes(lp.dense_resident_bytes, b, sizeof b));
        return;
    }
    deltafin_model_params mp = deltafin_model_default_params();
    mp.mem_limit = limit;
    mp.n_ctx = 512;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    if (deltafin_model_load(model, &mp, &m) < 0) { snprintf(out->why, sizeof out->why, "%s", deltafin_errmsg()); return; }
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = 512;
    if (deltafin_ctx_create(m, &cp, &c) < 0) {
        snprintf(out->why, sizeof out->why, "%s", deltafin_errmsg());
        deltafin_model_free(m);
        return;
    }
    int32_t ids[16 + MEASURE_TOKENS];
    int n = deltafin_tokenize(m, "Once upon a time", 16, true, false, ids, 16);
    if (n <= 0 || n > 16) { n = 4; for (int i = 0; i < n; i++) ids[i] = i % deltafin_model_n_vocab(m); }
    const int V = deltafin_model_n_vocab(m);
    /* pass 1: greedy tokens from the prompt (their experts enter the cache) */
    int rc = deltafin_decode(c, ids, n, false);
    for (int k = 0; rc == DELTAFIN_OK && k < MEASURE_TOKENS; k++) {
        const float *lg = deltafin_logits(c, -1);
        int32_t best = 0;
        for (int i = 1; i < V; i++) if (lg[i] > lg[best]) best = i;
        ids[n + k] = best;
        rc = deltafin_decode(c, &best, 1, false);
    }
    /* pass 2, timed: the same tokens again from an empty context, so the routed experts they
     * need are the ones pass 1 cached (as in bench's repetitions): the compute per token
     * without the plan's misses, which the I/O term below adds at the disk's speed. Reads that
     * still happen (a cache smaller than the tokens' experts) are subtracted as waiting. */
    uint64_t t0 = 0, w0 = 0;
    if (rc == DELTAFIN_OK) rc = deltafin_ctx_truncate(c, 0);
    if (rc == DELTAFIN_OK) rc = deltafin_decode(c, ids, n, false);
    for (int k = 0; rc == DELTAFIN_OK && k < MEASURE_TOKENS; k++) {
        if (k == MEASURE_SKIP) { /* the first tokens warm the CPU caches and the thread pool */
            deltafin_stats st;
            deltafin_ctx_stats(c, &st);
            t0 = deltafin_time_ns();
            w0 = st.io_wait_ns;
        }
        rc = deltafin_decode(c, &ids[n + k], 1, false);
    }
    if (rc == DELTAFIN_OK) {
        deltafin_stats st;
        deltafin_ctx_stats(c, &st);
        out->n = MEASURE_TOKENS - MEASURE_SKIP;
        out->wall_s = (double)(deltafin_time_ns() - t0) / 1e9 / out->n;
        out->io_wait_s = (double)(st.io_wait_ns - w0) / 1e9 / out->n;
        out->compute_s = out->wall_s > out->io_wait_s ? out->wall_s - out->io_wait_s : 0;
        out->done = true;
    } else {
        snprintf(out->why, sizeof out->why, "%s", deltafin_errmsg());
    }
    deltafin_ctx_free(c);
    deltafin_model_free(m);
}

/* Compute per token (measured by a short decode when the model is small enough, else the
 * floor: weights at the memory bandwidth) and I/O floor (the plan's misses at the disk
 * bandwidth); the range spans no overlap to full overlap. 1 if the model does not fit. */
static int estimate(const doctor_run *d, deltafin_model *m, const char *model, uint64_t limit) {
    char b1[32], b2[32];
    deltafin_speed_inputs si;
    deltafin_model_speed_inputs(m, limit, &si);
    printf("\nexpected speed for %s (context %d):\n", model, si.n_ctx);
    if (si.status != DELTAFIN_OK) {
        printf("  does not fit: %s\n", si.error);
        return 1;
    }
    const double hit = si.cached_frac, active = si.active_expert_bytes;
    const double disk = d->best_gbps > 0 ? (d->qd16_best > d->best_gbps ? d->qd16_best : d->best_gbps) * 1e9 : 0;
    const double floor_s = d->memn > 0 ? (si.dense_bytes + active) / (d->memn * 1e9) : 0;
    measured me;
    measure_decode(model, m, limit, &me);
    const double compute_s = me.done && me.compute_s > floor_s ? me.compute_s : floor_s;
    const double io_s = disk > 0 ? ((1 - hit) * active + (double)si.dense_read_per_token) / disk : 0;
    printf("  weights read per token   %s dense + %s routed experts (%d of %d per layer)\n",
           deltafin_fmt_bytes(si.dense_bytes, b1, sizeof b1), deltafin_fmt_bytes((uint64_t)active, b2, sizeof b2),
           si.n_expert_used, si.n_expert);
    printf("  expert cache             %s = %.0f%% of the experts (memory plan at --mem-limit %s)\n",
           deltafin_fmt_bytes(si.cache_bytes, b1, sizeof b1), 100.0 * hit, deltafin_fmt_bytes(limit, b2, sizeof b2));
    if (si.dense_layers_streamed) printf("  %s\n", si.dense_plan);
    printf("  compute floor            %.2f ms/token (weights at %.1f GB/s memory read)\n", floor_s * 1e3, d->memn);
    if (me.done)
        printf("  compute measured         %.2f ms/token (%d greedy tokens at context 512, decoded again with their experts cached: %.2f ms each, %.2f ms of it "
               "waiting for reads)\n", compute_s * 1e3, me.n, me.wall_s * 1e3, me.io_wait_s * 1e3);
    else
        printf("  compute measured         -- (%s); the estimate uses the floor\n", me.why);
    if (disk <= 0 && compute_s > 0)
        printf("  expected                 %.1f tok/s (%s)\n", 1.0 / compute_s, me.done ? "measured compute" : "compute floor");
    if (disk > 0) {
        printf("  I/O floor                %.2f ms/token (%.0f%% misses, uniform routing, at %.2f GB/s)\n",
               io_s * 1e3, 100 * (1 - hit), disk / 1e9);
        const double hi = 1.0 / (compute_s > io_s ? compute_s : io_s), lo = 1.0 / (compute_s + io_s);
        printf("  expected                 %.1f - %.1f tok/s (no overlap - full overlap of reads and compute%s;\n"
               "                           real routing is skewed, so hit rates and speed are usually higher)\n",
               lo, hi, me.done ? ", compute measured" : ", compute floor");
    }
    return 0;
}

int cmd_doctor(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_doctor, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = df_cli_model_arg(&k_doctor, &S, false, &prc);
    if (prc) return prc;
    const char *profile = S.profile;
    const double secs = S.seconds;
    const bool save = !S.no_save;
    const uint64_t user_limit = S.mem_limit;
    if (df_cli_given(&S, &k_doctor, "--mem-limit") && !user_limit)
        return df_cli_usage_error(&k_doctor, "--mem-limit must be more than 0");
    if (!(secs > 0) || secs > 3600) { fprintf(stderr, "doctor: --seconds must be in (0, 3600]\n"); return 2; }
    const uint64_t avail = deltafin_mem_available();
    deltafin_model *m = NULL;
    if (model && deltafin_model_load_meta(model, &m) < 0) {
        fprintf(stderr, "doctor: %s\n", deltafin_errmsg());
        return 1;
    }
    doctor_run d = {0};
    measure_machine(&d, avail);
    if (m && measure_disk(&d, m, secs, profile, save)) { deltafin_model_free(m); return 1; }
    const uint64_t reserve = 1ull << 30;
    const uint64_t limit = avail > 2 * reserve ? avail - reserve : avail / 2;
    recommend(&d, limit);
    int ret = m ? estimate(&d, m, model, user_limit ? user_limit : limit) : 0;
    deltafin_model_free(m);
    return ret;
}
