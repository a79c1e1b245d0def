/* quantize.c — `deltafin quantize IN.gguf OUT.gguf TYPE`: convert a GGUF's weight matrices to
 * another tensor type, tensor by tensor (memory ~ one chunk of rows, not the model).
 * Tensor selection follows llama-quantize: only ≥2-D tensors named *weight are converted;
 * norms, the MoE router (ffn_gate_inp), position/token-type embeddings and 1-D tensors (biases)
 * are copied unchanged. Without --pure the output matrix gets Q6_K (or Q8_0 when TYPE is Q8_0)
 * like llama-quantize's default mixes. Any input type we can dequantize can be re-quantized.
 * Output goes to OUT.tmp, renamed to OUT on success. */
#include <errno.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "base/threadpool.h"
#include "base/util.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: deltafin quantize IN.gguf OUT.gguf TYPE [options]\n"
            "  Convert weight matrices to TYPE (Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K\n"
            "  IQ4_NL IQ4_XS MXFP4 F16 BF16 F32). Norms, routers (ffn_gate_inp), biases and other\n"
            "  1-D tensors stay as they are (F32), as llama-quantize does.\n"
            "options:\n"
            "  --type-experts T   type for 3-D weight tensors: routed experts (*_exps), and deepseek2's\n"
            "                     attn_k_b / attn_v_b, as llama-quantize's MXFP4_MOE (default: TYPE)\n"
            "  --type-dense T     type for all other weight matrices (default: TYPE)\n"
            "  --output-type T    type for output.weight (default: Q6_K, or Q8_0 if TYPE is Q8_0)\n"
            "  --pure             no special type for output.weight\n"
            "  -t, --threads N    threads (default: all cores)\n"
            "  -h, --help         this help\n");
}

/* llama_ftype stored in general.file_type for a uniform TYPE (formats.md §1.3). */
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
    int64_t n_per_row, row0, n_rows, rows_per_task;
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

typedef struct {
    bool tty;
    uint64_t total, done;
    uint64_t t0, last;
} progress;

static void progress_show(progress *p, const char *name, bool force) {
    uint64_t now = df_time_ns();
    if (!force && now - p->last < (p->tty ? 100000000ull : 5000000000ull)) return;
    p->last = now;
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    double el = (now - p->t0) / 1e9;
    char a[32], b[32];
    df_fmt_bytes(p->done, a, sizeof a);
    df_fmt_bytes(p->total, b, sizeof b);
    if (p->tty) {
        char bar[41];
        int k = (int)(frac * 40);
        for (int i = 0; i < 40; i++) bar[i] = i < k ? '#' : '.';
        bar[40] = 0;
        fprintf(stderr, "\r[%s] %5.1f%% %s / %s  %.0fs  %-40.40s", bar, 100 * frac, a, b, el, name);
    } else {
        fprintf(stderr, "quantize: %5.1f%% %s / %s  %.0fs  %s\n", 100 * frac, a, b, el, name);
    }
    fflush(stderr);
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {0};
    int npos = 0, nthreads = 0, t_exp = -1, t_dense = -1, t_out = -1;
    bool pure = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "--pure")) { pure = true; continue; }
        if (a[0] == '-' && a[1]) {
            if (i + 1 >= argc) { fprintf(stderr, "quantize: %s needs a value\n", a); return 2; }
            const char *v = argv[++i];
            int *dst = NULL;
            if (!strcmp(a, "--type-experts")) dst = &t_exp;
            else if (!strcmp(a, "--type-dense")) dst = &t_dense;
            else if (!strcmp(a, "--output-type")) dst = &t_out;
            else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
                nthreads = atoi(v);
                if (nthreads <= 0) { fprintf(stderr, "quantize: bad thread count '%s'\n", v); return 2; }
                continue;
            } else { fprintf(stderr, "quantize: unknown option %s\n", a); usage(stderr); return 2; }
            *dst = df_type_from_name(v);
            if (*dst < 0 || !df_type_info(*dst)->can_quantize) {
                fprintf(stderr, "quantize: cannot quantize to type '%s'\n", v);
                return 2;
            }
            continue;
        }
        if (npos == 3) { fprintf(stderr, "quantize: too many arguments\n"); usage(stderr); return 2; }
        pos[npos++] = a;
    }
    if (npos != 3) { usage(stderr); return 2; }
    int type = df_type_from_name(pos[2]);
    if (type < 0 || !df_type_info(type)->can_quantize) {
        fprintf(stderr, "quantize: cannot quantize to type '%s'\n", pos[2]);
        return 2;
    }
    if (t_exp < 0) t_exp = type;
    if (t_dense < 0) t_dense = type;

    df_gguf *g = NULL;
    int rc = df_gguf_open(pos[0], &g);
    if (rc) { fprintf(stderr, "quantize: %s\n", df_errmsg()); return 1; }

    /* plan output types */
    int *otype = calloc((size_t)g->n_tensors + 1, sizeof(int));
    bool has_output = df_gguf_tensor_find(g, "output.weight") != NULL;
    uint64_t total = 0;
    int64_t max_row = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        int ot = t->type;
        if (allows_quantization(t)) {
            bool expert = contains(t->name, "_exps") || (t->n_dims >= 3 && t->ne[2] > 1);
            ot = expert ? t_exp : t_dense;
            bool is_out = !strcmp(t->name, "output.weight") ||
                          (!has_output && !strcmp(t->name, "token_embd.weight"));
            if (is_out && t_out >= 0) ot = t_out;
            else if (is_out && !pure) {
                if (t->ne[0] % df_type_info(ot)->blck) ot = DF_TYPE_Q8_0;
                else if (ot != DF_TYPE_Q8_0) ot = DF_TYPE_Q6_K;
            }
            ot = fallback_type(ot, t->ne[0]);
            if (ot != t->type) {
                if (!df_can_dequantize(t->type)) {
                    fprintf(stderr, "quantize: tensor %s: cannot convert from %s\n", t->name,
                            df_gguf_tensor_type_name(t->type));
                    rc = 1;
                    goto out;
                }
                if (t->ne[0] > max_row) max_row = t->ne[0];
            }
        }
        otype[i] = ot;
        total += t->nbytes;
    }

    df_pool *pool = df_pool_create(nthreads);
    if (!pool) { fprintf(stderr, "quantize: %s\n", df_errmsg()); rc = 1; goto out; }
    const int nth = df_pool_size(pool);

    /* writer: all KVs except file type / quantization version / split bookkeeping */
    df_gguf_writer *w = df_gguf_writer_new(g->alignment);
    if (!w) { rc = 1; goto out_pool; }
    {
        uint32_t qv = 2, ft = (uint32_t)ftype_of(t_dense == t_exp ? t_dense : t_exp);
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
    }
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        rc = df_gguf_w_tensor(w, t->name, otype[i], t->n_dims, t->ne, NULL);
    }
    if (rc) { fprintf(stderr, "quantize: %s\n", df_errmsg()); rc = 1; goto out_w; }

    char *tmp = malloc(strlen(pos[1]) + 8);
    sprintf(tmp, "%s.tmp", pos[1]);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "quantize: cannot create %s: %s\n", tmp, strerror(errno));
        free(tmp);
        rc = 1;
        goto out_w;
    }
    if ((rc = df_gguf_writer_write_header(w, fd))) goto fail;

    /* Stream tensors in chunks of rows (≤ ~64 MiB of input per chunk). */
    {
        const uint64_t chunk_cap = 64ull << 20;
        uint8_t *in = NULL, *outb = NULL;
        float **tbuf = calloc((size_t)nth, sizeof(float *));
        for (int k = 0; k < nth; k++) tbuf[k] = malloc((size_t)(max_row ? max_row : 1) * sizeof(float));
        progress pr = {.tty = isatty(2), .total = total, .t0 = df_time_ns()};
        int n_conv = 0, n_copy = 0;
        for (int i = 0; i < g->n_tensors && !rc; i++) {
            const df_gguf_tensor *t = &g->tensors[i];
            if (otype[i] == t->type) { /* copy */
                uint64_t off = 0;
                while (off < t->nbytes && !rc) {
                    uint64_t n = t->nbytes - off < chunk_cap ? t->nbytes - off : chunk_cap;
                    if (!in) in = malloc(chunk_cap);
                    if (!in) { rc = df_err(DF_ERR_NOMEM, "out of memory"); break; }
                    if ((rc = df_gguf_read(g, t, off, in, n))) break;
                    if ((rc = df_gguf_writer_write_tensor_data(w, fd, i, in, n))) break;
                    off += n;
                    pr.done += n;
                    progress_show(&pr, t->name, false);
                }
                if (t->nbytes == 0) rc = df_gguf_writer_write_tensor_data(w, fd, i, NULL, 0);
                n_copy++;
                continue;
            }
            if (t->nbytes == 0) {
                rc = df_gguf_writer_write_tensor_data(w, fd, i, NULL, 0);
                continue;
            }
            const int64_t npr = t->ne[0];
            const int64_t nrows = (int64_t)(t->nbytes / df_type_row_bytes(t->type, npr));
            const uint64_t in_rb = df_type_row_bytes(t->type, npr), out_rb = df_type_row_bytes(otype[i], npr);
            int64_t rows_chunk = (int64_t)(chunk_cap / (in_rb > out_rb ? in_rb : out_rb));
            if (rows_chunk < 1) rows_chunk = 1;
            if (!in) in = malloc(chunk_cap);
            uint64_t need_in = in_rb * (uint64_t)rows_chunk, need_out = out_rb * (uint64_t)rows_chunk;
            if (need_in > chunk_cap) { free(in); in = malloc(need_in); }
            free(outb);
            outb = malloc(need_out);
            if (!in || !outb) { rc = df_err(DF_ERR_NOMEM, "out of memory"); break; }
            for (int64_t r0 = 0; r0 < nrows && !rc; r0 += rows_chunk) {
                int64_t nr = nrows - r0 < rows_chunk ? nrows - r0 : rows_chunk;
                if ((rc = df_gguf_read(g, t, (uint64_t)r0 * in_rb, in, (uint64_t)nr * in_rb))) break;
                conv_job j = {.in_type = t->type, .out_type = otype[i], .n_per_row = npr,
                              .n_rows = nr, .in_rb = in_rb, .out_rb = out_rb, .in = in,
                              .out = outb, .tbuf = tbuf};
                j.rows_per_task = (nr + 4 * nth - 1) / (4 * nth);
                if (j.rows_per_task < 1) j.rows_per_task = 1;
                df_pool_run(pool, (int)((nr + j.rows_per_task - 1) / j.rows_per_task), conv_task, &j);
                if (j.err) { rc = df_err_prefix(j.err, "tensor %s", t->name); break; }
                if ((rc = df_gguf_writer_write_tensor_data(w, fd, i, outb, (uint64_t)nr * out_rb))) break;
                pr.done += (uint64_t)nr * in_rb;
                progress_show(&pr, t->name, false);
            }
            n_conv++;
        }
        if (!rc) {
            progress_show(&pr, "done", true);
            if (pr.tty) fputc('\n', stderr);
            fprintf(stderr, "quantize: %d tensors converted, %d copied, %.1f s\n", n_conv, n_copy,
                    (df_time_ns() - pr.t0) / 1e9);
        }
        for (int k = 0; k < nth; k++) free(tbuf[k]);
        free(tbuf);
        free(in);
        free(outb);
    }
    if (!rc && fsync(fd) < 0) rc = df_err(DF_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
fail:
    if (close(fd) < 0 && !rc) rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, pos[1]) < 0) rc = df_err(DF_ERR_IO, "rename %s -> %s: %s", tmp, pos[1], strerror(errno));
    if (rc) {
        fprintf(stderr, "quantize: %s\n", df_errmsg());
        unlink(tmp);
        rc = 1;
    }
    free(tmp);
out_w:
    df_gguf_writer_free(w);
out_pool:
    df_pool_free(pool);
out:
    free(otype);
    df_gguf_close(g);
    return rc;
}
