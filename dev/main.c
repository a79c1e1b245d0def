/* main.c — `deltafin-dev`: the developer tools, a binary of their own so the user's CLI
 * (`deltafin`) carries none of them: random test models with the exact tensors an architecture's
 * schema declares (gen-random) and the llama2.c checkpoint import (convert-llama2c), used by the
 * tests, the recording scripts and the benchmarks. Each command is
 * `int cmd_<name>(int argc, char **argv)` (argv[0] is the command name) in dev/. */
#include "base/util.h"
#include "deltafin.h"

#include <stdio.h>
#include <string.h>

#define DEV_CMDS(X)                                                                      \
    X(gen_random, "write a random test model (for tests and benchmarks)")               \
    X(convert_llama2c, "import a llama2.c checkpoint as GGUF")                       \
    X(replay_trace, "replay a routing trace through cache policies and Belady's optimum")  \
    X(gen_imatrix, "write a synthetic importance matrix for a model (quantize tests)")      \
    X(imatrix_dump, "print an importance matrix's entries (name, counts, values)")          \
    X(imatrix_diff, "compare an importance matrix with a dump within a tolerance")

#define DECL(name, help) int cmd_##name(int argc, char **argv);
DEV_CMDS(DECL)
#undef DECL

struct dev_cmd { const char *name; int (*fn)(int, char **); const char *help; };
#define ROW(name, help) {#name, cmd_##name, help},
static const struct dev_cmd g_cmds[] = {DEV_CMDS(ROW)};
#undef ROW

static void usage(FILE *f) {
    fprintf(f, "deltafin-dev %s — developer tools for deltafin (tests, benchmarks)\n\n"
               "usage: deltafin-dev <command> [options]   (deltafin-dev <command> --help)\n\ncommands:\n",
            DELTAFIN_VERSION);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s", g_cmds[i].name);
        for (char *p = name; *p; p++) if (*p == '_') *p = '-';
        fprintf(f, "  %-16s %s\n", name, g_cmds[i].help);
    }
}

int main(int argc, char **argv) {
    df_init();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    char name[64];
    snprintf(name, sizeof name, "%s", argv[1]);
    for (char *p = name; *p; p++) if (*p == '-') *p = '_';
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(g_cmds[i].name, name)) return g_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "deltafin-dev: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
