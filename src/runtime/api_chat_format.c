/* api_chat_format.c — the public face of src/text/tool_calls.h (deltafin.h "chat output"):
 * which tool-call format a request's template uses, parsing generated text into content,
 * reasoning and tool calls, and the grammar that forces a call; plus chat rendering with a
 * template given as text (--chat-template-file). Thin wrappers; the work is in src/text.
 * Threading: reentrant (formats are immutable tables). */
#include "deltafin.h"
#include "model/model.h"
#include "text/chat.h"
#include "text/tool_calls.h"
#include "text/tokenizer.h"

#include <stddef.h>

static const df_tool_format *fmt(const deltafin_chat_format *f) { return (const df_tool_format *)f; }

/* the public structs are the internal ones under other names */
_Static_assert(sizeof(deltafin_tool_call) == sizeof(df_tool_call) && offsetof(deltafin_tool_call, name) == offsetof(df_tool_call, name) &&
                   offsetof(deltafin_tool_call, arguments) == offsetof(df_tool_call, arguments),
               "deltafin_tool_call layout");
_Static_assert(sizeof(deltafin_chat_output) == sizeof(df_tool_result) &&
                   offsetof(deltafin_chat_output, reasoning) == offsetof(df_tool_result, reasoning) &&
                   offsetof(deltafin_chat_output, calls) == offsetof(df_tool_result, calls) &&
                   offsetof(deltafin_chat_output, n_calls) == offsetof(df_tool_result, n_calls),
               "deltafin_chat_output layout");

const deltafin_chat_format *deltafin_chat_format_for(const deltafin_model *m, const char *template_name,
                                                     const char *template_src) {
    const char *family = template_name && *template_name ? template_name : NULL;
    if (!family && template_src && *template_src) family = df_chat_detect(template_src);
    if (!family && !template_src && m) family = df_chat_detect(deltafin_model_meta_str(m, "tokenizer.chat_template"));
    return (const deltafin_chat_format *)df_tool_format_for(family ? family : "chatml");
}

const char *deltafin_chat_format_name(const deltafin_chat_format *f) { return df_tool_format_name(fmt(f)); }
const char *const *deltafin_chat_format_markers(const deltafin_chat_format *f) { return df_tool_format_markers(fmt(f)); }
const char *deltafin_chat_format_trigger(const deltafin_chat_format *f) { return df_tool_format_trigger(fmt(f)); }
bool deltafin_chat_format_in_reasoning(const deltafin_chat_format *f, const char *prompt) {
    return df_tool_prompt_in_reasoning(fmt(f), prompt);
}
bool deltafin_chat_format_always_parse(const deltafin_chat_format *f) { return df_tool_format_always_parse(fmt(f)); }

int deltafin_chat_output_parse(const deltafin_chat_format *f, const char *text, size_t n, bool partial, unsigned flags,
                               const char *tools_json, deltafin_chat_output *out) {
    df_tool_result r;
    unsigned tf = (flags & DELTAFIN_PARSE_IN_REASONING ? DF_TOOL_IN_REASONING : 0) |
                  (flags & DELTAFIN_PARSE_REASONING_AS_CONTENT ? DF_TOOL_RAW_REASONING : 0);
    int rc = df_tool_parse(fmt(f), text, n, partial, tf, tools_json, &r);
    memset(out, 0, sizeof *out);
    if (rc < 0) return rc;
    /* the same layout: a deltafin_tool_call is a df_tool_call */
    out->content = r.content;
    out->reasoning = r.reasoning;
    out->calls = (deltafin_tool_call *)r.calls;
    out->n_calls = r.n_calls;
    return DF_OK;
}

void deltafin_chat_output_free(deltafin_chat_output *o) {
    if (!o) return;
    df_tool_result r = {o->content, o->reasoning, (df_tool_call *)o->calls, o->n_calls};
    df_tool_result_free(&r);
    memset(o, 0, sizeof *o);
}

int deltafin_chat_tool_grammar(const deltafin_chat_format *f, const char *tools_json, const char *only_function,
                               bool parallel, bool lazy, char **gbnf) {
    return df_tool_grammar(fmt(f), tools_json, only_function, parallel, lazy, gbnf);
}

/* the BOS / EOS texts the templates see (as deltafin_chat_render) */
static char *piece_str(const deltafin_model *m, int32_t id) {
    if (id < 0) return NULL;
    char buf[256];
    int n = deltafin_token_to_piece(m, id, true, buf, (int)sizeof buf - 1);
    if (n < 0 || n >= (int)sizeof buf) return NULL;
    return df_strndup(buf, (size_t)n);
}

int deltafin_chat_render_template(const deltafin_model *m, const char *template_src, const deltafin_chat_msg *msgs,
                                  int n_msgs, const char *tools_json, bool add_generation_prompt, char **out) {
    *out = NULL;
    if (!template_src || !*template_src) return df_err(DF_ERR_INVALID, "chat template: empty template text");
    char *bos = piece_str(m, deltafin_token_bos(m));
    char *eos = piece_str(m, deltafin_token_eos(m));
    int rc = df_chat_render_msgs(template_src, NULL, msgs, n_msgs, tools_json, add_generation_prompt, bos ? bos : "",
                                 eos ? eos : "", NULL, out);
    free(bos);
    free(eos);
    return rc;
}
