/* lineedit.h — the chat prompt's line reader. On a terminal (stdin and stdout both ttys) it is
 * libedit: emacs key bindings, Up/Down through a history that is kept in a file between runs,
 * Ctrl-C reported to the caller (DF_LE_INTR) instead of killing the program. Anywhere else
 * (a pipe, a file) it is getline and prints no prompt. Messages span lines with a trailing
 * backslash, or a block between two lines of `"""` (ollama's paste block); df_le_message
 * joins them.
 * Threading: one reader per process, used from one thread (libedit's read hook reaches it
 * through a static). */
#ifndef DF_APP_LINEEDIT_H
#define DF_APP_LINEEDIT_H

#include <signal.h>
#include <stdbool.h>

typedef struct df_lineedit df_lineedit;

enum { DF_LE_LINE = 1, DF_LE_EOF = 0, DF_LE_ERR = -1, DF_LE_INTR = -2 };

/* history_file: loaded now, saved after every entry (NULL: no history kept on disk).
 * interrupted: the flag the caller's SIGINT handler sets; a read that it interrupts returns
 * DF_LE_INTR. NULL when out of memory. */
df_lineedit *df_le_open(const char *history_file, volatile sig_atomic_t *interrupted);
/* whether the editor (not getline) reads the input */
bool df_le_editing(const df_lineedit *le);
/* One message: a line, or lines joined by a trailing backslash or a """ block (the newlines
 * kept, the markers removed). *text is borrowed until the next call. Returns DF_LE_LINE,
 * DF_LE_EOF (end of input; an unfinished block is returned first), DF_LE_INTR or DF_LE_ERR. */
int df_le_message(df_lineedit *le, const char *prompt, const char *cont_prompt, char **text);
/* Add a message to the history (and save the file). */
void df_le_history_add(df_lineedit *le, const char *text);
void df_le_close(df_lineedit *le);

#endif
