/* chat.h — chat templates: a Jinja2-subset interpreter that renders Hugging Face chat templates
 * (tokenizer.chat_template) byte-for-byte like Python jinja2 with HF's apply_chat_template
 * settings (trim_blocks, lstrip_blocks, loopcontrols, json.dumps-style tojson, raise_exception,
 * strftime_now), plus built-in copies of the common model templates.
 *
 * Invariants: untrusted templates and JSON never crash the renderer; every failure returns a
 * negative df_status with a df_errmsg() detail; template errors name "line:col" in the template.
 * Rendering is bounded: macro recursion depth, evaluation steps, memory and output size are
 * limited (DF_ERR_RANGE when exceeded).
 * Threading: all functions are reentrant (no global mutable state).
 *
 * Supported Jinja: {{ }}, {% if/elif/else %}, {% for %} (tuple targets, `if` filter, else,
 * loop.*), {% set %} (names, ns.attr, tuples, block set), {% macro %} (defaults, keywords),
 * {% break/continue %}, {% with %}, {% raw %}, {% generation %}, comments, whitespace control;
 * expressions with Python semantics (slices, `in`, chained comparisons, `~`, %-formatting,
 * int/float arithmetic, dict/list/tuple literals, non-string dict keys); the filters and tests
 * the HF templates use (trim length string tojson safe default list first last join upper
 * lower title capitalize replace items dictsort select reject selectattr rejectattr map int
 * float abs unique sort indent escape reverse sum min max round attr format; defined none
 * string mapping iterable sequence number integer float boolean true false callable eq ne lt
 * le gt ge in sameas odd even divisibleby lower upper); str/list/dict methods.
 * Deliberate deviations from Python jinja2 in HF's ImmutableSandboxedEnvironment:
 *   - list.append/pop and dict.update are allowed (as in llama.cpp and SandboxedEnvironment;
 *     Kimi-K2-Instruct needs them for tool calls);
 *   - select/reject/selectattr/rejectattr/map return lists, not generators (so `|length` and
 *     `|tojson` work on them, as in llama.cpp);
 *   - upper/lower/title/capitalize change ASCII letters only;
 *   - not supported (syntax error): {% call %}, {% filter %}, {% include/extends/block %},
 *     recursive loops, *args and **kwargs, loop.cycle.
 *
 * JSON inputs (messages, tools, extra variables) are read as Python's json.loads reads them
 * (ints stay ints, "2.0" is a float; control characters in strings, non-JSON whitespace and
 * numbers such as "1." are errors), parsed by cJSON; two cJSON limits remain: a string holding
 * \u0000 ends there, and a lone surrogate escape (\ud800) is a syntax error.
 * Implementation: jinja_lex.c, jinja_parse.c, jinja_values.c, jinja_eval.c, jinja_builtins.c
 * (internals in jinja_impl.h), this module's entry points in chat.c.
 *
 * Status codes: DF_ERR_FORMAT  syntax error in the template, malformed JSON input;
 *               DF_ERR_INVALID the template called raise_exception() or hit a runtime type
 *                              error (e.g. `'x' in none`, undefined attribute of undefined);
 *               DF_ERR_RANGE   a limit was exceeded;   DF_ERR_NOMEM.
 */
#ifndef DF_CHAT_H
#define DF_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deltafin.h"

typedef struct {
    bool add_generation_prompt;
    const char *bos_token;       /* NULL: the variable is undefined in the template */
    const char *eos_token;       /* NULL: undefined */
    const char *tools_json;      /* OpenAI tools array, or NULL (then `tools` is none) */
    const char *extra_vars_json; /* JSON object of extra variables, e.g. {"enable_thinking":false} */
    int64_t now;                 /* strftime_now(): 0 = current local time; else this UTC instant */
    size_t max_output;           /* 0 = default (64 MiB) */
    long long max_steps;         /* evaluation steps; 0 = default (20 million) */
} df_chat_opts;

/* Render `template_src` with messages (a JSON array of message objects) and options.
 * *out is malloc'ed, NUL-terminated (caller frees). */
int df_chat_render_ex(const char *template_src, const char *messages_json, const df_chat_opts *o,
                      char **out);

/* Built-in template source by name: "kimi-k3", "kimi-k2", "kimi-k2-base", "deepseek-v3",
 * "qwen3", "qwen3-coder", "gpt-oss", "llama3", "mistral", "glm-4.6", "chatml" (plus aliases
 * "deepseek-v3.1", "llama3.1", "mistral-nemo", "glm4.6"). NULL if unknown. */
const char *df_chat_builtin_template(const char *name);
/* The canonical built-in names, NULL-terminated. */
const char *const *df_chat_builtin_names(void);

/* Best built-in name for a GGUF chat template (exact match first, then substring sniffing),
 * for reporting. NULL if nothing matches (callers then fall back to "chatml"). */
const char *df_chat_detect(const char *template_src);

/* Build the messages JSON array from deltafin_chat_msg[]: role, content (null when NULL),
 * tool_calls (parsed from tool_calls_json; DF_ERR_FORMAT if it is not valid JSON; a
 * function.arguments string holding a JSON object is replaced by that object, the HF
 * convention the templates expect), tool_call_id and name when non-NULL. *out is malloc'ed. */
int df_chat_msgs_to_json(const deltafin_chat_msg *msgs, int n, char **out);

/* deltafin_chat_render without the model: template_name (a built-in, e.g. "qwen3") wins if
 * non-NULL and non-empty (DF_ERR_INVALID if unknown), else template_src (the GGUF's
 * tokenizer.chat_template), else, when that is NULL or empty, the ChatML fallback (as
 * llama.cpp). bos/eos: the vocab's BOS/EOS token text (NULL = undefined in the template).
 * The caller strips a leading BOS text itself if the tokenizer adds BOS (formats.md 4.6). */
int df_chat_render_msgs(const char *template_src, const char *template_name,
                        const deltafin_chat_msg *msgs, int n, const char *tools_json,
                        bool add_generation_prompt, const char *bos_token, const char *eos_token,
                        const char *extra_vars_json, char **out);

/* Internal: the generated table in chat_templates.c. */
typedef struct {
    const char *name;
    const char *source;
} df_chat_builtin;
extern const df_chat_builtin df_chat_builtins[];
extern const int df_chat_n_builtins;

#endif
