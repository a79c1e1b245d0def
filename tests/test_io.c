/* test_io.c — every read engine returns identical bytes for unaligned ranges; injected EIO,
 * short read and corruption, a file truncated after open and a range past EOF each give an
 * error naming the file and offset; O_DIRECT falls back on tmpfs; auto caches its choice;
 * low-priority requests wait for normal ones, df_io_cancel is all-or-nothing, df_io_promote. */
#include "weights/io.h"
#include "testlib.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/stat.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void make_file(const char *path, uint8_t *data, size_t n) {
    for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(rnd() >> 24);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

typedef struct { pthread_mutex_t mu; pthread_cond_t cv; int pending; } waiter;
static void on_done(df_io_req *r) {
    waiter *w = r->ud;
    pthread_mutex_lock(&w->mu);
    w->pending--;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Submit n random unaligned reads at once and compare each with the file contents. */
static void engine_matches(const char *path, const uint8_t *data, size_t n, int engine) {
    df_io_params p = df_io_default_params();
    p.engine = engine;
    p.n_threads = 4;
    p.queue_depth = 8;
    df_io *io = NULL;
    const char *paths[1] = {path};
    int rc = df_io_open(paths, 1, &p, &io);
    CHECK_MSG(rc == DF_OK, "engine %s: %s", df_io_engine_name(engine), df_errmsg());
    if (rc) return;
    enum { NR = 40 };
    df_io_req req[NR];
    uint8_t *bufs[NR];
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NR};
    for (int i = 0; i < NR; i++) {
        uint64_t off = rnd() % (n - 1);
        uint64_t len = 1 + rnd() % (i % 3 == 0 ? 300000 : 9000);
        if (i == 0) { off = 0; len = n; }            /* whole file */
        if (i == 1) { off = n - 1; len = 1; }        /* last byte */
        if (i == 2) { off = 4096; len = 8192; }      /* aligned */
        if (off + len > n) len = n - off;
        bufs[i] = df_aligned_alloc(DF_IO_ALIGN, df_io_buf_need(off, len));
        memset(&req[i], 0, sizeof req[i]);
        req[i].file = 0; req[i].offset = off; req[i].len = len; req[i].buf = bufs[i];
        req[i].done = on_done; req[i].ud = &w;
        CHECK_EQ_INT(df_io_submit(io, &req[i]), DF_OK);
    }
    pthread_mutex_lock(&w.mu);
    while (w.pending) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    for (int i = 0; i < NR; i++) {
        CHECK_MSG(req[i].status == DF_OK, "%s: %s", df_io_engine_name(engine), req[i].err);
        CHECK(req[i].data == bufs[i] + req[i].offset % DF_IO_ALIGN);
        CHECK_MSG(!memcmp(req[i].data, data + req[i].offset, req[i].len), "engine %s read %d (off %llu len %llu) differs",
                  df_io_engine_name(engine), i, (unsigned long long)req[i].offset, (unsigned long long)req[i].len);
        free(bufs[i]);
    }
    /* synchronous helper */
    uint8_t *dst = malloc(123457);
    CHECK_EQ_INT(df_io_read(io, 0, 777, 123457, dst), DF_OK);
    CHECK(!memcmp(dst, data + 777, 123457));
    free(dst);
    df_io_stats st;
    df_io_get_stats(io, &st);
    CHECK(st.reads >= NR + 1);
    CHECK(st.bytes > 0);
    df_io_close(io);
}

static void fault_cases(const char *path, const uint8_t *data, int engine) {
    const char *paths[1] = {path};
    df_io_params p = df_io_default_params();
    p.engine = engine;
    p.n_threads = 2;
    for (int kind = DF_FAULT_EIO; kind <= DF_FAULT_CORRUPT; kind++) {
        df_io *io = NULL;
        CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
        if (!io) return;
        df_io_set_fault(io, kind, 2);
        uint8_t buf[3000];
        CHECK_EQ_INT(df_io_read(io, 0, 100, 3000, buf), DF_OK); /* read 1: clean */
        CHECK(!memcmp(buf, data + 100, 3000));
        int rc = df_io_read(io, 0, 5000, 3000, buf);            /* read 2: faulty */
        if (kind == DF_FAULT_CORRUPT) {
            CHECK_EQ_INT(rc, DF_OK);
            CHECK(memcmp(buf, data + 5000, 3000) != 0);
        } else {
            CHECK_EQ_INT(rc, DF_ERR_IO);
            CHECK_MSG(strstr(df_errmsg(), path) && strstr(df_errmsg(), "offset 5000"), "msg: %s", df_errmsg());
            CHECK(strstr(df_errmsg(), kind == DF_FAULT_EIO ? "Input/output error" : "short read") != NULL);
        }
        CHECK_EQ_INT(df_io_read(io, 0, 5000, 3000, buf), DF_OK); /* read 3: clean again */
        CHECK(!memcmp(buf, data + 5000, 3000));
        df_io_close(io);
    }
}

/* Priorities: one pread worker held inside the first request's callback (a gate), so the
 * queue order of what is submitted meanwhile is deterministic. */
typedef struct { pthread_mutex_t mu; pthread_cond_t cv; bool open, blocked; int order[16], n; } prio_state;
static prio_state g_ps = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, {0}, 0};
static void prio_done(df_io_req *r) {
    pthread_mutex_lock(&g_ps.mu);
    g_ps.order[g_ps.n++] = (int)(intptr_t)r->ud;
    if ((intptr_t)r->ud == 0) { /* the gate request */
        g_ps.blocked = true;
        pthread_cond_broadcast(&g_ps.cv);
        while (!g_ps.open) pthread_cond_wait(&g_ps.cv, &g_ps.mu);
    }
    pthread_cond_broadcast(&g_ps.cv);
    pthread_mutex_unlock(&g_ps.mu);
}

static void priority_cases(const char *path, const uint8_t *data) {
    df_io_params p = df_io_default_params();
    p.engine = DF_IO_PREAD;
    p.n_threads = 1;
    df_io *io = NULL;
    const char *paths[1] = {path};
    CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
    if (!io) return;
    enum { NR = 7 };
    static df_io_req r[NR];
    uint8_t *buf = df_aligned_alloc(DF_IO_ALIGN, NR * 2 * DF_IO_ALIGN);
    for (int phase = 0; phase < 2; phase++) {
        memset(r, 0, sizeof r);
        pthread_mutex_lock(&g_ps.mu);
        g_ps.open = g_ps.blocked = false;
        g_ps.n = 0;
        pthread_mutex_unlock(&g_ps.mu);
        for (int i = 0; i < NR; i++) {
            r[i].file = 0; r[i].offset = 1000 + 333 * (uint64_t)i; r[i].len = 100;
            r[i].buf = buf + (size_t)i * 2 * DF_IO_ALIGN;
            r[i].done = prio_done; r[i].ud = (void *)(intptr_t)i;
        }
        CHECK_EQ_INT(df_io_submit(io, &r[0]), DF_OK); /* the gate: holds the only worker */
        pthread_mutex_lock(&g_ps.mu);
        while (!g_ps.blocked) pthread_cond_wait(&g_ps.cv, &g_ps.mu);
        pthread_mutex_unlock(&g_ps.mu);
        r[1].prio = DF_IO_PRIO_LOW; r[3].prio = DF_IO_PRIO_LOW; r[4].prio = DF_IO_PRIO_LOW;
        for (int i = 1; i <= 4; i++) CHECK_EQ_INT(df_io_submit(io, &r[i]), DF_OK);
        df_io_req *c1[1] = {&r[3]}, *c2[2] = {&r[4], &r[0]};
        if (phase == 0) {
            CHECK_EQ_INT(df_io_cancel(io, c1, 1), 1); /* queued: withdrawn, no callback */
            CHECK_EQ_INT(df_io_cancel(io, c2, 2), 0); /* r[0] is running: all or nothing */
        } else {
            df_io_req *pr[1] = {&r[4]};
            df_io_promote(io, pr, 1); /* r[4] joins the normal queue after r[2] */
        }
        pthread_mutex_lock(&g_ps.mu);
        g_ps.open = true;
        pthread_cond_broadcast(&g_ps.cv);
        int want = phase == 0 ? 4 : 5;
        while (g_ps.n < want) pthread_cond_wait(&g_ps.cv, &g_ps.mu);
        pthread_mutex_unlock(&g_ps.mu);
        df_io_close(io); /* waits for everything accepted and not withdrawn */
        io = NULL;
        CHECK_EQ_INT(g_ps.n, want);
        /* normal before low; low in submission order; promoted = normal */
        static const int exp0[4] = {0, 2, 1, 4}, exp1[5] = {0, 2, 4, 1, 3};
        for (int i = 0; i < want; i++) CHECK_EQ_INT(g_ps.order[i], phase == 0 ? exp0[i] : exp1[i]);
        for (int i = 0; i < NR; i++)
            if (i <= 4 && !(phase == 0 && i == 3)) {
                CHECK_EQ_INT(r[i].status, DF_OK);
                CHECK(memcmp(r[i].data, data + r[i].offset, r[i].len) == 0);
            }
        if (phase == 0) CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
        if (!io && phase == 0) break;
    }
    free(buf);
}

int main(void) {
    df_init();
    df_log_set_level(DF_LOG_ERROR);
    const size_t n = 3u << 20;
    uint8_t *data = malloc(n);
    char disk[256], shm[256], prof[256];
    snprintf(disk, sizeof disk, "/tmp/df_test_io_%d.bin", (int)getpid());
    snprintf(shm, sizeof shm, "/dev/shm/df_test_io_%d.bin", (int)getpid());
    snprintf(prof, sizeof prof, "/tmp/df_test_io_%d.profile", (int)getpid());
    make_file(disk, data, n);

    for (int e = DF_IO_PREAD; e < DF_IO_NENGINES; e++) {
        if (!df_io_engine_available(e)) { printf("test_io: engine %s not available, skipped\n", df_io_engine_name(e)); continue; }
        engine_matches(disk, data, n, e);
        fault_cases(disk, data, e);
    }
    priority_cases(disk, data);
    /* tmpfs refuses O_DIRECT: direct and uring must fall back and still be right */
    FILE *probe = fopen("/dev/shm/.df_probe", "w");
    if (probe) {
        fclose(probe);
        unlink("/dev/shm/.df_probe");
        uint8_t *d2 = malloc(n);
        make_file(shm, d2, n);
        engine_matches(shm, d2, n, DF_IO_DIRECT);
        if (df_io_engine_available(DF_IO_URING)) engine_matches(shm, d2, n, DF_IO_URING);
        unlink(shm);
        free(d2);
    }

    /* past end of file: refused at submit with file + offset */
    {
        const char *paths[1] = {disk};
        df_io_params p = df_io_default_params();
        p.engine = DF_IO_PREAD;
        df_io *io;
        CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
        uint8_t buf[100];
        CHECK_EQ_INT(df_io_read(io, 0, n - 50, 100, buf), DF_ERR_IO);
        CHECK(strstr(df_errmsg(), "truncated") && strstr(df_errmsg(), disk));
        df_io_close(io);
    }
    /* file truncated after open: real short read, for pread, direct and uring */
    for (int e = DF_IO_PREAD; e <= DF_IO_URING; e++) {
        if (!df_io_engine_available(e)) continue;
        make_file(disk, data, n);
        const char *paths[1] = {disk};
        df_io_params p = df_io_default_params();
        p.engine = e;
        df_io *io;
        CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
        CHECK_EQ_INT(truncate(disk, 1 << 20), 0);
        uint8_t *buf = malloc(1 << 20);
        int rc = df_io_read(io, 0, (1 << 20) - 1000, 5000, buf);
        CHECK_EQ_INT(rc, DF_ERR_IO);
        CHECK_MSG(strstr(df_errmsg(), "short read at offset 1047576") && strstr(df_errmsg(), disk),
                  "%s: %s", df_io_engine_name(e), df_errmsg());
        free(buf);
        df_io_close(io);
    }
    /* auto: measures once and caches the choice */
    {
        make_file(disk, data, n);
        const char *paths[1] = {disk};
        df_io_params p = df_io_default_params();
        p.engine = DF_IO_AUTO;
        p.probe_bytes = 256 << 10;
        p.profile_path = prof;
        df_io *io;
        CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
        int chosen = df_io_get_engine(io);
        CHECK(chosen > DF_IO_AUTO && chosen < DF_IO_NENGINES);
        df_io_close(io);
        char *txt = NULL; size_t len = 0;
        CHECK_EQ_INT(df_read_file(prof, &txt, &len), DF_OK);
        char want[64];
        snprintf(want, sizeof want, "engine=%s", df_io_engine_name(chosen));
        CHECK(txt && strstr(txt, want));
        for (int rep = 0; rep < 3; rep++) { /* from the cache, not re-measured */
            CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
            CHECK_EQ_INT(df_io_get_engine(io), chosen);
            df_io_close(io);
        }
        /* a cached choice is used as is: rewrite the profile to name mmap */
        FILE *pf = fopen(prof, "w");
        char *sp = strstr(txt ? txt : "", " engine=");
        if (pf && sp) { fprintf(pf, "%.*s engine=mmap rule=2 pread=1.00GB/s\n", (int)(sp - txt), txt); fclose(pf); }
        CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
        CHECK_EQ_INT(df_io_get_engine(io), DF_IO_MMAP);
        df_io_close(io);
        /* a line from the older rule (no rule=2) is measured again and replaced */
        pf = fopen(prof, "w");
        if (pf && sp) { fprintf(pf, "%.*s engine=mmap pread=1.00GB/s\n", (int)(sp - txt), txt); fclose(pf); }
        CHECK_EQ_INT(df_io_open(paths, 1, &p, &io), DF_OK);
        CHECK(df_io_get_engine(io) > DF_IO_AUTO);
        df_io_close(io);
        char *txt2 = NULL;
        CHECK_EQ_INT(df_read_file(prof, &txt2, &len), DF_OK);
        CHECK_MSG(txt2 && strstr(txt2, " rule=2") && !strstr(txt2, "engine=mmap pread=1.00GB/s"), "%s", txt2 ? txt2 : "");
        free(txt2);
        free(txt);
        unlink(prof);
    }
    /* df_io_pick: bypass engines unless a page-cache engine is 1.25x faster */
    {
        double g[DF_IO_NENGINES] = {0};
        g[DF_IO_PREAD] = 0.62; g[DF_IO_DIRECT] = 0.58; g[DF_IO_URING] = 0.41; g[DF_IO_MMAP] = 0.64;
        CHECK_EQ_INT(df_io_pick(g), DF_IO_DIRECT);
        g[DF_IO_URING] = 0.60;
        CHECK_EQ_INT(df_io_pick(g), DF_IO_URING);
        g[DF_IO_PREAD] = 0.80;      /* 1.33x the best bypass engine */
        CHECK_EQ_INT(df_io_pick(g), DF_IO_PREAD);
        g[DF_IO_MMAP] = 0.90;
        CHECK_EQ_INT(df_io_pick(g), DF_IO_MMAP);
        g[DF_IO_DIRECT] = g[DF_IO_URING] = 0;  /* none measured: the faster cached engine */
        CHECK_EQ_INT(df_io_pick(g), DF_IO_MMAP);
        g[DF_IO_PREAD] = g[DF_IO_MMAP] = 0;
        CHECK_EQ_INT(df_io_pick(g), DF_IO_PREAD);
    }
    int k; uint64_t nth;
    CHECK_EQ_INT(df_io_parse_fault("short:7", &k, &nth), DF_OK);
    CHECK(k == DF_FAULT_SHORT && nth == 7);
    CHECK_EQ_INT(df_io_parse_fault("bogus:1", &k, &nth), DF_ERR_INVALID);
    CHECK_EQ_INT(df_io_engine_parse("uring", &k), DF_OK);
    CHECK_EQ_INT(k, DF_IO_URING);
    CHECK_EQ_INT(df_io_engine_parse("fast", &k), DF_ERR_INVALID);
    unlink(disk);
    free(data);
    TEST_MAIN_END("test_io");
}
