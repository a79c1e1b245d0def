/* test_json_schema.c — JSON schema -> GBNF (src/text/json_schema.c): the grammars recorded from
 * llama.cpp's converter (tests/data/json_schema, README there) byte for byte, documents that
 * fit a schema accepted and ones that do not refused, errors, and generation with a random
 * model under schema grammars: every output parses and validates against its schema. */
#include <cjson/cJSON.h>
#include <dirent.h>

#include "deltafin.h"
#include "base/util.h"
#include "testlib.h"
#include "text/gbnf.h"
#include "text/json_schema.h"

static char *slurp(const char *path) {
    char *d = NULL;
    size_t n;
    if (deltafin_read_file(path, &d, &n) < 0) return NULL;
    return d;
}

static void test_recorded(void) {
    DIR *d = opendir("tests/data/json_schema");
    CHECK(d != NULL);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        char path[600], gpath[600];
        snprintf(path, sizeof path, "tests/data/json_schema/%s", e->d_name);
        snprintf(gpath, sizeof gpath, "tests/data/json_schema/%.*s.gbnf", (int)(l - 5), e->d_name);
        char *schema = slurp(path), *want = slurp(gpath), *got = NULL;
        CHECK_MSG(schema && want, "%s", path);
        int rc = schema ? df_json_schema_to_gbnf(schema, &got) : -1;
        CHECK_MSG(rc == DF_OK && got && want && !strcmp(got, want), "%s: rc %d\n--- got\n%s--- want\n%s", path, rc,
                  got ? got : df_errmsg(), want ? want : "");
        df_gbnf *g = NULL;
        CHECK_MSG(got && df_gbnf_parse(got, NULL, NULL, NULL, &g) == DF_OK, "%s: %s", path, df_errmsg());
        df_gbnf_free(g);
        free(schema);
        free(want);
        free(got);
        n++;
    }
    closedir(d);
    CHECK(n >= 10);
}

static int accepts(const char *schema, const char *doc) {
    char *gb = NULL;
    if (df_json_schema_to_gbnf(schema, &gb) < 0) return -1;
    df_gbnf *g = NULL;
    int r = -1;
    if (df_gbnf_parse(gb, NULL, NULL, NULL, &g) == DF_OK) {
        df_gmatch *m = df_gmatch_create(g);
        r = df_gmatch_accept(m, doc, strlen(doc), -1) == DF_OK && df_gmatch_can_end(m);
        df_gmatch_free(m);
    }
    df_gbnf_free(g);
    free(gb);
    return r;
}

static void test_semantics(void) {
    static const struct { const char *schema, *doc; int want; } t[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\": 12}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\": 1.5}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", "{\"a\": 1, \"b\": 2}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}}}", "{\"b\": \"x\"}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}}}", "{\"b\": \"x\", \"a\": 1}", 0},
        {"{\"enum\":[\"red\",\"green\",3]}", "\"green\"", 1},
        {"{\"enum\":[\"red\",\"green\",3]}", "3", 1},
        {"{\"enum\":[\"red\",\"green\",3]}", "\"blue\"", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[true, false]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[]", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[true,true,true]", 0},
        {"{\"type\":\"string\",\"maxLength\":3}", "\"abc\"", 1},
        {"{\"type\":\"string\",\"maxLength\":3}", "\"abcd\"", 0},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-29\"", 1},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-13-01\"", 0},
        {"{\"type\":[\"integer\",\"null\"]}", "null", 1},
        {"{\"type\":[\"integer\",\"null\"]}", "\"1\"", 0},
        {"{\"const\":{\"k\":[1,\"two\"]}}", "{\"k\":[1,\"two\"]}", 1},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}}", "{\"x\": 1, \"y\": -2.5e3}", 1},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}}", "{\"x\": \"1\"}", 0},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},{\"type\":\"null\"}]}},"
         "\"required\":[\"next\"]}},\"$ref\":\"#/$defs/n\"}", "{\"next\": {\"next\": {\"next\": null}}}", 1},
        {"true", "[1, {\"a\": null}]", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[0-9]+$\"}", "\"not enforced\"", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int r = accepts(t[i].schema, t[i].doc);
        CHECK_MSG(r == t[i].want, "%s on %s -> %d (%s)", t[i].schema, t[i].doc, r, r < 0 ? df_errmsg() : "");
    }
    static const struct { const char *schema, *needle; } bad[] = {
        {"{\"type\":", "not valid JSON"},
        {"{\"type\":\"strnig\"}", "unknown type 'strnig'"},
        {"{\"$ref\":\"http://example.com/s.json\"}", "only local references"},
        {"{\"$ref\":\"#/$defs/missing\"}", "points to nothing"},
        {"{\"enum\":[]}", "non-empty"},
        {"{\"type\":\"array\",\"items\":{},\"maxItems\":-1}", "non-negative"},
        {"[1]", "must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out = NULL;
        int rc = df_json_schema_to_gbnf(bad[i].schema, &out);
        CHECK_MSG(rc == DF_ERR_FORMAT && !out && strstr(df_errmsg(), bad[i].needle), "%s -> %d %s", bad[i].schema, rc, df_errmsg());
        free(out);
    }
    /* deep nesting is refused, not a stack overflow */
    char deep[8192];
    size_t k = 0;
    for (int i = 0; i < 200; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"type\":\"array\",\"items\":");
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{}");
    for (int i = 0; i < 200; i++) deep[k++] = '}';
    deep[k] = 0;
    char *out = NULL;
    CHECK(df_json_schema_to_gbnf(deep, &out) == DF_ERR_FORMAT && strstr(df_errmsg(), "deeper"));
    free(out);
}

/* ---- a validator for the subset the generation test uses --------------------------------- */
static bool validate(const cJSON *s, const cJSON *v) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        const cJSON *e;
        cJSON_ArrayForEach(e, en) if (cJSON_Compare(e, v, true)) return true;
        return false;
    }
    const char *ts = cJSON_IsString(t) ? t->valuestring : "";
    if (!strcmp(ts, "string")) {
        if (!cJSON_IsString(v)) return false;
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
        size_t cps = 0;
        for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++) cps += (*p & 0xC0) != 0x80;
        return !ml || cps <= (size_t)ml->valuedouble;
    }
    if (!strcmp(ts, "integer")) return cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble;
    if (!strcmp(ts, "number")) return cJSON_IsNumber(v);
    if (!strcmp(ts, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(ts, "null")) return cJSON_IsNull(v);
    if (!strcmp(ts, "array")) {
        if (!cJSON_IsArray(v)) return false;
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(s, "items"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems"), *x;
        int n = cJSON_GetArraySize(v);
        if ((mx && n > mx->valuedouble) || (mn && n < mn->valuedouble)) return false;
        cJSON_ArrayForEach(x, v) if (it && !validate(it, x)) return false;
        return true;
    }
    if (!strcmp(ts, "object")) {
        if (!cJSON_IsObject(v)) return false;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties"), *req = cJSON_GetObjectItemCaseSensitive(s, "required"), *x;
        cJSON_ArrayForEach(x, req) if (!cJSON_GetObjectItemCaseSensitive(v, x->valuestring)) return false;
        cJSON_ArrayForEach(x, v) {
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, x->string);
            if (!ps || !validate(ps, x)) return false; /* no additionalProperties in these schemas */
        }
        return true;
    }
    return false;
}

/* cJSON refuses \uD800-\uDFFF escapes that JSON's grammar (and the schema grammars, as
 * llama.cpp's) allow: make them U+FFFD before parsing */
static void surrogates_to_fffd(char *s) {
    for (char *p = s; (p = strstr(p, "\\u")); p += 2) {
        if (p > s && p[-1] == '\\') continue;
        if ((p[2] == 'd' || p[2] == 'D') && strchr("89abAB" "cdefCDEF", p[3]) && p[3]) memcpy(p + 2, "FFFD", 4);
    }
}

static void test_generation(void) {
    char path[512];
    deltafin_model_params mp = deltafin_model_default_params();
    mp.n_threads = 2;
    deltafin_model *m = NULL;
    if (deltafin_model_load(df_fixture("models/llama-2-tiny-random.gguf", path, sizeof path), &mp, &m) < 0) {
        printf("test_json_schema: SKIP generation (%s)\n", deltafin_errmsg());
        return;
    }
    const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":10},\"age\":{\"type\":\"integer\"},"
        "\"pets\":{\"type\":\"array\",\"items\":{\"enum\":[\"cat\",\"dog\",\"fish\"]},\"maxItems\":3},\"admin\":{\"type\":\"boolean\"}},"
        "\"required\":[\"name\",\"age\",\"pets\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"tag\":{\"type\":\"string\",\"maxLength\":4}},"
        "\"required\":[\"x\",\"tag\"]},\"minItems\":1,\"maxItems\":3}",
    };
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = 1024;
    int n_ok = 0, n_runs = 0;
    for (size_t k = 0; k < sizeof schemas / sizeof schemas[0]; k++)
        for (uint64_t seed = 1; seed <= 4; seed++) {
            char *gbnf = NULL;
            CHECK_EQ_INT(deltafin_json_schema_to_grammar(schemas[k], &gbnf), DELTAFIN_OK);
            deltafin_grammar *g = NULL;
            CHECK_EQ_INT(deltafin_grammar_create(deltafin_model_vocab(m), gbnf, NULL, &g), DELTAFIN_OK);
            free(gbnf);
            deltafin_ctx *c = NULL;
            CHECK_EQ_INT(deltafin_ctx_create(m, &cp, &c), DELTAFIN_OK);
            deltafin_sampler_params sp = deltafin_sampler_default_params();
            sp.seed = seed;
            sp.temp = seed == 1 ? 0.0f : 1.0f;
            deltafin_sampler *s = deltafin_sampler_create(&sp);
            deltafin_sampler_set_grammar(s, g);
            int32_t id = deltafin_token_bos(m);
            char out[4096];
            size_t len = 0;
            bool ended = false;
            for (int t = 0; t < 500 && deltafin_decode(c, &id, 1, false) == DELTAFIN_OK; t++) {
                id = deltafin_sampler_sample(s, deltafin_logits(c, -1), deltafin_model_n_vocab(m));
                if (id < 0) break;
                deltafin_sampler_accept(s, id);
                if (deltafin_token_is_eog(m, id)) { ended = true; break; }
                int pn = deltafin_token_to_piece(m, id, false, out + len, (int)(sizeof out - len - 1));
                if (pn > 0 && len + (size_t)pn < sizeof out - 1) len += (size_t)pn;
            }
            out[len] = 0;
            char fixed[sizeof out];
            memcpy(fixed, out, len + 1);
            surrogates_to_fffd(fixed);
            cJSON *v = cJSON_Parse(fixed), *sc = cJSON_Parse(schemas[k]);
            bool ok = ended && v && validate(sc, v);
            CHECK_MSG(ok, "schema %zu seed %llu: ended %d: '%s'", k, (unsigned long long)seed, ended, out);
            if (getenv("DF_TEST_VERBOSE")) printf("schema %zu seed %llu: %s\n", k, (unsigned long long)seed, out);
            n_ok += ok;
            n_runs++;
            cJSON_Delete(v);
            cJSON_Delete(sc);
            deltafin_sampler_free(s);
            deltafin_ctx_free(c);
        }
    printf("json schema generation: %d/%d outputs validate\n", n_ok, n_runs);
    deltafin_model_free(m);
}

int main(void) {
    df_init();
    test_recorded();
    test_semantics();
    test_generation();
    TEST_MAIN_END("test_json_schema");
}
