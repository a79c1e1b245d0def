/* qwen3next.c — the attention blocks of Qwen3-Next (`qwen3next`) and Qwen3.5 MoE (`qwen35moe`;
 * hyperparameters and tensors in src/model/arch_qwen3next.c, arch_qwen35moe.c): Gated DeltaNet
 * layers and gated full-attention layers. The FFN
 * (softmax top-k MoE + sigmoid-gated shared expert after post_attention_norm) is the generic
 * df_layer_ffn.
 * Numerics follow llama.cpp's CPU graph op by op: the conv as SSM_CONV + SILU, L2 norm of q and
 * k per head, beta = sigmoid(b), g = softplus(a + dt_bias)·A, then the fused gated-delta-net
 * op's sequential per-token recurrence (one scalar decay per head; the kernel table's KDA head
 * with that decay on every key channel: the same products), RMS norm of each head's output
 * times silu(z), ssm_out. q and k heads are repeated to the value heads (v head h reads k head
 * h / (Hv/Hk), llama.cpp's repeat-interleave).
 * State: per sequence in its ctx's rs, per DeltaNet layer the conv state (channel-major, C-1
 * taps), then the delta state (Hv heads of S x S, row = value). Full-attention layers keep the KV
 * cache rows of session.c. A pass may carry several sequences (c->seg): projections run on all
 * rows (df_fw_mm: each sequence's rows as its own pass), the conv, the recurrence and attention
 * sequence by sequence on each one's own state and cache.
 * The last layer's FFN runs on every row of the pass (select_late): llama.cpp's graph keeps the
 * output rows only after output_norm, so its F32 router / shared-expert matmuls of a prompt
 * are batch products (tinyBLAS), not one-row ones.
 * Threading: on the ctx thread; matmuls and the per-head recurrence fan out over c->pool. */
#include "model/model.h"
#include "model/qwen3next.h"
#include "forward/session.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include <math.h>

static float *qn_layer_state(struct deltafin_ctx *c, int il) {
    const df_hparams *hp = &c->m->hp;
    uint64_t off = 0;
    for (int l = 0; l < il; l++)
        if (hp->layer_recr[l]) off += df_qn_conv_floats(hp) + df_qn_delta_floats(hp);
    return (float *)c->rs + off;
}

typedef struct {
    float *mix;            /* [nb][max(qkvz, 2·H·dk)] projection output */
    float *qkv;            /* [nb][conv_dim] q|k|v before / after the conv */
    float *z;              /* [nb][Hv·S] output gate */
    float *ba;             /* [nb][2·Hv] */
    float *q, *k, *g, *v;  /* [nb][Hv·S] per value head */
    float *o;              /* [nb][Hv·S] */
    float *beta;           /* [nb][Hv] */
    float *win;            /* [nb + C] conv window */
} qn_bufs;

static uint64_t al64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

static uint64_t qn_carve(const df_model *m, int nb, char *base, qn_bufs *b) {
    const df_hparams *hp = &m->hp;
    const uint64_t S = (uint64_t)hp->ssm_d_state, Hk = (uint64_t)hp->ssm_n_group, Hv = (uint64_t)hp->ssm_dt_rank;
    const uint64_t n = (uint64_t)nb, VD = S * Hv, CD = 2 * S * Hk + VD;
    uint64_t wmix = 2 * CD > 2 * VD + 2 * S * Hk ? 2 * CD : 2 * VD + 2 * S * Hk;
    const uint64_t qg = 2ull * (uint64_t)hp->n_head * (uint64_t)hp->n_embd_head_k;
    if (qg > wmix) wmix = qg;
    struct { float **p; uint64_t n; } parts[] = {
        {&b->mix, n * wmix}, {&b->qkv, n * CD}, {&b->z, n * VD}, {&b->ba, n * 2 * Hv},
        {&b->q, n * VD}, {&b->k, n * VD}, {&b->g, n * VD}, {&b->v, n * VD}, {&b->o, n * VD},
        {&b->beta, n * Hv}, {&b->win, n + (uint64_t)hp->ssm_conv},
    };
    uint64_t off = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (base) *parts[i].p = (float *)(base + off);
        off += al64(parts[i].n * sizeof(float));
    }
    return off;
}

static uint64_t qn_scratch_bytes(const df_model *m, int n_batch) {
    qn_bufs b;
    return qn_carve(m, n_batch, NULL, &b);
}

static void qn_bufs_get(struct deltafin_ctx *c, qn_bufs *b) {
    uint64_t n = qn_carve(c->m, c->n_batch, c->arch_scr, b);
    DF_ASSERT(n <= c->arch_scr_bytes);
}

static void mmw(struct deltafin_ctx *c, const df_tensor *w, const float *X, int64_t ldx, int nt, float *Y, int64_t ldy) {
    df_fw_mm(c, w, X, ldx, nt, Y, ldy);
}

/* ---- Gated DeltaNet ------------------------------------------------------------------------- */
typedef struct {
    float *st;
    const float *q, *k, *v, *g, *beta;
    float *o;
    int S, H, nt;
} gdn_job;

static void gdn_head(void *ctx, int h, int thread) {
    (void)thread;
    const gdn_job *j = ctx;
    const int64_t ld = (int64_t)j->H * j->S, off = (int64_t)h * j->S;
    df_kernels()->kda_head(j->st + (int64_t)h * j->S * j->S, j->S, j->nt, j->q + off, j->k + off, j->v + off,
                           j->g + off, ld, j->beta + h, j->H, j->o + off);
}

/* ggml_l2_norm: x / max(sqrt(Σx²), eps), the sum in double */
static void l2_row(float *p, int S, float eps) {
    double s = 0.0;
    for (int i = 0; i < S; i++) s += (double)(p[i] * p[i]);
    const float sc = 1.0f / fmaxf(sqrtf((float)s), eps);
    for (int i = 0; i < S; i++) p[i] *= sc;
}

static int gdn_attend(struct deltafin_ctx *c, int il, int nt, const float *x, float *out, qn_bufs *b) {
    const df_hparams *hp = &c->m->hp;
    const df_layer *L = &c->m->layers[il];
    const int E = hp->n_embd, S = hp->ssm_d_state, Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank, C = hp->ssm_conv;
    const int r = Hv / Hk;
    const int64_t VD = (int64_t)S * Hv, KD = (int64_t)S * Hk, CD = 2 * KD + VD;
    /* 1. projections: q|k|v and z */
    if (L->wqkv) {
        mmw(c, L->wqkv, x, E, nt, b->qkv, CD);
        mmw(c, L->attn_gate, x, E, nt, b->z, VD);
    } else {
        /* ssm_in rows per k head: [q (S) ; k (S) ; v (r·S) ; z (r·S)] */
        const int64_t gw = 2 * (int64_t)S + 2 * (int64_t)r * S, W = gw * Hk;
        mmw(c, L->ssm_in, x, E, nt, b->mix, W);
        for (int t = 0; t < nt; t++) {
            const float *src = b->mix + t * W;
            float *dq = b->qkv + t * CD, *dz = b->z + t * VD;
            for (int g = 0; g < Hk; g++) {
                const float *p = src + g * gw;
                memcpy(dq + (int64_t)g * S, p, sizeof(float) * (size_t)S);
                memcpy(dq + KD + (int64_t)g * S, p + S, sizeof(float) * (size_t)S);
                memcpy(dq + 2 * KD + (int64_t)g * r * S, p + 2 * S, sizeof(float) * (size_t)(r * S));
                memcpy(dz + (int64_t)g * r * S, p + 2 * S + r * S, sizeof(float) * (size_t)(r * S));
            }
        }
    }
    /* 2. beta and decay: qwen3next's ssm_ba rows per k head [b (r) ; a (r)], or qwen35moe's
     * ssm_beta and ssm_alpha (one row per v head; stored here as [b (Hv) ; a (Hv)]) */
    const bool split = L->ssm_alpha != NULL;
    if (split) {
        mmw(c, L->ssm_beta, x, E, nt, b->ba, 2 * Hv);
        mmw(c, L->ssm_alpha, x, E, nt, b->ba + Hv, 2 * Hv);
    } else {
        mmw(c, L->ssm_ba, x, E, nt, b->ba, 2 * Hv);
    }
    const float *dtb = L->ssm_dt_b->data, *A = L->ssm_a->data;
    for (int t = 0; t < nt; t++) {
        const float *ba = b->ba + (int64_t)t * 2 * Hv;
        for (int h = 0; h < Hv; h++) {
            const int g = h / r, i = h % r;
            const float bb = split ? ba[h] : ba[g * 2 * r + i], aa = split ? ba[Hv + h] : ba[g * 2 * r + r + i];
            b->beta[(int64_t)t * Hv + h] = df_sigmoid(bb);
            const float f = aa + dtb[h];
            const float sp = f > 20.0f ? f : logf(1.0f + expf(f));
            const float gv = sp * A[h];
            float *gr = b->g + (int64_t)t * VD + (int64_t)h * S;
            for (int s = 0; s < S; s++) gr[s] = gv;
        }
    }
    /* 3. short conv + silu over q|k|v, each sequence from its own state */
    for (int q = 0; q < c->n_seg; q++) {
        const df_seg *sg = &c->seg[q];
        df_ssm_conv_silu(b->qkv + (int64_t)sg->row0 * CD, sg->n, CD, C, qn_layer_state(sg->sc, il), L->ssm_conv[0]->data,
                 b->win);
    }
    /* 4. L2 norm of q and k per k head, repeated to the value heads (qwen3next: v head h reads
     * k head h / r; qwen35moe: h % Hk); v as is */
    for (int t = 0; t < nt; t++) {
        float *row = b->qkv + t * CD;
        for (int g = 0; g < 2 * Hk; g++) l2_row(row + (int64_t)g * S, S, hp->eps);
        for (int h = 0; h < Hv; h++) {
            const int64_t kh = split ? h % Hk : h / r;
            memcpy(b->q + t * VD + (int64_t)h * S, row + kh * S, sizeof(float) * (size_t)S);
            memcpy(b->k + t * VD + (int64_t)h * S, row + KD + kh * S, sizeof(float) * (size_t)S);
        }
        memcpy(b->v + t * VD, row + 2 * KD, sizeof(float) * (size_t)VD);
    }
    /* 5. gated delta rule, sequential over a sequence's tokens, heads in parallel */
    for (int q = 0; q < c->n_seg; q++) {
        const df_seg *sg = &c->seg[q];
        const int64_t r0 = sg->row0;
        gdn_job j = {.st = qn_layer_state(sg->sc, il) + df_qn_conv_floats(hp), .q = b->q + r0 * VD, .k = b->k + r0 * VD,
                     .v = b->v + r0 * VD, .g = b->g + r0 * VD, .beta = b->beta + r0 * Hv, .o = b->o + r0 * VD,
                     .S = S, .H = Hv, .nt = sg->n};
        df_pool_run(c->pool, Hv, gdn_head, &j);
    }
    /* 6. gated RMS norm: rms(o_h)·w · silu(z) */
    for (int t = 0; t < nt; t++) df_silu_row(b->z + t * VD, (int)VD);
    for (int64_t rr = 0; rr < (int64_t)nt * Hv; rr++)
        df_rmsnorm(b->o + rr * S, L->ssm_o_norm->data, b->o + rr * S, S, hp->eps);
    for (int64_t i = 0; i < (int64_t)nt * VD; i++) b->o[i] *= b->z[i];
    /* 7. output projection */
    mmw(c, L->wo, b->o, VD, nt, out, E);
    return DF_OK;
}

/* ---- gated full attention ------------------------------------------------------------------- */
static int qn_full_attend(struct deltafin_ctx *c, int il, int nt, const float *x, float *out, qn_bufs *b) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int E = hp->n_embd, dk = hp->n_embd_head_k, dv = hp->n_embd_head_v, H = hp->n_head, Hkv = hp->n_head_kv;
    const int64_t nq = (int64_t)H * dk, nk = (int64_t)Hkv * dk, nv = (int64_t)Hkv * dv;
    float *qg = b->mix; /* [nt][H][q (dk) ; gate (dk)] */
    mmw(c, L->wq, x, E, nt, qg, 2 * nq);
    mmw(c, L->wk, x, E, nt, c->k, nk);
    mmw(c, L->wv, x, E, nt, c->v, nv);
    for (int t = 0; t < nt; t++) {
        float *qt = c->q + t * nq, *kt = c->k + t * nk;
        for (int h = 0; h < H; h++)
            df_rmsnorm(qg + t * 2 * nq + (int64_t)h * 2 * dk, L->q_norm->data, qt + (int64_t)h * dk, dk, hp->eps);
        for (int h = 0; h < Hkv; h++) df_rmsnorm(kt + (int64_t)h * dk, L->k_norm->data, kt + (int64_t)h * dk, dk, hp->eps);
        if (hp->n_rot > 0) {
            const float *rc = c->rc + (int64_t)t * hp->n_rot;
            df_rope_apply(&m->rope, rc, qt, H, dk);
            df_rope_apply(&m->rope, rc, kt, Hkv, dk);
        }
    }
    /* each sequence stores its rows in its own cache and attends it */
    for (int s = 0; s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        struct deltafin_ctx *sc = sg->sc;
        for (int i = 0; i < sg->n; i++) {
            const int64_t t = sg->row0 + i;
            float *qt = c->q + t * nq, *kt = c->k + t * nk;
            if (sc->rot_k) { df_fwht(qt, nq, sc->rot_k); df_fwht(kt, nk, sc->rot_k); } /* df_model_kv_rot */
            if (sc->rot_v) df_fwht(c->v + t * nv, nv, sc->rot_v);
            df_kv_put(sc->type_k, kt, df_ctx_k(sc, il, sg->pos0 + i), nk);
            df_kv_put(sc->type_v, c->v + t * nv, df_ctx_v(sc, il, sg->pos0 + i), nv);
        }
        float *o = c->o + (int64_t)sg->row0 * H * dv;
        df_attn_args a = {
            .n_tok = sg->n, .pos0 = sg->pos0, .n_head = H, .n_head_kv = Hkv, .dk = dk, .dv = dv,
            .scale = hp->kq_scale, .q = c->q + (int64_t)sg->row0 * nq, .ldq = nq, .kc = sc->k_l[il], .vc = sc->v_l[il],
            .ldk = nk, .ldv = nv, .type_k = sc->type_k, .type_v = sc->type_v,
            .out = o, .ldo = (int64_t)H * dv, .f32_acc = sg->n >= 64 && dv % df_kernels()->f32_epr == 0,
            .sinks = NULL, .swa = 0, .scratch = c->attn_scr, .scratch_stride = c->attn_stride,
        };
        df_attn_gqa(c->pool, &a);
        if (sc->rot_v) df_fwht(o, (int64_t)sg->n * H * dv, sc->rot_v); /* before the gate, as llama.cpp */
    }
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < H; h++) {
            const float *gt = qg + t * 2 * nq + (int64_t)h * 2 * dk + dk;
            float *o = c->o + t * (int64_t)H * dv + (int64_t)h * dv;
            for (int d = 0; d < dv; d++) o[d] *= df_sigmoid(gt[d]);
        }
    mmw(c, L->wo, c->o, (int64_t)H * dv, nt, out, E);
    return DF_OK;
}

static int qn_layer_attn(struct deltafin_ctx *c, int il, int nt) {
    const df_hparams *hp = &c->m->hp;
    const df_layer *L = &c->m->layers[il];
    const int E = hp->n_embd;
    qn_bufs b;
    qn_bufs_get(c, &b);
    for (int t = 0; t < nt; t++)
        df_rmsnorm(c->h + (int64_t)t * E, L->attn_norm->data, c->x + (int64_t)t * E, E, hp->eps);
    int rc = hp->layer_recr[il] ? gdn_attend(c, il, nt, c->x, c->y, &b) : qn_full_attend(c, il, nt, c->x, c->y, &b);
    if (rc < 0) return rc;
    for (int64_t i = 0; i < (int64_t)nt * E; i++) c->h[i] += c->y[i];
    return DF_OK;
}

const df_arch_fwd df_fwd_qwen3next = {
    .name = "qwen3next",
    .layer_attn = qn_layer_attn,
    .arch_scratch = qn_scratch_bytes,
    .select_late = true,
};

/* qwen35moe: the same blocks (ssm_beta / ssm_alpha and the k-head broadcast keyed on the
 * layer's ssm_alpha; its M-RoPE is NEOX for text, arch_qwen35moe.c) */
const df_arch_fwd df_fwd_qwen35moe = {
    .name = "qwen35moe",
    .layer_attn = qn_layer_attn,
    .arch_scratch = qn_scratch_bytes,
    .select_late = true,
};
