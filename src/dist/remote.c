/* remote.c — rank 0's side (dist.h): the plan it sends the workers, the handshake, and the
 * remote expert source that moe.c drives (weights.h df_expert_source.submit/poll/complete).
 * Per MoE layer: submit packs, for every worker that owns at least one of the layer's routed
 * experts, the distinct token rows those experts need and the (expert, row) pairs, and sends
 * them with MPI_Isend before rank 0 starts its own experts; poll (between rank 0's experts)
 * matches the replies that arrived; complete waits for the rest under the deadline and puts
 * each pair's output in its (token, slot) row, where moe.c sums them in slot order.
 * Rank 0's own share stays in the source it had (its expert store); acquire/release/prefetch
 * go there, look-ahead predictions are split by owner.
 * Threading: submit takes the world's recursive mutex and complete releases it, so one layer's
 * exchange is never interleaved with another context's; stats take it too. */
#include "dist/wire.h"
#include "weights/expert_store.h"
#include "base/env.h"
#include "kernels/kernels.h"
#include "forward/session.h"
#include <unistd.h>

typedef struct {
    char *sbuf, *rbuf, *lbuf;
    size_t scap, rcap, lcap;
    MPI_Request sreq, lreq, rreq;
    MPI_Message rmsg;
    bool pending;          /* a request of this exchange is out */
    bool posted, got;      /* its reply matched / received */
    int rlen;
    int n_pairs;
    uint64_t t_seen;
    wire_ready info;       /* the worker's answer to the plan */
} peer;

struct df_dist {
    df_model *m;
    df_dist_placement pl;
    uint64_t identity;
    int n;                 /* ranks */
    df_expert_source local;
    bool has_local;
    peer *peers;           /* [n]; 0 unused */
    int32_t *tok_row;      /* [cap] token -> row of a request */
    int tok_cap;
    int *tmp;              /* [E] experts of one owner */
    int16_t *asg;          /* [E]: the rank computing e_union[u] in this exchange */
    int16_t *at;           /* [E] by expert id: the same for the current layer, -1 */
    int *load;             /* [n] experts assigned per rank in this exchange */
    bool *bal;             /* [n] rank takes part in balancing (its cache holds < half its share) */
    uint64_t seq, t_submit;
    int layer;
    /* statistics, per layer [n_layer] and in total */
    uint64_t *l_calls, *l_out, *l_in, *l_rtt, *l_wait, *l_comm;
    df_dist_stats tot;
};

static int lock(void) { return pthread_mutex_lock(&g_world.mu); }
static void unlock(void) { pthread_mutex_unlock(&g_world.mu); }

static const char *who(const struct df_dist *d, int r, char *buf, size_t cap) {
    const wire_ready *i = &d->peers[r].info;
    if (i->host[0]) snprintf(buf, cap, "rank %d (%s, pid %d)", r, i->host, i->pid);
    else snprintf(buf, cap, "rank %d", r);
    return buf;
}

/* ---- plan and handshake ----------------------------------------------------------------- */
uint64_t df_dist_buffer_bytes(const df_model *m, int n_batch, int n_rank, bool coordinator) {
    df_moe_dims dm;
    (void)df_moe_bufs_bytes(m, 1, &dm);
    const uint64_t nb = (uint64_t)(n_batch > 0 ? n_batch : 1), K = (uint64_t)(m->hp.n_expert_used > 0 ? m->hp.n_expert_used : 1);
    const uint64_t req = sizeof(wire_req) + 4 * (2 * (uint64_t)m->hp.n_expert + nb * K) + 8 + nb * (uint64_t)dm.d_in * 4;
    const uint64_t rep = sizeof(wire_rep) + nb * K * (uint64_t)dm.d_out * 4;
    /* rank 0: a request and a reply buffer per worker (each reply at most the whole batch's) */
    return coordinator ? (uint64_t)(n_rank > 1 ? n_rank - 1 : 0) * (req + rep) : req + rep;
}

int df_dist_coord_start(const df_model *m, df_dist_placement *p, uint64_t identity, struct df_dist **out) {
    *out = NULL;
    struct df_dist *d = df_calloc(1, sizeof *d);
    if (!d) return DF_ERR_NOMEM;
    const int L = m->hp.n_layer, E = m->hp.n_expert;
    d->m = (df_model *)m;
    d->pl = *p;
    memset(p, 0, sizeof *p);
    d->identity = identity;
    d->n = g_world.size;
    d->layer = -1;
    d->peers = df_calloc((size_t)d->n, sizeof *d->peers);
    d->tmp = df_calloc((size_t)(E > 0 ? E : 1), sizeof *d->tmp);
    d->asg = df_calloc((size_t)(E > 0 ? E : 1), sizeof *d->asg);
    d->at = df_calloc((size_t)(E > 0 ? E : 1), sizeof *d->at);
    d->load = df_calloc((size_t)d->n, sizeof *d->load);
    d->bal = df_calloc((size_t)d->n, sizeof *d->bal);
    uint64_t *st = df_calloc((size_t)L * 6, sizeof *st);
    if (!d->peers || !d->tmp || !d->asg || !d->at || !d->load || !d->bal || !st) {
        free(st);
        df_dist_free(d);
        return DF_ERR_NOMEM;
    }
    for (int e = 0; e < E; e++) d->at[e] = -1;
    d->l_calls = st; d->l_out = st + L; d->l_in = st + 2 * L;
    d->l_rtt = st + 3 * L; d->l_wait = st + 4 * L; d->l_comm = st + 5 * L;
    d->tot.n_rank = d->n;
    d->tot.placement = d->pl.desc;
    for (int r = 1; r < d->n; r++) {
        d->peers[r].sreq = d->peers[r].lreq = d->peers[r].rreq = MPI_REQUEST_NULL;
    }
    /* the plan: the same bytes for every worker */
    const size_t n = sizeof(wire_plan) + sizeof(int16_t) * (size_t)L * (size_t)E;
    peer *p1 = d->n > 1 ? &d->peers[1] : NULL;
    if (p1 && df_grow(&p1->sbuf, &p1->scap, n) < 0) { df_dist_free(d); return DF_ERR_NOMEM; }
    if (p1) {
        wire_plan *w = (wire_plan *)p1->sbuf;
        memset(w, 0, sizeof *w);
        *w = (wire_plan){.magic = DF_WIRE_MAGIC, .identity = identity, .n_layer = L, .n_expert = E, .n_rank = d->n,
                         .timeout_s = g_world.opts.timeout_s};
        snprintf(w->placement, sizeof w->placement, "%s", d->pl.desc);
        memcpy(w + 1, d->pl.owner, sizeof(int16_t) * (size_t)L * (size_t)E);
    }
    lock();
    for (int r = 1; r < d->n; r++)
        MPI_Isend(p1->sbuf, (int)n, MPI_BYTE, r, TAG_PLAN, MPI_COMM_WORLD, &d->peers[r].sreq);
    unlock();
    *out = d;
    return DF_OK;
}

const df_dist_placement *df_dist_placement_of(const struct df_dist *d) { return &d->pl; }

/* Every worker's READY: identity, load status. Errors name the rank. */
static int handshake(struct df_dist *d) {
    const double t = g_world.opts.timeout_s > 600 ? g_world.opts.timeout_s : 600;
    const uint64_t dl = df_deadline(t);
    char w[128];
    int rc = DF_OK;
    for (int r = 1; r < d->n; r++) {
        peer *p = &d->peers[r];
        int len = 0;
        if (!df_recv_any(r, TAG_READY, &p->rbuf, &p->rcap, &len, NULL, dl))
            return df_world_fail("rank %d did not answer the model plan within %.0f s (hung at load?)", r, t);
        if (!df_wait_req(&p->sreq, dl)) return df_world_fail("rank %d did not take the model plan", r);
        if (len != (int)sizeof(wire_ready) || ((wire_ready *)p->rbuf)->magic != DF_WIRE_MAGIC) {
            if (rc == DF_OK) rc = df_err(DF_ERR_FORMAT, "rank %d: unexpected answer to the plan (%d bytes): another deltafin build?", r, len);
            continue;
        }
        p->info = *(wire_ready *)p->rbuf;
        p->info.msg[sizeof p->info.msg - 1] = p->info.host[sizeof p->info.host - 1] = 0;
        p->info.path[sizeof p->info.path - 1] = p->info.kernels[sizeof p->info.kernels - 1] = 0;
        if (rc < 0) continue; /* keep the first error; still drain every answer */
        if (p->info.identity != d->identity && p->info.identity)
            rc = df_err(DF_ERR_INVALID,
                        "%s holds a different model: %s (identity %016llx) is not rank 0's %s (identity %016llx)",
                        who(d, r, w, sizeof w), p->info.path, (unsigned long long)p->info.identity, d->m->path,
                        (unsigned long long)d->identity);
        else if (p->info.status < 0)
            rc = df_err(p->info.status, "%s: %s", who(d, r, w, sizeof w), p->info.msg);
        else if (strcmp(p->info.kernels, df_kernels()->name))
            df_log(DF_LOG_WARN, "%s computes with the %s kernels, rank 0 with %s: tokens may differ in the last bits "
                                "from a single-process run", who(d, r, w, sizeof w), p->info.kernels, df_kernels()->name);
    }
    return rc;
}

/* ---- the expert source -------------------------------------------------------------------- */
static int src_acquire(void *ud, int l, int e, df_expert_w *out) {
    struct df_dist *d = ud;
    if (!d->has_local) return df_err(DF_ERR_INTERNAL, "rank 0 owns no experts");
    return d->local.acquire(d->local.ud, l, e, out);
}
static void src_release(void *ud, int l, int e) {
    struct df_dist *d = ud;
    if (d->has_local) d->local.release(d->local.ud, l, e);
}

/* the experts of `list` that rank r owns, into d->tmp */
static int filter(struct df_dist *d, int l, const int *list, int n, int r) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (df_dist_owner(&d->pl, l, list[i]) == r) d->tmp[k++] = list[i];
    return k;
}

static void src_prefetch(void *ud, int l, const int *ex, int n) {
    struct df_dist *d = ud;
    if (!d->has_local || !d->local.prefetch) return;
    int k = 0; /* what submit assigned to rank 0 for this layer */
    for (int i = 0; i < n; i++)
        if (l == d->layer ? d->at[ex[i]] == 0 : df_dist_owner(&d->pl, l, ex[i]) == 0) d->tmp[k++] = ex[i];
    if (k) d->local.prefetch(d->local.ud, l, d->tmp, k);
}

/* Who computes each of the layer's experts. Its home rank (the placement), unless that rank
 * already has ceil(m / N) of the m experts and it and another rank take part in balancing:
 * every rank holds the whole file, so where caches hold little of a share (every expert is
 * read anyway) the reads of a layer spread evenly instead of waiting for the rank that drew
 * the most experts. Where a rank's cache holds most of its share it keeps its experts (a
 * spill would turn a hit into a read). */
static void assign(struct df_dist *d, const df_expert_job *job) {
    const int N = d->n, m = job->n_union, cap = (m + N - 1) / N;
    memset(d->load, 0, sizeof *d->load * (size_t)N);
    for (int u = 0; u < m; u++) {
        const int h = df_dist_owner(&d->pl, job->layer, job->e_union[u]);
        if (d->bal[h] && d->load[h] >= cap) { d->asg[u] = -1; continue; }
        d->asg[u] = (int16_t)h;
        d->load[h]++;
    }
    for (int u = 0; u < m; u++) {
        if (d->asg[u] >= 0) continue;
        int best = -1;
        for (int k = 0; k < N; k++) {
            const int r = (k + u + job->layer) % N; /* ties rotate */
            if (d->bal[r] && (best < 0 || d->load[r] < d->load[best])) best = r;
        }
        d->asg[u] = (int16_t)best;
        d->load[best]++;
    }
    for (int u = 0; u < m; u++) d->at[job->e_union[u]] = d->asg[u];
}

static void src_lookahead(void *ud, int l, const int *ex, int n) {
    struct df_dist *d = ud;
    lock();
    if (d->has_local && d->local.lookahead) {
        int k = filter(d, l, ex, n, 0);
        if (k) d->local.lookahead(d->local.ud, l, d->tmp, k);
    }
    for (int r = 1; r < d->n && !g_world.fatal; r++) {
        int k = filter(d, l, ex, n, r);
        peer *p = &d->peers[r];
        if (!k) continue;
        int done = 1;
        if (p->lreq != MPI_REQUEST_NULL) MPI_Test(&p->lreq, &done, MPI_STATUS_IGNORE);
        if (!done) continue; /* the previous hint is still on its way: drop this one */
        const size_t sz = sizeof(wire_look) + sizeof(int32_t) * (size_t)k;
        if (df_grow(&p->lbuf, &p->lcap, sz) < 0) { df_err_clear(); continue; }
        wire_look *w = (wire_look *)p->lbuf;
        *w = (wire_look){.layer = l, .n = k};
        int32_t *ids = (int32_t *)(w + 1);
        for (int i = 0; i < k; i++) ids[i] = d->tmp[i];
        MPI_Isend(p->lbuf, (int)sz, MPI_BYTE, r, TAG_LOOK, MPI_COMM_WORLD, &p->lreq);
        d->tot.messages++;
        d->tot.bytes_out += sz;
    }
    unlock();
}

static bool src_wanted(void *ud) {
    struct df_dist *d = ud;
    return d->has_local && d->local.lookahead_wanted && d->local.lookahead_wanted(d->local.ud);
}

static void src_stats(void *ud, df_store_stats *st) {
    struct df_dist *d = ud;
    if (d->has_local && d->local.stats) d->local.stats(d->local.ud, st);
}

/* Packs rank r's request of job into its send buffer; returns the byte count (0: nothing). */
static int64_t pack_request(struct df_dist *d, int r, const df_expert_job *job, uint8_t *local) {
    peer *p = &d->peers[r];
    int n_exp = 0, n_pairs = 0, n_rows = 0;
    for (int u = 0; u < job->n_union; u++) {
        const int e = job->e_union[u];
        if (d->asg[u] != r) continue;
        local[u] = 0;
        n_exp++;
        n_pairs += job->e_off[e + 1] - job->e_off[e];
    }
    if (!n_exp) return 0;
    for (int t = 0; t < job->nt; t++) d->tok_row[t] = -1;
    for (int u = 0; u < job->n_union; u++) {
        const int e = job->e_union[u];
        if (d->asg[u] != r) continue;
        for (int i = job->e_off[e]; i < job->e_off[e + 1]; i++) {
            const int t = job->e_list[i] / job->k;
            if (d->tok_row[t] < 0) d->tok_row[t] = n_rows++;
        }
    }
    const size_t ints = wire_pad8(sizeof(int32_t) * (size_t)(2 * n_exp + n_pairs));
    const size_t sz = sizeof(wire_req) + ints + sizeof(float) * (size_t)n_rows * (size_t)job->d_in;
    if (sz > INT32_MAX) return df_err(DF_ERR_RANGE, "layer %d: a request of %zu bytes to rank %d", job->layer, sz, r);
    if (df_grow(&p->sbuf, &p->scap, sz) < 0) return DF_ERR_NOMEM;
    wire_req *h = (wire_req *)p->sbuf;
    *h = (wire_req){.seq = d->seq, .layer = job->layer, .n_exp = n_exp, .n_pairs = n_pairs, .n_rows = n_rows,
                    .d_in = job->d_in, .d_out = job->d_out};
    int32_t *ids = (int32_t *)(h + 1), *cnt = ids + n_exp, *row = cnt + n_exp;
    float *x = (float *)((char *)(h + 1) + ints);
    int k = 0, q = 0;
    for (int u = 0; u < job->n_union; u++) {
        const int e = job->e_union[u];
        if (d->asg[u] != r) continue;
        ids[k] = e;
        cnt[k++] = job->e_off[e + 1] - job->e_off[e];
        for (int i = job->e_off[e]; i < job->e_off[e + 1]; i++) row[q++] = d->tok_row[job->e_list[i] / job->k];
    }
    for (int t = 0; t < job->nt; t++)
        if (d->tok_row[t] >= 0)
            memcpy(x + (int64_t)d->tok_row[t] * job->d_in, job->x + (int64_t)t * job->d_in, sizeof(float) * (size_t)job->d_in);
    p->n_pairs = n_pairs;
    return (int64_t)sz;
}

static int src_submit(void *ud, const df_expert_job *job, uint8_t *local) {
    struct df_dist *d = ud;
    lock();
    if (g_world.fatal) { unlock(); return df_err(DF_ERR_IO, "%s", g_world.fatal_msg); }
    if (job->nt > d->tok_cap) {
        int32_t *t = realloc(d->tok_row, sizeof(int32_t) * (size_t)job->nt);
        if (!t) { unlock(); return DF_ERR_NOMEM; }
        d->tok_row = t;
        d->tok_cap = job->nt;
    }
    memset(local, 1, (size_t)job->n_union);
    if (d->layer >= 0 && d->layer != job->layer)
        for (int e = 0; e < d->pl.n_expert; e++) d->at[e] = -1;
    assign(d, job);
    for (int u = 0; u < job->n_union; u++) local[u] = d->asg[u] == 0;
    d->seq++;
    d->layer = job->layer;
    d->t_submit = df_time_ns();
    for (int r = 1; r < d->n; r++) {
        peer *p = &d->peers[r];
        p->pending = p->posted = p->got = false;
        int64_t sz = pack_request(d, r, job, local);
        if (sz < 0) { /* requests to ranks < r are out: the exchange cannot be finished */
            int rc = df_world_fail("layer %d: cannot send rank %d its request: %s", job->layer, r, df_errmsg());
            unlock();
            return rc;
        }
        if (!sz) continue;
        if (!df_wait_req(&p->sreq, df_deadline(g_world.opts.timeout_s))) {
            char w[128];
            int rc = df_world_fail("%s did not take a request for layer %d within %.1f s (hung?)", who(d, r, w, sizeof w),
                                   job->layer, g_world.opts.timeout_s);
            unlock();
            return rc;
        }
        MPI_Isend(p->sbuf, (int)sz, MPI_BYTE, r, TAG_REQ, MPI_COMM_WORLD, &p->sreq);
        p->pending = true;
        d->tot.messages++;
        d->tot.bytes_out += (uint64_t)sz;
        d->l_out[job->layer] += (uint64_t)sz;
    }
    return DF_OK; /* the lock stays held until complete() */
}

/* Matches and tests the replies that arrived (never blocks). */
static void progress(struct df_dist *d) {
    for (int r = 1; r < d->n; r++) {
        peer *p = &d->peers[r];
        if (!p->pending || p->got) continue;
        if (!p->posted) {
            int found = 0;
            MPI_Status st;
            MPI_Improbe(r, TAG_REP, MPI_COMM_WORLD, &found, &p->rmsg, &st);
            if (!found) continue;
            int n = 0;
            MPI_Get_count(&st, MPI_BYTE, &n);
            if (df_grow(&p->rbuf, &p->rcap, (size_t)n + 8) < 0) { df_err_clear(); continue; }
            MPI_Imrecv(p->rbuf, n, MPI_BYTE, &p->rmsg, &p->rreq);
            p->rlen = n;
            p->posted = true;
        }
        int done = 0;
        MPI_Test(&p->rreq, &done, MPI_STATUS_IGNORE);
        if (done) { p->got = true; p->t_seen = df_time_ns(); }
    }
}

static void src_poll(void *ud) { progress(ud); }

/* Rank r's reply into job->y; the first error is kept in *rc. */
static void take_reply(struct df_dist *d, int r, const df_expert_job *job, int *rc, uint64_t *comm) {
    peer *p = &d->peers[r];
    char w[128];
    const wire_rep *h = (const wire_rep *)p->rbuf;
    const size_t want = sizeof *h + sizeof(float) * (size_t)p->n_pairs * (size_t)job->d_out;
    if (p->rlen < (int)sizeof *h || h->seq != d->seq || h->layer != job->layer) {
        if (*rc == DF_OK) *rc = df_world_fail("%s answered out of step (layer %d, seq %llu; expected layer %d)",
                                              who(d, r, w, sizeof w), p->rlen >= (int)sizeof *h ? h->layer : -1,
                                              p->rlen >= (int)sizeof *h ? (unsigned long long)h->seq : 0ull, job->layer);
        return;
    }
    d->tot.bytes_in += (uint64_t)p->rlen;
    d->l_in[job->layer] += (uint64_t)p->rlen;
    const uint64_t rtt = p->t_seen - d->t_submit, c = rtt > h->busy_ns ? rtt - h->busy_ns : 0;
    if (c > *comm) *comm = c;
    if (h->status < 0) {
        const char *msg = (const char *)(h + 1);
        int n = p->rlen - (int)sizeof *h;
        if (*rc == DF_OK) *rc = df_err(h->status, "%s: %.*s", who(d, r, w, sizeof w), n > 0 ? n : 0, n > 0 ? msg : "");
        return;
    }
    if ((size_t)p->rlen != want || h->n_pairs != p->n_pairs) {
        if (*rc == DF_OK) *rc = df_world_fail("%s sent %d bytes for layer %d, expected %zu", who(d, r, w, sizeof w),
                                              p->rlen, job->layer, want);
        return;
    }
    const float *y = (const float *)(h + 1);
    const size_t row = sizeof(float) * (size_t)job->d_out;
    int64_t q = 0;
    for (int u = 0; u < job->n_union; u++) {
        const int e = job->e_union[u];
        if (d->asg[u] != r) continue;
        for (int i = job->e_off[e]; i < job->e_off[e + 1]; i++, q++)
            memcpy(job->y + (int64_t)job->e_list[i] * job->d_out, y + q * job->d_out, row);
    }
}

static int src_complete(void *ud, const df_expert_job *job) {
    struct df_dist *d = ud;
    const uint64_t t0 = df_time_ns(), dl = df_deadline(g_world.opts.timeout_s);
    df_backoff b = {0};
    int rc = DF_OK;
    for (;;) {
        progress(d);
        int left = 0;
        for (int r = 1; r < d->n; r++) left += d->peers[r].pending && !d->peers[r].got;
        if (!left) break;
        if (df_time_ns() > dl) {
            char w[128], names[512] = "";
            size_t o = 0;
            for (int r = 1; r < d->n && o < sizeof names; r++)
                if (d->peers[r].pending && !d->peers[r].got)
                    o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "", who(d, r, w, sizeof w));
            rc = df_world_fail("%s did not answer layer %d within %.1f s: hung, dead or its disk stalled (--dist-timeout)",
                               names, job->layer, g_world.opts.timeout_s);
            unlock();
            return rc;
        }
        df_backoff_step(&b);
    }
    const uint64_t t1 = df_time_ns();
    uint64_t rtt = 0, comm = 0;
    int any = 0;
    for (int r = 1; r < d->n; r++) {
        peer *p = &d->peers[r];
        if (!p->pending) continue;
        any++;
        if (p->t_seen - d->t_submit > rtt) rtt = p->t_seen - d->t_submit;
        take_reply(d, r, job, &rc, &comm);
        p->pending = false;
        /* the request went out before its reply came back */
        if (!df_wait_req(&p->sreq, dl) && rc == DF_OK) rc = df_world_fail("rank %d: a request never completed", r);
    }
    if (any) {
        d->tot.exchanges++;
        d->tot.messages += (uint64_t)any;
        d->tot.rtt_ns += rtt;
        d->tot.wait_ns += t1 - t0;
        d->tot.comm_ns += comm;
        d->l_calls[job->layer]++;
        d->l_rtt[job->layer] += rtt;
        d->l_wait[job->layer] += t1 - t0;
        d->l_comm[job->layer] += comm;
    }
    unlock();
    return rc;
}

static void src_destroy(void *ud) { df_dist_free(ud); }

void df_dist_free(struct df_dist *d) {
    if (!d) return;
    if (d->has_local && d->local.destroy) d->local.destroy(d->local.ud);
    /* a request still out (a job that ends anyway) may still read a buffer: then keep them all */
    bool busy = false;
    for (int r = 1; d->peers && r < d->n; r++) {
        MPI_Request *rq[] = {&d->peers[r].sreq, &d->peers[r].lreq, &d->peers[r].rreq};
        for (int i = 0; i < 3; i++) {
            int done = 1;
            if (g_world.in_job && !g_world.finalized && *rq[i] != MPI_REQUEST_NULL) MPI_Test(rq[i], &done, MPI_STATUS_IGNORE);
            busy |= !done;
        }
    }
    for (int r = 1; d->peers && r < d->n && !busy; r++) {
        free(d->peers[r].sbuf);
        free(d->peers[r].rbuf);
        free(d->peers[r].lbuf);
    }
    free(d->peers);
    free(d->tok_row);
    free(d->tmp);
    free(d->asg);
    free(d->at);
    free(d->load);
    free(d->bal);
    free(d->l_calls);
    df_dist_placement_free(&d->pl);
    free(d);
}

int df_dist_coord_attach(struct df_dist *d, df_model *m, df_weights *w) {
    int rc = handshake(d);
    if (rc < 0) return rc;
    if (w->has_ex) {
        d->local = w->ex;
        d->has_local = true;
        w->has_ex = false; /* d owns it now */
    }
    df_store *s = w->store;
    df_expert_source src = {.ud = d, .acquire = src_acquire, .release = src_release, .prefetch = src_prefetch,
                            .lookahead = src_lookahead, .lookahead_wanted = src_wanted, .stats = src_stats,
                            .destroy = src_destroy, .submit = src_submit, .poll = src_poll, .complete = src_complete};
    df_weights_set_experts(w, &src);
    w->store = s;
    w->dist = d;
    uint64_t pairs = 0, slots = 0, own = 0;
    for (int l = 0; l < d->pl.n_layer; l++)
        for (int e = 0; e < d->pl.n_expert; e++) own += df_dist_owner(&d->pl, l, e) == 0;
    df_store_stats st;
    memset(&st, 0, sizeof st);
    if (s) df_store_get_stats(s, &st);
    /* balancing: ranks whose cache holds less than half their share (DELTAFIN_DIST_BALANCE
     * forces it on or off for all) */
    const int force = df_env()->dist_balance;
    int n_bal = 0;
    for (int r = 0; r < d->n; r++) {
        const uint64_t sl = r ? (uint64_t)d->peers[r].info.n_slots : (uint64_t)st.n_slots;
        const uint64_t pr = r ? d->peers[r].info.pairs : own;
        d->bal[r] = force >= 0 ? force == 1 : 2 * sl < pr;
        n_bal += d->bal[r];
        if (r) { pairs += pr; slots += sl; }
    }
    df_log(DF_LOG_INFO, "distributed experts: %d ranks, %s placement; workers hold %llu expert pairs in %llu cache "
                        "slots; %d rank%s balance a layer's reads", d->n, d->pl.desc, (unsigned long long)pairs,
           (unsigned long long)slots, n_bal, n_bal == 1 ? "" : "s");
    (void)m;
    return DF_OK;
}

/* ---- statistics ------------------------------------------------------------------------------ */
int df_dist_get_stats(const struct df_dist *d, df_dist_stats *out) {
    lock();
    *out = d->tot;
    unlock();
    return DF_OK;
}

int df_dist_layer_stats(const struct df_dist *d, int layer, uint64_t *calls, uint64_t *bytes_out, uint64_t *bytes_in,
                        uint64_t *rtt_ns, uint64_t *wait_ns, uint64_t *comm_ns) {
    if (layer < 0 || layer >= d->m->hp.n_layer) return df_err(DF_ERR_INVALID, "layer %d out of range", layer);
    lock();
    *calls = d->l_calls[layer]; *bytes_out = d->l_out[layer]; *bytes_in = d->l_in[layer];
    *rtt_ns = d->l_rtt[layer]; *wait_ns = d->l_wait[layer]; *comm_ns = d->l_comm[layer];
    unlock();
    return DF_OK;
}

int df_dist_rank_stats_get(struct df_dist *d, df_dist_rank_stats *rs, int n) {
    if (n < d->n) return df_err(DF_ERR_INVALID, "%d rows for %d ranks", n, d->n);
    memset(rs, 0, sizeof *rs * (size_t)n);
    df_store_stats st;
    memset(&st, 0, sizeof st);
    if (d->has_local && d->local.stats) d->local.stats(d->local.ud, &st);
    rs[0] = (df_dist_rank_stats){.rank = 0, .n_slots = st.n_slots, .engine = st.engine, .hits = st.hits,
                                 .misses = st.misses, .bytes_read = st.bytes_read, .io_busy_ns = st.io_busy_ns,
                                 .wait_ns = st.wait_ns, .cache_bytes = st.cache_bytes, .read_gbps = st.read_gbps};
    for (int l = 0; l < d->pl.n_layer; l++)
        for (int e = 0; e < d->pl.n_expert; e++) rs[0].pairs += df_dist_owner(&d->pl, l, e) == 0;
    snprintf(rs[0].host, sizeof rs[0].host, "%s", g_world.host);
    lock();
    if (g_world.fatal) { unlock(); return df_err(DF_ERR_IO, "%s", g_world.fatal_msg); }
    const uint64_t dl = df_deadline(g_world.opts.timeout_s);
    int rc = DF_OK;
    for (int r = 1; r < d->n && rc == DF_OK; r++) {
        peer *p = &d->peers[r];
        MPI_Request q;
        MPI_Isend(NULL, 0, MPI_BYTE, r, TAG_STATS, MPI_COMM_WORLD, &q);
        int len = 0;
        char w[128];
        if (!df_recv_any(r, TAG_STATS_REP, &p->rbuf, &p->rcap, &len, NULL, dl) || !df_wait_req(&q, dl)) {
            rc = df_world_fail("%s did not answer a statistics request within %.1f s", who(d, r, w, sizeof w),
                               g_world.opts.timeout_s);
            break;
        }
        if (len != (int)sizeof(wire_stats)) continue;
        const wire_stats *s = (const wire_stats *)p->rbuf;
        rs[r] = (df_dist_rank_stats){.rank = r, .n_slots = s->n_slots, .engine = s->engine, .pairs = s->pairs,
                                     .requests = s->requests, .rows = s->rows, .busy_ns = s->busy_ns, .hits = s->hits,
                                     .misses = s->misses, .bytes_read = s->bytes_read, .io_busy_ns = s->io_busy_ns,
                                     .wait_ns = s->wait_ns, .cache_bytes = s->cache_bytes, .read_gbps = s->read_gbps};
        snprintf(rs[r].host, sizeof rs[r].host, "%s", p->info.host);
    }
    unlock();
    return rc;
}
