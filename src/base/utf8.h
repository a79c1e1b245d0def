/* utf8.h — the engine's one UTF-8 codec: decode (two strictness modes), encode, the length a
 * lead byte announces, the valid prefix of a stream, replacement of invalid sequences, code
 * point counts. Everything that reads or writes UTF-8 (GGUF names, tokenizer, chat templates,
 * the streaming detokenizer, the server through deltafin.h) goes through these functions.
 *
 * Two decoding modes, because two behaviours are part of recorded outputs:
 *   DF_UTF8_STRICT      RFC 3629 (what a validator and the detokenizer must accept): no
 *                       overlong forms, no surrogates, nothing above U+10FFFF, leads C2..F4.
 *   DF_UTF8_PERMISSIVE  llama.cpp's unicode_cpt_from_utf8 (what the tokenizer and Jinja's
 *                       string functions see): the lead byte's high bits give the length
 *                       (110xxxxx 2, 1110xxxx 3, 11110xxx 4), the continuation bytes must be
 *                       10xxxxxx, and nothing else is checked (overlongs, surrogates and
 *                       values up to 0x1FFFFF decode).
 * Invariant: pure functions of their arguments. Threading: all reentrant. */
#ifndef DF_UTF8_H
#define DF_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { DF_UTF8_STRICT = 0, DF_UTF8_PERMISSIVE = 1 };

#define DF_UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD, 3 bytes */

/* Length of the sequence a lead byte announces, llama.cpp's table on the high nibble (its
 * unicode_len_utf8): 1 for 00..BF (ASCII and stray continuation bytes), 2 for C0..DF,
 * 3 for E0..EF, 4 for F0..FF. */
static inline int df_utf8_lead_len(unsigned char c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Decode the code point at s[0..n), n >= 1. Returns its length (1..4) and sets *cp; 0 if s
 * does not start with a valid sequence in `mode`; -1 if s[0..n) is a proper prefix of a
 * sequence that could still become valid (more bytes needed). */
static inline int df_utf8_decode(const char *s, size_t n, int mode, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the first continuation byte */
    if (mode == DF_UTF8_STRICT) {
        if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1Fu; }
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3; v = c & 0x0Fu;
            if (c == 0xE0) lo = 0xA0; /* overlong */
            if (c == 0xED) hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4; v = c & 0x07u;
            if (c == 0xF0) lo = 0x90; /* overlong */
            if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
        } else return 0;
    } else {
        if ((c & 0x40) == 0) return 0;
        else if ((c & 0x20) == 0) { len = 2; v = c & 0x1Fu; }
        else if ((c & 0x10) == 0) { len = 3; v = c & 0x0Fu; }
        else if ((c & 0x08) == 0) { len = 4; v = c & 0x07u; }
        else return 0;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -1;
        unsigned char d = u[i];
        if (d < lo || d > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
        v = (v << 6) | (d & 0x3Fu);
    }
    *cp = v;
    return len;
}

/* Encode cp (<= 0x1FFFFF; callers keep to U+10FFFF) into out[0..4). Returns 1..4. */
static inline int df_utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the longest prefix of s[0..n) made of complete, strictly valid sequences (so s
 * is valid UTF-8 iff the result is n). *need_more (may be NULL) is set when the rest is a
 * valid but incomplete sequence, i.e. a stream may still complete it. */
size_t df_utf8_valid_prefix(const char *s, size_t n, bool *need_more);

/* Length (>= 1) of the maximal invalid subpart at s[0..n), n >= 1, where s does not start
 * with a valid sequence (Unicode's "substitution of maximal subparts", as WHATWG and
 * Python's errors='replace'): the longest prefix that a stream could still complete. */
size_t df_utf8_bad_span(const char *s, size_t n);

/* Copy s[0..n) to out, each maximal invalid subpart (strict mode) replaced by U+FFFD: the
 * result is valid UTF-8. out needs 3 * n bytes (not NUL-terminated). Returns its length. */
size_t df_utf8_sanitize(const char *s, size_t n, char *out);

/* llama.cpp's unicode_cpts_from_utf8 + unicode_cpt_to_utf8 round trip (the tokenizer's view
 * of arbitrary bytes): permissive decoding, each byte that starts no sequence becomes
 * U+FFFD, overlong forms are re-encoded shortest, values above U+10FFFF become U+FFFD,
 * surrogates are kept (3 bytes each). out needs 3 * n bytes. Returns its length. */
size_t df_utf8_recode_permissive(const char *s, size_t n, char *out);

/* Number of code points in s[0..n) in `mode`; a byte that starts no sequence counts as one. */
size_t df_utf8_count(const char *s, size_t n, int mode);

#endif
