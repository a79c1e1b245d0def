/* perplexity.h — what `deltafin perplexity`'s modes share (app/cli/perplexity.c: perplexity and
 * the driver; ppl_kld.c: the base log-probabilities file and the KL-divergence statistics;
 * ppl_hellaswag.c: the HellaSwag score). Each mode follows llama-perplexity (llama.cpp d32676d,
 * tools/perplexity/perplexity.cpp): the same chunks, the same float and double steps, the same
 * printed layout, so its figures can be compared with llama.cpp's line by line.
 * Threading: none (the main thread; decodes use the context's pool). */
#ifndef DF_CLI_PERPLEXITY_H
#define DF_CLI_PERPLEXITY_H
#include "deltafin.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Decode one chunk of n tokens from an empty cache with every position's logits, its first
 * token replaced by bos (>= 0) as llama-perplexity does for each chunk. tmp: n ints. */
int ppl_decode_chunk(deltafin_ctx *c, const int32_t *toks, int n, int32_t bos, int32_t *tmp);
/* "NAME: S seconds per pass - ETA M minutes" on stderr, after the first chunk (t0: its start). */
void ppl_eta(const char *name, uint64_t t0, int n_chunk);

/* ---- the base file (llama-perplexity --kl-divergence-base / --save-all-logits) ------------
 *   "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk, int32 tokens[n_chunk * n_ctx],
 *   then for each chunk, each scored position (n_ctx - 1 - n_ctx / 2 of them), a row of
 *   nv = 2 * ((n_vocab + 1) / 2) + 4 uint16: float scale, float min_log_prob, n_vocab values q
 *   (log p = scale * q + min_log_prob; q = 0 at or below max(min logit, max logit - 16)),
 *   padding to nv. Little-endian, as llama.cpp writes it on x86 and ARM.
 * One row at a time is in memory, and the file's pages are dropped after each chunk, so a
 * large file costs neither RAM nor page cache under --mem-limit. */
typedef struct {
    const char *path;
    int fd;
    bool writer, remove_on_fail;
    int n_ctx, n_vocab, n_chunk, nv;
    uint16_t *row;                /* nv values */
    int32_t *tokens;              /* reader: n_chunk * n_ctx */
    uint64_t off, chunk_off;      /* file offset now / where the chunk began */
} ppl_base;

/* Writer: create path and write the header and tokens (n_chunk * n_ctx of toks). */
int ppl_base_create(ppl_base *b, const char *path, int n_ctx, int n_vocab, int n_chunk, const int32_t *toks);
/* Write the row of one scored position; *nll = -log p(tok) as llama-perplexity computes it when
 * it saves logits (float steps). */
int ppl_base_write_row(ppl_base *b, const float *logits, int tok, double *nll);
/* Reader: open path, check the header, the size (every row present) and the tokens. */
int ppl_base_open(ppl_base *b, const char *path);
int ppl_base_read_row(ppl_base *b);
/* After each chunk (writer: data on disk first): drop its pages from the page cache. */
int ppl_base_chunk_done(ppl_base *b);
/* Closes; a writer reports a failed close (0 or -1, message printed). */
int ppl_base_close(ppl_base *b);

/* `--kl-divergence`: score every chunk of the base file with c, print llama-perplexity's
 * per-chunk table and final statistics on stdout. 0, or 1 after printing the error. */
int ppl_kl_divergence(deltafin_ctx *c, const deltafin_model *m, ppl_base *b);

/* `--hellaswag`: tasks from text (the task file, one trailing newline removed), n_tasks of them
 * chosen as llama-perplexity chooses them. 0, or 1 after printing the error. */
int ppl_hellaswag(deltafin_ctx *c, const deltafin_model *m, const char *text, size_t len, int n_tasks);
#endif
