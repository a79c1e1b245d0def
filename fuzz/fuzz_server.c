/* fuzz_server.c — libFuzzer target for the HTTP request parsing/validation path of the server
 * (src/server.c df_srv_parse): byte 0 picks the endpoint (chat, completion, tokenize,
 * detokenize), the rest is the request body. Checks: no crash, an error always carries a status
 * in 400..599 and a valid-UTF-8 JSON error body; a parsed request's strings are valid UTF-8. */
#include "app/server.h"
#include "base/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_str(const char *s) {
    if (s && deltafin_utf8_valid_prefix(s, strlen(s)) != strlen(s)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int kind = 1 + data[0] % 4;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    df_srv_limits lim = {.max_tokens_limit = 4096};
    df_srv_req r;
    df_srv_error e;
    int st = df_srv_parse(kind, body, len, &lim, &r, &e);
    if (st) {
        if (st < 400 || st > 599 || st != e.status) abort();
        char *j = df_srv_error_json(&e);
        if (!j || deltafin_utf8_valid_prefix(j, strlen(j)) != strlen(j)) abort();
        cJSON *back = cJSON_Parse(j);
        if (!back) abort();
        cJSON_Delete(back);
        free(j);
    } else {
        (void)df_srv_model_ok(r.model, "served-model");
        for (int i = 0; i < r.n_msgs; i++) {
            if (!r.msgs[i].role) abort();
            check_str(r.msgs[i].content);
            check_str(r.msgs[i].tool_calls_json);
            check_str(r.msgs[i].name);
        }
        check_str(r.prompt);
        check_str(r.content);
        check_str(r.tools_json);
        for (int i = 0; i < r.n_stop; i++) if (!r.stop[i] || !r.stop[i][0]) abort();
        if (kind <= 2 && r.max_tokens != -2 && (r.max_tokens < 1 || r.max_tokens > lim.max_tokens_limit)) abort();
        if (r.top_logprobs < 0 || r.top_logprobs > DF_SRV_MAX_TOP_LOGPROBS) abort();
        df_srv_req_free(&r);
    }
    char *san = df_srv_utf8_sanitize(body, len);
    if (!san || deltafin_utf8_valid_prefix(san, strlen(san)) != strlen(san)) abort();
    free(san);
    return 0;
}
