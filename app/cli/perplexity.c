/* perplexity.c — `deltafin perplexity`: the modes of llama-perplexity (tools/perplexity/
 * perplexity.cpp, llama.cpp d32676d), computed and printed as it does (perplexity.h):
 *   default: tokenize the whole text with BOS, split it into chunks of CTX tokens, replace the
 *     first token of each chunk by BOS when the vocab adds BOS, score only the second half of
 *     each chunk, print the running estimate per chunk "[i]ppl," and finally
 *     "Final estimate: PPL = X +/- Y"; with --kl-divergence-base FILE it also writes every
 *     scored position's log-probabilities to FILE (the base of a KL-divergence run);
 *   --kl-divergence: the base file's chunks scored against its log-probabilities (ppl_kld.c);
 *   --hellaswag: the HellaSwag score of a task file (ppl_hellaswag.c).
 * The text file loses one trailing newline, as llama.cpp's -f does. */
#include "app/cli/perplexity.h"
#include "app/cli/flags.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const df_cmd k_perplexity = {
    DF_CMD_PERPLEXITY, "perplexity",
    "usage: deltafin perplexity -m MODEL -f TEXT [options]\n"
    "       deltafin perplexity -m BASE -f TEXT --kl-divergence-base FILE      (save the base's log-probabilities)\n"
    "       deltafin perplexity -m MODEL --kl-divergence-base FILE --kl-divergence\n"
    "       deltafin perplexity -m MODEL -f TASKS --hellaswag [--hellaswag-tasks N]",
    "Perplexity of a text file computed as llama-perplexity does: chunks of CTX tokens (BOS first),\n"
    "the second half of each scored; prints [i]ppl per chunk and the final estimate. The KL-divergence\n"
    "and HellaSwag modes are llama-perplexity's too, with its file formats and its printed statistics.",
    NULL, 0};

/* log p(tok) from logits, as llama-perplexity's log_softmax (float max, double sum) */
static double log_softmax(int n_vocab, const float *logits, int tok) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    return logits[tok] - mx - log(sum);
}

int ppl_decode_chunk(deltafin_ctx *c, const int32_t *toks, int n, int32_t bos, int32_t *tmp) {
    deltafin_ctx_truncate(c, 0);
    memcpy(tmp, toks, sizeof(int32_t) * (size_t)n);
    if (bos >= 0) tmp[0] = bos;
    return deltafin_decode(c, tmp, n, true);
}

void ppl_eta(const char *name, uint64_t t0, int n_chunk) {
    const double tp = (deltafin_time_ns() - t0) / 1e9;
    fprintf(stderr, "%s: %.2f seconds per pass - ETA %.2f minutes\n", name, tp, tp * n_chunk / 60.0);
}

/* The default mode over toks[0..nt); base (may be NULL) receives the log-probabilities. */
static int perplexity(deltafin_ctx *c, const deltafin_model *m, const int32_t *toks, int nt, int n_ctx,
                      int n_chunks, const char *base_path) {
    if (nt < 2 * n_ctx) {
        fprintf(stderr, "perplexity: you need at least %d tokens to evaluate perplexity with a context of %d\n",
                2 * n_ctx, n_ctx);
        fprintf(stderr, "perplexity: the data file you provided tokenizes to only %d tokens\n", nt);
        return 1;
    }
    deltafin_vocab_info vi;
    deltafin_vocab_get_info(deltafin_model_vocab(m), &vi);
    const int32_t bos = vi.add_bos ? deltafin_token_bos(m) : -1;
    const int n_vocab = deltafin_model_n_vocab(m);
    int n_chunk = nt / n_ctx;
    if (n_chunks >= 0 && n_chunks < n_chunk) n_chunk = n_chunks;
    const int first = n_ctx / 2;
    int ret = 1;
    ppl_base base = {.fd = -1};
    int32_t *tmp = malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!tmp) goto done;
    if (base_path) {
        if (ppl_base_create(&base, base_path, n_ctx, n_vocab, n_chunk, toks)) goto done;
        fprintf(stderr, "perplexity: saving all logits to %s\n", base_path);
    }
    fprintf(stderr, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d\n", n_chunk, n_ctx,
            deltafin_ctx_n_batch(c));
    double nll = 0.0, nll2 = 0.0;
    int count = 0;
    for (int i = 0; i < n_chunk; i++) {
        const int32_t *chunk = toks + (size_t)i * (size_t)n_ctx;
        const uint64_t t0 = deltafin_time_ns();
        if (ppl_decode_chunk(c, chunk, n_ctx, bos, tmp) < 0) {
            fprintf(stderr, "\nperplexity: decode: %s\n", deltafin_errmsg());
            goto done;
        }
        if (i == 0) ppl_eta("perplexity", t0, n_chunk);
        for (int k = first; k < n_ctx - 1; k++) {
            double v;
            if (base_path) { /* llama-perplexity's float steps when it saves logits */
                if (ppl_base_write_row(&base, deltafin_logits(c, k), chunk[k + 1], &v)) goto done;
            } else {
                v = -log_softmax(n_vocab, deltafin_logits(c, k), chunk[k + 1]);
            }
            nll += v;
            nll2 += v * v;
        }
        if (base_path && ppl_base_chunk_done(&base)) goto done;
        count += n_ctx - first - 1;
        printf("[%d]%.4lf,", i + 1, exp(nll / count));
        fflush(stdout);
    }
    printf("\n");
    nll2 /= count;
    nll /= count;
    const double ppl = exp(nll);
    nll2 -= nll * nll;
    if (nll2 <= 0) {
        fprintf(stderr, "Unexpected negative standard deviation of log(prob)\n");
        goto done;
    }
    nll2 = sqrt(nll2 / (count - 1));
    printf("Final estimate: PPL = %.4lf +/- %.5lf\n", ppl, nll2 * ppl);
    fflush(stdout);
    ret = 0;
done:
    if (base.fd >= 0 && ppl_base_close(&base)) ret = 1;
    if (ret && base.remove_on_fail) unlink(base_path); /* a partial file is of no use (the reader refuses it) */
    free(tmp);
    return ret;
}

/* the arguments each mode needs, and the mode's context: 0 or the exit status */
static int check_mode(df_settings *S, ppl_base *base, int *n_ctx) {
    const char *m = S->kld ? "--kl-divergence" : S->hellaswag ? "--hellaswag" : NULL;
    if (S->kld && S->hellaswag) return df_cli_usage_error(&k_perplexity, "use one of --kl-divergence and --hellaswag");
    if (S->hellaswag && S->kld_base)
        return df_cli_usage_error(&k_perplexity, "--kl-divergence-base does not apply to --hellaswag");
    if (!S->model || (!S->file && !S->kld) || (S->kld && !S->kld_base)) {
        fprintf(stderr, "perplexity: %s\n\n", S->kld ? "--kl-divergence needs -m MODEL and --kl-divergence-base FILE"
                                                     : "-m MODEL and -f TEXT are required");
        df_cli_help(&k_perplexity, stderr);
        return 2;
    }
    if (S->kld && S->file)
        return df_cli_usage_error(&k_perplexity, "%s scores the tokens of the base file: drop -f", m);
    if (S->hellaswag && S->hellaswag_tasks < 1)
        return df_cli_usage_error(&k_perplexity, "--hellaswag-tasks must be >= 1");
    *n_ctx = S->n_ctx;
    if (S->kld) {
        if (ppl_base_open(base, S->kld_base)) return 1;
        if (df_cli_given(S, &k_perplexity, "--ctx-size") && S->n_ctx != base->n_ctx)
            fprintf(stderr, "perplexity: note: %s was written with chunks of %d tokens: -c %d is not used\n",
                    S->kld_base, base->n_ctx, S->n_ctx);
        *n_ctx = base->n_ctx;
    }
    if (*n_ctx < 4) return df_cli_usage_error(&k_perplexity, "-c must be >= 4");
    return 0;
}

int cmd_perplexity(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_perplexity, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    ppl_base base = {.fd = -1};
    int n_ctx = 0;
    int ret = check_mode(&S, &base, &n_ctx);
    if (ret) { ppl_base_close(&base); return ret; }
    int n_batch = S.n_batch;
    if (n_batch <= 0) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (n_batch > n_ctx) n_batch = n_ctx;

    ret = 1;
    char *text = NULL;
    size_t len = 0;
    int32_t *toks = NULL;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    if (S.file && deltafin_read_file(S.file, &text, &len) < 0) {
        fprintf(stderr, "perplexity: %s\n", deltafin_errmsg());
        goto done;
    }
    if (len > 0 && text[len - 1] == '\n') text[--len] = 0; /* as llama.cpp's -f */
    if (df_cli_log_begin(&k_perplexity, &S) != DF_CLI_GO) goto done;
    deltafin_model_params mp = df_cli_model_params(&S);
    mp.n_ctx = n_ctx;     /* the plan reserves the chunk's context and batch */
    mp.n_batch = n_batch;
    if (deltafin_model_load(S.model, &mp, &m) < 0) { fprintf(stderr, "perplexity: %s\n", deltafin_errmsg()); goto done; }
    if (!deltafin_model_vocab(m)) { fprintf(stderr, "perplexity: model has no tokenizer\n"); goto done; }
    deltafin_ctx_params cp = df_cli_ctx_params(&S);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    if (deltafin_ctx_create(m, &cp, &c) < 0) { fprintf(stderr, "perplexity: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_apply_routing(&k_perplexity, &S, c)) goto done;

    if (S.kld) {
        ret = ppl_kl_divergence(c, m, &base);
    } else if (S.hellaswag) {
        ret = ppl_hellaswag(c, m, text, len, S.hellaswag_tasks);
    } else {
        const uint64_t t0 = deltafin_time_ns();
        const int nt = deltafin_vocab_tokenize_alloc(deltafin_model_vocab(m), text, len, true, false, &toks);
        if (nt < 0) { fprintf(stderr, "perplexity: tokenize: %s\n", deltafin_errmsg()); goto done; }
        fprintf(stderr, "perplexity: tokenization took %g ms\n", (deltafin_time_ns() - t0) / 1e6);
        ret = perplexity(c, m, toks, nt, n_ctx, S.chunks, S.kld_base);
    }
    if (ret == 0) df_cli_routing_report(&S, c, stderr);
done:
    ppl_base_close(&base);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    free(text);
    free(toks);
    df_cli_log_end(&S);
    return ret;
}
