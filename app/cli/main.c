/* main.c — the `deltafin` command: dispatches to one function per subcommand.
 * Subcommands live in app/cli/<name>.c (dev tools in dev/) and define
 * `int cmd_<name>(int argc, char **argv)` (argv[0] is the subcommand name). The references
 * are strong: a missing subcommand is a link error, not a runtime surprise. */
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
    X(pack, "rewrite a model into the expert-major streaming layout")                   \
    X(profile, "record expert routing counts over a prompt file")                       \
    X(verify, "check a model against its checksums")                                    \
    X(doctor, "measure this machine and recommend settings")                            \
    X(pull, "download a model with resume and SHA-256 check")

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
               "usage: deltafin <command> [options]   (deltafin help <command>, deltafin <command> --help)\n"
               "       deltafin --version\n\ncommands:\n",
            DELTAFIN_VERSION);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s", g_cmds[i].name);
        for (char *p = name; *p; p++) if (*p == '_') *p = '-';
        fprintf(f, "  %-16s %s\n", name, g_cmds[i].help);
    }
}

static const struct cmd *find_cmd(const char *typed) {
    char name[64];
    cmd_name(typed, name, sizeof name);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(g_cmds[i].name, name)) return &g_cmds[i];
    return NULL;
}

/* `deltafin help CMD [SUB]`: the command's own --help (so every command, the dev tools too,
 * answers from the same text) */
static int help(int argc, char **argv) {
    if (argc < 3) { usage(stdout); return 0; }
    const struct cmd *c = find_cmd(argv[2]);
    if (!c) {
        fprintf(stderr, "deltafin: unknown command '%s'\n\n", argv[2]);
        usage(stderr);
        return 2;
    }
    char *args[4] = {argv[2], NULL, NULL, NULL};
    int n = 1;
    if (argc > 3) args[n++] = argv[3]; /* help bench kernels */
    args[n++] = "--help";
    return c->fn(n, args);
}

int main(int argc, char **argv) {
    deltafin_init();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "help")) return help(argc, argv);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("deltafin %s (commit %s)\n", DELTAFIN_VERSION, deltafin_commit());
        printf("kernels: %s (this CPU; DELTAFIN_ISA chooses another)\n", deltafin_kernel_isa());
        if (deltafin_dist_built()) printf("built with MPI: experts across processes (docs/distributed.md)\n");
        return 0;
    }
    const struct cmd *c = find_cmd(argv[1]);
    if (c) {
        int ac = argc - 1;
        int w = df_cli_dist_start(&ac, argv + 1); /* under mpirun: ranks > 0 serve experts */
        if (w >= 0) return w;
        return df_cli_dist_end(c->fn(ac, argv + 1));
    }
    fprintf(stderr, "deltafin: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
