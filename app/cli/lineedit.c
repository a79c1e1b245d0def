/* lineedit.c — see lineedit.h. libedit reads through le_getc (below) rather than its own read
 * loop, so that a SIGINT at the prompt ends the read at once (the caller's handler is
 * installed without SA_RESTART while the prompt waits) and the caller decides what Ctrl-C
 * means; libedit's own signal handling (EL_SIGNAL) stays off for the same reason. */
#include "app/cli/lineedit.h"

#include <errno.h>
#include <histedit.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct df_lineedit {
    EditLine *el;
    History *hist;
    char *hist_file;
    volatile sig_atomic_t *intr;
    const char *prompt;      /* what prompt_fn shows now */
    char *line;              /* getline's buffer */
    size_t line_cap;
    char *msg;               /* the message being joined */
    size_t msg_len, msg_cap;
};

static df_lineedit *g_le; /* libedit's callbacks have no user pointer */

static char *prompt_fn(EditLine *el) {
    (void)el;
    return (char *)(g_le && g_le->prompt ? g_le->prompt : "");
}

/* one byte of input: 1, 0 at end of input, -1 on an error or an interrupt */
static int read_byte(unsigned char *b) {
    for (;;) {
        ssize_t r = read(STDIN_FILENO, b, 1);
        if (r == 1) return 1;
        if (r == 0) return 0;
        if (errno == EINTR) {
            if (g_le && g_le->intr && *g_le->intr) return -1;
            continue;
        }
        return -1;
    }
}

/* libedit's read hook: one character, UTF-8 decoded (a malformed sequence reads as U+FFFD) */
static int le_getc(EditLine *el, wchar_t *wc) {
    (void)el;
    unsigned char c;
    int r = read_byte(&c);
    if (r <= 0) return r;
    if (c == 0x03) { /* ^C as a character (a terminal without ISIG): the same as SIGINT */
        if (g_le && g_le->intr) *g_le->intr = 1;
        return -1;
    }
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len) { *wc = 0xFFFD; return 1; }
    uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x7F >> len));
    for (int i = 1; i < len; i++) {
        r = read_byte(&c);
        if (r <= 0) return r;
        if ((c & 0xC0) != 0x80) { *wc = 0xFFFD; return 1; }
        cp = cp << 6 | (c & 0x3F);
    }
    *wc = (wchar_t)cp;
    return 1;
}

df_lineedit *df_le_open(const char *history_file, volatile sig_atomic_t *interrupted) {
    df_lineedit *le = calloc(1, sizeof *le);
    if (!le) return NULL;
    le->intr = interrupted;
    g_le = le;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return le;
    /* libedit turns characters back into bytes with the locale's encoding */
    setlocale(LC_CTYPE, "");
    if (MB_CUR_MAX == 1) setlocale(LC_CTYPE, "C.UTF-8");
    le->el = el_init("deltafin", stdin, stdout, stderr);
    le->hist = history_init();
    if (!le->el || !le->hist) { df_le_close(le); return NULL; }
    HistEvent ev;
    history(le->hist, &ev, H_SETSIZE, 1000);
    history(le->hist, &ev, H_SETUNIQUE, 1);
    if (history_file && *history_file) {
        le->hist_file = strdup(history_file);
        if (!le->hist_file) { df_le_close(le); return NULL; }
        history(le->hist, &ev, H_LOAD, le->hist_file); /* a missing file is a new history */
    }
    el_set(le->el, EL_EDITOR, "emacs");
    el_set(le->el, EL_SIGNAL, 0);
    el_set(le->el, EL_PROMPT, prompt_fn);
    el_set(le->el, EL_GETCFN, le_getc);
    el_set(le->el, EL_HIST, history, le->hist);
    el_source(le->el, NULL); /* ~/.editrc, as other libedit programs read it */
    return le;
}

bool df_le_editing(const df_lineedit *le) { return le && le->el; }

/* one line without its line end into *out (borrowed) */
static int read_line(df_lineedit *le, const char *prompt, const char **out, size_t *n) {
    if (le->el) {
        le->prompt = prompt;
        int count = 0;
        const char *s = el_gets(le->el, &count);
        if (!s) {
            if (le->intr && *le->intr) return DF_LE_INTR;
            return count == 0 ? DF_LE_EOF : DF_LE_ERR;
        }
        size_t len = strlen(s);
        while (len && (s[len - 1] == '\n' || s[len - 1] == '\r')) len--;
        *out = s;
        *n = len;
        return DF_LE_LINE;
    }
    if (isatty(STDIN_FILENO)) { fputs(prompt, stdout); fflush(stdout); }
    errno = 0;
    ssize_t len = getline(&le->line, &le->line_cap, stdin);
    if (len < 0) {
        bool intr = errno == EINTR && le->intr && *le->intr;
        clearerr(stdin);
        return intr ? DF_LE_INTR : feof(stdin) || errno == 0 ? DF_LE_EOF : DF_LE_ERR;
    }
    while (len && (le->line[len - 1] == '\n' || le->line[len - 1] == '\r')) len--;
    *out = le->line;
    *n = (size_t)len;
    return DF_LE_LINE;
}

static int msg_put(df_lineedit *le, const char *s, size_t n, bool newline_first) {
    size_t need = le->msg_len + n + 2;
    if (need > le->msg_cap) {
        size_t nc = need * 2;
        char *m = realloc(le->msg, nc);
        if (!m) return -1;
        le->msg = m;
        le->msg_cap = nc;
    }
    if (newline_first) le->msg[le->msg_len++] = '\n';
    memcpy(le->msg + le->msg_len, s, n);
    le->msg_len += n;
    le->msg[le->msg_len] = 0;
    return 0;
}

#define FENCE "\"\"\""

int df_le_message(df_lineedit *le, const char *prompt, const char *cont_prompt, char **text) {
    le->msg_len = 0;
    if (msg_put(le, "", 0, false) < 0) return DF_LE_ERR;
    bool block = false;
    int pieces = 0;
    for (int first = 1;; first = 0) {
        const char *s;
        size_t n;
        int r = read_line(le, first ? prompt : cont_prompt, &s, &n);
        if (r == DF_LE_EOF && !first) break; /* end of input inside a message: send what there is */
        if (r != DF_LE_LINE) return r;
        if (first && n >= 3 && !memcmp(s, FENCE, 3)) {
            block = true;
            s += 3;
            n -= 3;
            if (n >= 3 && !memcmp(s + n - 3, FENCE, 3)) { /* """one line""" */
                if (msg_put(le, s, n - 3, false) < 0) return DF_LE_ERR;
                break;
            }
            if (n && msg_put(le, s, n, pieces++ > 0) < 0) return DF_LE_ERR;
            continue;
        }
        if (block) {
            bool end = n >= 3 && !memcmp(s + n - 3, FENCE, 3);
            if (end) n -= 3;
            if ((n || !end) && msg_put(le, s, n, pieces++ > 0) < 0) return DF_LE_ERR;
            if (end) break;
            continue;
        }
        if (n && s[n - 1] == '\\') {
            if (msg_put(le, s, n - 1, pieces++ > 0) < 0) return DF_LE_ERR;
            continue;
        }
        if (msg_put(le, s, n, pieces++ > 0) < 0) return DF_LE_ERR;
        break;
    }
    *text = le->msg;
    return DF_LE_LINE;
}

void df_le_history_add(df_lineedit *le, const char *text) {
    if (!le || !le->hist || !text || !*text) return;
    HistEvent ev;
    history(le->hist, &ev, H_ENTER, text);
    if (!le->hist_file) return;
    /* what was typed may be private: the file is the user's alone */
    mode_t old = umask(077);
    history(le->hist, &ev, H_SAVE, le->hist_file);
    umask(old);
}

void df_le_close(df_lineedit *le) {
    if (!le) return;
    if (le->el) el_end(le->el);
    if (le->hist) history_end(le->hist);
    free(le->hist_file);
    free(le->line);
    free(le->msg);
    if (g_le == le) g_le = NULL;
    free(le);
}
