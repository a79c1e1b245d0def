/* identity.c — the model identity every rank compares at start (dist.h): a plain GGUF and its
 * packed copy are the same model, another file (other weights, other shapes, other metadata)
 * is not. Per-item hashes are added, so the order of keys and tensors in the file does not
 * matter (a pack appends its keys and moves the experts). */
#include "dist/dist.h"
#include "base/hash.h"
#include <unistd.h>

#define SAMPLE 4096

static uint64_t mix(uint64_t h, const void *p, size_t n) { return df_xxh64(p, n, h); }

/* one KV: key, type and value bytes (strings by content, arrays element by element) */
static uint64_t kv_hash(const df_gguf_kv *kv) {
    uint64_t h = df_xxh64(kv->key, strlen(kv->key), 1);
    h = mix(h, &kv->type, sizeof kv->type);
    if (kv->type == DF_GGUF_STRING) return mix(h, kv->v.str.data, (size_t)kv->v.str.len);
    if (kv->type == DF_GGUF_BOOL) return mix(h, &kv->v.b, sizeof kv->v.b);
    if (kv->type != DF_GGUF_ARRAY) return mix(h, &kv->v, sizeof kv->v.u64); /* widened: all 8 bytes set */
    h = mix(h, &kv->arr_type, sizeof kv->arr_type);
    h = mix(h, &kv->arr_n, sizeof kv->arr_n);
    if (kv->arr_type == DF_GGUF_STRING) {
        const df_gguf_str *s = kv->arr;
        for (uint64_t i = 0; i < kv->arr_n; i++) h = mix(h, s[i].data, (size_t)s[i].len);
        return h;
    }
    static const uint8_t size[DF_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    const int t = kv->arr_type;
    if (t >= 0 && t < DF_GGUF_TYPE_COUNT && size[t] && kv->arr) h = mix(h, kv->arr, (size_t)(kv->arr_n * size[t]));
    return h;
}

static int sample_at(const df_model *m, int shard, uint64_t off, uint64_t n, uint64_t *h, char *buf) {
    if (n > SAMPLE) n = SAMPLE;
    if (shard < 0 || shard >= m->gguf->n_shards) return df_err(DF_ERR_FORMAT, "%s: bad shard %d", m->path, shard);
    const int fd = m->gguf->shards[shard].fd;
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, (size_t)(n - got), (off_t)(off + got));
        if (r <= 0) return df_err(DF_ERR_IO, "%s: reading %llu bytes at offset %llu for the model identity", m->path,
                                  (unsigned long long)n, (unsigned long long)off);
        got += (uint64_t)r;
    }
    *h = mix(*h, buf, (size_t)n);
    return DF_OK;
}

int df_dist_identity(const df_model *m, uint64_t *out) {
    uint64_t sum = 0;
    char *buf = df_malloc(SAMPLE);
    if (!buf) return DF_ERR_NOMEM;
    for (int i = 0; i < m->gguf->n_kv; i++) {
        const df_gguf_kv *kv = &m->gguf->kv[i];
        if (!strncmp(kv->key, "deltafin.pack.", 14) || !strcmp(kv->key, "general.alignment")) continue;
        sum += kv_hash(kv);
    }
    int rc = DF_OK;
    for (int i = 0; i < m->n_bound && rc == DF_OK; i++) {
        const df_tensor *t = &m->tensors[i];
        const df_gguf_tensor *ti = t->info;
        uint64_t h = df_xxh64(ti->name, strlen(ti->name), 2);
        h = mix(h, &ti->type, sizeof ti->type);
        h = mix(h, ti->ne, sizeof ti->ne);
        if (!df_model_is_expert(m, t)) rc = sample_at(m, ti->shard, ti->offset, ti->nbytes, &h, buf);
        sum += h;
    }
    /* experts by location, the same for every layout: first and last expert of each part */
    const int E = m->hp.n_expert;
    for (int l = 0; l < m->hp.n_layer && rc == DF_OK; l++) {
        if (!m->layers[l].is_moe) continue;
        for (int k = 0; k < 2 && rc == DF_OK; k++)
            for (int p = 0; p < DF_EXPERT_NPARTS && rc == DF_OK; p++) {
                df_expert_loc lc;
                rc = df_model_expert_loc(m, l, k ? E - 1 : 0, p, &lc);
                if (rc) break;
                uint64_t h = (uint64_t)l * 131 + (uint64_t)k * 7 + (uint64_t)p;
                rc = sample_at(m, lc.shard, lc.offset, lc.nbytes, &h, buf);
                sum += h;
            }
    }
    free(buf);
    if (rc) return rc;
    *out = sum;
    return DF_OK;
}
