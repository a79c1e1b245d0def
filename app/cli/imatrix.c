/* imatrix.c — `deltafin imatrix -m MODEL -f TEXT -o FILE`: the importance matrix of a model over
 * a text, as llama-imatrix (tools/imatrix, d32676d) computes it: the text tokenized with BOS,
 * cut into chunks of CTX tokens (the first token of each replaced by BOS when the vocab adds
 * one), each chunk decoded from an empty cache with every row kept through the last layer, and
 * every weight product's input columns squared and summed (deltafin_imatrix_attach: the
 * engine's matmul observer, per expert for routed experts). The file is written every
 * --output-frequency chunks and at the end, in llama-imatrix's GGUF format (or its legacy
 * .dat). Routed experts stream from disk under --mem-limit like for any other command: the
 * matrix of a model far larger than RAM is computed with the same memory as running it. */
#include "app/cli/flags.h"
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const df_cmd k_imatrix = {
    DF_CMD_IMATRIX, "imatrix", "usage: deltafin imatrix -m MODEL -f TEXT [-o imatrix.gguf] [options]",
    "Importance matrix of MODEL over TEXT, computed as llama-imatrix does and written in its format: the\n"
    "mean squared input of every weight matrix's columns (per expert for routed experts), which\n"
    "`deltafin quantize --imatrix FILE` (and llama-quantize) weigh their rounding with. The text is cut into\n"
    "chunks of CTX tokens; at least 2 chunks are needed. Experts stream from disk under --mem-limit.",
    NULL, 0};

static int save(const deltafin_imatrix *im, const char *path, bool legacy, int chunk) {
    char at[4096];
    if (chunk > 0) snprintf(at, sizeof at, "%s.at_%d", path, chunk);
    if (deltafin_imatrix_save(im, chunk > 0 ? at : path, legacy) < 0) {
        fprintf(stderr, "\nimatrix: %s\n", deltafin_errmsg());
        return 1;
    }
    return 0;
}

/* the chunks: tokens[(from + i) * n_ctx ...] for i < *n_chunk; 1 (message printed) if too few */
static int plan_chunks(int n_tokens, int n_ctx, int from, int chunks, int *n_chunk) {
    if (from > 0 && (int64_t)(from + 2) * n_ctx >= n_tokens) {
        fprintf(stderr, "imatrix: there will be not enough tokens left after removing %d chunks\n", from);
        return 1;
    }
    const int left = n_tokens - from * n_ctx;
    if (left < 2 * n_ctx) {
        fprintf(stderr, "imatrix: you need at least %d tokens for a context of %d tokens\n", 2 * n_ctx, n_ctx);
        fprintf(stderr, "imatrix: the data file you provided tokenizes to only %d tokens\n", left);
        return 1;
    }
    *n_chunk = left / n_ctx;
    if (chunks >= 0 && chunks < *n_chunk) *n_chunk = chunks;
    return 0;
}

typedef struct {
    deltafin_model *m;
    deltafin_ctx *c;
    deltafin_imatrix *im;
    int32_t *toks, *chunk;
    char *text;
} run_state;

static int collect(const df_settings *S, run_state *r, int n_tok, int n_ctx, bool legacy) {
    int n_chunk;
    if (plan_chunks(n_tok, n_ctx, S->from_chunk, S->chunks, &n_chunk)) return 1;
    deltafin_vocab_info vi;
    deltafin_vocab_get_info(deltafin_model_vocab(r->m), &vi);
    const int32_t bos = deltafin_token_bos(r->m);
    fprintf(stderr, "imatrix: computing over %d chunks, n_ctx=%d, batch_size=%d\n", n_chunk, n_ctx,
            deltafin_ctx_n_batch(r->c));
    for (int i = 0; i < n_chunk; i++) {
        const uint64_t t0 = deltafin_time_ns();
        deltafin_ctx_truncate(r->c, 0);
        memcpy(r->chunk, r->toks + (int64_t)(S->from_chunk + i) * n_ctx, sizeof(int32_t) * (size_t)n_ctx);
        if (vi.add_bos && bos >= 0) r->chunk[0] = bos;
        /* every row's logits: the last layer keeps all rows, as llama-imatrix asks */
        if (deltafin_decode(r->c, r->chunk, n_ctx, true) < 0 || deltafin_imatrix_status(r->im) < 0) {
            fprintf(stderr, "\nimatrix: chunk %d: %s\n", i + 1, deltafin_errmsg());
            return 1;
        }
        if (i == 0) {
            const double tp = (deltafin_time_ns() - t0) / 1e9;
            fprintf(stderr, "imatrix: %.2f seconds per pass - ETA %.2f minutes\n", tp, tp * n_chunk / 60.0);
        }
        fprintf(stderr, "[%d]", i + 1);
        const int done = deltafin_imatrix_chunks(r->im);
        if (S->out_freq > 0 && done % S->out_freq == 0 && save(r->im, S->output, legacy, 0)) return 1;
        if (S->save_freq > 0 && done % S->save_freq == 0 && save(r->im, S->output, legacy, done)) return 1;
    }
    fputc('\n', stderr);
    return save(r->im, S->output, legacy, 0);
}

int cmd_imatrix(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_imatrix, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    if (!S.model || !S.file) {
        fprintf(stderr, "imatrix: -m MODEL and -f TEXT are required\n\n");
        df_cli_help(&k_imatrix, stderr);
        return 2;
    }
    if (S.n_ctx < 16) return df_cli_usage_error(&k_imatrix, "-c must be at least 16");
    if (S.from_chunk < 0) return df_cli_usage_error(&k_imatrix, "--chunk must be >= 0");
    if (S.out_format && strcmp(S.out_format, "gguf") && strcmp(S.out_format, "dat"))
        return df_cli_usage_error(&k_imatrix, "--output-format must be gguf or dat, not '%s'", S.out_format);
    const bool legacy = S.out_format && !strcmp(S.out_format, "dat");
    const int n_ctx = S.n_ctx;
    int n_batch = S.n_batch > 0 ? S.n_batch : (n_ctx < 512 ? n_ctx : 512);
    if (n_batch > n_ctx) n_batch = n_ctx;

    int ret = 1;
    size_t len = 0;
    run_state r = {0};
    if (deltafin_read_file(S.file, &r.text, &len) < 0) { fprintf(stderr, "imatrix: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_log_begin(&k_imatrix, &S) != DF_CLI_GO) goto done;
    deltafin_model_params mp = df_cli_model_params(&S);
    mp.n_ctx = n_ctx;
    mp.n_batch = n_batch;
    if (deltafin_model_load(S.model, &mp, &r.m) < 0) { fprintf(stderr, "imatrix: %s\n", deltafin_errmsg()); goto done; }
    if (!deltafin_model_vocab(r.m)) { fprintf(stderr, "imatrix: model has no tokenizer\n"); goto done; }
    deltafin_ctx_params cp = df_cli_ctx_params(&S);
    cp.n_batch = n_batch;
    if (deltafin_ctx_create(r.m, &cp, &r.c) < 0) { fprintf(stderr, "imatrix: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_apply_routing(&k_imatrix, &S, r.c)) goto done;
    if (deltafin_imatrix_new(n_ctx, S.process_output, &r.im) < 0 || deltafin_imatrix_add_dataset(r.im, S.file) < 0 ||
        deltafin_imatrix_attach(r.im, r.c) < 0) {
        fprintf(stderr, "imatrix: %s\n", deltafin_errmsg());
        goto done;
    }
    int nt = deltafin_tokenize(r.m, r.text, len, true, S.parse_special, NULL, 0);
    if (nt < 0) { fprintf(stderr, "imatrix: tokenize: %s\n", deltafin_errmsg()); goto done; }
    r.toks = malloc(sizeof(int32_t) * (size_t)(nt + 1));
    r.chunk = malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!r.toks || !r.chunk) { fprintf(stderr, "imatrix: out of memory\n"); goto done; }
    nt = deltafin_tokenize(r.m, r.text, len, true, S.parse_special, r.toks, nt);
    if (collect(&S, &r, nt, n_ctx, legacy)) goto done;
    deltafin_stats st;
    deltafin_ctx_stats(r.c, &st);
    fprintf(stderr, "imatrix: %d entries over %d chunks written to %s\n", deltafin_imatrix_n_entries(r.im),
            deltafin_imatrix_chunks(r.im), S.output);
    if (st.bytes_read)
        fprintf(stderr, "imatrix: %.1f MB of weights read from disk (%llu expert reads)\n", st.bytes_read / 1e6,
                (unsigned long long)st.expert_misses);
    df_cli_routing_report(&S, r.c, stderr);
    ret = 0;
done:
    deltafin_ctx_free(r.c);
    deltafin_imatrix_free(r.im);
    deltafin_model_free(r.m);
    free(r.text);
    free(r.toks);
    free(r.chunk);
    df_cli_log_end(&S);
    return ret;
}
