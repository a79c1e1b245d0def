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
#include "text/tokenizer.h"

#include <errno.h>
#include <stdarg.h>
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
    }
    return df_pack_write(in_path, out_path, &o);
}

int deltafin_pack_check(const char *path, uint64_t *n_records) {
    df_gguf *g = NULL;
    df_pack *p = NULL;
    *n_records = 0;
    int rc = df_gguf_open(path, &g);
    if (!rc) rc = df_pack_open(g, &p);
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

/* Reads each record with its own pread (a short read names the truncation) and checks it. */
static int verify_records(const df_gguf *g, const df_pack *p, int (*cb)(void *, const deltafin_pack_record *),
                          void *ud, uint64_t *n_ok, uint64_t *n_bad) {
    const int L = df_pack_n_layers(p), E = df_pack_n_experts(p);
    uint64_t n = (uint64_t)L * (uint64_t)E, nloc;
    df_expert_loc *locs = NULL;
    df_expert_record *rec = NULL;
    if (!df_mul_ok(n, 3, &nloc) || !(locs = df_calloc(nloc ? nloc : 1, sizeof *locs)) ||
        !(rec = df_calloc(n ? n : 1, sizeof *rec))) {
        free(locs);
        return DF_ERR_NOMEM;
    }
    int rc = df_pack_locs(p, locs, rec);
    uint64_t maxr = 0, total = 0, done = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (rec[k].nbytes > maxr) maxr = rec[k].nbytes;
        total += rec[k].nbytes;
    }
    uint8_t *buf = rc ? NULL : df_malloc(maxr ? maxr : 1);
    if (!rc && !buf) rc = DF_ERR_NOMEM;
    for (uint64_t k = 0; k < n && !rc; k++) {
        const df_expert_record *r = &rec[k];
        if (!r->nbytes) continue;
        deltafin_pack_record pr = {.layer = (int)(k / (uint64_t)E), .expert = (int)(k % (uint64_t)E),
                                   .path = g->shards[r->file].path, .offset = r->offset, .nbytes = r->nbytes,
                                   .xxh64_expected = r->xxh64, .total = total};
        ssize_t got = pread(g->shards[r->file].fd, buf, r->nbytes, (off_t)r->offset);
        if (got != (ssize_t)r->nbytes) {
            pr.status = DF_ERR_IO;
            pr.error = got < 0 ? strerror(errno) : "short read (file truncated?)";
        } else {
            pr.xxh64 = df_xxh64(buf, r->nbytes, 0);
            pr.status = pr.xxh64 == r->xxh64 ? DF_OK : DF_ERR_CHECKSUM;
        }
        if (pr.status) (*n_bad)++;
        else (*n_ok)++;
        done += r->nbytes;
        pr.done = done;
        if (cb && cb(ud, &pr)) break;
    }
    free(buf);
    free(rec);
    free(locs);
    return rc;
}

int deltafin_pack_verify(const char *path, int (*cb)(void *ud, const deltafin_pack_record *r), void *ud,
                         uint64_t *n_ok, uint64_t *n_bad) {
    *n_ok = *n_bad = 0;
    df_gguf *g = NULL;
    int rc = df_gguf_open(path, &g);
    if (rc < 0) return rc;
    df_pack *p = NULL;
    rc = df_pack_open(g, &p);
    if (rc == DF_OK) rc = verify_records(g, p, cb, ud, n_ok, n_bad);
    df_pack_close(p);
    df_gguf_close(g);
    return rc;
}
