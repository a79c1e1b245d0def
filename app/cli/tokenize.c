/* tokenize.c — `deltafin tokenize`: print the token ids of a text. Loads only the tokenizer
 * KVs of the GGUF (vocab-only files work; no tensor data is read). */
#include "app/cli/flags.h"
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

static const df_cmd k_tokenize = {
    DF_CMD_TOKENIZE, "tokenize", "usage: deltafin tokenize -m MODEL (-p TEXT | -f FILE) [options]",
    "Print the token ids of TEXT, one line, space separated. Only the tokenizer keys of the GGUF are\n"
    "read (a vocab-only GGUF is enough).", NULL, 0};

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
    df_settings S;
    int prc = df_cli_parse(&k_tokenize, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = S.model, *prompt = S.prompt, *file = S.file, *pre = S.pre;
    const bool special = S.special, bos = S.bos, json = S.json, pieces = S.pieces, count = S.count;
    const bool timing = S.timing;
    if (!model || (!prompt == !file)) {
        fprintf(stderr, "tokenize: need -m MODEL and exactly one of -p TEXT / -f FILE\n\n");
        df_cli_help(&k_tokenize, stderr);
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
