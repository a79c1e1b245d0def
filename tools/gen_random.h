/* gen_random.h — what the random-model generators (gen_random.c and its per-architecture
 * siblings gen_random_deepseek2.c, gen_random_kimi_k3.c) share. */
#ifndef DF_TOOLS_GEN_RANDOM_H
#define DF_TOOLS_GEN_RANDOM_H
#include <stdint.h>

#include "gguf.h"

/* Adds the tokenizer KVs for --vocab SPEC: "bytes" (<unk> <s> </s>, 256 byte tokens, "\u2581",
 * printable ASCII), a llama2.c tokenizer.bin, or a .gguf whose tokenizer.* KVs are copied.
 * Sets *n_vocab. */
int gr_write_vocab(df_gguf_writer *w, const char *spec, int64_t *n_vocab);

int df_gen_random_deepseek2(int argc, char **argv);
int df_gen_random_kimi_k3(int argc, char **argv);
#endif
