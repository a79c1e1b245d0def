/* pull.c — `deltafin pull URL|org/repo/file`: resumable download with SHA-256 check.
 * A split model (…-00001-of-0000N.gguf) downloads every part. */
#include "app/cli/flags.h"
#include "app/download.h"
#include "app/progress.h"
#include "deltafin.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <errno.h>
#include <sys/stat.h>

static const df_cmd k_pull = {
    DF_CMD_PULL, "pull", "usage: deltafin pull URL [-o PATH] [--sha256 HEX | --sha256-file FILE] [options]",
    "Download a model file. URL may be http(s)://... or the Hugging Face shorthand\n"
    "org/repo/file.gguf (= https://huggingface.co/org/repo/resolve/main/file.gguf).\n"
    "Bytes go to PATH.part and are resumed from there after an interruption (HTTP Range);\n"
    "PATH appears only when the download is complete and its checksum matched.\n"
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
    char url[4096];
    if (df_download_resolve(spec, url, sizeof url) < 0) { fprintf(stderr, "pull: %s\n", deltafin_errmsg()); return 2; }
    /* $HF_TOKEN goes to Hugging Face only, never to another host the user names */
    const char *hf = getenv("HF_TOKEN");
    if (!o.bearer_token && hf && *hf && !strncmp(url, "https://huggingface.co/", 23)) o.bearer_token = hf;
    const char *fname = url_file_name(url);
    if ((!*fname || strchr("?#", *fname)) && (!out || is_dir_arg(out))) {
        fprintf(stderr, "pull: %s has no file name; use -o PATH\n", url);
        return 2;
    }
    int k0 = 1, n = 1;
    size_t at;
    bool split = df_split_name(url, &k0, &n, &at) && k0 == 1;
    if (split && sha) { fprintf(stderr, "pull: --sha256 is for one file; use --sha256-file for a split model\n"); return 2; }
    struct stat ost;
    if (split && out && !is_dir_arg(out) && stat(out, &ost) == 0) {
        fprintf(stderr, "pull: %s is part 1 of %d: -o must be a directory\n", url, n);
        return 2;
    }
    bool out_dir = out && (split || is_dir_arg(out));
    if (df_download_global_init() < 0) { fprintf(stderr, "pull: %s\n", deltafin_errmsg()); return 1; }
    char dir[4096] = ".";
    if (out_dir) {
        snprintf(dir, sizeof dir, "%s", out);
        if (!dry && mkdir(dir, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "pull: %s: %s\n", dir, strerror(errno)); return 1; }
    }
    int ret = 0;
    char first_path[8192] = "";
    for (int k = 1; k <= n && ret == 0; k++) {
        char *u = split ? df_split_name_part(url, k) : strdup(url);
        if (!u) { ret = 1; break; }
        char path[8192];
        const char *name = url_file_name(u);
        size_t nl = strcspn(name, "?#");
        if (out && !out_dir) snprintf(path, sizeof path, "%s", out);
        else snprintf(path, sizeof path, "%s%s%.*s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", (int)nl, name);
        if (k == 1) snprintf(first_path, sizeof first_path, "%s", path);
        if (dry) { printf("%s -> %s\n", u, path); free(u); continue; }
        char hex[65];
        o.sha256 = sha;
        if (shafile) {
            if (df_sha256_manifest_lookup(shafile, path, hex) < 0) {
                fprintf(stderr, "pull: %s\n", deltafin_errmsg());
                free(u);
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
                    free(u);
                    continue;
                }
                fprintf(stderr, "pull: %s exists and does not match its SHA-256; delete it to download again\n", path);
            } else fprintf(stderr, "pull: %s already exists (delete it to download again)\n", path);
            free(u);
            ret = 1;
            break;
        }
        char label[96];
        if (split) snprintf(label, sizeof label, "[%d/%d] %.80s", k, n, url_file_name(path));
        else snprintf(label, sizeof label, "%.90s", url_file_name(path));
        o.label = label;
        int rc = df_download(u, path, &o);
        if (rc < 0) {
            fprintf(stderr, "pull: %s\n", deltafin_errmsg());
            ret = 1;
        } else {
            fprintf(stderr, "%s: done%s\n", path, o.sha256 ? ", SHA-256 ok" : " (no checksum given; not verified)");
        }
        free(u);
    }
    if (dry) return ret;
    if (ret == 0 && shafile) {
        /* keep the manifest next to the model so `deltafin verify` can re-check it later */
        char mpath[8300], *data = NULL;
        size_t len = 0;
        snprintf(mpath, sizeof mpath, "%s.sha256", first_path);
        if (deltafin_read_file(shafile, &data, &len) == 0) {
            FILE *f = fopen(mpath, "wb");
            if (!f || fwrite(data, 1, len, f) != len) fprintf(stderr, "pull: could not write %s\n", mpath);
            if (f) fclose(f);
            free(data);
        }
    } else if (ret == 0 && sha) {
        char mpath[8300];
        snprintf(mpath, sizeof mpath, "%s.sha256", first_path);
        FILE *f = fopen(mpath, "w");
        if (f) { fprintf(f, "%s  %s\n", sha, url_file_name(first_path)); fclose(f); }
    }
    return ret;
}
