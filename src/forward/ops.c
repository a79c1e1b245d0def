/* ops.c — see ops.h. Numerics mirror ggml's CPU ops (ops.cpp, vec.h) so that results agree
 * with llama.cpp to rounding; comments note where the order of operations matters. The
 * vectorised ops (softmax, SwiGLU, silu in ggml's vector orders) are the kernel table's. */
#include "forward/ops.h"
#include "kernels/kernels.h"
#include <math.h>

static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void df_rope_init(df_rope *r) {
    r->theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    float start = floorf(corr_dim(r->n_rot, r->n_ctx_orig, r->beta_fast, r->freq_base));
    float end = ceilf(corr_dim(r->n_rot, r->n_ctx_orig, r->beta_slow, r->freq_base));
    r->corr_dims[0] = start > 0 ? start : 0;
    r->corr_dims[1] = end < (float)(r->n_rot - 1) ? end : (float)(r->n_rot - 1);
}

static float yarn_ramp(float low, float high, int i0) {
    float y = (float)(i0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1 - fminf(1, fmaxf(0, y));
}

void df_rope_cache(const df_rope *r, float pos, float *cache) {
    /* theta advances by repeated F32 multiplication, exactly like ggml_rope_cache_init */
    float theta = pos;
    for (int i0 = 0; i0 < r->n_rot; i0 += 2) {
        float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
        float theta_extrap = theta / ff;
        float theta_interp = r->freq_scale * theta_extrap;
        float th = theta_interp;
        float mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            float mix = yarn_ramp(r->corr_dims[0], r->corr_dims[1], i0) * r->ext_factor;
            /* contracted as gcc does in ggml's rope_yarn (-ffp-contract=fast) */
            th = fmaf(theta_interp, 1 - mix, theta_extrap * mix);
            mscale *= fmaf(0.1f, logf(1.0f / r->freq_scale), 1.0f);
        }
        cache[i0] = cosf(th) * mscale;
        cache[i0 + 1] = sinf(th) * mscale;
        theta *= r->theta_scale;
    }
}

void df_rope_apply(const df_rope *r, const float *cache, float *x, int n_head, int head_stride) {
    int n = r->n_rot;
    for (int h = 0; h < n_head; h++) {
        float *v = x + (size_t)h * head_stride;
        for (int i0 = 0; i0 < n; i0 += 2) {
            float c = cache[i0], s = cache[i0 + 1];
            int a, b;
            if (r->mode == DF_ROPE_NEOX) { a = i0 / 2; b = a + n / 2; }
            else { a = i0; b = i0 + 1; }
            float x0 = v[a], x1 = v[b];
            /* ggml's rotation as gcc contracts it (ops.cpp, -ffp-contract=fast) */
            v[a] = fmaf(x0, c, -(x1 * s));
            v[b] = fmaf(x0, s, x1 * c);
        }
    }
}

void df_rmsnorm(const float *x, const float *w, float *y, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    else for (int i = 0; i < n; i++) y[i] = x[i] * scale;
}

void df_softmax(const float *x, float *y, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float e = expf(x[i] - mx);
        sum += (double)e;
        y[i] = e;
    }
    const float is = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) y[i] *= is;
}

/* ggml's vectorised row ops: the selected kernel table's (kernels.h) */
void df_silu_row(float *x, int n) { df_kernels()->silu(x, n); }

void df_swiglu_rows(float *g, const float *u, int64_t nrows, int64_t ncols) {
    const df_swiglu_fn f = df_kernels()->swiglu;
    for (int64_t r = 0; r < nrows; r++) f(g + r * ncols, u + r * ncols, (int)ncols);
}

void df_softmax_ggml(const float *x, float *y, int n) { df_kernels()->softmax(x, y, n); }

void df_ssm_conv_silu(float *x, int nt, int64_t nc, int C, float *state, const float *taps, float *win) {
    const int cs = C - 1;
    const int vec = df_kernels()->ssm_conv_vec, nv = vec > 0 ? C & ~(vec - 1) : 0;
    for (int64_t ch = 0; ch < nc; ch++) {
        float *st = state + ch * cs;
        const float *w = taps + ch * C;
        for (int i = 0; i < cs; i++) win[i] = st[i];
        for (int t = 0; t < nt; t++) win[cs + t] = x[t * nc + ch];
        for (int t = 0; t < nt; t++) {
            float s = 0.0f;
            for (int i = 0; i < nv; i++) s += win[t + i] * w[i];
            for (int i = nv; i < C; i++) s = fmaf(win[t + i], w[i], s);
            x[t * nc + ch] = s;
        }
        for (int i = 0; i < cs; i++) st[i] = win[nt + i];
    }
    for (int t = 0; t < nt; t++) df_silu_row(x + t * nc, (int)nc);
}

void df_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

/* libstdc++'s __adjust_heap with comp(a, b) = score a > score b (a heap whose top is the
 * smallest score): the hole at `hole` sinks to a leaf along the smaller children, then the value
 * (vs, vi) rises from there while its parent's score is greater */
static void heap_adjust(float *hs, int32_t *hi, int hole, int len, float vs, int32_t vi) {
    const int top = hole;
    int child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (hs[child] > hs[child - 1]) child--;
        hs[hole] = hs[child];
        hi[hole] = hi[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1) - 1;
        hs[hole] = hs[child];
        hi[hole] = hi[child];
        hole = child;
    }
    for (int parent = (hole - 1) / 2; hole > top && hs[parent] > vs; parent = (hole - 1) / 2) {
        hs[hole] = hs[parent];
        hi[hole] = hi[parent];
        hole = parent;
    }
    hs[hole] = vs;
    hi[hole] = vi;
}

void df_top_k_select(const float *s, int n, int k, int32_t *idx, float *hs) {
    for (int i = 0; i < k; i++) { idx[i] = i; hs[i] = s[i]; }
    for (int parent = (k - 2) / 2; k >= 2 && parent >= 0; parent--) /* make_heap */
        heap_adjust(hs, idx, parent, k, hs[parent], idx[parent]);
    for (int i = k; i < n; i++) /* __heap_select: replace the top by each index that beats it */
        if (s[i] > hs[0]) heap_adjust(hs, idx, 0, k, s[i], i);
}
