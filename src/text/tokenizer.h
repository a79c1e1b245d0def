/* tokenizer.h — GGUF tokenizers as llama.cpp runs them: SPM ("llama": scores, byte fallback,
 * dummy space prefix) and byte-level BPE ("gpt2": merges, PCRE2 pre-tokenizers chosen by
 * tokenizer.ggml.pre), special-token partitioning, EOG set, and a streaming detokenizer.
 * Invariant: a df_tokenizer is immutable after df_tokenizer_load(); every function taking a
 * const df_tokenizer* is thread-safe (per-call scratch is allocated by the call).
 * Ground truth for every behaviour is llama.cpp (src/llama-vocab.cpp, src/unicode.cpp).
 * Implementation: vocab.c (load), pretok.c, bpe.c, spm.c, detok.c, tokenizer.c; internals
 * they share are in tokenizer_impl.h. UTF-8 validity is base/utf8.h's. */
#ifndef DF_TOKENIZER_H
#define DF_TOKENIZER_H
#include "base/util.h"
#include "format/gguf.h"

typedef struct df_tokenizer df_tokenizer;

enum df_tok_type { DF_TOK_SPM = 1, DF_TOK_BPE = 2 };

/* Token attributes (bit mask, llama.cpp's llama_token_attr values). */
enum {
    DF_TATTR_UNDEFINED = 0,
    DF_TATTR_UNKNOWN = 1 << 0,
    DF_TATTR_UNUSED = 1 << 1,
    DF_TATTR_NORMAL = 1 << 2,
    DF_TATTR_CONTROL = 1 << 3,
    DF_TATTR_USER_DEFINED = 1 << 4,
    DF_TATTR_BYTE = 1 << 5,
    DF_TATTR_LSTRIP = 1 << 7,
    DF_TATTR_RSTRIP = 1 << 8,
};

typedef struct {
    const char *pre_override; /* use this tokenizer.ggml.pre instead of the file's (tests) */
    bool quiet;               /* no warnings through df_log */
} df_tokenizer_opts;

/* Build the tokenizer from the tokenizer.ggml.* KVs of g (tensors are not touched, so a
 * vocab-only GGUF works). The tokenizer copies what it needs: g may be closed afterwards.
 * Errors: DF_ERR_FORMAT (missing/ill-typed keys), DF_ERR_UNSUPPORTED (tokenizer model or
 * pre-tokenizer not implemented: message names it). */
int df_tokenizer_load(const df_gguf *g, df_tokenizer **out);
int df_tokenizer_load_ex(const df_gguf *g, const df_tokenizer_opts *opts, df_tokenizer **out);
void df_tokenizer_free(df_tokenizer *t);

/* Tokenize len bytes of text (need not be NUL-terminated, may hold any bytes).
 * add_special: BOS/EOS per the model's add_bos/add_eos flags. parse_special: match control
 * and unknown tokens' text (user-defined tokens are always matched). Writes up to cap ids;
 * returns the number of ids the text needs (may exceed cap), or < 0 (df_status). */
int df_tokenize(const df_tokenizer *t, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t *ids, int cap);

/* Same, into a malloc'd array (*ids, caller frees; NULL when the result is empty).
 * Returns the count or < 0. One pass instead of the count-then-fill pair. */
int df_tokenize_alloc(const df_tokenizer *t, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t **ids);

/* Bytes of one token. special: render control/unknown tokens' text too (otherwise they are
 * empty). Returns the length (may exceed cap: nothing or a prefix is written) or < 0 for an
 * out-of-range id. Not NUL-terminated. lstrip variant skips up to `lstrip` leading spaces
 * (llama.cpp's token_to_piece lstrip argument). */
int df_token_to_piece(const df_tokenizer *t, int32_t id, bool special, char *buf, int cap);
int df_token_to_piece_ex(const df_tokenizer *t, int32_t id, bool special, int lstrip, char *buf,
                         int cap);

/* llama.cpp's llama_detokenize: concatenates pieces, removes the SPM dummy-prefix space of
 * the first token, optionally drops the BOS/EOS added by add_special (remove_special), and
 * applies the model's clean_spaces rules. Returns bytes needed (may exceed cap) or < 0. */
int df_detokenize(const df_tokenizer *t, const int32_t *ids, int n, bool remove_special,
                  bool unparse_special, char *buf, int cap);

int df_token_attr(const df_tokenizer *t, int32_t id); /* DF_TATTR_* mask, 0 if out of range */
/* Id of the token whose text is exactly s (last id for duplicate texts), -1 if none. */
int32_t df_token_lookup(const df_tokenizer *t, const char *s, size_t len);
bool df_token_is_eog(const df_tokenizer *t, int32_t id);
bool df_token_is_control(const df_tokenizer *t, int32_t id);

int df_tokenizer_type(const df_tokenizer *t);          /* enum df_tok_type */
const char *df_tokenizer_pre(const df_tokenizer *t);   /* pre-tokenizer name in use ("" for SPM) */
int df_tokenizer_n_vocab(const df_tokenizer *t);
int df_tokenizer_max_piece_len(const df_tokenizer *t); /* longest piece (special=true), bytes */
int32_t df_tokenizer_bos(const df_tokenizer *t);        /* -1 if none */
int32_t df_tokenizer_eos(const df_tokenizer *t);
int32_t df_tokenizer_eot(const df_tokenizer *t);
int32_t df_tokenizer_nl(const df_tokenizer *t);         /* newline token, -1 if none */
bool df_tokenizer_add_bos(const df_tokenizer *t);
bool df_tokenizer_add_eos(const df_tokenizer *t);
bool df_tokenizer_add_space_prefix(const df_tokenizer *t);
/* The end-of-generation ids (sorted ascending). */
int df_tokenizer_eog_ids(const df_tokenizer *t, const int32_t **ids);

/* Pre-tokenizer split only (BPE): calls cb for each piece of text (raw bytes, after the
 * invalid-UTF-8 → U+FFFD sanitation llama.cpp applies), in order. Returns number of pieces or
 * < 0. For tests and debugging. */
int df_tokenizer_presplit(const df_tokenizer *t, const char *text, size_t len,
                          void (*cb)(void *ud, const char *piece, size_t n), void *ud);

/* ---- streaming detokenizer --------------------------------------------------------------
 * Feed generated ids one at a time; output only ever contains complete, valid UTF-8
 * sequences. Bytes of a multi-byte character split across tokens are held back until the
 * character completes; bytes that can never form a valid character are replaced by U+FFFD.
 * Usage: df_detok d; df_detok_init(&d, false, false); for each id: n = df_detok_push(&d, t,
 * id, out, cap); ... ; n = df_detok_flush(&d, out, cap).
 * push/flush return the number of bytes written to out, or < 0 (DF_ERR_RANGE if cap is too
 * small, state unchanged; DF_ERR_INVALID for a bad id). Invalid bytes expand to 3 bytes, so
 * cap >= 3 * (df_tokenizer_max_piece_len(t) + 3) always suffices. */
typedef struct {
    unsigned char pend[8]; /* held-back bytes of an incomplete UTF-8 sequence */
    int n_pend;
    bool special;          /* render control tokens' text */
    bool strip_space;      /* strip one leading space from the next piece (SPM dummy prefix) */
} df_detok;
void df_detok_init(df_detok *d, bool special, bool strip_leading_space);
int df_detok_push(df_detok *d, const df_tokenizer *t, int32_t id, char *out, int cap);
int df_detok_flush(df_detok *d, char *out, int cap);

#endif
