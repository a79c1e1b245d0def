/* util.c — see util.h. */
#include "base/util.h"
#include "base/env.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>

static _Thread_local char g_errmsg[2048];
static int g_log_level = DF_LOG_WARN;
static FILE *g_log_file;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

int df_err(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_errmsg, sizeof g_errmsg, fmt, ap);
    va_end(ap);
    return status;
}

int df_err_prefix(int status, const char *fmt, ...) {
    char pre[512], old[sizeof g_errmsg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, g_errmsg, sizeof old);
    /* "pre: old", truncated to the buffer (built by hand: snprintf would warn on truncation) */
    size_t cap = sizeof g_errmsg - 1, n = strnlen(pre, cap);
    memcpy(g_errmsg, pre, n);
    if (n + 2 <= cap) { memcpy(g_errmsg + n, ": ", 2); n += 2; }
    size_t m = strnlen(old, sizeof old);
    if (m > cap - n) m = cap - n;
    memcpy(g_errmsg + n, old, m);
    g_errmsg[n + m] = 0;
    return status;
}

const char *df_errmsg(void) { return g_errmsg; }
void df_err_clear(void) { g_errmsg[0] = 0; }

const char *df_status_str(int s) {
    switch (s) {
    case DF_OK: return "ok";
    case DF_ERR_IO: return "I/O error";
    case DF_ERR_FORMAT: return "malformed input";
    case DF_ERR_NOMEM: return "out of memory";
    case DF_ERR_INVALID: return "invalid argument";
    case DF_ERR_UNSUPPORTED: return "unsupported";
    case DF_ERR_RANGE: return "out of range";
    case DF_ERR_CANCELLED: return "cancelled";
    case DF_ERR_INTERNAL: return "internal error";
    case DF_ERR_CHECKSUM: return "checksum mismatch";
    case DF_ERR_NOTFOUND: return "not found";
    default: return "error";
    }
}

void df_log_set_level(int level) { g_log_level = level; }
int df_log_get_level(void) { return g_log_level; }
void df_log_set_file(FILE *f) { g_log_file = f; }
static char g_log_tag[32];
void df_log_set_tag(const char *tag) { snprintf(g_log_tag, sizeof g_log_tag, "%s", tag ? tag : ""); }

void df_log(int level, const char *fmt, ...) {
    if (level > g_log_level) return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    FILE *f = g_log_file ? g_log_file : stderr;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g_log_mu);
    if (g_log_tag[0]) fprintf(f, "deltafin[%s]: %s: ", g_log_tag, names[level < 0 ? 0 : level > 3 ? 3 : level]);
    else fprintf(f, "deltafin: %s: ", names[level < 0 ? 0 : level > 3 ? 3 : level]);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
    pthread_mutex_unlock(&g_log_mu);
    va_end(ap);
}

_Noreturn void df_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "deltafin: internal invariant broken: %s (%s:%d)\n", expr, file, line);
    abort();
}

void *df_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) df_err(DF_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}
void *df_calloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) df_err(DF_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, sz);
    return p;
}
void *df_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) df_err(DF_ERR_NOMEM, "out of memory reallocating %zu bytes", n);
    return q;
}
void *df_aligned_alloc(size_t align, size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : align) != 0) {
        df_err(DF_ERR_NOMEM, "out of memory allocating %zu aligned bytes", n);
        return NULL;
    }
    return p;
}
char *df_strdup(const char *s) { return df_strndup(s, strlen(s)); }
char *df_strndup(const char *s, size_t n) {
    char *p = df_malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

float df_f16_to_f32_slow(df_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else { /* subnormal: normalize */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            man &= 0x3ff;
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return df_bits_f32(u);
}

df_f16 df_f32_to_f16(float f) {
    /* Round-to-nearest-even, overflow to inf, NaN -> quiet NaN (same bit pattern as F16C). */
    uint32_t x = df_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return (df_f16)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    if (ax >= 0x477ff000) return (df_f16)(sign | 0x7c00); /* rounds to >= 65520 -> inf */
    if (ax < 0x38800000) { /* subnormal or zero in f16 */
        if (ax < 0x33000000) return (df_f16)sign; /* < 2^-25 rounds to 0 */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (df_f16)(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (df_f16)(sign | r);
}

float df_f16_table[65536];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void init_once(void) {
    for (uint32_t i = 0; i < 65536; i++) df_f16_table[i] = df_f16_to_f32_slow((df_f16)i);
    if (df_env()->log_level >= 0) df_log_set_level(df_env()->log_level);
}
void df_init(void) { pthread_once(&g_once, init_once); }

uint64_t df_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, key, kl)) { v = strtoull(line + kl, NULL, 10); break; }
    }
    fclose(f);
    return v * 1024;
}
uint64_t df_peak_rss(void) { return proc_status_kb("VmHWM:"); }
uint64_t df_cur_rss(void) { return proc_status_kb("VmRSS:"); }
uint64_t df_locked_bytes(void) { return proc_status_kb("VmLck:"); }

int df_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return df_err(DF_ERR_INVALID, "empty size");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0 || !isfinite(v)) return df_err(DF_ERR_INVALID, "invalid size '%s'", s);
    double mul = 1;
    while (*end == ' ') end++;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return df_err(DF_ERR_INVALID, "invalid size '%s' (use e.g. 512M, 20G)", s);
    double r = v * mul;
    if (r > 1.8e19) return df_err(DF_ERR_INVALID, "size '%s' too large", s);
    *out = (uint64_t)r;
    return DF_OK;
}

const char *df_fmt_bytes(uint64_t n, char *buf, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 4) { v /= 1024; i++; }
    if (i == 0) snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else snprintf(buf, cap, "%.2f %s", v, u[i]);
    return buf;
}

int df_read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return df_err(DF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = df_malloc(cap + 1);
    if (!buf) { fclose(f); return DF_ERR_NOMEM; }
    for (;;) {
        if (n == cap) {
            char *nb = df_realloc(buf, cap * 2 + 1);
            if (!nb) { free(buf); fclose(f); return DF_ERR_NOMEM; }
            buf = nb; cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); return df_err(DF_ERR_IO, "%s: read error", path); }
    buf[n] = 0;
    *data = buf;
    if (len) *len = n;
    return DF_OK;
}

#include "deltafin.h"
const char *deltafin_errmsg(void) { return df_errmsg(); }
