/* worker.c — a rank > 0 (dist.h): receives rank 0's plan, answers it, then computes the
 * requests for its share of the experts until rank 0 says stop. An expert is computed the way
 * every MoE layer computes it (forward/moe.c df_moe_expert_rows: acquire from this rank's
 * own expert store, gate/up, activation, down, release), on exactly the rows rank 0 would have
 * used, in the same order — so the bits are the ones a single process gets.
 * Requests are untrusted input (another build, a broken peer): every count and index is
 * checked against the message length and the model before use.
 * Threading: one thread drives MPI; the matmuls fan out over its pool, reads over the store's. */
#include "dist/wire.h"
#include "forward/session.h"
#include "weights/expert_store.h"
#include "kernels/kernels.h"
#include <unistd.h>

/* ---- the plan ----------------------------------------------------------------------------- */
static int take_plan(const char *buf, int len) {
    const wire_plan *w = (const wire_plan *)buf;
    if (len < (int)sizeof *w || w->magic != DF_WIRE_MAGIC)
        return df_err(DF_ERR_FORMAT, "rank 0 sent a plan of %d bytes that this build does not read", len);
    const int64_t cells = (int64_t)w->n_layer * w->n_expert;
    if (w->n_layer <= 0 || w->n_expert < 0 || cells > (1 << 26) || len != (int)(sizeof *w + 2 * (size_t)cells))
        return df_err(DF_ERR_FORMAT, "rank 0 sent a malformed plan (%d layers, %d experts, %d bytes)", w->n_layer,
                      w->n_expert, len);
    df_dist_placement *p = &g_world.plan;
    p->n_layer = w->n_layer;
    p->n_expert = w->n_expert;
    p->n_rank = w->n_rank;
    p->owner = df_malloc(sizeof(int16_t) * (size_t)(cells ? cells : 1));
    if (!p->owner) return DF_ERR_NOMEM;
    memcpy(p->owner, w + 1, sizeof(int16_t) * (size_t)cells);
    snprintf(p->desc, sizeof p->desc, "%.*s", (int)sizeof w->placement, w->placement);
    g_world.identity0 = w->identity;
    g_world.timeout_s = w->timeout_s;
    g_world.have_plan = true;
    return DF_OK;
}

/* Waits for PLAN (or STOP: rank 0 ran a command that loads no model). */
static int wait_plan(void) {
    if (g_world.have_plan) return DF_OK;
    if (g_world.stopped) return df_err(DF_ERR_CANCELLED, "rank 0 stopped");
    char *buf = NULL;
    size_t cap = 0;
    int len = 0, tag = 0, rc = DF_OK;
    for (;;) {
        (void)df_recv_any(0, MPI_ANY_TAG, &buf, &cap, &len, &tag, 0);
        if (tag == TAG_STOP) { g_world.stopped = true; rc = df_err(DF_ERR_CANCELLED, "rank 0 stopped"); break; }
        if (tag == TAG_PLAN) { rc = take_plan(buf, len); break; }
        /* anything else before a plan is stale: ignore it */
    }
    free(buf);
    return rc;
}

int df_dist_worker_plan(const df_model *m, uint64_t identity, const df_dist_placement **out) {
    int rc = wait_plan();
    if (rc < 0) return rc;
    const df_dist_placement *p = &g_world.plan;
    g_world.identity = identity;
    if (identity != g_world.identity0)
        return df_err(DF_ERR_INVALID, "%s is not the model rank 0 loaded (identity %016llx, rank 0 %016llx)", m->path,
                      (unsigned long long)identity, (unsigned long long)g_world.identity0);
    if (p->n_layer != m->hp.n_layer || p->n_expert != m->hp.n_expert || p->n_rank != g_world.size)
        return df_err(DF_ERR_INVALID, "rank 0's plan is for %d layers x %d experts on %d ranks, this model has %d x %d",
                      p->n_layer, p->n_expert, p->n_rank, m->hp.n_layer, m->hp.n_expert);
    *out = p;
    return DF_OK;
}

int df_dist_worker_ready(const char *path, const df_model *m, int load_rc) {
    char msg[DF_WIRE_MSG];
    snprintf(msg, sizeof msg, "%s", load_rc < 0 ? df_errmsg() : "");
    if (!g_world.have_plan && !g_world.stopped) (void)wait_plan();
    if (g_world.stopped) return df_err(DF_ERR_CANCELLED, "rank 0 stopped");
    wire_ready *w = df_calloc(1, sizeof *w);
    if (!w) return DF_ERR_NOMEM;
    w->magic = DF_WIRE_MAGIC;
    w->status = load_rc < 0 ? load_rc : DF_OK;
    w->pid = (int32_t)getpid();
    snprintf(w->host, sizeof w->host, "%s", g_world.host);
    snprintf(w->kernels, sizeof w->kernels, "%s", df_kernels()->name);
    snprintf(w->msg, sizeof w->msg, "%s", msg);
    snprintf(w->path, sizeof w->path, "%s", path ? path : "(no -m)");
    w->identity = g_world.identity; /* 0 when the model could not be read */
    if (m) {
        if (m->w && m->w->store) {
            df_store_stats st;
            df_store_get_stats(m->w->store, &st);
            w->n_slots = st.n_slots;
            w->cache_bytes = st.cache_bytes;
        }
    }
    for (int l = 0; l < g_world.plan.n_layer; l++)
        for (int e = 0; e < g_world.plan.n_expert; e++) w->pairs += df_dist_owner(&g_world.plan, l, e) == g_world.rank;
    MPI_Request r;
    MPI_Isend(w, (int)sizeof *w, MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD, &r);
    (void)df_wait_req(&r, 0); /* rank 0 waits for it (or has ended the job) */
    free(w);
    g_world.ready_sent = true;
    return load_rc < 0 ? load_rc : DF_OK;
}

/* ---- serving ------------------------------------------------------------------------------ */
typedef struct {
    df_model *m;
    df_weights *w;
    df_pool *pool;
    char *buf, *look, *rep;          /* received message, look-ahead hints, reply */
    size_t buf_cap, look_cap, rep_cap;
    MPI_Request rep_req;
    void *mem;                       /* df_moe_bufs for `rows` rows */
    size_t mem_bytes;
    int rows;
    df_moe_bufs b;
    int *ex;                         /* [n_expert] */
    wire_stats st;
} worker;

static int grow_bufs(worker *k, int n) {
    if (n <= k->rows) return DF_OK;
    df_moe_dims dm;
    const uint64_t bytes = df_moe_bufs_bytes(k->m, n, &dm);
    void *mem = df_aligned_alloc(64, (size_t)bytes);
    if (!mem) return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes of expert scratch", (unsigned long long)bytes);
    free(k->mem);
    k->mem = mem;
    k->rows = n;
    char *q = mem;
    const uint64_t nr = (uint64_t)n;
    k->b.pool = k->pool;
    k->b.act = q; q += df_pad(dm.act_bytes, 64);
    k->b.xg = (float *)q; q += df_pad(nr * (uint64_t)dm.d_in * 4, 64);
    k->b.fa = (float *)q; q += df_pad(nr * (uint64_t)dm.n_ff * 4, 64);
    k->b.fb = (float *)q; q += df_pad(nr * (uint64_t)dm.n_ff * 4, 64);
    k->b.yg = (float *)q;
    return DF_OK;
}

static void handle_look(worker *k, const char *buf, int len) {
    const wire_look *h = (const wire_look *)buf;
    if (len < (int)sizeof *h || h->n < 0 || len != (int)(sizeof *h + 4 * (size_t)h->n)) return;
    if (h->layer < 0 || h->layer >= k->m->hp.n_layer || !k->m->layers[h->layer].is_moe || h->n > k->m->hp.n_expert) return;
    const int32_t *ids = (const int32_t *)(h + 1);
    int *ex = k->ex, n = 0;
    for (int i = 0; i < h->n; i++)
        if (ids[i] >= 0 && ids[i] < k->m->hp.n_expert && df_dist_owner(&g_world.plan, h->layer, ids[i]) == g_world.rank)
            ex[n++] = ids[i];
    if (n) df_weights_expert_lookahead(k->w, h->layer, ex, n);
}

/* Router look-ahead hints that arrived behind a request: hand them to the store before the
 * request's compute starts, so their reads queue behind this layer's. */
static void drain_look(worker *k) {
    for (;;) {
        int found = 0;
        MPI_Message msg;
        MPI_Status st;
        MPI_Improbe(0, TAG_LOOK, MPI_COMM_WORLD, &found, &msg, &st);
        if (!found) return;
        int n = 0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (df_grow(&k->look, &k->look_cap, (size_t)n + 8) < 0) {
            df_err_clear();
            MPI_Mrecv(NULL, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
            continue;
        }
        MPI_Mrecv(k->look, n, MPI_BYTE, &msg, MPI_STATUS_IGNORE); /* small, already here */
        handle_look(k, k->look, n);
    }
}

/* Checks a request against its length and the model; *ints / *x point into buf. */
static int check_req(worker *k, const char *buf, int len, const int32_t **ids, const float **x) {
    const wire_req *h = (const wire_req *)buf;
    const df_model *m = k->m;
    if (len < (int)sizeof *h) return df_err(DF_ERR_FORMAT, "request of %d bytes", len);
    if (h->layer < 0 || h->layer >= m->hp.n_layer || !m->layers[h->layer].is_moe)
        return df_err(DF_ERR_FORMAT, "request for layer %d, which has no routed experts", h->layer);
    int64_t din, dout;
    df_model_expert_shape(m, h->layer, DF_EXPERT_GATE, &din, NULL, NULL);
    df_model_expert_shape(m, h->layer, DF_EXPERT_DOWN, NULL, &dout, NULL);
    if (h->d_in != din || h->d_out != dout || h->n_exp < 1 || h->n_exp > m->hp.n_expert || h->n_pairs < h->n_exp ||
        h->n_rows < 1 || h->n_rows > h->n_pairs)
        return df_err(DF_ERR_FORMAT, "layer %d: malformed request (%d experts, %d pairs, %d rows, widths %lld/%lld)",
                      h->layer, h->n_exp, h->n_pairs, h->n_rows, (long long)h->d_in, (long long)h->d_out);
    const size_t ints = wire_pad8(4 * ((size_t)2 * h->n_exp + (size_t)h->n_pairs));
    if ((size_t)len != sizeof *h + ints + 4 * (size_t)h->n_rows * (size_t)din)
        return df_err(DF_ERR_FORMAT, "layer %d: request of %d bytes does not match its counts", h->layer, len);
    const int32_t *id = (const int32_t *)(h + 1), *cnt = id + h->n_exp, *row = cnt + h->n_exp;
    int64_t sum = 0;
    for (int i = 0; i < h->n_exp; i++) {
        if (id[i] < 0 || id[i] >= m->hp.n_expert) /* any expert: rank 0 may balance a layer's reads */
            return df_err(DF_ERR_FORMAT, "layer %d: expert %d out of range", h->layer, id[i]);
        if (cnt[i] < 1) return df_err(DF_ERR_FORMAT, "layer %d: expert %d with %d rows", h->layer, id[i], cnt[i]);
        sum += cnt[i];
    }
    if (sum != h->n_pairs) return df_err(DF_ERR_FORMAT, "layer %d: pair counts do not add up", h->layer);
    for (int p = 0; p < h->n_pairs; p++)
        if (row[p] < 0 || row[p] >= h->n_rows) return df_err(DF_ERR_FORMAT, "layer %d: row %d out of range", h->layer, row[p]);
    *ids = id;
    *x = (const float *)((const char *)(h + 1) + ints);
    return DF_OK;
}

/* Computes a request into k->rep (header + outputs, or header + error message); returns the
 * reply's byte count. */
static int compute_req(worker *k, const char *buf, int len) {
    const wire_req *h = (const wire_req *)buf;
    wire_rep r = {.seq = len >= (int)sizeof *h ? h->seq : 0, .layer = len >= (int)sizeof *h ? h->layer : -1};
    const int32_t *ids = NULL;
    const float *x = NULL;
    int rc = check_req(k, buf, len, &ids, &x);
    size_t out = sizeof r;
    if (rc == DF_OK) {
        const int il = h->layer;
        const int32_t *cnt = ids + h->n_exp, *row = cnt + h->n_exp;
        int64_t n_ff;
        df_model_expert_shape(k->m, il, DF_EXPERT_GATE, NULL, &n_ff, NULL);
        int *ex = k->ex, maxc = 0;
        for (int i = 0; i < h->n_exp; i++) maxc = cnt[i] > maxc ? cnt[i] : maxc;
        rc = grow_bufs(k, maxc);
        out = sizeof r + 4 * (size_t)h->n_pairs * (size_t)h->d_out;
        if (rc == DF_OK) rc = df_grow(&k->rep, &k->rep_cap, out);
        if (rc == DF_OK) {
            for (int i = 0; i < h->n_exp; i++) ex[i] = ids[i];
            df_weights_expert_prefetch(k->w, il, ex, h->n_exp);
            drain_look(k);
        }
        float *y = (float *)(k->rep + sizeof r);
        int64_t q = 0;
        for (int i = 0; i < h->n_exp && rc == DF_OK; i++) {
            const int n = cnt[i];
            for (int j = 0; j < n; j++)
                memcpy(k->b.xg + (int64_t)j * h->d_in, x + (int64_t)row[q + j] * h->d_in, sizeof(float) * (size_t)h->d_in);
            df_expert_w w;
            rc = df_weights_expert_acquire(k->w, il, ids[i], &w);
            if (rc < 0) { rc = df_err_prefix(rc, "layer %d expert %d", il, ids[i]); break; }
            df_moe_expert_rows(&k->b, &k->m->hp, &k->m->layers[il], ids[i], &w, h->d_in, n_ff, h->d_out, n);
            df_weights_expert_release(k->w, il, ids[i]);
            memcpy(y + q * h->d_out, k->b.yg, sizeof(float) * (size_t)n * (size_t)h->d_out);
            q += n;
        }
        if (rc == DF_OK) { r.n_pairs = h->n_pairs; k->st.rows += (uint64_t)h->n_pairs; }
    }
    if (rc < 0) {
        char msg[DF_WIRE_MSG];
        int n = snprintf(msg, sizeof msg, "%s", df_errmsg());
        if (n >= (int)sizeof msg) n = (int)sizeof msg - 1;
        out = sizeof r + (size_t)n;
        if (df_grow(&k->rep, &k->rep_cap, out) < 0) { out = sizeof r; n = 0; }
        memcpy(k->rep + sizeof r, msg, (size_t)n);
        r.status = rc;
        df_log(DF_LOG_WARN, "request for layer %d failed: %s", r.layer, msg);
    }
    memcpy(k->rep, &r, sizeof r);
    return (int)out;
}

static void send_stats(worker *k) {
    df_store_stats s;
    df_weights_expert_stats(k->w, &s);
    wire_stats w = k->st;
    w.hits = s.hits; w.misses = s.misses; w.bytes_read = s.bytes_read; w.io_busy_ns = s.io_busy_ns;
    w.wait_ns = s.wait_ns; w.cache_bytes = s.cache_bytes; w.n_slots = s.n_slots; w.engine = s.engine;
    w.read_gbps = s.read_gbps;
    for (int l = 0; l < g_world.plan.n_layer; l++)
        for (int e = 0; e < g_world.plan.n_expert; e++) w.pairs += df_dist_owner(&g_world.plan, l, e) == g_world.rank;
    MPI_Request r;
    MPI_Isend(&w, (int)sizeof w, MPI_BYTE, 0, TAG_STATS_REP, MPI_COMM_WORLD, &r);
    (void)df_wait_req(&r, 0);
}

int df_dist_worker_serve(df_model *m) {
    worker k = {.m = m, .w = m->w, .rep_req = MPI_REQUEST_NULL};
    k.pool = df_pool_create(m->params.n_threads);
    k.ex = df_calloc((size_t)(m->hp.n_expert > 0 ? m->hp.n_expert : 1), sizeof *k.ex);
    if (!k.pool || !k.ex) { df_pool_free(k.pool); free(k.ex); return df_err(DF_ERR_NOMEM, "cannot create thread pool"); }
    int rc = DF_OK;
    for (;;) {
        int len = 0, tag = 0;
        (void)df_recv_any(0, MPI_ANY_TAG, &k.buf, &k.buf_cap, &len, &tag, 0); /* rank 0 may idle for hours */
        if (tag == TAG_STOP) break;
        if (tag == TAG_LOOK) { handle_look(&k, k.buf, len); continue; }
        if (tag == TAG_STATS) { send_stats(&k); continue; }
        if (tag != TAG_REQ) continue;
        const uint64_t t0 = df_time_ns();
        df_store_stats s0, s1;
        df_weights_expert_stats(k.w, &s0);
        (void)df_wait_req(&k.rep_req, 0); /* rank 0 took the previous reply before asking again */
        const int n = compute_req(&k, k.buf, len);
        df_weights_expert_stats(k.w, &s1);
        wire_rep *h = (wire_rep *)k.rep;
        h->busy_ns = df_time_ns() - t0;
        h->io_wait_ns = s1.wait_ns - s0.wait_ns;
        k.st.requests++;
        k.st.busy_ns += h->busy_ns;
        MPI_Isend(k.rep, n, MPI_BYTE, 0, TAG_REP, MPI_COMM_WORLD, &k.rep_req);
    }
    (void)df_wait_req(&k.rep_req, 0);
    df_pool_free(k.pool);
    free(k.mem);
    free(k.buf);
    free(k.look);
    free(k.rep);
    free(k.ex);
    df_dist_placement_free(&g_world.plan);
    return rc;
}
