/* quant_cases.h — deterministic rows for checking the quantizers against ggml's on the cases
 * random models rarely hold: all-zero and sparse blocks, ternary and repeated values (ties in
 * IQ1's sort), one sign only, tiny and large scales, and importance matrices with zeros. Shared
 * by tests/test_quant.c and scripts/quant_oracle.c (which records ggml_quantize_chunk's bytes
 * in tests/data/expected/quantize/ggml_cases.tsv); only integer arithmetic and exact float
 * conversions, so every machine builds the same floats. */
#ifndef DF_QUANT_CASES_H
#define DF_QUANT_CASES_H
#include <stdint.h>
#include <string.h>

enum { QC_ROWS = 48, QC_N = 512 };

static inline uint64_t qc_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* a value in (-8, 8) with 16 bits of mantissa, times 2^e (exact) */
static inline float qc_val(uint64_t r, int e) {
    const float v = (float)((int32_t)(r & 0xfffff) - 0x80000) * 0x1p-16f;
    return e >= 0 ? v * (float)(1u << e) : v / (float)(1u << -e);
}

/* row r of the cases: x[QC_N] */
static inline void qc_row(int r, float *x) {
    for (int j = 0; j < QC_N; j++) {
        const uint64_t h = qc_mix((uint64_t)r * 1000003u + (uint64_t)j);
        float v = qc_val(h, r % 9 == 1 ? -12 : r % 9 == 2 ? 6 : 0);
        switch (r % 8) {
        case 3: if (j < 96) v = 0; break;                          /* zero blocks */
        case 4: v = (float)((int)(h % 3) - 1); break;              /* ternary: ties */
        case 5: v = v < 0 ? -v : v; break;                         /* one sign */
        case 6: v = j % 61 == 0 ? v : 0; break;                    /* sparse */
        case 7: v = (float)((int)(h % 5) - 2) * 0.25f; break;      /* few values */
        default: break;
        }
        x[j] = r == 0 ? 0 : v;                                     /* row 0: all zero */
    }
}

/* importance matrix w of a kind: 0 smooth, 1 with zero columns */
static inline void qc_imatrix(int kind, float *w) {
    for (int j = 0; j < QC_N; j++) {
        const uint64_t h = qc_mix(0x51ed2700ull + (uint64_t)(kind * 7919 + j));
        w[j] = (float)((h & 0xffff) + 1) * 0x1p-12f;
        if (kind == 1 && j % 5 == 0) w[j] = 0;
    }
}

/* FNV-1a 64 of bytes */
static inline uint64_t qc_fnv(const void *p, size_t n, uint64_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define QC_FNV0 0xcbf29ce484222325ull
#endif
