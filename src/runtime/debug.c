/* debug.c — include/deltafin_debug.h: what `info` and `doctor` read of a model's internals
 * (hyperparameters, the tensor table, the footprint, plans at a memory limit) and the disk /
 * I/O-engine measurements `doctor` makes. The kernel benchmark is kbench.c.
 * Everything reads the model; only deltafin_model_plan_limit / _speed_inputs set the meta
 * model's mem_limit parameter, as the plan functions read it from there.
 * Threading: one caller per model; the measurements run their own I/O threads. */
#include "deltafin_debug.h"
#include "base/util.h"
#include "format/pack.h"
#include "model/model.h"
#include "runtime/loader.h"
#include "forward/session.h"
#include "runtime/plan.h"
#include "weights/expert_store.h"
#include "weights/io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- description -------------------------------------------------------------------------- */
int deltafin_model_load_meta(const char *path, deltafin_model **out) {
    return df_model_load(path, NULL, DF_LOAD_META_ONLY, out);
}

int deltafin_model_set_cache_types(deltafin_model *m, int type_k, int type_v) {
    const int ok = m->params.cache_type_k, ov = m->params.cache_type_v;
    m->params.cache_type_k = type_k;
    m->params.cache_type_v = type_v;
    int rc = df_model_kv_check(m);
    if (rc < 0) { m->params.cache_type_k = ok; m->params.cache_type_v = ov; }
    return rc;
}

void deltafin_model_hparams(const deltafin_model *m, deltafin_hparams *out) {
    const df_hparams *hp = &m->hp;
    *out = (deltafin_hparams){
        .n_vocab = hp->n_vocab, .n_ctx_train = hp->n_ctx_train, .n_embd = hp->n_embd, .n_layer = hp->n_layer,
        .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .n_embd_head_k = hp->n_embd_head_k,
        .n_embd_head_v = hp->n_embd_head_v, .n_rot = hp->n_rot, .rope_neox = hp->rope_mode == DF_ROPE_NEOX,
        .rope_freq_base = hp->rope_freq_base, .rope_freq_scale = hp->rope_freq_scale,
        .yarn = hp->yarn_ext_factor != 0, .rms_eps = hp->eps, .kq_scale = hp->kq_scale, .n_ff = hp->n_ff,
        .n_expert = hp->n_expert, .n_expert_used = hp->n_expert_used, .n_ff_exp = hp->n_ff_exp,
        .n_ff_shexp = hp->n_ff_shexp, .expert_weights_norm = hp->expert_weights_norm,
        .expert_weights_scale = hp->expert_weights_scale, .n_layer_nextn = hp->n_layer_nextn,
        .indexer_n_head = hp->indexer_n_head, .indexer_head_size = hp->indexer_head_size,
        .indexer_top_k = hp->indexer_top_k,
    };
    if (m->arch->describe) m->arch->describe(hp, out->detail, sizeof out->detail);
    for (int il = 0; il < df_hp_n_run_layers(hp) && hp->indexer_top_k > 0; il++)
        out->indexer_full_layers += !hp->layer_dsa_shared[il];
}

void deltafin_model_gguf_info(const deltafin_model *m, deltafin_gguf_info *out) {
    *out = (deltafin_gguf_info){.version = m->gguf->version, .n_tensors = m->gguf->n_tensors, .n_kv = m->gguf->n_kv,
                                .n_files = m->gguf->n_shards, .path = m->gguf->shards[0].path};
}

const char *deltafin_role_name(int role) {
    static const char *names[DELTAFIN_ROLE_COUNT] = {"token embedding", "output", "attention", "norms", "router",
                                                     "routed experts", "shared experts", "dense ffn", "other"};
    return role >= 0 && role < DELTAFIN_ROLE_COUNT ? names[role] : "?";
}

static int role_of(const df_model *m, const df_tensor *t) {
    const char *n = t->info->name;
    if (t == m->tok_embd) return DELTAFIN_ROLE_EMBD;
    if (t == m->output || t == m->output_norm) return DELTAFIN_ROLE_OUTPUT;
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < DF_EXPERT_NPARTS; p++)
            if (m->layers[l].exps[p] == t) return DELTAFIN_ROLE_EXPERTS;
    if (strstr(n, "_norm")) return DELTAFIN_ROLE_NORM;
    if (strstr(n, "ffn_gate_inp") && !strstr(n, "shexp")) return DELTAFIN_ROLE_ROUTER;
    if (strstr(n, "exp_probs_b") || strstr(n, "ffn_gate_tid2eid")) return DELTAFIN_ROLE_ROUTER;
    if (strstr(n, "shexp")) return DELTAFIN_ROLE_SHARED;
    if (strstr(n, ".attn_") || strstr(n, ".indexer")) return DELTAFIN_ROLE_ATTN; /* DSA / deepseek4 indexers */
    if (strstr(n, ".ffn_")) return DELTAFIN_ROLE_FFN;
    return DELTAFIN_ROLE_OTHER;
}

int deltafin_model_n_tensors(const deltafin_model *m) { return m->n_bound; }

int deltafin_model_tensor(const deltafin_model *m, int i, deltafin_tensor_info *out) {
    if (i < 0 || i >= m->n_bound) return df_err(DF_ERR_INVALID, "tensor index %d of %d", i, m->n_bound);
    const df_tensor *t = &m->tensors[i];
    *out = (deltafin_tensor_info){.name = t->info->name, .type = t->type, .nbytes = t->info->nbytes,
                                  .role = role_of(m, t)};
    return DF_OK;
}

void deltafin_model_footprint(const deltafin_model *m, int n_ctx, int n_batch, deltafin_footprint *out) {
    df_footprint p;
    df_model_footprint(m, n_ctx, &p);
    *out = (deltafin_footprint){.dense_bytes = p.dense_bytes, .expert_bytes = p.expert_bytes,
                                .expert_bytes_one = p.expert_bytes_one, .kv_bytes_per_token = p.kv_bytes_per_token,
                                .kv_bytes = p.kv_bytes, .state_bytes = p.state_bytes,
                                .scratch_bytes = df_session_scratch_bytes(m, n_batch, 1)};
}

/* ---- plans at a limit --------------------------------------------------------------------- */
static void take_error(char *dst, size_t cap) {
    snprintf(dst, cap, "%s", df_errmsg());
    df_err_clear();
}

/* The plan run makes at mem_limit (runtime/plan.c through the loader's footprint). */
static int plan_at(deltafin_model *m, uint64_t mem_limit, df_plan *p) {
    const uint64_t keep = m->params.mem_limit;
    m->params.mem_limit = mem_limit;
    int rc = df_loader_plan(m, p);
    m->params.mem_limit = keep;
    return rc;
}

int deltafin_model_plan_limit(deltafin_model *m, uint64_t mem_limit, deltafin_limit_plan *out) {
    return deltafin_model_plan_limit_at(m, mem_limit, 0, 0, 0, out);
}

int deltafin_model_plan_limit_at(deltafin_model *m, uint64_t mem_limit, int n_ctx, int n_batch, int n_seq,
                                 deltafin_limit_plan *out) {
    memset(out, 0, sizeof *out);
    df_plan p;
    const int kc = m->params.n_ctx, kb = m->params.n_batch, ks = m->params.n_seq;
    if (n_ctx > 0) m->params.n_ctx = n_ctx;
    if (n_batch > 0) m->params.n_batch = n_batch;
    if (n_seq > 0) m->params.n_seq = n_seq;
    int rc = plan_at(m, mem_limit, &p);
    m->params.n_ctx = kc;
    m->params.n_batch = kb;
    m->params.n_seq = ks;
    out->n_ctx = n_ctx > 0 ? n_ctx : m->plan.n_ctx;
    if (rc < 0) {
        out->status = rc;
        take_error(out->error, sizeof out->error);
        return DF_OK;
    }
    out->experts_stream = p.experts_stream;
    df_plan_dense_str(&p, out->dense_plan, sizeof out->dense_plan);
    out->dense_layers_streamed = p.n_streamed;
    out->dense_resident_bytes = p.dense_bytes;
    if (p.experts_stream) {
        out->cache_planned = true;
        out->slot_bytes = p.slot_bytes;
        out->n_experts_total = p.n_experts_total;
        out->cache_status = DF_OK;
        out->cache_bytes = p.cache_bytes;
        out->n_slots = p.n_slots;
        out->frac_resident = p.frac_resident;
    }
    return DF_OK;
}

int deltafin_model_speed_inputs(deltafin_model *m, uint64_t mem_limit, deltafin_speed_inputs *out) {
    memset(out, 0, sizeof *out);
    const df_hparams *hp = &m->hp;
    df_footprint fp;
    df_model_footprint(m, m->plan.n_ctx > 0 ? m->plan.n_ctx : 4096, &fp);
    const int n_tot = fp.n_moe_layers * hp->n_expert;
    const double exp_avg = n_tot ? (double)fp.expert_bytes / n_tot : 0;
    out->n_ctx = fp.n_ctx;
    out->mem_limit = mem_limit;
    out->dense_bytes = fp.dense_bytes;
    out->active_expert_bytes = exp_avg * fp.n_moe_layers * hp->n_expert_used;
    out->n_expert = hp->n_expert;
    out->n_expert_used = hp->n_expert_used;
    df_plan p;
    out->status = plan_at(m, mem_limit, &p);
    if (out->status != DF_OK) { take_error(out->error, sizeof out->error); return DF_OK; }
    /* dense layers that do not fit stream too: read every token */
    out->dense_layers_streamed = p.n_streamed;
    out->dense_read_per_token = p.read_per_pass;
    if (p.n_streamed) df_plan_dense_str(&p, out->dense_plan, sizeof out->dense_plan);
    out->cache_bytes = p.cache_bytes;
    out->cached_frac = !n_tot || !p.experts_stream ? 1.0 : p.all_resident ? 1.0 : p.frac_resident;
    return DF_OK;
}

uint64_t deltafin_model_expert_read_bytes(const deltafin_model *m) {
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

/* ---- disk ------------------------------------------------------------------------------- */
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

/* Keeps `qd` random reads in flight until `secs` passed; GB/s, or < 0 on an error. */
static double read_window(df_io *io, uint64_t size, int qd, uint64_t probe, uint64_t stride, double secs) {
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
    free(bufs);
    free(w.reqs);
    free(w.free_idx);
    return gbps;
}

double deltafin_disk_read_gbps(const char *path, const char *engine, int qd, uint64_t probe, double secs) {
    struct stat st;
    int e;
    if (stat(path, &st) < 0 || df_io_engine_parse(engine, &e) != DF_OK || qd < 1) { df_err_clear(); return -1; }
    const uint64_t size = (uint64_t)st.st_size;
    if (probe > size) probe = size;
    const uint64_t stride = df_io_buf_need(DF_IO_ALIGN - 1, probe);
    if ((uint64_t)qd * stride > (768ull << 20)) return -1; /* too much buffer memory */
    drop_cache(path);
    df_io_params p = df_io_default_params();
    p.engine = e;
    p.n_threads = qd;
    p.queue_depth = qd;
    df_io *io = NULL;
    const char *paths[1] = {path};
    if (df_io_open(paths, 1, &p, &io) != DF_OK) { df_err_clear(); return -1; }
    double gbps = read_window(io, size, qd, probe, stride, secs);
    df_io_close(io);
    return gbps;
}

int deltafin_io_measure(const char *path, uint64_t probe, deltafin_io_measurement *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) < 0) return df_err(DF_ERR_IO, "%s: %s", path, strerror(errno));
    double gbps[DF_IO_NENGINES] = {0};
    int best = -1;
    int rc = df_io_measure(path, probe, 0, &best, gbps);
    if (rc != DF_OK) return rc;
    for (int e = DF_IO_PREAD; e < DF_IO_NENGINES && out->n < 8; e++) {
        if (!df_io_engine_available(e)) continue;
        out->names[out->n] = df_io_engine_name(e);
        out->engine_ids[out->n] = e;
        out->gbps[out->n++] = gbps[e];
    }
    out->best = df_io_engine_name(best);
    out->best_id = best;
    out->best_gbps = gbps[best];
    out->probe = probe;
    df_io_profile_key(&st, probe, out->key, sizeof out->key);
    return DF_OK;
}

int deltafin_io_profile_save(const char *profile, const deltafin_io_measurement *ms, char *saved, size_t cap) {
    double gbps[DF_IO_NENGINES] = {0};
    for (int i = 0; i < ms->n; i++) gbps[ms->engine_ids[i]] = ms->gbps[i];
    char ppath[1024];
    df_io_profile_path(profile, ppath, sizeof ppath);
    if (saved && cap) snprintf(saved, cap, "%s", ppath);
    return df_io_profile_store(ppath, ms->key, ms->best_id, gbps);
}
