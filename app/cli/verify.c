/* verify.c — `deltafin verify MODEL`: check a model (or every part of a split model) against
 * --sha256 HEX or MODEL.sha256 (sha256sum format) and, for packed models, every checksum the
 * pack holds (header and tensor table, dense tensors, expert index, expert records).
 * Reports every problem found (not only the first), naming the file, the part and the offset,
 * and what to fetch again. */
#include "app/cli/flags.h"
#include "app/download.h"
#include "app/progress.h"
#include "deltafin.h"

#include <ctype.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const df_cmd k_verify = {
    DF_CMD_VERIFY, "verify", "usage: deltafin verify [options] [-m] MODEL.gguf",
    "Check a model against its checksums and report exactly what is missing or corrupt:\n"
    "  - --sha256 HEX, or MODEL.sha256 (sha256sum format, written by `deltafin pull`; for a split\n"
    "    model the manifest of part 1 lists every part): each listed file must exist and match;\n"
    "  - a split model (...-00001-of-0000N.gguf): every part must be present and as long as its\n"
    "    tensor table says (a short part is named and reported as truncated);\n"
    "  - a packed model (`deltafin pack`): the header and tensor table, every dense tensor, the\n"
    "    expert index and every (layer, expert) record against their XXH64 (packs of version 1\n"
    "    protect only the records: verify says what is unprotected).\n"
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

static int check_file(manifest_check *m, const char *path, const char *want, const char *src) {
    char got[65];
    if (!exists(path)) {
        printf("MISSING  %s  (listed in %s; download it again)\n", path, src);
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

static int check_entry(void *ud, const char *want, const char *name) {
    manifest_check *m = ud;
    char path[8192];
    if (name[0] == '/') snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%s/%s", m->dir, name);
    return check_file(m, path, want, m->mpath);
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

/* Every checked part of a packed model; prints each bad one. */
typedef struct {
    int progress;
    bool list, started;
    df_progress pr;
} pack_check;

static const char *part_name(const deltafin_pack_record *r, char *buf, size_t cap) {
    switch (r->kind) {
    case DELTAFIN_PACK_PART_EXPERT: snprintf(buf, cap, "layer %d expert %d", r->layer, r->expert); break;
    case DELTAFIN_PACK_PART_HEADER: snprintf(buf, cap, "header and tensor table"); break;
    case DELTAFIN_PACK_PART_INDEX: snprintf(buf, cap, "expert index '%s'", r->tensor); break;
    case DELTAFIN_PACK_PART_TABLE: snprintf(buf, cap, "checksum table '%s'", r->tensor); break;
    default:
        if (r->nbytes == r->tensor_bytes) snprintf(buf, cap, "tensor '%s'", r->tensor);
        else
            snprintf(buf, cap, "tensor '%s' bytes %llu..%llu of %llu", r->tensor, (unsigned long long)r->tensor_offset,
                     (unsigned long long)(r->tensor_offset + r->nbytes - (r->nbytes > 0)),
                     (unsigned long long)r->tensor_bytes);
    }
    return buf;
}

static void list_part(const deltafin_pack_record *r) {
    static const char *kinds[] = {"expert", "header", "tensor", "index", "table"};
    if (r->kind == DELTAFIN_PACK_PART_EXPERT)
        printf("record %d %d %llu %llu\n", r->layer, r->expert, (unsigned long long)r->offset, (unsigned long long)r->nbytes);
    else
        printf("part %s %s %llu %llu\n", kinds[r->kind], r->tensor ? r->tensor : "-", (unsigned long long)r->offset,
               (unsigned long long)r->nbytes);
}

static int on_record(void *ud, const deltafin_pack_record *r) {
    pack_check *pc = ud;
    if (!pc->started) {
        df_progress_init(&pc->pr, stderr, pc->progress, "checksums", r->total, 0);
        pc->started = true;
    }
    if (pc->list) list_part(r);
    char what[256];
    part_name(r, what, sizeof what);
    if (r->status == DELTAFIN_ERR_IO)
        printf("%s  %s: %s at offset %llu (%llu bytes): %s\n",
               r->error && !strncmp(r->error, "truncated", 9) ? "TRUNCATED" : "UNREADABLE", what, r->path,
               (unsigned long long)r->offset, (unsigned long long)r->nbytes, r->error);
    else if (r->status == DELTAFIN_ERR_FORMAT)
        printf("CORRUPT  %s: %s at offset %llu: %s\n", what, r->path, (unsigned long long)r->offset, r->error);
    else if (r->status)
        printf("CORRUPT  %s: %s bytes %llu..%llu, xxh64 %016llx expected %016llx\n", what, r->path,
               (unsigned long long)r->offset, (unsigned long long)(r->offset + r->nbytes - (r->nbytes > 0)),
               (unsigned long long)r->xxh64, (unsigned long long)r->xxh64_expected);
    if (r->total) df_progress_update(&pc->pr, r->done);
    return 0;
}

/* Returns the number of bad parts, or < 0 when the pack index is unusable. */
static int check_pack(const char *model, int progress, bool list) {
    pack_check pc = {.progress = progress, .list = list};
    deltafin_pack_verify_result res;
    int rc = deltafin_pack_verify(model, on_record, &pc, &res);
    if (rc < 0) return rc;
    if (pc.started && pc.pr.total > (256u << 20)) df_progress_finish(&pc.pr);
    char a[32], b[32];
    if (res.version >= 2 && !res.n_bad)
        printf("ok       %s: header and tensor table (%s), %d dense tensors (%s), expert index: checksums match\n",
               model, deltafin_fmt_bytes(res.header_bytes, a, sizeof a), res.n_tensors,
               deltafin_fmt_bytes(res.tensor_bytes, b, sizeof b));
    if (res.version < 2)
        printf("NOTE     %s: pack version 1 protects only the expert records: the header and tensor table, the expert "
               "index and %d dense tensors (%s in all) carry no checksum and were not checked (pack the source model "
               "again to protect them)\n",
               model, res.unprotected_tensors, deltafin_fmt_bytes(res.unprotected_bytes, a, sizeof a));
    if (res.n_bad)
        printf("%llu of %llu checked parts are corrupt or unreadable (%llu expert records checked): re-run `deltafin "
               "pack` from the source model or download %s again\n",
               (unsigned long long)res.n_bad, (unsigned long long)(res.n_ok + res.n_bad),
               (unsigned long long)res.n_records, model);
    else
        printf("ok       %s: %llu expert records, checksums match\n", model, (unsigned long long)res.n_records);
    return (int)(res.n_bad > 1000000 ? 1000000 : res.n_bad);
}

static bool is_hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

/* The GGUF structure of MODEL (every part of a split set): a short part is TRUNCATED, named. */
static int check_structure(const char *model, bool *packed) {
    int rc = deltafin_file_check(model, packed);
    if (rc >= 0) return 0;
    const char *e = deltafin_errmsg();
    if (strstr(e, "extends beyond end of file")) /* the tensor table is whole: the data are cut short */
        printf("TRUNCATED  %s (download that part again)\n", e);
    else
        printf("CORRUPT  %s: %s (the header or tensor table is damaged or cut short: download it again)\n", model, e);
    return 1;
}

int cmd_verify(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_verify, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = df_cli_model_arg(&k_verify, &S, true, &prc), *manifest = S.sha256_file, *sha = S.sha256;
    if (!model) return prc;
    const bool no_sha = S.no_sha256, list = S.list;
    const int progress = S.quiet ? DF_PROGRESS_QUIET : DF_PROGRESS_AUTO;
    if (sha && (manifest || no_sha)) return df_cli_usage_error(&k_verify, "--sha256 cannot go with --sha256-file or --no-sha256");
    if (sha && !is_hex64(sha)) return df_cli_usage_error(&k_verify, "--sha256 '%s' is not 64 hex digits", sha);
    if (sha && df_split_name(model, NULL, NULL, NULL))
        return df_cli_usage_error(&k_verify, "--sha256 is for one file; a split model needs a manifest (--sha256-file)");
    int bad = 0, checks = 0;
    char mbuf[8300];
    if (!manifest && !sha) {
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
    /* 2. SHA-256 of the whole file (--sha256) or of every file of the manifest */
    if (sha) {
        manifest_check m = {"--sha256", ".", df_download_default_opts(), 0, 0};
        m.o.progress = progress;
        check_file(&m, model, sha, "--sha256");
        bad += m.bad;
        checks++;
    } else if (manifest && !no_sha) {
        int nc = 0;
        int r = check_manifest(manifest, progress, &nc);
        if (r < 0) {
            if (deltafin_errmsg()[0]) fprintf(stderr, "verify: %s\n", deltafin_errmsg());
            return 2;
        }
        bad += r;
        checks++;
    }
    /* 3. GGUF structure and, for packed models, every checksum they hold */
    bool packed = false;
    if (bad == 0 || !df_split_name(model, NULL, NULL, NULL)) {
        int sb = check_structure(model, &packed);
        bad += sb;
        if (!sb && packed) {
            int r = check_pack(model, progress, list);
            if (r < 0) {
                printf("CORRUPT  %s: expert index: %s (re-pack or download it again)\n", model, deltafin_errmsg());
                bad++;
            } else {
                bad += r;
            }
            checks++;
        }
    }
    if (bad) {
        printf("verify: %d problem%s found\n", bad, bad == 1 ? "" : "s");
        return 1;
    }
    if (!checks || (!manifest && !sha && !packed)) {
        printf("verify: %s: GGUF structure ok, but there is nothing to check its bytes against (no --sha256, no %s.sha256, "
               "not a packed model)\n", model, model);
        return 3;
    }
    printf("verify: ok\n");
    return 0;
}
