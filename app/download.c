/* download.c — see download.h. One attempt = one HTTP GET with "Range: bytes=S-" where S is
 * the current size of PATH.part; attempts repeat with exponential backoff while they fail
 * with transient errors (connection dropped, timeouts, 5xx, 429). The retry budget is
 * refilled whenever an attempt moved bytes, so a long download over a flaky link finishes.
 * The digest is computed over the finished .part (resumed prefixes included) before rename. */
#include "app/download.h"
#include "app/progress.h"
#include "deltafin.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

df_download_opts df_download_default_opts(void) {
    return (df_download_opts){.max_retries = 5, .retry_wait_s = 1.0, .connect_timeout_s = 30,
                              .stall_timeout_s = 60, .progress = DF_PROGRESS_AUTO};
}

int df_download_global_init(void) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return deltafin_set_error(DELTAFIN_ERR_INTERNAL, "curl_global_init failed");
    return DELTAFIN_OK;
}

int df_download_resolve(const char *spec, char *url, size_t cap) {
    if (strstr(spec, "://")) {
        if (strlen(spec) >= cap) return deltafin_set_error(DELTAFIN_ERR_INVALID, "URL too long");
        snprintf(url, cap, "%s", spec);
        return DELTAFIN_OK;
    }
    /* org/repo/file: two non-empty components then a file path */
    const char *s1 = strchr(spec, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    if (!s1 || s1 == spec || !s2 || s2 == s1 + 1 || !s2[1] || spec[0] == '.' || spec[0] == '/')
        return deltafin_set_error(DELTAFIN_ERR_INVALID, "'%s' is neither a URL nor org/repo/file (Hugging Face shorthand)", spec);
    for (const char *c = spec; *c; c++)
        if (isspace((unsigned char)*c)) return deltafin_set_error(DELTAFIN_ERR_INVALID, "'%s': spaces are not allowed", spec);
    int n = snprintf(url, cap, "https://huggingface.co/%.*s/resolve/main/%s", (int)(s2 - spec), spec, s2 + 1);
    if (n < 0 || (size_t)n >= cap) return deltafin_set_error(DELTAFIN_ERR_INVALID, "URL too long");
    return DELTAFIN_OK;
}

bool df_split_name(const char *name, int *k, int *n, size_t *at) {
    /* "-00001-of-00003.gguf": 5 digits each as llama.cpp's gguf-split writes them */
    size_t len = strlen(name);
    const char *suf = "-XXXXX-of-XXXXX.gguf";
    size_t sl = strlen(suf);
    if (len < sl) return false;
    const char *p = name + len - sl;
    for (size_t i = 0; i < sl; i++) {
        if (suf[i] == 'X') { if (!isdigit((unsigned char)p[i])) return false; }
        else if (p[i] != suf[i]) return false;
    }
    int kk = atoi(p + 1), nn = atoi(p + 10);
    if (kk < 1 || nn < 1 || kk > nn) return false;
    if (k) *k = kk;
    if (n) *n = nn;
    if (at) *at = (size_t)(p - name);
    return true;
}

char *df_split_name_part(const char *name, int k) {
    size_t at;
    if (!df_split_name(name, NULL, NULL, &at) || k < 1 || k > 99999) return NULL;
    char *s = strdup(name);
    if (!s) return NULL;
    char d[6];
    snprintf(d, sizeof d, "%05d", k);
    memcpy(s + at + 1, d, 5);
    return s;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int df_sha256_file(const char *path, char hex[65], const df_download_opts *o) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    fstat(fd, &st);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        close(fd);
        EVP_MD_CTX_free(ctx);
        return deltafin_set_error(DELTAFIN_ERR_INTERNAL, "EVP sha256 init failed");
    }
    df_progress pr;
    char label[80];
    snprintf(label, sizeof label, "sha256 %s", base_name(path));
    df_progress_init(&pr, o && o->progress_out ? o->progress_out : stderr, o ? o->progress : DF_PROGRESS_QUIET, label,
                     (uint64_t)st.st_size, 0);
    const size_t cap = 4u << 20;
    unsigned char *buf = malloc(cap);
    int rc = buf ? DELTAFIN_OK : DELTAFIN_ERR_NOMEM;
    uint64_t done = 0;
    while (rc == DELTAFIN_OK) {
        ssize_t n = read(fd, buf, cap);
        if (n < 0) {
            if (errno == EINTR) continue;
            rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: read at %llu: %s", path, (unsigned long long)done, strerror(errno));
            break;
        }
        if (n == 0) break;
        EVP_DigestUpdate(ctx, buf, (size_t)n);
        done += (uint64_t)n;
        df_progress_update(&pr, done);
    }
    unsigned char md[32];
    unsigned int mdl = 0;
    if (rc == DELTAFIN_OK && EVP_DigestFinal_ex(ctx, md, &mdl) == 1 && mdl == 32) {
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (pr.total > (64u << 20)) df_progress_finish(&pr);
    } else if (rc == DELTAFIN_OK) rc = deltafin_set_error(DELTAFIN_ERR_INTERNAL, "EVP sha256 final failed");
    free(buf);
    EVP_MD_CTX_free(ctx);
    close(fd);
    return rc;
}

static bool is_hex64(const char *s, size_t n) {
    if (n != 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

int df_sha256_manifest_each(const char *mpath, df_manifest_fn fn, void *ud) {
    char *data = NULL;
    size_t len = 0;
    int rc = deltafin_read_file(mpath, &data, &len);
    if (rc) return rc;
    int ln = 0;
    for (char *line = data; line && *line && rc == 0;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        ln++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p && *p != '#') {
            size_t hl = strcspn(p, " \t");
            char *f = p + hl;
            if (!is_hex64(p, hl) || (*f != ' ' && *f != '\t')) {
                rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: expected \"SHA256  FILE\"", mpath, ln);
                break;
            }
            *f++ = 0;
            while (*f == ' ' || *f == '\t') f++;
            if (*f == '*') f++;
            if (!*f) { rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: no file name", mpath, ln); break; }
            rc = fn(ud, p, f);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    return rc < 0 ? rc : DELTAFIN_OK;
}

typedef struct { const char *want; char *hex; bool found; } manifest_lookup;

static int lookup_entry(void *ud, const char *hex, const char *file) {
    manifest_lookup *m = ud;
    if (strcmp(base_name(file), m->want)) return 0;
    for (int i = 0; i < 64; i++) m->hex[i] = (char)tolower((unsigned char)hex[i]);
    m->hex[64] = 0;
    m->found = true;
    return 1;
}

int df_sha256_manifest_lookup(const char *mpath, const char *name, char hex[65]) {
    manifest_lookup m = {base_name(name), hex, false};
    int rc = df_sha256_manifest_each(mpath, lookup_entry, &m);
    if (rc < 0) return rc;
    if (!m.found) return deltafin_set_error(DELTAFIN_ERR_NOTFOUND, "%s: no checksum for %s", mpath, m.want);
    return DELTAFIN_OK;
}

/* ---- one transfer ------------------------------------------------------------------- */

typedef struct {
    FILE *f;
    CURL *curl;
    uint64_t start;          /* bytes in .part when the attempt began */
    uint64_t written;        /* bytes written by this attempt */
    bool checked, restart;   /* first body bytes: decided whether the server honoured Range */
    int werr;
    df_progress *pr;
    EVP_MD_CTX *md;          /* running SHA-256 of .part from byte 0 (NULL: no check wanted) */
    uint64_t *hashed;        /* bytes fed to md */
} xfer;

static size_t on_write(char *ptr, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    if (!x->checked) {
        long code = 0;
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
        x->checked = true;
        if (x->start > 0 && code == 200) { /* server ignored Range: start over */
            if (ftruncate(fileno(x->f), 0) != 0 || fseeko(x->f, 0, SEEK_SET) != 0) { x->werr = errno; return 0; }
            x->start = 0;
            x->restart = true;
            if (x->md) { EVP_DigestInit_ex(x->md, EVP_sha256(), NULL); *x->hashed = 0; }
        }
    }
    if (fwrite(ptr, 1, n, x->f) != n) { x->werr = errno ? errno : EIO; return 0; }
    if (x->md) { EVP_DigestUpdate(x->md, ptr, n); *x->hashed += n; }
    x->written += n;
    return n;
}

static int on_xfer(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)ultotal, (void)ulnow;
    xfer *x = ud;
    if (dltotal > 0) df_progress_set_total(x->pr, x->start + (uint64_t)dltotal);
    df_progress_update(x->pr, x->start + (uint64_t)(dlnow > 0 ? dlnow : 0));
    return 0;
}

/* Content-Range: bytes * / N  -> N (for a 416 on a complete .part) */
static size_t on_header(char *buf, size_t sz, size_t nm, void *ud) {
    size_t n = sz * nm;
    uint64_t *total = ud;
    if (n > 20 && !strncasecmp(buf, "Content-Range:", 14)) {
        const char *slash = memchr(buf, '/', n);
        if (slash && isdigit((unsigned char)slash[1])) *total = strtoull(slash + 1, NULL, 10);
    }
    return n;
}

static uint64_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Feed the first `upto` bytes of path into md (a resumed .part); false on a read error. */
static bool hash_prefix(EVP_MD_CTX *md, const char *path, uint64_t upto) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const size_t cap = 4u << 20;
    unsigned char *buf = malloc(cap);
    uint64_t done = 0;
    while (buf && done < upto) {
        ssize_t n = read(fd, buf, upto - done < cap ? (size_t)(upto - done) : cap);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        EVP_DigestUpdate(md, buf, (size_t)n);
        done += (uint64_t)n;
    }
    free(buf);
    close(fd);
    return done == upto;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

int df_download(const char *url, const char *out_path, const df_download_opts *oin) {
    df_download_opts o = oin ? *oin : df_download_default_opts();
    if (o.sha256 && !is_hex64(o.sha256, strlen(o.sha256)))
        return deltafin_set_error(DELTAFIN_ERR_INVALID, "expected SHA-256 '%s' is not 64 hex digits", o.sha256);
    char part[4096];
    if (snprintf(part, sizeof part, "%s.part", out_path) >= (int)sizeof part) return deltafin_set_error(DELTAFIN_ERR_INVALID, "path too long");
    CURL *curl = curl_easy_init();
    if (!curl) return deltafin_set_error(DELTAFIN_ERR_INTERNAL, "curl_easy_init failed");
    df_progress pr;
    df_progress_init(&pr, o.progress_out, o.progress, o.label ? o.label : base_name(out_path), 0, file_size(part));
    /* SHA-256 while writing, so a huge model is not read a second time after the download */
    EVP_MD_CTX *md = NULL;
    uint64_t hashed = 0;
    if (o.sha256 && (md = EVP_MD_CTX_new()) && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1) {
        uint64_t have = file_size(part);
        if (have && hash_prefix(md, part, have)) hashed = have;
        else if (have) { EVP_MD_CTX_free(md); md = NULL; } /* unreadable prefix: hash at the end */
    }
    int rc = DELTAFIN_ERR_IO;
    int fails = 0;
    char errbuf[CURL_ERROR_SIZE], agent[96];
    snprintf(agent, sizeof agent, "deltafin-pull/%s", deltafin_commit());
    for (;;) {
        FILE *f = fopen(part, "ab");
        if (!f) { rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", part, strerror(errno)); break; }
        xfer x = {.f = f, .curl = curl, .start = file_size(part), .pr = &pr, .md = md, .hashed = &hashed};
        uint64_t range_total = 0;
        char range[64];
        snprintf(range, sizeof range, "%llu-", (unsigned long long)x.start);
        errbuf[0] = 0;
        curl_easy_reset(curl);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(curl, CURLOPT_USERAGENT, agent);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, o.connect_timeout_s);
        curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
        curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, o.stall_timeout_s);
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, &range_total);
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &x);
        if (x.start > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range);
        if (o.bearer_token) {
            curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
            curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, o.bearer_token);
        }
        CURLcode cc = curl_easy_perform(curl);
        long code = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
        int ferr = fflush(f) ? errno : 0;
        if (fsync(fileno(f)) != 0 && !ferr) ferr = errno;
        fclose(f);
        if (x.werr || ferr) {
            rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: write failed: %s", part, strerror(x.werr ? x.werr : ferr));
            break;
        }
        if (cc == CURLE_OK) { rc = DELTAFIN_OK; break; }
        if (code == 416 && x.start > 0 && range_total == x.start) { rc = DELTAFIN_OK; break; } /* .part was complete */
        bool transient;
        if (cc == CURLE_HTTP_RETURNED_ERROR) transient = code == 408 || code == 429 || code >= 500 || code == 416;
        else transient = cc != CURLE_UNSUPPORTED_PROTOCOL && cc != CURLE_URL_MALFORMAT &&
                         cc != CURLE_TOO_MANY_REDIRECTS && cc != CURLE_PEER_FAILED_VERIFICATION &&
                         cc != CURLE_SSL_CACERT_BADFILE && cc != CURLE_LOGIN_DENIED;
        if (code == 416) { /* .part larger than the file or the file changed: start over once */
            if (truncate(part, 0) != 0) { rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", part, strerror(errno)); break; }
            if (md) { EVP_DigestInit_ex(md, EVP_sha256(), NULL); hashed = 0; }
            deltafin_log(DELTAFIN_LOG_WARN, "%s: server refused to resume at %llu; starting over", url,
                   (unsigned long long)x.start);
        }
        char why[CURL_ERROR_SIZE + 64];
        if (cc == CURLE_HTTP_RETURNED_ERROR)
            snprintf(why, sizeof why, "HTTP %ld%s", code,
                     code == 401 || code == 403 ? (o.bearer_token ? " (the token was refused)"
                                                                  : " (gated or private: set HF_TOKEN or use --token)")
                                                : "");
        else snprintf(why, sizeof why, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
        if (!transient) { rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", url, why); break; }
        if (x.written > 0) fails = 0; /* progress: refill the retry budget */
        if (fails >= o.max_retries) {
            rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s (gave up after %d retries; run again to resume from %s)", url, why,
                        o.max_retries, part);
            break;
        }
        double wait = o.retry_wait_s;
        for (int i = 0; i < fails && wait < 60; i++) wait *= 2;
        if (wait > 60) wait = 60;
        fails++;
        if (pr.mode == DF_PROGRESS_BAR && pr.drawn) fputc('\n', pr.out);
        deltafin_log(DELTAFIN_LOG_WARN, "%s: %s at byte %llu; retry %d/%d in %.1f s", base_name(out_path), why,
               (unsigned long long)file_size(part), fails, o.max_retries, wait);
        if (o.progress != DF_PROGRESS_QUIET && deltafin_log_get_level() < DELTAFIN_LOG_WARN)
            fprintf(pr.out, "%s: %s at byte %llu; retry %d/%d in %.1f s\n", base_name(out_path), why,
                    (unsigned long long)file_size(part), fails, o.max_retries, wait);
        sleep_s(wait);
    }
    curl_easy_cleanup(curl);
    char got[65] = "";
    if (!rc && md && hashed == file_size(part)) {
        unsigned char dg[32];
        unsigned int dl = 0;
        if (EVP_DigestFinal_ex(md, dg, &dl) == 1 && dl == 32)
            for (int i = 0; i < 32; i++) snprintf(got + 2 * i, 3, "%02x", dg[i]);
    }
    EVP_MD_CTX_free(md);
    if (rc) {
        if (file_size(part) == 0) unlink(part); /* nothing arrived: leave no empty .part behind */
        return rc;
    }
    pr.done = file_size(part);
    if (!pr.total) pr.total = pr.done;
    df_progress_finish(&pr);
    if (o.sha256) {
        deltafin_log(DELTAFIN_LOG_DEBUG, "%s: SHA-256 %s", out_path, got[0] ? "computed while downloading" : "re-read from disk");
        if (!got[0]) { /* the running digest did not cover the file: read it again */
            rc = df_sha256_file(part, got, &o);
            if (rc) return rc;
        }
        if (strcasecmp(got, o.sha256))
            return deltafin_set_error(DELTAFIN_ERR_CHECKSUM, "%s: SHA-256 mismatch: expected %s, got %s; the download is corrupt "
                          "(kept as %s; delete it to download again)", out_path, o.sha256, got, part);
    }
    if (rename(part, out_path) != 0) return deltafin_set_error(DELTAFIN_ERR_IO, "rename %s -> %s: %s", part, out_path, strerror(errno));
    return DELTAFIN_OK;
}
