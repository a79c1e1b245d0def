/* df_logits.c — teacher-forced logits from deltafin, the counterpart of
 * `llama_oracle --logits` for scripts/logits_diff.sh (not part of the deltafin build).
 * usage: df_logits MODEL.gguf IDS N_PROMPT OUT.f32 [ISA]
 * Decodes the first N_PROMPT ids as one batch, then the rest one by one, and writes the
 * logits after each decode call (n_vocab floats per step). ISA selects a kernel table
 * (ref, avx2, avx512, neon). */
#include "deltafin.h"
#include "kernels/kernels.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: %s MODEL.gguf IDS N_PROMPT OUT.f32 [ISA]\n", argv[0]);
        return 2;
    }
    df_init();
    if (argc == 6 && df_kernels_select(argv[5])) { fprintf(stderr, "no kernel table %s\n", argv[5]); return 2; }
    deltafin_model *m;
    deltafin_model_params mp = deltafin_model_default_params();
    if (deltafin_model_load(argv[1], &mp, &m)) { fprintf(stderr, "%s\n", deltafin_errmsg()); return 1; }
    deltafin_ctx_params cp = deltafin_ctx_default_params();
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
    for (int i = 0, step = 0; i < n; step++) {
        int k = step == 0 ? np : 1;
        if (deltafin_decode(c, ids + i, k, false)) { fprintf(stderr, "%s\n", deltafin_errmsg()); return 1; }
        fwrite(deltafin_logits(c, -1), sizeof(float), (size_t)n_vocab, f);
        i += k;
    }
    fclose(f);
    free(ids);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    return 0;
}
