/* chat.c — chat templates: messages (JSON or deltafin_chat_msg[]) + options -> the text of the
 * conversation, rendered by the Jinja interpreter (jinja_*.c) with Hugging Face's
 * apply_chat_template context (messages, tools, documents, add_generation_prompt, bos_token,
 * eos_token, extra variables); the built-in templates by name (chat_templates.c, generated)
 * and the detection of a GGUF template's family.
 * Invariant: every failure of a render returns a status with a message; the render's memory
 * (arena, JSON trees) is released on every path. */
#include <cjson/cJSON.h>

#include "text/jinja_impl.h"

/* One render context, freed (arena and any JSON tree being converted) by render_free. */
static void render_free(jx *J) {
    if (J->json_tmp) cJSON_Delete(J->json_tmp);
    arena_free(J);
    free(J);
}

/* newlines normalized, one trailing newline dropped (jinja2's keep_trailing_newline=False) */
static char *normalize_source(jx *J, const char *template_src, size_t *len) {
    size_t sl = strlen(template_src);
    char *src = amalloc(J, sl + 1);
    size_t n = 0;
    for (size_t i = 0; i < sl; i++) {
        if (template_src[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < sl && template_src[i + 1] == '\n') i++;
        } else {
            src[n++] = template_src[i];
        }
    }
    if (n > 0 && src[n - 1] == '\n') n--;
    src[n] = 0;
    *len = n;
    return src;
}

/* the template's variables (a scope under the globals: kwargs shadow globals) */
static void set_context(jx *J, scope *T, const char *messages_json, const df_chat_opts *o) {
    jval msgs = df_jinja_from_json(J, messages_json, "messages");
    if (msgs.t != V_LIST) jfail(J, DF_ERR_FORMAT, 0, 0, "messages JSON must be an array");
    dict_setc(J, &T->vars, "messages", msgs);
    dict_setc(J, &T->vars, "tools", o->tools_json ? df_jinja_from_json(J, o->tools_json, "tools") : NONE);
    dict_setc(J, &T->vars, "documents", NONE);
    dict_setc(J, &T->vars, "add_generation_prompt", mk_bool(o->add_generation_prompt));
    if (o->bos_token) dict_setc(J, &T->vars, "bos_token", mk_str(J, o->bos_token));
    if (o->eos_token) dict_setc(J, &T->vars, "eos_token", mk_str(J, o->eos_token));
    if (o->extra_vars_json) {
        jval ex = df_jinja_from_json(J, o->extra_vars_json, "extra variables");
        if (ex.t != V_DICT) jfail(J, DF_ERR_FORMAT, 0, 0, "extra variables JSON must be an object");
        for (int i = 0; i < ex.d->n; i++) dict_set(J, &T->vars, ex.d->k[i], ex.d->v[i]);
    }
}

int df_chat_render_ex(const char *template_src, const char *messages_json, const df_chat_opts *o,
                      char **out) {
    if (!template_src || !messages_json || !o || !out)
        return df_err(DF_ERR_INVALID, "df_chat_render: NULL argument");
    *out = NULL;
    jx *J = calloc(1, sizeof(jx));
    if (!J) return df_err(DF_ERR_NOMEM, "df_chat_render: out of memory");
    J->max_output = o->max_output ? o->max_output : OUTPUT_LIMIT_DEFAULT;
    J->now = o->now;
    J->max_steps = o->max_steps > 0 ? o->max_steps : STEP_LIMIT;
    if (setjmp(J->jb)) {
        int rc = df_err(J->status ? J->status : DF_ERR_INTERNAL, "chat template: %s", J->err);
        render_free(J);
        return rc;
    }
    size_t n;
    const char *src = normalize_source(J, template_src, &n);
    int nt;
    tok *toks = df_jinja_lex(J, src, n, &nt);
    node *root = df_jinja_parse(J, toks, nt);

    ev E = {0};
    E.J = J;
    scope *G = scope_new(&E, NULL);
    df_jinja_add_globals(J, G);
    scope *T = scope_new(&E, G);
    set_context(J, T, messages_json, o);
    sbuf buf = {0};
    E.out = &buf;
    exec_body(&E, T, root);

    int rc = DF_OK;
    char *res = malloc(buf.n + 1);
    if (!res) {
        rc = df_err(DF_ERR_NOMEM, "chat template: out of memory");
    } else {
        if (buf.n) memcpy(res, buf.p, buf.n);
        res[buf.n] = 0;
        *out = res;
    }
    render_free(J);
    return rc;
}

static const struct {
    const char *alias, *name;
} ALIASES[] = {{"deepseek-v3.1", "deepseek-v3"}, {"deepseek", "deepseek-v3"}, {"llama3.1", "llama3"},
               {"llama-3", "llama3"}, {"mistral-nemo", "mistral"}, {"glm4.6", "glm-4.6"},
               {"kimi-k2-instruct", "kimi-k2"}, {"harmony", "gpt-oss"}, {NULL, NULL}};

const char *df_chat_builtin_template(const char *name) {
    if (!name) return NULL;
    for (int i = 0; ALIASES[i].alias; i++)
        if (!strcmp(name, ALIASES[i].alias)) name = ALIASES[i].name;
    for (int i = 0; i < df_chat_n_builtins; i++)
        if (!strcmp(df_chat_builtins[i].name, name)) return df_chat_builtins[i].source;
    return NULL;
}

const char *const *df_chat_builtin_names(void) {
    static const char *const names[] = {"kimi-k3", "kimi-k2", "kimi-k2-base", "deepseek-v3", "qwen3",
                                        "qwen3-coder", "gpt-oss", "llama3", "mistral", "glm-4.6",
                                        "chatml", NULL};
    return names;
}

const char *df_chat_detect(const char *t) {
    if (!t) return NULL;
    for (int i = 0; i < df_chat_n_builtins; i++)
        if (!strcmp(df_chat_builtins[i].source, t)) return df_chat_builtins[i].name;
    if (strstr(t, "<|open|>") && strstr(t, "<|end_of_msg|>")) return "kimi-k3";
    if (strstr(t, "<|im_middle|>")) return strstr(t, "render_content") ? "kimi-k2" : "kimi-k2-base";
    if (strstr(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>")) return "deepseek-v3";
    if (strstr(t, "<|start|>") && strstr(t, "<|channel|>")) return "gpt-oss";
    if (strstr(t, "<|start_header_id|>")) return "llama3";
    if (strstr(t, "[gMASK]")) return "glm-4.6";
    if (strstr(t, "[INST]")) return "mistral";
    if (strstr(t, "<|im_start|>")) {
        if (strstr(t, "<function=")) return "qwen3-coder";
        if (strstr(t, "<think>") || strstr(t, "enable_thinking")) return "qwen3";
        return "chatml";
    }
    return NULL;
}

int df_chat_msgs_to_json(const deltafin_chat_msg *msgs, int n, char **out) {
    if (!out || n < 0 || (n > 0 && !msgs)) return df_err(DF_ERR_INVALID, "df_chat_msgs_to_json: bad arguments");
    *out = NULL;
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return df_err(DF_ERR_NOMEM, "df_chat_msgs_to_json: out of memory");
    for (int i = 0; i < n; i++) {
        const deltafin_chat_msg *m = &msgs[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) goto nomem;
        cJSON_AddItemToArray(arr, o);
        if (!m->role) {
            cJSON_Delete(arr);
            return df_err(DF_ERR_INVALID, "chat message %d has no role", i);
        }
        if (!cJSON_AddStringToObject(o, "role", m->role)) goto nomem;
        if (m->content ? !cJSON_AddStringToObject(o, "content", m->content) : !cJSON_AddNullToObject(o, "content"))
            goto nomem;
        if (m->tool_calls_json) {
            cJSON *tc = cJSON_Parse(m->tool_calls_json);
            if (!tc) {
                cJSON_Delete(arr);
                return df_err(DF_ERR_FORMAT, "chat message %d: tool_calls is not valid JSON", i);
            }
            /* OpenAI sends function.arguments as a JSON string; HF templates expect a mapping
             * (they iterate it or tojson it). Parse strings that hold a JSON object. */
            cJSON *call;
            cJSON_ArrayForEach(call, tc) {
                cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
                cJSON *args = fn ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
                if (args && cJSON_IsString(args)) {
                    cJSON *obj = cJSON_Parse(args->valuestring);
                    if (obj && cJSON_IsObject(obj)) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
                    else cJSON_Delete(obj);
                }
            }
            cJSON_AddItemToObject(o, "tool_calls", tc);
        }
        if (m->tool_call_id && !cJSON_AddStringToObject(o, "tool_call_id", m->tool_call_id)) goto nomem;
        if (m->name && !cJSON_AddStringToObject(o, "name", m->name)) goto nomem;
    }
    *out = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    if (!*out) return df_err(DF_ERR_NOMEM, "df_chat_msgs_to_json: out of memory");
    return DF_OK;
nomem:
    cJSON_Delete(arr);
    return df_err(DF_ERR_NOMEM, "df_chat_msgs_to_json: out of memory");
}

int df_chat_render_msgs(const char *template_src, const char *template_name,
                        const deltafin_chat_msg *msgs, int n, const char *tools_json,
                        bool add_generation_prompt, const char *bos_token, const char *eos_token,
                        const char *extra_vars_json, char **out) {
    if (!out) return df_err(DF_ERR_INVALID, "df_chat_render_msgs: NULL out");
    *out = NULL;
    const char *src = template_src;
    if (template_name && *template_name) {
        src = df_chat_builtin_template(template_name);
        if (!src) return df_err(DF_ERR_INVALID, "unknown chat template '%s'", template_name);
    }
    if (!src || !*src) src = df_chat_builtin_template("chatml");
    char *js = NULL;
    int rc = df_chat_msgs_to_json(msgs, n, &js);
    if (rc) return rc;
    df_chat_opts o = {0};
    o.add_generation_prompt = add_generation_prompt;
    o.bos_token = bos_token;
    o.eos_token = eos_token;
    o.tools_json = tools_json;
    o.extra_vars_json = extra_vars_json;
    rc = df_chat_render_ex(src, js, &o, out);
    free(js);
    return rc;
}
