/* arch_deepseek4.c — DeepSeek-V4 ("deepseek4", e.g. V4 Flash; formats.md §3.4c) as llama.cpp
 * d32676d binds it: every layer a single-KV-head attention with a q LoRA, per-head RMS-normed
 * queries, attention sinks and a sliding window, plus on the layers whose compress ratio is 4 or
 * 128 a learned compressor of the keys (softmax-gated pooling of ratio positions, with a position
 * embedding; ratio 4 overlaps the previous block and adds the lightning indexer, which keeps the
 * top_k compressed rows per query); the attention output is de-roped and projected by a grouped
 * LoRA (wo_a per group, wo_b); the residual stream is hc_mult hyper-connection streams mixed by
 * a Sinkhorn-normalised matrix around each block; the MoE scores experts by sqrt(softplus) with
 * a selection bias, except the first hash_layer_count layers, which take the token's experts from
 * an I32 table (ffn_gate_tid2eid); routed and shared experts use a clamped SwiGLU. The trailing
 * nextn_predict_layers blocks (MTP) are bound and never run nor read.
 * KV / state layouts: model/deepseek4.h; the forward pass: src/forward/deepseek4*.c. */
#include "model/model.h"
#include "model/deepseek4.h"
#include <math.h>

#define TRYK(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

/* the per-layer key arrays: compress ratios (at least block_count entries) and SwiGLU limits */
static int ds4_layer_keys(df_model *m) {
    df_hparams *hp = &m->hp;
    const int n = hp->n_layer;
    char key[128];
    uint32_t r[DF_MAX_LAYERS];
    snprintf(key, sizeof key, "%s.attention.compress_ratios", m->arch->name);
    int rc = df_gguf_get_u32_arr_prefix(m->gguf, key, r, n);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_FORMAT, "%s: missing required key '%s'", m->path, key);
    TRYK(rc);
    for (int il = 0; il < n; il++) {
        if (r[il] != 0 && r[il] != 4 && r[il] != 128)
            return df_err(DF_ERR_UNSUPPORTED, "%s: layer %d: compress ratio %u (llama.cpp supports 0, 4 and 128)",
                          m->path, il, r[il]);
        hp->comp_ratio[il] = (uint8_t)r[il];
    }
    float lim[DF_MAX_LAYERS], lim_sh[DF_MAX_LAYERS];
    snprintf(key, sizeof key, "%s.swiglu_clamp_exp", m->arch->name);
    rc = df_gguf_get_f32_per_layer(m->gguf, key, lim, n);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_FORMAT, "%s: missing required key '%s'", m->path, key);
    TRYK(rc);
    snprintf(key, sizeof key, "%s.swiglu_clamp_shexp", m->arch->name);
    rc = df_gguf_get_f32_per_layer(m->gguf, key, lim_sh, n);
    if (rc == DF_ERR_NOTFOUND) memcpy(lim_sh, lim, sizeof(float) * (size_t)n);
    else TRYK(rc);
    /* one limit per kind for the layers that run (the released files repeat one value) */
    const int nr = df_hp_n_run_layers(hp);
    for (int il = 1; il < nr; il++)
        if (lim[il] != lim[0] || lim_sh[il] != lim_sh[0])
            return df_err(DF_ERR_UNSUPPORTED, "%s: swiglu_clamp_exp / _shexp vary per layer (not supported)", m->path);
    hp->swiglu_limit = lim[0];
    hp->swiglu_limit_shexp = lim_sh[0];
    return DF_OK;
}

/* keys of the hyper-connections, grouped output, compressor and indexer */
static int ds4_block_keys(df_model *m) {
    df_hparams *hp = &m->hp;
    uint32_t u;
    u = 0; TRYK(df_model_key_u32(m, "attention.q_lora_rank", &u, true)); hp->n_lora_q = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.sliding_window", &u, true)); hp->n_swa = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.output_group_count", &u, true)); hp->o_groups = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.output_lora_rank", &u, true)); hp->o_lora = (int)u;
    TRYK(df_model_key_f32(m, "attention.compress_rope_freq_base", &hp->comp_rope_base, true));
    u = 0; TRYK(df_model_key_u32(m, "hyper_connection.count", &u, true)); hp->hc_mult = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "hyper_connection.sinkhorn_iterations", &u, true)); hp->hc_iters = (int)u;
    TRYK(df_model_key_f32(m, "hyper_connection.epsilon", &hp->hc_eps, true));
    u = 0; TRYK(df_model_key_u32(m, "hash_layer_count", &u, true)); hp->n_hash_layers = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.indexer.head_count", &u, true)); hp->indexer_n_head = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.indexer.key_length", &u, true)); hp->indexer_head_size = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.indexer.top_k", &u, true)); hp->indexer_top_k = (int)u;
    return DF_OK;
}

/* keys of the MoE */
static int ds4_moe_keys(df_model *m) {
    df_hparams *hp = &m->hp;
    uint32_t u;
    u = 0; TRYK(df_model_key_u32(m, "expert_feed_forward_length", &u, true)); hp->n_ff_exp = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_shared_count", &u, true)); hp->n_expert_shared = (int)u;
    TRYK(df_model_key_f32(m, "expert_weights_scale", &hp->expert_weights_scale, true));
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch->name);
    int rc = df_gguf_get_bool(m->gguf, key, &hp->expert_weights_norm);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_FORMAT, "%s: missing required key '%s'", m->path, key);
    TRYK(rc);
    u = 0; TRYK(df_model_key_u32(m, "expert_gating_func", &u, true));
    if (u != DF_GATING_SQRT_SOFTPLUS)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_gating_func %u: deepseek4 expects 4 (sqrt-softplus), as "
                      "llama.cpp does", m->path, u);
    hp->gating = DF_GATING_SQRT_SOFTPLUS_LOGF;
    hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared;
    hp->ffn_act = DF_ACT_SWIGLU_CLAMP;
    return DF_OK;
}

/* NextN / MTP layers: llama.cpp counts them only where the file has the first one's eh_proj, and
 * a file with the MTP blocks alone (no trunk) is a draft model, not one to decode */
static int ds4_nextn(df_model *m) {
    df_hparams *hp = &m->hp;
    uint32_t u = 0;
    TRYK(df_model_key_u32(m, "nextn_predict_layers", &u, false));
    if (u >= (uint32_t)hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: nextn_predict_layers %u must be < block_count %d", m->path, u, hp->n_layer);
    char name[96];
    snprintf(name, sizeof name, "blk.%u.nextn.eh_proj.weight", (unsigned)hp->n_layer - u);
    if (u > 0 && !df_model_has_tensor(m, name)) u = 0;
    hp->n_layer_nextn = (int)u;
    if (u > 0 && !df_model_has_tensor(m, "blk.0.attn_norm.weight"))
        return df_err(DF_ERR_UNSUPPORTED, "%s: an MTP-only deepseek4 file (the NextN blocks without the trunk): a "
                      "draft model for llama.cpp's speculative decoding, not a model to run", m->path);
    return DF_OK;
}

static int ds4_check(df_model *m) {
    df_hparams *hp = &m->hp;
    const int hd = hp->n_embd_head_k, id = hp->indexer_head_size;
    const char *why = NULL;
    if (hp->hc_mult != 4) why = "hyper_connection.count must be 4 (llama.cpp's graph and fused ops)";
    else if (hp->hc_iters < 1) why = "hyper_connection.sinkhorn_iterations must be >= 1";
    else if (hd != hp->n_embd_head_v) why = "key_length must equal value_length";
    else if (hp->n_rot <= 0 || hp->n_rot > hd) why = "rope.dimension_count must be in 1..key_length";
    else if (hp->n_lora_q <= 0 || hp->n_lora_q > 65536) why = "attention.q_lora_rank out of range";
    else if (hp->o_groups <= 0 || hp->n_head % hp->o_groups || hp->o_lora <= 0 || hp->o_lora > 65536)
        why = "attention.output_group_count must divide head_count and output_lora_rank be > 0";
    else if (hp->n_swa <= 0) why = "attention.sliding_window must be > 0";
    else if (hp->indexer_n_head < 1 || hp->indexer_n_head > 4096 || id < 64 || id > 4096 || (id & (id - 1)) ||
             id < hp->n_rot || hp->indexer_top_k < 1)
        why = "bad indexer (head_count >= 1, key_length a power of two >= 64 and >= rope dims, top_k >= 1)";
    else if (hp->n_expert <= 0 || hp->n_expert_used <= 0 || hp->n_ff_exp <= 0 || hp->n_expert_shared < 1 ||
             hp->n_expert_shared > 64)
        why = "needs experts, expert_feed_forward_length and 1..64 shared experts";
    else if (hp->n_hash_layers < 0 || hp->n_hash_layers > hp->n_layer) why = "hash_layer_count > block_count";
    else if (!(hp->hc_eps >= 0.0f) || !(hp->comp_rope_base > 0.0f)) why = "bad hyper_connection.epsilon or compress_rope_freq_base";
    if (why) return df_err(DF_ERR_FORMAT, "%s: deepseek4: %s", m->path, why);
    return DF_OK;
}

static int deepseek4_hparams(df_model *m) {
    m->hp.rope_mode = DF_ROPE_NORM;
    TRYK(ds4_nextn(m));
    TRYK(ds4_block_keys(m));
    TRYK(ds4_moe_keys(m));
    TRYK(ds4_layer_keys(m));
    return ds4_check(m);
}

/* layer properties: the compress ratio (with the indexer on ratio 4), hash routing */
enum { DS4_C4 = DF_W_ARCH(0), DS4_C128 = DF_W_ARCH(1), DS4_CMP = DF_W_ARCH(2), DS4_HASH = DF_W_ARCH(3) };
/* arch dims */
enum { DS4_HCD = DF_D_ARCH, DS4_MIX, DS4_HC, DS4_OA_IN, DS4_OLORA, DS4_G, DS4_OB, DS4_CKV, DS4_RATIO,
       DS4_IH, DS4_ID, DS4_IQ, DS4_EUSED };

static uint32_t deepseek4_props(const df_hparams *hp, int il) {
    if (il < 0) return 0;
    const int r = hp->comp_ratio[il];
    return (r == 4 ? DS4_C4 | DS4_CMP : 0) | (r == 128 ? DS4_C128 | DS4_CMP : 0) |
           (il < hp->n_hash_layers ? DS4_HASH : 0);
}

static void deepseek4_dims(const df_hparams *hp, int il, int64_t *d) {
    const int64_t hc = hp->hc_mult;
    d[DS4_HCD] = hc * hp->n_embd;
    d[DS4_MIX] = (2 + hc) * hc;
    d[DS4_HC] = hc;
    d[DS4_OA_IN] = hp->o_groups > 0 ? (int64_t)hp->n_head * hp->n_embd_head_k / hp->o_groups : 0;
    d[DS4_OLORA] = hp->o_lora;
    d[DS4_G] = hp->o_groups;
    d[DS4_OB] = (int64_t)hp->o_groups * hp->o_lora;
    d[DS4_CKV] = il >= 0 ? ds4_state_width(hp, il) : 0;
    d[DS4_RATIO] = il >= 0 ? hp->comp_ratio[il] : 0;
    d[DS4_IH] = hp->indexer_n_head;
    d[DS4_ID] = hp->indexer_head_size;
    d[DS4_IQ] = (int64_t)hp->indexer_n_head * hp->indexer_head_size;
    d[DS4_EUSED] = hp->n_expert_used;
}

#define NX DF_W_NEXTN
#define NO DF_T_NORM
#define UNUSED_OPT (DF_T_UNUSED | DF_T_OPTIONAL)
#define HC_MIXER(blk, field)                                                                         \
    DF_TS("blk.%d.hc_" blk "_fn.weight", DF_LF(hc_##field##_fn), 0, DF_R_HC, 0, 0, DS4_HCD, DS4_MIX),  \
    DF_TS("blk.%d.hc_" blk "_base.weight", DF_LF(hc_##field##_base), NO, DF_R_BIAS, 0, 0, DS4_MIX),   \
    DF_TS("blk.%d.hc_" blk "_scale.weight", DF_LF(hc_##field##_scale), NO, DF_R_NORM, 0, 0, DF_DX(3, DF_D_ONE))
/* a compressor: kv / gate projections, position embedding {c, ratio}, RMSNorm of its output */
#define COMPRESSOR(pfx, f, when, c, n)                                                               \
    DF_TS("blk.%d." pfx "_kv.weight", DF_LF(f##wkv), 0, DF_R_MAT, when, 0, DF_D_EMBD, c),            \
    DF_TS("blk.%d." pfx "_gate.weight", DF_LF(f##wgate), 0, DF_R_MAT, when, 0, DF_D_EMBD, c),        \
    DF_TS("blk.%d." pfx "_ape.weight", DF_LF(f##ape), 0, DF_R_APE, when, 0, c, DS4_RATIO),            \
    DF_TS("blk.%d." pfx "_norm.weight", DF_LF(f##norm), NO, DF_R_NORM, when, 0, n)
static const df_tensor_spec deepseek4_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_OUTPUT(0),
    DF_TS("output_hc_fn.weight", DF_MF(hc_head_fn), 0, DF_R_HC, 0, 0, DS4_HCD, DS4_HC),
    DF_TS("output_hc_base.weight", DF_MF(hc_head_base), NO, DF_R_BIAS, 0, 0, DS4_HC),
    DF_TS("output_hc_scale.weight", DF_MF(hc_head_scale), NO, DF_R_NORM, 0, 0, DF_D_ONE),
    DF_TS("blk.%d.attn_norm.weight", DF_LF(attn_norm), NO, DF_R_NORM, 0, 0, DF_D_EMBD),
    DF_TS("blk.%d.attn_sinks.weight", DF_LF(attn_sinks), NO, DF_R_BIAS, 0, 0, DF_D_HEAD),
    DF_TS("blk.%d.attn_q_a.weight", DF_LF(wq_a), 0, DF_R_MAT, 0, 0, DF_D_EMBD, DF_D_LORA_Q),
    DF_TS("blk.%d.attn_q_a_norm.weight", DF_LF(q_a_norm), NO, DF_R_NORM, 0, 0, DF_D_LORA_Q),
    DF_TS("blk.%d.attn_q_b.weight", DF_LF(wq_b), 0, DF_R_MAT, 0, 0, DF_D_LORA_Q, DF_D_Q),
    DF_TS("blk.%d.attn_kv.weight", DF_LF(wkv), 0, DF_R_MAT, 0, 0, DF_D_EMBD, DF_D_HEAD_K),
    DF_TS("blk.%d.attn_kv_a_norm.weight", DF_LF(kv_a_norm), NO, DF_R_NORM, 0, 0, DF_D_HEAD_K),
    /* {H·hd/G, o_lora, G}, stored {H·hd/G, G·o_lora} by the converter */
    DF_TS("blk.%d.attn_output_a.weight", DF_LF(wo_a), DF_T_RESHAPE, DF_R_MAT, 0, 0, DS4_OA_IN, DS4_OLORA, DS4_G),
    DF_TS("blk.%d.attn_output_b.weight", DF_LF(wo_b), 0, DF_R_MAT, 0, 0, DS4_OB, DF_D_EMBD),
    HC_MIXER("attn", attn),
    HC_MIXER("ffn", ffn),
    COMPRESSOR("attn_compressor", cmp_, DS4_CMP, DS4_CKV, DF_D_HEAD_K),
    DF_TS("blk.%d.indexer.proj.weight", DF_LF(idx_proj), 0, DF_R_MAT, DS4_C4, 0, DF_D_EMBD, DS4_IH),
    DF_TS("blk.%d.indexer.attn_q_b.weight", DF_LF(idx_q_b), 0, DF_R_MAT, DS4_C4, 0, DF_D_LORA_Q, DS4_IQ),
    COMPRESSOR("indexer_compressor", idx_cmp_, DS4_C4, DF_DX(2, DS4_ID), DS4_ID),
    DF_SCHEMA_MOE_ROUTER,
    DF_TS("blk.%d.ffn_gate_tid2eid.weight", DF_LF(gate_tid2eid), DF_T_INDEX, DF_R_INDEX, DS4_HASH, 0, DS4_EUSED,
          DF_D_VOCAB),
    DF_TS("blk.%d.exp_probs_b.bias", DF_LF(exp_probs_b), NO, DF_R_BIAS, DF_W_MOE, DS4_HASH, DF_D_EXPERT),
    DF_SCHEMA_FFN_NORM,
    DF_SCHEMA_MOE_EXPS,
    DF_SCHEMA_SHEXP(0, 0),
    /* NextN / MTP heads: loaded for the tensor count, never read (DF_T_UNUSED) */
    DF_TS("blk.%d.nextn.eh_proj.weight", 0, DF_T_UNUSED, DF_R_MAT, NX, 0, DF_DX(2, DF_D_EMBD), DF_D_EMBD),
    DF_TS("blk.%d.nextn.enorm.weight", 0, DF_T_UNUSED | NO, DF_R_NORM, NX, 0, DF_D_EMBD),
    DF_TS("blk.%d.nextn.hnorm.weight", 0, DF_T_UNUSED | NO, DF_R_NORM, NX, 0, DF_D_EMBD),
    DF_TS("blk.%d.nextn.embed_tokens.weight", 0, UNUSED_OPT, DF_R_EMBD, NX, 0, DF_D_EMBD, DF_D_VOCAB),
    DF_TS("blk.%d.nextn.shared_head_head.weight", 0, UNUSED_OPT, DF_R_OUT, NX, 0, DF_D_EMBD, DF_D_VOCAB),
    DF_TS("blk.%d.nextn.shared_head_norm.weight", 0, UNUSED_OPT | NO, DF_R_NORM, NX, 0, DF_D_EMBD),
};
#undef NX
#undef NO
#undef UNUSED_OPT
#undef HC_MIXER
#undef COMPRESSOR

/* the raw row of every position, then the compressed rows amortised per position (deepseek4.h) */
static void deepseek4_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    const df_hparams *hp = &m->hp;
    const int r = hp->comp_ratio[il];
    *k_row = hp->n_embd_head_k + (r ? (ds4_comp_elems(hp, il) + r - 1) / r : 0);
    *v_row = 0; /* the value is the key */
}

static void deepseek4_describe(const df_hparams *hp, char *buf, size_t cap) {
    char r[160];
    size_t o = 0;
    const int n = df_hp_n_run_layers(hp);
    for (int il = 0; il < n && o + 8 < sizeof r; il++) o += (size_t)snprintf(r + o, sizeof r - o, "%s%d", il ? "," : "", hp->comp_ratio[il]);
    if (o + 8 >= sizeof r) snprintf(r + sizeof r - 5, 5, "...");
    snprintf(buf, cap, "compress ratios %s, window %d, compress rope base %g; indexer %d x %d, top %d; "
             "hyper-connections %d (Sinkhorn %d, eps %g); output %d groups x %d; hash-routed layers %d; "
             "SwiGLU limit %g / shared %g; NextN layers %d (not run)", r, hp->n_swa, (double)hp->comp_rope_base,
             hp->indexer_n_head, hp->indexer_head_size, hp->indexer_top_k, hp->hc_mult, hp->hc_iters,
             (double)hp->hc_eps, hp->o_groups, hp->o_lora, hp->n_hash_layers, (double)hp->swiglu_limit,
             (double)hp->swiglu_limit_shexp, hp->n_layer_nextn);
}

static uint64_t deepseek4_state_bytes(const df_model *m) {
    return 4 * ds4_state_off(&m->hp, m->hp.n_layer);
}

const df_arch df_arch_deepseek4 = {
    .name = "deepseek4",
    .load_hparams = deepseek4_hparams,
    DF_SCHEMA(deepseek4_tensors),
    .layer_props = deepseek4_props,
    .dims = deepseek4_dims,
    .kv_row = deepseek4_kv_row,
    .state_bytes = deepseek4_state_bytes,
    .describe = deepseek4_describe,
    .kv_f16_only = true,
};
