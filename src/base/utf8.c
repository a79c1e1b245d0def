/* utf8.c — validation, replacement and counting over the codec in utf8.h. */
#include "base/utf8.h"

#include <string.h>

size_t df_utf8_valid_prefix(const char *s, size_t n, bool *need_more) {
    size_t i = 0;
    int l = 1;
    while (i < n) {
        if (i + 8 <= n) { /* ASCII runs 8 bytes at a time: most text is mostly ASCII */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) { i += 8; continue; }
        }
        uint32_t cp;
        l = df_utf8_decode(s + i, n - i, DF_UTF8_STRICT, &cp);
        if (l <= 0) break;
        i += (size_t)l;
    }
    if (need_more) *need_more = i < n && l < 0;
    return i;
}

size_t df_utf8_bad_span(const char *s, size_t n) {
    /* a strict lead byte allows at most 3 bytes before the sequence is complete */
    for (size_t k = n < 3 ? n : 3; k >= 2; k--) {
        uint32_t cp;
        if (df_utf8_decode(s, k, DF_UTF8_STRICT, &cp) < 0) return k;
    }
    return 1;
}

size_t df_utf8_sanitize(const char *s, size_t n, char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        size_t ok = df_utf8_valid_prefix(s + i, n - i, NULL);
        memcpy(out + o, s + i, ok);
        o += ok;
        i += ok;
        if (i == n) break;
        memcpy(out + o, DF_UTF8_REPLACEMENT, 3);
        o += 3;
        i += df_utf8_bad_span(s + i, n - i);
    }
    return o;
}

size_t df_utf8_recode_permissive(const char *s, size_t n, char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        int l = df_utf8_decode(s + i, n - i, DF_UTF8_PERMISSIVE, &cp);
        if (l == 1) { out[o++] = s[i++]; continue; }
        if (l <= 0) { cp = 0xFFFD; l = 1; }
        else if (cp > 0x10FFFF) cp = 0xFFFD;
        o += (size_t)df_utf8_encode(cp, out + o);
        i += (size_t)l;
    }
    return o;
}

size_t df_utf8_count(const char *s, size_t n, int mode) {
    size_t c = 0;
    for (size_t i = 0; i < n; c++) {
        uint32_t cp;
        int l = df_utf8_decode(s + i, n - i, mode, &cp);
        i += l > 0 ? (size_t)l : 1;
    }
    return c;
}
