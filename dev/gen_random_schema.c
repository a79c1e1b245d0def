/* gen_random_schema.c — the tensors of a random model, from the architecture's schema (the
 * table the binder reads: src/model/schema.h), so gen-random cannot drift from what loading
 * expects. The generators (gen_random*.c) write the KVs and describe the model as df_hparams
 * plus their choices for optional tensors and alternatives; this file walks the schema, picks
 * each tensor's type, and writes the file.
 *
 * Values: each tensor has its own splitmix64 stream seeded from (seed, tensor name) and values
 * U·scale + offset by role (gr_scale), one IEEE rounding per operation, a correctly rounded
 * sqrtf and expf only for recurrent decays — recorded test models depend on these bits.
 * Files are written one chunk of rows at a time (models larger than RAM); the data section's
 * padding is a hole, --sparse leaves the whole data section a hole. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "dev/gen_random.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

typedef struct {
    char name[64];
    int role, type, n_dims, flags;
    int64_t ne[3];
} gr_tensor;

typedef struct {
    const gr_model *g;
    df_gguf_writer *w;
    gr_tensor *t;
    int n, cap;
} gr_list;

/* The type written: F32 for vectors, routers and conv taps; else the matrix / expert type. A
 * row that does not fit the type's block is an error, or (type_fallback) falls back to Q8_0
 * when a multiple of 32 (like llama-quantize's fallback for K-quants), else to F16. */
static int pick_type(const gr_model *g, const gr_tensor *t, int *out) {
    if (t->role == DF_R_INDEX) {
        *out = DF_TYPE_I32;
        return DF_OK;
    }
    if (t->n_dims == 1 || (t->flags & DF_T_NORM) || t->role == DF_R_ROUTER || t->role == DF_R_CONV ||
        t->role == DF_R_HC || t->role == DF_R_APE) {
        *out = DF_TYPE_F32; /* vectors, 2-D biases (gpt-oss per-expert) */
        return DF_OK;
    }
    const int want = (t->flags & DF_T_EXPERT) ? g->exp_type : g->type;
    const df_type_traits *tr = df_type_info(want);
    if (!tr || t->ne[0] % tr->blck == 0) { *out = want; return DF_OK; }
    if (!g->type_fallback)
        return df_err(DF_ERR_INVALID, "tensor %s: row length %lld is not a multiple of %d (%s)", t->name,
                      (long long)t->ne[0], tr->blck, tr->name);
    *out = t->ne[0] % 32 == 0 ? DF_TYPE_Q8_0 : DF_TYPE_F16;
    return DF_OK;
}

static bool list_has(void *ud, uint32_t bit, const char *name) {
    const gr_model *g = ((gr_list *)ud)->g;
    return g->has && g->has(g->ud, bit, name);
}

static int list_visit(void *ud, const df_tensor_spec *s, int il, const char *name, int n_dims, const int64_t ne[3]) {
    gr_list *l = ud;
    const gr_model *g = l->g;
    if ((s->flags & DF_T_OPTIONAL) && !(g->want && g->want(g->ud, s, il))) return DF_OK;
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 256;
        gr_tensor *p = df_realloc(l->t, (size_t)nc * sizeof *p);
        if (!p) return DF_ERR_NOMEM;
        l->t = p;
        l->cap = nc;
    }
    gr_tensor *t = &l->t[l->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->role = s->role;
    t->flags = s->flags;
    t->n_dims = n_dims;
    memcpy(t->ne, ne, sizeof t->ne);
    if ((s->flags & DF_T_RESHAPE) && n_dims == 3) { /* written as the converter does: 2-D */
        t->ne[1] *= t->ne[2];
        t->ne[2] = 1;
        t->n_dims = n_dims = 2;
    }
    int rc = pick_type(g, t, &t->type);
    if (rc) return rc;
    l->n++;
    return df_gguf_w_tensor(l->w, t->name, t->type, n_dims, t->ne, NULL);
}

/* Scale and offset of a tensor's values by role. */
static float gr_scale(const gr_model *g, const gr_tensor *t, float *offset) {
    const float e0 = (float)t->ne[0];
    *offset = 0.0f;
    switch (t->role) {
    case DF_R_NORM: *offset = 1.0f; return 0.2f;
    case DF_R_BIAS: return 0.2f;
    case DF_R_EMBD: return 1.0f;
    case DF_R_MAT: return sqrtf(3.0f / e0) * g->mat_scale;
    case DF_R_ROUTER: return sqrtf(3.0f / e0) * g->router_scale;
    case DF_R_OUT: return sqrtf(3.0f / e0) * g->out_scale;
    case DF_R_RES: return sqrtf(3.0f / e0) * g->res_scale;
    case DF_R_CONV: return sqrtf(3.0f / e0);
    case DF_R_SSM_A: return 1.0f;   /* A_log in [-1, 1); stored as -exp(A_log) */
    case DF_R_DT: return 0.5f;
    case DF_R_HC: return sqrtf(3.0f / e0);
    case DF_R_APE: return 0.2f;
    case DF_R_INDEX: return 1.0f;   /* not a value scale: index_rows draws ids */
    }
    return 1.0f;
}

/* Random valid quantized blocks without an F32 intermediate (--raw-experts): MXFP4 with a
 * shared exponent so the largest code is ~3·scale, Q8_0 with d = scale/127. */
static void raw_row(int type, int64_t e0, uint64_t *st, uint8_t *dst, float scale) {
    if (type == DF_TYPE_MXFP4) {
        int e = 128 + (int)floorf(log2f(scale * 3.0f / 12.0f) + 0.5f);
        if (e < 2) e = 2;
        if (e > 250) e = 250;
        for (int64_t b = 0; b < e0 / 32; b++) {
            uint8_t *blk = dst + b * 17;
            blk[0] = (uint8_t)e;
            uint64_t r0 = gr_splitmix(st), r1 = gr_splitmix(st);
            memcpy(blk + 1, &r0, 8);
            memcpy(blk + 9, &r1, 8);
        }
    } else { /* Q8_0 */
        df_f16 d = df_f32_to_f16(scale / 127.0f);
        for (int64_t b = 0; b < e0 / 32; b++) {
            uint8_t *blk = dst + b * 34;
            memcpy(blk, &d, 2);
            for (int i = 0; i < 32; i += 8) {
                uint64_t r = gr_splitmix(st);
                memcpy(blk + 2 + i, &r, 8);
            }
        }
    }
}

/* --router-skew: add the shared direction d (unit length) to rows r0..r0+nr of token_embd
 * (amplitude 0.25 per component on average: a common part of every token's state) and, per MoE
 * layer, c_e = -S ln(1 + rank_e) / (0.4 sqrt(n_embd)) times d to expert e's router row, so the
 * router logits carry about -S ln(1 + rank) (x . d ~ 0.4 sqrt(n_embd) for the RMS-normed
 * state); rank_e is a per-layer random permutation. The realised popularity is measured, not
 * assumed (`deltafin profile` prints it). */
static void skew_rows(const gr_model *g, const gr_tensor *t, float *f, int64_t r0, int64_t nr) {
    const int64_t n = t->ne[0];
    float *d = df_malloc((size_t)n * sizeof(float));
    if (!d) return;
    uint64_t st = g->seed ^ gr_hash("router-skew direction");
    double nn = 0.0;
    for (int64_t i = 0; i < n; i++) { d[i] = gr_urand(&st); nn += (double)d[i] * d[i]; }
    const float inv = nn > 0 ? (float)(1.0 / sqrt(nn)) : 0.0f;
    for (int64_t i = 0; i < n; i++) d[i] *= inv;
    if (t->role == DF_R_EMBD) {
        const float a = 0.25f * sqrtf((float)n);
        for (int64_t r = 0; r < nr; r++)
            for (int64_t i = 0; i < n; i++) f[r * n + i] += a * d[i];
    } else {
        int il = 0;
        sscanf(t->name, "blk.%d.", &il);
        const int64_t E = t->ne[1];
        int64_t *rank = df_malloc((size_t)E * sizeof(int64_t));
        if (!rank) { free(d); return; }
        for (int64_t e = 0; e < E; e++) rank[e] = e;
        uint64_t sp = g->seed ^ gr_hash("router-skew ranks") ^ (uint64_t)il * 0x9e3779b97f4a7c15ull;
        for (int64_t e = E - 1; e > 0; e--) {
            int64_t j = (int64_t)(gr_splitmix(&sp) % (uint64_t)(e + 1)), tmp = rank[e];
            rank[e] = rank[j];
            rank[j] = tmp;
        }
        for (int64_t r = 0; r < nr; r++) {
            const float ce = -g->router_skew * logf(1.0f + (float)rank[r0 + r]) / (0.4f * sqrtf((float)n));
            for (int64_t i = 0; i < n; i++) f[r * n + i] += ce * d[i];
        }
        free(rank);
    }
    free(d);
}

/* An I32 table of expert ids (deepseek4's ffn_gate_tid2eid {k, n_vocab}): each row k distinct
 * ids below the expert count, a partial Fisher-Yates shuffle of the row's own stream. */
static int index_rows(const gr_model *g, const gr_tensor *t, uint64_t *st, int32_t *dst, int64_t nr) {
    const int64_t k = t->ne[0], E = g->hp.n_expert;
    if (k > E) return df_err(DF_ERR_INVALID, "tensor %s: %lld ids per row from %lld experts", t->name, (long long)k, (long long)E);
    int32_t *perm = df_malloc(sizeof(int32_t) * (size_t)E);
    if (!perm) return DF_ERR_NOMEM;
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t e = 0; e < E; e++) perm[e] = (int32_t)e;
        for (int64_t j = 0; j < k; j++) {
            const int64_t i = j + (int64_t)(gr_splitmix(st) % (uint64_t)(E - j));
            const int32_t x = perm[j];
            perm[j] = perm[i];
            perm[i] = x;
            dst[r * k + j] = perm[j];
        }
    }
    free(perm);
    return DF_OK;
}

/* Generate tensor t and pwrite it at `at` (chunks of whole rows). */
static int write_tensor(const gr_model *g, const gr_tensor *t, int fd, const char *path, uint64_t at) {
    const int64_t e0 = t->ne[0], rows = t->ne[1] * t->ne[2];
    const uint64_t rb = df_type_row_bytes(t->type, e0);
    int64_t chunk = (int64_t)((8u << 20) / (uint64_t)(e0 * 4));
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    float *f = df_malloc((size_t)(chunk * e0) * sizeof(float));
    uint8_t *q = df_malloc((size_t)(rb * (uint64_t)chunk) + 64);
    if (!f || !q) { free(f); free(q); return DF_ERR_NOMEM; }
    float offset;
    const float scale = gr_scale(g, t, &offset);
    uint64_t st = g->seed ^ gr_hash(t->name);
    gr_splitmix(&st);
    const bool raw = g->raw_experts && (t->flags & DF_T_EXPERT) && (t->type == DF_TYPE_MXFP4 || t->type == DF_TYPE_Q8_0);
    int rc = DF_OK;
    for (int64_t r0 = 0; r0 < rows && !rc; r0 += chunk) {
        const int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        if (raw) {
            for (int64_t r = 0; r < nr; r++) raw_row(t->type, e0, &st, q + (uint64_t)r * rb, scale);
        } else if (t->role == DF_R_INDEX) {
            rc = index_rows(g, t, &st, (int32_t *)q, nr);
        } else {
            const int64_t n = nr * e0;
            for (int64_t i = 0; i < n; i++) f[i] = gr_urand(&st) * scale + offset;
            if (t->role == DF_R_SSM_A)
                for (int64_t i = 0; i < n; i++) f[i] = -expf(f[i]);
            if (g->router_skew > 0.0f && (t->role == DF_R_ROUTER || !strcmp(t->name, "token_embd.weight")))
                skew_rows(g, t, f, r0, nr);
            if (t->type == DF_TYPE_F32) {
                memcpy(q, f, (size_t)n * sizeof(float));
            } else if (t->type == DF_TYPE_F16) {
                df_f16 *h = (df_f16 *)q;
                for (int64_t i = 0; i < n; i++) h[i] = df_f32_to_f16(f[i]);
            } else {
                for (int64_t r = 0; r < nr && !rc; r++)
                    rc = df_quantize_row(t->type, f + r * e0, q + (uint64_t)r * rb, e0);
            }
        }
        const uint64_t nb = rb * (uint64_t)nr;
        for (uint64_t done = 0; !rc && done < nb;) {
            ssize_t k = pwrite(fd, q + done, (size_t)(nb - done), (off_t)(at + done));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) rc = df_err(DF_ERR_IO, "%s: write: %s", path, strerror(errno));
            else done += (uint64_t)k;
        }
        at += nb;
    }
    free(f);
    free(q);
    return rc;
}

int gr_write_model(df_gguf_writer *w, const gr_model *g, gr_stats *st) {
    const df_arch *a = df_arch_find(g->arch);
    if (!a) return df_err(DF_ERR_INVALID, "gen-random: no architecture '%s'", g->arch);
    gr_list l = {.g = g, .w = w};
    const df_schema_ops ops = {.has = list_has, .visit = list_visit, .ud = &l};
    int rc = df_schema_walk(a, &g->hp, &ops), fd = -1;
    char *tmp = NULL;
    if (rc) goto done;
    const uint64_t ds = df_gguf_writer_data_start(w);
    uint64_t end = ds;
    memset(st, 0, sizeof *st);
    for (int i = 0; i < l.n; i++) {
        const gr_tensor *t = &l.t[i];
        uint64_t nb = df_type_row_bytes(t->type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2]);
        if (g->pad_end) nb = df_pad(nb, 32);
        uint64_t e = ds + df_gguf_writer_tensor_offset(w, i) + nb;
        if (e > end) end = e;
        st->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2]);
    }
    st->n_tensors = l.n;
    size_t pl = strlen(g->out) + 8;
    tmp = df_malloc(pl);
    if (!tmp) { rc = DF_ERR_NOMEM; goto done; }
    snprintf(tmp, pl, "%s.tmp", g->out);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { rc = df_err(DF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    rc = df_gguf_writer_write_header(w, fd);
    if (!rc && ftruncate(fd, (off_t)end) != 0) rc = df_err(DF_ERR_IO, "%s: ftruncate: %s", tmp, strerror(errno));
    for (int i = 0; i < l.n && !rc && !g->sparse; i++)
        rc = write_tensor(g, &l.t[i], fd, tmp, ds + df_gguf_writer_tensor_offset(w, i));
    if (close(fd) != 0 && !rc) rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    fd = -1;
    if (!rc && rename(tmp, g->out) != 0) rc = df_err(DF_ERR_IO, "%s: rename: %s", g->out, strerror(errno));
    if (rc) unlink(tmp);
done:
    if (fd >= 0) { close(fd); unlink(tmp); }
    free(tmp);
    free(l.t);
    return rc;
}

void gr_default_vocab(const char **vocab, char *buf, size_t cap) {
    if (*vocab) return;
    const char *root = getenv("DELTAFIN_FIXTURES");
    snprintf(buf, cap, "%s/models/tok512.bin", root ? root : "../shared/fixtures");
    *vocab = access(buf, R_OK) == 0 ? buf : "bytes";
}
