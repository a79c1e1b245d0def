/* attn_mla.c — multi-head latent attention (see attn_mla.h), following llama.cpp's deepseek2
 * graph op by op so the numerics match: q (LoRA or Lite), compressed kv + shared rope key,
 * RoPE NORM on the rope parts, RMSNorm of the latent, then either
 *   absorbed: Q_h = [W_UK,h^T q_nope,h ; q_pe,h], K = V-view = [ckv ; k_pe] (F16 cache),
 *             o_h = softmax(Q_h K^T·scale) ckv, out_h = W_UV,h o_h;
 *   legacy:   kv = W_kvb ckv, K_h = [k_nope,h ; k_pe], V_h, ordinary MHA.
 * The attention kernel is attn_gqa.c's (flash-attention numerics). */
#include "forward/attn_mla.h"
#include "forward/session.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *qa, *q, *kv, *qf, *o, *ov, *kvb, *gate, *iq, *ik, *iw;
    int32_t *sel; /* DSA: per row, the number of keys it attends, then their positions */
} mla_bufs;

#define MLA_NBUF 12
#define MLA_MAX_HEAD 4096 /* legacy deepseek2 K head: n_embd_head_k_mla <= 4096 (arch_deepseek2.c) */

/* Float counts per token of each buffer. */
static void mla_sizes(const df_model *m, uint64_t sz[MLA_NBUF]) {
    const df_hparams *hp = &m->hp;
    const uint64_t nh = (uint64_t)hp->n_head, dr = (uint64_t)hp->n_rot, rkv = (uint64_t)hp->n_lora_kv;
    const uint64_t dq = (uint64_t)hp->n_embd_head_k_mla, dv = (uint64_t)hp->n_embd_head_v_mla;
    sz[0] = (uint64_t)(hp->n_lora_q > 0 ? hp->n_lora_q : 1); /* qa */
    sz[1] = nh * dq;                                          /* q */
    sz[2] = rkv + dr;                                         /* kv */
    sz[3] = hp->is_mla ? nh * (rkv + dr) : 1;                 /* qf: absorbed queries */
    sz[4] = nh * (hp->is_mla ? rkv : dv);                     /* o: attention output */
    sz[5] = nh * dv;                                          /* ov: after W_UV */
    sz[6] = hp->is_mla ? 1 : nh * (dq - dr + dv);             /* kvb: legacy decompressed kv */
    sz[7] = 1;                                                /* gate: kimi-k3 output gate */
    const uint64_t ih = (uint64_t)hp->indexer_n_head, id = (uint64_t)hp->indexer_head_size;
    sz[8] = hp->indexer_top_k > 0 ? ih * id : 1;              /* iq: DSA indexer queries */
    sz[9] = hp->indexer_top_k > 0 ? id : 1;                   /* ik: indexer key */
    sz[10] = hp->indexer_top_k > 0 ? ih : 1;                  /* iw: indexer head weights */
    sz[11] = (uint64_t)hp->indexer_top_k + 1;                 /* sel: selected keys (int32) */
    for (int l = 0; l < hp->n_layer; l++)
        if (m->layers[l].attn_gate) sz[7] = nh * dv;
}

static uint64_t al64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

uint64_t df_mla_scratch_bytes(const df_model *m, int n_batch) {
    uint64_t sz[MLA_NBUF], tot = 0;
    mla_sizes(m, sz);
    for (int i = 0; i < MLA_NBUF; i++) tot += al64(sz[i] * (uint64_t)n_batch * 4);
    return tot;
}

static void carve(struct deltafin_ctx *c, mla_bufs *b) {
    uint64_t sz[MLA_NBUF];
    mla_sizes(c->m, sz);
    char *p = c->arch_scr;
    float **dst[MLA_NBUF - 1] = {&b->qa, &b->q, &b->kv, &b->qf, &b->o, &b->ov, &b->kvb, &b->gate,
                                 &b->iq, &b->ik, &b->iw};
    for (int i = 0; i < MLA_NBUF - 1; i++) {
        *dst[i] = (float *)p;
        p += al64(sz[i] * (uint64_t)c->n_batch * 4);
    }
    b->sel = (int32_t *)p; /* the last buffer holds int32 */
    p += al64(sz[MLA_NBUF - 1] * (uint64_t)c->n_batch * 4);
    DF_ASSERT((uint64_t)(p - c->arch_scr) <= c->arch_scr_bytes);
}

static void mmw(struct deltafin_ctx *c, const df_tensor *w, const float *X, int64_t ldx, int nt, float *Y,
                int64_t ldy) {
    df_fw_mm(c, w, X, ldx, nt, Y, ldy);
}

/* slice h of a 3-D weight {ne0, ne1, nh}: rows ne1 of ne0 elements */
static const void *slice(const df_tensor *w, int h) {
    return (const char *)w->data + (uint64_t)h * df_type_row_bytes(w->type, w->ne[0]) * (uint64_t)w->ne[1];
}

/* ---- DeepSeek Sparse Attention (deepseek32, glm-dsa): the lightning indexer ----------------
 * As llama.cpp's deepseek32 / glm-dsa graphs: per token, indexer q = attn_q_b·qr (qr: the normed
 * q LoRA latent) as IH heads of ID, k = LayerNorm(attn_k·x) with weight and bias (epsilon
 * hp.indexer_norm_eps), RoPE on the first n_rot dims of each (NEOX for deepseek32, NORM for
 * glm-dsa: hp.indexer_rope_mode), both times the orthonormal Sylvester Hadamard matrix of order
 * ID; head weights w = proj·x / sqrt(ID·IH). The key goes to the cache behind the MLA row (F16
 * rounding); query t scores each key p <= pos as sum_h relu(q_h·k_p)·w_h (as ggml's fused
 * lightning indexer: the cached key back to F32, the F32 vec_dot per head, the weighted sum in
 * float) and attends only the top_k best keys (all of them while it has <= top_k; among equal
 * scores the ones ggml_top_k's std::partial_sort keeps, df_top_k_select). A glm-dsa
 * shared layer has no indexer and attends the keys of the previous full layer (b->sel). */
static int dsa_index(struct deltafin_ctx *c, const df_layer *L, int nt, const float *x, mla_bufs *b) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const int D = hp->n_embd, rq = hp->n_lora_q, ih = hp->indexer_n_head, id = hp->indexer_head_size;
    const int64_t niq = (int64_t)ih * id;
    df_rope ir = m->rope;
    ir.mode = hp->indexer_rope_mode;
    mmw(c, L->idx_q_b, b->qa, rq, nt, b->iq, niq);
    mmw(c, L->idx_k, x, D, nt, b->ik, id);
    mmw(c, L->idx_proj, x, D, nt, b->iw, ih);
    const float wscale = 1.0f / sqrtf((float)(id * ih));
    const float *kw = L->idx_k_norm->data, *kb = L->idx_k_norm_b->data;
    for (int t = 0; t < nt; t++) {
        float *k = b->ik + (int64_t)t * id;
        /* ggml_norm: mean and variance in double, then * weight + bias */
        double sum = 0.0;
        for (int i = 0; i < id; i++) sum += (double)k[i];
        const float mean = (float)(sum / id);
        double sum2 = 0.0;
        for (int i = 0; i < id; i++) { k[i] -= mean; sum2 += (double)(k[i] * k[i]); }
        const float variance = (float)(sum2 / id);
        const float scale = 1.0f / sqrtf(variance + hp->indexer_norm_eps);
        for (int i = 0; i < id; i++) k[i] = k[i] * scale * kw[i] + kb[i];
        const float *rc = c->rc + (int64_t)t * hp->n_rot;
        df_rope_apply(&ir, rc, b->iq + t * niq, ih, id);
        df_rope_apply(&ir, rc, k, 1, id);
        float *w = b->iw + (int64_t)t * ih;
        for (int h = 0; h < ih; h++) w[h] *= wscale;
    }
    /* the rotation as llama.cpp does it: a MUL_MAT by the F32 matrix, per token (its q heads
     * the columns of one product; the key alone) */
    float *hm = malloc(sizeof(float) * ((size_t)id * id + (size_t)niq));
    if (!hm) return df_err(DF_ERR_NOMEM, "DSA Hadamard matrix (%d)", id);
    float *tmp = hm + (size_t)id * id;
    hm[0] = 1.0f / sqrtf((float)id);
    for (int s = 1; s < id; s *= 2)
        for (int i = 0; i < s; i++)
            for (int j = 0; j < s; j++) {
                const float v = hm[i * id + j];
                hm[(i + s) * id + j] = v;
                hm[i * id + j + s] = v;
                hm[(i + s) * id + j + s] = -v;
            }
    for (int t = 0; t < nt; t++) {
        df_matmul_g(c->pool, hm, DF_TYPE_F32, id, id, b->iq + t * niq, id, ih, tmp, id, c->act, NULL);
        memcpy(b->iq + t * niq, tmp, sizeof(float) * (size_t)niq);
        df_matmul_g(c->pool, hm, DF_TYPE_F32, id, id, b->ik + (int64_t)t * id, id, 1, tmp, id, c->act, NULL);
        memcpy(b->ik + (int64_t)t * id, tmp, sizeof(float) * (size_t)id);
    }
    free(hm);
    return DF_OK;
}

static int cmp_i32(const void *pa, const void *pb) {
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* The keys each query row of segment sg attends (dsa_index's comment) into b->sel: per row
 * (topk + 1 ints) the count, then the positions in ascending order. */
static int dsa_select(struct deltafin_ctx *c, const df_seg *sg, int il, const mla_bufs *b, int64_t off_b) {
    const df_hparams *hp = &c->m->hp;
    const int ih = hp->indexer_n_head, id = hp->indexer_head_size, topk = hp->indexer_top_k;
    const int64_t niq = (int64_t)ih * id, ldm = (int64_t)sg->pos0 + sg->n;
    const int tk = sg->sc->type_k;
    const df_kernel_table *kt = df_kernels();
    float *sc = malloc(sizeof(float) * ((size_t)ldm + (size_t)topk)), *srt = sc ? sc + ldm : NULL;
    float *kf = malloc(sizeof(float) * (size_t)id);
    if (!sc || !kf) { free(sc); free(kf); return df_err(DF_ERR_NOMEM, "DSA indexer scratch"); }
    for (int i = 0; i < sg->n; i++) {
        const int pq = sg->pos0 + i;
        int32_t *sel = b->sel + (int64_t)(sg->row0 + i) * (topk + 1), *ks = sel + 1;
        if (pq + 1 <= topk) {
            for (int p = 0; p <= pq; p++) ks[p] = p;
            sel[0] = pq + 1;
            continue;
        }
        const float *q = b->iq + (int64_t)(sg->row0 + i) * niq, *w = b->iw + (int64_t)(sg->row0 + i) * ih;
        for (int p = 0; p <= pq; p++) {
            /* ggml's fused lightning indexer: the key to F32, ggml_vec_dot_f32 per head, the
             * relu-weighted sum in float (an fma where gcc contracts it) */
            const char *kr = (const char *)df_ctx_k(sg->sc, il, p) + off_b;
            df_dequantize_row(tk, kr, kf, id);
            float s = 0.0f;
            for (int h = 0; h < ih; h++) {
                float d;
                kt->vec_dot[DF_TYPE_F32](id, &d, q + (int64_t)h * id, kf);
                const float r = d > 0.0f ? d : 0.0f;
                s = kt->attn_fma_sum ? fmaf(r, w[h], s) : s + r * w[h];
            }
            sc[p] = s;
        }
        /* ggml_top_k's choice (equal scores at the threshold: the relu makes exact zeros
         * common), then in position order */
        df_top_k_select(sc, pq + 1, topk, ks, srt);
        qsort(ks, (size_t)topk, sizeof(int32_t), cmp_i32);
        sel[0] = topk;
    }
    free(sc); free(kf);
    return DF_OK;
}

/* kmask[i*ldm + p] = 1 for the keys row i of segment sg attends (b->sel). */
static void dsa_mask(const df_hparams *hp, const df_seg *sg, const mla_bufs *b, uint8_t *kmask, int64_t ldm) {
    memset(kmask, 0, (size_t)(sg->n * ldm));
    for (int i = 0; i < sg->n; i++) {
        const int32_t *sel = b->sel + (int64_t)(sg->row0 + i) * (hp->indexer_top_k + 1);
        for (int j = 0; j < sel[0]; j++) kmask[(int64_t)i * ldm + sel[1 + j]] = 1;
    }
}

int df_layer_attn_mla(struct deltafin_ctx *c, int il, int nt) {
    const df_hparams *hp = &c->m->hp;
    const df_layer *L = &c->m->layers[il];
    const int D = hp->n_embd;
    for (int t = 0; t < nt; t++)
        df_rmsnorm(c->h + (int64_t)t * D, L->attn_norm->data, c->x + (int64_t)t * D, D, hp->eps);
    int rc = df_mla_attend(c, il, nt, c->x, c->y);
    if (rc < 0) return rc;
    for (int64_t i = 0; i < (int64_t)nt * D; i++) c->h[i] += c->y[i];
    return DF_OK;
}

int df_mla_attend(struct deltafin_ctx *c, int il, int nt, const float *x, float *out) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int D = hp->n_embd, nh = hp->n_head, dr = hp->n_rot, rkv = hp->n_lora_kv;
    const int dq = hp->n_embd_head_k_mla, dn = dq - dr, dv = hp->n_embd_head_v_mla;
    const int64_t nq = (int64_t)nh * dq, nkv = rkv + dr;
    mla_bufs b;
    carve(c, &b);
    /* queries */
    if (L->wq_a) {
        const int rq = hp->n_lora_q;
        mmw(c, L->wq_a, x, D, nt, b.qa, rq);
        for (int t = 0; t < nt; t++)
            df_rmsnorm(b.qa + (int64_t)t * rq, L->q_a_norm->data, b.qa + (int64_t)t * rq, rq, hp->eps);
        mmw(c, L->wq_b, b.qa, rq, nt, b.q, nq);
        if (L->idx_q_b) {
            int rci = dsa_index(c, L, nt, x, &b);
            if (rci < 0) return rci;
        }
    } else {
        mmw(c, L->wq, x, D, nt, b.q, nq);
    }
    /* compressed kv and the shared rope key */
    mmw(c, L->wkv_a_mqa, x, D, nt, b.kv, nkv);
    for (int t = 0; t < nt; t++) {
        if (!hp->no_rope) {
            const float *rc = c->rc + (int64_t)t * dr;
            df_rope_apply(&m->rope, rc, b.q + t * nq + dn, nh, dq);
            df_rope_apply(&m->rope, rc, b.kv + t * nkv + rkv, 1, dr);
        }
        df_rmsnorm(b.kv + t * nkv, L->kv_a_norm->data, b.kv + t * nkv, rkv, hp->eps);
    }
    df_attn_args a = {
        .n_head = nh, .scale = hp->kq_scale, .sinks = NULL, .swa = 0,
        .scratch = c->attn_scr, .scratch_stride = c->attn_stride,
    };
    if (hp->is_mla) {
        const int64_t nqf = (int64_t)nh * nkv;
        for (int h = 0; h < nh; h++) {
            /* q_nope absorbed: {dn, rkv} slice of attn_k_b times q_nope,h */
            if (c->obs.fn) df_mm_observe(&c->obs, L->wk_b, h, nh, false, b.q + (int64_t)h * dq, nq, nt);
            df_matmul_3d_g(c->pool, slice(L->wk_b, h), L->wk_b->type, dn, rkv, b.q + (int64_t)h * dq, nq, nt,
                           b.qf + (int64_t)h * nkv, nqf, c->act, &c->grp);
        }
        for (int t = 0; t < nt; t++)
            for (int h = 0; h < nh; h++)
                memcpy(b.qf + t * nqf + (int64_t)h * nkv + rkv, b.q + t * nq + (int64_t)h * dq + dn,
                       sizeof(float) * (size_t)dr);
        a.n_head_kv = 1; a.dk = (int)nkv; a.dv = rkv;
        a.ldq = nqf; a.ldo = (int64_t)nh * rkv;
        /* DSA: a full indexer layer stores its indexer key and selects keys; a shared layer
         * (glm-dsa) attends the previous full layer's selection */
        const bool dsa = hp->indexer_top_k > 0, full = L->idx_q_b != NULL;
        const int64_t krow = nkv + (full ? hp->indexer_head_size : 0);
        a.ldk = a.ldv = krow;
        for (int s = 0; s < c->n_seg; s++) { /* each sequence its own cache */
            const df_seg *sg = &c->seg[s];
            const int64_t off_b = (int64_t)df_type_row_bytes(sg->sc->type_k, nkv); /* indexer key */
            for (int i = 0; i < sg->n; i++) {
                char *kd = df_ctx_k(sg->sc, il, sg->pos0 + i);
                df_kv_put(sg->sc->type_k, b.kv + (int64_t)(sg->row0 + i) * nkv, kd, nkv);
                if (full)
                    df_kv_put(sg->sc->type_k, b.ik + (int64_t)(sg->row0 + i) * hp->indexer_head_size, kd + off_b,
                              hp->indexer_head_size);
            }
            uint8_t *kmask = NULL;
            const int64_t ldm = (int64_t)sg->pos0 + sg->n;
            if (dsa) {
                kmask = malloc((size_t)(sg->n * ldm));
                if (!kmask) return df_err(DF_ERR_NOMEM, "DSA key mask (%d x %lld)", sg->n, (long long)ldm);
                int rc = full ? dsa_select(c, sg, il, &b, off_b) : DF_OK;
                if (rc < 0) { free(kmask); return rc; }
                dsa_mask(hp, sg, &b, kmask, ldm);
            }
            a.kmask = kmask; a.ldm = ldm;
            a.n_tok = sg->n; a.pos0 = sg->pos0;
            a.kc = a.vc = sg->sc->k_l[il];
            a.type_k = a.type_v = sg->sc->type_k; /* V is a view of K (df_model_kv_check) */
            a.q = b.qf + (int64_t)sg->row0 * nqf;
            a.out = b.o + (int64_t)sg->row0 * a.ldo;
            a.f32_acc = df_use_tiled_attn(sg->n, rkv);
            df_attn_gqa(c->pool, &a);
            free(kmask);
            a.kmask = NULL;
        }
        for (int h = 0; h < nh; h++) {
            if (c->obs.fn) df_mm_observe(&c->obs, L->wv_b, h, nh, false, b.o + (int64_t)h * rkv, (int64_t)nh * rkv, nt);
            df_matmul_3d_g(c->pool, slice(L->wv_b, h), L->wv_b->type, rkv, dv, b.o + (int64_t)h * rkv,
                           (int64_t)nh * rkv, nt, b.ov + (int64_t)h * dv, (int64_t)nh * dv, c->act, &c->grp);
        }
    } else {
        const int64_t nkvb = (int64_t)nh * (dn + dv);
        mmw(c, L->wkv_b, b.kv, nkv, nt, b.kvb, nkvb);
        a.n_head_kv = nh; a.dk = dq; a.dv = dv;
        a.ldq = nq; a.ldk = nq; a.ldv = (int64_t)nh * dv; a.ldo = (int64_t)nh * dv;
        for (int s = 0; s < c->n_seg; s++) {
            const df_seg *sg = &c->seg[s];
            for (int i = 0; i < sg->n; i++) {
                const int t = sg->row0 + i;
                char *kd = df_ctx_k(sg->sc, il, sg->pos0 + i);
                char *vd = df_ctx_v(sg->sc, il, sg->pos0 + i);
                const float *kvt = b.kvb + t * nkvb, *pe = b.kv + t * nkv + rkv;
                const uint64_t kh_b = df_type_row_bytes(sg->sc->type_k, dq), vh_b = df_type_row_bytes(sg->sc->type_v, dv);
                for (int h = 0; h < nh; h++) {
                    /* K head h = [k_nope,h ; k_pe] as llama.cpp concatenates it in F32, then stored */
                    const float *src = kvt + (int64_t)h * (dn + dv);
                    float kh[MLA_MAX_HEAD], vh[MLA_MAX_HEAD];
                    memcpy(kh, src, sizeof(float) * (size_t)dn);
                    memcpy(kh + dn, pe, sizeof(float) * (size_t)dr);
                    memcpy(vh, src + dn, sizeof(float) * (size_t)dv);
                    /* llama.cpp's rotation before a quantized cache (df_model_kv_rot) */
                    if (sg->sc->rot_k) df_fwht(kh, dq, sg->sc->rot_k);
                    if (sg->sc->rot_v) df_fwht(vh, dv, sg->sc->rot_v);
                    df_kv_put(sg->sc->type_k, kh, kd + (uint64_t)h * kh_b, dq);
                    df_kv_put(sg->sc->type_v, vh, vd + (uint64_t)h * vh_b, dv);
                }
            }
            a.n_tok = sg->n; a.pos0 = sg->pos0;
            a.kc = sg->sc->k_l[il]; a.vc = sg->sc->v_l[il];
            a.type_k = sg->sc->type_k; a.type_v = sg->sc->type_v;
            a.q = b.q + (int64_t)sg->row0 * nq;
            a.out = b.ov + (int64_t)sg->row0 * a.ldo;
            a.f32_acc = df_use_tiled_attn(sg->n, dv);
            if (sg->sc->rot_k) df_fwht(b.q + (int64_t)sg->row0 * nq, (int64_t)sg->n * nq, sg->sc->rot_k);
            df_attn_gqa(c->pool, &a);
            if (sg->sc->rot_v) df_fwht(a.out, (int64_t)sg->n * a.ldo, sg->sc->rot_v);
        }
    }
    if (L->attn_gate) {
        /* kimi-k3: O *= sigmoid(W_gate x) before the output projection */
        const int64_t ng = (int64_t)nh * dv;
        mmw(c, L->attn_gate, x, D, nt, b.gate, ng);
        for (int64_t i = 0; i < (int64_t)nt * ng; i++) b.ov[i] *= df_sigmoid(b.gate[i]);
    }
    mmw(c, L->wo, b.ov, (int64_t)nh * dv, nt, out, D);
    return DF_OK;
}

/* deepseek2's forward hooks: MLA attention, the generic FFN / MoE. */
const df_arch_fwd df_fwd_deepseek2 = {
    .name = "deepseek2",
    .layer_attn = df_layer_attn_mla,
    .arch_scratch = df_mla_scratch_bytes,
};

/* deepseek32 and glm-dsa: the same MLA attention, with the DSA indexer's key selection
 * (dsa_index, dsa_select). */
const df_arch_fwd df_fwd_deepseek32 = {
    .name = "deepseek32",
    .layer_attn = df_layer_attn_mla,
    .arch_scratch = df_mla_scratch_bytes,
};
const df_arch_fwd df_fwd_glm_dsa = {
    .name = "glm-dsa",
    .layer_attn = df_layer_attn_mla,
    .arch_scratch = df_mla_scratch_bytes,
};
