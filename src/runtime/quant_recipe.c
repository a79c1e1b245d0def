/* quant_recipe.c — see quant_recipe.h. Every rule below is llama-quant.cpp's (d32676d), in its
 * order; the comments name its functions. Tensors are visited as llama-quantize's model loader
 * orders them (by layer number, then by name), because the per-category counters that some
 * recipes consult (attn_v's "first 4 layers", use_more_bits) count in that order. */
#include "runtime/quant_recipe.h"
#include "kernels/quant.h"

#include <ctype.h>
#include <stdlib.h>

static const df_qr_recipe k_recipes[] = {
    {"Q4_0", DF_FT_Q4_0, DF_TYPE_Q4_0, " 4.34G, +0.4685 ppl @ Llama-3-8B"},
    {"Q4_1", DF_FT_Q4_1, DF_TYPE_Q4_1, " 4.78G, +0.4511 ppl @ Llama-3-8B"},
    {"MXFP4_MOE", DF_FT_MXFP4_MOE, DF_TYPE_MXFP4, " MXFP4 MoE"},
    {"Q5_0", DF_FT_Q5_0, DF_TYPE_Q5_0, " 5.21G, +0.1316 ppl @ Llama-3-8B"},
    {"Q5_1", DF_FT_Q5_1, DF_TYPE_Q5_1, " 5.65G, +0.1062 ppl @ Llama-3-8B"},
    {"IQ2_XXS", DF_FT_IQ2_XXS, DF_TYPE_IQ2_XXS, " 2.06 bpw quantization"},
    {"IQ2_XS", DF_FT_IQ2_XS, DF_TYPE_IQ2_XS, " 2.31 bpw quantization"},
    {"IQ2_S", DF_FT_IQ2_S, DF_TYPE_IQ2_XS, " 2.5  bpw quantization"},
    {"IQ2_M", DF_FT_IQ2_M, DF_TYPE_IQ2_S, " 2.7  bpw quantization"},
    {"IQ1_S", DF_FT_IQ1_S, DF_TYPE_IQ1_S, " 1.56 bpw quantization"},
    {"IQ1_M", DF_FT_IQ1_M, DF_TYPE_IQ1_M, " 1.75 bpw quantization"},
    {"TQ1_0", DF_FT_TQ1_0, DF_TYPE_TQ1_0, " 1.69 bpw ternarization"},
    {"TQ2_0", DF_FT_TQ2_0, DF_TYPE_TQ2_0, " 2.06 bpw ternarization"},
    {"Q2_K", DF_FT_Q2_K, DF_TYPE_Q2_K, " 2.96G, +3.5199 ppl @ Llama-3-8B"},
    {"Q2_K_S", DF_FT_Q2_K_S, DF_TYPE_Q2_K, " 2.96G, +3.1836 ppl @ Llama-3-8B"},
    {"IQ3_XXS", DF_FT_IQ3_XXS, DF_TYPE_IQ3_XXS, " 3.06 bpw quantization"},
    {"IQ3_S", DF_FT_IQ3_S, DF_TYPE_IQ3_S, " 3.44 bpw quantization"},
    {"IQ3_M", DF_FT_IQ3_M, DF_TYPE_IQ3_S, " 3.66 bpw quantization mix"},
    {"Q3_K", DF_FT_Q3_K_M, DF_TYPE_Q3_K, "alias for Q3_K_M"},
    {"IQ3_XS", DF_FT_IQ3_XS, DF_TYPE_IQ3_S, " 3.3 bpw quantization"},
    {"Q3_K_S", DF_FT_Q3_K_S, DF_TYPE_Q3_K, " 3.41G, +1.6321 ppl @ Llama-3-8B"},
    {"Q3_K_M", DF_FT_Q3_K_M, DF_TYPE_Q3_K, " 3.74G, +0.6569 ppl @ Llama-3-8B"},
    {"Q3_K_L", DF_FT_Q3_K_L, DF_TYPE_Q3_K, " 4.03G, +0.5562 ppl @ Llama-3-8B"},
    {"IQ4_NL", DF_FT_IQ4_NL, DF_TYPE_IQ4_NL, " 4.50 bpw non-linear quantization"},
    {"IQ4_XS", DF_FT_IQ4_XS, DF_TYPE_IQ4_XS, " 4.25 bpw non-linear quantization"},
    {"Q4_K", DF_FT_Q4_K_M, DF_TYPE_Q4_K, "alias for Q4_K_M"},
    {"Q4_K_S", DF_FT_Q4_K_S, DF_TYPE_Q4_K, " 4.37G, +0.2689 ppl @ Llama-3-8B"},
    {"Q4_K_M", DF_FT_Q4_K_M, DF_TYPE_Q4_K, " 4.58G, +0.1754 ppl @ Llama-3-8B"},
    {"Q5_K", DF_FT_Q5_K_M, DF_TYPE_Q5_K, "alias for Q5_K_M"},
    {"Q5_K_S", DF_FT_Q5_K_S, DF_TYPE_Q5_K, " 5.21G, +0.1049 ppl @ Llama-3-8B"},
    {"Q5_K_M", DF_FT_Q5_K_M, DF_TYPE_Q5_K, " 5.33G, +0.0569 ppl @ Llama-3-8B"},
    {"Q6_K", DF_FT_Q6_K, DF_TYPE_Q6_K, " 6.14G, +0.0217 ppl @ Llama-3-8B"},
    {"Q8_0", DF_FT_Q8_0, DF_TYPE_Q8_0, " 7.96G, +0.0026 ppl @ Llama-3-8B"},
    {"F16", DF_FT_F16, DF_TYPE_F16, "14.00G, +0.0020 ppl @ Mistral-7B"},
    {"BF16", DF_FT_BF16, DF_TYPE_BF16, "14.00G, -0.0050 ppl @ Mistral-7B"},
    {"F32", DF_FT_ALL_F32, DF_TYPE_F32, "26.00G              @ 7B"},
    {"COPY", DF_FT_ALL_F32, -1, "only copy tensors, no quantizing"},
    /* deltafin's own (no llama-quantize recipe): every matrix MXFP4, the output Q6_K */
    {"MXFP4", DF_FT_PLAIN, DF_TYPE_MXFP4, "every matrix MXFP4 (deltafin only; MXFP4_MOE: experts only)"},
};
enum { N_RECIPES = (int)(sizeof k_recipes / sizeof k_recipes[0]) };

const df_qr_recipe *df_qr_recipe_at(int i) { return i >= 0 && i < N_RECIPES ? &k_recipes[i] : NULL; }

const df_qr_recipe *df_qr_recipe_find(const char *name) {
    if (!name || !*name) return NULL;
    for (int i = 0; i < N_RECIPES; i++)
        if (!strcasecmp(k_recipes[i].name, name)) return &k_recipes[i];
    /* llama-quantize also takes the ftype number; the first recipe with it (not COPY) */
    char *end;
    long v = strtol(name, &end, 10);
    if (*end || !isdigit((unsigned char)name[0])) return NULL;
    for (int i = 0; i < N_RECIPES; i++)
        if (k_recipes[i].ftype == v && k_recipes[i].type >= 0) return &k_recipes[i];
    return NULL;
}

/* ------------------------------------------------------------------ the model's shape */

typedef struct {
    int n_expert, n_gqa, n_layer;
    bool falcon, is_70b;
} shape;

static uint32_t kv_u32(const df_gguf *g, const char *arch, const char *key, uint32_t def) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    uint32_t v;
    if (df_gguf_get_u32(g, k, &v) == DF_OK) return v;
    /* per-layer arrays: llama-quantize's n_head() / n_head_kv() read layer 0 */
    const void *arr;
    uint64_t n;
    if (df_gguf_get_arr(g, k, DF_GGUF_U32, &arr, &n) == DF_OK && n > 0) return ((const uint32_t *)arr)[0];
    if (df_gguf_get_arr(g, k, DF_GGUF_I32, &arr, &n) == DF_OK && n > 0) return (uint32_t)((const int32_t *)arr)[0];
    return def;
}

static shape model_shape(const df_gguf *g) {
    shape s = {0};
    const char *arch = "";
    df_gguf_get_str(g, "general.architecture", &arch);
    s.n_expert = (int)kv_u32(g, arch, "expert_count", 0);
    s.n_layer = (int)kv_u32(g, arch, "block_count", 0);
    const uint32_t n_head = kv_u32(g, arch, "attention.head_count", 0);
    const uint32_t n_head_kv = kv_u32(g, arch, "attention.head_count_kv", n_head);
    s.n_gqa = n_head_kv ? (int)(n_head / n_head_kv) : 0;
    s.falcon = !strcmp(arch, "falcon");
    /* LLM_TYPE_70B, the one model type the recipes consult (each arch's load_arch_hparams) */
    s.is_70b = (!strcmp(arch, "llama") && s.n_expert != 8 && s.n_layer == 80 && n_head != n_head_kv) ||
               ((!strcmp(arch, "qwen2") || !strcmp(arch, "deci") || !strcmp(arch, "olmo")) && s.n_layer == 80) ||
               (!strcmp(arch, "jais2") && s.n_layer == 68);
    return s;
}

/* ------------------------------------------------------------------ tensor_allows_quantization */

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool allows_quantization(const df_gguf_tensor *t, const df_qr_opts *o) {
    if (o->r->type < 0) return false; /* COPY */
    if (t->n_dims < 2) return false;
    const char *n = t->name;
    const size_t len = strlen(n);
    if (len < 6 || strcmp(n + len - 6, "weight")) return false;
    if (o->leave_output && !strcmp(n, "output.weight")) return false;
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
        "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
        "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
        "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        if (has(n, never[i])) return false;
    return strcmp(n, "position_embd.weight") && strcmp(n, "token_types.weight");
}

/* ------------------------------------------------------------------ categories and counters */

enum cat { C_TOKEN_EMBD, C_ATTN_Q, C_ATTN_V, C_ATTN_K, C_ATTN_QKV, C_ATTN_KV_B, C_ATTN_OUT, C_FFN_UP, C_FFN_GATE,
           C_FFN_DOWN, C_OUTPUT, C_OTHER };

static bool is_token_embd(const char *n) { return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight"); }

static enum cat category(const char *n) {
    if (!strcmp(n, "output.weight")) return C_OUTPUT;
    if (is_token_embd(n)) return C_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight")) return C_ATTN_QKV;
    if (has(n, "attn_kv_b.weight")) return C_ATTN_KV_B;
    if (has(n, "attn_v.weight")) return C_ATTN_V;
    if (has(n, "attn_k.weight")) return C_ATTN_K;
    if (has(n, "attn_q.weight")) return C_ATTN_Q;
    if (has(n, "attn_output.weight")) return C_ATTN_OUT;
    if (has(n, "ffn_up")) return C_FFN_UP;
    if (has(n, "ffn_gate")) return C_FFN_GATE;
    if (has(n, "ffn_down")) return C_FFN_DOWN;
    return C_OTHER;
}
static bool is_attn_v(enum cat c) { return c == C_ATTN_V || c == C_ATTN_QKV || c == C_ATTN_KV_B; }

typedef struct {
    const df_qr_opts *o;
    shape s;
    int ftype;
    bool tied; /* no output.weight: token_embd is the output matrix */
    int n_attention_wv, i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
} state;

static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* layer_info: the counter on models without experts, else the layer number in the name */
static int layer_of(const state *q, int counter, const char *name, int *il) {
    *il = counter;
    if (q->s.n_expert <= 1) return DF_OK;
    char *end;
    if (strncmp(name, "blk.", 4) || !isdigit((unsigned char)name[4]))
        return df_err(DF_ERR_FORMAT, "tensor %s: no layer number (blk.N.) to choose its type by", name);
    long v = strtol(name + 4, &end, 10);
    if (v < 0 || v >= q->s.n_layer)
        return df_err(DF_ERR_FORMAT, "tensor %s: layer %ld is outside the model's %d layers", name, v, q->s.n_layer);
    *il = (int)v;
    return DF_OK;
}

#define FT(x) (q->ftype == DF_FT_##x)

/* the output matrix (or tied embeddings) */
static int type_output(const state *q, const df_gguf_tensor *t, int new_type) {
    if (q->o->output_type >= 0) return q->o->output_type;
    if (FT(MXFP4_MOE)) return DF_TYPE_Q8_0;
    if (q->s.falcon || t->ne[0] % df_type_info(new_type)->blck) return DF_TYPE_Q8_0;
    if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ3_XXS) || FT(IQ1_S) || FT(IQ2_S) || FT(IQ2_M) || FT(IQ1_M)) return DF_TYPE_Q5_K;
    return new_type != DF_TYPE_Q8_0 ? DF_TYPE_Q6_K : new_type;
}

static int type_token_embd(const state *q, int new_type) {
    if (q->o->token_embd_type >= 0) return q->o->token_embd_type;
    if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ1_S) || FT(IQ1_M)) return DF_TYPE_Q2_K;
    if (FT(IQ2_S) || FT(IQ2_M) || FT(IQ3_XXS)) return DF_TYPE_IQ3_S;
    if (FT(TQ1_0) || FT(TQ2_0)) return DF_TYPE_Q4_K;
    return new_type;
}

/* the 1-2 bit i-quant recipes (IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M) */
static int type_low_bit(state *q, enum cat c, int new_type) {
    const bool s_or_m = FT(IQ2_S) || FT(IQ2_M);
    if (is_attn_v(c)) {
        if (q->s.n_gqa >= 4 || q->s.n_expert >= 4) new_type = DF_TYPE_Q4_K;
        else new_type = s_or_m ? DF_TYPE_IQ3_S : DF_TYPE_Q2_K;
        ++q->i_attention_wv;
    } else if (q->s.n_expert == 8 && c == C_ATTN_K) {
        new_type = DF_TYPE_Q4_K;
    } else if (c == C_FFN_DOWN) {
        if (q->i_ffn_down < q->s.n_layer / 8) new_type = s_or_m ? DF_TYPE_IQ3_S : DF_TYPE_Q2_K;
        ++q->i_ffn_down;
    } else if (c == C_ATTN_OUT) {
        if (q->s.n_expert == 8) new_type = DF_TYPE_Q5_K;
        else if (FT(IQ1_S) || FT(IQ1_M)) new_type = DF_TYPE_IQ2_XXS;
        else if (s_or_m) new_type = DF_TYPE_IQ3_S;
    }
    return new_type;
}

static int type_attn_v(state *q, int new_type) {
    const int gqa = q->s.n_gqa;
    if (FT(Q2_K)) new_type = gqa >= 4 ? DF_TYPE_Q4_K : DF_TYPE_Q3_K;
    else if (FT(Q2_K_S) && gqa >= 4) new_type = DF_TYPE_Q4_K;
    else if (FT(IQ3_XXS)) new_type = gqa >= 4 ? DF_TYPE_Q4_K : !q->o->has_imatrix ? DF_TYPE_IQ3_S : DF_TYPE_IQ3_XXS;
    else if ((FT(IQ3_XS) || FT(IQ3_S)) && gqa >= 4) new_type = DF_TYPE_Q4_K;
    else if (FT(IQ3_M)) new_type = DF_TYPE_Q4_K;
    else if (FT(Q3_K_M)) new_type = q->i_attention_wv < 2 ? DF_TYPE_Q5_K : DF_TYPE_Q4_K;
    else if (FT(Q3_K_L)) new_type = DF_TYPE_Q5_K;
    else if ((FT(IQ4_NL) || FT(IQ4_XS)) && gqa >= 4) new_type = DF_TYPE_Q5_K;
    else if ((FT(Q4_K_M) || FT(Q5_K_M)) && use_more_bits(q->i_attention_wv, q->n_attention_wv)) new_type = DF_TYPE_Q6_K;
    else if (FT(Q4_K_S) && q->i_attention_wv < 4) new_type = DF_TYPE_Q5_K;
    /* 70B: 8 heads share attn_v, so more bits cost little */
    if (q->s.is_70b && (new_type == DF_TYPE_Q3_K || new_type == DF_TYPE_Q4_K)) new_type = DF_TYPE_Q5_K;
    if (q->s.n_expert == 8) new_type = DF_TYPE_Q8_0;
    ++q->i_attention_wv;
    return new_type;
}

static int type_ffn_down(state *q, const char *name, int new_type, int *rc) {
    int il;
    if ((*rc = layer_of(q, q->i_ffn_down, name, &il))) return new_type;
    const int nl = q->s.n_layer;
    const bool falcon = q->s.falcon, imat = q->o->has_imatrix;
    if (FT(Q2_K)) new_type = DF_TYPE_Q3_K;
    else if (FT(Q2_K_S)) { if (il < nl / 8) new_type = DF_TYPE_Q4_K; }
    else if (FT(IQ3_XXS) && !imat) new_type = il < nl / 8 ? DF_TYPE_Q4_K : DF_TYPE_Q3_K;
    else if (FT(Q3_K_M))
        new_type = il < nl / 16 ? DF_TYPE_Q5_K : !falcon || use_more_bits(il, nl) ? DF_TYPE_Q4_K : DF_TYPE_Q3_K;
    else if (FT(IQ3_M) && (il < nl / 8 || (q->s.n_expert == 8 && use_more_bits(il, nl)))) new_type = DF_TYPE_Q4_K;
    else if (FT(Q3_K_L)) new_type = falcon ? DF_TYPE_Q4_K : DF_TYPE_Q5_K;
    else if (FT(Q4_K_M)) {
        if (falcon) new_type = il < nl / 16 ? DF_TYPE_Q6_K : use_more_bits(il, nl) ? DF_TYPE_Q5_K : DF_TYPE_Q4_K;
        else if (use_more_bits(il, nl)) new_type = DF_TYPE_Q6_K;
    } else if (il < nl / 8 && (FT(IQ4_NL) || FT(IQ4_XS)) && !imat) new_type = DF_TYPE_Q5_K;
    else if (FT(Q5_K_M) && use_more_bits(il, nl)) new_type = DF_TYPE_Q6_K;
    else if (FT(Q4_K_S) && !falcon && il < nl / 8) new_type = DF_TYPE_Q5_K;
    else if ((FT(Q4_0) || FT(Q5_0)) && imat && il < nl / 8) new_type = FT(Q4_0) ? DF_TYPE_Q4_1 : DF_TYPE_Q5_1;
    ++q->i_ffn_down;
    return new_type;
}

static int type_attn_out(const state *q, int new_type) {
    if (q->s.falcon) return FT(Q3_K_L) ? DF_TYPE_Q4_K : new_type;
    if (q->s.n_expert == 8) {
        if (FT(Q2_K) || FT(IQ3_XS) || FT(IQ3_XXS) || FT(Q3_K_S) || FT(Q3_K_M) || FT(IQ4_NL) || FT(Q4_K_S) ||
            FT(Q4_K_M) || FT(IQ3_S) || FT(IQ3_M) || FT(IQ4_XS))
            new_type = DF_TYPE_Q5_K;
        return new_type;
    }
    if (FT(Q2_K)) return DF_TYPE_Q3_K;
    if (FT(IQ3_XXS)) return DF_TYPE_IQ3_S;
    if (FT(Q3_K_M)) return DF_TYPE_Q4_K;
    if (FT(Q3_K_L)) return DF_TYPE_Q5_K;
    if (FT(IQ3_M)) return DF_TYPE_Q4_K;
    return new_type;
}

/* llama_tensor_get_type_impl */
static int type_impl(state *q, const df_gguf_tensor *t, enum cat c, int new_type, int *rc) {
    *rc = DF_OK;
    if (c == C_OUTPUT || (q->tied && c == C_TOKEN_EMBD)) return type_output(q, t, new_type);
    if (q->ftype == DF_FT_PLAIN) return new_type; /* deltafin's MXFP4: no mixture but the output's */
    if (FT(MXFP4_MOE)) return t->ne[2] > 1 ? DF_TYPE_MXFP4 : DF_TYPE_Q8_0;
    if (c == C_TOKEN_EMBD) return type_token_embd(q, new_type);
    if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ1_S) || FT(IQ2_S) || FT(IQ2_M) || FT(IQ1_M)) return type_low_bit(q, c, new_type);
    if (is_attn_v(c)) return type_attn_v(q, new_type);
    switch (c) {
    case C_ATTN_K:
        if (q->s.n_expert == 8) return DF_TYPE_Q8_0;
        if (FT(IQ3_XS)) return DF_TYPE_IQ3_XXS;
        if (FT(IQ3_XXS)) return DF_TYPE_IQ2_S;
        return new_type;
    case C_ATTN_Q:
        if (FT(IQ3_XS)) return DF_TYPE_IQ3_XXS;
        if (FT(IQ3_XXS)) return DF_TYPE_IQ2_S;
        return new_type;
    case C_FFN_DOWN: return type_ffn_down(q, t->name, new_type, rc);
    case C_ATTN_OUT: return type_attn_out(q, new_type);
    case C_ATTN_QKV:
        if (FT(Q3_K_M) || FT(Q3_K_L) || FT(IQ3_M)) return DF_TYPE_Q4_K;
        if (FT(Q4_K_M)) return DF_TYPE_Q5_K;
        if (FT(Q5_K_M)) return DF_TYPE_Q6_K;
        return new_type;
    case C_FFN_GATE: case C_FFN_UP: {
        int *ctr = c == C_FFN_GATE ? &q->i_ffn_gate : &q->i_ffn_up, il;
        if ((*rc = layer_of(q, *ctr, t->name, &il))) return new_type;
        if (FT(IQ3_XS) && il >= q->s.n_layer / 8 && il < 7 * q->s.n_layer / 8) new_type = DF_TYPE_IQ3_XXS;
        ++*ctr;
        return new_type;
    }
    default: return new_type;
    }
}
#undef FT

/* tensor_type_fallback: a type whose block divides the row */
static int fallback(const df_gguf_tensor *t, int type, int *n_fallback) {
    if (t->ne[0] % df_type_info(type)->blck == 0) return type;
    ++*n_fallback;
    int r;
    switch (type) {
    case DF_TYPE_IQ1_S: case DF_TYPE_IQ1_M: case DF_TYPE_IQ2_XXS: case DF_TYPE_IQ2_XS: case DF_TYPE_IQ2_S:
    case DF_TYPE_IQ3_XXS: case DF_TYPE_IQ3_S: case DF_TYPE_IQ4_XS: r = DF_TYPE_IQ4_NL; break;
    case DF_TYPE_Q2_K: case DF_TYPE_Q3_K: case DF_TYPE_TQ1_0: case DF_TYPE_TQ2_0: r = DF_TYPE_Q4_0; break;
    case DF_TYPE_Q4_K: r = DF_TYPE_Q5_0; break;
    case DF_TYPE_Q5_K: r = DF_TYPE_Q5_1; break;
    case DF_TYPE_Q6_K: r = DF_TYPE_Q8_0; break;
    default: r = DF_TYPE_F16; break; /* llama-quantize stops: no fallback defined */
    }
    return t->ne[0] % df_type_info(r)->blck ? DF_TYPE_F16 : r;
}

/* tensor_requires_imatrix */
static bool requires_imatrix(const char *name, int type, int ftype) {
    if (is_token_embd(name) || !strcmp(name, "output.weight")) return false;
    switch (type) {
    case DF_TYPE_IQ3_XXS: case DF_TYPE_IQ2_XXS: case DF_TYPE_IQ2_XS: case DF_TYPE_IQ2_S: case DF_TYPE_IQ1_M:
    case DF_TYPE_IQ1_S: return true;
    case DF_TYPE_Q2_K: return ftype == DF_FT_Q2_K_S;
    default: return false;
    }
}

/* llama_tensor_get_type */
static int choose(state *q, const df_gguf_tensor *t, int *n_fallback, int *rc) {
    const df_qr_opts *o = q->o;
    const enum cat c = category(t->name);
    *rc = DF_OK;
    if (o->token_embd_type >= 0 && c == C_TOKEN_EMBD) return o->token_embd_type;
    if (o->output_type >= 0 && c == C_OUTPUT) return o->output_type;
    int new_type = o->r->type;
    if (df_type_info(new_type)->blck == 1) return new_type; /* F32 / F16 / BF16: no mixture */
    /* deltafin's manual overrides (llama-quantize's --tensor-type): experts, other matrices */
    const bool expert = has(t->name, "_exps") || (t->n_dims >= 3 && t->ne[2] > 1);
    bool manual = false;
    if (expert && o->type_experts >= 0) new_type = o->type_experts, manual = true;
    else if (!expert && c != C_OUTPUT && c != C_TOKEN_EMBD && o->type_dense >= 0) new_type = o->type_dense, manual = true;
    if (!manual && !o->pure) new_type = type_impl(q, t, c, new_type, rc);
    return fallback(t, new_type, n_fallback);
}

/* llama-quantize's tensor order: by the layer number of "blk.N." (others first), then by name */
static int layer_key(const char *n) {
    if (strncmp(n, "blk.", 4)) return -1;
    char *end;
    long v = strtol(n + 4, &end, 10);
    return end == n + 4 ? -1 : (int)v;
}
static int cmp_order(const void *a, const void *b, void *ctx) {
    const df_gguf *g = ctx;
    const char *x = g->tensors[*(const int *)a].name, *y = g->tensors[*(const int *)b].name;
    const int lx = layer_key(x), ly = layer_key(y);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}

int df_qr_plan(const df_gguf *g, const df_qr_opts *o, df_qr_choice *out, int *n_fallback) {
    state q = {.o = o, .s = model_shape(g), .ftype = o->r->ftype, .tied = true};
    *n_fallback = 0;
    int *order = malloc(sizeof(int) * (size_t)(g->n_tensors + 1));
    if (!order) return df_err(DF_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_tensors; i++) {
        order[i] = i;
        const enum cat c = category(g->tensors[i].name);
        if (is_attn_v(c)) ++q.n_attention_wv;
        if (c == C_OUTPUT) q.tied = false;
    }
    qsort_r(order, (size_t)g->n_tensors, sizeof(int), cmp_order, (void *)g);
    int rc = DF_OK;
    for (int k = 0; k < g->n_tensors && !rc; k++) {
        const df_gguf_tensor *t = &g->tensors[order[k]];
        df_qr_choice *ch = &out[order[k]];
        ch->quantizable = allows_quantization(t, o);
        ch->type = ch->quantizable ? choose(&q, t, n_fallback, &rc) : t->type;
        ch->needs_imatrix = requires_imatrix(t->name, ch->type, q.ftype);
    }
    free(order);
    return rc;
}
