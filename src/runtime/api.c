/* api.c — the public API's model-level queries and small utilities (include/deltafin.h):
 * status strings, size parsing, logging, the memory plan and the streaming statistics of a
 * loaded model. Everything here translates internal state into the public structs; the tools
 * (app/) see nothing else of the engine.
 * Threading: statistics may be read from any thread while contexts decode. */
#include "deltafin.h"
#include "base/util.h"
#include "model/model.h"
#include "runtime/plan.h"
#include "weights/dense_stream.h"
#include "weights/expert_store.h"
#include "weights/weights.h"
#include "kernels/kernels.h"
#include "base/sysmem.h"

#include <cjson/cJSON.h>
#include <stdarg.h>

#ifndef DF_GIT_COMMIT
#define DF_GIT_COMMIT "unknown"
#endif

const char *deltafin_status_str(int status) { return df_status_str(status); }
const char *deltafin_commit(void) { return DF_GIT_COMMIT; }

int deltafin_parse_size(const char *s, uint64_t *out) { return df_parse_size(s, out); }
const char *deltafin_fmt_bytes(uint64_t n, char *buf, size_t cap) { return df_fmt_bytes(n, buf, cap); }
uint64_t deltafin_time_ns(void) { return df_time_ns(); }
uint64_t deltafin_peak_rss(void) { return df_peak_rss(); }
uint64_t deltafin_cur_rss(void) { return df_cur_rss(); }
uint64_t deltafin_mem_available(void) { return df_mem_available(); }

void deltafin_log_set_level(int level) { df_log_set_level(level); }
int deltafin_log_get_level(void) { return df_log_get_level(); }
void deltafin_log_set_file(void *file) { df_log_set_file(file ? file : stderr); }
void deltafin_log(int level, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    df_log(level, "%s", buf);
}

int deltafin_prefetch_parse(const char *s, int *mode) { return df_prefetch_parse(s, mode); }

static const char *const g_kv_names[DELTAFIN_KV_COUNT] = {"f16", "f32", "bf16", "q8_0", "q4_0",
                                                          "q4_1", "q5_0", "q5_1", "iq4_nl"};

const char *deltafin_kv_type_name(int type) {
    return type >= 0 && type < DELTAFIN_KV_COUNT ? g_kv_names[type] : NULL;
}

int deltafin_kv_type_parse(const char *s, int *type) {
    for (int t = 0; s && t < DELTAFIN_KV_COUNT; t++)
        if (!strcasecmp(s, g_kv_names[t])) { *type = t; return DF_OK; }
    return df_err(DF_ERR_INVALID, "KV cache type '%s': expected f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl",
                  s ? s : "");
}

int deltafin_io_engine_check(const char *name) {
    int e;
    int rc = df_io_engine_parse(name, &e);
    if (rc < 0) return rc;
    if (e != DF_IO_AUTO && !df_io_engine_available(e))
        return df_err(DF_ERR_UNSUPPORTED, "read engine '%s' is not available in this build", name);
    return DF_OK;
}

int deltafin_model_n_layer(const deltafin_model *m) { return m->hp.n_layer; }

int deltafin_model_n_expert(const deltafin_model *m) { return m->hp.n_expert; }

/* ---- memory plan ------------------------------------------------------------------------ */
int deltafin_model_plan(const deltafin_model *m, deltafin_plan *out) {
    *out = m->plan;
    if (m->plan_status < 0) return df_err(m->plan_status, "%s", m->plan_error);
    return DF_OK;
}

/* the internal plan again, for its formatters */
static void to_plan(const deltafin_plan *p, df_plan *q) {
    memset(q, 0, sizeof *q);
    q->limit = p->limit; q->limit_from_ram = p->limit_from_ram; q->experts_stream = p->experts_stream;
    q->dense_bytes = p->dense_bytes; q->kv_bytes = p->kv_bytes; q->scratch_bytes = p->scratch_bytes;
    q->overhead_bytes = p->overhead_bytes; q->cache_bytes = p->cache_bytes; q->slot_bytes = p->slot_bytes;
    q->n_slots = p->n_slots; q->n_experts_total = p->n_experts_total; q->expert_total_bytes = p->expert_total_bytes;
    q->all_resident = p->all_resident;
    q->frac_resident = p->n_experts_total ? (double)p->n_slots / p->n_experts_total : 1.0;
    q->fixed_bytes = p->dense_bytes + p->kv_bytes + p->scratch_bytes + p->overhead_bytes;
    q->n_layer = p->n_layer; q->n_resident = p->dense_layers_resident; q->n_streamed = p->dense_layers_streamed;
    q->n_buf = p->dense_buffers; q->buf_bytes = p->dense_buffer_bytes; q->dense_total = p->dense_total_bytes;
    q->dense_global = p->dense_global_bytes; q->layers_bytes = p->dense_layers_bytes;
    q->read_per_pass = p->dense_read_per_token;
}

const char *deltafin_plan_dense_str(const deltafin_plan *p, char *buf, size_t cap) {
    df_plan q;
    to_plan(p, &q);
    return df_plan_dense_str(&q, buf, cap);
}

const char *deltafin_model_plan_str(const deltafin_model *m, char *buf, size_t cap) {
    if (m->plan_status < 0) {
        snprintf(buf, cap, "memory plan: refused: %s", m->plan_error);
        return buf;
    }
    df_plan q;
    to_plan(&m->plan, &q);
    char d[512];
    df_plan_dense_str(&q, d, sizeof d);
    if (q.experts_stream) {
        size_t n = strlen(df_plan_str(&q, buf, cap));
        if (n + 1 < cap) snprintf(buf + n, cap - n, "\n  %s", d);
    } else {
        char l[32], k[32], s[32];
        snprintf(buf, cap, "memory plan: limit %s%s, experts %s, KV cache %s, scratch %s\n  %s",
                 df_fmt_bytes(q.limit, l, sizeof l), q.limit_from_ram ? " (available RAM - reserve)" : "",
                 q.n_experts_total ? "resident" : "(none)", df_fmt_bytes(q.kv_bytes, k, sizeof k),
                 df_fmt_bytes(q.scratch_bytes, s, sizeof s), d);
    }
    return buf;
}

/* ---- budget use ------------------------------------------------------------------------- */
void deltafin_model_memory_use(const deltafin_model *m, deltafin_memory_use *out) {
    memset(out, 0, sizeof *out);
    const df_weights *w = m->w;
    if (w) {
        out->dense_bytes = w->dense_bytes + m->plan.dense_buffers * m->plan.dense_buffer_bytes;
        out->experts_bytes = w->expert_bytes;
        if (w->store) {
            df_store_stats st;
            df_store_get_stats(w->store, &st);
            out->cache_bytes = st.cache_bytes;
        }
    }
    out->kv_bytes = atomic_load(&((deltafin_model *)m)->kv_live);
    out->scratch_bytes = atomic_load(&((deltafin_model *)m)->scratch_live);
    out->rss_bytes = df_cur_rss();
    out->peak_rss_bytes = df_peak_rss();
    out->locked_bytes = df_locked_bytes();
    const deltafin_plan *p = &m->plan;
    out->plan_bytes = p->dense_bytes + p->kv_bytes + p->scratch_bytes + p->overhead_bytes + p->cache_bytes +
                      (p->experts_stream ? 0 : p->expert_total_bytes);
    out->limit = p->limit;
}

const char *deltafin_memory_use_str(const deltafin_memory_use *u, char *buf, size_t cap) {
    char d[32], e[32], c[32], k[32], s[32], o[32], r[32], p[32], l[32];
    const uint64_t parts = u->dense_bytes + u->experts_bytes + u->cache_bytes + u->kv_bytes + u->scratch_bytes;
    snprintf(buf, cap, "budget use: dense %s, experts %s, cache %s, KV %s, scratch %s, other %s = peak RSS %s of "
             "the plan's %s (limit %s)",
             df_fmt_bytes(u->dense_bytes, d, sizeof d), df_fmt_bytes(u->experts_bytes, e, sizeof e),
             df_fmt_bytes(u->cache_bytes, c, sizeof c), df_fmt_bytes(u->kv_bytes, k, sizeof k),
             df_fmt_bytes(u->scratch_bytes, s, sizeof s),
             df_fmt_bytes(u->peak_rss_bytes > parts ? u->peak_rss_bytes - parts : 0, o, sizeof o),
             df_fmt_bytes(u->peak_rss_bytes, r, sizeof r), df_fmt_bytes(u->plan_bytes, p, sizeof p),
             df_fmt_bytes(u->limit, l, sizeof l));
    size_t n = strlen(buf);
    if (u->locked_bytes && n < cap)
        snprintf(buf + n, cap - n, ", locked %s", df_fmt_bytes(u->locked_bytes, l, sizeof l));
    return buf;
}

/* ---- streaming statistics --------------------------------------------------------------- */
int deltafin_model_stream_stats(const deltafin_model *m, deltafin_stream_stats *out) {
    memset(out, 0, sizeof *out);
    df_store *s = m->w ? m->w->store : NULL;
    if (s) {
        df_store_stats st;
        df_store_get_stats(s, &st);
        out->experts_stream = true;
        out->io_engine = df_io_engine_name(st.engine);
        out->n_slots = st.n_slots;
        out->n_hot = st.n_hot;
        out->slot_bytes = st.slot_bytes;
        out->cache_bytes = st.cache_bytes;
        out->hits = st.hits;
        out->misses = st.misses;
        out->evictions = st.evictions;
        out->hit_rate = st.hit_rate;
        out->bytes_read = st.bytes_read;
        out->read_gbps = st.read_gbps;
        out->io_busy_ns = st.io_busy_ns;
        out->wait_ns = st.wait_ns;
        out->prefetch = st.prefetch;
        out->prefetch_issued = st.prefetch_issued;
        out->prefetch_used = st.prefetch_used;
        out->prefetch_wasted = st.prefetch_wasted;
        out->prefetch_accuracy = st.prefetch_accuracy;
        out->lookahead_mode = st.lookahead_mode;
        out->lookahead_active = st.lookahead_active;
        out->lookahead_depth = st.lookahead_depth;
        out->lookahead_predicted = st.lookahead_predicted;
        out->lookahead_correct = st.lookahead_correct;
        out->lookahead_issued = st.lookahead_issued;
        out->lookahead_used = st.lookahead_used;
        out->lookahead_wasted = st.lookahead_wasted;
        out->lookahead_cancelled = st.lookahead_cancelled;
        out->boundary_gap_ns = st.boundary_gap_ns;
        out->lookahead_accuracy = st.lookahead_accuracy;
    }
    df_dense_stats ds;
    if (m->w && m->w->ds && df_dense_get_stats(m->w->ds, &ds) == DF_OK) {
        out->dense_stream = true;
        out->dense_layers_streamed = m->plan.dense_layers_streamed;
        out->dense_passes = ds.passes;
        out->dense_layer_reads = ds.layer_reads;
        out->dense_layer_ready = ds.layer_ready;
        out->dense_bytes_read = ds.bytes_read;
        out->dense_wait_ns = ds.wait_ns;
    }
    return DF_OK;
}

/* the store's struct again, for its formatter (one formatter, one JSON writer) */
static void to_store_stats(const deltafin_stream_stats *st, df_store_stats *s) {
    memset(s, 0, sizeof *s);
    df_io_engine_parse(st->io_engine ? st->io_engine : "auto", &s->engine);
    s->n_slots = st->n_slots; s->n_hot = st->n_hot; s->slot_bytes = st->slot_bytes; s->cache_bytes = st->cache_bytes;
    s->hits = st->hits; s->misses = st->misses; s->evictions = st->evictions; s->hit_rate = st->hit_rate;
    s->bytes_read = st->bytes_read; s->read_gbps = st->read_gbps; s->io_busy_ns = st->io_busy_ns;
    s->wait_ns = st->wait_ns; s->prefetch = st->prefetch; s->prefetch_issued = st->prefetch_issued;
    s->prefetch_used = st->prefetch_used; s->prefetch_wasted = st->prefetch_wasted;
    s->prefetch_accuracy = st->prefetch_accuracy; s->lookahead_mode = st->lookahead_mode;
    s->lookahead_active = st->lookahead_active; s->lookahead_depth = st->lookahead_depth;
    s->lookahead_predicted = st->lookahead_predicted; s->lookahead_correct = st->lookahead_correct;
    s->lookahead_issued = st->lookahead_issued; s->lookahead_used = st->lookahead_used;
    s->lookahead_wasted = st->lookahead_wasted; s->lookahead_cancelled = st->lookahead_cancelled;
    s->boundary_gap_ns = st->boundary_gap_ns; s->lookahead_accuracy = st->lookahead_accuracy;
}

const char *deltafin_stream_stats_str(const deltafin_stream_stats *st, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!st->experts_stream) return buf;
    df_store_stats s;
    to_store_stats(st, &s);
    return df_store_stats_str(&s, buf, cap);
}

char *deltafin_stream_stats_json(const deltafin_stream_stats *st) {
    if (!st->experts_stream) return NULL;
    df_store_stats s;
    to_store_stats(st, &s);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    df_store_stats_json(&s, o);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!txt) return NULL;
    char *r = df_strdup(txt); /* the caller frees with free() */
    cJSON_free(txt);
    return r;
}

int deltafin_model_layer_stats(const deltafin_model *m, int layer, uint64_t *hits, uint64_t *misses,
                               uint64_t *wait_ns) {
    df_store *s = m->w ? m->w->store : NULL;
    if (!s) return df_err(DF_ERR_INVALID, "routed experts are not streamed");
    return df_store_layer_stats(s, layer, hits, misses, wait_ns);
}
