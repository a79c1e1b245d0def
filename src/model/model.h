/* model.h — a loaded model: hyperparameters, bound tensors (shape-checked against the
 * architecture), dense weights resident in anonymous memory, routed experts behind a
 * df_expert_provider, the tokenizer, and the memory plan.
 * Invariant: after df_model_load() every tensor the architecture needs is bound with the
 * exact shape llama.cpp expects, every tensor of the file is bound (else "wrong number of
 * tensors"), and dense tensor data is in memory in the file's own type (never converted).
 * Threading: a model is read-only after load and shared by any number of contexts. */
#ifndef DF_MODEL_H
#define DF_MODEL_H
#include <stdatomic.h>
#include "deltafin.h"
#include "format/gguf.h"
#include "format/pack.h"
#include "model/rope.h"
#include "model/schema.h"

#define DF_MAX_LAYERS 512

typedef struct df_tensor {
    const df_gguf_tensor *info; /* name, type, shape, file location */
    void *data;                 /* resident bytes, or NULL (routed experts not loaded) */
    int type;                   /* ggml type */
    int64_t ne[4];
    uint8_t flags;              /* the schema entry's DF_T_* flags (DF_T_UNUSED: loaded, not run) */
} df_tensor;

enum df_gating { DF_GATING_SOFTMAX = 1, DF_GATING_SIGMOID = 2, DF_GATING_SOFTMAX_WEIGHT = 3,
                 DF_GATING_SQRT_SOFTPLUS = 4,
                 /* the file's 4 as llama.cpp d32676d computes it: sqrtf(logf(1 + expf(x))), x > 20: x
                  * (deepseek4; kimi-k3's reference build used log1pf) */
                 DF_GATING_SQRT_SOFTPLUS_LOGF = 5 };
enum df_qk_norm { DF_QK_NORM_NONE = 0, DF_QK_NORM_HEAD = 1, DF_QK_NORM_FULL = 2 };

typedef struct df_hparams {
    int n_vocab, n_ctx_train, n_embd, n_layer;
    int n_head, n_head_kv, n_embd_head_k, n_embd_head_v, n_rot;
    int n_ff;                    /* dense FFN width (or Mixtral/OLMoE expert width) */
    int n_ff_exp, n_ff_shexp;    /* routed / shared expert widths */
    int n_expert, n_expert_used, n_expert_shared;
    int n_expert_groups, n_group_used;
    int n_layer_dense_lead;      /* first layers with a dense FFN (deepseek2) */
    float eps;
    float kq_scale;
    /* RoPE (see df_rope) */
    int rope_mode;
    float rope_freq_base, rope_freq_scale, rope_attn_factor, yarn_ext_factor;
    float yarn_beta_fast, yarn_beta_slow, yarn_log_mul;
    int n_ctx_orig;
    /* MoE routing (formats.md §3.0 steps 1-11) */
    int gating;
    bool expert_weights_norm;
    float expert_weights_scale;
    /* architecture flags */
    int qk_norm;                 /* enum df_qk_norm */
    bool shexp_gated;            /* qwen2moe: sigmoid-gated shared expert (silu(z)/z) */
    /* deepseek2 MLA (formats.md §3.4): q/kv LoRA ranks, decompressed head dims */
    int n_lora_q, n_lora_kv, n_embd_head_k_mla, n_embd_head_v_mla;
    bool is_mla;                 /* attn_k_b / attn_v_b (absorbed) vs legacy attn_kv_b */
    /* DSA lightning indexer (deepseek32, glm-dsa; formats.md §3.4a): heads, head size, keys kept
     * per query, its key LayerNorm's epsilon and RoPE pairing (DF_ROPE_NEOX / _NORM); glm-dsa's
     * "shared" layers have no indexer and attend the keys the previous full layer selected */
    int indexer_n_head, indexer_head_size, indexer_top_k;
    float indexer_norm_eps;
    int indexer_rope_mode;
    uint8_t layer_dsa_shared[DF_MAX_LAYERS];
    /* kimi-k3 (docs kimi-k3.md): KDA layers, latent MoE, situ, block AttnRes */
    bool no_rope;                /* MLA without RoPE (kimi-k3) */
    int ffn_act;                 /* enum df_ffn_act: activation of dense / routed / shared FFNs */
    float situ_beta, situ_lbeta; /* situ β and linear β (<= 0: no cap on the up branch) */
    int ssm_conv, kda_head_dim;  /* KDA short-conv taps C and head size S */
    bool kda_has_lb;             /* kda.gate_lower_bound present: g = lb·σ(−f·A) */
    float kda_lb;
    int n_latent;                /* expert_latent_length (0: experts at n_embd) */
    int attn_res_block;          /* attn_res.block_size B (0: plain residual stream) */
    uint8_t layer_recr[DF_MAX_LAYERS]; /* 1: layer il is recurrent (head_count_kv[il] == 0) */
    /* for the architectures to come (set by their hparams hook; schema.h DF_W_SWA / _NEXTN) */
    uint8_t layer_swa[DF_MAX_LAYERS];  /* 1: layer il uses sliding-window attention */
    int n_layer_nextn;           /* last layers that are NextN / MTP heads: loaded, not run */
    int n_swa;                   /* sliding window (tokens) of the hp.layer_swa layers */
    int ssm_d_inner, ssm_d_state, ssm_dt_rank, ssm_n_group; bool shexp_sigmoid; /* qwen3next Gated DeltaNet */
    /* deepseek4 (formats.md §3.4c): per-layer KV compression ratio (0: the sliding window only,
     * 4: compressed rows chosen by the lightning indexer, 128: every compressed row), the
     * hyper-connection streams and their Sinkhorn mixer, the grouped output LoRA, hash-routed
     * first layers, the compressed layers' RoPE base, the clamped SwiGLU's limits */
    uint8_t comp_ratio[DF_MAX_LAYERS];
    int hc_mult, hc_iters, o_groups, o_lora, n_hash_layers;
    float hc_eps, comp_rope_base, swiglu_limit, swiglu_limit_shexp;
} df_hparams;

enum df_ffn_act { DF_ACT_SWIGLU = 0, DF_ACT_SITU = 1, DF_ACT_SWIGLU_OAI = 2, /* OAI: gpt-oss clamped SwiGLU */
                  DF_ACT_SWIGLU_CLAMP = 3 /* deepseek4: min(gate, L), clamp(up, ±L), then SwiGLU */ };

typedef struct df_layer {
    df_tensor *attn_norm;
    df_tensor *wq, *wk, *wv, *wqkv, *wo;  /* wqkv: fused alternative to wq/wk/wv */
    df_tensor *bq, *bk, *bv, *bqkv, *bo;
    df_tensor *q_norm, *k_norm;
    df_tensor *attn_sinks;                /* {n_head} per-head sink logits (gpt-oss) */
    df_tensor *ffn_norm;
    /* dense FFN */
    df_tensor *ffn_gate, *ffn_up, *ffn_down;
    df_tensor *ffn_gate_b, *ffn_up_b, *ffn_down_b;
    /* MoE */
    df_tensor *gate_inp, *gate_inp_b, *exp_probs_b;
    df_tensor *exps[DF_EXPERT_NPARTS];    /* ffn_{gate,up,down}_exps {in, out, E} */
    df_tensor *exps_b[DF_EXPERT_NPARTS];  /* per-expert biases {out, E} F32, resident (gpt-oss) */
    df_tensor *gate_inp_shexp;            /* {n_embd} (qwen2moe) */
    df_tensor *gate_shexp, *up_shexp, *down_shexp;
    /* deepseek2 MLA */
    df_tensor *wq_a, *q_a_norm, *wq_b, *wkv_a_mqa, *kv_a_norm, *wk_b, *wv_b, *wkv_b;
    df_tensor *attn_gate;                 /* kimi-k3 MLA sigmoid output gate {n_embd, H·dv} */
    /* DSA lightning indexer (full indexer layers): q_b {q_lora, IH·ID}, k {n_embd, ID} +
     * LayerNorm w/b, head weights proj {n_embd, IH} */
    df_tensor *idx_q_b, *idx_k, *idx_k_norm, *idx_k_norm_b, *idx_proj;
    /* kimi-k3 KDA */
    df_tensor *ssm_conv[3];               /* q, k, v short-conv taps {C, 1, DI} (F32) */
    df_tensor *ssm_f_a, *ssm_f_b, *ssm_beta, *ssm_a, *ssm_dt_b, *ssm_g, *ssm_o_norm;
    /* kimi-k3 block AttnRes scores and latent MoE */
    df_tensor *attn_res_score, *ffn_res_score;
    df_tensor *routed_down, *routed_up, *routed_norm;
    df_tensor *ssm_in, *ssm_ba, *ssm_alpha; /* qwen3next / qwen35moe Gated DeltaNet */
    /* deepseek4: the KV projection {n_embd, hd}, grouped output LoRA (wo_a {H·hd/G, o_lora, G},
     * wo_b {G·o_lora, n_embd}), hyper-connection mixers of the attention and FFN blocks
     * (fn {hc·n_embd, (2+hc)·hc}, base, scale {3}), the KV compressor and the indexer's own
     * compressor (kv / gate {n_embd, c}, ape {c, ratio}, norm), the hash-routing table
     * {n_expert_used, n_vocab} (I32) */
    df_tensor *wkv, *wo_a, *wo_b;
    df_tensor *hc_attn_fn, *hc_attn_base, *hc_attn_scale, *hc_ffn_fn, *hc_ffn_base, *hc_ffn_scale;
    df_tensor *cmp_wkv, *cmp_wgate, *cmp_ape, *cmp_norm;
    df_tensor *idx_cmp_wkv, *idx_cmp_wgate, *idx_cmp_ape, *idx_cmp_norm;
    df_tensor *gate_tid2eid;
    bool is_moe;
} df_layer;

struct deltafin_model;
typedef struct deltafin_model df_model;
struct deltafin_ctx;

/* An architecture family's description (src/model/arch_<name>.c): hyperparameters, the tensor
 * schema (schema.h), KV rows and recurrent state. Its forward-pass hooks, where it has any, are
 * a df_arch_fwd of the same name in src/forward/ (forward/session.h). */
typedef struct df_arch {
    const char *name;            /* general.architecture */
    /* Arch-specific keys and flags; common keys are already read into m->hp. */
    int (*load_hparams)(df_model *m);
    /* The tensors, in file order (schema.h); the binder and gen-random walk this table. */
    const df_tensor_spec *tensors;
    int n_tensors;
    const df_schema_probe *probes; /* "file has X" alternatives (fused qkv, fused gate_up ...) */
    int n_probes;
    /* Optional: the arch's own layer properties DF_W_ARCH(n) for layer il (-1: globals). */
    uint32_t (*layer_props)(const df_hparams *hp, int il);
    /* Optional: the arch's own symbolic dims d[DF_D_ARCH + i] for layer il (-1: globals). */
    void (*dims)(const df_hparams *hp, int il, int64_t *d);
    /* Optional procedural checks the table cannot say: before the schema is bound (may look
     * at m->gguf) and after it was bound without error. Return DF_OK or an error. */
    int (*pre_bind)(df_model *m);
    int (*post_bind)(df_model *m);
    /* Optional (NULL = generic GQA): F16 elements per token that layer il keeps in the KV
     * cache for K and for V (MLA: latent + rope part in k_row, v_row 0; linear-attention
     * layers: 0 and 0 and their own state). */
    void (*kv_row)(const df_model *m, int il, int64_t *k_row, int64_t *v_row);
    /* Optional: bytes of per-sequence recurrent state (zeroed for a new sequence; kept in
     * c->rs). A model with state cannot truncate its cache to an arbitrary prefix: the ctx
     * re-decodes the kept prefix from its token history instead (exact). */
    uint64_t (*state_bytes)(const df_model *m);
    /* attention.head_count_kv may vary per layer (kimi-k3: 0 marks a recurrent layer); the
     * values go to hp.layer_recr and hp.n_head_kv becomes the largest one. */
    bool head_kv_per_layer;
    /* Optional: the arch's own hyperparameters in words for `deltafin info` (deepseek4's compress
     * ratios, indexer, hyper-connections ...). */
    void (*describe)(const df_hparams *hp, char *buf, size_t cap);
    /* The KV cache holds F16 rows only (-ctk / -ctv other than f16 / f32 are refused naming the
     * architecture): deepseek4's compressed rows. */
    bool kv_f16_only;
} df_arch;
#define DF_SCHEMA(table) .tensors = (table), .n_tensors = (int)(sizeof(table) / sizeof((table)[0]))
#define DF_PROBES(table) .probes = (table), .n_probes = (int)(sizeof(table) / sizeof((table)[0]))

/* Fused ffn_gate_up_exps {n_embd, 2 n_ff, E} (deepseek2): exps[GATE] == exps[UP]; within
 * each expert rows [0, n_ff) are gate, [n_ff, 2 n_ff) up. Shapes/locations/acquire split it. */
static inline bool df_layer_fused_gate_up(const df_layer *L) {
    return L->exps[DF_EXPERT_GATE] && L->exps[DF_EXPERT_GATE] == L->exps[DF_EXPERT_UP];
}

/* Layers the forward pass runs: the file's blocks less the trailing NextN / MTP layers (bound,
 * flagged DF_T_UNUSED, never read). */
static inline int df_hp_n_run_layers(const df_hparams *hp) { return hp->n_layer - hp->n_layer_nextn; }

/* hp->rope_attn_factor as llama_context computes it from the file's rope.scaling.attn_factor,
 * the YaRN factor and hp->yarn_log_mul (called again by an architecture that changes it). */
int df_model_rope_attn_factor(df_model *m);
/* glm-dsa: whether layer il has a full lightning indexer in GLM-5.2's default pattern (files
 * without attention.indexer.types and a training context of 1M or more; arch_deepseek2.c). */
bool df_dsa_glm52_full(int il);
/* KV row sizes of layer il (the arch hook or n_head_kv * head dims; 0 for NextN layers). */
void df_model_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row);
/* The ggml types the KV cache stores K and V rows in (from params.cache_type_k / _v; F32 is
 * stored as F16, see deltafin.h) and the check that the architecture can hold them: every
 * attention head a multiple of the type's block, and K and V of one type where V is a view of
 * K (MLA's latent). DF_ERR_UNSUPPORTED naming the architecture otherwise. */
void df_model_kv_types(const df_model *m, int *type_k, int *type_v);
int df_model_kv_check(const df_model *m);
/* llama.cpp's attention rotation for quantized caches (llama-kv-cache.cpp attn_rot_k / _v):
 * with a quantized K type and every KV layer's key head a multiple of 64, Q and K rows are
 * rotated by a Walsh-Hadamard transform of *nrot_k values (the largest power of 2 >= 64 that
 * divides the head) before K is stored; with a quantized V type and value heads a multiple of
 * 64, V rows and the attention output by one of 64. 0 = no rotation (F16 / BF16 caches, other
 * head sizes, MLA's latent cache). */
void df_model_kv_rot(const df_model *m, int *nrot_k, int *nrot_v);

struct deltafin_model {
    char *path;
    df_gguf *gguf;
    const df_arch *arch;
    df_hparams hp;
    df_rope rope;                /* frequency parameters shared by all layers */
    df_tensor *tok_embd, *output_norm, *output, *rope_freqs;
    df_tensor *output_res_score;          /* kimi-k3 final AttnRes mix */
    df_tensor *hc_head_fn, *hc_head_base, *hc_head_scale; /* deepseek4 final hyper-connection mix */
    df_layer *layers;            /* [n_layer] */
    df_tensor *tensors;          /* bound tensors (array of n_bound) */
    int n_bound, cap_bound;
    int bind_status;             /* first binding error */
    /* resident memory */
    uint64_t expert_file_bytes;  /* routed expert bytes in the file */
    bool meta_only;              /* DF_LOAD_META_ONLY: no weights in memory */
    struct df_weights *w;        /* where the weight bytes are (weights/weights.h; the loader sets it) */
    void *pack;                  /* df_pack * of a packed model (pack.h), else NULL */
    df_gguf_tensor *pack_tensors; /* expert tensor infos from the pack keys (memplan.c) */
    int n_pack_tensors;
    void *tokenizer;             /* df_tokenizer * (tokenizer.h) */
    deltafin_model_params params;
    deltafin_plan plan;          /* the memory plan it was loaded with */
    int plan_status;             /* DF_OK, or why the plan failed (meta-only loads keep going) */
    atomic_int n_ctx_live;       /* contexts holding one of the plan's sequences */
    _Atomic uint64_t kv_live, scratch_live; /* bytes the live contexts hold (budget report) */
    char plan_error[512];
};

enum {
    DF_T_OPTIONAL = 1,   /* absent is fine (returns NULL) */
    DF_T_EXPERT = 2,     /* routed expert 3-D tensor: loading may be skipped */
    DF_T_NORM = 4,       /* must be F32 (norms, biases, other small vectors) */
    DF_T_UNUSED = 8,     /* bound (the file's tensor count) but not used by the forward pass */
    DF_T_RESHAPE = 16,   /* a 3-D shape {a, b, c} the file may store 2-D as {a, b·c} (llama.cpp's
                          * TENSOR_ALLOW_RESHAPE: deepseek4's attn_output_a) */
    DF_T_INDEX = 32,     /* an I32 table (deepseek4's ffn_gate_tid2eid), not weights */
};

/* Bind tensor `name` (printf format with the layer index, e.g. "blk.%d.attn_q.weight")
 * with exactly n_dims dims and the given ne. Missing required tensor / wrong shape / wrong
 * type: records the first error in m->bind_status and returns NULL. */
df_tensor *df_model_tensor(df_model *m, const char *fmt, int il, int flags, int n_dims,
                           int64_t ne0, int64_t ne1, int64_t ne2);
/* Bind every tensor of the arch's schema (and the tied output); DF_OK or the first error. */
int df_model_bind_schema(df_model *m);
/* The file (or its pack) has tensor `name`. */
bool df_model_has_tensor(df_model *m, const char *name);
/* Keys with the "{arch}." prefix; absent optional keys leave *out untouched. */
int df_model_key_u32(df_model *m, const char *suffix, uint32_t *out, bool required);
int df_model_key_f32(df_model *m, const char *suffix, float *out, bool required);

/* Everything but the weight bytes, for m->gguf (m->path set): the pack of a packed file, the
 * architecture, hyperparameters, every tensor bound and shape-checked (all tensors of the file
 * used), RoPE parameters (df_rope_init is the caller's). On error the caller frees m. */
int df_model_describe(df_model *m);
bool df_model_is_expert(const df_model *m, const df_tensor *t);
/* Packed models (format/pack.h): open the pack of m->gguf if it is one (sets m->pack and the
 * synthetic expert tensor infos m->pack_tensors that binding uses); find one by name; free. */
int df_model_pack_init(df_model *m);
const df_gguf_tensor *df_model_pack_tensor(df_model *m, const char *name);
void df_model_pack_free(df_model *m);

/* Where routed expert `expert` of layer `layer`, part DF_EXPERT_GATE/UP/DOWN lives in the
 * files (formats.md §5). DF_ERR_INVALID if the layer has no experts or indices are bad. */
int df_model_expert_loc(const df_model *m, int layer, int expert, int part, df_expert_loc *out);
/* Shape of an expert part: rows n_out of n_in elements; bytes per expert slice. */
void df_model_expert_shape(const df_model *m, int layer, int part, int64_t *n_in, int64_t *n_out,
                           uint64_t *nbytes);

/* What the model itself needs, for the memory plan: dense and expert bytes as stored, the
 * largest single expert, and the KV cache of one sequence at n_ctx (plus its recurrent state
 * twice: the state and its prompt snapshot). Scratch is the forward pass's business. */
typedef struct df_footprint {
    uint64_t dense_bytes;        /* non-expert weights */
    uint64_t expert_bytes;       /* routed expert weights (all layers) */
    uint64_t expert_bytes_one;   /* largest single expert (gate+up+down) */
    int n_moe_layers;            /* layers with routed experts */
    uint64_t kv_bytes_per_token; /* all layers, K+V, in the cache types (df_model_kv_types) */
    uint64_t kv_bytes;           /* at n_ctx, plus 2 x state_bytes */
    uint64_t state_bytes;        /* per-sequence recurrent state (kimi-k3 KDA), 0 if none */
    int n_ctx;
} df_footprint;
void df_model_footprint(const df_model *m, int n_ctx, df_footprint *out);

/* Registered architectures (one file per family: src/model/arch_<name>.c). */
const df_arch *df_arch_find(const char *name);
#endif
