/* session.c — deltafin_ctx: one sequence's F16 KV cache and scratch, the forward pass of the
 * transformer over a batch of tokens (matrix-matrix work, n_batch tokens per step), logits,
 * cancellation and statistics.
 * Layer skeleton (formats.md §3.0): h += Attn(RMSNorm(h)); h += FFN_or_MoE(RMSNorm(h)).
 * Invariant: no allocation inside deltafin_decode except growing the all-logits buffer once
 * per call; all scratch is carved at create time from one block (df_session_scratch_bytes).
 * Threading: a ctx is used by one thread at a time; its own pool parallelizes the work.
 * deltafin_ctx_cancel() may be called from any thread or a signal handler. */
#include "forward/session.h"
#include "weights/weights.h"
#include "weights/dense_stream.h"
#include "weights/expert_store.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include <math.h>
#include <sys/mman.h>


/* ---- architecture hooks ------------------------------------------------------------------
 * One line per architecture with forward hooks; the others run the generic blocks. */
extern const df_arch_fwd df_fwd_deepseek2, df_fwd_deepseek32, df_fwd_glm_dsa, df_fwd_deepseek4;
extern const df_arch_fwd df_fwd_kimi_k3;
extern const df_arch_fwd df_fwd_qwen3next;
extern const df_arch_fwd df_fwd_qwen35moe;

const df_arch_fwd *df_arch_fwd_find(const char *name) {
    static const df_arch_fwd generic = {.name = "generic"};
    const df_arch_fwd *all[] = {&df_fwd_deepseek2, &df_fwd_deepseek32, &df_fwd_glm_dsa, &df_fwd_deepseek4, &df_fwd_kimi_k3,
                                &df_fwd_qwen3next, &df_fwd_qwen35moe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    return &generic;
}

/* ---- scratch plan --------------------------------------------------------------------------- */
typedef struct {
    uint64_t h, x, q, k, v, o, y, f, rc, act, router, sel, e_cnt, e_list, xg, yslot, attn, logits, arch;
    uint64_t total;
    int fw;
} scratch_plan;

static uint64_t a64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

static void plan_scratch(const df_model *m, int n_batch, int n_threads, scratch_plan *p) {
    const df_hparams *hp = &m->hp;
    const uint64_t nb = (uint64_t)n_batch;
    const uint64_t nq = (uint64_t)hp->n_head * hp->n_embd_head_k;
    const uint64_t nk = (uint64_t)hp->n_head_kv * hp->n_embd_head_k;
    const uint64_t nv = (uint64_t)hp->n_head_kv * hp->n_embd_head_v;
    const uint64_t no = (uint64_t)hp->n_head * hp->n_embd_head_v;
    uint64_t fw = (uint64_t)hp->n_ff;
    if ((uint64_t)hp->n_ff_exp > fw) fw = (uint64_t)hp->n_ff_exp;
    if ((uint64_t)hp->n_ff_shexp > fw) fw = (uint64_t)hp->n_ff_shexp;
    if (nq + nk + nv > fw) fw = nq + nk + nv;
    for (int l = 0; l < hp->n_layer; l++) {
        const df_layer *L = &m->layers[l];
        if (L->gate_shexp && (uint64_t)L->gate_shexp->ne[1] > fw) fw = (uint64_t)L->gate_shexp->ne[1];
    }
    if (fw < 1) fw = 1;
    p->fw = (int)fw;
    uint64_t act = 64;
    for (int i = 0; i < m->n_bound; i++) {
        /* every bound tensor may be a matmul's weight (1-D ones too: qwen2moe's shared-expert gate) */
        const df_tensor *t = &m->tensors[i];
        uint64_t b = df_act_bytes(t->type, t->ne[0], (int64_t)nb);
        if (b > act) act = b;
    }
    const uint64_t E = (uint64_t)(hp->n_expert > 0 ? hp->n_expert : 1);
    const uint64_t K = (uint64_t)(hp->n_expert_used > 0 ? hp->n_expert_used : 1);
    const uint64_t D = (uint64_t)hp->n_embd;
    p->h = a64(nb * D * 4);
    p->x = p->h;
    p->q = a64(nb * nq * 4);
    p->k = a64(nb * nk * 4);
    p->v = a64(nb * nv * 4);
    p->o = a64(nb * no * 4);
    p->y = p->h;
    p->f = a64(nb * fw * 4);
    p->rc = a64(nb * (uint64_t)(hp->n_rot > 0 ? hp->n_rot : 2) * 4);
    p->act = a64(act);
    bool moe = hp->n_expert > 0;
    p->router = moe ? a64(nb * E * 4) : 0;
    p->sel = moe ? a64(nb * K * 4) : 0;
    p->e_cnt = moe ? a64((E + 1) * 4) : 0;
    p->e_list = moe ? a64(nb * K * 4) : 0;
    p->xg = moe ? a64(nb * D * 4) : 0;
    p->yslot = moe ? a64(nb * K * D * 4) : 0;
    p->attn = (uint64_t)(n_threads > 0 ? n_threads : 1) *
              df_attn_scratch_per_thread(hp->n_embd_head_k, hp->n_embd_head_v);
    p->logits = a64((uint64_t)hp->n_vocab * 4);
    const df_arch_fwd *fwd = df_arch_fwd_find(m->arch->name);
    p->arch = fwd->arch_scratch ? a64(fwd->arch_scratch(m, n_batch)) : 0;
    p->total = p->h + p->x + p->q + p->k + p->v + p->o + p->y + 2 * p->f + p->rc + p->act +
               2 * p->router + 2 * p->sel + 4 * p->e_cnt + p->e_list + 2 * p->xg + p->yslot +
               a64(p->attn) + p->logits + p->arch;
}

uint64_t df_session_scratch_bytes(const df_model *m, int n_batch, int n_threads) {
    scratch_plan p;
    plan_scratch(m, n_batch, n_threads, &p);
    return p.total;
}

/* ---- create / free ---------------------------------------------------------------------- */
deltafin_ctx_params deltafin_ctx_default_params(void) {
    deltafin_ctx_params p = {.n_ctx = 0, .n_batch = 512, .n_threads = 0};
    return p;
}

/* A context's KV cache, scratch and recurrent state: zeroed pages, all of them faulted in at
 * creation (as llama.cpp clears its KV buffer), so the resident size is the plan's from the
 * first token on and does not creep up as positions and batch sizes first reach a page (a
 * server's RSS stays flat under load: scripts/load_test_mem.sh). */
static void *anon(uint64_t n) {
    void *p = mmap(NULL, (size_t)(n ? n : 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int deltafin_ctx_create(deltafin_model *m, const deltafin_ctx_params *pp, deltafin_ctx **out) {
    *out = NULL;
    deltafin_ctx_params p = pp ? *pp : deltafin_ctx_default_params();
    const df_hparams *hp = &m->hp;
    if (m->meta_only) return df_err(DF_ERR_INVALID, "model was loaded for metadata only");
    if (hp->n_expert_groups > 256 || (hp->n_expert_groups > 1 && hp->n_expert % hp->n_expert_groups))
        return df_err(DF_ERR_UNSUPPORTED, "expert_group_count %d not supported", hp->n_expert_groups);
    for (int l = 0; l < hp->n_layer; l++)
        if (m->layers[l].is_moe && (!m->w || !m->w->has_ex))
            return df_err(DF_ERR_INVALID, "model loaded without routed experts and no expert provider set");
    /* the memory plan reserved KV for plan.n_seq sequences of plan.n_ctx tokens and scratch
     * for prompt chunks of plan.n_batch: under a memory limit a context beyond that is refused
     * (the process would leave the limit), without one it is allowed */
    const deltafin_plan *pl = &m->plan;
    if (p.n_ctx <= 0) p.n_ctx = pl->n_ctx > 0 ? pl->n_ctx : hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.n_ctx <= 0) p.n_ctx = 4096;
    if (p.n_ctx > (1 << 24)) return df_err(DF_ERR_INVALID, "n_ctx %d too large", p.n_ctx);
    if (p.n_batch <= 0) p.n_batch = 512;
    if (pl->n_batch > 0 && p.n_batch > pl->n_batch) p.n_batch = pl->n_batch;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (m->params.mem_limit && pl->n_ctx > 0 && p.n_ctx > pl->n_ctx)
        return df_err(DF_ERR_RANGE, "a context of %d tokens exceeds the memory plan (KV for %d tokens x %d "
                      "sequences under --mem-limit): load the model with that context (-c %d)",
                      p.n_ctx, pl->n_ctx, pl->n_seq, p.n_ctx);
    if (m->params.mem_limit && pl->n_seq > 0 && atomic_fetch_add(&m->n_ctx_live, 1) >= pl->n_seq) {
        atomic_fetch_sub(&m->n_ctx_live, 1);
        return df_err(DF_ERR_RANGE, "the memory plan has KV for %d sequence%s (in use); plan more at load "
                      "(--parallel / n_seq)", pl->n_seq, pl->n_seq == 1 ? "" : "s");
    }
    const bool counted = m->params.mem_limit && pl->n_seq > 0;
    int nth = p.n_threads > 0 ? p.n_threads : m->params.n_threads;
    deltafin_ctx *c = df_calloc(1, sizeof *c);
    if (!c) {
        if (counted) atomic_fetch_sub(&m->n_ctx_live, 1);
        return DF_ERR_NOMEM;
    }
    c->m = m;
    c->counted = counted;
    c->w = m->w;
    c->fwd = df_arch_fwd_find(m->arch->name);
    c->n_ctx = p.n_ctx;
    c->n_batch = p.n_batch;
    atomic_init(&c->cancel, 0);
    c->pool = df_pool_create(nth);
    if (!c->pool) { free(c); return df_err(DF_ERR_NOMEM, "cannot create thread pool"); }
    c->n_threads = df_pool_size(c->pool);

    c->k_l = df_calloc((size_t)hp->n_layer * 2, sizeof(char *));
    c->k_row = df_calloc((size_t)hp->n_layer * 2, sizeof(int64_t));
    c->k_rowb = df_calloc((size_t)hp->n_layer * 2, sizeof(uint64_t));
    if (!c->k_l || !c->k_row || !c->k_rowb) { deltafin_ctx_free(c); return DF_ERR_NOMEM; }
    c->v_l = c->k_l + hp->n_layer;
    c->v_row = c->k_row + hp->n_layer;
    c->v_rowb = c->k_rowb + hp->n_layer;
    df_model_kv_types(m, &c->type_k, &c->type_v); /* checked at load (df_model_kv_check) */
    df_model_kv_rot(m, &c->rot_k, &c->rot_v);
    c->kv_bytes = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        df_model_kv_row(m, l, &c->k_row[l], &c->v_row[l]);
        c->k_rowb[l] = df_type_row_bytes(c->type_k, c->k_row[l]);
        c->v_rowb[l] = df_type_row_bytes(c->type_v, c->v_row[l]);
        c->kv_bytes += (c->k_rowb[l] + c->v_rowb[l]) * (uint64_t)c->n_ctx;
    }
    c->kv_mem = anon(c->kv_bytes);
    if (!c->kv_mem) { deltafin_ctx_free(c); return df_err(DF_ERR_NOMEM, "cannot allocate the KV cache (%llu bytes)", (unsigned long long)c->kv_bytes); }
    char *kvp = c->kv_mem;
    for (int l = 0; l < hp->n_layer; l++) {
        c->k_l[l] = kvp; kvp += c->k_rowb[l] * (uint64_t)c->n_ctx;
        c->v_l[l] = kvp; kvp += c->v_rowb[l] * (uint64_t)c->n_ctx;
    }

    scratch_plan sp;
    plan_scratch(m, c->n_batch, c->n_threads, &sp);
    c->mem = anon(sp.total);
    if (!c->mem) { deltafin_ctx_free(c); return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes of scratch", (unsigned long long)sp.total); }
    c->mem_bytes = sp.total;
    char *q = c->mem;
#define CARVE(ptr, n) do { (ptr) = (void *)q; q += (n); } while (0)
    CARVE(c->h, sp.h); CARVE(c->x, sp.x); CARVE(c->q, sp.q); CARVE(c->k, sp.k); CARVE(c->v, sp.v);
    CARVE(c->o, sp.o); CARVE(c->y, sp.y); CARVE(c->fa, sp.f); CARVE(c->fb, sp.f); CARVE(c->rc, sp.rc);
    CARVE(c->act, sp.act); c->act_bytes = sp.act;
    CARVE(c->router, sp.router); CARVE(c->selbuf, sp.router); CARVE(c->sel, sp.sel); CARVE(c->selw, sp.sel);
    CARVE(c->e_cnt, sp.e_cnt); CARVE(c->e_off, sp.e_cnt); CARVE(c->e_union, sp.e_cnt); CARVE(c->e_local, sp.e_cnt);
    CARVE(c->e_list, sp.e_list); CARVE(c->xg, sp.xg); CARVE(c->yg, sp.xg); CARVE(c->yslot, sp.yslot);
    CARVE(c->attn_scr, a64(sp.attn)); CARVE(c->logits, sp.logits);
    c->arch_scr_bytes = sp.arch; CARVE(c->arch_scr, sp.arch);
#undef CARVE
    DF_ASSERT((uint64_t)(q - (char *)c->mem) <= sp.total);
    if (!hp->n_expert) c->yg = c->y; /* unused */
    if (m->arch->state_bytes) {
        c->rs_bytes = m->arch->state_bytes(m);
        c->rs = anon(c->rs_bytes);
        c->rs_snap = anon(c->rs_bytes);
        c->rs_snap_pos = -1;
        c->hist = df_malloc(sizeof(int32_t) * (size_t)c->n_ctx);
        if (!c->rs || !c->rs_snap || !c->hist) { deltafin_ctx_free(c); return df_err(DF_ERR_NOMEM, "cannot allocate the recurrent state (%llu bytes)", (unsigned long long)c->rs_bytes); }
    }
    /* the pass this ctx may lead: a segment per sequence (each has >= 1 row) */
    c->seg = df_malloc(sizeof(df_seg) * (size_t)c->n_batch);
    c->seg_end = df_malloc(sizeof(int32_t) * (size_t)c->n_batch);
    c->rows_kept = df_malloc(sizeof(int32_t) * (size_t)c->n_batch);
    c->e_mark = df_calloc((size_t)(hp->n_expert > 0 ? hp->n_expert : 1), 1);
    if (!c->seg || !c->seg_end || !c->rows_kept || !c->e_mark) { deltafin_ctx_free(c); return DF_ERR_NOMEM; }
    c->attn_stride = df_attn_scratch_per_thread(hp->n_embd_head_k, hp->n_embd_head_v);
    c->logits_cap = 1;
    c->n_logits = 0;
    c->acct_kv = c->kv_bytes + 2 * c->rs_bytes;
    c->acct_scratch = c->mem_bytes;
    atomic_fetch_add(&m->kv_live, c->acct_kv);
    atomic_fetch_add(&m->scratch_live, c->acct_scratch);
    *out = c;
    return DF_OK;
}

void deltafin_ctx_free(deltafin_ctx *c) {
    if (!c) return;
    if (c->counted) atomic_fetch_sub(&c->m->n_ctx_live, 1);
    atomic_fetch_sub(&c->m->kv_live, c->acct_kv);
    atomic_fetch_sub(&c->m->scratch_live, c->acct_scratch);
    if (c->pool) df_pool_free(c->pool);
    if (c->kv_mem) munmap(c->kv_mem, (size_t)(c->kv_bytes ? c->kv_bytes : 1));
    free(c->k_l);
    free(c->k_row);
    free(c->k_rowb);
    if (c->logits_cap > 1 && c->logits) free(c->logits);
    if (c->mem) munmap(c->mem, (size_t)c->mem_bytes);
    if (c->rs) munmap(c->rs, (size_t)(c->rs_bytes ? c->rs_bytes : 1));
    if (c->rs_snap) munmap(c->rs_snap, (size_t)(c->rs_bytes ? c->rs_bytes : 1));
    free(c->hist);
    free(c->route_counts);
    free(c->seg);
    free(c->seg_end);
    free(c->rows_kept);
    free(c->e_mark);
    free(c->stage);
    free(c);
}

int deltafin_ctx_count_routes(deltafin_ctx *c) {
    const df_hparams *hp = &c->m->hp;
    if (hp->n_expert <= 0 || hp->n_expert_used <= 0) return df_err(DF_ERR_UNSUPPORTED, "model has no routed experts");
    if (!c->route_counts) {
        c->route_counts = df_calloc((size_t)hp->n_layer * (size_t)hp->n_expert, sizeof(uint32_t));
        if (!c->route_counts) return DF_ERR_NOMEM;
    } else {
        memset(c->route_counts, 0, sizeof(uint32_t) * (size_t)hp->n_layer * (size_t)hp->n_expert);
    }
    return DF_OK;
}

int deltafin_ctx_route_counts(const deltafin_ctx *c, const uint32_t **counts, int *n_layer, int *n_expert) {
    if (!c->route_counts) return df_err(DF_ERR_INVALID, "routing statistics are off (deltafin_ctx_count_routes)");
    *counts = c->route_counts;
    *n_layer = c->m->hp.n_layer;
    *n_expert = c->m->hp.n_expert;
    return DF_OK;
}

int deltafin_ctx_set_route_trace(deltafin_ctx *c,
                                 void (*fn)(void *ud, int layer, int n_tokens, int k, const int32_t *experts),
                                 void *ud) {
    const df_hparams *hp = &c->m->hp;
    if (fn && (hp->n_expert <= 0 || hp->n_expert_used <= 0)) return df_err(DF_ERR_UNSUPPORTED, "model has no routed experts");
    c->route_trace = fn;
    c->route_trace_ud = ud;
    return DF_OK;
}

int deltafin_ctx_set_matmul_observer(deltafin_ctx *c, deltafin_matmul_fn fn, void *ud) {
    c->obs.fn = fn;
    c->obs.ud = fn ? ud : NULL;
    return DF_OK;
}

void df_mm_observe(const df_mm_obs *obs, const df_tensor *w, int matrix, int n_matrix, bool per_expert,
                   const float *X, int64_t ldx, int n) {
    if (!obs || !obs->fn || n <= 0) return;
    const deltafin_matmul_info mm = {.tensor = w->info ? w->info->name : "?", .matrix = matrix, .n_matrix = n_matrix,
                                     .per_expert = per_expert, .n_in = (int)w->ne[0], .n_rows = n, .x = X, .ldx = ldx};
    obs->fn(obs->ud, &mm);
}

int deltafin_ctx_set_routing(deltafin_ctx *c, const deltafin_routing *r) {
    const df_hparams *hp = &c->m->hp;
    deltafin_routing z = {0};
    if (!r) r = &z;
    const bool on = r->experts_per_token != 0 || r->expert_top_p != 0.0f || r->cache_aware != 0.0f;
    if (on && (hp->n_expert <= 0 || hp->n_expert_used <= 0))
        return df_err(DF_ERR_UNSUPPORTED, "lossy routing: the model has no routed experts");
    if (r->experts_per_token < 0 || r->experts_per_token > hp->n_expert_used)
        return df_err(DF_ERR_INVALID, "--experts-per-token %d: expected 1..%d (the model routes each token to %d experts)",
                      r->experts_per_token, hp->n_expert_used, hp->n_expert_used);
    if (!(r->expert_top_p >= 0.0f && r->expert_top_p <= 1.0f))
        return df_err(DF_ERR_INVALID, "--expert-top-p %g: expected a share in (0, 1]", (double)r->expert_top_p);
    if (!(r->cache_aware >= 0.0f && r->cache_aware < 1.0f))
        return df_err(DF_ERR_INVALID, "--cache-aware-routing %g: expected a relative margin in (0, 1)", (double)r->cache_aware);
    c->routing = *r;
    if (c->routing.experts_per_token == hp->n_expert_used) c->routing.experts_per_token = 0;
    if (c->routing.expert_top_p == 1.0f) c->routing.expert_top_p = 0.0f;
    return DF_OK;
}

void deltafin_ctx_routing_stats(const deltafin_ctx *c, uint64_t *slots, uint64_t *dropped, uint64_t *swapped) {
    if (slots) *slots = c->route_slots;
    if (dropped) *dropped = c->route_dropped;
    if (swapped) *swapped = c->route_swapped;
}

int deltafin_ctx_n_ctx(const deltafin_ctx *c) { return c->n_ctx; }
int deltafin_ctx_n_batch(const deltafin_ctx *c) { return c->n_batch; }
int deltafin_ctx_n_threads(const deltafin_ctx *c) { return c->n_threads; }
int deltafin_ctx_pos(const deltafin_ctx *c) { return c->n_past; }
/* Recurrent state: the state is a function of the whole prefix and cannot be cut back, so to
 * keep hist[0..pos) it restarts from the last prompt snapshot when that is at or before pos
 * (chat / server: the previous prompt), else from a fresh sequence, and re-decodes the rest
 * of the prefix (exact). On failure the cache is left empty (pos 0). */
static int rs_rebuild(deltafin_ctx *c, int pos) {
    int from = 0;
    if (pos > 0 && c->rs_snap_pos > 0 && c->rs_snap_pos <= pos) {
        memcpy(c->rs, c->rs_snap, (size_t)c->rs_bytes);
        from = c->rs_snap_pos;
    } else {
        memset(c->rs, 0, (size_t)c->rs_bytes);
        if (pos < c->rs_snap_pos || pos <= 0) c->rs_snap_pos = -1; /* the snapshot is past the kept prefix */
    }
    c->n_past = from;
    c->n_logits = 0;
    if (pos <= from) return DF_OK;
    int rc = deltafin_decode(c, c->hist + from, pos - from, false);
    if (rc < 0) {
        memset(c->rs, 0, (size_t)c->rs_bytes);
        c->n_past = 0;
        c->rs_snap_pos = -1;
        return df_err_prefix(rc, "re-decoding the %d kept tokens of a recurrent model", pos - from);
    }
    return DF_OK;
}

int deltafin_ctx_truncate(deltafin_ctx *c, int pos) {
    if (pos < 0 || pos > c->n_past) return df_err(DF_ERR_INVALID, "truncate: position %d outside 0..%d", pos, c->n_past);
    if (c->rs && pos < c->n_past) return rs_rebuild(c, pos);
    c->n_past = pos;
    return DF_OK;
}
void deltafin_ctx_cancel(deltafin_ctx *c) { atomic_store(&c->cancel, 1); }

void deltafin_ctx_stats(const deltafin_ctx *c, deltafin_stats *out) {
    *out = c->st;
    df_store_stats es;
    df_weights_expert_stats(c->w, &es);
    out->expert_hits = es.hits;
    out->expert_misses = es.misses;
    out->bytes_read = es.bytes_read;
    out->io_wait_ns = es.wait_ns;
    df_dense_stats ds;
    if (c->w->ds && df_dense_get_stats(c->w->ds, &ds) == DF_OK) {
        out->dense_bytes_read = ds.bytes_read;
        out->dense_wait_ns = ds.wait_ns;
        out->bytes_read += ds.bytes_read;
        out->io_wait_ns += ds.wait_ns;
    }
}

/* ---- forward ------------------------------------------------------------------------------ */
static void add_bias(float *Y, int64_t ldy, int nt, const df_tensor *b) {
    if (!b) return;
    for (int t = 0; t < nt; t++) df_add(Y + (int64_t)t * ldy, b->data, (int)b->ne[0]);
}

bool df_use_tiled_attn(int nq, int dv) {
    /* llama.cpp switches to its tiled F32 kernel for >= 64 queries when DV is a multiple of
     * the SIMD width (16 floats with AVX-512, 8 otherwise). */
    const int epr = df_kernels()->f32_epr; /* GGML_F32_EPR of the build the table stands for */
    return nq >= 64 && dv % epr == 0;
}

bool df_pass_cancelled(const deltafin_ctx *c) {
    /* a pass stops when every sequence in it was cancelled: one sequence's cancel does not
     * throw away the others' work (its tokens are decoded with theirs) */
    for (int s = 0; s < c->n_seg; s++)
        if (!atomic_load(&c->seg[s].sc->cancel)) return false;
    return c->n_seg > 0;
}

int df_layer_attn_gqa(deltafin_ctx *c, int il, int nt) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int D = hp->n_embd, dk = hp->n_embd_head_k, dv = hp->n_embd_head_v;
    const int64_t nq = (int64_t)hp->n_head * dk, nk = (int64_t)hp->n_head_kv * dk, nv = (int64_t)hp->n_head_kv * dv;
    for (int t = 0; t < nt; t++)
        df_rmsnorm(c->h + (int64_t)t * D, L->attn_norm->data, c->x + (int64_t)t * D, D, hp->eps);
    if (L->wqkv) {
        const int64_t n3 = nq + nk + nv;
        df_fw_mm(c, L->wqkv, c->x, D, nt, c->fa, n3);
        add_bias(c->fa, n3, nt, L->bqkv);
        for (int t = 0; t < nt; t++) {
            const float *r = c->fa + t * n3;
            memcpy(c->q + t * nq, r, sizeof(float) * (size_t)nq);
            memcpy(c->k + t * nk, r + nq, sizeof(float) * (size_t)nk);
            memcpy(c->v + t * nv, r + nq + nk, sizeof(float) * (size_t)nv);
        }
    } else {
        if (L->wq->type == L->wk->type && L->wq->type == L->wv->type) {
            df_quantize_act(L->wq->type, c->x, D, D, nt, c->act);
            df_fw_mm_q(c, L->wq, c->x, D, nt, c->q, nq);
            df_fw_mm_q(c, L->wk, c->x, D, nt, c->k, nk);
            df_fw_mm_q(c, L->wv, c->x, D, nt, c->v, nv);
        } else {
            df_fw_mm(c, L->wq, c->x, D, nt, c->q, nq);
            df_fw_mm(c, L->wk, c->x, D, nt, c->k, nk);
            df_fw_mm(c, L->wv, c->x, D, nt, c->v, nv);
        }
        add_bias(c->q, nq, nt, L->bq);
        add_bias(c->k, nk, nt, L->bk);
        add_bias(c->v, nv, nt, L->bv);
    }
    for (int s = 0; s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        for (int i = 0; i < sg->n; i++) {
            const int t = sg->row0 + i;
            float *qt = c->q + t * nq, *kt = c->k + t * nk;
            if (hp->qk_norm == DF_QK_NORM_HEAD) {
                for (int h = 0; h < hp->n_head; h++) df_rmsnorm(qt + h * dk, L->q_norm->data, qt + h * dk, dk, hp->eps);
                for (int h = 0; h < hp->n_head_kv; h++) df_rmsnorm(kt + h * dk, L->k_norm->data, kt + h * dk, dk, hp->eps);
            } else if (hp->qk_norm == DF_QK_NORM_FULL) {
                df_rmsnorm(qt, L->q_norm->data, qt, (int)nq, hp->eps);
                df_rmsnorm(kt, L->k_norm->data, kt, (int)nk, hp->eps);
            }
            if (hp->n_rot > 0) {
                const float *rc = c->rc + (int64_t)t * hp->n_rot;
                df_rope_apply(&m->rope, rc, qt, hp->n_head, dk);
                df_rope_apply(&m->rope, rc, kt, hp->n_head_kv, dk);
            }
            /* llama.cpp rotates Q and K (V) before a quantized cache (df_model_kv_rot) */
            if (sg->sc->rot_k) { df_fwht(qt, nq, sg->sc->rot_k); df_fwht(kt, nk, sg->sc->rot_k); }
            if (sg->sc->rot_v) df_fwht(c->v + t * nv, nv, sg->sc->rot_v);
            /* K and V are stored in the cache types (F16 rounding by default, as llama.cpp) */
            df_kv_put(sg->sc->type_k, kt, df_ctx_k(sg->sc, il, sg->pos0 + i), nk);
            df_kv_put(sg->sc->type_v, c->v + t * nv, df_ctx_v(sg->sc, il, sg->pos0 + i), nv);
        }
        /* each sequence attends its own cache, with the kernel its own pass would choose */
        df_attn_args a = {
            .n_tok = sg->n, .pos0 = sg->pos0, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
            .dk = dk, .dv = dv, .scale = hp->kq_scale, .q = c->q + (int64_t)sg->row0 * nq, .ldq = nq,
            .kc = sg->sc->k_l[il], .vc = sg->sc->v_l[il],
            .ldk = nk, .ldv = nv, .type_k = sg->sc->type_k, .type_v = sg->sc->type_v, .out = c->o + (int64_t)sg->row0 * hp->n_head * dv, .ldo = (int64_t)hp->n_head * dv,
            .f32_acc = df_use_tiled_attn(sg->n, dv), .sinks = L->attn_sinks ? L->attn_sinks->data : NULL,
            .swa = hp->layer_swa[il] ? hp->n_swa : 0, /* the cache keeps every position; the mask limits */
            .scratch = c->attn_scr, .scratch_stride = c->attn_stride,
        };
        df_attn_gqa(c->pool, &a);
        if (sg->sc->rot_v) /* the output back from the rotated V */
            df_fwht(c->o + (int64_t)sg->row0 * hp->n_head * dv, (int64_t)sg->n * hp->n_head * dv, sg->sc->rot_v);
    }
    df_fw_mm(c, L->wo, c->o, (int64_t)hp->n_head * dv, nt, c->y, D);
    add_bias(c->y, D, nt, L->bo);
    for (int64_t i = 0; i < (int64_t)nt * D; i++) c->h[i] += c->y[i];
    return DF_OK;
}

int df_layer_ffn(deltafin_ctx *c, int il, int nt) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int D = hp->n_embd;
    for (int t = 0; t < nt; t++)
        df_rmsnorm(c->h + (int64_t)t * D, L->ffn_norm->data, c->x + (int64_t)t * D, D, hp->eps);
    if (L->is_moe) {
        int rc = df_moe_forward(c, il, c->x, nt, c->y);
        if (rc < 0) return rc;
    } else {
        const int64_t ff = L->ffn_gate->ne[1];
        if (L->ffn_gate->type == L->ffn_up->type) {
            df_quantize_act(L->ffn_gate->type, c->x, D, D, nt, c->act);
            df_fw_mm_q(c, L->ffn_gate, c->x, D, nt, c->fa, ff);
            df_fw_mm_q(c, L->ffn_up, c->x, D, nt, c->fb, ff);
        } else {
            df_fw_mm(c, L->ffn_gate, c->x, D, nt, c->fa, ff);
            df_fw_mm(c, L->ffn_up, c->x, D, nt, c->fb, ff);
        }
        add_bias(c->fa, ff, nt, L->ffn_gate_b);
        add_bias(c->fb, ff, nt, L->ffn_up_b);
        df_swiglu_rows(c->fa, c->fb, nt, ff); /* row by row, as ggml_swiglu */
        df_fw_mm(c, L->ffn_down, c->fa, ff, nt, c->y, D);
        add_bias(c->y, D, nt, L->ffn_down_b);
    }
    for (int64_t i = 0; i < (int64_t)nt * D; i++) c->h[i] += c->y[i];
    return DF_OK;
}

/* the matmul groups of the pass: one per segment */
static void set_groups(deltafin_ctx *c) {
    for (int s = 0; s < c->n_seg; s++) c->seg_end[s] = c->seg[s].row0 + c->seg[s].n;
    c->grp.n = c->n_seg;
    c->grp.end = c->seg_end;
}

/* like llama.cpp's inp_out_ids: the last layer's FFN only for rows whose logits are wanted
 * (row-wise, so results are unchanged; MoE reads fewer experts). Keeps each segment's rows
 * out_lo.. and returns the rows left. */
static int select_out_rows(deltafin_ctx *c) {
    const int D = c->m->hp.n_embd;
    int n = 0;
    for (int s = 0; s < c->n_seg; s++) {
        df_seg *sg = &c->seg[s];
        const int keep = sg->n - sg->out_lo;
        for (int i = 0; i < keep; i++) c->rows_kept[n + i] = sg->row0 + sg->out_lo + i;
        sg->ids += sg->out_lo; /* its rows' tokens (hash routing reads them) */
        sg->row0 = n;
        sg->out_lo = 0;
        sg->n = keep;
        n += keep;
    }
    for (int i = 0; i < n; i++) /* rows_kept ascending, rows_kept[i] >= i: in place */
        if (c->rows_kept[i] != i)
            memmove(c->h + (int64_t)i * D, c->h + (int64_t)c->rows_kept[i] * D, sizeof(float) * (size_t)D);
    if (c->fwd->rows_select) c->fwd->rows_select(c, c->rows_kept, n);
    set_groups(c);
    return n;
}

static bool ar_late(const deltafin_ctx *c) { return c->fwd->select_late; }

/* logits of the n_out rows left after the last layer, to each segment's dst */
static int output_logits(deltafin_ctx *c, int n_out) {
    df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const int D = hp->n_embd, V = hp->n_vocab;
    if (c->fwd->pre_output) {
        int rc = c->fwd->pre_output(c, n_out);
        if (rc < 0) return rc;
    }
    for (int t = 0; t < n_out; t++)
        df_rmsnorm(c->h + (int64_t)t * D, m->output_norm->data, c->x + (int64_t)t * D, D, hp->eps);
    if (c->embd_sum) { /* embeddings (one sequence): the normalized states, no logits */
        for (int t = 0; t < n_out; t++)
            for (int d = 0; d < D; d++) c->embd_sum[d] += c->x[(int64_t)t * D + d];
        return DF_OK;
    }
    int with = 0, last = 0;
    for (int s = 0; s < c->n_seg; s++)
        if (c->seg[s].n > 0) { with++; last = s; }
    if (with == 1) { /* one sequence: straight into its logits */
        df_fw_mm(c, m->output, c->x, D, n_out, c->seg[last].dst, V);
        return DF_OK;
    }
    if (n_out > c->stage_rows) { /* grows once to the most rows a pass has had */
        float *ns = malloc(sizeof(float) * (size_t)n_out * (size_t)V);
        if (!ns) return df_err(DF_ERR_NOMEM, "cannot allocate logits for %d sequences", n_out);
        free(c->stage);
        c->stage = ns;
        c->stage_rows = n_out;
    }
    df_fw_mm(c, m->output, c->x, D, n_out, c->stage, V);
    for (int s = 0; s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        if (sg->n > 0)
            memcpy(sg->dst, c->stage + (int64_t)sg->row0 * V, sizeof(float) * (size_t)sg->n * (size_t)V);
    }
    return DF_OK;
}

/* One forward pass over the segments c->seg[0..n_seg) (rows in order, at most c->n_batch);
 * logits of each segment's rows out_lo.. go to its dst. */
static int forward_pass(deltafin_ctx *c) {
    df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    const df_tensor *te = m->tok_embd;
    const uint64_t rb = df_type_row_bytes(te->type, te->ne[0]);
    int nt = 0, n_out = 0;
    for (int s = 0; s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        for (int i = 0; i < sg->n; i++) {
            const int t = nt + i;
            const char *row = te->data ? (const char *)te->data + (uint64_t)sg->ids[i] * rb : (const char *)(c->y + (int64_t)t * D);
            if (!te->data) { /* the table stays on disk (the memory plan): this row, into y (rb <= 4 D) */
                int rc = df_weights_embd_row(m, sg->ids[i], c->y + (int64_t)t * D);
                if (rc < 0) return rc;
            }
            int rc = df_dequantize_row(te->type, row, c->h + (int64_t)t * D, D);
            if (rc < 0) return rc;
            if (hp->n_rot > 0) df_rope_cache(&m->rope, (float)(sg->pos0 + i), c->rc + (int64_t)t * hp->n_rot);
        }
        nt += sg->n;
        n_out += sg->n - sg->out_lo;
    }
    DF_ASSERT(nt <= c->n_batch);
    set_groups(c);
    const int n_run = df_hp_n_run_layers(hp); /* NextN / MTP layers are loaded, not run */
    for (int il = 0; il < n_run; il++) {
        if (df_pass_cancelled(c)) return df_err(DF_ERR_CANCELLED, "decode cancelled");
        const df_arch_fwd *ar = c->fwd;
        int rc = df_weights_layer_acquire(c->w, il); /* streamed dense layers: wait for its bytes */
        if (rc < 0) return rc;
        rc = ar->layer_attn ? ar->layer_attn(c, il, nt) : df_layer_attn_gqa(c, il, nt);
        if (rc < 0) return rc;
        if (il == n_run - 1 && n_out < nt && !ar->select_late) {
            if (n_out <= 0) return DF_OK;
            nt = select_out_rows(c);
        }
        rc = ar->layer_ffn ? ar->layer_ffn(c, il, nt) : df_layer_ffn(c, il, nt);
        if (rc < 0) return rc;
        df_weights_layer_release(c->w, il);
    }
    if (n_out <= 0) return DF_OK;
    if (ar_late(c) && n_out < nt) select_out_rows(c);
    return output_logits(c, n_out);
}

/* ---- decode: one sequence or several ------------------------------------------------------- */
static int check_seqs(const deltafin_batch_seq *sq, int ns) {
    if (ns <= 0 || !sq) return df_err(DF_ERR_INVALID, "decode: no sequences");
    const df_model *m = sq[0].ctx ? sq[0].ctx->m : NULL;
    int rc = DF_OK;
    for (int s = 0; s < ns && rc == DF_OK; s++) {
        deltafin_ctx *c = sq[s].ctx;
        if (!c) rc = df_err(DF_ERR_INVALID, "decode: sequence %d has no context", s);
        else if (c->m != m) rc = df_err(DF_ERR_INVALID, "decode: sequence %d belongs to another model", s);
        else if (c->b_in) rc = df_err(DF_ERR_INVALID, "decode: a context appears twice (sequence %d)", s);
        else if (sq[s].n <= 0 || !sq[s].ids) rc = df_err(DF_ERR_INVALID, "decode: no tokens");
        else if ((int64_t)c->n_past + sq[s].n > c->n_ctx)
            rc = df_err(DF_ERR_RANGE, "context full: %d tokens in cache + %d new > n_ctx %d", c->n_past, sq[s].n, c->n_ctx);
        for (int i = 0; rc == DF_OK && i < sq[s].n; i++)
            if (sq[s].ids[i] < 0 || sq[s].ids[i] >= m->hp.n_vocab)
                rc = df_err(DF_ERR_INVALID, "token id %d out of range (n_vocab %d)", sq[s].ids[i], m->hp.n_vocab);
        if (c) c->b_in = rc == DF_OK;
    }
    for (int s = 0; s < ns; s++)
        if (sq[s].ctx) sq[s].ctx->b_in = false;
    return rc;
}

/* the logits rows a sequence keeps: all of them (grown once per call) or its last */
static int prepare_logits(deltafin_ctx *c, int n, bool all_logits) {
    if (!all_logits || n <= c->logits_cap || c->embd_sum) return DF_OK;
    /* grows once per call (perplexity), never per token */
    float *nl = malloc((size_t)n * (size_t)c->m->hp.n_vocab * sizeof(float));
    if (!nl) return df_err(DF_ERR_NOMEM, "cannot allocate logits for %d tokens", n);
    if (c->logits_cap > 1) free(c->logits);
    else { /* the 1-row buffer inside the scratch block stays unused */ }
    c->logits = nl;
    c->logits_cap = n;
    return DF_OK;
}

/* The next pass: each unfinished sequence's next chunk of its own n_batch tokens (the chunks a
 * decode of it alone would run), in order, as many as the lead's scratch holds. */
static void plan_pass(deltafin_ctx *lead, const deltafin_batch_seq *sq, int ns) {
    const int V = lead->m->hp.n_vocab;
    int rows = 0;
    lead->n_seg = 0;
    for (int s = 0; s < ns; s++) {
        deltafin_ctx *sc = sq[s].ctx;
        const int rem = sq[s].n - sc->b_done;
        if (rem <= 0) continue;
        const int chunk = rem < sc->n_batch ? rem : sc->n_batch;
        if (rows + chunk > lead->n_batch) continue;
        df_seg *sg = &lead->seg[lead->n_seg++];
        sg->sc = sc;
        sg->ids = sq[s].ids + sc->b_done;
        sg->n_tok = chunk;
        sc->b_touched = true;
        sg->row0 = rows;
        sg->n = chunk;
        sg->pos0 = sc->n_past;
        if (sq[s].all_logits) {
            sg->out_lo = 0;
            sg->dst = sc->logits + (int64_t)sc->b_done * V;
        } else {
            sg->out_lo = sc->b_done + chunk == sq[s].n ? chunk - 1 : chunk;
            sg->dst = sc->logits;
        }
        rows += chunk;
    }
}

static int nonfinite_error(const deltafin_ctx *c, int64_t at);

static int decode_seqs(const deltafin_batch_seq *sq, int ns, deltafin_batch_info *info) {
    if (info) memset(info, 0, sizeof *info);
    for (int s = 0; sq && s < ns; s++)
        if (sq[s].ctx) atomic_store(&sq[s].ctx->cancel, 0);
    int rc = check_seqs(sq, ns);
    if (rc < 0) return rc;
    deltafin_ctx *lead = sq[0].ctx; /* the largest scratch: every sequence's chunk fits */
    for (int s = 0; s < ns; s++)
        if (sq[s].ctx->n_batch > lead->n_batch) lead = sq[s].ctx;
    for (int s = 0; s < ns && rc == DF_OK; s++) rc = prepare_logits(sq[s].ctx, sq[s].n, sq[s].all_logits);
    if (rc < 0) return rc;
    const uint64_t t0 = df_time_ns();
    for (int s = 0; s < ns; s++) {
        deltafin_ctx *c = sq[s].ctx;
        c->b_start = c->n_past;
        c->b_done = 0;
        c->b_touched = false;
        if (c->hist && sq[s].ids != c->hist + c->b_start)
            memcpy(c->hist + c->b_start, sq[s].ids, sizeof(int32_t) * (size_t)sq[s].n);
    }
    for (;;) {
        plan_pass(lead, sq, ns);
        if (lead->n_seg == 0) break;
        lead->pass_union = lead->pass_alone = 0;
        df_weights_begin(lead->w); /* serializes passes when dense layers stream */
        rc = forward_pass(lead);
        int rc_end = df_weights_end(lead->w); /* a model file changed under the pass: discard it */
        if (rc >= 0) rc = rc_end;
        if (rc < 0) break;
        for (int s = 0; s < lead->n_seg; s++) {
            const df_seg *sg = &lead->seg[s];
            sg->sc->n_past += sg->n_tok;
            sg->sc->b_done += sg->n_tok;
            if (info) info->n_tokens += sg->n_tok;
        }
        if (info) {
            info->n_passes++;
            info->n_seq_passes += lead->n_seg;
            info->expert_acquires += lead->pass_union;
            info->expert_acquires_alone += lead->pass_alone;
        }
    }
    lead->n_seg = 0;
    /* NaN/Inf logits are an error naming the weight that holds one, never token 0 forever */
    for (int s = 0; rc >= 0 && s < ns; s++) {
        const deltafin_ctx *c = sq[s].ctx;
        if (c->embd_sum) continue;
        for (int64_t i = 0, nl = (int64_t)(sq[s].all_logits ? sq[s].n : 1) * c->m->hp.n_vocab; rc >= 0 && i < nl; i++)
            if (!isfinite(c->logits[i])) rc = nonfinite_error(c, i);
    }
    if (rc < 0) {
        /* every sequence goes back to where it was: a recurrent state may have advanced over
         * part of the call, so it is rebuilt for its first b_start tokens from the history
         * (exact; an empty cache if that fails too) */
        for (int s = 0; s < ns; s++) {
            deltafin_ctx *c = sq[s].ctx;
            c->n_logits = 0;
            if (c->rs && c->b_touched) (void)rs_rebuild(c, c->b_start);
            else if (!c->rs) c->n_past = c->b_start;
        }
        return rc;
    }
    const uint64_t dt = df_time_ns() - t0;
    for (int s = 0; s < ns; s++) {
        deltafin_ctx *c = sq[s].ctx;
        const int n = sq[s].n;
        c->n_logits = c->embd_sum ? 0 : sq[s].all_logits ? n : 1;
        c->logits_all = sq[s].all_logits;
        if (c->rs && n > 1) { /* a prompt: keep its state for prefix reuse (rs_rebuild) */
            memcpy(c->rs_snap, c->rs, (size_t)c->rs_bytes);
            c->rs_snap_pos = c->n_past;
        }
        if (n == 1) { c->st.n_gen_tokens++; c->st.gen_ns += dt; }
        else { c->st.n_prompt_tokens += (uint64_t)n; c->st.prompt_ns += dt; }
        c->st.compute_ns += dt;
    }
    return DF_OK;
}

/* Non-finite logits (NaN/Inf weights, or an overflow) would be sampled as token 0 forever:
 * name the first resident weight holding a NaN/Inf instead (the error path only: the scan
 * dequantizes every resident tensor row by row). */
static int nonfinite_error(const deltafin_ctx *c, int64_t at) {
    const df_model *m = c->m;
    const int V = m->hp.n_vocab;
    float *row = NULL;
    size_t cap = 0;
    for (int i = 0; i < m->n_bound; i++) {
        const df_tensor *t = &m->tensors[i];
        if (!t->data || !t->info || t->type != t->info->type || !df_can_dequantize(t->type) || t->ne[0] <= 0) continue;
        if ((size_t)t->ne[0] > cap) {
            free(row);
            cap = (size_t)t->ne[0];
            if (!(row = malloc(cap * sizeof *row))) break;
        }
        const uint64_t rb = df_type_row_bytes(t->type, t->ne[0]);
        const int64_t nr = t->ne[1] * t->ne[2] * t->ne[3];
        for (int64_t r = 0; r < nr; r++) {
            if (df_dequantize_row(t->type, (const char *)t->data + (uint64_t)r * rb, row, t->ne[0]) < 0) break;
            for (int64_t k = 0; k < t->ne[0]; k++)
                if (!isfinite(row[k])) {
                    int rc = df_err(DF_ERR_FORMAT, "the logits are not finite (%s at token %lld, id %lld): tensor "
                                    "'%s' holds %s at row %lld element %lld (%s, row at offset %llu)",
                                    isnan(c->logits[at]) ? "NaN" : "Inf", (long long)(at / V), (long long)(at % V),
                                    t->info->name, isnan(row[k]) ? "NaN" : "Inf", (long long)r, (long long)k, m->path,
                                    (unsigned long long)(t->info->offset + (uint64_t)r * rb));
                    free(row);
                    return rc;
                }
        }
    }
    free(row);
    return df_err(DF_ERR_RANGE, "the logits are not finite (%s at token %lld, id %lld), but no resident weight of %s "
                  "holds a NaN or Inf: an activation overflowed (or a streamed weight holds one)",
                  isnan(c->logits[at]) ? "NaN" : "Inf", (long long)(at / V), (long long)(at % V), m->path);
}

int deltafin_decode(deltafin_ctx *c, const int32_t *ids, int n, bool all_logits) {
    if (n <= 0) return df_err(DF_ERR_INVALID, "decode: no tokens");
    const deltafin_batch_seq s = {.ctx = c, .ids = ids, .n = n, .all_logits = all_logits};
    return decode_seqs(&s, 1, NULL);
}

int deltafin_decode_batch(const deltafin_batch_seq *seqs, int n_seqs, deltafin_batch_info *info) {
    return decode_seqs(seqs, n_seqs, info);
}

const float *deltafin_logits(const deltafin_ctx *c, int i) {
    if (c->n_logits <= 0) return NULL;
    if (i < 0) i = c->n_logits - 1;
    if (i >= c->n_logits) return NULL;
    return c->logits + (int64_t)i * c->m->hp.n_vocab;
}
