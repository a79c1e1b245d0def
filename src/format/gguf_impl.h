/* gguf_impl.h — what the GGUF reader (gguf.c), writer (gguf_write.c) and name hash
 * (gguf_hmap.c) share; private to src/format. */
#ifndef DF_GGUF_IMPL_H
#define DF_GGUF_IMPL_H
#include "format/gguf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF code assumes a little-endian host"
#endif

#define GGUF_MAGIC 0x46554747u
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_STRING_LENGTH (1ull << 30)
#define GGUF_MAX_ARRAY_ELEMENTS (1ull << 30)
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 64

/* bytes of one scalar of each KV type (0: string / array) */
extern const int df_gguf_kv_size[DF_GGUF_TYPE_COUNT];
/* store a scalar of `type` at p into kv's widened value fields */
void df_gguf_widen_scalar(df_gguf_kv *kv, int type, const void *p);

typedef struct {
    uint32_t cap;  /* power of two */
    int32_t *slot; /* index+1, 0 = empty */
} hmap;
typedef const char *(*name_fn)(const void *arr, int idx);
const char *df_gguf_kv_name(const void *arr, int i);
const char *df_gguf_tensor_name(const void *arr, int i);
/* Build; on a duplicate name returns 1 and sets *dup_a, *dup_b (indices). */
int df_hmap_build(hmap *m, const void *arr, int n, name_fn nf, int *dup_a, int *dup_b);
int df_hmap_find(const hmap *m, const void *arr, name_fn nf, const char *k);
/* Incremental insert (grows at load 1/2): 1 if k is already present, 0 when inserted as idx,
 * or a negative status. */
int df_hmap_insert(hmap *m, const void *arr, name_fn nf, const char *k, int idx);

void df_gguf_kv_free(df_gguf_kv *kv);
/* nbytes of a tensor with overflow checks: 0, or non-zero with the reason in why. */
int df_gguf_tensor_nbytes(int type, const int64_t ne[4], uint64_t *out, char *why, size_t cap);
#endif
