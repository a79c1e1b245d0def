/* test_utf8.c — base/utf8: strict decoding against a reference built from the encoder (every
 * code point, every 1-3 byte string), the permissive (llama.cpp) rules, valid prefixes of a
 * stream, maximal-subpart replacement (Unicode 15 §3.9 table 3-8), the permissive recode and
 * counts. */
#include "testlib.h"
#include "base/utf8.h"

/* strict validity of s[0..n) by definition: the shortest encoding of a scalar value */
static int ref_strict(const unsigned char *s, size_t n, uint32_t *cp) {
    for (int len = 1; len <= 4 && (size_t)len <= n; len++) {
        uint32_t v;
        if (len == 1) { if (s[0] >= 0x80) continue; v = s[0]; }
        else {
            unsigned lead_mask = len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07;
            unsigned lead_tag = len == 2 ? 0xC0 : len == 3 ? 0xE0 : 0xF0;
            if ((s[0] & ~lead_mask) != lead_tag) continue;
            v = s[0] & lead_mask;
            bool ok = true;
            for (int i = 1; i < len; i++) {
                if ((s[i] & 0xC0) != 0x80) ok = false;
                v = (v << 6) | (s[i] & 0x3F);
            }
            if (!ok) continue;
        }
        char enc[4];
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) continue;
        if (df_utf8_encode(v, enc) != len || memcmp(enc, s, (size_t)len)) continue;
        *cp = v;
        return len;
    }
    return 0;
}

static void test_strict_exhaustive(void) {
    int bad = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        char e[4];
        int l = df_utf8_encode(cp, e);
        uint32_t got = 0;
        int r = df_utf8_decode(e, (size_t)l, DF_UTF8_STRICT, &got);
        bool sur = cp >= 0xD800 && cp <= 0xDFFF;
        if (sur ? r != 0 : (r != l || got != cp)) bad++;
        if (!sur && l > 1 && df_utf8_decode(e, (size_t)l - 1, DF_UTF8_STRICT, &got) != -1) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* every string of 3 bytes: the decoder's length agrees with the reference */
    bad = 0;
    unsigned char s[3];
    for (uint32_t x = 0; x < (1u << 24); x++) {
        s[0] = (unsigned char)(x >> 16); s[1] = (unsigned char)(x >> 8); s[2] = (unsigned char)x;
        uint32_t a = 0, b = 0;
        int r = df_utf8_decode((const char *)s, 3, DF_UTF8_STRICT, &a);
        int w = ref_strict(s, 3, &b);
        if ((r > 0 ? r : 0) != w || (w && a != b)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_decode_modes(void) {
    uint32_t cp;
    CHECK_EQ_INT(df_utf8_decode("\xC0\x80", 2, DF_UTF8_STRICT, &cp), 0);       /* overlong */
    CHECK_EQ_INT(df_utf8_decode("\xC0\x80", 2, DF_UTF8_PERMISSIVE, &cp), 2);
    CHECK_EQ_INT(cp, 0);
    CHECK_EQ_INT(df_utf8_decode("\xED\xA0\x80", 3, DF_UTF8_STRICT, &cp), 0);   /* surrogate */
    CHECK_EQ_INT(df_utf8_decode("\xED\xA0\x80", 3, DF_UTF8_PERMISSIVE, &cp), 3);
    CHECK_EQ_INT(cp, 0xD800);
    CHECK_EQ_INT(df_utf8_decode("\xF7\xBF\xBF\xBF", 4, DF_UTF8_PERMISSIVE, &cp), 4);
    CHECK_EQ_INT(cp, 0x1FFFFF);
    CHECK_EQ_INT(df_utf8_decode("\xF8\x80\x80\x80", 4, DF_UTF8_PERMISSIVE, &cp), 0);
    CHECK_EQ_INT(df_utf8_decode("\x80", 1, DF_UTF8_PERMISSIVE, &cp), 0);
    CHECK_EQ_INT(df_utf8_decode("\xE2\x82", 2, DF_UTF8_PERMISSIVE, &cp), -1);
    CHECK_EQ_INT(df_utf8_decode("\xE2\x41", 2, DF_UTF8_PERMISSIVE, &cp), 0);
    CHECK_EQ_INT(df_utf8_decode("\xE0\x80", 2, DF_UTF8_STRICT, &cp), 0);       /* can never be valid */
    CHECK_EQ_INT(df_utf8_decode("\xF0\x9F\x98", 3, DF_UTF8_STRICT, &cp), -1);
    CHECK_EQ_INT(df_utf8_decode("\xF0\x9F\x98\x80", 4, DF_UTF8_STRICT, &cp), 4);
    CHECK_EQ_INT(cp, 0x1F600);
    /* lead lengths: llama.cpp's nibble table */
    CHECK_EQ_INT(df_utf8_lead_len('a'), 1);
    CHECK_EQ_INT(df_utf8_lead_len(0x80), 1);
    CHECK_EQ_INT(df_utf8_lead_len(0xC3), 2);
    CHECK_EQ_INT(df_utf8_lead_len(0xE2), 3);
    CHECK_EQ_INT(df_utf8_lead_len(0xF8), 4);
}

static void test_prefix_and_replace(void) {
    bool more;
    CHECK_EQ_INT(df_utf8_valid_prefix("ab\xE2\x82", 4, &more), 2);
    CHECK(more);
    CHECK_EQ_INT(df_utf8_valid_prefix("ab\xE2\x82\xAC", 5, &more), 5);
    CHECK(!more);
    CHECK_EQ_INT(df_utf8_valid_prefix("a\xC0\x80", 3, &more), 1);
    CHECK(!more);
    CHECK_EQ_INT(df_utf8_valid_prefix("\xED\xA0\x80", 3, &more), 0);
    CHECK(!more);
    static const char mixed[] = "0123456789abcdef\xC3\xA9xyz0123456789";
    CHECK_EQ_INT(df_utf8_valid_prefix(mixed, sizeof mixed - 1, NULL), sizeof mixed - 1);
    CHECK_EQ_INT(df_utf8_valid_prefix(mixed, 17, &more), 16); /* cut inside U+00E9 */
    CHECK(more);
    CHECK_EQ_INT(df_utf8_valid_prefix("0123456789abcdef\xC3", 17, &more), 16);
    CHECK(more);

    /* Unicode 15 table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d */
    const char in[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    char out[64];
    size_t n = df_utf8_sanitize(in, sizeof in - 1, out);
    const char want[] = "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d";
    CHECK_EQ_INT(n, sizeof want - 1);
    CHECK(n == sizeof want - 1 && !memcmp(out, want, n));
    CHECK_EQ_INT(df_utf8_valid_prefix(out, n, NULL), n);
    n = df_utf8_sanitize("\xE2\x82", 2, out); /* incomplete at the end: one subpart */
    CHECK(n == 3 && !memcmp(out, DF_UTF8_REPLACEMENT, 3));
    CHECK_EQ_INT(df_utf8_bad_span("\xF1\x80\x80\x41", 4), 3);
    CHECK_EQ_INT(df_utf8_bad_span("\xC0\xAF", 2), 1);

    /* llama.cpp's view: overlong re-encoded, stray bytes -> FFFD each, surrogates kept */
    n = df_utf8_recode_permissive("\xC1\x81\x80\xED\xA0\x80\xF4\x90\x80\x80", 10, out);
    const char want2[] = "A\xEF\xBF\xBD\xED\xA0\x80\xEF\xBF\xBD";
    CHECK(n == sizeof want2 - 1 && !memcmp(out, want2, n));

    CHECK_EQ_INT(df_utf8_count("h\xC3\xA9llo", 6, DF_UTF8_STRICT), 5);
    CHECK_EQ_INT(df_utf8_count("\xC0\x80z", 3, DF_UTF8_STRICT), 3);
    CHECK_EQ_INT(df_utf8_count("\xC0\x80z", 3, DF_UTF8_PERMISSIVE), 2);
}

int main(void) {
    test_strict_exhaustive();
    test_decode_modes();
    test_prefix_and_replace();
    TEST_MAIN_END("test_utf8");
}
