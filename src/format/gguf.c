/* gguf.c — GGUF v2/v3 reader with strict validation (formats.md §1), split models.
 *
 * Reader: the header, KV section and tensor infos are parsed through a small buffered pread
 * reader (or a memory buffer for df_gguf_open_mem) that checks every read against the bytes
 * remaining, so a malformed file can never make us read past its end or allocate more than a
 * small multiple of its size. Tensor data is never read at open time.
 * Error messages always start with the file name and name the key / tensor and the reason:
 *   "FILE: truncated file: KV 'key' value needs 8 bytes at offset 123 but file size is 120"
 *   "FILE: tensor 'blk.0.attn_q.weight': data [offset 123, 4096 bytes] extends beyond end of
 *    file (size 2000)"
 * The writer is gguf_write.c; the name hash both use is gguf_hmap.c. */
#include "format/gguf.h"
#include "format/gguf_impl.h"
#include "base/utf8.h"
#include "format/ggml_types.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>



/* ---- tensor types: the file-format table of format/ggml_types.c (formats.md §1.6) */
const char *df_gguf_tensor_type_name(int type) {
    const df_ggml_type_info *t = df_ggml_type(type);
    return t ? t->name : "invalid";
}

static const char *const g_df_gguf_kv_names[DF_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
const int df_gguf_kv_size[DF_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *df_gguf_type_name(int kv_type) {
    return (kv_type >= 0 && kv_type < DF_GGUF_TYPE_COUNT) ? g_df_gguf_kv_names[kv_type] : "invalid";
}

static bool kv_is_int(int t) {
    return t == DF_GGUF_U8 || t == DF_GGUF_I8 || t == DF_GGUF_U16 || t == DF_GGUF_I16 ||
           t == DF_GGUF_U32 || t == DF_GGUF_I32 || t == DF_GGUF_U64 || t == DF_GGUF_I64;
}
static bool kv_is_signed(int t) {
    return t == DF_GGUF_I8 || t == DF_GGUF_I16 || t == DF_GGUF_I32 || t == DF_GGUF_I64;
}

typedef struct {
    hmap kvh, th;
    const uint8_t *mem; /* open_mem: borrowed buffer */
    uint64_t mem_len;
} gguf_priv;

/* ---- bounded reader --------------------------------------------------------------------- */
enum { CTX_HEADER, CTX_KV_KEY, CTX_KV_TYPE, CTX_KV_VALUE, CTX_KV_ELEM, CTX_TI_NAME, CTX_TI };

typedef struct {
    const char *name;
    int fd;
    const uint8_t *mem;
    uint64_t size, pos;
    uint8_t *buf;
    uint64_t buf_off, buf_len, buf_cap;
    /* error context */
    int ctx;
    int64_t idx;
    const char *cname;
    uint64_t elem;
} rd;

static void ctx_str(const rd *r, char *out, size_t cap) {
    switch (r->ctx) {
    case CTX_HEADER: snprintf(out, cap, "header"); break;
    case CTX_KV_KEY: snprintf(out, cap, "KV #%" PRId64 " key", r->idx); break;
    case CTX_KV_TYPE: snprintf(out, cap, "KV '%s' type", r->cname); break;
    case CTX_KV_VALUE: snprintf(out, cap, "KV '%s' value", r->cname); break;
    case CTX_KV_ELEM:
        snprintf(out, cap, "KV '%s' array element %" PRIu64, r->cname, r->elem);
        break;
    case CTX_TI_NAME: snprintf(out, cap, "tensor info #%" PRId64 " name", r->idx); break;
    default: snprintf(out, cap, "tensor '%s' info", r->cname); break;
    }
}

static int pread_full(int fd, void *dst, uint64_t n, uint64_t off) {
    uint8_t *p = dst;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t k = pread(fd, p, chunk, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (k == 0) return -EIO; /* unexpected EOF: file shrank */
        p += k;
        off += (uint64_t)k;
        n -= (uint64_t)k;
    }
    return 0;
}

static int rd_bytes(rd *r, void *dst, uint64_t n) {
    if (n > r->size - r->pos) {
        char c[160];
        ctx_str(r, c, sizeof c);
        return df_err(DF_ERR_FORMAT,
                      "%s: truncated file: %s needs %" PRIu64 " bytes at offset %" PRIu64
                      " but file size is %" PRIu64,
                      r->name, c, n, r->pos, r->size);
    }
    if (r->mem) {
        if (n) memcpy(dst, r->mem + r->pos, n);
    } else if (r->pos >= r->buf_off && r->pos + n <= r->buf_off + r->buf_len) {
        memcpy(dst, r->buf + (r->pos - r->buf_off), n);
    } else if (n >= r->buf_cap) {
        int e = pread_full(r->fd, dst, n, r->pos);
        if (e) return df_err(DF_ERR_IO, "%s: read of %" PRIu64 " bytes at offset %" PRIu64
                             " failed: %s", r->name, n, r->pos, strerror(-e));
    } else {
        uint64_t len = r->size - r->pos < r->buf_cap ? r->size - r->pos : r->buf_cap;
        int e = pread_full(r->fd, r->buf, len, r->pos);
        if (e) return df_err(DF_ERR_IO, "%s: read of %" PRIu64 " bytes at offset %" PRIu64
                             " failed: %s", r->name, len, r->pos, strerror(-e));
        r->buf_off = r->pos;
        r->buf_len = len;
        memcpy(dst, r->buf, n);
    }
    r->pos += n;
    return DF_OK;
}

static int rd_u32(rd *r, uint32_t *v) { return rd_bytes(r, v, 4); }
static int rd_u64(rd *r, uint64_t *v) { return rd_bytes(r, v, 8); }

/* Read a GGUF string; `what` names it for length errors. Result is malloc'd, NUL-terminated. */
static int rd_str(rd *r, df_gguf_str *s, uint64_t maxlen) {
    uint64_t len;
    int rc = rd_u64(r, &len);
    if (rc) return rc;
    uint64_t remain = r->size - r->pos;
    if (len > maxlen || len > remain) {
        char c[160];
        ctx_str(r, c, sizeof c);
        if (len > maxlen)
            return df_err(DF_ERR_FORMAT, "%s: %s: string length %" PRIu64 " exceeds limit %" PRIu64,
                          r->name, c, len, maxlen);
        return df_err(DF_ERR_FORMAT,
                      "%s: truncated file: %s: string length %" PRIu64 " at offset %" PRIu64
                      " exceeds the %" PRIu64 " bytes remaining",
                      r->name, c, len, r->pos - 8, remain);
    }
    s->data = df_malloc(len + 1);
    if (!s->data) return DF_ERR_NOMEM;
    rc = rd_bytes(r, s->data, len);
    if (rc) {
        free(s->data);
        s->data = NULL;
        return rc;
    }
    s->data[len] = 0;
    s->len = len;
    return DF_OK;
}

/* ---- KV free ----------------------------------------------------------------------------- */
void df_gguf_kv_free(df_gguf_kv *kv) {
    free(kv->key);
    if (kv->type == DF_GGUF_STRING) free(kv->v.str.data);
    if (kv->type == DF_GGUF_ARRAY && kv->arr) {
        if (kv->arr_type == DF_GGUF_STRING) {
            df_gguf_str *s = kv->arr;
            for (uint64_t i = 0; i < kv->arr_n; i++) free(s[i].data);
        }
        free(kv->arr);
    }
    memset(kv, 0, sizeof *kv);
}

void df_gguf_widen_scalar(df_gguf_kv *kv, int type, const void *p) {
    switch (type) {
    case DF_GGUF_U8: kv->v.u64 = *(const uint8_t *)p; break;
    case DF_GGUF_I8: kv->v.i64 = *(const int8_t *)p; break;
    case DF_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); kv->v.u64 = x; } break;
    case DF_GGUF_I16: { int16_t x; memcpy(&x, p, 2); kv->v.i64 = x; } break;
    case DF_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); kv->v.u64 = x; } break;
    case DF_GGUF_I32: { int32_t x; memcpy(&x, p, 4); kv->v.i64 = x; } break;
    case DF_GGUF_U64: memcpy(&kv->v.u64, p, 8); break;
    case DF_GGUF_I64: memcpy(&kv->v.i64, p, 8); break;
    case DF_GGUF_F32: { float x; memcpy(&x, p, 4); kv->v.f64 = x; } break;
    case DF_GGUF_F64: memcpy(&kv->v.f64, p, 8); break;
    case DF_GGUF_BOOL: kv->v.b = *(const uint8_t *)p != 0; break;
    default: break;
    }
}

static int rd_kv(rd *r, df_gguf_kv *kv, int i) {
    df_gguf_str key = {0};
    r->ctx = CTX_KV_KEY;
    r->idx = i;
    int rc = rd_str(r, &key, GGUF_MAX_STRING_LENGTH);
    if (rc) return rc;
    kv->key = key.data;
    if (key.len == 0) return df_err(DF_ERR_FORMAT, "%s: KV #%d: empty key", r->name, i);
    if (strlen(key.data) != key.len)
        return df_err(DF_ERR_FORMAT, "%s: KV #%d: key contains a NUL byte", r->name, i);
    if (df_utf8_valid_prefix(key.data, key.len, NULL) != key.len)
        return df_err(DF_ERR_FORMAT, "%s: KV #%d: key is not valid UTF-8 text", r->name, i);
    r->cname = kv->key;
    r->ctx = CTX_KV_TYPE;
    uint32_t type;
    if ((rc = rd_u32(r, &type))) return rc;
    if (type >= DF_GGUF_TYPE_COUNT)
        return df_err(DF_ERR_FORMAT, "%s: KV '%s': invalid value type %u", r->name, kv->key, type);
    kv->type = (int)type;
    r->ctx = CTX_KV_VALUE;
    if (type == DF_GGUF_STRING) return rd_str(r, &kv->v.str, GGUF_MAX_STRING_LENGTH);
    if (type != DF_GGUF_ARRAY) {
        uint8_t b[8];
        if ((rc = rd_bytes(r, b, (uint64_t)df_gguf_kv_size[type]))) return rc;
        if (type == DF_GGUF_BOOL && b[0] > 1)
            return df_err(DF_ERR_FORMAT, "%s: KV '%s': bool value %u (must be 0 or 1)", r->name, kv->key, b[0]);
        df_gguf_widen_scalar(kv, (int)type, b);
        return DF_OK;
    }
    uint32_t at;
    uint64_t n;
    if ((rc = rd_u32(r, &at))) return rc;
    if (at == DF_GGUF_ARRAY)
        return df_err(DF_ERR_FORMAT, "%s: KV '%s': nested arrays are not supported", r->name,
                      kv->key);
    if (at >= DF_GGUF_TYPE_COUNT)
        return df_err(DF_ERR_FORMAT, "%s: KV '%s': invalid array element type %u", r->name,
                      kv->key, at);
    if ((rc = rd_u64(r, &n))) return rc;
    uint64_t remain = r->size - r->pos;
    uint64_t esz = at == DF_GGUF_STRING ? 8 : (uint64_t)df_gguf_kv_size[at];
    if (n > GGUF_MAX_ARRAY_ELEMENTS)
        return df_err(DF_ERR_FORMAT, "%s: KV '%s': array count %" PRIu64 " exceeds limit %llu",
                      r->name, kv->key, n, GGUF_MAX_ARRAY_ELEMENTS);
    if (n * esz > remain) /* n <= 2^30, esz <= 8: no overflow */
        return df_err(DF_ERR_FORMAT,
                      "%s: truncated file: KV '%s': array of %" PRIu64 " %s needs at least %" PRIu64
                      " bytes but only %" PRIu64 " remain",
                      r->name, kv->key, n, g_df_gguf_kv_names[at], n * esz, remain);
    kv->arr_type = (int)at;
    if (at != DF_GGUF_STRING) {
        uint64_t bytes = n * esz;
        kv->arr = df_malloc(bytes ? bytes : 1);
        if (!kv->arr) return DF_ERR_NOMEM;
        kv->arr_n = n;
        if ((rc = rd_bytes(r, kv->arr, n * esz))) return rc;
        for (uint64_t k = 0; at == DF_GGUF_BOOL && k < n; k++)
            if (((const uint8_t *)kv->arr)[k] > 1)
                return df_err(DF_ERR_FORMAT, "%s: KV '%s': array element %" PRIu64 ": bool value %u (must be 0 or 1)",
                              r->name, kv->key, k, ((const uint8_t *)kv->arr)[k]);
        return DF_OK;
    }
    df_gguf_str *s = df_calloc(n ? n : 1, sizeof *s);
    if (!s) return DF_ERR_NOMEM;
    kv->arr = s;
    kv->arr_n = n; /* entries not yet read are zeroed: kv_free copes */
    r->ctx = CTX_KV_ELEM;
    for (uint64_t k = 0; k < n; k++) {
        r->elem = k;
        if ((rc = rd_str(r, &s[k], GGUF_MAX_STRING_LENGTH))) return rc;
    }
    return DF_OK;
}

/* Compute nbytes of a tensor with overflow checks. Returns 0 ok, else fills reason. */
int df_gguf_tensor_nbytes(int type, const int64_t ne[4], uint64_t *out, char *why, size_t cap) {
    const df_ggml_type_info *ti = df_ggml_type(type);
    if (!ti) {
        if (type >= 0 && type < DF_GGML_TYPE_COUNT)
            snprintf(why, cap, "tensor type %d is a removed type", type);
        else
            snprintf(why, cap, "invalid tensor type %d", type);
        return -1;
    }
    int blck = ti->blck;
    if (ne[0] % blck) {
        snprintf(why, cap, "ne[0] = %" PRId64 " is not a multiple of the block size %d of type %s",
                 ne[0], blck, ti->name);
        return -1;
    }
    /* element count must fit in int64 (skipped when any dim is zero, like ggml-org/ggml) */
    if (ne[0] && ne[1] && ne[2] && ne[3]) {
        uint64_t p = 1;
        for (int k = 0; k < 4; k++)
            if (!df_mul_ok(p, (uint64_t)ne[k], &p) || p > (uint64_t)INT64_MAX) {
                snprintf(why, cap, "element count %" PRId64 " x %" PRId64 " x %" PRId64
                         " x %" PRId64 " overflows", ne[0], ne[1], ne[2], ne[3]);
                return -1;
            }
    }
    uint64_t b = (uint64_t)(ne[0] / blck) * (uint64_t)ti->bytes;
    for (int k = 1; k < 4; k++)
        if (!df_mul_ok(b, (uint64_t)ne[k], &b)) {
            snprintf(why, cap, "byte size overflows");
            return -1;
        }
    if (b > (uint64_t)INT64_MAX) {
        snprintf(why, cap, "byte size overflows");
        return -1;
    }
    *out = b;
    return 0;
}

static int rd_tensor_info(rd *r, df_gguf_tensor *t, int i) {
    df_gguf_str nm = {0};
    r->ctx = CTX_TI_NAME;
    r->idx = i;
    int rc = rd_str(r, &nm, GGUF_MAX_STRING_LENGTH);
    if (rc) return rc;
    if (nm.len == 0) {
        free(nm.data);
        return df_err(DF_ERR_FORMAT, "%s: tensor #%d: empty name", r->name, i);
    }
    if (nm.len >= GGUF_MAX_NAME) {
        rc = df_err(DF_ERR_FORMAT, "%s: tensor #%d: name length %" PRIu64 " exceeds %d bytes",
                    r->name, i, nm.len, GGUF_MAX_NAME - 1);
        free(nm.data);
        return rc;
    }
    if (strlen(nm.data) != nm.len || df_utf8_valid_prefix(nm.data, nm.len, NULL) != nm.len) {
        free(nm.data);
        return df_err(DF_ERR_FORMAT, "%s: tensor #%d: name is not valid UTF-8 text", r->name, i);
    }
    memcpy(t->name, nm.data, nm.len + 1);
    free(nm.data);
    r->ctx = CTX_TI;
    r->cname = t->name;
    uint32_t nd;
    if ((rc = rd_u32(r, &nd))) return rc;
    if (nd > GGUF_MAX_DIMS)
        return df_err(DF_ERR_FORMAT, "%s: tensor '%s': n_dims %u exceeds %d", r->name, t->name, nd,
                      GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    for (int k = 0; k < 4; k++) t->ne[k] = 1;
    for (uint32_t k = 0; k < nd; k++) {
        if ((rc = rd_bytes(r, &t->ne[k], 8))) return rc;
        if (t->ne[k] < 0)
            return df_err(DF_ERR_FORMAT, "%s: tensor '%s': negative dimension ne[%u] = %" PRId64,
                          r->name, t->name, k, t->ne[k]);
    }
    uint32_t type;
    if ((rc = rd_u32(r, &type))) return rc;
    t->type = type > INT_MAX ? -1 : (int)type;
    char why[200];
    if (df_gguf_tensor_nbytes(t->type, t->ne, &t->nbytes, why, sizeof why)) {
        if (t->type < 0) snprintf(why, sizeof why, "invalid tensor type %u", type);
        return df_err(DF_ERR_FORMAT, "%s: tensor '%s': %s", r->name, t->name, why);
    }
    return rd_u64(r, &t->offset); /* relative for now */
}

/* ---- open ------------------------------------------------------------------------------- */
void df_gguf_close(df_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) df_gguf_kv_free(&g->kv[i]);
    free(g->kv);
    free(g->tensors);
    for (int i = 0; i < g->n_shards; i++) {
        if (g->shards[i].fd >= 0) close(g->shards[i].fd);
        free(g->shards[i].path);
    }
    free(g->shards);
    gguf_priv *p = g->priv;
    if (p) {
        free(p->kvh.slot);
        free(p->th.slot);
        free(p);
    }
    free(g);
}

static int parse(rd *r, df_gguf *g) {
    int rc;
    r->ctx = CTX_HEADER;
    uint32_t magic, version;
    uint64_t nt, nkv;
    if ((rc = rd_u32(r, &magic))) return rc;
    if (magic != GGUF_MAGIC) {
        const uint8_t *m = (const uint8_t *)&magic;
        char shown[20];
        for (int k = 0; k < 4; k++) shown[k] = (m[k] >= 0x20 && m[k] < 0x7f) ? (char)m[k] : '?';
        shown[4] = 0;
        return df_err(DF_ERR_FORMAT, "%s: bad magic 0x%08x (\"%s\"): not a GGUF file", r->name,
                      magic, shown);
    }
    if ((rc = rd_u32(r, &version))) return rc;
    if ((version & 0xffffu) == 0 && version)
        return df_err(DF_ERR_FORMAT,
                      "%s: version 0x%08x looks byte-swapped: big-endian GGUF files are not "
                      "supported", r->name, version);
    if (version == 1)
        return df_err(DF_ERR_FORMAT, "%s: GGUF version 1 is not supported (only 2 and 3)", r->name);
    if (version < 2 || version > 3)
        return df_err(DF_ERR_FORMAT, "%s: unsupported GGUF version %u (only 2 and 3)", r->name,
                      version);
    g->version = (int)version;
    if ((rc = rd_u64(r, &nt)) || (rc = rd_u64(r, &nkv))) return rc;
    /* minimum encoded sizes: KV = 8 (key len) + 1 + 4 (type) + 1; tensor info = 8+4+4+8 */
    uint64_t remain = r->size - r->pos;
    if (nkv > INT32_MAX || nkv > remain / 14)
        return df_err(DF_ERR_FORMAT,
                      "%s: truncated file or corrupt header: KV count %" PRIu64
                      " cannot fit in the %" PRIu64 " bytes after the header",
                      r->name, nkv, remain);
    if (nt > INT32_MAX || nt > remain / 24 || nkv * 14 + nt * 24 > remain)
        return df_err(DF_ERR_FORMAT,
                      "%s: truncated file or corrupt header: tensor count %" PRIu64
                      " (with %" PRIu64 " KVs) cannot fit in the %" PRIu64 " bytes after the header",
                      r->name, nt, nkv, remain);

    /* KVs: grow as parsed (memory stays proportional to bytes actually read) */
    int cap = 0;
    for (uint64_t i = 0; i < nkv; i++) {
        if (g->n_kv == cap) {
            int nc = cap ? cap * 2 : 16;
            if ((uint64_t)nc > nkv) nc = (int)nkv;
            df_gguf_kv *nk = df_realloc(g->kv, (size_t)nc * sizeof *nk);
            if (!nk) return DF_ERR_NOMEM;
            memset(nk + cap, 0, (size_t)(nc - cap) * sizeof *nk);
            g->kv = nk;
            cap = nc;
        }
        rc = rd_kv(r, &g->kv[g->n_kv], (int)i);
        g->n_kv++; /* partially read KV is freed by close */
        if (rc) return rc;
    }
    gguf_priv *p = g->priv;
    int da = 0, db = 0;
    rc = df_hmap_build(&p->kvh, g->kv, g->n_kv, df_gguf_kv_name, &da, &db);
    if (rc < 0) return rc;
    if (rc) return df_err(DF_ERR_FORMAT, "%s: duplicate key '%s' (KV #%d and #%d)", r->name,
                          g->kv[db].key, da, db);

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const df_gguf_kv *al = df_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != DF_GGUF_U32)
            return df_err(DF_ERR_FORMAT, "%s: key 'general.alignment' has type %s, expected u32",
                          r->name, df_gguf_type_name(al->type));
        uint64_t a = al->v.u64;
        if (a == 0 || (a & (a - 1)))
            return df_err(DF_ERR_FORMAT,
                          "%s: key 'general.alignment' = %" PRIu64 " is not a power of two",
                          r->name, a);
        g->alignment = (uint32_t)a;
    }

    cap = 0;
    for (uint64_t i = 0; i < nt; i++) {
        if (g->n_tensors == cap) {
            int nc = cap ? cap * 2 : 16;
            if ((uint64_t)nc > nt) nc = (int)nt;
            df_gguf_tensor *ntp = df_realloc(g->tensors, (size_t)nc * sizeof *ntp);
            if (!ntp) return DF_ERR_NOMEM;
            g->tensors = ntp;
            cap = nc;
        }
        df_gguf_tensor *t = &g->tensors[g->n_tensors];
        memset(t, 0, sizeof *t);
        if ((rc = rd_tensor_info(r, t, (int)i))) return rc;
        g->n_tensors++;
    }
    rc = df_hmap_build(&p->th, g->tensors, g->n_tensors, df_gguf_tensor_name, &da, &db);
    if (rc < 0) return rc;
    if (rc) return df_err(DF_ERR_FORMAT, "%s: duplicate tensor name '%s' (tensors #%d and #%d)",
                          r->name, g->tensors[db].name, da, db);

    /* ggml pads to the data section only when there are tensors */
    uint64_t ds = g->n_tensors ? df_pad(r->pos, g->alignment) : r->pos; /* no overflow */
    uint64_t expect = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        df_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return df_err(DF_ERR_FORMAT,
                          "%s: tensor '%s': data offset %" PRIu64
                          " is not a multiple of the alignment %u",
                          r->name, t->name, t->offset, g->alignment);
        if (t->offset != expect)
            return df_err(DF_ERR_FORMAT,
                          "%s: tensor '%s': data offset %" PRIu64 ", expected %" PRIu64
                          " (offsets must be the running sum of %u-byte padded tensor sizes)",
                          r->name, t->name, t->offset, expect, g->alignment);
        uint64_t abs, end;
        if (!df_add_ok(ds, t->offset, &abs) || !df_add_ok(abs, t->nbytes, &end) || end > r->size)
            return df_err(DF_ERR_FORMAT,
                          "%s: truncated file: tensor '%s': data [offset %" PRIu64 ", %" PRIu64
                          " bytes] extends beyond end of file (size %" PRIu64 ")",
                          r->name, t->name, ds + t->offset, t->nbytes, r->size);
        t->offset = abs;
        t->shard = 0;
        /* nbytes <= size here, so padding cannot overflow */
        expect += df_pad(t->nbytes, g->alignment);
    }
    g->shards[0].data_start = ds;
    return DF_OK;
}

static int open_single(const char *path, int fd, const uint8_t *mem, uint64_t size, df_gguf **out) {
    *out = NULL;
    df_gguf *g = df_calloc(1, sizeof *g);
    gguf_priv *p = df_calloc(1, sizeof *p);
    df_gguf_shard *sh = df_calloc(1, sizeof *sh);
    char *pc = df_strdup(path);
    if (!g || !p || !sh || !pc) {
        free(g); free(p); free(sh); free(pc);
        if (fd >= 0) close(fd);
        return DF_ERR_NOMEM;
    }
    g->priv = p;
    g->shards = sh;
    g->n_shards = 1;
    sh->path = pc;
    sh->fd = fd;
    sh->file_size = size;
    p->mem = mem;
    p->mem_len = size;
    rd r = {.name = path, .fd = fd, .mem = mem, .size = size};
    if (!mem) {
        r.buf_cap = 1u << 20;
        r.buf = df_malloc(r.buf_cap);
        if (!r.buf) {
            df_gguf_close(g);
            return DF_ERR_NOMEM;
        }
    }
    int rc = parse(&r, g);
    free(r.buf);
    if (rc) {
        df_gguf_close(g);
        return rc;
    }
    *out = g;
    return DF_OK;
}

static int open_file(const char *path, df_gguf **out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return df_err(DF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return df_err(DF_ERR_IO, "%s: not a regular file%s%s", path, e ? ": " : "",
                      e ? strerror(e) : "");
    }
    return open_single(path, fd, NULL, (uint64_t)st.st_size, out);
}

int df_gguf_open_mem(const void *data, size_t len, const char *name, df_gguf **out) {
    if (!out) return df_err(DF_ERR_INVALID, "df_gguf_open_mem: out is NULL");
    *out = NULL;
    if (!data && len) return df_err(DF_ERR_INVALID, "df_gguf_open_mem: data is NULL");
    static const uint8_t empty[1];
    return open_single(name ? name : "<memory>", -1, data ? data : empty, len, out);
}

/* Integer KV value as signed 128-ish: returns false if not an integer type. */
static bool kv_int(const df_gguf_kv *kv, bool *neg, uint64_t *mag) {
    if (!kv_is_int(kv->type)) return false;
    if (kv_is_signed(kv->type) && kv->v.i64 < 0) {
        *neg = true;
        *mag = (uint64_t)(-(kv->v.i64 + 1)) + 1;
    } else {
        *neg = false;
        *mag = kv->v.u64;
    }
    return true;
}

/* Parse "PREFIX-%05d-of-%05d.gguf"; returns N (count) and *no, or 0 if no match. */
static int split_name(const char *path, int *no, size_t *prefix_len) {
    size_t n = strlen(path);
    const size_t tail = strlen("-00001-of-00001.gguf");
    if (n < tail) return 0;
    const char *s = path + n - tail;
    int a = 0, b = 0;
    if (s[0] != '-' || memcmp(s + 6, "-of-", 4) || strcmp(s + 15, ".gguf")) return 0;
    for (int k = 0; k < 5; k++) {
        if (s[1 + k] < '0' || s[1 + k] > '9' || s[10 + k] < '0' || s[10 + k] > '9') return 0;
        a = a * 10 + (s[1 + k] - '0');
        b = b * 10 + (s[10 + k] - '0');
    }
    if (a < 1 || b < 1 || a > b) return 0;
    *no = a;
    *prefix_len = n - tail;
    return b;
}

static int split_key(df_gguf *g, const char *key, int64_t *v, bool required) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    bool neg;
    uint64_t mag;
    if (!kv) {
        if (required)
            return df_err(DF_ERR_FORMAT, "%s: split model shard lacks key '%s'",
                          g->shards[0].path, key);
        return DF_ERR_NOTFOUND;
    }
    if (!kv_int(kv, &neg, &mag) || neg || mag > INT32_MAX)
        return df_err(DF_ERR_FORMAT, "%s: key '%s' must be a non-negative integer",
                      g->shards[0].path, key);
    *v = (int64_t)mag;
    return DF_OK;
}

int df_gguf_open_single(const char *path, df_gguf **out) {
    if (!path || !out) return df_err(DF_ERR_INVALID, "df_gguf_open_single: NULL argument");
    *out = NULL;
    return open_file(path, out);
}

int df_gguf_open(const char *path, df_gguf **out) {
    if (!path || !out) return df_err(DF_ERR_INVALID, "df_gguf_open: NULL argument");
    *out = NULL;
    int no = 0;
    size_t plen = 0;
    int count = split_name(path, &no, &plen);
    if (count > 1 && no != 1)
        return df_err(DF_ERR_INVALID, "%s: this is shard %d of a split model: open the first "
                      "shard (%.*s-00001-of-%05d.gguf)", path, no, (int)plen, path, count);
    df_gguf *g;
    int rc = open_file(path, &g);
    if (rc) return rc;
    int64_t sc = 1, sn = 0, stc = 0;
    rc = split_key(g, "split.count", &sc, false);
    if (rc && rc != DF_ERR_NOTFOUND) goto fail;
    if (rc == DF_ERR_NOTFOUND) {
        if (count > 1) {
            rc = df_err(DF_ERR_FORMAT, "%s: the file name says shard 1 of %d but the file has no "
                        "split.count key", path, count);
            goto fail;
        }
        sc = 1;
    }
    if (count <= 1) {
        if (sc > 1) {
            rc = df_err(DF_ERR_FORMAT, "%s: file is shard 1 of a %" PRId64 "-file split model but "
                        "its name does not follow NAME-00001-of-%05" PRId64 ".gguf",
                        path, sc, sc);
            goto fail;
        }
        *out = g;
        return DF_OK;
    }
    /* split model */
    if (sc != count) {
        rc = df_err(DF_ERR_FORMAT, "%s: split.count = %" PRId64 " but the file name says %d shards",
                    path, sc, count);
        goto fail;
    }
    if ((rc = split_key(g, "split.no", &sn, true))) goto fail;
    if (sn != 0) {
        rc = df_err(DF_ERR_FORMAT, "%s: split.no = %" PRId64 ", expected 0", path, sn);
        goto fail;
    }
    if ((rc = split_key(g, "split.tensors.count", &stc, true))) goto fail;
    df_gguf_shard *shards = df_realloc(g->shards, (size_t)count * sizeof *shards);
    if (!shards) { rc = DF_ERR_NOMEM; goto fail; }
    g->shards = shards;
    for (int i = 1; i < count; i++) {
        size_t n = plen + 32;
        char *sp = df_malloc(n);
        if (!sp) { rc = DF_ERR_NOMEM; goto fail; }
        snprintf(sp, n, "%.*s-%05d-of-%05d.gguf", (int)plen, path, i + 1, count);
        df_gguf *s;
        rc = open_file(sp, &s);
        free(sp);
        if (rc) goto fail;
        int64_t v = -1;
        rc = split_key(s, "split.no", &v, true);
        if (!rc && v != i)
            rc = df_err(DF_ERR_FORMAT, "%s: split.no = %" PRId64 ", expected %d",
                        s->shards[0].path, v, i);
        if (!rc) {
            rc = split_key(s, "split.count", &v, false);
            if (rc == DF_ERR_NOTFOUND) rc = DF_OK;
            else if (!rc && v != count)
                rc = df_err(DF_ERR_FORMAT, "%s: split.count = %" PRId64 ", expected %d",
                            s->shards[0].path, v, count);
        }
        if (rc) {
            df_gguf_close(s);
            goto fail;
        }
        size_t total = (size_t)g->n_tensors + (size_t)s->n_tensors + 1;
        if (total > INT32_MAX) {
            df_gguf_close(s);
            rc = df_err(DF_ERR_RANGE, "%s: too many tensors", path);
            goto fail;
        }
        df_gguf_tensor *nt = df_realloc(g->tensors, total * sizeof *nt);
        if (!nt) { df_gguf_close(s); rc = DF_ERR_NOMEM; goto fail; }
        g->tensors = nt;
        for (int k = 0; k < s->n_tensors; k++) {
            g->tensors[g->n_tensors + k] = s->tensors[k];
            g->tensors[g->n_tensors + k].shard = i;
        }
        g->n_tensors += s->n_tensors;
        g->shards[i] = s->shards[0];
        g->n_shards = i + 1;
        s->shards[0].fd = -1; /* moved */
        s->shards[0].path = NULL;
        df_gguf_close(s);
    }
    if (stc != g->n_tensors) {
        rc = df_err(DF_ERR_FORMAT, "%s: split.tensors.count = %" PRId64
                    " but the %d shards hold %d tensors", path, stc, count, g->n_tensors);
        goto fail;
    }
    gguf_priv *p = g->priv;
    free(p->th.slot);
    p->th.slot = NULL;
    int da = 0, db = 0;
    rc = df_hmap_build(&p->th, g->tensors, g->n_tensors, df_gguf_tensor_name, &da, &db);
    if (rc > 0)
        rc = df_err(DF_ERR_FORMAT, "%s: tensor '%s' appears in shard %d and in shard %d",
                    path, g->tensors[da].name, g->tensors[da].shard + 1, g->tensors[db].shard + 1);
    if (rc) goto fail;
    *out = g;
    return DF_OK;
fail:
    df_gguf_close(g);
    return rc;
}

/* ---- lookup and getters ----------------------------------------------------------------- */
const df_gguf_kv *df_gguf_find(const df_gguf *g, const char *key) {
    if (!g) return NULL;
    const gguf_priv *p = g->priv;
    int i = df_hmap_find(&p->kvh, g->kv, df_gguf_kv_name, key);
    return i < 0 ? NULL : &g->kv[i];
}

const df_gguf_tensor *df_gguf_tensor_find(const df_gguf *g, const char *name) {
    if (!g) return NULL;
    const gguf_priv *p = g->priv;
    int i = df_hmap_find(&p->th, g->tensors, df_gguf_tensor_name, name);
    return i < 0 ? NULL : &g->tensors[i];
}

static const char *gname(const df_gguf *g) { return g->n_shards ? g->shards[0].path : "gguf"; }

static int wrong_type(const df_gguf *g, const df_gguf_kv *kv, const char *want) {
    if (kv->type == DF_GGUF_ARRAY)
        return df_err(DF_ERR_FORMAT, "%s: key '%s' has type array of %s, expected %s", gname(g),
                      kv->key, df_gguf_type_name(kv->arr_type), want);
    return df_err(DF_ERR_FORMAT, "%s: key '%s' has type %s, expected %s", gname(g), kv->key,
                  df_gguf_type_name(kv->type), want);
}

static int get_int(const df_gguf *g, const char *key, const char *want, bool is_signed,
                   uint64_t max_pos, uint64_t max_neg, bool *neg, uint64_t *mag) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    if (!kv) return DF_ERR_NOTFOUND;
    if (!kv_int(kv, neg, mag)) return wrong_type(g, kv, want);
    if ((*neg && (!is_signed || *mag > max_neg)) || (!*neg && *mag > max_pos)) {
        return df_err(DF_ERR_FORMAT, "%s: key '%s' value %s%" PRIu64 " does not fit in %s",
                      gname(g), key, *neg ? "-" : "", *mag, want);
    }
    return DF_OK;
}

int df_gguf_get_u32(const df_gguf *g, const char *key, uint32_t *out) {
    bool neg;
    uint64_t m;
    int rc = get_int(g, key, "u32", false, UINT32_MAX, 0, &neg, &m);
    if (!rc) *out = (uint32_t)m;
    return rc;
}

int df_gguf_get_i32(const df_gguf *g, const char *key, int32_t *out) {
    bool neg;
    uint64_t m;
    int rc = get_int(g, key, "i32", true, INT32_MAX, (uint64_t)INT32_MAX + 1, &neg, &m);
    if (!rc) *out = neg ? (int32_t)(-(int64_t)m) : (int32_t)m;
    return rc;
}

int df_gguf_get_u64(const df_gguf *g, const char *key, uint64_t *out) {
    bool neg;
    uint64_t m;
    int rc = get_int(g, key, "u64", false, UINT64_MAX, 0, &neg, &m);
    if (!rc) *out = m;
    return rc;
}

int df_gguf_get_f32(const df_gguf *g, const char *key, float *out) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    if (!kv) return DF_ERR_NOTFOUND;
    if (kv->type == DF_GGUF_F32 || kv->type == DF_GGUF_F64) *out = (float)kv->v.f64;
    else if (kv_is_int(kv->type))
        *out = kv_is_signed(kv->type) ? (float)kv->v.i64 : (float)kv->v.u64;
    else return wrong_type(g, kv, "f32");
    return DF_OK;
}

int df_gguf_get_bool(const df_gguf *g, const char *key, bool *out) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    if (!kv) return DF_ERR_NOTFOUND;
    if (kv->type != DF_GGUF_BOOL) return wrong_type(g, kv, "bool");
    *out = kv->v.b;
    return DF_OK;
}

int df_gguf_get_str(const df_gguf *g, const char *key, const char **out) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    if (!kv) return DF_ERR_NOTFOUND;
    if (kv->type != DF_GGUF_STRING) return wrong_type(g, kv, "string");
    *out = kv->v.str.data;
    return DF_OK;
}

int df_gguf_get_arr(const df_gguf *g, const char *key, int want_type, const void **data,
                    uint64_t *n) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    if (!kv) return DF_ERR_NOTFOUND;
    if (kv->type != DF_GGUF_ARRAY || kv->arr_type != want_type) {
        char want[48];
        snprintf(want, sizeof want, "array of %s", df_gguf_type_name(want_type));
        return wrong_type(g, kv, want);
    }
    *data = kv->arr;
    *n = kv->arr_n;
    return DF_OK;
}

/* Elements [0, n) of an integer array (exact: exactly n of them, else at least n) or a scalar
 * broadcast (scalar_ok), as u32. */
static int get_u32_arr(const df_gguf *g, const char *key, uint32_t *out, int n, bool exact, bool scalar_ok) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    if (!kv) return DF_ERR_NOTFOUND;
    if (n < 0) return df_err(DF_ERR_INVALID, "df_gguf_get_u32_per_layer: n < 0");
    if (kv->type != DF_GGUF_ARRAY) {
        if (!scalar_ok) return wrong_type(g, kv, "array of integers");
        uint32_t v;
        int rc = kv->type == DF_GGUF_BOOL ? DF_OK : df_gguf_get_u32(g, key, &v);
        if (rc) return rc;
        if (kv->type == DF_GGUF_BOOL) v = kv->v.b;
        for (int i = 0; i < n; i++) out[i] = v;
        return DF_OK;
    }
    /* bool arrays read as 0 / 1, as llama.cpp's get_arr does (glm-dsa's attention.indexer.types) */
    const bool is_bool = kv->arr_type == DF_GGUF_BOOL;
    if (!kv_is_int(kv->arr_type) && !is_bool)
        return wrong_type(g, kv, scalar_ok ? "u32 or array of integers" : "array of integers");
    if (exact ? kv->arr_n != (uint64_t)n : kv->arr_n < (uint64_t)n)
        return df_err(DF_ERR_FORMAT, "%s: key '%s' has %" PRIu64 " elements, expected %s%d (one "
                      "per layer)", gname(g), key, kv->arr_n, exact ? "" : "at least ", n);
    for (int i = 0; i < n; i++) {
        df_gguf_kv e = {0};
        e.type = kv->arr_type;
        df_gguf_widen_scalar(&e, kv->arr_type, (const uint8_t *)kv->arr + (size_t)i * df_gguf_kv_size[e.type]);
        if (is_bool) { out[i] = e.v.b; continue; }
        bool neg;
        uint64_t m;
        kv_int(&e, &neg, &m);
        if (neg || m > UINT32_MAX)
            return df_err(DF_ERR_FORMAT, "%s: key '%s' element %d value %s%" PRIu64
                          " does not fit in u32", gname(g), key, i, neg ? "-" : "", m);
        out[i] = (uint32_t)m;
    }
    return DF_OK;
}

int df_gguf_get_u32_per_layer(const df_gguf *g, const char *key, uint32_t *out, int n) {
    return get_u32_arr(g, key, out, n, true, true);
}

int df_gguf_get_u32_arr_prefix(const df_gguf *g, const char *key, uint32_t *out, int n) {
    return get_u32_arr(g, key, out, n, false, false);
}

int df_gguf_get_f32_per_layer(const df_gguf *g, const char *key, float *out, int n) {
    const df_gguf_kv *kv = df_gguf_find(g, key);
    if (!kv) return DF_ERR_NOTFOUND;
    if (kv->type != DF_GGUF_ARRAY) {
        float v;
        int rc = df_gguf_get_f32(g, key, &v);
        if (rc) return rc;
        for (int i = 0; i < n; i++) out[i] = v;
        return DF_OK;
    }
    if (kv->arr_type != DF_GGUF_F32 && kv->arr_type != DF_GGUF_F64 && !kv_is_int(kv->arr_type))
        return wrong_type(g, kv, "f32 or array of numbers");
    if (kv->arr_n != (uint64_t)n)
        return df_err(DF_ERR_FORMAT, "%s: key '%s' has %" PRIu64 " elements, expected %d (one per layer)",
                      gname(g), key, kv->arr_n, n);
    for (int i = 0; i < n; i++) {
        df_gguf_kv e = {0};
        e.type = kv->arr_type;
        df_gguf_widen_scalar(&e, kv->arr_type, (const uint8_t *)kv->arr + (size_t)i * df_gguf_kv_size[e.type]);
        out[i] = e.type == DF_GGUF_F32 || e.type == DF_GGUF_F64 ? (float)e.v.f64
                 : kv_is_signed(e.type) ? (float)e.v.i64 : (float)e.v.u64;
    }
    return DF_OK;
}

int df_gguf_read(const df_gguf *g, const df_gguf_tensor *t, uint64_t off, void *dst, uint64_t n) {
    if (!g || !t || (!dst && n)) return df_err(DF_ERR_INVALID, "df_gguf_read: NULL argument");
    if (off > t->nbytes || n > t->nbytes - off)
        return df_err(DF_ERR_RANGE, "%s: tensor '%s': read [%" PRIu64 ", +%" PRIu64
                      "] beyond its %" PRIu64 " bytes", gname(g), t->name, off, n, t->nbytes);
    if (t->shard < 0 || t->shard >= g->n_shards)
        return df_err(DF_ERR_INVALID, "df_gguf_read: tensor '%s' has bad shard", t->name);
    const df_gguf_shard *s = &g->shards[t->shard];
    const gguf_priv *p = g->priv;
    if (p->mem && s->fd < 0) {
        if (n) memcpy(dst, p->mem + t->offset + off, n); /* bounds checked at open */
        return DF_OK;
    }
    int e = pread_full(s->fd, dst, n, t->offset + off);
    if (e)
        return df_err(DF_ERR_IO, "%s: tensor '%s': read of %" PRIu64 " bytes at offset %" PRIu64
                      " failed: %s", s->path, t->name, n, t->offset + off,
                      e == -EIO ? "unexpected end of file" : strerror(-e));
    return DF_OK;
}

