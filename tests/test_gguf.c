/* test_gguf.c — GGUF reader/writer: fixtures, getters, round trip, malformed files, splits. */
#include "format/gguf.h"
#include "testlib.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmpdir[256];

static void test_fixture_llama(void) {
    char p[512];
    df_gguf *g = NULL;
    int rc = df_gguf_open(df_fixture("models/llama-2-tiny-random.gguf", p, sizeof p), &g);
    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
    if (rc) return;
    CHECK_EQ_INT(g->version, 3);
    CHECK_EQ_INT(g->n_kv, 18);
    CHECK_EQ_INT(g->n_tensors, 12);
    CHECK_EQ_INT(g->alignment, 32);
    CHECK_EQ_INT(g->n_shards, 1);
    const char *s = NULL;
    CHECK_EQ_INT(df_gguf_get_str(g, "general.architecture", &s), DF_OK);
    CHECK_STR(s, "llama");
    uint32_t u = 0;
    CHECK_EQ_INT(df_gguf_get_u32(g, "llama.block_count", &u), DF_OK);
    CHECK(u >= 1);
    int32_t i32 = 0;
    CHECK_EQ_INT(df_gguf_get_i32(g, "llama.block_count", &i32), DF_OK); /* lenient u32 -> i32 */
    CHECK_EQ_INT(i32, (int32_t)u);
    float f = 0;
    CHECK_EQ_INT(df_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f), DF_OK);
    CHECK(f > 0 && f < 1e-3);
    CHECK_EQ_INT(df_gguf_get_u32(g, "no.such.key", &u), DF_ERR_NOTFOUND);
    CHECK_EQ_INT(df_gguf_get_u32(g, "general.architecture", &u), DF_ERR_FORMAT);
    CHECK(strstr(df_errmsg(), "general.architecture") && strstr(df_errmsg(), "string"));
    const void *arr;
    uint64_t n;
    CHECK_EQ_INT(df_gguf_get_arr(g, "tokenizer.ggml.tokens", DF_GGUF_STRING, &arr, &n), DF_OK);
    CHECK_EQ_INT(n, 32000);
    CHECK_STR(((const df_gguf_str *)arr)[0].data, "<unk>");
    CHECK_EQ_INT(df_gguf_get_arr(g, "tokenizer.ggml.tokens", DF_GGUF_F32, &arr, &n), DF_ERR_FORMAT);
    CHECK(strstr(df_errmsg(), "array of string"));
    const df_gguf_tensor *t = df_gguf_tensor_find(g, "token_embd.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->ne[1], 32000);
        CHECK_EQ_INT(t->offset, g->shards[0].data_start);
        uint8_t buf[16];
        CHECK_EQ_INT(df_gguf_read(g, t, 0, buf, sizeof buf), DF_OK);
        CHECK_EQ_INT(df_gguf_read(g, t, t->nbytes - 8, buf, 16), DF_ERR_RANGE);
    }
    CHECK(df_gguf_tensor_find(g, "nope") == NULL);
    /* offsets: running sum of padded sizes */
    for (int k = 1; k < g->n_tensors; k++)
        CHECK_EQ_INT(g->tensors[k].offset,
                     g->tensors[k - 1].offset + df_pad(g->tensors[k - 1].nbytes, 32));
    df_gguf_close(g);
}

static void test_fixture_vocab(void) {
    static const char *names[] = {"ggml-vocab-deepseek-llm.gguf", "ggml-vocab-falcon.gguf",
                                  "ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf",
                                  "ggml-vocab-phi-3.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char rel[128], p[512];
        snprintf(rel, sizeof rel, "vocab/%s", names[i]);
        df_gguf *g = NULL;
        int rc = df_gguf_open(df_fixture(rel, p, sizeof p), &g);
        CHECK_MSG(rc == DF_OK, "%s: %s", names[i], df_errmsg());
        if (rc) continue;
        const void *a;
        uint64_t n = 0;
        CHECK_EQ_INT(df_gguf_get_arr(g, "tokenizer.ggml.tokens", DF_GGUF_STRING, &a, &n), DF_OK);
        CHECK(n > 1000);
        df_gguf_close(g);
    }
}


/* ---- helpers ------------------------------------------------------------------------------ */
static uint8_t *slurp(const char *path, size_t *len) {
    char *d = NULL;
    if (df_read_file(path, &d, len)) return NULL;
    return (uint8_t *)d;
}

static int write_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t k = fwrite(b, 1, n, f);
    fclose(f);
    return k == n ? 0 : -1;
}

static size_t find(const uint8_t *b, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(b + i, needle, k)) return i;
    fprintf(stderr, "needle %s not found\n", needle);
    abort();
}

static void put_u32(uint8_t *b, size_t at, uint32_t v) { memcpy(b + at, &v, 4); }
static void put_u64(uint8_t *b, size_t at, uint64_t v) { memcpy(b + at, &v, 8); }

static uint8_t g_data[4096];

/* The valid base file every malformed case is derived from. */
static uint8_t *make_base(size_t *len) {
    df_gguf_writer *w = df_gguf_writer_new(32);
    char desc[401];
    memset(desc, 'd', 400);
    desc[400] = 0;
    int32_t arr[5] = {1, -2, 3, -4, 5};
    const char *strs[3] = {"alpha", "beta", "gamma"};
    int rc = 0;
    rc |= df_gguf_w_str(w, "general.description", desc);
    rc |= df_gguf_w_str(w, "general.architecture", "llama");
    rc |= df_gguf_w_u32(w, "general.alignment", 32);
    rc |= df_gguf_w_u32(w, "test.aaa", 7);
    rc |= df_gguf_w_i32(w, "test.bbb", -3);
    rc |= df_gguf_w_arr(w, "test.arr", DF_GGUF_I32, arr, 5);
    rc |= df_gguf_w_arr_str(w, "test.strs", strs, 3);
    rc |= df_gguf_w_tensor(w, "blk.0.attn_q.weight", 0, 2, (int64_t[]){8, 4}, g_data);
    rc |= df_gguf_w_tensor(w, "t.q4", 2, 2, (int64_t[]){64, 2}, g_data);
    rc |= df_gguf_w_tensor(w, "t.f1", 0, 1, (int64_t[]){8}, g_data);
    char path[512];
    snprintf(path, sizeof path, "%s/base.gguf", g_tmpdir);
    rc |= df_gguf_writer_save(w, path);
    df_gguf_writer_free(w);
    CHECK_MSG(rc == 0, "%s", df_errmsg());
    return slurp(path, len);
}

/* Both the memory and the file reader must reject `b` with a message containing the fragments. */
static void expect_err_(int line, const uint8_t *b, size_t n, const char *frag1, const char *frag2) {
    df_gguf *g = NULL;
    int rc = df_gguf_open_mem(b, n, "model.gguf", &g);
    const char *m = df_errmsg();
    CHECK_MSG(rc == DF_ERR_FORMAT && g == NULL && !strncmp(m, "model.gguf: ", 12) &&
                  strstr(m, frag1) && (!frag2 || strstr(m, frag2)),
              "line %d: rc=%d msg=\"%s\" want \"%s\" \"%s\"", line, rc, rc ? m : "",
              frag1, frag2 ? frag2 : "");
    df_gguf_close(g);
    char path[512];
    snprintf(path, sizeof path, "%s/model.gguf", g_tmpdir);
    if (write_bytes(path, b, n)) { CHECK(0); return; }
    g = NULL;
    rc = df_gguf_open(path, &g);
    m = df_errmsg();
    CHECK_MSG(rc == DF_ERR_FORMAT && g == NULL && !strncmp(m, path, strlen(path)) &&
                  strstr(m, frag1) && (!frag2 || strstr(m, frag2)),
              "line %d (file): rc=%d msg=\"%s\"", line, rc, rc ? m : "");
    df_gguf_close(g);
}
#define expect_err(b, n, f1, f2) expect_err_(__LINE__, b, n, f1, f2)

/* Apply a corruption to a copy of the base file and expect an error. */
#define CORRUPT(stmt, f1, f2)                                                            \
    do {                                                                                 \
        uint8_t *c = malloc(blen);                                                       \
        memcpy(c, base, blen);                                                           \
        stmt;                                                                            \
        expect_err(c, blen, f1, f2);                                                     \
        free(c);                                                                         \
    } while (0)

static void test_malformed(void) {
    size_t blen = 0;
    uint8_t *base = make_base(&blen);
    CHECK(base != NULL);
    if (!base) return;
    df_gguf *g = NULL;
    CHECK_EQ_INT(df_gguf_open_mem(base, blen, "model.gguf", &g), DF_OK);
    CHECK(g && g->n_kv == 7 && g->n_tensors == 3);
    uint64_t ds = g ? g->shards[0].data_start : 0;
    df_gguf_close(g);
    CHECK_EQ_INT(blen, ds + 128 + 96 + 32); /* last tensor needs no padding */

    size_t p_arch = find(base, blen, "general.architecture");
    size_t p_align = find(base, blen, "general.alignment");
    size_t p_aaa = find(base, blen, "test.aaa");
    size_t p_bbb = find(base, blen, "test.bbb");
    size_t p_arr = find(base, blen, "test.arr");
    size_t p_beta = find(base, blen, "beta");
    size_t p_gamma = find(base, blen, "gamma");
    size_t p_q = find(base, blen, "blk.0.attn_q.weight");
    size_t p_q4 = find(base, blen, "t.q4");
    size_t p_f1 = find(base, blen, "t.f1");
    /* tensor info field positions (name, n_dims u32, ne[] u64, type u32, offset u64) */
    size_t q_nd = p_q + 19, q_ne = q_nd + 4;
    size_t q4_nd = p_q4 + 4, q4_ne = q4_nd + 4, q4_type = q4_ne + 16, q4_off = q4_type + 4;

    /* 1-2: magic and version */
    CORRUPT(c[0] = 'X', "bad magic", "not a GGUF file");
    CORRUPT(put_u32(c, 4, 0), "unsupported GGUF version 0", NULL);
    CORRUPT(put_u32(c, 4, 1), "version 1 is not supported", NULL);
    CORRUPT(put_u32(c, 4, 4), "unsupported GGUF version 4", NULL);
    CORRUPT(put_u32(c, 4, 0x03000000u), "byte-swapped", NULL);
    /* 3: counts */
    CORRUPT(put_u64(c, 8, 1ull << 62), "tensor count 4611686018427387904", NULL);
    CORRUPT(put_u64(c, 16, UINT64_MAX), "KV count 18446744073709551615", NULL);
    CORRUPT(put_u64(c, 16, 1000), "KV count 1000", "cannot fit");
    /* 4: string lengths */
    CORRUPT(put_u64(c, p_arch - 8, 1ull << 40), "KV #1 key", "string length 1099511627776");
    CORRUPT(put_u64(c, p_arch + 20 + 4, 1ull << 31), "KV 'general.architecture' value",
            "exceeds limit");
    CORRUPT(put_u64(c, p_beta - 8, blen), "KV 'test.strs' array element 1", "string length");
    /* 5: arrays */
    CORRUPT(put_u64(c, p_arr + 8 + 4 + 4, 1ull << 62), "KV 'test.arr'", "array count");
    CORRUPT(put_u64(c, p_arr + 8 + 4 + 4, 1ull << 20), "KV 'test.arr'", "array of 1048576 i32");
    CORRUPT(put_u32(c, p_arr + 8 + 4, DF_GGUF_ARRAY), "KV 'test.arr'", "nested arrays");
    CORRUPT(put_u32(c, p_arr + 8 + 4, 77), "KV 'test.arr'", "invalid array element type 77");
    /* 6: keys and value types */
    CORRUPT(put_u32(c, p_aaa + 8, 13), "KV 'test.aaa'", "invalid value type 13");
    CORRUPT(memcpy(c + p_bbb, "test.aaa", 8), "duplicate key 'test.aaa'", NULL);
    CORRUPT(c[p_aaa + 3] = 0, "KV #3", "NUL");
    /* 7: general.alignment */
    CORRUPT(put_u32(c, p_align + 17, DF_GGUF_I32), "'general.alignment' has type i32",
            "expected u32");
    CORRUPT(put_u32(c, p_align + 17 + 4, 48), "'general.alignment' = 48", "not a power of two");
    CORRUPT(put_u32(c, p_align + 17 + 4, 0), "'general.alignment' = 0", "not a power of two");
    /* 8: tensor names */
    CORRUPT(memcpy(c + p_f1, "t.q4", 4), "duplicate tensor name 't.q4'", NULL);
    CORRUPT(put_u64(c, p_f1 - 8, 64), "tensor #2", "name length 64 exceeds 63");
    CORRUPT(c[p_f1] = (char)0xff, "tensor #2", "UTF-8");
    /* 9: dims */
    CORRUPT(put_u32(c, q4_nd, 5), "tensor 't.q4'", "n_dims 5 exceeds 4");
    CORRUPT(put_u64(c, q4_ne + 8, (uint64_t)-1), "tensor 't.q4'", "negative dimension ne[1] = -1");
    CORRUPT((put_u64(c, q_ne, 1ull << 32), put_u64(c, q_ne + 8, 1ull << 32)),
            "tensor 'blk.0.attn_q.weight'", "overflows");
    /* 10: types */
    CORRUPT(put_u32(c, q4_type, 99), "tensor 't.q4'", "invalid tensor type 99");
    CORRUPT(put_u32(c, q4_type, 4), "tensor 't.q4'", "removed type");
    CORRUPT(put_u32(c, q4_type, 31), "tensor 't.q4'", "removed type");
    CORRUPT(put_u32(c, q4_type, 43), "tensor 't.q4'", "invalid tensor type 43");
    CORRUPT(put_u64(c, q4_ne, 48), "tensor 't.q4'",
            "ne[0] = 48 is not a multiple of the block size 32 of type Q4_0");
    /* 11: offsets */
    CORRUPT(put_u64(c, q4_off, 130), "tensor 't.q4': data offset 130",
            "not a multiple of the alignment 32");
    CORRUPT(put_u64(c, q4_off, 160), "tensor 't.q4': data offset 160, expected 128", NULL);
    CORRUPT(put_u64(c, q4_off, UINT64_MAX - 31), "tensor 't.q4'", "expected 128");
    /* 12: data beyond the end (truncated data section) */
    {
        char want[160];
        snprintf(want, sizeof want,
                 "tensor 't.f1': data [offset %zu, 32 bytes] extends beyond end of file (size %zu)",
                 blen - 32, blen - 1);
        expect_err(base, blen - 1, want, NULL);
        snprintf(want, sizeof want, "tensor 'blk.0.attn_q.weight': data [offset %" PRIu64, ds);
        expect_err(base, (size_t)ds + 10, want, "extends beyond end of file");
    }
    /* truncation inside each section */
    expect_err(base, 20, "truncated file: header needs 8 bytes at offset 16", NULL);
    expect_err(base, 3, "truncated file: header needs 4 bytes at offset 0", NULL);
    expect_err(base, 0, "truncated file: header", NULL);
    expect_err(base, 100, "truncated file or corrupt header", NULL);
    expect_err(base, p_arch - 4, "truncated file: KV #1 key", NULL);
    expect_err(base, p_aaa + 3, "truncated file: KV #3 key", NULL);
    expect_err(base, p_aaa + 8 + 2, "truncated file: KV 'test.aaa' type", NULL);
    expect_err(base, p_aaa + 8 + 4 + 2, "truncated file: KV 'test.aaa' value needs 4 bytes", NULL);
    expect_err(base, p_arr + 8 + 4 + 4 + 8 + 6, "truncated file: KV 'test.arr'",
               "array of 5 i32 needs at least 20 bytes");
    expect_err(base, p_gamma + 2, "truncated file: KV 'test.strs' array element 2", NULL);
    expect_err(base, p_f1 - 4, "truncated file: tensor info #2 name", NULL);
    expect_err(base, q4_ne + 6, "truncated file: tensor 't.q4' info", NULL);
    /* every prefix of the file is rejected (the last tensor has no trailing padding) */
    int bad = 0;
    for (size_t cut = 0; cut < blen; cut++) {
        g = NULL;
        int rc = df_gguf_open_mem(base, cut, "model.gguf", &g);
        if (rc != DF_ERR_FORMAT || g || strncmp(df_errmsg(), "model.gguf: ", 12)) bad++;
        df_gguf_close(g);
    }
    CHECK_EQ_INT(bad, 0);
    /* single-byte corruptions anywhere never crash (ASan build checks memory safety) */
    uint8_t *c = malloc(blen);
    for (size_t i = 0; i < ds; i++) {
        static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
        for (size_t k = 0; k < sizeof vals; k++) {
            memcpy(c, base, blen);
            c[i] = vals[k];
            g = NULL;
            if (df_gguf_open_mem(c, blen, "model.gguf", &g) == DF_OK) df_gguf_close(g);
        }
    }
    free(c);
    free(base);
}

/* ---- writer round trip ---------------------------------------------------------------------- */
static void test_roundtrip(void) {
    df_gguf_writer *w = df_gguf_writer_new(64);
    CHECK(w != NULL);
    if (!w) return;
    uint8_t u8 = 200; int8_t i8 = -5; uint16_t u16 = 60000; int16_t i16 = -3000;
    double f64 = 3.25; int64_t i64 = -7;
    CHECK_EQ_INT(df_gguf_w_str(w, "general.architecture", "qwen3moe"), DF_OK);
    CHECK_EQ_INT(df_gguf_w_scalar(w, "k.u8", DF_GGUF_U8, &u8), DF_OK);
    CHECK_EQ_INT(df_gguf_w_scalar(w, "k.i8", DF_GGUF_I8, &i8), DF_OK);
    CHECK_EQ_INT(df_gguf_w_scalar(w, "k.u16", DF_GGUF_U16, &u16), DF_OK);
    CHECK_EQ_INT(df_gguf_w_scalar(w, "k.i16", DF_GGUF_I16, &i16), DF_OK);
    CHECK_EQ_INT(df_gguf_w_u32(w, "k.u32", 4000000000u), DF_OK);
    CHECK_EQ_INT(df_gguf_w_i32(w, "k.i32", -100000), DF_OK);
    CHECK_EQ_INT(df_gguf_w_f32(w, "k.f32", 0.5f), DF_OK);
    CHECK_EQ_INT(df_gguf_w_bool(w, "k.bool", true), DF_OK);
    CHECK_EQ_INT(df_gguf_w_u64(w, "k.u64", 1ull << 40), DF_OK);
    CHECK_EQ_INT(df_gguf_w_scalar(w, "k.i64", DF_GGUF_I64, &i64), DF_OK);
    CHECK_EQ_INT(df_gguf_w_scalar(w, "k.f64", DF_GGUF_F64, &f64), DF_OK);
    uint32_t a32[3] = {1, 2, 3};
    float af[2] = {1.5f, -2};
    const char *ss[3] = {"a", "", "hello"};
    CHECK_EQ_INT(df_gguf_w_arr(w, "a.u32", DF_GGUF_U32, a32, 3), DF_OK);
    CHECK_EQ_INT(df_gguf_w_arr(w, "a.f32", DF_GGUF_F32, af, 2), DF_OK);
    CHECK_EQ_INT(df_gguf_w_arr_str(w, "a.str", ss, 3), DF_OK);
    CHECK_EQ_INT(df_gguf_w_u32(w, "k.u32", 1), DF_ERR_INVALID); /* duplicate */
    CHECK(strstr(df_errmsg(), "duplicate key 'k.u32'"));
    int64_t ne_q8[2] = {64, 3}, ne_f32[1] = {5}, ne_q4k[3] = {256, 2, 2};
    CHECK_EQ_INT(df_gguf_w_tensor(w, "w.q8", 8, 2, ne_q8, NULL), DF_OK);
    CHECK_EQ_INT(df_gguf_w_tensor(w, "w.f32", 0, 1, ne_f32, NULL), DF_OK);
    CHECK_EQ_INT(df_gguf_w_tensor(w, "w.q4k", 12, 3, ne_q4k, NULL), DF_OK);
    CHECK_EQ_INT(df_gguf_w_tensor(w, "w.f32", 0, 1, ne_f32, NULL), DF_ERR_INVALID);
    CHECK_EQ_INT(df_gguf_w_tensor(w, "bad", 2, 1, (int64_t[]){33}, NULL), DF_ERR_INVALID);
    CHECK(strstr(df_errmsg(), "not a multiple of the block size"));
    CHECK_EQ_INT(df_gguf_w_tensor(w, "bad", 5, 1, (int64_t[]){32}, NULL), DF_ERR_INVALID);
    CHECK_EQ_INT(df_gguf_writer_tensor_offset(w, 0), 0);
    CHECK_EQ_INT(df_gguf_writer_tensor_offset(w, 1), 256);      /* pad(6*34 = 204, 64) */
    CHECK_EQ_INT(df_gguf_writer_tensor_offset(w, 2), 256 + 64); /* pad(20, 64) */
    uint64_t ds = df_gguf_writer_data_start(w);
    CHECK(ds > 0 && ds % 64 == 0);

    /* stream: header, then tensor data in chunks */
    char path[512];
    snprintf(path, sizeof path, "%s/rt.gguf", g_tmpdir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK_EQ_INT(df_gguf_writer_write_tensor_data(w, fd, 0, g_data, 10), DF_ERR_INVALID);
    CHECK_EQ_INT(df_gguf_writer_write_header(w, fd), DF_OK);
    CHECK_EQ_INT(df_gguf_writer_write_tensor_data(w, fd, 1, g_data, 20), DF_ERR_INVALID);
    CHECK_EQ_INT(df_gguf_writer_write_tensor_data(w, fd, 0, g_data, 100), DF_OK);
    CHECK_EQ_INT(df_gguf_writer_write_tensor_data(w, fd, 0, g_data + 100, 105), DF_ERR_INVALID);
    CHECK_EQ_INT(df_gguf_writer_write_tensor_data(w, fd, 0, g_data + 100, 104), DF_OK);
    CHECK_EQ_INT(df_gguf_writer_write_tensor_data(w, fd, 1, g_data + 1, 20), DF_OK);
    CHECK_EQ_INT(df_gguf_writer_write_tensor_data(w, fd, 2, g_data + 2, 4 * 144), DF_OK);
    close(fd);
    df_gguf_writer_free(w);

    df_gguf *g = NULL;
    int rc = df_gguf_open(path, &g);
    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
    if (rc) return;
    CHECK_EQ_INT(g->alignment, 64);
    CHECK_EQ_INT(g->shards[0].data_start, ds);
    CHECK_EQ_INT(g->n_kv, 16); /* 15 + general.alignment added by the writer */
    uint32_t u;
    int32_t i;
    uint64_t u64v;
    float f;
    bool b;
    const char *s;
    CHECK_EQ_INT(df_gguf_get_str(g, "general.architecture", &s), DF_OK);
    CHECK_STR(s, "qwen3moe");
    CHECK_EQ_INT(df_gguf_get_u32(g, "general.alignment", &u), DF_OK);
    CHECK_EQ_INT(u, 64);
    CHECK_EQ_INT(df_gguf_get_u32(g, "k.u8", &u), DF_OK);
    CHECK_EQ_INT(u, 200);
    CHECK_EQ_INT(df_gguf_get_i32(g, "k.i8", &i), DF_OK);
    CHECK_EQ_INT(i, -5);
    CHECK_EQ_INT(df_gguf_get_u32(g, "k.i8", &u), DF_ERR_FORMAT); /* negative into u32 */
    CHECK(strstr(df_errmsg(), "'k.i8' value -5 does not fit in u32"));
    CHECK_EQ_INT(df_gguf_get_u32(g, "k.u16", &u), DF_OK);
    CHECK_EQ_INT(u, 60000);
    CHECK_EQ_INT(df_gguf_get_i32(g, "k.i16", &i), DF_OK);
    CHECK_EQ_INT(i, -3000);
    CHECK_EQ_INT(df_gguf_get_u32(g, "k.u32", &u), DF_OK);
    CHECK_EQ_INT(u, 4000000000u);
    CHECK_EQ_INT(df_gguf_get_i32(g, "k.u32", &i), DF_ERR_FORMAT); /* does not fit */
    CHECK_EQ_INT(df_gguf_get_i32(g, "k.i32", &i), DF_OK);
    CHECK_EQ_INT(i, -100000);
    CHECK_EQ_INT(df_gguf_get_f32(g, "k.f32", &f), DF_OK);
    CHECK_NEAR(f, 0.5, 0);
    CHECK_EQ_INT(df_gguf_get_bool(g, "k.bool", &b), DF_OK);
    CHECK(b);
    CHECK_EQ_INT(df_gguf_get_bool(g, "k.u32", &b), DF_ERR_FORMAT);
    CHECK_EQ_INT(df_gguf_get_u64(g, "k.u64", &u64v), DF_OK);
    CHECK_EQ_INT(u64v, 1ull << 40);
    CHECK_EQ_INT(df_gguf_get_u32(g, "k.u64", &u), DF_ERR_FORMAT);
    CHECK_EQ_INT(df_gguf_get_i32(g, "k.i64", &i), DF_OK);
    CHECK_EQ_INT(i, -7);
    CHECK_EQ_INT(df_gguf_get_f32(g, "k.f64", &f), DF_OK);
    CHECK_NEAR(f, 3.25, 0);
    CHECK_EQ_INT(df_gguf_get_str(g, "k.f64", &s), DF_ERR_FORMAT);
    CHECK(strstr(df_errmsg(), "key 'k.f64' has type f64, expected string"));
    const void *a;
    uint64_t n;
    CHECK_EQ_INT(df_gguf_get_arr(g, "a.u32", DF_GGUF_U32, &a, &n), DF_OK);
    CHECK(n == 3 && !memcmp(a, a32, sizeof a32));
    CHECK_EQ_INT(df_gguf_get_arr(g, "a.f32", DF_GGUF_F32, &a, &n), DF_OK);
    CHECK(n == 2 && !memcmp(a, af, sizeof af));
    CHECK_EQ_INT(df_gguf_get_arr(g, "a.str", DF_GGUF_STRING, &a, &n), DF_OK);
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        const df_gguf_str *st = a;
        CHECK_STR(st[0].data, "a");
        CHECK_EQ_INT(st[1].len, 0);
        CHECK_STR(st[2].data, "hello");
    }
    uint32_t pl[3];
    CHECK_EQ_INT(df_gguf_get_u32_per_layer(g, "a.u32", pl, 3), DF_OK);
    CHECK(pl[0] == 1 && pl[2] == 3);
    CHECK_EQ_INT(df_gguf_get_u32_per_layer(g, "a.u32", pl, 2), DF_ERR_FORMAT);
    CHECK_EQ_INT(df_gguf_get_u32_per_layer(g, "k.u16", pl, 3), DF_OK);
    CHECK(pl[0] == 60000 && pl[2] == 60000);
    CHECK_EQ_INT(df_gguf_get_u32_per_layer(g, "a.f32", pl, 2), DF_ERR_FORMAT);

    const df_gguf_tensor *t0 = df_gguf_tensor_find(g, "w.q8");
    const df_gguf_tensor *t2 = df_gguf_tensor_find(g, "w.q4k");
    CHECK(t0 && t2);
    if (t0 && t2) {
        CHECK_EQ_INT(t0->nbytes, 204);
        CHECK_EQ_INT(t0->offset, ds);
        CHECK_EQ_INT(t2->offset, ds + 320);
        CHECK_EQ_INT(t2->n_dims, 3);
        CHECK(t2->ne[0] == 256 && t2->ne[1] == 2 && t2->ne[2] == 2 && t2->ne[3] == 1);
        uint8_t buf[600];
        CHECK_EQ_INT(df_gguf_read(g, t0, 0, buf, 204), DF_OK);
        CHECK(!memcmp(buf, g_data, 204));
        CHECK_EQ_INT(df_gguf_read(g, t2, 10, buf, 4 * 144 - 10), DF_OK);
        CHECK(!memcmp(buf, g_data + 12, 4 * 144 - 10));
    }
    /* copy every KV into a new writer and save: identical header bytes */
    df_gguf_writer *w2 = df_gguf_writer_new(32);
    for (int k = 0; k < g->n_kv; k++) CHECK_EQ_INT(df_gguf_w_copy_kv(w2, &g->kv[k]), DF_OK);
    static uint8_t tdata[3][1024];
    for (int k = 0; k < g->n_tensors; k++) {
        const df_gguf_tensor *t = &g->tensors[k];
        CHECK_EQ_INT(df_gguf_read(g, t, 0, tdata[k], t->nbytes), DF_OK);
        CHECK_EQ_INT(df_gguf_w_tensor(w2, t->name, t->type, t->n_dims, t->ne, tdata[k]), DF_OK);
    }
    CHECK_EQ_INT(df_gguf_writer_data_start(w2), ds);
    char path2[512];
    snprintf(path2, sizeof path2, "%s/rt2.gguf", g_tmpdir);
    CHECK_EQ_INT(df_gguf_writer_save(w2, path2), DF_OK);
    df_gguf_writer_free(w2);
    size_t l1 = 0, l2 = 0;
    uint8_t *b1 = slurp(path, &l1), *b2 = slurp(path2, &l2);
    CHECK(b1 && b2 && l1 == l2 && !memcmp(b1, b2, l1));
    free(b1);
    free(b2);
    df_gguf_close(g);
}

/* Many tensors: the writer's duplicate check is hashed (no O(n^2)), offsets stay exact. */
static void test_many_tensors(void) {
    df_gguf_writer *w = df_gguf_writer_new(32);
    int bad = 0;
    for (int i = 0; i < 50000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "blk.%d.ffn_up.%d", i / 384, i % 384);
        if (df_gguf_w_tensor(w, nm, 8, 1, (int64_t[]){32}, NULL)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(df_gguf_w_tensor(w, "blk.3.ffn_up.7", 8, 1, (int64_t[]){32}, NULL),
                 DF_ERR_INVALID);
    CHECK(strstr(df_errmsg(), "duplicate tensor name 'blk.3.ffn_up.7'"));
    CHECK_EQ_INT(df_gguf_writer_tensor_offset(w, 49999), 49999ull * 64);
    df_gguf_writer_free(w);
}

/* ---- split models ---------------------------------------------------------------------------- */
static int write_shard(const char *name, int no, int count, int total, const char *const *tn,
                       int nt, uint8_t fill) {
    df_gguf_writer *w = df_gguf_writer_new(32);
    uint16_t sno = (uint16_t)no, scount = (uint16_t)count;
    int rc = 0;
    if (no == 0) rc |= df_gguf_w_str(w, "general.architecture", "llama");
    rc |= df_gguf_w_scalar(w, "split.no", DF_GGUF_U16, &sno);
    rc |= df_gguf_w_scalar(w, "split.count", DF_GGUF_U16, &scount);
    rc |= df_gguf_w_i32(w, "split.tensors.count", total);
    static uint8_t d[4][64];
    for (int i = 0; i < nt; i++) {
        memset(d[i], fill + i, 64);
        rc |= df_gguf_w_tensor(w, tn[i], 0, 1, (int64_t[]){16}, d[i]);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmpdir, name);
    rc |= df_gguf_writer_save(w, path);
    df_gguf_writer_free(w);
    return rc;
}

static void test_split(void) {
    const char *t1[2] = {"a", "b"}, *t2[1] = {"c"}, *tdup[1] = {"b"};
    char path[512];
    snprintf(path, sizeof path, "%s/m-00001-of-00002.gguf", g_tmpdir);
    CHECK_EQ_INT(write_shard("m-00001-of-00002.gguf", 0, 2, 3, t1, 2, 10), DF_OK);
    CHECK_EQ_INT(write_shard("m-00002-of-00002.gguf", 1, 2, 3, t2, 1, 20), DF_OK);
    df_gguf *g = NULL;
    int rc = df_gguf_open(path, &g);
    CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
    if (!rc) {
        CHECK_EQ_INT(g->n_shards, 2);
        CHECK_EQ_INT(g->n_tensors, 3);
        const df_gguf_tensor *c = df_gguf_tensor_find(g, "c"), *b = df_gguf_tensor_find(g, "b");
        CHECK(c && b);
        if (c && b) {
            CHECK_EQ_INT(c->shard, 1);
            CHECK_EQ_INT(b->shard, 0);
            CHECK_EQ_INT(c->offset, g->shards[1].data_start);
            uint8_t buf[64];
            CHECK_EQ_INT(df_gguf_read(g, c, 0, buf, 64), DF_OK);
            CHECK(buf[0] == 20 && buf[63] == 20);
            CHECK_EQ_INT(df_gguf_read(g, b, 0, buf, 64), DF_OK);
            CHECK(buf[0] == 11);
        }
        const char *s;
        CHECK_EQ_INT(df_gguf_get_str(g, "general.architecture", &s), DF_OK);
        df_gguf_close(g);
    }
    /* opening a later shard directly */
    char p2[512];
    snprintf(p2, sizeof p2, "%s/m-00002-of-00002.gguf", g_tmpdir);
    g = NULL;
    CHECK_EQ_INT(df_gguf_open(p2, &g), DF_ERR_INVALID);
    CHECK(strstr(df_errmsg(), "open the first shard"));
    /* duplicate tensor across shards */
    CHECK_EQ_INT(write_shard("m-00002-of-00002.gguf", 1, 2, 3, tdup, 1, 20), DF_OK);
    CHECK_EQ_INT(df_gguf_open(path, &g), DF_ERR_FORMAT);
    CHECK_MSG(strstr(df_errmsg(), "tensor 'b' appears in shard 1 and in shard 2"), "%s",
              df_errmsg());
    /* wrong split.no in shard 2 */
    CHECK_EQ_INT(write_shard("m-00002-of-00002.gguf", 0, 2, 3, t2, 1, 20), DF_OK);
    CHECK_EQ_INT(df_gguf_open(path, &g), DF_ERR_FORMAT);
    CHECK(strstr(df_errmsg(), "m-00002-of-00002.gguf: split.no = 0, expected 1"));
    /* wrong split.tensors.count */
    CHECK_EQ_INT(write_shard("m-00002-of-00002.gguf", 1, 2, 3, t1, 1, 20), DF_OK);
    CHECK_EQ_INT(write_shard("m-00001-of-00002.gguf", 0, 2, 4, t2, 1, 10), DF_OK);
    CHECK_EQ_INT(df_gguf_open(path, &g), DF_ERR_FORMAT);
    CHECK_MSG(strstr(df_errmsg(), "split.tensors.count = 4 but the 2 shards hold 2 tensors"), "%s",
              df_errmsg());
    /* missing shard */
    unlink(p2);
    CHECK_EQ_INT(df_gguf_open(path, &g), DF_ERR_IO);
    CHECK(strstr(df_errmsg(), "m-00002-of-00002.gguf: cannot open"));
    /* split.count disagrees with the name */
    CHECK_EQ_INT(write_shard("m-00001-of-00002.gguf", 0, 3, 3, t1, 2, 10), DF_OK);
    CHECK_EQ_INT(df_gguf_open(path, &g), DF_ERR_FORMAT);
    CHECK(strstr(df_errmsg(), "split.count = 3 but the file name says 2 shards"));
    /* no split keys at all under a split name */
    {
        df_gguf_writer *w = df_gguf_writer_new(32);
        CHECK_EQ_INT(df_gguf_w_str(w, "general.architecture", "llama"), DF_OK);
        CHECK_EQ_INT(df_gguf_w_str(w, "general.alignment", "x"), DF_ERR_INVALID);
        CHECK_EQ_INT(df_gguf_writer_save(w, path), DF_OK);
        df_gguf_writer_free(w);
        CHECK_EQ_INT(df_gguf_open(path, &g), DF_ERR_FORMAT);
        CHECK(strstr(df_errmsg(), "has no split.count key"));
        /* a file without tensors: no padding after the header (like ggml) */
        g = NULL;
        CHECK_EQ_INT(df_gguf_open_mem("GGUF\3\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24,
                                      "empty.gguf", &g), DF_OK);
        CHECK(g && g->shards[0].data_start == 24 && g->n_kv == 0 && g->n_tensors == 0);
        df_gguf_close(g);
        g = NULL;
    }
    /* a shard of a split model under a plain name */
    CHECK_EQ_INT(write_shard("plain.gguf", 0, 2, 3, t1, 2, 10), DF_OK);
    snprintf(path, sizeof path, "%s/plain.gguf", g_tmpdir);
    CHECK_EQ_INT(df_gguf_open(path, &g), DF_ERR_FORMAT);
    CHECK(strstr(df_errmsg(), "split model but its name does not follow"));
}

/* Reading a llama.cpp-written file and writing it back with the writer gives identical bytes. */
static void test_rewrite_identical(const char *rel) {
    char p[512], out[512];
    df_gguf *g = NULL;
    if (df_gguf_open(df_fixture(rel, p, sizeof p), &g)) { CHECK_MSG(0, "%s", df_errmsg()); return; }
    df_gguf_writer *w = df_gguf_writer_new(g->alignment);
    for (int i = 0; i < g->n_kv; i++) CHECK_EQ_INT(df_gguf_w_copy_kv(w, &g->kv[i]), DF_OK);
    void **bufs = calloc((size_t)g->n_tensors + 1, sizeof *bufs);
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        bufs[i] = malloc(t->nbytes + 1);
        CHECK_EQ_INT(df_gguf_read(g, t, 0, bufs[i], t->nbytes), DF_OK);
        CHECK_EQ_INT(df_gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne, bufs[i]), DF_OK);
    }
    snprintf(out, sizeof out, "%s/rewrite.gguf", g_tmpdir);
    CHECK_EQ_INT(df_gguf_writer_save(w, out), DF_OK);
    df_gguf_writer_free(w);
    size_t l1 = 0, l2 = 0;
    uint8_t *b1 = slurp(p, &l1), *b2 = slurp(out, &l2);
    CHECK_MSG(b1 && b2 && l1 == l2 && !memcmp(b1, b2, l1), "%s: rewrite differs", rel);
    free(b1);
    free(b2);
    for (int i = 0; i < g->n_tensors; i++) free(bufs[i]);
    free(bufs);
    df_gguf_close(g);
}

static void cleanup(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmpdir);
    if (system(cmd)) fprintf(stderr, "cleanup failed\n");
}

int main(void) {
    df_init();
    snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/test_gguf.%d", (int)getpid());
    if (mkdir(g_tmpdir, 0700)) { perror(g_tmpdir); return 1; }
    for (int i = 0; i < 4096; i++) g_data[i] = (uint8_t)i;
    test_fixture_llama();
    test_fixture_vocab();
    test_malformed();
    test_roundtrip();
    test_many_tensors();
    test_split();
    test_rewrite_identical("models/llama-2-tiny-random.gguf");
    test_rewrite_identical("vocab/ggml-vocab-gpt-2.gguf");
    cleanup();
    TEST_MAIN_END("test_gguf");
}
