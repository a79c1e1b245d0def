/* test_model.c — model loading and the CPU forward pass:
 *  - ops (RMSNorm, softmax, RoPE NORM/NEOX with YaRN and freq factors) vs double references;
 *  - shape / missing / extra tensor errors on models written with the gguf writer;
 *  - every architecture: one batch vs token-by-token vs small batches give the same logits;
 *  - routed experts through a streaming provider (pread at df_model_expert_loc) give the same
 *    logits as resident experts;
 *  - llama-2-tiny-random greedy tokens equal llama.cpp's (captured with
 *    `llama-completion -m llama-2-tiny-random.gguf -p "Hello world" -n 16 --temp 0 -no-cnv`,
 *    prompt ids [1, 15043, 3186]; text " processedlijParam współcro ogni heading igual existed
 *    VARCHAR causing Kun sandgenderolasʀ"). */
#include "model/model.h"
#include "runtime/loader.h"
#include "weights/weights.h"
#include "forward/session.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "testlib.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <math.h>
#include <unistd.h>

/* ---------------------------------------------------------------- ops */
static void test_ops(void) {
    float x[67], w[67], y[67];
    uint32_t s = 7;
    for (int i = 0; i < 67; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((s >> 8) / 16777216.0f - 0.5f) * 6.0f;
        w[i] = 0.5f + (float)i / 67.0f;
    }
    df_rmsnorm(x, w, y, 67, 1e-5f);
    double ss = 0;
    for (int i = 0; i < 67; i++) ss += (double)x[i] * x[i];
    double sc = 1.0 / sqrt(ss / 67 + 1e-5);
    double maxerr = 0;
    for (int i = 0; i < 67; i++) maxerr = fmax(maxerr, fabs(y[i] - x[i] * sc * w[i]) / (fabs(x[i] * sc * w[i]) + 1e-6));
    CHECK_MSG(maxerr < 1e-6, "rmsnorm rel err %g", maxerr);

    df_softmax(x, y, 67);
    double mx = -1e30, sum = 0, tot = 0;
    for (int i = 0; i < 67; i++) mx = fmax(mx, x[i]);
    for (int i = 0; i < 67; i++) sum += exp((double)x[i] - mx);
    maxerr = 0;
    for (int i = 0; i < 67; i++) {
        double r = exp((double)x[i] - mx) / sum;
        maxerr = fmax(maxerr, fabs(y[i] - r) / r);
        tot += y[i];
    }
    CHECK_MSG(maxerr < 1e-5, "softmax rel err %g", maxerr);
    CHECK_NEAR(tot, 1.0, 1e-5);

    /* RoPE: both pairings, plain / YaRN / freq factors, vs a double-precision formula */
    const int n_rot = 16, hd = 20, nh = 2;
    float ff[8];
    for (int i = 0; i < 8; i++) ff[i] = 1.0f + i * 0.5f;
    for (int mode = 0; mode <= 2; mode += 2)
        for (int variant = 0; variant < 3; variant++) {
            df_rope r = {.n_rot = n_rot, .mode = mode, .freq_base = 10000.0f, .freq_scale = 1.0f,
                         .ext_factor = 0.0f, .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f,
                         .n_ctx_orig = 4096, .freq_factors = NULL};
            if (variant == 1) { r.freq_scale = 0.25f; r.ext_factor = 1.0f; r.attn_factor = 1.0f / (1.0f + 0.1f * logf(4.0f)); }
            if (variant == 2) r.freq_factors = ff;
            df_rope_init(&r);
            const int pos = 37;
            float cache[16], v[40], v0[40];
            for (int i = 0; i < nh * hd; i++) v0[i] = v[i] = x[i];
            df_rope_cache(&r, (float)pos, cache);
            df_rope_apply(&r, cache, v, nh, hd);
            maxerr = 0;
            for (int h = 0; h < nh; h++)
                for (int i = 0; i < n_rot / 2; i++) {
                    double th = pos * pow(10000.0, -2.0 * i / n_rot);
                    double msc = 1.0;
                    if (variant == 2) th /= ff[i];
                    if (variant == 1) {
                        double corr_lo = floor(n_rot * log(4096 / (32 * 2 * M_PI)) / (2 * log(10000.0)));
                        double corr_hi = ceil(n_rot * log(4096 / (1 * 2 * M_PI)) / (2 * log(10000.0)));
                        if (corr_lo < 0) corr_lo = 0;
                        if (corr_hi > n_rot - 1) corr_hi = n_rot - 1;
                        double ramp = 1 - fmin(1, fmax(0, (i - corr_lo) / fmax(0.001, corr_hi - corr_lo)));
                        th = 0.25 * th * (1 - ramp) + th * ramp;
                        msc = 1.0; /* attn_factor cancels 1 + 0.1 ln(4) */
                    }
                    int a = mode == 2 ? i : 2 * i, b = mode == 2 ? i + n_rot / 2 : 2 * i + 1;
                    double x0 = v0[h * hd + a], x1 = v0[h * hd + b];
                    double ra = (x0 * cos(th) - x1 * sin(th)) * msc, rb = (x0 * sin(th) + x1 * cos(th)) * msc;
                    maxerr = fmax(maxerr, fmax(fabs(v[h * hd + a] - ra), fabs(v[h * hd + b] - rb)));
                }
            for (int h = 0; h < nh; h++)
                for (int i = n_rot; i < hd; i++) maxerr = fmax(maxerr, fabs(v[h * hd + i] - v0[h * hd + i]));
            CHECK_MSG(maxerr < 2e-4, "rope mode %d variant %d err %g", mode, variant, maxerr);
        }
}

/* ---------------------------------------------------------------- random model writer */
typedef struct {
    const char *arch;
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_expert, n_used, n_ff_exp, n_ff_shexp;
    int n_vocab;
    int type;                 /* matrices: DF_TYPE_F32 / F16 / Q8_0 */
    const char *bad_shape;    /* tensor written with a wrong shape */
    const char *skip;         /* tensor left out */
    bool extra;               /* add an unknown tensor */
} spec;

static uint32_t g_rng = 12345;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) / 16777216.0 - 0.5);
}

static void **g_bufs;
static int g_nbufs;

static void add_t(df_gguf_writer *w, const spec *s, const char *name, int n_dims, int64_t a, int64_t b,
                  int64_t c, int type, float scale) {
    if (s->skip && !strcmp(name, s->skip)) return;
    int64_t ne[3] = {a, b, c};
    if (s->bad_shape && !strcmp(name, s->bad_shape)) ne[0] += 32;
    int64_t n = ne[0] * (n_dims > 1 ? ne[1] : 1) * (n_dims > 2 ? ne[2] : 1);
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) f[i] = frand() * scale;
    if (n_dims == 1) for (int64_t i = 0; i < n; i++) f[i] += 1.0f; /* norms around 1 */
    void *data = f;
    if (type != DF_TYPE_F32) {
        uint64_t nb = df_type_row_bytes(type, ne[0]) * (uint64_t)(n / ne[0]);
        data = malloc(nb);
        for (int64_t r = 0; r < n / ne[0]; r++)
            df_quantize_row(type, f + r * ne[0], (char *)data + r * df_type_row_bytes(type, ne[0]), ne[0]);
        free(f);
    }
    g_bufs = realloc(g_bufs, sizeof(void *) * (size_t)(g_nbufs + 1));
    g_bufs[g_nbufs++] = data;
    df_gguf_w_tensor(w, name, type, n_dims, ne, data);
}

static int write_model(const char *path, const spec *s) {
    df_gguf_writer *w = df_gguf_writer_new(32);
    char k[128], n[128];
    const char *A = s->arch;
#define KU(suf, v) do { snprintf(k, sizeof k, "%s.%s", A, suf); df_gguf_w_u32(w, k, (uint32_t)(v)); } while (0)
    df_gguf_w_str(w, "general.architecture", A);
    KU("context_length", 256);
    KU("embedding_length", s->n_embd);
    KU("block_count", s->n_layer);
    KU("feed_forward_length", s->n_ff);
    KU("attention.head_count", s->n_head);
    KU("attention.head_count_kv", s->n_head_kv);
    KU("attention.key_length", s->head_dim);
    KU("attention.value_length", s->head_dim);
    KU("rope.dimension_count", s->head_dim);
    KU("vocab_size", s->n_vocab);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", A);
    df_gguf_w_f32(w, k, 1e-5f);
    if (s->n_expert) {
        KU("expert_count", s->n_expert);
        KU("expert_used_count", s->n_used);
        if (s->n_ff_exp) KU("expert_feed_forward_length", s->n_ff_exp);
        if (s->n_ff_shexp) KU("expert_shared_feed_forward_length", s->n_ff_shexp);
    }
#undef KU
    const int D = s->n_embd, hd = s->head_dim, T = s->type;
    const int nq = s->n_head * hd, nk = s->n_head_kv * hd;
    bool is_llama = !strcmp(A, "llama");
    int fe = is_llama || !strcmp(A, "olmoe") ? s->n_ff : s->n_ff_exp;
    add_t(w, s, "token_embd.weight", 2, D, s->n_vocab, 0, T, 1.0f);
    add_t(w, s, "output_norm.weight", 1, D, 0, 0, DF_TYPE_F32, 0.1f);
    add_t(w, s, "output.weight", 2, D, s->n_vocab, 0, T, 2.0f);
    for (int l = 0; l < s->n_layer; l++) {
#define NM(x) (snprintf(n, sizeof n, "blk.%d." x, l), n)
        add_t(w, s, NM("attn_norm.weight"), 1, D, 0, 0, DF_TYPE_F32, 0.1f);
        add_t(w, s, NM("attn_q.weight"), 2, D, nq, 0, T, 0.5f);
        add_t(w, s, NM("attn_k.weight"), 2, D, nk, 0, T, 0.5f);
        add_t(w, s, NM("attn_v.weight"), 2, D, nk, 0, T, 0.5f);
        add_t(w, s, NM("attn_output.weight"), 2, nq, D, 0, T, 0.5f);
        if (!strcmp(A, "qwen2moe")) {
            add_t(w, s, NM("attn_q.bias"), 1, nq, 0, 0, DF_TYPE_F32, 0.1f);
            add_t(w, s, NM("attn_k.bias"), 1, nk, 0, 0, DF_TYPE_F32, 0.1f);
            add_t(w, s, NM("attn_v.bias"), 1, nk, 0, 0, DF_TYPE_F32, 0.1f);
        }
        if (!strcmp(A, "qwen3moe")) {
            add_t(w, s, NM("attn_q_norm.weight"), 1, hd, 0, 0, DF_TYPE_F32, 0.1f);
            add_t(w, s, NM("attn_k_norm.weight"), 1, hd, 0, 0, DF_TYPE_F32, 0.1f);
        }
        if (!strcmp(A, "olmoe")) {
            add_t(w, s, NM("attn_q_norm.weight"), 1, D, 0, 0, DF_TYPE_F32, 0.1f);
            add_t(w, s, NM("attn_k_norm.weight"), 1, D, 0, 0, DF_TYPE_F32, 0.1f);
        }
        add_t(w, s, NM("ffn_norm.weight"), 1, D, 0, 0, DF_TYPE_F32, 0.1f);
        if (!s->n_expert) {
            add_t(w, s, NM("ffn_gate.weight"), 2, D, s->n_ff, 0, T, 0.5f);
            add_t(w, s, NM("ffn_up.weight"), 2, D, s->n_ff, 0, T, 0.5f);
            add_t(w, s, NM("ffn_down.weight"), 2, s->n_ff, D, 0, T, 0.5f);
        } else {
            add_t(w, s, NM("ffn_gate_inp.weight"), 2, D, s->n_expert, 0, DF_TYPE_F32, 3.0f);
            add_t(w, s, NM("ffn_gate_exps.weight"), 3, D, fe, s->n_expert, T, 0.5f);
            add_t(w, s, NM("ffn_up_exps.weight"), 3, D, fe, s->n_expert, T, 0.5f);
            add_t(w, s, NM("ffn_down_exps.weight"), 3, fe, D, s->n_expert, T, 0.5f);
            if (!strcmp(A, "qwen2moe")) {
                add_t(w, s, NM("ffn_gate_inp_shexp.weight"), 1, D, 0, 0, DF_TYPE_F32, 0.5f);
                add_t(w, s, NM("ffn_gate_shexp.weight"), 2, D, s->n_ff_shexp, 0, T, 0.5f);
                add_t(w, s, NM("ffn_up_shexp.weight"), 2, D, s->n_ff_shexp, 0, T, 0.5f);
                add_t(w, s, NM("ffn_down_shexp.weight"), 2, s->n_ff_shexp, D, 0, T, 0.5f);
            }
        }
#undef NM
    }
    if (s->extra) add_t(w, s, "blk.0.bogus.weight", 1, D, 0, 0, DF_TYPE_F32, 1.0f);
    int rc = df_gguf_writer_save(w, path);
    df_gguf_writer_free(w);
    for (int i = 0; i < g_nbufs; i++) free(g_bufs[i]);
    free(g_bufs);
    g_bufs = NULL;
    g_nbufs = 0;
    return rc;
}

static spec base_spec(const char *arch) {
    spec s = {.arch = arch, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
              .n_ff = 96, .n_vocab = 100, .type = DF_TYPE_F32};
    if (strcmp(arch, "llama")) { s.n_expert = 6; s.n_used = 2; s.n_ff_exp = 32; }
    if (!strcmp(arch, "qwen2moe")) s.n_ff_shexp = 64;
    if (!strcmp(arch, "olmoe")) { s.n_head_kv = 4; s.n_ff = 32; }
    return s;
}

static char g_dir[256];

/* ---------------------------------------------------------------- load errors */
static void test_errors(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/bad.gguf", g_dir);
    df_model *m = NULL;
    spec s = base_spec("llama");
    s.bad_shape = "blk.1.attn_k.weight";
    CHECK_EQ_INT(write_model(p, &s), DF_OK);
    int rc = df_model_load(p, NULL, 0, &m);
    CHECK_EQ_INT(rc, DF_ERR_FORMAT);
    CHECK_MSG(strstr(df_errmsg(), "blk.1.attn_k.weight") && strstr(df_errmsg(), "wrong shape"), "%s", df_errmsg());
    CHECK(m == NULL);

    s = base_spec("qwen3moe");
    s.skip = "blk.1.attn_k_norm.weight";
    write_model(p, &s);
    rc = df_model_load(p, NULL, 0, &m);
    CHECK_EQ_INT(rc, DF_ERR_FORMAT);
    CHECK_MSG(strstr(df_errmsg(), "missing tensor 'blk.1.attn_k_norm.weight'"), "%s", df_errmsg());

    s = base_spec("qwen2moe");
    s.extra = true;
    write_model(p, &s);
    rc = df_model_load(p, NULL, 0, &m);
    CHECK_EQ_INT(rc, DF_ERR_FORMAT);
    CHECK_MSG(strstr(df_errmsg(), "wrong number of tensors") && strstr(df_errmsg(), "blk.0.bogus.weight"),
              "%s", df_errmsg());

    s = base_spec("olmoe");
    s.bad_shape = "blk.0.ffn_down_exps.weight";
    write_model(p, &s);
    rc = df_model_load(p, NULL, 0, &m);
    CHECK_MSG(rc == DF_ERR_FORMAT && strstr(df_errmsg(), "blk.0.ffn_down_exps.weight"), "%s", df_errmsg());

    rc = df_model_load("/nonexistent/x.gguf", NULL, 0, &m);
    CHECK(rc < 0);
    unlink(p);
}

/* ---------------------------------------------------------------- forward consistency */
static int run_logits(df_model *m, const int32_t *ids, int n, int n_batch, int mode, float *out) {
    /* mode 0: one decode with all logits; 1: token by token; 2: one decode, last logits only */
    deltafin_ctx *c = NULL;
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = 64;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    int rc = deltafin_ctx_create(m, &cp, &c);
    if (rc < 0) return rc;
    const int V = deltafin_model_n_vocab(m);
    if (mode == 0) {
        rc = deltafin_decode(c, ids, n, true);
        for (int i = 0; rc == 0 && i < n; i++) memcpy(out + (size_t)i * V, deltafin_logits(c, i), sizeof(float) * (size_t)V);
    } else if (mode == 2) {
        rc = deltafin_decode(c, ids, n, false);
        if (rc == 0) memcpy(out + (size_t)(n - 1) * V, deltafin_logits(c, -1), sizeof(float) * (size_t)V);
        if (rc == 0 && deltafin_logits(c, 0) != deltafin_logits(c, -1)) rc = -100;
    } else {
        for (int i = 0; rc == 0 && i < n; i++) {
            rc = deltafin_decode(c, ids + i, 1, false);
            if (rc == 0) memcpy(out + (size_t)i * V, deltafin_logits(c, -1), sizeof(float) * (size_t)V);
        }
    }
    deltafin_ctx_free(c);
    return rc;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

typedef struct { df_model *m; int fd; void *buf[DF_EXPERT_NPARTS]; int n_acq; } pread_prov;

static int pp_acquire(void *ud, int layer, int expert, df_expert_w *out) {
    pread_prov *p = ud;
    for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
        df_expert_loc loc;
        int rc = df_model_expert_loc(p->m, layer, expert, part, &loc);
        if (rc < 0) return rc;
        if (pread(p->fd, p->buf[part], loc.nbytes, (off_t)loc.offset) != (ssize_t)loc.nbytes) return DF_ERR_IO;
        out->w[part] = p->buf[part];
        out->type[part] = loc.type;
    }
    p->n_acq++;
    return DF_OK;
}
static void pp_release(void *ud, int layer, int expert) { (void)ud; (void)layer; (void)expert; }

/* An expert source that computes the odd experts itself, the way a remote owner does
 * (dist/worker.c): the moe.c side of df_expert_source.submit/poll/complete. */
typedef struct {
    pread_prov *pp;
    df_model *m;
    df_moe_bufs b;
    void *mem;
    int n_submit, n_poll, n_complete, n_remote;
} remote_src;

static int rs_acquire(void *ud, int l, int e, df_expert_w *out) {
    remote_src *r = ud;
    CHECK(e % 2 == 0); /* moe.c acquires only what submit left local */
    return pp_acquire(r->pp, l, e, out);
}
static void rs_release(void *ud, int l, int e) { (void)ud; (void)l; (void)e; }
static int rs_submit(void *ud, const df_expert_job *job, uint8_t *local) {
    remote_src *r = ud;
    for (int u = 0; u < job->n_union; u++) local[u] = job->e_union[u] % 2 == 0;
    r->n_submit++;
    return DF_OK;
}
static void rs_poll(void *ud) { ((remote_src *)ud)->n_poll++; }
static int rs_complete(void *ud, const df_expert_job *job) {
    remote_src *r = ud;
    r->n_complete++;
    int64_t n_ff;
    df_model_expert_shape(r->m, job->layer, DF_EXPERT_GATE, NULL, &n_ff, NULL);
    for (int u = 0; u < job->n_union; u++) {
        const int e = job->e_union[u];
        if (e % 2 == 0) continue;
        const int n = job->e_off[e + 1] - job->e_off[e];
        const int32_t *lst = job->e_list + job->e_off[e];
        for (int i = 0; i < n; i++)
            memcpy(r->b.xg + (int64_t)i * job->d_in, job->x + (int64_t)(lst[i] / job->k) * job->d_in,
                   sizeof(float) * (size_t)job->d_in);
        df_expert_w w;
        int rc = pp_acquire(r->pp, job->layer, e, &w);
        if (rc < 0) return rc;
        df_moe_expert_rows(&r->b, &r->m->hp, &r->m->layers[job->layer], e, &w, job->d_in, n_ff, job->d_out, n);
        for (int i = 0; i < n; i++)
            memcpy(job->y + (int64_t)lst[i] * job->d_out, r->b.yg + (int64_t)i * job->d_out,
                   sizeof(float) * (size_t)job->d_out);
        r->n_remote++;
    }
    return DF_OK;
}

/* remote_src's buffers for n rows, carved as a worker carves them */
static int rs_bufs(remote_src *r, int n, df_pool *pool) {
    df_moe_dims dm;
    const uint64_t bytes = df_moe_bufs_bytes(r->m, n, &dm);
    char *q = r->mem = df_aligned_alloc(64, (size_t)bytes);
    if (!q) return DF_ERR_NOMEM;
    r->b.pool = pool;
    r->b.act = q; q += df_pad(dm.act_bytes, 64);
    r->b.xg = (float *)q; q += df_pad((uint64_t)n * dm.d_in * 4, 64);
    r->b.fa = (float *)q; q += df_pad((uint64_t)n * dm.n_ff * 4, 64);
    r->b.fb = (float *)q; q += df_pad((uint64_t)n * dm.n_ff * 4, 64);
    r->b.yg = (float *)q; q += df_pad((uint64_t)n * dm.d_out * 4, 64);
    CHECK((uint64_t)(q - (char *)r->mem) == bytes);
    return DF_OK;
}

static void test_arch(const char *arch, int type) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s.gguf", g_dir, arch);
    spec s = base_spec(arch);
    s.type = type;
    CHECK_EQ_INT(write_model(p, &s), DF_OK);
    df_model *m = NULL;
    deltafin_model_params mp = deltafin_model_default_params();
    int rc = df_model_load(p, &mp, 0, &m);
    CHECK_MSG(rc == DF_OK, "%s: %s", arch, df_errmsg());
    if (rc) return;
    CHECK_STR(deltafin_model_arch(m), arch);
    const int n = 12, V = s.n_vocab;
    int32_t ids[12];
    for (int i = 0; i < n; i++) ids[i] = (i * 37 + 5) % V;
    float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)n * V),
          *c = malloc(sizeof(float) * (size_t)n * V);
    CHECK_EQ_INT(run_logits(m, ids, n, 512, 0, a), DF_OK);
    CHECK_EQ_INT(run_logits(m, ids, n, 512, 1, b), DF_OK);
    CHECK_EQ_INT(run_logits(m, ids, n, 5, 0, c), DF_OK);
    double d1 = max_diff(a, b, (size_t)n * V), d2 = max_diff(a, c, (size_t)n * V);
    /* F32 weights (and F16 / BF16 where the kernel table has their tinyBLAS GEMM, as the avx2
     * table does): a batch goes through tinyBLAS's GEMM order and one token through vec_dot's,
     * as in llama.cpp, so batch and token-by-token logits differ by rounding (amplified by the
     * F16 rounding of Q in attention); exact otherwise */
    const df_kernel_table *kt = df_kernels();
    const bool by_rows = type == DF_TYPE_F32 || (type == DF_TYPE_F16 && kt->gemm_f16) ||
                         (type == DF_TYPE_BF16 && kt->gemm_bf16);
    const double tol = by_rows ? 2e-2 : 1e-3;
    CHECK_MSG(d1 < tol, "%s type %d: batch vs token-by-token max diff %g", arch, type, d1);
    CHECK_MSG(d2 < tol, "%s type %d: batch 512 vs batch 5 max diff %g", arch, type, d2);
    /* last-logits-only decode (last layer FFN on the output row only) = the all-logits row
     * (bit for bit, except where F32 weights change order with the row count, see above) */
    const double tol_last = by_rows ? 1e-3 : 0.0;
    CHECK_EQ_INT(run_logits(m, ids, n, 512, 2, b), DF_OK);
    CHECK_MSG(max_diff(a + (size_t)(n - 1) * V, b + (size_t)(n - 1) * V, (size_t)V) <= tol_last,
              "%s: last-only logits differ", arch);
    CHECK_EQ_INT(run_logits(m, ids, n, 5, 2, b), DF_OK);
    CHECK_MSG(max_diff(c + (size_t)(n - 1) * V, b + (size_t)(n - 1) * V, (size_t)V) <= tol_last,
              "%s: last-only logits (batch 5) differ", arch);
    bool finite = true, varied = false;
    for (int i = 0; i < n * V; i++) { finite &= isfinite(a[i]); varied |= a[i] != a[0]; }
    CHECK(finite && varied);

    df_footprint plan;
    df_model_footprint(m, 64, &plan);
    CHECK_EQ_INT(plan.kv_bytes_per_token, (uint64_t)s.n_layer * s.n_head_kv * 2 * s.head_dim * 2);
    CHECK(plan.dense_bytes > 0 && df_session_scratch_bytes(m, 512, 1) > 0);
    CHECK((plan.expert_bytes > 0) == (s.n_expert > 0));

    if (s.n_expert) {
        /* experts streamed through a provider must give bit-identical logits */
        df_model *m2 = NULL;
        rc = df_model_load(p, &mp, DF_LOAD_SKIP_EXPERTS, &m2);
        CHECK_EQ_INT(rc, DF_OK);
        if (rc == DF_OK) {
            CHECK(m2->w->expert_bytes == 0 && m2->w->dense_bytes < plan.dense_bytes + plan.expert_bytes);
            deltafin_ctx *cx = NULL;
            CHECK(deltafin_ctx_create(m2, NULL, &cx) == DF_ERR_INVALID); /* no provider yet */
            pread_prov pp = {.m = m2, .fd = open(p, O_RDONLY)};
            for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
                uint64_t nb;
                df_model_expert_shape(m2, 0, part, NULL, NULL, &nb);
                pp.buf[part] = malloc(nb);
                /* location = tensor offset + e * slice bytes, inside the tensor */
                df_expert_loc loc;
                CHECK_EQ_INT(df_model_expert_loc(m2, 1, s.n_expert - 1, part, &loc), DF_OK);
                const df_tensor *t = m2->layers[1].exps[part];
                CHECK_EQ_INT(loc.offset + loc.nbytes, t->info->offset + t->info->nbytes);
                CHECK_EQ_INT(loc.nbytes, nb);
            }
            df_expert_loc loc;
            CHECK(df_model_expert_loc(m2, 0, s.n_expert, 0, &loc) == DF_ERR_INVALID);
            df_expert_source pv = {.ud = &pp, .acquire = pp_acquire, .release = pp_release};
            df_weights_set_experts(m2->w, &pv);
            CHECK_EQ_INT(run_logits(m2, ids, n, 512, 0, c), DF_OK);
            CHECK_MSG(max_diff(a, c, (size_t)n * V) == 0.0, "%s: provider logits differ", arch);
            CHECK(pp.n_acq > 0 && pp.n_acq <= s.n_layer * s.n_expert);
            /* half the experts computed by the source (as remote owners): the same bits */
            remote_src rs = {.pp = &pp, .m = m2};
            df_pool *pool = df_pool_create(1);
            CHECK_EQ_INT(rs_bufs(&rs, n, pool), DF_OK);
            df_expert_source rv = {.ud = &rs, .acquire = rs_acquire, .release = rs_release, .submit = rs_submit,
                                   .poll = rs_poll, .complete = rs_complete};
            df_weights_set_experts(m2->w, &rv);
            CHECK_EQ_INT(run_logits(m2, ids, n, 512, 0, c), DF_OK);
            CHECK_MSG(max_diff(a, c, (size_t)n * V) == 0.0, "%s: logits with remote experts differ", arch);
            CHECK_EQ_INT(run_logits(m, ids, n, 1, 1, b), DF_OK); /* token by token: one row per expert */
            CHECK_EQ_INT(run_logits(m2, ids, n, 1, 1, c), DF_OK);
            CHECK_MSG(max_diff(b, c, (size_t)n * V) == 0.0, "%s: logits with remote experts (decode) differ", arch);
            CHECK(rs.n_remote > 0 && rs.n_submit > 0 && rs.n_submit == rs.n_complete);
            free(rs.mem);
            df_pool_free(pool);
            for (int part = 0; part < DF_EXPERT_NPARTS; part++) free(pp.buf[part]);
            close(pp.fd);
            deltafin_model_free(m2);
        }
    }
    free(a);
    free(b);
    free(c);
    deltafin_model_free(m);
    unlink(p);
}

/* MoE routing invariants: k distinct experts per token, weights as configured. */
static void test_routing(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/route.gguf", g_dir);
    const char *archs[] = {"qwen3moe", "qwen2moe"};
    for (int ai = 0; ai < 2; ai++) {
        spec s = base_spec(archs[ai]);
        write_model(p, &s);
        df_model *m = NULL;
        if (df_model_load(p, NULL, 0, &m) != DF_OK) { CHECK(0); continue; }
        deltafin_ctx *c = NULL;
        deltafin_ctx_params cp = deltafin_ctx_default_params();
        cp.n_ctx = 16;
        CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &c), DF_OK);
        float x[4 * 64];
        for (int i = 0; i < 4 * 64; i++) x[i] = frand();
        df_moe_route(c, 0, x, 4);
        for (int t = 0; t < 4; t++) {
            const int32_t *idx = c->sel + t * s.n_used;
            const float *w = c->selw + t * s.n_used;
            CHECK(idx[0] != idx[1] && idx[0] >= 0 && idx[1] < s.n_expert);
            /* reference: softmax over the router logits, top-k */
            float lg[6], pr[6];
            const df_tensor *gi = m->layers[0].gate_inp;
            for (int e = 0; e < 6; e++) {
                double d = 0;
                for (int i = 0; i < 64; i++) d += (double)((float *)gi->data)[e * 64 + i] * x[t * 64 + i];
                lg[e] = (float)d;
            }
            double mx = -1e30, sum = 0;
            for (int e = 0; e < 6; e++) mx = fmax(mx, lg[e]);
            for (int e = 0; e < 6; e++) sum += exp(lg[e] - mx);
            for (int e = 0; e < 6; e++) pr[e] = (float)(exp(lg[e] - mx) / sum);
            CHECK(pr[idx[0]] >= pr[idx[1]]);
            for (int e = 0; e < 6; e++) if (e != idx[0] && e != idx[1]) CHECK(pr[e] <= pr[idx[1]] + 1e-6);
            if (ai == 0) CHECK_NEAR(w[0] + w[1], 1.0, 1e-6);        /* renormalized */
            else CHECK_NEAR(w[0], pr[idx[0]], 1e-5);                 /* raw probabilities */
        }
        deltafin_ctx_free(c);
        deltafin_model_free(m);
    }
    unlink(p);
}

/* ---------------------------------------------------------------- llama.cpp reference */
static void test_llama2_tiny(void) {
    char p[512];
    df_fixture("models/llama-2-tiny-random.gguf", p, sizeof p);
    df_model *m = NULL;
    int rc = df_model_load(p, NULL, 0, &m);
    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
    if (rc) return;
    CHECK_EQ_INT(deltafin_model_n_vocab(m), 32000);
    CHECK_EQ_INT(deltafin_model_n_ctx_train(m), 4096);
    CHECK_STR(deltafin_model_meta_str(m, "general.name"), "LLaMA v2");
    static const int32_t expect[16] = {19356, 7267, 4736, 26640, 24077, 18579, 28435, 21432,
                                       22856, 21748, 10805, 25472, 11982, 26098, 16118, 31167};
    for (int nb = 1; nb <= 512; nb *= 512) {
        deltafin_ctx *c = NULL;
        deltafin_ctx_params cp = deltafin_ctx_default_params();
        cp.n_batch = nb;
        CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &c), DF_OK);
        int32_t ids[3] = {1, 15043, 3186};
        CHECK_EQ_INT(deltafin_decode(c, ids, 3, false), DF_OK);
        int ok = 0;
        for (int g = 0; g < 16; g++) {
            const float *l = deltafin_logits(c, -1);
            int32_t best = 0;
            for (int i = 1; i < 32000; i++) if (l[i] > l[best]) best = i;
            ok += best == expect[g];
            if (deltafin_decode(c, &best, 1, false) != DF_OK) break;
        }
        CHECK_MSG(ok == 16, "n_batch %d: %d/16 greedy tokens match llama.cpp", nb, ok);
        CHECK_EQ_INT(deltafin_ctx_pos(c), 3 + 16);
        CHECK_EQ_INT(deltafin_ctx_truncate(c, 3), DF_OK);
        CHECK_EQ_INT(deltafin_ctx_pos(c), 3);
        CHECK(deltafin_ctx_truncate(c, 10) == DF_ERR_INVALID);
        int32_t bad = 40000;
        CHECK(deltafin_decode(c, &bad, 1, false) == DF_ERR_INVALID);
        CHECK_EQ_INT(deltafin_ctx_pos(c), 3);
        deltafin_stats st;
        deltafin_ctx_stats(c, &st);
        CHECK(st.n_prompt_tokens == 3 && st.n_gen_tokens == 16);
        deltafin_ctx_free(c);
    }
    /* vocabulary and chat wrappers */
    int32_t tk[8];
    CHECK_EQ_INT(deltafin_tokenize(m, "Hello world", 11, true, true, tk, 8), 3);
    CHECK(tk[0] == 1 && tk[1] == 15043 && tk[2] == 3186);
    CHECK_EQ_INT(deltafin_tokenize(m, "Hello world", 11, false, true, tk, 1), 2); /* needs 2 */
    char piece[16];
    int np = deltafin_token_to_piece(m, 15043, false, piece, sizeof piece);
    CHECK(np == 6 && !memcmp(piece, " Hello", 6));
    CHECK_EQ_INT(deltafin_token_bos(m), 1);
    CHECK_EQ_INT(deltafin_token_eos(m), 2);
    CHECK(deltafin_token_is_eog(m, 2) && !deltafin_token_is_eog(m, 15043));
    deltafin_chat_msg msgs[2] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "hi"}};
    char *chat = NULL;
    int crc = deltafin_chat_render(m, NULL, msgs, 2, NULL, true, &chat); /* no template: chatml */
    CHECK_MSG(crc == DF_OK && chat && strstr(chat, "<|im_start|>user\nhi<|im_end|>") &&
              strstr(chat + strlen(chat) - 22, "<|im_start|>assistant\n"), "%s", chat ? chat : df_errmsg());
    free(chat);
    chat = NULL;
    CHECK(deltafin_chat_render(m, "no-such-template", msgs, 2, NULL, true, &chat) == DF_ERR_INVALID && !chat);
    /* streaming detokenizer: characters split over byte tokens come out whole */
    {
        const char txt[] = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80!";
        int32_t di[64];
        int nd = deltafin_tokenize(m, txt, sizeof txt - 1, false, false, di, 64);
        CHECK(nd > 0 && nd <= 64);
        deltafin_detok *d = deltafin_detok_create(m, false);
        CHECK(d != NULL);
        char all[256], pieces[256];
        size_t na = 0, npc = 0;
        int held = 0; /* pushes that held back the start of a character */
        for (int i = 0; d && i < nd && i < 64; i++) {
            const char *t;
            int n = deltafin_detok_push(d, di[i], &t);
            CHECK(n >= 0 && deltafin_utf8_valid_prefix(t, (size_t)(n > 0 ? n : 0)) == (size_t)(n > 0 ? n : 0));
            if (n > 0 && na + (size_t)n < sizeof all) memcpy(all + na, t, (size_t)n), na += (size_t)n;
            int pl = deltafin_token_to_piece(m, di[i], false, pieces + npc, (int)(sizeof pieces - npc));
            if (n == 0 && pl > 0) held++;
            npc += (size_t)pl;
        }
        CHECK(held > 0); /* the emoji is byte tokens here */
        const char *t;
        CHECK(d && deltafin_detok_flush(d, &t) == 0);
        CHECK(na == npc && !memcmp(all, pieces, na)); /* valid text: the pieces themselves */
        CHECK(na >= sizeof txt - 1 && !memcmp(all + na - (sizeof txt - 1), txt, sizeof txt - 1));
        CHECK(d && deltafin_detok_push(d, 40000, &t) < 0); /* outside the vocabulary */
        if (d) deltafin_detok_reset(d);
        deltafin_detok_free(d);
        char san[16];
        CHECK_EQ_INT(deltafin_utf8_sanitize("a\xE2\x82" "b", 4, san), 5);
        CHECK(!memcmp(san, "a\xEF\xBF\xBD" "b", 5));
        CHECK_EQ_INT(deltafin_utf8_valid_prefix("ab\xC0\x80", 4), 2);
    }
    /* context full */
    deltafin_ctx *c = NULL;
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = 4;
    CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &c), DF_OK);
    int32_t ids[5] = {1, 2, 3, 4, 5};
    CHECK(deltafin_decode(c, ids, 5, false) == DF_ERR_RANGE);
    CHECK_EQ_INT(deltafin_decode(c, ids, 4, false), DF_OK);
    CHECK(deltafin_decode(c, ids, 1, false) == DF_ERR_RANGE);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
}

/* The memory plan reserves KV for n_seq sequences of n_ctx tokens: under a memory limit a
 * larger context, or more contexts, are refused with a message; without a limit they are
 * allowed; info's KV follows n_ctx. */
static void test_plan_reserve(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/plan.gguf", g_dir);
    spec s = base_spec("qwen3moe");
    s.type = DF_TYPE_Q8_0;
    CHECK_EQ_INT(write_model(p, &s), DF_OK);
    deltafin_model_params mp = deltafin_model_default_params();
    mp.mem_limit = 1ull << 30;
    mp.n_ctx = 64;
    mp.n_seq = 2;
    df_model *m = NULL;
    int rc = df_model_load(p, &mp, 0, &m);
    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
    if (rc) return;
    deltafin_plan pl;
    CHECK_EQ_INT(deltafin_model_plan(m, &pl), DF_OK);
    CHECK(pl.n_ctx == 64 && pl.n_seq == 2);
    df_footprint fp;
    df_model_footprint(m, 64, &fp);
    CHECK_EQ_INT((long long)pl.kv_bytes, 2LL * (long long)fp.kv_bytes);
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    deltafin_ctx *a = NULL, *b = NULL, *c = NULL;
    CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &a), DF_OK);
    CHECK(a && deltafin_ctx_n_ctx(a) == 64); /* the planned context is the default */
    cp.n_ctx = 128;
    CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &b), DF_ERR_RANGE);
    CHECK_MSG(strstr(df_errmsg(), "exceeds the memory plan") != NULL, "msg: %s", df_errmsg());
    cp.n_ctx = 32;
    CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &b), DF_OK);
    CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &c), DF_ERR_RANGE); /* a third sequence */
    CHECK_MSG(strstr(df_errmsg(), "2 sequences") != NULL, "msg: %s", df_errmsg());
    deltafin_ctx_free(b);
    b = NULL;
    CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &c), DF_OK); /* freed: its sequence is back */
    deltafin_ctx_free(a);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    /* no limit: nothing is refused */
    mp.mem_limit = 0;
    rc = df_model_load(p, &mp, 0, &m);
    CHECK_EQ_INT(rc, DF_OK);
    if (rc == DF_OK) {
        cp.n_ctx = 256;
        deltafin_ctx *x[3] = {0};
        for (int i = 0; i < 3; i++) CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &x[i]), DF_OK);
        for (int i = 0; i < 3; i++) deltafin_ctx_free(x[i]);
        deltafin_model_free(m);
    }
    unlink(p);
}

int main(void) {
    df_init();
    snprintf(g_dir, sizeof g_dir, "/tmp/df_test_model_%d", (int)getpid());
    mkdir(g_dir, 0700);
    test_ops();
    test_errors();
    const char *archs[] = {"llama", "qwen2moe", "qwen3moe", "olmoe"};
    for (int i = 0; i < 4; i++) {
        test_arch(archs[i], DF_TYPE_F32);
        test_arch(archs[i], DF_TYPE_Q8_0);
    }
    test_arch("llama", DF_TYPE_F16);
    test_routing();
    test_plan_reserve();
    test_llama2_tiny();
    rmdir(g_dir);
    TEST_MAIN_END("test_model");
}
