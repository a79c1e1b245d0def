/* tokenize.c — `deltafin tokenize`: print the token ids of a text. Loads only the tokenizer
 * KVs of the GGUF (vocab-only files work; no tensor data is read). */
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void help(FILE *f) {
    fprintf(f,
            "usage: deltafin tokenize -m MODEL (-p TEXT | -f FILE) [options]\n"
            "Print the token ids of TEXT, one line, space separated.\n\n"
            "  -m, --model PATH   GGUF file (a vocab-only GGUF is enough)\n"
            "  -p, --prompt TEXT  text to tokenize\n"
            "  -f, --file PATH    read the text from a file (bytes as they are)\n"
            "      --special      parse special-token text such as <|im_start|> (default: off,\n"
            "                     special-token text is tokenized as plain text)\n"
            "      --bos          add BOS/EOS as the model's add_bos/add_eos flags say (default: off)\n"
            "      --json         print a JSON array of ids instead\n"
            "      --pieces       print one line per token: id<TAB>piece (piece JSON-escaped)\n"
            "      --count        print only the number of tokens\n"
            "      --pre NAME     override tokenizer.ggml.pre (testing)\n"
            "      --time         print tokenizer speed (MB/s) to stderr\n"
            "  -h, --help         this help\n");
}

static void json_str(FILE *f, const char *s, int n) {
    fputc('"', f);
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL, *pre = NULL;
    bool special = false, bos = false, json = false, pieces = false, count = false, timing = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { help(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_next) model = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && has_next) prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && has_next) file = argv[++i];
        else if (!strcmp(a, "--pre") && has_next) pre = argv[++i];
        else if (!strcmp(a, "--special")) special = true;
        else if (!strcmp(a, "--bos")) bos = true;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else if (!strcmp(a, "--count")) count = true;
        else if (!strcmp(a, "--time")) timing = true;
        else {
            fprintf(stderr, "tokenize: unknown or incomplete option '%s'\n\n", a);
            help(stderr);
            return 2;
        }
    }
    if (!model || (!prompt == !file)) {
        fprintf(stderr, "tokenize: need -m MODEL and exactly one of -p TEXT / -f FILE\n\n");
        help(stderr);
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (file) {
        int rc = deltafin_read_file(file, &text, &len);
        if (rc) { fprintf(stderr, "tokenize: %s\n", deltafin_errmsg()); return 1; }
    } else {
        len = strlen(prompt);
    }
    const char *txt = file ? text : prompt;

    deltafin_vocab *t = NULL;
    int rc = deltafin_vocab_load(model, pre, &t);
    if (rc) { fprintf(stderr, "tokenize: %s\n", deltafin_errmsg()); free(text); return 1; }

    uint64_t t0 = deltafin_time_ns();
    double c0 = cpu_s();
    int32_t *ids = NULL;
    int n = deltafin_vocab_tokenize_alloc(t, txt, len, bos, special, &ids);
    double c1 = cpu_s();
    uint64_t t1 = deltafin_time_ns();
    if (n < 0) {
        fprintf(stderr, "tokenize: %s\n", deltafin_errmsg());
        free(ids); deltafin_vocab_free(t); free(text);
        return 1;
    }
    if (timing) { /* wall and CPU time of the tokenize call (one core) */
        double s = (double)(t1 - t0) / 1e9, c = c1 - c0;
        fprintf(stderr, "tokenize: %zu bytes -> %d tokens: %.3f s wall (%.2f MB/s), %.3f s CPU (%.2f MB/s)\n",
                len, n, s, s > 0 ? (double)len / 1e6 / s : 0.0, c, c > 0 ? (double)len / 1e6 / c : 0.0);
    }
    if (count) printf("%d\n", n);
    else if (pieces) {
        char *buf = NULL;
        int cap = 0;
        for (int i = 0; i < n; i++) {
            int l = deltafin_vocab_token_to_piece(t, ids[i], true, buf, cap);
            if (l > cap) {
                cap = l + 64;
                char *p = realloc(buf, (size_t)cap);
                if (!p) break;
                buf = p;
                l = deltafin_vocab_token_to_piece(t, ids[i], true, buf, cap);
            }
            printf("%d\t", ids[i]);
            json_str(stdout, buf ? buf : "", l < 0 ? 0 : l);
            putchar('\n');
        }
        free(buf);
    } else if (json) {
        putchar('[');
        for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        puts("]");
    } else {
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    free(ids);
    deltafin_vocab_free(t);
    free(text);
    return 0;
}
