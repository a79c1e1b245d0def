/* convert_llama2c.c — `deltafin-dev convert-llama2c MODEL.bin TOKENIZER.bin OUT.gguf`: import a
 * llama2.c checkpoint (legacy "version 0" format read by run.c) and its tokenizer.bin as a
 * GGUF of arch `llama` with F32 weights and the SPM tokenizer.
 *
 * Checkpoint: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
 * negative vocab_size = separate classifier), then F32 arrays in this order: token embedding
 * [vocab][dim], rms_att [L][dim], wq [L][dim][dim], wk [L][kv_dim][dim], wv [L][kv_dim][dim],
 * wo [L][dim][dim], rms_ffn [L][dim], w1 [L][hidden][dim], w2 [L][dim][hidden],
 * w3 [L][hidden][dim], rms_final [dim], freq_cis [seq_len][head_size] (unused), wcls
 * [vocab][dim] if unshared. Matrices are [out][in] row-major = GGUF ne {in, out}: copied as is.
 *
 * RoPE layout: run.c rotates adjacent pairs (x[2i], x[2i+1]) with base 10000 over the whole
 * head — exactly ggml's NORM mode that the `llama` arch uses — so Q/K rows are NOT permuted
 * (llama.cpp's examples/convert-llama2c-to-ggml does not permute either; only HF checkpoints,
 * whose rotate_half pairs (i, i+d/2), need the permutation). Tensors are streamed: memory use
 * is one layer slice at a time. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/llama2c.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- tokenizer.bin ------------------------------------------------------------------------ */
void l2c_vocab_free(l2c_vocab *v) {
    if (!v) return;
    if (v->text)
        for (int i = 0; i < v->n; i++) free(v->text[i]);
    free(v->text);
    free(v->score);
    free(v->type);
    memset(v, 0, sizeof *v);
}

static bool is_byte_token(const char *s, size_t n) {
    /* "<0xXX>" with two hex digits (either case) */
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return false;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

int l2c_vocab_load(const char *path, int n_expected, l2c_vocab *v) {
    memset(v, 0, sizeof *v);
    char *buf = NULL;
    size_t len = 0;
    int rc = df_read_file(path, &buf, &len);
    if (rc) return df_err_prefix(rc, "tokenizer");
    if (len < 4) { free(buf); return df_err(DF_ERR_FORMAT, "%s: too short for a tokenizer.bin", path); }
    /* count entries first (also validates the framing) */
    size_t pos = 4;
    int n = 0;
    while (pos < len && (n_expected <= 0 || n < n_expected)) {
        int32_t tl;
        if (len - pos < 8) break;
        memcpy(&tl, buf + pos + 4, 4);
        if (tl < 0 || (size_t)tl > len - pos - 8) break;
        pos += 8 + (size_t)tl;
        n++;
    }
    if (n_expected > 0 && n != n_expected) {
        free(buf);
        return df_err(DF_ERR_FORMAT, "%s: holds %d well-formed tokens, the checkpoint needs %d",
                      path, n, n_expected);
    }
    if (pos != len) {
        free(buf);
        return df_err(DF_ERR_FORMAT, "%s: %zu unexpected bytes at offset %zu (after %d tokens)",
                      path, len - pos, pos, n);
    }
    if (n < 3) { free(buf); return df_err(DF_ERR_FORMAT, "%s: only %d tokens", path, n); }
    v->n = n;
    v->text = df_calloc((size_t)n, sizeof *v->text);
    v->score = df_malloc((size_t)n * sizeof *v->score);
    v->type = df_malloc((size_t)n * sizeof *v->type);
    if (!v->text || !v->score || !v->type) { free(buf); l2c_vocab_free(v); return DF_ERR_NOMEM; }
    pos = 4;
    for (int i = 0; i < n; i++) {
        int32_t tl;
        memcpy(&v->score[i], buf + pos, 4);
        memcpy(&tl, buf + pos + 4, 4);
        const char *s = buf + pos + 8;
        pos += 8 + (size_t)tl;
        if (!isfinite(v->score[i])) {
            rc = df_err(DF_ERR_FORMAT, "%s: token %d has a non-finite score", path, i);
            break;
        }
        if (memchr(s, 0, (size_t)tl)) {
            rc = df_err(DF_ERR_FORMAT, "%s: token %d contains a NUL byte", path, i);
            break;
        }
        /* llama2.c ids 0/1/2 are <unk> <s> </s> (its export wrote them as "<unk>" "\n<s>\n"
         * "\n</s>\n"); SPM keeps these names */
        const char *fixed = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : NULL;
        if (fixed) {
            v->text[i] = df_strdup(fixed);
            v->type[i] = i == 0 ? 2 : 3;
        } else {
            /* llama2.c's export replaced U+2581 by ' ': escape spaces back */
            size_t nsp = 0;
            for (int32_t k = 0; k < tl; k++) nsp += s[k] == ' ';
            char *t = df_malloc((size_t)tl + 2 * nsp + 1);
            if (t) {
                size_t o = 0;
                for (int32_t k = 0; k < tl; k++) {
                    if (s[k] == ' ') { t[o++] = (char)0xE2; t[o++] = (char)0x96; t[o++] = (char)0x81; }
                    else t[o++] = s[k];
                }
                t[o] = 0;
            }
            v->text[i] = t;
            v->type[i] = tl == 0 ? 3 : is_byte_token(s, (size_t)tl) ? 6 : 1;
        }
        if (!v->text[i]) { rc = DF_ERR_NOMEM; break; }
    }
    free(buf);
    if (rc) l2c_vocab_free(v);
    return rc;
}

int l2c_vocab_write_kv(df_gguf_writer *w, const l2c_vocab *v) {
    int rc;
    if ((rc = df_gguf_w_str(w, "tokenizer.ggml.model", "llama"))) return rc;
    if ((rc = df_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->text, (uint64_t)v->n))) return rc;
    if ((rc = df_gguf_w_arr(w, "tokenizer.ggml.scores", DF_GGUF_F32, v->score, (uint64_t)v->n))) return rc;
    if ((rc = df_gguf_w_arr(w, "tokenizer.ggml.token_type", DF_GGUF_I32, v->type, (uint64_t)v->n))) return rc;
    if ((rc = df_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1))) return rc;
    if ((rc = df_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2))) return rc;
    if ((rc = df_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0))) return rc;
    if ((rc = df_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true))) return rc;
    if ((rc = df_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false))) return rc;
    return DF_OK;
}

/* ---- checkpoint ----------------------------------------------------------------------------- */
typedef struct {
    char name[64];
    int n_dims;
    int64_t ne[2];
    uint64_t src_off; /* byte offset in the checkpoint */
    uint64_t nbytes;
} src_tensor;

static void usage(FILE *f) {
    fprintf(f,
            "usage: deltafin-dev convert-llama2c MODEL.bin TOKENIZER.bin OUT.gguf [--name NAME]\n\n"
            "Import a llama2.c checkpoint (the legacy format run.c reads) and its tokenizer.bin\n"
            "as a GGUF of architecture 'llama' with F32 weights and the SPM tokenizer\n"
            "(bos 1, eos 2, unk 0, add_bos true). RMS-norm eps 1e-5, RoPE base 10000.\n\n"
            "options:\n"
            "  --name NAME   general.name (default: MODEL.bin's file name without .bin)\n"
            "  -h, --help    this help\n");
}

static int copy_range(int in, uint64_t off, uint64_t n, df_gguf_writer *w, int out, int idx,
                      void *buf, size_t cap, const char *path) {
    while (n) {
        size_t k = n > cap ? cap : (size_t)n;
        ssize_t r = pread(in, buf, k, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return df_err(DF_ERR_IO, "%s: read failed at offset %" PRIu64 ": %s", path, off,
                                  r < 0 ? strerror(errno) : "unexpected end of file");
        int rc = df_gguf_writer_write_tensor_data(w, out, idx, buf, (uint64_t)r);
        if (rc) return rc;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return DF_OK;
}

typedef struct { int64_t dim, hidden, L, nh, nkv, vocab, seq; bool shared; } l2c_cfg;

/* The GGUF tensors (llama.cpp's usual order) and where each is in the checkpoint; fails when the
 * file size is not the one this config implies. */
static int l2c_tensors(const char *mpath, const l2c_cfg *c, uint64_t file_size, src_tensor **out, int *n_out) {
    const int64_t dim = c->dim, hidden = c->hidden, L = c->L, vocab = c->vocab, seq = c->seq;
    const bool shared = c->shared;
    const int64_t hs = dim / c->nh, kvd = c->nkv * hs;
    /* checkpoint order (all int64: sizes fit easily given the bounds checked by the caller) */
    enum { T_EMB, T_ATTN_NORM, T_Q, T_K, T_V, T_O, T_FFN_NORM, T_GATE, T_DOWN, T_UP, T_FINAL, T_FREQ, T_CLS, T_N };
    int64_t cnt[T_N] = {
        vocab * dim, L * dim, L * dim * dim, L * kvd * dim, L * kvd * dim, L * dim * dim, L * dim,
        L * hidden * dim, L * dim * hidden, L * hidden * dim, dim, seq * hs, shared ? 0 : vocab * dim,
    };
    uint64_t off[T_N + 1];
    off[0] = 7 * sizeof(int32_t);
    for (int i = 0; i < T_N; i++) off[i + 1] = off[i] + 4 * (uint64_t)cnt[i];
    if (file_size != off[T_N])
        return df_err(DF_ERR_FORMAT,
                      "%s: file has %llu bytes, a llama2.c checkpoint with this config (dim %lld, "
                      "%lld layers, vocab %lld%s) has %" PRIu64,
                      mpath, (unsigned long long)file_size, (long long)dim, (long long)L, (long long)vocab,
                      shared ? ", shared classifier" : ", separate classifier", off[T_N]);
    int nt = 3 + 9 * (int)L, k = 0;
    src_tensor *ts = df_calloc((size_t)nt, sizeof *ts);
    if (!ts) return DF_ERR_NOMEM;
#define ADD(nm, nd, e0, e1, so)                                                             \
    do {                                                                                     \
        src_tensor *t = &ts[k++];                                                            \
        snprintf(t->name, sizeof t->name, "%s", nm);                                         \
        t->n_dims = nd; t->ne[0] = e0; t->ne[1] = e1; t->src_off = so;                      \
        t->nbytes = 4 * (uint64_t)(e0) * (uint64_t)(e1);                                     \
    } while (0)
    ADD("token_embd.weight", 2, dim, vocab, off[T_EMB]);
    ADD("output_norm.weight", 1, dim, 1, off[T_FINAL]);
    ADD("output.weight", 2, dim, vocab, shared ? off[T_EMB] : off[T_CLS]);
    for (int64_t l = 0; l < L; l++) {
        char nm[64];
#define LNAME(s) (snprintf(nm, sizeof nm, "blk.%lld." s, (long long)l), nm)
        ADD(LNAME("attn_norm.weight"), 1, dim, 1, off[T_ATTN_NORM] + 4 * (uint64_t)(l * dim));
        ADD(LNAME("attn_q.weight"), 2, dim, dim, off[T_Q] + 4 * (uint64_t)(l * dim * dim));
        ADD(LNAME("attn_k.weight"), 2, dim, kvd, off[T_K] + 4 * (uint64_t)(l * kvd * dim));
        ADD(LNAME("attn_v.weight"), 2, dim, kvd, off[T_V] + 4 * (uint64_t)(l * kvd * dim));
        ADD(LNAME("attn_output.weight"), 2, dim, dim, off[T_O] + 4 * (uint64_t)(l * dim * dim));
        ADD(LNAME("ffn_norm.weight"), 1, dim, 1, off[T_FFN_NORM] + 4 * (uint64_t)(l * dim));
        ADD(LNAME("ffn_gate.weight"), 2, dim, hidden, off[T_GATE] + 4 * (uint64_t)(l * hidden * dim));
        ADD(LNAME("ffn_down.weight"), 2, hidden, dim, off[T_DOWN] + 4 * (uint64_t)(l * dim * hidden));
        ADD(LNAME("ffn_up.weight"), 2, dim, hidden, off[T_UP] + 4 * (uint64_t)(l * hidden * dim));
#undef LNAME
    }
#undef ADD
    DF_ASSERT(k == nt);
    *out = ts;
    *n_out = nt;
    return DF_OK;
}

int cmd_convert_llama2c(int argc, char **argv) {
    const char *pos[3] = {0};
    int npos = 0;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        if (!strcmp(argv[i], "--name") && i + 1 < argc) { name = argv[++i]; continue; }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "convert-llama2c: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
        if (npos == 3) { usage(stderr); return 2; }
        pos[npos++] = argv[i];
    }
    if (npos != 3) { usage(stderr); return 2; }
    const char *mpath = pos[0], *tpath = pos[1], *opath = pos[2];

    int rc = DF_OK, in = -1, out = -1;
    df_gguf_writer *w = NULL;
    l2c_vocab voc = {0};
    src_tensor *ts = NULL;
    void *buf = NULL;
    char *tmp = NULL;
    char nbuf[256];

    in = open(mpath, O_RDONLY | O_CLOEXEC);
    if (in < 0) { rc = df_err(DF_ERR_IO, "%s: %s", mpath, strerror(errno)); goto done; }
    struct stat st;
    if (fstat(in, &st) < 0) { rc = df_err(DF_ERR_IO, "%s: %s", mpath, strerror(errno)); goto done; }
    int32_t cfg[7];
    if (pread(in, cfg, sizeof cfg, 0) != (ssize_t)sizeof cfg) {
        rc = df_err(DF_ERR_FORMAT, "%s: too short for a llama2.c checkpoint header", mpath);
        goto done;
    }
    int64_t dim = cfg[0], hidden = cfg[1], L = cfg[2], nh = cfg[3], nkv = cfg[4],
            vocab = cfg[5] < 0 ? -(int64_t)cfg[5] : cfg[5], seq = cfg[6];
    bool shared = cfg[5] > 0;
    if (dim <= 0 || hidden <= 0 || L <= 0 || L > 512 || nh <= 0 || nkv <= 0 || vocab < 3 ||
        seq <= 0 || dim % nh || nh % nkv || (dim / nh) % 2 || dim > (1 << 20) ||
        hidden > (1 << 22) || vocab > (1 << 24) || seq > (1 << 24)) {
        rc = df_err(DF_ERR_FORMAT,
                    "%s: implausible llama2.c config (dim %d hidden %d layers %d heads %d kv %d "
                    "vocab %d seq %d) — is this a legacy (version 0) llama2.c checkpoint?",
                    mpath, cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5], cfg[6]);
        goto done;
    }
    int64_t hs = dim / nh;

    l2c_cfg cf = {dim, hidden, L, nh, nkv, vocab, seq, shared};
    int nt = 0;
    rc = l2c_tensors(mpath, &cf, (uint64_t)st.st_size, &ts, &nt);
    if (rc) goto done;
    rc = l2c_vocab_load(tpath, (int)vocab, &voc);
    if (rc) goto done;

    w = df_gguf_writer_new(32);
    if (!w) { rc = DF_ERR_NOMEM; goto done; }
    if (!name) {
        const char *b = strrchr(mpath, '/');
        b = b ? b + 1 : mpath;
        snprintf(nbuf, sizeof nbuf, "%s", b);
        size_t bl = strlen(nbuf);
        if (bl > 4 && !strcmp(nbuf + bl - 4, ".bin")) nbuf[bl - 4] = 0;
        name = nbuf;
    }
    if ((rc = df_gguf_w_str(w, "general.architecture", "llama")) ||
        (rc = df_gguf_w_str(w, "general.name", name)) ||
        (rc = df_gguf_w_u32(w, "general.file_type", 0)) ||
        (rc = df_gguf_w_u32(w, "llama.context_length", (uint32_t)seq)) ||
        (rc = df_gguf_w_u32(w, "llama.embedding_length", (uint32_t)dim)) ||
        (rc = df_gguf_w_u32(w, "llama.feed_forward_length", (uint32_t)hidden)) ||
        (rc = df_gguf_w_u32(w, "llama.block_count", (uint32_t)L)) ||
        (rc = df_gguf_w_u32(w, "llama.attention.head_count", (uint32_t)nh)) ||
        (rc = df_gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)nkv)) ||
        (rc = df_gguf_w_u32(w, "llama.rope.dimension_count", (uint32_t)hs)) ||
        (rc = df_gguf_w_f32(w, "llama.rope.freq_base", 10000.0f)) ||
        (rc = df_gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f)) ||
        (rc = df_gguf_w_u32(w, "llama.vocab_size", (uint32_t)vocab)) ||
        (rc = l2c_vocab_write_kv(w, &voc)))
        goto done;
    for (int i = 0; i < nt; i++)
        if ((rc = df_gguf_w_tensor(w, ts[i].name, DF_TYPE_F32, ts[i].n_dims, ts[i].ne, NULL)))
            goto done;

    size_t tl = strlen(opath) + 8;
    tmp = df_malloc(tl);
    if (!tmp) { rc = DF_ERR_NOMEM; goto done; }
    snprintf(tmp, tl, "%s.tmp", opath);
    out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) { rc = df_err(DF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    const size_t cap = 4u << 20;
    buf = df_malloc(cap);
    if (!buf) { rc = DF_ERR_NOMEM; goto done; }
    if ((rc = df_gguf_writer_write_header(w, out))) goto done;
    for (int i = 0; i < nt; i++)
        if ((rc = copy_range(in, ts[i].src_off, ts[i].nbytes, w, out, i, buf, cap, mpath))) goto done;
    if (fsync(out) < 0) { rc = df_err(DF_ERR_IO, "%s: fsync: %s", tmp, strerror(errno)); goto done; }
    if (close(out) < 0) { out = -1; rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno)); goto done; }
    out = -1;
    if (rename(tmp, opath) < 0) { rc = df_err(DF_ERR_IO, "rename %s → %s: %s", tmp, opath, strerror(errno)); goto done; }
    fprintf(stderr, "convert-llama2c: wrote %s (llama, dim %lld, %lld layers, %lld heads / %lld kv, "
                    "ffn %lld, vocab %lld, ctx %lld, %s classifier)\n",
            opath, (long long)dim, (long long)L, (long long)nh, (long long)nkv, (long long)hidden,
            (long long)vocab, (long long)seq, shared ? "shared" : "separate");

done:
    if (out >= 0) { close(out); unlink(tmp); }
    if (in >= 0) close(in);
    free(buf);
    free(tmp);
    free(ts);
    l2c_vocab_free(&voc);
    df_gguf_writer_free(w);
    if (rc) {
        fprintf(stderr, "convert-llama2c: %s\n", df_errmsg());
        return 1;
    }
    return 0;
}
