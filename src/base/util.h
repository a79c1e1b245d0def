/* util.h — status codes, thread-local error detail, logging, checked allocation,
 * small numeric helpers (f16/bf16), timing.
 * Invariant: library code reports failures by returning a negative df_status after
 * calling df_err(), which records a human-readable detail in thread-local storage.
 * Threading: everything here is thread-safe; the error string is per thread. */
#ifndef DF_UTIL_H
#define DF_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>

typedef enum {
    DF_OK = 0,
    DF_ERR_IO = -1,          /* read/write/open failed, short read */
    DF_ERR_FORMAT = -2,      /* malformed untrusted input (file, JSON, template ...) */
    DF_ERR_NOMEM = -3,
    DF_ERR_INVALID = -4,     /* bad argument / option value */
    DF_ERR_UNSUPPORTED = -5, /* valid but not implemented (arch, tensor type) */
    DF_ERR_RANGE = -6,       /* size/overflow/limit exceeded */
    DF_ERR_CANCELLED = -7,
    DF_ERR_INTERNAL = -8,
    DF_ERR_CHECKSUM = -9,
    DF_ERR_NOTFOUND = -10,
} df_status;

/* Record a detail message for the calling thread and return `status` (so callers can
 * write `return df_err(DF_ERR_FORMAT, "%s: tensor %s: ...", path, name);`). */
int df_err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current thread's message with "prefix: " (adds context while unwinding). */
int df_err_prefix(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *df_errmsg(void);
const char *df_status_str(int status);
void df_err_clear(void);

/* Logging: library code prints only through this. Level filter set by df_log_set_level. */
enum { DF_LOG_ERROR = 0, DF_LOG_WARN = 1, DF_LOG_INFO = 2, DF_LOG_DEBUG = 3 };
void df_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void df_log_set_level(int level);
int df_log_get_level(void);
void df_log_set_file(FILE *f); /* default stderr */
/* A tag in every line ("deltafin[rank 2]: info: ..."); NULL or "" for none. */
void df_log_set_tag(const char *tag);

/* Broken internal invariant: always on, also in release builds. */
#define DF_ASSERT(cond)                                                                  \
    do {                                                                                 \
        if (!(cond)) df_assert_fail(#cond, __FILE__, __LINE__);                          \
    } while (0)
_Noreturn void df_assert_fail(const char *expr, const char *file, int line);

/* Allocation that records DF_ERR_NOMEM on failure (returns NULL). */
void *df_malloc(size_t n);
void *df_calloc(size_t n, size_t sz);
void *df_realloc(void *p, size_t n);
void *df_aligned_alloc(size_t align, size_t n); /* free with free() */
char *df_strdup(const char *s);
char *df_strndup(const char *s, size_t n);

/* Overflow-checked size arithmetic: return false on overflow. */
static inline bool df_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool df_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline uint64_t df_pad(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* Half / bfloat16 conversions (exact f16->f32; f32->f16 round-to-nearest-even). */
typedef uint16_t df_f16;
typedef uint16_t df_bf16;
static inline float df_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t df_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
float df_f16_to_f32_slow(df_f16 h);
df_f16 df_f32_to_f16(float f);
extern float df_f16_table[65536]; /* filled by df_init() */
static inline float df_f16_to_f32(df_f16 h) { return df_f16_table[h]; }
static inline float df_bf16_to_f32(df_bf16 h) { return df_bits_f32((uint32_t)h << 16); }
static inline df_bf16 df_f32_to_bf16(float f) {
    uint32_t u = df_f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (df_bf16)((u >> 16) | 64);
    return (df_bf16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* One-time process init (the F16 table, the log level). Idempotent, thread-safe. The kernel
 * table is chosen by kernels/ (df_kernels_init), not here: base calls nothing above it. */
void df_init(void);

uint64_t df_time_ns(void);
/* Peak resident set size of this process in bytes (from /proc/self/status VmHWM). */
uint64_t df_peak_rss(void);
uint64_t df_cur_rss(void);
/* Bytes this process holds locked in RAM (mlock; VmLck). */
uint64_t df_locked_bytes(void);

/* Parse "20G", "512M", "1.5GiB", "4096" into bytes. Returns DF_OK or DF_ERR_INVALID. */
int df_parse_size(const char *s, uint64_t *out);
/* Format bytes as "1.23 GiB" into buf. */
const char *df_fmt_bytes(uint64_t n, char *buf, size_t cap);

/* Read a whole file (small files only: configs, text). Caller frees *data. */
int df_read_file(const char *path, char **data, size_t *len);

#endif
