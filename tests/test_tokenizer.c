/* test_tokenizer.c — tokenizer against llama.cpp's outputs:
 *  1. every vocab fixture with .inp/.out (fixtures/vocab, plus llama.cpp's models/ folder when
 *     present): exact ids, and decoding the ids gives the input back;
 *  2. pre-tokenizers without a shippable vocab (llama-bpe, qwen2, deepseek-v3, kimi-k2,
 *     gpt-4o, ...) on the GPT-2 vocab with tokenizer.ggml.pre replaced; expected ids in
 *     tests/data/tokenizer/ come from llama-tokenize (scripts/gen_tokenizer_expected.py);
 *  3. special tokens (partitioning, parse_special, EOG set, gpt-oss quirks), byte fallback,
 *     invalid UTF-8, the streaming detokenizer, API edge cases. */
#include "testlib.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

#include <unistd.h>

#define SEP "\n__ggml_vocab_test__\n"

typedef struct {
    char **s;
    size_t *len;
    int n;
    char *buf;
} strlist;

static int load_inp(const char *path, strlist *L) {
    size_t n;
    memset(L, 0, sizeof *L);
    if (df_read_file(path, &L->buf, &n)) return -1;
    size_t cap = 16;
    L->s = malloc(cap * sizeof(char *));
    L->len = malloc(cap * sizeof(size_t));
    char *p = L->buf, *end = L->buf + n;
    size_t sl = strlen(SEP);
    for (;;) {
        char *q = memmem(p, (size_t)(end - p), SEP, sl);
        if (!q) break;
        if ((size_t)L->n == cap) {
            cap *= 2;
            L->s = realloc(L->s, cap * sizeof(char *));
            L->len = realloc(L->len, cap * sizeof(size_t));
        }
        L->s[L->n] = p;
        L->len[L->n] = (size_t)(q - p);
        L->n++;
        p = q + sl;
    }
    return 0;
}

static void free_list(strlist *L) {
    free(L->s);
    free(L->len);
    free(L->buf);
}

/* expected ids: one line per string */
static int parse_line(const char *line, int32_t *ids, int cap) {
    int n = 0;
    const char *p = line;
    while (*p && *p != '\n') {
        while (*p == ' ') p++;
        if (!*p || *p == '\n') break;
        long v = strtol(p, (char **)&p, 10);
        if (n < cap) ids[n] = (int32_t)v;
        n++;
    }
    return n;
}

static void print_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n && i < 80; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
}

/* Decode through the streaming detokenizer (the generation path). */
static char *decode_stream(const df_tokenizer *t, const int32_t *ids, int n, bool strip, size_t *outlen) {
    size_t cap = 64, o = 0;
    char *out = malloc(cap);
    df_detok d;
    df_detok_init(&d, false, strip);
    for (int i = 0; i <= n; i++) {
        char buf[4096];
        int r = i < n ? df_detok_push(&d, t, ids[i], buf, sizeof buf) : df_detok_flush(&d, buf, sizeof buf);
        if (r < 0) { free(out); return NULL; }
        if (o + (size_t)r + 1 > cap) {
            while (o + (size_t)r + 1 > cap) cap *= 2;
            out = realloc(out, cap);
        }
        memcpy(out + o, buf, (size_t)r);
        o += (size_t)r;
    }
    out[o] = 0;
    *outlen = o;
    return out;
}

/* Compare a tokenizer against an .inp/.out pair. Returns number of mismatches. */
static int check_pairs(const df_tokenizer *t, const char *label, const char *inp, const char *outp,
                       bool add_special, bool parse_special, bool roundtrip) {
    strlist L;
    char *out = NULL;
    size_t outn;
    if (load_inp(inp, &L) || df_read_file(outp, &out, &outn)) {
        fprintf(stderr, "FAIL %s: cannot read %s / %s\n", label, inp, outp);
        t_fail++;
        return 1;
    }
    int bad = 0;
    const char *line = out;
    static int32_t exp[65536], got[65536];
    for (int i = 0; i < L.n; i++) {
        if (!line || !*line) { fprintf(stderr, "FAIL %s: .out has too few lines\n", label); bad++; break; }
        int ne = parse_line(line, exp, 65536);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
        int ng = df_tokenize(t, L.s[i], L.len[i], add_special, parse_special, got, 65536);
        bool same = ng == ne && ng <= 65536 && !memcmp(exp, got, (size_t)ng * sizeof(int32_t));
        if (!same) {
            bad++;
            if (bad <= 3) {
                fprintf(stderr, "FAIL %s: string %d \"", label, i);
                print_escaped(L.s[i], L.len[i]);
                fprintf(stderr, "\"\n  expected:");
                for (int k = 0; k < ne && k < 40; k++) fprintf(stderr, " %d", exp[k]);
                fprintf(stderr, "\n  got:     ");
                for (int k = 0; k < ng && k < 40; k++) fprintf(stderr, " %d", got[k]);
                fprintf(stderr, "\n");
            }
            continue;
        }
        if (roundtrip) {
            size_t dl;
            char *dec = decode_stream(t, got, ng, df_tokenizer_add_space_prefix(t), &dl);
            if (!dec || dl != L.len[i] || memcmp(dec, L.s[i], dl)) {
                bad++;
                fprintf(stderr, "FAIL %s: string %d does not round-trip: \"", label, i);
                print_escaped(L.s[i], L.len[i]);
                fprintf(stderr, "\" -> \"");
                if (dec) print_escaped(dec, dl);
                fprintf(stderr, "\"\n");
            }
            free(dec);
        }
    }
    if (bad) t_fail++;
    else t_pass++;
    printf("  %-28s %3d strings %s\n", label, L.n, bad ? "MISMATCH" : "ok");
    free(out);
    free_list(&L);
    return bad;
}

static df_tokenizer *load_path(const char *path) {
    df_gguf *g = NULL;
    if (df_gguf_open(path, &g)) {
        fprintf(stderr, "open %s: %s\n", path, df_errmsg());
        return NULL;
    }
    df_tokenizer *t = NULL;
    df_tokenizer_opts o = {.quiet = true};
    int rc = df_tokenizer_load_ex(g, &o, &t);
    if (rc) fprintf(stderr, "load %s: %s\n", path, df_errmsg());
    df_gguf_close(g);
    return t;
}

static bool exists(const char *p) { return access(p, R_OK) == 0; }

static void test_vocab_dir(const char *dir, const char *const *names) {
    char g[1024], inp[1100], outp[1100];
    for (int i = 0; names[i]; i++) {
        snprintf(g, sizeof g, "%s/ggml-vocab-%s.gguf", dir, names[i]);
        snprintf(inp, sizeof inp, "%s.inp", g);
        snprintf(outp, sizeof outp, "%s.out", g);
        if (!exists(g) || !exists(inp) || !exists(outp)) {
            printf("  %-28s skipped (no %s)\n", names[i], exists(g) ? ".inp/.out" : ".gguf");
            continue;
        }
        df_tokenizer *t = load_path(g);
        CHECK_MSG(t != NULL, "load %s", g);
        if (!t) continue;
        check_pairs(t, names[i], inp, outp, false, false, true);
        df_tokenizer_free(t);
    }
}

/* ---- derived vocabularies (gpt-2 tokens/merges, other pre / token types) ---------------- */
typedef struct {
    const char *text;
    int32_t type;
} retype_t;

static const retype_t k_retype[] = {{"hello", 4}, {"world", 3}, {"<|endoftext|>", 3}, {"Hello", 4}, {NULL, 0}};

static int write_derived(const char *src, const char *dst, const char *pre, const retype_t *rt) {
    df_gguf *g = NULL;
    int rc = df_gguf_open(src, &g);
    if (rc) return rc;
    df_gguf_writer *w = df_gguf_writer_new(32);
    const df_gguf_kv *tk = df_gguf_find(g, "tokenizer.ggml.tokens");
    for (int i = 0; i < g->n_kv && !rc; i++) {
        const df_gguf_kv *kv = &g->kv[i];
        if (!strcmp(kv->key, "tokenizer.ggml.pre") && pre) rc = df_gguf_w_str(w, kv->key, pre);
        else if (!strcmp(kv->key, "tokenizer.ggml.token_type") && rt && tk) {
            int32_t *ty = malloc(kv->arr_n * sizeof(int32_t));
            memcpy(ty, kv->arr, kv->arr_n * sizeof(int32_t));
            const df_gguf_str *s = tk->arr;
            for (uint64_t k = 0; k < kv->arr_n && k < tk->arr_n; k++)
                for (int r = 0; rt[r].text; r++)
                    if (s[k].len == strlen(rt[r].text) && !memcmp(s[k].data, rt[r].text, s[k].len)) ty[k] = rt[r].type;
            rc = df_gguf_w_arr(w, kv->key, DF_GGUF_I32, ty, kv->arr_n);
            free(ty);
        } else rc = df_gguf_w_copy_kv(w, kv);
    }
    if (!rc && pre && !df_gguf_find(g, "tokenizer.ggml.pre")) rc = df_gguf_w_str(w, "tokenizer.ggml.pre", pre);
    if (!rc) rc = df_gguf_writer_save(w, dst);
    df_gguf_writer_free(w);
    df_gguf_close(g);
    return rc;
}

static void test_derived(const char *gpt2) {
    static const struct {
        const char *name, *pre;
        bool parse_special, add_special, retype;
    } cases[] = {
        {"gpt-2", "gpt-2", false, false, false},
        {"llama-bpe", "llama-bpe", false, false, false},
        {"qwen2", "qwen2", false, false, false},
        {"qwen35", "qwen35", false, false, false},
        {"deepseek-v3", "deepseek-v3", false, false, false},
        {"deepseek-llm", "deepseek-llm", false, false, false},
        {"deepseek-coder", "deepseek-coder", false, false, false},
        {"kimi-k2", "kimi-k2", false, false, false},
        {"gpt-4o", "gpt-4o", false, false, false},
        {"tekken", "tekken", false, false, false},
        {"falcon", "falcon", false, false, false},
        {"default", "default", false, false, false},
        {"starcoder", "starcoder", false, false, false},
        {"olmo", "olmo", false, false, false},
        {"seed-coder", "seed-coder", false, false, false},
        {"special-plain", "llama-bpe", false, true, true},
        {"special-parse", "llama-bpe", true, true, true},
    };
    char tmp[] = "/tmp/df_tok_XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) { CHECK(fd >= 0); return; }
    close(fd);
    char dst[64];
    snprintf(dst, sizeof dst, "%s.gguf", tmp);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char outp[256], label[64];
        snprintf(outp, sizeof outp, "tests/data/tokenizer/%s.out", cases[i].name);
        snprintf(label, sizeof label, "gpt-2 vocab, %s", cases[i].name);
        if (!exists(outp)) { CHECK_MSG(0, "missing %s", outp); continue; }
        int rc = write_derived(gpt2, dst, cases[i].pre, cases[i].retype ? k_retype : NULL);
        CHECK_MSG(rc == 0, "write derived vocab: %s", df_errmsg());
        if (rc) continue;
        df_tokenizer *t = load_path(dst);
        CHECK_MSG(t != NULL, "load derived %s", cases[i].name);
        if (!t) continue;
        check_pairs(t, label, "tests/data/tokenizer/strings.inp", outp, cases[i].add_special,
                    cases[i].parse_special, !cases[i].add_special && !cases[i].parse_special && !cases[i].retype);
        df_tokenizer_free(t);
    }
    /* unknown pre-tokenizer: clear error */
    int rc = write_derived(gpt2, dst, "no-such-pre", NULL);
    CHECK(rc == 0);
    df_gguf *g = NULL;
    CHECK(df_gguf_open(dst, &g) == 0);
    if (g) {
        df_tokenizer *t = NULL;
        df_tokenizer_opts o = {.quiet = true};
        rc = df_tokenizer_load_ex(g, &o, &t);
        CHECK_EQ_INT(rc, DF_ERR_UNSUPPORTED);
        CHECK(strstr(df_errmsg(), "no-such-pre") != NULL);
        CHECK(t == NULL);
        df_gguf_close(g);
    }
    unlink(dst);
    unlink(tmp);
}

/* ---- synthetic vocabulary: EOG set, auto-detection, gpt-oss quirks ---------------------- */
static void test_eog(void) {
    /* 256 byte-level chars + specials */
    static const char *specials[] = {"<|im_end|>", "<|endoftext|>", "[EOS]", "<|return|>", "<|call|>",
                                     "<|end|>", "<|channel|>", "<|im_start|>", "[PAD]", NULL};
    static const int32_t stype[] = {3, 3, 1, 3, 3, 3, 3, 3, 3};
    const char *toks[300];
    int32_t types[300];
    char store[256][4];
    int n = 0;
    int nb = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp;
        if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) cp = (uint32_t)b;
        else cp = 256u + (uint32_t)nb++;
        if (cp < 0x80) { store[b][0] = (char)cp; store[b][1] = 0; }
        else { store[b][0] = (char)(0xC0 | (cp >> 6)); store[b][1] = (char)(0x80 | (cp & 0x3F)); store[b][2] = 0; }
        toks[n] = store[b];
        types[n++] = 1;
    }
    int first_special = n;
    for (int i = 0; specials[i]; i++) { toks[n] = specials[i]; types[n++] = stype[i]; }
    const char *merges[] = {"h i"};
    df_gguf_writer *w = df_gguf_writer_new(32);
    df_gguf_w_str(w, "general.architecture", "qwen3moe");
    df_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    df_gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
    df_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n);
    df_gguf_w_arr(w, "tokenizer.ggml.token_type", DF_GGUF_I32, types, (uint64_t)n);
    df_gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    df_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)first_special); /* <|im_end|> */
    char path[] = "/tmp/df_tok_eog_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(df_gguf_writer_save(w, path) == 0);
    df_gguf_writer_free(w);
    df_tokenizer *t = load_path(path);
    unlink(path);
    CHECK(t != NULL);
    if (!t) return;
    int32_t im_end = first_special, eot = first_special + 1, eos2 = first_special + 2, ret = first_special + 3,
            call = first_special + 4, end = first_special + 5, chan = first_special + 6, im_start = first_special + 7,
            pad = first_special + 8;
    CHECK(df_token_is_eog(t, im_end));
    CHECK(df_token_is_eog(t, eot));
    CHECK(df_token_is_eog(t, eos2));
    CHECK(df_token_is_control(t, eos2)); /* "[EOS]" was normal: forced control */
    CHECK(df_token_is_eog(t, ret));
    CHECK(df_token_is_eog(t, call));
    CHECK(!df_token_is_eog(t, end)); /* harmony: <|end|> removed when <|return|>+<|call|> exist */
    CHECK_EQ_INT(df_token_attr(t, end), DF_TATTR_USER_DEFINED);
    CHECK(!df_token_is_eog(t, im_start));
    CHECK(df_token_is_eog(t, pad)); /* [PAD] = FIM pad (Kimi-K2) -> EOG */
    CHECK(!df_token_is_eog(t, 'h'));
    CHECK_EQ_INT(df_tokenizer_eos(t), im_end);
    int32_t e = df_tokenizer_eot(t);
    CHECK(e == im_end || e == eot || e == end); /* auto-detected (hash order in llama.cpp) */
    CHECK_EQ_INT(df_token_attr(t, chan), DF_TATTR_USER_DEFINED); /* gpt-oss re-typing */
    /* user-defined tokens are matched even without parse_special; control ones are not */
    int32_t ids[64];
    const char *s = "<|channel|>hi<|im_end|>";
    int k = df_tokenize(t, s, strlen(s), false, false, ids, 64);
    CHECK(k > 2 && ids[0] == chan);
    CHECK(ids[k - 1] != im_end);
    k = df_tokenize(t, s, strlen(s), false, true, ids, 64);
    CHECK_EQ_INT(k, 4);
    CHECK(ids[0] == chan && ids[3] == im_end);
    CHECK_EQ_INT(df_token_lookup(t, "hi", 2), -1); /* "hi" is a merge result but not a token */
    /* "hi": merged symbol not in vocab -> per-byte fallback of its byte-level text */
    CHECK_EQ_INT(ids[1], 'h');
    CHECK_EQ_INT(ids[2], 'i');
    /* pieces: control tokens empty unless special; user-defined always */
    char buf[64];
    CHECK_EQ_INT(df_token_to_piece(t, im_end, false, buf, sizeof buf), 0);
    CHECK_EQ_INT(df_token_to_piece(t, im_end, true, buf, sizeof buf), 10);
    CHECK(!memcmp(buf, "<|im_end|>", 10));
    CHECK_EQ_INT(df_token_to_piece(t, end, false, buf, sizeof buf), 7);
    CHECK_EQ_INT(df_token_to_piece(t, im_end, true, buf, 3), 10); /* needed length */
    CHECK(df_token_to_piece(t, 100000, true, buf, 3) < 0);
    const int32_t *eogs;
    int ne = df_tokenizer_eog_ids(t, &eogs);
    CHECK_EQ_INT(ne, 6); /* im_end endoftext [EOS] return call [PAD] */
    df_tokenizer_free(t);
}

/* ---- SPM specifics ------------------------------------------------------------------------ */
static void test_spm(const char *path) {
    df_tokenizer *t = load_path(path);
    if (!t) { printf("  spm specifics skipped\n"); return; }
    int32_t ids[256];
    CHECK_EQ_INT(df_tokenizer_type(t), DF_TOK_SPM);
    CHECK_EQ_INT(df_tokenizer_bos(t), 1);
    CHECK_EQ_INT(df_tokenizer_eos(t), 2);
    CHECK(df_tokenizer_add_bos(t));
    CHECK(df_token_is_eog(t, 2));
    CHECK_EQ_INT(df_tokenizer_nl(t), 13); /* <0x0A> */
    CHECK(df_tokenizer_max_piece_len(t) >= 16 && df_tokenizer_max_piece_len(t) < 64);
    /* expected ids from llama-tokenize on ggml-vocab-llama-spm.gguf */
    const char *s = "<s>Hello</s> world";
    int n = df_tokenize(t, s, strlen(s), true, true, ids, 256);
    static const int32_t e1[] = {1, 1, 15043, 2, 29871, 3186};
    CHECK_EQ_INT(n, 6);
    CHECK(n == 6 && !memcmp(ids, e1, sizeof e1));
    n = df_tokenize(t, s, strlen(s), false, false, ids, 256);
    static const int32_t e2[] = {529, 29879, 29958, 10994, 829, 29879, 29958, 3186};
    CHECK_EQ_INT(n, 8);
    CHECK(n == 8 && !memcmp(ids, e2, sizeof e2));
    /* cap smaller than needed: returns the full count, writes a prefix */
    int32_t small[2] = {-7, -7};
    CHECK_EQ_INT(df_tokenize(t, s, strlen(s), false, false, small, 1), 8);
    CHECK(small[0] == 529 && small[1] == -7);
    int32_t *al = NULL;
    CHECK_EQ_INT(df_tokenize_alloc(t, s, strlen(s), false, false, &al), 8);
    CHECK(al && !memcmp(al, e2, sizeof e2));
    free(al);
    CHECK_EQ_INT(df_tokenize_alloc(t, "", 0, false, false, &al), 0);
    CHECK(al == NULL);
    CHECK_EQ_INT(df_tokenize(t, "", 0, true, false, ids, 256), 1); /* just BOS */
    CHECK_EQ_INT(df_tokenize(t, "", 0, false, false, ids, 256), 0);
    /* byte fallback + streaming: an emoji splits into 4 byte tokens */
    const char *emo = "\xF0\x9F\xA6\x99"; /* U+1F999 */
    n = df_tokenize(t, emo, 4, false, false, ids, 256);
    CHECK_EQ_INT(n, 5); /* ▁ + 4 bytes */
    df_detok d;
    df_detok_init(&d, false, true);
    char out[64];
    int tot = 0;
    for (int i = 0; i < n; i++) {
        int r = df_detok_push(&d, t, ids[i], out + tot, (int)sizeof out - tot);
        CHECK(r >= 0);
        if (i < n - 1) CHECK_EQ_INT(r, 0); /* nothing until the character completes */
        tot += r > 0 ? r : 0;
    }
    CHECK_EQ_INT(tot, 4);
    CHECK(!memcmp(out, emo, 4));
    CHECK_EQ_INT(df_detok_flush(&d, out, sizeof out), 0);
    /* invalid bytes -> U+FFFD, incomplete tail at flush -> U+FFFD */
    df_detok_init(&d, false, false);
    int32_t bff = df_token_lookup(t, "<0xFF>", 6), bf0 = df_token_lookup(t, "<0xF0>", 6);
    int32_t b41 = df_token_lookup(t, "<0x41>", 6);
    CHECK(bff >= 0 && bf0 >= 0 && b41 >= 0);
    int r = df_detok_push(&d, t, bff, out, sizeof out);
    CHECK(r == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    r = df_detok_push(&d, t, bf0, out, sizeof out);
    CHECK_EQ_INT(r, 0);
    r = df_detok_push(&d, t, b41, out, sizeof out); /* F0 then 'A': F0 is a bad subpart */
    CHECK(r == 4 && !memcmp(out, "\xEF\xBF\xBD" "A", 4));
    r = df_detok_push(&d, t, bf0, out, sizeof out);
    CHECK_EQ_INT(r, 0);
    r = df_detok_flush(&d, out, sizeof out);
    CHECK(r == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(df_detok_push(&d, t, -1, out, sizeof out) < 0);
    /* detokenize: leading space of the dummy prefix removed, BOS kept the space */
    n = df_tokenize(t, "Hello world", 11, false, false, ids, 256);
    char dbuf[64];
    int dl = df_detokenize(t, ids, n, false, false, dbuf, sizeof dbuf);
    CHECK(dl == 11 && !memcmp(dbuf, "Hello world", 11));
    n = df_tokenize(t, "Hello world", 11, true, false, ids, 256);
    dl = df_detokenize(t, ids, n, true, false, dbuf, sizeof dbuf);
    CHECK(dl == 12 && !memcmp(dbuf, " Hello world", 12));
    df_tokenizer_free(t);
}

/* ---- BPE specifics (gpt-2 vocab) ---------------------------------------------------------- */
typedef struct {
    char buf[4096];
    size_t n;
    int count;
} splitacc;

static void acc_piece(void *ud, const char *p, size_t n) {
    splitacc *a = ud;
    if (a->n + n + 1 < sizeof a->buf) {
        memcpy(a->buf + a->n, p, n);
        a->n += n;
        a->buf[a->n++] = '|';
    }
    a->count++;
}

static void test_bpe(const char *path) {
    df_tokenizer *t = load_path(path);
    if (!t) { printf("  bpe specifics skipped\n"); return; }
    int32_t ids[256];
    /* invalid UTF-8 becomes U+FFFD (llama.cpp); ids from llama-tokenize */
    const char *s = "\xff" "abc\xc3(";
    int n = df_tokenize(t, s, strlen(s), false, false, ids, 256);
    static const int32_t e[] = {4210, 39305, 4210, 7};
    CHECK_EQ_INT(n, 4);
    CHECK(n == 4 && !memcmp(ids, e, sizeof e));
    /* surrogates are kept as 3 bytes, overlong forms re-encoded (llama.cpp, via llama-tokenize) */
    const char *s2 = "a!\xed\xa0\x80!b x\xed\xa0\x80y \xc0\x80\xe0\x80\x80";
    static const int32_t e2[] = {64, 0, 169, 254, 222, 0, 65, 2124, 169, 254, 222, 88, 220, 188, 188};
    n = df_tokenize(t, s2, strlen(s2), false, false, ids, 256);
    CHECK_EQ_INT(n, 15);
    CHECK(n == 15 && !memcmp(ids, e2, sizeof e2));
    n = df_tokenize(t, s, strlen(s), false, false, ids, 256);
    /* the pieces decode to the sanitized text */
    char dbuf[64];
    int dl = df_detokenize(t, ids, n, false, false, dbuf, sizeof dbuf);
    CHECK(dl == 10 && !memcmp(dbuf, "\xEF\xBF\xBD" "abc\xEF\xBF\xBD(", 10));
    /* presplit */
    splitacc a = {0};
    int np = df_tokenizer_presplit(t, "Hello world's  123!!", 20, acc_piece, &a);
    CHECK_EQ_INT(np, 6);
    a.buf[a.n] = 0;
    CHECK_STR(a.buf, "Hello| world|'s| | 123|!!|");
    /* clean_spaces in df_detokenize (gpt-2: on) */
    n = df_tokenize(t, "Hi , there ' s it 's", 20, false, false, ids, 256);
    dl = df_detokenize(t, ids, n, false, false, dbuf, sizeof dbuf);
    dbuf[dl > 0 ? dl : 0] = 0;
    CHECK_STR(dbuf, "Hi, there's it's");
    /* huge input with no spaces: one big word */
    size_t big = 1 << 20;
    char *txt = malloc(big);
    for (size_t i = 0; i < big; i++) txt[i] = (char)('a' + (i * 7) % 26);
    n = df_tokenize(t, txt, big, false, false, NULL, 0);
    CHECK(n > 1000);
    free(txt);
    df_tokenizer_free(t);
}

/* `deltafin tokenize` contract (outside checks rely on it); runs when $DELTAFIN_BIN is set
 * (make test does). Expected ids from llama-tokenize. */
static void cli_expect(const char *bin, const char *args, const char *want) {
    char cmd[2048], got[4096] = {0};
    snprintf(cmd, sizeof cmd, "%s tokenize %s 2>/dev/null", bin, args);
    FILE *f = popen(cmd, "r");
    if (!f) { CHECK(f != NULL); return; }
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = 0;
    int st = pclose(f);
    CHECK_MSG(st == 0, "%s: exit status %d", cmd, st);
    CHECK_MSG(!strcmp(got, want), "%s: got \"%s\" want \"%s\"", cmd, got, want);
}

static void test_cli(const char *dir) {
    const char *bin = getenv("DELTAFIN_BIN");
    if (!bin || access(bin, X_OK)) { printf("  cli: skipped (DELTAFIN_BIN not set)\n"); return; }
    char a[2048];
    snprintf(a, sizeof a, "-m %s/ggml-vocab-gpt-2.gguf -p 'Hello world<|endoftext|>'", dir);
    cli_expect(bin, a, "15496 995 27 91 437 1659 5239 91 29\n");
    snprintf(a, sizeof a, "-m %s/ggml-vocab-gpt-2.gguf -p 'Hello world<|endoftext|>' --special --json", dir);
    cli_expect(bin, a, "[15496, 995, 50256]\n");
    snprintf(a, sizeof a, "-m %s/ggml-vocab-llama-spm.gguf -p 'Hello world' --bos", dir);
    cli_expect(bin, a, "1 15043 3186\n");
    snprintf(a, sizeof a, "-m %s/ggml-vocab-llama-spm.gguf -p 'Hello world'", dir);
    cli_expect(bin, a, "15043 3186\n");
    snprintf(a, sizeof a, "-m %s/ggml-vocab-llama-spm.gguf -f /dev/null --json", dir);
    cli_expect(bin, a, "[]\n");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s tokenize -m /nonexistent.gguf -p x >/dev/null 2>&1", bin);
    CHECK(system(cmd) != 0);
    printf("  cli: done\n");
}

int main(void) {
    df_init();
    df_log_set_level(DF_LOG_ERROR);
    char dir[1024], p[1200];
    df_fixture("vocab", dir, sizeof dir);
    printf("vocab fixtures (%s):\n", dir);
    static const char *const names[] = {"llama-spm", "phi-3", "gpt-2", "falcon", "deepseek-llm", "llama-bpe",
                                        "qwen2", "deepseek-coder", "mpt", "starcoder", "refact", "command-r",
                                        "qwen35", NULL};
    test_vocab_dir(dir, names);
    snprintf(p, sizeof p, "%s/ggml-vocab-gpt-2.gguf", dir);
    bool have_gpt2 = exists(p);
    CHECK_MSG(have_gpt2, "missing %s", p);
    /* llama.cpp's own models/ folder has a few more vocabs (not shipped with deltafin) */
    const char *lm = getenv("DELTAFIN_LLAMA_MODELS");
    if (!lm) lm = "../llama.cpp/models";
    if (exists(lm)) {
        printf("llama.cpp vocab files (%s):\n", lm);
        static const char *const more[] = {"deepseek-coder", "mpt", "starcoder", "refact", NULL};
        test_vocab_dir(lm, more);
    }
    if (have_gpt2) {
        printf("pre-tokenizers on the gpt-2 vocab (expected ids from llama-tokenize):\n");
        test_derived(p);
        test_bpe(p);
    }
    snprintf(p, sizeof p, "%s/ggml-vocab-llama-spm.gguf", dir);
    test_spm(p);
    test_eog();
    test_cli(dir);
    TEST_MAIN_END("test_tokenizer");
}
