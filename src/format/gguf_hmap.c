/* gguf_hmap.c — the name hash of the GGUF reader and writer (open addressing over the KV and
 * tensor arrays, built once after parsing; the writer inserts as it goes). */
#include "format/gguf_impl.h"


static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

const char *df_gguf_kv_name(const void *arr, int i) { return ((const df_gguf_kv *)arr)[i].key; }
const char *df_gguf_tensor_name(const void *arr, int i) {
    return ((const df_gguf_tensor *)arr)[i].name;
}

/* Build; on a duplicate name returns false and sets *dup_a, *dup_b (indices). */
int df_hmap_build(hmap *m, const void *arr, int n, name_fn nf, int *dup_a, int *dup_b) {
    if (n < 0 || n > (1 << 29)) return df_err(DF_ERR_RANGE, "gguf: too many names (%d)", n);
    uint32_t cap = 16;
    while (cap < (uint32_t)n * 2u) cap <<= 1;
    m->cap = cap;
    m->slot = df_calloc(cap, sizeof(int32_t));
    if (!m->slot) return DF_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        const char *k = nf(arr, i);
        uint32_t h = (uint32_t)hash_str(k) & (cap - 1);
        while (m->slot[h]) {
            if (!strcmp(nf(arr, m->slot[h] - 1), k)) {
                *dup_a = m->slot[h] - 1;
                *dup_b = i;
                return 1;
            }
            h = (h + 1) & (cap - 1);
        }
        m->slot[h] = i + 1;
    }
    return 0;
}

int df_hmap_find(const hmap *m, const void *arr, name_fn nf, const char *k) {
    if (!m->slot || !k) return -1;
    uint32_t h = (uint32_t)hash_str(k) & (m->cap - 1);
    while (m->slot[h]) {
        if (!strcmp(nf(arr, m->slot[h] - 1), k)) return m->slot[h] - 1;
        h = (h + 1) & (m->cap - 1);
    }
    return -1;
}

/* Incremental insert used by the writer (grows at load 1/2). Returns 1 if `k` already present,
 * 0 when inserted as index idx, or a negative status. */
int df_hmap_insert(hmap *m, const void *arr, name_fn nf, const char *k, int idx) {
    if (!m->slot || (uint64_t)(idx + 1) * 2 > m->cap) {
        uint32_t nc = m->cap ? m->cap * 2 : 64;
        int32_t *ns = df_calloc(nc, sizeof *ns);
        if (!ns) return DF_ERR_NOMEM;
        for (uint32_t i = 0; i < m->cap; i++) {
            if (!m->slot[i]) continue;
            uint32_t h = (uint32_t)hash_str(nf(arr, m->slot[i] - 1)) & (nc - 1);
            while (ns[h]) h = (h + 1) & (nc - 1);
            ns[h] = m->slot[i];
        }
        free(m->slot);
        m->slot = ns;
        m->cap = nc;
    }
    uint32_t h = (uint32_t)hash_str(k) & (m->cap - 1);
    while (m->slot[h]) {
        if (!strcmp(nf(arr, m->slot[h] - 1), k)) return 1;
        h = (h + 1) & (m->cap - 1);
    }
    m->slot[h] = idx + 1;
    return 0;
}

