/* memplan.c — memory plan and streaming setup (see memplan.h). */
#include "runtime/plan.h"
#include "weights/dense_stream.h"
#include "weights/expert_store.h"
#include "model/model.h"
#include "format/pack.h"

#include <errno.h>

static uint64_t read_u64_file(const char *path, bool *ok) {
    char *d = NULL;
    size_t n = 0;
    *ok = false;
    if (df_read_file(path, &d, &n) != DF_OK) { df_err_clear(); return 0; }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, 10);
    *ok = end != d && !errno;
    free(d);
    return v;
}

/* Memory cgroup headroom (v1 or v2) of this process; UINT64_MAX if unlimited/unknown. */
static uint64_t cgroup_headroom(void) {
    char *d = NULL;
    size_t n = 0;
    if (df_read_file("/proc/self/cgroup", &d, &n) != DF_OK) { df_err_clear(); return UINT64_MAX; }
    uint64_t best = UINT64_MAX;
    for (char *line = d; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2) {
            char lim[1200], use[1200];
            bool v1 = !strncmp(c1 + 1, "memory:", 7) || (c2 - c1 - 1 == 6 && !strncmp(c1 + 1, "memory", 6));
            bool v2 = c2 == c1 + 1 && line[0] == '0';
            if (v1) {
                snprintf(lim, sizeof lim, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", c2 + 1);
                snprintf(use, sizeof use, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", c2 + 1);
            } else if (v2) {
                snprintf(lim, sizeof lim, "/sys/fs/cgroup%s/memory.max", c2 + 1);
                snprintf(use, sizeof use, "/sys/fs/cgroup%s/memory.current", c2 + 1);
            }
            if (v1 || v2) {
                bool ok1, ok2;
                uint64_t l = read_u64_file(lim, &ok1), u = read_u64_file(use, &ok2);
                if (ok1 && l < (1ull << 60)) {
                    uint64_t h = ok2 && u < l ? l - u : 0;
                    if (h < best) best = h;
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(d);
    return best;
}

uint64_t df_mem_available(void) {
    char *d = NULL;
    size_t n = 0;
    uint64_t avail = 0;
    if (df_read_file("/proc/meminfo", &d, &n) == DF_OK) {
        char *p = strstr(d, "MemAvailable:");
        if (p) avail = strtoull(p + 13, NULL, 10) * 1024;
        free(d);
    } else df_err_clear();
    uint64_t cg = cgroup_headroom();
    return cg < avail ? cg : avail;
}

int df_memplan_compute(const df_memplan_in *in, df_memplan *out) {
    memset(out, 0, sizeof *out);
    out->in = *in;
    df_memplan_in *p = &out->in;
    if (!p->overhead_bytes) p->overhead_bytes = 64ull << 20;
    if (p->min_slots <= 0) p->min_slots = 2;
    if (!p->mem_reserve) p->mem_reserve = 1ull << 30;
    if (p->mem_limit) out->limit = p->mem_limit;
    else {
        uint64_t av = p->mem_available ? p->mem_available : df_mem_available();
        out->limit = av > p->mem_reserve ? av - p->mem_reserve : 0;
        out->limit_from_ram = true;
    }
    uint64_t fixed = 0;
    if (!df_add_ok(p->dense_bytes, p->kv_bytes, &fixed) || !df_add_ok(fixed, p->scratch_bytes, &fixed) ||
        !df_add_ok(fixed, p->overhead_bytes, &fixed))
        return df_err(DF_ERR_RANGE, "memory plan: size overflow");
    out->fixed_bytes = fixed;
    int minw = p->min_slots < p->n_experts_total ? p->min_slots : p->n_experts_total;
    uint64_t need = fixed + (uint64_t)(minw > 0 ? minw : 0) * p->slot_bytes;
    out->need_min = need;
    if (need > out->limit) {
        char a[32], b[32], c[32], d[32], e[32], f[32];
        return df_err(DF_ERR_RANGE,
                      "memory limit %s%s is too small: need at least %s (dense weights %s + KV cache %s + "
                      "scratch/overhead %s + %d expert slots of %s)",
                      df_fmt_bytes(out->limit, a, sizeof a), out->limit_from_ram ? " (available RAM - reserve)" : "",
                      df_fmt_bytes(need, b, sizeof b), df_fmt_bytes(p->dense_bytes, c, sizeof c),
                      df_fmt_bytes(p->kv_bytes, d, sizeof d),
                      df_fmt_bytes(p->scratch_bytes + p->overhead_bytes, e, sizeof e), minw,
                      df_fmt_bytes(p->slot_bytes, f, sizeof f));
    }
    uint64_t room = out->limit - fixed;
    uint64_t ns = p->slot_bytes ? room / p->slot_bytes : 0;
    if (ns >= (uint64_t)p->n_experts_total) {
        ns = (uint64_t)p->n_experts_total;
        out->all_resident = true;
    }
    out->n_slots = (int)ns;
    out->cache_bytes = ns * p->slot_bytes;
    out->frac_resident = p->n_experts_total ? (double)ns / p->n_experts_total : 1.0;
    return DF_OK;
}

const char *df_memplan_str(const df_memplan *p, char *buf, size_t cap) {
    char l[32], d[32], k[32], s[32], o[32], c[32], sl[32], t[32], f[32];
    snprintf(buf, cap,
             "memory plan: limit %s%s\n"
             "  dense weights  %s\n"
             "  KV cache       %s\n"
             "  scratch        %s\n"
             "  overhead       %s\n"
             "  expert cache   %s = %d slots x %s (%.1f%% of %d experts, %s on disk)%s\n"
             "  free           %s",
             df_fmt_bytes(p->limit, l, sizeof l), p->limit_from_ram ? " (available RAM - reserve)" : "",
             df_fmt_bytes(p->in.dense_bytes, d, sizeof d), df_fmt_bytes(p->in.kv_bytes, k, sizeof k),
             df_fmt_bytes(p->in.scratch_bytes, s, sizeof s), df_fmt_bytes(p->in.overhead_bytes, o, sizeof o),
             df_fmt_bytes(p->cache_bytes, c, sizeof c), p->n_slots, df_fmt_bytes(p->in.slot_bytes, sl, sizeof sl),
             100.0 * p->frac_resident, p->in.n_experts_total, df_fmt_bytes(p->in.expert_total_bytes, t, sizeof t),
             p->all_resident ? " — all resident" : "",
             df_fmt_bytes(p->limit - p->fixed_bytes - p->cache_bytes, f, sizeof f));
    return buf;
}

/* ---- streaming setup -------------------------------------------------------------------- */

static bool model_has_moe(const df_model *m) {
    for (int l = 0; l < m->hp.n_layer; l++)
        if (m->layers[l].is_moe) return true;
    return false;
}

static int plan_ctx(const df_model *m) {
    int n = m->hp.n_ctx_train > 0 && m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    const char *e = getenv("DELTAFIN_PLAN_CTX");
    if (e && atoi(e) > 0) n = atoi(e);
    return n;
}

/* the context's default batch, never more than the planned context */
static int plan_batch(const df_model *m) {
    int c = plan_ctx(m);
    return c < 512 ? c : 512;
}

void df_memplan_model(const df_model *m, df_mem_plan *mp) {
    df_model_mem_plan(m, plan_ctx(m), plan_batch(m), mp);
}

void df_plan_resident(df_model *m) {
    df_mem_plan mp;
    df_model_mem_plan(m, plan_ctx(m), plan_batch(m), &mp);
    uint64_t limit = m->params.mem_limit;
    bool from_ram = !limit;
    if (!limit) {
        uint64_t av = df_mem_available(), res = m->params.mem_reserve ? m->params.mem_reserve : (1ull << 30);
        limit = av > res ? av - res : 0;
    }
    int n_moe = 0;
    for (int l = 0; l < m->hp.n_layer; l++) n_moe += m->layers[l].is_moe;
    const df_dense_plan *dp = df_dense_get_plan(m);
    m->plan = (deltafin_plan){
        .limit = limit, .limit_from_ram = from_ram, .experts_stream = false,
        .dense_bytes = df_dense_plan_bytes(m, mp.dense_bytes), .kv_bytes = mp.kv_bytes,
        .scratch_bytes = mp.scratch_bytes, .overhead_bytes = 64ull << 20,
        .n_experts_total = n_moe * m->hp.n_expert, .expert_total_bytes = mp.expert_bytes,
        .dense_layers_streamed = dp ? dp->n_streamed : 0,
    };
}

int df_stream_decide(df_model *m, bool *stream) {
    *stream = false;
    if (!model_has_moe(m)) return DF_OK;
    if (m->pack) { *stream = true; return DF_OK; } /* packed experts are only reachable through the store */
    int engine = DF_IO_AUTO;
    if (m->params.io_engine) {
        int rc = df_io_engine_parse(m->params.io_engine, &engine);
        if (rc) return rc;
    }
    const char *env = getenv("DELTAFIN_STREAM");
    if (env && !strcmp(env, "0")) return DF_OK;
    if ((env && !strcmp(env, "1")) || engine != DF_IO_AUTO) { *stream = true; return DF_OK; }
    df_mem_plan mp;
    df_model_mem_plan(m, plan_ctx(m), plan_batch(m), &mp);
    uint64_t limit = m->params.mem_limit;
    if (!limit) {
        uint64_t av = df_mem_available(), res = m->params.mem_reserve ? m->params.mem_reserve : (1ull << 30);
        limit = av > res ? av - res : 0;
    }
    uint64_t need = mp.dense_bytes + mp.expert_bytes + mp.kv_bytes + mp.scratch_bytes + (64ull << 20);
    *stream = need > limit;
    return DF_OK;
}

static int build_locs(df_model *m, df_expert_loc **locs_out, uint64_t *total) {
    int L = m->hp.n_layer, E = m->hp.n_expert;
    size_t n = (size_t)L * E * DF_EXPERT_NPARTS;
    df_expert_loc *locs = df_calloc(n ? n : 1, sizeof *locs);
    if (!locs) return DF_ERR_NOMEM;
    *total = 0;
    for (int l = 0; l < L; l++) {
        if (!m->layers[l].is_moe) continue;
        for (int e = 0; e < E; e++)
            for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
                df_expert_loc *lc = &locs[((size_t)l * E + e) * DF_EXPERT_NPARTS + p];
                int rc = df_model_expert_loc(m, l, e, p, lc);
                if (rc) { free(locs); return rc; }
                *total += lc->nbytes;
            }
    }
    *locs_out = locs;
    return DF_OK;
}

int df_stream_slot_info(df_model *m, uint64_t *slot_bytes, int *n_pairs) {
    *slot_bytes = 0;
    *n_pairs = 0;
    df_expert_loc *locs = NULL;
    uint64_t total = 0;
    int rc = build_locs(m, &locs, &total);
    if (rc) return rc;
    df_store_params sp = df_store_default_params();
    df_store_record *recs = NULL;
    if (m->pack) {
        recs = df_calloc((size_t)m->hp.n_layer * m->hp.n_expert + 1, sizeof *recs);
        if (!recs) { free(locs); return DF_ERR_NOMEM; }
        df_pack_locs(m->pack, locs, recs);
        sp.records = recs;
    }
    sp.n_layers = m->hp.n_layer;
    sp.n_experts = m->hp.n_expert;
    sp.locs = locs;
    *slot_bytes = total ? df_store_slot_bytes(&sp) : 0;
    for (int l = 0; l < m->hp.n_layer; l++) *n_pairs += m->layers[l].is_moe ? m->hp.n_expert : 0;
    free(recs);
    free(locs);
    return DF_OK;
}

int df_stream_attach(df_model *m) {
    df_expert_loc *locs = NULL;
    uint64_t total = 0;
    int rc = build_locs(m, &locs, &total);
    if (rc) return rc;
    const char **paths = df_calloc((size_t)m->gguf->n_shards, sizeof *paths);
    if (!paths) { free(locs); return DF_ERR_NOMEM; }
    for (int i = 0; i < m->gguf->n_shards; i++) paths[i] = m->gguf->shards[i].path;
    df_store_params sp = df_store_default_params();
    df_store_record *recs = NULL;
    int64_t *n_in = NULL;
    if (m->pack) { /* one checksummed read per expert */
        recs = df_calloc((size_t)m->hp.n_layer * m->hp.n_expert + 1, sizeof *recs);
        if (!recs) { rc = DF_ERR_NOMEM; goto out; }
        int L = df_pack_n_layers(m->pack), E = df_pack_n_experts(m->pack);
        if (E != m->hp.n_expert || L > m->hp.n_layer) {
            rc = df_err(DF_ERR_FORMAT, "%s: pack has %d layers x %d experts, model %d x %d", m->path, L, E,
                        m->hp.n_layer, m->hp.n_expert);
            goto out;
        }
        df_pack_locs(m->pack, locs, recs); /* layers >= L keep zero entries (no experts) */
        sp.records = recs;
    }
    sp.n_layers = m->hp.n_layer;
    sp.n_experts = m->hp.n_expert;
    sp.locs = locs;
    n_in = df_calloc((size_t)m->hp.n_layer * DF_EXPERT_NPARTS, sizeof *n_in);
    if (!n_in) { rc = DF_ERR_NOMEM; goto out; }
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; m->layers[l].is_moe && p < DF_EXPERT_NPARTS; p++)
            df_model_expert_shape(m, l, p, &n_in[l * DF_EXPERT_NPARTS + p], NULL, NULL);
    sp.n_in = n_in; /* the store repacks experts to the kernels' layout after reading */
    sp.paths = paths;
    sp.n_files = m->gguf->n_shards;
    sp.min_slots = 2;
    if (m->params.io_engine) {
        rc = df_io_engine_parse(m->params.io_engine, &sp.io.engine);
        if (rc) goto out;
    }
    uint64_t slot = df_store_slot_bytes(&sp);
    df_mem_plan mp;
    df_model_mem_plan(m, plan_ctx(m), plan_batch(m), &mp);
    df_memplan_in in = {0};
    in.dense_bytes = df_dense_plan_bytes(m, mp.dense_bytes); /* resident part + layer buffers */
    in.kv_bytes = mp.kv_bytes;
    in.scratch_bytes = mp.scratch_bytes;
    in.expert_total_bytes = total;
    in.slot_bytes = slot;
    int n_moe = 0;
    for (int l = 0; l < m->hp.n_layer; l++) n_moe += m->layers[l].is_moe;
    in.n_experts_total = n_moe * m->hp.n_expert;
    in.min_slots = 2;
    in.mem_limit = m->params.mem_limit;
    in.mem_reserve = m->params.mem_reserve;
    const char *cache_env = getenv("DELTAFIN_EXPERT_CACHE"); /* tests: exact cache size */
    df_memplan plan;
    uint64_t cb = m->params.cache_bytes;
    if (!cb && cache_env && *cache_env) {
        rc = df_parse_size(cache_env, &cb);
        if (rc) { rc = df_err(DF_ERR_INVALID, "DELTAFIN_EXPERT_CACHE='%s': bad size", cache_env); goto out; }
    }
    if (cb) in.mem_limit = in.dense_bytes + in.kv_bytes + in.scratch_bytes + (64ull << 20) + cb;
    rc = df_memplan_compute(&in, &plan);
    if (rc) { rc = df_err_prefix(rc, "%s", m->path); goto out; }
    char buf[1024];
    df_log(DF_LOG_INFO, "%s", df_memplan_str(&plan, buf, sizeof buf));
    sp.budget_bytes = plan.cache_bytes;
    sp.prefetch = m->params.prefetch;
    const df_dense_plan *dp = df_dense_get_plan(m);
    m->plan = (deltafin_plan){
        .limit = plan.limit, .limit_from_ram = plan.limit_from_ram, .experts_stream = true,
        .dense_bytes = in.dense_bytes, .kv_bytes = in.kv_bytes, .scratch_bytes = in.scratch_bytes,
        .overhead_bytes = plan.in.overhead_bytes, .cache_bytes = plan.cache_bytes, .slot_bytes = slot,
        .n_slots = plan.n_slots, .n_experts_total = in.n_experts_total, .expert_total_bytes = total,
        .dense_layers_streamed = dp ? dp->n_streamed : 0,
    };
    df_store *s = NULL;
    rc = df_store_create(&sp, &s);
    if (rc) { rc = df_err_prefix(rc, "%s", m->path); goto out; }
    df_expert_provider pv = df_store_provider(s, true);
    df_model_set_expert_provider(m, &pv);
out:
    free(recs);
    free(locs);
    free(paths);
    free(n_in);
    return rc;
}

df_store *df_stream_store(df_model *m) {
    if (!m || !m->has_provider) return NULL;
    df_expert_provider probe = df_store_provider(NULL, true);
    return m->provider.acquire == probe.acquire ? m->provider.ud : NULL;
}

int df_stream_configure(df_model *m, int prefetch, const char *hot_file, const char *preload) {
    df_store *s = df_stream_store(m);
    if (!s) {
        if (hot_file || preload)
            df_log(DF_LOG_INFO, "experts are resident: --hot/--preload have no effect");
        return DF_OK;
    }
    if (prefetch >= 0) df_store_set_prefetch(s, prefetch);
    int L = m->hp.n_layer, E = m->hp.n_expert;
    for (int k = 0; k < 2; k++) {
        const char *src = k == 0 ? preload : hot_file;
        if (!src) continue;
        int *ls = NULL, *es = NULL, n = 0;
        int rc = k == 0 ? df_store_parse_preload(src, L, E, &ls, &es, &n)
                        : df_store_read_hot_file(src, L, E, &ls, &es, &n);
        if (rc) return rc;
        /* skip entries of layers without routed experts */
        int j = 0;
        for (int i = 0; i < n; i++)
            if (m->layers[ls[i]].is_moe) { ls[j] = ls[i]; es[j] = es[i]; j++; }
        int pinned = df_store_pin_hot(s, ls, es, j);
        free(ls);
        free(es);
        if (pinned < 0) return pinned;
        df_log(DF_LOG_INFO, "%s: pinned %d of %d experts in the hot set", k == 0 ? "--preload" : "--hot", pinned, j);
    }
    return DF_OK;
}
