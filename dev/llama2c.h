/* llama2c.h — llama2.c tokenizer.bin → GGUF SPM tokenizer KVs; shared by convert-llama2c and
 * gen-random (tools/convert_llama2c.c implements it). */
#ifndef DF_TOOLS_LLAMA2C_H
#define DF_TOOLS_LLAMA2C_H
#include "format/gguf.h"

typedef struct {
    int n;          /* tokens */
    char **text;    /* [n] GGUF token text (spaces already escaped as U+2581) */
    float *score;   /* [n] */
    int32_t *type;  /* [n] llama token type: 1 normal, 2 unknown, 3 control, 6 byte */
} l2c_vocab;

/* Parse a llama2.c tokenizer.bin: u32 max_token_length, then per token f32 score, i32 length,
 * bytes. n_expected > 0: exactly that many tokens are read (the checkpoint's vocab_size; extra
 * bytes are an error); n_expected <= 0: read until the end of the file. */
int l2c_vocab_load(const char *path, int n_expected, l2c_vocab *v);
void l2c_vocab_free(l2c_vocab *v);
/* tokenizer.ggml.{model,tokens,scores,token_type,bos/eos/unknown ids,add_bos/add_eos} */
int l2c_vocab_write_kv(df_gguf_writer *w, const l2c_vocab *v);
#endif
