/* test_dist.c — the parts of distributed runs that need no MPI (dist/dist.h): the expert
 * placement (round robin rotated by layer; balanced by a routing profile, with the profile
 * file's errors) and the single-process answers of a build without a job. The MPI exchange
 * itself is tests/test_mpi.sh; moe.c's side of a remote source is in test_model.c. */
#include "dist/dist.h"
#include "weights/expert_store.h"
#include "testlib.h"
#include <unistd.h>

static void test_round_robin(void) {
    const int L = 5, E = 10, N = 3;
    const uint8_t moe[5] = {0, 1, 1, 1, 1};
    df_dist_placement p;
    CHECK_EQ_INT(df_dist_place_counts(L, E, N, moe, NULL, &p), DF_OK);
    CHECK_STR(p.desc, "round-robin");
    int held[5][3] = {{0}};
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            int o = df_dist_owner(&p, l, e);
            if (!moe[l]) { CHECK_EQ_INT(o, -1); continue; }
            CHECK(o >= 0 && o < N);
            CHECK_EQ_INT(o, (e + l) % N);
            held[l][o]++;
        }
    int total[3] = {0};
    for (int l = 1; l < L; l++)
        for (int r = 0; r < N; r++) {
            CHECK(held[l][r] == E / N || held[l][r] == E / N + 1); /* even within a layer */
            total[r] += held[l][r];
        }
    /* the rotation moves the remainder: over 4 layers no rank holds 2 more than another */
    for (int r = 0; r < N; r++) CHECK(total[r] >= 13 && total[r] <= 14);
    df_dist_placement_free(&p);
    CHECK(p.owner == NULL);
    /* one rank owns everything */
    CHECK_EQ_INT(df_dist_place_counts(L, E, 1, moe, NULL, &p), DF_OK);
    for (int e = 0; e < E; e++) CHECK_EQ_INT(df_dist_owner(&p, 2, e), 0);
    df_dist_placement_free(&p);
    CHECK(df_dist_place_counts(L, E, 0, moe, NULL, &p) == DF_ERR_INVALID);
}

static void test_balanced(void) {
    const int L = 3, E = 8, N = 2;
    const uint8_t moe[3] = {1, 1, 1};
    double counts[3 * 8];
    /* layer 0: two hot experts, 0 and 2, that round robin puts on the same rank */
    for (int i = 0; i < L * E; i++) counts[i] = 1;
    counts[0] = 100; counts[2] = 90;
    df_dist_placement rr, b;
    CHECK_EQ_INT(df_dist_place_counts(L, E, N, moe, NULL, &rr), DF_OK);
    CHECK_EQ_INT(df_dist_place_counts(L, E, N, moe, counts, &b), DF_OK);
    CHECK_EQ_INT(df_dist_owner(&rr, 0, 0), df_dist_owner(&rr, 0, 2)); /* round robin: same rank */
    CHECK(df_dist_owner(&b, 0, 0) != df_dist_owner(&b, 0, 2));       /* balanced: split */
    for (int l = 0; l < L; l++) {
        double load[2] = {0};
        int held[2] = {0};
        for (int e = 0; e < E; e++) {
            int o = df_dist_owner(&b, l, e);
            CHECK(o == 0 || o == 1);
            load[o] += counts[l * E + e];
            held[o]++;
        }
        CHECK_EQ_INT(held[0], 4); /* at most ceil(E/N) each: memory stays even */
        CHECK_EQ_INT(held[1], 4);
        if (l == 0) CHECK(fabs(load[0] - load[1]) <= 10.0 + 1e-9);
    }
    df_dist_placement_free(&rr);
    df_dist_placement_free(&b);
}

static void test_profile_file(void) {
    char dir[] = "/tmp/df_test_dist.XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0); return; }
    char path[256];
    snprintf(path, sizeof path, "%s/hot.txt", dir);
    /* the profile format `deltafin profile` writes: counts summed per (layer, expert) */
    FILE *f = fopen(path, "w");
    fprintf(f, "layer expert count\n1 3 50\n1 3 5\n2 0 7\n");
    fclose(f);
    double c[3 * 4];
    CHECK_EQ_INT(df_store_read_route_counts(path, "--dist-placement", 3, 4, c), DF_OK);
    CHECK_NEAR(c[1 * 4 + 3], 55.0, 0);
    CHECK_NEAR(c[2 * 4 + 0], 7.0, 0);
    CHECK_NEAR(c[0], 0.0, 0);
    f = fopen(path, "w");
    fprintf(f, "1 9 50\n");
    fclose(f);
    CHECK(df_store_read_route_counts(path, "--dist-placement", 3, 4, c) == DF_ERR_FORMAT);
    CHECK(strstr(df_errmsg(), "hot.txt:1: layer 1 expert 9 out of range") != NULL);
    unlink(path);
    CHECK(df_store_read_route_counts(path, "--dist-placement", 3, 4, c) < 0);
    CHECK(strstr(df_errmsg(), "--dist-placement") != NULL);
    rmdir(dir);
}

static void test_world(void) {
    /* not started by a launcher: one process, whatever the build */
    df_dist_opts o = {.timeout_s = 0};
    CHECK_EQ_INT(df_dist_init(NULL, NULL, &o), DF_OK);
    CHECK_EQ_INT(df_dist_rank(), 0);
    CHECK_EQ_INT(df_dist_size(), 1);
    CHECK(!df_dist_active());
    CHECK_NEAR(df_dist_options()->timeout_s, 60.0, 0); /* 0 = the default */
    CHECK_EQ_INT(df_dist_finalize(3), 3);
}

int main(void) {
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK")) {
        printf("test_dist: skipped inside an MPI job\n");
        return 0;
    }
    test_round_robin();
    test_balanced();
    test_profile_file();
    test_world();
    TEST_MAIN_END("test_dist");
}
