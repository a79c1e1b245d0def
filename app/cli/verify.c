/* verify.c — `deltafin verify MODEL`: check a model (or every part of a split model) against
 * MODEL.sha256 (sha256sum format) and, for packed models, every expert record's XXH64.
 * Reports every problem found (not only the first) and what to fetch again. */
#include "app/cli/flags.h"
#include "app/download.h"
#include "app/progress.h"
#include "deltafin.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const df_cmd k_verify = {
    DF_CMD_VERIFY, "verify", "usage: deltafin verify [options] MODEL.gguf",
    "Check a model against its checksums and report exactly what is missing or corrupt:\n"
    "  - MODEL.sha256 (sha256sum format, written by `deltafin pull`; for a split model the\n"
    "    manifest of part 1 lists every part): each listed file must exist and match;\n"
    "  - a split model (...-00001-of-0000N.gguf): every part must be present;\n"
    "  - a packed model (`deltafin pack`): every (layer, expert) record's XXH64.\n"
    "Exit status: 0 all checks passed, 1 problems found, 3 nothing to check against\n"
    "(no manifest and not packed; the GGUF structure was still validated).", NULL, 1};

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
        printf("UNREADABLE  %s: %s\n", path, deltafin_errmsg());
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

/* Every record of a packed model; prints each bad (layer, expert). */
typedef struct {
    int progress;
    bool list, started;
    df_progress pr;
} pack_check;

static int on_record(void *ud, const deltafin_pack_record *r) {
    pack_check *pc = ud;
    if (!pc->started) {
        df_progress_init(&pc->pr, stderr, pc->progress, "experts", r->total, 0);
        pc->started = true;
    }
    if (pc->list) printf("record %d %d %llu %llu\n", r->layer, r->expert, (unsigned long long)r->offset,
                         (unsigned long long)r->nbytes);
    if (r->status == DELTAFIN_ERR_IO)
        printf("UNREADABLE  layer %d expert %d: %s at offset %llu (%llu bytes): %s\n", r->layer, r->expert, r->path,
               (unsigned long long)r->offset, (unsigned long long)r->nbytes, r->error);
    else if (r->status)
        printf("CORRUPT  layer %d expert %d: %s bytes %llu..%llu, xxh64 %016llx expected %016llx\n", r->layer,
               r->expert, r->path, (unsigned long long)r->offset, (unsigned long long)(r->offset + r->nbytes - 1),
               (unsigned long long)r->xxh64, (unsigned long long)r->xxh64_expected);
    df_progress_update(&pc->pr, r->done);
    return 0;
}

/* Returns the number of bad records, or < 0 when the pack index is unusable. */
static int check_pack(const char *model, int progress, bool list, uint64_t *n_checked) {
    pack_check pc = {.progress = progress, .list = list};
    uint64_t bad = 0;
    int rc = deltafin_pack_verify(model, on_record, &pc, n_checked, &bad);
    if (rc < 0) return rc;
    if (pc.started && pc.pr.total > (256u << 20)) df_progress_finish(&pc.pr);
    return (int)bad;
}

int cmd_verify(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_verify, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = S.n_pos ? S.pos[0] : NULL, *manifest = S.sha256_file;
    const bool no_sha = S.no_sha256, list = S.list;
    const int progress = S.quiet ? DF_PROGRESS_QUIET : DF_PROGRESS_AUTO;
    if (!model) {
        fprintf(stderr, "verify: MODEL is required\n\n");
        df_cli_help(&k_verify, stderr);
        return 2;
    }
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
            if (deltafin_errmsg()[0]) fprintf(stderr, "verify: %s\n", deltafin_errmsg());
            return 2;
        }
        bad += r;
        checks++;
    }
    /* 3. GGUF structure and, for packed models, every expert record */
    bool packed = false;
    if (bad == 0 || !df_split_name(model, NULL, NULL, NULL)) {
        int rc = deltafin_file_check(model, &packed);
        if (rc < 0) {
            printf("CORRUPT  %s: %s (the file's header or tensor table is damaged: download it again)\n", model,
                   deltafin_errmsg());
            bad++;
        } else {
            if (packed) {
                uint64_t nc = 0;
                int r = check_pack(model, progress, list, &nc);
                if (r < 0) {
                    printf("CORRUPT  %s: expert index: %s (re-pack or download it again)\n", model, deltafin_errmsg());
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
