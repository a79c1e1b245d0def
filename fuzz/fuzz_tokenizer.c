/* fuzz_tokenizer.c — libFuzzer target for the tokenizers (df_tokenize, pieces, detokenize,
 * streaming detokenizer) on arbitrary bytes: invalid UTF-8, long inputs, special-token
 * look-alikes. Vocabularies are loaded once: the SPM fixture and the GPT-2 BPE fixture under
 * several pre-tokenizers (tokenizer.ggml.pre overridden). Location: $DELTAFIN_FIXTURES/vocab
 * (default ../shared/fixtures/vocab, relative to the repository root).
 * Input: byte 0 selects vocabulary and flags, the rest is the text.
 * Properties: no crash; the count is the same with and without an output buffer; streamed
 * output is valid UTF-8; valid UTF-8 text round-trips through tokens (parse_special off). */
#include "format/gguf.h"
#include "base/utf8.h"
#include "text/tokenizer.h"

static const char *k_pres[] = {"gpt-2", "llama-bpe", "qwen2", "deepseek-v3", "kimi-k2", "gpt-4o",
                               "deepseek-llm", "qwen35", "falcon", "default"};
#define N_BPE (int)(sizeof k_pres / sizeof k_pres[0])
static df_tokenizer *g_tok[N_BPE + 1];
static int g_ntok;

static df_tokenizer *load(const char *path, const char *pre) {
    df_gguf *g = NULL;
    if (df_gguf_open(path, &g)) return NULL;
    df_tokenizer *t = NULL;
    df_tokenizer_opts o = {.pre_override = pre, .quiet = true};
    if (df_tokenizer_load_ex(g, &o, &t)) t = NULL;
    df_gguf_close(g);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    df_init();
    df_log_set_level(DF_LOG_ERROR);
    const char *root = getenv("DELTAFIN_FIXTURES");
    char p[1024];
    snprintf(p, sizeof p, "%s/vocab/ggml-vocab-llama-spm.gguf", root ? root : "../shared/fixtures");
    if ((g_tok[g_ntok] = load(p, NULL))) g_ntok++;
    snprintf(p, sizeof p, "%s/vocab/ggml-vocab-gpt-2.gguf", root ? root : "../shared/fixtures");
    for (int i = 0; i < N_BPE; i++)
        if ((g_tok[g_ntok] = load(p, k_pres[i]))) g_ntok++;
    if (!g_ntok) fprintf(stderr, "fuzz_tokenizer: no vocabulary found (set DELTAFIN_FIXTURES)\n");
    return 0;
}

static int32_t g_ids[1 << 18];
static char g_out[1 << 22];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_ntok || size < 1) return 0;
    uint8_t sel = data[0];
    const df_tokenizer *t = g_tok[(sel & 0x0f) % g_ntok];
    bool add_special = sel & 0x10, parse_special = sel & 0x20;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int n0 = df_tokenize(t, text, len, add_special, parse_special, NULL, 0);
    DF_ASSERT(n0 >= 0);
    int n = df_tokenize(t, text, len, add_special, parse_special, g_ids, (int)(sizeof g_ids / sizeof g_ids[0]));
    DF_ASSERT(n == n0);
    if (n > (int)(sizeof g_ids / sizeof g_ids[0])) return 0;
    int nv = df_tokenizer_n_vocab(t);
    for (int i = 0; i < n; i++) DF_ASSERT(g_ids[i] >= 0 && g_ids[i] < nv);

    /* streaming detokenizer: always valid UTF-8 */
    df_detok d;
    df_detok_init(&d, (sel & 0x40) != 0, df_tokenizer_add_space_prefix(t));
    size_t o = 0;
    for (int i = 0; i <= n; i++) {
        int cap = (int)(sizeof g_out - o);
        if (cap < 1 << 16) break;
        int r = i < n ? df_detok_push(&d, t, g_ids[i], g_out + o, cap) : df_detok_flush(&d, g_out + o, cap);
        DF_ASSERT(r >= 0);
        o += (size_t)r;
    }
    bool more;
    DF_ASSERT(df_utf8_valid_prefix(g_out, o, &more) == o);

    /* round trip: valid UTF-8 text, plain tokenization (pieces, not df_detokenize, whose
     * clean_spaces rules are lossy by design) */
    int dl = df_detokenize(t, g_ids, n, false, false, NULL, 0);
    DF_ASSERT(dl >= 0);
    if (!parse_special && !add_special && (size_t)dl < sizeof g_out &&
        df_utf8_valid_prefix(text, len, &more) == len) {
        bool spm = df_tokenizer_type(t) == DF_TOK_SPM;
        bool has_lb = memmem(text, len, "\xE2\x96\x81", 3) != NULL; /* U+2581 decodes to ' ' (SPM) */
        if (!(spm && has_lb)) {
            size_t m = 0;
            int lstrip = df_tokenizer_add_space_prefix(t) ? 1 : 0;
            for (int i = 0; i < n; i++) {
                int r = df_token_to_piece_ex(t, g_ids[i], false, i == 0 ? lstrip : 0, g_out + m,
                                             (int)(sizeof g_out - m));
                DF_ASSERT(r >= 0 && (size_t)r <= sizeof g_out - m);
                m += (size_t)r;
            }
            if (m != len || memcmp(g_out, text, len)) {
                fprintf(stderr, "round trip failed (%s, %zu bytes -> %zu)\n", df_tokenizer_pre(t), len, m);
                DF_ASSERT(0);
            }
        }
    }
    return 0;
}
