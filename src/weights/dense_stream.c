/* dense_stream.c — streamed dense layers (see dense_stream.h).
 * Layout: the streamable tensors of a layer, sorted by (file, offset), are merged into runs
 * (contiguous file ranges; gaps up to 64 KiB are read along rather than split); each run gets
 * a 4 KiB-aligned region of the layer buffer sized df_io_buf_need(offset, len), so the io.c
 * placement rule puts the run's bytes at region + offset % 4096 for every engine. Runs are
 * read as requests of at most 8 MiB split at 4 KiB-aligned file offsets (parallel on the
 * df_io threads; the pieces land contiguously).
 * Threading: `mu` guards buffer state and statistics (I/O completions take it briefly); `pass`
 * serializes forward passes and is held from df_dense_begin to df_dense_end. */
#include "weights/dense_stream.h"
#include "weights/io.h"
#include "base/sysmem.h"
#include "model/model.h"

#include <pthread.h>
#include <sys/mman.h>

enum { DS_CHUNK = 8u << 20, DS_GAP = 64u << 10 };

typedef struct { int shard; uint64_t off, len, region; } ds_run;       /* region: offset in the buffer */
typedef struct { df_tensor *t; uint64_t at; } ds_tensor;               /* at: data offset in the buffer */

typedef struct {
    int t0, nt;                  /* tensors [t0, t0+nt) of ds->tens */
    int r0, nr;                  /* runs */
    int n_chunks;
} ds_layer;

typedef struct ds_buf ds_buf;
typedef struct {
    df_io_req req;
    ds_buf *b;
    struct df_dense_stream *ds;
} ds_req;

struct ds_buf {
    uint8_t *mem;
    int layer;                   /* layer held or loading; -1: none */
    int pending;                 /* requests in flight */
    bool busy;                   /* acquired, not yet released */
    int status;                  /* first failed request's status */
    uint64_t fail_off, fail_len;
    char err[256];
    ds_req *reqs;                /* [max chunks of a layer] */
};

struct df_dense_stream {
    df_model *m;
    int n_layer;
    int n_resident;              /* layers [0, n_resident) keep their dense matrices */
    int n_buf;                   /* 1 or 2 layer buffers */
    uint64_t buf_bytes;          /* one layer buffer */
    bool *streamed;              /* [m->n_bound] */
    ds_layer *layers;            /* [n_layer] (streamed ones filled) */
    ds_tensor *tens;
    ds_run *runs;
    int max_chunks;
    uint64_t chunk;              /* request bytes */
    df_io *io;
    ds_buf buf[2];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t pass;
    pthread_t owner;
    bool in_pass;
    bool opened;
    df_dense_stats st;
};

/* ---- layout -------------------------------------------------------------------------------- */

/* Layer index of a "blk.N." tensor, else -1. */
static int layer_of_name(const char *n, int n_layer) {
    if (strncmp(n, "blk.", 4)) return -1;
    char *end;
    long l = strtol(n + 4, &end, 10);
    if (end == n + 4 || *end != '.' || l < 0 || l >= n_layer) return -1;
    return (int)l;
}

static bool streamable(const df_model *m, const df_tensor *t, int l) {
    if (l < 0 || !t->info) return false;
    const df_layer *L = &m->layers[l];
    for (int p = 0; p < DF_EXPERT_NPARTS; p++)
        if (L->exps[p] == t) return false;
    if (t == L->gate_inp) return false; /* router look-ahead reads it ahead of the layer */
    return t->ne[1] > 1;               /* matrices; vectors (norms, biases) stay */
}

static int cmp_tensor(const void *a, const void *b) {
    const df_tensor *x = *(df_tensor *const *)a, *y = *(df_tensor *const *)b;
    if (x->info->shard != y->info->shard) return x->info->shard < y->info->shard ? -1 : 1;
    return x->info->offset < y->info->offset ? -1 : x->info->offset > y->info->offset;
}

static uint64_t align_down(uint64_t x) { return x & ~(uint64_t)(DF_IO_ALIGN - 1); }

static int run_chunks(uint64_t off, uint64_t len, uint64_t chunk) {
    int n = 0;
    for (uint64_t c = off, end = off + len; c < end; n++) c = align_down(c) + chunk;
    return n;
}

/* Sorted streamable tensors of layer l into list (capacity m->n_bound); returns the count. */
static int layer_list(const df_model *m, const int *lay, int l, df_tensor **list) {
    int n = 0;
    for (int i = 0; i < m->n_bound; i++)
        if (lay[i] == l && streamable(m, &m->tensors[i], l)) list[n++] = &m->tensors[i];
    qsort(list, (size_t)n, sizeof *list, cmp_tensor);
    return n;
}

/* Runs of a sorted list: optional outputs; returns buffer bytes, *read = bytes read. */
static uint64_t layer_layout(df_tensor *const *list, int n, ds_run *runs, int *n_runs, ds_tensor *tens,
                             uint64_t *read, int *chunks, uint64_t chunk) {
    uint64_t need = 0;
    int nr = 0, nc = 0;
    *read = 0;
    for (int i = 0; i < n;) {
        const df_gguf_tensor *a = list[i]->info;
        uint64_t off = a->offset, end = a->offset + a->nbytes;
        int j = i + 1;
        while (j < n && list[j]->info->shard == a->shard && list[j]->info->offset <= end + DS_GAP &&
               list[j]->info->offset + list[j]->info->nbytes - off <= (1ull << 40)) {
            uint64_t e = list[j]->info->offset + list[j]->info->nbytes;
            if (e > end) end = e;
            j++;
        }
        if (runs) runs[nr] = (ds_run){a->shard, off, end - off, need};
        if (tens)
            for (int k = i; k < j; k++)
                tens[k] = (ds_tensor){list[k], need + off % DF_IO_ALIGN + (list[k]->info->offset - off)};
        need += df_io_buf_need(off, end - off);
        *read += end - off;
        nc += run_chunks(off, end - off, chunk);
        nr++;
        i = j;
    }
    if (n_runs) *n_runs = nr;
    if (chunks) *chunks = nc;
    return need;
}

/* ---- footprint ----------------------------------------------------------------------------- */

int df_dense_footprint_compute(const df_model *m, df_dense_footprint *fp) {
    memset(fp, 0, sizeof *fp);
    const int L = m->hp.n_layer;
    fp->n_layer = L;
    int *lay = df_malloc(sizeof(int) * (size_t)(m->n_bound ? m->n_bound : 1));
    df_tensor **list = df_malloc(sizeof(df_tensor *) * (size_t)(m->n_bound ? m->n_bound : 1));
    fp->stream_bytes = df_calloc((size_t)L, sizeof(uint64_t));
    fp->buf_bytes = df_calloc((size_t)L, sizeof(uint64_t));
    fp->read_bytes = df_calloc((size_t)L, sizeof(uint64_t));
    if (!lay || !list || !fp->stream_bytes || !fp->buf_bytes || !fp->read_bytes) {
        free(lay);
        free(list);
        df_dense_footprint_free(fp);
        return DF_ERR_NOMEM;
    }
    uint64_t dense = 0, stream_all = 0;
    for (int i = 0; i < m->n_bound; i++) {
        const df_tensor *t = &m->tensors[i];
        lay[i] = layer_of_name(t->info->name, L);
        if (df_model_is_expert(m, t)) { lay[i] = -2; continue; }
        dense += t->info->nbytes;
        if (streamable(m, t, lay[i])) { fp->stream_bytes[lay[i]] += t->info->nbytes; stream_all += t->info->nbytes; }
    }
    for (int l = 0; l < L; l++) {
        int n = layer_list(m, lay, l, list);
        fp->buf_bytes[l] = layer_layout(list, n, NULL, NULL, NULL, &fp->read_bytes[l], NULL, DS_CHUNK);
    }
    fp->dense_total = dense;
    fp->global_bytes = dense - stream_all;
    free(lay);
    free(list);
    return DF_OK;
}

void df_dense_footprint_free(df_dense_footprint *fp) {
    free(fp->stream_bytes);
    free(fp->buf_bytes);
    free(fp->read_bytes);
    fp->stream_bytes = fp->buf_bytes = fp->read_bytes = NULL;
}

/* ---- load ---------------------------------------------------------------------------------- */

static void ds_destroy(df_dense_stream *ds) {
    if (!ds) return;
    if (ds->opened) {
        pthread_mutex_lock(&ds->mu);
        for (int b = 0; b < 2; b++)
            while (ds->buf[b].pending) pthread_cond_wait(&ds->cv, &ds->mu);
        pthread_mutex_unlock(&ds->mu);
    }
    if (ds->io) df_io_close(ds->io);
    for (int b = 0; b < 2; b++) {
        if (ds->buf[b].mem) munmap(ds->buf[b].mem, (size_t)ds->buf_bytes);
        free(ds->buf[b].reqs);
    }
    pthread_mutex_destroy(&ds->mu);
    pthread_cond_destroy(&ds->cv);
    pthread_mutex_destroy(&ds->pass);
    free(ds->streamed);
    free(ds->layers);
    free(ds->tens);
    free(ds->runs);
    free(ds);
}

/* Build the per-layer layout for the streamed layers [n_resident, n_layer). */
static int ds_build(df_model *m, df_dense_stream *ds) {
    const int L = m->hp.n_layer;
    size_t nb = (size_t)(m->n_bound ? m->n_bound : 1);
    int *lay = df_malloc(sizeof(int) * nb);
    df_tensor **list = df_malloc(sizeof(df_tensor *) * nb);
    ds->streamed = df_calloc(nb, sizeof(bool));
    ds->layers = df_calloc((size_t)L, sizeof(ds_layer));
    ds->tens = df_calloc(nb, sizeof(ds_tensor));
    ds->runs = df_calloc(nb, sizeof(ds_run));
    if (!lay || !list || !ds->streamed || !ds->layers || !ds->tens || !ds->runs) {
        free(lay);
        free(list);
        return DF_ERR_NOMEM;
    }
    for (int i = 0; i < m->n_bound; i++) lay[i] = layer_of_name(m->tensors[i].info->name, L);
    int nt = 0, nr = 0;
    for (int l = ds->n_resident; l < L; l++) {
        ds_layer *dl = &ds->layers[l];
        int n = layer_list(m, lay, l, list);
        uint64_t rd;
        int runs = 0, ch = 0;
        uint64_t need = layer_layout(list, n, ds->runs + nr, &runs, ds->tens + nt, &rd, &ch, ds->chunk);
        DF_ASSERT(need <= ds->buf_bytes);
        *dl = (ds_layer){nt, n, nr, runs, ch};
        if (ch > ds->max_chunks) ds->max_chunks = ch;
        for (int k = 0; k < n; k++) ds->streamed[list[k] - m->tensors] = true;
        nt += n;
        nr += runs;
    }
    free(lay);
    free(list);
    return DF_OK;
}

int df_dense_stream_create(df_model *m, int n_resident, int n_buf, uint64_t buf_bytes, uint64_t chunk,
                           df_dense_stream **out) {
    *out = NULL;
    df_dense_stream *ds = df_calloc(1, sizeof *ds);
    if (!ds) return DF_ERR_NOMEM;
    pthread_mutex_init(&ds->mu, NULL);
    pthread_cond_init(&ds->cv, NULL);
    pthread_mutex_init(&ds->pass, NULL);
    ds->m = m;
    ds->n_layer = m->hp.n_layer;
    ds->n_resident = n_resident;
    ds->n_buf = n_buf;
    ds->buf_bytes = buf_bytes;
    for (int b = 0; b < 2; b++) ds->buf[b].layer = -1;
    ds->chunk = chunk >= DF_IO_ALIGN && chunk <= (1ull << 30) ? chunk & ~(uint64_t)(DF_IO_ALIGN - 1) : DS_CHUNK;
    int rc = ds_build(m, ds);
    if (rc) { ds_destroy(ds); return rc; }
    *out = ds;
    return DF_OK;
}

bool df_dense_stream_has(const df_dense_stream *ds, const df_tensor *t) {
    const df_model *m = ds ? ds->m : NULL;
    return ds && t >= m->tensors && t < m->tensors + m->n_bound && ds->streamed[t - m->tensors];
}

static const df_tensor *tensor_at(const df_model *m, const df_dense_stream *ds, int il, int shard, uint64_t off,
                                  uint64_t len) {
    const ds_layer *dl = &ds->layers[il];
    const df_tensor *best = NULL;
    for (int k = dl->t0; k < dl->t0 + dl->nt; k++) {
        const df_gguf_tensor *i = ds->tens[k].t->info;
        if (i->shard != shard) continue;
        if (i->offset < off + len && off < i->offset + i->nbytes) return ds->tens[k].t; /* overlaps */
        if (!best && i->offset >= off) best = ds->tens[k].t;
    }
    (void)m;
    return best ? best : ds->tens[dl->t0].t;
}

int df_dense_stream_open(df_dense_stream *ds, int engine, bool mlock_bufs) {
    df_model *m = ds->m;
    const char **paths = df_calloc((size_t)m->gguf->n_shards, sizeof *paths);
    if (!paths) return DF_ERR_NOMEM;
    for (int i = 0; i < m->gguf->n_shards; i++) paths[i] = m->gguf->shards[i].path;
    df_io_params iop = df_io_default_params();
    iop.probe_bytes = ds->chunk;
    iop.engine = engine;
    int rc = df_io_open(paths, m->gguf->n_shards, &iop, &ds->io);
    free(paths);
    if (rc) return df_err_prefix(rc, "%s: dense layer streaming", m->path);
    ds->opened = true;
    ds->st.engine = df_io_get_engine(ds->io);
    /* a file shorter than its tensor table: refuse now, naming the first tensor cut off */
    for (int l = ds->n_resident; l < m->hp.n_layer; l++) {
        const ds_layer *dl = &ds->layers[l];
        for (int k = dl->t0; k < dl->t0 + dl->nt; k++) {
            const df_gguf_tensor *i = ds->tens[k].t->info;
            uint64_t sz = df_io_file_size(ds->io, i->shard);
            if (i->offset + i->nbytes > sz)
                return df_err(DF_ERR_IO, "layer %d tensor '%s': %s is truncated: needs bytes up to offset %llu, file size %llu",
                              l, i->name, df_io_file_path(ds->io, i->shard),
                              (unsigned long long)(i->offset + i->nbytes), (unsigned long long)sz);
        }
    }
    for (int b = 0; b < ds->n_buf; b++) {
        void *p = mmap(NULL, (size_t)ds->buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return df_err(DF_ERR_NOMEM, "cannot allocate a %llu-byte dense layer buffer",
                          (unsigned long long)ds->buf_bytes);
        ds->buf[b].mem = p;
        if (mlock_bufs) {
            int rc = df_mlock(p, ds->buf_bytes, "a dense layer buffer");
            if (rc < 0) return rc;
        }
        ds->buf[b].reqs = df_calloc((size_t)(ds->max_chunks ? ds->max_chunks : 1), sizeof(ds_req));
        if (!ds->buf[b].reqs) return DF_ERR_NOMEM;
    }
    return DF_OK;
}

void df_dense_stream_free(df_dense_stream *ds) {
    if (!ds) return;
    if (ds->st.passes) {
        df_dense_stats st;
        char buf[512];
        df_dense_get_stats(ds, &st);
        df_log(DF_LOG_INFO, "%s", df_dense_stats_str(&st, buf, sizeof buf));
    }
    ds_destroy(ds);
}

/* ---- forward pass -------------------------------------------------------------------------- */

static void req_done(df_io_req *r) {
    ds_req *q = r->ud;
    df_dense_stream *ds = q->ds;
    ds_buf *b = q->b;
    pthread_mutex_lock(&ds->mu);
    if (r->status) {
        if (!b->status) {
            b->status = r->status;
            b->fail_off = r->offset;
            b->fail_len = r->len;
            snprintf(b->err, sizeof b->err, "%s", r->err);
        }
    } else {
        ds->st.bytes_read += r->len;
    }
    if (--b->pending == 0) pthread_cond_broadcast(&ds->cv);
    pthread_mutex_unlock(&ds->mu);
}

/* Under mu: start reading layer il into buffer b (idle, not busy). */
static void issue(df_dense_stream *ds, ds_buf *b, int il) {
    const ds_layer *dl = &ds->layers[il];
    b->layer = il;
    b->status = DF_OK;
    b->err[0] = 0;
    b->pending = 0;
    ds->st.layer_reads++;
    int q = 0;
    for (int r = dl->r0; r < dl->r0 + dl->nr; r++) {
        const ds_run *run = &ds->runs[r];
        uint8_t *base = b->mem + run->region;
        for (uint64_t c = run->off, end = run->off + run->len; c < end;) {
            uint64_t ce = align_down(c) + ds->chunk;
            if (ce > end) ce = end;
            ds_req *dq = &b->reqs[q++];
            memset(dq, 0, sizeof *dq);
            dq->b = b;
            dq->ds = ds;
            dq->req.file = run->shard;
            dq->req.offset = c;
            dq->req.len = ce - c;
            dq->req.buf = base + (align_down(c) - align_down(run->off));
            dq->req.done = req_done;
            dq->req.ud = dq;
            b->pending++;
            int rc = df_io_submit(ds->io, &dq->req);
            if (rc) { /* not queued: done() will not run */
                b->pending--;
                b->status = rc;
                b->fail_off = c;
                b->fail_len = ce - c;
                snprintf(b->err, sizeof b->err, "%s", deltafin_errmsg());
                return;
            }
            c = ce;
        }
    }
}

static void point(df_model *m, df_dense_stream *ds, int il, uint8_t *mem) {
    const ds_layer *dl = &ds->layers[il];
    for (int k = dl->t0; k < dl->t0 + dl->nt; k++) ds->tens[k].t->data = mem ? mem + ds->tens[k].at : NULL;
    (void)m;
}

static bool is_streamed_layer(const df_dense_stream *ds, int il) {
    return ds && il >= ds->n_resident && il < ds->n_layer;
}

void df_dense_begin(df_dense_stream *ds) {
    if (!ds) return;
    pthread_mutex_lock(&ds->pass);
    ds->owner = pthread_self();
    ds->in_pass = true;
    ds->st.passes++;
}

int df_dense_acquire(df_dense_stream *ds, int il) {
    df_model *m = ds ? ds->m : NULL;
    if (!is_streamed_layer(ds, il)) return DF_OK;
    DF_ASSERT(ds->in_pass && pthread_equal(ds->owner, pthread_self()));
    const int nb = ds->n_buf;
    const int next = il + 1 < ds->n_layer ? il + 1 : ds->n_resident;
    pthread_mutex_lock(&ds->mu);
    ds_buf *b = NULL;
    for (int i = 0; i < nb; i++)
        if (ds->buf[i].layer == il) b = &ds->buf[i];
    if (b && b->busy) { /* acquired twice without release: fine, same bytes */
        pthread_mutex_unlock(&ds->mu);
        return DF_OK;
    }
    if (!b) {
        /* a free buffer, preferably not the one holding (or loading) the next layer */
        for (int i = 0; i < nb; i++)
            if (!ds->buf[i].busy && (!b || b->layer == next)) b = &ds->buf[i];
        if (!b) {
            pthread_mutex_unlock(&ds->mu);
            return df_err(DF_ERR_INTERNAL, "dense layer %d: all %d layer buffers are in use (missing df_dense_release)",
                          il, nb);
        }
        while (b->pending) pthread_cond_wait(&ds->cv, &ds->mu); /* a read we no longer need */
        issue(ds, b, il);
    } else if (!b->pending && !b->status) {
        ds->st.layer_ready++;
    }
    uint64_t t0 = df_time_ns();
    while (b->pending) pthread_cond_wait(&ds->cv, &ds->mu);
    ds->st.wait_ns += df_time_ns() - t0;
    if (b->status) {
        int shard = ds->runs[ds->layers[il].r0].shard;
        for (int r = ds->layers[il].r0; r < ds->layers[il].r0 + ds->layers[il].nr; r++)
            if (ds->runs[r].off <= b->fail_off && b->fail_off < ds->runs[r].off + ds->runs[r].len) shard = ds->runs[r].shard;
        const df_tensor *t = tensor_at(m, ds, il, shard, b->fail_off, b->fail_len);
        int rc = df_err(b->status, "dense layer %d tensor '%s': %s", il, t->info->name, b->err);
        b->layer = -1; /* read again next time */
        b->status = DF_OK;
        pthread_mutex_unlock(&ds->mu);
        return rc;
    }
    b->busy = true;
    point(m, ds, il, b->mem);
    /* read the next streamed layer while this one computes */
    if (next != il) {
        bool have = false;
        for (int i = 0; i < nb; i++) have |= ds->buf[i].layer == next;
        if (!have)
            for (int i = 0; i < nb; i++)
                if (!ds->buf[i].busy && !ds->buf[i].pending) { issue(ds, &ds->buf[i], next); break; }
    }
    pthread_mutex_unlock(&ds->mu);
    return DF_OK;
}

void df_dense_release(df_dense_stream *ds, int il) {
    df_model *m = ds ? ds->m : NULL;
    if (!is_streamed_layer(ds, il)) return;
    pthread_mutex_lock(&ds->mu);
    for (int i = 0; i < ds->n_buf; i++)
        if (ds->buf[i].layer == il && ds->buf[i].busy) {
            ds->buf[i].busy = false;
            point(m, ds, il, NULL);
        }
    pthread_mutex_unlock(&ds->mu);
}

void df_dense_end(df_dense_stream *ds) {
    if (!ds) return;
    DF_ASSERT(ds->in_pass && pthread_equal(ds->owner, pthread_self()));
    pthread_mutex_lock(&ds->mu);
    for (int i = 0; i < ds->n_buf; i++)
        if (ds->buf[i].busy) {
            ds->buf[i].busy = false;
            point(ds->m, ds, ds->buf[i].layer, NULL);
        }
    pthread_mutex_unlock(&ds->mu);
    ds->in_pass = false;
    pthread_mutex_unlock(&ds->pass);
}

int df_dense_get_stats(df_dense_stream *ds, df_dense_stats *st) {
    if (!ds) return df_err(DF_ERR_INVALID, "no dense layers stream");
    pthread_mutex_lock(&ds->mu);
    *st = ds->st;
    pthread_mutex_unlock(&ds->mu);
    if (ds->io) {
        df_io_stats is;
        df_io_get_stats(ds->io, &is);
        st->io_busy_ns = is.busy_ns;
    }
    return DF_OK;
}

const char *df_dense_stats_str(const df_dense_stats *st, char *buf, size_t cap) {
    char a[32];
    double busy = st->io_busy_ns / 1e9;
    snprintf(buf, cap,
             "dense stream: io %s | %llu passes, %llu layer reads (%llu already landed when needed) | read %s at "
             "%.2f GB/s | wait %.3f s",
             df_io_engine_name(st->engine), (unsigned long long)st->passes, (unsigned long long)st->layer_reads,
             (unsigned long long)st->layer_ready, df_fmt_bytes(st->bytes_read, a, sizeof a),
             busy > 0 ? st->bytes_read / 1e9 / busy : 0.0, st->wait_ns / 1e9);
    return buf;
}
