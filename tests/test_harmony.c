/* test_harmony.c — gpt-oss Harmony channel splitter (src/text/harmony.c): reasoning vs content
 * vs tool calls as llama-server's gpt-oss parser splits them, for whole texts and for every
 * split of them into two pieces and into single bytes (streaming through held-back markers). */
#include "testlib.h"
#include "text/harmony.h"

typedef struct { char out[4][512]; size_t n[4]; } acc;

static void sink(void *ud, int ch, const char *s, size_t n) {
    acc *a = ud;
    if (ch < 0 || ch > 3 || a->n[ch] + n >= sizeof a->out[ch]) return;
    memcpy(a->out[ch] + a->n[ch], s, n);
    a->n[ch] += n;
    a->out[ch][a->n[ch]] = 0;
}

/* splits text at every cut into 2 pieces, and byte by byte: the same channels each time */
static void check(const char *text, const char *content, const char *reasoning, const char *tool) {
    const size_t n = strlen(text);
    for (size_t cut = 0; cut <= n + 1; cut++) {
        acc a;
        memset(&a, 0, sizeof a);
        df_harmony h;
        df_harmony_init(&h);
        if (cut <= n) {
            df_harmony_push(&h, text, cut, sink, &a);
            df_harmony_push(&h, text + cut, n - cut, sink, &a);
        } else {
            for (size_t i = 0; i < n; i++) df_harmony_push(&h, text + i, 1, sink, &a);
        }
        df_harmony_flush(&h, sink, &a);
        CHECK_MSG(!strcmp(a.out[DF_HM_CONTENT], content), "'%s' cut %zu: content '%s' want '%s'", text, cut,
                  a.out[DF_HM_CONTENT], content);
        CHECK_MSG(!strcmp(a.out[DF_HM_REASONING], reasoning), "'%s' cut %zu: reasoning '%s' want '%s'", text,
                  cut, a.out[DF_HM_REASONING], reasoning);
        CHECK_MSG(!strcmp(a.out[DF_HM_TOOL], tool), "'%s' cut %zu: tool '%s' want '%s'", text, cut,
                  a.out[DF_HM_TOOL], tool);
    }
}

int main(void) {
    /* the usual turn: analysis, then the final answer */
    check("<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final"
          "<|message|>Hello! How can I help?<|return|>",
          "Hello! How can I help?", "User greets. Reply.", "");
    /* no Harmony at all (a random model): everything is content, '<' included */
    check("a < b and <| not a marker |> 1<2", "a < b and <| not a marker |> 1<2", "", "");
    /* a commentary preamble is content; a tool call (recipient) goes to the tool channel */
    check("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary"
          "<|message|>Checking.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary "
          "<|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
          "Checking.", "Need weather.", "{\"city\":\"Paris\"}");
    /* recipient in the channel header, stray commentary before analysis */
    check("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>", "", "", "{}");
    check("<|channel|>commentary<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final"
          "<|message|>ok", "ok", "think", "");
    /* a stream cut off inside the reasoning, and a truncated marker at the very end */
    check("<|channel|>analysis<|message|>still thinking", "", "still thinking", "");
    check("<|channel|>final<|message|>done <|ret", "done <|ret", "", "");
    printf("test_harmony: %d passed, %d failed\n", t_pass, t_fail);
    return t_fail ? 1 : 0;
}
