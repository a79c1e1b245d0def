/* sampling_args.h — the llama.cpp-style sampling flags shared by `run` and `chat`
 * (--temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed, with their
 * underscore spellings), parsed in one place. */
#ifndef DF_SAMPLING_ARGS_H
#define DF_SAMPLING_ARGS_H
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/cli_args.h"
#include "deltafin.h"

/* If argv[*i] is a sampling flag and a value follows, store the value in *sp, advance *i past
 * the value and return true (a malformed value is a usage error: message, exit 2); otherwise return false and leave everything unchanged. */
static inline bool df_sampling_arg(int argc, char **argv, int *i, deltafin_sampler_params *sp) {
    const char *a = argv[*i];
    if (*i + 1 >= argc) return false;
#define IS(s, l) (!strcmp(a, s) || !strcmp(a, l))
    if (IS("--temp", "--temperature")) sp->temp = (float)df_cli_float(argv, i);
    else if (IS("--top-k", "--top_k")) sp->top_k = df_cli_int(argv, i);
    else if (IS("--top-p", "--top_p")) sp->top_p = (float)df_cli_float(argv, i);
    else if (IS("--min-p", "--min_p")) sp->min_p = (float)df_cli_float(argv, i);
    else if (IS("--repeat-penalty", "--repeat_penalty")) sp->repeat_penalty = (float)df_cli_float(argv, i);
    else if (IS("--repeat-last-n", "--repeat_last_n")) sp->repeat_last_n = df_cli_int(argv, i);
    else if (IS("-s", "--seed")) {  /* -1: random, as in llama.cpp */
        if (!strcmp(argv[*i + 1], "-1")) { sp->seed = UINT64_MAX; (*i)++; }
        else sp->seed = df_cli_u64(argv, i);
    }
    else return false;
#undef IS
    return true;
}
#endif
