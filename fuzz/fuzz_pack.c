/* fuzz_pack.c — libFuzzer target for the packed-model reader (src/format/pack.c): the input is
 * a GGUF file (seeds: small packed models of version 1 and 2); when it parses and carries pack
 * keys, df_pack_open must accept or refuse it with a message, and an accepted pack must give
 * locations inside its expert region, checksum rows inside their tensors, and checks
 * (df_pack_check, df_pack_check_meta, df_pack_check_tensor) that return a status, never crash.
 * Properties: no crash, no out-of-bounds read (ASan), every error negative with a message. */
#include "format/pack.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int inited;
    if (!inited) {
        df_init();
        df_log_set_level(-1);
        inited = 1;
    }
    df_gguf *g = NULL;
    if (df_gguf_open_mem(data, size, "fuzz.gguf", &g)) return 0;
    df_pack *p = NULL;
    int rc = df_pack_open(g, &p);
    if (rc) {
        DF_ASSERT(rc < 0 && !p && df_errmsg()[0]);
        df_gguf_close(g);
        return 0;
    }
    const int L = df_pack_n_layers(p), E = df_pack_n_experts(p);
    const df_gguf_tensor *region = df_gguf_tensor_find(g, "deltafin.pack.experts");
    DF_ASSERT(region);
    size_t n = (size_t)L * (size_t)E;
    df_expert_loc *locs = calloc(n * DF_EXPERT_NPARTS + 1, sizeof *locs);
    df_expert_record *rec = calloc(n + 1, sizeof *rec);
    if (locs && rec && n <= (1u << 20)) {
        DF_ASSERT(df_pack_locs(p, locs, rec) == DF_OK);
        for (size_t k = 0; k < n; k++) {
            DF_ASSERT(rec[k].offset >= region->offset && rec[k].offset + rec[k].nbytes <= region->offset + region->nbytes);
            for (int part = 0; part < DF_EXPERT_NPARTS; part++) {
                const df_expert_loc *lc = &locs[k * DF_EXPERT_NPARTS + part];
                if (!lc->nbytes) continue;
                DF_ASSERT(lc->offset >= rec[k].offset && lc->offset + lc->nbytes <= rec[k].offset + rec[k].nbytes);
            }
        }
        uint64_t nchk = 0;
        rc = df_pack_check(g, p, &nchk);
        DF_ASSERT(rc <= 0);
    }
    free(locs);
    free(rec);
    int nrows = 0;
    const char *why = NULL;
    const df_pack_sum *rows = df_pack_sums(p, &nrows, &why);
    for (int i = 0; rows && i < nrows; i++) {
        if (rows[i].what < 0) continue;
        DF_ASSERT(rows[i].what < g->n_tensors);
        const df_gguf_tensor *t = &g->tensors[rows[i].what];
        DF_ASSERT(rows[i].offset + rows[i].nbytes <= t->nbytes);
    }
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        if (t == region || t->nbytes > size) continue;
        /* the tensor's bytes as the file holds them: they match its rows, or the check says not */
        rc = df_pack_check_tensor(p, t, data + t->offset);
        DF_ASSERT(rc == DF_OK || rc == DF_ERR_CHECKSUM);
    }
    rc = df_pack_check_meta(p);
    DF_ASSERT(rc <= 0);
    int nt = 0;
    uint64_t hb = 0;
    (void)df_pack_unprotected(p, &nt, &hb);
    df_pack_close(p);
    df_gguf_close(g);
    return 0;
}
