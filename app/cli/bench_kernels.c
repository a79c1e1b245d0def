/* bench_kernels.c — `deltafin bench kernels`: how close the matrix-vector kernels come to the
 * machine's memory bandwidth. Measures (1) multi-threaded streaming read bandwidth over a buffer
 * far larger than the last-level cache, (2) df_matmul_q throughput in bytes of weights per second
 * for several weight types on matrices of the same size, with all threads, and prints the ratio
 * against bandwidth passes alternated with that type's passes (so both see the same load).
 * The measuring is the library's (deltafin_debug.h, src/runtime/kbench.c); this file prints.
 * Entry point bench_kernels_main() is called by app/cli/bench.c for `deltafin bench kernels`. */
#include "app/cli/flags.h"
#include "deltafin_debug.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_kernels_main(int argc, char **argv);

static const df_cmd k_bench_kernels = {
    DF_CMD_BENCH_KERNELS, "bench kernels", "usage: deltafin bench kernels [options]",
    "Memory read bandwidth, then matrix-vector throughput per weight type (bytes of weights read per\n"
    "second) on matrices much larger than the CPU caches. Each type's passes alternate with\n"
    "bandwidth passes; its ratio is taken against the best of those (same load on a shared machine).",
    NULL, 0};

int bench_kernels_main(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_bench_kernels, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const uint64_t size = S.buf_size;
    const int nthreads = S.n_threads, n_tok = S.n_tok;
    int reps = S.reps;
    const int64_t n_in = S.n_in;
    const bool json = S.json;
    const char *isa_req = S.isa, *types = S.types;
    if (size < (1u << 20)) return df_cli_usage_error(&k_bench_kernels, "--size must be at least 1M");
    if (reps < 1) reps = 1;
    if (n_in <= 0) { fprintf(stderr, "bench kernels: bad --n-in\n"); return 2; }
    deltafin_kbench *kb = NULL;
    int rc = deltafin_kbench_create(isa_req, nthreads, &kb);
    if (rc) {
        fprintf(stderr, "bench kernels: %s\n", deltafin_errmsg());
        return rc == DELTAFIN_ERR_NOMEM ? 1 : 2;
    }
    const int nth = deltafin_kbench_threads(kb);
    const char *isa = deltafin_kernel_isa();
    char sb[32];
    if (!json) {
        printf("bench kernels: isa %s, %d threads, buffers %s, n_in %lld\n", isa, nth,
               deltafin_fmt_bytes(size, sb, sizeof sb), (long long)n_in);
        fflush(stdout);
    }
    double disp = deltafin_kbench_dispatch_us(kb);
    if (!json) printf("pool dispatch+barrier: %.2f us (median of 2000 df_pool_run)\n", disp);
    double bw = deltafin_kbench_bandwidth(kb, size, reps);
    if (bw < 0) { fprintf(stderr, "bench kernels: out of memory\n"); deltafin_kbench_free(kb); return 1; }
    if (!json) printf("memory read bandwidth: %.2f GB/s\n", bw / 1e9);
    const int n_types = deltafin_type_count();
    deltafin_kbench_result *res = calloc((size_t)n_types, sizeof *res);
    double *ratio = calloc((size_t)n_types, sizeof *ratio);
    if (!res || !ratio) { free(res); free(ratio); deltafin_kbench_free(kb); return 1; }
    int nres = 0;
    rc = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", types);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int t = deltafin_type_from_name(tok);
        if (t < 0) { fprintf(stderr, "bench kernels: unknown type %s\n", tok); rc = 2; continue; }
        if (nres >= n_types) break;
        if (deltafin_kbench_matvec(kb, t, n_in, reps, n_tok, &res[nres])) {
            fprintf(stderr, "bench kernels: %s: %s\n", tok, deltafin_errmsg());
            continue;
        }
        ratio[nres] = res[nres].gbs * 1e9 / res[nres].bw_local;
        if (!json) {
            printf("matvec %-7s %7.2f GB/s  %5.1f%% of bandwidth %.2f GB/s measured alongside  (%.0f us per %s matrix)",
                   deltafin_type_name(t), res[nres].gbs, 100 * ratio[nres], res[nres].bw_local / 1e9,
                   res[nres].us_per_call, deltafin_fmt_bytes(size, sb, sizeof sb));
            if (n_tok > 1) printf("  n_tok=%d: %.2f GB/s of weights (%.1f x tokens/s)", n_tok, res[nres].gbs_tok,
                                  res[nres].gbs_tok * n_tok / res[nres].gbs);
            printf("\n");
            fflush(stdout);
        }
        nres++;
    }
    if (json) {
        printf("{\"isa\":\"%s\",\"threads\":%d,\"size_bytes\":%llu,\"n_in\":%lld,\"dispatch_us\":%.3f,\"bandwidth_gbs\":%.3f,\"matvec\":[",
               isa, nth, (unsigned long long)size, (long long)n_in, disp, bw / 1e9);
        for (int i = 0; i < nres; i++) {
            printf("%s{\"type\":\"%s\",\"gbs\":%.3f,\"bandwidth_gbs\":%.3f,\"ratio\":%.4f", i ? "," : "",
                   deltafin_type_name(res[i].type), res[i].gbs, res[i].bw_local / 1e9, ratio[i]);
            if (n_tok > 1) printf(",\"n_tok\":%d,\"gbs_tok\":%.3f", n_tok, res[i].gbs_tok);
            printf("}");
        }
        printf("]}\n");
    }
    free(res);
    free(ratio);
    deltafin_kbench_free(kb);
    return rc;
}
