/* hub.c — see hub.h. The listing is read into memory (a GGUF repository lists tens to a few
 * thousand files: kilobytes to a few MB); a page larger than 64 MiB is refused. */
#include "app/hub.h"
#include "deltafin.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { MAX_PAGE = 64u << 20, MAX_PAGES = 64 };

const char *df_hub_endpoint(char *buf, size_t cap) {
    const char *ep = getenv("HF_ENDPOINT");
    snprintf(buf, cap, "%s", ep && *ep ? ep : "https://huggingface.co");
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '/') buf[--n] = 0;
    return buf;
}

static bool name_ok(const char *s, size_t n) {
    if (!n || s[0] == '.' || s[0] == '-') return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i])) return false;
    return true;
}

bool df_hub_spec(const char *spec, char *repo, size_t repo_cap, char *quant, size_t quant_cap) {
    if (strstr(spec, "://")) return false;
    const char *slash = strchr(spec, '/');
    if (!slash || strchr(slash + 1, '/')) return false; /* ORG/REPO/FILE is a file path */
    const char *colon = strchr(slash + 1, ':');
    size_t rl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (!name_ok(spec, (size_t)(slash - spec)) || !name_ok(slash + 1, rl - (size_t)(slash - spec) - 1)) return false;
    const char *q = colon ? colon + 1 : "Q4_K_M";
    if (!name_ok(q, strlen(q)) || rl >= repo_cap || strlen(q) >= quant_cap) return false;
    snprintf(repo, repo_cap, "%.*s", (int)rl, spec);
    snprintf(quant, quant_cap, "%s", q);
    return true;
}

typedef struct {
    char *data;
    size_t len;
    bool too_big;
    char next[4096];          /* Link: <URL>; rel="next" */
} page;

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    page *pg = ud;
    size_t n = sz * nm;
    if (pg->len + n > MAX_PAGE) { pg->too_big = true; return 0; }
    char *d = realloc(pg->data, pg->len + n + 1);
    if (!d) return 0;
    memcpy(d + pg->len, p, n);
    pg->data = d;
    pg->len += n;
    pg->data[pg->len] = 0;
    return n;
}

static size_t on_head(char *b, size_t sz, size_t nm, void *ud) {
    page *pg = ud;
    size_t n = sz * nm;
    if (n > 5 && !strncasecmp(b, "Link:", 5)) {
        char line[8192];
        snprintf(line, sizeof line, "%.*s", (int)n, b);
        for (char *lt = strchr(line, '<'); lt; lt = strchr(lt + 1, '<')) {
            char *gt = strchr(lt, '>');
            if (!gt) break;
            char *semi = gt + 1;
            char *comma = strchr(semi, ',');
            if (comma) *comma = 0;
            if (strstr(semi, "rel=\"next\"") && (size_t)(gt - lt - 1) < sizeof pg->next)
                snprintf(pg->next, sizeof pg->next, "%.*s", (int)(gt - lt - 1), lt + 1);
            if (!comma) break;
            *comma = ',';
        }
    }
    return n;
}

/* GET url into pg (status checked). */
static int get_page(const char *url, const df_download_opts *o, page *pg) {
    CURL *c = curl_easy_init();
    if (!c) return deltafin_set_error(DELTAFIN_ERR_INTERNAL, "curl_easy_init failed");
    char errbuf[CURL_ERROR_SIZE] = "", agent[96];
    snprintf(agent, sizeof agent, "deltafin-pull/%s", deltafin_commit());
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, agent);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, o ? o->connect_timeout_s : 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, o ? o->stall_timeout_s : 60L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, pg);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, pg);
    if (o && o->bearer_token) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, o->bearer_token);
    }
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    if (pg->too_big) return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s: the file list is larger than %u MiB", url, MAX_PAGE >> 20);
    if (cc != CURLE_OK)
        return deltafin_set_error(DELTAFIN_ERR_IO, "%s: %s%s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc),
                                  cc == CURLE_COULDNT_RESOLVE_HOST ? " (the host name does not resolve)" : "");
    if (code == 401 || code == 403)
        return deltafin_set_error(DELTAFIN_ERR_IO, "%s: HTTP %ld (gated or private: set HF_TOKEN or use --token)", url, code);
    if (code == 404) return deltafin_set_error(DELTAFIN_ERR_NOTFOUND, "%s: HTTP 404: no such repository or revision", url);
    if (code != 200) return deltafin_set_error(DELTAFIN_ERR_IO, "%s: HTTP %ld", url, code);
    return DELTAFIN_OK;
}

/* Does `word` (a quantization) appear in path as a whole word: a folder name, or a piece of the
 * file name between '-', '.' and '_'-free boundaries ("Model-Q4_K_M-00001-of-00002.gguf")? */
static bool has_word(const char *path, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = path; (p = strcasestr(p, word)); p++) {
        bool start = p == path || strchr("/-.", p[-1]);
        bool end = strchr("/-.", p[wl]) != NULL || !p[wl];
        if (start && end) return true;
    }
    return false;
}

static bool ends_gguf(const char *p) {
    size_t n = strlen(p);
    return n > 5 && !strcasecmp(p + n - 5, ".gguf");
}

/* Quantization names in the listing, for the message when nothing matches. */
static void list_quants(cJSON *const *items, int n, char *out, size_t cap) {
    out[0] = 0;
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(items[i], "path"));
        const char *b = p ? strrchr(p, '/') : NULL;
        b = b ? b + 1 : p;
        if (!b || !ends_gguf(b) || strcasestr(b, "mmproj")) continue;
        /* the piece after the last '-' or '.' that starts with Q, IQ, F, BF, MXFP or TQ */
        char tok[64] = "";
        for (const char *s = b; *s; s++) {
            if (s != b && !strchr("-.", s[-1])) continue;
            size_t l = strcspn(s, "-.");
            if (l && l < sizeof tok &&
                (((s[0] == 'Q' || s[0] == 'q') && isdigit((unsigned char)s[1])) || !strncasecmp(s, "IQ", 2) ||
                 !strncasecmp(s, "BF16", 4) || !strncasecmp(s, "F16", 3) || !strncasecmp(s, "F32", 3) ||
                 !strncasecmp(s, "MXFP", 4) || !strncasecmp(s, "TQ", 2)))
                snprintf(tok, sizeof tok, "%.*s", (int)l, s);
        }
        if (!tok[0] || strstr(out, tok)) continue;
        int k = snprintf(out + w, cap - w, "%s%s", w ? ", " : "", tok);
        if (k < 0 || (size_t)k >= cap - w) break;
        w += (size_t)k;
    }
    if (!w) snprintf(out, cap, "no .gguf files");
}

/* The matching files: one file, or all parts of one split model. */
static int pick(cJSON *const *items, int n, const char *repo, const char *quant, const char *base, df_hub_file **files,
                int *nf) {
    int *hit = calloc((size_t)n + 1, sizeof *hit), nh = 0;
    if (!hit) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(items[i], "path"));
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(items[i], "type"));
        if (p && (!t || !strcmp(t, "file")) && ends_gguf(p) && !strcasestr(p, "mmproj") && has_word(p, quant)) hit[nh++] = i;
    }
    char avail[1024];
    int rc = DELTAFIN_OK;
    /* several hits must be the parts of one split model: same name but for the part number */
    int k0 = 0, parts = 0;
    size_t at0 = 0;
    const char *first = nh ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(items[hit[0]], "path")) : NULL;
    bool split = first && df_split_name(first, &k0, &parts, &at0);
    bool one_set = nh > 0;
    for (int h = 1; h < nh && one_set; h++) {
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(items[hit[h]], "path"));
        int k, c;
        size_t at;
        one_set = split && df_split_name(p, &k, &c, &at) && c == parts && at == at0 && !strncmp(p, first, at0);
    }
    if (!nh) {
        list_quants(items, n, avail, sizeof avail);
        rc = deltafin_set_error(DELTAFIN_ERR_NOTFOUND, "%s: no .gguf file for quantization '%s' (the repository has: %s)",
                                repo, quant, avail);
    } else if (!one_set || (split ? nh != parts : nh != 1)) {
        char names[1024] = "";
        size_t w = 0;
        for (int h = 0; h < nh && w + 2 < sizeof names; h++) {
            int k = snprintf(names + w, sizeof names - w, "%s%s", h ? ", " : "",
                             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(items[hit[h]], "path")));
            if (k < 0) break;
            w += (size_t)k < sizeof names - w ? (size_t)k : sizeof names - w - 1;
        }
        if (one_set)
            rc = deltafin_set_error(DELTAFIN_ERR_NOTFOUND, "%s:%s: the listing has %d of the %d parts of the split model "
                                    "(%s)", repo, quant, nh, parts, names);
        else
            rc = deltafin_set_error(DELTAFIN_ERR_INVALID, "%s:%s: several files match (%s); name one as %s/FILE", repo,
                                    quant, names, repo);
    }
    if (rc) { free(hit); return rc; }
    df_hub_file *f = calloc((size_t)nh, sizeof *f);
    if (!f) { free(hit); return deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory"); }
    for (int h = 0; h < nh; h++) {
        cJSON *it = items[hit[h]];
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "path"));
        int k = h + 1;
        if (split) df_split_name(p, &k, NULL, NULL);
        df_hub_file *d = &f[k - 1];
        if (d->path[0]) {
            free(f);
            free(hit);
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%s: the listing has part %d twice", repo, quant, k);
        }
        snprintf(d->path, sizeof d->path, "%s", p);
        snprintf(d->url, sizeof d->url, "%s/%s/resolve/main/%s", base, repo, p);
        cJSON *lfs = cJSON_GetObjectItemCaseSensitive(it, "lfs");
        const char *oid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lfs, "oid"));
        if (oid && strlen(oid) == 64) snprintf(d->sha256, sizeof d->sha256, "%s", oid);
        cJSON *sz = cJSON_GetObjectItemCaseSensitive(it, "size");
        if (cJSON_IsNumber(sz) && sz->valuedouble >= 0) d->size = (uint64_t)sz->valuedouble;
    }
    free(hit);
    *files = f;
    *nf = nh;
    return DELTAFIN_OK;
}

int df_hub_resolve(const char *repo, const char *quant, const df_download_opts *o, df_hub_file **files, int *n) {
    *files = NULL;
    *n = 0;
    char base[1024], url[4096];
    df_hub_endpoint(base, sizeof base);
    snprintf(url, sizeof url, "%s/api/models/%s/tree/main?recursive=true", base, repo);
    cJSON **items = NULL;
    cJSON *pages[MAX_PAGES] = {0};
    int n_items = 0, n_pages = 0, rc = DELTAFIN_OK;
    while (url[0] && rc == DELTAFIN_OK) {
        if (n_pages == MAX_PAGES) { rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s: more than %d pages of files", repo, MAX_PAGES); break; }
        page pg = {0};
        rc = get_page(url, o, &pg);
        cJSON *arr = rc ? NULL : cJSON_ParseWithLength(pg.data ? pg.data : "", pg.len);
        if (!rc && !cJSON_IsArray(arr))
            rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s: the file list is not a JSON array (%.60s)", url,
                                    pg.data ? pg.data : "empty");
        free(pg.data);
        if (rc) { cJSON_Delete(arr); break; }
        pages[n_pages++] = arr;
        int m = cJSON_GetArraySize(arr);
        cJSON **ni = realloc(items, sizeof *items * (size_t)(n_items + m + 1));
        if (!ni) { rc = deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory"); break; }
        items = ni;
        for (cJSON *it = arr->child; it; it = it->next) items[n_items++] = it;
        snprintf(url, sizeof url, "%s", pg.next);
    }
    if (rc == DELTAFIN_OK) rc = pick(items, n_items, repo, quant, base, files, n);
    for (int i = 0; i < n_pages; i++) cJSON_Delete(pages[i]);
    free(items);
    return rc;
}
