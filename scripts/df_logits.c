/* df_logits.c — teacher-forced logits from deltafin, the counterpart of
 * `llama_oracle --logits` for scripts/logits_diff.sh (not part of the deltafin build).
 * usage: df_logits MODEL.gguf IDS N_PROMPT OUT.f32 [ISA]
 *        df_logits --routes MODEL.gguf IDS N_PROMPT [ISA]
 * Decodes the first N_PROMPT ids as one batch, then the rest one by one, and writes the
 * logits after each decode call (n_vocab floats per step). ISA selects a kernel table
 * (ref, avx2, avx512, neon). --routes prints instead, per step and MoE layer, the experts the
 * router chose (`step layer e:n,e:n,...`, n = tokens of the step), like llama_oracle --routes. */
#include "deltafin.h"
#include "kernels/kernels.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    bool routes = argc > 1 && !strcmp(argv[1], "--routes");
    if (routes) { /* same positions as the logits form: a dummy OUT */
        argv[1] = argv[0];
        argv++; argc--;
        char **a = malloc(sizeof *a * 7);
        a[0] = argv[0]; a[1] = argv[1]; a[2] = argv[2]; a[3] = argv[3]; a[4] = "/dev/null";
        a[5] = argc > 4 ? argv[4] : NULL; a[6] = NULL;
        argc = argc > 4 ? 6 : 5;
        argv = a;
    }
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: %s MODEL.gguf IDS N_PROMPT OUT.f32 [ISA]\n", argv[0]);
        return 2;
    }
    df_init();
    if (argc == 6 && df_kernels_select(argv[5])) { fprintf(stderr, "no kernel table %s\n", argv[5]); return 2; }
    deltafin_model *m;
    deltafin_model_params mp = deltafin_model_default_params();
    /* DF_CTK / DF_CTV: KV cache types, as llama_oracle's ORACLE_TYPE_K / _V */
    if (getenv("DF_CTK") && deltafin_kv_type_parse(getenv("DF_CTK"), &mp.cache_type_k) < 0) return 2;
    if (getenv("DF_CTV") && deltafin_kv_type_parse(getenv("DF_CTV"), &mp.cache_type_v) < 0) return 2;
    if (deltafin_model_load(argv[1], &mp, &m)) { fprintf(stderr, "%s\n", deltafin_errmsg()); return 1; }
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    /* DF_N_BATCH: prompt chunks (deltafin's -b), as llama_oracle's ORACLE_N_BATCH */
    if (getenv("DF_N_BATCH") && atoi(getenv("DF_N_BATCH")) > 0) cp.n_batch = atoi(getenv("DF_N_BATCH"));
    deltafin_ctx *c;
    if (deltafin_ctx_create(m, &cp, &c)) { fprintf(stderr, "%s\n", deltafin_errmsg()); return 1; }
    const int n_vocab = deltafin_model_n_vocab(m);
    int cap = (int)strlen(argv[2]) / 2 + 2, n = 0, np = atoi(argv[3]);
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    for (char *s = argv[2]; *s && n < cap;) {
        ids[n++] = (int32_t)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    if (np < 1 || np > n) { fprintf(stderr, "bad N_PROMPT\n"); return 2; }
    FILE *f = fopen(argv[4], "wb");
    if (!f) { perror(argv[4]); return 1; }
    if (routes && deltafin_ctx_count_routes(c)) { fprintf(stderr, "not a MoE model\n"); return 1; }
    uint32_t *prev = NULL;
    for (int i = 0, step = 0; i < n; step++) {
        int k = step == 0 ? np : 1;
        if (deltafin_decode(c, ids + i, k, false)) { fprintf(stderr, "%s\n", deltafin_errmsg()); return 1; }
        fwrite(deltafin_logits(c, -1), sizeof(float), (size_t)n_vocab, f);
        i += k;
        if (routes) {
            const uint32_t *cnt;
            int nl, ne;
            deltafin_ctx_route_counts(c, &cnt, &nl, &ne);
            if (!prev) prev = calloc((size_t)nl * (size_t)ne, sizeof *prev);
            for (int il = 0; il < nl; il++) {
                int any = 0;
                for (int e = 0; e < ne; e++) any |= cnt[il * ne + e] != prev[il * ne + e];
                if (!any) continue;
                printf("%d\t%d\t", step, il);
                for (int e = 0, first = 1; e < ne; e++) {
                    uint32_t d = cnt[il * ne + e] - prev[il * ne + e];
                    if (d) { printf("%s%d:%u", first ? "" : ",", e, d); first = 0; }
                }
                printf("\n");
            }
            memcpy(prev, cnt, sizeof *prev * (size_t)nl * (size_t)ne);
        }
    }
    free(prev);
    fclose(f);
    free(ids);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    return 0;
}
