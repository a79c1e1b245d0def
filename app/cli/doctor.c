/* doctor.c — `deltafin doctor [MODEL]`: measure this machine (disk read bandwidth on the
 * model's filesystem per engine and queue depth, memory bandwidth, RAM, CPU features, clock
 * and temperature hints), recommend settings, estimate tok/s for MODEL, and save the I/O
 * engine choice in the profile that `--io auto` reads (src/io.c), so runs skip measuring. */
#include "app/cli/cli_args.h"
#include "deltafin.h"
#include "weights/expert_store.h"
#include "weights/io.h"
#include "kernels/kernels.h"
#include "runtime/loader.h"
#include "base/sysmem.h"
#include "runtime/plan.h"
#include "model/model.h"
#include "format/pack.h"
#include "base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin doctor [options] [MODEL.gguf]\n"
        "\n"
        "Measure this machine and recommend settings for MODEL:\n"
        "  - disk reads on MODEL's filesystem: buffered, O_DIRECT and io_uring, expert-sized\n"
        "    requests, queue depths 1, 4 and 16 (page cache dropped with fadvise first);\n"
        "  - memory bandwidth, available RAM, CPU features and kernels, clock/thermal hints;\n"
        "  - recommended --mem-limit, -t, --io and --prefetch, and the expected tok/s range\n"
        "    for MODEL from its memory plan and the measured I/O floor.\n"
        "The winning I/O engine is saved in the profile `--io auto` reads, so runs skip the\n"
        "measurement. Without MODEL only memory and CPU are measured.\n"
        "\n"
        "  --seconds S       disk measurement budget in seconds (default 8)\n"
        "  --profile FILE    I/O profile to write (default: $DELTAFIN_IO_PROFILE, else\n"
        "                    $XDG_CACHE_HOME/deltafin/io-profile, else ~/.cache/deltafin/io-profile)\n"
        "  --no-save         measure and print only; do not write the profile\n"
        "  --mem-limit SIZE  estimate tok/s for this memory limit (default: the recommended one)\n"
        "  -h, --help        this help\n");
}

/* ---- disk ------------------------------------------------------------------------------ */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    df_io_req *reqs;
    int *free_idx, n_free, inflight, errors;
} window;

static void win_done(df_io_req *r) {
    window *w = r->ud;
    pthread_mutex_lock(&w->mu);
    if (r->status) w->errors++;
    w->free_idx[w->n_free++] = (int)(r - w->reqs);
    w->inflight--;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void drop_cache(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0) { posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); close(fd); }
}

/* GB/s of random `probe`-byte reads with `qd` in flight for about `secs`; < 0 on failure. */
static double disk_cell(const char *path, uint64_t size, int engine, int qd, uint64_t probe, double secs) {
    if (probe > size) probe = size;
    const uint64_t stride = df_io_buf_need(DF_IO_ALIGN - 1, probe);
    if ((uint64_t)qd * stride > (768ull << 20)) return -1; /* too much buffer memory */
    drop_cache(path);
    df_io_params p = df_io_default_params();
    p.engine = engine;
    p.n_threads = qd;
    p.queue_depth = qd;
    df_io *io = NULL;
    const char *paths[1] = {path};
    if (df_io_open(paths, 1, &p, &io) != DF_OK) { df_err_clear(); return -1; }
    uint8_t *bufs = df_aligned_alloc(DF_IO_ALIGN, (size_t)(qd * stride));
    window w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, df_calloc((size_t)qd, sizeof(df_io_req)),
                df_calloc((size_t)qd, sizeof(int)), qd, 0, 0};
    double gbps = -1;
    if (bufs && w.reqs && w.free_idx) {
        for (int i = 0; i < qd; i++) w.free_idx[i] = i;
        uint64_t seed = 0x2545f4914f6cdd1dull ^ df_time_ns(), issued = 0;
        const uint64_t t0 = df_time_ns(), min_reqs = (uint64_t)qd * 2, max_reqs = 1u << 20;
        for (;;) {
            double el = (double)(df_time_ns() - t0) / 1e9;
            if ((el >= secs && issued >= min_reqs) || issued >= max_reqs) break;
            pthread_mutex_lock(&w.mu);
            while (!w.n_free) pthread_cond_wait(&w.cv, &w.mu);
            int i = w.free_idx[--w.n_free];
            w.inflight++;
            pthread_mutex_unlock(&w.mu);
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t span = size - probe;
            df_io_req *r = &w.reqs[i];
            memset(r, 0, sizeof *r);
            r->offset = span ? ((seed >> 11) % span) & ~(uint64_t)(DF_IO_ALIGN - 1) : 0;
            r->len = probe;
            r->buf = bufs + (size_t)i * stride;
            r->done = win_done;
            r->ud = &w;
            if (df_io_submit(io, r) != DF_OK) {
                df_err_clear();
                pthread_mutex_lock(&w.mu);
                w.errors++;
                w.inflight--;
                w.free_idx[w.n_free++] = i;
                pthread_mutex_unlock(&w.mu);
                break;
            }
            issued++;
        }
        pthread_mutex_lock(&w.mu);
        while (w.inflight) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        const uint64_t dt = df_time_ns() - t0;
        if (!w.errors) gbps = (double)probe * (double)issued / (double)(dt ? dt : 1);
    }
    df_io_close(io);
    free(bufs);
    free(w.reqs);
    free(w.free_idx);
    return gbps;
}

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
        uint64_t t0 = df_time_ns();
        size_t per = bytes / 8 / (size_t)n_threads;
        for (int t = 0; t < n_threads; t++) {
            args[t] = (rd_arg){buf + (size_t)t * per, per, 0};
            pthread_create(&th[t], NULL, rd_thread, &args[t]);
        }
        uint64_t sink = 0;
        for (int t = 0; t < n_threads; t++) { pthread_join(th[t], NULL); sink += args[t].sum; }
        double dt = (double)(df_time_ns() - t0);
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
    if (df_read_file("/proc/cpuinfo", &d, &n) != DF_OK) { df_err_clear(); return online; }
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
    if (df_read_file("/proc/cpuinfo", &d, &n) != DF_OK) { df_err_clear(); snprintf(out, cap, "(unknown)"); return; }
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
    if (df_read_file(p, &d, &n) != DF_OK) { df_err_clear(); return false; }
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
    if (df_read_file("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", &gov, &n) == DF_OK) {
        gov[strcspn(gov, "\n")] = 0;
        printf("  governor            %s%s\n", gov, strcmp(gov, "performance") ? " ('performance' gives steadier tok/s)" : "");
        free(gov);
    } else df_err_clear();
    int nz = 0;
    for (int z = 0; z < 16; z++) {
        char p[128], *ty = NULL;
        uint64_t t;
        snprintf(p, sizeof p, "/sys/class/thermal/thermal_zone%d/temp", z);
        if (!read_u64_file(p, &t)) continue;
        snprintf(p, sizeof p, "/sys/class/thermal/thermal_zone%d/type", z);
        if (df_read_file(p, &ty, &n) == DF_OK) ty[strcspn(ty, "\n")] = 0; else df_err_clear();
        printf("  thermal zone %-2d     %.1f C (%s)%s\n", z, t / 1000.0, ty ? ty : "?", t > 90000 ? " HOT" : "");
        free(ty);
        nz++;
    }
    if (!nz) printf("  temperatures        not readable here (no /sys/class/thermal zones)\n");
}

/* ---- model ----------------------------------------------------------------------------- */

/* Largest single read the expert store will issue (its io auto probe size, expert_store.c). */
static uint64_t model_probe_bytes(df_model *m) {
    uint64_t mx = 0;
    if (m->pack) {
        int L = df_pack_n_layers(m->pack), E = df_pack_n_experts(m->pack);
        size_t n = (size_t)L * (size_t)E;
        df_expert_loc *locs = df_calloc(n * 3 + 1, sizeof *locs);
        df_expert_record *rec = df_calloc(n + 1, sizeof *rec);
        if (locs && rec && df_pack_locs(m->pack, locs, rec) == DF_OK)
            for (size_t k = 0; k < n; k++) if (rec[k].nbytes > mx) mx = rec[k].nbytes;
        free(locs);
        free(rec);
        df_err_clear();
    } else {
        for (int l = 0; l < m->hp.n_layer; l++)
            for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
                df_expert_loc lc;
                if (df_model_expert_loc(m, l, 0, part, &lc) == DF_OK && lc.nbytes > mx) mx = lc.nbytes;
                else df_err_clear();
            }
    }
    return df_pad(mx, DF_IO_ALIGN);
}

int cmd_doctor(int argc, char **argv) {
    const char *model = NULL, *profile = NULL;
    double secs = 8;
    bool save = true;
    uint64_t user_limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--seconds") && i + 1 < argc) secs = df_cli_float(argv, &i);
        else if (!strcmp(a, "--profile") && i + 1 < argc) profile = argv[++i];
        else if (!strcmp(a, "--no-save")) save = false;
        else if (!strcmp(a, "--mem-limit") && i + 1 < argc) {
            if (df_parse_size(argv[++i], &user_limit) < 0 || !user_limit) {
                fprintf(stderr, "doctor: bad --mem-limit '%s'\n", argv[i]);
                return 2;
            }
        }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) model = argv[++i];
        else if (a[0] != '-' && !model) model = a;
        else { fprintf(stderr, "doctor: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!(secs > 0) || secs > 3600) { fprintf(stderr, "doctor: --seconds must be in (0, 3600]\n"); return 2; }
    char b1[32], b2[32];
    const int online = (int)sysconf(_SC_NPROCESSORS_ONLN), cores = physical_cores();
    const uint64_t avail = df_mem_available();
    uint64_t total_ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);

    df_model *m = NULL;
    if (model && df_model_load(model, NULL, DF_LOAD_META_ONLY, &m) < 0) {
        fprintf(stderr, "doctor: %s\n", deltafin_errmsg());
        return 1;
    }
    printf("machine:\n");
    char flags[512];
    cpu_flags(flags, sizeof flags);
    printf("  cpus                %d online, %d physical cores\n", online, cores);
    printf("  cpu features        %s\n", flags);
    printf("  kernels             %s\n", df_kernels()->name);
    printf("  ram                 %s available of %s\n", df_fmt_bytes(avail, b1, sizeof b1),
           df_fmt_bytes(total_ram, b2, sizeof b2));
    size_t mbytes = 128u << 20; /* above any L3 we target */
    if (avail && mbytes > avail / 8) mbytes = (size_t)(avail / 8) & ~(size_t)4095;
    if (mbytes < (16u << 20)) mbytes = 16u << 20;
    double mem1 = -1, memn = -1;
    uint64_t *mbuf = df_aligned_alloc(4096, mbytes);
    if (mbuf) {
        memset(mbuf, 1, mbytes);
        mem1 = mem_read_gbps(mbuf, mbytes, 1);
        memn = mem_read_gbps(mbuf, mbytes, cores);
        free(mbuf);
    } else df_err_clear();
    printf("  memory read         %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n", mem1, memn, cores);
    system_hints();

    double best_gbps = 0, qd1_best = 0, qd16_best = 0;
    int best_engine = -1;
    uint64_t probe = 0;
    if (model) {
        const char *path = m->gguf->shards[0].path;
        struct stat st;
        if (stat(path, &st) < 0) { fprintf(stderr, "doctor: %s: %s\n", path, strerror(errno)); deltafin_model_free(m); return 1; }
        probe = model_probe_bytes(m);
        if (!probe) probe = 8u << 20; /* no routed experts: io auto's default probe */
        printf("\ndisk (%s, device %u:%u, %s random reads, cache dropped before each):\n", path, major(st.st_dev),
               minor(st.st_dev), df_fmt_bytes(probe, b1, sizeof b1));
        /* A sparse file (gen-random --sparse, an interrupted download) reads its holes at
         * memory speed: the numbers below would not be the disk's. */
        if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 10 * 9)
            printf("  warning             %s is sparse (%s of %s allocated): holes read at memory speed, so the\n"
                   "                      numbers below overstate the disk; measure a fully written file\n",
                   path, df_fmt_bytes((uint64_t)st.st_blocks * 512, b1, sizeof b1),
                   df_fmt_bytes((uint64_t)st.st_size, b2, sizeof b2));
        static const int engines[] = {DF_IO_PREAD, DF_IO_DIRECT, DF_IO_URING};
        static const int qds[] = {1, 4, 16};
        const double cell = secs * 0.7 / 9;
        printf("  %-8s %10s %10s %10s   GB/s\n", "engine", "qd 1", "qd 4", "qd 16");
        for (int ei = 0; ei < 3; ei++) {
            if (!df_io_engine_available(engines[ei])) {
                printf("  %-8s not available in this build/kernel\n", df_io_engine_name(engines[ei]));
                continue;
            }
            printf("  %-8s", engines[ei] == DF_IO_PREAD ? "buffered" : df_io_engine_name(engines[ei]));
            for (int qi = 0; qi < 3; qi++) {
                double g = disk_cell(path, (uint64_t)st.st_size, engines[ei], qds[qi], probe, cell);
                if (g < 0) printf(" %10s", "n/a");
                else printf(" %10.2f", g);
                fflush(stdout);
                if (qi == 0 && g > qd1_best) qd1_best = g;
                if (qi == 2 && g > qd16_best) qd16_best = g;
            }
            printf("\n");
        }
        /* The choice `--io auto` would make (same measurement as src/io.c), saved for it. */
        double gbps[DF_IO_NENGINES] = {0};
        if (df_io_measure(path, probe, 0, &best_engine, gbps) != DF_OK) {
            fprintf(stderr, "doctor: I/O measurement failed: %s\n", deltafin_errmsg());
            best_engine = -1;
        } else {
            best_gbps = gbps[best_engine];
            printf("  io auto choice      %s (%.2f GB/s with 8 parallel reads)\n", df_io_engine_name(best_engine),
                   best_gbps);
            if ((uint64_t)st.st_size < 4 * probe)
                printf("  note                file smaller than 4 expert reads: `--io auto` uses pread without a profile\n");
            if (save) {
                char ppath[1024], key[128];
                df_io_profile_path(profile, ppath, sizeof ppath);
                snprintf(key, sizeof key, "dev=%u:%u probe=%llu", major(st.st_dev), minor(st.st_dev),
                         (unsigned long long)probe);
                if (df_io_profile_store(ppath, key, best_engine, gbps) != DF_OK)
                    fprintf(stderr, "doctor: %s\n", deltafin_errmsg());
                else printf("  profile saved       %s (%s engine=%s)\n", ppath, key, df_io_engine_name(best_engine));
            }
        }
    }

    printf("\nrecommended:\n");
    const uint64_t reserve = 1ull << 30;
    const uint64_t limit = avail > 2 * reserve ? avail - reserve : avail / 2;
    printf("  --mem-limit %-12s available RAM minus 1 GiB for the OS and page cache\n",
           df_fmt_bytes(limit, b1, sizeof b1));
    printf("  -t %-21d one thread per physical core\n", cores);
    if (best_engine > 0) {
        printf("  --io %-19s fastest engine here (saved; `--io auto` picks it without measuring)\n",
               df_io_engine_name(best_engine));
        bool parallel = qd1_best > 0 && qd16_best >= 1.5 * qd1_best;
        printf("  --prefetch %-13s %s\n", parallel ? "on" : "auto",
               parallel ? "the disk serves parallel reads much faster than one at a time, so reading the next "
                          "layer's experts ahead is nearly free"
                        : "parallel reads gain little here; let the store decide");
    }
    int ret = 0;
    if (m) {
        /* the plan run would make at this limit: the same load, with the limit */
        deltafin_model_free(m);
        m = NULL;
        deltafin_model_params lp = deltafin_model_default_params();
        lp.mem_limit = user_limit ? user_limit : limit;
        if (df_model_load(model, &lp, DF_LOAD_META_ONLY, &m) < 0) {
            fprintf(stderr, "doctor: %s\n", deltafin_errmsg());
            return 1;
        }
        const df_hparams *hp = &m->hp;
        df_footprint mp;
        int ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        df_model_footprint(m, ctx, &mp);
        const int n_tot = mp.n_moe_layers * hp->n_expert;
        const double exp_avg = n_tot ? (double)mp.expert_bytes / n_tot : 0;
        const double active = exp_avg * mp.n_moe_layers * hp->n_expert_used; /* routed bytes one token touches */
        deltafin_plan plan;
        printf("\nexpected speed for %s (context %d):\n", model, ctx);
        if (deltafin_model_plan(m, &plan) != DF_OK) {
            printf("  does not fit: %s\n", deltafin_errmsg());
            ret = 1;
        } else {
            const double hit = n_tot && plan.experts_stream ? (plan.all_resident ? 1.0 : (double)plan.n_slots / n_tot) : 1.0;
            const double disk = best_gbps > 0 ? (qd16_best > best_gbps ? qd16_best : best_gbps) * 1e9 : 0;
            const double compute_s = memn > 0 ? (mp.dense_bytes + active) / (memn * 1e9) : 0;
            const double io_s = disk > 0 ? ((1 - hit) * active + (double)plan.dense_read_per_token) / disk : 0;
            printf("  weights read per token   %s dense + %s routed experts (%d of %d per layer)\n",
                   df_fmt_bytes(mp.dense_bytes, b1, sizeof b1), df_fmt_bytes((uint64_t)active, b2, sizeof b2),
                   hp->n_expert_used, hp->n_expert);
            printf("  expert cache             %s = %.0f%% of the experts (memory plan at --mem-limit %s)\n",
                   df_fmt_bytes(plan.cache_bytes, b1, sizeof b1), 100.0 * hit, df_fmt_bytes(lp.mem_limit, b2, sizeof b2));
            if (plan.dense_layers_streamed) {
                char b3[512];
                printf("  %s\n", deltafin_plan_dense_str(&plan, b3, sizeof b3));
            }
            printf("  compute floor            %.2f ms/token (weights at %.1f GB/s memory read)\n", compute_s * 1e3, memn);
            if (disk > 0) {
                printf("  I/O floor                %.2f ms/token (%.0f%% misses, uniform routing, at %.2f GB/s)\n",
                       io_s * 1e3, 100 * (1 - hit), disk / 1e9);
                const double hi = 1.0 / (compute_s > io_s ? compute_s : io_s), lo = 1.0 / (compute_s + io_s);
                printf("  expected                 %.1f - %.1f tok/s (no overlap - full overlap of reads and compute;\n"
                       "                           real routing is skewed, so hit rates and speed are usually higher)\n",
                       lo, hi);
            }
        }
        deltafin_model_free(m);
    }
    return ret;
}
