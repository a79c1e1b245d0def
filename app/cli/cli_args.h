/* cli_args.h — strict numeric command-line values for every subcommand. `-n abc`, `-t 4x`,
 * `-c 99999999999` or an empty value is a usage error naming the flag and the value (exit 2),
 * never a silent 0 from atoi(). Range checks that depend on the model stay in the library. */
#ifndef DF_CLI_ARGS_H
#define DF_CLI_ARGS_H
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* argv[*i] is the flag, argv[*i + 1] its value (the caller checked it exists); advances *i. */
static inline int df_cli_int(char **argv, int *i) {
    const char *flag = argv[*i], *v = argv[*i + 1];
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < INT_MIN || x > INT_MAX) {
        fprintf(stderr, "deltafin: %s: expected an integer, got '%s'\n", flag, v);
        exit(2);
    }
    (*i)++;
    return (int)x;
}

static inline double df_cli_float(char **argv, int *i) {
    const char *flag = argv[*i], *v = argv[*i + 1];
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x)) {
        fprintf(stderr, "deltafin: %s: expected a number, got '%s'\n", flag, v);
        exit(2);
    }
    (*i)++;
    return x;
}

static inline unsigned long long df_cli_u64(char **argv, int *i) {
    const char *flag = argv[*i], *v = argv[*i + 1];
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || *v == '-') {
        fprintf(stderr, "deltafin: %s: expected a non-negative integer, got '%s'\n", flag, v);
        exit(2);
    }
    (*i)++;
    return x;
}
#endif
