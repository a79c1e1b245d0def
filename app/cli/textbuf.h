/* textbuf.h — a growing NUL-terminated byte string (the generated answer of run and chat). */
#ifndef DF_CLI_TEXTBUF_H
#define DF_CLI_TEXTBUF_H
#include <stdlib.h>
#include <string.h>

typedef struct { char *p; size_t len, cap; } df_textbuf;

/* append n bytes; < 0 (the buffer unchanged) when out of memory */
static inline int df_textbuf_put(df_textbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t nc = (b->len + n + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}
#endif
