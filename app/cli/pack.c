/* pack.c — `deltafin pack`: rewrite a GGUF into the expert-major streaming layout
 * (docs/pack-format.md), or check a packed file's record checksums. */
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin pack [options] MODEL.gguf OUT.gguf\n"
        "       deltafin pack --check PACKED.gguf\n\n"
        "Rewrite a model so that each (layer, expert) is one contiguous 4 KiB-aligned record\n"
        "(gate|up|down) with an XXH64 checksum; dense tensors and metadata are kept as they are.\n"
        "The output is written to OUT.gguf.tmp and renamed when complete.\n\n"
        "  --check           read every record of a packed file and verify its checksum\n"
        "  -f, --force       overwrite OUT if it exists (default: refuse)\n"
        "  -q, --quiet       no progress output (default: a bar on a terminal, else a line\n"
        "                    every 5 s)\n"
        "  -h, --help        this help\n");
}

int cmd_pack(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    bool check = false, force = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--check")) check = true;
        else if (!strcmp(a, "-f") || !strcmp(a, "--force")) force = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else if (a[0] == '-' && a[1]) { fprintf(stderr, "pack: unknown option '%s'\n", a); usage(stderr); return 2; }
        else if (!in) in = a;
        else if (!out) out = a;
        else { fprintf(stderr, "pack: too many arguments\n"); usage(stderr); return 2; }
    }
    if (check) {
        if (!in || out) { usage(stderr); return 2; }
        uint64_t n = 0;
        int rc = deltafin_pack_check(in, &n);
        if (rc) fprintf(stderr, "pack: %s\n", deltafin_errmsg());
        else printf("%s: %llu expert records, all checksums match\n", in, (unsigned long long)n);
        return rc ? 1 : 0;
    }
    if (!in || !out) { usage(stderr); return 2; }
    if (!force && access(out, F_OK) == 0) {
        fprintf(stderr, "pack: %s exists (use --force to overwrite)\n", out);
        return 1;
    }
    deltafin_pack_params o = {0};
    if (!quiet) o.progress = isatty(2) ? DELTAFIN_PROGRESS_BAR : DELTAFIN_PROGRESS_LINES;
    const char *fa = getenv("DELTAFIN_PACK_FAIL_AFTER"); /* tests: an interrupted pack */
    if (fa) o.fail_after = strtoull(fa, NULL, 10);
    int rc = deltafin_pack(in, out, &o);
    if (rc) { fprintf(stderr, "pack: %s\n", deltafin_errmsg()); return 1; }
    fprintf(stderr, "pack: wrote %s\n", out);
    return 0;
}
