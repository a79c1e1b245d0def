/* harmony.h — gpt-oss's Harmony output format split into channels, as llama-server's reasoning
 * format does for gpt-oss (common/chat.cpp): a message is "<|start|>ROLE[ to=RECIPIENT]
 * <|channel|>CHANNEL[ <|constrain|>TYPE]<|message|>TEXT" ended by <|end|>, <|return|> or
 * <|call|>; the generated text starts after the generation prompt "<|start|>assistant".
 * The analysis channel is reasoning, final and commentary preambles are content, a message with
 * a recipient (" to=functions.NAME") is a tool call; headers and end markers are hidden. Text
 * before any header (a model that does not speak Harmony) is content.
 * Streaming: the text arrives in arbitrary pieces (the detokenizer's, with special tokens
 * rendered); a piece that ends inside a possible marker is held back until the next one.
 * Threading: one splitter per stream; no globals. */
#ifndef DF_TEXT_HARMONY_H
#define DF_TEXT_HARMONY_H
#include <stdbool.h>
#include <stddef.h>

enum { DF_HM_HIDDEN = 0, DF_HM_CONTENT = 1, DF_HM_REASONING = 2, DF_HM_TOOL = 3 };

typedef struct df_harmony {
    int state;          /* DF_HM_* of the text now arriving, or -1 inside a header */
    char hdr[128];      /* the current header (role, recipient, channel), truncated */
    size_t hlen;
    char pend[16];      /* a held-back possible marker prefix */
    size_t plen;
} df_harmony;

/* sink(ud, channel, text, n) gets every non-empty run of text with its DF_HM_* channel
 * (DF_HM_HIDDEN runs are not passed). */
typedef void (*df_harmony_sink)(void *ud, int channel, const char *text, size_t n);

void df_harmony_init(df_harmony *h);
void df_harmony_push(df_harmony *h, const char *text, size_t n, df_harmony_sink sink, void *ud);
/* End of the stream: a held-back prefix that never became a marker is text. */
void df_harmony_flush(df_harmony *h, df_harmony_sink sink, void *ud);
#endif
