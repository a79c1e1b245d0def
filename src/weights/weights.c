/* weights.c — the weights interface (weights.h): resident tensors read with pread into
 * anonymous memory (no mmap of the file, no page-cache residency, no type conversion) and
 * repacked for the kernels, the resident expert source, and dispatch to the expert store and
 * the dense-layer stream. Threading: setup on one thread; the forward-pass entry points as
 * weights.h says. */
#include "weights/weights.h"
#include "weights/dense_stream.h"
#include "weights/expert_store.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "base/sysmem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* ---- resident tensors ------------------------------------------------------------------ */
static void *anon_alloc(uint64_t n) {
    if (n == 0) n = 1;
    void *p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Resident weights that only df_matmul / df_matmul_id read get the layout the selected kernels
 * want (df_repack_type: Q4_K as 8 interleaved rows on AVX-512) — the same numbers, faster. Not
 * token_embd (row lookups; also the tied output), not the per-head 3-D attn_k_b / attn_v_b
 * (df_matmul_3d), not routers, not streamed tensors (read from the file per pass: no data here). */
static int repack_weights(df_model *m, int n_threads) {
    const int to = df_repack_type(DF_TYPE_Q4_K);
    if (to < 0) return DF_OK;
    uint64_t t0 = df_time_ns(), bytes = 0;
    int count = 0, rc = DF_OK;
    df_pool *pool = df_pool_create(n_threads);
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

int df_weights_load_resident(df_weights *w, const df_resident_opts *ro) {
    df_model *m = w->m;
    const bool skip = ro->skip_experts;
    uint64_t off_d = 0, off_e = 0;
    uint64_t *offs = df_calloc((size_t)m->n_bound, sizeof(uint64_t));
    if (!offs) return DF_ERR_NOMEM;
    m->expert_file_bytes = 0;
    for (int i = 0; i < m->n_bound; i++) {
        df_tensor *t = &m->tensors[i];
        if (t->flags & DF_T_UNUSED) continue; /* NextN / MTP layers: bound, never read */
        bool ex = df_model_is_expert(m, t);
        if (ex) m->expert_file_bytes += t->info->nbytes;
        uint64_t *o = ex ? &off_e : &off_d;
        if (ex && skip) continue;
        if (df_dense_stream_has(ro->ds, t)) continue; /* read per pass (dense_stream.c) */
        if (ro->only && !ro->only(m, t)) continue;
        if (ro->skip_embd && t == m->tok_embd) continue;
        *o = df_pad(*o, 64);
        offs[i] = *o;
        if (!df_add_ok(*o, t->info->nbytes, o)) { free(offs); return df_err(DF_ERR_RANGE, "size overflow"); }
    }
    w->dense_bytes = off_d;
    w->expert_bytes = skip ? 0 : off_e;
    uint64_t need = w->dense_bytes + w->expert_bytes;
    if (ro->mem_limit && need > ro->mem_limit) {
        char a[32], b[32];
        free(offs);
        return df_err(DF_ERR_RANGE, "%s: resident weights need %s but the memory limit is %s", m->path,
                      df_fmt_bytes(need, a, sizeof a), df_fmt_bytes(ro->mem_limit, b, sizeof b));
    }
    w->dense_mem = anon_alloc(w->dense_bytes);
    if (!w->dense_mem) { free(offs); return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes for weights",
                                                   (unsigned long long)w->dense_bytes); }
    if (w->expert_bytes) {
        w->expert_mem = anon_alloc(w->expert_bytes);
        if (!w->expert_mem) { free(offs); return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes for experts",
                                                        (unsigned long long)w->expert_bytes); }
    }
    uint64_t done = 0, t0 = df_time_ns(), last = t0, to_read = 0;
    for (int i = 0; i < m->n_bound; i++)
        if (!(m->tensors[i].flags & DF_T_UNUSED) && !(skip && df_model_is_expert(m, &m->tensors[i])) &&
            !df_dense_stream_has(ro->ds, &m->tensors[i]) && !(ro->only && !ro->only(m, &m->tensors[i])) &&
            !(ro->skip_embd && &m->tensors[i] == m->tok_embd))
            to_read += m->tensors[i].info->nbytes;
    for (int i = 0; i < m->n_bound; i++) {
        df_tensor *t = &m->tensors[i];
        if (t->flags & DF_T_UNUSED) continue;
        bool ex = df_model_is_expert(m, t);
        if (ex && skip) continue;
        if (df_dense_stream_has(ro->ds, t)) continue;
        if (ro->only && !ro->only(m, t)) continue;
        if (ro->skip_embd && t == m->tok_embd) continue;
        t->data = (char *)(ex ? w->expert_mem : w->dense_mem) + offs[i];
        /* Under --mem-limit the page cache counts too (a memory cgroup charges it): read in
         * 32 MiB pieces and drop each piece's pages once copied into anonymous memory, so a
         * large tensor (a 1 GB token embedding) never holds its size in page cache on top.
         * Without a limit the pages stay, so a second launch of the same model loads from RAM. */
        const bool drop = ro->mem_limit && t->info->shard >= 0 && t->info->shard < m->gguf->n_shards &&
                          m->gguf->shards[t->info->shard].fd >= 0;
        const uint64_t piece = drop ? 32ull << 20 : t->info->nbytes;
        for (uint64_t o = 0; o < t->info->nbytes;) {
            const uint64_t n = t->info->nbytes - o < piece ? t->info->nbytes - o : piece;
            int rc = df_gguf_read(m->gguf, t->info, o, (char *)t->data + o, n);
            if (rc < 0) { free(offs); return df_err_prefix(rc, "%s: reading tensor '%s'", m->path, t->info->name); }
            if (drop)
                (void)posix_fadvise(m->gguf->shards[t->info->shard].fd, (off_t)(t->info->offset + o), (off_t)n,
                                    POSIX_FADV_DONTNEED);
            o += n;
        }
        int rc;
        if (ro->verify && m->pack && (rc = df_pack_check_tensor(m->pack, t->info, t->data)) < 0) {
            free(offs);
            return df_err_prefix(rc, "--verify-on-load");
        }
        done += t->info->nbytes;
        if (ro->progress) ro->progress(ro->progress_ud, done, to_read);
        if (ro->progress_log && df_time_ns() - last > 500000000ull) {
            last = df_time_ns();
            df_log(DF_LOG_INFO, "loading: %.1f%%", 100.0 * (double)done / (double)(need ? need : 1));
        }
    }
    free(offs);
    const df_tensor *te = m->tok_embd;
    if (ro->skip_embd && te && te->info->shard >= 0 && te->info->shard < m->gguf->n_shards &&
        m->gguf->shards[te->info->shard].fd >= 0) /* its rows are read one by one: no readahead around them */
        (void)posix_fadvise(m->gguf->shards[te->info->shard].fd, 0, 0, POSIX_FADV_RANDOM);
    if (ro->mlock) {
        int rc = df_mlock(w->dense_mem, w->dense_bytes, "the dense weights");
        if (rc == DF_OK) rc = df_mlock(w->expert_mem, w->expert_bytes, "the resident experts");
        if (rc < 0) return rc;
    }
    df_log(DF_LOG_DEBUG, "loaded %llu bytes in %.2f s", (unsigned long long)need, (df_time_ns() - t0) / 1e9);
    return repack_weights(m, ro->n_threads);
}

int df_weights_embd_row(const df_model *m, int64_t id, void *buf) {
    const df_tensor *t = m->tok_embd;
    const uint64_t rb = df_type_row_bytes(t->type, t->ne[0]), off = (uint64_t)id * rb;
    int rc = df_gguf_read(m->gguf, t->info, off, buf, rb);
    if (rc < 0) return df_err_prefix(rc, "%s: reading row %lld of '%s'", m->path, (long long)id, t->info->name);
    if (m->params.mem_limit && t->info->shard >= 0 && t->info->shard < m->gguf->n_shards &&
        m->gguf->shards[t->info->shard].fd >= 0) { /* its pages are charged to a memory cgroup: drop them */
        const uint64_t a = (t->info->offset + off) & ~(uint64_t)4095, b = (t->info->offset + off + rb + 4095) & ~(uint64_t)4095;
        (void)posix_fadvise(m->gguf->shards[t->info->shard].fd, (off_t)a, (off_t)(b - a), POSIX_FADV_DONTNEED);
    }
    return DF_OK;
}

/* ---- the resident expert source ------------------------------------------------------- */
static int resident_acquire(void *ud, int layer, int expert, df_expert_w *out) {
    const df_model *m = ud;
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

void df_weights_use_resident_experts(df_weights *w) {
    df_expert_source src = {.ud = w->m, .acquire = resident_acquire, .release = resident_release};
    df_weights_set_experts(w, &src);
}

/* ---- the expert store as a source ---------------------------------------------------------- */
static int st_acquire(void *ud, int l, int e, df_expert_w *out) { return df_store_acquire(ud, l, e, out); }
static void st_release(void *ud, int l, int e) { df_store_release(ud, l, e); }
static void st_prefetch(void *ud, int l, const int *ex, int n) { df_store_prefetch(ud, l, ex, n); }
static void st_lookahead(void *ud, int l, const int *ex, int n) { df_store_lookahead(ud, l, ex, n); }
static bool st_wanted(void *ud) { return df_store_lookahead_wanted(ud); }
static void st_stats(void *ud, df_store_stats *st) { df_store_get_stats(ud, st); }
static void st_destroy(void *ud) { df_store_free(ud); }

void df_weights_use_store(df_weights *w, df_store *s) {
    df_expert_source src = {.ud = s, .acquire = st_acquire, .release = st_release, .prefetch = st_prefetch,
                            .lookahead = st_lookahead, .lookahead_wanted = st_wanted, .stats = st_stats,
                            .destroy = st_destroy};
    df_weights_set_experts(w, &src);
    w->store = s;
}

void df_weights_set_experts(df_weights *w, const df_expert_source *src) {
    if (w->has_ex && w->ex.destroy) w->ex.destroy(w->ex.ud);
    w->ex = *src;
    w->has_ex = true;
    w->store = NULL;
}

void df_weights_use_dense_stream(df_weights *w, df_dense_stream *ds) {
    df_dense_stream_free(w->ds);
    w->ds = ds;
}

/* ---- lifetime -------------------------------------------------------------------------------- */
int df_weights_create(df_model *m, df_weights **out) {
    df_weights *w = df_calloc(1, sizeof *w);
    if (!w) return DF_ERR_NOMEM;
    w->m = m;
    *out = w;
    return DF_OK;
}

void df_weights_free(df_weights *w) {
    if (!w) return;
    free(w->files);
    df_dense_stream_free(w->ds);
    if (w->has_ex && w->ex.destroy) w->ex.destroy(w->ex.ud);
    if (w->dense_mem) munmap(w->dense_mem, (size_t)(w->dense_bytes ? w->dense_bytes : 1));
    if (w->expert_mem) munmap(w->expert_mem, (size_t)w->expert_bytes);
    free(w);
}

/* ---- the model files while they stream ----------------------------------------------------- */
typedef struct df_file_id { uint64_t size; int64_t mtime_s, mtime_ns; int fd; } df_file_id;

int df_weights_watch_files(df_weights *w) {
    const df_gguf *g = w->m->gguf;
    free(w->files);
    w->files = df_calloc((size_t)g->n_shards + 1, sizeof *w->files);
    if (!w->files) return DF_ERR_NOMEM;
    w->n_files = g->n_shards;
    for (int i = 0; i < g->n_shards; i++) {
        struct stat st;
        df_file_id *f = &w->files[i];
        f->fd = g->shards[i].fd;
        if (f->fd < 0 || fstat(f->fd, &st) < 0) { f->fd = -1; continue; }
        *f = (df_file_id){(uint64_t)st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, f->fd};
    }
    return DF_OK;
}

/* What lies at byte `off` of file `shard`: a tensor, or a packed model's (layer, expert) record. */
static void describe_offset(const df_model *m, int shard, uint64_t off, char *buf, size_t cap) {
    const df_gguf *g = m->gguf;
    const df_gguf_tensor *best = NULL;
    for (int i = 0; i < g->n_tensors; i++) { /* the first tensor whose data ends past off */
        const df_gguf_tensor *t = &g->tensors[i];
        if (t->shard == shard && t->offset + t->nbytes > off && (!best || t->offset < best->offset)) best = t;
    }
    snprintf(buf, cap, "%s%s%s", best ? "tensor '" : "nothing", best ? best->name : "", best ? "'" : "");
    if (m->pack && best && !strcmp(best->name, "deltafin.pack.experts"))
        for (int l = 0; l < m->hp.n_layer; l++)
            for (int e = 0; e < m->hp.n_expert; e++)
                for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
                    df_expert_loc lc;
                    if (df_pack_expert_loc(m->pack, l, e, p, &lc) == DF_OK && lc.offset + lc.nbytes > off) {
                        snprintf(buf, cap, "layer %d expert %d", l, e);
                        df_err_clear();
                        return;
                    }
                }
    df_err_clear();
}

/* One fstat per file and pass, only when something is read from the files during passes. */
static int check_files(const df_weights *w) {
    if (!w->files || (!w->store && !w->ds)) return DF_OK;
    const df_gguf *g = w->m->gguf;
    for (int i = 0; i < w->n_files; i++) {
        const df_file_id *f = &w->files[i];
        struct stat st;
        if (f->fd < 0 || fstat(f->fd, &st) < 0) continue;
        const char *path = g->shards[i].path;
        if (st.st_nlink == 0)
            return df_err(DF_ERR_IO, "%s: the model file was deleted or replaced while in use (reload the model)", path);
        if ((uint64_t)st.st_size < f->size) {
            char what[128];
            describe_offset(w->m, i, (uint64_t)st.st_size, what, sizeof what);
            return df_err(DF_ERR_IO, "%s: the model file changed while in use: truncated from %llu to %llu bytes, "
                          "cutting off %s at offset %llu (reload the model)", path, (unsigned long long)f->size,
                          (unsigned long long)st.st_size, what, (unsigned long long)st.st_size);
        }
        if ((uint64_t)st.st_size != f->size)
            return df_err(DF_ERR_IO, "%s: the model file changed while in use: grown from %llu to %llu bytes (reload "
                          "the model)", path, (unsigned long long)f->size, (unsigned long long)st.st_size);
        if (st.st_mtim.tv_sec != f->mtime_s || st.st_mtim.tv_nsec != f->mtime_ns)
            return df_err(DF_ERR_IO, "%s: the model file was modified while in use (reload the model)", path);
    }
    return DF_OK;
}

/* ---- the forward pass ---------------------------------------------------------------------- */
void df_weights_begin(df_weights *w) { if (w->ds) df_dense_begin(w->ds); }
int df_weights_end(df_weights *w) {
    if (w->ds) df_dense_end(w->ds);
    return check_files(w);
}
int df_weights_layer_acquire(df_weights *w, int il) { return w->ds ? df_dense_acquire(w->ds, il) : DF_OK; }
void df_weights_layer_release(df_weights *w, int il) { if (w->ds) df_dense_release(w->ds, il); }

bool df_weights_expert_cached(const df_weights *w, int layer, int expert) {
    return w->store ? df_store_is_cached(w->store, layer, expert) : true;
}

void df_weights_expert_stats(const df_weights *w, df_store_stats *st) {
    memset(st, 0, sizeof *st);
    if (w->has_ex && w->ex.stats) w->ex.stats(w->ex.ud, st);
}
