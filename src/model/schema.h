/* schema.h — an architecture's tensors as data: one table of df_tensor_spec per architecture
 * (src/model/arch_<name>.c, df_arch.tensors), read by the binder (model.c) and by gen-random
 * (dev/), so a tensor list is written once.
 *
 * A table lists the tensors in the order gen-random writes them. Each run of per-layer entries
 * (names with "%d") is repeated for every layer, global entries stand alone:
 *     token_embd | blk.%d.attn_norm ... blk.%d.ffn_up_exps | output_norm, output
 * An entry applies to a layer when the layer has all of its `when` properties and none of its
 * `unless` ones (DF_W_*). A layer's properties come from three places:
 *   - the hyperparameters, generically: dense-lead vs MoE FFN, recurrent vs attention layer,
 *     sliding-window layer, NextN/MTP layer (df_schema_props);
 *   - the architecture's `layer_props` hook: its own bits DF_W_ARCH(0..15) over df_hparams
 *     (q LoRA, MLA vs legacy, shared experts ...), also asked for global entries (il = -1);
 *   - probes, df_arch.probes: "the file has tensor X" for fused alternatives (attn_qkv vs
 *     attn_q/k/v, ffn_gate_up_exps vs ffn_gate_exps + ffn_up_exps). gen-random answers them
 *     from its options instead of a file.
 * A shape is up to three symbolic dims: a df_dim symbol, optionally times a constant
 * (DF_DX(2, DF_D_FF_EXP)), evaluated per layer from df_hparams (df_schema_dims plus the arch's
 * `dims` hook for its own symbols DF_D_ARCH + i).
 * Binding stores the tensor in a df_layer member (DF_LF) or a df_model member (DF_MF);
 * `field2` binds the same tensor a second time (fused gate_up: exps[GATE] and exps[UP]).
 * `role` is what the tensor is (norm, bias, matrix, router ...): gen-random draws its values
 * from it; binding ignores it.
 * Threading: tables are constant; the walk has no state of its own. */
#ifndef DF_MODEL_SCHEMA_H
#define DF_MODEL_SCHEMA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct df_hparams;
struct df_arch;

/* Symbolic sizes (values: df_schema_dims). */
enum df_dim {
    DF_D_NONE = 0,     /* no such dimension (the shape has fewer dims) */
    DF_D_ONE,          /* 1 (an inner unit dim, e.g. {C, 1, DI}) */
    DF_D_EMBD,         /* n_embd */
    DF_D_VOCAB,        /* n_vocab */
    DF_D_HEAD,         /* n_head */
    DF_D_HEAD_K,       /* n_embd_head_k */
    DF_D_ROT_HALF,     /* n_rot / 2 (rope_freqs) */
    DF_D_Q,            /* n_head · n_embd_head_k */
    DF_D_K,            /* n_head_kv · n_embd_head_k */
    DF_D_V,            /* n_head_kv · n_embd_head_v */
    DF_D_O,            /* n_head · n_embd_head_v (attn_output input) */
    DF_D_QKV,          /* Q + K + V (fused attn_qkv) */
    DF_D_FF,           /* n_ff: dense FFN width */
    DF_D_EXPERT,       /* n_expert */
    DF_D_FF_EXP,       /* n_ff_exp: routed expert width */
    DF_D_FF_SHEXP,     /* n_ff_shexp: shared expert width (all shared experts side by side) */
    DF_D_LORA_Q,       /* n_lora_q (MLA q LoRA rank) */
    DF_D_LORA_KV,      /* n_lora_kv (MLA compressed KV rank) */
    DF_D_KV_A,         /* n_lora_kv + n_rot (attn_kv_a_mqa rows) */
    DF_D_MLA_Q,        /* n_head · n_embd_head_k_mla */
    DF_D_MLA_NOPE,     /* n_embd_head_k_mla − n_rot */
    DF_D_MLA_V,        /* n_embd_head_v_mla */
    DF_D_MLA_O,        /* n_head · n_embd_head_v_mla */
    DF_D_MLA_KV_B,     /* n_head · (nope + v_mla): legacy attn_kv_b rows */
    DF_D_ARCH,         /* first architecture-defined symbol (the arch's dims hook fills them) */
    DF_D_COUNT = DF_D_ARCH + 16
};
/* k times symbol d (k = 0 or 1: d itself) */
#define DF_DX(k, d) ((k) * 64 + (d))

/* Layer properties (uint32_t masks). */
enum {
    DF_W_DENSE = 1u << 0,      /* dense FFN: il < n_layer_dense_lead, or no experts */
    DF_W_MOE = 1u << 1,        /* routed-expert FFN */
    DF_W_ATTN = 1u << 2,       /* attention layer */
    DF_W_RECR = 1u << 3,       /* recurrent layer (hp.layer_recr: KDA, Gated DeltaNet ...) */
    DF_W_SWA = 1u << 4,        /* sliding-window attention layer (hp.layer_swa) */
    DF_W_NEXTN = 1u << 5,      /* NextN / MTP layer (the last hp.n_layer_nextn): loaded, not run */
    DF_W_FUSED_QKV = 1u << 8,  /* probe: blk.%d.attn_qkv.weight present */
    DF_W_FUSED_GATE_UP = 1u << 9, /* probe: blk.%d.ffn_gate_up_exps.weight present */
};
#define DF_W_ARCH(n) (1u << (16 + (n)))   /* architecture-defined, n = 0..15 */

/* What a tensor is; gen-random's value distribution (dev/gen_random.c). */
enum df_role {
    DF_R_MAT = 0,   /* weight matrix: U(-1,1)·sqrt(3/ne0) (F32 if 1-D) */
    DF_R_NORM,      /* norm weight: 1 + 0.2·U (F32) */
    DF_R_BIAS,      /* bias: 0.2·U (F32) */
    DF_R_EMBD,      /* token embeddings: U */
    DF_R_ROUTER,    /* expert router: matrix scale × router gain (F32) */
    DF_R_OUT,       /* output head: matrix scale × output gain */
    DF_R_RES,       /* attention-residual score: matrix scale × residual gain (F32) */
    DF_R_CONV,      /* short-conv taps: matrix scale (F32) */
    DF_R_SSM_A,     /* recurrent decay: −exp(U) (F32) */
    DF_R_DT,        /* recurrent dt bias: 0.5·U (F32) */
    DF_R_HC,        /* hyper-connection mixer: matrix scale (F32, deepseek4) */
    DF_R_APE,       /* compressor position embedding: 0.2·U (F32, deepseek4) */
    DF_R_INDEX,     /* I32 table of expert ids (deepseek4 hash routing): distinct ids per row */
};

typedef struct df_tensor_spec {
    const char *name;      /* "blk.%d.attn_q.weight" (per layer) or "output.weight" (global) */
    uint16_t field;        /* DF_LF(member) / DF_MF(member); 0: bound but stored nowhere */
    uint16_t field2;       /* a second member bound to the same tensor, or 0 */
    uint8_t flags;         /* DF_T_OPTIONAL | DF_T_EXPERT | DF_T_NORM | DF_T_UNUSED | DF_T_RESHAPE |
                            * DF_T_INDEX (model.h) */
    uint8_t role;          /* enum df_role */
    uint32_t when, unless; /* layer properties: all of `when`, none of `unless` */
    int16_t ne[3];         /* shape: df_dim symbols or DF_DX products; DF_D_NONE ends it */
} df_tensor_spec;

/* Members as field codes (offset + 1, so 0 means none). */
#define DF_LF(member) ((uint16_t)(offsetof(df_layer, member) + 1))
#define DF_MF(member) ((uint16_t)(offsetof(struct deltafin_model, member) + 1))

/* A probe: property `bit` is set for a layer when the file has tensor `name` ("%d" = il). */
typedef struct df_schema_probe {
    uint32_t bit;
    const char *name;
} df_schema_probe;

/* The walk's callbacks: has() answers the probes (binder: the file; gen-random: its options);
 * visit() gets each tensor that applies, in table order, with its name and shape; a negative
 * return stops the walk and is returned. il is the layer, -1 for a global entry. */
typedef struct df_schema_ops {
    bool (*has)(void *ud, uint32_t bit, const char *name);
    int (*visit)(void *ud, const df_tensor_spec *s, int il, const char *name, int n_dims,
                 const int64_t ne[3]);
    void *ud;
} df_schema_ops;

/* Walks arch a's table over hyperparameters hp (n_layer layers). */
int df_schema_walk(const struct df_arch *a, const struct df_hparams *hp, const df_schema_ops *ops);
/* Layer il's properties from the hyperparameters and the arch hook (no probes); il = -1:
 * the arch bits for global entries. */
uint32_t df_schema_props(const struct df_arch *a, const struct df_hparams *hp, int il);
/* The values of every symbol for layer il (il = -1: global entries). */
void df_schema_dims(const struct df_arch *a, const struct df_hparams *hp, int il, int64_t d[DF_D_COUNT]);
/* Symbolic dim `code` (a df_dim or DF_DX) under values d. */
static inline int64_t df_schema_dim(int code, const int64_t *d) {
    const int k = code / 64;
    return (k > 1 ? k : 1) * d[code % 64];
}
#endif

/* ---- building blocks for the tables ------------------------------------------------------
 * One entry: name, member, flags, role, when, unless, shape (1-3 dims). */
#define DF_TS(name, field, flags, role, when, unless, ...) \
    {(name), (field), 0, (flags), (role), (when), (unless), {__VA_ARGS__}}

/* GQA attention input: attn_norm, then the fused attn_qkv (+ optional bias) when the file has
 * it, else attn_q / attn_k / attn_v with optional biases (llama.cpp's create_tensor_qkv). */
#define DF_SCHEMA_GQA_IN                                                                         \
    DF_TS("blk.%d.attn_norm.weight", DF_LF(attn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD),   \
    DF_TS("blk.%d.attn_qkv.weight", DF_LF(wqkv), 0, DF_R_MAT, DF_W_FUSED_QKV, 0, DF_D_EMBD, DF_D_QKV), \
    DF_TS("blk.%d.attn_qkv.bias", DF_LF(bqkv), DF_T_OPTIONAL | DF_T_NORM, DF_R_BIAS, DF_W_FUSED_QKV, 0, \
          DF_D_QKV),                                                                              \
    DF_TS("blk.%d.attn_q.weight", DF_LF(wq), 0, DF_R_MAT, 0, DF_W_FUSED_QKV, DF_D_EMBD, DF_D_Q),  \
    DF_TS("blk.%d.attn_k.weight", DF_LF(wk), 0, DF_R_MAT, 0, DF_W_FUSED_QKV, DF_D_EMBD, DF_D_K),  \
    DF_TS("blk.%d.attn_v.weight", DF_LF(wv), 0, DF_R_MAT, 0, DF_W_FUSED_QKV, DF_D_EMBD, DF_D_V),  \
    DF_TS("blk.%d.attn_q.bias", DF_LF(bq), DF_T_OPTIONAL | DF_T_NORM, DF_R_BIAS, 0, DF_W_FUSED_QKV, DF_D_Q), \
    DF_TS("blk.%d.attn_k.bias", DF_LF(bk), DF_T_OPTIONAL | DF_T_NORM, DF_R_BIAS, 0, DF_W_FUSED_QKV, DF_D_K), \
    DF_TS("blk.%d.attn_v.bias", DF_LF(bv), DF_T_OPTIONAL | DF_T_NORM, DF_R_BIAS, 0, DF_W_FUSED_QKV, DF_D_V)
#define DF_SCHEMA_GQA_PROBES {DF_W_FUSED_QKV, "blk.%d.attn_qkv.weight"}
#define DF_SCHEMA_ATTN_OUT \
    DF_TS("blk.%d.attn_output.weight", DF_LF(wo), 0, DF_R_MAT, 0, 0, DF_D_O, DF_D_EMBD)

/* Dense FFN (layers with DF_W_DENSE). */
#define DF_SCHEMA_FFN_DENSE                                                                      \
    DF_TS("blk.%d.ffn_gate.weight", DF_LF(ffn_gate), 0, DF_R_MAT, DF_W_DENSE, 0, DF_D_EMBD, DF_D_FF), \
    DF_TS("blk.%d.ffn_down.weight", DF_LF(ffn_down), 0, DF_R_MAT, DF_W_DENSE, 0, DF_D_FF, DF_D_EMBD), \
    DF_TS("blk.%d.ffn_up.weight", DF_LF(ffn_up), 0, DF_R_MAT, DF_W_DENSE, 0, DF_D_EMBD, DF_D_FF)

/* Router and routed experts (layers with DF_W_MOE), experts of width n_ff_exp. */
#define DF_SCHEMA_MOE_ROUTER \
    DF_TS("blk.%d.ffn_gate_inp.weight", DF_LF(gate_inp), 0, DF_R_ROUTER, DF_W_MOE, 0, DF_D_EMBD, DF_D_EXPERT)
#define DF_SCHEMA_MOE_EXPS                                                                       \
    DF_TS("blk.%d.ffn_gate_exps.weight", DF_LF(exps[DF_EXPERT_GATE]), DF_T_EXPERT, DF_R_MAT, DF_W_MOE, 0, \
          DF_D_EMBD, DF_D_FF_EXP, DF_D_EXPERT),                                                  \
    DF_TS("blk.%d.ffn_down_exps.weight", DF_LF(exps[DF_EXPERT_DOWN]), DF_T_EXPERT, DF_R_MAT, DF_W_MOE, 0, \
          DF_D_FF_EXP, DF_D_EMBD, DF_D_EXPERT),                                                  \
    DF_TS("blk.%d.ffn_up_exps.weight", DF_LF(exps[DF_EXPERT_UP]), DF_T_EXPERT, DF_R_MAT, DF_W_MOE, 0, \
          DF_D_EMBD, DF_D_FF_EXP, DF_D_EXPERT)

/* Shared experts of width n_ff_shexp (MoE layers; `when` adds the arch's condition). */
#define DF_SCHEMA_SHEXP(flags, when)                                                             \
    DF_TS("blk.%d.ffn_gate_shexp.weight", DF_LF(gate_shexp), (flags), DF_R_MAT, DF_W_MOE | (when), 0, \
          DF_D_EMBD, DF_D_FF_SHEXP),                                                             \
    DF_TS("blk.%d.ffn_down_shexp.weight", DF_LF(down_shexp), (flags), DF_R_MAT, DF_W_MOE | (when), 0, \
          DF_D_FF_SHEXP, DF_D_EMBD),                                                             \
    DF_TS("blk.%d.ffn_up_shexp.weight", DF_LF(up_shexp), (flags), DF_R_MAT, DF_W_MOE | (when), 0, \
          DF_D_EMBD, DF_D_FF_SHEXP)

/* Embeddings, final norm, output head (optional: tied to token_embd when absent). */
#define DF_SCHEMA_TOK_EMBD \
    DF_TS("token_embd.weight", DF_MF(tok_embd), 0, DF_R_EMBD, 0, 0, DF_D_EMBD, DF_D_VOCAB)
#define DF_SCHEMA_OUTPUT(out_flags)                                                              \
    DF_TS("output_norm.weight", DF_MF(output_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD),      \
    DF_TS("output.weight", DF_MF(output), (out_flags), DF_R_OUT, 0, 0, DF_D_EMBD, DF_D_VOCAB)
/* NextN / MTP heads' own tensors (layers with DF_W_NEXTN; the decoder block around them is the
 * arch's usual one): bound for llama.cpp's tensor count, never read (DF_T_UNUSED). */
#define DF_SCHEMA_NEXTN                                                                          \
    DF_TS("blk.%d.nextn.eh_proj.weight", 0, DF_T_UNUSED, DF_R_MAT, DF_W_NEXTN, 0, DF_DX(2, DF_D_EMBD), \
          DF_D_EMBD),                                                                            \
    DF_TS("blk.%d.nextn.enorm.weight", 0, DF_T_UNUSED | DF_T_NORM, DF_R_NORM, DF_W_NEXTN, 0, DF_D_EMBD), \
    DF_TS("blk.%d.nextn.hnorm.weight", 0, DF_T_UNUSED | DF_T_NORM, DF_R_NORM, DF_W_NEXTN, 0, DF_D_EMBD), \
    DF_TS("blk.%d.nextn.embed_tokens.weight", 0, DF_T_UNUSED | DF_T_OPTIONAL, DF_R_EMBD, DF_W_NEXTN, 0, \
          DF_D_EMBD, DF_D_VOCAB),                                                                \
    DF_TS("blk.%d.nextn.shared_head_head.weight", 0, DF_T_UNUSED | DF_T_OPTIONAL, DF_R_OUT, DF_W_NEXTN, 0, \
          DF_D_EMBD, DF_D_VOCAB),                                                                \
    DF_TS("blk.%d.nextn.shared_head_norm.weight", 0, DF_T_UNUSED | DF_T_OPTIONAL | DF_T_NORM, DF_R_NORM, \
          DF_W_NEXTN, 0, DF_D_EMBD)
#define DF_SCHEMA_FFN_NORM \
    DF_TS("blk.%d.ffn_norm.weight", DF_LF(ffn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD)
