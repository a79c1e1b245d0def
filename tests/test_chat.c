/* test_chat.c — chat template engine: byte equality with Python jinja2 renders of the real model
 * templates (tests/data/chat/expected/, made by scripts/render_chat_expected.py), error handling
 * with line:col, resource limits, Jinja semantics spot checks, helpers. Run from the repo root. */
#include <cjson/cJSON.h>
#include <dirent.h>

#include "text/chat.h"
#include "testlib.h"
#include "base/util.h"

#define DATA "tests/data/chat"
#define FIXED_NOW 1768478400 /* 2026-01-15 12:00:00 UTC, as in render_chat_expected.py */

static char *read_text(const char *path) {
    char *d = NULL;
    size_t n = 0;
    if (df_read_file(path, &d, &n) != DF_OK) return NULL;
    return d;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* show where two renders first differ */
static void show_diff(const char *what, const char *got, const char *want) {
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "  %s: first difference at byte %zu\n  got : ...%.120s\n  want: ...%.120s\n", what, i,
            got + from, want + from);
}

static void test_golden(void) {
    char *tj = read_text(DATA "/templates.json");
    CHECK_MSG(tj != NULL, "cannot read " DATA "/templates.json (run from the repo root)");
    if (!tj) return;
    cJSON *templates = cJSON_Parse(tj);
    free(tj);
    CHECK(templates != NULL);
    if (!templates) return;

    char *convs[128];
    int nconv = 0;
    DIR *d = opendir(DATA "/conversations");
    CHECK(d != NULL);
    if (!d) { cJSON_Delete(templates); return; }
    struct dirent *de;
    while ((de = readdir(d)) && nconv < 128) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".json")) convs[nconv++] = strndup(de->d_name, l - 5);
    }
    closedir(d);
    qsort(convs, (size_t)nconv, sizeof(char *), cmp_str);
    CHECK(nconv >= 10);

    int n_ok = 0, n_rej = 0, n_fail = 0;
    char fx[512];
    cJSON *t;
    cJSON_ArrayForEach(t, templates) {
        const char *name = t->string;
        const char *src = df_chat_builtin_template(name);
        CHECK_MSG(src != NULL, "no built-in template '%s'", name);
        if (!src) continue;
        /* the embedded copy must equal the fixture (when the fixtures are present) */
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(t, "file"));
        char path[600];
        if (file && file[0] == '@') snprintf(path, sizeof path, DATA "/templates/%s", file + 1);
        else snprintf(path, sizeof path, "%s", df_fixture(file ? file : "", fx, sizeof fx));
        if (file && file[0] != '@') {
            snprintf(path, sizeof path, "%s", df_fixture("templates/", fx, sizeof fx));
            strncat(path, file, sizeof path - strlen(path) - 1);
        }
        char *orig = read_text(path);
        if (orig) {
            CHECK_MSG(!strcmp(orig, src), "built-in '%s' differs from %s (regenerate chat_templates.c)", name, path);
            free(orig);
        }
        CHECK_STR(df_chat_detect(src), name);
        const char *bos = cJSON_GetStringValue(cJSON_GetObjectItem(t, "bos"));
        const char *eos = cJSON_GetStringValue(cJSON_GetObjectItem(t, "eos"));
        for (int c = 0; c < nconv; c++) {
            snprintf(path, sizeof path, DATA "/conversations/%s.json", convs[c]);
            char *cj = read_text(path);
            CHECK(cj != NULL);
            if (!cj) continue;
            cJSON *conv = cJSON_Parse(cj);
            free(cj);
            CHECK(conv != NULL);
            if (!conv) continue;
            char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItem(conv, "messages"));
            cJSON *tools = cJSON_GetObjectItem(conv, "tools");
            char *tools_s = tools ? cJSON_PrintUnformatted(tools) : NULL;
            cJSON *extra = cJSON_GetObjectItem(conv, "extra");
            char *extra_s = extra ? cJSON_PrintUnformatted(extra) : NULL;
            df_chat_opts o = {0};
            o.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(conv, "add_generation_prompt"));
            o.bos_token = bos;
            o.eos_token = eos;
            o.tools_json = tools_s;
            o.extra_vars_json = extra_s;
            o.now = FIXED_NOW;
            char *out = NULL;
            int rc = df_chat_render_ex(src, msgs, &o, &out);
            char errmsg[600];
            snprintf(errmsg, sizeof errmsg, "%s", rc ? df_errmsg() : "");
            char exp_path[600], err_path[600];
            snprintf(exp_path, sizeof exp_path, DATA "/expected/%s__%s.txt", name, convs[c]);
            snprintf(err_path, sizeof err_path, DATA "/expected/%s__%s.error", name, convs[c]);
            char *want = read_text(exp_path);
            char *want_err = read_text(err_path);
            CHECK_MSG(want || want_err, "no expected output for %s/%s", name, convs[c]);
            if (want) {
                bool ok = rc == DF_OK && out && !strcmp(out, want);
                CHECK_MSG(ok, "%s/%s: rc=%d %s", name, convs[c], rc, rc ? errmsg : "output differs");
                if (!ok && rc == DF_OK && out) show_diff(name, out, want);
                ok ? n_ok++ : n_fail++;
            } else if (want_err) {
                CHECK_MSG(rc < 0, "%s/%s: jinja2 raised (%s) but the C renderer succeeded", name, convs[c], want_err);
                if (rc < 0) {
                    CHECK_MSG(strstr(errmsg, "template ") != NULL, "%s", errmsg); /* carries line:col */
                    n_rej++;
                } else {
                    n_fail++;
                }
            }
            free(want);
            free(want_err);
            free(out);
            free(msgs);
            free(tools_s);
            free(extra_s);
            cJSON_Delete(conv);
        }
    }
    printf("golden renders: %d equal, %d rejected as by jinja2, %d failed\n", n_ok, n_rej, n_fail);
    for (int c = 0; c < nconv; c++) free(convs[c]);
    cJSON_Delete(templates);
}

/* Jinja snippets vs Python jinja2 (tests/data/chat/snippets*.json) */
static void test_snippets(void) {
    char *sj = read_text(DATA "/snippets.json");
    char *ej = read_text(DATA "/snippets_expected.json");
    CHECK(sj && ej);
    cJSON *spec = sj ? cJSON_Parse(sj) : NULL, *exp = ej ? cJSON_Parse(ej) : NULL;
    free(sj);
    free(ej);
    CHECK(spec && exp);
    if (!spec || !exp) { cJSON_Delete(spec); cJSON_Delete(exp); return; }
    cJSON *vars = cJSON_GetObjectItem(spec, "vars");
    char *vars_s = cJSON_PrintUnformatted(vars);
    char *msgs_s = cJSON_PrintUnformatted(cJSON_GetObjectItem(vars, "messages"));
    cJSON *snips = cJSON_GetObjectItem(spec, "snippets");
    int n = cJSON_GetArraySize(snips), n_ok = 0;
    CHECK_EQ_INT(n, cJSON_GetArraySize(exp));
    for (int i = 0; i < n && i < cJSON_GetArraySize(exp); i++) {
        const char *src = cJSON_GetStringValue(cJSON_GetArrayItem(snips, i));
        cJSON *e = cJSON_GetArrayItem(exp, i);
        const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(e, "out"));
        const char *want_err = cJSON_GetStringValue(cJSON_GetObjectItem(e, "error"));
        df_chat_opts o = {0};
        o.extra_vars_json = vars_s;
        o.now = FIXED_NOW;
        char *out = NULL;
        int rc = df_chat_render_ex(src, msgs_s, &o, &out);
        if (want) {
            bool ok = rc == 0 && !strcmp(out, want);
            CHECK_MSG(ok, "snippet %d: %s\n  rc=%d %s\n  got : %s\n  want: %s", i, src, rc, rc ? df_errmsg() : "",
                      out ? out : "", want);
            n_ok += ok;
        } else {
            CHECK_MSG(rc < 0, "snippet %d: %s\n  jinja2 raised %s, C gave \"%s\"", i, src, want_err, out ? out : "");
            n_ok += rc < 0;
        }
        free(out);
    }
    printf("snippets: %d/%d agree with jinja2\n", n_ok, n);
    free(vars_s);
    free(msgs_s);
    cJSON_Delete(spec);
    cJSON_Delete(exp);
}

/* render a literal template with simple messages; returns malloc'ed output or NULL */
static long long g_max_steps;
/* df_chat_render_ex with the options as arguments */
static int render_json(const char *tmpl, const char *msgs, const char *tools, bool agp, const char *bos,
                       const char *eos, const char *extra, char **out) {
    df_chat_opts o = {0};
    o.add_generation_prompt = agp;
    o.bos_token = bos;
    o.eos_token = eos;
    o.tools_json = tools;
    o.extra_vars_json = extra;
    return df_chat_render_ex(tmpl, msgs, &o, out);
}

static char *R(const char *tmpl, int *rc_out) {
    df_chat_opts o = {0};
    o.max_steps = g_max_steps;
    o.add_generation_prompt = true;
    o.bos_token = "<s>";
    o.now = FIXED_NOW;
    char *out = NULL;
    int rc = df_chat_render_ex(tmpl, "[{\"role\":\"user\",\"content\":\"hi\"}]", &o, &out);
    if (rc_out) *rc_out = rc;
    return out;
}

#define EXPECT_RENDER(tmpl, want)                                                         \
    do {                                                                                  \
        int rc_;                                                                          \
        char *o_ = R(tmpl, &rc_);                                                         \
        CHECK_MSG(rc_ == 0 && o_ && !strcmp(o_, want), "%s -> rc=%d \"%s\" (%s), want \"%s\"", tmpl, rc_, \
                  o_ ? o_ : "", rc_ ? df_errmsg() : "", want);                           \
        free(o_);                                                                         \
    } while (0)

#define EXPECT_ERROR(tmpl, status, needle)                                                \
    do {                                                                                  \
        int rc_;                                                                          \
        char *o_ = R(tmpl, &rc_);                                                         \
        CHECK_MSG(rc_ == (status) && o_ == NULL, "%s -> rc=%d (want %d)", tmpl, rc_, status); \
        if (rc_ < 0) CHECK_MSG(strstr(df_errmsg(), needle) != NULL, "error \"%s\" lacks \"%s\"", df_errmsg(), needle); \
        free(o_);                                                                         \
    } while (0)

static void test_semantics(void) {
    /* whitespace control, trim_blocks, lstrip_blocks */
    EXPECT_RENDER("a\n  {% if true %}\n  b\n  {% endif %}\nc", "a\n  b\nc");
    EXPECT_RENDER("a  {{- 'x' -}}  b", "axb");
    EXPECT_RENDER("a\n  {%+ if true %}x{% endif %}", "a\n  x");
    EXPECT_RENDER("{# comment #}\nx{#- c -#}  y", "xy");
    EXPECT_RENDER("x\n", "x");                     /* one trailing newline dropped */
    EXPECT_RENDER("x\r\ny", "x\ny");
    /* scoping: for-loop sets do not leak; namespace does */
    EXPECT_RENDER("{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x }}", "1");
    EXPECT_RENDER("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = i %}{% endfor %}{{ ns.x }}", "2");
    EXPECT_RENDER("{% macro m(a, b='d') %}{{ a }}-{{ b }}-{{ g }}{% endmacro %}{% set g = 5 %}{{ m(1) }}{{ m(2, b=3) }}",
                  "1-d-52-3-5");
    /* loop object */
    EXPECT_RENDER("{% for i in 'abc' %}{{ loop.index0 }}{{ i }}{% if loop.last %}!{% endif %}{% endfor %}", "0a1b2c!");
    EXPECT_RENDER("{% for i in [1,2,3,4] if i is even %}{{ i }}/{{ loop.length }} {% endfor %}", "2/2 4/2 ");
    EXPECT_RENDER("{% for i in [1,2,3] %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}", "1");
    EXPECT_RENDER("{% for i in [1,2,3] %}{% if i == 2 %}{% continue %}{% endif %}{{ i }}{% endfor %}", "13");
    EXPECT_RENDER("{% for i in [] %}x{% else %}empty{% endfor %}", "empty");
    EXPECT_RENDER("{% for k, v in {'b': 1, 'A': 2}|dictsort %}{{ k }}={{ v }};{% endfor %}", "A=2;b=1;");
    /* values, operators, Python formatting */
    EXPECT_RENDER("{{ [1, 'b', none, true, 1.5] }}|{{ {'a': 1} }}|{{ (1,) }}", "[1, 'b', None, True, 1.5]|{'a': 1}|(1,)");
    EXPECT_RENDER("{{ 1/2 }} {{ 7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 0.1+0.2 }} {{ 1e-5 }} {{ 1e20 }} {{ 3.0 }}",
                  "0.5 3 2 1024 0.30000000000000004 1e-05 1e+20 3.0");
    EXPECT_RENDER("{{ 'abcdef'[::-1] }}{{ 'abcdef'[1:3] }}{{ [1,2,3][-1] }}{{ 'héllo'[1] }}", "fedcbabc3é");
    EXPECT_RENDER("{{ 'a,b,,c'.split(',') }}{{ '  x y  '.split() }}{{ 'k=v=w'.split('=', 1)[1] }}",
                  "['a', 'b', '', 'c']['x', 'y']v=w");
    EXPECT_RENDER("{{ '\\n x \\n'.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'ab'.startswith('a') }}|{{ 'ab'.endswith(('x','b')) }}",
                  "x|hi|True|True");
    EXPECT_RENDER("{{ 'a' ~ 1 ~ none }}{{ 'x' if false }}{{ 'y' if 0 else 'z' }}", "a1Nonez");
    EXPECT_RENDER("{{ {'b': [1, {'c': 'é\"\\n'}], 'a': none}|tojson }}", "{\"b\": [1, {\"c\": \"é\\\"\\n\"}], \"a\": null}");
    EXPECT_RENDER("{{ {'b': 1, 'a': [true]}|tojson(indent=2) }}", "{\n  \"b\": 1,\n  \"a\": [\n    true\n  ]\n}");
    EXPECT_RENDER("{{ 'é'|tojson(ensure_ascii=true) }}{{ {'b':1,'a':2}|tojson(sort_keys=true, separators=(',', ':')) }}",
                  "\"\\u00e9\"{\"a\":2,\"b\":1}");
    EXPECT_RENDER("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}", "hi");
    EXPECT_RENDER("{{ [1,2,3]|reject('equalto', 2)|list }}{{ ['a','b']|first }}{{ ['a','b']|last }}{{ 'AbC'|lower }}",
                  "[1, 3]ababc");
    EXPECT_RENDER("{{ x|default('d') }}{{ none is none }}{{ 1 is number }}{{ true is number }}{{ {} is mapping }}",
                  "dTrueTrueTrueTrue");
    EXPECT_RENDER("{{ 'x' is string }}{{ [] is iterable }}{{ none is iterable }}{{ undefined_var is defined }}",
                  "TrueTrueFalseFalse");
    EXPECT_RENDER("{% set l = [] %}{% set _ = l.append(1) %}{{ l }}{{ l.pop(0) }}{{ l }}", "[1]1[]");
    EXPECT_RENDER("{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b', 2) }}{{ {'a': 1}.items()|list }}", "12[('a', 1)]");
    EXPECT_RENDER("{{ 'a' in 'cat' }}{{ 2 in [1, 2] }}{{ 'k' not in {'k': 1} }}{{ 1 == 1.0 }}{{ [1] == [1] }}",
                  "TrueTrueFalseTrueTrue");
    EXPECT_RENDER("{{ bos_token }}{{ add_generation_prompt }}{{ messages[0]['content']|upper }}{{ tools }}", "<s>TrueHINone");
    EXPECT_RENDER("{{ strftime_now('%Y-%m-%d') }}", "2026-01-15");
    EXPECT_RENDER("{{ 'a&b'|replace('&', '&amp;') }}{{ '  pad '|trim }}{{ 'x'|length }}{{ '日本'|length }}", "a&amp;bpad12");
    EXPECT_RENDER("{% set s %}in{{ 1 }}{% endset %}[{{ s }}]", "[in1]");
    EXPECT_RENDER("{{ range(3)|list }}{{ 'ab' * 2 }}{{ [0] * 2 }}", "[0, 1, 2]abab[0, 0]");
    EXPECT_RENDER("{{ 'x'|safe + '<' }}", "x&lt;"); /* Markup + str escapes, as in Python */
}

static void test_errors(void) {
    EXPECT_ERROR("{% if true %}x", DF_ERR_FORMAT, "template 1:15");
    EXPECT_ERROR("ab\n{{ x ", DF_ERR_FORMAT, "template 2:1");
    EXPECT_ERROR("{% for x in y %}{% endif %}", DF_ERR_FORMAT, "endif");
    EXPECT_ERROR("line1\n  {{ x|nosuchfilter }}", DF_ERR_INVALID, "template 2:8");
    EXPECT_ERROR("{{ x is nosuchtest }}", DF_ERR_INVALID, "nosuchtest");
    EXPECT_ERROR("{% frobnicate %}", DF_ERR_FORMAT, "template 1:4");
    EXPECT_ERROR("{# unclosed comment", DF_ERR_FORMAT, "comment");
    EXPECT_ERROR("{{ 'unterminated }}", DF_ERR_FORMAT, "string");
    EXPECT_ERROR("{{ (1 }}", DF_ERR_FORMAT, "template 1:");
    EXPECT_ERROR("{{ 1 + }}", DF_ERR_FORMAT, "template 1:");
    EXPECT_ERROR("{{ raise_exception('boom') }}", DF_ERR_INVALID, "boom");
    EXPECT_ERROR("{{ undefined_thing.attr }}", DF_ERR_INVALID, "undefined_thing");
    EXPECT_ERROR("{{ 'a' + 1 }}", DF_ERR_INVALID, "unsupported operand");
    EXPECT_ERROR("{{ 'x' in none }}", DF_ERR_INVALID, "not iterable");
    EXPECT_ERROR("{{ 1 // 0 }}", DF_ERR_INVALID, "ZeroDivision");
    /* limits */
    EXPECT_ERROR("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", DF_ERR_RANGE, "recursion");
    g_max_steps = 200000; /* the default (20M) bounds the same way, just slower */
    EXPECT_ERROR("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}",
                 DF_ERR_RANGE, "step limit");
    g_max_steps = 0;
    EXPECT_ERROR("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 DF_ERR_RANGE, "limit");
    EXPECT_ERROR("{{ range(100000000) }}", DF_ERR_RANGE, "range");
    EXPECT_ERROR("{{ 'x' * 100000000000 }}", DF_ERR_RANGE, "too large");
    /* deep nesting in the template and in the JSON input */
    {
        char t[4096];
        size_t n = 0;
        n += (size_t)snprintf(t + n, sizeof t - n, "{{ ");
        for (int i = 0; i < 600; i++) t[n++] = '(';
        t[n++] = '1';
        for (int i = 0; i < 600; i++) t[n++] = ')';
        snprintf(t + n, sizeof t - n, " }}");
        int rc;
        char *o = R(t, &rc);
        CHECK(rc < 0 && o == NULL);
        free(o);
    }
    {
        char *deep = malloc(20000);
        size_t n = 0;
        for (int i = 0; i < 5000; i++) deep[n++] = '[';
        for (int i = 0; i < 5000; i++) deep[n++] = ']';
        deep[n] = 0;
        char *out = NULL;
        int rc = render_json("{{ messages }}", deep, NULL, false, NULL, NULL, NULL, &out);
        CHECK_EQ_INT(rc, DF_ERR_FORMAT);
        CHECK(out == NULL);
        free(deep);
        rc = render_json("x", "{not json", NULL, false, NULL, NULL, NULL, &out);
        CHECK_EQ_INT(rc, DF_ERR_FORMAT);
        rc = render_json("x", "[]", NULL, false, NULL, NULL, "[1]", &out);
        CHECK_EQ_INT(rc, DF_ERR_FORMAT);
    }
    /* output limit */
    {
        df_chat_opts o = {0};
        o.max_output = 100;
        char *out = NULL;
        int rc = df_chat_render_ex("{% for i in range(200) %}x{% endfor %}", "[]", &o, &out);
        CHECK_EQ_INT(rc, DF_ERR_RANGE);
        CHECK(out == NULL);
    }
    { /* macro recursion inside deep expressions hits the nesting limit, not the C stack */
        char t[1024];
        size_t n = (size_t)snprintf(t, sizeof t, "{%% macro f(n) %%}{{ ");
        for (int i = 0; i < 40; i++) n += (size_t)snprintf(t + n, sizeof t - n, "-(");
        n += (size_t)snprintf(t + n, sizeof t - n, "f(n + 1)");
        for (int i = 0; i < 40; i++) t[n++] = ')';
        snprintf(t + n, sizeof t - n, " }}{%% endmacro %%}{{ f(0) }}");
        EXPECT_ERROR(t, DF_ERR_RANGE, "nested too deeply");
    }
    EXPECT_RENDER("{% generation %}g{% endgeneration %}", "g");
    /* random byte mutations of every built-in template: must fail cleanly or render */
    {
        uint64_t seed = 0x9E3779B97F4A7C15ull;
        int n_run = 0;
        for (const char *const *nm = df_chat_builtin_names(); *nm; nm++) {
            const char *src = df_chat_builtin_template(*nm);
            size_t L = strlen(src);
            char *buf = malloc(L + 1);
            for (int it = 0; it < 60; it++) {
                memcpy(buf, src, L + 1);
                for (int k = 0; k < 1 + it % 4; k++) {
                    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                    size_t pos = (size_t)(seed >> 33) % L;
                    static const char pool[] = "{}%#-+()[]|.,'\"x0 \n~=<>";
                    buf[pos] = pool[(seed >> 20) % (sizeof pool - 1)];
                }
                char *out = NULL;
                df_chat_opts o = {0};
                o.add_generation_prompt = true;
                o.tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}}}]";
                o.now = FIXED_NOW;
                int rc = df_chat_render_ex(buf, "[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"hi\"}]", &o, &out);
                CHECK((rc == 0) == (out != NULL));
                free(out);
                n_run++;
            }
            free(buf);
        }
        CHECK(n_run > 500);
    }
    /* every prefix of a real template must fail cleanly or render, never crash */
    const char *k3 = df_chat_builtin_template("kimi-k3");
    CHECK(k3 != NULL);
    if (k3) {
        size_t L = strlen(k3);
        char *buf = malloc(L + 1);
        int n_err = 0;
        for (size_t cut = 0; cut < L; cut += 37) {
            memcpy(buf, k3, cut);
            buf[cut] = 0;
            char *out = NULL;
            int rc = render_json(buf, "[{\"role\":\"user\",\"content\":\"hi\"}]", NULL, true, NULL, NULL, NULL, &out);
            if (rc < 0) n_err++;
            free(out);
        }
        CHECK(n_err > 0);
        free(buf);
    }
}

/* JSON inputs read as Python's json.loads: number kinds survive, strictness as Python's */
static void test_json_input(void) {
    static const struct { const char *vars, *want; } ok[] = {
        {"{\"a\": 2, \"b\": 2.0, \"c\": 1e2, \"d\": -0, \"e\": 12345678901234567890}",
         "2|2.0|100.0|0|1.2345678901234567e+19|True False False"},
        {"{\"a\": [1, {\"x\": 1.5}], \"b\": \"\\u00e9\\ud83d\\ude00\", \"c\": null, \"d\": true, \"e\": false}",
         "[1, {'x': 1.5}]|\xc3\xa9\xf0\x9f\x98\x80|None|True|False|False False False"},
        {"{\"a\": 1, \"a\": 3, \"b\": \"\", \"c\": {}, \"d\": [], \"e\": 0.5}", "3||{}|[]|0.5|True False False"},
    };
    const char *tmpl = "{{ a }}|{{ b }}|{{ c }}|{{ d }}|{{ e }}|{{ a is integer }} {{ b is integer }} {{ c is integer }}";
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        df_chat_opts o = {0};
        o.extra_vars_json = ok[i].vars;
        char *out = NULL;
        int rc = df_chat_render_ex(tmpl, "[]", &o, &out);
        CHECK_MSG(rc == 0 && out && !strcmp(out, ok[i].want), "%s -> %d \"%s\" (%s), want \"%s\"", ok[i].vars, rc,
                  out ? out : "", rc ? df_errmsg() : "", ok[i].want);
        free(out);
    }
    static const struct { const char *vars, *needle; } bad[] = {
        {"{\"a\": 1.}", "bad number at offset 8"},   {"{\"a\": -.5}", "bad number"},
        {"{\"a\": \"x\ty\"}", "control character"}, {"{\f\"a\": 1}", "unexpected character"},
        {"{\"a\": 1,}", "syntax error"},             {"{\"a\": 1} x", "syntax error"},
        {"[1]", "must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        df_chat_opts o = {0};
        o.extra_vars_json = bad[i].vars;
        char *out = NULL;
        int rc = df_chat_render_ex("x", "[]", &o, &out);
        CHECK_MSG(rc == DF_ERR_FORMAT && !out && strstr(df_errmsg(), bad[i].needle), "%s -> %d (%s)", bad[i].vars, rc,
                  df_errmsg());
        free(out);
    }
}

static void test_helpers(void) {
    deltafin_chat_msg m[3] = {
        {"system", "be nice", NULL, NULL, NULL},
        {"assistant", NULL, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]", NULL, NULL},
        {"tool", "42", NULL, "call_1", "f"},
    };
    char *js = NULL;
    CHECK_EQ_INT(df_chat_msgs_to_json(m, 3, &js), DF_OK);
    CHECK_STR(js, "[{\"role\":\"system\",\"content\":\"be nice\"},{\"role\":\"assistant\",\"content\":null,"
                  "\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]},"
                  "{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"call_1\",\"name\":\"f\"}]");
    char *out = NULL;
    CHECK_EQ_INT(render_json(df_chat_builtin_template("chatml"), js, NULL, true, NULL, NULL, NULL, &out), DF_OK);
    CHECK_STR(out, "<|im_start|>system\nbe nice<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"
                   "<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    free(js);
    /* OpenAI-style string arguments become objects */
    deltafin_chat_msg sa = {"assistant", "", "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\": [1, 2]}\"}}]", NULL, NULL};
    CHECK_EQ_INT(df_chat_msgs_to_json(&sa, 1, &js), DF_OK);
    CHECK_STR(js, "[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                  "\"function\":{\"name\":\"f\",\"arguments\":{\"x\":[1,2]}}}]}]");
    free(js);
    /* the all-in-one helper: name wins, NULL template -> ChatML */
    deltafin_chat_msg u = {"user", "hi", NULL, NULL, NULL};
    CHECK_EQ_INT(df_chat_render_msgs(NULL, NULL, &u, 1, NULL, true, NULL, NULL, NULL, &out), DF_OK);
    CHECK_STR(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    CHECK_EQ_INT(df_chat_render_msgs("ignored", "llama3", &u, 1, NULL, true, "<|begin_of_text|>", NULL, NULL, &out), DF_OK);
    CHECK(out && !strncmp(out, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>", 58));
    free(out);
    CHECK_EQ_INT(df_chat_render_msgs(NULL, "nope", &u, 1, NULL, true, NULL, NULL, NULL, &out), DF_ERR_INVALID);
    CHECK_EQ_INT(df_chat_render_msgs("", "", &u, 1, NULL, true, NULL, NULL, NULL, &out), DF_OK); /* "" = none: ChatML */
    CHECK_STR(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    CHECK_EQ_INT(df_chat_render_msgs(NULL, "qwen3", &u, 1, NULL, true, NULL, NULL, "{\"enable_thinking\":false}", &out), DF_OK);
    CHECK_STR(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    free(out);
    deltafin_chat_msg bad = {"assistant", "x", "[oops", NULL, NULL};
    CHECK_EQ_INT(df_chat_msgs_to_json(&bad, 1, &js), DF_ERR_FORMAT);

    for (const char *const *nm = df_chat_builtin_names(); *nm; nm++) CHECK_MSG(df_chat_builtin_template(*nm) != NULL, "%s", *nm);
    CHECK(df_chat_builtin_template("nope") == NULL);
    CHECK(df_chat_builtin_template("deepseek-v3.1") == df_chat_builtin_template("deepseek-v3"));
    CHECK(df_chat_detect("plain text") == NULL);
    CHECK_STR(df_chat_detect("{{ '<|im_start|>' + m.role }}"), "chatml");
}

int main(void) {
    df_init();
    test_golden();
    test_snippets();
    test_semantics();
    test_errors();
    test_json_input();
    test_helpers();
    TEST_MAIN_END("test_chat");
}
