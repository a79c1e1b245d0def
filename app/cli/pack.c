/* pack.c — `deltafin pack`: rewrite a GGUF into the expert-major streaming layout
 * (docs/pack-format.md), or check a packed file's record checksums. */
#include "app/cli/flags.h"
#include "deltafin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const df_cmd k_pack = {
    DF_CMD_PACK, "pack", "usage: deltafin pack [options] MODEL.gguf OUT.gguf\n       deltafin pack --check PACKED.gguf",
    "Rewrite a model so that each (layer, expert) is one contiguous 4 KiB-aligned record\n"
    "(gate|up|down) with an XXH64 checksum; dense tensors and metadata are kept as they are.\n"
    "The output is written to OUT.gguf.tmp and renamed when complete.", NULL, 2};

int cmd_pack(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_pack, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *in = S.n_pos > 0 ? S.pos[0] : NULL, *out = S.n_pos > 1 ? S.pos[1] : NULL;
    const bool check = S.check, force = S.force, quiet = S.quiet;
    if (check) {
        if (!in || out) return df_cli_usage_error(&k_pack, "--check takes one file");
        uint64_t n = 0;
        int rc = deltafin_pack_check(in, &n);
        if (rc) fprintf(stderr, "pack: %s\n", deltafin_errmsg());
        else printf("%s: %llu expert records, all checksums match\n", in, (unsigned long long)n);
        return rc ? 1 : 0;
    }
    if (!in || !out) return df_cli_usage_error(&k_pack, "MODEL.gguf and OUT.gguf are required");
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
