/* repack.c — in-memory weight layouts for the matrix kernels: Q4_K rows repacked as groups of 8
 * interleaved rows (DF_TYPE_Q4_K_X8, df_block_q4_Kx8 in kernels.h), the layout llama.cpp's CPU
 * backend also repacks Q4_K into (q4_K_8x8) before its gemv / gemm. One load then feeds 8 rows,
 * the activation chunk is shared by them, and the per-block scale work and reductions are
 * amortised over 8 rows; the float operations are ggml's, so results do not change.
 * Threading: pure functions on caller-owned memory. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "base/env.h"

int df_repack_type(int wtype) {
    if (df_env()->repack_off || wtype < 0 || wtype >= DF_TYPE_COUNT) return -1;
    const int to = df_kernels()->repack[wtype];
    return to ? to : -1;
}

/* 8 standard blocks (one per row) -> one x8 record */
static void pack_x8(const df_block_q4_K *b[8], df_block_q4_Kx8 *o) {
    int mins[64];
    for (int r = 0; r < 8; r++) {
        o->d[r] = b[r]->d;
        o->dmin[r] = b[r]->dmin;
        /* chunk z (elements 16z..16z+15): element 16z+k (k < 16) sits in qs byte
         * 32(z/4) + 16(z%4 & 1) + k, low nibble for z%4 < 2, high nibble otherwise */
        for (int z = 0; z < 16; z++) {
            const uint8_t *src = b[r]->qs + 32 * (z / 4) + 16 * (z % 2);
            uint64_t lo, hi;
            memcpy(&lo, src, 8);
            memcpy(&hi, src + 8, 8);
            const int sh = (z % 4) >= 2 ? 4 : 0;
            const uint64_t v = ((lo >> sh) & 0x0F0F0F0F0F0F0F0Full) | ((hi >> sh) & 0x0F0F0F0F0F0F0F0Full) << 4;
            memcpy(o->qs + 64 * z + 8 * r, &v, 8);
        }
        for (int j = 0; j < 8; j++) {
            int d, m;
            df_scale_min_k4(j, b[r]->scales, &d, &m);
            o->sc[8 * r + j] = (uint8_t)(d | (m >> 4) << 6);
            mins[8 * r + j] = m;
        }
    }
    for (int k = 0; k < 32; k++) o->mlo[k] = (uint8_t)((mins[k] & 0xF) | (mins[k + 32] & 0xF) << 4);
}

/* one x8 record -> 8 standard blocks (the exact inverse of pack_x8) */
static void unpack_x8(const df_block_q4_Kx8 *x, df_block_q4_K *o[8]) {
    for (int r = 0; r < 8; r++) {
        o[r]->d = x->d[r];
        o[r]->dmin = x->dmin[r];
        uint8_t q[256];
        for (int z = 0; z < 16; z++)
            for (int k = 0; k < 8; k++) {
                const uint8_t v = x->qs[64 * z + 8 * r + k];
                q[16 * z + k] = v & 0xF;
                q[16 * z + 8 + k] = v >> 4;
            }
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) o[r]->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
        int d[8], m[8];
        for (int j = 0; j < 8; j++) {
            const int k = 8 * r + j;
            d[j] = x->sc[k] & 63;
            m[j] = df_q4kx8_min(x, k);
        }
        uint8_t *s = o[r]->scales;
        for (int j = 0; j < 4; j++) {
            s[j] = (uint8_t)((d[j] & 63) | (d[j + 4] >> 4) << 6);
            s[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
            s[j + 8] = (uint8_t)((d[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4);
        }
    }
}

typedef struct {
    bool pack;
    char *data;
    int64_t nb, n_groups, per_task;
    _Atomic int nomem;
} repack_job;

static void repack_task(void *ctx, int task, int thread) {
    (void)thread;
    repack_job *j = ctx;
    const int64_t nb = j->nb, g0 = (int64_t)task * j->per_task;
    const int64_t g1 = g0 + j->per_task < j->n_groups ? g0 + j->per_task : j->n_groups;
    const size_t group = (size_t)nb * 8 * sizeof(df_block_q4_K);
    const bool pack = j->pack;
    char *tmp = df_aligned_alloc(64, group);
    if (!tmp) { j->nomem = 1; return; }
    for (int64_t g = g0; g < g1; g++) {
        char *base = j->data + (size_t)g * group;
        /* fixed-size copies the compiler inlines: libc's rep movsb runs at a fraction of the
         * memory speed on freshly read weights here (group is a multiple of 64 bytes) */
        for (size_t off = 0; off < group; off += 64) memcpy(tmp + off, base + off, 64);
        for (int64_t i = 0; i < nb; i++) {
            if (pack) {
                const df_block_q4_K *b[8];
                for (int r = 0; r < 8; r++) b[r] = (const df_block_q4_K *)tmp + (int64_t)r * nb + i;
                pack_x8(b, (df_block_q4_Kx8 *)base + i);
            } else {
                df_block_q4_K *b[8];
                for (int r = 0; r < 8; r++) b[r] = (df_block_q4_K *)base + (int64_t)r * nb + i;
                unpack_x8((const df_block_q4_Kx8 *)tmp + i, b);
            }
        }
    }
    free(tmp);
}

int df_repack_rows(df_pool *pool, int from, int to, void *data, int64_t n_in, int64_t n_rows) {
    const bool pack = from == DF_TYPE_Q4_K && to == DF_TYPE_Q4_K_X8;
    if (!pack && !(from == DF_TYPE_Q4_K_X8 && to == DF_TYPE_Q4_K))
        return df_err(DF_ERR_INVALID, "repack: no layout change from type %d to %d", from, to);
    if (n_in <= 0 || n_in % 256 || n_rows < 0 || n_rows % 8)
        return df_err(DF_ERR_INVALID, "repack: %lld x %lld is not whole 8-row groups of 256-column blocks",
                      (long long)n_rows, (long long)n_in);
    repack_job j = {.pack = pack, .data = data, .nb = n_in / 256, .n_groups = n_rows / 8};
    const int64_t tasks = 4 * (int64_t)df_pool_size(pool);
    j.per_task = (j.n_groups + tasks - 1) / tasks;
    if (j.per_task < 1) j.per_task = 1;
    df_pool_run(pool, (int)((j.n_groups + j.per_task - 1) / j.per_task), repack_task, &j);
    if (j.nomem) return df_err(DF_ERR_NOMEM, "repack: %lld bytes", (long long)(j.nb * 8 * 144));
    return DF_OK;
}
