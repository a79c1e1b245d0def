/* loader.c — deltafin_model_load: the one place that wires the modules together.
 *   1. format/ + model/: open the GGUF (and its pack), describe the model (architecture,
 *      hyperparameters, every tensor bound and shape-checked).
 *   2. the footprint (model/ dense and expert bytes, KV; weights/ layer buffers and cache
 *      slots; forward/ scratch) and the user's limits go to the memory plan (runtime/plan.c,
 *      a pure function);
 *   3. weights/: the dense stream the plan asks for, the resident tensors (read and repacked),
 *      and the routed experts — resident, or the expert store with the plan's cache budget;
 *   4. text/: the tokenizer.
 * Threading: load/free on one thread; the loaded model is read-only. */
#include "model/model.h"
#include "runtime/plan.h"
#include "runtime/loader.h"
#include "weights/weights.h"
#include "weights/dense_stream.h"
#include "weights/expert_store.h"
#include "forward/session.h"
#include "forward/ops.h"
#include "dist/dist.h"
#include "kernels/kernels.h"
#include "base/env.h"
#include "base/sysmem.h"
#include "text/tokenizer.h"

#include <unistd.h>

/* ---- what the plan reserves for ------------------------------------------------------------- */
/* the context: the caller's n_ctx, else the ctx default min(training context, 4096) */
static int plan_ctx(const df_model *m) {
    int n = m->hp.n_ctx_train > 0 && m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (m->params.n_ctx > 0) n = m->params.n_ctx;
    if (df_env()->plan_ctx > 0) n = df_env()->plan_ctx;
    return n;
}

/* the prompt chunk asked for (the ctx default 512), never more than the planned context */
static int plan_batch(const df_model *m) {
    int c = plan_ctx(m), b = m->params.n_batch > 0 ? m->params.n_batch : 512;
    return c < b ? c : b;
}

static int plan_seq(const df_model *m) { return m->params.n_seq > 0 ? m->params.n_seq : 1; }

static int plan_threads(const df_model *m) {
    if (m->params.n_threads > 0) return m->params.n_threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- routed experts: where they are in the files -------------------------------------------- */
typedef struct {
    df_expert_loc *locs;         /* [L][E][parts] */
    df_expert_record *recs;      /* [L][E] of a packed file, else NULL */
    int64_t *n_in;               /* [L][parts] */
    uint64_t total;              /* bytes of all experts */
    uint64_t slot_bytes;
    uint64_t max_read;           /* the store's largest single read (df_store_max_read) */
    int n_pairs;
} expert_layout;

static void expert_layout_free(expert_layout *x) {
    free(x->locs);
    free(x->recs);
    free(x->n_in);
    memset(x, 0, sizeof *x);
}

static void store_params_of(const df_model *m, const expert_layout *x, df_store_params *sp) {
    *sp = df_store_default_params();
    sp->n_layers = m->hp.n_layer;
    sp->n_experts = m->hp.n_expert;
    sp->locs = x->locs;
    sp->records = x->recs;
    sp->n_in = x->n_in;
}

/* Experts this process computes: all of them, or its share of a distributed placement. */
typedef struct {
    const df_dist_placement *pl; /* NULL: one process */
    int rank;
    int mode;                    /* DIST_NONE, DIST_COORD (rank 0 of a job), DIST_WORKER */
} dist_role;
enum { DIST_NONE = 0, DIST_COORD = 1, DIST_WORKER = 2 };

static bool owns(const dist_role *d, int l, int e) { return !d->pl || df_dist_owner(d->pl, l, e) == d->rank; }

static int expert_layout_make(df_model *m, const dist_role *dr, expert_layout *x) {
    memset(x, 0, sizeof *x);
    const int L = m->hp.n_layer, E = m->hp.n_expert;
    const size_t n = (size_t)L * E * DF_EXPERT_NPARTS;
    x->locs = df_calloc(n ? n : 1, sizeof *x->locs);
    x->n_in = df_calloc((size_t)L * DF_EXPERT_NPARTS, sizeof *x->n_in);
    if (!x->locs || !x->n_in) { expert_layout_free(x); return DF_ERR_NOMEM; }
    for (int l = 0; l < L; l++) {
        if (!m->layers[l].is_moe) continue;
        for (int p = 0; p < DF_EXPERT_NPARTS; p++)
            df_model_expert_shape(m, l, p, &x->n_in[l * DF_EXPERT_NPARTS + p], NULL, NULL);
        for (int e = 0; e < E; e++)
            for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
                df_expert_loc *lc = &x->locs[((size_t)l * E + e) * DF_EXPERT_NPARTS + p];
                int rc = df_model_expert_loc(m, l, e, p, lc);
                if (rc) { expert_layout_free(x); return rc; }
            }
    }
    if (m->pack) { /* one checksummed read per expert */
        x->recs = df_calloc((size_t)L * E + 1, sizeof *x->recs);
        if (!x->recs) { expert_layout_free(x); return DF_ERR_NOMEM; }
        int pl = df_pack_n_layers(m->pack), pe = df_pack_n_experts(m->pack);
        if (pe != E || pl > L) {
            expert_layout_free(x);
            return df_err(DF_ERR_FORMAT, "%s: pack has %d layers x %d experts, model %d x %d", m->path, pl, pe, L, E);
        }
        df_pack_locs(m->pack, x->locs, x->recs); /* layers >= pl keep zero entries (no experts) */
    }
    /* the plan counts this rank's share; the store may still read any expert (a distributed
     * run balances a layer's reads over the ranks, dist/remote.c) */
    for (int l = 0; l < L; l++) {
        if (!m->layers[l].is_moe) continue;
        for (int e = 0; e < E; e++) {
            const df_expert_loc *lc = &x->locs[((size_t)l * E + e) * DF_EXPERT_NPARTS];
            if (!owns(dr, l, e)) continue;
            x->n_pairs++;
            for (int p = 0; p < DF_EXPERT_NPARTS; p++) x->total += lc[p].nbytes;
        }
    }
    df_store_params sp;
    store_params_of(m, x, &sp);
    x->slot_bytes = x->total ? df_store_slot_bytes(&sp) : 0;
    x->max_read = x->total ? df_store_max_read(&sp) : 0;
    return DF_OK;
}

/* Pin the --preload list, then the --hot file's most used experts. */
static int pin_hot_set(df_model *m, df_store *s, const dist_role *dr) {
    const int L = m->hp.n_layer, E = m->hp.n_expert;
    for (int k = 0; k < 2; k++) {
        const char *src = k == 0 ? m->params.preload : m->params.hot_file;
        if (!src) continue;
        int *ls = NULL, *es = NULL, n = 0;
        int rc = k == 0 ? df_store_parse_preload(src, L, E, &ls, &es, &n)
                        : df_store_read_hot_file(src, L, E, &ls, &es, &n);
        if (rc) return rc;
        int j = 0; /* skip entries of layers without routed experts */
        for (int i = 0; i < n; i++)
            if (m->layers[ls[i]].is_moe && owns(dr, ls[i], es[i])) { ls[j] = ls[i]; es[j] = es[i]; j++; }
        int pinned = df_store_pin_hot(s, ls, es, j);
        free(ls);
        free(es);
        if (pinned < 0) return pinned;
        df_log(DF_LOG_INFO, "%s: pinned %d of %d experts in the hot set", k == 0 ? "--preload" : "--hot", pinned, j);
    }
    return DF_OK;
}

/* The expert store over the model's files with the plan's budget, as the weights' source. */
static int attach_store(df_model *m, df_weights *w, const expert_layout *x, const df_plan *plan, int engine,
                        const dist_role *dr) {
    const char **paths = df_calloc((size_t)m->gguf->n_shards, sizeof *paths);
    if (!paths) return DF_ERR_NOMEM;
    for (int i = 0; i < m->gguf->n_shards; i++) paths[i] = m->gguf->shards[i].path;
    df_store_params sp;
    store_params_of(m, x, &sp); /* n_in: the store repacks experts to the kernels' layout */
    sp.paths = paths;
    sp.n_files = m->gguf->n_shards;
    sp.min_slots = 2;
    sp.io.engine = engine;
    sp.budget_bytes = plan->cache_bytes;
    sp.prefetch = m->params.prefetch;
    sp.mlock = m->params.mlock;
    df_store *s = NULL;
    int rc = df_store_create(&sp, &s);
    free(paths);
    if (rc) return df_err_prefix(rc, "%s", m->path);
    df_weights_use_store(w, s);
    rc = pin_hot_set(m, s, dr);
    return rc;
}

/* ---- the plan ------------------------------------------------------------------------------ */
/* What the process needs besides the plan's parts. A function of the model and the parameters,
 * not of the moment it is computed, so `info` and `run` plan the same: the process base (code,
 * libraries, the f16 table: 9-10 MiB peak RSS for `deltafin --version` and for runs of the
 * demo model, docs/experiments.tsv; 12 MiB counted), the tokenizer (64 B per token and 48 B per
 * merge, its tables and strings), the expert store's tables, the thread stacks of the I/O engines
 * and of the contexts' pools, and 4 MiB of slack for the allocator and the kernel's page
 * tables. `run -v` prints what "other" really took ("budget use"). */
static uint64_t plan_overhead(const df_model *m, int n_pool_threads) {
    const uint64_t base = 12ull << 20, per_thread = 256u << 10; /* touched stack, TLS, arena headers */
    const uint64_t io_threads = 2ull * (uint64_t)df_io_default_params().n_threads; /* store + dense stream */
    const uint64_t pairs = (uint64_t)m->hp.n_layer * (uint64_t)(m->hp.n_expert > 0 ? m->hp.n_expert : 0);
    const uint64_t store_tables = pairs * (DF_EXPERT_NPARTS * sizeof(df_expert_loc) + sizeof(df_expert_record) + 32);
    uint64_t tok = 0;
    const df_gguf_kv *kv = df_gguf_find(m->gguf, "tokenizer.ggml.tokens");
    if (kv && kv->type == DF_GGUF_ARRAY) tok += kv->arr_n * 64;
    kv = df_gguf_find(m->gguf, "tokenizer.ggml.merges");
    if (kv && kv->type == DF_GGUF_ARRAY) tok += kv->arr_n * 48;
    return base + tok + store_tables + (io_threads + (uint64_t)n_pool_threads) * per_thread + (4ull << 20);
}

/* The page cache a buffered read engine (pread, mmap) holds while its reads are in flight:
 * one expert read (a part, or a packed record) per I/O thread. The memory cgroup of the limit
 * charges it, and the pages are dropped only after each read: without this room the cgroup
 * reclaims on every page (K2 geometry at 1 GiB, --io pread: 0.19 tok/s and 6.3 M failures to
 * charge with the cache planned to the limit, 1.68-1.72 tok/s with 75-180 MiB left free;
 * docs/experiments.tsv). The engines that bypass the page cache (direct, uring) need none. */
static uint64_t page_cache_headroom(const df_model *m, int engine, const expert_layout *x) {
    df_io_params p = df_io_default_params();
    if (engine == DF_IO_AUTO && x->max_read && m->gguf->n_shards > 0) {
        /* what auto will take, where known without measuring (the store opens after the plan) */
        p.probe_bytes = df_pad(x->max_read, DF_IO_ALIGN);
        engine = df_io_auto_known(m->gguf->shards[0].path, &p);
    }
    if (engine != DF_IO_PREAD && engine != DF_IO_MMAP) return 0;
    return (uint64_t)p.n_threads * x->max_read;
}

/* The tensors computing a routed expert reads besides its matrices (df_moe_expert_rows): the
 * per-expert biases (gpt-oss). A worker holds these and no other dense tensor. */
static bool expert_aux(const df_model *m, const df_tensor *t) {
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < DF_EXPERT_NPARTS; p++)
            if (m->layers[l].exps_b[p] == t) return true;
    return false;
}

static uint64_t expert_aux_bytes(const df_model *m) {
    uint64_t n = 0;
    for (int i = 0; i < m->n_bound; i++)
        if (!(m->tensors[i].flags & DF_T_UNUSED) && expert_aux(m, &m->tensors[i])) n += df_pad(m->tensors[i].info->nbytes, 64);
    return n;
}

/* A worker holds no KV cache and of the dense weights only the experts' biases: its limit goes
 * to the expert cache of its share, less the buffers for computing and for messages at the
 * planned batch. */
static int make_worker_plan(df_model *m, int engine, const expert_layout *x, const df_footprint *fp, df_plan *plan) {
    df_plan_in in = {0};
    in.dense_total = in.dense_global = expert_aux_bytes(m);
    in.has_experts = fp->n_moe_layers > 0 && x->n_pairs > 0;
    in.experts_packed = m->pack != NULL;
    in.expert_bytes = x->total;
    in.slot_bytes = x->slot_bytes;
    in.n_expert_pairs = x->n_pairs;
    in.n_expert_used = m->hp.n_expert_used;
    in.scratch_bytes = df_moe_bufs_bytes(m, plan_batch(m), NULL) + df_dist_buffer_bytes(m, plan_batch(m), df_dist_size(), false);
    in.mem_limit = m->params.mem_limit;
    in.mem_reserve = m->params.mem_reserve;
    in.mem_available = m->params.mem_limit ? 0 : df_mem_available();
    in.cache_bytes = m->params.cache_bytes;
    if (!in.cache_bytes && df_env()->expert_cache) {
        int rc = df_parse_size(df_env()->expert_cache, &in.cache_bytes);
        if (rc) return df_err(DF_ERR_INVALID, "DELTAFIN_EXPERT_CACHE='%s': bad size", df_env()->expert_cache);
    }
    in.stream_experts = 1;
    in.force_resident = -1;
    in.page_cache_bytes = page_cache_headroom(m, engine, x);
    in.overhead_bytes = plan_overhead(m, plan_threads(m));
    int rc = df_plan_make(&in, plan);
    return rc ? df_err_prefix(rc, "%s", m->path) : DF_OK;
}

/* The plan at context ctx for n_seq sequences (make_plan: the run's own). */
static int plan_at(df_model *m, int flags, int engine, const expert_layout *x, const df_dense_footprint *dfp,
                   const dist_role *dr, int ctx, int n_seq_i, df_plan *plan) {
    const df_env_t *env = df_env();
    df_footprint fp;
    df_model_footprint(m, ctx, &fp);
    df_plan_in in = {0};
    in.has_experts = fp.n_moe_layers > 0 && !(flags & DF_LOAD_SKIP_EXPERTS);
    if (dr->mode == DIST_WORKER) return make_worker_plan(m, engine, x, &fp, plan);
    in.experts_packed = m->pack != NULL;
    in.dense_total = dfp->dense_total;
    in.dense_global = dfp->global_bytes;
    /* the token embeddings can be read by row unless the output head is the same matrix */
    in.embd_bytes = m->tok_embd && m->tok_embd != m->output ? m->tok_embd->info->nbytes : 0;
    in.embd_rows = env->embd_rows;
    in.n_layer = dfp->n_layer;
    in.layer_stream_bytes = dfp->stream_bytes;
    in.layer_buf_bytes = dfp->buf_bytes;
    in.layer_read_bytes = dfp->read_bytes;
    in.expert_bytes = dr->pl ? x->total : fp.expert_bytes; /* this rank's share */
    in.slot_bytes = x->slot_bytes;
    in.n_expert_pairs = x->n_pairs;
    in.n_expert_used = m->hp.n_expert_used;
    const uint64_t n_seq = (uint64_t)n_seq_i;
    in.kv_bytes = fp.kv_bytes * n_seq;
    /* prompt chunks the plan may choose: the one asked for, then halves down to 64 tokens
     * (batches of 64 and more take the same attention path: same tokens) */
    int batch[8];
    uint64_t scratch[8];
    int nb = 0;
    const int b0 = plan_batch(m) < ctx ? plan_batch(m) : ctx;
    for (int b = b0; nb < 8 && (nb == 0 || b >= 64); b /= 2) {
        batch[nb] = b;
        scratch[nb] = df_session_scratch_bytes(m, b, plan_threads(m)) * n_seq;
        nb++;
        if (b < 128) break;
    }
    in.n_batch_opts = nb;
    in.batch_fixed = m->params.n_batch > 0;
    in.batch = batch;
    in.batch_scratch = scratch;
    in.mem_limit = m->params.mem_limit;
    in.mem_reserve = m->params.mem_reserve;
    in.mem_available = m->params.mem_limit ? 0 : df_mem_available();
    in.cache_bytes = m->params.cache_bytes;
    if (!in.cache_bytes && env->expert_cache) {
        int rc = df_parse_size(env->expert_cache, &in.cache_bytes);
        if (rc) return df_err(DF_ERR_INVALID, "DELTAFIN_EXPERT_CACHE='%s': bad size", env->expert_cache);
    }
    in.stream_experts = env->stream == 0 ? 0 : (env->stream == 1 || engine != DF_IO_AUTO) ? 1 : -1;
    if (dr->mode == DIST_COORD) { /* its share goes through the store, which reads just those */
        in.has_experts = x->n_pairs > 0;
        in.stream_experts = 1;
        in.scratch_bytes += df_dist_buffer_bytes(m, b0, df_dist_size(), true);
    }
    in.dense_stream = !env->dense_stream_off;
    in.force_resident = env->dense_resident;
    in.page_cache_bytes = page_cache_headroom(m, engine, x);
    in.overhead_bytes = plan_overhead(m, plan_threads(m) * (int)n_seq);
    return df_plan_make(&in, plan);
}

/* The run's plan; a refusal also names what would fit at this limit: the largest context
 * (-c) for these sequences, and the most sequences (--parallel) at this context. */
static int make_plan(df_model *m, int flags, int engine, const expert_layout *x, const df_dense_footprint *dfp,
                     const dist_role *dr, df_plan *plan) {
    if (dr->mode == DIST_WORKER) return plan_at(m, flags, engine, x, dfp, dr, plan_ctx(m), 1, plan);
    const int ctx = plan_ctx(m), n_seq = plan_seq(m);
    int rc = plan_at(m, flags, engine, x, dfp, dr, ctx, n_seq, plan);
    if (rc != DF_ERR_RANGE) return rc ? df_err_prefix(rc, "%s", m->path) : DF_OK;
    char msg[1024], hint[160] = "";
    snprintf(msg, sizeof msg, "%s", df_errmsg());
    df_plan tmp;
    int lo = 0, hi = ctx - 1; /* the largest context that fits, by bisection (KV grows with it) */
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (plan_at(m, flags, engine, x, dfp, dr, mid, n_seq, &tmp) == DF_OK) lo = mid; else hi = mid - 1;
    }
    if (lo >= 64) { /* a smaller context than one prompt chunk helps nobody */
        const int c = lo >= 512 ? lo / 256 * 256 : lo;
        snprintf(hint, sizeof hint, "; it fits with -c %d%s", c, n_seq > 1 ? " at these slots" : "");
    }
    int ns = 0;
    for (int k = n_seq - 1; k >= 1 && !ns; k--)
        if (plan_at(m, flags, engine, x, dfp, dr, ctx, k, &tmp) == DF_OK) ns = k;
    if (ns) snprintf(hint + strlen(hint), sizeof hint - strlen(hint), "%s%d sequences (--parallel %d) at -c %d",
                     *hint ? ", or with " : "; it fits with ", ns, ns, ctx);
    return df_err(rc, "%s: %s%s", m->path, msg, hint);
}

/* The public copy of the plan. */
static void publish_plan(df_model *m, const df_plan *p) {
    m->plan = (deltafin_plan){
        .limit = p->limit, .limit_from_ram = p->limit_from_ram, .experts_stream = p->experts_stream,
        .dense_bytes = p->dense_bytes, .kv_bytes = p->kv_bytes, .scratch_bytes = p->scratch_bytes,
        .overhead_bytes = p->overhead_bytes, .cache_bytes = p->cache_bytes, .slot_bytes = p->slot_bytes,
        .n_slots = p->n_slots, .n_experts_total = p->n_experts_total, .expert_total_bytes = p->expert_total_bytes,
        .all_resident = p->all_resident, .n_layer = p->n_layer, .dense_layers_resident = p->n_resident,
        .dense_layers_streamed = p->n_streamed, .dense_buffers = p->n_buf, .dense_buffer_bytes = p->buf_bytes,
        .dense_total_bytes = p->dense_total, .dense_global_bytes = p->dense_global,
        .dense_layers_bytes = p->layers_bytes, .dense_read_per_token = p->read_per_pass,
        .n_ctx = plan_ctx(m), .n_batch = p->n_batch, .n_seq = plan_seq(m),
    };
}

/* The plan for m's current parameters (info / doctor at another limit): the footprint again
 * and df_plan_make; m is not changed. */
int df_loader_plan(df_model *m, df_plan *out) {
    expert_layout x = {0};
    df_dense_footprint dfp = {0};
    int engine = DF_IO_AUTO;
    const dist_role dr = {0}; /* one process: the whole model */
    int rc = m->params.io_engine ? df_io_engine_parse(m->params.io_engine, &engine) : DF_OK;
    if (rc == DF_OK) rc = expert_layout_make(m, &dr, &x);
    if (rc == DF_OK) rc = df_dense_footprint_compute(m, &dfp);
    if (rc == DF_OK) rc = make_plan(m, 0, engine, &x, &dfp, &dr, out);
    expert_layout_free(&x);
    df_dense_footprint_free(&dfp);
    return rc;
}

/* ---- loading ----------------------------------------------------------------------------- */
deltafin_model_params deltafin_model_default_params(void) {
    deltafin_model_params p;
    memset(&p, 0, sizeof p);
    p.n_threads = 0;
    p.io_engine = "auto";
    p.prefetch = DELTAFIN_PREFETCH_AUTO;
    return p;
}

/* Steps 3 and 4 for a model that computes (not DF_LOAD_META_ONLY). */
static int load_weights(df_model *m, int flags, int engine, const expert_layout *x, const df_plan *plan,
                        const dist_role *dr) {
    df_weights *w = NULL;
    int rc = df_weights_create(m, &w);
    if (rc) return rc;
    m->w = w;
    if (dr->mode == DIST_WORKER) { /* its share of the experts and their biases, no other tensor */
        if (!x->n_pairs) return DF_OK;
        df_resident_opts ro = {.skip_experts = true, .only = expert_aux, .mem_limit = m->params.mem_limit,
                               .mlock = m->params.mlock, .n_threads = m->params.n_threads};
        rc = df_weights_load_resident(w, &ro);
        if (rc) return rc;
        char buf[1024];
        df_log(DF_LOG_INFO, "%s", df_plan_str(plan, buf, sizeof buf));
        return attach_store(m, w, x, plan, engine, dr);
    }
    if (plan->n_streamed) {
        df_dense_stream *ds = NULL;
        rc = df_dense_stream_create(m, plan->n_resident, plan->n_buf, plan->buf_bytes, df_env()->dense_chunk, &ds);
        if (rc) return rc;
        df_weights_use_dense_stream(w, ds);
        char buf[512];
        df_log(DF_LOG_INFO, "%s", df_plan_dense_str(plan, buf, sizeof buf));
    }
    const bool skip = (flags & DF_LOAD_SKIP_EXPERTS) || plan->experts_stream || dr->mode == DIST_COORD;
    if (m->params.verify_on_load && m->pack && df_pack_version(m->pack) < 2)
        df_log(DF_LOG_WARN, "--verify-on-load: %s is a version 1 pack: its dense tensors carry no checksum (pack the "
               "source model again to protect them)", m->path);
    else if (m->params.verify_on_load && !m->pack)
        df_log(DF_LOG_WARN, "--verify-on-load: %s is not a packed model and carries no checksums; check the whole "
               "file with `deltafin verify --sha256 HEX` (or its .sha256 manifest)", m->path);
    df_resident_opts ro = {
        .skip_experts = skip, .ds = w->ds, .skip_embd = plan->embd_rows, .mem_limit = m->params.mem_limit,
        .mlock = m->params.mlock,
        .verify = m->params.verify_on_load,
        .progress = m->params.progress_cb, .progress_ud = m->params.progress_ud,
        .progress_log = m->params.progress, .n_threads = m->params.n_threads,
    };
    rc = df_weights_load_resident(w, &ro);
    if (rc) return rc;
    if (plan->embd_rows) {
        const df_tensor *te = m->tok_embd;
        char b[32];
        df_log(DF_LOG_INFO, "token embeddings (%s) stay on disk: each token's row is read from %s",
               df_fmt_bytes(te->info->nbytes, b, sizeof b), m->path);
    }
    if (m->rope_freqs) m->rope.freq_factors = m->rope_freqs->data;
    bool any_moe = false;
    for (int l = 0; l < m->hp.n_layer; l++) any_moe |= m->layers[l].is_moe;
    if (dr->mode == DIST_COORD && !x->n_pairs) {
        /* rank 0 owns none of the experts: every one is remote (dist/remote.c) */
    } else if (any_moe && !skip) {
        df_weights_use_resident_experts(w);
    } else if (plan->experts_stream) {
        char buf[1024];
        df_log(DF_LOG_INFO, "%s", df_plan_str(plan, buf, sizeof buf));
        rc = attach_store(m, w, x, plan, engine, dr);
        if (rc) return rc;
    }
    if (!plan->experts_stream && (m->params.hot_file || m->params.preload))
        df_log(DF_LOG_INFO, "experts are resident: --hot/--preload have no effect");
    if (w->ds) {
        df_store_stats st;
        int e = engine;
        if (w->store) { /* the engine the expert store uses (measured once) */
            df_store_get_stats(w->store, &st);
            e = st.engine;
        }
        rc = df_dense_stream_open(w->ds, e, m->params.mlock);
        if (rc) return rc;
    }
    return df_weights_watch_files(w);
}

/* The process's part in a distributed run (dist/dist.h): a worker waits for rank 0's placement;
 * rank 0 of a job sends it (with the model's identity) before it loads, so the workers set up
 * their shares meanwhile. Otherwise one process: dr stays DIST_NONE. */
static int dist_setup(df_model *m, int flags, dist_role *dr, struct df_dist **dd) {
    static bool used; /* the workers serve one model for the whole job */
    dr->rank = df_dist_rank();
    bool any_moe = false;
    for (int l = 0; l < m->hp.n_layer; l++) any_moe |= m->layers[l].is_moe;
    uint64_t id = 0;
    int rc;
    if (flags & DF_LOAD_DIST_WORKER) {
        dr->mode = DIST_WORKER;
        rc = df_dist_identity(m, &id);
        return rc ? rc : df_dist_worker_plan(m, id, &dr->pl);
    }
    if (m->meta_only || !df_dist_active() || dr->rank != 0 || !any_moe || (flags & DF_LOAD_SKIP_EXPERTS)) return DF_OK;
    if (used) return df_err(DF_ERR_UNSUPPORTED, "%s: a distributed run serves one model (it is already loaded)", m->path);
    df_dist_placement pl;
    rc = df_dist_identity(m, &id);
    if (rc == DF_OK) rc = df_dist_place(m, df_dist_size(), df_dist_options()->placement, &pl);
    if (rc == DF_OK) rc = df_dist_coord_start(m, &pl, id, dd);
    if (rc) return rc;
    used = true;
    dr->mode = DIST_COORD;
    dr->pl = df_dist_placement_of(*dd);
    return DF_OK;
}

int df_model_load(const char *path, const deltafin_model_params *p, int flags, df_model **out) {
    df_init();
    df_kernels_init(); /* the kernel table is chosen at load (its DELTAFIN_ISA warning here) */
    *out = NULL;
    df_model *m = df_calloc(1, sizeof *m);
    if (!m) return DF_ERR_NOMEM;
    m->params = p ? *p : deltafin_model_default_params();
    m->path = df_strdup(path);
    m->meta_only = flags & DF_LOAD_META_ONLY;
    expert_layout x = {0};
    df_dense_footprint dfp = {0};
    int engine = DF_IO_AUTO;
    int rc = m->path ? df_gguf_open(path, &m->gguf) : DF_ERR_NOMEM;
    if (rc == DF_OK) rc = df_model_describe(m);
    if (rc == DF_OK) rc = df_model_kv_check(m); /* -ctk / -ctv the architecture cannot hold */
    /* a packed file's header, tensor table and expert index: cheap, so at every load */
    if (rc == DF_OK && m->pack && !m->meta_only) rc = df_pack_check_meta(m->pack);
    if (rc == DF_OK && m->rope.n_rot > 0) df_rope_init(&m->rope);
    if (rc == DF_OK && m->params.io_engine) rc = df_io_engine_parse(m->params.io_engine, &engine);
    dist_role dr = {0};
    struct df_dist *dd = NULL;
    if (rc == DF_OK) rc = dist_setup(m, flags, &dr, &dd);
    if (rc == DF_OK) rc = expert_layout_make(m, &dr, &x);
    if (rc == DF_OK) rc = df_dense_footprint_compute(m, &dfp);
    /* the tokenizer before the plan: the overhead it measures includes it */
    if (rc == DF_OK && !(flags & DF_LOAD_NO_TOKENIZER) && df_gguf_find(m->gguf, "tokenizer.ggml.model")) {
        df_tokenizer *tok = NULL;
        rc = df_tokenizer_load(m->gguf, &tok);
        if (rc < 0) rc = df_err_prefix(rc, "%s", path);
        else m->tokenizer = tok;
    }
    df_plan plan;
    if (rc == DF_OK) {
        rc = make_plan(m, flags, engine, &x, &dfp, &dr, &plan);
        if (rc == DF_OK) publish_plan(m, &plan);
        else if (m->meta_only) { /* `info` shows the metadata and says why the plan fails */
            snprintf(m->plan_error, sizeof m->plan_error, "%s", df_errmsg());
            df_err_clear();
            m->plan_status = rc;
            rc = DF_OK;
        }
    }
    if (rc == DF_OK && !m->meta_only) rc = load_weights(m, flags, engine, &x, &plan, &dr);
    if (rc == DF_OK && dd) { /* the workers' answers; the remote source owns dd from here */
        rc = df_dist_coord_attach(dd, m, m->w);
        if (rc == DF_OK) dd = NULL;
    }
    df_dist_free(dd);
    expert_layout_free(&x);
    df_dense_footprint_free(&dfp);
    if (rc < 0) { deltafin_model_free(m); return rc; }
    *out = m;
    return DF_OK;
}

int deltafin_model_load(const char *path, const deltafin_model_params *p, deltafin_model **out) {
    return df_model_load(path, p, 0, out);
}

void deltafin_model_free(deltafin_model *m) {
    if (!m) return;
    df_weights_free(m->w);
    if (m->tokenizer) df_tokenizer_free(m->tokenizer);
    df_model_pack_free(m);
    if (m->gguf) df_gguf_close(m->gguf);
    free(m->layers);
    free(m->tensors);
    free(m->path);
    free(m);
}

int deltafin_model_n_vocab(const deltafin_model *m) { return m->hp.n_vocab; }
int deltafin_model_n_ctx_train(const deltafin_model *m) { return m->hp.n_ctx_train; }
const char *deltafin_model_arch(const deltafin_model *m) { return m->arch->name; }
const char *deltafin_model_meta_str(const deltafin_model *m, const char *key) {
    const char *s = NULL;
    if (df_gguf_get_str(m->gguf, key, &s) != DF_OK) return NULL;
    return s;
}
