/* none.c — dist.h in a build without MPI (no DF_HAVE_MPI): always one process. The wiring
 * entry points are never reached (df_dist_active() is false); they fail loudly if they are. */
#include "dist/dist.h"

static df_dist_opts g_opts = {.timeout_s = 60.0};

int df_dist_init(int *argc, char ***argv, const df_dist_opts *o) {
    (void)argc; (void)argv;
    if (o) g_opts = *o;
    if (g_opts.timeout_s <= 0) g_opts.timeout_s = 60.0;
    return DF_OK;
}
bool df_dist_built(void) { return false; }
int df_dist_rank(void) { return 0; }
int df_dist_size(void) { return 1; }
const df_dist_opts *df_dist_options(void) { return &g_opts; }
const char *df_dist_library(void) { return "none (built without MPI: make MPI=1)"; }
int df_dist_finalize(int status) { return status; }
bool df_dist_stopped(void) { return false; }

static int no_mpi(void) { return df_err(DF_ERR_UNSUPPORTED, "this deltafin was built without MPI (make MPI=1)"); }

int df_dist_coord_start(const df_model *m, df_dist_placement *p, uint64_t identity, struct df_dist **out) {
    (void)m; (void)p; (void)identity;
    *out = NULL;
    return no_mpi();
}
const df_dist_placement *df_dist_placement_of(const struct df_dist *d) { (void)d; return NULL; }
int df_dist_coord_attach(struct df_dist *d, df_model *m, df_weights *w) { (void)d; (void)m; (void)w; return no_mpi(); }
void df_dist_free(struct df_dist *d) { (void)d; }
uint64_t df_dist_buffer_bytes(const df_model *m, int n_batch, int n_rank, bool coordinator) {
    (void)m; (void)n_batch; (void)n_rank; (void)coordinator;
    return 0;
}
int df_dist_worker_plan(const df_model *m, uint64_t identity, const df_dist_placement **out) {
    (void)m; (void)identity;
    *out = NULL;
    return no_mpi();
}
int df_dist_worker_ready(const char *path, const df_model *m, int load_rc) {
    (void)path; (void)m; (void)load_rc;
    return no_mpi();
}
int df_dist_worker_serve(df_model *m) { (void)m; return no_mpi(); }
int df_dist_get_stats(const struct df_dist *d, df_dist_stats *out) { (void)d; memset(out, 0, sizeof *out); return no_mpi(); }
int df_dist_layer_stats(const struct df_dist *d, int layer, uint64_t *calls, uint64_t *bytes_out, uint64_t *bytes_in,
                        uint64_t *rtt_ns, uint64_t *wait_ns, uint64_t *comm_ns) {
    (void)d; (void)layer; (void)calls; (void)bytes_out; (void)bytes_in; (void)rtt_ns; (void)wait_ns; (void)comm_ns;
    return no_mpi();
}
int df_dist_rank_stats_get(struct df_dist *d, df_dist_rank_stats *rs, int n) { (void)d; (void)rs; (void)n; return no_mpi(); }
