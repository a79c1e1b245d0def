/* harmony.c — the Harmony channel splitter (harmony.h). */
#include "text/harmony.h"
#include <string.h>

enum { M_START, M_CHANNEL, M_MESSAGE, M_CONSTRAIN, M_END, M_RETURN, M_CALL, M_N };
static const char *const g_marker[M_N] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
                                          "<|end|>", "<|return|>", "<|call|>"};

void df_harmony_init(df_harmony *h) {
    memset(h, 0, sizeof *h);
    h->state = DF_HM_CONTENT;
}

static void hdr_add(df_harmony *h, const char *s, size_t n) {
    size_t room = sizeof h->hdr - 1 - h->hlen;
    if (n > room) n = room;
    memcpy(h->hdr + h->hlen, s, n);
    h->hlen += n;
    h->hdr[h->hlen] = 0;
}

/* text outside markers goes to the current channel, or into the header */
static void emit(df_harmony *h, const char *s, size_t n, df_harmony_sink sink, void *ud) {
    if (!n) return;
    if (h->state < 0) hdr_add(h, s, n);
    else if (h->state != DF_HM_HIDDEN) sink(ud, h->state, s, n);
}

/* the channel of the message whose header is h->hdr (llama.cpp's gpt-oss parser) */
static int classify(const df_harmony *h) {
    if (strstr(h->hdr, " to=")) return DF_HM_TOOL;
    if (strstr(h->hdr, "<|channel|>analysis")) return DF_HM_REASONING;
    return DF_HM_CONTENT; /* final, commentary preamble, or no channel */
}

static void marker(df_harmony *h, int k) {
    switch (k) {
    case M_START: h->state = -1; h->hlen = 0; h->hdr[0] = 0; break;
    case M_CHANNEL:
        if (h->state >= 0) { h->hlen = 0; h->hdr[0] = 0; } /* a channel without a role header */
        h->state = -1;
        hdr_add(h, g_marker[k], strlen(g_marker[k]));
        break;
    case M_CONSTRAIN: if (h->state < 0) hdr_add(h, g_marker[k], strlen(g_marker[k])); break;
    case M_MESSAGE: if (h->state < 0) h->state = classify(h); break;
    default: h->state = DF_HM_HIDDEN; break; /* end of a message: hidden until the next header */
    }
}

/* 1 + marker index if s[0..n) starts with a whole marker, 0 if it is a proper prefix of
 * one (need more text), -1 if neither */
static int match(const char *s, size_t n) {
    bool prefix = false;
    for (int k = 0; k < M_N; k++) {
        size_t l = strlen(g_marker[k]);
        if (n >= l && !memcmp(s, g_marker[k], l)) return 1 + k;
        if (n < l && !memcmp(s, g_marker[k], n)) prefix = true;
    }
    return prefix ? 0 : -1;
}

static void scan(df_harmony *h, const char *s, size_t n, df_harmony_sink sink, void *ud) {
    size_t run = 0, i = 0;
    while (i < n) {
        if (s[i] != '<') { i++; continue; }
        int k = match(s + i, n - i);
        if (k < 0) { i++; continue; }
        emit(h, s + run, i - run, sink, ud);
        if (k == 0) { /* a possible marker at the end: hold it back */
            memcpy(h->pend, s + i, n - i);
            h->plen = n - i;
            return;
        }
        marker(h, k - 1);
        i += strlen(g_marker[k - 1]);
        run = i;
    }
    emit(h, s + run, n - run, sink, ud);
}

void df_harmony_push(df_harmony *h, const char *text, size_t n, df_harmony_sink sink, void *ud) {
    while (h->plen && n) {
        /* complete the held-back prefix byte by byte (it is shorter than any marker) */
        h->pend[h->plen++] = *text++;
        n--;
        int k = match(h->pend, h->plen);
        if (k == 0) continue;
        char buf[sizeof h->pend];
        size_t l = h->plen;
        memcpy(buf, h->pend, l);
        h->plen = 0;
        if (k > 0) { marker(h, k - 1); break; }
        /* not a marker: its '<' is text, the rest is scanned again */
        emit(h, buf, 1, sink, ud);
        scan(h, buf + 1, l - 1, sink, ud);
    }
    if (n) scan(h, text, n, sink, ud);
}

void df_harmony_flush(df_harmony *h, df_harmony_sink sink, void *ud) {
    size_t l = h->plen;
    h->plen = 0;
    emit(h, h->pend, l, sink, ud);
}
