/* dist_api.c — the public face of distributed runs (deltafin.h "several processes"): joining
 * and leaving the MPI job, a worker's whole life (load its share, answer rank 0, serve), and
 * rank 0's communication statistics as numbers and JSON. The mechanics are in src/dist/.
 * Threading: init/worker/finalize on the main thread; statistics from any thread. */
#include "dist/dist.h"
#include "runtime/loader.h"
#include "weights/io.h"
#include <cjson/cJSON.h>

deltafin_dist_params deltafin_dist_default_params(void) {
    deltafin_dist_params p = {.timeout_s = 60.0, .placement = NULL};
    return p;
}

int deltafin_dist_init(int *argc, char ***argv, const deltafin_dist_params *p) {
    df_init();
    df_dist_opts o = {.timeout_s = 60.0};
    if (p) { o.timeout_s = p->timeout_s; o.placement = p->placement; }
    return df_dist_init(argc, argv, &o);
}
bool deltafin_dist_built(void) { return df_dist_built(); }
int deltafin_dist_rank(void) { return df_dist_rank(); }
int deltafin_dist_size(void) { return df_dist_size(); }
const char *deltafin_dist_library(void) { return df_dist_library(); }
int deltafin_dist_finalize(int status) { return df_dist_finalize(status); }

int deltafin_dist_worker(const char *path, const deltafin_model_params *p) {
    if (!df_dist_active() || df_dist_rank() == 0)
        return df_err(DF_ERR_INVALID, "deltafin_dist_worker: not a worker rank of an MPI job");
    df_model *m = NULL;
    int rc = path ? df_model_load(path, p, DF_LOAD_DIST_WORKER | DF_LOAD_NO_TOKENIZER, &m)
                  : df_err(DF_ERR_INVALID, "no model given (-m)");
    if (df_dist_stopped()) { /* rank 0 ran a command without a distributed model */
        deltafin_model_free(m);
        df_err_clear();
        return DF_OK;
    }
    rc = df_dist_worker_ready(path, m, rc);
    if (rc == DF_OK) rc = df_dist_worker_serve(m);
    else if (rc == DF_ERR_CANCELLED && df_dist_stopped()) rc = DF_OK;
    deltafin_model_free(m);
    return rc;
}

static const struct df_dist *dist_of(const deltafin_model *m) { return m && m->w ? m->w->dist : NULL; }

int deltafin_model_dist_stats(const deltafin_model *m, deltafin_dist_stats *out) {
    memset(out, 0, sizeof *out);
    out->n_rank = 1;
    const struct df_dist *d = dist_of(m);
    if (!d) return df_err(DF_ERR_INVALID, "the model's experts are not distributed");
    return df_dist_get_stats(d, out);
}

int deltafin_model_dist_layer_stats(const deltafin_model *m, int layer, uint64_t *calls, uint64_t *bytes_out,
                                    uint64_t *bytes_in, uint64_t *rtt_ns, uint64_t *wait_ns, uint64_t *comm_ns) {
    const struct df_dist *d = dist_of(m);
    if (!d) return df_err(DF_ERR_INVALID, "the model's experts are not distributed");
    return df_dist_layer_stats(d, layer, calls, bytes_out, bytes_in, rtt_ns, wait_ns, comm_ns);
}

int deltafin_model_dist_rank_stats(deltafin_model *m, deltafin_dist_rank_stats *out, int cap) {
    struct df_dist *d = m && m->w ? m->w->dist : NULL;
    if (!d) return df_err(DF_ERR_INVALID, "the model's experts are not distributed");
    const int n = df_dist_size();
    if (cap < n) return df_err(DF_ERR_INVALID, "%d rows for %d ranks", cap, n);
    int rc = df_dist_rank_stats_get(d, out, cap);
    return rc < 0 ? rc : n;
}

static double s_of(uint64_t ns) { return (double)ns / 1e9; }

char *deltafin_model_dist_json(deltafin_model *m) {
    deltafin_dist_stats st;
    if (deltafin_model_dist_stats(m, &st) < 0) { df_err_clear(); return NULL; }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "ranks", st.n_rank);
    cJSON_AddStringToObject(o, "placement", st.placement ? st.placement : "");
    cJSON_AddStringToObject(o, "library", df_dist_library());
    cJSON_AddNumberToObject(o, "timeout_s", df_dist_options()->timeout_s);
    cJSON_AddNumberToObject(o, "exchanges", (double)st.exchanges);
    cJSON_AddNumberToObject(o, "messages", (double)st.messages);
    cJSON_AddNumberToObject(o, "bytes_out", (double)st.bytes_out);
    cJSON_AddNumberToObject(o, "bytes_in", (double)st.bytes_in);
    cJSON_AddNumberToObject(o, "rtt_s", s_of(st.rtt_ns));
    cJSON_AddNumberToObject(o, "wait_s", s_of(st.wait_ns));
    cJSON_AddNumberToObject(o, "comm_s", s_of(st.comm_ns));
    cJSON *ls = cJSON_AddArrayToObject(o, "layers");
    for (int l = 0; l < m->hp.n_layer; l++) {
        uint64_t c, bo, bi, r, w, cm;
        if (deltafin_model_dist_layer_stats(m, l, &c, &bo, &bi, &r, &w, &cm) < 0 || !c) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        cJSON_AddNumberToObject(e, "calls", (double)c);
        cJSON_AddNumberToObject(e, "bytes_out", (double)bo);
        cJSON_AddNumberToObject(e, "bytes_in", (double)bi);
        cJSON_AddNumberToObject(e, "rtt_s", s_of(r));
        cJSON_AddNumberToObject(e, "wait_s", s_of(w));
        cJSON_AddNumberToObject(e, "comm_s", s_of(cm));
        cJSON_AddItemToArray(ls, e);
    }
    const int n = df_dist_size();
    deltafin_dist_rank_stats *rs = df_calloc((size_t)n, sizeof *rs);
    if (rs && deltafin_model_dist_rank_stats(m, rs, n) == n) {
        cJSON *pr = cJSON_AddArrayToObject(o, "per_rank");
        for (int r = 0; r < n; r++) {
            cJSON *e = cJSON_CreateObject();
            const deltafin_dist_rank_stats *x = &rs[r];
            cJSON_AddNumberToObject(e, "rank", x->rank);
            cJSON_AddStringToObject(e, "host", x->host);
            cJSON_AddNumberToObject(e, "pairs", (double)x->pairs);
            cJSON_AddNumberToObject(e, "requests", (double)x->requests);
            cJSON_AddNumberToObject(e, "rows", (double)x->rows);
            cJSON_AddNumberToObject(e, "busy_s", s_of(x->busy_ns));
            cJSON_AddNumberToObject(e, "slots", x->n_slots);
            cJSON_AddStringToObject(e, "io", df_io_engine_name(x->engine));
            cJSON_AddNumberToObject(e, "hits", (double)x->hits);
            cJSON_AddNumberToObject(e, "misses", (double)x->misses);
            const uint64_t acc = x->hits + x->misses;
            cJSON_AddNumberToObject(e, "hit_rate", acc ? (double)x->hits / (double)acc : 0.0);
            cJSON_AddNumberToObject(e, "bytes_read", (double)x->bytes_read);
            cJSON_AddNumberToObject(e, "read_gbps", x->read_gbps);
            cJSON_AddNumberToObject(e, "io_busy_s", s_of(x->io_busy_ns));
            cJSON_AddNumberToObject(e, "wait_s", s_of(x->wait_ns));
            cJSON_AddItemToArray(pr, e);
        }
    } else {
        df_err_clear();
    }
    free(rs);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}
