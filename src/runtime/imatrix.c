/* imatrix.c — importance matrices as llama-imatrix (tools/imatrix, d32676d) collects and writes
 * them and llama-quantize reads them (common/imatrix-loader.cpp, tools/quantize load_imatrix):
 *  - collection: a matmul observer on a ctx (deltafin_ctx_set_matmul_observer) adds x² of every
 *    input column to the weight's entry, per expert for routed experts, and counts rows; the
 *    rules that decide which products count are llama-imatrix's collect_imatrix;
 *  - files: GGUF (general.type "imatrix", imatrix.datasets / chunk_count / chunk_size, per
 *    weight NAME.in_sum2 F32 [ne0, n_mat] and NAME.counts F32 [1, n_mat], names sorted) and the
 *    legacy .dat format (entries of (sums / count) · ncall, then the chunk count and dataset);
 *  - for quantize: the weights llama-quantize derives from either.
 * Untrusted files get bounds-checked reads and errors naming the problem.
 * Threading: a deltafin_imatrix is used by one thread at a time (the observer runs on the
 * decoding thread). */
#include "runtime/imatrix.h"
#include "base/hash.h"
#include "base/util.h"
#include "format/ggml_types.h"
#include "format/gguf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    char *name;
    int64_t nval;      /* sums: nval values (ne0 per matrix) */
    int n_counts;      /* 1 (plain products), or one per expert */
    float *sums;
    int64_t *counts;
    float *weights;    /* df_imatrix_prepare: llama-quantize's importance, nval values */
} im_entry;

struct deltafin_imatrix {
    im_entry *e;
    int n, cap;
    int *slot;         /* open-addressing index by name: entry + 1, 0 = empty */
    int n_slot;
    char **datasets;
    int n_datasets;
    int chunk_size, chunk_count; /* chunk_count: as loaded (collection computes it) */
    bool legacy, has_metadata, process_output;
    int err;           /* first collection error (DF_ERR_*; df_errmsg set at the time) */
    char errmsg[256];
};

static uint64_t name_hash(const char *s) { return df_xxh64(s, strlen(s), 0); }

static int find(const deltafin_imatrix *im, const char *name) {
    if (!im->n_slot) return -1;
    for (uint64_t h = name_hash(name) & (uint64_t)(im->n_slot - 1);; h = (h + 1) & (uint64_t)(im->n_slot - 1)) {
        const int s = im->slot[h];
        if (!s) return -1;
        if (!strcmp(im->e[s - 1].name, name)) return s - 1;
    }
}

static int grow_index(deltafin_imatrix *im) {
    const int ns = im->n_slot ? im->n_slot * 2 : 256;
    int *slot = df_calloc((size_t)ns, sizeof(int));
    if (!slot) return DF_ERR_NOMEM;
    for (int i = 0; i < im->n; i++) {
        uint64_t h = name_hash(im->e[i].name) & (uint64_t)(ns - 1);
        while (slot[h]) h = (h + 1) & (uint64_t)(ns - 1);
        slot[h] = i + 1;
    }
    free(im->slot);
    im->slot = slot;
    im->n_slot = ns;
    return DF_OK;
}

/* a new zeroed entry (the name must not exist yet) */
static im_entry *add(deltafin_imatrix *im, const char *name, int64_t nval, int n_counts) {
    if (nval <= 0 || n_counts <= 0 || nval % n_counts) {
        df_err(DF_ERR_FORMAT, "imatrix entry '%s': %lld values for %d counts", name, (long long)nval, n_counts);
        return NULL;
    }
    if ((im->n + 1) * 2 > im->n_slot && grow_index(im)) return NULL;
    if (im->n == im->cap) {
        const int nc = im->cap ? im->cap * 2 : 64;
        im_entry *ne = realloc(im->e, sizeof(im_entry) * (size_t)nc);
        if (!ne) { df_err(DF_ERR_NOMEM, "out of memory"); return NULL; }
        im->e = ne;
        im->cap = nc;
    }
    im_entry *e = &im->e[im->n];
    memset(e, 0, sizeof *e);
    e->name = df_strdup(name);
    e->sums = df_calloc((size_t)nval, sizeof(float));
    e->counts = df_calloc((size_t)n_counts, sizeof(int64_t));
    if (!e->name || !e->sums || !e->counts) {
        free(e->name); free(e->sums); free(e->counts);
        return NULL;
    }
    e->nval = nval;
    e->n_counts = n_counts;
    uint64_t h = name_hash(name) & (uint64_t)(im->n_slot - 1);
    while (im->slot[h]) h = (h + 1) & (uint64_t)(im->n_slot - 1);
    im->slot[h] = ++im->n;
    return e;
}

int deltafin_imatrix_new(int chunk_size, bool process_output, deltafin_imatrix **out) {
    df_init();
    *out = NULL;
    if (chunk_size <= 0) return df_err(DF_ERR_INVALID, "imatrix: chunk size must be positive");
    deltafin_imatrix *im = df_calloc(1, sizeof *im);
    if (!im) return DF_ERR_NOMEM;
    im->chunk_size = chunk_size;
    im->process_output = process_output;
    *out = im;
    return DF_OK;
}

void deltafin_imatrix_free(deltafin_imatrix *im) {
    if (!im) return;
    for (int i = 0; i < im->n; i++) {
        free(im->e[i].name); free(im->e[i].sums); free(im->e[i].counts); free(im->e[i].weights);
    }
    for (int i = 0; i < im->n_datasets; i++) free(im->datasets[i]);
    free(im->datasets);
    free(im->e);
    free(im->slot);
    free(im);
}

int deltafin_imatrix_add_dataset(deltafin_imatrix *im, const char *name) {
    char **nd = realloc(im->datasets, sizeof(char *) * (size_t)(im->n_datasets + 1));
    if (!nd) return df_err(DF_ERR_NOMEM, "out of memory");
    im->datasets = nd;
    if (!(nd[im->n_datasets] = df_strdup(name))) return DF_ERR_NOMEM;
    im->n_datasets++;
    return DF_OK;
}

int deltafin_imatrix_n_entries(const deltafin_imatrix *im) { return im->n; }

bool deltafin_imatrix_entry(const deltafin_imatrix *im, int i, const char **name, const float **sums, int64_t *nval,
                            const int64_t **counts, int *n_counts) {
    if (i < 0 || i >= im->n) return false;
    const im_entry *e = &im->e[i];
    if (name) *name = e->name;
    if (sums) *sums = e->sums;
    if (nval) *nval = e->nval;
    if (counts) *counts = e->counts;
    if (n_counts) *n_counts = e->n_counts;
    return true;
}

int df_imatrix_put(deltafin_imatrix *im, const char *name, int64_t nval, int n_counts, const float *sums,
                   const int64_t *counts) {
    if (find(im, name) >= 0) return df_err(DF_ERR_INVALID, "imatrix: entry %s exists", name);
    im_entry *e = add(im, name, nval, n_counts);
    if (!e) return df_err_prefix(DF_ERR_INVALID, "imatrix");
    memcpy(e->sums, sums, sizeof(float) * (size_t)nval);
    memcpy(e->counts, counts, sizeof(int64_t) * (size_t)n_counts);
    return DF_OK;
}
int deltafin_imatrix_status(const deltafin_imatrix *im) {
    if (im->err) df_err(im->err, "%s", im->errmsg);
    return im->err;
}

int deltafin_imatrix_chunks(const deltafin_imatrix *im) {
    int64_t mx = 0;
    for (int i = 0; i < im->n; i++)
        for (int j = 0; j < im->e[i].n_counts; j++) mx = im->e[i].counts[j] > mx ? im->e[i].counts[j] : mx;
    return im->chunk_size > 0 ? (int)(mx / im->chunk_size) : im->chunk_count;
}

/* ------------------------------------------------------------------ collection */

static void fail(deltafin_imatrix *im, int code, const char *fmt, const char *name, double v) {
    if (im->err) return;
    im->err = code;
    snprintf(im->errmsg, sizeof im->errmsg, fmt, name, v);
}

/* llama-imatrix's collect_imatrix for one product */
static void collect(void *ud, const deltafin_matmul_info *mm) {
    deltafin_imatrix *im = ud;
    if (im->err) return;
    const char *name = mm->tensor;
    if (!mm->per_expert) { /* MUL_MAT: not under 16 rows, only blk.* (and the output if asked) */
        if (mm->n_rows < 16) return;
        if (strncmp(name, "blk.", 4) && !(im->process_output && !strcmp(name, "output.weight"))) return;
    }
    const int n_counts = mm->per_expert ? mm->n_matrix : 1;
    const int64_t nval = (int64_t)mm->n_in * mm->n_matrix;
    int i = find(im, name);
    im_entry *e = i >= 0 ? &im->e[i] : add(im, name, nval, n_counts);
    if (!e) { fail(im, DF_ERR_NOMEM, "imatrix: cannot add entry %s%.0f", name, 0); return; }
    if (e->nval != nval || e->n_counts != n_counts) {
        fail(im, DF_ERR_INVALID, "imatrix: %s seen with two shapes%.0f", name, 0);
        return;
    }
    float *s = e->sums + (int64_t)mm->matrix * mm->n_in;
    for (int r = 0; r < mm->n_rows; r++) {
        const float *x = mm->x + (int64_t)r * mm->ldx;
        for (int j = 0; j < mm->n_in; j++) {
            s[j] += x[j] * x[j];
            if (!isfinite(s[j])) { fail(im, DF_ERR_INVALID, "imatrix: %s: non-finite sum (%g)", name, (double)s[j]); return; }
        }
    }
    /* one count per row: per expert, or once per product of a plain (possibly per-head) weight */
    if (mm->per_expert) e->counts[mm->matrix] += mm->n_rows;
    else if (mm->matrix == 0) e->counts[0] += mm->n_rows;
}

int deltafin_imatrix_attach(deltafin_imatrix *im, deltafin_ctx *c) {
    return deltafin_ctx_set_matmul_observer(c, im ? collect : NULL, im);
}

/* ------------------------------------------------------------------ files */

static int cmp_entry_name(const void *a, const void *b, void *ctx) {
    const deltafin_imatrix *im = ctx;
    return strcmp(im->e[*(const int *)a].name, im->e[*(const int *)b].name);
}
static int *sorted_entries(const deltafin_imatrix *im) {
    int *ord = df_malloc(sizeof(int) * (size_t)(im->n + 1));
    if (!ord) return NULL;
    for (int i = 0; i < im->n; i++) ord[i] = i;
    qsort_r(ord, (size_t)im->n, sizeof(int), cmp_entry_name, (void *)im);
    return ord;
}

static int save_gguf(const deltafin_imatrix *im, const char *path, const int *ord) {
    df_gguf_writer *w = df_gguf_writer_new(32);
    if (!w) return DF_ERR_NOMEM;
    float **counts = df_calloc((size_t)im->n + 1, sizeof(float *));
    int rc = counts ? DF_OK : DF_ERR_NOMEM;
    if (!rc) rc = df_gguf_w_str(w, "general.type", "imatrix");
    if (!rc) rc = df_gguf_w_arr_str(w, "imatrix.datasets", (const char *const *)im->datasets, (uint64_t)im->n_datasets);
    if (!rc) rc = df_gguf_w_u32(w, "imatrix.chunk_count", (uint32_t)deltafin_imatrix_chunks(im));
    if (!rc) rc = df_gguf_w_u32(w, "imatrix.chunk_size", (uint32_t)im->chunk_size);
    for (int k = 0; k < im->n && !rc; k++) {
        const im_entry *e = &im->e[ord[k]];
        char nm[96];
        if (!(counts[k] = df_malloc(sizeof(float) * (size_t)e->n_counts))) { rc = DF_ERR_NOMEM; break; }
        for (int j = 0; j < e->n_counts; j++) counts[k][j] = (float)e->counts[j];
        const int64_t ne_s[2] = {e->nval / e->n_counts, e->n_counts}, ne_c[2] = {1, e->n_counts};
        snprintf(nm, sizeof nm, "%s.in_sum2", e->name);
        rc = df_gguf_w_tensor(w, nm, DF_TYPE_F32, 2, ne_s, e->sums);
        snprintf(nm, sizeof nm, "%s.counts", e->name);
        if (!rc) rc = df_gguf_w_tensor(w, nm, DF_TYPE_F32, 2, ne_c, counts[k]);
    }
    if (!rc) rc = df_gguf_writer_save(w, path);
    for (int k = 0; counts && k < im->n; k++) free(counts[k]);
    free(counts);
    df_gguf_writer_free(w);
    return rc;
}

static int save_legacy(const deltafin_imatrix *im, const char *path, const int *ord) {
    char *tmp = df_malloc(strlen(path) + 8);
    if (!tmp) return DF_ERR_NOMEM;
    sprintf(tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = df_err(DF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    const int32_t cs = im->chunk_size > 0 ? im->chunk_size : 1;
    int32_t n_entries = 0;
    for (int i = 0; i < im->n; i++) {
        bool any = false;
        for (int j = 0; j < im->e[i].n_counts; j++) any = any || im->e[i].counts[j];
        n_entries += any; /* an entry with no data is skipped */
    }
    bool ok = fwrite(&n_entries, 4, 1, f) == 1;
    for (int k = 0; k < im->n && ok; k++) {
        const im_entry *e = &im->e[ord[k]];
        int64_t mx = 0;
        for (int j = 0; j < e->n_counts; j++) mx = e->counts[j] > mx ? e->counts[j] : mx;
        if (!mx) continue;
        const int32_t len = (int32_t)strlen(e->name), ncall = (int32_t)((mx + cs - 1) / cs), nval = (int32_t)e->nval;
        ok = fwrite(&len, 4, 1, f) == 1 && fwrite(e->name, 1, (size_t)len, f) == (size_t)len &&
             fwrite(&ncall, 4, 1, f) == 1 && fwrite(&nval, 4, 1, f) == 1;
        const int64_t per = e->nval / e->n_counts;
        for (int64_t i = 0; i < e->nval && ok; i++) {
            float count = (float)e->counts[i / per], value = e->sums[i];
            if (count == 0.0f) value = count = 1.0f; /* partial data: 1 */
            const float v = (value / count) * (float)ncall;
            ok = fwrite(&v, 4, 1, f) == 1;
        }
    }
    const int32_t chunks = deltafin_imatrix_chunks(im);
    const char *ds = im->n_datasets ? im->datasets[im->n_datasets - 1] : "";
    const int32_t dl = (int32_t)strlen(ds);
    ok = ok && fwrite(&chunks, 4, 1, f) == 1 && fwrite(&dl, 4, 1, f) == 1 && fwrite(ds, 1, (size_t)dl, f) == (size_t)dl;
    ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
    int rc = fclose(f) == 0 && ok ? DF_OK : df_err(DF_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) < 0) rc = df_err(DF_ERR_IO, "%s: rename to %s: %s", tmp, path, strerror(errno));
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}

int deltafin_imatrix_save(const deltafin_imatrix *im, const char *path, bool legacy) {
    int *ord = sorted_entries(im);
    if (!ord) return DF_ERR_NOMEM;
    int rc = legacy ? save_legacy(im, path, ord) : save_gguf(im, path, ord);
    free(ord);
    return rc;
}

/* --- reading --- */

typedef struct { const uint8_t *p; size_t n, at; } rd;
static bool rd_i32(rd *r, int32_t *v) {
    if (r->n - r->at < 4) return false;
    memcpy(v, r->p + r->at, 4);
    r->at += 4;
    return true;
}

static int load_legacy(const char *path, const uint8_t *buf, size_t len, deltafin_imatrix *im) {
    rd r = {buf, len, 0};
    int32_t n_entries;
    if (!rd_i32(&r, &n_entries) || n_entries < 1) return df_err(DF_ERR_FORMAT, "%s: no imatrix entries", path);
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t nl, ncall, nval;
        if (!rd_i32(&r, &nl) || nl < 1 || nl > 1024 || r.n - r.at < (size_t)nl)
            return df_err(DF_ERR_FORMAT, "%s: entry %d: bad name length", path, i + 1);
        char name[1025];
        memcpy(name, r.p + r.at, (size_t)nl);
        name[nl] = 0;
        r.at += (size_t)nl;
        if (!rd_i32(&r, &ncall) || !rd_i32(&r, &nval) || nval < 1 || (r.n - r.at) / 4 < (size_t)nval)
            return df_err(DF_ERR_FORMAT, "%s: entry %s: bad or truncated values", path, name);
        if (find(im, name) >= 0) return df_err(DF_ERR_FORMAT, "%s: entry %s appears twice", path, name);
        im_entry *e = add(im, name, nval, 1);
        if (!e) return df_err_prefix(DF_ERR_NOMEM, "%s", path);
        memcpy(e->sums, r.p + r.at, 4 * (size_t)nval);
        r.at += 4 * (size_t)nval;
        e->counts[0] = ncall;
    }
    int32_t chunks, dl; /* optional tail: chunk count and dataset */
    if (rd_i32(&r, &chunks)) {
        im->chunk_count = chunks;
        if (rd_i32(&r, &dl) && dl > 0 && r.n - r.at >= (size_t)dl) {
            char *ds = df_strndup((const char *)r.p + r.at, (size_t)dl);
            if (!ds) return DF_ERR_NOMEM;
            int rc = deltafin_imatrix_add_dataset(im, ds);
            free(ds);
            if (rc) return rc;
        }
    }
    im->legacy = true;
    return DF_OK;
}

/* NAME.in_sum2 + NAME.counts pairs of a GGUF imatrix */
static int load_gguf_entries(const char *path, const df_gguf *g, deltafin_imatrix *im) {
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        const size_t len = strlen(t->name), ls = strlen(".in_sum2");
        if (len <= ls || strcmp(t->name + len - ls, ".in_sum2")) continue;
        char base[64], cname[80];
        snprintf(base, sizeof base, "%.*s", (int)(len - ls), t->name);
        snprintf(cname, sizeof cname, "%s.counts", base);
        const df_gguf_tensor *c = df_gguf_tensor_find(g, cname);
        if (!c) return df_err(DF_ERR_FORMAT, "%s: mismatched sums and counts for %s", path, base);
        if (t->type != DF_TYPE_F32 || c->type != DF_TYPE_F32)
            return df_err(DF_ERR_FORMAT, "%s: %s: sums and counts must be F32", path, base);
        const int64_t nval = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        const int64_t ncnt = c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3];
        if (ncnt < 1 || ncnt > INT32_MAX || nval % ncnt) return df_err(DF_ERR_FORMAT, "%s: %s: %lld sums for %lld counts", path, base, (long long)nval, (long long)ncnt);
        im_entry *e = add(im, base, nval, (int)ncnt);
        if (!e) return df_err_prefix(DF_ERR_FORMAT, "%s", path);
        float *cf = df_malloc(sizeof(float) * (size_t)ncnt);
        int rc = cf ? df_gguf_read(g, t, 0, e->sums, t->nbytes) : DF_ERR_NOMEM;
        if (!rc) rc = df_gguf_read(g, c, 0, cf, c->nbytes);
        for (int64_t j = 0; !rc && j < ncnt; j++) e->counts[j] = lroundf(cf[j]);
        free(cf);
        if (rc) return rc;
    }
    for (int i = 0; i < g->n_tensors; i++) { /* a counts tensor without its sums */
        const char *n = g->tensors[i].name;
        const size_t len = strlen(n), lc = strlen(".counts");
        if (len > lc && !strcmp(n + len - lc, ".counts")) {
            char base[64];
            snprintf(base, sizeof base, "%.*s", (int)(len - lc), n);
            if (find(im, base) < 0) return df_err(DF_ERR_FORMAT, "%s: mismatched sums and counts for %s", path, base);
        }
    }
    return DF_OK;
}

static int load_gguf(const char *path, deltafin_imatrix *im) {
    df_gguf *g = NULL;
    int rc = df_gguf_open_single(path, &g);
    if (rc) return rc;
    if (g->n_tensors < 1) rc = df_err(DF_ERR_FORMAT, "%s: no imatrix entries", path);
    const void *arr;
    uint64_t n;
    const bool has_ds = df_gguf_find(g, "imatrix.datasets") != NULL;
    if (!rc && df_gguf_get_arr(g, "imatrix.datasets", DF_GGUF_STRING, &arr, &n) == DF_OK)
        for (uint64_t i = 0; i < n && !rc; i++) rc = deltafin_imatrix_add_dataset(im, ((const df_gguf_str *)arr)[i].data);
    uint32_t cc = 0, cs = 0;
    const int r1 = df_gguf_get_u32(g, "imatrix.chunk_count", &cc), r2 = df_gguf_get_u32(g, "imatrix.chunk_size", &cs);
    im->has_metadata = has_ds && r1 == DF_OK && r2 == DF_OK;
    im->chunk_count = (int)cc;
    im->chunk_size = (int)cs;
    if (!rc) rc = load_gguf_entries(path, g, im);
    df_gguf_close(g);
    return rc;
}

int deltafin_imatrix_load(const char *path, deltafin_imatrix **out) {
    df_init();
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    int rc = df_read_file(path, &buf, &len);
    if (rc) return rc;
    deltafin_imatrix *im = df_calloc(1, sizeof *im);
    if (!im) { free(buf); return DF_ERR_NOMEM; }
    /* llama.cpp tries GGUF first, then the legacy format */
    rc = len >= 4 && !memcmp(buf, "GGUF", 4) ? load_gguf(path, im) : load_legacy(path, (const uint8_t *)buf, len, im);
    free(buf);
    /* what the collector would resume with: chunk size as recorded (legacy: 0, ncall-scaled) */
    if (rc) { deltafin_imatrix_free(im); return rc; }
    *out = im;
    return DF_OK;
}

/* ------------------------------------------------------------------ for quantize */

int df_imatrix_prepare(deltafin_imatrix *im) {
    if (!im->legacy && !im->has_metadata)
        return df_err(DF_ERR_FORMAT, "imatrix: missing metadata (imatrix.datasets, chunk_count, chunk_size): not a "
                      "file llama-imatrix wrote; llama-quantize refuses it too");
    for (int i = 0; i < im->n; i++) {
        im_entry *e = &im->e[i];
        free(e->weights);
        if (!(e->weights = df_malloc(sizeof(float) * (size_t)e->nval))) return DF_ERR_NOMEM;
        const int64_t per = e->nval / e->n_counts;
        for (int64_t j = 0; j < e->nval; j++) {
            float v;
            if (im->legacy) v = e->counts[0] > 0 ? e->sums[j] / (float)e->counts[0] : e->sums[j];
            else {
                const float count = (float)e->counts[j / per];
                v = count > 0.0f ? e->sums[j] / count : 1;
            }
            if (!isfinite(v)) return df_err(DF_ERR_FORMAT, "imatrix: entry %s has a non-finite value %f", e->name, (double)v);
            e->weights[j] = v;
        }
    }
    return DF_OK;
}

const float *df_imatrix_weights(const deltafin_imatrix *im, const char *name, int64_t *n) {
    const int i = find(im, name);
    if (i < 0 || !im->e[i].weights) return NULL;
    *n = im->e[i].nval;
    return im->e[i].weights;
}

const char *df_imatrix_dataset(const deltafin_imatrix *im) { return im->n_datasets ? im->datasets[0] : NULL; }
int df_imatrix_file_chunks(const deltafin_imatrix *im) { return im->chunk_count; }
