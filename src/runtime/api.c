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
    return DF_OK;
}

const char *deltafin_model_plan_str(const deltafin_model *m, char *buf, size_t cap) {
    const deltafin_plan *p = &m->plan;
    char l[32], d[32], k[32], s[32], o[32], c[32], sl[32], t[32], f[32];
    uint64_t used = p->dense_bytes + p->kv_bytes + p->scratch_bytes + p->overhead_bytes + p->cache_bytes;
    int n = snprintf(buf, cap,
             "memory plan: limit %s%s\n"
             "  dense weights  %s\n"
             "  KV cache       %s\n"
             "  scratch        %s\n"
             "  overhead       %s\n",
             df_fmt_bytes(p->limit, l, sizeof l), p->limit_from_ram ? " (available RAM - reserve)" : "",
             df_fmt_bytes(p->dense_bytes, d, sizeof d), df_fmt_bytes(p->kv_bytes, k, sizeof k),
             df_fmt_bytes(p->scratch_bytes, s, sizeof s), df_fmt_bytes(p->overhead_bytes, o, sizeof o));
    if (n < 0 || (size_t)n >= cap) return buf;
    if (p->experts_stream)
        n += snprintf(buf + n, cap - (size_t)n,
                      "  expert cache   %s = %d slots x %s (%.1f%% of %d experts, %s on disk)%s\n",
                      df_fmt_bytes(p->cache_bytes, c, sizeof c), p->n_slots, df_fmt_bytes(p->slot_bytes, sl, sizeof sl),
                      p->n_experts_total ? 100.0 * p->n_slots / p->n_experts_total : 100.0, p->n_experts_total,
                      df_fmt_bytes(p->expert_total_bytes, t, sizeof t),
                      p->n_slots >= p->n_experts_total ? " — all resident" : "");
    else if (p->n_experts_total)
        n += snprintf(buf + n, cap - (size_t)n, "  experts        %s resident (%d experts)\n",
                      df_fmt_bytes(p->expert_total_bytes, t, sizeof t), p->n_experts_total);
    if (n < 0 || (size_t)n >= cap) return buf;
    snprintf(buf + n, cap - (size_t)n, "  free           %s", df_fmt_bytes(p->limit > used ? p->limit - used : 0, f, sizeof f));
    return buf;
}

/* ---- streaming statistics --------------------------------------------------------------- */
int deltafin_model_stream_stats(const deltafin_model *m, deltafin_stream_stats *out) {
    memset(out, 0, sizeof *out);
    df_store *s = df_stream_store((deltafin_model *)m);
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
    if (m->dstream && df_dense_get_stats((deltafin_model *)m, &ds) == DF_OK) {
        const df_dense_plan *dp = df_dense_get_plan(m);
        out->dense_stream = true;
        out->dense_layers_streamed = dp ? dp->n_streamed : 0;
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
    df_store *s = df_stream_store((deltafin_model *)m);
    if (!s) return df_err(DF_ERR_INVALID, "routed experts are not streamed");
    return df_store_layer_stats(s, layer, hits, misses, wait_ns);
}
