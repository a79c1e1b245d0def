/* testlib.h — minimal test harness: CHECK()/CHECK_EQ_*() count passes and failures;
 * TEST_MAIN_END prints "<name>: N passed, M failed" and returns non-zero on failure.
 * Tests locate fixtures through df_fixture(): $DELTAFIN_FIXTURES or ../shared/fixtures. */
#ifndef DF_TESTLIB_H
#define DF_TESTLIB_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>

static int t_pass, t_fail;
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (cond) t_pass++;                                                              \
        else { t_fail++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
    } while (0)
#define CHECK_MSG(cond, ...)                                                             \
    do {                                                                                 \
        if (cond) t_pass++;                                                              \
        else { t_fail++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
               fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); }                      \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                               \
    do {                                                                                 \
        long long _a = (long long)(a), _b = (long long)(b);                              \
        if (_a == _b) t_pass++;                                                          \
        else { t_fail++; fprintf(stderr, "FAIL %s:%d: %s == %s (%lld vs %lld)\n",         \
                                 __FILE__, __LINE__, #a, #b, _a, _b); }                  \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                            \
    do {                                                                                 \
        double _a = (double)(a), _b = (double)(b);                                       \
        if (fabs(_a - _b) <= (tol)) t_pass++;                                            \
        else { t_fail++; fprintf(stderr, "FAIL %s:%d: %s ~ %s (%g vs %g, tol %g)\n",      \
                                 __FILE__, __LINE__, #a, #b, _a, _b, (double)(tol)); }   \
    } while (0)
#define CHECK_STR(a, b)                                                                  \
    do {                                                                                 \
        const char *_a = (a), *_b = (b);                                                 \
        if (_a && _b && !strcmp(_a, _b)) t_pass++;                                       \
        else { t_fail++; fprintf(stderr, "FAIL %s:%d: %s == %s (\"%s\" vs \"%s\")\n",     \
                                 __FILE__, __LINE__, #a, #b, _a ? _a : "(null)",          \
                                 _b ? _b : "(null)"); }                                  \
    } while (0)

/* xorshift64 floats in [-1, 1): the sequence the recorded ggml hashes of test_attn_gqa and
 * test_ggml_order were computed on (*s: the generator state). */
static inline float df_test_frand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}
/* FNV-1a over the bytes of n floats (little-endian), as those hashes */
static inline unsigned long long df_test_fnv(const float *x, size_t n) {
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        unsigned int b;
        memcpy(&b, &x[i], 4);
        for (int j = 0; j < 4; j++) {
            h ^= (b >> (8 * j)) & 255;
            h *= 1099511628211ull;
        }
    }
    return h;
}

static inline const char *df_fixture(const char *rel, char *buf, size_t cap) {
    const char *root = getenv("DELTAFIN_FIXTURES");
    snprintf(buf, cap, "%s/%s", root ? root : "../shared/fixtures", rel);
    return buf;
}

#define TEST_MAIN_END(name)                                                              \
    do {                                                                                 \
        printf("%s: %d passed, %d failed\n", name, t_pass, t_fail);                      \
        return t_fail ? 1 : 0;                                                           \
    } while (0)
#endif
