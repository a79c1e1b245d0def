/* imatrix.h — what quantize.c needs of an importance matrix (runtime/imatrix.c; the public
 * collector and file API is in deltafin.h). */
#ifndef DF_IMATRIX_H
#define DF_IMATRIX_H
#include "deltafin.h"

/* Turn the loaded sums into the importance weights llama-quantize passes to its quantizers
 * (tools/quantize load_imatrix): GGUF sums / count per expert (1 where the count is 0), legacy
 * sums / ncall. DF_ERR_FORMAT for a GGUF file without the imatrix.* metadata or a non-finite
 * value (llama-quantize's refusals). */
int df_imatrix_prepare(deltafin_imatrix *im);
/* The weights of tensor `name` (*n values: ne0 per expert), or NULL when the file has none. */
const float *df_imatrix_weights(const deltafin_imatrix *im, const char *name, int64_t *n);
/* Add an entry with these sums and counts (dev tools: synthetic matrices); DF_ERR_INVALID if
 * the name exists or the sizes do not fit. */
int df_imatrix_put(deltafin_imatrix *im, const char *name, int64_t nval, int n_counts, const float *sums,
                   const int64_t *counts);
/* The file's first dataset (NULL if none) and its chunk count (0 if not recorded). */
const char *df_imatrix_dataset(const deltafin_imatrix *im);
int df_imatrix_file_chunks(const deltafin_imatrix *im);
#endif
