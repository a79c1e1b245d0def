/* embed.c — a program embedding the engine the way a user of the library would: only
 * deltafin.h, libdeltafin.a and the engine's own libraries (tests/test_embed.sh builds it with
 * nothing else, so it stops linking if the engine starts to need the application's libraries).
 * Loads MODEL, tokenizes PROMPT, decodes it, samples N tokens greedily and prints their ids on
 * one line (the same ids as `deltafin run --temp 0 -n N --json`). */
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: embed MODEL PROMPT N\n");
        return 2;
    }
    const char *path = argv[1], *prompt = argv[2];
    const int n_gen = atoi(argv[3]);
    deltafin_model_params mp = deltafin_model_default_params();
    mp.n_threads = 1;
    deltafin_model *m = NULL;
    if (deltafin_model_load(path, &mp, &m) != DELTAFIN_OK) {
        fprintf(stderr, "embed: %s\n", deltafin_errmsg());
        return 1;
    }
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_threads = 1;
    deltafin_ctx *c = NULL;
    int rc = deltafin_ctx_create(m, &cp, &c);
    int32_t ids[512];
    int n = rc == DELTAFIN_OK ? deltafin_tokenize(m, prompt, strlen(prompt), true, true, ids, 512) : rc;
    if (n > 512) n = DELTAFIN_ERR_RANGE;
    if (n > 0) rc = deltafin_decode(c, ids, n, false);
    if (n <= 0 || rc != DELTAFIN_OK) {
        fprintf(stderr, "embed: %s\n", deltafin_errmsg());
        deltafin_ctx_free(c);
        deltafin_model_free(m);
        return 1;
    }
    deltafin_sampler_params sp = deltafin_sampler_default_params();
    sp.temp = 0; /* greedy */
    deltafin_sampler *s = deltafin_sampler_create(&sp);
    for (int i = 0; i < n; i++) deltafin_sampler_accept(s, ids[i]);
    for (int i = 0; i < n_gen && rc == DELTAFIN_OK; i++) {
        int32_t id = deltafin_sampler_sample(s, deltafin_logits(c, -1), deltafin_model_n_vocab(m));
        deltafin_sampler_accept(s, id);
        if (deltafin_token_is_eog(m, id)) break;
        printf(i ? ",%d" : "%d", id);
        if (i + 1 < n_gen) rc = deltafin_decode(c, &id, 1, false);
    }
    printf("\n");
    if (rc != DELTAFIN_OK) fprintf(stderr, "embed: decode: %s\n", deltafin_errmsg());
    deltafin_sampler_free(s);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    return rc == DELTAFIN_OK ? 0 : 1;
}
