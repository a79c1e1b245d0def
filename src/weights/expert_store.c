/* expert_store.c — slots, budget, CLOCK eviction, pinning, hot set, prefetch, checksums,
 * statistics (see expert_store.h).
 * Invariant: a slot with pins > 0, hot, or state LOADING is never chosen as a victim; the slot
 * memory is allocated once at create (n_slots * slot_bytes <= budget_bytes) and never grows.
 * Threading: one mutex guards all slot state; I/O completions take it briefly. Checksums are
 * computed on the I/O thread before taking the lock. */
#include "weights/expert_store.h"
#include "base/sysmem.h"
#include "base/env.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>

enum { S_FREE = 0, S_LOADING, S_READY, S_ERROR };
/* --prefetch auto's look-ahead gate (see lookahead_depth) */
#define LA_MIN_SCORED 32
#define LA_MIN_ACC 0.30
static const char *g_part_name[DF_EXPERT_NPARTS] = {"gate", "up", "down"};

typedef struct slot slot;
typedef struct {
    df_io_req req;
    slot *sl;
    int part;                 /* -1: whole record */
} slot_req;

struct slot {
    int key;                  /* layer * n_experts + expert, -1 if empty */
    int state;
    int pins;
    int ref;                  /* CLOCK frequency 0..3 */
    bool hot, prefetched, used;
    bool la;                  /* read started by router look-ahead */
    unsigned need;            /* == store epoch: routed for the layer being computed, not yet acquired */
    int pending;              /* reads in flight */
    int nreq;                 /* reads of the current load (rq[0..nreq-1]) */
    int status;
    char err[400];
    uint8_t *mem;
    slot_req rq[DF_EXPERT_NPARTS];
};

struct df_store {
    df_store_params p;
    df_expert_loc *locs;
    df_expert_record *records;
    df_io *io;
    uint64_t slot_bytes;
    uint64_t region_off[DF_EXPERT_NPARTS]; /* part regions inside a slot (per-part mode) */
    int n_slots, n_hot, hand, prefetch;
    int la_mode;              /* look-ahead: DF_PREFETCH_* (auto decides per layer call) */
    int n_free;               /* slots in state S_FREE (taken first, before evicting) */
    slot *slots;
    int *map;                 /* key -> slot index or -1 */
    uint8_t *mem;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    df_store_stats st;
    /* router look-ahead */
    unsigned epoch;           /* bumped by every df_store_prefetch (one per MoE layer call) */
    uint8_t *la_mark;         /* [key] predicted for a layer not yet routed */
    int *la_npred;            /* [layer] experts predicted (and not yet scored) */
    uint64_t *lyr;               /* per layer: hits, misses, wait ns (3 x n_layers) */
    int last_layer;           /* layer of the last df_store_prefetch */
    uint64_t t_last_acq;      /* when the last acquire() returned */
    uint64_t gap_sum_ns, gap_n; /* layer-boundary gaps: last acquire of L -> routing of L+1 */
    int *rtype;               /* [layer * NPARTS + part]: type the slot bytes are repacked to, -1 none */
    int64_t *rn_in;           /* [layer * NPARTS + part]: columns (for the repack) */
    /* eviction (find_victim): each expert's use count, halved every POP_HALF_LIFE layer calls
     * (epochs) and kept across evictions: its recent popularity; the slot whose expert has the
     * lowest is evicted. DELTAFIN_CACHE_POLICY=clock: CLOCK on `ref` (the policy before). */
    float *pop;               /* [key] decayed uses at epoch pop_at[key] */
    unsigned *pop_at;
    bool clock;
};

/* In layer calls: about 170 tokens of a 6-layer model, 11 of a 93-layer one. Chosen by replaying
 * routing traces (dev/replay_trace.c, docs/streaming.md "Cache policy against Belady"). */
#define POP_HALF_LIFE 1024.0f

/* mu held: key's decayed use count now */
static float pop_now(const df_store *s, int key) {
    const unsigned dt = s->epoch - s->pop_at[key];
    return dt ? s->pop[key] * exp2f(-(float)dt / POP_HALF_LIFE) : s->pop[key];
}

int df_prefetch_parse(const char *s, int *mode) {
    if (s && !strcmp(s, "off")) *mode = DF_PREFETCH_OFF;
    else if (s && !strcmp(s, "on")) *mode = DF_PREFETCH_ON;
    else if (s && !strcmp(s, "auto")) *mode = DF_PREFETCH_AUTO;
    else return df_err(DF_ERR_INVALID, "--prefetch '%s': expected auto, on or off", s ? s : "(null)");
    return DF_OK;
}

df_store_params df_store_default_params(void) {
    df_store_params p = {0};
    p.verify = true;
    p.min_slots = 2;
    p.prefetch = DF_PREFETCH_AUTO;
    p.io = df_io_default_params();
    return p;
}

/* Largest read per part (per-part mode) or per record; slot = sum of aligned regions. */
static uint64_t compute_layout(const df_store_params *p, uint64_t region_off[DF_EXPERT_NPARTS]) {
    uint64_t maxp[DF_EXPERT_NPARTS] = {0}, maxr = 0;
    size_t n = (size_t)p->n_layers * p->n_experts;
    for (size_t k = 0; k < n; k++) {
        for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
            uint64_t b = p->locs[k * DF_EXPERT_NPARTS + part].nbytes;
            if (b > maxp[part]) maxp[part] = b;
        }
        if (p->records && p->records[k].nbytes > maxr) maxr = p->records[k].nbytes;
    }
    if (p->records) {
        for (int part = 0; part < DF_EXPERT_NPARTS; part++) region_off[part] = 0;
        return maxr ? df_io_buf_need(DF_IO_ALIGN - 1, maxr) : 0;
    }
    uint64_t off = 0;
    for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
        region_off[part] = off;
        if (maxp[part]) off += df_io_buf_need(DF_IO_ALIGN - 1, maxp[part]);
    }
    return off;
}

uint64_t df_store_slot_bytes(const df_store_params *p) {
    uint64_t ro[DF_EXPERT_NPARTS];
    return compute_layout(p, ro);
}

uint64_t df_store_max_read(const df_store_params *p) {
    const size_t n = (size_t)p->n_layers * p->n_experts;
    uint64_t maxread = 0;
    for (size_t k = 0; k < n; k++) {
        if (p->records) { if (p->records[k].nbytes > maxread) maxread = p->records[k].nbytes; continue; }
        for (int part = 0; part < DF_EXPERT_NPARTS; part++)
            if (p->locs[k * DF_EXPERT_NPARTS + part].nbytes > maxread) maxread = p->locs[k * DF_EXPERT_NPARTS + part].nbytes;
    }
    return maxread;
}

static int validate(const df_store_params *p) {
    if (p->n_layers <= 0 || p->n_experts <= 0 || !p->locs || !p->paths || p->n_files <= 0)
        return df_err(DF_ERR_INVALID, "expert store: missing layers, experts, locations or files");
    size_t n = (size_t)p->n_layers * p->n_experts;
    for (size_t k = 0; k < n; k++) {
        int l = (int)(k / p->n_experts), e = (int)(k % p->n_experts);
        for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
            const df_expert_loc *lc = &p->locs[k * DF_EXPERT_NPARTS + part];
            if (!lc->nbytes) continue;
            if (lc->shard < 0 || lc->shard >= p->n_files)
                return df_err(DF_ERR_INVALID, "layer %d expert %d %s: file index %d out of range", l, e,
                              g_part_name[part], lc->shard);
            if (lc->nbytes > (1ull << 31))
                return df_err(DF_ERR_RANGE, "layer %d expert %d %s: %llu bytes is too large for one read", l, e,
                              g_part_name[part], (unsigned long long)lc->nbytes);
            if (p->records) {
                const df_expert_record *r = &p->records[k];
                uint64_t end, rend;
                if (lc->shard != r->file || lc->offset < r->offset || !df_add_ok(lc->offset, lc->nbytes, &end) ||
                    !df_add_ok(r->offset, r->nbytes, &rend) || end > rend)
                    return df_err(DF_ERR_FORMAT, "layer %d expert %d %s: bytes [%llu, +%llu) lie outside the record at offset %llu (+%llu)",
                                  l, e, g_part_name[part], (unsigned long long)lc->offset,
                                  (unsigned long long)lc->nbytes, (unsigned long long)r->offset,
                                  (unsigned long long)r->nbytes);
            }
        }
        if (p->records && p->records[k].nbytes > (1ull << 31))
            return df_err(DF_ERR_RANGE, "layer %d expert %d: record of %llu bytes is too large", l, e,
                          (unsigned long long)p->records[k].nbytes);
    }
    return DF_OK;
}

/* The layout (layer, part) is repacked to after reads, or -1: every expert's part must have
 * the same type and whole 8-row groups. */
static int repack_target(df_store *s, int l, int part) {
    const int64_t n_in = s->p.n_in ? s->p.n_in[l * DF_EXPERT_NPARTS + part] : 0;
    if (n_in <= 0) return -1;
    int type = -1, to = -1;
    for (int e = 0; e < s->p.n_experts; e++) {
        const df_expert_loc *lc = &s->locs[((size_t)l * s->p.n_experts + e) * DF_EXPERT_NPARTS + part];
        if (!lc->nbytes) continue;
        if (type < 0) {
            type = lc->type;
            to = df_repack_type(type);
            if (to < 0) return -1;
        }
        const uint64_t rb = df_type_row_bytes(type, n_in);
        if (lc->type != type || !rb || lc->nbytes % rb || (lc->nbytes / rb) % 8) return -1;
    }
    if (to >= 0) s->rn_in[l * DF_EXPERT_NPARTS + part] = n_in;
    return to;
}

int df_store_create(const df_store_params *pin, df_store **out) {
    *out = NULL;
    int rc = validate(pin);
    if (rc) return rc;
    df_store *s = df_calloc(1, sizeof *s);
    if (!s) return DF_ERR_NOMEM;
    s->p = *pin;
    if (s->p.min_slots <= 0) s->p.min_slots = 2;
    size_t n = (size_t)pin->n_layers * pin->n_experts;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->locs = df_malloc(n * DF_EXPERT_NPARTS * sizeof *s->locs);
    s->map = df_malloc(n * sizeof *s->map);
    s->la_mark = df_calloc(n, 1);
    s->la_npred = df_calloc((size_t)pin->n_layers, sizeof *s->la_npred);
    s->lyr = df_calloc((size_t)pin->n_layers * 3, sizeof *s->lyr);
    s->last_layer = -1;
    s->epoch = 1;
    s->pop = df_calloc(n, sizeof *s->pop);
    s->pop_at = df_calloc(n, sizeof *s->pop_at);
    s->clock = df_env()->cache_clock;
    if (!s->locs || !s->map || !s->la_mark || !s->la_npred || !s->lyr || !s->pop || !s->pop_at) {
        df_store_free(s);
        return DF_ERR_NOMEM;
    }
    memcpy(s->locs, pin->locs, n * DF_EXPERT_NPARTS * sizeof *s->locs);
    s->p.locs = s->locs;
    for (size_t k = 0; k < n; k++) s->map[k] = -1;
    if (pin->records) {
        s->records = df_malloc(n * sizeof *s->records);
        if (!s->records) { df_store_free(s); return DF_ERR_NOMEM; }
        memcpy(s->records, pin->records, n * sizeof *s->records);
        s->p.records = s->records;
    }
    s->rtype = df_malloc((size_t)pin->n_layers * DF_EXPERT_NPARTS * sizeof *s->rtype);
    s->rn_in = df_calloc((size_t)pin->n_layers * DF_EXPERT_NPARTS, sizeof *s->rn_in);
    if (!s->rtype || !s->rn_in) { df_store_free(s); return DF_ERR_NOMEM; }
    int n_rp = 0;
    for (int l = 0; l < pin->n_layers; l++)
        for (int part = 0; part < DF_EXPERT_NPARTS; part++)
            n_rp += (s->rtype[l * DF_EXPERT_NPARTS + part] = repack_target(s, l, part)) >= 0;
    if (n_rp) df_log(DF_LOG_DEBUG, "expert store: %d layer parts repacked to the kernels' layout after reads", n_rp);
    s->p.n_in = NULL;
    s->p.paths = NULL; /* borrowed only during create */
    s->slot_bytes = compute_layout(&s->p, s->region_off);
    if (!s->slot_bytes) { df_store_free(s); return df_err(DF_ERR_INVALID, "expert store: the model has no routed expert bytes"); }
    uint64_t ns = pin->budget_bytes / s->slot_bytes;
    if (ns > n) ns = n; /* everything resident */
    if (ns < (uint64_t)s->p.min_slots && ns < n) {
        char b1[32], b2[32];
        int ms = s->p.min_slots;
        uint64_t need = (uint64_t)ms * s->slot_bytes;
        df_store_free(s);
        return df_err(DF_ERR_RANGE, "expert cache of %s holds %llu expert slots; at least %d are needed (%s)",
                      df_fmt_bytes(pin->budget_bytes, b1, sizeof b1), (unsigned long long)ns, ms,
                      df_fmt_bytes(need, b2, sizeof b2));
    }
    s->n_slots = (int)ns;
    uint64_t total;
    if (!df_mul_ok(ns, s->slot_bytes, &total) || total > SIZE_MAX) { df_store_free(s); return df_err(DF_ERR_RANGE, "expert cache too large"); }
    s->mem = df_aligned_alloc(DF_IO_ALIGN, (size_t)total);
    s->slots = df_calloc((size_t)ns, sizeof *s->slots);
    if (!s->mem || !s->slots) { df_store_free(s); return DF_ERR_NOMEM; }
    if (pin->mlock) {
        int rc = df_mlock(s->mem, total, "the expert cache");
        if (rc < 0) { df_store_free(s); return rc; }
    }
    for (int i = 0; i < s->n_slots; i++) {
        s->slots[i].key = -1;
        s->slots[i].mem = s->mem + (size_t)i * s->slot_bytes;
    }
    s->n_free = s->n_slots;
    s->prefetch = pin->prefetch;
    s->la_mode = pin->prefetch;
    if (s->prefetch == DF_PREFETCH_AUTO && s->n_slots < 4 * s->p.min_slots) s->prefetch = DF_PREFETCH_OFF;
    df_io_params iop = pin->io;
    /* io auto measures with this store's own request size */
    iop.probe_bytes = df_pad(df_store_max_read(pin), DF_IO_ALIGN);
    rc = df_io_open(pin->paths, pin->n_files, &iop, &s->io);
    if (rc) { df_store_free(s); return rc; }
    /* the loader's buffered reads of the dense weights (now in anonymous memory) and their
     * readahead would stay charged to a memory cgroup */
    df_io_drop_cache(s->io);
    /* every location must lie inside its file */
    for (size_t k = 0; k < n; k++)
        for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
            const df_expert_loc *lc = &s->locs[k * DF_EXPERT_NPARTS + part];
            uint64_t end = lc->offset + lc->nbytes; /* validated: no overflow below 2^63 */
            if (lc->nbytes && (lc->offset > UINT64_MAX / 2 || end > df_io_file_size(s->io, lc->shard))) {
                int l = (int)(k / pin->n_experts), e = (int)(k % pin->n_experts);
                rc = df_err(DF_ERR_FORMAT, "layer %d expert %d %s: %s is truncated: needs bytes up to offset %llu, file size %llu",
                            l, e, g_part_name[part], df_io_file_path(s->io, lc->shard), (unsigned long long)end,
                            (unsigned long long)df_io_file_size(s->io, lc->shard));
                df_store_free(s);
                return rc;
            }
        }
    s->st.n_slots = s->n_slots;
    s->st.slot_bytes = s->slot_bytes;
    s->st.cache_bytes = total;
    s->st.engine = df_io_get_engine(s->io);
    *out = s;
    return DF_OK;
}

void df_store_free(df_store *s) {
    if (!s) return;
    if (s->io) df_io_close(s->io); /* waits for in-flight reads (prefetches) */
    free(s->mem);
    free(s->slots);
    free(s->map);
    free(s->pop);
    free(s->pop_at);
    free(s->locs);
    free(s->records);
    free(s->la_mark);
    free(s->la_npred);
    free(s->lyr);
    free(s->rtype);
    free(s->rn_in);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* ---- I/O ------------------------------------------------------------------------------ */

static void on_read_done(df_io_req *r) {
    slot_req *sr = (slot_req *)r; /* req is the first member */
    slot *sl = sr->sl;
    df_store *s = r->ud;
    char err[sizeof sl->err];
    int status = r->status;
    int key = sl->key; /* stable while LOADING */
    int l = key / s->p.n_experts, e = key % s->p.n_experts;
    if (status) {
        snprintf(err, sizeof err, "layer %d expert %d%s%s: %s", l, e, sr->part >= 0 ? " " : "",
                 sr->part >= 0 ? g_part_name[sr->part] : "", r->err);
    } else if (sr->part < 0 && s->p.verify) {
        const df_expert_record *rec = &s->records[key];
        uint64_t h = df_xxh64(r->data, r->len, 0);
        if (h != rec->xxh64) {
            status = DF_ERR_CHECKSUM;
            snprintf(err, sizeof err, "layer %d expert %d: checksum mismatch in %s at offset %llu (%llu bytes): expected xxh64 %016llx, got %016llx",
                     l, e, df_io_file_path(s->io, rec->file), (unsigned long long)rec->offset,
                     (unsigned long long)rec->nbytes, (unsigned long long)rec->xxh64, (unsigned long long)h);
        }
    }
    for (int part = 0; !status && part < DF_EXPERT_NPARTS; part++) { /* the kernels' layout */
        const int to = s->rtype[l * DF_EXPERT_NPARTS + part];
        const df_expert_loc *lc = &s->locs[(size_t)key * DF_EXPERT_NPARTS + part];
        if (to < 0 || !lc->nbytes || (sr->part >= 0 && sr->part != part)) continue;
        uint8_t *p = sr->part >= 0 ? r->data : r->data + (lc->offset - s->records[key].offset);
        const int64_t n_in = s->rn_in[l * DF_EXPERT_NPARTS + part];
        status = df_repack_rows(NULL, lc->type, to, p, n_in, (int64_t)(lc->nbytes / df_type_row_bytes(lc->type, n_in)));
        if (status) snprintf(err, sizeof err, "layer %d expert %d %s: %s", l, e, g_part_name[part], df_errmsg());
    }
    pthread_mutex_lock(&s->mu);
    if (status && !sl->status) {
        sl->status = status;
        memcpy(sl->err, err, sizeof err);
    }
    if (--sl->pending == 0) {
        sl->state = sl->status ? S_ERROR : S_READY;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* mu held. Start the reads of `key` into slot sl (state becomes LOADING); prio: df_io_req.prio. */
static int start_load(df_store *s, slot *sl, int key, int prio) {
    DF_ASSERT(sl->state == S_FREE);
    s->n_free--;
    sl->key = key;
    sl->state = S_LOADING;
    sl->status = DF_OK;
    sl->err[0] = 0;
    sl->pending = 0;
    s->map[key] = (int)(sl - s->slots);
    int nreq = 0;
    if (s->records) {
        const df_expert_record *rec = &s->records[key];
        slot_req *sr = &sl->rq[nreq++];
        memset(&sr->req, 0, sizeof sr->req);
        sr->sl = sl; sr->part = -1;
        sr->req.file = rec->file; sr->req.offset = rec->offset; sr->req.len = rec->nbytes;
        sr->req.buf = sl->mem;
    } else {
        for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
            const df_expert_loc *lc = &s->locs[(size_t)key * DF_EXPERT_NPARTS + part];
            if (!lc->nbytes) continue;
            slot_req *sr = &sl->rq[nreq++];
            memset(&sr->req, 0, sizeof sr->req);
            sr->sl = sl; sr->part = part;
            sr->req.file = lc->shard; sr->req.offset = lc->offset; sr->req.len = lc->nbytes;
            sr->req.buf = sl->mem + s->region_off[part];
        }
    }
    if (!nreq) {
        s->map[key] = -1;
        sl->key = -1;
        sl->state = S_FREE;
        s->n_free++;
        return df_err(DF_ERR_INVALID, "layer %d expert %d: this layer has no routed expert weights",
                      key / s->p.n_experts, key % s->p.n_experts);
    }
    sl->pending = nreq;
    sl->nreq = nreq;
    for (int i = 0; i < nreq; i++) {
        sl->rq[i].req.done = on_read_done;
        sl->rq[i].req.ud = s;
        sl->rq[i].req.prio = prio;
        int rc = df_io_submit(s->io, &sl->rq[i].req);
        if (rc) { /* not queued: no callback will come for this one */
            int l = key / s->p.n_experts, e = key % s->p.n_experts;
            if (!sl->status) {
                sl->status = rc;
                snprintf(sl->err, sizeof sl->err, "layer %d expert %d: %s", l, e, df_errmsg());
            }
            sl->pending -= nreq - i;
            if (sl->pending == 0) sl->state = S_ERROR;
            break;
        }
    }
    return DF_OK;
}

/* mu held. CLOCK victim among unpinned, non-hot, non-loading slots; -1 if none. `spare`
 * (prefetch paths): also skip slots routed for the layer being computed and not yet acquired,
 * and predictions not yet used, so a hint never displaces bytes that are about to be used. */
static int find_victim(df_store *s, bool spare) {
    if (s->n_free > 0)
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].state == S_FREE) return i;
    if (!s->clock) {
        /* the lowest recent popularity; a slot routed for this layer and not yet acquired only
         * when nothing else can go (the blocking path must make progress) */
        int best = -1, best_need = -1;
        float bs = 0.0f, bn = 0.0f;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->state == S_LOADING || sl->pins || sl->hot) continue;
            if (sl->state == S_FREE || sl->state == S_ERROR) return i;
            const bool needed = sl->need == s->epoch;
            if (spare && (needed || (sl->prefetched && !sl->used))) continue;
            float sc = pop_now(s, sl->key);
            if (sl->prefetched && !sl->used) sc += 1.0f; /* a prediction counts as one use */
            if (needed) { if (best_need < 0 || sc < bn) { best_need = i; bn = sc; } }
            else if (best < 0 || sc < bs) { best = i; bs = sc; }
        }
        return best >= 0 ? best : best_need;
    }
    for (int iter = 0; iter < 4 * s->n_slots + 1; iter++) {
        slot *sl = &s->slots[s->hand];
        int idx = s->hand;
        s->hand = (s->hand + 1) % s->n_slots;
        if (sl->state == S_LOADING || sl->pins || sl->hot) continue;
        if (sl->state == S_FREE || sl->state == S_ERROR) return idx;
        if (spare && (sl->need == s->epoch || (sl->prefetched && !sl->used))) continue;
        if (sl->ref > 0) { sl->ref--; continue; }
        return idx;
    }
    return -1;
}

/* mu held: empty slot idx (evicting its expert) */
static void evict(df_store *s, int idx) {
    slot *sl = &s->slots[idx];
    if (sl->state == S_FREE) return;
    s->n_free++;
    if (sl->key >= 0) {
        if (sl->state == S_READY) s->st.evictions++;
        if (sl->prefetched && !sl->used) {
            if (sl->la) s->st.lookahead_wasted++;
            else s->st.prefetch_wasted++;
        }
        s->map[sl->key] = -1;
    }
    sl->key = -1;
    sl->state = S_FREE;
    sl->ref = 0;
    sl->need = 0;
    sl->prefetched = sl->used = sl->la = false;
}

static void fill_out(df_store *s, slot *sl, df_expert_w *out) {
    size_t key = (size_t)sl->key;
    for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
        const df_expert_loc *lc = &s->locs[key * DF_EXPERT_NPARTS + part];
        const int to = s->rtype[(key / s->p.n_experts) * DF_EXPERT_NPARTS + part];
        out->type[part] = lc->nbytes ? (to >= 0 ? to : lc->type) : -1;
        if (!lc->nbytes) { out->w[part] = NULL; continue; }
        if (s->records) out->w[part] = sl->rq[0].req.data + (lc->offset - s->records[key].offset);
        else {
            for (int i = 0; i < DF_EXPERT_NPARTS; i++)
                if (sl->rq[i].part == part) { out->w[part] = sl->rq[i].req.data; break; }
        }
    }
}

static void auto_prefetch_check(df_store *s) {
    uint64_t done = s->st.prefetch_used + s->st.prefetch_wasted;
    if (s->p.prefetch == DF_PREFETCH_AUTO && s->prefetch == DF_PREFETCH_AUTO && done >= 64 &&
        s->st.prefetch_used * 2 < done) {
        s->prefetch = DF_PREFETCH_OFF;
        df_log(DF_LOG_INFO, "prefetch: accuracy %.0f%% after %llu predictions; turned off",
               100.0 * s->st.prefetch_used / done, (unsigned long long)done);
    }
}

int df_store_acquire(df_store *s, int layer, int expert, df_expert_w *out) {
    if (layer < 0 || layer >= s->p.n_layers || expert < 0 || expert >= s->p.n_experts)
        return df_err(DF_ERR_INVALID, "expert store: layer %d expert %d out of range (%d layers, %d experts)", layer,
                      expert, s->p.n_layers, s->p.n_experts);
    int key = layer * s->p.n_experts + expert;
    pthread_mutex_lock(&s->mu);
    s->pop[key] = pop_now(s, key) + 1.0f;
    s->pop_at[key] = s->epoch;
    bool counted = false;
    uint64_t t_wait = 0;
    for (;;) {
        int idx = s->map[key];
        if (idx >= 0) {
            slot *sl = &s->slots[idx];
            if (sl->state == S_LOADING) {
                sl->pins++; /* keep it ours while waiting */
                uint64_t t0 = df_time_ns();
                while (sl->state == S_LOADING) pthread_cond_wait(&s->cv, &s->mu);
                t_wait += df_time_ns() - t0;
                sl->pins--;
            }
            if (sl->state == S_ERROR) {
                int st = sl->status;
                char msg[sizeof sl->err];
                memcpy(msg, sl->err, sizeof msg);
                if (!sl->pins) evict(s, idx);
                s->st.wait_ns += t_wait;
                s->lyr[3 * layer + 2] += t_wait;
                pthread_mutex_unlock(&s->mu);
                return df_err(st, "%s", msg);
            }
            DF_ASSERT(sl->state == S_READY && sl->key == key);
            sl->pins++;
            /* a hit is a cache reuse; the first use of a prefetched expert still cost a read */
            if (!counted) {
                if (sl->prefetched && !sl->used) { s->st.misses++; s->lyr[3 * layer + 1]++; }
                else { s->st.hits++; s->lyr[3 * layer]++; }
                counted = true;
            }
            if (sl->prefetched && !sl->used) {
                if (sl->la) s->st.lookahead_used++;
                else s->st.prefetch_used++;
            }
            sl->used = true;
            sl->need = 0;
            if (sl->ref < 3) sl->ref++;
            fill_out(s, sl, out);
            s->st.wait_ns += t_wait;
            s->lyr[3 * layer + 2] += t_wait;
            s->t_last_acq = df_time_ns();
            pthread_mutex_unlock(&s->mu);
            return DF_OK;
        }
        int v = find_victim(s, false);
        if (v < 0) {
            bool loading = false;
            for (int i = 0; i < s->n_slots && !loading; i++) loading = s->slots[i].state == S_LOADING;
            if (!loading) {
                int np = 0;
                for (int i = 0; i < s->n_slots; i++) np += s->slots[i].pins > 0 || s->slots[i].hot;
                pthread_mutex_unlock(&s->mu);
                return df_err(DF_ERR_RANGE, "layer %d expert %d: expert cache full: all %d slots are pinned (%d in use "
                              "or hot); raise --mem-limit or pin fewer experts", layer, expert, s->n_slots, np);
            }
            uint64_t t0 = df_time_ns();
            pthread_cond_wait(&s->cv, &s->mu); /* a load lands or a slot is released */
            t_wait += df_time_ns() - t0;
            continue;
        }
        if (!counted) { s->st.misses++; s->lyr[3 * layer + 1]++; counted = true; }
        evict(s, v);
        int rc = start_load(s, &s->slots[v], key, 0);
        if (rc) { pthread_mutex_unlock(&s->mu); return rc; }
        s->slots[v].ref = 1;
        /* loop: the slot is LOADING now; the branch above waits for it (counted as this miss) */
    }
}

void df_store_release(df_store *s, int layer, int expert) {
    if (layer < 0 || layer >= s->p.n_layers || expert < 0 || expert >= s->p.n_experts) return;
    int key = layer * s->p.n_experts + expert;
    pthread_mutex_lock(&s->mu);
    int idx = s->map[key];
    DF_ASSERT(idx >= 0 && s->slots[idx].pins > 0); /* release without acquire */
    if (--s->slots[idx].pins == 0) pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* mu held. Slots a hint may still take: unpinned, not hot, not loading, not routed for the
 * layer being computed, not an unused prediction. */
static int spare_slots(df_store *s) {
    int n = 0;
    for (int j = 0; j < s->n_slots; j++) {
        const slot *sl = &s->slots[j];
        n += !sl->pins && !sl->hot && sl->state != S_LOADING && sl->need != s->epoch &&
             !(sl->prefetched && !sl->used && sl->state == S_READY);
    }
    return n;
}

/* mu held. Start reading `key` as a hint (prefetch or look-ahead); false when there is no room. */
static bool hint_load(df_store *s, int key, bool la) {
    /* keep min_slots slots for the blocking path and for this layer's own misses */
    if (spare_slots(s) <= s->p.min_slots) return false;
    int v = find_victim(s, true);
    if (v < 0) return false;
    evict(s, v);
    if (start_load(s, &s->slots[v], key, la ? DF_IO_PRIO_LOW : 0) != DF_OK) { df_err_clear(); return false; }
    slot *sl = &s->slots[v];
    sl->ref = 2;
    sl->prefetched = true;
    sl->la = la;
    if (la) s->st.lookahead_issued++;
    else s->st.prefetch_issued++;
    return true;
}

/* mu held. Score the look-ahead prediction for `layer` against its real routing (the union)
 * and release the mispredicted slots to ordinary eviction. */
static void lookahead_score(df_store *s, int layer, const int *experts, int n) {
    const int E = s->p.n_experts;
    if (!s->la_npred[layer]) return;
    uint8_t *mark = s->la_mark + (size_t)layer * E;
    uint64_t correct = 0;
    for (int i = 0; i < n; i++)
        if (experts[i] >= 0 && experts[i] < E && mark[experts[i]] == 1) { mark[experts[i]] = 2; correct++; }
    s->st.lookahead_predicted += (uint64_t)s->la_npred[layer];
    s->st.lookahead_correct += correct;
    for (int e = 0; e < E; e++) {
        int idx = mark[e] ? s->map[layer * E + e] : -1;
        slot *sl = idx >= 0 ? &s->slots[idx] : NULL;
        if (sl && sl->la && sl->prefetched && !sl->used) {
            df_io_req *rq[DF_EXPERT_NPARTS];
            for (int i = 0; i < sl->nreq; i++) rq[i] = &sl->rq[i].req;
            if (mark[e] == 2) {
                /* predicted and routed: its queued reads are demand reads now */
                if (sl->state == S_LOADING) df_io_promote(s->io, rq, sl->nreq);
            } else if (sl->state == S_LOADING && !sl->pins && sl->pending == sl->nreq &&
                       df_io_cancel(s->io, rq, sl->nreq) == sl->nreq) {
                /* predicted, not routed, none of its reads started: withdraw them */
                s->st.lookahead_cancelled++;
                s->map[sl->key] = -1;
                sl->key = -1;
                sl->state = S_FREE;
                sl->pending = 0;
                sl->ref = 0;
                sl->need = 0;
                sl->prefetched = sl->used = sl->la = false;
                s->n_free++;
            } else {
                /* predicted, not routed: read (or reading) for nothing */
                s->st.lookahead_wasted++;
                sl->prefetched = sl->la = false;
                sl->ref = 0;
            }
        }
        mark[e] = 0;
    }
    s->la_npred[layer] = 0;
}

void df_store_prefetch(df_store *s, int layer, const int *experts, int n) {
    if (layer < 0 || layer >= s->p.n_layers) return;
    pthread_mutex_lock(&s->mu);
    s->epoch++;
    if (s->epoch == 0) s->epoch = 1;
    /* layer-boundary gap: compute between the last expert landing in the previous layer and
     * this layer's routing, during which the disk idles unless look-ahead gave it work */
    uint64_t now = df_time_ns();
    if (layer > s->last_layer && s->last_layer >= 0 && s->t_last_acq) {
        s->gap_sum_ns += now - s->t_last_acq;
        s->gap_n++;
    }
    s->last_layer = layer;
    lookahead_score(s, layer, experts, n);
    auto_prefetch_check(s);
    if (s->prefetch == DF_PREFETCH_OFF) { pthread_mutex_unlock(&s->mu); return; }
    /* the layer's routed experts that are cached or loading: protect them until acquired */
    for (int i = 0; i < n; i++) {
        if (experts[i] < 0 || experts[i] >= s->p.n_experts) continue;
        int idx = s->map[layer * s->p.n_experts + experts[i]];
        if (idx < 0) continue;
        slot *sl = &s->slots[idx];
        sl->need = s->epoch;
        if (sl->ref < 2) sl->ref = 2;
    }
    for (int i = 0; i < n; i++) {
        if (experts[i] < 0 || experts[i] >= s->p.n_experts) continue;
        int key = layer * s->p.n_experts + experts[i];
        if (s->map[key] >= 0) continue;
        if (!hint_load(s, key, false)) break;
        s->slots[s->map[key]].need = s->epoch;
    }
    pthread_mutex_unlock(&s->mu);
}

/* mu held. Whether look-ahead reads are issued now, and how many per layer. */
static int lookahead_depth(df_store *s, int n) {
    if (s->prefetch == DF_PREFETCH_OFF || s->la_mode == DF_PREFETCH_OFF) return 0;
    if (s->la_mode == DF_PREFETCH_ON) return n;
    /* auto: only with a measured gain. Needs LA_MIN_SCORED scored predictions; the accuracy a
     * must beat LA_MIN_ACC and h/(1+h) (h = hit rate: a wrong prediction can evict a cached
     * expert that would have hit); depth = reads that fit the measured layer-boundary gap
     * (gap / time of one expert read at the measured read bandwidth), at least 1. */
    const df_store_stats *st = &s->st;
    if (st->lookahead_predicted < LA_MIN_SCORED) return 0;
    double a = (double)st->lookahead_correct / (double)st->lookahead_predicted;
    uint64_t acc = st->hits + st->misses;
    double h = acc ? (double)st->hits / (double)acc : 0;
    if (a < LA_MIN_ACC || a <= h / (1 + h)) return 0;
    df_io_stats ios;
    df_io_get_stats(s->io, &ios);
    if (!s->gap_n || !ios.bytes || !ios.busy_ns) return 1;
    double t_read = (double)s->slot_bytes * (double)ios.busy_ns / (double)ios.bytes; /* ns per expert */
    double gap = (double)s->gap_sum_ns / (double)s->gap_n;
    int d = (int)(gap / t_read) + 1;
    return d < 1 ? 1 : d > n ? n : d;
}

void df_store_lookahead(df_store *s, int layer, const int *experts, int n) {
    if (layer < 0 || layer >= s->p.n_layers) return;
    const int E = s->p.n_experts;
    pthread_mutex_lock(&s->mu);
    if (s->prefetch == DF_PREFETCH_OFF || s->la_mode == DF_PREFETCH_OFF) { pthread_mutex_unlock(&s->mu); return; }
    /* a prediction for this layer not scored yet (a batch that never reached it) is dropped */
    uint8_t *mark = s->la_mark + (size_t)layer * E;
    if (s->la_npred[layer]) { memset(mark, 0, (size_t)E); s->la_npred[layer] = 0; }
    int depth = lookahead_depth(s, n);
    s->st.lookahead_depth = depth;
    s->st.lookahead_active = depth > 0;
    int started = 0;
    for (int i = 0; i < n; i++) {
        int e = experts[i];
        if (e < 0 || e >= E || mark[e]) continue;
        mark[e] = 1;
        s->la_npred[layer]++;
        if (started >= depth) continue;
        int key = layer * E + e;
        int idx = s->map[key];
        if (idx >= 0) { /* cached or loading: protect it */
            if (s->slots[idx].ref < 2) s->slots[idx].ref = 2;
            continue;
        }
        if (hint_load(s, key, true)) started++;
        else depth = started; /* no room: stop reading, keep scoring */
    }
    pthread_mutex_unlock(&s->mu);
}

bool df_store_is_cached(df_store *s, int layer, int expert) {
    if (layer < 0 || layer >= s->p.n_layers || expert < 0 || expert >= s->p.n_experts) return false;
    pthread_mutex_lock(&s->mu);
    int idx = s->map[layer * s->p.n_experts + expert];
    bool c = idx >= 0 && (s->slots[idx].state == S_READY || s->slots[idx].state == S_LOADING);
    pthread_mutex_unlock(&s->mu);
    return c;
}

bool df_store_lookahead_wanted(df_store *s) {
    pthread_mutex_lock(&s->mu);
    bool w = s->prefetch != DF_PREFETCH_OFF && s->la_mode != DF_PREFETCH_OFF;
    pthread_mutex_unlock(&s->mu);
    return w;
}

void df_store_set_prefetch(df_store *s, int mode) {
    pthread_mutex_lock(&s->mu);
    s->p.prefetch = mode;
    s->prefetch = mode;
    s->la_mode = mode;
    if (mode == DF_PREFETCH_AUTO && s->n_slots < 4 * s->p.min_slots) s->prefetch = DF_PREFETCH_OFF;
    pthread_mutex_unlock(&s->mu);
}

int df_store_pin_hot(df_store *s, const int *layers, const int *experts, int n) {
    int pinned = 0;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&s->mu);
        bool room = s->n_slots - s->n_hot - 1 >= 2 * s->p.min_slots;
        pthread_mutex_unlock(&s->mu);
        if (!room) break;
        df_expert_w w;
        int rc = df_store_acquire(s, layers[i], experts[i], &w);
        if (rc) return df_err_prefix(rc, "hot set");
        pthread_mutex_lock(&s->mu);
        slot *sl = &s->slots[s->map[layers[i] * s->p.n_experts + experts[i]]];
        if (!sl->hot) { sl->hot = true; s->n_hot++; pinned++; }
        pthread_mutex_unlock(&s->mu);
        df_store_release(s, layers[i], experts[i]);
    }
    return pinned;
}

void df_store_get_stats(df_store *s, df_store_stats *st) {
    df_io_stats ios;
    df_io_get_stats(s->io, &ios);
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    st->n_hot = s->n_hot;
    uint64_t gap_sum = s->gap_sum_ns, gap_n = s->gap_n;
    int la_mode = s->la_mode;
    st->prefetch = s->prefetch;
    pthread_mutex_unlock(&s->mu);
    st->bytes_read = ios.bytes;
    st->io_busy_ns = ios.busy_ns;
    uint64_t acc = st->hits + st->misses;
    st->hit_rate = acc ? (double)st->hits / acc : 0;
    st->read_gbps = ios.busy_ns ? (double)ios.bytes / ios.busy_ns : 0;
    uint64_t pd = st->prefetch_used + st->prefetch_wasted;
    st->prefetch_accuracy = pd ? (double)st->prefetch_used / pd : 0;
    st->lookahead_accuracy = st->lookahead_predicted ? (double)st->lookahead_correct / st->lookahead_predicted : 0;
    st->lookahead_mode = la_mode;
    st->boundary_gap_ns = gap_n ? gap_sum / gap_n : 0;
}

const char *df_store_stats_str(const df_store_stats *st, char *buf, size_t cap) {
    char b1[32], b2[32];
    static const char *pf[] = {"off", "on", "auto"};
    int n = snprintf(buf, cap,
             "experts: %d slots x %s (%d hot), io %s, prefetch %s | hit %.1f%% (%llu/%llu) | read %s at %.2f GB/s | "
             "wait %.3f s | prefetch %llu issued, %.0f%% used | %llu evictions",
             st->n_slots, df_fmt_bytes(st->slot_bytes, b1, sizeof b1), st->n_hot, df_io_engine_name(st->engine),
             pf[st->prefetch >= 0 && st->prefetch <= 2 ? st->prefetch : 0], 100.0 * st->hit_rate,
             (unsigned long long)st->hits, (unsigned long long)(st->hits + st->misses),
             df_fmt_bytes(st->bytes_read, b2, sizeof b2), st->read_gbps, st->wait_ns / 1e9,
             (unsigned long long)st->prefetch_issued, 100.0 * st->prefetch_accuracy,
             (unsigned long long)st->evictions);
    if (n > 0 && (size_t)n < cap && st->lookahead_predicted)
        snprintf(buf + n, cap - (size_t)n,
                 " | look-ahead %s: accuracy %.1f%% (%llu/%llu), %llu reads, %llu used, %llu wasted, %llu cancelled, depth %d, gap %.1f ms",
                 pf[st->lookahead_mode >= 0 && st->lookahead_mode <= 2 ? st->lookahead_mode : 0],
                 100.0 * st->lookahead_accuracy, (unsigned long long)st->lookahead_correct,
                 (unsigned long long)st->lookahead_predicted, (unsigned long long)st->lookahead_issued,
                 (unsigned long long)st->lookahead_used, (unsigned long long)st->lookahead_wasted,
                 (unsigned long long)st->lookahead_cancelled, st->lookahead_depth, st->boundary_gap_ns / 1e6);
    return buf;
}

void df_store_stats_json(const df_store_stats *st, struct cJSON *o) {
    static const char *pf[] = {"off", "on", "auto"};
    cJSON_AddStringToObject(o, "io", df_io_engine_name(st->engine));
    cJSON_AddNumberToObject(o, "slots", st->n_slots);
    cJSON_AddNumberToObject(o, "slot_bytes", (double)st->slot_bytes);
    cJSON_AddNumberToObject(o, "cache_bytes", (double)st->cache_bytes);
    cJSON_AddNumberToObject(o, "hot", st->n_hot);
    cJSON_AddNumberToObject(o, "hits", (double)st->hits);
    cJSON_AddNumberToObject(o, "misses", (double)st->misses);
    cJSON_AddNumberToObject(o, "hit_rate", st->hit_rate);
    cJSON_AddNumberToObject(o, "bytes_read", (double)st->bytes_read);
    cJSON_AddNumberToObject(o, "read_gbps", st->read_gbps);
    cJSON_AddNumberToObject(o, "io_busy_s", st->io_busy_ns / 1e9);
    cJSON_AddNumberToObject(o, "wait_s", st->wait_ns / 1e9);
    cJSON_AddNumberToObject(o, "evictions", (double)st->evictions);
    cJSON_AddStringToObject(o, "prefetch", pf[st->prefetch >= 0 && st->prefetch <= 2 ? st->prefetch : 0]);
    cJSON_AddNumberToObject(o, "prefetch_issued", (double)st->prefetch_issued);
    cJSON_AddNumberToObject(o, "prefetch_used_frac", st->prefetch_accuracy);
    cJSON *la = cJSON_AddObjectToObject(o, "lookahead");
    if (!la) return;
    cJSON_AddStringToObject(la, "mode", pf[st->lookahead_mode >= 0 && st->lookahead_mode <= 2 ? st->lookahead_mode : 0]);
    cJSON_AddBoolToObject(la, "active", st->lookahead_active);
    cJSON_AddNumberToObject(la, "depth", st->lookahead_depth);
    cJSON_AddNumberToObject(la, "predicted", (double)st->lookahead_predicted);
    cJSON_AddNumberToObject(la, "correct", (double)st->lookahead_correct);
    cJSON_AddNumberToObject(la, "accuracy", st->lookahead_accuracy);
    cJSON_AddNumberToObject(la, "reads", (double)st->lookahead_issued);
    cJSON_AddNumberToObject(la, "used", (double)st->lookahead_used);
    cJSON_AddNumberToObject(la, "wasted", (double)st->lookahead_wasted);
    cJSON_AddNumberToObject(la, "cancelled", (double)st->lookahead_cancelled);
    cJSON_AddNumberToObject(la, "boundary_gap_s", st->boundary_gap_ns / 1e9);
}

/* ---- hot set sources ---------------------------------------------------------------- */

typedef struct { int l, e; double c; } hot_ent;
static int cmp_hot(const void *a, const void *b) {
    const hot_ent *x = a, *y = b;
    if (x->c != y->c) return x->c < y->c ? 1 : -1;
    if (x->l != y->l) return x->l - y->l;
    return x->e - y->e;
}

static int hot_out(hot_ent *v, int n, int **layers, int **experts, int *nout) {
    *layers = df_malloc(sizeof(int) * (size_t)(n ? n : 1));
    *experts = df_malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!*layers || !*experts) { free(*layers); free(*experts); free(v); return DF_ERR_NOMEM; }
    for (int i = 0; i < n; i++) { (*layers)[i] = v[i].l; (*experts)[i] = v[i].e; }
    *nout = n;
    free(v);
    return DF_OK;
}

/* The "layer expert count" lines of path (what --hot and a balanced placement read). */
static int read_route_file(const char *path, const char *what, int n_layers, int n_experts, hot_ent **out, int *n) {
    char *data;
    size_t len;
    int rc = df_read_file(path, &data, &len);
    if (rc) return df_err_prefix(rc, "%s", what);
    int cap = 64, cnt = 0, lineno = 0;
    hot_ent *v = df_malloc(sizeof *v * (size_t)cap);
    if (!v) { free(data); return DF_ERR_NOMEM; }
    for (char *line = data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        for (char *c = line; *c; c++) if (*c == ',' || *c == '\t' || *c == '\r') *c = ' ';
        char *h = strchr(line, '#');
        if (h) *h = 0;
        int l, e;
        double c = 1;
        char extra;
        int k = sscanf(line, "%d %d %lf %c", &l, &e, &c, &extra);
        if (k == 2 || k == 3) {
            if (l < 0 || l >= n_layers || e < 0 || e >= n_experts) {
                free(v); free(data);
                return df_err(DF_ERR_FORMAT, "%s:%d: layer %d expert %d out of range (%d layers, %d experts)", path,
                              lineno, l, e, n_layers, n_experts);
            }
            if (cnt == cap) {
                hot_ent *nv = df_realloc(v, sizeof *v * (size_t)(cap *= 2));
                if (!nv) { free(v); free(data); return DF_ERR_NOMEM; }
                v = nv;
            }
            v[cnt++] = (hot_ent){l, e, c};
        } else {
            const char *t = line;
            while (*t == ' ') t++;
            if (*t && !(lineno == 1 && (*t < '0' || *t > '9'))) { /* allow one header line */
                free(v); free(data);
                return df_err(DF_ERR_FORMAT, "%s:%d: expected \"layer expert count\"", path, lineno);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    *out = v;
    *n = cnt;
    return DF_OK;
}

int df_store_read_hot_file(const char *path, int n_layers, int n_experts, int **layers, int **experts, int *n) {
    hot_ent *v = NULL;
    int cnt = 0;
    int rc = read_route_file(path, "--hot", n_layers, n_experts, &v, &cnt);
    if (rc) return rc;
    qsort(v, (size_t)cnt, sizeof *v, cmp_hot);
    return hot_out(v, cnt, layers, experts, n);
}

int df_store_read_route_counts(const char *path, const char *what, int n_layers, int n_experts, double *counts) {
    hot_ent *v = NULL;
    int cnt = 0;
    int rc = read_route_file(path, what, n_layers, n_experts, &v, &cnt);
    if (rc) return rc;
    memset(counts, 0, sizeof(double) * (size_t)n_layers * (size_t)n_experts);
    for (int i = 0; i < cnt; i++) counts[(int64_t)v[i].l * n_experts + v[i].e] += v[i].c;
    free(v);
    return DF_OK;
}

int df_store_parse_preload(const char *list, int n_layers, int n_experts, int **layers, int **experts, int *n) {
    int cap = 1;
    for (const char *c = list; *c; c++) cap += *c == ',';
    hot_ent *v = df_malloc(sizeof *v * (size_t)cap);
    if (!v) return DF_ERR_NOMEM;
    int cnt = 0;
    const char *p = list;
    while (*p) {
        char *end;
        long l = strtol(p, &end, 10);
        if (end == p || *end != ':') { free(v); return df_err(DF_ERR_INVALID, "--preload: expected L:E[,L:E...] at '%s'", p); }
        p = end + 1;
        long e = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',')) { free(v); return df_err(DF_ERR_INVALID, "--preload: expected L:E[,L:E...] at '%s'", p); }
        if (l < 0 || l >= n_layers || e < 0 || e >= n_experts) {
            free(v);
            return df_err(DF_ERR_INVALID, "--preload: layer %ld expert %ld out of range (%d layers, %d experts)", l, e,
                          n_layers, n_experts);
        }
        v[cnt++] = (hot_ent){(int)l, (int)e, 0};
        p = *end ? end + 1 : end;
    }
    return hot_out(v, cnt, layers, experts, n);
}

int df_store_layer_stats(df_store *s, int layer, uint64_t *hits, uint64_t *misses, uint64_t *wait_ns) {
    if (!s || layer < 0 || layer >= s->p.n_layers) return DF_ERR_INVALID;
    pthread_mutex_lock(&s->mu);
    *hits = s->lyr[3 * layer];
    *misses = s->lyr[3 * layer + 1];
    *wait_ns = s->lyr[3 * layer + 2];
    pthread_mutex_unlock(&s->mu);
    return DF_OK;
}
