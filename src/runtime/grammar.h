/* grammar.h — the one seam between the sampler (sampler.c) and constrained sampling
 * (api_grammar.c): a sampler with a grammar attached samples through df_grammar_sample, which
 * runs the ordinary chain (df_sampler_sample_chain) and, when the chain's choice is not allowed,
 * runs it again on the logits with every disallowed token at -inf (llama.cpp's common_sampler
 * does the same: try first, resample under the grammar only when needed). */
#ifndef DF_RUNTIME_GRAMMAR_H
#define DF_RUNTIME_GRAMMAR_H

#include "deltafin.h"

/* The sampler's chain without the grammar (sampler.c). */
int32_t df_sampler_sample_chain(deltafin_sampler *s, const float *logits, int n_vocab);
/* Constrained choice (api_grammar.c); -1 with an error when the grammar allows no token. */
int32_t df_grammar_sample(deltafin_grammar *g, deltafin_sampler *s, const float *logits, int n_vocab);

#endif
