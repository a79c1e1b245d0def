/* fuzz_chat_template.c — libFuzzer target for the Jinja chat-template engine (src/text:
 * df_chat_render_ex): byte 0 picks the mode, the rest is the input.
 *   mode even: the input is a template, rendered with a fixed conversation (system, user,
 *              assistant with a tool call, tool answer) and a tools array;
 *   mode odd:  the input is a messages JSON array, rendered by one of the built-in templates
 *              (byte 0 >> 1 picks it), as a server request's messages would be.
 * Limits (steps, output size) keep each input fast. Properties: no crash, no hang; a refusal
 * is a negative status with a message; a rendering is NUL-terminated text. */
#include "text/chat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *k_msgs =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"},{\"role\":\"user\",\"content\":\"Thanks \\u00e9\"}]";
static const char *k_tools =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    df_chat_opts o = {.add_generation_prompt = (data[0] & 4) != 0, .bos_token = "<s>", .eos_token = "</s>",
                      .tools_json = (data[0] & 8) ? k_tools : NULL, .now = 1700000000, .max_output = 1u << 20,
                      .max_steps = 200000};
    char *out = NULL;
    int rc;
    if (data[0] & 1) {
        const char *const *names = df_chat_builtin_names();
        int n = 0;
        while (names[n]) n++;
        const char *src = df_chat_builtin_template(names[(data[0] >> 1) % n]);
        if (!src) abort();
        rc = df_chat_render_ex(src, s, &o, &out);
    } else {
        rc = df_chat_render_ex(s, k_msgs, &o, &out);
    }
    if (rc > 0) abort();
    if (rc == 0 && (!out || strlen(out) > (1u << 20))) abort();
    if (rc < 0 && !deltafin_errmsg()[0]) abort();
    free(out);
    free(s);
    return 0;
}
