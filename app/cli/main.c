/* main.c — the `deltafin` command: dispatches to one function per subcommand.
 * Subcommands live in app/cli/<name>.c (dev tools in dev/) and define
 * `int cmd_<name>(int argc, char **argv)` (argv[0] is the subcommand name). The references
 * are strong: a missing subcommand is a link error, not a runtime surprise. */
#include "base/util.h"
#include "deltafin.h"
#include "app/cli/dist.h"

#include <stdio.h>
#include <string.h>

#define CMDS(X)                                                                          \
    X(run, "generate text from a prompt")                                               \
    X(chat, "interactive multi-turn chat in the terminal")                              \
    X(serve, "OpenAI-compatible HTTP server")                                           \
    X(bench, "measure prompt/generation speed (and `bench kernels`)")                   \
    X(perplexity, "perplexity of a text file, computed like llama-perplexity")          \
    X(info, "print model metadata, tensors and the memory plan")                        \
    X(tokenize, "print the token ids of a text")                                        \
    X(quantize, "convert a GGUF to another tensor type")                                \
    X(convert_llama2c, "import a llama2.c checkpoint as GGUF")                          \
    X(pack, "rewrite a model into the expert-major streaming layout")                   \
    X(profile, "record expert routing counts over a prompt file")                       \
    X(verify, "check a model against its checksums")                                    \
    X(doctor, "measure this machine and recommend settings")                            \
    X(pull, "download a model with resume and SHA-256 check")                           \
    X(gen_random, "write a random test model (for tests and benchmarks)")

#define DECL(name, help) int cmd_##name(int argc, char **argv);
CMDS(DECL)
#undef DECL

struct cmd { const char *name; int (*fn)(int, char **); const char *help; };
#define ROW(name, help) {#name, cmd_##name, help},
static const struct cmd g_cmds[] = {CMDS(ROW)};
#undef ROW

static void cmd_name(const char *in, char *out, size_t cap) {
    snprintf(out, cap, "%s", in);
    for (char *p = out; *p; p++) if (*p == '-') *p = '_';
}

static void usage(FILE *f) {
    fprintf(f, "deltafin %s — run Mixture-of-Experts models larger than RAM\n\n"
               "usage: deltafin <command> [options]   (deltafin <command> --help)\n\ncommands:\n",
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
    if (!strcmp(argv[1], "--version")) {
        printf("deltafin %s\n", DELTAFIN_VERSION);
        if (deltafin_dist_built()) printf("built with MPI: experts across processes (docs/distributed.md)\n");
        return 0;
    }
    char name[64];
    cmd_name(argv[1], name, sizeof name);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) {
        if (strcmp(g_cmds[i].name, name)) continue;
        int ac = argc - 1;
        int w = df_cli_dist_start(&ac, argv + 1); /* under mpirun: ranks > 0 serve experts */
        if (w >= 0) return w;
        return df_cli_dist_end(g_cmds[i].fn(ac, argv + 1));
    }
    fprintf(stderr, "deltafin: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
