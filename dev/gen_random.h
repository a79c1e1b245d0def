/* gen_random.h — what the random-model generators (gen_random.c and its per-architecture
 * siblings gen_random_deepseek2.c, gen_random_kimi_k3.c) share: the schema-driven tensor
 * writer (gen_random_schema.c), the vocabulary, the value streams, option parsing. */
#ifndef DF_TOOLS_GEN_RANDOM_H
#define DF_TOOLS_GEN_RANDOM_H
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/gguf.h"
#include "model/model.h"

#define GR_ALIGN 32   /* GGUF alignment of every generated file */

/* A model to write: the generator has added its KVs to the writer; the tensors come from the
 * schema of `arch` walked over `hp` (sizes and layer kinds as the binder will read them back). */
typedef struct gr_model {
    const char *arch;            /* general.architecture */
    df_hparams hp;
    int type, exp_type;          /* matrices / routed experts (DF_T_EXPERT); vectors stay F32 */
    bool type_fallback;          /* rows off the type's block: Q8_0, else F16 (not an error) */
    float out_scale, router_scale, mat_scale, res_scale; /* gains (gen_random_schema.c gr_scale) */
    /* --router-skew S > 0: Zipf-like expert popularity (gen_random_schema.c skew_rows): a shared
     * direction added to every token embedding and, per layer, to each expert's router row with
     * the weight -S ln(rank) of a random popularity rank; 0 = uniform routing (recorded models) */
    float router_skew;
    uint64_t seed;
    bool sparse;                 /* header only: the data section is a hole */
    bool raw_experts;            /* Q8_0 / MXFP4 experts as random valid blocks */
    bool pad_end;                /* the file ends at the last tensor's padded end, not its end */
    /* the file's answer to the schema's probes (fused alternatives ...) and whether it has
     * optional tensor s of layer il; NULL: no */
    bool (*has)(void *ud, uint32_t bit, const char *name);
    bool (*want)(void *ud, const df_tensor_spec *s, int il);
    void *ud;
    const char *out;
} gr_model;
typedef struct { int n_tensors; uint64_t n_params; } gr_stats;
/* Add the tensor infos to w, write the header and every tensor to g->out (via g->out.tmp). */
int gr_write_model(df_gguf_writer *w, const gr_model *g, gr_stats *st);
/* *vocab unless set: $DELTAFIN_FIXTURES/models/tok512.bin (else ../shared/fixtures/...) when
 * readable, else "bytes". buf holds the path. */
void gr_default_vocab(const char **vocab, char *buf, size_t cap);

/* Adds the tokenizer KVs for --vocab SPEC: "bytes" (<unk> <s> </s>, 256 byte tokens, "\u2581",
 * printable ASCII), a llama2.c tokenizer.bin, or a .gguf whose tokenizer.* KVs are copied;
 * then {arch}.vocab_size. Sets *n_vocab. */
int gr_write_vocab(df_gguf_writer *w, const char *arch, const char *spec, int64_t *n_vocab);

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

/* The option loop of a generator (gen_random_args.c). Each table entry is an option with a
 * value, but GR_FLAG (no value: *(bool *)dst = max != 0). GR_I64: 0..max (1 << 24 when max is
 * 0), GR_I64_POS also > 0; GR_F32 >= 0, GR_F32_ANY any finite float; GR_SEED: an unsigned
 * (decimal or 0x...); GR_STR: the argument itself; GR_TYPE: one of the types in type_mask
 * (GR_T_* bits) as a DF_TYPE_* int. Options not in the table go to other(ud, opt, value):
 * 0 = taken, > 0 = the exit status (message printed), -1 = unknown. */
enum { GR_FLAG, GR_I64, GR_I64_POS, GR_F32, GR_F32_ANY, GR_SEED, GR_STR, GR_TYPE };
enum { GR_T_F32 = 1, GR_T_F16 = 2, GR_T_Q8_0 = 4, GR_T_Q4_K = 8, GR_T_MXFP4 = 16 };
typedef struct { const char *name; int kind; void *dst; int64_t max; } gr_opt;
typedef struct {
    const char *arch;            /* names the generator in "unknown option X for ARCH" */
    const gr_opt *opts;
    size_t n_opts;
    unsigned type_mask;          /* GR_T_* accepted by GR_TYPE options */
    void (*usage)(FILE *f);
    int (*other)(void *ud, const char *opt, const char *value);
    void *ud;
    const char **out;            /* the one positional argument (the output path) */
} gr_args;
/* 1: parsed; 0: -h/--help (usage printed); 2: an error (printed) */
int gr_parse_args(const gr_args *c, int argc, char **argv);
/* f32 / f16 / q8_0 / q4_k / mxfp4 (any case) among mask -> DF_TYPE_*, else -1 */
int gr_parse_type(const char *v, unsigned mask);

int df_gen_random_deepseek2(int argc, char **argv);
int df_gen_random_deepseek4(int argc, char **argv);
int df_gen_random_kimi_k3(int argc, char **argv);
int df_gen_random_gpt_oss(int argc, char **argv);
int df_gen_random_qwen3next(int argc, char **argv);
int df_gen_random_gqa_moe(int argc, char **argv); /* glm4moe, minimax-m2 */
#endif
