/* download.h — resumable HTTP(S) downloads of model files (libcurl) with SHA-256 checks
 * (OpenSSL EVP), used by `deltafin pull` and `deltafin verify`.
 * Invariant: bytes go to PATH.part; PATH appears (rename) only after the download is complete
 * and, when an expected SHA-256 is given, after it matched. A failed or interrupted download
 * never leaves a complete-looking PATH.
 * Threading: df_download_global_init() once per process; each call is independent. */
#ifndef DF_DOWNLOAD_H
#define DF_DOWNLOAD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *sha256;       /* expected hex digest (64 chars) or NULL */
    int max_retries;          /* attempts after the first without progress (default 5) */
    double retry_wait_s;      /* first backoff; doubles each retry, capped at 60 s (default 1) */
    long connect_timeout_s;   /* default 30 */
    long stall_timeout_s;     /* abort an attempt that moved < 1 KiB/s for this long (default 60) */
    int progress;             /* DF_PROGRESS_* (progress.h) */
    FILE *progress_out;       /* default stderr */
    const char *label;        /* progress label (default: file name) */
    const char *bearer_token; /* "Authorization: Bearer" for the URL's own host only (curl does
                                 not forward it across redirects to other hosts); NULL = none */
} df_download_opts;

df_download_opts df_download_default_opts(void);

int df_download_global_init(void);

/* Download url to out_path (via out_path.part, resumed if it exists). DELTAFIN_ERR_CHECKSUM when the
 * digest differs (the .part is kept, PATH is not created), DELTAFIN_ERR_IO for network/HTTP errors
 * after the retries (message has the URL and the HTTP status or curl error). */
int df_download(const char *url, const char *out_path, const df_download_opts *o);

/* "org/repo/path/file.gguf" -> "https://huggingface.co/org/repo/resolve/main/path/file.gguf";
 * anything with "://" is returned unchanged. DELTAFIN_ERR_INVALID for other shapes. */
int df_download_resolve(const char *spec, char *url, size_t cap);

/* If name (URL or path) ends in "-0000K-of-0000N.gguf", fills *k and *n (1-based) and the
 * offset of the "-0000K" in *at; returns false otherwise. */
bool df_split_name(const char *name, int *k, int *n, size_t *at);
/* name with its split index replaced by k (same width). Caller frees. */
char *df_split_name_part(const char *name, int k);

/* SHA-256 of a file as 64 lowercase hex chars (+ NUL). Progress as in opts (may be NULL). */
int df_sha256_file(const char *path, char hex[65], const df_download_opts *o);

/* Call fn(ud, hex, file) for every entry of a sha256sum-format manifest ("HEX  NAME" or
 * "HEX *NAME" per line, '#' comments, blank lines; hex = 64 hex digits as written). fn returns
 * 0 to go on, > 0 to stop, < 0 to fail with that status. Malformed lines: DELTAFIN_ERR_FORMAT naming
 * path:line. */
typedef int (*df_manifest_fn)(void *ud, const char *hex, const char *file);
int df_sha256_manifest_each(const char *manifest_path, df_manifest_fn fn, void *ud);

/* Parse a sha256sum-format manifest ("HEX  NAME" or "HEX *NAME" per line, '#' comments).
 * Returns the digest for `name` (compared by base name) in hex, DELTAFIN_ERR_NOTFOUND if absent,
 * DELTAFIN_ERR_FORMAT naming the line for malformed lines. */
int df_sha256_manifest_lookup(const char *manifest_path, const char *name, char hex[65]);
#endif
