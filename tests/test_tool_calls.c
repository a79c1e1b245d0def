/* test_tool_calls.c — tool-call formats (src/text/tool_calls.c, tool_grammar.c): recorded
 * model-style outputs of every format parsed into content, reasoning and calls; every prefix of
 * each output parsed as a stream gives a prefix of the final result (what the server streams
 * never has to be taken back); each format's grammar accepts the call as its template renders
 * it; and a random model forced by each format's grammar writes calls the parser reads back
 * with valid arguments. */
#include <cjson/cJSON.h>

#include "deltafin.h"
#include "base/util.h"
#include "testlib.h"
#include "text/chat.h"
#include "text/gbnf.h"
#include "text/tool_calls.h"

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_SEP "<｜tool▁sep｜>"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather in a city\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"enum\":[\"Paris\",\"Rome\",\"Tokyo\"]},"
    "\"days\":{\"type\":\"integer\"},\"zip\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"The time\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{}}}}]";

typedef struct {
    const char *format;
    unsigned flags;              /* DF_TOOL_*: false / true = in the reasoning or not */
    const char *text;
    const char *content, *reasoning;
    int n_calls;
    const char *calls[3][3]; /* name, arguments (compact JSON), id or NULL */
} rec;

static const rec RECS[] = {
    {"hermes", false,
     "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
     "", "The user wants the weather.", 1, {{"get_weather", "{\"city\":\"Paris\",\"days\":2}", NULL}}},
    {"hermes", false,
     "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>\n"
     "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{}\"}\n</tool_call>",
     "Let me check both.", "", 2, {{"get_weather", "{\"city\":\"Rome\"}", NULL}, {"get_time", "{}", NULL}}},
    {"hermes", false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call> ok",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call> ok", "", 0, {{0}}},
    {"hermes", false, "Just text, <b>bold</b> and <tool_cal", "Just text, <b>bold</b> and <tool_cal", "", 0, {{0}}},
    {"hermes", false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tok",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tok", "", 0, {{0}}},
    {"qwen3-coder", false,
     "I'll look it up.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=days>\n3\n"
     "</parameter>\n<parameter=zip>\n75001\n</parameter>\n</function>\n</tool_call>",
     "I'll look it up.", "", 1, {{"get_weather", "{\"city\":\"Tokyo\",\"days\":3,\"zip\":\"75001\"}", NULL}}},
    {"kimi-k2", false,
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}"
     "<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
     "<|tool_calls_section_end|>",
     "", "", 2, {{"get_weather", "{\"city\":\"Paris\"}", "functions.get_weather:0"}, {"get_time", "{}", "functions.get_time:1"}}},
    {"kimi-k3", true,
     "The user asks for Paris.<|close|>think<|sep|><|open|>response<|sep|>Checking now.<|close|>response<|sep|><|open|>tools<|sep|>"
     "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris"
     "<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"number\"<|sep|>4<|close|>argument<|sep|><|close|>call<|sep|>"
     "<|close|>tools<|sep|><|close|>message<|sep|>",
     "Checking now.", "The user asks for Paris.", 1, {{"get_weather", "{\"city\":\"Paris\",\"days\":4}", NULL}}},
    {"kimi-k3", true, "Simple.<|close|>think<|sep|><|open|>response<|sep|>It is 4.<|close|>response<|sep|><|close|>message<|sep|>",
     "It is 4.", "Simple.", 0, {{0}}},
    {"deepseek-v3.1", false,
     DS_CALLS_BEGIN DS_CALL_BEGIN "get_weather" DS_SEP "{\"city\": \"Rome\", \"days\": 1}" DS_CALL_END DS_CALLS_END,
     "", "", 1, {{"get_weather", "{\"city\":\"Rome\",\"days\":1}", NULL}}},
    {"deepseek-v3.1", true,
     "Need the tool.</think>Sure." DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "get_time\n```json\n{}\n```" DS_CALL_END DS_CALLS_END,
     "Sure.", "Need the tool.", 1, {{"get_time", "{}", NULL}}},
    {"harmony", false,
     "<|channel|>analysis<|message|>User wants weather in Paris.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
     "", "User wants weather in Paris.", 1, {{"get_weather", "{\"city\":\"Paris\"}", NULL}}},
    {"harmony", false, " to=functions.get_time<|channel|>commentary json<|message|>{}", "", "", 1, {{"get_time", "{}", NULL}}},
    {"harmony", false, "<|channel|>analysis<|message|>2+2.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.",
     "It is 4.", "2+2.", 0, {{0}}},
    /* reasoning_format "none" (llama.cpp's): the analysis message stays in the content as written */
    {"harmony", DF_TOOL_RAW_REASONING, "<|channel|>analysis<|message|>2+2.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.",
     "<|channel|>analysis<|message|>2+2.<|end|>It is 4.", "", 0, {{0}}},
    {"harmony", DF_TOOL_RAW_REASONING,
     "<|channel|>analysis<|message|>User wants weather in Paris.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
     "<|channel|>analysis<|message|>User wants weather in Paris.<|end|>", "", 1, {{"get_weather", "{\"city\":\"Paris\"}", NULL}}},
    {"hermes", DF_TOOL_RAW_REASONING,
     "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
     "<think>\nThe user wants the weather.\n</think>", "", 1, {{"get_weather", "{\"city\":\"Paris\"}", NULL}}},
    {"glm-4.5", false,
     "\n<think>Weather needed.</think>\nOn it.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Tokyo</arg_value>\n"
     "<arg_key>days</arg_key>\n<arg_value>5</arg_value>\n</tool_call>",
     "On it.", "Weather needed.", 1, {{"get_weather", "{\"city\":\"Tokyo\",\"days\":5}", NULL}}},
    {"llama3", false, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", "", 1,
     {{"get_weather", "{\"city\":\"Paris\"}", NULL}}},
    {"llama3", false, "{not a call} but text", "{not a call} but text", "", 0, {{0}}},
    {"mistral", false, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}, \"id\": \"a1b2c3d4e\"}]", "", "", 1,
     {{"get_weather", "{\"city\":\"Rome\"}", "a1b2c3d4e"}}},
};

static bool prefix(const char *a, const char *b) { return !strncmp(a, b, strlen(a)); }

static void test_recorded(void) {
    for (size_t i = 0; i < sizeof RECS / sizeof RECS[0]; i++) {
        const rec *r = &RECS[i];
        const df_tool_format *f = df_tool_format_by_name(r->format);
        CHECK_MSG(f != NULL, "%s", r->format);
        if (!f) continue;
        df_tool_result res;
        CHECK_EQ_INT(df_tool_parse(f, r->text, strlen(r->text), false, r->flags, TOOLS, &res), DF_OK);
        CHECK_MSG(!strcmp(res.content, r->content), "%s #%zu content '%s' vs '%s'", r->format, i, res.content, r->content);
        CHECK_MSG(!strcmp(res.reasoning, r->reasoning), "%s #%zu reasoning '%s' vs '%s'", r->format, i, res.reasoning, r->reasoning);
        CHECK_MSG(res.n_calls == r->n_calls, "%s #%zu: %d calls, expected %d", r->format, i, res.n_calls, r->n_calls);
        for (int k = 0; k < res.n_calls && k < r->n_calls; k++) {
            CHECK_STR(res.calls[k].name, r->calls[k][0]);
            CHECK_MSG(!strcmp(res.calls[k].arguments, r->calls[k][1]), "%s #%zu call %d args %s vs %s", r->format, i, k,
                      res.calls[k].arguments, r->calls[k][1]);
            if (r->calls[k][2]) CHECK_STR(res.calls[k].id, r->calls[k][2]);
            else CHECK(res.calls[k].id == NULL);
        }
        /* streamed: every prefix gives a prefix of the final result, growing monotonically */
        char *last_c = strdup(""), *last_r = strdup("");
        int last_n = 0, bad = 0;
        size_t n = strlen(r->text);
        for (size_t l = 0; l <= n; l++) {
            df_tool_result p;
            if (df_tool_parse(f, r->text, l, true, r->flags, TOOLS, &p) != DF_OK) { bad++; continue; }
            bool ok = prefix(p.content, res.content) && prefix(p.reasoning, res.reasoning) && p.n_calls <= res.n_calls &&
                      prefix(last_c, p.content) && prefix(last_r, p.reasoning) && p.n_calls >= last_n;
            for (int k = 0; ok && k < p.n_calls; k++)
                ok = !strcmp(p.calls[k].name, res.calls[k].name) && !strcmp(p.calls[k].arguments, res.calls[k].arguments);
            if (!ok && bad++ < 2)
                fprintf(stderr, "  %s #%zu prefix %zu: content '%s' reasoning '%s' calls %d\n", r->format, i, l, p.content,
                        p.reasoning, p.n_calls);
            free(last_c);
            free(last_r);
            last_c = strdup(p.content);
            last_r = strdup(p.reasoning);
            last_n = p.n_calls;
            df_tool_result_free(&p);
        }
        CHECK_MSG(bad == 0, "%s #%zu: %d prefixes parse to something the final result takes back", r->format, i, bad);
        free(last_c);
        free(last_r);
        df_tool_result_free(&res);
    }
}

static void test_table(void) {
    static const struct { const char *tmpl, *format; } map[] = {
        {"qwen3", "hermes"}, {"chatml", "hermes"}, {"qwen3-coder", "qwen3-coder"}, {"kimi-k2", "kimi-k2"},
        {"kimi-k3", "kimi-k3"}, {"deepseek-v3", "deepseek-v3.1"}, {"gpt-oss", "harmony"}, {"glm-4.6", "glm-4.5"},
        {"llama3", "llama3"}, {"mistral", "mistral"}, {"something-else", "hermes"}, {NULL, "hermes"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        CHECK_STR(df_tool_format_name(df_tool_format_for(map[i].tmpl)), map[i].format);
    const df_tool_format *k3 = df_tool_format_by_name("kimi-k3"), *q = df_tool_format_by_name("hermes");
    CHECK(df_tool_prompt_in_reasoning(k3, "...<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>"));
    CHECK(!df_tool_prompt_in_reasoning(q, "<|im_start|>assistant\n"));
    CHECK(df_tool_prompt_in_reasoning(q, "<|im_start|>assistant\n<think>\n"));
    CHECK(!df_tool_prompt_in_reasoning(q, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    CHECK(df_tool_format_always_parse(df_tool_format_by_name("harmony")) && !df_tool_format_always_parse(q));
    CHECK_STR(df_tool_format_trigger(q), "<tool_call>");
}

/* each format's grammar accepts the call the way its template writes it */
static void test_grammars(void) {
    static const struct { const char *format, *canonical; bool lazy_ok; } g[] = {
        {"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>", true},
        {"qwen3-coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n"
                        "</function>\n</tool_call>", true},
        {"kimi-k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
                    "{\"city\": \"Paris\", \"days\": 2}<|tool_call_end|><|tool_calls_section_end|>", true},
        {"kimi-k3", "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" "
                    "type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"number\"<|sep|>2"
                    "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>", true},
        {"deepseek-v3.1", DS_CALLS_BEGIN DS_CALL_BEGIN "get_weather" DS_SEP "{\"city\": \"Paris\", \"days\": 2}" DS_CALL_END DS_CALLS_END, true},
        {"harmony", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": 2}", true},
        {"glm-4.5", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
                    "<arg_value>2</arg_value>\n</tool_call>", true},
        {"llama3", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}", true},
        {"mistral", "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}]", true},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        const df_tool_format *f = df_tool_format_by_name(g[i].format);
        for (int lazy = 0; lazy < 2; lazy++)
            for (int par = 0; par < 2; par++) {
                char *gb = NULL;
                int rc = df_tool_grammar(f, TOOLS, par ? NULL : "get_weather", par, lazy, &gb);
                CHECK_MSG(rc == DF_OK && gb, "%s: %s", g[i].format, df_errmsg());
                df_gbnf *gr = NULL;
                CHECK_MSG(gb && df_gbnf_parse(gb, NULL, NULL, NULL, &gr) == DF_OK, "%s grammar: %s\n%s", g[i].format, df_errmsg(), gb);
                if (gr && (lazy || strcmp(g[i].format, "kimi-k3"))) {
                    df_gmatch *m = df_gmatch_create(gr);
                    bool ok = df_gmatch_accept(m, g[i].canonical, strlen(g[i].canonical), -1) == DF_OK && df_gmatch_can_end(m);
                    CHECK_MSG(ok, "%s (lazy %d, parallel %d): the grammar refuses the template's call\n%s", g[i].format, lazy, par, gb);
                    /* and a call to another function than the named one is refused */
                    if (!par) {
                        df_gmatch_reset(m);
                        const char *h = strstr(g[i].canonical, "get_weather");
                        CHECK(df_gmatch_accept(m, g[i].canonical, (size_t)(h - g[i].canonical), -1) == DF_OK);
                        CHECK(df_gmatch_accept(m, "get_time", 8, -1) != DF_OK);
                    }
                    df_gmatch_free(m);
                    const char *trig = df_tool_format_trigger(f);
                    CHECK_MSG(!lazy || !strncmp(g[i].canonical, trig, strlen(trig)), "%s: the trigger does not start the call", g[i].format);
                }
                df_gbnf_free(gr);
                free(gb);
            }
    }
    char *gb = NULL;
    CHECK_EQ_INT(df_tool_grammar(df_tool_format_by_name("hermes"), TOOLS, "nope", false, false, &gb), DF_ERR_INVALID);
    CHECK_EQ_INT(df_tool_grammar(df_tool_format_by_name("hermes"), "[]", NULL, false, false, &gb), DF_ERR_INVALID);
}

/* a random model under each format's grammar: the parser reads its call back */
static void test_forced_calls(void) {
    char path[512];
    deltafin_model_params mp = deltafin_model_default_params();
    mp.n_threads = 2;
    deltafin_model *m = NULL;
    if (deltafin_model_load(df_fixture("models/llama-2-tiny-random.gguf", path, sizeof path), &mp, &m) < 0) {
        printf("test_tool_calls: SKIP generation (%s)\n", deltafin_errmsg());
        return;
    }
    const char *formats[] = {"hermes", "qwen3-coder", "kimi-k2", "deepseek-v3.1", "harmony", "glm-4.5", "llama3", "mistral", "kimi-k3"};
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = 1024;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        const df_tool_format *f = df_tool_format_by_name(formats[i]);
        char *gb = NULL;
        bool lazy = !strcmp(formats[i], "kimi-k3"); /* its full grammar starts in free thinking text */
        CHECK_EQ_INT(df_tool_grammar(f, TOOLS, NULL, false, lazy, &gb), DF_OK);
        deltafin_grammar *g = NULL;
        CHECK_EQ_INT(deltafin_grammar_create(deltafin_model_vocab(m), gb ? gb : "", NULL, &g), DELTAFIN_OK);
        free(gb);
        deltafin_ctx *c = NULL;
        deltafin_ctx_create(m, &cp, &c);
        deltafin_sampler_params sp = deltafin_sampler_default_params();
        sp.seed = 11 + i;
        deltafin_sampler *s = deltafin_sampler_create(&sp);
        deltafin_sampler_set_grammar(s, g);
        int32_t id = deltafin_token_bos(m);
        char out[4096];
        size_t len = 0;
        bool ended = false;
        for (int t = 0; t < 400 && deltafin_decode(c, &id, 1, false) == DELTAFIN_OK; t++) {
            id = deltafin_sampler_sample(s, deltafin_logits(c, -1), deltafin_model_n_vocab(m));
            if (id < 0) break;
            deltafin_sampler_accept(s, id);
            if (deltafin_token_is_eog(m, id)) { ended = true; break; }
            int pn = deltafin_token_to_piece(m, id, false, out + len, (int)(sizeof out - len - 1));
            if (pn > 0 && len + (size_t)pn < sizeof out - 1) len += (size_t)pn;
        }
        out[len] = 0;
        df_tool_result r;
        CHECK_EQ_INT(df_tool_parse(f, out, len, false, false, TOOLS, &r), DF_OK);
        bool ok = ended && r.n_calls == 1;
        if (ok) {
            cJSON *a = cJSON_Parse(r.calls[0].arguments);
            const cJSON *city = cJSON_GetObjectItemCaseSensitive(a, "city");
            if (!strcmp(r.calls[0].name, "get_weather"))
                ok = cJSON_IsString(city) && (!strcmp(city->valuestring, "Paris") || !strcmp(city->valuestring, "Rome") ||
                                              !strcmp(city->valuestring, "Tokyo"));
            else
                ok = !strcmp(r.calls[0].name, "get_time") && cJSON_IsObject(a);
            cJSON_Delete(a);
        }
        CHECK_MSG(ok, "%s: ended %d, %d calls from '%s'", formats[i], ended, r.n_calls, out);
        if (getenv("DF_TEST_VERBOSE")) printf("%s: %s\n  -> %s %s\n", formats[i], out, r.n_calls ? r.calls[0].name : "-",
                                              r.n_calls ? r.calls[0].arguments : "");
        df_tool_result_free(&r);
        deltafin_sampler_free(s);
        deltafin_ctx_free(c);
    }
    deltafin_model_free(m);
}

int main(void) {
    df_init();
    test_table();
    test_recorded();
    test_grammars();
    test_forced_calls();
    TEST_MAIN_END("test_tool_calls");
}
