/* sampling_args.h — the llama.cpp-style sampling flags shared by `run` and `chat`
 * (--temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed, with their
 * underscore spellings), parsed in one place. */
#ifndef DF_SAMPLING_ARGS_H
#define DF_SAMPLING_ARGS_H
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "deltafin.h"

/* If argv[*i] is a sampling flag and a value follows, store the value in *sp, advance *i past
 * the value and return true; otherwise return false and leave everything unchanged. */
static inline bool df_sampling_arg(int argc, char **argv, int *i, deltafin_sampler_params *sp) {
    const char *a = argv[*i];
    if (*i + 1 >= argc) return false;
#define IS(s, l) (!strcmp(a, s) || !strcmp(a, l))
    const char *v = argv[*i + 1];
    if (IS("--temp", "--temperature")) sp->temp = (float)atof(v);
    else if (IS("--top-k", "--top_k")) sp->top_k = atoi(v);
    else if (IS("--top-p", "--top_p")) sp->top_p = (float)atof(v);
    else if (IS("--min-p", "--min_p")) sp->min_p = (float)atof(v);
    else if (IS("--repeat-penalty", "--repeat_penalty")) sp->repeat_penalty = (float)atof(v);
    else if (IS("--repeat-last-n", "--repeat_last_n")) sp->repeat_last_n = atoi(v);
    else if (IS("-s", "--seed")) sp->seed = strtoull(v, NULL, 10);
    else return false;
#undef IS
    (*i)++;
    return true;
}
#endif
