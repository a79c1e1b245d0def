/* quantize.c — deltafin_quantize (include/deltafin.h): convert a GGUF's weight matrices to
 * other tensor types, tensor by tensor, the way llama-quantize chooses and converts them, so the
 * tensor data is byte-identical to llama-quantize's (tests/quantize.sh).
 * Memory: one chunk of rows (<= ~64 MiB of input) at a time, never the model.
 * Threading: the rows of a chunk are converted on a df_pool; the call itself is synchronous. */
#include "deltafin.h"
#include "base/threadpool.h"
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* llama_ftype stored in general.file_type for a uniform TYPE (docs/formats: general.file_type). */
static int ftype_of(int t) {
    switch (t) {
    case DF_TYPE_F32: return 0;
    case DF_TYPE_F16: return 1;
    case DF_TYPE_Q4_0: return 2;
    case DF_TYPE_Q4_1: return 3;
    case DF_TYPE_Q8_0: return 7;
    case DF_TYPE_Q5_0: return 8;
    case DF_TYPE_Q5_1: return 9;
    case DF_TYPE_Q2_K: return 10;
    case DF_TYPE_Q3_K: return 11;
    case DF_TYPE_Q4_K: return 14;
    case DF_TYPE_Q5_K: return 16;
    case DF_TYPE_Q6_K: return 18;
    case DF_TYPE_IQ2_XXS: return 19;
    case DF_TYPE_IQ2_XS: return 20;
    case DF_TYPE_IQ3_XXS: return 23;
    case DF_TYPE_IQ1_S: return 24;
    case DF_TYPE_IQ4_NL: return 25;
    case DF_TYPE_IQ3_S: return 26;
    case DF_TYPE_IQ2_S: return 28;
    case DF_TYPE_IQ4_XS: return 30;
    case DF_TYPE_IQ1_M: return 31;
    case DF_TYPE_BF16: return 32;
    case DF_TYPE_TQ1_0: return 36;
    case DF_TYPE_TQ2_0: return 37;
    case DF_TYPE_MXFP4: return 38;
    default: return 1024;
    }
}

static bool contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }
static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* llama-quantize's tensor_allows_quantization (the parts that concern LLM checkpoints). */
static bool allows_quantization(const df_gguf_tensor *t) {
    if (t->n_dims < 2) return false;
    const char *n = t->name;
    if (!ends_with(n, "weight")) return false;
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_", "attn_rel_b.weight", ".position_embd", ".rel_pos",
        ".patch_embd", ".patch_merger",
    };
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        if (contains(n, never[i])) return false;
    if (!strcmp(n, "position_embd.weight") || !strcmp(n, "token_types.weight")) return false;
    return true;
}

/* llama-quantize's fallback when the row length is not a multiple of the block size. */
static int fallback_type(int target, int64_t ncols) {
    const df_type_traits *ti = df_type_info(target);
    if (ncols % ti->blck == 0) return target;
    int r;
    switch (target) {
    case DF_TYPE_IQ1_S: case DF_TYPE_IQ1_M: case DF_TYPE_IQ2_XXS: case DF_TYPE_IQ2_XS:
    case DF_TYPE_IQ2_S: case DF_TYPE_IQ3_XXS: case DF_TYPE_IQ3_S: case DF_TYPE_IQ4_XS:
        r = DF_TYPE_IQ4_NL; break;
    case DF_TYPE_Q2_K: case DF_TYPE_Q3_K: case DF_TYPE_TQ1_0: case DF_TYPE_TQ2_0: r = DF_TYPE_Q4_0; break;
    case DF_TYPE_Q4_K: r = DF_TYPE_Q5_0; break;
    case DF_TYPE_Q5_K: r = DF_TYPE_Q5_1; break;
    case DF_TYPE_Q6_K: r = DF_TYPE_Q8_0; break;
    default: r = DF_TYPE_F16; break;
    }
    if (ncols % df_type_info(r)->blck) r = DF_TYPE_F16;
    return r;
}

typedef struct {
    int in_type, out_type;
    int64_t n_per_row, n_rows, rows_per_task;
    uint64_t in_rb, out_rb;
    const uint8_t *in;
    uint8_t *out;
    float **tbuf; /* per thread: n_per_row floats */
    int err;      /* first error (racy write of the same value is fine: any nonzero) */
} conv_job;

static void conv_task(void *ctx, int task, int thread) {
    conv_job *j = ctx;
    int64_t r0 = (int64_t)task * j->rows_per_task, r1 = r0 + j->rows_per_task;
    if (r1 > j->n_rows) r1 = j->n_rows;
    float *f = j->tbuf[thread];
    for (int64_t r = r0; r < r1; r++) {
        int rc = df_dequantize_row(j->in_type, j->in + r * j->in_rb, f, j->n_per_row);
        if (!rc) rc = df_quantize_row(j->out_type, f, j->out + r * j->out_rb, j->n_per_row);
        if (rc) {
            j->err = rc;
            return;
        }
    }
}

deltafin_quantize_params deltafin_quantize_default_params(void) {
    deltafin_quantize_params p;
    memset(&p, 0, sizeof p);
    p.type = DF_TYPE_Q8_0;
    p.type_experts = p.type_dense = p.output_type = -1;
    return p;
}

static int check_target(int type) {
    if (!deltafin_type_can_quantize(type))
        return df_err(DF_ERR_INVALID, "cannot quantize to type '%s'", deltafin_type_name(type));
    return DF_OK;
}

/* ---- llama-quantize's Q4_K_M mixture (llama-quant.cpp, llama_tensor_get_type_impl with
 * ftype MOSTLY_Q4_K_M, no imatrix, no overrides) ------------------------------------------
 * Tensors are visited in llama.cpp's loader order (layer, then name; globals first). Q4_K by
 * default; the output matrix (or token_embd when tied) Q6_K (Q8_0 if its rows are not whole
 * Q4_K blocks); attention-V-like tensors (names containing attn_v / attn_qkv / attn_kv_b
 * .weight) Q6_K where use_more_bits(i-th of n); ffn_down* Q6_K in the use_more_bits layers; with
 * exactly 8 experts (expert_count) attention-V-like and attn_k.weight tensors Q8_0 and
 * attn_output Q5_K. Rows off the block size fall back as fallback_type. */
enum { QC_OTHER, QC_OUTPUT, QC_TOKEN_EMBD, QC_ATTN_V, QC_ATTN_K, QC_ATTN_OUTPUT, QC_FFN_DOWN };

static int category(const char *n) {
    if (!strcmp(n, "output.weight")) return QC_OUTPUT;
    if (!strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight")) return QC_TOKEN_EMBD;
    if (contains(n, "attn_qkv.weight") || contains(n, "attn_kv_b.weight") || contains(n, "attn_v.weight"))
        return QC_ATTN_V;
    if (contains(n, "attn_k.weight")) return QC_ATTN_K;
    if (contains(n, "attn_q.weight")) return QC_OTHER;
    if (contains(n, "attn_output.weight")) return QC_ATTN_OUTPUT;
    if (contains(n, "ffn_up") || contains(n, "ffn_gate")) return QC_OTHER;
    return contains(n, "ffn_down") ? QC_FFN_DOWN : QC_OTHER;
}

static int blk_of(const char *n) {
    int il = -1;
    return sscanf(n, "blk.%d.", &il) == 1 ? il : -1;
}

static const df_gguf *g_sort; /* qsort has no context argument */
static int cmp_loader_order(const void *a, const void *b) {
    const char *na = g_sort->tensors[*(const int *)a].name, *nb = g_sort->tensors[*(const int *)b].name;
    const int la = blk_of(na), lb = blk_of(nb);
    return la != lb ? (la < lb ? -1 : 1) : strcmp(na, nb);
}

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int arch_u32(const df_gguf *g, const char *suffix, uint32_t *v) {
    const char *arch = NULL;
    char key[160];
    if (df_gguf_get_str(g, "general.architecture", &arch) < 0) return df_err(DF_ERR_FORMAT, "no general.architecture");
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int rc = df_gguf_get_u32(g, key, v);
    return rc == DF_ERR_NOTFOUND ? DF_OK : rc;
}

static int mix_q4_k_m(const df_gguf *g, int *otype) {
    uint32_t n_expert = 0, n_layer = 0;
    int rc = arch_u32(g, "expert_count", &n_expert);
    if (!rc) rc = arch_u32(g, "block_count", &n_layer);
    if (rc < 0) return rc;
    const int nt = g->n_tensors;
    int *ord = df_malloc(sizeof(int) * (size_t)(nt ? nt : 1));
    if (!ord) return DF_ERR_NOMEM;
    int n_wv = 0, i_wv = 0, i_down = 0;
    bool tied = true;
    for (int i = 0; i < nt; i++) {
        ord[i] = i;
        const int c = category(g->tensors[i].name);
        n_wv += c == QC_ATTN_V;
        if (c == QC_OUTPUT) tied = false;
    }
    g_sort = g;
    qsort(ord, (size_t)nt, sizeof(int), cmp_loader_order);
    for (int k = 0; k < nt && !rc; k++) {
        const df_gguf_tensor *t = &g->tensors[ord[k]];
        int ot = t->type;
        if (allows_quantization(t)) {
            const int c = category(t->name);
            ot = DF_TYPE_Q4_K;
            if (c == QC_OUTPUT || (tied && c == QC_TOKEN_EMBD)) {
                ot = t->ne[0] % df_type_info(DF_TYPE_Q4_K)->blck ? DF_TYPE_Q8_0 : DF_TYPE_Q6_K;
            } else if (c == QC_ATTN_V) {
                if (use_more_bits(i_wv++, n_wv)) ot = DF_TYPE_Q6_K;
                if (n_expert == 8) ot = DF_TYPE_Q8_0;
            } else if (c == QC_ATTN_K) {
                if (n_expert == 8) ot = DF_TYPE_Q8_0;
            } else if (c == QC_ATTN_OUTPUT) {
                if (n_expert == 8) ot = DF_TYPE_Q5_K;
            } else if (c == QC_FFN_DOWN) {
                /* the layer from the name with experts (llama.cpp's layer_info), else a counter */
                const int il = n_expert > 1 ? blk_of(t->name) : i_down;
                if (il < 0 || il >= (int)n_layer)
                    rc = df_err(DF_ERR_FORMAT, "tensor %s: no layer in [0, %u) for the Q4_K_M mixture", t->name,
                                n_layer);
                else if (use_more_bits(il, (int)n_layer)) ot = DF_TYPE_Q6_K;
                i_down++;
            }
            ot = fallback_type(ot, t->ne[0]);
        }
        otype[ord[k]] = ot;
    }
    free(ord);
    return rc;
}

/* The output type of every tensor (otype[i]) and the longest converted row. */
static int plan_types(const df_gguf *g, const deltafin_quantize_params *p, int *otype, int64_t *max_row,
                      uint64_t *total) {
    const int t_exp = p->type_experts >= 0 ? p->type_experts : p->type;
    const int t_dense = p->type_dense >= 0 ? p->type_dense : p->type;
    const bool has_output = df_gguf_tensor_find(g, "output.weight") != NULL;
    *max_row = 0;
    *total = 0;
    if (p->mix == DELTAFIN_QMIX_Q4_K_M) {
        int rc = mix_q4_k_m(g, otype);
        if (rc < 0) return rc;
    }
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        int ot = t->type;
        if (allows_quantization(t)) {
            bool expert = contains(t->name, "_exps") || (t->n_dims >= 3 && t->ne[2] > 1);
            ot = expert ? t_exp : t_dense;
            bool is_out = !strcmp(t->name, "output.weight") || (!has_output && !strcmp(t->name, "token_embd.weight"));
            if (is_out && p->output_type >= 0) ot = p->output_type;
            else if (is_out && !p->pure) {
                if (t->ne[0] % df_type_info(ot)->blck) ot = DF_TYPE_Q8_0;
                else if (ot != DF_TYPE_Q8_0) ot = DF_TYPE_Q6_K;
            }
            ot = p->mix ? otype[i] : fallback_type(ot, t->ne[0]);
            if (ot != t->type) {
                if (!df_can_dequantize(t->type))
                    return df_err(DF_ERR_UNSUPPORTED, "tensor %s: cannot convert from %s", t->name,
                                  df_gguf_tensor_type_name(t->type));
                if (t->ne[0] > *max_row) *max_row = t->ne[0];
            }
        }
        otype[i] = ot;
        *total += t->nbytes;
    }
    return DF_OK;
}

/* A writer with every KV of g except file type / quantization version / split bookkeeping,
 * and every tensor with its new type. */
static int make_writer(const df_gguf *g, const deltafin_quantize_params *p, const int *otype, df_gguf_writer **out) {
    const int t_exp = p->type_experts >= 0 ? p->type_experts : p->type;
    const int t_dense = p->type_dense >= 0 ? p->type_dense : p->type;
    df_gguf_writer *w = df_gguf_writer_new(g->alignment);
    if (!w) return DF_ERR_NOMEM;
    int rc = DF_OK;
    uint32_t qv = 2, ft = p->mix == DELTAFIN_QMIX_Q4_K_M ? 15u /* LLAMA_FTYPE_MOSTLY_Q4_K_M */
                                                         : (uint32_t)ftype_of(t_dense == t_exp ? t_dense : t_exp);
    for (int i = 0; i < g->n_kv && !rc; i++) {
        const df_gguf_kv *kv = &g->kv[i];
        if (!strncmp(kv->key, "split.", 6)) continue;
        if (!strcmp(kv->key, "general.file_type")) {
            rc = df_gguf_w_u32(w, "general.file_type", ft);
            continue;
        }
        if (!strcmp(kv->key, "general.quantization_version")) continue;
        rc = df_gguf_w_copy_kv(w, kv);
    }
    if (!rc && !df_gguf_find(g, "general.file_type")) rc = df_gguf_w_u32(w, "general.file_type", ft);
    if (!rc) rc = df_gguf_w_u32(w, "general.quantization_version", qv);
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        rc = df_gguf_w_tensor(w, t->name, otype[i], t->n_dims, t->ne, NULL);
    }
    if (rc) { df_gguf_writer_free(w); return rc; }
    *out = w;
    return DF_OK;
}

typedef struct {
    const df_gguf *g;
    df_gguf_writer *w;
    int fd;
    df_pool *pool;
    const deltafin_quantize_params *p;
    uint64_t done, total;
    uint8_t *in, *outb;
    float **tbuf;
    deltafin_quantize_result res;
} qstate;

enum { CHUNK_CAP = 64 << 20 };

static void progress(qstate *q, const char *name) {
    if (q->p->progress_cb) q->p->progress_cb(q->p->progress_ud, name, q->done, q->total);
}

static int copy_tensor(qstate *q, int i) {
    const df_gguf_tensor *t = &q->g->tensors[i];
    int rc = DF_OK;
    uint64_t off = 0;
    while (off < t->nbytes && !rc) {
        uint64_t n = t->nbytes - off < CHUNK_CAP ? t->nbytes - off : CHUNK_CAP;
        if (!q->in) q->in = malloc(CHUNK_CAP);
        if (!q->in) return df_err(DF_ERR_NOMEM, "out of memory");
        if ((rc = df_gguf_read(q->g, t, off, q->in, n))) break;
        if ((rc = df_gguf_writer_write_tensor_data(q->w, q->fd, i, q->in, n))) break;
        off += n;
        q->done += n;
        progress(q, t->name);
    }
    if (!rc && t->nbytes == 0) rc = df_gguf_writer_write_tensor_data(q->w, q->fd, i, NULL, 0);
    q->res.n_copied++;
    return rc;
}

static int convert_tensor(qstate *q, int i, int otype) {
    const df_gguf_tensor *t = &q->g->tensors[i];
    if (t->nbytes == 0) return df_gguf_writer_write_tensor_data(q->w, q->fd, i, NULL, 0);
    const int nth = df_pool_size(q->pool);
    const int64_t npr = t->ne[0];
    const uint64_t in_rb = df_type_row_bytes(t->type, npr), out_rb = df_type_row_bytes(otype, npr);
    const int64_t nrows = (int64_t)(t->nbytes / in_rb);
    int64_t rows_chunk = (int64_t)(CHUNK_CAP / (in_rb > out_rb ? in_rb : out_rb));
    if (rows_chunk < 1) rows_chunk = 1;
    if (!q->in) q->in = malloc(CHUNK_CAP);
    uint64_t need_in = in_rb * (uint64_t)rows_chunk, need_out = out_rb * (uint64_t)rows_chunk;
    if (need_in > CHUNK_CAP) { free(q->in); q->in = malloc(need_in); }
    free(q->outb);
    q->outb = malloc(need_out);
    if (!q->in || !q->outb) return df_err(DF_ERR_NOMEM, "out of memory");
    int rc = DF_OK;
    for (int64_t r0 = 0; r0 < nrows && !rc; r0 += rows_chunk) {
        int64_t nr = nrows - r0 < rows_chunk ? nrows - r0 : rows_chunk;
        if ((rc = df_gguf_read(q->g, t, (uint64_t)r0 * in_rb, q->in, (uint64_t)nr * in_rb))) break;
        conv_job j = {.in_type = t->type, .out_type = otype, .n_per_row = npr, .n_rows = nr,
                      .in_rb = in_rb, .out_rb = out_rb, .in = q->in, .out = q->outb, .tbuf = q->tbuf};
        j.rows_per_task = (nr + 4 * nth - 1) / (4 * nth);
        if (j.rows_per_task < 1) j.rows_per_task = 1;
        df_pool_run(q->pool, (int)((nr + j.rows_per_task - 1) / j.rows_per_task), conv_task, &j);
        if (j.err) { rc = df_err_prefix(j.err, "tensor %s", t->name); break; }
        if ((rc = df_gguf_writer_write_tensor_data(q->w, q->fd, i, q->outb, (uint64_t)nr * out_rb))) break;
        q->done += (uint64_t)nr * in_rb;
        progress(q, t->name);
    }
    q->res.n_converted++;
    return rc;
}

/* Header, then every tensor's data (copied or converted) to the open tmp file. */
static int write_all(qstate *q, const int *otype, int64_t max_row) {
    const int nth = df_pool_size(q->pool);
    int rc = df_gguf_writer_write_header(q->w, q->fd);
    if (rc) return rc;
    q->tbuf = df_calloc((size_t)nth, sizeof(float *));
    if (!q->tbuf) return DF_ERR_NOMEM;
    for (int k = 0; k < nth; k++)
        if (!(q->tbuf[k] = df_malloc((size_t)(max_row ? max_row : 1) * sizeof(float)))) return DF_ERR_NOMEM;
    for (int i = 0; i < q->g->n_tensors && !rc; i++)
        rc = otype[i] == q->g->tensors[i].type ? copy_tensor(q, i) : convert_tensor(q, i, otype[i]);
    return rc;
}

int deltafin_quantize(const char *in_path, const char *out_path, const deltafin_quantize_params *p,
                      deltafin_quantize_result *res) {
    df_init();
    if (res) memset(res, 0, sizeof *res);
    if (p->mix != DELTAFIN_QMIX_NONE && p->mix != DELTAFIN_QMIX_Q4_K_M)
        return df_err(DF_ERR_INVALID, "unknown quantization mixture %d", p->mix);
    int rc = check_target(p->type);
    if (!rc && p->type_experts >= 0) rc = check_target(p->type_experts);
    if (!rc && p->type_dense >= 0) rc = check_target(p->type_dense);
    if (!rc && p->output_type >= 0) rc = check_target(p->output_type);
    if (rc) return rc;
    df_gguf *g = NULL;
    rc = df_gguf_open(in_path, &g);
    if (rc) return rc;
    qstate q = {.g = g, .fd = -1, .p = p};
    char *tmp = NULL;
    int *otype = df_calloc((size_t)g->n_tensors + 1, sizeof(int));
    int64_t max_row = 0;
    if (!otype) { rc = DF_ERR_NOMEM; goto out; }
    if ((rc = plan_types(g, p, otype, &max_row, &q.total))) goto out;
    q.pool = df_pool_create(p->n_threads);
    if (!q.pool) { rc = DF_ERR_NOMEM; goto out; } /* df_calloc said so */
    if ((rc = make_writer(g, p, otype, &q.w))) goto out;
    tmp = df_malloc(strlen(out_path) + 8);
    if (!tmp) { rc = DF_ERR_NOMEM; goto out; }
    sprintf(tmp, "%s.tmp", out_path);
    q.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (q.fd < 0) { rc = df_err(DF_ERR_IO, "cannot create %s: %s", tmp, strerror(errno)); goto out; }
    rc = write_all(&q, otype, max_row);
    if (!rc && fsync(q.fd) < 0) rc = df_err(DF_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
    if (close(q.fd) < 0 && !rc) rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, out_path) < 0) rc = df_err(DF_ERR_IO, "rename %s -> %s: %s", tmp, out_path, strerror(errno));
    if (rc) unlink(tmp);
    q.res.bytes_in = q.done;
    if (res) *res = q.res;
out:
    if (q.tbuf)
        for (int k = 0; k < df_pool_size(q.pool); k++) free(q.tbuf[k]);
    free(q.tbuf);
    free(q.in);
    free(q.outb);
    free(tmp);
    df_gguf_writer_free(q.w);
    df_pool_free(q.pool);
    free(otype);
    df_gguf_close(g);
    return rc;
}
