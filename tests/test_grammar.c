/* test_grammar.c — GBNF grammars (src/text/gbnf*.c, src/runtime/api_grammar.c): parse errors,
 * strings accepted and refused, repetition and token elements, UTF-8 split across tokens, the
 * vocabulary mask against a token-by-token check on real vocabularies, llama.cpp's own
 * grammars (when /work/llama.cpp is there), and generation with a random model under the
 * JSON, arithmetic and list grammars of tests/data/grammar: every output must parse (the
 * grammar forces it whatever the model), plus logit_bias in the sampler. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>

#include "deltafin.h"
#include "base/util.h"
#include "testlib.h"
#include "text/gbnf.h"
#include "text/tokenizer.h"

static char *slurp(const char *path) {
    char *d = NULL;
    size_t n;
    if (deltafin_read_file(path, &d, &n) < 0) return NULL;
    return d;
}

static df_gbnf *parse_or_null(const char *src) {
    df_gbnf *g = NULL;
    if (df_gbnf_parse(src, NULL, NULL, NULL, &g) < 0) return NULL;
    return g;
}

/* 0 refused, 1 a valid prefix, 2 complete; bytewise: one byte per "token" */
static int match(const df_gbnf *g, const char *s, bool bytewise) {
    df_gmatch *m = df_gmatch_create(g);
    size_t n = strlen(s);
    bool ok = true;
    if (bytewise)
        for (size_t i = 0; i < n && ok; i++) ok = df_gmatch_accept(m, s + i, 1, -1) == DF_OK;
    else
        ok = df_gmatch_accept(m, s, n, -1) == DF_OK;
    int r = ok ? (df_gmatch_can_end(m) ? 2 : 1) : 0;
    df_gmatch_free(m);
    return r;
}

static void check_matches(const char *what, const char *src, const char *const *strs, const int *want, int n) {
    df_gbnf *g = parse_or_null(src);
    CHECK_MSG(g != NULL, "%s: %s", what, df_errmsg());
    if (!g) return;
    for (int i = 0; i < n; i++) {
        int a = match(g, strs[i], false), b = match(g, strs[i], true);
        CHECK_MSG(a == want[i] && b == want[i], "%s: '%s' -> %d / %d, expected %d", what, strs[i], a, b, want[i]);
    }
    df_gbnf_free(g);
}

static void test_errors(void) {
    static const struct { const char *src, *needle; } bad[] = {
        {"root ::= foo", "undefined rule 'foo'"},
        {"root = \"a\"", "1:6: expecting '::='"},
        {"root ::= \"abc", "unterminated string"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= \"\\x4\"", "hex digits"},
        {"root ::= (\"a\"", "expecting ')'"},
        {"root ::= *", "expecting an item"},
        {"root ::= \"a\"{2001}", "more than 2000"},
        {"root ::= \"a\"{3,2}", "below the minimum"},
        {"root ::= (\"a\"{0,50}){0,50}", "too many rules"},
        {"root ::= root \"a\"", "left recursion"},
        {"root ::= x \"a\"\nx ::= | root", "left recursion"},
        {"start ::= \"a\"", "no rule named 'root'"},
        {"root ::= <think>", "needs a vocabulary"},
        {"root ::= <[12x]>", "expecting ']>'"},
        {"", "no rules"},
        {"root ::= \"a\" )", "expecting a newline"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        df_gbnf *g = NULL;
        int rc = df_gbnf_parse(bad[i].src, NULL, NULL, NULL, &g);
        CHECK_MSG(rc == DF_ERR_FORMAT && !g && strstr(df_errmsg(), bad[i].needle), "'%s' -> %d '%s'", bad[i].src, rc,
                  df_errmsg());
        df_gbnf_free(g);
    }
    /* deep nesting is refused, not a stack overflow */
    char deep[4000];
    size_t k = (size_t)snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k] = 0;
    df_gbnf *g = NULL;
    CHECK(df_gbnf_parse(deep, NULL, NULL, NULL, &g) == DF_ERR_FORMAT && strstr(df_errmsg(), "nested"));
    /* another start rule */
    CHECK_EQ_INT(df_gbnf_parse("a ::= \"x\"\nb ::= a a", "b", NULL, NULL, &g), DF_OK);
    if (g) {
        CHECK_EQ_INT(match(g, "xx", false), 2);
        CHECK_EQ_INT(match(g, "x", false), 1);
        df_gbnf_free(g);
    }
    CHECK_EQ_INT(deltafin_grammar_check("root ::= [0-9]+", NULL), DELTAFIN_OK);
    CHECK_EQ_INT(deltafin_grammar_check("root ::= [0-9", NULL), DELTAFIN_ERR_FORMAT);
}

static void test_matching(void) {
    char path[512];
    char *json = slurp("tests/data/grammar/json.gbnf");
    CHECK(json != NULL);
    {
        const char *s[] = {"{}", "{\"a\": 1}", "{\"a\": [1, -2.5e3, {\"b\": \"x\\\"y\\u00e9\"}], \"c\": null}",
                           "{\"é\": \"日本\"}", "{\"a\": 1", "{\"a\":}", "[1]", "{\"a\": 01}", "{\"a\": \"\x01\"}",
                           "{\"a\": tru", "{\"a\": true} ", "{\n  \"k\" : false}"};
        int w[] = {2, 2, 2, 2, 1, 0, 0, 0, 0, 1, 2, 2};
        check_matches("json", json ? json : "", s, w, (int)(sizeof w / sizeof w[0]));
    }
    free(json);
    char *ar = slurp("tests/data/grammar/arithmetic.gbnf");
    {
        const char *s[] = {"1 + 2 = 3\n", "(a * 2) - x1 = -4.5\n", "1+2=3\n", "1 + = 3\n", "1 + 2 = 3", "((1)) = 1\n"};
        int w[] = {2, 2, 2, 0, 1, 0};
        check_matches("arithmetic", ar ? ar : "", s, w, (int)(sizeof w / sizeof w[0]));
    }
    free(ar);
    char *li = slurp("tests/data/grammar/list.gbnf");
    {
        const char *s[] = {"- hello world\n- two\n", "- a\n- b\n- c\n- d\n- e\n- f\n", "- a\n- b\n- c\n- d\n- e\n- f\n- g\n",
                           "-x\n", "- \n"};
        int w[] = {2, 2, 0, 0, 0};
        check_matches("list", li ? li : "", s, w, (int)(sizeof w / sizeof w[0]));
    }
    free(li);
    /* repetitions, as llama.cpp rewrites them */
    {
        const char *s[] = {"", "a", "aa", "aaa", "aaaa"};
        int w0[] = {1, 1, 2, 2, 0};
        check_matches("{2,3}", "root ::= \"a\"{2,3}", s, w0, 5);
        int w1[] = {1, 1, 2, 2, 2};
        check_matches("{2,}", "root ::= \"a\"{2,}", s, w1, 5);
        int w2[] = {1, 1, 1, 2, 0};
        check_matches("{3}", "root ::= \"a\"{3}", s, w2, 5);
        int w3[] = {2, 2, 0, 0, 0};
        check_matches("?", "root ::= \"a\"?", s, w3, 5);
        int w4[] = {2, 2, 2, 2, 2};
        check_matches("*", "root ::= \"a\"*", s, w4, 5);
        int w5[] = {1, 2, 2, 2, 2};
        check_matches("+", "root ::= \"a\"+", s, w5, 5);
        int w6[] = {2, 2, 2, 2, 2};
        check_matches("{0,}", "root ::= (\"a\" | \"aa\"){0,}", s, w6, 5);
    }
    /* classes, negation, any, escapes, comments and line continuation */
    {
        const char *s[] = {"b", "z", "-", "\t", "é", "x", "日"};
        int w[] = {2, 2, 2, 2, 2, 0, 2};
        check_matches("class", "root ::= [a-cz-z\\t\\u00e9\\x7f-\\U0010FFFF-] # comment\n", s, w, 7);
        int wn[] = {0, 0, 2, 2, 2, 2, 2};
        check_matches("negated", "root ::= [^a-cz]", s, wn, 7);
        int wa[] = {2, 2, 2, 2, 2, 2, 2};
        check_matches("any", "root ::=\n  .", s, wa, 7);
        const char *t[] = {"ab", "cd", "ad"};
        int wt[] = {2, 2, 0};
        check_matches("alternates over lines", "root ::= \"ab\" |\n  \"cd\"\n", t, wt, 3);
    }
    /* llama.cpp's grammars parse (the oracle tree is outside the repository: skipped without it) */
    DIR *d = opendir("/work/llama.cpp/grammars");
    int n_ok = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l < 6 || strcmp(e->d_name + l - 5, ".gbnf")) continue;
            snprintf(path, sizeof path, "/work/llama.cpp/grammars/%s", e->d_name);
            char *src = slurp(path);
            df_gbnf *g = src ? parse_or_null(src) : NULL;
            CHECK_MSG(g != NULL, "%s: %s", path, df_errmsg());
            n_ok += g != NULL;
            df_gbnf_free(g);
            free(src);
        }
        closedir(d);
        printf("llama.cpp grammars parsed: %d\n", n_ok);
    }
}

static int32_t fake_token(void *ud, const char *text, size_t len) {
    if (len == 7 && !memcmp(text, "<think>", 7)) return 7;
    if (len == 8 && !memcmp(text, "</think>", 8)) return 8;
    return -1;
}

static void test_tokens_and_utf8(void) {
    df_gbnf *g = NULL;
    CHECK_EQ_INT(df_gbnf_parse("root ::= <think> [a-z]* </think> \"ok\" !<[3]>", NULL, fake_token, NULL, &g), DF_OK);
    if (g) {
        df_gmatch *m = df_gmatch_create(g);
        CHECK(!df_gmatch_allows(m, "<think>", 7, -1)); /* text is not the token */
        CHECK(df_gmatch_allows(m, "<think>", 7, 7));
        CHECK(!df_gmatch_allows(m, "<think>", 7, 9));
        CHECK_EQ_INT(df_gmatch_accept(m, "<think>", 7, 7), DF_OK);
        CHECK_EQ_INT(df_gmatch_accept(m, "abc", 3, 100), DF_OK);
        CHECK(df_gmatch_allows(m, "</think>", 8, 8));
        CHECK_EQ_INT(df_gmatch_accept(m, "</think>", 8, 8), DF_OK);
        CHECK_EQ_INT(df_gmatch_accept(m, "ok", 2, 50), DF_OK);
        CHECK(!df_gmatch_can_end(m));
        CHECK(!df_gmatch_allows(m, "x", 1, 3));
        CHECK(df_gmatch_allows(m, "x", 1, 4));
        CHECK_EQ_INT(df_gmatch_accept(m, "zz", 2, 9), DF_OK);
        CHECK(df_gmatch_can_end(m) && df_gmatch_done(m));
        df_gmatch_free(m);
        df_gbnf_free(g);
    }
    /* a character split across tokens: the lead byte is allowed when some completion fits */
    CHECK_EQ_INT(df_gbnf_parse("root ::= [ぁ-ゟ]+ \"!\"", NULL, NULL, NULL, &g), DF_OK);
    if (g) {
        df_gmatch *m = df_gmatch_create(g);
        const char *hi = "ぁ"; /* E3 81 81 */
        CHECK(df_gmatch_allows(m, hi, 1, -1));
        CHECK(!df_gmatch_allows(m, "\xe4", 1, -1)); /* U+4xxx: outside the class */
        CHECK(!df_gmatch_allows(m, "\x81", 1, -1)); /* a stray continuation byte */
        CHECK(!df_gmatch_allows(m, "a", 1, -1));
        CHECK_EQ_INT(df_gmatch_accept(m, hi, 1, -1), DF_OK);
        CHECK(!df_gmatch_can_end(m));
        CHECK(!df_gmatch_allows(m, "!", 1, -1)); /* the character must complete first */
        CHECK_EQ_INT(df_gmatch_accept(m, hi + 1, 2, -1), DF_OK);
        CHECK_EQ_INT(df_gmatch_accept(m, "!", 1, -1), DF_OK);
        CHECK(df_gmatch_can_end(m));
        df_gmatch_free(m);
        df_gbnf_free(g);
    }
}

/* the mask equals a token-by-token check, at several states of several grammars */
static void mask_vs_each(const char *vocab_file) {
    char path[512];
    deltafin_vocab *v = NULL;
    if (deltafin_vocab_load(df_fixture(vocab_file, path, sizeof path), NULL, &v) < 0) {
        printf("test_grammar: SKIP mask on %s (%s)\n", vocab_file, deltafin_errmsg());
        return;
    }
    const df_gtok_index *ix = NULL;
    CHECK_EQ_INT(df_tokenizer_gtok_index((const df_tokenizer *)v, &ix), DF_OK);
    if (!ix) { deltafin_vocab_free(v); return; }
    struct { const char *file; const char *prefixes[4]; } cases[] = {
        {"tests/data/grammar/json.gbnf", {"", "{\"a", "{\"ab\": [1, ", "{\"k\": tr"}},
        {"tests/data/grammar/arithmetic.gbnf", {"", "(x1 ", "12 * 3", "1 = -"}},
        {"tests/data/grammar/list.gbnf", {"", "- one", "- a\n", NULL}},
        {NULL, {"", "\xe3", "\xe3\x81", NULL}}, /* split characters */
    };
    uint8_t *allowed = malloc((size_t)ix->n_vocab);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *src = cases[c].file ? slurp(cases[c].file) : strdup("root ::= ([ぁ-ゟ] | [a-z] | \" \")+");
        df_gbnf *g = src ? parse_or_null(src) : NULL;
        CHECK(g != NULL);
        for (int p = 0; g && p < 4 && cases[c].prefixes[p]; p++) {
            df_gmatch *m = df_gmatch_create(g);
            const char *pre = cases[c].prefixes[p];
            CHECK_MSG(!pre[0] || df_gmatch_accept(m, pre, strlen(pre), -1) == DF_OK, "prefix '%s'", pre);
            int n = df_gmatch_mask(m, ix, allowed);
            int n_each = 0, bad = 0;
            for (int id = 0; id < ix->n_vocab; id++) {
                bool want;
                if (ix->eog[id]) want = df_gmatch_can_end(m);
                else want = ix->len[id] > 0 && df_gmatch_allows(m, ix->blob + ix->off[id], ix->len[id], id);
                n_each += want;
                if (want != (allowed[id] != 0) && bad++ < 3)
                    fprintf(stderr, "  %s after '%s': token %d '%.*s' mask %d, check %d\n", cases[c].file ? cases[c].file : "utf8",
                            pre, id, ix->len[id], ix->blob + ix->off[id], allowed[id], want);
            }
            CHECK_MSG(bad == 0 && n == n_each, "%s: %s after '%s': %d differ (mask %d, each %d)", vocab_file,
                      cases[c].file ? cases[c].file : "utf8", pre, bad, n, n_each);
            CHECK_MSG(n > 0, "%s after '%s': nothing allowed", cases[c].file ? cases[c].file : "utf8", pre);
            df_gmatch_free(m);
        }
        df_gbnf_free(g);
        free(src);
    }
    free(allowed);
    deltafin_vocab_free(v);
}

/* ---- generation with a random model ------------------------------------------------------ */

typedef struct {
    const char *s;
} cursor;

static void ws(cursor *c) { while (*c->s == ' ') c->s++; }
static bool number(cursor *c) {
    const char *b = c->s;
    if (*c->s == '-') c->s++;
    if (!isdigit((unsigned char)*c->s)) { c->s = b; return false; }
    while (isdigit((unsigned char)*c->s)) c->s++;
    if (*c->s == '.') {
        c->s++;
        if (!isdigit((unsigned char)*c->s)) return false;
        while (isdigit((unsigned char)*c->s)) c->s++;
    }
    return true;
}
static bool operand(cursor *c) {
    if (number(c)) return true;
    if (*c->s >= 'a' && *c->s <= 'z') {
        while ((*c->s >= 'a' && *c->s <= 'z') || isdigit((unsigned char)*c->s) || *c->s == '_') c->s++;
        return true;
    }
    return false;
}
static bool is_op(char ch) { return ch == '+' || ch == '-' || ch == '*' || ch == '/'; }
static bool term(cursor *c) {
    if (*c->s == '(') {
        c->s++;
        ws(c);
        if (!operand(c)) return false;
        for (;;) {
            const char *save = c->s;
            ws(c);
            if (!is_op(*c->s)) { c->s = save; break; }
            c->s++;
            ws(c);
            if (!operand(c)) return false;
        }
        ws(c);
        if (*c->s != ')') return false;
        c->s++;
        return true;
    }
    return operand(c);
}
/* an independent parser for what arithmetic.gbnf describes: EXPR = NUMBER\n */
static bool arithmetic_ok(const char *s) {
    cursor c = {s};
    if (!term(&c)) return false;
    for (;;) {
        const char *save = c.s;
        ws(&c);
        if (!is_op(*c.s)) { c.s = save; break; }
        c.s++;
        ws(&c);
        if (!term(&c)) return false;
    }
    ws(&c);
    if (*c.s != '=') return false;
    c.s++;
    ws(&c);
    if (!number(&c)) return false;
    return !strcmp(c.s, "\n");
}
static bool list_ok(const char *s) {
    int items = 0;
    while (*s) {
        if (strncmp(s, "- ", 2)) return false;
        s += 2;
        const char *e = strchr(s, '\n');
        if (!e || e == s || s[0] == ' ' || e[-1] == ' ') return false;
        for (const char *p = s; p < e; p++)
            if (!(isalnum((unsigned char)*p) || strchr(" ',.!?", *p))) return false;
        s = e + 1;
        items++;
    }
    return items >= 1 && items <= 6;
}

/* Generate under a grammar; returns the text (special tokens dropped, as the server shows it)
 * and whether generation ended by end-of-generation. */
static char *generate(deltafin_model *m, const char *prompt, const char *gbnf, float temp, uint64_t seed, int max_tokens,
                      bool *ended, int *n_tokens) {
    *ended = false;
    *n_tokens = 0;
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = 1024;
    deltafin_ctx *c = NULL;
    if (deltafin_ctx_create(m, &cp, &c) < 0) return NULL;
    int32_t ids[256];
    int n = deltafin_tokenize(m, prompt, strlen(prompt), true, false, ids, 256);
    deltafin_sampler_params sp = deltafin_sampler_default_params();
    sp.temp = temp;
    sp.seed = seed;
    deltafin_sampler *s = deltafin_sampler_create(&sp);
    for (int i = 0; i < n; i++) deltafin_sampler_accept(s, ids[i]);
    deltafin_grammar *g = NULL;
    CHECK_EQ_INT(deltafin_grammar_create(deltafin_model_vocab(m), gbnf, NULL, &g), DELTAFIN_OK);
    deltafin_sampler_set_grammar(s, g);
    size_t cap = 4096, len = 0;
    char *out = calloc(1, cap);
    int rc = deltafin_decode(c, ids, n, false);
    for (int t = 0; rc == DELTAFIN_OK && t < max_tokens; t++) {
        int32_t id = deltafin_sampler_sample(s, deltafin_logits(c, -1), deltafin_model_n_vocab(m));
        CHECK_MSG(id >= 0, "sample under the grammar: %s", deltafin_errmsg());
        if (id < 0) break;
        deltafin_sampler_accept(s, id);
        (*n_tokens)++;
        if (deltafin_token_is_eog(m, id)) { *ended = true; break; }
        char piece[512];
        int pn = deltafin_token_to_piece(m, id, false, piece, sizeof piece);
        if (pn > 0 && len + (size_t)pn + 1 < cap) { memcpy(out + len, piece, (size_t)pn); len += (size_t)pn; }
        rc = deltafin_decode(c, &id, 1, false);
    }
    out[len] = 0;
    deltafin_sampler_free(s);
    deltafin_ctx_free(c);
    return out;
}

static void test_generation(void) {
    char path[512];
    deltafin_model_params mp = deltafin_model_default_params();
    mp.n_threads = 2;
    deltafin_model *m = NULL;
    if (deltafin_model_load(df_fixture("models/llama-2-tiny-random.gguf", path, sizeof path), &mp, &m) < 0) {
        printf("test_grammar: SKIP generation (%s)\n", deltafin_errmsg());
        return;
    }
    struct { const char *file, *prompt; int kind; } sets[] = {
        {"tests/data/grammar/json_bounded.gbnf", "A JSON object:", 0},
        {"tests/data/grammar/arithmetic.gbnf", "Arithmetic:", 1},
        {"tests/data/grammar/list.gbnf", "A list:", 2},
    };
    const float temps[] = {0.0f, 0.8f, 1.5f};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        char *gbnf = slurp(sets[k].file);
        CHECK(gbnf != NULL);
        int n_ok = 0, n_runs = 0;
        for (int ti = 0; gbnf && ti < 3; ti++)
            for (uint64_t seed = 1; seed <= (temps[ti] == 0.0f ? 1u : 3u); seed++) {
                bool ended;
                int nt;
                uint64_t t0 = deltafin_time_ns();
                char *out = generate(m, sets[k].prompt, gbnf, temps[ti], seed, 600, &ended, &nt);
                double ms = (deltafin_time_ns() - t0) / 1e6;
                bool ok = false;
                if (out && sets[k].kind == 0) {
                    cJSON *j = cJSON_Parse(out);
                    ok = j && cJSON_IsObject(j);
                    cJSON_Delete(j);
                } else if (out && sets[k].kind == 1) {
                    ok = arithmetic_ok(out);
                } else if (out) {
                    ok = list_ok(out);
                }
                CHECK_MSG(ended && ok, "%s temp %.1f seed %llu: ended %d, %d tokens: '%s'", sets[k].file, temps[ti],
                          (unsigned long long)seed, ended, nt, out ? out : "(null)");
                if (getenv("DF_TEST_VERBOSE") || (k == 0 && ti == 2 && seed == 1))
                    printf("grammar generation: %s %d tokens in %.0f ms: %.120s\n", sets[k].file, nt, ms, out ? out : "");
                n_ok += ended && ok;
                n_runs++;
                free(out);
            }
        printf("grammar set %s: %d/%d outputs parse\n", sets[k].file, n_ok, n_runs);
        free(gbnf);
    }
    /* a grammar whose first character no token can start: sampling reports it */
    {
        deltafin_sampler *s = deltafin_sampler_create(NULL);
        deltafin_grammar *g = NULL;
        CHECK_EQ_INT(deltafin_grammar_create(deltafin_model_vocab(m), "root ::= <[99999999]>", NULL, &g), DELTAFIN_OK);
        deltafin_sampler_set_grammar(s, g);
        int nv = deltafin_model_n_vocab(m);
        float *lg = calloc((size_t)nv, sizeof(float));
        CHECK_EQ_INT(deltafin_sampler_sample(s, lg, nv), -1);
        CHECK(strstr(deltafin_errmsg(), "grammar") != NULL);
        free(lg);
        deltafin_sampler_free(s);
    }
    /* token elements resolve through the model's vocabulary */
    {
        deltafin_grammar *g = NULL;
        CHECK_EQ_INT(deltafin_grammar_create(deltafin_model_vocab(m), "root ::= <s> \"x\"", NULL, &g), DELTAFIN_OK);
        CHECK(g && deltafin_grammar_allows(g, 1) && !deltafin_grammar_allows(g, 2));
        deltafin_grammar_free(g);
        CHECK_EQ_INT(deltafin_grammar_create(deltafin_model_vocab(m), "root ::= <notatoken>", NULL, &g), DELTAFIN_ERR_FORMAT);
    }
    deltafin_model_free(m);
}

/* lazy grammars: free text until the trigger, constrained from the trigger on */
static void test_lazy(void) {
    char path[512];
    deltafin_vocab *v = NULL;
    if (deltafin_vocab_load(df_fixture("vocab/ggml-vocab-gpt-2.gguf", path, sizeof path), NULL, &v) < 0) return;
    deltafin_grammar *g = NULL;
    CHECK_EQ_INT(deltafin_grammar_create(v, "root ::= \"<call>\" [0-9]+ \"</call>\"", NULL, &g), DELTAFIN_OK);
    const char *trig[] = {"<call>"};
    CHECK_EQ_INT(deltafin_grammar_set_triggers(g, trig, 1), DELTAFIN_OK);
    int32_t ids[64];
    const char *text = "hello world <call>12";
    int n = deltafin_vocab_tokenize(v, text, strlen(text), false, false, ids, 64);
    CHECK(n > 3);
    for (int i = 0; i < n; i++) {
        CHECK(deltafin_grammar_allows(g, ids[i]));
        CHECK_EQ_INT(deltafin_grammar_accept(g, ids[i]), DELTAFIN_OK);
    }
    CHECK(deltafin_grammar_active(g));
    int32_t x[4];
    CHECK_EQ_INT(deltafin_vocab_tokenize(v, "x", 1, false, false, x, 4), 1);
    CHECK(!deltafin_grammar_allows(g, x[0]));
    CHECK_EQ_INT(deltafin_vocab_tokenize(v, "3", 1, false, false, x, 4), 1);
    CHECK(deltafin_grammar_allows(g, x[0]));
    deltafin_grammar_free(g);
    deltafin_vocab_free(v);
}

static void test_logit_bias(void) {
    float lg[8] = {0, 1, 5, 2, 0, 0, 3, 0};
    deltafin_logit_bias b[2] = {{2, -INFINITY}, {4, 2.5f}};
    deltafin_sampler_params p = deltafin_sampler_default_params();
    p.temp = 0;
    p.logit_bias = b;
    p.n_logit_bias = 1;
    deltafin_sampler *s = deltafin_sampler_create(&p);
    CHECK_EQ_INT(deltafin_sampler_sample(s, lg, 8), 6); /* 2 banned: the next best */
    int32_t ids[2];
    float lps[2];
    CHECK_EQ_INT(deltafin_sampler_top(s, 1, ids, lps), 1);
    CHECK(lps[0] < -2.0f && lps[0] > -3.0f); /* logprobs are the model's, unbiased */
    deltafin_sampler_free(s);
    p.n_logit_bias = 2;
    b[1].bias = 10.0f;
    s = deltafin_sampler_create(&p);
    CHECK_EQ_INT(deltafin_sampler_sample(s, lg, 8), 4);
    CHECK(lg[2] == 5 && lg[4] == 0); /* the caller's logits are untouched */
    deltafin_sampler_free(s);
    p.temp = 1.0f;
    p.seed = 7;
    s = deltafin_sampler_create(&p);
    for (int i = 0; i < 200; i++) CHECK(deltafin_sampler_sample(s, lg, 8) != 2);
    deltafin_sampler_free(s);
    p.logit_bias = NULL;
    CHECK(deltafin_sampler_create(&p) == NULL);
}

int main(void) {
    df_init();
    test_errors();
    test_matching();
    test_tokens_and_utf8();
    mask_vs_each("vocab/ggml-vocab-llama-spm.gguf");
    mask_vs_each("vocab/ggml-vocab-gpt-2.gguf");
    test_lazy();
    test_logit_bias();
    test_generation();
    TEST_MAIN_END("test_grammar");
}
