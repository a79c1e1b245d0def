/* loader.c — deltafin_model_load: the one place that wires the modules together. Opens the
 * GGUF (and its pack), binds the architecture's tensors (model/), plans memory, reads the
 * resident weights with pread into anonymous memory (no mmap of the file, no page-cache
 * residency, no type conversion), repacks them for the kernels, attaches the expert store and
 * dense-layer streaming (weights/) and loads the tokenizer (text/).
 * Threading: load/free on one thread; the loaded model is read-only. */
#include "model/model.h"
#include "weights/dense_stream.h"
#include "runtime/plan.h"
#include "format/pack.h"
#include "kernels/quant.h"
#include "kernels/kernels.h"
#include "text/tokenizer.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <sys/mman.h>

/* ---- the resident expert provider ------------------------------------------------------- */
static int resident_acquire(void *ud, int layer, int expert, df_expert_w *out) {
    df_model *m = ud;
    for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
        const df_tensor *t = m->layers[layer].exps[p];
        uint64_t bytes = df_type_row_bytes(t->type, t->ne[0]) * (uint64_t)t->ne[1];
        out->w[p] = (const char *)t->data + (uint64_t)expert * bytes;
        if (p == DF_EXPERT_UP && df_layer_fused_gate_up(&m->layers[layer])) out->w[p] = (const char *)out->w[p] + bytes / 2;
        out->type[p] = t->type;
    }
    return DF_OK;
}
static void resident_release(void *ud, int layer, int expert) { (void)ud; (void)layer; (void)expert; }

void df_model_set_expert_provider(df_model *m, const df_expert_provider *p) {
    if (m->has_provider && m->provider.destroy) m->provider.destroy(m->provider.ud);
    m->provider = *p;
    m->has_provider = true;
}

/* ---- loading ----------------------------------------------------------------------------- */
static void *anon_alloc(uint64_t n) {
    if (n == 0) n = 1;
    void *p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int load_data(df_model *m, int flags) {
    bool skip = flags & DF_LOAD_SKIP_EXPERTS;
    uint64_t off_d = 0, off_e = 0;
    uint64_t *offs = df_calloc((size_t)m->n_bound, sizeof(uint64_t));
    if (!offs) return DF_ERR_NOMEM;
    m->expert_file_bytes = 0;
    for (int i = 0; i < m->n_bound; i++) {
        df_tensor *t = &m->tensors[i];
        bool ex = df_model_is_expert(m, t);
        if (ex) m->expert_file_bytes += t->info->nbytes;
        uint64_t *o = ex ? &off_e : &off_d;
        if (ex && skip) continue;
        if (df_dense_tensor_streamed(m, t)) continue; /* read per pass (dense_stream.c) */
        *o = df_pad(*o, 64);
        offs[i] = *o;
        if (!df_add_ok(*o, t->info->nbytes, o)) { free(offs); return df_err(DF_ERR_RANGE, "size overflow"); }
    }
    m->dense_bytes = off_d;
    m->expert_bytes = skip ? 0 : off_e;
    uint64_t need = m->dense_bytes + m->expert_bytes;
    if (m->params.mem_limit && need > m->params.mem_limit) {
        char a[32], b[32];
        free(offs);
        return df_err(DF_ERR_RANGE, "%s: resident weights need %s but the memory limit is %s", m->path,
                      df_fmt_bytes(need, a, sizeof a), df_fmt_bytes(m->params.mem_limit, b, sizeof b));
    }
    m->dense_mem = anon_alloc(m->dense_bytes);
    if (!m->dense_mem) { free(offs); return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes for weights",
                                                   (unsigned long long)m->dense_bytes); }
    if (m->expert_bytes) {
        m->expert_mem = anon_alloc(m->expert_bytes);
        if (!m->expert_mem) { free(offs); return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes for experts",
                                                        (unsigned long long)m->expert_bytes); }
    }
    uint64_t done = 0, t0 = df_time_ns(), last = t0, to_read = 0;
    for (int i = 0; i < m->n_bound; i++)
        if (!(skip && df_model_is_expert(m, &m->tensors[i])) && !df_dense_tensor_streamed(m, &m->tensors[i]))
            to_read += m->tensors[i].info->nbytes;
    for (int i = 0; i < m->n_bound; i++) {
        df_tensor *t = &m->tensors[i];
        bool ex = df_model_is_expert(m, t);
        if (ex && skip) continue;
        if (df_dense_tensor_streamed(m, t)) continue;
        t->data = (char *)(ex ? m->expert_mem : m->dense_mem) + offs[i];
        int rc = df_gguf_read(m->gguf, t->info, 0, t->data, t->info->nbytes);
        if (rc < 0) { free(offs); return df_err_prefix(rc, "%s: reading tensor '%s'", m->path, t->info->name); }
        /* Under --mem-limit the page cache counts too (a memory cgroup charges it): drop the
         * pages just copied into anonymous memory. Without a limit they stay, so a second
         * launch of the same model loads from RAM. */
        if (m->params.mem_limit && t->info->shard >= 0 && t->info->shard < m->gguf->n_shards &&
            m->gguf->shards[t->info->shard].fd >= 0)
            (void)posix_fadvise(m->gguf->shards[t->info->shard].fd, (off_t)t->info->offset, (off_t)t->info->nbytes,
                                POSIX_FADV_DONTNEED);
        done += t->info->nbytes;
        if (m->params.progress_cb) m->params.progress_cb(m->params.progress_ud, done, to_read);
        if (m->params.progress && df_time_ns() - last > 500000000ull) {
            last = df_time_ns();
            df_log(DF_LOG_INFO, "loading: %.1f%%", 100.0 * (double)done / (double)(need ? need : 1));
        }
    }
    free(offs);
    if (m->params.mlock) {
        if (mlock(m->dense_mem, (size_t)(m->dense_bytes ? m->dense_bytes : 1)) != 0)
            df_log(DF_LOG_WARN, "mlock of %llu bytes failed (RLIMIT_MEMLOCK?)", (unsigned long long)m->dense_bytes);
    }
    df_log(DF_LOG_DEBUG, "loaded %llu bytes in %.2f s", (unsigned long long)need, (df_time_ns() - t0) / 1e9);
    return DF_OK;
}

/* Resident weights that only df_matmul / df_matmul_id read get the layout the selected kernels
 * want (df_repack_type: Q4_K as 8 interleaved rows on AVX-512) — the same numbers, faster. Not
 * token_embd (row lookups; also the tied output), not the per-head 3-D attn_k_b / attn_v_b
 * (df_matmul_3d), not routers, not streamed tensors (read from the file per pass: no data here). */
static int repack_weights(df_model *m) {
    const int to = df_repack_type(DF_TYPE_Q4_K);
    if (to < 0) return DF_OK;
    uint64_t t0 = df_time_ns(), bytes = 0;
    int count = 0, rc = DF_OK;
    df_pool *pool = df_pool_create(m->params.n_threads);
    for (int l = -1; l < m->hp.n_layer; l++) {
        df_tensor *list[32];
        int n = 0;
        if (l < 0) {
            list[n++] = m->output;
        } else {
            const df_layer *L = &m->layers[l];
            df_tensor *w[] = {L->wq, L->wk, L->wv, L->wqkv, L->wo, L->ffn_gate, L->ffn_up, L->ffn_down,
                              L->gate_shexp, L->up_shexp, L->down_shexp, L->wq_a, L->wq_b, L->wkv_a_mqa,
                              L->wkv_b, L->attn_gate, L->routed_down, L->routed_up, L->ssm_f_a, L->ssm_f_b,
                              L->ssm_beta, L->ssm_g, L->exps[0], L->exps[1], L->exps[2]};
            for (size_t i = 0; i < sizeof w / sizeof *w; i++) list[n++] = w[i];
        }
        for (int i = 0; i < n; i++) {
            df_tensor *t = list[i];
            if (!t || !t->data || t->type != DF_TYPE_Q4_K || t == m->tok_embd) continue;
            /* fused gate_up experts: up starts n_ff rows into each expert's matrix */
            const int64_t group = l >= 0 && t == m->layers[l].exps[DF_EXPERT_GATE] &&
                                  t == m->layers[l].exps[DF_EXPERT_UP] ? 16 : 8;
            if (t->ne[1] % group) continue;
            rc = df_repack_rows(pool, DF_TYPE_Q4_K, to, t->data, t->ne[0], t->ne[1] * t->ne[2] * t->ne[3]);
            if (rc < 0) {
                df_pool_free(pool);
                return df_err_prefix(rc, "%s: repacking '%s'", m->path, t->info->name);
            }
            t->type = to;
            bytes += t->info->nbytes;
            count++;
        }
    }
    df_pool_free(pool);
    df_log(DF_LOG_DEBUG, "repacked %d tensors (%.1f MiB) to %s in %.2f s", count, bytes / 1048576.0,
           df_type_info(to)->name, (df_time_ns() - t0) / 1e9);
    return DF_OK;
}

deltafin_model_params deltafin_model_default_params(void) {
    deltafin_model_params p;
    memset(&p, 0, sizeof p);
    p.n_threads = 0;
    p.io_engine = "auto";
    p.prefetch = DELTAFIN_PREFETCH_AUTO;
    return p;
}

int df_model_load(const char *path, const deltafin_model_params *p, int flags, df_model **out) {
    df_init();
    *out = NULL;
    df_model *m = df_calloc(1, sizeof *m);
    if (!m) return DF_ERR_NOMEM;
    m->params = p ? *p : deltafin_model_default_params();
    m->path = df_strdup(path);
    int rc = df_gguf_open(path, &m->gguf);
    if (rc < 0) { deltafin_model_free(m); return rc; }
    rc = df_model_describe(m);
    if (rc < 0) { deltafin_model_free(m); return rc; }
    if (m->rope.n_rot > 0) df_rope_init(&m->rope);

    /* expert streaming (memplan.c): routed experts stay on disk when they do not fit */
    bool stream = false;
    if (!(flags & (DF_LOAD_SKIP_EXPERTS | DF_LOAD_META_ONLY))) {
        rc = df_stream_decide(m, &stream);
        if (rc < 0) { deltafin_model_free(m); return rc; }
        if (stream) flags |= DF_LOAD_SKIP_EXPERTS;
    }
    /* dense layers that do not fit the limit stream too (dense_stream.c) */
    if (!(flags & DF_LOAD_META_ONLY)) {
        rc = df_dense_decide(m, stream);
        if (rc < 0) { deltafin_model_free(m); return rc; }
    }
    m->meta_only = flags & DF_LOAD_META_ONLY;
    if (!m->meta_only) {
        rc = load_data(m, flags);
        if (rc == DF_OK) rc = repack_weights(m);
        if (rc < 0) { deltafin_model_free(m); return rc; }
        if (m->rope_freqs) m->rope.freq_factors = m->rope_freqs->data;
    }

    bool any_moe = false;
    for (int l = 0; l < m->hp.n_layer; l++) any_moe |= m->layers[l].is_moe;
    if (any_moe && !(flags & (DF_LOAD_SKIP_EXPERTS | DF_LOAD_META_ONLY))) {
        df_expert_provider pr = {.ud = m, .acquire = resident_acquire, .release = resident_release};
        m->provider = pr;
        m->has_provider = true;
        m->experts_loaded = true;
    } else if (stream) {
        rc = df_stream_attach(m);
        if (rc == DF_OK && (m->params.hot_file || m->params.preload))
            rc = df_stream_configure(m, -1, m->params.hot_file, m->params.preload);
        if (rc < 0) { deltafin_model_free(m); return rc; }
    }
    if (!stream) df_plan_resident(m);
    if (!m->meta_only) {
        rc = df_dense_open(m);
        if (rc < 0) { deltafin_model_free(m); return rc; }
    }
    if (!(flags & DF_LOAD_NO_TOKENIZER) &&
        df_gguf_find(m->gguf, "tokenizer.ggml.model")) {
        df_tokenizer *tok = NULL;
        rc = df_tokenizer_load(m->gguf, &tok);
        if (rc < 0) { deltafin_model_free(m); return df_err_prefix(rc, "%s", path); }
        m->tokenizer = tok;
    }
    *out = m;
    return DF_OK;
}

int deltafin_model_load(const char *path, const deltafin_model_params *p, deltafin_model **out) {
    return df_model_load(path, p, 0, out);
}

void deltafin_model_free(deltafin_model *m) {
    if (!m) return;
    df_dense_free(m);
    if (m->has_provider && m->provider.destroy) m->provider.destroy(m->provider.ud);
    if (m->tokenizer) df_tokenizer_free(m->tokenizer);
    if (m->dense_mem) munmap(m->dense_mem, (size_t)(m->dense_bytes ? m->dense_bytes : 1));
    if (m->expert_mem) munmap(m->expert_mem, (size_t)m->expert_bytes);
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

