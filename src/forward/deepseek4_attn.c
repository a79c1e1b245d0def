/* deepseek4_attn.c — DeepSeek-V4's attention (formats.md §3.4c) as llama.cpp d32676d's deepseek4
 * graph and its DSV4 KV cache compute it:
 *   q = rmsnorm_head(wq_b · rmsnorm(wq_a · x)), kv = rmsnorm(wkv · x) (one key = value head),
 *   RoPE NORM on the last n_rot dims of both: the plain base on the layers without compression,
 *   the compress base with the context's YaRN on the others;
 *   the key of every position goes to the cache (model/deepseek4.h); a query attends the last
 *   n_swa of them, then on compressed layers the compressed rows visible to it ((pos + 1) /
 *   ratio of them): all of them on ratio-128 layers, the lightning indexer's top_k on ratio-4
 *   layers; per-head sinks, scale 1/sqrt(hd), flash-attention numerics (attn_gqa.c, with
 *   llama.cpp's split of one query's keys over its threads where it splits them);
 *   the output de-roped, projected per group by wo_a and then by wo_b.
 * Compressors: each position's kv = W_kv · x and score = W_gate · x + ape[pos % ratio] wait in the
 * sequence's state until its block of ratio positions is complete; the block's row is, per dim,
 * the softmax(score)-weighted sum of the values (ratio 4: over the previous block's 4 positions,
 * first half of their dims, and its own, second half; the first block's previous half is a zero
 * value with score -inf), RMS-normed, roped at the block's first position and stored (F16). The
 * lightning indexer has its own compressor (key length ID, Hadamard-rotated), its queries come
 * from the q latent (roped, rotated), its score of a row is Σ_h relu(q_h · k)·w_h, and the top_k
 * rows are chosen as ggml_top_k's std::partial_sort chooses them (libstdc++'s heap select).
 * Threading: the ctx's thread; matmuls, the indexer and the attention fan out over its pool. */
#include "forward/deepseek4.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include <math.h>
#include <stdlib.h>

static int64_t pad256(int64_t x) { return (x + 255) / 256 * 256; }

/* slice g of a 3-D weight {ne0, ne1, ne2}: ne1 rows of ne0 */
static const void *slice3(const df_tensor *w, int g) {
    return (const char *)w->data + (uint64_t)g * df_type_row_bytes(w->type, w->ne[0]) * (uint64_t)w->ne[1];
}

/* the Hadamard rotation of the raw and compressed keys (llama.cpp rotates them when the key
 * length equals the indexer's), 0 = none */
static int ds4_rot(const df_hparams *hp) {
    return hp->n_embd_head_k == hp->indexer_head_size ? hp->n_embd_head_k : 0;
}

/* ---- projections -------------------------------------------------------------------------- */

/* qr, q, kv, the compressors' kv and scores, the indexer's queries and weights of the nt rows */
static void ds4_project(struct deltafin_ctx *c, ds4_bufs *b, int il, int nt, const float *x) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int D = hp->n_embd, hd = hp->n_embd_head_k, nr = hp->n_rot, nope = hd - nr, H = hp->n_head;
    const int rq = hp->n_lora_q, r = hp->comp_ratio[il];
    const int64_t nq = (int64_t)H * hd;
    df_rope raw, cmp;
    ds4_ropes(m, &raw, &cmp);
    const df_rope *rp = r ? &cmp : &raw;
    const float *rc = r ? b->rc_cmp : b->rc_raw;
    df_fw_mm(c, L->wq_a, x, D, nt, b->qr, rq);
    for (int t = 0; t < nt; t++) df_rmsnorm(b->qr + (int64_t)t * rq, L->q_a_norm->data, b->qr + (int64_t)t * rq, rq, hp->eps);
    df_fw_mm(c, L->wq_b, b->qr, rq, nt, b->q, nq);
    df_fw_mm(c, L->wkv, x, D, nt, b->kv, hd);
    for (int t = 0; t < nt; t++) {
        float *qt = b->q + t * nq, *kt = b->kv + (int64_t)t * hd;
        for (int h = 0; h < H; h++) df_rmsnorm(qt + (int64_t)h * hd, NULL, qt + (int64_t)h * hd, hd, hp->eps);
        df_rope_apply(rp, rc + (int64_t)t * nr, qt + nope, H, hd);
        df_rmsnorm(kt, L->kv_a_norm->data, kt, hd, hp->eps);
        df_rope_apply(rp, rc + (int64_t)t * nr, kt + nope, 1, hd);
    }
    if (!r) return;
    const int64_t cw = ds4_state_width(hp, il);
    df_fw_mm(c, L->cmp_wkv, x, D, nt, b->ckv, cw);
    df_fw_mm(c, L->cmp_wgate, x, D, nt, b->csc, cw);
    if (r != 4) return;
    const int ih = hp->indexer_n_head, id = hp->indexer_head_size;
    const int64_t niq = (int64_t)ih * id;
    df_fw_mm(c, L->idx_cmp_wkv, x, D, nt, b->lkv, 2 * id);
    df_fw_mm(c, L->idx_cmp_wgate, x, D, nt, b->lsc, 2 * id);
    df_fw_mm(c, L->idx_q_b, b->qr, rq, nt, b->iq, niq);
    df_fw_mm(c, L->idx_proj, x, D, nt, b->iw, ih);
    const float ws = 1.0f / sqrtf((float)(id * ih));
    for (int t = 0; t < nt; t++) {
        float *q = b->iq + t * niq;
        df_rope_apply(&cmp, b->rc_cmp + (int64_t)t * nr, q + id - nr, ih, id);
        df_fwht(q, niq, id); /* llama.cpp's Hadamard (ggml's fwht) */
        for (int h = 0; h < ih; h++) b->iw[(int64_t)t * ih + h] *= ws;
    }
}

/* ---- compressors -------------------------------------------------------------------------- */

typedef struct {
    float *kv, *sc;      /* state rows: slots x sw floats each */
    int slots, ratio;
    int64_t sw;          /* state row width */
    int w;               /* output dims */
    bool overlap;        /* ratio 4: the previous block too */
    const df_tensor *ape, *norm;
} ds4_comp;

/* the compressed row of the block ending at position p into out[w] (the file comment) */
static void ds4_pool(const df_model *m, const ds4_comp *k, int64_t p, float *out, float *tmp) {
    const df_hparams *hp = &m->hp;
    const int r = k->ratio, n = k->overlap ? 2 * r : r, nr = hp->n_rot;
    float *sc = tmp, *wt = tmp + 256, *val = tmp + 512, *rc = tmp + 768; /* deepseek4.h: b->cmp */
    const int64_t s0 = p + 1 - n;
    for (int d = 0; d < k->w; d++) {
        for (int j = 0; j < n; j++) {
            const int64_t pos = s0 + j;
            const int64_t col = k->overlap && j >= r ? k->w + d : d;
            if (pos < 0) { sc[j] = -INFINITY; val[j] = 0.0f; continue; }
            const int64_t at = (pos % k->slots) * k->sw + col;
            sc[j] = k->sc[at];
            val[j] = k->kv[at];
        }
        df_softmax_ggml(sc, wt, n);
        double acc = 0.0; /* ggml_mul then ggml_sum_rows */
        for (int j = 0; j < n; j++) acc += (double)(val[j] * wt[j]);
        out[d] = (float)acc;
    }
    df_rmsnorm(out, k->norm->data, out, k->w, hp->eps);
    df_rope raw, cmp;
    ds4_ropes(m, &raw, &cmp);
    df_rope_cache(&cmp, (float)(p + 1 - r), rc);
    df_rope_apply(&cmp, rc, out + k->w - nr, 1, k->w);
}

/* position p's kv / score rows (score + its ape row) into the state; the block's compressed row
 * into dst (F16) when p completes one, rotated by rot first */
static void ds4_comp_step(const df_model *m, const ds4_comp *k, int64_t p, const float *kv, const float *sc,
                          void *dst_rows, int64_t ld, int rot, float *tmp) {
    const int64_t slot = p % k->slots;
    float *ks = k->kv + slot * k->sw, *ss = k->sc + slot * k->sw;
    memcpy(ks, kv, sizeof(float) * (size_t)k->sw);
    df_dequantize_row(k->ape->type, (const char *)k->ape->data + df_type_row_bytes(k->ape->type, k->sw) * (uint64_t)(p % k->ratio),
                      ss, k->sw);
    for (int64_t i = 0; i < k->sw; i++) ss[i] = sc[i] + ss[i];
    if ((p + 1) % k->ratio) return;
    float *row = tmp + 768 + m->hp.n_rot;
    ds4_pool(m, k, p, row, tmp);
    if (rot) df_fwht(row, k->w, rot);
    df_kv_put(DF_TYPE_F16, row, (df_f16 *)dst_rows + (p / k->ratio) * ld, k->w);
}

/* the KV compressor (and on ratio-4 layers the indexer's) of layer il over a sequence's rows */
static void ds4_compress(struct deltafin_ctx *c, ds4_bufs *b, const df_seg *sg, int il) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int r = hp->comp_ratio[il], hd = hp->n_embd_head_k, id = hp->indexer_head_size;
    struct deltafin_ctx *sc = sg->sc;
    float *st = (float *)sc->rs + ds4_state_off(hp, il);
    const int slots = ds4_state_slots(hp, il);
    const int64_t sw = ds4_state_width(hp, il), ce = ds4_comp_elems(hp, il);
    df_f16 *rows = (df_f16 *)sc->k_l[il] + (int64_t)sc->n_ctx * hd;
    const ds4_comp kc = {.kv = st, .sc = st + slots * sw, .slots = slots, .ratio = r, .sw = sw, .w = hd,
                         .overlap = r == 4, .ape = L->cmp_ape, .norm = L->cmp_norm};
    float *lst = st + 2 * slots * sw;
    const ds4_comp ki = {.kv = lst, .sc = lst + 8 * 2 * id, .slots = 8, .ratio = 4, .sw = 2 * id, .w = id,
                         .overlap = true, .ape = L->idx_cmp_ape, .norm = L->idx_cmp_norm};
    for (int i = 0; i < sg->n; i++) {
        const int64_t t = sg->row0 + i, p = sg->pos0 + i;
        ds4_comp_step(m, &kc, p, b->ckv + t * sw, b->csc + t * sw, rows, ce, ds4_rot(hp), b->cmp);
        if (r == 4) ds4_comp_step(m, &ki, p, b->lkv + t * 2 * id, b->lsc + t * 2 * id, rows + hd, ce, id, b->cmp);
    }
}

/* ---- the lightning indexer ---------------------------------------------------------------- */

/* ggml_top_k's std::partial_sort (libstdc++ heap select) over scores with comp(a, b) =
 * score a > score b: the heap hs / hi of k entries */
static void heap_adjust(float *hs, int32_t *hi, int hole, int len, float vs, int32_t vi) {
    const int top = hole;
    int second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (hs[second] > hs[second - 1]) second--;
        hs[hole] = hs[second]; hi[hole] = hi[second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) {
        second = 2 * (second + 1);
        hs[hole] = hs[second - 1]; hi[hole] = hi[second - 1];
        hole = second - 1;
    }
    int parent = (hole - 1) / 2;
    while (hole > top && hs[parent] > vs) {
        hs[hole] = hs[parent]; hi[hole] = hi[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    hs[hole] = vs; hi[hole] = vi;
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    struct deltafin_ctx *c;
    ds4_bufs *b;
    const df_seg *sg;
    int il;
} ds4_idx_job;

/* query row t's score of compressed row j (ggml's fused lightning indexer: the key to F32,
 * ggml_vec_dot_f32 per head, relu times the head weight summed in float, an FMA where gcc
 * contracts it) */
static float idx_score(const ds4_idx_job *jb, int64_t t, int64_t j, const df_f16 *keys, int64_t ld) {
    const df_hparams *hp = &jb->c->m->hp;
    const df_kernel_table *kt = df_kernels();
    const int ih = hp->indexer_n_head, id = hp->indexer_head_size;
    float *kf = jb->b->kf + t * id;
    df_dequantize_row(DF_TYPE_F16, keys + j * ld, kf, id);
    const float *q = jb->b->iq + t * ih * id, *w = jb->b->iw + t * ih;
    float s = 0.0f;
    for (int h = 0; h < ih; h++) {
        float d;
        kt->vec_dot[DF_TYPE_F32](id, &d, q + (int64_t)h * id, kf);
        const float rl = d > 0.0f ? d : 0.0f;
        s = kt->attn_fma_sum ? fmaf(rl, w[h], s) : s + rl * w[h];
    }
    return s;
}

/* row t's selected compressed rows, ascending, into sel / nsel */
static void idx_task(void *ctx, int task, int thread) {
    (void)thread;
    const ds4_idx_job *jb = ctx;
    const df_hparams *hp = &jb->c->m->hp;
    const int64_t t = jb->sg->row0 + task, nvis = (jb->sg->pos0 + task + 1) / 4;
    const int k = hp->indexer_top_k;
    int32_t *sel = jb->b->sel + t * k;
    if (nvis <= k) { /* every visible row */
        for (int32_t j = 0; j < nvis; j++) sel[j] = j;
        jb->b->nsel[t] = (int32_t)nvis;
        return;
    }
    struct deltafin_ctx *sc = jb->sg->sc;
    const int hd = hp->n_embd_head_k;
    const int64_t ld = ds4_comp_elems(hp, jb->il);
    const df_f16 *keys = (const df_f16 *)sc->k_l[jb->il] + (int64_t)sc->n_ctx * hd + hd;
    float *hs = jb->b->hs + t * k;
    for (int32_t j = 0; j < k; j++) { hs[j] = idx_score(jb, t, j, keys, ld); sel[j] = j; }
    if (k >= 2)
        for (int parent = (k - 2) / 2;; parent--) {
            heap_adjust(hs, sel, parent, k, hs[parent], sel[parent]);
            if (parent == 0) break;
        }
    for (int64_t j = k; j < nvis; j++) {
        const float s = idx_score(jb, t, j, keys, ld);
        if (s > hs[0]) heap_adjust(hs, sel, 0, k, s, (int32_t)j);
    }
    qsort(sel, (size_t)k, sizeof(int32_t), cmp_i32);
    jb->b->nsel[t] = k;
}

/* ---- attention ---------------------------------------------------------------------------- */

/* the segment's attention: raw window, then the compressed rows it sees */
static void ds4_seg_attend(struct deltafin_ctx *c, ds4_bufs *b, const df_seg *sg, int il) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int hd = hp->n_embd_head_k, H = hp->n_head, r = hp->comp_ratio[il];
    const int64_t nq = (int64_t)H * hd;
    struct deltafin_ctx *sc = sg->sc;
    const int64_t p_last = sg->pos0 + sg->n - 1, max_vis = r ? (p_last + 1) / r : 0;
    df_attn_args a = {
        .n_tok = sg->n, .pos0 = sg->pos0, .n_head = H, .n_head_kv = 1, .dk = hd, .dv = hd,
        .scale = 1.0f / sqrtf((float)hd), .q = b->q + (int64_t)sg->row0 * nq, .ldq = nq,
        .kc = sc->k_l[il], .vc = sc->k_l[il], .ldk = hd, .ldv = hd, .type_k = DF_TYPE_F16, .type_v = DF_TYPE_F16,
        .out = b->o + (int64_t)sg->row0 * nq, .ldo = nq, .f32_acc = df_use_tiled_attn(sg->n, hd),
        .sinks = L->attn_sinks->data, .swa = hp->n_swa, .scratch = c->attn_scr, .scratch_stride = c->attn_stride,
    };
    if (max_vis > 0) { /* llama.cpp's CSA / HCA path (else the window alone) */
        a.kc2 = (const df_f16 *)sc->k_l[il] + (int64_t)sc->n_ctx * hd;
        a.ldk2 = ds4_comp_elems(hp, il);
        a.n2 = b->nsel + sg->row0;
        if (r == 4) {
            a.sel2 = b->sel + (int64_t)sg->row0 * hp->indexer_top_k;
            a.ldsel2 = hp->indexer_top_k;
        } else {
            for (int i = 0; i < sg->n; i++) b->nsel[sg->row0 + i] = (int32_t)((sg->pos0 + i + 1) / r);
        }
    }
    if (sg->n == 1) { /* one query: ggml's split over its threads from 512 keys (padded counts) */
        const int64_t cells = pad256(sc->n_ctx < hp->n_swa + sc->n_batch ? sc->n_ctx : hp->n_swa + sc->n_batch);
        int64_t raw = pad256(p_last + 1);
        raw = raw < cells ? raw : cells;
        a.split_base = raw;
        a.split_nkv = raw + (max_vis > 0 ? pad256(max_vis) : 0);
        a.split_n = a.split_nkv >= 512 ? c->n_threads : 0;
    }
    df_attn_gqa(c->pool, &a);
}

int ds4_attend(struct deltafin_ctx *c, ds4_bufs *b, int il, int nt, const float *x, float *out) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int hd = hp->n_embd_head_k, H = hp->n_head, nr = hp->n_rot, nope = hd - nr, r = hp->comp_ratio[il];
    const int G = hp->o_groups, ol = hp->o_lora, rot = ds4_rot(hp);
    const int64_t nq = (int64_t)H * hd, gd = nq / G;
    ds4_project(c, b, il, nt, x);
    for (int s = 0; s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        struct deltafin_ctx *sc = sg->sc;
        for (int i = 0; i < sg->n; i++) { /* keys (rotated with the queries where llama.cpp does) */
            const int64_t t = sg->row0 + i;
            if (rot) { df_fwht(b->q + t * nq, nq, rot); df_fwht(b->kv + t * hd, hd, rot); }
            df_kv_put(DF_TYPE_F16, b->kv + t * hd, (df_f16 *)sc->k_l[il] + (int64_t)(sg->pos0 + i) * hd, hd);
        }
        if (r) ds4_compress(c, b, sg, il);
        if (r == 4 && (sg->pos0 + sg->n) / 4 > 0) {
            ds4_idx_job jb = {.c = c, .b = b, .sg = sg, .il = il};
            df_pool_run(c->pool, sg->n, idx_task, &jb);
        }
        ds4_seg_attend(c, b, sg, il);
        if (rot) df_fwht(b->o + (int64_t)sg->row0 * nq, (int64_t)sg->n * nq, rot);
    }
    /* de-rope the output heads (ggml_rope_ext_back: the same angles, sine negated) */
    df_rope raw, cmp;
    ds4_ropes(m, &raw, &cmp);
    const df_rope *rp = r ? &cmp : &raw;
    const float *rcs = r ? b->rc_cmp : b->rc_raw;
    float *back = b->cmp + 768; /* its RoPE row */
    for (int t = 0; t < nt; t++) {
        const float *rc = rcs + (int64_t)t * nr;
        for (int i = 0; i < nr; i += 2) { back[i] = rc[i]; back[i + 1] = -rc[i + 1]; }
        df_rope_apply(rp, back, b->o + t * nq + nope, H, hd);
    }
    for (int g = 0; g < G; g++) /* the grouped LoRA: group g's heads through wo_a's slice g */
        df_matmul_3d_g(c->pool, slice3(L->wo_a, g), L->wo_a->type, gd, ol, b->o + g * gd, nq, nt,
                       b->oa + (int64_t)g * ol, (int64_t)G * ol, c->act, &c->grp);
    df_fw_mm(c, L->wo_b, b->oa, (int64_t)G * ol, nt, out, hp->n_embd);
    return DF_OK;
}
