/* test_gguf.c — GGUF reader/writer: fixtures, getters, round trip, malformed files, splits. */
#include "gguf.h"
#include "testlib.h"

#include <fcntl.h>
#include <inttypes.h>
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

int main(void) {
    df_init();
    snprintf(g_tmpdir, sizeof g_tmpdir, "/tmp/test_gguf.%d", (int)getpid());
    test_fixture_llama();
    test_fixture_vocab();
    TEST_MAIN_END("test_gguf");
}
