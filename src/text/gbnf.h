/* gbnf.h — GBNF grammars (llama.cpp's syntax, grammars/README.md there) compiled to element
 * arrays, and a matcher that runs them as a set of pushdown stacks over Unicode code points
 * (and whole tokens for <[id]> / <text> / !<...> elements), so existing llama.cpp grammars
 * constrain generation here with the same meaning.
 *
 * Syntax: rules `name ::= alternatives` (names [a-zA-Z0-9-]+; a rule ends at a newline outside
 * parentheses, a newline after `|` continues it), literals "..." and classes [...] / [^...]
 * with ranges a-z and escapes \xXX \uXXXX \UXXXXXXXX \t \r \n \\ \" \[ \], `.` (any code
 * point), groups ( ), repetition * + ? {m} {m,} {m,n} (rewritten into helper rules, at most
 * 2000 repetitions), tokens <[id]> and <text> (text that is exactly one token) and their
 * negations !<...>, comments from # to the end of the line. Left recursion is refused, as
 * every undefined rule is.
 *
 * Matching (gbnf_match.c) follows llama.cpp's semantics: a state is the set of stacks (each
 * stack is the positions still to match, top first, every top a terminal), a code point
 * advances every stack whose top class contains it, a token piece ending inside a UTF-8
 * character keeps the stacks and is allowed when some top class holds a character with that
 * prefix; the grammar may end when the empty stack is in the set.
 *
 * Invariants: a df_gbnf is immutable after df_gbnf_parse and may be shared by any number of
 * matchers; a matcher is one generation, used by one thread at a time. Untrusted grammars never
 * crash: every problem is a DF_ERR_FORMAT / DF_ERR_RANGE naming the place.
 * Memory: the matcher's stacks live in arenas that grow to the grammar's high-water mark and
 * are then reused (no allocation per token once warm). */
#ifndef DF_GBNF_H
#define DF_GBNF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    DF_GE_END = 0,      /* end of a rule */
    DF_GE_ALT,          /* start of the next alternative of a rule */
    DF_GE_RULE_REF,     /* value = rule id */
    DF_GE_CHAR,         /* value = code point: a class (or one literal char) starts here */
    DF_GE_CHAR_NOT,     /* as CHAR, the class is negated */
    DF_GE_CHAR_RNG_UPPER, /* the previous CHAR / CHAR_ALT is the lower end of a range to value */
    DF_GE_CHAR_ALT,     /* one more code point (or range start) of the class */
    DF_GE_CHAR_ANY,     /* `.` */
    DF_GE_TOKEN,        /* value = token id */
    DF_GE_TOKEN_NOT,    /* any token but value */
};

typedef struct {
    uint32_t type;
    uint32_t value;
} df_gelem;

typedef struct df_gbnf {
    df_gelem *el;       /* every rule, each ending in DF_GE_END */
    int n_el;
    int32_t *rule_off;  /* [n_rules] first element of each rule */
    char **names;       /* [n_rules] */
    int n_rules;
    int root;           /* start rule */
} df_gbnf;

/* Resolves <text> to a token id: the id when the text is exactly one token, else < 0. */
typedef int32_t (*df_gbnf_token_fn)(void *ud, const char *text, size_t len);

/* Parse src (NUL-terminated). root: the start rule ("root" when NULL). tok may be NULL (then
 * <text> is an error; <[id]> still works). Errors name the line and column. */
int df_gbnf_parse(const char *src, const char *root, df_gbnf_token_fn tok, void *ud, df_gbnf **out);
void df_gbnf_free(df_gbnf *g);

/* ---- matcher (gbnf_match.c) ------------------------------------------------------------ */
typedef struct df_gmatch df_gmatch;

/* A matcher at the grammar's start. NULL when out of memory. */
df_gmatch *df_gmatch_create(const df_gbnf *g);
void df_gmatch_free(df_gmatch *m);
int df_gmatch_reset(df_gmatch *m);
/* Whether the bytes of one token (its piece; token_id for token elements, -1 for plain text)
 * could be accepted now. Does not change the state. */
bool df_gmatch_allows(df_gmatch *m, const char *bytes, size_t n, int32_t token_id);
/* Advance over one token's piece (token_id as above). DF_ERR_INVALID (state unchanged) when
 * the grammar does not allow it. */
int df_gmatch_accept(df_gmatch *m, const char *bytes, size_t n, int32_t token_id);
/* The grammar may end here (the empty stack is in the state and no character is pending). */
bool df_gmatch_can_end(const df_gmatch *m);
/* Nothing more can be accepted (the state is only the end, or empty). */
bool df_gmatch_done(const df_gmatch *m);

/* A vocabulary's pieces sorted by bytes, so tokens sharing a prefix share its matching work
 * (a trie walked in order). Built once per vocabulary (df_gtok_index_build in gbnf_vocab.c). */
typedef struct df_gtok_index {
    int n_vocab;
    int32_t *order;     /* [n_order] ids with non-empty pieces, not end-of-generation, by bytes */
    uint16_t *lcp;      /* [n_order] common prefix length with the previous entry (0 for the first) */
    int n_order;
    uint32_t *off;      /* [n_vocab] piece of id in blob */
    uint16_t *len;      /* [n_vocab] its length (0: empty piece) */
    char *blob;
    uint8_t *eog;       /* [n_vocab] end-of-generation ids */
    int max_len;
} df_gtok_index;

void df_gtok_index_free(df_gtok_index *ix);
/* allowed[id] = 1 for every token the grammar allows now (end-of-generation ids when the
 * grammar may end), else 0. Returns the number allowed, or < 0. */
int df_gmatch_mask(df_gmatch *m, const df_gtok_index *ix, uint8_t *allowed);

#endif
