/* verify.c — `deltafin verify MODEL`: check a model (or every part of a split model) against
 * MODEL.sha256 (sha256sum format) and, for packed models, every expert record's XXH64.
 * Reports every problem found (not only the first) and what to fetch again. */
#include "app/download.h"
#include "format/gguf.h"
#include "format/pack.h"
#include "base/hash.h"
#include "app/progress.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin verify [options] MODEL.gguf\n"
        "\n"
        "Check a model against its checksums and report exactly what is missing or corrupt:\n"
        "  - MODEL.sha256 (sha256sum format, written by `deltafin pull`; for a split model the\n"
        "    manifest of part 1 lists every part): each listed file must exist and match;\n"
        "  - a split model (…-00001-of-0000N.gguf): every part must be present;\n"
        "  - a packed model (`deltafin pack`): every (layer, expert) record's XXH64.\n"
        "Exit status: 0 all checks passed, 1 problems found, 3 nothing to check against\n"
        "(no manifest and not packed; the GGUF structure was still validated).\n"
        "\n"
        "  --sha256-file FILE  manifest to use instead of MODEL.sha256\n"
        "  --no-sha256         skip the SHA-256 manifest (packed records only: much faster)\n"
        "  --list              packed models: print \"layer expert offset bytes\" for every record\n"
        "  -q, --quiet         no progress output\n"
        "  -h, --help          this help\n");
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

typedef struct {
    const char *mpath, *dir;
    df_download_opts o;
    int bad, n_checked;
} manifest_check;

static int check_entry(void *ud, const char *want, const char *name) {
    manifest_check *m = ud;
    char path[8192], got[65];
    if (name[0] == '/') snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%s/%s", m->dir, name);
    if (!exists(path)) {
        printf("MISSING  %s  (listed in %s; download it again)\n", path, m->mpath);
        m->bad++;
    } else if (df_sha256_file(path, got, &m->o) < 0) {
        printf("UNREADABLE  %s: %s\n", path, df_errmsg());
        m->bad++;
    } else if (strcasecmp(got, want)) {
        printf("CORRUPT  %s  SHA-256 %s, expected %.64s (download it again)\n", path, got, want);
        m->bad++;
    } else {
        printf("ok       %s  SHA-256 matches\n", path);
        m->n_checked++;
    }
    return 0;
}

/* Checks every line of the manifest; returns the number of bad files (or < 0 on a bad manifest). */
static int check_manifest(const char *mpath, int progress, int *n_checked) {
    char dirbuf[8300];
    snprintf(dirbuf, sizeof dirbuf, "%s", mpath);
    manifest_check m = {mpath, dirname(dirbuf), df_download_default_opts(), 0, 0};
    m.o.progress = progress;
    int rc = df_sha256_manifest_each(mpath, check_entry, &m);
    *n_checked += m.n_checked;
    return rc < 0 ? rc : m.bad;
}

/* Every record of a packed model; prints each bad (layer, expert). Returns bad count or < 0. */
static bool g_list;
static int check_pack(const df_gguf *g, int progress, uint64_t *n_checked) {
    df_pack *p = NULL;
    int rc = df_pack_open(g, &p);
    if (rc < 0) return rc;
    const int L = df_pack_n_layers(p), E = df_pack_n_experts(p);
    uint64_t n = (uint64_t)L * (uint64_t)E, nloc;
    df_expert_loc *locs = NULL;
    df_expert_record *rec = NULL;
    if (!df_mul_ok(n, 3, &nloc) || !(locs = df_calloc(nloc ? nloc : 1, sizeof *locs)) ||
        !(rec = df_calloc(n ? n : 1, sizeof *rec))) {
        free(locs);
        df_pack_close(p);
        return DF_ERR_NOMEM;
    }
    rc = df_pack_locs(p, locs, rec);
    uint64_t maxr = 0, total = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (rec[k].nbytes > maxr) maxr = rec[k].nbytes;
        total += rec[k].nbytes;
    }
    uint8_t *buf = rc ? NULL : df_malloc(maxr ? maxr : 1);
    if (!rc && !buf) rc = DF_ERR_NOMEM;
    int bad = 0;
    df_progress pr;
    df_progress_init(&pr, stderr, progress, "experts", total, 0);
    uint64_t done = 0;
    for (uint64_t k = 0; k < n && !rc; k++) {
        const df_expert_record *r = &rec[k];
        if (!r->nbytes) continue;
        const int layer = (int)(k / (uint64_t)E), expert = (int)(k % (uint64_t)E);
        const char *path = g->shards[r->file].path;
        if (g_list) printf("record %d %d %llu %llu\n", layer, expert, (unsigned long long)r->offset,
                           (unsigned long long)r->nbytes);
        ssize_t got = pread(g->shards[r->file].fd, buf, r->nbytes, (off_t)r->offset);
        if (got != (ssize_t)r->nbytes) {
            printf("UNREADABLE  layer %d expert %d: %s at offset %llu (%llu bytes): %s\n", layer, expert, path,
                   (unsigned long long)r->offset, (unsigned long long)r->nbytes,
                   got < 0 ? strerror(errno) : "short read (file truncated?)");
            bad++;
        } else {
            uint64_t h = df_xxh64(buf, r->nbytes, 0);
            if (h != r->xxh64) {
                printf("CORRUPT  layer %d expert %d: %s bytes %llu..%llu, xxh64 %016llx expected %016llx\n", layer,
                       expert, path, (unsigned long long)r->offset, (unsigned long long)(r->offset + r->nbytes - 1),
                       (unsigned long long)h, (unsigned long long)r->xxh64);
                bad++;
            } else (*n_checked)++;
        }
        done += r->nbytes;
        df_progress_update(&pr, done);
    }
    if (!rc && total > (256u << 20)) df_progress_finish(&pr);
    free(buf);
    free(rec);
    free(locs);
    df_pack_close(p);
    return rc < 0 ? rc : bad;
}

int cmd_verify(int argc, char **argv) {
    const char *model = NULL, *manifest = NULL;
    bool no_sha = false;
    int progress = DF_PROGRESS_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--sha256-file") && i + 1 < argc) manifest = argv[++i];
        else if (!strcmp(a, "--no-sha256")) no_sha = true;
        else if (!strcmp(a, "--list")) g_list = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) progress = DF_PROGRESS_QUIET;
        else if (a[0] != '-' && !model) model = a;
        else { fprintf(stderr, "verify: unknown or incomplete option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!model) { fprintf(stderr, "verify: MODEL is required\n"); usage(stderr); return 2; }
    int bad = 0, checks = 0;
    char mbuf[8300];
    if (!manifest) {
        snprintf(mbuf, sizeof mbuf, "%s.sha256", model);
        if (exists(mbuf)) manifest = mbuf;
    }
    /* 1. split set: every part present */
    int k = 0, n = 0;
    if (df_split_name(model, &k, &n, NULL)) {
        for (int i = 1; i <= n; i++) {
            char *pp = df_split_name_part(model, i);
            if (pp && !exists(pp)) {
                printf("MISSING  %s  (part %d of %d; download it again)\n", pp, i, n);
                bad++;
            }
            free(pp);
        }
        checks++;
    } else if (!exists(model)) {
        printf("MISSING  %s\n", model);
        return 1;
    }
    /* 2. SHA-256 manifest */
    if (manifest && !no_sha) {
        int nc = 0;
        int r = check_manifest(manifest, progress, &nc);
        if (r < 0) {
            if (df_errmsg()[0]) fprintf(stderr, "verify: %s\n", df_errmsg());
            return 2;
        }
        bad += r;
        checks++;
    }
    /* 3. GGUF structure and, for packed models, every expert record */
    bool packed = false;
    if (bad == 0 || !df_split_name(model, NULL, NULL, NULL)) {
        df_gguf *g = NULL;
        int rc = df_gguf_open(model, &g);
        if (rc < 0) {
            printf("CORRUPT  %s: %s (the file's header or tensor table is damaged: download it again)\n", model,
                   df_errmsg());
            bad++;
        } else {
            packed = df_pack_is_packed(g);
            if (packed) {
                uint64_t nc = 0;
                int r = check_pack(g, progress, &nc);
                if (r < 0) {
                    printf("CORRUPT  %s: expert index: %s (re-pack or download it again)\n", model, df_errmsg());
                    bad++;
                } else {
                    if (r > 0)
                        printf("%d of %llu expert records are corrupt: re-run `deltafin pack` from the source model "
                               "or download %s again\n", r, (unsigned long long)(nc + (uint64_t)r), model);
                    else
                        printf("ok       %s: %llu expert records, checksums match\n", model, (unsigned long long)nc);
                    bad += r;
                }
                checks++;
            }
            df_gguf_close(g);
        }
    }
    if (bad) {
        printf("verify: %d problem%s found\n", bad, bad == 1 ? "" : "s");
        return 1;
    }
    if (!checks || (!manifest && !packed)) {
        printf("verify: %s: GGUF structure ok, but there is nothing to check its bytes against (no %s.sha256, "
               "not a packed model)\n", model, model);
        return 3;
    }
    printf("verify: ok\n");
    return 0;
}
