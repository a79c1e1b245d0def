/* gen_random.h — what the random-model generators (gen_random.c and its per-architecture
 * siblings gen_random_deepseek2.c, gen_random_kimi_k3.c) share. */
#ifndef DF_TOOLS_GEN_RANDOM_H
#define DF_TOOLS_GEN_RANDOM_H
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "format/gguf.h"

/* Adds the tokenizer KVs for --vocab SPEC: "bytes" (<unk> <s> </s>, 256 byte tokens, "\u2581",
 * printable ASCII), a llama2.c tokenizer.bin, or a .gguf whose tokenizer.* KVs are copied.
 * Sets *n_vocab. */
int gr_write_vocab(df_gguf_writer *w, const char *spec, int64_t *n_vocab);

/* Deterministic values: splitmix64 (state seeded from --seed ^ gr_hash(tensor name)) and a
 * uniform draw in [-1, 1) that is exactly representable (k * 2^-23). Recorded test models
 * depend on these bit for bit: never change them. */
static inline uint64_t gr_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline uint64_t gr_hash(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}
static inline float gr_urand(uint64_t *st) {
    int32_t k = (int32_t)(gr_splitmix(st) >> 40) - (1 << 23);
    return (float)k * 0x1.0p-23f;
}

/* A whole non-negative decimal integer no larger than max (option values). */
static inline bool gr_parse_i64(const char *s, int64_t max, int64_t *out) {
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (errno || e == s || *e || v < 0 || v > max) return false;
    *out = v;
    return true;
}

int df_gen_random_deepseek2(int argc, char **argv);
int df_gen_random_kimi_k3(int argc, char **argv);
#endif
