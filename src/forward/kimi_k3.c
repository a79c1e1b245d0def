/* kimi_k3.c — the forward pass of Kimi K3 (`kimi-k3`, docs/kimi-k3.md; its hyperparameters and
 * tensors are src/model/arch_kimi_k3.c): hybrid KDA (Kimi Delta Attention, a gated
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
#include "model/kimi_k3.h"
#include "forward/attn_mla.h"
#include "forward/session.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include <math.h>

#define TRYK(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

/* layer il's state in sequence sc */
static float *k3_layer_state(struct deltafin_ctx *sc, int il) {
    const df_hparams *hp = &sc->m->hp;
    uint64_t off = 0;
    for (int l = 0; l < il; l++)
        if (hp->layer_recr[l]) off += df_k3_conv_floats(hp) + df_k3_delta_floats(hp);
    return (float *)sc->rs + off;
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
    df_fw_mm(c, w, X, ldx, nt, Y, ldy);
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
 * ggml_vec_dot_f32's order of the table's ISA) */
static void kda_head(void *ctx, int h, int thread) {
    (void)thread;
    const kda_job *j = ctx;
    const int S = j->hp->kda_head_dim, H = j->hp->n_head;
    const int64_t DI = (int64_t)H * S, off = (int64_t)h * S;
    df_kernels()->kda_head(j->st + (int64_t)h * S * S, S, j->nt, j->q + off, j->k + off, j->v + off, j->g + off, DI,
                           j->beta + h, H, j->o + off);
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
    /* 1. projections; 2. short conv + silu per stream, each sequence from its own state */
    float *qkv[3] = {b->q, b->k, b->v};
    const df_tensor *w3[3] = {L->wq, L->wk, L->wv};
    for (int s = 0; s < 3; s++) {
        mmw(c, w3[s], x, E, nt, qkv[s], DI);
        for (int q = 0; q < c->n_seg; q++) {
            const df_seg *sg = &c->seg[q];
            float *conv_st = k3_layer_state(sg->sc, il);
            df_ssm_conv_silu(qkv[s] + (int64_t)sg->row0 * DI, sg->n, DI, C, conv_st + (int64_t)s * (C - 1) * DI,
                             L->ssm_conv[s]->data, b->win);
        }
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
    /* 6. gated delta rule, sequential over a sequence's tokens, heads in parallel */
    for (int q = 0; q < c->n_seg; q++) {
        const df_seg *sg = &c->seg[q];
        const int64_t r0 = (int64_t)sg->row0;
        kda_job j = {.hp = hp, .st = k3_layer_state(sg->sc, il) + df_k3_conv_floats(hp), .q = b->q + r0 * DI,
                     .k = b->k + r0 * DI, .v = b->v + r0 * DI, .g = b->g + r0 * DI, .beta = b->beta + r0 * H,
                     .o = b->o + r0 * DI, .nt = sg->n};
        df_pool_run(c->pool, H, kda_head, &j);
    }
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
        df_fw_mm_q(c, wg, x, E, nt, c->fa, ff);
        df_fw_mm_q(c, wu, x, E, nt, c->fb, ff);
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

static void k3_rows_select(struct deltafin_ctx *c, const int32_t *rows, int n) {
    const df_hparams *hp = &c->m->hp;
    const int64_t row = (int64_t)k3_n_ckpt(hp) * hp->n_embd;
    if (row == 0) return;
    k3_bufs b;
    k3_bufs_get(c, &b);
    for (int i = 0; i < n; i++) /* rows ascending, rows[i] >= i: in place */
        if (rows[i] != i) memmove(b.stack + i * row, b.stack + (int64_t)rows[i] * row, sizeof(float) * (size_t)row);
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

const df_arch_fwd df_fwd_kimi_k3 = {
    .name = "kimi-k3",
    .layer_attn = k3_layer_attn,
    .layer_ffn = k3_layer_ffn,
    .arch_scratch = k3_scratch_bytes,
    .rows_select = k3_rows_select,
    .pre_output = k3_pre_output,
};
