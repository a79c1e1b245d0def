/* x86_avx512_kq.c — AVX-512 (F/BW/VL/DQ + VNNI) dots of the K-quants other than Q4_K (Q2_K,
 * Q3_K, Q5_K, Q6_K) and of IQ4_XS / IQ2_XXS against Q8_K activations; see x86_avx512.c for
 * the conventions. Threading: pure functions. */
#include "kernels/x86_avx512_impl.h"

/* ------------------------------------------------------------------ Q5_K x Q8_K */

static void dot_q5_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q5_K *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m1 = _mm512_set1_epi8(1);
    const __m512i idx0 = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i two = _mm512_set1_epi16(2);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m128i scm = k4_scales(x[i].scales);
        const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_srli_si128(scm, 8));
        const __m256i mrep = _mm256_permutexvar_epi16(
            _mm256_set_epi16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0), mn16);
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), mrep);
        const __m256i h256 = _mm256_loadu_si256((const __m256i *)x[i].qh);
        const __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(h256), h256, 1);
        /* per-half shift of qh: [2c | 2c+1] */
        __m512i sh = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
        __m512i isum = _mm512_setzero_si512();
        __m512i idx = idx0;
        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const __m512i q4 = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), m4);
            const __m512i hb = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, sh), m1), 4);
            const __m512i q = _mm512_or_si512(q4, hb);
            const __m512i yv = _mm512_loadu_si512((const void *)(y[i].qs + 64 * c));
            const __m512i scv = _mm512_permutexvar_epi16(idx, sc16);
            isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yv), scv));
            idx = _mm512_add_epi16(idx, two);
            sh = _mm512_add_epi16(sh, two);
        }
        const float d = df_f16_to_f32(x[i].d) * y[i].d;
        const float dm = df_f16_to_f32(x[i].dmin) * y[i].d;
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mprod), _mm256_set1_ps(-dm), accm);
    }
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(accm), _mm256_extractf128_ps(accm, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    *s = hsum512(acc) + _mm_cvtss_f32(a);
}

/* ------------------------------------------------------------------ IQ4_XS x Q8_K */

static void dot_iq4_xs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq4_xs *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    const __m512i lut = lut16(df_kvalues_iq4nl);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i isum = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            const int ls0 = ((x[i].scales_l[ib / 2] & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4)) - 32;
            const int ls1 = ((x[i].scales_l[ib / 2] >> 4) | (((x[i].scales_h >> 2 * (ib + 1)) & 3) << 4)) - 32;
            const __m512i q = _mm512_shuffle_epi8(lut, nibbles2(x[i].qs + 16 * ib, x[i].qs + 16 * ib + 16));
            const __m512i p = dot_s8(q, _mm512_loadu_si512((const void *)(y[i].qs + 32 * ib)));
            const __m512i ls = _mm512_inserti64x4(_mm512_set1_epi32(ls0), _mm256_set1_epi32(ls1), 1);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, ls));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(df_f16_to_f32(x[i].d) * y[i].d), acc);
    }
    *s = hsum512(acc);
}

/* ------------------------------------------------------------------ Q2_K / Q3_K x Q8_K
 * Both: 16 sub-blocks of 16 with per-128-element halves h whose 32 bytes of 2-bit codes give
 * four 32-element groups j (shift 2j). A zmm takes groups j, j+1 (64 contiguous activations);
 * int16 lanes map to sub-blocks 8h+2j .. 8h+2j+3 in 128-bit steps (permutexvar of scales). */

/* The 16 signed 6-bit Q3_K scales as int16 (bit-parallel unpacking of the 12 bytes). */
static inline __m256i q3k_scales_vec(const uint8_t *s) {
    uint32_t a[4];
    memcpy(a, s, 12);
    const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f, t = a[2];
    a[2] = ((a[0] >> 4) & k2) | (((t >> 4) & k1) << 4);
    a[3] = ((a[1] >> 4) & k2) | (((t >> 6) & k1) << 4);
    a[0] = (a[0] & k2) | (((t >> 0) & k1) << 4);
    a[1] = (a[1] & k2) | (((t >> 2) & k1) << 4);
    /* from registers: a 16-byte load of four fresh 4-byte stores would stall store forwarding */
    const __m128i v = _mm_set_epi32((int)a[3], (int)a[2], (int)a[1], (int)a[0]);
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(v), _mm256_set1_epi16(32));
}

static void dot_q2_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q2_K *x = w;
    const df_block_q8_K *y = xq;
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m512i idx0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                          1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);
    const __m512i sh0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0xF)));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xF)));
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), mn16);
        const __m512i scz = _mm512_castsi256_si512(sc16);
        __m512i isum = _mm512_setzero_si512(), idx = idx0;
        for (int h = 0; h < 2; h++) {
            const __m256i q256 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            const __m512i Q = _mm512_inserti64x4(_mm512_castsi256_si512(q256), q256, 1);
            __m512i sh = sh0;
            for (int j = 0; j < 4; j += 2) {
                const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(Q, sh), m3);
                const __m512i yv = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h + 32 * j));
                isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yv), _mm512_permutexvar_epi16(idx, scz)));
                idx = _mm512_add_epi16(idx, four);
                sh = _mm512_add_epi16(sh, four);
            }
        }
        const float d = df_f16_to_f32(x[i].d) * y[i].d, dm = df_f16_to_f32(x[i].dmin) * y[i].d;
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mprod), _mm256_set1_ps(-dm), accm);
    }
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(accm), _mm256_extractf128_ps(accm, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    *s = hsum512(acc) + _mm_cvtss_f32(a);
}

static void dot_q3_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_q3_K *x = w;
    const df_block_q8_K *y = xq;
    const __m512i m3 = _mm512_set1_epi8(3), m1 = _mm512_set1_epi8(1);
    const __m512i idx0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                          1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4), two = _mm512_set1_epi16(2);
    const __m512i sh0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i hs0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    float sumf = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        const __m256i sc16 = q3k_scales_vec(x[i].scales);
        /* q = q2 + 4*hbit in 0..7, value q - 4: subtract 4 * Σ_k S_k bsums_k */
        const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), sc16);
        const __m512i scz = _mm512_castsi256_si512(sc16);
        const __m256i h256 = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        const __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(h256), h256, 1);
        __m512i isum = _mm512_setzero_si512(), idx = idx0, hs = hs0;
        for (int h = 0; h < 2; h++) {
            const __m256i q256 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            const __m512i Q = _mm512_inserti64x4(_mm512_castsi256_si512(q256), q256, 1);
            __m512i sh = sh0;
            for (int j = 0; j < 4; j += 2) {
                const __m512i q2 = _mm512_and_si512(_mm512_srlv_epi16(Q, sh), m3);
                const __m512i hb = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, hs), m1), 2);
                const __m512i q = _mm512_or_si512(q2, hb);
                const __m512i yv = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h + 32 * j));
                isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yv), _mm512_permutexvar_epi16(idx, scz)));
                idx = _mm512_add_epi16(idx, four);
                sh = _mm512_add_epi16(sh, four);
                hs = _mm512_add_epi16(hs, two);
            }
        }
        /* offset removed in integers (exact): Σ S (q+4h) y - 4 Σ S bsums */
        const __m256i i8 = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1)),
                                            _mm256_slli_epi32(mprod, 2));
        /* one exact integer per block, like ref.c: lanes alone would cancel only in float */
        __m128i q4 = _mm_add_epi32(_mm256_castsi256_si128(i8), _mm256_extracti128_si256(i8, 1));
        q4 = _mm_add_epi32(q4, _mm_shuffle_epi32(q4, 0x4e));
        q4 = _mm_add_epi32(q4, _mm_shuffle_epi32(q4, 0xb1));
        sumf += (df_f16_to_f32(x[i].d) * y[i].d) * (float)_mm_cvtsi128_si32(q4);
    }
    *s = sumf;
}

/* ------------------------------------------------------------------ Q6_K x Q8_K */

/* Body shared by the 1-row and 4-row kernels (NT activation rows at `stride` bytes): the
 * weight decode is done once, each row's arithmetic is the same sequence as the 1-row kernel,
 * so both give bit-identical results. */
static inline __attribute__((always_inline)) void q6k_dot_nt(int64_t n, float *s, const void *w,
                                                             const char *xq, size_t stride, const int NT) {
    const df_block_q6_K *x = w;
    const int64_t nb = n / 256;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    /* shifts of the qh bytes: [0 | 2] for the low-nibble half, [4 | 6] for the high one */
    const __m512i sh_a = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh_b = _mm512_add_epi16(sh_a, _mm512_set1_epi16(4));
    /* int16 lane j (pair of elements 2j, 2j+1) -> scale j/8 */
    const __m512i idx0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                          1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i four = _mm512_set1_epi16(4);
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < nb; i++) {
        const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales)));
        __m512i isum[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
        __m512i idx = idx0;
        for (int h = 0; h < 2; h++) {
            const __m512i L = _mm512_loadu_si512((const void *)(x[i].ql + 64 * h));
            const __m256i H256 = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            const __m512i H = _mm512_inserti64x4(_mm512_castsi256_si512(H256), H256, 1);
            const __m512i qa = _mm512_or_si512(
                _mm512_and_si512(L, m4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, sh_a), m3), 4));
            const __m512i qb = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, sh_b), m3), 4));
            const __m512i sa = _mm512_permutexvar_epi16(idx, sc16);
            idx = _mm512_add_epi16(idx, four);
            const __m512i sb = _mm512_permutexvar_epi16(idx, sc16);
            idx = _mm512_add_epi16(idx, four);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                const df_block_q8_K *y = (const df_block_q8_K *)(xq + t * stride) + i;
                const __m512i ya = _mm512_loadu_si512((const void *)(y->qs + 128 * h));
                const __m512i yb = _mm512_loadu_si512((const void *)(y->qs + 128 * h + 64));
                isum[t] = _mm512_add_epi32(isum[t], _mm512_madd_epi16(_mm512_maddubs_epi16(qa, ya), sa));
                isum[t] = _mm512_add_epi32(isum[t], _mm512_madd_epi16(_mm512_maddubs_epi16(qb, yb), sb));
            }
        }
        const float dx = df_f16_to_f32(x[i].d);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            const df_block_q8_K *y = (const df_block_q8_K *)(xq + t * stride) + i;
            /* Σ_k sc_k · bsums_k for the -32 offset, removed in integers (exact), then one
             * integer per block like ref.c (lanes alone would cancel only in float) */
            const __m256i mprod = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums),
                                                    _mm512_castsi512_si256(sc16));
            const __m256i i8 = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(isum[t]), _mm512_extracti64x4_epi64(isum[t], 1)),
                                                _mm256_slli_epi32(mprod, 5));
            __m128i q4 = _mm_add_epi32(_mm256_castsi256_si128(i8), _mm256_extracti128_si256(i8, 1));
            q4 = _mm_add_epi32(q4, _mm_shuffle_epi32(q4, 0x4e));
            q4 = _mm_add_epi32(q4, _mm_shuffle_epi32(q4, 0xb1));
            sumf[t] += (dx * y->d) * (float)_mm_cvtsi128_si32(q4);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) s[t] = sumf[t];
}

static void dot_q6_K_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    q6k_dot_nt(n, s, w, xq, 0, 1);
}
static void dot4_q6_K_q8_K(int64_t n, float *s, const void *w, const void *xq, size_t stride) {
    q6k_dot_nt(n, s, w, xq, stride, 4);
}

/* ------------------------------------------------------------------ IQ2_XXS x Q8_K */

/* Two 32-element groups per step: grid bytes (unsigned) x activations with the group's sign
 * bits applied through a byte mask, vpdpbusd, then the odd integer scales (2s+1) per group. */
__attribute__((target("bmi2"))) static void dot_iq2_xxs_q8_K(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_xxs *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i isum = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            uint32_t a[4];
            memcpy(a, x[i].qs + 4 * ib, 16);
            const uint8_t *a8 = (const uint8_t *)a;
            const __m512i g = _mm512_set_epi64(
                (long long)df_iq2xxs_grid[a8[11]], (long long)df_iq2xxs_grid[a8[10]],
                (long long)df_iq2xxs_grid[a8[9]], (long long)df_iq2xxs_grid[a8[8]],
                (long long)df_iq2xxs_grid[a8[3]], (long long)df_iq2xxs_grid[a8[2]],
                (long long)df_iq2xxs_grid[a8[1]], (long long)df_iq2xxs_grid[a8[0]]);
            /* eight 7-bit sign fields -> bytes, bit 7 = parity (= ksigns_iq2xs[] without lookups) */
            uint64_t m = _pdep_u64((a[1] & 0x0fffffffu) | (uint64_t)(a[3] & 0x0fffffffu) << 28, 0x7f7f7f7f7f7f7f7full);
            uint64_t t = (m ^ (m >> 4)) & 0x0f0f0f0f0f0f0f0full;
            t ^= t >> 2;
            t ^= t >> 1;
            m |= (t & 0x0101010101010101ull) << 7;
            const __m512i yv = _mm512_loadu_si512((const void *)(y[i].qs + 32 * ib));
            const __m512i sy = _mm512_mask_sub_epi8(yv, (__mmask64)m, _mm512_setzero_si512(), yv);
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g, sy);
            const __m512i ls = _mm512_inserti64x4(_mm512_set1_epi32((int)(2 * (a[1] >> 28) + 1)),
                                                  _mm256_set1_epi32((int)(2 * (a[3] >> 28) + 1)), 1);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, ls));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                              _mm512_set1_ps(df_f16_to_f32(x[i].d) * y[i].d * 0.125f), acc);
    }
    *s = hsum512(acc);
}

/* VBMI + BITALG form (Ice Lake, Zen 4 and later; chosen at fill time), two super-blocks A, B
 * per step. The 64 bytes of qs hold one qword per 32-element sub-block: 4 grid indices,
 * 4 x 7-bit sign fields, the scale. A 64-weight chunk k (sub-blocks 2k, 2k+1) is 8 groups g
 * of 8 weights.
 * - grid: each entry is 8 levels from {8, 25, 43}, stored as a 16-bit code (2 bits a level),
 *   split into a low-byte and a high-byte table of 256 entries; one two-source vpermb gathers
 *   the 64 indices of A and B, two vpermi2b + a blend on index bit 7 per byte table look them
 *   up, and vpunpck{l,h}bw rebuild the codes of A and of B, placed so that qword g holds the
 *   codes of group g of all four chunks (word k = chunk k); per chunk vpmultishiftqb moves
 *   level j to the low bits of byte j of qword g and vpermb maps it to its value (junk upper
 *   bits ignored);
 * - signs: vpmultishiftqb cuts the 7-bit fields of A and of B, one two-source vpermb places
 *   group g's fields of all chunks in qword g (A in bytes 0-3, B in bytes 4-7), vpermi2b maps
 *   them through ksigns_iq2xs (parity bit), vpshufbitqmb gives the 64-bit mask of a chunk,
 *   moved onto y (exact: y never holds -128);
 * - scales: per-chunk dpbusd sums (|s| <= 4*43*127 fits int16) are packed to words two chunks
 *   at a time and multiplied by 2s+1 by vpmaddwd / vpdpwssd, exact in int32.
 * Same integer sums as ref.c; one float scale per super-block, accumulated in block order.
 * (The previous one-block form took ~10 shuffles a block for the codes alone, via 16-bit
 * two-table permutes; docs/experiments.tsv.) */
static _Alignas(64) uint16_t k_iq2xxs_code[256];
static _Alignas(64) uint8_t k_iq2xxs_cl[4][64], k_iq2xxs_ch[4][64]; /* code bytes, idx 64t.. */
static _Alignas(64) uint8_t k_iq2xxs_idx[64], k_iq2xxs_psg[64], k_iq2xxs_csg[64], k_iq2xxs_lvl[64];
static _Alignas(64) uint8_t k_iq2xxs_cms[4][64], k_iq2xxs_cbs[8][64], k_iq2xxs_ls[2][64];

static void iq2xxs_tables_init(void) {
    for (int i = 0; i < 256; i++) {
        unsigned c = 0;
        for (int j = 0; j < 8; j++) {
            unsigned b = (unsigned)(df_iq2xxs_grid[i] >> (8 * j)) & 0xff;
            c |= (b == 0x08 ? 0u : b == 0x19 ? 1u : 2u) << (2 * j);
        }
        k_iq2xxs_code[i] = (uint16_t)c;
        k_iq2xxs_cl[i / 64][i % 64] = (uint8_t)(c & 0xff);
        k_iq2xxs_ch[i / 64][i % 64] = (uint8_t)(c >> 8);
    }
    /* code word w = 4g + k of a block (group g of chunk k: sub-block ib = 2k + g/4, l = g%4,
     * index byte 8ib + l); vpunpcklbw takes word 8L + r from byte 16L + r, vpunpckhbw from
     * byte 16L + 8 + r: block h's indices go to bytes 16L + 8h + r */
    for (int L = 0; L < 4; L++)
        for (int h = 0; h < 2; h++)
            for (int r = 0; r < 8; r++) {
                const int wd = 8 * L + r, g = wd / 4, k = wd % 4;
                k_iq2xxs_idx[16 * L + 8 * h + r] = (uint8_t)(64 * h + 8 * (2 * k + g / 4) + g % 4);
            }
    for (int g = 0; g < 8; g++)
        for (int k = 0; k < 4; k++) {
            k_iq2xxs_psg[8 * g + k] = (uint8_t)(8 * (2 * k + g / 4) + g % 4); /* field (ib, l) of A */
            k_iq2xxs_psg[8 * g + 4 + k] = (uint8_t)(64 + 8 * (2 * k + g / 4) + g % 4); /* of B */
        }
    for (int q = 0; q < 8; q++)
        for (int j = 0; j < 8; j++) {
            k_iq2xxs_csg[8 * q + j] = (uint8_t)(j < 4 ? 32 + 7 * j : 0); /* sign field j at bit 32+7j */
            for (int k = 0; k < 4; k++) k_iq2xxs_cms[k][8 * q + j] = (uint8_t)(16 * k + 2 * j); /* level j of chunk k */
            for (int k = 0; k < 8; k++) k_iq2xxs_cbs[k][8 * q + j] = (uint8_t)(8 * k + j); /* sign bit j of byte k */
        }
    for (int i = 0; i < 64; i++) k_iq2xxs_lvl[i] = (uint8_t)((i & 3) == 0 ? 0x08 : (i & 3) == 1 ? 0x19 : 0x2b);
    /* vpackssdw(p[2c], p[2c+1]) word 8L + r: chunk 2c + (r >= 4), sub-block 2(2c + (r >= 4)) + (L >= 2);
     * its scale 2s+1 is byte 0 of qword ib after the shift below */
    for (int c = 0; c < 2; c++)
        for (int L = 0; L < 4; L++)
            for (int r = 0; r < 8; r++) {
                const int ib = 2 * (2 * c + (r >= 4)) + (L >= 2);
                k_iq2xxs_ls[c][2 * (8 * L + r)] = (uint8_t)(8 * ib);
                k_iq2xxs_ls[c][2 * (8 * L + r) + 1] = 0; /* zeroed by the mask */
            }
}

#define DF_VBMI_BITALG __attribute__((target("avx512vbmi,avx512bitalg")))

/* Integer sum Σ_ib (2s_ib+1) Σ grid*sign*y of one super-block (h: 0 = A, 1 = B in SGN). */
static inline __attribute__((always_inline)) DF_VBMI_BITALG __m512i iq2xxs_block(__m512i codes, __m512i SGN, const int h,
                                                                                 __m512i Q, const int8_t *yq, __m512i LVL) {
    __m512i p[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m512i g = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(_mm512_load_si512(k_iq2xxs_cms[k]), codes), LVL);
        const __mmask64 sg = _mm512_bitshuffle_epi64_mask(SGN, _mm512_load_si512(k_iq2xxs_cbs[4 * h + k]));
        const __m512i yv = _mm512_loadu_si512((const void *)(yq + 64 * k));
        p[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g, _mm512_mask_sub_epi8(yv, sg, _mm512_setzero_si512(), yv));
    }
    /* 2s+1 from the top 5 bits of each qword (bit 59 is replaced by the 1) */
    const __m512i ls = _mm512_or_si512(_mm512_srli_epi64(Q, 59), _mm512_set1_epi64(1));
    const __m512i w01 = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, _mm512_load_si512(k_iq2xxs_ls[0]), ls);
    const __m512i w23 = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, _mm512_load_si512(k_iq2xxs_ls[1]), ls);
    return _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), w01), _mm512_packs_epi32(p[2], p[3]), w23);
}

DF_VBMI_BITALG static void dot_iq2_xxs_q8_K_vbmi(int64_t n, float *s, const void *w, const void *xq) {
    const df_block_iq2_xxs *x = w;
    const df_block_q8_K *y = xq;
    const int64_t nb = n / 256;
    const __m512i CL0 = _mm512_load_si512(k_iq2xxs_cl[0]), CL1 = _mm512_load_si512(k_iq2xxs_cl[1]);
    const __m512i CL2 = _mm512_load_si512(k_iq2xxs_cl[2]), CL3 = _mm512_load_si512(k_iq2xxs_cl[3]);
    const __m512i CH0 = _mm512_load_si512(k_iq2xxs_ch[0]), CH1 = _mm512_load_si512(k_iq2xxs_ch[1]);
    const __m512i CH2 = _mm512_load_si512(k_iq2xxs_ch[2]), CH3 = _mm512_load_si512(k_iq2xxs_ch[3]);
    const __m512i KS0 = _mm512_loadu_si512(df_ksigns_iq2xs), KS1 = _mm512_loadu_si512(df_ksigns_iq2xs + 64);
    const __m512i IXC = _mm512_load_si512(k_iq2xxs_idx), CSG = _mm512_load_si512(k_iq2xxs_csg);
    const __m512i PSG = _mm512_load_si512(k_iq2xxs_psg), LVL = _mm512_load_si512(k_iq2xxs_lvl);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int two = i + 1 < nb; /* an odd last block is paired with itself, B discarded */
        const __m512i QA = _mm512_loadu_si512((const void *)x[i].qs);
        const __m512i QB = two ? _mm512_loadu_si512((const void *)x[i + 1].qs) : QA;
        const __m512i IDX = _mm512_permutex2var_epi8(QA, IXC, QB);
        const __mmask64 hi7 = _mm512_movepi8_mask(IDX);
        const __m512i lo = _mm512_mask_blend_epi8(hi7, _mm512_permutex2var_epi8(CL0, IDX, CL1), _mm512_permutex2var_epi8(CL2, IDX, CL3));
        const __m512i hi = _mm512_mask_blend_epi8(hi7, _mm512_permutex2var_epi8(CH0, IDX, CH1), _mm512_permutex2var_epi8(CH2, IDX, CH3));
        const __m512i SGN = _mm512_permutex2var_epi8(KS0, _mm512_permutex2var_epi8(_mm512_multishift_epi64_epi8(CSG, QA), PSG,
                                                                                  _mm512_multishift_epi64_epi8(CSG, QB)), KS1);
        const __m512i ia = iq2xxs_block(_mm512_unpacklo_epi8(lo, hi), SGN, 0, QA, y[i].qs, LVL);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_set1_ps(df_f16_to_f32(x[i].d) * y[i].d * 0.125f), acc);
        if (two) {
            const __m512i ib = iq2xxs_block(_mm512_unpackhi_epi8(lo, hi), SGN, 1, QB, y[i + 1].qs, LVL);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib), _mm512_set1_ps(df_f16_to_f32(x[i + 1].d) * y[i + 1].d * 0.125f), acc);
        }
    }
    *s = hsum512(acc);
}

void df_kernels_fill_avx512_kq(df_kernel_table *t, const df_cpu_caps *caps) {
    t->vec_dot[DF_TYPE_Q6_K] = dot_q6_K_q8_K;
    t->vec_dot4[DF_TYPE_Q6_K] = dot4_q6_K_q8_K;
    t->vec_dot[DF_TYPE_IQ2_XXS] = dot_iq2_xxs_q8_K;
    t->vec_dot[DF_TYPE_Q5_K] = dot_q5_K_q8_K;
    t->vec_dot[DF_TYPE_IQ4_XS] = dot_iq4_xs_q8_K;
    t->vec_dot[DF_TYPE_Q2_K] = dot_q2_K_q8_K;
    t->vec_dot[DF_TYPE_Q3_K] = dot_q3_K_q8_K;
    if (caps->avx512vbmi && caps->avx512bitalg) {
        iq2xxs_tables_init();
        t->vec_dot[DF_TYPE_IQ2_XXS] = dot_iq2_xxs_q8_K_vbmi;
    }
}
