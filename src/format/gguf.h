/* gguf.h — GGUF v2/v3 reader (strict validation of untrusted files, split models) and writer.
 * Reader: df_gguf_open() parses header, KV pairs and tensor infos with pread and bounds checks;
 * tensor data is NOT read into memory (callers pread / mmap by absolute offset).
 * Every failure returns a negative df_status with df_errmsg() naming file, key/tensor, reason.
 * Threading: a df_gguf is immutable after open; concurrent readers are fine. */
#ifndef DF_GGUF_H
#define DF_GGUF_H
#include "base/util.h"

enum df_gguf_type {
    DF_GGUF_U8 = 0, DF_GGUF_I8 = 1, DF_GGUF_U16 = 2, DF_GGUF_I16 = 3, DF_GGUF_U32 = 4,
    DF_GGUF_I32 = 5, DF_GGUF_F32 = 6, DF_GGUF_BOOL = 7, DF_GGUF_STRING = 8, DF_GGUF_ARRAY = 9,
    DF_GGUF_U64 = 10, DF_GGUF_I64 = 11, DF_GGUF_F64 = 12, DF_GGUF_TYPE_COUNT = 13
};

typedef struct { uint64_t len; char *data; } df_gguf_str; /* data is NUL-terminated too */

typedef struct df_gguf_kv {
    char *key;
    int type;                 /* enum df_gguf_type */
    int arr_type;             /* element type when type == ARRAY */
    uint64_t arr_n;           /* element count when type == ARRAY */
    union {
        uint64_t u64; int64_t i64; double f64; bool b;
        df_gguf_str str;
    } v;                      /* scalar value (integers widened, floats as double) */
    void *arr;                /* ARRAY: packed elements of arr_type (strings: df_gguf_str[]) */
} df_gguf_kv;

typedef struct df_gguf_tensor {
    char name[64];
    int type;                 /* ggml type id (format/ggml_types.h) */
    int n_dims;
    int64_t ne[4];            /* missing trailing dims are 1 */
    uint64_t nbytes;
    int shard;                /* index into df_gguf.shards */
    uint64_t offset;          /* ABSOLUTE file offset of the data within its shard file */
} df_gguf_tensor;

typedef struct df_gguf_shard {
    char *path;
    int fd;                   /* open read-only */
    uint64_t file_size;
    uint64_t data_start;      /* absolute offset of the data section */
} df_gguf_shard;

typedef struct df_gguf {
    int version;
    uint32_t alignment;
    int n_kv;
    df_gguf_kv *kv;           /* KVs of shard 0 (model metadata) */
    int n_tensors;
    df_gguf_tensor *tensors;  /* all tensors of all shards, in file order */
    int n_shards;
    df_gguf_shard *shards;
    void *priv;               /* name hash etc. */
} df_gguf;

/* Open a GGUF file. If the name matches *-00001-of-0000N.gguf, all shards are opened and
 * merged (split.* keys validated). Returns DF_OK and *out, or an error status:
 * DF_ERR_IO (open/read failed), DF_ERR_FORMAT (malformed file; df_errmsg() starts with the
 * path and names the section/key/tensor), DF_ERR_INVALID (a later shard was given),
 * DF_ERR_NOMEM. Tensor names are unique, non-empty, < 64 bytes, valid UTF-8; tensor offsets
 * are absolute and every tensor's data lies within its shard file. */
int df_gguf_open(const char *path, df_gguf **out);
/* Open exactly this file, whatever its name says: one part of a split model is checked on its
 * own (its split.* keys are not followed). Same validation and errors as df_gguf_open. */
int df_gguf_open_single(const char *path, df_gguf **out);
/* Parse from a memory buffer (used by the fuzzer; tensor data bounds checked against len).
 * The buffer is borrowed: it must outlive *out (df_gguf_read copies from it). `name` is used
 * in error messages ("name: reason"). */
int df_gguf_open_mem(const void *data, size_t len, const char *name, df_gguf **out);
void df_gguf_close(df_gguf *g);

/* Lookup. Return NULL / -1 if absent. */
const df_gguf_kv *df_gguf_find(const df_gguf *g, const char *key);
const df_gguf_tensor *df_gguf_tensor_find(const df_gguf *g, const char *name);

/* Typed getters. Return DF_OK, DF_ERR_NOTFOUND (key absent, *out untouched) or
 * DF_ERR_FORMAT (present with an incompatible type: message names the key).
 * Integer getters accept any integer KV type whose value fits. */
int df_gguf_get_u32(const df_gguf *g, const char *key, uint32_t *out);
int df_gguf_get_i32(const df_gguf *g, const char *key, int32_t *out);
int df_gguf_get_u64(const df_gguf *g, const char *key, uint64_t *out);
int df_gguf_get_f32(const df_gguf *g, const char *key, float *out); /* F32/F64/any integer */
int df_gguf_get_bool(const df_gguf *g, const char *key, bool *out);
int df_gguf_get_str(const df_gguf *g, const char *key, const char **out); /* borrowed */
/* Arrays: element type checked against `want_type`; returns borrowed pointer + count. */
int df_gguf_get_arr(const df_gguf *g, const char *key, int want_type, const void **data, uint64_t *n);
/* u32 array or scalar (per-layer hparams such as head_count_kv): fills out[0..n) (scalar is
 * broadcast). Array length must equal n. Bools (array or scalar) read as 0 / 1. */
int df_gguf_get_u32_per_layer(const df_gguf *g, const char *key, uint32_t *out, int n);
/* The first n elements of an integer array of at least n (deepseek4's compress_ratios, which
 * lists stages past the layers), as u32; a scalar is a type error. */
int df_gguf_get_u32_arr_prefix(const df_gguf *g, const char *key, uint32_t *out, int n);
/* f32 per layer: a number broadcast, or an array of exactly n numbers (swiglu_clamp_exp). */
int df_gguf_get_f32_per_layer(const df_gguf *g, const char *key, float *out, int n);

/* Read a tensor's bytes (or a byte range of it) with pread. */
int df_gguf_read(const df_gguf *g, const df_gguf_tensor *t, uint64_t off, void *dst, uint64_t n);

const char *df_gguf_type_name(int kv_type);
/* ggml tensor type name ("Q4_K"), "invalid" for unknown/removed ids (own table, formats.md §1.6). */
const char *df_gguf_tensor_type_name(int type);

/* ---- writer ---------------------------------------------------------------------------
 * Usage: w = df_gguf_writer_new(); add KVs; add tensor infos (name, type, ne); then
 * df_gguf_writer_write_header(w, fd) and write each tensor's bytes in the order added with
 * df_gguf_writer_write_tensor_data() (padding handled), or df_gguf_writer_save() for
 * in-memory tensors. Offsets follow llama.cpp's rule (running sum of padded sizes). */
typedef struct df_gguf_writer df_gguf_writer;
df_gguf_writer *df_gguf_writer_new(uint32_t alignment);
void df_gguf_writer_free(df_gguf_writer *w);
int df_gguf_w_u32(df_gguf_writer *w, const char *key, uint32_t v);
int df_gguf_w_i32(df_gguf_writer *w, const char *key, int32_t v);
int df_gguf_w_u64(df_gguf_writer *w, const char *key, uint64_t v);
int df_gguf_w_f32(df_gguf_writer *w, const char *key, float v);
int df_gguf_w_bool(df_gguf_writer *w, const char *key, bool v);
int df_gguf_w_str(df_gguf_writer *w, const char *key, const char *v);
int df_gguf_w_arr(df_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n);
int df_gguf_w_arr_str(df_gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Any scalar KV type (U8..F64 except STRING/ARRAY); v points to a value of that C type. */
int df_gguf_w_scalar(df_gguf_writer *w, const char *key, int type, const void *v);
/* Copy one KV (any type) from a reader (for quantize/pack). */
int df_gguf_w_copy_kv(df_gguf_writer *w, const df_gguf_kv *kv);
/* Add a tensor; `data` may be NULL if written later by write_tensor_data. */
int df_gguf_w_tensor(df_gguf_writer *w, const char *name, int type, int n_dims,
                     const int64_t *ne, const void *data);
int df_gguf_writer_write_header(df_gguf_writer *w, int fd);
int df_gguf_writer_write_tensor_data(df_gguf_writer *w, int fd, int idx, const void *data, uint64_t n);
/* Layout queries (valid once all KVs and tensors are added): size of the header incl. padding
 * = absolute offset of the data section; a tensor's offset relative to the data section. */
uint64_t df_gguf_writer_data_start(df_gguf_writer *w);
uint64_t df_gguf_writer_tensor_offset(const df_gguf_writer *w, int idx);
/* Write everything to path (tensors added with data), via path.tmp + rename. */
int df_gguf_writer_save(df_gguf_writer *w, const char *path);
#endif
