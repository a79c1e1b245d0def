/* deepseek4.c — DeepSeek-V4's forward hooks (formats.md §3.4c), op by op as llama.cpp d32676d's
 * deepseek4 graph so the numerics match: the residual is hc = 4 streams per token (c->h only
 * carries the embedding in and the mixed output out); around each attention and FFN block
 *   pre:  mixes = fn · rmsnorm(streams); weights pre = sigmoid(mixes·s0 + b) + eps, post =
 *         2·sigmoid(mixes·s1 + b), comb = Sinkhorn(softmax over dst of mixes·s2 + b) (the fused
 *         ggml op's loops: libm expf, float sums, the affine and normalising steps contracted
 *         to FMAs as gcc compiles them); the block input is Σ_h streams_h·pre_h
 *   post: streams'_dst = block_out·post_dst + Σ_src streams_src·comb[dst, src]
 * (these two sums plain multiplies and adds, as gcc compiles the fused ops) and before the
 * output norm the head mix Σ_h streams_h·pre_h of its own mixer (separate
 * multiplies and adds, as llama.cpp's unfused ops). The attention is deepseek4_attn.c's; the
 * FFN is moe.c's (sqrt-softplus or hash routing, the clamped SwiGLU, the shared expert).
 * Threading: the ctx's thread; matmuls and attention fan out over its pool. */
#include "forward/deepseek4.h"
#include "kernels/kernels.h"
#include <math.h>

static uint64_t al64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

enum { DS4_NBUF = 25 };

/* per-row float counts of the ds4_bufs arrays, in struct order (the last one is not per row) */
static void ds4_sizes(const df_model *m, uint64_t sz[DS4_NBUF]) {
    const df_hparams *hp = &m->hp;
    const uint64_t hc = (uint64_t)hp->hc_mult, D = (uint64_t)hp->n_embd, hd = (uint64_t)hp->n_embd_head_k;
    const uint64_t id = (uint64_t)hp->indexer_head_size, tk = (uint64_t)hp->indexer_top_k;
    const uint64_t v[DS4_NBUF] = {
        hc * D, hc * D, (2 + hc) * hc, hc, hc, hc * hc,           /* hcs flat mix pre post comb */
        (uint64_t)hp->n_rot, (uint64_t)hp->n_rot,                  /* rc_raw rc_cmp */
        (uint64_t)hp->n_lora_q, (uint64_t)hp->n_head * hd, (uint64_t)hp->n_head * hd, hd, /* qr q o kv */
        (uint64_t)hp->o_groups * hp->o_lora, 2 * hd, 2 * hd, 2 * id, 2 * id,               /* oa ckv csc lkv lsc */
        (uint64_t)hp->indexer_n_head * id, (uint64_t)hp->indexer_n_head, tk, id, /* iq iw hs kf */
        tk, tk, 1,                                                 /* hi sel nsel (int32) */
        0,                                                         /* cmp: per pass, below */
    };
    memcpy(sz, v, sizeof v);
}

static uint64_t ds4_cmp_floats(const df_hparams *hp) {
    const uint64_t w = (uint64_t)(hp->n_embd_head_k > hp->indexer_head_size ? hp->n_embd_head_k : hp->indexer_head_size);
    return 3 * 256 + (uint64_t)hp->n_rot + w; /* pooling scores / weights / values, a RoPE row, a row */
}

uint64_t ds4_scratch_bytes(const df_model *m, int n_batch) {
    uint64_t sz[DS4_NBUF], tot = 0;
    ds4_sizes(m, sz);
    for (int i = 0; i < DS4_NBUF - 1; i++) tot += al64(sz[i] * (uint64_t)n_batch * 4);
    return tot + al64(ds4_cmp_floats(&m->hp) * 4);
}

void ds4_carve(struct deltafin_ctx *c, ds4_bufs *b) {
    uint64_t sz[DS4_NBUF];
    ds4_sizes(c->m, sz);
    void **dst[DS4_NBUF] = {
        (void **)&b->hcs, (void **)&b->flat, (void **)&b->mix, (void **)&b->pre, (void **)&b->post,
        (void **)&b->comb, (void **)&b->rc_raw, (void **)&b->rc_cmp, (void **)&b->qr, (void **)&b->q,
        (void **)&b->o, (void **)&b->kv, (void **)&b->oa, (void **)&b->ckv, (void **)&b->csc, (void **)&b->lkv,
        (void **)&b->lsc, (void **)&b->iq, (void **)&b->iw, (void **)&b->hs, (void **)&b->kf, (void **)&b->hi,
        (void **)&b->sel, (void **)&b->nsel, (void **)&b->cmp,
    };
    char *p = c->arch_scr;
    for (int i = 0; i < DS4_NBUF; i++) {
        *dst[i] = p;
        p += i < DS4_NBUF - 1 ? al64(sz[i] * (uint64_t)c->n_batch * 4) : al64(ds4_cmp_floats(&c->m->hp) * 4);
    }
    DF_ASSERT((uint64_t)(p - c->arch_scr) <= c->arch_scr_bytes);
}

void ds4_ropes(const df_model *m, df_rope *raw, df_rope *cmp) {
    const df_hparams *hp = &m->hp;
    /* plain RoPE on the layers without compression (llama.cpp passes freq_scale 1, no YaRN) */
    *raw = (df_rope){.n_rot = hp->n_rot, .mode = DF_ROPE_NORM, .freq_base = hp->rope_freq_base, .freq_scale = 1.0f,
                     .attn_factor = 1.0f};
    df_rope_init(raw);
    /* the compressed layers, their compressed rows and the indexer: the compress base with the
     * context's YaRN, attn_factor 1 / (1 + 0.1 ln(1 / freq_scale)) (an FMA, as gcc builds it) */
    const float fs = hp->rope_freq_scale, ext = hp->yarn_ext_factor;
    *cmp = (df_rope){.n_rot = hp->n_rot, .mode = DF_ROPE_NORM, .freq_base = hp->comp_rope_base, .freq_scale = fs,
                     .ext_factor = ext, .attn_factor = ext != 0.0f ? 1.0f / fmaf(0.1f, logf(1.0f / fs), 1.0f) : 1.0f,
                     .beta_fast = hp->yarn_beta_fast, .beta_slow = hp->yarn_beta_slow, .n_ctx_orig = hp->n_ctx_orig};
    df_rope_init(cmp);
}

/* ---- hyper-connections ------------------------------------------------------------------- */

/* llama.cpp's fused dsv4_hc_comb for one token: mix = the (2+hc)·hc mixer outputs, s its scale
 * of 3, bs the base; comb[dst + hc·src] */
static void hc_sinkhorn(const df_hparams *hp, const float *mix, const float *s, const float *bs, float *comb) {
    enum { HC = 4 };
    const float eps = hp->hc_eps;
    for (int src = 0; src < HC; src++) { /* softmax over dst, then + eps */
        float *col = comb + HC * src, mx = -INFINITY, sum = 0.0f;
        for (int dst = 0; dst < HC; dst++) {
            col[dst] = fmaf(mix[2 * HC + dst + HC * src], s[2], bs[2 * HC + dst + HC * src]);
            mx = col[dst] > mx ? col[dst] : mx;
        }
        for (int dst = 0; dst < HC; dst++) {
            col[dst] = expf(col[dst] - mx);
            sum += col[dst];
        }
        const float inv = 1.0f / sum;
        for (int dst = 0; dst < HC; dst++) col[dst] = fmaf(col[dst], inv, eps);
    }
    for (int it = 0; it < hp->hc_iters; it++) {
        if (it > 0)
            for (int src = 0; src < HC; src++) { /* rows: each src's weights over dst */
                float sum = eps;
                for (int dst = 0; dst < HC; dst++) sum += comb[dst + HC * src];
                const float inv = 1.0f / sum;
                for (int dst = 0; dst < HC; dst++) comb[dst + HC * src] *= inv;
            }
        for (int dst = 0; dst < HC; dst++) { /* columns: each dst's weights over src */
            float sum = eps;
            for (int src = 0; src < HC; src++) sum += comb[dst + HC * src];
            const float inv = 1.0f / sum;
            for (int src = 0; src < HC; src++) comb[dst + HC * src] *= inv;
        }
    }
}

/* sigmoid(x·s + b) as llama.cpp's separate ggml_mul, ggml_add, ggml_sigmoid */
static float hc_gate(float x, float s, float b) { return df_sigmoid(x * s + b); }

/* The mixer of a block (fn, its scale and base) on the nt rows: b->mix, pre, post, comb, and
 * the block input x[t] = Σ_h streams_h·pre_h (the fused dsv4_hc_pre, from 0). */
static void hc_pre(struct deltafin_ctx *c, ds4_bufs *b, const df_tensor *fn, const df_tensor *scale,
                   const df_tensor *base, int nt, float *x) {
    const df_hparams *hp = &c->m->hp;
    const int hc = hp->hc_mult, D = hp->n_embd, mixw = (2 + hc) * hc;
    const int64_t HD = (int64_t)hc * D;
    for (int t = 0; t < nt; t++) df_rmsnorm(b->hcs + t * HD, NULL, b->flat + t * HD, (int)HD, hp->eps);
    df_fw_mm(c, fn, b->flat, HD, nt, b->mix, mixw);
    const float *s = scale->data, *bs = base->data;
    for (int t = 0; t < nt; t++) {
        const float *mx = b->mix + (int64_t)t * mixw;
        float *pre = b->pre + (int64_t)t * hc, *post = b->post + (int64_t)t * hc;
        for (int h = 0; h < hc; h++) {
            pre[h] = hc_gate(mx[h], s[0], bs[h]) + hp->hc_eps;
            post[h] = hc_gate(mx[hc + h], s[1], bs[hc + h]) * 2.0f;
        }
        hc_sinkhorn(hp, mx, s, bs, b->comb + (int64_t)t * hc * hc);
        const float *st = b->hcs + t * HD;
        float *xt = x + (int64_t)t * D;
        for (int d = 0; d < D; d++) {
            float sum = 0.0f;
            for (int h = 0; h < hc; h++) sum += st[(int64_t)h * D + d] * pre[h];
            xt[d] = sum;
        }
    }
}

/* streams'_dst = y·post_dst + Σ_src streams_src·comb[dst + hc·src] (the fused dsv4_hc_post) */
static void hc_post(struct deltafin_ctx *c, ds4_bufs *b, const float *y, int nt) {
    const df_hparams *hp = &c->m->hp;
    const int hc = hp->hc_mult, D = hp->n_embd;
    const int64_t HD = (int64_t)hc * D;
    for (int t = 0; t < nt; t++) {
        float *st = b->hcs + t * HD, *res = b->flat + t * HD;
        memcpy(res, st, sizeof(float) * (size_t)HD);
        const float *post = b->post + (int64_t)t * hc, *comb = b->comb + (int64_t)t * hc * hc, *yt = y + (int64_t)t * D;
        for (int dst = 0; dst < hc; dst++)
            for (int d = 0; d < D; d++) {
                float sum = yt[d] * post[dst];
                for (int src = 0; src < hc; src++) sum += res[(int64_t)src * D + d] * comb[dst + hc * src];
                st[(int64_t)dst * D + d] = sum;
            }
    }
}

/* ---- the hooks ---------------------------------------------------------------------------- */

/* first layer: every stream starts as the embedding; each row's cos/sin of both RoPEs */
static void ds4_pass_init(struct deltafin_ctx *c, ds4_bufs *b, int nt) {
    const df_hparams *hp = &c->m->hp;
    const int hc = hp->hc_mult, D = hp->n_embd, nr = hp->n_rot;
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < hc; h++)
            memcpy(b->hcs + ((int64_t)t * hc + h) * D, c->h + (int64_t)t * D, sizeof(float) * (size_t)D);
    df_rope raw, cmp;
    ds4_ropes(c->m, &raw, &cmp);
    for (int s = 0; s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        for (int i = 0; i < sg->n; i++) {
            const int64_t t = sg->row0 + i;
            df_rope_cache(&raw, (float)(sg->pos0 + i), b->rc_raw + t * nr);
            df_rope_cache(&cmp, (float)(sg->pos0 + i), b->rc_cmp + t * nr);
        }
    }
}

static int ds4_layer_attn(struct deltafin_ctx *c, int il, int nt) {
    const df_model *m = c->m;
    const df_layer *L = &m->layers[il];
    const int D = m->hp.n_embd;
    ds4_bufs b;
    ds4_carve(c, &b);
    if (il == 0) ds4_pass_init(c, &b, nt);
    hc_pre(c, &b, L->hc_attn_fn, L->hc_attn_scale, L->hc_attn_base, nt, c->x);
    for (int t = 0; t < nt; t++)
        df_rmsnorm(c->x + (int64_t)t * D, L->attn_norm->data, c->x + (int64_t)t * D, D, m->hp.eps);
    int rc = ds4_attend(c, &b, il, nt, c->x, c->y);
    if (rc < 0) return rc;
    hc_post(c, &b, c->y, nt);
    return DF_OK;
}

static int ds4_layer_ffn(struct deltafin_ctx *c, int il, int nt) {
    const df_model *m = c->m;
    const df_layer *L = &m->layers[il];
    const int D = m->hp.n_embd;
    ds4_bufs b;
    ds4_carve(c, &b);
    hc_pre(c, &b, L->hc_ffn_fn, L->hc_ffn_scale, L->hc_ffn_base, nt, c->x);
    for (int t = 0; t < nt; t++)
        df_rmsnorm(c->x + (int64_t)t * D, L->ffn_norm->data, c->x + (int64_t)t * D, D, m->hp.eps);
    int rc = df_moe_forward(c, il, c->x, nt, c->y); /* routed (+ shared) experts */
    if (rc < 0) return rc;
    hc_post(c, &b, c->y, nt);
    return DF_OK;
}

/* the kept rows' streams (rows ascending, rows[i] >= i) */
static void ds4_rows_select(struct deltafin_ctx *c, const int32_t *rows, int n) {
    ds4_bufs b;
    ds4_carve(c, &b);
    const int64_t HD = (int64_t)c->m->hp.hc_mult * c->m->hp.n_embd;
    for (int i = 0; i < n; i++)
        if (rows[i] != i) memmove(b.hcs + i * HD, b.hcs + (int64_t)rows[i] * HD, sizeof(float) * (size_t)HD);
}

/* c->h[t] = the head mix of the streams (llama.cpp's build_hc_head: its mixer's pre weights,
 * the weighted sum as separate multiplies and adds) */
static int ds4_pre_output(struct deltafin_ctx *c, int n) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const int hc = hp->hc_mult, D = hp->n_embd;
    const int64_t HD = (int64_t)hc * D;
    ds4_bufs b;
    ds4_carve(c, &b);
    for (int t = 0; t < n; t++) df_rmsnorm(b.hcs + t * HD, NULL, b.flat + t * HD, (int)HD, hp->eps);
    df_fw_mm(c, m->hc_head_fn, b.flat, HD, n, b.mix, hc);
    const float s = *(const float *)m->hc_head_scale->data, *bs = m->hc_head_base->data;
    for (int t = 0; t < n; t++) {
        const float *mx = b.mix + (int64_t)t * hc, *st = b.hcs + t * HD;
        float pre[4];
        for (int h = 0; h < hc; h++) pre[h] = hc_gate(mx[h], s, bs[h]) + hp->hc_eps;
        float *ht = c->h + (int64_t)t * D;
        for (int d = 0; d < D; d++) {
            float acc = st[d] * pre[0];
            for (int h = 1; h < hc; h++) {
                const float p = st[(int64_t)h * D + d] * pre[h];
                acc += p;
            }
            ht[d] = acc;
        }
    }
    return DF_OK;
}

static uint64_t ds4_arch_scratch(const df_model *m, int n_batch) { return ds4_scratch_bytes(m, n_batch); }

/* deepseek4's hooks: every block hyper-connected, the last layer on every row (llama.cpp keeps
 * the output rows only before its head) */
const df_arch_fwd df_fwd_deepseek4 = {
    .name = "deepseek4",
    .layer_attn = ds4_layer_attn,
    .layer_ffn = ds4_layer_ffn,
    .arch_scratch = ds4_arch_scratch,
    .rows_select = ds4_rows_select,
    .pre_output = ds4_pre_output,
    .select_late = true,
};
