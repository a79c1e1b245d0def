/* attn_mla.h — multi-head latent attention (deepseek2, formats.md §3.4) as a df_arch
 * layer_attn hook: the absorbed form llama.cpp uses for files with attn_k_b / attn_v_b
 * (MQA over a KV cache of kv_lora_rank + rope dims per token, V a view of its first
 * kv_lora_rank dims) and the legacy attn_kv_b form (ordinary MHA with dq-dim keys).
 * Threading: called on the ctx's thread; matmuls and attention fan out over the ctx pool. */
#ifndef DF_ATTN_MLA_H
#define DF_ATTN_MLA_H
#include "model/model.h"
#include "forward/ops.h"

struct deltafin_ctx;
/* c->h += Attn_MLA(RMSNorm(c->h)) for the nt rows of the pass (c->seg); stores each row's KV
 * rows in its own sequence's cache. */
int df_layer_attn_mla(struct deltafin_ctx *c, int il, int nt);
/* The attention alone: out = Attn_MLA(x) for nt tokens (x already normalized, n_embd wide;
 * out n_embd wide), KV rows stored; RoPE unless hp.no_rope; the optional attn_gate
 * (kimi-k3) multiplies the head outputs by sigmoid(W_gate x) before attn_output.
 * Uses the start of c->arch_scr (df_mla_scratch_bytes). */
int df_mla_attend(struct deltafin_ctx *c, int il, int nt, const float *x, float *out);
/* arch_scratch hook: bytes the above needs for n_batch tokens. */
uint64_t df_mla_scratch_bytes(const df_model *m, int n_batch);
#endif
