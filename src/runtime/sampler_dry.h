/* sampler_dry.h — the DRY ("don't repeat yourself") stage of the sampler (sampler_dry.c),
 * llama.cpp's llama_sampler_dry (formats.md §6.2):
 *   - the last `last_n` accepted ids are kept;
 *   - sequence breakers (text such as "\n") are turned, once, into "head token -> tail ids"
 *     entries over the vocabulary: every token whose text contains the breaker is a head with
 *     no tail; a token whose text ends with a prefix of the breaker is a head whose tail is the
 *     tokenization of the rest (at most 20 ids);
 *   - before each draw: the longest repeat allowed is cut at the most recent breaker, the
 *     length of the repeat each candidate would extend is found (a reversed Z-algorithm over
 *     the recent ids), and a token extending a repeat of length L >= allowed loses
 *     multiplier * base^(L - allowed) (the exponent clamped so the power stays finite);
 *     single-token breakers are never penalized.
 * Invariant: after df_dry_size(n_vocab), analyse/apply do not allocate.
 * Threading: one per sampler. */
#ifndef DF_RUNTIME_SAMPLER_DRY_H
#define DF_RUNTIME_SAMPLER_DRY_H

#include "deltafin.h"

typedef struct df_dry df_dry;

/* NULL with an error when out of memory or a breaker cannot be processed. vocab may be NULL
 * only when n_breakers is 0. */
df_dry *df_dry_create(float multiplier, float base, int allowed_length, int last_n,
                      const deltafin_vocab *vocab, const char *const *breakers, int n_breakers);
void df_dry_free(df_dry *d);
/* Add a breaker given as token ids (head first), as llama.cpp's test wrapper does. */
int df_dry_add_breaker_ids(df_dry *d, const int32_t *ids, int n);
/* Scratch for a vocabulary of n_vocab ids (only grows). */
int df_dry_size(df_dry *d, int n_vocab);
void df_dry_accept(df_dry *d, int32_t id);
/* Analyse the recent ids (once per draw); then df_dry_penalty gives what to subtract from a
 * token's logit (0: none). df_dry_each calls fn for every penalized token. */
void df_dry_analyse(df_dry *d);
float df_dry_penalty(const df_dry *d, int32_t id);
void df_dry_each(const df_dry *d, void (*fn)(void *ud, int32_t id, float penalty), void *ud);

#endif
