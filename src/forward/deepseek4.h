/* deepseek4.h — what the two halves of deepseek4's forward pass share (private to
 * src/forward/deepseek4.c — hyper-connections, the layer hooks, the output mix — and
 * src/forward/deepseek4_attn.c — the attention with its compressors and lightning indexer):
 * the scratch carved from c->arch_scr, and the two RoPEs.
 * Threading: as the forward pass (one ctx's thread; loops fan out over its pool). */
#ifndef DF_FORWARD_DEEPSEEK4_H
#define DF_FORWARD_DEEPSEEK4_H
#include "forward/session.h"
#include "model/deepseek4.h"

/* Per-pass scratch for nb = c->n_batch rows (floats unless said). */
typedef struct ds4_bufs {
    float *hcs;           /* [nb][hc·D] the hyper-connection streams: the residual state */
    float *flat;          /* [nb][hc·D] the streams RMS-normed (mixer input); HC post's copy */
    float *mix;           /* [nb][(2+hc)·hc] mixer outputs */
    float *pre, *post;    /* [nb][hc] stream weights into / out of the block */
    float *comb;          /* [nb][hc·hc] the Sinkhorn-normalised stream mix, [dst + hc·src] */
    float *rc_raw, *rc_cmp; /* [nb][n_rot] cos/sin of each row's position: the plain and the
                             * compressed layers' RoPE */
    float *qr;            /* [nb][q_lora] the normed q latent */
    float *q, *o;         /* [nb][H·hd] queries, attention output */
    float *kv;            /* [nb][hd] */
    float *oa;            /* [nb][G·o_lora] the grouped LoRA's middle */
    float *ckv, *csc;     /* [nb][2·hd] the KV compressor's kv and (position-embedded) score */
    float *lkv, *lsc;     /* [nb][2·ID] the indexer compressor's */
    float *iq, *iw;       /* [nb][IH·ID] indexer queries, [nb][IH] their head weights */
    float *hs, *kf;       /* [nb][top_k] heap scores, [nb][ID] an indexer key as F32 */
    int32_t *hi, *sel, *nsel; /* [nb][top_k] heap indices and the selected rows, [nb] counts */
    float *cmp;           /* one block's pooling scores, weights, values [256 each], a RoPE row
                           * [n_rot], a compressed row [max(hd, ID)] (not per row) */
} ds4_bufs;

/* Carve b from c->arch_scr; the RoPEs of the plain (ratio 0) and the compressed layers. */
void ds4_carve(struct deltafin_ctx *c, ds4_bufs *b);
void ds4_ropes(const df_model *m, df_rope *raw, df_rope *cmp);
/* c->arch_scr bytes for n_batch rows */
uint64_t ds4_scratch_bytes(const df_model *m, int n_batch);

/* out = the attention block of layer il for the nt rows of the pass (x: attn_norm's output,
 * n_embd wide; out n_embd wide); stores the rows' keys and compressed rows in each sequence's
 * cache and advances its compressors' state (deepseek4_attn.c). */
int ds4_attend(struct deltafin_ctx *c, ds4_bufs *b, int il, int nt, const float *x, float *out);
#endif
