/* llama_oracle.c — greedy token ids from llama.cpp (the reference), for scripts/make_expected.sh.
 * Not part of the deltafin build: compiled against a llama.cpp build by make_expected.sh.
 *
 * usage: llama_oracle MODEL.gguf PROMPT N_PREDICT
 *        llama_oracle --logits MODEL.gguf IDS N_PROMPT OUT.f32
 * (second form: teacher-forced logits for scripts/logits_diff.sh — IDS comma-separated, the
 * first N_PROMPT decoded as one batch, the rest one by one; writes n_vocab floats per step)
 * Tokenizes PROMPT like llama-completion (add BOS per the model, parse special tokens),
 * decodes it as one batch, then generates up to N_PREDICT tokens greedily (argmax, stopping at
 * an end-of-generation token like llama-completion) one token per decode call. Prints one
 * tab-separated line:
 *   prompt_ids <TAB> generated_ids <TAB> min_gap <TAB> min_gap_step <TAB> gaps
 * ids comma-separated; gaps = per step top-1 minus top-2 logit (how far each greedy choice,
 * including a final end-of-generation choice, is from a tie); min_gap = the smallest. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int dump_logits(char **argv) {
    const char *path = argv[2], *out = argv[5];
    struct llama_model *model = llama_model_load_from_file(path, llama_model_default_params());
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 0;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int cap = (int)strlen(argv[3]) / 2 + 2, n = 0, np = atoi(argv[4]);
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    for (char *s = argv[3]; *s && n < cap;) {
        ids[n++] = (llama_token)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    if (np < 1 || np > n) { fprintf(stderr, "bad N_PROMPT\n"); return 2; }
    FILE *f = fopen(out, "wb");
    if (!f) { perror(out); return 1; }
    for (int i = 0, step = 0; i < n; step++) {
        int k = step == 0 ? np : 1;
        if (llama_decode(ctx, llama_batch_get_one(ids + i, k))) { fprintf(stderr, "decode failed\n"); return 1; }
        fwrite(llama_get_logits_ith(ctx, -1), sizeof(float), (size_t)n_vocab, f);
        i += k;
    }
    fclose(f);
    free(ids);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "--logits")) {
        llama_log_set(quiet, NULL);
        llama_backend_init();
        return dump_logits(argv);
    }
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT N_PREDICT\n", argv[0]);
        return 2;
    }
    const char *path = argv[1], *prompt = argv[2];
    int n_predict = atoi(argv[3]);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 0; /* training context, like llama-completion */
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }

    int cap = (int)strlen(prompt) + 16;
    llama_token *toks = malloc(sizeof *toks * (size_t)cap);
    int np = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), toks, cap, true, true);
    if (np < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
    if (np == 0) { fprintf(stderr, "empty prompt and no BOS\n"); return 1; }
    for (int i = 0; i < np; i++) printf("%s%d", i ? "," : "", toks[i]);
    printf("\t");

    const int n_vocab = llama_vocab_n_tokens(vocab);
    if (llama_decode(ctx, llama_batch_get_one(toks, np))) { fprintf(stderr, "decode failed\n"); return 1; }
    float min_gap = FLT_MAX;
    int min_step = -1;
    float *gaps = malloc(sizeof *gaps * (size_t)(n_predict > 0 ? n_predict : 1));
    int n_gaps = 0;
    for (int step = 0; step < n_predict; step++) {
        const float *lg = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int i = 1; i < n_vocab; i++) if (lg[i] > lg[best]) best = i;
        float second = -FLT_MAX;
        for (int i = 0; i < n_vocab; i++) if (i != best && lg[i] > second) second = lg[i];
        if (lg[best] - second < min_gap) { min_gap = lg[best] - second; min_step = step; }
        gaps[n_gaps++] = lg[best] - second;
        if (llama_vocab_is_eog(vocab, best)) break;
        printf("%s%d", step ? "," : "", best);
        llama_token t = best;
        if (llama_decode(ctx, llama_batch_get_one(&t, 1))) { fprintf(stderr, "decode failed\n"); return 1; }
    }
    printf("\t%.4f\t%d\t", min_step < 0 ? 0.0 : (double)min_gap, min_step);
    for (int i = 0; i < n_gaps; i++) printf("%s%.4f", i ? "," : "", (double)gaps[i]);
    printf("\n");
    free(gaps);
    free(toks);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
