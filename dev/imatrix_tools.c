/* imatrix_tools.c — developer tools for importance matrices (tests and recording scripts):
 *   gen-imatrix MODEL OUT [--dat] [--seed S]: a synthetic matrix with an entry for every weight
 *     matrix of MODEL (per expert for 3-D ones, some experts never routed: count 0), values from
 *     a seeded integer generator, so the same file results on every machine — what the quantize
 *     tests give both deltafin and llama-quantize;
 *   imatrix-dump FILE: entries sorted by name, "name<TAB>counts<TAB>values" (%.6g);
 *   imatrix-diff FILE EXPECTED.tsv [--rtol R]: FILE's entries against a dump: same names and
 *     counts, values within R relative to each matrix's largest value (exit 1 otherwise). */
#include "deltafin.h"
#include "format/gguf.h"
#include "runtime/imatrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int cmd_gen_imatrix(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    bool dat = false;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dat")) dat = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: deltafin-dev gen-imatrix MODEL.gguf OUT [--dat] [--seed S]\n");
            return 0;
        } else if (!model) model = argv[i];
        else if (!out) out = argv[i];
        else { fprintf(stderr, "gen-imatrix: unexpected argument '%s'\n", argv[i]); return 2; }
    }
    if (!model || !out) { fprintf(stderr, "usage: deltafin-dev gen-imatrix MODEL.gguf OUT [--dat] [--seed S]\n"); return 2; }
    df_gguf *g;
    if (df_gguf_open(model, &g)) { fprintf(stderr, "gen-imatrix: %s\n", deltafin_errmsg()); return 1; }
    const int chunk = 128;
    deltafin_imatrix *im = NULL;
    int rc = deltafin_imatrix_new(chunk, false, &im);
    if (!rc) rc = deltafin_imatrix_add_dataset(im, "gen-imatrix");
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        const df_gguf_tensor *t = &g->tensors[i];
        if (t->n_dims < 2 || strncmp(t->name, "blk.", 4)) continue;
        const int n_mat = (int)t->ne[2], n_counts = t->ne[2] > 1 ? n_mat : 1;
        const int64_t nval = t->ne[0] * n_mat;
        float *s = malloc(sizeof(float) * (size_t)nval);
        int64_t *c = malloc(sizeof(int64_t) * (size_t)n_counts);
        if (!s || !c) { free(s); free(c); rc = DELTAFIN_ERR_NOMEM; break; }
        for (int k = 0; k < n_counts; k++) /* some experts never routed */
            c[k] = n_counts > 1 && (mix(seed ^ (uint64_t)(i * 131 + k)) % 5) == 0 ? 0 : 4 * chunk + (int64_t)(mix(seed + (uint64_t)k) % 97);
        for (int64_t j = 0; j < nval; j++) { /* sum of squares: positive, a wide spread, exact in F32 */
            const uint64_t r = mix(seed * 1000003u + (uint64_t)i * 7919u + (uint64_t)j);
            s[j] = (float)((r & 0xffff) + 1) * (float)(1 << (r >> 60)) * 0x1p-10f;
        }
        rc = df_imatrix_put(im, t->name, nval, n_counts, s, c);
        free(s);
        free(c);
    }
    if (!rc) rc = deltafin_imatrix_save(im, out, dat);
    if (rc) fprintf(stderr, "gen-imatrix: %s\n", deltafin_errmsg());
    deltafin_imatrix_free(im);
    df_gguf_close(g);
    return rc ? 1 : 0;
}

static int by_name(const void *a, const void *b, void *ctx) {
    const char *x, *y;
    deltafin_imatrix_entry(ctx, *(const int *)a, &x, NULL, NULL, NULL, NULL);
    deltafin_imatrix_entry(ctx, *(const int *)b, &y, NULL, NULL, NULL, NULL);
    return strcmp(x, y);
}

int cmd_imatrix_dump(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: deltafin-dev imatrix-dump FILE\n"); return 2; }
    deltafin_imatrix *im;
    if (deltafin_imatrix_load(argv[1], &im)) { fprintf(stderr, "imatrix-dump: %s\n", deltafin_errmsg()); return 1; }
    const int n = deltafin_imatrix_n_entries(im);
    int *ord = malloc(sizeof(int) * (size_t)(n + 1));
    if (!ord) return 1;
    for (int i = 0; i < n; i++) ord[i] = i;
    qsort_r(ord, (size_t)n, sizeof(int), by_name, im);
    printf("# chunks %d\n", deltafin_imatrix_chunks(im));
    for (int k = 0; k < n; k++) {
        const char *name;
        const float *s;
        const int64_t *c;
        int64_t nval;
        int nc;
        deltafin_imatrix_entry(im, ord[k], &name, &s, &nval, &c, &nc);
        printf("%s\t", name);
        for (int j = 0; j < nc; j++) printf("%s%lld", j ? "," : "", (long long)c[j]);
        putchar('\t');
        for (int64_t j = 0; j < nval; j++) printf("%s%.6g", j ? "," : "", (double)s[j]);
        putchar('\n');
    }
    free(ord);
    deltafin_imatrix_free(im);
    return 0;
}

/* one entry of a dump line; values strtod'ed in place */
typedef struct { char *name; int64_t *counts; int nc; double *v; int64_t nv; } dump_row;

static int parse_row(char *line, dump_row *r) {
    char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
    if (!t2) return -1;
    *t1 = *t2 = 0;
    r->name = line;
    r->nc = 1;
    for (char *p = t1 + 1; *p; p++) r->nc += *p == ',';
    r->nv = 1;
    for (char *p = t2 + 1; *p; p++) r->nv += *p == ',';
    r->counts = malloc(sizeof(int64_t) * (size_t)r->nc);
    r->v = malloc(sizeof(double) * (size_t)r->nv);
    if (!r->counts || !r->v) return -1;
    char *p = t1 + 1;
    for (int j = 0; j < r->nc; j++) r->counts[j] = strtoll(p, &p, 10), p += *p == ',';
    p = t2 + 1;
    for (int64_t j = 0; j < r->nv; j++) r->v[j] = strtod(p, &p), p += *p == ',';
    return 0;
}

/* one expected row against the entry of that name: 0 when it matches */
static int diff_row(const deltafin_imatrix *im, const dump_row *r, double rtol, double *worst) {
    for (int i = 0; i < deltafin_imatrix_n_entries(im); i++) {
        const char *name;
        const float *s;
        const int64_t *c;
        int64_t nval;
        int nc;
        deltafin_imatrix_entry(im, i, &name, &s, &nval, &c, &nc);
        if (strcmp(name, r->name)) continue;
        if (nc != r->nc || nval != r->nv) { printf("FAIL %s: %d counts / %lld values, expected %d / %lld\n", name, nc, (long long)nval, r->nc, (long long)r->nv); return 1; }
        for (int j = 0; j < nc; j++)
            if (c[j] != r->counts[j]) { printf("FAIL %s: count %d is %lld, expected %lld\n", name, j, (long long)c[j], (long long)r->counts[j]); return 1; }
        const int64_t per = nval / nc;
        for (int m = 0; m < nc; m++) {
            double mx = 0;
            for (int64_t j = 0; j < per; j++) mx = fmax(mx, fabs(r->v[m * per + j]));
            for (int64_t j = 0; j < per; j++) {
                const double d = fabs((double)s[m * per + j] - r->v[m * per + j]) / (mx > 0 ? mx : 1);
                if (d > *worst) *worst = d;
                if (d > rtol) {
                    printf("FAIL %s: value %lld is %.6g, expected %.6g\n", name, (long long)(m * per + j), (double)s[m * per + j], r->v[m * per + j]);
                    return 1;
                }
            }
        }
        return 0;
    }
    printf("FAIL %s: missing\n", r->name);
    return 1;
}

int cmd_imatrix_diff(int argc, char **argv) {
    double rtol = 1e-4;
    if (argc == 5 && !strcmp(argv[3], "--rtol")) rtol = atof(argv[4]);
    else if (argc != 3) { fprintf(stderr, "usage: deltafin-dev imatrix-diff FILE EXPECTED.tsv [--rtol R]\n"); return 2; }
    deltafin_imatrix *im;
    if (deltafin_imatrix_load(argv[1], &im)) { fprintf(stderr, "imatrix-diff: %s\n", deltafin_errmsg()); return 1; }
    FILE *f = fopen(argv[2], "r");
    if (!f) { perror(argv[2]); deltafin_imatrix_free(im); return 1; }
    char *line = NULL;
    size_t cap = 0;
    int bad = 0, n = 0, chunks = -1;
    double worst = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "# chunks %d", &chunks) == 1 || !*line) continue;
        dump_row r = {0};
        if (parse_row(line, &r)) { printf("FAIL: malformed line %d of %s\n", n + 1, argv[2]); bad++; break; }
        bad += diff_row(im, &r, rtol, &worst);
        n++;
        free(r.counts);
        free(r.v);
    }
    free(line);
    fclose(f);
    if (n != deltafin_imatrix_n_entries(im)) { printf("FAIL: %d entries, expected %d\n", deltafin_imatrix_n_entries(im), n); bad++; }
    if (chunks >= 0 && chunks != deltafin_imatrix_chunks(im)) { printf("FAIL: %d chunks, expected %d\n", deltafin_imatrix_chunks(im), chunks); bad++; }
    printf("imatrix-diff: %d entries, worst relative difference %.3g (bound %.3g)%s\n", n, worst, rtol, bad ? ", MISMATCH" : "");
    deltafin_imatrix_free(im);
    return bad ? 1 : 0;
}
