/* perplexity.c — `deltafin perplexity`: perplexity of a text file computed exactly like
 * llama-perplexity (tools/perplexity/perplexity.cpp, default mode): tokenize the whole text
 * with BOS, split it into chunks of CTX tokens, replace the first token of each chunk by BOS
 * when the vocab adds BOS, score only the second half of each chunk, print the running
 * estimate per chunk "[i]ppl," and finally "Final estimate: PPL = X +/- Y". */
#include "app/cli/flags.h"
#include "deltafin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const df_cmd k_perplexity = {
    DF_CMD_PERPLEXITY, "perplexity", "usage: deltafin perplexity -m MODEL -f TEXT [options]",
    "Perplexity of a text file computed as llama-perplexity does: chunks of CTX tokens (BOS first),\n"
    "the second half of each scored; prints [i]ppl per chunk and the final estimate.", NULL, 0};

/* log p(tok) from logits, as llama-perplexity's log_softmax (float max, double sum) */
static double log_softmax(int n_vocab, const float *logits, int tok) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    return logits[tok] - mx - log(sum);
}

int cmd_perplexity(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_perplexity, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = S.model, *file = S.file;
    const int n_ctx = S.n_ctx, n_chunks = S.chunks;
    int n_batch = S.n_batch;
    if (!model || !file) {
        fprintf(stderr, "perplexity: -m MODEL and -f TEXT are required\n\n");
        df_cli_help(&k_perplexity, stderr);
        return 2;
    }
    if (n_ctx < 4) { fprintf(stderr, "perplexity: -c must be >= 4\n"); return 2; }
    if (n_batch <= 0) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (n_batch > n_ctx) n_batch = n_ctx;

    int ret = 1;
    char *text = NULL;
    size_t len = 0;
    int32_t *toks = NULL, *chunk = NULL;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    if (deltafin_read_file(file, &text, &len) < 0) { fprintf(stderr, "perplexity: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_log_begin(&k_perplexity, &S) != DF_CLI_GO) goto done;
    deltafin_model_params mp = df_cli_model_params(&S);
    mp.n_ctx = n_ctx;     /* the plan reserves the chunk's context and batch */
    mp.n_batch = n_batch;
    if (deltafin_model_load(model, &mp, &m) < 0) { fprintf(stderr, "perplexity: %s\n", deltafin_errmsg()); goto done; }
    if (!deltafin_model_vocab(m)) { fprintf(stderr, "perplexity: model has no tokenizer\n"); goto done; }
    deltafin_ctx_params cp = df_cli_ctx_params(&S);
    cp.n_batch = n_batch;
    if (deltafin_ctx_create(m, &cp, &c) < 0) { fprintf(stderr, "perplexity: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_apply_routing(&k_perplexity, &S, c)) goto done;

    uint64_t t0 = deltafin_time_ns();
    int nt = deltafin_tokenize(m, text, len, true, false, NULL, 0);
    if (nt < 0) { fprintf(stderr, "perplexity: tokenize: %s\n", deltafin_errmsg()); goto done; }
    toks = malloc(sizeof(int32_t) * (size_t)(nt + 1));
    chunk = malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!toks || !chunk) goto done;
    nt = deltafin_tokenize(m, text, len, true, false, toks, nt);
    fprintf(stderr, "perplexity: tokenization took %g ms\n", (deltafin_time_ns() - t0) / 1e6);
    if (nt < 2 * n_ctx) {
        fprintf(stderr, "perplexity: you need at least %d tokens to evaluate perplexity with a context of %d\n",
                2 * n_ctx, n_ctx);
        fprintf(stderr, "perplexity: the data file you provided tokenizes to only %d tokens\n", nt);
        goto done;
    }
    deltafin_vocab_info vi;
    deltafin_vocab_get_info(deltafin_model_vocab(m), &vi);
    const bool add_bos = vi.add_bos;
    const int32_t bos = deltafin_token_bos(m);
    const int n_vocab = deltafin_model_n_vocab(m);
    int n_chunk = nt / n_ctx;
    if (n_chunks >= 0 && n_chunks < n_chunk) n_chunk = n_chunks;
    const int first = n_ctx / 2;
    fprintf(stderr, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d\n",
            n_chunk, n_ctx, n_batch);
    double nll = 0.0, nll2 = 0.0;
    int count = 0;
    for (int i = 0; i < n_chunk; i++) {
        const int start = i * n_ctx;
        uint64_t ts = deltafin_time_ns();
        deltafin_ctx_truncate(c, 0);
        memcpy(chunk, toks + start, sizeof(int32_t) * (size_t)n_ctx);
        if (add_bos && bos >= 0) chunk[0] = bos;
        if (deltafin_decode(c, chunk, n_ctx, true) < 0) {
            fprintf(stderr, "\nperplexity: decode: %s\n", deltafin_errmsg());
            goto done;
        }
        if (i == 0) {
            double tp = (deltafin_time_ns() - ts) / 1e9;
            fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", tp, tp * n_chunk / 60.0);
        }
        for (int k = first; k < n_ctx - 1; k++) {
            const double v = -log_softmax(n_vocab, deltafin_logits(c, k), toks[start + k + 1]);
            nll += v;
            nll2 += v * v;
        }
        count += n_ctx - first - 1;
        printf("[%d]%.4lf,", i + 1, exp(nll / count));
        fflush(stdout);
    }
    printf("\n");
    nll2 /= count;
    nll /= count;
    const double ppl = exp(nll);
    nll2 -= nll * nll;
    if (nll2 > 0) {
        nll2 = sqrt(nll2 / (count - 1));
        printf("Final estimate: PPL = %.4lf +/- %.5lf\n", ppl, nll2 * ppl);
    } else {
        fprintf(stderr, "Unexpected negative standard deviation of log(prob)\n");
        goto done;
    }
    fflush(stdout);
    df_cli_routing_report(&S, c, stderr);
    ret = 0;
done:
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    free(text);
    free(toks);
    free(chunk);
    df_cli_log_end(&S);
    return ret;
}
