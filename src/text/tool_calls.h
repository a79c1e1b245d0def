/* tool_calls.h — tool calls in model output: for each chat-template family deltafin ships, the
 * syntax its models write tool calls (and reasoning) in, parsed into OpenAI tool_calls, plus
 * the GBNF grammar that forces that syntax (tool_choice "required" / a named function, and the
 * lazy grammar of "auto" that starts at the format's trigger).
 *
 *   format        templates            a call looks like
 *   hermes        qwen3, chatml        <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
 *   qwen3-coder   qwen3-coder (3.5)    <tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n</function>\n</tool_call>
 *   kimi-k2       kimi-k2              <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
 *                                      <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
 *   kimi-k3       kimi-k3              <|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>
 *                                      <|open|>argument key="k" type="string"<|sep|>v<|close|>argument<|sep|>
 *                                      <|close|>call<|sep|><|close|>tools<|sep|>
 *   deepseek-v3.1 deepseek-v3          <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}
 *                                      <｜tool▁call▁end｜><｜tool▁calls▁end｜>
 *   harmony       gpt-oss              <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}
 *                                      (recipient also before <|channel|>; analysis = reasoning, final = content)
 *   glm-4.5       glm-4.6              <tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
 *   llama3        llama3               {"name": "f", "parameters": {...}} as the whole answer
 *   mistral       mistral              [TOOL_CALLS][{"name": "f", "arguments": {...}}]
 *
 * Reasoning: <think>...</think> (hermes, qwen3-coder, kimi-k2, deepseek, glm), the think
 * channel of Kimi K3, the analysis channel of Harmony, into `reasoning`.
 * Streaming: a partial parse gives only what cannot change any more: content without a
 * trailing piece that may start a marker and without trailing whitespace, reasoning likewise,
 * and only calls whose closing marker arrived; each partial result is a prefix of the final one.
 * Threading: reentrant; formats are immutable tables. */
#ifndef DF_TOOL_CALLS_H
#define DF_TOOL_CALLS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct df_tool_format df_tool_format;

typedef struct {
    char *id;         /* the model's own id where the format has one (kimi-k2), else NULL */
    char *name;
    char *arguments;  /* a JSON object, as text */
} df_tool_call;

typedef struct {
    char *content;    /* never NULL after a successful parse */
    char *reasoning;  /* never NULL after a successful parse ("" when none) */
    df_tool_call *calls;
    int n_calls;
} df_tool_result;

/* The format of a template family ("qwen3", "kimi-k2", ... as df_chat_detect names them;
 * "chatml" and unknown names: hermes). Never NULL. */
const df_tool_format *df_tool_format_for(const char *template_name);
const df_tool_format *df_tool_format_by_name(const char *format_name); /* NULL if unknown */
const char *df_tool_format_name(const df_tool_format *f);
/* The special-token texts the output must keep for parsing (NULL-terminated list). */
const char *const *df_tool_format_markers(const df_tool_format *f);
/* The text where a call begins (the lazy grammar's trigger). */
const char *df_tool_format_trigger(const df_tool_format *f);
/* Whether a rendered prompt leaves the model inside its reasoning (it ends with the format's
 * reasoning opener, e.g. "<think>" or Kimi K3's think tag). */
bool df_tool_prompt_in_reasoning(const df_tool_format *f, const char *prompt);
/* Harmony's channels must be parsed even without tools (its raw text is not an answer). */
bool df_tool_format_always_parse(const df_tool_format *f);

/* Parse text[0..n). partial: streaming (see above). flags: DF_TOOL_IN_REASONING (the prompt
 * left the model in its reasoning), DF_TOOL_RAW_REASONING (reasoning is not split off: it stays
 * in the content as written, Harmony's analysis message with its header and <|end|>, as
 * llama.cpp's reasoning_format "none"). tools_json: the request's tools (to type the values of
 * key/value formats; may be NULL). Fills *out (free with df_tool_result_free). DF_ERR_NOMEM
 * only: malformed calls stay content. */
enum { DF_TOOL_IN_REASONING = 1u, DF_TOOL_RAW_REASONING = 2u };
int df_tool_parse(const df_tool_format *f, const char *text, size_t n, bool partial, unsigned flags,
                  const char *tools_json, df_tool_result *out);
void df_tool_result_free(df_tool_result *r);

/* The grammar for tool_choice: only_fn NULL = any of the tools ("required"), else that
 * function; parallel: one or more calls, else exactly one. lazy: the grammar starts at the
 * trigger (tool_choice "auto", with df_tool_format_trigger as the trigger word); otherwise it
 * also covers what the model may write before the call (reasoning, Harmony's analysis).
 * DF_ERR_INVALID when only_fn is not among the tools, DF_ERR_FORMAT for a bad schema. */
int df_tool_grammar(const df_tool_format *f, const char *tools_json, const char *only_fn, bool parallel, bool lazy,
                    char **gbnf);

#endif
