/* test_quant.c — type table, names, row sizes, quantize/dequantize round trips, and hand-checked
 * blocks for the reference quantizers. */
#include <math.h>
#include <openssl/evp.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "kernels/quant_impl.h"
#include "quant_cases.h"
#include "testlib.h"

static uint64_t g_rng = 0x1234567887654321ull;
static float rnd_normal(void) {
    float u = 0;
    for (int i = 0; i < 4; i++) {
        g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
        u += (float)((g_rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
    }
    return u * 0.8660254f;
}

static void test_table(void) {
    /* formats.md §1.6 */
    static const struct { int id; const char *name; int blck, bytes; } want[] = {
        {0, "F32", 1, 4}, {1, "F16", 1, 2}, {2, "Q4_0", 32, 18}, {3, "Q4_1", 32, 20},
        {6, "Q5_0", 32, 22}, {7, "Q5_1", 32, 24}, {8, "Q8_0", 32, 34}, {9, "Q8_1", 32, 36},
        {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144},
        {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292},
        {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98},
        {19, "IQ1_S", 256, 50}, {20, "IQ4_NL", 32, 18}, {21, "IQ3_S", 256, 110},
        {22, "IQ2_S", 256, 82}, {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1}, {25, "I16", 1, 2},
        {26, "I32", 1, 4}, {27, "I64", 1, 8}, {28, "F64", 1, 8}, {29, "IQ1_M", 256, 56},
        {30, "BF16", 1, 2}, {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66},
        {39, "MXFP4", 32, 17}, {40, "NVFP4", 64, 36}, {41, "Q1_0", 128, 18}, {42, "Q2_0", 64, 18},
        {43, "Q4_K_X8", 256, 144}, /* in-memory repacked layout, not a file type */
    };
    int seen[DF_TYPE_COUNT] = {0};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const df_type_traits *t = df_type_info(want[i].id);
        CHECK_MSG(t != NULL, "type %d missing", want[i].id);
        if (!t) continue;
        seen[want[i].id] = 1;
        CHECK_STR(t->name, want[i].name);
        CHECK_EQ_INT(t->blck, want[i].blck);
        CHECK_EQ_INT(t->bytes, want[i].bytes);
        CHECK_EQ_INT(df_type_from_name(want[i].name), want[i].id == DF_TYPE_Q4_K_X8 ? -1 : want[i].id);
        CHECK(df_type_info(t->vec_dot_type) != NULL);
    }
    for (int id = -3; id < DF_TYPE_COUNT + 5; id++)
        if (id < 0 || id >= DF_TYPE_COUNT || !seen[id]) CHECK_MSG(df_type_info(id) == NULL, "id %d", id);
    CHECK_EQ_INT(df_type_from_name("q4_k"), DF_TYPE_Q4_K);
    CHECK_EQ_INT(df_type_from_name("Q4_2"), -1);
    CHECK_EQ_INT(df_type_from_name("Q4_K_X8"), -1); /* no file, tool or user names the layout */
    CHECK(!df_type_info(DF_TYPE_Q4_K_X8)->can_compute && !df_type_info(DF_TYPE_Q4_K_X8)->can_quantize);
    CHECK_EQ_INT(df_type_from_name(""), -1);
    CHECK_EQ_INT(df_type_from_name(NULL), -1);
    CHECK_EQ_INT(df_type_row_bytes(DF_TYPE_Q8_0, 4096), 4096 / 32 * 34);
    CHECK_EQ_INT(df_type_row_bytes(DF_TYPE_Q4_K, 7168), 28 * 144);
    CHECK_EQ_INT(df_type_row_bytes(5, 32), 0);
    /* the struct layouts match the table */
    CHECK_EQ_INT(sizeof(df_block_q4_0), 18); CHECK_EQ_INT(sizeof(df_block_q4_1), 20);
    CHECK_EQ_INT(sizeof(df_block_q5_0), 22); CHECK_EQ_INT(sizeof(df_block_q5_1), 24);
    CHECK_EQ_INT(sizeof(df_block_q8_0), 34); CHECK_EQ_INT(sizeof(df_block_q8_1), 36);
    CHECK_EQ_INT(sizeof(df_block_mxfp4), 17); CHECK_EQ_INT(sizeof(df_block_iq4_nl), 18);
    CHECK_EQ_INT(sizeof(df_block_q2_K), 84); CHECK_EQ_INT(sizeof(df_block_q3_K), 110);
    CHECK_EQ_INT(sizeof(df_block_q4_K), 144); CHECK_EQ_INT(sizeof(df_block_q5_K), 176);
    CHECK_EQ_INT(sizeof(df_block_q6_K), 210); CHECK_EQ_INT(sizeof(df_block_q8_K), 292);
    CHECK_EQ_INT(sizeof(df_block_iq4_xs), 136); CHECK_EQ_INT(sizeof(df_block_iq2_xxs), 66);
    CHECK_EQ_INT(sizeof(df_block_iq2_xs), 74); CHECK_EQ_INT(sizeof(df_block_iq2_s), 82);
    CHECK_EQ_INT(sizeof(df_block_iq3_xxs), 98); CHECK_EQ_INT(sizeof(df_block_iq3_s), 110);
    CHECK_EQ_INT(sizeof(df_block_iq1_s), 50); CHECK_EQ_INT(sizeof(df_block_iq1_m), 56);
    CHECK_EQ_INT(sizeof(df_block_tq1_0), 54); CHECK_EQ_INT(sizeof(df_block_tq2_0), 66);
}

static void test_errors(void) {
    float x[64] = {0};
    uint8_t buf[256];
    CHECK_EQ_INT(df_quantize_row(DF_TYPE_Q8_0, x, buf, 33), DF_ERR_INVALID);
    CHECK_EQ_INT(df_dequantize_row(DF_TYPE_Q8_0, buf, x, 31), DF_ERR_INVALID);
    CHECK_EQ_INT(df_dequantize_row(4, buf, x, 32), DF_ERR_INVALID);
    CHECK_EQ_INT(df_dequantize_row(99, buf, x, 32), DF_ERR_INVALID);
    CHECK_EQ_INT(df_dequantize_row(DF_TYPE_I32, buf, x, 8), DF_ERR_UNSUPPORTED);
    CHECK_EQ_INT(df_quantize_row(DF_TYPE_F32, x, buf, 0), DF_OK);
}

/* Q8_0 reference: d = amax/127, q = roundf(x/d) (half away from zero), d stored as F16. */
static void test_q8_0_hand(void) {
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = 0;
    x[0] = 127.0f; x[1] = -63.5f; x[2] = 0.5f; x[3] = 2.5f; x[4] = -0.49f; x[5] = -127.0f;
    x[6] = 1.5f; x[7] = -2.5f; x[8] = 3.4999f;
    df_block_q8_0 b;
    CHECK_EQ_INT(df_quantize_row(DF_TYPE_Q8_0, x, &b, 32), DF_OK);
    CHECK_EQ_INT(b.d, 0x3c00); /* 1.0 */
    const int8_t want[9] = {127, -64, 1, 3, 0, -127, 2, -3, 3};
    for (int j = 0; j < 9; j++) CHECK_EQ_INT(b.qs[j], want[j]);
    for (int j = 9; j < 32; j++) CHECK_EQ_INT(b.qs[j], 0);
    /* amax = 127/64 -> d = 2^-6 exactly (F16 0x2400), id = 64 */
    for (int j = 0; j < 32; j++) x[j] = 0;
    x[0] = -127.0f / 64; x[1] = 1.5f / 64; x[2] = 0.5f / 64;
    df_quantize_row(DF_TYPE_Q8_0, x, &b, 32);
    CHECK_EQ_INT(b.d, 0x2400);
    CHECK_EQ_INT(b.qs[0], -127);
    CHECK_EQ_INT(b.qs[1], 2);  /* 1.5 -> 2 */
    CHECK_EQ_INT(b.qs[2], 1);  /* 0.5 -> 1 (away from zero) */
    /* all-zero block */
    memset(x, 0, sizeof x);
    df_quantize_row(DF_TYPE_Q8_0, x, &b, 32);
    CHECK_EQ_INT(b.d, 0);
    for (int j = 0; j < 32; j++) CHECK_EQ_INT(b.qs[j], 0);
}

static void test_q8_K_hand(void) {
    float x[256] = {0};
    x[3] = 2.0f;   /* max element (positive) -> d negative */
    x[17] = -1.0f;
    x[100] = 0.5f; /* 0.5 * -63.5 = -31.75 -> -32 */
    x[101] = 1.0f / 127.0f * 2.0f; /* -> -1 */
    df_block_q8_K b;
    CHECK_EQ_INT(df_quantize_row(DF_TYPE_Q8_K, x, &b, 256), DF_OK);
    CHECK(b.d == 1.0f / (-127.0f / 2.0f));
    CHECK_EQ_INT(b.qs[3], -127);
    CHECK_EQ_INT(b.qs[17], 64); /* 63.5 rounds to even */
    CHECK_EQ_INT(b.qs[100], -32);
    CHECK_EQ_INT(b.qs[101], -1);
    CHECK_EQ_INT(b.bsums[0], -127);
    CHECK_EQ_INT(b.bsums[1], 64);
    CHECK_EQ_INT(b.bsums[6], -33);
    memset(x, 0, sizeof x);
    df_quantize_row(DF_TYPE_Q8_K, x, &b, 256);
    CHECK(b.d == 0);
    CHECK_EQ_INT(b.bsums[5], 0);
}

static void test_q8_1_hand(void) {
    float x[32] = {0};
    x[0] = 127.0f; x[1] = -3.0f; x[20] = 10.0f;
    df_block_q8_1 b;
    df_quantize_row(DF_TYPE_Q8_1, x, &b, 32);
    CHECK_EQ_INT(b.d, 0x3c00);
    CHECK_EQ_INT(b.qs[20], 10);
    CHECK(df_f16_to_f32(b.s) == 134.0f);
}

/* Round trip: dequantize(quantize(x)) error bounded per type, relative to the row RMS, without
 * and with an importance matrix (the types that need one only with it); an importance matrix
 * that favours half the columns must make those columns' error smaller than the others'. */
static void test_roundtrip(void) {
    const int64_t n = 4096;
    float *x = malloc(n * 4), *y = malloc(n * 4), *imat = malloc(n * 4);
    uint8_t *q = malloc(n * 8);
    for (int64_t i = 0; i < n; i++) x[i] = rnd_normal();
    for (int64_t i = 0; i < n; i++) imat[i] = (i / 8) % 2 ? 100.0f : 0.01f;
    for (int t = 0; t < DF_TYPE_COUNT; t++) {
        const df_type_traits *ti = df_type_info(t);
        if (!ti || !ti->can_quantize) continue;
        for (int w = 0; w < 2; w++) {
            if (!w && df_quantize_needs_imatrix(t)) {
                CHECK_EQ_INT(df_quantize_row(t, x, q, n), DF_ERR_INVALID);
                continue;
            }
            if (df_quantize_rows(t, x, q, 1, n, w ? imat : NULL) != DF_OK) { CHECK_MSG(0, "%s quantize", ti->name); continue; }
            CHECK_EQ_INT(df_dequantize_row(t, q, y, n), DF_OK);
            double se[2] = {0, 0}, sx = 0;
            for (int64_t i = 0; i < n; i++) {
                se[(i / 8) % 2] += (x[i] - y[i]) * (double)(x[i] - y[i]);
                sx += x[i] * (double)x[i];
            }
            double rel = sqrt((se[0] + se[1]) / sx);
            /* ~ 2^-bits rule of thumb with headroom */
            double bpw = 8.0 * ti->bytes / ti->blck;
            double lim = bpw >= 16 ? 1e-2 : 2.0 * pow(2.0, -(bpw - 1.0));
            if (t == DF_TYPE_F32) lim = 0;
            CHECK_MSG(rel <= lim, "%s round trip rel rms %.4g > %.4g", ti->name, rel, lim);
            /* types whose search weighs the columns: the favoured ones come out closer */
            const bool weighs = w && t != DF_TYPE_Q8_0 && t != DF_TYPE_MXFP4 && t != DF_TYPE_TQ1_0 &&
                                t != DF_TYPE_TQ2_0 && bpw < 16;
            if (weighs) CHECK_MSG(se[1] < se[0], "%s: imatrix-favoured columns err %.4g >= %.4g", ti->name, se[1], se[0]);
            printf("  %-8s %.3f bpw %s round-trip rel rms %.5f\n", ti->name, bpw, w ? "imatrix" : "       ", rel);
        }
    }
    free(x); free(y); free(q); free(imat);
}

/* `test_quant --hash-tensors FILE`: SHA-256 over all tensor data, tensors sorted by name
 * (used by tests/quantize.sh to compare with hashes of llama-quantize outputs). */
static const df_gguf *g_sort;
static int cmp_name(const void *a, const void *b) {
    return strcmp(g_sort->tensors[*(const int *)a].name, g_sort->tensors[*(const int *)b].name);
}
static int hash_tensors(const char *path) {
    df_gguf *g;
    if (df_gguf_open(path, &g)) { fprintf(stderr, "%s\n", df_errmsg()); return 1; }
    int *idx = malloc(sizeof(int) * (g->n_tensors + 1));
    for (int i = 0; i < g->n_tensors; i++) idx[i] = i;
    g_sort = g;
    qsort(idx, g->n_tensors, sizeof(int), cmp_name);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    int rc = 0;
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        const df_gguf_tensor *t = &g->tensors[idx[i]];
        void *buf = malloc(t->nbytes + 1);
        rc = df_gguf_read(g, t, 0, buf, t->nbytes);
        EVP_DigestUpdate(c, buf, t->nbytes);
        free(buf);
    }
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(c, md, &len);
    EVP_MD_CTX_free(c);
    for (unsigned i = 0; i < len; i++) printf("%02x", md[i]);
    printf("\n");
    free(idx);
    df_gguf_close(g);
    return rc ? 1 : 0;
}

/* i-quant tables: SHA-256 of the little-endian bytes as listed in formats.md §2.5. */
static void sha_hex(const void *p, size_t n, char out[65]) {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", md[i]);
}
static void test_iq_tables(void) {
    static const struct { const void *p; size_t n; const char *sha; const char *name; } tabs[] = {
        {df_iq2xxs_grid, sizeof df_iq2xxs_grid, "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54", "iq2xxs"},
        {df_iq2xs_grid, sizeof df_iq2xs_grid, "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de", "iq2xs"},
        {df_iq2s_grid, sizeof df_iq2s_grid, "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88", "iq2s"},
        {df_iq3xxs_grid, sizeof df_iq3xxs_grid, "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d", "iq3xxs"},
        {df_iq3s_grid, sizeof df_iq3s_grid, "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f", "iq3s"},
        {df_iq1s_grid, sizeof df_iq1s_grid, "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a", "iq1s"},
        {df_ksigns_iq2xs, sizeof df_ksigns_iq2xs, "a76742a603f8beca5212ecce0f1f02f11a4887fd2f7c8b15aca0ea3eb3380c31", "ksigns"},
        {df_kvalues_iq4nl, sizeof df_kvalues_iq4nl, "61aa47540aa024b5d6ddaa839b84ffe59f3d5a349af5c6c7ffcb5e0474b46163", "kvalues_iq4nl"},
    };
    for (size_t i = 0; i < sizeof tabs / sizeof *tabs; i++) {
        char h[65];
        sha_hex(tabs[i].p, tabs[i].n, h);
        CHECK_MSG(!strcmp(h, tabs[i].sha), "table %s sha %s", tabs[i].name, h);
    }
    /* ksigns is i | parity(i) << 7 */
    for (int i = 0; i < 128; i++) CHECK_EQ_INT(df_ksigns_iq2xs[i], i | ((__builtin_popcount(i) & 1) << 7));
}

/* The quantizers against ggml's on tests/quant_cases.h's rows (zero, sparse, ternary, one-sign
 * blocks; imatrices with zero columns): FNV-1a of the bytes as scripts/quant_oracle.c recorded
 * them from ggml_quantize_chunk (tests/data/expected/quantize/ggml_cases.tsv, make.sh there). */
static void test_ggml_cases(void) {
    FILE *f = fopen("tests/data/expected/quantize/ggml_cases.tsv", "r");
    CHECK_MSG(f != NULL, "tests/data/expected/quantize/ggml_cases.tsv missing");
    if (!f) return;
    float *x = malloc(sizeof(float) * QC_ROWS * QC_N), w[QC_N];
    uint8_t *dst = malloc((size_t)QC_ROWS * QC_N * 4);
    for (int r = 0; r < QC_ROWS; r++) qc_row(r, x + (size_t)r * QC_N);
    char name[32];
    int kind, n = 0;
    unsigned long long want;
    while (fscanf(f, "%31s %d %llx", name, &kind, &want) == 3) {
        const int t = df_type_from_name(name);
        CHECK_MSG(t >= 0, "unknown type %s", name);
        if (t < 0) continue;
        if (kind >= 0) qc_imatrix(kind, w);
        const int rc = df_quantize_rows(t, x, dst, QC_ROWS, QC_N, kind >= 0 ? w : NULL);
        const uint64_t got = qc_fnv(dst, (size_t)df_type_row_bytes(t, QC_N) * QC_ROWS, QC_FNV0);
        CHECK_MSG(rc == DF_OK && got == want, "%s imatrix %d: %016llx, ggml %016llx", name, kind, (unsigned long long)got, want);
        n++;
    }
    fclose(f);
    CHECK_MSG(n >= 60, "only %d ggml cases", n);
    printf("  %d type x imatrix cases checked against ggml_quantize_chunk\n", n);
    free(x);
    free(dst);
}

/* The codebooks' search form: every point maps to itself, every other level combination the
 * quantizers can form has a non-empty neighbour list of valid points, nearest first. */
static void test_iq_grids(void) {
    for (int w = 0; w < DF_IQG_COUNT; w++) {
        const df_iq_grid *g = df_iq_grid_get(w);
        CHECK_MSG(g != NULL, "grid %d", w);
        if (!g) continue;
        const int coords = g->grid8 ? 8 : 4, bits = g->grid8 ? 2 : 3, maxl = g->grid8 ? 2 : 7;
        int bad = 0, lists = 0;
        for (int u = 0; u < 1 << (bits * coords); u++) {
            int8_t pos[8];
            bool used = true;
            for (int k = 0; k < coords; k++) {
                const int l = (u >> (bits * k)) & ((1 << bits) - 1);
                used = used && l <= maxl;
                pos[k] = (int8_t)(2 * l + 1);
            }
            if (!used) continue;
            const int32_t m = g->map[u];
            if (m >= 0) {
                const int8_t *p = g->grid8 ? (const int8_t *)(g->grid8 + m) : (const int8_t *)(g->grid4 + m);
                bad += memcmp(p, pos, (size_t)coords) != 0;
                continue;
            }
            const uint16_t *nb = g->neighbours + (-m - 1);
            lists++;
            int prev = -1;
            for (int j = 1; j <= nb[0]; j++) {
                const int8_t *p = g->grid8 ? (const int8_t *)(g->grid8 + nb[j]) : (const int8_t *)(g->grid4 + nb[j]);
                int d2 = 0;
                for (int k = 0; k < coords; k++) d2 += (p[k] - pos[k]) * (p[k] - pos[k]);
                bad += nb[j] >= g->n || d2 < prev;
                prev = d2;
            }
            bad += nb[0] == 0;
        }
        CHECK_MSG(bad == 0 && lists > 0, "grid %d: %d bad entries, %d lists", w, bad, lists);
    }
}

int main(int argc, char **argv) {
    df_init();
    if (argc == 3 && !strcmp(argv[1], "--hash-tensors")) return hash_tensors(argv[2]);
    test_table();
    test_iq_tables();
    test_errors();
    test_q8_0_hand();
    test_q8_K_hand();
    test_q8_1_hand();
    test_roundtrip();
    test_iq_grids();
    test_ggml_cases();
    TEST_MAIN_END("test_quant");
}
