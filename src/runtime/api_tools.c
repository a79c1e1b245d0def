/* api_tools.c — the public API the command-line tools live on besides inference
 * (include/deltafin.h): process setup and error reporting for applications, the vocabulary
 * as its own handle, tensor type names, small model/context queries, and the model-file tools
 * pack / pack check / verify. Each function translates between the public types and one or
 * two internal calls; nothing here keeps state.
 * Threading: all functions are thread-safe (vocab functions as the tokenizer's). */
#include "deltafin.h"
#include "base/util.h"
#include "format/gguf.h"
#include "format/pack.h"
#include "base/hash.h"
#include "forward/session.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "text/chat.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- process and errors ------------------------------------------------------------------ */
void deltafin_init(void) { df_init(); }

int deltafin_set_error(int status, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return df_err(status, "%s", buf);
}

const char *deltafin_kernel_isa(void) {
    df_init();
    return df_kernels()->name;
}

int deltafin_read_file(const char *path, char **data, size_t *len) { return df_read_file(path, data, len); }

/* ---- model and context queries ----------------------------------------------------------- */
uint64_t deltafin_model_size(const deltafin_model *m) {
    df_footprint fp;
    df_model_footprint(m, 0, &fp);
    return fp.dense_bytes + fp.expert_bytes;
}

uint64_t deltafin_model_n_params(const deltafin_model *m) {
    uint64_t n = 0;
    for (int i = 0; i < m->n_bound; i++) {
        const df_gguf_tensor *t = m->tensors[i].info;
        n += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    return n;
}

const char *deltafin_model_desc(const deltafin_model *m, char *buf, size_t cap) {
    uint64_t by_type[DF_TYPE_COUNT] = {0};
    int main_type = -1;
    for (int i = 0; i < m->n_bound; i++) { /* the type of the most weight bytes (2-D and 3-D tensors) */
        const df_gguf_tensor *t = m->tensors[i].info;
        if (t->n_dims < 2 || t->type < 0 || t->type >= DF_TYPE_COUNT) continue;
        by_type[t->type] += t->nbytes;
        if (main_type < 0 || by_type[t->type] > by_type[main_type]) main_type = t->type;
    }
    const char *size = deltafin_model_meta_str(m, "general.size_label");
    snprintf(buf, cap, "%s %s %s", deltafin_model_arch(m), size && *size ? size : "?B", deltafin_type_name(main_type));
    return buf;
}

/* ---- vocabulary: a deltafin_vocab is a df_tokenizer ---------------------------------------- */
static const df_tokenizer *tok(const deltafin_vocab *v) { return (const df_tokenizer *)v; }

const deltafin_vocab *deltafin_model_vocab(const deltafin_model *m) {
    return (const deltafin_vocab *)m->tokenizer;
}

int deltafin_vocab_load(const char *path, const char *pre_override, deltafin_vocab **out) {
    *out = NULL;
    df_init();
    df_gguf *g = NULL;
    int rc = df_gguf_open(path, &g);
    if (rc < 0) return rc;
    df_tokenizer *t = NULL;
    df_tokenizer_opts o = {.pre_override = pre_override};
    rc = df_tokenizer_load_ex(g, &o, &t);
    df_gguf_close(g);
    if (rc < 0) return df_err_prefix(rc, "%s", path);
    *out = (deltafin_vocab *)t;
    return DF_OK;
}

void deltafin_vocab_free(deltafin_vocab *v) {
    if (v) df_tokenizer_free((df_tokenizer *)v);
}

int deltafin_vocab_tokenize(const deltafin_vocab *v, const char *text, size_t len, bool add_special,
                            bool parse_special, int32_t *ids, int cap) {
    return df_tokenize(tok(v), text, len, add_special, parse_special, ids, cap);
}

int deltafin_vocab_tokenize_alloc(const deltafin_vocab *v, const char *text, size_t len,
                                  bool add_special, bool parse_special, int32_t **ids) {
    return df_tokenize_alloc(tok(v), text, len, add_special, parse_special, ids);
}

int deltafin_vocab_token_to_piece(const deltafin_vocab *v, int32_t id, bool special, char *buf, int cap) {
    return df_token_to_piece(tok(v), id, special, buf, cap);
}

void deltafin_vocab_get_info(const deltafin_vocab *v, deltafin_vocab_info *out) {
    const df_tokenizer *t = tok(v);
    const int32_t *eog = NULL;
    memset(out, 0, sizeof *out);
    out->type = df_tokenizer_type(t) == DF_TOK_SPM ? "SPM" : "BPE";
    out->pre = df_tokenizer_pre(t);
    out->n_tokens = df_tokenizer_n_vocab(t);
    out->bos = df_tokenizer_bos(t);
    out->eos = df_tokenizer_eos(t);
    out->n_eog = df_tokenizer_eog_ids(t, &eog);
    out->add_bos = df_tokenizer_add_bos(t);
    out->add_eos = df_tokenizer_add_eos(t);
    out->eog = eog;
}

/* ---- chat templates ---------------------------------------------------------------------- */
int deltafin_chat_template_check(const char *name) {
    if (name && df_chat_builtin_template(name)) return DF_OK;
    char list[512] = "";
    size_t w = 0;
    for (const char *const *n = df_chat_builtin_names(); *n && w + 2 < sizeof list; n++) {
        int k = snprintf(list + w, sizeof list - w, "%s%s", w ? ", " : "", *n);
        if (k < 0) break;
        w += (size_t)k;
    }
    return df_err(DF_ERR_INVALID, "unknown chat template '%s' (built in: %s; without --chat-template the model's own "
                  "template is used)", name ? name : "(null)", list);
}

/* ---- tensor types ------------------------------------------------------------------------ */
int deltafin_type_from_name(const char *name) {
    int t = name ? df_type_from_name(name) : -1;
    if (t < 0) return df_err(DF_ERR_INVALID, "unknown tensor type '%s'", name ? name : "(null)");
    return t;
}

const char *deltafin_type_name(int type) {
    const df_type_traits *ti = type >= 0 && type < DF_TYPE_COUNT ? df_type_info(type) : NULL;
    return ti && ti->name ? ti->name : "?";
}

int deltafin_type_count(void) { return DF_TYPE_COUNT; }

bool deltafin_type_can_quantize(int type) {
    const df_type_traits *ti = type >= 0 && type < DF_TYPE_COUNT ? df_type_info(type) : NULL;
    return ti && ti->name && ti->can_quantize;
}

/* ---- pack, pack check, verify ------------------------------------------------------------ */
int deltafin_pack(const char *in_path, const char *out_path, const deltafin_pack_params *p) {
    df_init();
    df_pack_opts o = {0};
    if (p) {
        o.progress_tty = p->progress == DELTAFIN_PROGRESS_BAR;
        o.progress_lines = p->progress == DELTAFIN_PROGRESS_LINES;
        o.fail_after = p->fail_after;
        o.version = p->version;
    }
    return df_pack_write(in_path, out_path, &o);
}

int deltafin_pack_check(const char *path, uint64_t *n_records, int *version) {
    df_gguf *g = NULL;
    df_pack *p = NULL;
    *n_records = 0;
    if (version) *version = 0;
    int rc = df_gguf_open(path, &g);
    if (!rc) rc = df_pack_open(g, &p);
    if (!rc && version) *version = df_pack_version(p);
    if (!rc) rc = df_pack_check(g, p, n_records);
    df_pack_close(p);
    df_gguf_close(g);
    return rc;
}

int deltafin_file_check(const char *path, bool *packed) {
    df_gguf *g = NULL;
    *packed = false;
    int rc = df_gguf_open(path, &g);
    if (rc < 0) return rc;
    *packed = df_pack_is_packed(g);
    df_gguf_close(g);
    return DF_OK;
}

int deltafin_file_check_one(const char *path) {
    df_gguf *g = NULL;
    int rc = df_gguf_open_single(path, &g);
    df_gguf_close(g);
    return rc;
}

/* One part read with its own pread: a short read says where the file ends now. */
static int read_part(const df_gguf_shard *sh, uint8_t *buf, uint64_t n, uint64_t off, char *err, size_t cap) {
    ssize_t got = pread(sh->fd, buf, n, (off_t)off);
    if (got == (ssize_t)n) return DF_OK;
    struct stat st;
    if (got < 0) snprintf(err, cap, "%s", strerror(errno));
    else if (fstat(sh->fd, &st) == 0 && (uint64_t)st.st_size < off + n)
        snprintf(err, cap, "truncated: the file ends at byte %llu, this part needs bytes up to %llu",
                 (unsigned long long)st.st_size, (unsigned long long)(off + n));
    else snprintf(err, cap, "short read: %lld of %llu bytes", (long long)got, (unsigned long long)n);
    return DF_ERR_IO;
}

typedef struct {
    const df_gguf *g;
    const df_pack *p;
    int (*cb)(void *, const deltafin_pack_record *);
    void *ud;
    deltafin_pack_verify_result *res;
    uint8_t *buf;
    uint64_t done, total;
    bool stop;
    char err[256];
} verifier;

/* Read [off, off + n) of shard 0 (a packed file is one file), hash it, report it. */
static void check_part(verifier *v, deltafin_pack_record *pr, uint64_t want) {
    const df_gguf_shard *sh = &v->g->shards[0];
    pr->path = sh->path;
    pr->xxh64_expected = want;
    pr->status = read_part(sh, v->buf, pr->nbytes, pr->offset, v->err, sizeof v->err);
    if (pr->status) pr->error = v->err;
    else {
        pr->xxh64 = df_xxh64(v->buf, pr->nbytes, 0);
        if (pr->xxh64 != want) pr->status = DF_ERR_CHECKSUM;
    }
    if (pr->status) v->res->n_bad++;
    else v->res->n_ok++;
    v->done += pr->nbytes;
    pr->done = v->done;
    pr->total = v->total;
    if (v->cb && !v->stop && v->cb(v->ud, pr)) v->stop = true;
}

/* Version 2: the table's own row, the header, every dense tensor chunk, the index. */
static void verify_sums(verifier *v) {
    int n = 0;
    const char *why = NULL;
    const df_pack_sum *rows = df_pack_sums(v->p, &n, &why);
    const df_gguf_tensor *st = df_gguf_tensor_find(v->g, "deltafin.pack.sums");
    if (!rows) {
        bool hdr = df_pack_header_changed(v->p);
        deltafin_pack_record pr = {.kind = hdr ? DELTAFIN_PACK_PART_HEADER : DELTAFIN_PACK_PART_TABLE,
                                   .tensor = "deltafin.pack.sums", .path = v->g->shards[0].path,
                                   .offset = hdr ? 0 : st->offset, .nbytes = hdr ? v->g->shards[0].data_start : st->nbytes,
                                   .status = DF_ERR_FORMAT, .error = why};
        v->res->n_bad++;
        if (v->cb && !v->stop && v->cb(v->ud, &pr)) v->stop = true;
        return;
    }
    const df_pack_sum *self = &rows[n - 1];
    deltafin_pack_record pr = {.kind = DELTAFIN_PACK_PART_TABLE, .tensor = "deltafin.pack.sums",
                               .offset = st->offset, .nbytes = self->nbytes};
    check_part(v, &pr, self->xxh64);
    int last = -1;
    for (int i = 0; i < n - 1 && !v->stop; i++) {
        const df_pack_sum *r = &rows[i];
        deltafin_pack_record q = {.nbytes = r->nbytes};
        if (r->what == DF_PACK_SUM_HEADER) {
            q.kind = DELTAFIN_PACK_PART_HEADER;
            q.offset = 0;
            v->res->header_bytes = r->nbytes;
        } else {
            const df_gguf_tensor *t = &v->g->tensors[r->what];
            bool is_index = !strcmp(t->name, "deltafin.pack.index");
            q.kind = is_index ? DELTAFIN_PACK_PART_INDEX : DELTAFIN_PACK_PART_TENSOR;
            q.tensor = t->name;
            q.tensor_offset = r->offset;
            q.tensor_bytes = t->nbytes;
            q.offset = t->offset + r->offset;
            if (!is_index && r->what != last) {
                v->res->n_tensors++;
                v->res->tensor_bytes += t->nbytes;
            }
            last = (int)r->what;
        }
        check_part(v, &q, r->xxh64);
    }
}

/* Every expert record. */
static int verify_records(verifier *v) {
    const int L = df_pack_n_layers(v->p), E = df_pack_n_experts(v->p);
    uint64_t n = (uint64_t)L * (uint64_t)E, nloc;
    df_expert_loc *locs = NULL;
    df_expert_record *rec = NULL;
    if (!df_mul_ok(n, 3, &nloc) || !(locs = df_calloc(nloc ? nloc : 1, sizeof *locs)) ||
        !(rec = df_calloc(n ? n : 1, sizeof *rec))) {
        free(locs);
        return DF_ERR_NOMEM;
    }
    int rc = df_pack_locs(v->p, locs, rec);
    for (uint64_t k = 0; k < n && !rc && !v->stop; k++) {
        const df_expert_record *r = &rec[k];
        if (!r->nbytes) continue;
        deltafin_pack_record pr = {.kind = DELTAFIN_PACK_PART_EXPERT, .layer = (int)(k / (uint64_t)E),
                                   .expert = (int)(k % (uint64_t)E), .offset = r->offset, .nbytes = r->nbytes};
        check_part(v, &pr, r->xxh64);
        v->res->n_records++;
    }
    free(rec);
    free(locs);
    return rc;
}

/* The largest part to read and the bytes of all parts (for the buffer and the progress). */
static int verify_sizes(const df_gguf *g, const df_pack *p, uint64_t *maxr, uint64_t *total) {
    int n = 0;
    const df_pack_sum *rows = df_pack_sums(p, &n, NULL);
    *maxr = *total = 0;
    for (int i = 0; i < n; i++) {
        *total += rows[i].nbytes;
        if (rows[i].nbytes > *maxr) *maxr = rows[i].nbytes;
    }
    uint64_t nrec = (uint64_t)df_pack_n_layers(p) * (uint64_t)df_pack_n_experts(p);
    df_expert_loc *locs = df_calloc(nrec * 3 + 1, sizeof *locs);
    df_expert_record *rec = df_calloc(nrec + 1, sizeof *rec);
    int rc = locs && rec ? df_pack_locs(p, locs, rec) : DF_ERR_NOMEM;
    for (uint64_t k = 0; k < nrec && !rc; k++) {
        *total += rec[k].nbytes;
        if (rec[k].nbytes > *maxr) *maxr = rec[k].nbytes;
    }
    free(locs);
    free(rec);
    (void)g;
    return rc;
}

int deltafin_pack_verify(const char *path, int (*cb)(void *ud, const deltafin_pack_record *r), void *ud,
                         deltafin_pack_verify_result *res) {
    memset(res, 0, sizeof *res);
    df_gguf *g = NULL;
    int rc = df_gguf_open(path, &g);
    if (rc < 0) return rc;
    df_pack *p = NULL;
    rc = df_pack_open(g, &p);
    uint64_t got = 0, want = 0;
    if (rc == DF_ERR_FORMAT && df_pack_check_header_raw(g, &got, &want) == DF_ERR_CHECKSUM) {
        /* the pack keys were damaged: say it is the header (nothing else can be checked) */
        deltafin_pack_record pr = {.kind = DELTAFIN_PACK_PART_HEADER, .path = g->shards[0].path,
                                   .nbytes = g->shards[0].data_start, .status = DF_ERR_CHECKSUM, .xxh64 = got,
                                   .xxh64_expected = want};
        res->version = 2;
        res->n_bad = 1;
        if (cb) cb(ud, &pr);
        df_gguf_close(g);
        return DF_OK;
    }
    verifier v = {.g = g, .p = p, .cb = cb, .ud = ud, .res = res};
    uint64_t maxr = 0;
    if (rc == DF_OK) {
        res->version = df_pack_version(p);
        res->unprotected_bytes = df_pack_unprotected(p, &res->unprotected_tensors, &res->header_bytes);
        rc = verify_sizes(g, p, &maxr, &v.total);
    }
    if (rc == DF_OK && !(v.buf = df_malloc(maxr ? maxr : 1))) rc = DF_ERR_NOMEM;
    if (rc == DF_OK && res->version >= 2) verify_sums(&v);
    if (rc == DF_OK) rc = verify_records(&v);
    free(v.buf);
    df_pack_close(p);
    df_gguf_close(g);
    return rc;
}
