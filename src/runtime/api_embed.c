/* api_embed.c — embeddings (deltafin.h deltafin_embed): the mean over a text's tokens of the
 * model's final hidden state after the output norm — what llama.cpp computes for a causal
 * model under `--embeddings --pooling mean` (its t_embd, averaged) — then L2-normalized as
 * llama-server's /v1/embeddings does (embd_normalize 2).
 * Threading: as deltafin_decode (one thread per ctx). */
#include <math.h>

#include "deltafin.h"
#include "forward/session.h"

int deltafin_model_n_embd(const deltafin_model *m) { return m->hp.n_embd; }

int deltafin_embed(deltafin_ctx *c, const int32_t *ids, int n, bool normalize, float *out) {
    if (!c || !ids || n <= 0 || !out) return df_err(DF_ERR_INVALID, "embed: bad arguments (%d tokens)", n);
    const int D = c->m->hp.n_embd;
    float *sum = calloc((size_t)D, sizeof(float)); /* once per call, not per token */
    if (!sum) return df_err(DF_ERR_NOMEM, "embed: out of memory");
    c->embd_sum = sum;
    int rc = deltafin_decode(c, ids, n, true);
    c->embd_sum = NULL;
    if (rc == DF_OK) {
        double norm = 0.0;
        for (int d = 0; d < D; d++) {
            out[d] = sum[d] / (float)n;
            norm += (double)out[d] * out[d];
        }
        if (normalize && norm > 0.0) {
            const float inv = (float)(1.0 / sqrt(norm));
            for (int d = 0; d < D; d++) out[d] *= inv;
        }
    }
    free(sum);
    return rc;
}
