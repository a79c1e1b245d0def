/* session.h — internals of a deltafin_ctx (one sequence): F16 KV cache, scratch buffers
 * sized at create time for n_batch tokens, and the pieces of the forward pass that live in
 * their own files (attn_gqa.c, moe.c).
 * A forward pass may carry several sequences (deltafin_decode_batch): it runs on the scratch
 * and pool of one context, the lead, whose c->seg[0..n_seg) says which rows belong to which
 * sequence (df_seg: its ctx, positions, KV cache, recurrent state). Per-token work runs on all
 * rows at once (matmuls with c->grp, one group per sequence, so each sequence's rows compute
 * as its own pass would: kernels.h df_row_groups); attention and recurrent state go sequence
 * by sequence. A single-sequence decode is the same code with one segment.
 * Invariant: nothing on the decode path allocates; every buffer below is sized by
 * df_session_scratch_bytes()'s plan. Threading: a ctx is used by one thread at a time; the
 * heavy loops fan out over the ctx's own df_pool. */
#ifndef DF_SESSION_H
#define DF_SESSION_H
#include <stdatomic.h>
#include "model/model.h"
#include "base/threadpool.h"
#include "forward/ops.h"
#include "weights/expert.h"

struct deltafin_ctx;
/* The matmul observer of a ctx (deltafin_ctx_set_matmul_observer; fn NULL: off). */
typedef struct df_mm_obs {
    deltafin_matmul_fn fn;
    void *ud;
} df_mm_obs;
/* Forward-pass hooks of an architecture (src/forward/<name>.c), found by the df_arch's name.
 * Hooks that are NULL use the generic code (GQA attention, dense SwiGLU / MoE FFN). */
typedef struct df_arch_fwd {
    const char *name;
    /* The attention block of layer il for the nt rows of the pass (c->seg: segment s holds
     * rows row0.. at positions pos0.. of sequence sc): reads c->h, adds its output to c->h,
     * stores each row's KV at df_ctx_k(sc, il, pos) of its own sequence. May use c->arch_scr. */
    int (*layer_attn)(struct deltafin_ctx *c, int il, int nt);
    /* The FFN block of layer il (c->h += FFN). */
    int (*layer_ffn)(struct deltafin_ctx *c, int il, int nt);
    /* Extra scratch bytes the hooks need for n_batch tokens (carved at ctx create). */
    uint64_t (*arch_scratch)(const df_model *m, int n_batch);
    /* Row rows[i] of the pass became row i, i < n (rows ascending; last-layer row selection). */
    void (*rows_select)(struct deltafin_ctx *c, const int32_t *rows, int n);
    /* Transform c->h rows [0, n) before output_norm (kimi-k3's final residual mix). */
    int (*pre_output)(struct deltafin_ctx *c, int n);
    /* The last layer runs on every row and the rows whose logits are wanted are kept after it
     * (llama.cpp's deepseek4, qwen3next and qwen35moe graphs select them only before the
     * output head), not before its FFN: the FFN's matmuls see the pass's row count. */
    bool select_late;
} df_arch_fwd;
/* The hooks of architecture `name` (an all-NULL table for the generic ones; never NULL). */
const df_arch_fwd *df_arch_fwd_find(const char *name);

/* One sequence's rows in a forward pass (see the header comment). */
typedef struct df_seg {
    struct deltafin_ctx *sc;     /* the sequence: KV cache, recurrent state, route counts */
    const int32_t *ids;          /* its tokens in this pass (n_tok of them) */
    int n_tok;
    int row0, n;                 /* rows [row0, row0 + n) of the pass (after the last layer's row
                                  * selection: its kept rows) */
    int pos0;                    /* position of its first token (sc->n_past during the pass) */
    int out_lo;                  /* logits are wanted for its rows out_lo .. n-1 (n: none) */
    float *dst;                  /* where they go: n - out_lo rows of n_vocab */
} df_seg;

struct deltafin_ctx {
    df_model *m;
    struct df_weights *w;        /* m->w: the weight bytes (weights/weights.h) */
    const df_arch_fwd *fwd;      /* df_arch_fwd_find(m->arch->name) */
    bool counted;                /* holds one of the plan's sequences (m->n_ctx_live) */
    uint64_t acct_kv, acct_scratch; /* added to m->kv_live / m->scratch_live (budget report) */
    df_pool *pool;
    int n_threads;
    int n_ctx, n_batch;
    int n_past;
    /* KV cache in type_k / type_v (ggml types: F16 as llama.cpp's default, or -ctk / -ctv's
     * BF16 / Q8_0 / Q4_0 ... blocks): layer il keeps [n_ctx] rows of k_row[il] K and
     * v_row[il] V elements (rows from df_model_kv_row), k_rowb / v_rowb bytes each, at
     * k_l[il] / v_l[il] */
    char **k_l, **v_l;
    int64_t *k_row, *v_row;
    uint64_t *k_rowb, *v_rowb;
    int type_k, type_v;
    int rot_k, rot_v;            /* df_model_kv_rot: Hadamard rotation sizes (0 = none) */
    void *kv_mem; uint64_t kv_bytes;
    /* scratch for nb = n_batch tokens */
    float *h;      /* [nb][n_embd] residual stream */
    float *x;      /* [nb][n_embd] normalized input */
    float *q;      /* [nb][n_head*dk] */
    float *k;      /* [nb][n_head_kv*dk] */
    float *v;      /* [nb][n_head_kv*dv] */
    float *o;      /* [nb][n_head*dv] attention output */
    float *y;      /* [nb][n_embd] block output */
    float *fa, *fb;/* [nb][fw] FFN intermediates (fw = max width incl. fused qkv) */
    float *rc;     /* [nb][n_rot] rope cos/sin */
    void *act; uint64_t act_bytes;     /* activation conversion for matmuls */
    /* MoE */
    float *router; /* [nb][E] logits then probabilities */
    float *selbuf; /* [nb][E] selection scores */
    int32_t *sel;  /* [nb][k] chosen experts */
    float *selw;   /* [nb][k] their weights */
    int32_t *e_cnt, *e_off, *e_list, *e_union; /* [E], [E+1], [nb*k] (t*k+j), [E] */
    uint8_t *e_local; /* [E]: e_union[u] is computed here (a remote expert source, weights.h) */
    float *xg, *yg;/* [nb][n_embd] gathered input / expert output */
    float *yslot;  /* [nb][k][n_embd] per-slot expert outputs (summed in slot order) */
    uint32_t *route_counts; /* [n_layer][E] tokens routed per expert, or NULL (off: no cost) */
    /* opt-in lossy routing (deltafin_ctx_set_routing; all zero = off, the model's routing) and
     * the routing trace callback (deltafin_ctx_set_route_trace, NULL = off) */
    deltafin_routing routing;
    uint64_t route_slots, route_dropped, route_swapped; /* (token, slot) pairs routed / dropped / moved to a cached expert */
    void (*route_trace)(void *ud, int layer, int n_tokens, int k, const int32_t *experts);
    void *route_trace_ud;
    df_mm_obs obs;               /* the matmul observer (off: fn NULL) */
    char *arch_scr; uint64_t arch_scr_bytes; /* for df_arch hooks */
    /* recurrent state (df_arch.state_bytes; zero = fresh sequence) and the ids decoded so far
     * (hist[0..n_past), kept only when there is state: truncation re-decodes the prefix) */
    void *rs; uint64_t rs_bytes;
    int32_t *hist;
    /* copy of rs after the last multi-token decode (a prompt) and its position, -1 if none:
     * truncating to pos >= rs_snap_pos restores it and re-decodes only hist[rs_snap_pos..pos) */
    void *rs_snap; int rs_snap_pos;
    /* attention per-thread scratch */
    char *attn_scr; size_t attn_stride;
    /* logits */
    float *logits; int64_t logits_cap;  /* rows */
    int n_logits;                        /* rows valid from the last decode */
    bool logits_all;
    atomic_int cancel;
    /* deltafin_embed (runtime/api_embed.c): while set, a decode adds every row's final
     * normalized hidden state (the output norm's result, llama.cpp's t_embd) here, [n_embd],
     * and computes no logits */
    float *embd_sum;
    /* the pass this ctx leads (its scratch): segments, their row ends as matmul groups, the
     * kept rows of the last layer; [n_batch] each (a segment has >= 1 row) */
    df_seg *seg; int n_seg;
    int32_t *seg_end; df_row_groups grp;
    int32_t *rows_kept;
    uint8_t *e_mark;                     /* [E] experts seen by one segment (sharing statistics) */
    uint64_t pass_union, pass_alone;     /* expert acquires of the union / per sequence, summed */
    float *stage; int64_t stage_rows;    /* logits rows of several sequences (grown once) */
    /* a call's bookkeeping for this ctx as a sequence of a batch */
    int b_start, b_done;
    bool b_in, b_touched;
    deltafin_stats st;
    void *mem; uint64_t mem_bytes;       /* the one scratch block */
};

uint64_t df_session_scratch_bytes(const df_model *m, int n_batch, int n_threads);
/* K / V cache row of layer il at position pos (for df_arch attention hooks). */
static inline void *df_ctx_k(struct deltafin_ctx *c, int il, int pos) { return c->k_l[il] + (uint64_t)pos * c->k_rowb[il]; }
static inline void *df_ctx_v(struct deltafin_ctx *c, int il, int pos) { return c->v_l[il] + (uint64_t)pos * c->v_rowb[il]; }
/* Store n values of an F32 K or V row as cache type `type` (llama.cpp's set_rows: the CPU
 * backend's from_float — F16 rounding, or the type's quantizer; n a multiple of its block). */
void df_kv_put(int type, const float *x, void *dst, int64_t n);
/* In place over n values (n % nrot == 0): each run of nrot values becomes its Walsh-Hadamard
 * transform / sqrt(nrot), as ggml-cpu's fwht (llama.cpp's attention rotation, df_model_kv_rot):
 * x *= 1/sqrtf(nrot), then butterflies u+v, u-v of widths 1, 2, 4, ... (exact in every order). */
void df_fwht(float *x, int64_t n, int nrot);
/* llama.cpp's choice of its tiled F32 flash-attention kernel for nq queries (per sequence). */
bool df_use_tiled_attn(int nq, int dv);
/* Whether every sequence of the pass c leads was cancelled (deltafin_ctx_cancel). */
bool df_pass_cancelled(const struct deltafin_ctx *c);
/* Hand a weight product's input rows to the matmul observer (deltafin_ctx_set_matmul_observer);
 * callers test obs->fn first, so an unset observer costs one branch. */
void df_mm_observe(const df_mm_obs *obs, const df_tensor *w, int matrix, int n_matrix, bool per_expert,
                   const float *X, int64_t ldx, int n);
/* Y = W·X over the nt rows of the pass, each sequence's rows as its own pass would compute them
 * (c->grp); act conversions into c->act. */
static inline void df_fw_mm(struct deltafin_ctx *c, const df_tensor *w, const float *X, int64_t ldx, int nt, float *Y,
                            int64_t ldy) {
    if (c->obs.fn) df_mm_observe(&c->obs, w, 0, 1, false, X, ldx, nt);
    df_matmul_g(c->pool, w->data, w->type, w->ne[0], w->ne[1], X, ldx, nt, Y, ldy, c->act, &c->grp);
}
/* The same with X (ldx apart, for the observer) already in c->act (df_quantize_act). */
static inline void df_fw_mm_q(struct deltafin_ctx *c, const df_tensor *w, const float *X, int64_t ldx, int nt,
                              float *Y, int64_t ldy) {
    if (c->obs.fn) df_mm_observe(&c->obs, w, 0, 1, false, X, ldx, nt);
    df_matmul_q_g(c->pool, w->data, w->type, w->ne[0], w->ne[1], c->act, nt, Y, ldy, &c->grp);
}
/* The generic blocks (also callable from hooks). */
int df_layer_attn_gqa(struct deltafin_ctx *c, int il, int nt);
int df_layer_ffn(struct deltafin_ctx *c, int il, int nt);

/* ---- attention (attn_gqa.c) --------------------------------------------------------------- */
typedef struct df_attn_args {
    int n_tok, pos0;            /* query t is at position pos0 + t; keys 0 .. pos0+t */
    int n_head, n_head_kv, dk, dv;
    float scale;
    const float *q; int64_t ldq;        /* [n_tok][ldq], head h at h*dk */
    const void *kc, *vc;                /* cache of this layer: row p, head h at element
                                         * p*ldk + h*dk / p*ldv + h*dv (block-aligned) */
    int64_t ldk, ldv;
    int type_k, type_v;                 /* their ggml types; 0 (F32) is taken as F16 */
    float *out; int64_t ldo;            /* [n_tok][ldo], head h at h*dv */
    bool f32_acc;               /* llama.cpp's tiled path: F32 Q and accumulator */
    const float *sinks;         /* [n_head] or NULL */
    int swa;                    /* sliding window (0 = none) */
    const uint8_t *kmask; int64_t ldm; /* or NULL; else query t attends key p only where
                                        * kmask[t*ldm + p] (DSA's selected keys) */
    /* or NULL; else a second block of keys after the cache positions, its values the keys
     * (deepseek4's compressed rows): query t attends rows j < n2[t] of kc2 (row j at element
     * j*ldk2, type_k), or with sel2 the n2[t] rows sel2[t*ldsel2 + i] (ascending) */
    const void *kc2; int64_t ldk2; const int32_t *n2, *sel2; int64_t ldsel2;
    /* llama.cpp's split-KV path for one query (ggml's flash attention over >= 512 keys, split
     * across its threads): cache position p has index p, block-2 row j index split_base + j; the
     * split_nkv indices are cut into split_n chunks of ceil(split_nkv / split_n), each chunk's
     * softmax run on its own (the sinks in the first) and the partials reduced in chunk order.
     * split_n <= 1, several queries or the tiled path: one run over all keys. */
    int split_n; int64_t split_nkv, split_base;
    char *scratch; size_t scratch_stride; /* per thread */
} df_attn_args;
size_t df_attn_scratch_per_thread(int dk, int dv);
void df_attn_gqa(df_pool *pool, const df_attn_args *a);

/* ---- MoE (moe.c) ------------------------------------------------------------------------ */
/* out[t] = MoE(x[t]) (+ shared expert) for the nt tokens, expert-major. */
int df_moe_forward(struct deltafin_ctx *c, int il, const float *x, int nt, float *out);
/* Routing only (steps 1-9): fills c->sel / c->selw for nt tokens. Exposed for tests. */
void df_moe_route(struct deltafin_ctx *c, int il, const float *x, int nt);
/* Routed experts only: route on xr (n_embd wide), run the experts on xe (their own input
 * width, e.g. kimi-k3's latent), out[t] = Σ_j w_j·expert_j(xe[t]) in slot order (width of
 * the down projection's output). No shared experts. */
int df_moe_routed(struct deltafin_ctx *c, int il, const float *xr, const float *xe, int nt, float *out);
/* Buffers for computing one routed expert on n rows: xg [n][d_in] in, yg [n][d_out] out,
 * fa / fb [n][n_ff] intermediates, act the activation conversion (df_act_bytes). */
typedef struct df_moe_bufs {
    df_pool *pool;
    void *act;
    float *xg, *fa, *fb, *yg;
    const df_mm_obs *obs;        /* the matmul observer, or NULL */
} df_moe_bufs;
/* The largest expert widths over the model's MoE layers. */
typedef struct df_moe_dims { int64_t d_in, n_ff, d_out; uint64_t act_bytes; } df_moe_dims;
/* yg = expert(xg) for n rows: gate and up, the FFN activation, down — the code every MoE layer
 * runs, also for an expert computed for another process (dist/); L's per-expert biases of
 * expert e where it has them (L may be NULL). */
void df_moe_expert_rows(const df_moe_bufs *b, const df_hparams *hp, const df_layer *L, int e, const df_expert_w *w,
                        int64_t d_in, int64_t n_ff, int64_t d_out, int n);
/* Bytes of the buffers (each 64-byte aligned) for n_rows rows of any MoE layer of m, and the
 * widths and act bytes they are sized for (dims may be NULL). */
uint64_t df_moe_bufs_bytes(const df_model *m, int n_rows, df_moe_dims *dims);
/* g[i] = act(g[i], u[i]) for the model's FFN activation (SwiGLU or kimi-k3's situ; not the
 * clamped SwiGLU, whose clamp writes u: df_ffn_act_rows). */
void df_ffn_act(const df_hparams *hp, float *g, const float *u, int64_t n);
/* the same over nrows rows of ncols, row by row as ggml_swiglu (matters in ggml's order); the
 * clamped SwiGLU (deepseek4) clamps u in place */
void df_ffn_act_rows(const df_hparams *hp, float *g, float *u, int64_t nrows, int64_t ncols);
/* deepseek4's SwiGLU: gate = min(gate, limit), u = clamp(u, ±limit) (in place), then SwiGLU row
 * by row; limit <= 1e-6: no clamp (llama.cpp's build_moe_ffn / build_ffn) */
void df_swiglu_clamp_rows(float *g, float *u, int64_t nrows, int64_t ncols, float limit);
/* Router look-ahead (prefetch of the next layer's experts, docs/streaming.md). The next layer
 * after il with routed experts, or -1. */
int df_moe_next_layer(const struct deltafin_model *m, int il);
/* Whether a look-ahead prediction would be used (streaming store with prefetch not off). */
bool df_moe_lookahead_wanted(struct deltafin_ctx *c);
/* Applies layer il_next's router (steps 1-5) to xn (nt rows of n_embd: that layer's router
 * input, or an estimate of it from an earlier layer's state) and hands the predicted experts,
 * most voted first, to the expert store (df_store_lookahead). Call it while layer il_next - 1
 * computes, after that layer's own experts were announced (df_moe_forward does both for the
 * generic FFN path). Scratch: c->router, c->selbuf, c->yslot (xn must not alias them). No-op
 * when experts are resident or prefetch is off. */
void df_moe_lookahead(struct deltafin_ctx *c, int il_next, const float *xn, int nt);
#endif
