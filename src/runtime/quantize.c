/* quantize.c — deltafin_quantize (include/deltafin.h): convert a GGUF's weight matrices as
 * llama-quantize (d32676d) does under one of its recipes: the per-tensor types are
 * runtime/quant_recipe.c's (llama_tensor_get_type), the conversion is ggml_quantize_chunk's
 * (kernels/quant*.c, with the importance matrix of runtime/imatrix.c per expert), the metadata
 * is llama-quantize's (general.file_type, general.quantization_version, quantize.imatrix.*,
 * split keys dropped), so the tensor data are byte-identical to llama-quantize's
 * (tests/test_quantize_recipes.sh). Its refusals are kept too: an already-quantized input
 * without allow_requantize, a recipe that needs an importance matrix without one — but here
 * before anything is written.
 * Memory: one chunk of rows (<= ~64 MiB of input) at a time, never the model.
 * Threading: the rows of a chunk are converted on a df_pool; the call itself is synchronous. */
#include "deltafin.h"
#include "base/threadpool.h"
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "runtime/imatrix.h"
#include "runtime/quant_recipe.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* ------------------------------------------------------------------ recipes */

int deltafin_quantize_recipe(const char *name) {
    const df_qr_recipe *r = df_qr_recipe_find(name);
    for (int i = 0; r && df_qr_recipe_at(i); i++)
        if (df_qr_recipe_at(i) == r) return i;
    return -1;
}

bool deltafin_quantize_recipe_info(int i, const char **name, const char **desc, int *ftype) {
    const df_qr_recipe *r = df_qr_recipe_at(i);
    if (!r) return false;
    if (name) *name = r->name;
    if (desc) *desc = r->desc;
    if (ftype) *ftype = r->ftype == DF_FT_PLAIN || r->type < 0 ? -1 : r->ftype; /* COPY, MXFP4: no number */
    return true;
}

deltafin_quantize_params deltafin_quantize_default_params(void) {
    deltafin_quantize_params p;
    memset(&p, 0, sizeof p);
    p.recipe = deltafin_quantize_recipe("Q8_0");
    p.type_experts = p.type_dense = p.output_type = p.token_embd_type = -1;
    return p;
}

static bool producible(int type) {
    const df_type_traits *ti = df_type_info(type);
    return ti && ti->can_quantize && type != DF_TYPE_Q4_K_X8;
}

static int check_type(int type, const char *what) {
    if (type < 0) return DF_OK;
    if (!producible(type))
        return df_err(DF_ERR_INVALID, "%s: cannot quantize to type '%s'", what, deltafin_type_name(type));
    return DF_OK;
}

/* ------------------------------------------------------------------ the plan */

typedef struct {
    int type;             /* output type */
    const float *imat;    /* importance weights (ne0 per expert) or NULL */
} tplan;

typedef struct {
    const df_gguf *g;
    const deltafin_quantize_params *p;
    const df_qr_recipe *r;
    deltafin_imatrix *im;
    tplan *tp;
    int64_t max_row;
    uint64_t total;
    deltafin_quantize_result res;
} qctx;

static bool is_token_embd(const char *n) { return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight"); }

/* the checks llama-quantize makes while converting tensor i, made before anything is written */
static int plan_tensor(qctx *q, int i, const df_qr_choice *ch) {
    const df_gguf_tensor *t = &q->g->tensors[i];
    tplan *tp = &q->tp[i];
    tp->type = ch->type;
    if (ch->quantizable && ch->needs_imatrix && !q->im) {
        if (!q->p->dry_run)
            return df_err(DF_ERR_INVALID, "this recipe needs an importance matrix (--imatrix FILE, made by `deltafin "
                          "imatrix`): tensor %s would be %s (llama-quantize's rule)", t->name,
                          deltafin_type_name(ch->type));
        q->res.needs_imatrix = true;
    }
    if (ch->type == t->type) return DF_OK;
    if (!producible(ch->type))
        return df_err(DF_ERR_UNSUPPORTED, "tensor %s: deltafin cannot produce %s", t->name, deltafin_type_name(ch->type));
    if (t->ne[0] % df_type_info(ch->type)->blck)
        return df_err(DF_ERR_INVALID, "tensor %s: rows of %lld values cannot be %s (blocks of %d)", t->name,
                      (long long)t->ne[0], deltafin_type_name(ch->type), df_type_info(ch->type)->blck);
    if (!df_can_dequantize(t->type))
        return df_err(DF_ERR_UNSUPPORTED, "tensor %s: cannot convert from %s", t->name, df_gguf_tensor_type_name(t->type));
    if (df_type_info(t->type)->blck > 1 && !q->p->allow_requantize)
        return df_err(DF_ERR_INVALID, "tensor %s is already quantized (%s): re-quantizing a quantized model loses "
                      "quality; quantize the F32/F16/BF16 original, or pass --allow-requantize to do it anyway "
                      "(llama-quantize's rule)", t->name, df_gguf_tensor_type_name(t->type));
    if (q->im) {
        int64_t n = 0;
        const float *w = df_imatrix_weights(q->im, t->name, &n);
        if (w && n != t->ne[0] * t->ne[2]) {
            if (!is_token_embd(t->name))
                return df_err(DF_ERR_INVALID, "imatrix: entry %s has %lld values, the tensor %lld (ne0 x experts)",
                              t->name, (long long)n, (long long)(t->ne[0] * t->ne[2]));
            w = NULL;
        }
        tp->imat = w;
        if (!w && ch->needs_imatrix)
            return df_err(DF_ERR_INVALID, "imatrix: no data for tensor %s, which %s needs (llama-quantize's rule: the "
                          "result would be garbage)", t->name, deltafin_type_name(ch->type));
    }
    if (!tp->imat && df_quantize_needs_imatrix(ch->type) && !q->p->dry_run)
        return df_err(DF_ERR_INVALID, "tensor %s: %s needs an importance matrix (--imatrix FILE)", t->name,
                      deltafin_type_name(ch->type));
    if (t->ne[0] > q->max_row) q->max_row = t->ne[0];
    return DF_OK;
}

static int plan(qctx *q) {
    const deltafin_quantize_params *p = q->p;
    const df_qr_opts o = {.r = q->r, .output_type = p->output_type, .token_embd_type = p->token_embd_type,
                          .type_experts = p->type_experts, .type_dense = p->type_dense, .pure = p->pure,
                          .leave_output = p->leave_output, .has_imatrix = q->im != NULL};
    df_qr_choice *ch = df_calloc((size_t)q->g->n_tensors + 1, sizeof *ch);
    if (!ch) return DF_ERR_NOMEM;
    int rc = df_qr_plan(q->g, &o, ch, &q->res.n_fallback);
    for (int i = 0; i < q->g->n_tensors && !rc; i++) {
        const df_gguf_tensor *t = &q->g->tensors[i];
        rc = plan_tensor(q, i, &ch[i]);
        q->total += t->nbytes;
        q->res.n_elements += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    free(ch);
    return rc;
}

/* ------------------------------------------------------------------ the file */

static bool imatrix_key(const char *k) { return !strncmp(k, "quantize.imatrix.", 17); }

/* llama-quantize's metadata: the input's KVs in order without the split keys, then
 * general.quantization_version and general.file_type (re-set: moved to the end), then the
 * importance matrix's provenance */
static int make_writer(const qctx *q, df_gguf_writer **out) {
    const df_gguf *g = q->g;
    df_gguf_writer *w = df_gguf_writer_new(g->alignment);
    if (!w) return DF_ERR_NOMEM;
    uint32_t ft = (uint32_t)(q->r->ftype == DF_FT_PLAIN ? DF_FT_GUESSED : q->r->ftype);
    if (q->r->type < 0) df_gguf_get_u32(g, "general.file_type", &ft); /* COPY keeps the input's */
    int rc = DF_OK;
    for (int i = 0; i < g->n_kv && !rc; i++) {
        const df_gguf_kv *kv = &g->kv[i];
        if (!strncmp(kv->key, "split.", 6) || !strcmp(kv->key, "general.quantization_version") ||
            !strcmp(kv->key, "general.file_type") || (q->im && imatrix_key(kv->key)))
            continue;
        rc = df_gguf_w_copy_kv(w, kv);
    }
    if (!rc) rc = df_gguf_w_u32(w, "general.quantization_version", 2);
    if (!rc) rc = df_gguf_w_u32(w, "general.file_type", ft);
    if (!rc && q->im) {
        char val[128];
        snprintf(val, sizeof val, "%s", q->p->imatrix); /* llama-quantize keeps 127 bytes */
        rc = df_gguf_w_str(w, "quantize.imatrix.file", val);
        const char *ds = df_imatrix_dataset(q->im);
        if (!rc && ds) {
            snprintf(val, sizeof val, "%s", ds);
            rc = df_gguf_w_str(w, "quantize.imatrix.dataset", val);
        }
        if (!rc) rc = df_gguf_w_u32(w, "quantize.imatrix.entries_count", (uint32_t)deltafin_imatrix_n_entries(q->im));
        const int chunks = df_imatrix_file_chunks(q->im);
        if (!rc && chunks > 0) rc = df_gguf_w_u32(w, "quantize.imatrix.chunks_count", (uint32_t)chunks);
    }
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        rc = df_gguf_w_tensor(w, t->name, q->tp[i].type, t->n_dims, t->ne, NULL);
    }
    if (rc) { df_gguf_writer_free(w); return rc; }
    *out = w;
    return DF_OK;
}

typedef struct {
    int in_type, out_type;
    int64_t n_per_row, rows_per_matrix, row0, n_rows, rows_per_task;
    uint64_t in_rb, out_rb;
    const uint8_t *in;
    uint8_t *out;
    const float *imat;    /* ne0 per matrix, or NULL */
    float **tbuf;         /* per thread: n_per_row floats */
    int err;              /* first error (racy write of the same value is fine: any nonzero) */
} conv_job;

static void conv_task(void *ctx, int task, int thread) {
    conv_job *j = ctx;
    int64_t r0 = (int64_t)task * j->rows_per_task, r1 = r0 + j->rows_per_task;
    if (r1 > j->n_rows) r1 = j->n_rows;
    float *f = j->tbuf[thread];
    for (int64_t r = r0; r < r1; r++) {
        /* rows of expert m use the importance of expert m (llama-quantize: per 3-D slice) */
        const int64_t m = (j->row0 + r) / j->rows_per_matrix;
        const float *qw = j->imat ? j->imat + m * j->n_per_row : NULL;
        int rc = df_dequantize_row(j->in_type, j->in + r * j->in_rb, f, j->n_per_row);
        if (!rc) rc = df_quantize_rows(j->out_type, f, j->out + r * j->out_rb, 1, j->n_per_row, qw);
        if (rc) {
            j->err = rc;
            return;
        }
    }
}

typedef struct {
    qctx *q;
    df_gguf_writer *w;
    int fd;
    df_pool *pool;
    uint64_t done;
    uint8_t *in, *outb;
    float **tbuf;
} wstate;

enum { CHUNK_CAP = 64 << 20 };

static void progress(wstate *s, const char *name) {
    const deltafin_quantize_params *p = s->q->p;
    if (p->progress_cb) p->progress_cb(p->progress_ud, name, s->done, s->q->total);
}

static int copy_tensor(wstate *s, int i) {
    const df_gguf_tensor *t = &s->q->g->tensors[i];
    int rc = DF_OK;
    uint64_t off = 0;
    while (off < t->nbytes && !rc) {
        uint64_t n = t->nbytes - off < CHUNK_CAP ? t->nbytes - off : CHUNK_CAP;
        if (!s->in) s->in = malloc(CHUNK_CAP);
        if (!s->in) return df_err(DF_ERR_NOMEM, "out of memory");
        if ((rc = df_gguf_read(s->q->g, t, off, s->in, n))) break;
        if ((rc = df_gguf_writer_write_tensor_data(s->w, s->fd, i, s->in, n))) break;
        off += n;
        s->done += n;
        progress(s, t->name);
    }
    if (!rc && t->nbytes == 0) rc = df_gguf_writer_write_tensor_data(s->w, s->fd, i, NULL, 0);
    return rc;
}

static int convert_tensor(wstate *s, int i) {
    const df_gguf_tensor *t = &s->q->g->tensors[i];
    const int otype = s->q->tp[i].type;
    if (t->nbytes == 0) return df_gguf_writer_write_tensor_data(s->w, s->fd, i, NULL, 0);
    const int nth = df_pool_size(s->pool);
    const int64_t npr = t->ne[0];
    const uint64_t in_rb = df_type_row_bytes(t->type, npr), out_rb = df_type_row_bytes(otype, npr);
    const int64_t nrows = (int64_t)(t->nbytes / in_rb);
    int64_t rows_chunk = (int64_t)(CHUNK_CAP / (in_rb > out_rb ? in_rb : out_rb));
    if (rows_chunk < 1) rows_chunk = 1;
    if (!s->in) s->in = malloc(CHUNK_CAP);
    uint64_t need_in = in_rb * (uint64_t)rows_chunk, need_out = out_rb * (uint64_t)rows_chunk;
    if (need_in > CHUNK_CAP) { free(s->in); s->in = malloc(need_in); }
    free(s->outb);
    s->outb = malloc(need_out);
    if (!s->in || !s->outb) return df_err(DF_ERR_NOMEM, "out of memory");
    int rc = DF_OK;
    for (int64_t r0 = 0; r0 < nrows && !rc; r0 += rows_chunk) {
        int64_t nr = nrows - r0 < rows_chunk ? nrows - r0 : rows_chunk;
        if ((rc = df_gguf_read(s->q->g, t, (uint64_t)r0 * in_rb, s->in, (uint64_t)nr * in_rb))) break;
        conv_job j = {.in_type = t->type, .out_type = otype, .n_per_row = npr, .rows_per_matrix = t->ne[1],
                      .row0 = r0, .n_rows = nr, .in_rb = in_rb, .out_rb = out_rb, .in = s->in, .out = s->outb,
                      .imat = s->q->tp[i].imat, .tbuf = s->tbuf};
        j.rows_per_task = (nr + 4 * nth - 1) / (4 * nth);
        if (j.rows_per_task < 1) j.rows_per_task = 1;
        df_pool_run(s->pool, (int)((nr + j.rows_per_task - 1) / j.rows_per_task), conv_task, &j);
        if (j.err) { rc = df_err_prefix(j.err, "tensor %s", t->name); break; }
        if ((rc = df_gguf_writer_write_tensor_data(s->w, s->fd, i, s->outb, (uint64_t)nr * out_rb))) break;
        s->done += (uint64_t)nr * in_rb;
        progress(s, t->name);
    }
    return rc;
}

/* per tensor: what it becomes (the callback), and the totals */
static void report(qctx *q) {
    for (int i = 0; i < q->g->n_tensors; i++) {
        const df_gguf_tensor *t = &q->g->tensors[i];
        const int ot = q->tp[i].type;
        const uint64_t out_b = ot == t->type ? t->nbytes
                                             : df_type_row_bytes(ot, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        q->res.bytes_in += t->nbytes;
        q->res.bytes_out += out_b;
        if (ot == t->type) q->res.n_copied++;
        else q->res.n_converted++;
        if (!q->p->tensor_cb) continue;
        deltafin_quantize_tensor info = {.index = i, .n_tensors = q->g->n_tensors, .name = t->name, .n_dims = t->n_dims, .type_in = t->type, .type_out = ot,
                                         .bytes_in = t->nbytes, .bytes_out = out_b, .imatrix = q->tp[i].imat != NULL};
        memcpy(info.ne, t->ne, sizeof info.ne);
        q->p->tensor_cb(q->p->tensor_ud, &info);
    }
}

/* Header, then every tensor's data (copied or converted) to the open tmp file. */
static int write_all(wstate *s) {
    const int nth = df_pool_size(s->pool);
    int rc = df_gguf_writer_write_header(s->w, s->fd);
    if (rc) return rc;
    s->tbuf = df_calloc((size_t)nth, sizeof(float *));
    if (!s->tbuf) return DF_ERR_NOMEM;
    for (int k = 0; k < nth; k++)
        if (!(s->tbuf[k] = df_malloc((size_t)(s->q->max_row ? s->q->max_row : 1) * sizeof(float)))) return DF_ERR_NOMEM;
    for (int i = 0; i < s->q->g->n_tensors && !rc; i++)
        rc = s->q->tp[i].type == s->q->g->tensors[i].type ? copy_tensor(s, i) : convert_tensor(s, i);
    return rc;
}

static int write_file(qctx *q, const char *out_path) {
    wstate s = {.q = q, .fd = -1};
    char *tmp = df_malloc(strlen(out_path) + 8);
    int rc = tmp ? make_writer(q, &s.w) : DF_ERR_NOMEM;
    if (!rc && !(s.pool = df_pool_create(q->p->n_threads))) rc = DF_ERR_NOMEM; /* df_calloc said so */
    if (!rc) {
        sprintf(tmp, "%s.tmp", out_path);
        s.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (s.fd < 0) rc = df_err(DF_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    }
    if (!rc) {
        rc = write_all(&s);
        if (!rc && fsync(s.fd) < 0) rc = df_err(DF_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
        if (close(s.fd) < 0 && !rc) rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno));
        if (!rc && rename(tmp, out_path) < 0)
            rc = df_err(DF_ERR_IO, "rename %s -> %s: %s", tmp, out_path, strerror(errno));
        if (rc) unlink(tmp);
    }
    if (s.tbuf)
        for (int k = 0; k < df_pool_size(s.pool); k++) free(s.tbuf[k]);
    free(s.tbuf);
    free(s.in);
    free(s.outb);
    free(tmp);
    df_gguf_writer_free(s.w);
    df_pool_free(s.pool);
    return rc;
}

int deltafin_quantize(const char *in_path, const char *out_path, const deltafin_quantize_params *p,
                      deltafin_quantize_result *res) {
    df_init();
    if (res) memset(res, 0, sizeof *res);
    qctx q = {.p = p, .r = df_qr_recipe_at(p->recipe)};
    if (!q.r) return df_err(DF_ERR_INVALID, "quantize: unknown recipe id %d", p->recipe);
    int rc = q.r->type >= 0 && !producible(q.r->type) ? check_type(q.r->type, q.r->name) : DF_OK;
    if (!rc) rc = check_type(p->type_experts, "--type-experts");
    if (!rc) rc = check_type(p->type_dense, "--type-dense");
    if (!rc) rc = check_type(p->output_type, "--output-tensor-type");
    if (!rc) rc = check_type(p->token_embd_type, "--token-embedding-type");
    if (rc) return rc;
    df_gguf *g = NULL;
    if (p->imatrix) {
        if ((rc = deltafin_imatrix_load(p->imatrix, &q.im)) || (rc = df_imatrix_prepare(q.im))) goto out;
        q.res.imatrix_entries = deltafin_imatrix_n_entries(q.im);
    }
    if ((rc = df_gguf_open(in_path, &g))) goto out;
    q.g = g;
    if (!(q.tp = df_calloc((size_t)g->n_tensors + 1, sizeof(tplan)))) { rc = DF_ERR_NOMEM; goto out; }
    if ((rc = plan(&q))) goto out;
    report(&q);
    if (!p->dry_run) rc = write_file(&q, out_path);
out:
    if (res) *res = q.res;
    free(q.tp);
    df_gguf_close(g);
    deltafin_imatrix_free(q.im);
    return rc;
}
