/* gemm_f32.c — F32 matrix products of a batch in ggml's order: llamafile's tinyBLAS, which
 * ggml's mul_mat uses for F32 weights and 2+ tokens (see kernels.h, df_gemm_f32_ggml).
 * Threading: reentrant. */
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/kernels_impl.h"

/* vector width in floats of the selected table's ggml build (1: no tinyBLAS path) */
static int vec_width(void) {
#if defined(__x86_64__)
    const char *isa = df_kernels()->name;
    if (!strcmp(isa, "avx512")) return 16;
    if (!strcmp(isa, "avx2")) return 8;
#endif
    return 1;
}

#if defined(__x86_64__)
/* llamafile's tinyBLAS F32 GEMM: every output is one vector accumulator (16 / 8 lanes) walked
 * over n_in with FMA, then reduced (_mm512_reduce_add_ps; AVX2: halves added, then lanes
 * (0+2)+(1+3)). Tiles of 4 weight rows x 6 (AVX2: 2) tokens only for speed: each output has its own
 * accumulator, so the tiling does not change the result. Rows [r0, r1), r1 - r0 a multiple of 4. */
#define UNROLL _Pragma("GCC unroll 8")
__attribute__((target("avx512f,avx512dq,fma")))
static void gemm_f32_avx512(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx,
                            int nt, float *Y, int64_t ldy) {
    enum { RT = 6 };
    for (int64_t r = r0; r < r1; r += 4)
        for (int t0 = 0; t0 < nt; t0 += RT) {
            const float *xs[RT];
            UNROLL for (int j = 0; j < RT; j++) xs[j] = X + (int64_t)(t0 + j < nt ? t0 + j : nt - 1) * ldx;
            __m512 acc[RT][4];
            UNROLL for (int j = 0; j < RT; j++)
                UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm512_setzero_ps();
            for (int64_t l = 0; l < n_in; l += 16) {
                __m512 w[4];
                UNROLL for (int i = 0; i < 4; i++) w[i] = _mm512_loadu_ps(W + (r + i) * n_in + l);
                UNROLL for (int j = 0; j < RT; j++) {
                    const __m512 x = _mm512_loadu_ps(xs[j] + l);
                    UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm512_fmadd_ps(w[i], x, acc[j][i]);
                }
            }
            for (int j = 0; j < RT && t0 + j < nt; j++)
                UNROLL for (int i = 0; i < 4; i++) Y[(int64_t)(t0 + j) * ldy + r + i] = _mm512_reduce_add_ps(acc[j][i]);
        }
}

__attribute__((target("avx2,fma")))
static void gemm_f32_avx2(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx,
                          int nt, float *Y, int64_t ldy) {
    for (int64_t r = r0; r < r1; r += 4)
        for (int t0 = 0; t0 < nt; t0 += 2) {
            const float *xs[2];
            UNROLL for (int j = 0; j < 2; j++) xs[j] = X + (int64_t)(t0 + j < nt ? t0 + j : nt - 1) * ldx;
            __m256 acc[2][4];
            UNROLL for (int j = 0; j < 2; j++)
                UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm256_setzero_ps();
            for (int64_t l = 0; l < n_in; l += 8) {
                __m256 w[4];
                UNROLL for (int i = 0; i < 4; i++) w[i] = _mm256_loadu_ps(W + (r + i) * n_in + l);
                UNROLL for (int j = 0; j < 2; j++) {
                    const __m256 x = _mm256_loadu_ps(xs[j] + l);
                    UNROLL for (int i = 0; i < 4; i++) acc[j][i] = _mm256_fmadd_ps(w[i], x, acc[j][i]);
                }
            }
            for (int j = 0; j < 2 && t0 + j < nt; j++)
                UNROLL for (int i = 0; i < 4; i++) {
                    const __m256 v = acc[j][i];
                    __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
                    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
                    h = _mm_add_ss(h, _mm_movehdup_ps(h));
                    Y[(int64_t)(t0 + j) * ldy + r + i] = _mm_cvtss_f32(h);
                }
        }
}
#undef UNROLL
#endif

bool df_gemm_f32_ggml_applies(int64_t n_in, int64_t n_out, int nt) {
    const int w = vec_width();
    return w != 1 && nt >= 2 && n_in > 0 && n_in % w == 0 && n_out % 4 == 0;
}

void df_gemm_f32_ggml(const float *W, int64_t n_in, int64_t r0, int64_t r1, const float *X, int64_t ldx, int nt,
                      float *Y, int64_t ldy) {
#if defined(__x86_64__)
    switch (vec_width()) {
    case 16: gemm_f32_avx512(W, n_in, r0, r1, X, ldx, nt, Y, ldy); return;
    case 8: gemm_f32_avx2(W, n_in, r0, r1, X, ldx, nt, Y, ldy); return;
    default: break;
    }
#endif
    (void)W; (void)n_in; (void)r0; (void)r1; (void)X; (void)ldx; (void)nt; (void)Y; (void)ldy;
}
