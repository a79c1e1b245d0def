/* moe.c — MoE FFN of a batch: routing exactly as llama.cpp's build_moe_ffn (formats.md §3.0
 * steps 1-11), then expert-major compute: the union of selected experts is announced to the
 * provider (prefetch), and each expert is acquired once, applied to all tokens routed to it
 * with one matmul per part, and released. Per-slot outputs are weighted and summed in slot
 * order j = 0..k-1 so the result does not depend on the order experts arrive in.
 * All routed-expert weight access goes through the weights interface (weights/weights.h).
 * Threading: called on the ctx's thread; matmuls fan out over the ctx pool. */
#include "forward/session.h"
#include "kernels/kernels.h"
#include "weights/weights.h"
#include <math.h>

/* router logits (a batch of F32 router rows goes through df_matmul's tinyBLAS-order GEMM in
 * ggml's order, kernels/dispatch.c; per sequence of the pass, as its own pass would); the
 * look-ahead's predicted rows are no product of the model's pass: the observer does not see them */
static void router_logits(struct deltafin_ctx *c, const df_tensor *w, const float *x, int64_t ldx, int nt, float *y,
                          int64_t ldy, bool observe) {
    if (observe && c->obs.fn) df_mm_observe(&c->obs, w, 0, 1, false, x, ldx, nt);
    df_matmul_g(c->pool, w->data, w->type, w->ne[0], w->ne[1], x, ldx, nt, y, ldy, c->act, &c->grp);
}

/* ggml_soft_max in place: ggml's vector order and exp */
static void softmax(float *x, int n) { df_softmax_ggml(x, x, n); }

/* Steps 1-9 for nt rows of x into idx/w ([nt][K]); select_only (look-ahead) stops after the
 * top-k choice (step 5): no weights, no routing counts. Scratch: c->router, c->selbuf. */
/* Opt-in lossy routing (deltafin_ctx_set_routing), part 1, on the router's top-k (idx, with the
 * unweighted scores in w): keep the first experts_per_token and move uncached experts to cached
 * near-ties. Returns how many slots stay routed. */
static int lossy_choose(struct deltafin_ctx *c, int il, int32_t *idx, float *w, const float *lg, const float *sel) {
    const df_hparams *hp = &c->m->hp;
    const int E = hp->n_expert, K = hp->n_expert_used;
    int kk = K;
    if (c->routing.experts_per_token > 0 && c->routing.experts_per_token < K) kk = c->routing.experts_per_token;
    const float M = c->routing.cache_aware;
    if (M > 0.0f && M < 1.0f) {
        const bool raw = hp->gating == DF_GATING_SOFTMAX_WEIGHT;
        const float lm = logf(1.0f - M);
        for (int j = kk - 1; j >= 0; j--) {
            if (df_weights_expert_cached(c->w, il, idx[j])) continue;
            const float sj = sel[idx[j]], lo = raw ? sj + lm : sj - M * fabsf(sj);
            int best = -1;
            for (int e = 0; e < E; e++) {
                if (!(sel[e] >= lo) || (best >= 0 && sel[e] <= sel[best])) continue;
                bool chosen = false;
                for (int i = 0; i < kk && !chosen; i++) chosen = idx[i] == e;
                if (chosen || !df_weights_expert_cached(c->w, il, e)) continue;
                best = e;
            }
            if (best < 0) continue;
            idx[j] = best;
            w[j] = lg[best];
            c->route_swapped++;
        }
    }
    return kk;
}

/* Part 2, on the final weights: expert_top_p, then the dropped slots (kk..K) get expert -1 and
 * weight 0: no read, no compute, and the slot-order sum stops before them (the sum of a model
 * with n_expert_used = kk). */
static int lossy_finish(struct deltafin_ctx *c, int32_t *idx, float *w, int kk) {
    const int K = c->m->hp.n_expert_used;
    const float P = c->routing.expert_top_p;
    if (P > 0.0f && P < 1.0f) {
        double total = 0.0;
        for (int j = 0; j < kk; j++) total += w[j];
        if (total > 0.0) {
            double cum = 0.0;
            int keep = 0;
            while (keep < kk) {
                cum += w[keep++];
                if (cum >= P * total) break;
            }
            const float scale = (float)(total / cum);
            for (int j = 0; j < keep; j++) w[j] *= scale;
            kk = keep;
        }
    }
    c->route_slots += (uint64_t)K;
    c->route_dropped += (uint64_t)(K - kk);
    for (int j = kk; j < K; j++) { idx[j] = -1; w[j] = 0.0f; }
    return kk;
}

/* the token of row t of the pass (its segment's ids; hash routing) */
static int32_t row_token(const struct deltafin_ctx *c, int t) {
    for (int s = 0; s < c->n_seg; s++)
        if (t < c->seg[s].row0 + c->seg[s].n) return c->seg[s].ids[t - c->seg[s].row0];
    DF_ASSERT(!"row outside the pass");
    return 0;
}

/* An id outside the expert count in a hash-routing table (untrusted file data) is an error naming
 * it (route_rows gives such a slot expert -1). */
static int check_hash_ids(const struct deltafin_ctx *c, int il, int nt) {
    const df_layer *L = &c->m->layers[il];
    if (!L->gate_tid2eid) return DF_OK;
    const int K = c->m->hp.n_expert_used, E = c->m->hp.n_expert;
    for (int t = 0; t < nt; t++) {
        const int32_t tok = row_token(c, t), *ids = (const int32_t *)L->gate_tid2eid->data + (int64_t)tok * K;
        for (int j = 0; j < K; j++)
            if (ids[j] < 0 || ids[j] >= E)
                return df_err(DF_ERR_FORMAT, "%s: tensor 'blk.%d.ffn_gate_tid2eid.weight': token %d maps to expert %d "
                              "outside 0..%d", c->m->path, il, tok, ids[j], E - 1);
    }
    return DF_OK;
}

static void route_rows(struct deltafin_ctx *c, int il, const float *x, int nt, int32_t *idx_out, float *w_out,
                       bool select_only) {
    const df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int E = hp->n_expert, K = hp->n_expert_used;
    /* 1. router logits */
    router_logits(c, L->gate_inp, x, hp->n_embd, nt, c->router, E, !select_only);
    for (int t = 0; t < nt; t++) {
        float *lg = c->router + (int64_t)t * E;
        float *sel = c->selbuf + (int64_t)t * E;
        if (L->gate_inp_b) df_add(lg, L->gate_inp_b->data, E);
        /* 2. scores (in place) */
        switch (hp->gating) {
        case DF_GATING_SOFTMAX: softmax(lg, E); break;
        case DF_GATING_SIGMOID: for (int e = 0; e < E; e++) lg[e] = df_sigmoid(lg[e]); break;
        case DF_GATING_SQRT_SOFTPLUS:
            for (int e = 0; e < E; e++) {
                float v = lg[e];
                float sp = v > 20.0f ? v : log1pf(expf(v));
                lg[e] = sqrtf(sp);
            }
            break;
        case DF_GATING_SQRT_SOFTPLUS_LOGF: /* ggml_softplus of llama.cpp d32676d, then ggml_sqrt */
            for (int e = 0; e < E; e++) lg[e] = sqrtf(lg[e] > 20.0f ? lg[e] : logf(1.0f + expf(lg[e])));
            break;
        default: break; /* SOFTMAX_WEIGHT: raw logits */
        }
        /* 3. selection scores */
        memcpy(sel, lg, sizeof(float) * (size_t)E);
        if (L->exp_probs_b) df_add(sel, L->exp_probs_b->data, E);
        /* 4. group limit */
        if (hp->n_expert_groups > 1) {
            const int G = hp->n_expert_groups, per = E / G;
            float gs[256];
            bool keep[256];
            for (int g = 0; g < G; g++) {
                float a = -INFINITY, b = -INFINITY;
                for (int e = g * per; e < (g + 1) * per; e++) {
                    float v = sel[e];
                    if (v > a) { b = a; a = v; } else if (v > b) b = v;
                }
                gs[g] = a + b;
                keep[g] = false;
            }
            for (int r = 0; r < hp->n_group_used; r++) {
                int best = -1;
                for (int g = 0; g < G; g++)
                    if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
                keep[best] = true;
            }
            for (int g = 0; g < G; g++)
                if (!keep[g])
                    for (int e = g * per; e < (g + 1) * per; e++) sel[e] = -INFINITY;
        }
        /* 5. top-k descending (ties: lower id first) and 6. unbiased weights; a hash-routed
         * layer (deepseek4) takes the row's token's experts from its table instead */
        int32_t *idx = idx_out + (int64_t)t * K;
        float *w = w_out + (int64_t)t * K;
        if (L->gate_tid2eid) {
            const int32_t *ids = (const int32_t *)L->gate_tid2eid->data + (int64_t)row_token(c, t) * K;
            for (int j = 0; j < K; j++) {
                idx[j] = ids[j] >= 0 && ids[j] < E ? ids[j] : -1;
                if (!select_only) w[j] = idx[j] >= 0 ? lg[idx[j]] : 0.0f;
            }
        } else for (int j = 0; j < K; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                bool used = false;
                for (int i = 0; i < j; i++) used |= idx[i] == e;
                if (used) continue;
                if (best < 0 || sel[e] > sel[best]) best = e;
            }
            idx[j] = best;
            if (!select_only) w[j] = lg[best];
        }
        if (select_only) continue;
        const bool lossy = c->routing.experts_per_token > 0 || c->routing.expert_top_p > 0.0f ||
                           c->routing.cache_aware > 0.0f;
        int kk = K;
        if (lossy) kk = lossy_choose(c, il, idx, w, lg, sel);
        /* 7. */
        if (hp->gating == DF_GATING_SOFTMAX_WEIGHT) softmax(w, kk);
        /* 8. */
        if (hp->expert_weights_norm) {
            double s = 0.0;
            for (int j = 0; j < kk; j++) s += w[j];
            float sum = (float)s;
            if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
            for (int j = 0; j < kk; j++) w[j] /= sum;
        }
        /* 9. */
        if (hp->expert_weights_scale != 0.0f && hp->expert_weights_scale != 1.0f)
            for (int j = 0; j < kk; j++) w[j] *= hp->expert_weights_scale;
        if (lossy) kk = lossy_finish(c, idx, w, kk);
    }
    /* optional routing statistics (deltafin_ctx_count_routes), each sequence its own; slots
     * dropped by lossy routing (-1) are not counted */
    for (int s = 0; !select_only && s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        if (!sg->sc->route_counts) continue;
        uint32_t *rc = sg->sc->route_counts + (int64_t)il * E;
        for (int64_t i = (int64_t)sg->row0 * K; i < (int64_t)(sg->row0 + sg->n) * K; i++)
            if (idx_out[i] >= 0) rc[idx_out[i]]++;
    }
    if (c->route_trace && !select_only) c->route_trace(c->route_trace_ud, il, nt, K, idx_out);
}

/* Sharing statistics of one MoE layer: the union's size against what separate passes of the
 * segments would acquire (each its own distinct experts). */
static void count_sharing(struct deltafin_ctx *c, int n_union) {
    const int K = c->m->hp.n_expert_used;
    uint64_t alone = 0;
    for (int s = 0; s < c->n_seg; s++) {
        const df_seg *sg = &c->seg[s];
        const int64_t a = (int64_t)sg->row0 * K, b = (int64_t)(sg->row0 + sg->n) * K;
        for (int64_t i = a; i < b; i++)
            if (c->sel[i] >= 0 && !c->e_mark[c->sel[i]]) { c->e_mark[c->sel[i]] = 1; alone++; }
        for (int64_t i = a; i < b; i++)
            if (c->sel[i] >= 0) c->e_mark[c->sel[i]] = 0;
    }
    c->pass_union += (uint64_t)n_union;
    c->pass_alone += alone;
}

void df_moe_route(struct deltafin_ctx *c, int il, const float *x, int nt) {
    route_rows(c, il, x, nt, c->sel, c->selw, false);
}

int df_moe_next_layer(const struct deltafin_model *m, int il) {
    for (int l = il + 1; l < m->hp.n_layer; l++)
        if (m->layers[l].is_moe && m->layers[l].gate_inp) return l;
    return -1;
}

bool df_moe_lookahead_wanted(struct deltafin_ctx *c) {
    return df_weights_lookahead_wanted(c->w);
}

void df_moe_lookahead(struct deltafin_ctx *c, int il_next, const float *xn, int nt) {
    df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    if (nt <= 0 || il_next < 0 || il_next >= hp->n_layer || !m->layers[il_next].is_moe ||
        !m->layers[il_next].gate_inp || !df_weights_lookahead_wanted(c->w))
        return;
    const int E = hp->n_expert, K = hp->n_expert_used;
    if (nt > c->n_batch || (int64_t)nt * K + 2 * (int64_t)E > (int64_t)nt * K * hp->n_embd) return;
    /* scratch: c->router / c->selbuf (routing), c->yslot ([nb][K][D] floats): top-k ids, then
     * per-expert votes and the ordered list */
    int32_t *idx = (int32_t *)c->yslot;
    int32_t *votes = idx + (int64_t)nt * K;
    int32_t *order = votes + E;
    route_rows(c, il_next, xn, nt, idx, NULL, true);
    memset(votes, 0, sizeof(int32_t) * (size_t)E);
    /* rank by tokens voting for the expert, then by best rank among them (ids break ties) */
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < K; j++)
            if (idx[(int64_t)t * K + j] >= 0) votes[idx[(int64_t)t * K + j]] += 2 * K - j;
    int n = 0;
    for (int e = 0; e < E; e++)
        if (votes[e]) order[n++] = e;
    for (int i = 1; i < n; i++) { /* insertion sort: n <= E, small */
        int e = order[i], j = i - 1;
        while (j >= 0 && votes[order[j]] < votes[e]) { order[j + 1] = order[j]; j--; }
        order[j + 1] = e;
    }
    df_weights_expert_lookahead(c->w, il_next, order, n);
}

/* activation of nrows rows of ncols gate (g, overwritten) and up (u) values; SwiGLU row by row
 * as ggml_swiglu (which matters in ggml's order: vectors restart at each row) */
void df_ffn_act_rows(const df_hparams *hp, float *g, float *u, int64_t nrows, int64_t ncols) {
    if (hp->ffn_act == DF_ACT_SWIGLU) { df_swiglu_rows(g, u, nrows, ncols); return; }
    if (hp->ffn_act == DF_ACT_SWIGLU_CLAMP) { df_swiglu_clamp_rows(g, u, nrows, ncols, hp->swiglu_limit); return; }
    df_ffn_act(hp, g, u, nrows * ncols);
}

void df_swiglu_clamp_rows(float *g, float *u, int64_t nrows, int64_t ncols, float limit) {
    /* llama.cpp (deepseek4): up = clamp(up, -L, L), gate = clamp(gate, -inf, L) as ggml_clamp's
     * MAX(MIN(x, max), min), then ggml_swiglu_split; no clamp for L <= 1e-6 */
    if (limit > 1e-6f)
        for (int64_t i = 0; i < nrows * ncols; i++) {
            g[i] = g[i] < limit ? g[i] : limit;
            const float v = u[i] < limit ? u[i] : limit;
            u[i] = v > -limit ? v : -limit;
        }
    df_swiglu_rows(g, u, nrows, ncols);
}

void df_ffn_act(const df_hparams *hp, float *g, const float *u, int64_t n) {
    if (hp->ffn_act == DF_ACT_SWIGLU || hp->ffn_act == DF_ACT_SWIGLU_CLAMP) { df_swiglu_rows(g, u, 1, n); return; }
    if (hp->ffn_act == DF_ACT_SWIGLU_OAI) {
        /* gpt-oss (ggml swiglu_oai): x = min(gate, 7), y = clamp(up, -7, 7),
         * x·sigmoid(1.702·x)·(y + 1), in ggml's op order with libm expf */
        const float alpha = 1.702f, limit = 7.0f;
        for (int64_t i = 0; i < n; i++) {
            const float x = g[i] < limit ? g[i] : limit;
            const float y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
            const float glu = x / (1.0f + expf(alpha * (-x)));
            g[i] = glu * (y + 1.0f);
        }
        return;
    }
    /* kimi-k3 situ in llama.cpp's op order (F32 reciprocal scales, libm tanhf / expf) */
    const float b = hp->situ_beta, lb = hp->situ_lbeta, rb = 1.0f / b, rlb = 1.0f / lb;
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        const float a = (tanhf(x * rb) * b) * df_sigmoid(x);
        const float up = lb > 0.0f ? tanhf(u[i] * rlb) * lb : u[i];
        g[i] = a * up;
    }
}

/* One routed expert on n rows, exactly as every MoE layer computes it (so an expert run by a
 * remote owner through this function gives the bits a local one would). The matrices go
 * through ggml's MUL_MAT_ID (its float order differs from a plain matmul's for repacked
 * weights; kernels.h). */
void df_moe_expert_rows(const df_moe_bufs *b, const df_hparams *hp, const df_layer *L, int e, const df_expert_w *w,
                        int64_t D, int64_t n_ff, int64_t n_out, int n) {
    const bool obs = b->obs && b->obs->fn && L;
    if (obs) {
        const df_tensor *g = L->exps[DF_EXPERT_GATE], *u = L->exps[DF_EXPERT_UP];
        df_mm_observe(b->obs, g, e, (int)g->ne[2], true, b->xg, D, n);
        if (u != g) df_mm_observe(b->obs, u, e, (int)u->ne[2], true, b->xg, D, n);
    }
    if (w->type[DF_EXPERT_GATE] == w->type[DF_EXPERT_UP]) {
        int ty = w->type[DF_EXPERT_GATE];
        df_quantize_act(ty, b->xg, D, D, n, b->act);
        df_matmul_q_id(b->pool, w->w[DF_EXPERT_GATE], ty, D, n_ff, b->act, n, b->fa, n_ff);
        df_matmul_q_id(b->pool, w->w[DF_EXPERT_UP], ty, D, n_ff, b->act, n, b->fb, n_ff);
    } else {
        df_matmul_id(b->pool, w->w[DF_EXPERT_GATE], w->type[DF_EXPERT_GATE], D, n_ff, b->xg, D, n, b->fa, n_ff, b->act);
        df_matmul_id(b->pool, w->w[DF_EXPERT_UP], w->type[DF_EXPERT_UP], D, n_ff, b->xg, D, n, b->fb, n_ff, b->act);
    }
    if (L && L->exps_b[DF_EXPERT_GATE]) { /* per-expert biases (gpt-oss: ggml_add_id) */
        const float *bg = (const float *)L->exps_b[DF_EXPERT_GATE]->data + (int64_t)e * n_ff;
        const float *bu = (const float *)L->exps_b[DF_EXPERT_UP]->data + (int64_t)e * n_ff;
        for (int i = 0; i < n; i++) {
            df_add(b->fa + (int64_t)i * n_ff, bg, (int)n_ff);
            df_add(b->fb + (int64_t)i * n_ff, bu, (int)n_ff);
        }
    }
    df_ffn_act_rows(hp, b->fa, b->fb, n, n_ff);
    if (obs) df_mm_observe(b->obs, L->exps[DF_EXPERT_DOWN], e, (int)L->exps[DF_EXPERT_DOWN]->ne[2], true, b->fa, n_ff, n);
    df_matmul_id(b->pool, w->w[DF_EXPERT_DOWN], w->type[DF_EXPERT_DOWN], n_ff, n_out, b->fa, n_ff, n, b->yg, n_out, b->act);
    if (L && L->exps_b[DF_EXPERT_DOWN]) {
        const float *bd = (const float *)L->exps_b[DF_EXPERT_DOWN]->data + (int64_t)e * n_out;
        for (int i = 0; i < n; i++) df_add(b->yg + (int64_t)i * n_out, bd, (int)n_out);
    }
}

uint64_t df_moe_bufs_bytes(const df_model *m, int n_rows, df_moe_dims *dims) {
    df_moe_dims d = {0};
    uint64_t act = 64;
    for (int l = 0; l < m->hp.n_layer; l++) {
        if (!m->layers[l].is_moe) continue;
        int64_t din, nff, dout;
        df_model_expert_shape(m, l, DF_EXPERT_GATE, &din, &nff, NULL);
        df_model_expert_shape(m, l, DF_EXPERT_DOWN, NULL, &dout, NULL);
        if (din > d.d_in) d.d_in = din;
        if (nff > d.n_ff) d.n_ff = nff;
        if (dout > d.d_out) d.d_out = dout;
        for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
            const df_tensor *t = m->layers[l].exps[p];
            if (!t) continue;
            /* the type as stored and the one the expert store repacks it to */
            const int types[2] = {t->type, df_repack_type(t->type)};
            for (int i = 0; i < 2; i++) {
                if (types[i] < 0) continue;
                uint64_t a = df_act_bytes(types[i], t->ne[0], n_rows);
                if (a > act) act = a;
            }
        }
    }
    if (dims) *dims = d;
    const uint64_t n = (uint64_t)(n_rows > 0 ? n_rows : 1);
    if (dims) dims->act_bytes = act;
    return df_pad(act, 64) + df_pad(n * (uint64_t)d.d_in * 4, 64) + 2 * df_pad(n * (uint64_t)d.n_ff * 4, 64) +
           df_pad(n * (uint64_t)d.d_out * 4, 64);
}

int df_moe_routed(struct deltafin_ctx *c, int il, const float *xr, const float *xe, int nt, float *out) {
    df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int E = hp->n_expert, K = hp->n_expert_used, Dr = hp->n_embd;
    int rch = check_hash_ids(c, il, nt);
    if (rch < 0) return rch;
    df_moe_route(c, il, xr, nt);

    /* bucket (token, slot) pairs by expert */
    memset(c->e_cnt, 0, sizeof(int32_t) * (size_t)E);
    for (int i = 0; i < nt * K; i++)
        if (c->sel[i] >= 0) c->e_cnt[c->sel[i]]++; /* < 0: a slot dropped by lossy routing */
    int n_union = 0;
    c->e_off[0] = 0;
    for (int e = 0; e < E; e++) {
        c->e_off[e + 1] = c->e_off[e] + c->e_cnt[e];
        if (c->e_cnt[e]) c->e_union[n_union++] = e;
    }
    memset(c->e_cnt, 0, sizeof(int32_t) * (size_t)E);
    for (int i = 0; i < nt * K; i++) {
        int e = c->sel[i];
        if (e >= 0) c->e_list[c->e_off[e] + c->e_cnt[e]++] = i;
    }
    count_sharing(c, n_union);
    int64_t D, n_ff, n_out_d; /* expert input width (n_embd, or kimi-k3's latent) */
    df_model_expert_shape(m, il, DF_EXPERT_GATE, &D, &n_ff, NULL);
    df_model_expert_shape(m, il, DF_EXPERT_DOWN, NULL, &n_out_d, NULL);
    /* experts owned by other processes start first (their owners read and compute them while
     * this one works on its own share) */
    const bool remote = df_weights_expert_remote(c->w);
    const df_expert_job job = {.layer = il, .nt = nt, .k = K, .sel = c->sel, .e_off = c->e_off, .e_list = c->e_list,
                               .e_union = c->e_union, .n_union = n_union, .x = xe, .d_in = D, .y = c->yslot,
                               .d_out = n_out_d};
    if (remote) {
        int rc = df_weights_expert_submit(c->w, &job, c->e_local);
        if (rc < 0) return rc;
    }
    df_weights_expert_prefetch(c->w, il, c->e_union, n_union);

    /* router look-ahead: the next MoE layer's router on this layer's state (after its
     * attention), queued behind this layer's reads so the disk keeps working across the layer
     * boundary. x = rmsnorm(h) * ffn_norm[il], so x * ffn_norm[next] / ffn_norm[il] is the
     * next layer's router input had the state not changed (channels with a zero weight keep x). */
    const int il_next = df_moe_next_layer(m, il);
    if (il_next >= 0 && df_moe_lookahead_wanted(c)) {
        const df_tensor *n0 = L->ffn_norm, *n1 = m->layers[il_next].ffn_norm;
        const float *xn = xr;
        if (n0 && n1 && n0->ne[0] == Dr && n1->ne[0] == Dr && n0->type == DF_TYPE_F32 && n1->type == DF_TYPE_F32) {
            const float *w0 = n0->data, *w1 = n1->data;
            for (int t = 0; t < nt; t++) {
                const float *xt = xr + (int64_t)t * Dr;
                float *o = c->xg + (int64_t)t * Dr;
                for (int d = 0; d < Dr; d++) o[d] = w0[d] != 0.0f ? xt[d] * (w1[d] / w0[d]) : xt[d];
            }
            xn = c->xg;
        }
        df_moe_lookahead(c, il_next, xn, nt);
    }

    const df_moe_bufs bufs = {.pool = c->pool, .act = c->act, .xg = c->xg, .fa = c->fa, .fb = c->fb, .yg = c->yg,
                              .obs = c->obs.fn ? &c->obs : NULL};
    int rc = DF_OK;
    for (int u = 0; u < n_union && rc == DF_OK; u++) {
        if (remote && !c->e_local[u]) continue;
        if (df_pass_cancelled(c)) { rc = df_err(DF_ERR_CANCELLED, "cancelled"); break; }
        const int e = c->e_union[u];
        const int n = c->e_off[e + 1] - c->e_off[e];
        const int32_t *lst = c->e_list + c->e_off[e];
        df_expert_w w;
        rc = df_weights_expert_acquire(c->w, il, e, &w);
        if (rc < 0) { rc = df_err_prefix(rc, "layer %d expert %d", il, e); break; }
        for (int i = 0; i < n; i++)
            memcpy(c->xg + (int64_t)i * D, xe + (int64_t)(lst[i] / K) * D, sizeof(float) * (size_t)D);
        df_moe_expert_rows(&bufs, hp, L, e, &w, D, n_ff, n_out_d, n);
        df_weights_expert_release(c->w, il, e);
        for (int i = 0; i < n; i++)
            memcpy(c->yslot + (int64_t)lst[i] * n_out_d, c->yg + (int64_t)i * n_out_d, sizeof(float) * (size_t)n_out_d);
        if (remote) df_weights_expert_poll(c->w);
    }
    if (remote) {
        int rc2 = df_weights_expert_complete(c->w, &job);
        if (rc == DF_OK) rc = rc2;
    }
    if (rc < 0) return rc;
    /* 10-11: weight each slot, sum in slot order */
    for (int t = 0; t < nt; t++) {
        float *o = out + (int64_t)t * n_out_d;
        const float *w = c->selw + (int64_t)t * K;
        const float *y0 = c->yslot + (int64_t)t * K * n_out_d;
        for (int64_t d = 0; d < n_out_d; d++) o[d] = y0[d] * w[0];
        for (int j = 1; j < K && c->sel[(int64_t)t * K + j] >= 0; j++) {
            const float *yj = y0 + (int64_t)j * n_out_d;
            for (int64_t d = 0; d < n_out_d; d++) o[d] += yj[d] * w[j];
        }
    }
    return DF_OK;
}

int df_moe_forward(struct deltafin_ctx *c, int il, const float *x, int nt, float *out) {
    int rc = df_moe_routed(c, il, x, x, nt, out);
    if (rc < 0) return rc;
    df_model *m = c->m;
    const df_hparams *hp = &m->hp;
    const df_layer *L = &m->layers[il];
    const int D = hp->n_embd;
    /* shared expert */
    if (L->gate_shexp) {
        const int64_t fs = L->gate_shexp->ne[1];
        if (L->gate_shexp->type == L->up_shexp->type) {
            df_quantize_act(L->gate_shexp->type, x, D, D, nt, c->act);
            df_fw_mm_q(c, L->gate_shexp, x, D, nt, c->fa, fs);
            df_fw_mm_q(c, L->up_shexp, x, D, nt, c->fb, fs);
        } else {
            df_fw_mm(c, L->gate_shexp, x, D, nt, c->fa, fs);
            df_fw_mm(c, L->up_shexp, x, D, nt, c->fb, fs);
        }
        if (hp->ffn_act == DF_ACT_SWIGLU_CLAMP) df_swiglu_clamp_rows(c->fa, c->fb, nt, fs, hp->swiglu_limit_shexp);
        else df_ffn_act_rows(hp, c->fa, c->fb, nt, fs);
        df_fw_mm(c, L->down_shexp, c->fa, fs, nt, c->yg, D);
        if (L->gate_inp_shexp) {
            /* llama.cpp: gate = silu(z) / z (= sigmoid(z) except NaN at z == 0) */
            float *z = c->fb;
            df_fw_mm(c, L->gate_inp_shexp, x, D, nt, z, 1);
            for (int t = 0; t < nt; t++) {
                float g = hp->shexp_sigmoid ? df_sigmoid(z[t]) : df_silu(z[t]) / z[t]; /* qwen3next: sigmoid */
                float *ys = c->yg + (int64_t)t * D;
                for (int d = 0; d < D; d++) ys[d] *= g;
            }
        }
        for (int t = 0; t < nt; t++) df_add(out + (int64_t)t * D, c->yg + (int64_t)t * D, D);
    }
    return DF_OK;
}
