/* test_pack.c — pack round trip: dense tensors and metadata unchanged, every expert part
 * (separate and fused gate_up, mixed types, a layer without experts) byte-identical at the
 * location the pack reports, records 4 KiB aligned with matching XXH64; the store reads
 * packed records with every engine; a corrupted record, a malformed index and an
 * interrupted pack each fail clearly (the interrupted one leaves no output file). */
#include "format/pack.h"
#include "weights/expert_store.h"
#include "kernels/quant.h"
#include "testlib.h"

#include <fcntl.h>
#include <unistd.h>

enum { E = 4 };
static uint64_t rng = 0xfeedface12345ull;
static uint8_t rb(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint8_t)(rng >> 29); }

typedef struct { const char *name; int type; int n_dims; int64_t ne[3]; uint8_t *data; uint64_t nbytes; } src_t;

static src_t T[] = {
    {"token_embd.weight", DF_TYPE_F32, 2, {16, 10, 1}, 0, 0},
    {"blk.0.ffn_up.weight", DF_TYPE_F16, 2, {16, 24, 1}, 0, 0},
    {"blk.1.ffn_down_exps.weight", DF_TYPE_F32, 3, {16, 64, E}, 0, 0},
    {"blk.1.ffn_gate_exps.weight", DF_TYPE_Q8_0, 3, {64, 16, E}, 0, 0},
    {"blk.1.ffn_gate_inp.weight", DF_TYPE_F32, 2, {64, E, 1}, 0, 0},
    {"blk.1.ffn_up_exps.weight", DF_TYPE_Q8_0, 3, {64, 16, E}, 0, 0},
    {"blk.2.ffn_gate_up_exps.weight", DF_TYPE_F16, 3, {64, 32, E}, 0, 0},
    {"blk.2.ffn_down_exps.weight", DF_TYPE_Q8_0, 3, {32, 64, E}, 0, 0},
    {"output_norm.weight", DF_TYPE_F32, 1, {64, 1, 1}, 0, 0},
};
enum { NT = sizeof T / sizeof T[0] };

static const src_t *find(const char *n) {
    for (int i = 0; i < NT; i++) if (!strcmp(T[i].name, n)) return &T[i];
    return NULL;
}

static bool file_has(const char *path, uint64_t off, const void *want, uint64_t n) {
    uint8_t *b = malloc(n ? n : 1);
    int fd = open(path, O_RDONLY);
    bool ok = fd >= 0 && pread(fd, b, n, (off_t)off) == (ssize_t)n && !memcmp(b, want, n);
    if (fd >= 0) close(fd);
    free(b);
    return ok;
}

int main(void) {
    df_init();
    df_log_set_level(DF_LOG_ERROR);
    char src[256], out[256], tmp[300];
    snprintf(src, sizeof src, "/tmp/df_test_pack_src_%d.gguf", (int)getpid());
    snprintf(out, sizeof out, "/tmp/df_test_pack_out_%d.gguf", (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    df_gguf_writer *w = df_gguf_writer_new(32);
    CHECK_EQ_INT(df_gguf_w_str(w, "general.architecture", "qwen3moe"), DF_OK);
    CHECK_EQ_INT(df_gguf_w_u32(w, "qwen3moe.block_count", 3), DF_OK);
    for (int i = 0; i < NT; i++) {
        T[i].nbytes = df_type_row_bytes(T[i].type, T[i].ne[0]) * (uint64_t)T[i].ne[1] * (uint64_t)T[i].ne[2];
        T[i].data = malloc(T[i].nbytes);
        for (uint64_t j = 0; j < T[i].nbytes; j++) T[i].data[j] = rb();
        CHECK_EQ_INT(df_gguf_w_tensor(w, T[i].name, T[i].type, T[i].n_dims, T[i].ne, T[i].data), DF_OK);
    }
    CHECK_EQ_INT(df_gguf_writer_save(w, src), DF_OK);
    df_gguf_writer_free(w);

    /* interrupted pack: error, and neither OUT nor OUT.tmp exists */
    df_pack_opts o = {0};
    o.fail_after = 3;
    CHECK_EQ_INT(df_pack_write(src, out, &o), DF_ERR_CANCELLED);
    CHECK(access(out, F_OK) != 0);
    CHECK(access(tmp, F_OK) != 0);

    o.fail_after = 0;
    int rc = df_pack_write(src, out, &o);
    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
    CHECK(access(tmp, F_OK) != 0);

    df_gguf *g = NULL;
    CHECK_EQ_INT(df_gguf_open(out, &g), DF_OK);
    if (!g) TEST_MAIN_END("test_pack");
    CHECK(df_pack_is_packed(g));
    const char *arch = NULL;
    CHECK_EQ_INT(df_gguf_get_str(g, "general.architecture", &arch), DF_OK);
    CHECK_STR(arch, "qwen3moe");
    /* dense tensors kept byte-identical; expert tensors gone */
    for (int i = 0; i < NT; i++) {
        const df_gguf_tensor *t = df_gguf_tensor_find(g, T[i].name);
        if (T[i].n_dims == 3) { CHECK(t == NULL); continue; }
        CHECK(t != NULL);
        if (!t) continue;
        CHECK(t->type == T[i].type && t->nbytes == T[i].nbytes);
        CHECK(file_has(out, t->offset, T[i].data, T[i].nbytes));
    }
    df_pack *p = NULL;
    rc = df_pack_open(g, &p);
    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
    if (!p) TEST_MAIN_END("test_pack");
    CHECK_EQ_INT(df_pack_n_layers(p), 3);
    CHECK_EQ_INT(df_pack_n_experts(p), E);
    int type;
    int64_t ne[3];
    CHECK_EQ_INT(df_pack_expert_tensor(p, "blk.2.ffn_gate_up_exps.weight", &type, ne), DF_OK);
    CHECK(type == DF_TYPE_F16 && ne[0] == 64 && ne[1] == 32 && ne[2] == E);
    CHECK_EQ_INT(df_pack_expert_tensor(p, "blk.0.ffn_up_exps.weight", &type, ne), DF_ERR_NOTFOUND);

    static df_expert_loc locs[3 * E * 3];
    static df_expert_record recs[3 * E];
    CHECK_EQ_INT(df_pack_locs(p, locs, recs), DF_OK);
    for (int l = 0; l < 3; l++)
        for (int e = 0; e < E; e++) {
            const df_expert_loc *lc = &locs[(l * E + e) * 3];
            const df_expert_record *r = &recs[l * E + e];
            if (l == 0) { CHECK(lc[0].nbytes == 0 && lc[1].nbytes == 0 && lc[2].nbytes == 0 && r->nbytes == 0); continue; }
            CHECK(r->offset % 4096 == 0);
            for (int part = 0; part < 3; part++) {
                const src_t *s;
                char nm[64];
                uint64_t sub = 0, len;
                if (l == 2 && part != DF_EXPERT_DOWN) {
                    snprintf(nm, sizeof nm, "blk.2.ffn_gate_up_exps.weight");
                    s = find(nm);
                    len = s->nbytes / E / 2;
                    sub = part == DF_EXPERT_UP ? len : 0;
                } else {
                    snprintf(nm, sizeof nm, "blk.%d.ffn_%s_exps.weight", l, part == 0 ? "gate" : part == 1 ? "up" : "down");
                    s = find(nm);
                    len = s->nbytes / E;
                }
                CHECK(lc[part].nbytes == len && lc[part].type == s->type);
                CHECK(lc[part].offset >= r->offset && lc[part].offset + len <= r->offset + r->nbytes);
                CHECK_MSG(file_has(out, lc[part].offset, s->data + (uint64_t)e * (s->nbytes / E) + sub, len),
                          "layer %d expert %d part %d", l, e, part);
            }
        }
    uint64_t nchk = 0;
    CHECK_EQ_INT(df_pack_check(g, p, &nchk), DF_OK);
    CHECK_EQ_INT(nchk, 2 * E);
    /* version 2: a checksum row for the header, each dense tensor, the index and the table */
    {
        CHECK_EQ_INT(df_pack_version(p), 2);
        int nrows = 0;
        const char *why = NULL;
        const df_pack_sum *rows = df_pack_sums(p, &nrows, &why);
        CHECK(rows != NULL && why == NULL);
        CHECK_EQ_INT(nrows, 1 + 4 + 1 + 1); /* header, 4 dense tensors, index, table */
        CHECK_EQ_INT(df_pack_check_meta(p), DF_OK);
        const df_gguf_tensor *te = df_gguf_tensor_find(g, "token_embd.weight");
        const df_pack_sum *tr = NULL;
        CHECK_EQ_INT(df_pack_tensor_sums(p, te, &tr), 1);
        CHECK_EQ_INT(df_pack_check_tensor(p, te, find("token_embd.weight")->data), DF_OK);
        uint8_t *bad = malloc(te->nbytes);
        memcpy(bad, find("token_embd.weight")->data, te->nbytes);
        bad[7] ^= 1;
        CHECK_EQ_INT(df_pack_check_tensor(p, te, bad), DF_ERR_CHECKSUM);
        char want[400];
        snprintf(want, sizeof want, "tensor 'token_embd.weight': checksum mismatch in %s at offset %llu", out,
                 (unsigned long long)te->offset);
        CHECK_MSG(strstr(df_errmsg(), want) != NULL, "msg: %s", df_errmsg());
        free(bad);
        CHECK_EQ_INT(df_pack_tensor_sums(p, df_gguf_tensor_find(g, "deltafin.pack.experts"), &tr), 0);
    }
    /* version 1 (records only) is still written for tests and read */
    {
        char v1[300];
        snprintf(v1, sizeof v1, "%s.v1", out);
        df_pack_opts o1 = {.version = 1};
        CHECK_EQ_INT(df_pack_write(src, v1, &o1), DF_OK);
        df_gguf *g1 = NULL;
        df_pack *p1 = NULL;
        CHECK_EQ_INT(df_gguf_open(v1, &g1), DF_OK);
        CHECK_EQ_INT(df_pack_open(g1, &p1), DF_OK);
        if (p1) {
            int nrows = 1, nt = 0;
            uint64_t hb = 0;
            CHECK_EQ_INT(df_pack_version(p1), 1);
            CHECK(df_pack_sums(p1, &nrows, NULL) == NULL && nrows == 0);
            CHECK_EQ_INT(df_pack_check_meta(p1), DF_OK);
            CHECK(df_pack_unprotected(p1, &nt, &hb) > 0 && nt == 4 && hb == g1->shards[0].data_start);
            CHECK_EQ_INT(df_pack_check(g1, p1, &nchk), DF_OK);
        }
        df_pack_close(p1);
        df_gguf_close(g1);
        unlink(v1);
    }

    /* the store reads packed records (one read each, checksum verified) with every engine */
    const char *paths[1] = {out};
    df_store_params sp = df_store_default_params();
    sp.n_layers = 3; sp.n_experts = E; sp.locs = locs; sp.records = recs; sp.paths = paths; sp.n_files = 1;
    sp.budget_bytes = 3 * df_store_slot_bytes(&sp);
    for (int eng = DF_IO_PREAD; eng < DF_IO_NENGINES; eng++) {
        if (!df_io_engine_available(eng)) continue;
        sp.io.engine = eng;
        df_store *s = NULL;
        CHECK_EQ_INT(df_store_create(&sp, &s), DF_OK);
        if (!s) continue;
        for (int rep = 0; rep < 2; rep++)
            for (int l = 1; l < 3; l++)
                for (int e = 0; e < E; e++) {
                    df_expert_w ew;
                    rc = df_store_acquire(s, l, e, &ew);
                    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
                    if (rc) continue;
                    const src_t *dn = find(l == 1 ? "blk.1.ffn_down_exps.weight" : "blk.2.ffn_down_exps.weight");
                    CHECK(!memcmp(ew.w[DF_EXPERT_DOWN], dn->data + (uint64_t)e * (dn->nbytes / E), dn->nbytes / E));
                    if (l == 2) {
                        const src_t *gu = find("blk.2.ffn_gate_up_exps.weight");
                        uint64_t sl = gu->nbytes / E;
                        CHECK(ew.w[DF_EXPERT_UP] == (const uint8_t *)ew.w[DF_EXPERT_GATE] + sl / 2);
                        CHECK(!memcmp(ew.w[DF_EXPERT_GATE], gu->data + (uint64_t)e * sl, sl));
                    }
                    df_store_release(s, l, e);
                }
        df_store_free(s);
    }

    /* corrupt one byte of layer 2 expert 3's record */
    {
        const df_expert_record *r = &recs[2 * E + 3];
        int fd = open(out, O_RDWR);
        uint8_t b;
        CHECK(pread(fd, &b, 1, (off_t)(r->offset + 100)) == 1);
        b ^= 0xff;
        CHECK(pwrite(fd, &b, 1, (off_t)(r->offset + 100)) == 1);
        close(fd);
        CHECK_EQ_INT(df_pack_check(g, p, &nchk), DF_ERR_CHECKSUM);
        char want[512];
        snprintf(want, sizeof want, "layer 2 expert 3: checksum mismatch in %s at offset %llu", out,
                 (unsigned long long)r->offset);
        CHECK_MSG(strstr(df_errmsg(), want) != NULL, "msg: %s", df_errmsg());
        sp.io.engine = DF_IO_PREAD;
        df_store *s = NULL;
        CHECK_EQ_INT(df_store_create(&sp, &s), DF_OK);
        df_expert_w ew;
        CHECK_EQ_INT(df_store_acquire(s, 2, 3, &ew), DF_ERR_CHECKSUM);
        CHECK_MSG(strstr(df_errmsg(), want) != NULL, "msg: %s", df_errmsg());
        CHECK_EQ_INT(df_store_acquire(s, 2, 2, &ew), DF_OK);
        df_store_release(s, 2, 2);
        df_store_free(s);
    }
    /* malformed index: record length of layer 1 expert 1 changed */
    {
        const df_gguf_tensor *it = df_gguf_tensor_find(g, "deltafin.pack.index");
        int fd = open(out, O_RDWR);
        int64_t bad = 12345;
        CHECK(pwrite(fd, &bad, 8, (off_t)(it->offset + (uint64_t)((1 * E + 1) * 8 + 1) * 8)) == 8);
        close(fd);
        df_gguf *g2 = NULL;
        df_pack *p2 = NULL;
        CHECK_EQ_INT(df_gguf_open(out, &g2), DF_OK);
        CHECK_EQ_INT(df_pack_open(g2, &p2), DF_ERR_FORMAT);
        CHECK(strstr(df_errmsg(), "layer 1 expert 1") != NULL);
        df_gguf_close(g2);
    }
    df_pack_close(p);
    df_gguf_close(g);
    /* packing a packed file, a file without experts, and not-a-pack */
    CHECK_EQ_INT(df_pack_write(out, tmp, &o), DF_ERR_INVALID);
    {
        char plain[256];
        snprintf(plain, sizeof plain, "/tmp/df_test_pack_plain_%d.gguf", (int)getpid());
        df_gguf_writer *w2 = df_gguf_writer_new(32);
        df_gguf_w_tensor(w2, T[0].name, T[0].type, T[0].n_dims, T[0].ne, T[0].data);
        CHECK_EQ_INT(df_gguf_writer_save(w2, plain), DF_OK);
        df_gguf_writer_free(w2);
        CHECK_EQ_INT(df_pack_write(plain, tmp, &o), DF_ERR_INVALID);
        CHECK(strstr(df_errmsg(), "no routed expert tensors") != NULL);
        df_gguf *g3 = NULL;
        df_pack *p3 = NULL;
        CHECK_EQ_INT(df_gguf_open(plain, &g3), DF_OK);
        CHECK_EQ_INT(df_pack_open(g3, &p3), DF_ERR_NOTFOUND);
        df_gguf_close(g3);
        unlink(plain);
    }
    unlink(src);
    unlink(out);
    for (int i = 0; i < NT; i++) free(T[i].data);
    TEST_MAIN_END("test_pack");
}
