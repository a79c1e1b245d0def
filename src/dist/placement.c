/* placement.c — which rank computes each routed expert (dist.h). Pure functions of the
 * model's shape and, for the balanced placement, a routing profile; every rank that computes
 * it gets the same table, but only rank 0's is used: it sends it to the workers. */
#include "dist/dist.h"
#include "weights/expert_store.h"

typedef struct { int e; double c; } ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->c != y->c) return x->c < y->c ? 1 : -1;
    return x->e - y->e;
}

int df_dist_place_counts(int n_layer, int n_expert, int n_rank, const uint8_t *is_moe, const double *counts,
                         df_dist_placement *out) {
    memset(out, 0, sizeof *out);
    if (n_layer <= 0 || n_expert < 0 || n_rank < 1 || n_rank > 32767)
        return df_err(DF_ERR_INVALID, "placement: %d layers, %d experts, %d ranks", n_layer, n_expert, n_rank);
    const size_t n = (size_t)n_layer * (size_t)(n_expert > 0 ? n_expert : 1);
    out->owner = df_malloc(n * sizeof *out->owner);
    ranked *r = df_malloc(sizeof *r * (size_t)(n_expert > 0 ? n_expert : 1));
    double *load = df_calloc((size_t)n_rank, sizeof *load);
    int *held = df_calloc((size_t)n_rank, sizeof *held);
    if (!out->owner || !r || !load || !held) {
        free(r); free(load); free(held); df_dist_placement_free(out);
        return DF_ERR_NOMEM;
    }
    out->n_layer = n_layer;
    out->n_expert = n_expert;
    out->n_rank = n_rank;
    const int cap = (n_expert + n_rank - 1) / n_rank;
    for (int l = 0; l < n_layer; l++) {
        int16_t *o = out->owner + (int64_t)l * n_expert;
        for (int e = 0; e < n_expert; e++) o[e] = is_moe[l] ? (int16_t)((e + l) % n_rank) : -1;
        if (!counts || !is_moe[l]) continue;
        /* longest processing time first, with at most cap experts per rank; ties go to the
         * rank after the layer's rotation so equal loads do not all land on rank 0 */
        for (int e = 0; e < n_expert; e++) r[e] = (ranked){e, counts[(int64_t)l * n_expert + e]};
        qsort(r, (size_t)n_expert, sizeof *r, cmp_ranked);
        memset(load, 0, sizeof *load * (size_t)n_rank);
        memset(held, 0, sizeof *held * (size_t)n_rank);
        for (int i = 0; i < n_expert; i++) {
            int best = -1;
            for (int k = 0; k < n_rank; k++) {
                int q = (k + l) % n_rank;
                if (held[q] >= cap) continue;
                if (best < 0 || load[q] < load[best]) best = q;
            }
            DF_ASSERT(best >= 0);
            o[r[i].e] = (int16_t)best;
            load[best] += r[i].c;
            held[best]++;
        }
    }
    free(r);
    free(load);
    free(held);
    snprintf(out->desc, sizeof out->desc, "round-robin");
    return DF_OK;
}

int df_dist_place(const df_model *m, int n_rank, const char *profile, df_dist_placement *out) {
    const int L = m->hp.n_layer, E = m->hp.n_expert;
    uint8_t *is_moe = df_calloc((size_t)(L > 0 ? L : 1), 1);
    if (!is_moe) return DF_ERR_NOMEM;
    for (int l = 0; l < L; l++) is_moe[l] = m->layers[l].is_moe && E > 0;
    double *counts = NULL;
    int rc = DF_OK;
    if (profile) {
        counts = df_malloc(sizeof *counts * (size_t)L * (size_t)(E > 0 ? E : 1));
        rc = counts ? df_store_read_route_counts(profile, "--dist-placement", L, E, counts) : DF_ERR_NOMEM;
    }
    if (rc == DF_OK) rc = df_dist_place_counts(L, E, n_rank, is_moe, counts, out);
    if (rc == DF_OK && profile) snprintf(out->desc, sizeof out->desc, "balanced by %s", profile);
    free(counts);
    free(is_moe);
    return rc;
}

void df_dist_placement_free(df_dist_placement *p) {
    if (!p) return;
    free(p->owner);
    memset(p, 0, sizeof *p);
}
