/* gguf_write.c — the GGUF writer (format/gguf.h): KVs and tensor infos are collected in
 * memory, the header is serialised in one buffer, tensor data follows (streamed or from
 * memory), offsets = running sum of padded sizes. Threading: a writer is used by one thread. */
#include "format/gguf.h"
#include "base/utf8.h"
#include "format/ggml_types.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include "format/gguf_impl.h"

/* ---- writer ----------------------------------------------------------------------------- */
typedef struct {
    char name[GGUF_MAX_NAME];
    int type, n_dims;
    int64_t ne[4];
    uint64_t nbytes, offset;
    const void *data;
} wtensor;

static const char *wtensor_name(const void *arr, int i) { return ((const wtensor *)arr)[i].name; }

struct df_gguf_writer {
    uint32_t alignment;
    int n_kv, cap_kv;
    df_gguf_kv *kv;
    int n_t, cap_t;
    wtensor *t;
    hmap th;          /* tensor name -> index */
    /* streaming state */
    bool header_done;
    int cur;          /* tensor being written */
    uint64_t cur_done; /* bytes of it written */
};

df_gguf_writer *df_gguf_writer_new(uint32_t alignment) {
    if (alignment == 0) alignment = GGUF_DEFAULT_ALIGNMENT;
    if (alignment & (alignment - 1)) {
        df_err(DF_ERR_INVALID, "gguf writer: alignment %u is not a power of two", alignment);
        return NULL;
    }
    df_gguf_writer *w = df_calloc(1, sizeof *w);
    if (w) w->alignment = alignment;
    return w;
}

void df_gguf_writer_free(df_gguf_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n_kv; i++) df_gguf_kv_free(&w->kv[i]);
    free(w->kv);
    free(w->t);
    free(w->th.slot);
    free(w);
}

static int w_new_kv(df_gguf_writer *w, const char *key, int type, df_gguf_kv **out) {
    if (!w || !key || !*key) return df_err(DF_ERR_INVALID, "gguf writer: empty key");
    if (!strcmp(key, "general.alignment") && type != DF_GGUF_U32)
        return df_err(DF_ERR_INVALID, "gguf writer: general.alignment must be u32");
    if (w->header_done)
        return df_err(DF_ERR_INVALID, "gguf writer: KV '%s' added after the header was written",
                      key);
    for (int i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key))
            return df_err(DF_ERR_INVALID, "gguf writer: duplicate key '%s'", key);
    if (w->n_kv == w->cap_kv) {
        int nc = w->cap_kv ? w->cap_kv * 2 : 32;
        df_gguf_kv *n = df_realloc(w->kv, (size_t)nc * sizeof *n);
        if (!n) return DF_ERR_NOMEM;
        w->kv = n;
        w->cap_kv = nc;
    }
    df_gguf_kv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    kv->key = df_strdup(key);
    if (!kv->key) return DF_ERR_NOMEM;
    kv->type = type;
    w->n_kv++;
    *out = kv;
    return DF_OK;
}

static void w_drop_last(df_gguf_writer *w) { df_gguf_kv_free(&w->kv[--w->n_kv]); }

int df_gguf_w_scalar(df_gguf_writer *w, const char *key, int type, const void *v) {
    if (type < 0 || type >= DF_GGUF_TYPE_COUNT || type == DF_GGUF_ARRAY ||
        type == DF_GGUF_STRING || !v)
        return df_err(DF_ERR_INVALID, "gguf writer: KV '%s': bad scalar type %d", key, type);
    if (key && !strcmp(key, "general.alignment")) {
        uint32_t a;
        if (type != DF_GGUF_U32)
            return df_err(DF_ERR_INVALID, "gguf writer: general.alignment must be u32");
        memcpy(&a, v, 4);
        if (!a || (a & (a - 1)))
            return df_err(DF_ERR_INVALID, "gguf writer: alignment %u is not a power of two", a);
        if (w && w->n_t)
            return df_err(DF_ERR_INVALID, "gguf writer: general.alignment set after tensors");
        if (w) w->alignment = a;
    }
    df_gguf_kv *kv;
    int rc_ = w_new_kv(w, key, type, &kv);
    if (rc_) return rc_;
    df_gguf_widen_scalar(kv, type, v);
    return DF_OK;
}

int df_gguf_w_u32(df_gguf_writer *w, const char *key, uint32_t v) {
    return df_gguf_w_scalar(w, key, DF_GGUF_U32, &v);
}
int df_gguf_w_i32(df_gguf_writer *w, const char *key, int32_t v) {
    return df_gguf_w_scalar(w, key, DF_GGUF_I32, &v);
}
int df_gguf_w_u64(df_gguf_writer *w, const char *key, uint64_t v) {
    return df_gguf_w_scalar(w, key, DF_GGUF_U64, &v);
}
int df_gguf_w_f32(df_gguf_writer *w, const char *key, float v) {
    return df_gguf_w_scalar(w, key, DF_GGUF_F32, &v);
}
int df_gguf_w_bool(df_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v;
    return df_gguf_w_scalar(w, key, DF_GGUF_BOOL, &b);
}

static int w_str_n(df_gguf_writer *w, const char *key, const char *v, uint64_t len) {
    df_gguf_kv *kv;
    int rc_ = w_new_kv(w, key, DF_GGUF_STRING, &kv);
    if (rc_) return rc_;
    kv->v.str.data = df_malloc(len + 1);
    if (!kv->v.str.data) { w_drop_last(w); return DF_ERR_NOMEM; }
    if (len) memcpy(kv->v.str.data, v, len);
    kv->v.str.data[len] = 0;
    kv->v.str.len = len;
    return DF_OK;
}

int df_gguf_w_str(df_gguf_writer *w, const char *key, const char *v) {
    if (!v) return df_err(DF_ERR_INVALID, "gguf writer: KV '%s': NULL string", key ? key : "");
    return w_str_n(w, key, v, strlen(v));
}

static int w_arr_strs(df_gguf_writer *w, const char *key, const char *const *cs,
                      const df_gguf_str *gs, uint64_t n) {
    if (n > GGUF_MAX_ARRAY_ELEMENTS)
        return df_err(DF_ERR_INVALID, "gguf writer: KV '%s': array too long", key);
    df_gguf_kv *kv;
    int rc_ = w_new_kv(w, key, DF_GGUF_ARRAY, &kv);
    if (rc_) return rc_;
    kv->arr_type = DF_GGUF_STRING;
    df_gguf_str *s = df_calloc(n ? n : 1, sizeof *s);
    if (!s) { w_drop_last(w); return DF_ERR_NOMEM; }
    kv->arr = s;
    kv->arr_n = n;
    for (uint64_t i = 0; i < n; i++) {
        const char *src = cs ? cs[i] : gs[i].data;
        uint64_t len = cs ? (cs[i] ? strlen(cs[i]) : 0) : gs[i].len;
        s[i].data = df_malloc(len + 1);
        if (!s[i].data) { w_drop_last(w); return DF_ERR_NOMEM; }
        if (len) memcpy(s[i].data, src, len);
        s[i].data[len] = 0;
        s[i].len = len;
    }
    return DF_OK;
}

int df_gguf_w_arr_str(df_gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    if (!strs && n) return df_err(DF_ERR_INVALID, "gguf writer: KV '%s': NULL array", key);
    return w_arr_strs(w, key, strs, NULL, n);
}

int df_gguf_w_arr(df_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n) {
    if (elem_type == DF_GGUF_STRING) return df_gguf_w_arr_str(w, key, data, n);
    if (elem_type < 0 || elem_type >= DF_GGUF_TYPE_COUNT || elem_type == DF_GGUF_ARRAY)
        return df_err(DF_ERR_INVALID, "gguf writer: KV '%s': bad array element type %d",
                      key ? key : "", elem_type);
    if (n > GGUF_MAX_ARRAY_ELEMENTS || (!data && n))
        return df_err(DF_ERR_INVALID, "gguf writer: KV '%s': bad array", key ? key : "");
    df_gguf_kv *kv;
    int rc_ = w_new_kv(w, key, DF_GGUF_ARRAY, &kv);
    if (rc_) return rc_;
    uint64_t sz = n * (uint64_t)df_gguf_kv_size[elem_type];
    kv->arr_type = elem_type;
    kv->arr = df_malloc(sz ? sz : 1);
    if (!kv->arr) { w_drop_last(w); return DF_ERR_NOMEM; }
    if (sz) memcpy(kv->arr, data, sz);
    kv->arr_n = n;
    return DF_OK;
}

int df_gguf_w_copy_kv(df_gguf_writer *w, const df_gguf_kv *kv) {
    if (!kv) return df_err(DF_ERR_INVALID, "gguf writer: NULL kv");
    switch (kv->type) {
    case DF_GGUF_STRING: return w_str_n(w, kv->key, kv->v.str.data, kv->v.str.len);
    case DF_GGUF_ARRAY:
        if (kv->arr_type == DF_GGUF_STRING) return w_arr_strs(w, kv->key, NULL, kv->arr, kv->arr_n);
        return df_gguf_w_arr(w, kv->key, kv->arr_type, kv->arr, kv->arr_n);
    default: {
        /* narrow back to the stored type */
        uint8_t b[8];
        switch (kv->type) {
        case DF_GGUF_U8: case DF_GGUF_I8: b[0] = (uint8_t)kv->v.u64; break;
        case DF_GGUF_BOOL: b[0] = kv->v.b; break;
        case DF_GGUF_U16: case DF_GGUF_I16: {
            uint16_t x = (uint16_t)kv->v.u64;
            memcpy(b, &x, 2);
        } break;
        case DF_GGUF_U32: case DF_GGUF_I32: {
            uint32_t x = (uint32_t)kv->v.u64;
            memcpy(b, &x, 4);
        } break;
        case DF_GGUF_F32: { float x = (float)kv->v.f64; memcpy(b, &x, 4); } break;
        default: memcpy(b, &kv->v.u64, 8); break; /* u64 i64 f64 */
        }
        return df_gguf_w_scalar(w, kv->key, kv->type, b);
    }
    }
}

int df_gguf_w_tensor(df_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                     const void *data) {
    if (!w || !name) return df_err(DF_ERR_INVALID, "gguf writer: NULL argument");
    size_t nl = strlen(name);
    if (nl == 0 || nl >= GGUF_MAX_NAME)
        return df_err(DF_ERR_INVALID, "gguf writer: tensor name '%s' must be 1..%d bytes", name,
                      GGUF_MAX_NAME - 1);
    if (w->header_done)
        return df_err(DF_ERR_INVALID, "gguf writer: tensor '%s' added after the header", name);
    if (n_dims < 0 || n_dims > 4 || (!ne && n_dims))
        return df_err(DF_ERR_INVALID, "gguf writer: tensor '%s': n_dims %d not in 0..4", name,
                      n_dims);
    if (w->n_t >= (1 << 29)) return df_err(DF_ERR_RANGE, "gguf writer: too many tensors");
    wtensor t = {0};
    memcpy(t.name, name, nl + 1);
    t.type = type;
    t.n_dims = n_dims;
    for (int k = 0; k < 4; k++) t.ne[k] = k < n_dims ? ne[k] : 1;
    for (int k = 0; k < n_dims; k++)
        if (ne[k] < 0)
            return df_err(DF_ERR_INVALID, "gguf writer: tensor '%s': negative ne[%d]", name, k);
    char why[200];
    if (df_gguf_tensor_nbytes(type, t.ne, &t.nbytes, why, sizeof why))
        return df_err(DF_ERR_INVALID, "gguf writer: tensor '%s': %s", name, why);
    t.offset = 0;
    if (w->n_t) {
        const wtensor *p = &w->t[w->n_t - 1];
        if (!df_add_ok(p->offset, df_pad(p->nbytes, w->alignment), &t.offset))
            return df_err(DF_ERR_RANGE, "gguf writer: data section too large");
    }
    t.data = data;
    if (w->n_t == w->cap_t) {
        int nc = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *n = df_realloc(w->t, (size_t)nc * sizeof *n);
        if (!n) return DF_ERR_NOMEM;
        w->t = n;
        w->cap_t = nc;
    }
    w->t[w->n_t] = t;
    int rc = df_hmap_insert(&w->th, w->t, wtensor_name, name, w->n_t);
    if (rc < 0) return rc;
    if (rc) return df_err(DF_ERR_INVALID, "gguf writer: duplicate tensor name '%s'", name);
    w->n_t++;
    return DF_OK;
}

/* growable byte buffer for the header */
typedef struct { uint8_t *p; size_t n, cap; bool oom; } wbuf;

static void wb_put(wbuf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        uint8_t *np = df_realloc(b->p, nc);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void wb_u32(wbuf *b, uint32_t v) { wb_put(b, &v, 4); }
static void wb_u64(wbuf *b, uint64_t v) { wb_put(b, &v, 8); }
static void wb_str(wbuf *b, const char *s, uint64_t len) { wb_u64(b, len); wb_put(b, s, len); }

static void wb_kv(wbuf *b, const df_gguf_kv *kv) {
    wb_str(b, kv->key, strlen(kv->key));
    wb_u32(b, (uint32_t)kv->type);
    uint8_t x[8];
    switch (kv->type) {
    case DF_GGUF_STRING: wb_str(b, kv->v.str.data, kv->v.str.len); return;
    case DF_GGUF_ARRAY:
        wb_u32(b, (uint32_t)kv->arr_type);
        wb_u64(b, kv->arr_n);
        if (kv->arr_type == DF_GGUF_STRING) {
            const df_gguf_str *s = kv->arr;
            for (uint64_t i = 0; i < kv->arr_n; i++) wb_str(b, s[i].data, s[i].len);
        } else {
            wb_put(b, kv->arr, kv->arr_n * (uint64_t)df_gguf_kv_size[kv->arr_type]);
        }
        return;
    case DF_GGUF_F32: { float f = (float)kv->v.f64; memcpy(x, &f, 4); } break;
    case DF_GGUF_F64: memcpy(x, &kv->v.f64, 8); break;
    case DF_GGUF_BOOL: x[0] = kv->v.b; break;
    default: memcpy(x, &kv->v.u64, 8); break; /* little-endian: low bytes first */
    }
    wb_put(b, x, (size_t)df_gguf_kv_size[kv->type]);
}

static int write_all(int fd, const void *d, uint64_t n) {
    const uint8_t *p = d;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t k = write(fd, p, chunk);
        if (k < 0) {
            if (errno == EINTR) continue;
            return df_err(DF_ERR_IO, "gguf writer: write failed: %s", strerror(errno));
        }
        p += k;
        n -= (uint64_t)k;
    }
    return DF_OK;
}

static int write_zeros(int fd, uint64_t n) {
    static const uint8_t zero[4096];
    while (n) {
        uint64_t k = n > sizeof zero ? sizeof zero : n;
        int rc = write_all(fd, zero, k);
        if (rc) return rc;
        n -= k;
    }
    return DF_OK;
}

static int w_serialize(df_gguf_writer *w, wbuf *b) {
    bool have_al = false;
    for (int i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, "general.alignment")) have_al = true;
    int nkv = w->n_kv + (!have_al && w->alignment != GGUF_DEFAULT_ALIGNMENT);
    wb_u32(b, GGUF_MAGIC);
    wb_u32(b, 3);
    wb_u64(b, (uint64_t)w->n_t);
    wb_u64(b, (uint64_t)nkv);
    for (int i = 0; i < w->n_kv; i++) wb_kv(b, &w->kv[i]);
    if (nkv > w->n_kv) {
        df_gguf_kv al = {.key = "general.alignment", .type = DF_GGUF_U32};
        al.v.u64 = w->alignment;
        wb_kv(b, &al);
    }
    for (int i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        wb_str(b, t->name, strlen(t->name));
        wb_u32(b, (uint32_t)t->n_dims);
        for (int k = 0; k < t->n_dims; k++) wb_u64(b, (uint64_t)t->ne[k]);
        wb_u32(b, (uint32_t)t->type);
        wb_u64(b, t->offset);
    }
    if (b->oom) return DF_ERR_NOMEM;
    return DF_OK; /* the caller adds the padding up to the data section */
}

uint64_t df_gguf_writer_data_start(df_gguf_writer *w) {
    wbuf b = {0};
    uint64_t n = w_serialize(w, &b) ? 0 : w->n_t ? df_pad(b.n, w->alignment) : b.n;
    free(b.p);
    return n;
}

uint64_t df_gguf_writer_tensor_offset(const df_gguf_writer *w, int idx) {
    return (idx >= 0 && idx < w->n_t) ? w->t[idx].offset : UINT64_MAX;
}

int df_gguf_writer_write_header(df_gguf_writer *w, int fd) {
    if (!w) return df_err(DF_ERR_INVALID, "gguf writer: NULL");
    if (w->header_done) return df_err(DF_ERR_INVALID, "gguf writer: header already written");
    wbuf b = {0};
    int rc = w_serialize(w, &b);
    if (!rc) rc = write_all(fd, b.p, b.n);
    if (!rc && w->n_t) rc = write_zeros(fd, df_pad(b.n, w->alignment) - b.n);
    free(b.p);
    if (rc) return rc;
    w->header_done = true;
    w->cur = 0;
    w->cur_done = 0;
    return DF_OK;
}

int df_gguf_writer_write_tensor_data(df_gguf_writer *w, int fd, int idx, const void *data,
                                     uint64_t n) {
    if (!w || !w->header_done)
        return df_err(DF_ERR_INVALID, "gguf writer: write the header before tensor data");
    if (idx != w->cur || idx >= w->n_t)
        return df_err(DF_ERR_INVALID, "gguf writer: tensor data written out of order (got #%d, "
                      "expected #%d)", idx, w->cur);
    const wtensor *t = &w->t[idx];
    if (n > t->nbytes - w->cur_done)
        return df_err(DF_ERR_INVALID, "gguf writer: tensor '%s': %" PRIu64 " bytes given, only %"
                      PRIu64 " remain", t->name, n, t->nbytes - w->cur_done);
    int rc = write_all(fd, data, n);
    if (rc) return df_err_prefix(rc, "tensor '%s'", t->name);
    w->cur_done += n;
    if (w->cur_done == t->nbytes) {
        if ((rc = write_zeros(fd, df_pad(t->nbytes, w->alignment) - t->nbytes))) return rc;
        w->cur++;
        w->cur_done = 0;
    }
    return DF_OK;
}

int df_gguf_writer_save(df_gguf_writer *w, const char *path) {
    if (!w || !path) return df_err(DF_ERR_INVALID, "gguf writer: NULL argument");
    for (int i = 0; i < w->n_t; i++)
        if (!w->t[i].data && w->t[i].nbytes)
            return df_err(DF_ERR_INVALID, "gguf writer: tensor '%s' has no data", w->t[i].name);
    size_t n = strlen(path) + 8;
    char *tmp = df_malloc(n);
    if (!tmp) return DF_ERR_NOMEM;
    snprintf(tmp, n, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = df_err(DF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    int rc = df_gguf_writer_write_header(w, fd);
    for (int i = 0; !rc && i < w->n_t; i++)
        rc = df_gguf_writer_write_tensor_data(w, fd, i, w->t[i].data, w->t[i].nbytes);
    if (!rc && fsync(fd) < 0) rc = df_err(DF_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) < 0 && !rc) rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) < 0)
        rc = df_err(DF_ERR_IO, "%s: rename to %s: %s", tmp, path, strerror(errno));
    if (rc) {
        unlink(tmp);
        df_err_prefix(rc, "%s", path);
    }
    w->header_done = false; /* allow saving again */
    free(tmp);
    return rc;
}
