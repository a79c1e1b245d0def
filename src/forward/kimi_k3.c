/* kimi_k3.c — Kimi K3 (`kimi-k3`, docs kimi-k3.md): hybrid KDA (Kimi Delta Attention, a gated
 * delta-rule recurrence with short convolutions) and nope-only MLA layers (attn_mla.c with
 * no RoPE and a sigmoid output gate), latent MoE (router on the full-width x, routed experts on
 * the routed_down latent through moe.c / the expert provider, routed_norm, routed_up, shared
 * experts), situ activations, a dense layer 0, and block AttnRes: the hidden state passed
 * between layers is a partial block sum P; every layer mixes P with a per-token stack of banked
 * checkpoints (softmax over RMS-normed scores) before its attention and before its FFN.
 * Numerics follow llama.cpp's CPU graph op by op (kimi-k3.md §3, §6): the delta rule is the
 * fused op's sequential per-token recurrence (decay per key channel, F32 SIMD dots), run for
 * a whole batch per layer with all projections as batched matmuls.
 * State: per sequence in c->rs — per KDA layer the conv state (q, k, v blocks, channel-major,
 * tap fastest) then the delta state (mem[h·S·S + j·S + i] = St_h[key i][value j]); MLA layers
 * keep a 576-wide (Rkv + Dr) F16 K cache row per token and no V (session.c's cache).
 * Threading: on the ctx thread; matmuls and the per-head recurrence fan out over c->pool. */
#include "model/model.h"
#include "forward/attn_mla.h"
#include "forward/session.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include <math.h>

#define TRYK(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

/* ---- hyperparameters and binding ----------------------------------------------------------- */
static int k3_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    uint32_t u, km = 0, vm = 0;
    TRYK(df_model_key_u32(m, "attention.key_length_mla", &km, true));
    TRYK(df_model_key_u32(m, "attention.value_length_mla", &vm, true));
    u = 0; TRYK(df_model_key_u32(m, "attention.q_lora_rank", &u, false)); hp->n_lora_q = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attention.kv_lora_rank", &u, true)); hp->n_lora_kv = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "ssm.conv_kernel", &u, true)); hp->ssm_conv = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "kda.head_dim", &u, true)); hp->kda_head_dim = (int)u;
    hp->kda_lb = -INFINITY;
    TRYK(df_model_key_f32(m, "kda.gate_lower_bound", &hp->kda_lb, false));
    hp->kda_has_lb = hp->kda_lb > -INFINITY;
    u = 0; TRYK(df_model_key_u32(m, "expert_feed_forward_length", &u, true)); hp->n_ff_exp = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_shared_count", &u, true)); hp->n_expert_shared = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "leading_dense_block_count", &u, false)); hp->n_layer_dense_lead = (int)u;
    hp->expert_weights_scale = 0.0f;
    TRYK(df_model_key_f32(m, "expert_weights_scale", &hp->expert_weights_scale, false));
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch->name);
    hp->expert_weights_norm = false;
    int rcb = df_gguf_get_bool(m->gguf, key, &hp->expert_weights_norm);
    if (rcb < 0 && rcb != DF_ERR_NOTFOUND) return rcb;
    u = 0; TRYK(df_model_key_u32(m, "expert_gating_func", &u, true));
    if (u < DF_GATING_SOFTMAX || u > DF_GATING_SQRT_SOFTPLUS)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_gating_func %u not supported", m->path, u);
    hp->gating = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_group_count", &u, false)); hp->n_expert_groups = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_group_used_count", &u, false)); hp->n_group_used = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "expert_latent_length", &u, false)); hp->n_latent = (int)u;
    u = 0; TRYK(df_model_key_u32(m, "attn_res.block_size", &u, true)); hp->attn_res_block = (int)u;
    TRYK(df_model_key_f32(m, "activation.situ_beta", &hp->situ_beta, true));
    TRYK(df_model_key_f32(m, "activation.situ_linear_beta", &hp->situ_lbeta, true));
    hp->ffn_act = DF_ACT_SITU;
    hp->no_rope = true;
    hp->is_mla = true;
    hp->n_embd_head_k_mla = (int)km;
    hp->n_embd_head_v_mla = (int)vm;
    hp->n_embd_head_v = hp->n_lora_kv; /* llama.cpp overrides value_length to kv_lora_rank */
    hp->n_ff_shexp = hp->n_ff_exp * (hp->n_expert_shared > 0 ? hp->n_expert_shared : 1);
    const int dr = hp->n_rot, dq = (int)km, dv = (int)vm, S = hp->kda_head_dim, C = hp->ssm_conv;
    if (hp->n_lora_kv <= 0 || hp->n_lora_kv > 65536 || hp->n_lora_q < 0 || hp->n_lora_q > 65536 || dr <= 0 ||
        dq <= dr || dq > 4096 || dv <= 0 || dv > 4096)
        return df_err(DF_ERR_FORMAT, "%s: bad MLA dims (q_lora %d, kv_lora %d, k_mla %d, v_mla %d, rope %d)", m->path,
                      hp->n_lora_q, hp->n_lora_kv, dq, dv, dr);
    if (hp->n_embd_head_k != hp->n_lora_kv + dr)
        return df_err(DF_ERR_FORMAT, "%s: attention.key_length %d must be kv_lora_rank + rope dims = %d", m->path,
                      hp->n_embd_head_k, hp->n_lora_kv + dr);
    if (S <= 0 || S > 4096 || C <= 0 || C > 64 || (int64_t)S * hp->n_head > (1 << 24))
        return df_err(DF_ERR_FORMAT, "%s: bad KDA dims (head_dim %d, conv_kernel %d)", m->path, S, C);
    if (hp->n_latent < 0 || hp->n_latent > hp->n_embd)
        return df_err(DF_ERR_UNSUPPORTED, "%s: expert_latent_length %d > embedding_length %d", m->path, hp->n_latent,
                      hp->n_embd);
    if (hp->attn_res_block < 0 || !(hp->situ_beta != 0.0f))
        return df_err(DF_ERR_FORMAT, "%s: bad attn_res.block_size or situ_beta", m->path);
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead > hp->n_layer)
        return df_err(DF_ERR_FORMAT, "%s: leading_dense_block_count > block_count", m->path);
    if (hp->n_layer_dense_lead > 0 && hp->n_ff <= 0)
        return df_err(DF_ERR_FORMAT, "%s: dense layers need feed_forward_length", m->path);
    if (hp->n_layer_dense_lead < hp->n_layer && (hp->n_expert <= 0 || hp->n_expert_used <= 0 ||
                                                 hp->n_expert_used > hp->n_expert || hp->n_ff_exp <= 0))
        return df_err(DF_ERR_FORMAT, "%s: MoE layers need expert_count, expert_used_count and "
                      "expert_feed_forward_length", m->path);
    if (hp->n_expert_groups > 1 && (hp->n_expert % hp->n_expert_groups || hp->n_group_used <= 0 ||
                                    hp->n_group_used > hp->n_expert_groups || hp->n_expert_groups > 256))
        return df_err(DF_ERR_FORMAT, "%s: bad expert groups", m->path);
    hp->kq_scale = 1.0f / sqrtf((float)dq);
    return DF_OK;
}

static int k3_bind(df_model *m) {
    const df_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, H = hp->n_head, S = hp->kda_head_dim, DI = H * S, C = hp->ssm_conv;
    const int64_t dr = hp->n_rot, dq = hp->n_embd_head_k_mla, dn = dq - dr, dv = hp->n_embd_head_v_mla;
    const int64_t rkv = hp->n_lora_kv, rq = hp->n_lora_q;
    const int64_t Lt = hp->n_latent > 0 ? hp->n_latent : E;
    const bool res = hp->attn_res_block > 0;
    df_bind_output(m, false);
    if (res) m->output_res_score = df_model_tensor(m, "output_res_score.weight", 0, DF_T_NORM, 1, E, 0, 0);
    for (int il = 0; il < hp->n_layer; il++) {
        df_layer *L = &m->layers[il];
        L->attn_norm = df_model_tensor(m, "blk.%d.attn_norm.weight", il, DF_T_NORM, 1, E, 0, 0);
        L->ffn_norm = df_model_tensor(m, "blk.%d.ffn_norm.weight", il, DF_T_NORM, 1, E, 0, 0);
        if (res) {
            L->attn_res_score = df_model_tensor(m, "blk.%d.attn_res_score.weight", il, DF_T_NORM, 1, E, 0, 0);
            L->ffn_res_score = df_model_tensor(m, "blk.%d.ffn_res_score.weight", il, DF_T_NORM, 1, E, 0, 0);
        }
        if (hp->layer_recr[il]) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.attn_qkv.weight", il);
            if (df_gguf_tensor_find(m->gguf, nm))
                return df_err(DF_ERR_UNSUPPORTED, "%s: fused attn_qkv in a kimi-k3 KDA layer is not supported "
                              "(llama.cpp cannot run it either)", m->path);
            static const char *cv[3] = {"blk.%d.ssm_conv1d_q.weight", "blk.%d.ssm_conv1d_k.weight",
                                        "blk.%d.ssm_conv1d_v.weight"};
            for (int s = 0; s < 3; s++) L->ssm_conv[s] = df_model_tensor(m, cv[s], il, DF_T_NORM, 3, C, 1, DI);
            L->wq = df_model_tensor(m, "blk.%d.attn_q.weight", il, 0, 2, E, DI, 0);
            L->wk = df_model_tensor(m, "blk.%d.attn_k.weight", il, 0, 2, E, DI, 0);
            L->wv = df_model_tensor(m, "blk.%d.attn_v.weight", il, 0, 2, E, DI, 0);
            L->ssm_f_a = df_model_tensor(m, "blk.%d.ssm_f_a.weight", il, 0, 2, E, S, 0);
            L->ssm_f_b = df_model_tensor(m, "blk.%d.ssm_f_b.weight", il, 0, 2, S, DI, 0);
            L->ssm_beta = df_model_tensor(m, "blk.%d.ssm_beta.weight", il, 0, 2, E, H, 0);
            L->ssm_a = df_model_tensor(m, "blk.%d.ssm_a", il, DF_T_NORM, 1, H, 0, 0);
            L->ssm_dt_b = df_model_tensor(m, "blk.%d.ssm_dt.bias", il, DF_T_NORM, 1, DI, 0, 0);
            L->ssm_g = df_model_tensor(m, "blk.%d.ssm_g.weight", il, 0, 2, E, DI, 0);
            L->ssm_o_norm = df_model_tensor(m, "blk.%d.ssm_norm.weight", il, DF_T_NORM, 1, S, 0, 0);
            L->wo = df_model_tensor(m, "blk.%d.attn_output.weight", il, 0, 2, DI, E, 0);
        } else {
            L->q_a_norm = df_model_tensor(m, "blk.%d.attn_q_a_norm.weight", il, DF_T_NORM | DF_T_OPTIONAL, 1, rq, 0, 0);
            if (L->q_a_norm) {
                L->wq_a = df_model_tensor(m, "blk.%d.attn_q_a.weight", il, 0, 2, E, rq, 0);
                L->wq_b = df_model_tensor(m, "blk.%d.attn_q_b.weight", il, 0, 2, rq, H * dq, 0);
            } else {
                L->wq = df_model_tensor(m, "blk.%d.attn_q.weight", il, 0, 2, E, H * dq, 0);
            }
            L->kv_a_norm = df_model_tensor(m, "blk.%d.attn_kv_a_norm.weight", il, DF_T_NORM, 1, rkv, 0, 0);
            L->wkv_a_mqa = df_model_tensor(m, "blk.%d.attn_kv_a_mqa.weight", il, 0, 2, E, rkv + dr, 0);
            L->wk_b = df_model_tensor(m, "blk.%d.attn_k_b.weight", il, 0, 3, dn, rkv, H);
            L->wv_b = df_model_tensor(m, "blk.%d.attn_v_b.weight", il, 0, 3, rkv, dv, H);
            L->attn_gate = df_model_tensor(m, "blk.%d.attn_gate.weight", il, DF_T_OPTIONAL, 2, E, H * dv, 0);
            L->wo = df_model_tensor(m, "blk.%d.attn_output.weight", il, 0, 2, H * dv, E, 0);
        }
        if (il < hp->n_layer_dense_lead) {
            L->ffn_gate = df_model_tensor(m, "blk.%d.ffn_gate.weight", il, 0, 2, E, hp->n_ff, 0);
            L->ffn_down = df_model_tensor(m, "blk.%d.ffn_down.weight", il, 0, 2, hp->n_ff, E, 0);
            L->ffn_up = df_model_tensor(m, "blk.%d.ffn_up.weight", il, 0, 2, E, hp->n_ff, 0);
        } else {
            const int64_t fe = hp->n_ff_exp, X = hp->n_expert;
            L->is_moe = true;
            L->gate_inp = df_model_tensor(m, "blk.%d.ffn_gate_inp.weight", il, 0, 2, E, X, 0);
            L->exp_probs_b = df_model_tensor(m, "blk.%d.exp_probs_b.bias", il, DF_T_NORM, 1, X, 0, 0);
            L->exps[DF_EXPERT_GATE] = df_model_tensor(m, "blk.%d.ffn_gate_exps.weight", il, DF_T_EXPERT, 3, Lt, fe, X);
            L->exps[DF_EXPERT_DOWN] = df_model_tensor(m, "blk.%d.ffn_down_exps.weight", il, DF_T_EXPERT, 3, fe, Lt, X);
            L->exps[DF_EXPERT_UP] = df_model_tensor(m, "blk.%d.ffn_up_exps.weight", il, DF_T_EXPERT, 3, Lt, fe, X);
            if (hp->n_latent > 0) {
                L->routed_down = df_model_tensor(m, "blk.%d.ffn_routed_down.weight", il, 0, 2, E, Lt, 0);
                L->routed_up = df_model_tensor(m, "blk.%d.ffn_routed_up.weight", il, 0, 2, Lt, E, 0);
                L->routed_norm = df_model_tensor(m, "blk.%d.ffn_routed_norm.weight", il, DF_T_NORM | DF_T_OPTIONAL, 1, Lt, 0, 0);
            }
            const int64_t fs = hp->n_ff_shexp;
            L->gate_shexp = df_model_tensor(m, "blk.%d.ffn_gate_shexp.weight", il, DF_T_OPTIONAL, 2, E, fs, 0);
            L->down_shexp = df_model_tensor(m, "blk.%d.ffn_down_shexp.weight", il, DF_T_OPTIONAL, 2, fs, E, 0);
            L->up_shexp = df_model_tensor(m, "blk.%d.ffn_up_shexp.weight", il, DF_T_OPTIONAL, 2, E, fs, 0);
            if (m->bind_status == DF_OK && (!L->gate_shexp) != (!L->up_shexp))
                return df_err(DF_ERR_FORMAT, "%s: layer %d: ffn_gate_shexp and ffn_up_shexp come together", m->path, il);
            if (m->bind_status == DF_OK && L->gate_shexp && !L->down_shexp)
                return df_err(DF_ERR_FORMAT, "%s: layer %d: ffn_down_shexp missing", m->path, il);
        }
    }
    return m->bind_status;
}

static void k3_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    const df_hparams *hp = &m->hp;
    *k_row = hp->layer_recr[il] ? 0 : (int64_t)hp->n_lora_kv + hp->n_rot; /* [rms(c_kv) ; k_pe] */
    *v_row = 0;                                                         /* V = first Rkv of K */
}

/* recurrent state floats of one KDA layer: conv (3 blocks of (C-1)·DI) + delta (H·S·S) */
static uint64_t k3_conv_floats(const df_hparams *hp) {
    return 3ull * (uint64_t)(hp->ssm_conv - 1) * (uint64_t)hp->n_head * (uint64_t)hp->kda_head_dim;
}
static uint64_t k3_delta_floats(const df_hparams *hp) {
    return (uint64_t)hp->n_head * (uint64_t)hp->kda_head_dim * (uint64_t)hp->kda_head_dim;
}

static uint64_t k3_state_bytes(const df_model *m) {
    const df_hparams *hp = &m->hp;
    uint64_t n = 0;
    for (int il = 0; il < hp->n_layer; il++)
        if (hp->layer_recr[il]) n += k3_conv_floats(hp) + k3_delta_floats(hp);
    return n * sizeof(float);
}

static float *k3_layer_state(struct deltafin_ctx *c, int il) {
    const df_hparams *hp = &c->m->hp;
    uint64_t off = 0;
    for (int l = 0; l < il; l++)
        if (hp->layer_recr[l]) off += k3_conv_floats(hp) + k3_delta_floats(hp);
    return (float *)c->rs + off;
}

/* ---- scratch ---------------------------------------------------------------------------------- */
typedef struct {
    float *stack;          /* [nb][n_ckpt][E] banked checkpoints per token */
    float *mix, *a;        /* [nb][E] mixed input, block output */
    float *tmp;            /* [E] normalized row for scores */
    float *scores;         /* [n_ckpt + 1] */
    float *q, *k, *v, *g, *g2, *o; /* [nb][DI] KDA */
    float *fa;             /* [nb][S] */
    float *beta;           /* [nb][H] */
    float *win;            /* [nb + C] conv window */
    float *z, *r;          /* [nb][Lt] latent MoE */
} k3_bufs;

static int k3_n_ckpt(const df_hparams *hp) {
    const int B = hp->attn_res_block;
    return B > 0 ? (hp->n_layer + B - 1) / B : 0;
}

static uint64_t al64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

static uint64_t k3_carve(const df_model *m, int nb, char *base, k3_bufs *b) {
    const df_hparams *hp = &m->hp;
    const uint64_t E = (uint64_t)hp->n_embd, DI = (uint64_t)hp->n_head * (uint64_t)hp->kda_head_dim;
    const uint64_t Lt = (uint64_t)(hp->n_latent > 0 ? hp->n_latent : hp->n_embd);
    const uint64_t n = (uint64_t)nb, nck = (uint64_t)k3_n_ckpt(hp);
    bool kda = false;
    for (int l = 0; l < hp->n_layer; l++) kda |= hp->layer_recr[l] != 0;
    const uint64_t dk = kda ? DI : 1;
    struct { float **p; uint64_t n; } parts[] = {
        {&b->stack, n * (nck ? nck : 1) * E}, {&b->mix, n * E}, {&b->a, n * E}, {&b->tmp, E}, {&b->scores, nck + 1},
        {&b->q, n * dk}, {&b->k, n * dk}, {&b->v, n * dk}, {&b->g, n * dk}, {&b->g2, n * dk}, {&b->o, n * dk},
        {&b->fa, n * (uint64_t)hp->kda_head_dim}, {&b->beta, n * (uint64_t)hp->n_head},
        {&b->win, n + (uint64_t)hp->ssm_conv}, {&b->z, n * Lt}, {&b->r, n * Lt},
    };
    uint64_t off = al64(df_mla_scratch_bytes(m, nb)); /* attn_mla.c uses the start */
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (base) *parts[i].p = (float *)(base + off);
        off += al64(parts[i].n * sizeof(float));
    }
    return off;
}

static uint64_t k3_scratch_bytes(const df_model *m, int n_batch) {
    k3_bufs b;
    return k3_carve(m, n_batch, NULL, &b);
}

static void k3_bufs_get(struct deltafin_ctx *c, k3_bufs *b) {
    uint64_t n = k3_carve(c->m, c->n_batch, c->arch_scr, b);
    DF_ASSERT(n <= c->arch_scr_bytes);
}

static void mmw(struct deltafin_ctx *c, const df_tensor *w, const float *X, int64_t ldx, int nt, float *Y, int64_t ldy) {
    df_matmul(c->pool, w->data, w->type, w->ne[0], w->ne[1], X, ldx, nt, Y, ldy, c->act);
}

/* ---- block AttnRes ------------------------------------------------------------------------------ */
/* score = Σ_i rms(x)_i · w_i (F32 products, double sum, cast to F32) */
static float k3_score(const float *x, const float *w, float *tmp, int E, float eps) {
    df_rmsnorm(x, w, tmp, E, eps);
    double s = 0.0;
    for (int i = 0; i < E; i++) s += (double)tmp[i];
    return (float)s;
}

/* out = Σ_c X_c·p_c + P·p_P with p = softmax([score(X_c)…, score(P)]) (kimi-k3.md §3.2) */
static void k3_mix(const float *P, const float *X, int M, const float *w, float *out, k3_bufs *b, int E, float eps) {
    if (M == 0) { memcpy(out, P, sizeof(float) * (size_t)E); return; }
    for (int cc = 0; cc < M; cc++) b->scores[cc] = k3_score(X + (int64_t)cc * E, w, b->tmp, E, eps);
    b->scores[M] = k3_score(P, w, b->tmp, E, eps);
    df_softmax(b->scores, b->scores, M + 1);
    const float pp = b->scores[M];
    for (int i = 0; i < E; i++) {
        float acc = 0.0f;
        for (int cc = 0; cc < M; cc++) acc += X[(int64_t)cc * E + i] * b->scores[cc];
        out[i] = acc + P[i] * pp;
    }
}

static void k3_mix_rows(struct deltafin_ctx *c, k3_bufs *b, const df_tensor *w, int M, int nt, float *out) {
    const df_hparams *hp = &c->m->hp;
    const int E = hp->n_embd, nck = k3_n_ckpt(hp);
    for (int t = 0; t < nt; t++)
        k3_mix(c->h + (int64_t)t * E, b->stack + (int64_t)t * nck * E, M, w ? w->data : NULL,
               out + (int64_t)t * E, b, E, hp->eps);
}

/* ---- KDA ------------------------------------------------------------------------------------ */
typedef struct {
    const df_hparams *hp;
    float *st;                       /* delta state of the layer */
    const float *q, *k, *v, *g, *beta;
    float *o;
    int nt;
} kda_job;

/* one head's gated delta rule over the batch: the kernel table's (kernels.h df_kda_head_fn;
 * ggml_vec_dot_f32's AVX-512 order in every table) */
static void kda_head(void *ctx, int h, int thread) {
    (void)thread;
    const kda_job *j = ctx;
    const int S = j->hp->kda_head_dim, H = j->hp->n_head;
    const int64_t DI = (int64_t)H * S, off = (int64_t)h * S;
    df_kernels()->kda_head(j->st + (int64_t)h * S * S, S, j->nt, j->q + off, j->k + off, j->v + off, j->g + off, DI,
                           j->beta + h, H, j->o + off);
}

/* causal depthwise conv of one stream over nt tokens, in place, then silu; state updated. In
 * ggml's order as llama.cpp's SSM_CONV + SILU: the tap sum as an FMA chain (gcc contracts ggml's
 * `sumf += s * c`), then ggml_vec_silu_f32 on each token's row of DI. */
static void kda_conv(float *x, int nt, int64_t DI, int C, float *state, const float *taps, float *win) {
    const int cs = C - 1;
    for (int64_t ch = 0; ch < DI; ch++) {
        float *st = state + ch * cs;
        const float *w = taps + ch * C;
        for (int i = 0; i < cs; i++) win[i] = st[i];
        for (int t = 0; t < nt; t++) win[cs + t] = x[t * DI + ch];
        for (int t = 0; t < nt; t++) {
            float s = 0.0f;
            for (int i = 0; i < C; i++) s = fmaf(win[t + i], w[i], s);
            x[t * DI + ch] = s;
        }
        for (int i = 0; i < cs; i++) st[i] = win[nt + i];
    }
    for (int t = 0; t < nt; t++) df_silu_row(x + t * DI, (int)DI);
}

static void l2_heads(float *x, int nt, int H, int S, float eps) {
    for (int64_t r = 0; r < (int64_t)nt * H; r++) {
        float *p = x + r * S;
        double s = 0.0;
        for (int i = 0; i < S; i++) s += (double)(p[i] * p[i]);
        const float sc = 1.0f / fmaxf(sqrtf((float)s), eps);
        for (int i = 0; i < S; i++) p[i] *= sc;
    }
}

static int kda_attend(struct deltafin_ctx *c, int il, int nt, const float *x, float *out, k3_bufs *b) {
    const df_hparams *hp = &c->m->hp;
    const df_layer *L = &c->m->layers[il];
    const int E = hp->n_embd, H = hp->n_head, S = hp->kda_head_dim, C = hp->ssm_conv;
    const int64_t DI = (int64_t)H * S;
    if (S > 4096) return df_err(DF_ERR_UNSUPPORTED, "KDA head_dim %d > 4096", S);
    float *st = k3_layer_state(c, il);
    float *conv_st = st, *delta_st = st + k3_conv_floats(hp);
    /* 1. projections; 2. short conv + silu per stream */
    float *qkv[3] = {b->q, b->k, b->v};
    const df_tensor *w3[3] = {L->wq, L->wk, L->wv};
    for (int s = 0; s < 3; s++) {
        mmw(c, w3[s], x, E, nt, qkv[s], DI);
        kda_conv(qkv[s], nt, DI, C, conv_st + (int64_t)s * (C - 1) * DI, L->ssm_conv[s]->data, b->win);
    }
    /* 3. L2 norm of q and k per head */
    l2_heads(b->q, nt, H, S, hp->eps);
    l2_heads(b->k, nt, H, S, hp->eps);
    /* 4. decay gate */
    mmw(c, L->ssm_f_a, x, E, nt, b->fa, S);
    mmw(c, L->ssm_f_b, b->fa, S, nt, b->g, DI);
    const float *dtb = L->ssm_dt_b->data, *A = L->ssm_a->data;
    for (int t = 0; t < nt; t++) {
        float *g = b->g + t * DI;
        for (int64_t i = 0; i < DI; i++) {
            const float f = g[i] + dtb[i];
            const float a = A[i / S];
            if (hp->kda_has_lb) {
                const float u = (f * a) * -1.0f;
                g[i] = df_sigmoid(u) * hp->kda_lb;
            } else {
                const float sp = f > 20.0f ? f : logf(1.0f + expf(f));
                g[i] = sp * a;
            }
        }
    }
    /* 5. beta */
    mmw(c, L->ssm_beta, x, E, nt, b->beta, H);
    for (int64_t i = 0; i < (int64_t)nt * H; i++) b->beta[i] = df_sigmoid(b->beta[i]);
    /* 6. gated delta rule, sequential over tokens, heads in parallel */
    kda_job j = {.hp = hp, .st = delta_st, .q = b->q, .k = b->k, .v = b->v, .g = b->g, .beta = b->beta,
                 .o = b->o, .nt = nt};
    df_pool_run(c->pool, H, kda_head, &j);
    /* 7. per-head RMS norm (shared weight) and sigmoid gate */
    mmw(c, L->ssm_g, x, E, nt, b->g2, DI);
    for (int64_t r = 0; r < (int64_t)nt * H; r++)
        df_rmsnorm(b->o + r * S, L->ssm_o_norm->data, b->o + r * S, S, hp->eps);
    for (int64_t i = 0; i < (int64_t)nt * DI; i++) b->o[i] *= df_sigmoid(b->g2[i]);
    /* 8. output projection */
    mmw(c, L->wo, b->o, DI, nt, out, E);
    return DF_OK;
}

/* ---- layer hooks ------------------------------------------------------------------------------ */
static int k3_layer_attn(struct deltafin_ctx *c, int il, int nt) {
    const df_hparams *hp = &c->m->hp;
    const df_layer *L = &c->m->layers[il];
    const int E = hp->n_embd, B = hp->attn_res_block, nck = k3_n_ckpt(hp);
    k3_bufs b;
    k3_bufs_get(c, &b);
    const int M = B > 0 ? (il + B - 1) / B : 0; /* checkpoints banked before layer il */
    const bool banked = B > 0 && il % B == 0;
    const float *ain = c->h;
    if (B > 0) {
        k3_mix_rows(c, &b, L->attn_res_score, M, nt, b.mix);
        ain = b.mix;
        if (banked)
            for (int t = 0; t < nt; t++)
                memcpy(b.stack + ((int64_t)t * nck + M) * E, c->h + (int64_t)t * E, sizeof(float) * (size_t)E);
    }
    for (int t = 0; t < nt; t++)
        df_rmsnorm(ain + (int64_t)t * E, L->attn_norm->data, c->x + (int64_t)t * E, E, hp->eps);
    int rc = hp->layer_recr[il] ? kda_attend(c, il, nt, c->x, b.a, &b) : df_mla_attend(c, il, nt, c->x, b.a);
    if (rc < 0) return rc;
    if (banked) memcpy(c->h, b.a, sizeof(float) * (size_t)nt * (size_t)E);
    else for (int64_t i = 0; i < (int64_t)nt * E; i++) c->h[i] += b.a[i];
    return DF_OK;
}

static void k3_situ_ffn(struct deltafin_ctx *c, const df_tensor *wg, const df_tensor *wu, const df_tensor *wd,
                        const float *x, int nt, float *out) {
    const df_hparams *hp = &c->m->hp;
    const int E = hp->n_embd;
    const int64_t ff = wg->ne[1];
    if (wg->type == wu->type) {
        df_quantize_act(wg->type, x, E, E, nt, c->act);
        df_matmul_q(c->pool, wg->data, wg->type, E, ff, c->act, nt, c->fa, ff);
        df_matmul_q(c->pool, wu->data, wu->type, E, ff, c->act, nt, c->fb, ff);
    } else {
        mmw(c, wg, x, E, nt, c->fa, ff);
        mmw(c, wu, x, E, nt, c->fb, ff);
    }
    df_ffn_act_rows(hp, c->fa, c->fb, nt, ff);
    mmw(c, wd, c->fa, ff, nt, out, E);
}

static int k3_layer_ffn(struct deltafin_ctx *c, int il, int nt) {
    const df_hparams *hp = &c->m->hp;
    const df_layer *L = &c->m->layers[il];
    const int E = hp->n_embd, B = hp->attn_res_block;
    k3_bufs b;
    k3_bufs_get(c, &b);
    const float *fin = c->h;
    if (B > 0) {
        k3_mix_rows(c, &b, L->ffn_res_score, il / B + 1, nt, b.mix);
        fin = b.mix;
    }
    float *x = c->x;
    for (int t = 0; t < nt; t++) df_rmsnorm(fin + (int64_t)t * E, L->ffn_norm->data, x + (int64_t)t * E, E, hp->eps);
    if (!L->is_moe) {
        k3_situ_ffn(c, L->ffn_gate, L->ffn_up, L->ffn_down, x, nt, b.a);
    } else {
        const int Lt = hp->n_latent > 0 ? hp->n_latent : E;
        const float *z = x;
        if (L->routed_down) { mmw(c, L->routed_down, x, E, nt, b.z, Lt); z = b.z; }
        int rc = df_moe_routed(c, il, x, z, nt, b.r);
        if (rc < 0) return rc;
        if (L->routed_norm)
            for (int t = 0; t < nt; t++)
                df_rmsnorm(b.r + (int64_t)t * Lt, L->routed_norm->data, b.r + (int64_t)t * Lt, Lt, hp->eps);
        if (L->routed_up) mmw(c, L->routed_up, b.r, Lt, nt, b.a, E);
        else memcpy(b.a, b.r, sizeof(float) * (size_t)nt * (size_t)E); /* Lt == E */
        if (L->gate_shexp) {
            k3_situ_ffn(c, L->gate_shexp, L->up_shexp, L->down_shexp, x, nt, b.mix);
            for (int64_t i = 0; i < (int64_t)nt * E; i++) b.a[i] += b.mix[i];
        }
    }
    for (int64_t i = 0; i < (int64_t)nt * E; i++) c->h[i] += b.a[i];
    return DF_OK;
}

static void k3_rows_select(struct deltafin_ctx *c, int lo, int n) {
    const df_hparams *hp = &c->m->hp;
    const int64_t row = (int64_t)k3_n_ckpt(hp) * hp->n_embd;
    if (row == 0 || lo == 0) return;
    k3_bufs b;
    k3_bufs_get(c, &b);
    memmove(b.stack, b.stack + (int64_t)lo * row, sizeof(float) * (size_t)(row * n));
}

static int k3_pre_output(struct deltafin_ctx *c, int n) {
    const df_hparams *hp = &c->m->hp;
    if (hp->attn_res_block <= 0) return DF_OK;
    k3_bufs b;
    k3_bufs_get(c, &b);
    k3_mix_rows(c, &b, c->m->output_res_score, k3_n_ckpt(hp), n, b.mix);
    memcpy(c->h, b.mix, sizeof(float) * (size_t)n * (size_t)hp->n_embd);
    return DF_OK;
}

const df_arch df_arch_kimi_k3 = {
    .name = "kimi-k3",
    .load_hparams = k3_hparams,
    .bind = k3_bind,
    .kv_row = k3_kv_row,
    .layer_attn = k3_layer_attn,
    .layer_ffn = k3_layer_ffn,
    .arch_scratch = k3_scratch_bytes,
    .state_bytes = k3_state_bytes,
    .rows_select = k3_rows_select,
    .pre_output = k3_pre_output,
    .head_kv_per_layer = true,
};
