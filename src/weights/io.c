/* io.c — read engines (see io.h). Sync engines (pread, direct, mmap) run requests on a pool
 * of worker threads pulling from one FIFO; io_uring keeps up to queue_depth reads in the ring
 * and one reaper thread completes them. Invariant: every request accepted by df_io_submit gets
 * exactly one `done` callback, and df_io_close waits for all of them. */
#include "weights/io.h"
#include "base/env.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>
#ifdef DF_HAVE_URING
#include <liburing.h>
#endif

typedef struct {
    char *path;
    int fd;                    /* buffered */
    _Atomic int fd_direct;     /* O_DIRECT, -1 if refused or given up */
    int fd_direct_orig;        /* closed at df_io_close (a reader may still use it) */
    uint64_t size;
    uint8_t *map;              /* mmap engine */
} io_file;

struct df_io {
    int engine;
    int n_files;
    io_file *f;
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* work available / stop */
    pthread_cond_t idle;       /* inflight dropped to 0 */
    df_io_req *head, *tail;    /* FIFO of queued requests */
    df_io_req *lhead, *ltail;  /* FIFO of queued low-priority requests */
    int low_running;           /* low-priority requests started, not completed */
    int inflight;              /* accepted, not yet completed */
    bool stop;
    pthread_t *threads;
    int n_threads;
    /* faults */
    int fault_kind;
    uint64_t fault_nth;
    _Atomic uint64_t n_reads;
    /* stats (under mu) */
    uint64_t st_reads, st_bytes, st_busy, st_read_ns, busy_start;
#ifdef DF_HAVE_URING
    struct io_uring ring;
    bool ring_ok;
    int ring_inflight, qd;
    pthread_t reaper;
    bool reaper_started;
#endif
};

static const char *g_engine_names[DF_IO_NENGINES] = {"auto", "pread", "direct", "uring", "mmap"};

const char *df_io_engine_name(int e) {
    return (e >= 0 && e < DF_IO_NENGINES) ? g_engine_names[e] : "?";
}

int df_io_engine_parse(const char *s, int *engine) {
    for (int i = 0; i < DF_IO_NENGINES; i++)
        if (s && !strcmp(s, g_engine_names[i])) { *engine = i; return DF_OK; }
    return df_err(DF_ERR_INVALID, "unknown I/O engine '%s' (expected auto, pread, direct, uring or mmap)",
                  s ? s : "(null)");
}

bool df_io_engine_available(int e) {
    if (e == DF_IO_URING) {
#ifdef DF_HAVE_URING
        struct io_uring r;
        if (io_uring_queue_init(4, &r, 0) < 0) return false;
        io_uring_queue_exit(&r);
        return true;
#else
        return false;
#endif
    }
    return e > DF_IO_AUTO && e < DF_IO_NENGINES;
}

df_io_params df_io_default_params(void) {
    df_io_params p = {0};
    p.engine = DF_IO_AUTO;
    p.n_threads = 8;
    p.queue_depth = 64;
    p.probe_bytes = 8u << 20;
    /* experiments: DELTAFIN_IO_THREADS / DELTAFIN_IO_QD (reads in flight per engine) */
    if (df_env()->io_threads) p.n_threads = df_env()->io_threads;
    if (df_env()->io_qd) p.queue_depth = df_env()->io_qd;
    p.fault = df_env()->fault;
    return p;
}

int df_io_parse_fault(const char *s, int *kind, uint64_t *nth) {
    static const char *names[] = {"none", "eio", "short", "corrupt"};
    for (int k = 1; k < 4; k++) {
        size_t n = strlen(names[k]);
        if (!strncmp(s, names[k], n) && s[n] == ':') {
            char *end;
            unsigned long long v = strtoull(s + n + 1, &end, 10);
            if (*end || v == 0) break;
            *kind = k;
            *nth = v;
            return DF_OK;
        }
    }
    return df_err(DF_ERR_INVALID, "DELTAFIN_FAULT='%s': expected eio:N, short:N or corrupt:N (N >= 1)", s);
}

void df_io_set_fault(df_io *io, int kind, uint64_t nth) {
    pthread_mutex_lock(&io->mu);
    io->fault_kind = kind;
    io->fault_nth = nth;
    atomic_store(&io->n_reads, 0);
    pthread_mutex_unlock(&io->mu);
}

static void req_fail(df_io_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void req_fail(df_io_req *r, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->status = status;
}

/* Which fault (if any) hits this read. Decided once per request. */
static int fault_for(df_io *io) {
    uint64_t idx = atomic_fetch_add(&io->n_reads, 1) + 1;
    return (io->fault_kind && idx == io->fault_nth) ? io->fault_kind : DF_FAULT_NONE;
}

static void apply_fault(df_io *io, df_io_req *r, int fault) {
    if (r->status || fault == DF_FAULT_NONE) return;
    const char *path = io->f[r->file].path;
    if (fault == DF_FAULT_EIO)
        req_fail(r, DF_ERR_IO, "%s: read of %llu bytes at offset %llu failed: %s (injected fault)", path,
                 (unsigned long long)r->len, (unsigned long long)r->offset, strerror(EIO));
    else if (fault == DF_FAULT_SHORT)
        req_fail(r, DF_ERR_IO, "%s: short read at offset %llu: got %llu of %llu bytes (injected fault)", path,
                 (unsigned long long)r->offset, (unsigned long long)(r->len / 2), (unsigned long long)r->len);
    else if (fault == DF_FAULT_CORRUPT && r->len)
        r->data[r->len / 2] ^= 0x5a;
}

/* Read [off, off+n) of fd into dst, retrying partial reads; returns bytes read (< n at EOF)
 * or -errno. */
static int64_t pread_full(int fd, uint8_t *dst, uint64_t n, uint64_t off) {
    uint64_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, dst + got, n - got, (off_t)(off + got));
        if (k < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (k == 0) break;
        got += (uint64_t)k;
    }
    return (int64_t)got;
}

/* Buffered reads leave the bytes in the page cache, which a memory cgroup charges to the
 * process: drop them once copied (the expert cache is the cache; --mem-limit covers both). */
static void drop_pages(io_file *f, uint64_t off, uint64_t len) {
    if (!len) return;
    /* DONTNEED drops only whole pages inside the range: round it out to whole pages */
    const uint64_t pg = 65536; /* >= any page size */
    uint64_t a0 = off - off % pg, a1 = off + len;
    a1 += (pg - a1 % pg) % pg;
    (void)posix_fadvise(f->fd, (off_t)a0, (off_t)(a1 - a0), POSIX_FADV_DONTNEED);
}

static void read_buffered(df_io *io, df_io_req *r) {
    io_file *f = &io->f[r->file];
    int64_t k = pread_full(f->fd, r->data, r->len, r->offset);
    if (k > 0) drop_pages(f, r->offset, (uint64_t)k);
    if (k < 0)
        req_fail(r, DF_ERR_IO, "%s: read of %llu bytes at offset %llu failed: %s", f->path,
                 (unsigned long long)r->len, (unsigned long long)r->offset, strerror((int)-k));
    else if ((uint64_t)k < r->len)
        req_fail(r, DF_ERR_IO, "%s: short read at offset %llu: got %llu of %llu bytes (file size %llu)", f->path,
                 (unsigned long long)r->offset, (unsigned long long)k, (unsigned long long)r->len,
                 (unsigned long long)f->size);
}

static void direct_refused(df_io *io, io_file *f, int err) {
    (void)io;
    if (atomic_exchange(&f->fd_direct, -1) >= 0)
        df_log(DF_LOG_WARN, "%s: O_DIRECT read refused (%s); using buffered reads for this file", f->path,
               strerror(err));
}

static void read_direct(df_io *io, df_io_req *r) {
    io_file *f = &io->f[r->file];
    int fd = atomic_load(&f->fd_direct);
    if (fd < 0) { read_buffered(io, r); return; }
    uint64_t head = r->offset % DF_IO_ALIGN, aoff = r->offset - head;
    uint64_t alen = df_io_buf_need(r->offset, r->len), need = head + r->len;
    int64_t k = pread_full(fd, r->buf, alen, aoff);
    if (k == -EINVAL) {
        direct_refused(io, f, EINVAL);
        read_buffered(io, r);
        return;
    }
    if (k < 0)
        req_fail(r, DF_ERR_IO, "%s: read of %llu bytes at offset %llu failed: %s", f->path,
                 (unsigned long long)r->len, (unsigned long long)r->offset, strerror((int)-k));
    else if ((uint64_t)k < need)
        req_fail(r, DF_ERR_IO, "%s: short read at offset %llu: got %llu of %llu bytes (file size %llu)", f->path,
                 (unsigned long long)r->offset, (unsigned long long)((uint64_t)k > head ? (uint64_t)k - head : 0),
                 (unsigned long long)r->len, (unsigned long long)f->size);
}

/* Copy from the mapping without touching it directly: a file truncated under the mapping makes
 * a plain memcpy die of SIGBUS, while process_vm_readv on our own pages returns what it could
 * copy (EFAULT past the end). Returns the bytes copied, or -1 when the call is unavailable. */
static int64_t copy_mapped(uint8_t *dst, const uint8_t *src, uint64_t n) {
    uint64_t done = 0;
    while (done < n) {
        struct iovec l = {dst + done, (size_t)(n - done)}, rm = {(void *)(src + done), (size_t)(n - done)};
        ssize_t k = process_vm_readv(getpid(), &l, 1, &rm, 1, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno == EFAULT ? (int64_t)done : -1;
        if (k == 0) break;
        done += (uint64_t)k;
    }
    return (int64_t)done;
}

static void read_mmap(df_io *io, df_io_req *r) {
    io_file *f = &io->f[r->file];
    if (!f->map) { read_buffered(io, r); return; }
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t a0 = r->offset - r->offset % pg, a1 = r->offset + r->len;
    struct stat st;
    if (fstat(f->fd, &st) == 0 && (uint64_t)st.st_size < a1) { /* truncated since it was mapped */
        req_fail(r, DF_ERR_IO, "%s: short read at offset %llu: the file was truncated to %llu bytes (needs %llu)",
                 f->path, (unsigned long long)r->offset, (unsigned long long)st.st_size, (unsigned long long)a1);
        return;
    }
    /* MADV_RANDOM mapping: start the reads of exactly this range, then fault it in */
    (void)madvise(f->map + a0, (size_t)(a1 - a0), MADV_WILLNEED);
    int64_t k = copy_mapped(r->data, f->map + r->offset, r->len);
    if (k < 0) memcpy(r->data, f->map + r->offset, r->len); /* no process_vm_readv: the fstat above guards */
    else if ((uint64_t)k < r->len) {
        req_fail(r, DF_ERR_IO, "%s: short read at offset %llu: got %lld of %llu bytes (file truncated while mapped?)",
                 f->path, (unsigned long long)r->offset, (long long)k, (unsigned long long)r->len);
        return;
    }
    /* unmap the faulted pages from this process, then drop them from the page cache */
    (void)madvise(f->map + a0, (size_t)(a1 - a0), MADV_DONTNEED);
    drop_pages(f, a0, a1 - a0);
}

static void complete(df_io *io, df_io_req *r) {
    uint64_t now = df_time_ns();
    pthread_mutex_lock(&io->mu);
    if (r->prio == DF_IO_PRIO_LOW) {
        io->low_running--;
        pthread_cond_signal(&io->cv); /* a queued low request may start now */
    }
    io->st_reads++;
    if (!r->status) io->st_bytes += r->len;
    io->st_read_ns += now - r->t_submit;
    pthread_mutex_unlock(&io->mu);
    if (r->done) r->done(r); /* r may be freed/reused by the callback: no access after */
    pthread_mutex_lock(&io->mu);
    if (--io->inflight == 0) {
        io->st_busy += df_time_ns() - io->busy_start;
        pthread_cond_broadcast(&io->idle);
    }
    pthread_mutex_unlock(&io->mu);
}

static void exec_sync(df_io *io, df_io_req *r) {
    int fault = fault_for(io);
    switch (io->engine) {
    case DF_IO_DIRECT: read_direct(io, r); break;
    case DF_IO_MMAP: read_mmap(io, r); break;
    default: read_buffered(io, r); break;
    }
    apply_fault(io, r, fault);
}

/* mu held: the next request to start (normal first; low ones only under the cap), or NULL */
static df_io_req *take_next(df_io *io) {
    df_io_req *r = io->head;
    if (r) {
        io->head = r->next;
        if (!io->head) io->tail = NULL;
        return r;
    }
    r = io->lhead;
    if (!r || io->low_running >= DF_IO_LOW_INFLIGHT) return NULL;
    io->lhead = r->next;
    if (!io->lhead) io->ltail = NULL;
    io->low_running++;
    return r;
}

static void *worker(void *arg) {
    df_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        df_io_req *r;
        while (!(r = take_next(io)) && !io->stop) pthread_cond_wait(&io->cv, &io->mu);
        if (!r) break;
        pthread_mutex_unlock(&io->mu);
        exec_sync(io, r);
        complete(io, r);
        pthread_mutex_lock(&io->mu);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

#ifdef DF_HAVE_URING
/* While a request is in the ring, its fault decision and read mode are kept in its (still
 * unused) err[] bytes; they are taken out and err is cleared on completion. */
typedef struct { int fault; int direct; } uring_tag;

static void uring_prep(df_io *io, df_io_req *r) {
    io_file *f = &io->f[r->file];
    uring_tag tag = {fault_for(io), 0};
    int fd = atomic_load(&f->fd_direct);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    DF_ASSERT(sqe);
    if (fd >= 0) {
        tag.direct = 1;
        uint64_t head = r->offset % DF_IO_ALIGN;
        io_uring_prep_read(sqe, fd, r->buf, (unsigned)df_io_buf_need(r->offset, r->len), r->offset - head);
    } else {
        io_uring_prep_read(sqe, f->fd, r->data, (unsigned)r->len, r->offset);
    }
    memcpy(r->err, &tag, sizeof tag);
    io_uring_sqe_set_data(sqe, r);
    io->ring_inflight++;
}

/* Called with mu held: move queued requests into the ring while there is room. */
static void uring_fill(df_io *io) {
    int n = 0;
    df_io_req *r;
    while (io->ring_inflight < io->qd && (r = take_next(io))) {
        uring_prep(io, r);
        n++;
    }
    if (n) io_uring_submit(&io->ring);
}

static void *reaper(void *arg) {
    df_io *io = arg;
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(&io->ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) { df_log(DF_LOG_ERROR, "io_uring_wait_cqe: %s", strerror(-rc)); break; }
        df_io_req *r = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&io->ring, cqe);
        pthread_mutex_lock(&io->mu);
        io->ring_inflight--;
        if (!r) { /* wake-up NOP from close */
            bool stop = io->stop && io->inflight == 0;
            pthread_mutex_unlock(&io->mu);
            if (stop) break;
            continue;
        }
        pthread_mutex_unlock(&io->mu);
        uring_tag tag;
        memcpy(&tag, r->err, sizeof tag);
        r->err[0] = 0;
        uint64_t need = tag.direct ? (r->offset % DF_IO_ALIGN) + r->len : r->len;
        if (res == -EINVAL && tag.direct) {
            direct_refused(io, &io->f[r->file], EINVAL);
            read_buffered(io, r);
        } else if (res < 0) {
            req_fail(r, DF_ERR_IO, "%s: read of %llu bytes at offset %llu failed: %s", io->f[r->file].path,
                     (unsigned long long)r->len, (unsigned long long)r->offset, strerror(-res));
        } else if ((uint64_t)res < need) {
            /* partial completion: finish synchronously (also reports a real short read) */
            if (tag.direct) read_direct(io, r); else read_buffered(io, r);
        } else if (!tag.direct) {
            drop_pages(&io->f[r->file], r->offset, r->len);
        }
        apply_fault(io, r, tag.fault);
        complete(io, r);
        pthread_mutex_lock(&io->mu);
        uring_fill(io);
        pthread_mutex_unlock(&io->mu);
    }
    return NULL;
}
#endif

static int open_files(df_io *io, const char *const *paths, int n) {
    io->f = df_calloc((size_t)n, sizeof *io->f);
    if (!io->f) return DF_ERR_NOMEM;
    io->n_files = n;
    for (int i = 0; i < n; i++) {
        io->f[i].fd = io->f[i].fd_direct_orig = -1;
        atomic_store(&io->f[i].fd_direct, -1);
    }
    for (int i = 0; i < n; i++) {
        io_file *f = &io->f[i];
        f->path = df_strdup(paths[i]);
        if (!f->path) return DF_ERR_NOMEM;
        f->fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) return df_err(DF_ERR_IO, "%s: cannot open: %s", paths[i], strerror(errno));
        struct stat st;
        if (fstat(f->fd, &st) < 0) return df_err(DF_ERR_IO, "%s: fstat: %s", paths[i], strerror(errno));
        f->size = (uint64_t)st.st_size;
        /* no readahead beyond the requested ranges: those pages would stay in the page cache
         * (charged to a memory cgroup) after drop_pages() dropped the range itself */
        (void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);
        if (io->engine == DF_IO_DIRECT || io->engine == DF_IO_URING) {
            int fd = open(paths[i], O_RDONLY | O_CLOEXEC | O_DIRECT);
            if (fd < 0)
                df_log(DF_LOG_INFO, "%s: O_DIRECT refused (%s); buffered reads for this file", paths[i],
                       strerror(errno));
            atomic_store(&f->fd_direct, fd);
            f->fd_direct_orig = fd;
        }
        if (io->engine == DF_IO_MMAP && f->size) {
            void *m = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);
            if (m == MAP_FAILED) return df_err(DF_ERR_IO, "%s: mmap: %s", paths[i], strerror(errno));
            f->map = m;
            (void)madvise(m, f->size, MADV_RANDOM); /* faults read only the pages touched */
        }
    }
    return DF_OK;
}

/* ---- engine profile cache ----------------------------------------------------------- */

void df_io_profile_path(const char *given, char *buf, size_t cap) {
    const char *env = df_env()->io_profile;
    if (given) snprintf(buf, cap, "%s", given);
    else if (env) snprintf(buf, cap, "%s", env);
    else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg) snprintf(buf, cap, "%s/deltafin/io-profile", xdg);
        else snprintf(buf, cap, "%s/.cache/deltafin/io-profile", home && *home ? home : "/tmp");
    }
}

/* One line per (device, probe size): "dev=MAJ:MIN probe=BYTES engine=NAME rule=2 RATES".
 * rule=2: the choice of df_io_pick over two rounds (rule 1, untagged: the fastest burst). */
#define DF_IO_RULE_TAG " rule=2"

static int profile_lookup(const char *ppath, const char *key) {
    char *data = NULL;
    size_t len = 0;
    if (df_read_file(ppath, &data, &len) != DF_OK) { df_err_clear(); return -1; }
    int found = -1;
    size_t klen = strlen(key);
    for (char *line = data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        /* lines written under an older choice rule (no " rule=N" or another N) are re-measured */
        if (!strncmp(line, key, klen) && !strncmp(line + klen, " engine=", 8) && strstr(line, DF_IO_RULE_TAG)) {
            int e;
            char *name = line + klen + 8, *sp = strchr(name, ' ');
            if (sp) *sp = 0;
            if (df_io_engine_parse(name, &e) == DF_OK && e != DF_IO_AUTO) found = e;
            else df_err_clear();
        }
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    return found;
}

static void mkdirs_for(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *s = tmp + 1; *s; s++)
        if (*s == '/') { *s = 0; mkdir(tmp, 0755); *s = '/'; }
}

int df_io_profile_store(const char *ppath, const char *key, int engine, const double *gbps) {
    char *old = NULL;
    size_t len = 0;
    if (df_read_file(ppath, &old, &len) != DF_OK) { df_err_clear(); old = NULL; }
    mkdirs_for(ppath);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", ppath, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) { free(old); return df_err(DF_ERR_IO, "%s: %s", tmp, strerror(errno)); }
    size_t klen = strlen(key);
    for (char *line = old; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (strncmp(line, key, klen) || line[klen] != ' ') fprintf(f, "%s\n", line);
        line = nl ? nl + 1 : NULL;
    }
    fprintf(f, "%s engine=%s" DF_IO_RULE_TAG, key, df_io_engine_name(engine));
    for (int e = 1; e < DF_IO_NENGINES; e++)
        if (gbps[e] > 0) fprintf(f, " %s=%.2fGB/s", df_io_engine_name(e), gbps[e]);
    fprintf(f, "\n");
    int bad = ferror(f);
    free(old);
    if (fclose(f) || bad || rename(tmp, ppath)) {
        unlink(tmp);
        return df_err(DF_ERR_IO, "%s: could not write the profile", ppath);
    }
    return DF_OK;
}

void df_io_profile_key(const struct stat *st, uint64_t probe, char *buf, size_t cap) {
    snprintf(buf, cap, "dev=%u:%u probe=%llu", major(st->st_dev), minor(st->st_dev), (unsigned long long)probe);
}

/* df_io_auto_known, leaving the profile's path and key (when a profile was consulted) and the
 * probe size for a measurement. */
static int auto_known(const char *path, const df_io_params *p, char ppath[1024], char key[128], uint64_t *probe) {
    struct stat st;
    *probe = p->probe_bytes ? p->probe_bytes : (8u << 20);
    if (stat(path, &st) < 0) return DF_IO_PREAD;
    if ((uint64_t)st.st_size < 4 * *probe) return DF_IO_PREAD; /* tiny file: page cache wins */
    df_io_profile_path(p->profile_path, ppath, 1024);
    df_io_profile_key(&st, *probe, key, 128);
    int e = profile_lookup(ppath, key);
    return e > 0 && df_io_engine_available(e) ? e : DF_IO_AUTO;
}

int df_io_auto_known(const char *path, const df_io_params *p) {
    char ppath[1024], key[128];
    uint64_t probe;
    return auto_known(path, p, ppath, key, &probe);
}

static int choose_auto(const char *path, const df_io_params *p) {
    char ppath[1024], key[128];
    uint64_t probe;
    int e = auto_known(path, p, ppath, key, &probe);
    if (e != DF_IO_AUTO) return e;
    double gbps[DF_IO_NENGINES] = {0};
    int best = DF_IO_PREAD;
    if (df_io_measure(path, probe, p->n_threads, &best, gbps) != DF_OK) {
        df_log(DF_LOG_WARN, "I/O engine measurement failed (%s); using pread", df_errmsg());
        df_err_clear();
        return DF_IO_PREAD;
    }
    (void)df_io_profile_store(ppath, key, best, gbps);
    df_log(DF_LOG_INFO, "io auto: pread %.2f, direct %.2f, uring %.2f, mmap %.2f GB/s -> %s (cached in %s)",
           gbps[DF_IO_PREAD], gbps[DF_IO_DIRECT], gbps[DF_IO_URING], gbps[DF_IO_MMAP], df_io_engine_name(best),
           ppath);
    return best;
}

int df_io_open(const char *const *paths, int n_files, const df_io_params *pin, df_io **out) {
    *out = NULL;
    df_io_params p = pin ? *pin : df_io_default_params();
    if (n_files <= 0) return df_err(DF_ERR_INVALID, "df_io_open: no files");
    if (p.engine < 0 || p.engine >= DF_IO_NENGINES) return df_err(DF_ERR_INVALID, "df_io_open: bad engine %d", p.engine);
    if (p.engine == DF_IO_AUTO) p.engine = choose_auto(paths[0], &p);
    if (p.engine == DF_IO_URING && !df_io_engine_available(DF_IO_URING))
        return df_err(DF_ERR_UNSUPPORTED, "I/O engine 'uring' is not available (%s)",
#ifdef DF_HAVE_URING
                      "io_uring_queue_init refused by the kernel"
#else
                      "built without liburing"
#endif
        );
    df_io *io = df_calloc(1, sizeof *io);
    if (!io) return DF_ERR_NOMEM;
    io->engine = p.engine;
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->cv, NULL);
    pthread_cond_init(&io->idle, NULL);
    int rc = open_files(io, paths, n_files);
    if (rc) { df_io_close(io); return rc; }
    const char *fe = p.fault;
    if (fe && *fe) {
        rc = df_io_parse_fault(fe, &io->fault_kind, &io->fault_nth);
        if (rc) { df_io_close(io); return rc; }
    }
#ifdef DF_HAVE_URING
    if (io->engine == DF_IO_URING) {
        io->qd = p.queue_depth > 0 ? p.queue_depth : 64;
        int r = io_uring_queue_init((unsigned)io->qd + 1, &io->ring, 0);
        if (r < 0) { df_io_close(io); return df_err(DF_ERR_IO, "io_uring_queue_init: %s", strerror(-r)); }
        io->ring_ok = true;
        if (pthread_create(&io->reaper, NULL, reaper, io)) { df_io_close(io); return df_err(DF_ERR_NOMEM, "pthread_create"); }
        io->reaper_started = true;
        *out = io;
        return DF_OK;
    }
#endif
    int nt = p.n_threads > 0 ? p.n_threads : 8;
    io->threads = df_calloc((size_t)nt, sizeof(pthread_t));
    if (!io->threads) { df_io_close(io); return DF_ERR_NOMEM; }
    for (int i = 0; i < nt; i++) {
        if (pthread_create(&io->threads[i], NULL, worker, io)) { df_io_close(io); return df_err(DF_ERR_NOMEM, "pthread_create"); }
        io->n_threads++;
    }
    *out = io;
    return DF_OK;
}

void df_io_close(df_io *io) {
    if (!io) return;
    pthread_mutex_lock(&io->mu);
    while (io->inflight) pthread_cond_wait(&io->idle, &io->mu);
    io->stop = true;
    pthread_cond_broadcast(&io->cv);
    pthread_mutex_unlock(&io->mu);
    for (int i = 0; i < io->n_threads; i++) pthread_join(io->threads[i], NULL);
    free(io->threads);
#ifdef DF_HAVE_URING
    if (io->reaper_started) {
        pthread_mutex_lock(&io->mu);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
        DF_ASSERT(sqe);
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data(sqe, NULL);
        io->ring_inflight++;
        io_uring_submit(&io->ring);
        pthread_mutex_unlock(&io->mu);
        pthread_join(io->reaper, NULL);
    }
    if (io->ring_ok) io_uring_queue_exit(&io->ring);
#endif
    for (int i = 0; i < io->n_files; i++) {
        io_file *f = &io->f[i];
        if (f->map) munmap(f->map, f->size);
        if (f->fd >= 0) close(f->fd);
        if (f->fd_direct_orig >= 0) close(f->fd_direct_orig);
        free(f->path);
    }
    free(io->f);
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->cv);
    pthread_cond_destroy(&io->idle);
    free(io);
}

int df_io_get_engine(const df_io *io) { return io->engine; }
void df_io_drop_cache(df_io *io) {
    for (int i = 0; i < io->n_files; i++)
        if (io->f[i].fd >= 0) (void)posix_fadvise(io->f[i].fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* mu held: unlink r from the queue (head/tail); true if it was there */
static bool unlink_req(df_io_req **head, df_io_req **tail, df_io_req *r) {
    df_io_req *prev = NULL;
    for (df_io_req *q = *head; q; prev = q, q = q->next) {
        if (q != r) continue;
        if (prev) prev->next = q->next; else *head = q->next;
        if (*tail == q) *tail = prev;
        q->next = NULL;
        return true;
    }
    return false;
}

static bool queued(df_io_req *q, df_io_req *r) {
    for (; q; q = q->next) if (q == r) return true;
    return false;
}

int df_io_cancel(df_io *io, df_io_req *const *reqs, int n) {
    pthread_mutex_lock(&io->mu);
    for (int i = 0; i < n; i++)
        if (!queued(io->head, reqs[i]) && !queued(io->lhead, reqs[i])) { pthread_mutex_unlock(&io->mu); return 0; }
    for (int i = 0; i < n; i++) {
        if (!unlink_req(&io->head, &io->tail, reqs[i])) unlink_req(&io->lhead, &io->ltail, reqs[i]);
        if (--io->inflight == 0) {
            io->st_busy += df_time_ns() - io->busy_start;
            pthread_cond_broadcast(&io->idle);
        }
    }
    pthread_mutex_unlock(&io->mu);
    return n;
}

void df_io_promote(df_io *io, df_io_req *const *reqs, int n) {
    pthread_mutex_lock(&io->mu);
    bool moved = false;
    for (int i = 0; i < n; i++) {
        if (reqs[i]->prio != DF_IO_PRIO_LOW || !unlink_req(&io->lhead, &io->ltail, reqs[i])) continue;
        reqs[i]->prio = 0;
        if (io->tail) io->tail->next = reqs[i]; else io->head = reqs[i];
        io->tail = reqs[i];
        moved = true;
    }
#ifdef DF_HAVE_URING
    if (moved && io->engine == DF_IO_URING) uring_fill(io);
    else
#endif
        if (moved) pthread_cond_broadcast(&io->cv);
    pthread_mutex_unlock(&io->mu);
}

uint64_t df_io_file_size(const df_io *io, int file) {
    return (file >= 0 && file < io->n_files) ? io->f[file].size : 0;
}
const char *df_io_file_path(const df_io *io, int file) {
    return (file >= 0 && file < io->n_files) ? io->f[file].path : "?";
}

int df_io_submit(df_io *io, df_io_req *r) {
    if (r->file < 0 || r->file >= io->n_files)
        return df_err(DF_ERR_INVALID, "read request for file index %d (have %d files)", r->file, io->n_files);
    io_file *f = &io->f[r->file];
    uint64_t end;
    if (!df_add_ok(r->offset, r->len, &end) || end > f->size)
        return df_err(DF_ERR_IO, "%s: truncated: read of %llu bytes at offset %llu is past the end of the file (size %llu)",
                      f->path, (unsigned long long)r->len, (unsigned long long)r->offset, (unsigned long long)f->size);
    if (((uintptr_t)r->buf % DF_IO_ALIGN) != 0)
        return df_err(DF_ERR_INVALID, "read buffer not %d-byte aligned", DF_IO_ALIGN);
    if (r->len > (1ull << 31))
        return df_err(DF_ERR_RANGE, "%s: single read of %llu bytes at offset %llu exceeds 2 GiB", f->path,
                      (unsigned long long)r->len, (unsigned long long)r->offset);
    r->data = r->buf + r->offset % DF_IO_ALIGN;
    r->status = DF_OK;
    r->err[0] = 0;
    r->next = NULL;
    r->t_submit = df_time_ns();
    pthread_mutex_lock(&io->mu);
    if (io->inflight++ == 0) io->busy_start = r->t_submit;
    if (r->prio == DF_IO_PRIO_LOW) {
        if (io->ltail) io->ltail->next = r; else io->lhead = r;
        io->ltail = r;
    } else {
        if (io->tail) io->tail->next = r; else io->head = r;
        io->tail = r;
    }
#ifdef DF_HAVE_URING
    if (io->engine == DF_IO_URING) uring_fill(io);
    else
#endif
        pthread_cond_signal(&io->cv);
    pthread_mutex_unlock(&io->mu);
    return DF_OK;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
} sync_wait;

static void sync_done(df_io_req *r) {
    sync_wait *w = r->ud;
    pthread_mutex_lock(&w->mu);
    w->pending--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int df_io_read(df_io *io, int file, uint64_t offset, uint64_t len, void *dst) {
    const uint64_t chunk = 64u << 20;
    uint8_t *bounce = df_aligned_alloc(DF_IO_ALIGN, df_io_buf_need(DF_IO_ALIGN - 1, len < chunk ? len : chunk));
    if (!bounce) return DF_ERR_NOMEM;
    sync_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int rc = DF_OK;
    for (uint64_t done = 0; done < len && !rc;) {
        uint64_t n = len - done < chunk ? len - done : chunk;
        df_io_req r = {0};
        r.file = file;
        r.offset = offset + done;
        r.len = n;
        r.buf = bounce;
        r.done = sync_done;
        r.ud = &w;
        w.pending = 1;
        rc = df_io_submit(io, &r);
        if (rc) break;
        pthread_mutex_lock(&w.mu);
        while (w.pending) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        if (r.status) { rc = df_err(r.status, "%s", r.err); break; }
        memcpy((uint8_t *)dst + done, r.data, n);
        done += n;
    }
    free(bounce);
    return rc;
}

void df_io_get_stats(df_io *io, df_io_stats *st) {
    pthread_mutex_lock(&io->mu);
    st->reads = io->st_reads;
    st->bytes = io->st_bytes;
    st->busy_ns = io->st_busy + (io->inflight ? df_time_ns() - io->busy_start : 0);
    st->read_ns = io->st_read_ns;
    pthread_mutex_unlock(&io->mu);
}

/* ---- measurement ----------------------------------------------------------------------- */

/* The engine for measured rates: the faster of the page-cache bypassing engines (direct,
 * uring) unless a page-cache engine (pread, mmap) beats it by DF_IO_CACHED_MARGIN. A cold
 * burst of reads flatters the page-cache engines (readahead, no eviction yet); streaming
 * under a memory limit they copy every byte twice and their page cache competes with the
 * expert cache for the same limit: gpt-oss-120b geometry at --mem-limit 1G behind a
 * 500 MB/s throttle decoded at 0.51 of the I/O floor with mmap and 0.62 with pread, 0.97
 * with direct and 0.94 with uring, while the probe had ranked mmap first (0.64 vs 0.58). */
#define DF_IO_CACHED_MARGIN 1.25
int df_io_pick(const double g[DF_IO_NENGINES]) {
    int bypass = g[DF_IO_URING] > g[DF_IO_DIRECT] ? DF_IO_URING : DF_IO_DIRECT;
    int cached = g[DF_IO_MMAP] > g[DF_IO_PREAD] ? DF_IO_MMAP : DF_IO_PREAD;
    if (g[bypass] <= 0) return g[cached] > 0 ? cached : DF_IO_PREAD;
    return g[cached] > DF_IO_CACHED_MARGIN * g[bypass] ? cached : bypass;
}

int df_io_measure(const char *path, uint64_t probe, int n_threads, int *best, double gbps[DF_IO_NENGINES]) {
    double g[DF_IO_NENGINES] = {0};
    struct stat st;
    if (stat(path, &st) < 0) return df_err(DF_ERR_IO, "%s: %s", path, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    if (!probe) probe = 8u << 20;
    if (size < probe) probe = size;
    if (!probe) return df_err(DF_ERR_INVALID, "%s: empty file", path);
    /* 4..16 parallel reads, at most ~128 MiB of buffers */
    int n_req = (int)((128u << 20) / probe);
    if (n_req > 16) n_req = 16;
    if (n_req < 4) n_req = 4;
    if ((uint64_t)n_req > size / probe) n_req = (int)(size / probe);
    if (n_req < 1) n_req = 1;
    uint8_t *bufs = df_aligned_alloc(DF_IO_ALIGN, (size_t)n_req * df_io_buf_need(DF_IO_ALIGN - 1, probe));
    df_io_req *reqs = df_calloc((size_t)n_req, sizeof *reqs);
    if (!bufs || !reqs) { free(bufs); free(reqs); return DF_ERR_NOMEM; }
    uint64_t bstride = df_io_buf_need(DF_IO_ALIGN - 1, probe);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)df_time_ns();
    /* Two rounds, the engine order reversed in the second (a burst right after another
     * engine's is not the same disk), each engine's better round kept. */
    for (int round = 0; round < 2; round++)
    for (int k = DF_IO_PREAD; k < DF_IO_NENGINES; k++) {
        int e = round ? DF_IO_NENGINES - 1 - (k - DF_IO_PREAD) : k;
        if (!df_io_engine_available(e)) continue;
        int fd = open(path, O_RDONLY);
        if (fd >= 0) { posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); close(fd); }
        df_io_params p = df_io_default_params();
        p.engine = e;
        p.n_threads = n_threads > 0 ? n_threads : 8;
        df_io *io;
        const char *paths[1] = {path};
        if (df_io_open(paths, 1, &p, &io) != DF_OK) { df_err_clear(); continue; }
        sync_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n_req};
        uint64_t t0 = df_time_ns();
        int ok = 1;
        for (int i = 0; i < n_req; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t span = size - probe;
            uint64_t off = span ? ((seed >> 11) % span) & ~(uint64_t)(DF_IO_ALIGN - 1) : 0;
            df_io_req *r = &reqs[i];
            memset(r, 0, sizeof *r);
            r->file = 0; r->offset = off; r->len = probe; r->buf = bufs + (size_t)i * bstride;
            r->done = sync_done; r->ud = &w;
            if (df_io_submit(io, r) != DF_OK) {
                df_err_clear();
                pthread_mutex_lock(&w.mu); w.pending--; pthread_mutex_unlock(&w.mu);
                ok = 0;
            }
        }
        pthread_mutex_lock(&w.mu);
        while (w.pending) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        uint64_t dt = df_time_ns() - t0;
        for (int i = 0; i < n_req; i++) if (reqs[i].status) ok = 0;
        df_io_close(io);
        if (!ok) continue;
        double r = (double)probe * n_req / (dt ? (double)dt : 1.0);
        if (r > g[e]) g[e] = r;
    }
    free(bufs);
    free(reqs);
    *best = df_io_pick(g);
    if (gbps) memcpy(gbps, g, sizeof g);
    return DF_OK;
}
