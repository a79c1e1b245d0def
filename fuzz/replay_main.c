/* replay_main.c — runs a libFuzzer target without libFuzzer (gcc, no clang needed).
 * Convention for every fuzz target: fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput();
 * its corpus lives in fuzz/corpus/<name>/ (small, minimized with -merge=1, < 2 MB).
 * tests/fuzz_replay.sh compiles each fuzz/fuzz_*.c together with this file against
 * $DELTAFIN_BUILD/libdeltafin.a and runs it over its corpus, so `make test` replays every
 * committed corpus. Usage: replay FILE_OR_DIR... (directories: every regular file inside).
 * Exit status 0 when every input ran to completion (a crash aborts the process). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 1; }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) { fclose(f); return 1; }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    fclose(f);
    /* exact-size copy so ASan catches reads past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return 1; }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int files = 0, fails = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: not found\n", argv[i]);
            fails++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) { fails += run_file(argv[i]); files++; continue; }
        DIR *d = opendir(argv[i]);
        if (!d) { fails++; continue; }
        struct dirent *e;
        while ((e = readdir(d))) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            if (stat(p, &st) < 0 || !S_ISREG(st.st_mode)) continue;
            fails += run_file(p);
            files++;
        }
        closedir(d);
    }
    printf("replay: %d inputs, %d unreadable\n", files, fails);
    return fails ? 1 : 0;
}
