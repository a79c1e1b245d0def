/* pull.c — `deltafin pull URL|org/repo/file|org/repo:QUANT`: resumable download with SHA-256
 * check. A split model (…-00001-of-0000N.gguf) downloads every part; org/repo:QUANT is found
 * in the Hugging Face Hub's file list (app/hub.h), with each file's SHA-256 from the listing.
 * A .gguf download must start with the GGUF magic and pass the structure check before it gets
 * its name. */
#include "app/cli/flags.h"
#include "app/download.h"
#include "app/hub.h"
#include "app/progress.h"
#include "deltafin.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <errno.h>
#include <sys/stat.h>

static const df_cmd k_pull = {
    DF_CMD_PULL, "pull", "usage: deltafin pull URL [-o PATH] [--sha256 HEX | --sha256-file FILE] [options]",
    "Download a model file. URL may be http(s)://..., the Hugging Face shorthand org/repo/file.gguf\n"
    "(= https://huggingface.co/org/repo/resolve/main/file.gguf; a .../blob/... page link is read as\n"
    "its .../resolve/... download), or org/repo:QUANT (e.g. unsloth/Qwen3-30B-A3B-GGUF:Q4_K_M; plain\n"
    "org/repo means :Q4_K_M): the .gguf file named with that quantization, or every part of the\n"
    "split model, found in the repository's file list with the SHA-256 of each file\n"
    "($HF_ENDPOINT selects a mirror).\n"
    "Bytes go to PATH.part and are resumed from there after an interruption (HTTP Range);\n"
    "PATH appears only when the download is complete, its checksum matched and, for .gguf\n"
    "files, it is a GGUF file (an HTML error page is refused as soon as it starts).\n"
    "A URL ending in -00001-of-0000N.gguf downloads all N parts of the split model.", NULL, 1};

static bool is_dir_arg(const char *p) {
    struct stat st;
    size_t n = strlen(p);
    return (n && p[n - 1] == '/') || (stat(p, &st) == 0 && S_ISDIR(st.st_mode));
}

static const char *url_file_name(const char *url) {
    const char *s = strrchr(url, '/');
    return s ? s + 1 : url;
}

static bool ends_gguf(const char *name) {
    size_t n = strcspn(name, "?#");
    return n > 5 && !strncasecmp(name + n - 5, ".gguf", 5);
}

typedef struct {
    char *url;
    char sha[65];            /* from the hub listing, "" if none */
} job;

/* The downloads a spec stands for: hub files, or the URL (every part of a split model). */
static int make_jobs(const char *spec, const char *url, const df_download_opts *o, job **jobs, int *n, bool *from_hub) {
    char repo[512], quant[64];
    *jobs = NULL;
    *n = 0;
    *from_hub = false;
    if (df_hub_spec(spec, repo, sizeof repo, quant, sizeof quant)) {
        df_hub_file *f = NULL;
        int nf = 0;
        int rc = df_hub_resolve(repo, quant, o, &f, &nf);
        if (rc < 0) return rc;
        *jobs = calloc((size_t)nf, sizeof **jobs);
        for (int i = 0; *jobs && i < nf; i++) {
            (*jobs)[i].url = strdup(f[i].url);
            snprintf((*jobs)[i].sha, sizeof (*jobs)[i].sha, "%s", f[i].sha256);
        }
        free(f);
        *n = nf;
        *from_hub = true;
        return *jobs ? DELTAFIN_OK : DELTAFIN_ERR_NOMEM;
    }
    int k0 = 1, parts = 1;
    bool split = df_split_name(url, &k0, &parts, NULL) && k0 == 1;
    *jobs = calloc((size_t)parts, sizeof **jobs);
    if (!*jobs) return DELTAFIN_ERR_NOMEM;
    for (int k = 1; k <= parts; k++) (*jobs)[k - 1].url = split ? df_split_name_part(url, k) : strdup(url);
    *n = parts;
    return DELTAFIN_OK;
}

static void free_jobs(job *j, int n) {
    for (int i = 0; i < n; i++) free(j[i].url);
    free(j);
}

/* The manifest next to the first file, so `deltafin verify` can re-check the download later. */
static void write_manifest(const char *first_path, const char *shafile, const char *sha, const job *jobs, int n,
                           bool from_hub, char (*paths)[8192]) {
    char mpath[8300];
    snprintf(mpath, sizeof mpath, "%s.sha256", first_path);
    if (shafile) {
        char *data = NULL;
        size_t len = 0;
        if (deltafin_read_file(shafile, &data, &len) == 0) {
            FILE *f = fopen(mpath, "wb");
            if (!f || fwrite(data, 1, len, f) != len) fprintf(stderr, "pull: could not write %s\n", mpath);
            if (f) fclose(f);
            free(data);
        }
    } else if (sha || from_hub) {
        FILE *f = fopen(mpath, "w");
        if (!f) { fprintf(stderr, "pull: could not write %s\n", mpath); return; }
        for (int i = 0; i < n; i++) {
            const char *h = from_hub ? jobs[i].sha : sha;
            if (h && h[0]) fprintf(f, "%s  %s\n", h, url_file_name(paths[i]));
        }
        fclose(f);
    }
}

int cmd_pull(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_pull, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *spec = S.n_pos ? S.pos[0] : NULL, *out = S.output, *sha = S.sha256, *shafile = S.sha256_file;
    const bool dry = S.dry_run;
    df_download_opts o = df_download_default_opts();
    o.max_retries = S.retries;
    o.retry_wait_s = S.retry_wait;
    o.bearer_token = S.token;
    if (S.quiet) o.progress = DF_PROGRESS_QUIET;
    if (!spec) { fprintf(stderr, "pull: URL is required\n\n"); df_cli_help(&k_pull, stderr); return 2; }
    if (sha && shafile) { fprintf(stderr, "pull: give --sha256 or --sha256-file, not both\n"); return 2; }
    if (o.max_retries < 0 || o.retry_wait_s < 0) { fprintf(stderr, "pull: bad --retries/--retry-wait\n"); return 2; }
    char repo[512], quant[64], url[4096] = "";
    const bool hub = df_hub_spec(spec, repo, sizeof repo, quant, sizeof quant);
    if (!hub && df_download_resolve(spec, url, sizeof url) < 0) { fprintf(stderr, "pull: %s\n", deltafin_errmsg()); return 2; }
    if (hub && sha) { fprintf(stderr, "pull: %s: the checksums come from the repository's file list; drop --sha256\n", spec); return 2; }
    /* $HF_TOKEN goes to Hugging Face (or the $HF_ENDPOINT the user chose) only, never to another host */
    const char *hf = getenv("HF_TOKEN"), *ep = getenv("HF_ENDPOINT");
    bool to_hf = hub || !strncmp(url, "https://huggingface.co/", 23) || (ep && *ep && !strncmp(url, ep, strlen(ep)));
    if (!o.bearer_token && hf && *hf && to_hf) o.bearer_token = hf;
    if (!hub) {
        const char *fname = url_file_name(url);
        if ((!*fname || strchr("?#", *fname)) && (!out || is_dir_arg(out))) {
            fprintf(stderr, "pull: %s has no file name; use -o PATH\n", url);
            return 2;
        }
    }
    if (df_download_global_init() < 0) { fprintf(stderr, "pull: %s\n", deltafin_errmsg()); return 1; }
    job *jobs = NULL;
    int n = 0;
    bool from_hub = false;
    if (make_jobs(spec, url, &o, &jobs, &n, &from_hub) < 0) { fprintf(stderr, "pull: %s\n", deltafin_errmsg()); return 1; }
    const bool several = n > 1;
    if (several && sha) { fprintf(stderr, "pull: --sha256 is for one file; use --sha256-file for a split model\n"); free_jobs(jobs, n); return 2; }
    struct stat ost;
    if (several && out && !is_dir_arg(out) && stat(out, &ost) == 0) {
        fprintf(stderr, "pull: %s has %d parts: -o must be a directory\n", spec, n);
        free_jobs(jobs, n);
        return 2;
    }
    bool out_dir = out && (several || is_dir_arg(out));
    char dir[4096] = ".";
    if (out_dir) {
        snprintf(dir, sizeof dir, "%s", out);
        if (!dry && mkdir(dir, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "pull: %s: %s\n", dir, strerror(errno)); free_jobs(jobs, n); return 1; }
    }
    int ret = 0;
    char (*paths)[8192] = calloc((size_t)n, sizeof *paths);
    if (!paths) { free_jobs(jobs, n); return 1; }
    for (int k = 0; k < n && ret == 0; k++) {
        const char *u = jobs[k].url, *name = url_file_name(u);
        char *path = paths[k];
        size_t nl = strcspn(name, "?#");
        if (out && !out_dir) snprintf(path, 8192, "%s", out);
        else snprintf(path, 8192, "%s%s%.*s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", (int)nl, name);
        if (dry) { printf("%s -> %s%s%s\n", u, path, jobs[k].sha[0] ? " sha256 " : "", jobs[k].sha); continue; }
        char hex[65];
        o.sha256 = from_hub ? (jobs[k].sha[0] ? jobs[k].sha : NULL) : sha;
        o.expect_gguf = ends_gguf(name);
        if (shafile) {
            if (df_sha256_manifest_lookup(shafile, path, hex) < 0) {
                fprintf(stderr, "pull: %s\n", deltafin_errmsg());
                ret = 1;
                break;
            }
            o.sha256 = hex;
        }
        struct stat st;
        if (stat(path, &st) == 0) {
            if (o.sha256) {
                char got[65];
                if (df_sha256_file(path, got, &o) == 0 && !strcasecmp(got, o.sha256)) {
                    fprintf(stderr, "%s: already complete, SHA-256 ok\n", path);
                    continue;
                }
                fprintf(stderr, "pull: %s exists and does not match its SHA-256; delete it to download again\n", path);
            } else fprintf(stderr, "pull: %s already exists (delete it to download again)\n", path);
            ret = 1;
            break;
        }
        char label[112];
        if (several) snprintf(label, sizeof label, "[%d/%d] %.80s", k + 1, n, url_file_name(path));
        else snprintf(label, sizeof label, "%.90s", url_file_name(path));
        o.label = label;
        int rc = df_download(u, path, &o);
        if (rc < 0) {
            fprintf(stderr, "pull: %s\n", deltafin_errmsg());
            ret = 1;
        } else {
            fprintf(stderr, "%s: done%s\n", path, o.sha256 ? ", SHA-256 ok" : " (no checksum given; not verified)");
        }
    }
    if (!dry && ret == 0) write_manifest(paths[0], shafile, sha, jobs, n, from_hub, paths);
    free(paths);
    free_jobs(jobs, n);
    return ret;
}
