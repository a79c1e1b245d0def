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
#include <pthread.h>
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

/* A Hugging Face page link (https://huggingface.co/ORG/REPO/blob/REV/FILE, what the web page's
 * address bar shows) names the HTML page, not the file: its download is .../resolve/REV/FILE. */
static void blob_to_resolve(char *url, size_t cap) {
    static const char *hosts[] = {"https://huggingface.co/", "https://hf.co/", "http://huggingface.co/"};
    const char *ep = getenv("HF_ENDPOINT");
    size_t hl = 0;
    for (size_t i = 0; i < sizeof hosts / sizeof *hosts && !hl; i++)
        if (!strncmp(url, hosts[i], strlen(hosts[i]))) hl = strlen(hosts[i]);
    if (!hl && ep && *ep && !strncmp(url, ep, strlen(ep)) && url[strlen(ep)] == '/') hl = strlen(ep) + 1;
    if (!hl) return;
    char *p = url + hl, *s1 = strchr(p, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    if (!s2 || strncmp(s2, "/blob/", 6) || strlen(url) + 3 >= cap) return;
    memmove(s2 + 9, s2 + 6, strlen(s2 + 6) + 1);
    memcpy(s2, "/resolve/", 9);
}

int df_download_resolve(const char *spec, char *url, size_t cap) {
    if (strstr(spec, "://")) {
        if (strlen(spec) >= cap) return deltafin_set_error(DELTAFIN_ERR_INVALID, "URL too long");
        snprintf(url, cap, "%s", spec);
        blob_to_resolve(url, cap);
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

/* df_sha256_file reads on a second thread while this one hashes (two 8 MiB buffers), so the
 * check runs at the slower of the disk and SHA-256 (~1.8 GB/s a core with SHA-NI), not at
 * their harmonic sum; pages are dropped from the page cache once hashed (a 600 GB model must
 * not evict everything else, and a memory cgroup charges them). */
enum { SHA_BUF = 8u << 20 };
typedef struct {
    int fd;
    unsigned char *buf[2];
    ssize_t len[2];          /* bytes in buf[i]; < 0: -errno; filled when ready[i] */
    bool ready[2], stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} sha_reader;

static void *sha_read_main(void *arg) {
    sha_reader *r = arg;
    uint64_t off = 0;
    for (int i = 0;; i ^= 1) {
        pthread_mutex_lock(&r->mu);
        while (r->ready[i] && !r->stop) pthread_cond_wait(&r->cv, &r->mu);
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
        ssize_t n = 0;
        while (n < (ssize_t)SHA_BUF) { /* a full buffer unless at the end of the file */
            ssize_t k = pread(r->fd, r->buf[i] + n, SHA_BUF - (size_t)n, (off_t)(off + (uint64_t)n));
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) { n = -errno; break; }
            if (k == 0) break;
            n += k;
        }
        if (n > 0) off += (uint64_t)n;
        pthread_mutex_lock(&r->mu);
        r->len[i] = n;
        r->ready[i] = true;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        if (n <= 0 || n < (ssize_t)SHA_BUF) break; /* end of file or error: nothing more to read */
    }
    return NULL;
}

int df_sha256_file(const char *path, char hex[65], const df_download_opts *o) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    fstat(fd, &st);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
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
    sha_reader r = {.fd = fd};
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.buf[0] = malloc(SHA_BUF);
    r.buf[1] = malloc(SHA_BUF);
    int rc = r.buf[0] && r.buf[1] ? DELTAFIN_OK : deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory");
    pthread_t th;
    bool started = rc == DELTAFIN_OK && pthread_create(&th, NULL, sha_read_main, &r) == 0;
    if (rc == DELTAFIN_OK && !started) rc = deltafin_set_error(DELTAFIN_ERR_INTERNAL, "cannot start a reader thread");
    uint64_t done = 0;
    for (int i = 0; rc == DELTAFIN_OK; i ^= 1) {
        pthread_mutex_lock(&r.mu);
        while (!r.ready[i]) pthread_cond_wait(&r.cv, &r.mu);
        ssize_t n = r.len[i];
        pthread_mutex_unlock(&r.mu);
        if (n < 0) {
            rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: read at %llu: %s", path, (unsigned long long)done, strerror((int)-n));
            break;
        }
        EVP_DigestUpdate(ctx, r.buf[i], (size_t)n);
        if (n > 0) (void)posix_fadvise(fd, (off_t)done, (off_t)n, POSIX_FADV_DONTNEED);
        done += (uint64_t)n;
        df_progress_update(&pr, done);
        if (n < (ssize_t)SHA_BUF) break;
        pthread_mutex_lock(&r.mu);
        r.ready[i] = false;
        pthread_cond_broadcast(&r.cv);
        pthread_mutex_unlock(&r.mu);
    }
    if (started) {
        pthread_mutex_lock(&r.mu);
        r.stop = true;
        pthread_cond_broadcast(&r.cv);
        pthread_mutex_unlock(&r.mu);
        pthread_join(th, NULL);
    }
    if (rc == DELTAFIN_OK && done != (uint64_t)st.st_size)
        deltafin_log(DELTAFIN_LOG_WARN, "%s: changed size while being hashed (%llu of %llu bytes)", path,
                     (unsigned long long)done, (unsigned long long)st.st_size);
    unsigned char md[32];
    unsigned int mdl = 0;
    if (rc == DELTAFIN_OK && EVP_DigestFinal_ex(ctx, md, &mdl) == 1 && mdl == 32) {
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (pr.total > (64u << 20)) df_progress_finish(&pr);
    } else if (rc == DELTAFIN_OK) rc = deltafin_set_error(DELTAFIN_ERR_INTERNAL, "EVP sha256 final failed");
    free(r.buf[0]);
    free(r.buf[1]);
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
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
    bool expect_gguf;        /* check the first 4 bytes of the file */
    unsigned char head[64];  /* the file's first bytes (for the magic check and the message) */
    size_t n_head;
    bool bad_magic;
} xfer;

/* "an HTML page (<!DOCTYPE html>...)" / "bytes 7f 45 4c 46 ..." for a file that is not a GGUF */
static void describe_head(const unsigned char *h, size_t n, char *out, size_t cap) {
    size_t i = 0;
    while (i < n && (h[i] == ' ' || h[i] == '\n' || h[i] == '\r' || h[i] == '\t')) i++;
    bool text = true;
    for (size_t k = i; k < n; k++) text &= h[k] >= 0x20 || h[k] == '\n' || h[k] == '\r' || h[k] == '\t';
    if (text && i < n) {
        char t[48];
        size_t m = 0;
        for (size_t k = i; k < n && m + 1 < sizeof t; k++) t[m++] = (h[k] == '\n' || h[k] == '\r') ? ' ' : (char)h[k];
        t[m] = 0;
        snprintf(out, cap, "%s (\"%s...\")", h[i] == '<' ? "an HTML page" : h[i] == '{' ? "JSON" : "text", t);
    } else {
        int w = snprintf(out, cap, "bytes");
        for (size_t k = 0; k < n && k < 8 && w > 0 && (size_t)w < cap; k++) w += snprintf(out + w, cap - (size_t)w, " %02x", h[k]);
    }
}

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
    if (x->expect_gguf && x->start == 0 && x->n_head < sizeof x->head) { /* the file's first bytes */
        size_t k = n < sizeof x->head - x->n_head ? n : sizeof x->head - x->n_head;
        memcpy(x->head + x->n_head, ptr, k);
        x->n_head += k;
        if (x->n_head >= 4 && memcmp(x->head, "GGUF", 4)) { x->bad_magic = true; return 0; }
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

/* One attempt's request: follow redirects, fail on HTTP errors, give up on a stalled
 * transfer, resume from x->start with a Range, the token as a bearer. */
static void set_request(CURL *curl, const char *url, const df_download_opts *o, xfer *x, uint64_t *range_total,
                        char *errbuf, const char *agent) {
    char range[64];
    snprintf(range, sizeof range, "%llu-", (unsigned long long)x->start);
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, agent);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, o->stall_timeout_s);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, range_total);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, x);
    if (x->start > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range); /* curl copies the string */
    if (o->bearer_token) {
        curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, o->bearer_token);
    }
}

/* A failed attempt: why (for the message) and whether another attempt may succeed. */
static bool failure(CURLcode cc, long code, const char *errbuf, const df_download_opts *o, char *why, size_t cap) {
    bool transient;
    if (cc == CURLE_HTTP_RETURNED_ERROR) transient = code == 408 || code == 429 || code >= 500 || code == 416;
    else transient = cc != CURLE_UNSUPPORTED_PROTOCOL && cc != CURLE_URL_MALFORMAT &&
                     cc != CURLE_TOO_MANY_REDIRECTS && cc != CURLE_PEER_FAILED_VERIFICATION &&
                     cc != CURLE_SSL_CACERT_BADFILE && cc != CURLE_LOGIN_DENIED &&
                     cc != CURLE_COULDNT_RESOLVE_HOST && cc != CURLE_COULDNT_RESOLVE_PROXY;
    const char *msg = errbuf[0] ? errbuf : curl_easy_strerror(cc);
    if (cc == CURLE_HTTP_RETURNED_ERROR)
        snprintf(why, cap, "HTTP %ld%s", code,
                 code == 401 || code == 403 ? (o->bearer_token ? " (the token was refused)"
                                                               : " (gated or private: set HF_TOKEN or use --token)")
                                            : "");
    else if (cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY)
        snprintf(why, cap, "%s (the host name does not resolve: check it and the network; not retried)", msg);
    else if (cc == CURLE_TOO_MANY_REDIRECTS)
        snprintf(why, cap, "%s (a redirect loop?)", msg);
    else snprintf(why, cap, "%s", msg);
    return transient;
}

/* A .part left by an earlier run that does not start like a GGUF file: emptied (and the
 * running digest restarted). < 0, named, when it cannot be truncated. */
static int stale_part(const char *part, EVP_MD_CTX *md, uint64_t *hashed) {
    if (file_size(part) < 4) return 0;
    unsigned char h[4] = {0};
    FILE *pf = fopen(part, "rb");
    size_t got = pf ? fread(h, 1, 4, pf) : 0;
    if (pf) fclose(pf);
    if (got != 4 || !memcmp(h, "GGUF", 4)) return 0;
    deltafin_log(DELTAFIN_LOG_WARN, "%s: not the start of a GGUF file; downloading from the start", part);
    if (truncate(part, 0) != 0) return deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", part, strerror(errno));
    if (md) { EVP_DigestInit_ex(md, EVP_sha256(), NULL); *hashed = 0; }
    return 0;
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
    if (o.expect_gguf && stale_part(part, md, &hashed) < 0) { curl_easy_cleanup(curl); return DELTAFIN_ERR_IO; }
    int rc = DELTAFIN_ERR_IO;
    int fails = 0;
    char errbuf[CURL_ERROR_SIZE], agent[96];
    snprintf(agent, sizeof agent, "deltafin-pull/%s", deltafin_commit());
    for (;;) {
        FILE *f = fopen(part, "ab");
        if (!f) { rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", part, strerror(errno)); break; }
        xfer x = {.f = f, .curl = curl, .start = file_size(part), .pr = &pr, .md = md, .hashed = &hashed,
                  .expect_gguf = o.expect_gguf};
        uint64_t range_total = 0;
        errbuf[0] = 0;
        set_request(curl, url, &o, &x, &range_total, errbuf, agent);
        CURLcode cc = curl_easy_perform(curl);
        long code = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
        int ferr = fflush(f) ? errno : 0;
        if (fsync(fileno(f)) != 0 && !ferr) ferr = errno;
        fclose(f);
        if (x.bad_magic) {
            char what[160];
            describe_head(x.head, x.n_head, what, sizeof what);
            unlink(part); /* nothing of it is a model */
            rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s: not a GGUF file: the server sent %s (HTTP %ld); nothing "
                                    "was saved", url, what, code);
            break;
        }
        if (x.werr || ferr) {
            rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: write failed: %s", part, strerror(x.werr ? x.werr : ferr));
            break;
        }
        if (cc == CURLE_OK) { rc = DELTAFIN_OK; break; }
        if (code == 416 && x.start > 0 && range_total == x.start) { rc = DELTAFIN_OK; break; } /* .part was complete */
        char why[CURL_ERROR_SIZE + 64];
        const bool transient = failure(cc, code, errbuf, &o, why, sizeof why);
        if (code == 416) { /* .part larger than the file or the file changed: start over once */
            if (truncate(part, 0) != 0) { rc = deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s", part, strerror(errno)); break; }
            if (md) { EVP_DigestInit_ex(md, EVP_sha256(), NULL); hashed = 0; }
            deltafin_log(DELTAFIN_LOG_WARN, "%s: server refused to resume at %llu; starting over", url,
                   (unsigned long long)x.start);
        }
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
    if (o.expect_gguf && deltafin_file_check_one(part) < 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", deltafin_errmsg());
        return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s: the download is not a complete GGUF file: %s (kept as %s; run "
                                  "again to resume, or delete it)", out_path, why, part);
    }
    if (rename(part, out_path) != 0) return deltafin_set_error(DELTAFIN_ERR_IO, "rename %s -> %s: %s", part, out_path, strerror(errno));
    return DELTAFIN_OK;
}
