/* fuzz_gguf.c — libFuzzer target for the GGUF reader (df_gguf_open_mem).
 * Any input must either be rejected with an error message or parse into a structure whose
 * getters/lookups/reads work; accepted inputs are re-written with the writer (to a memfd) and
 * re-read, and the two parses must agree (round-trip property). */
#include "format/gguf.h"

#include <sys/mman.h>
#include <unistd.h>

static void check_roundtrip(const df_gguf *g) {
    if (g->alignment > (1u << 16)) return; /* valid, but padding would make it slow */
    df_gguf_writer *w = df_gguf_writer_new(g->alignment);
    DF_ASSERT(w);
    for (int i = 0; i < g->n_kv; i++) DF_ASSERT(df_gguf_w_copy_kv(w, &g->kv[i]) == DF_OK);
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        DF_ASSERT(df_gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL) == DF_OK);
    }
    int fd = memfd_create("fuzz_gguf", 0);
    if (fd < 0) { df_gguf_writer_free(w); return; }
    DF_ASSERT(df_gguf_writer_write_header(w, fd) == DF_OK);
    static uint8_t buf[4096];
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        for (uint64_t off = 0; off < t->nbytes;) {
            uint64_t n = t->nbytes - off < sizeof buf ? t->nbytes - off : sizeof buf;
            DF_ASSERT(df_gguf_read(g, t, off, buf, n) == DF_OK);
            DF_ASSERT(df_gguf_writer_write_tensor_data(w, fd, i, buf, n) == DF_OK);
            off += n;
        }
        if (t->nbytes == 0) DF_ASSERT(df_gguf_writer_write_tensor_data(w, fd, i, buf, 0) == DF_OK);
    }
    df_gguf_writer_free(w);
    off_t len = lseek(fd, 0, SEEK_END);
    void *m = len > 0 ? mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    DF_ASSERT(m != MAP_FAILED);
    df_gguf *h = NULL;
    int rc = df_gguf_open_mem(m, (size_t)len, "roundtrip", &h);
    if (rc) df_log(DF_LOG_ERROR, "roundtrip: %s", df_errmsg());
    DF_ASSERT(rc == DF_OK);
    DF_ASSERT(h->n_kv == g->n_kv + (g->alignment != 32 && !df_gguf_find(g, "general.alignment")));
    DF_ASSERT(h->n_tensors == g->n_tensors && h->alignment == g->alignment);
    for (int i = 0; i < g->n_kv; i++) {
        const df_gguf_kv *a = &g->kv[i], *b = df_gguf_find(h, a->key);
        DF_ASSERT(b && b->type == a->type && b->arr_type == a->arr_type && b->arr_n == a->arr_n);
    }
    for (int i = 0; i < g->n_tensors; i++) {
        const df_gguf_tensor *a = &g->tensors[i], *b = &h->tensors[i];
        DF_ASSERT(!strcmp(a->name, b->name) && a->type == b->type && a->nbytes == b->nbytes);
        DF_ASSERT(a->offset - g->shards[0].data_start == b->offset - h->shards[0].data_start);
        DF_ASSERT(!memcmp(a->ne, b->ne, sizeof a->ne));
    }
    df_gguf_close(h);
    munmap(m, (size_t)len);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int inited;
    if (!inited) {
        df_init();
        df_log_set_level(-1);
        inited = 1;
    }
    df_gguf *g = NULL;
    int rc = df_gguf_open_mem(data, size, "fuzz.gguf", &g);
    if (rc) {
        DF_ASSERT(rc < 0 && g == NULL);
        DF_ASSERT(strncmp(df_errmsg(), "fuzz.gguf: ", 11) == 0);
        return 0;
    }
    for (int i = 0; i < g->n_kv; i++) {
        const df_gguf_kv *kv = &g->kv[i];
        DF_ASSERT(df_gguf_find(g, kv->key) == kv);
        uint32_t u; int32_t s; uint64_t u64; float f; bool b; const char *str;
        const void *a; uint64_t n; uint32_t pl[4];
        (void)df_gguf_get_u32(g, kv->key, &u);
        (void)df_gguf_get_i32(g, kv->key, &s);
        (void)df_gguf_get_u64(g, kv->key, &u64);
        (void)df_gguf_get_f32(g, kv->key, &f);
        (void)df_gguf_get_bool(g, kv->key, &b);
        (void)df_gguf_get_str(g, kv->key, &str);
        (void)df_gguf_get_arr(g, kv->key, kv->arr_type, &a, &n);
        (void)df_gguf_get_u32_per_layer(g, kv->key, pl, 4);
    }
    for (int i = 0; i < g->n_tensors; i++)
        DF_ASSERT(df_gguf_tensor_find(g, g->tensors[i].name) == &g->tensors[i]);
    check_roundtrip(g);
    df_gguf_close(g);
    return 0;
}
