/* sampler.h — what tests (and nothing else) reach inside the sampler (sampler.c). */
#ifndef DF_RUNTIME_SAMPLER_H
#define DF_RUNTIME_SAMPLER_H

#include "deltafin.h"

/* The chain without the final draw: the candidates left and their probabilities (softmax of
 * their final logits), best first; ids/probs get up to cap of them. A choice made without a
 * draw (greedy, mirostat) comes back as that one id with probability 1. Stateful stages (XTC's
 * coin, mirostat's mu) advance as in a sample(). Returns the count or < 0. */
int df_sampler_candidates(deltafin_sampler *s, const float *logits, int n_vocab, int32_t *ids, float *probs,
                          int cap);
/* Add a DRY sequence breaker given as token ids (head first), as llama.cpp's
 * llama_sampler_init_dry_testing does; DRY must be on. */
int df_sampler_dry_add_breaker_ids(deltafin_sampler *s, const int32_t *ids, int n);
/* Mirostat's current mu. */
float df_sampler_mirostat_mu(const deltafin_sampler *s);

#endif
