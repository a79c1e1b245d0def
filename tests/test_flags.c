/* test_flags.c — the one flag table (app/cli/flags.c): no spelling is taken twice within a
 * command, every config key a run can set is reachable, the defaults the help states are the
 * defaults applied (sampling: the library's; serve: df_server_default_params), and the parser's
 * rules: strict values, `--name=value`, `_` = `-` in long names, missing values, unknown
 * options and extra arguments are usage errors (2), --config applies and flags override it. */
#include "app/cli/flags.h"
#include "app/server.h"
#include "testlib.h"

#include <ctype.h>
#include <unistd.h>

static const char *cmd_names[DF_CMD_COUNT] = {"run", "chat", "serve", "bench", "bench kernels", "perplexity",
                                              "info", "tokenize", "quantize", "pack", "profile", "verify",
                                              "doctor", "pull"};
static const int cmd_pos[DF_CMD_COUNT] = {0, 0, 0, 0, 0, 0, 1, 0, 3, 2, 0, 1, 1, 1};

static df_cmd cmd_of(int id) {
    return (df_cmd){(df_cmd_id)id, cmd_names[id], "usage: test", NULL, NULL, cmd_pos[id]};
}

static int parse(int id, df_settings *s, int argc, const char **argv) {
    df_cmd c = cmd_of(id);
    return df_cli_parse(&c, argc, (char **)argv, s);
}

/* spelling k of a '|' list into buf, with '_' as '-' */
static bool spelling(const char *names, int k, char *buf, size_t cap) {
    for (int i = 0; *names; i++) {
        size_t n = strcspn(names, "|");
        if (i == k) {
            snprintf(buf, cap, "%.*s", (int)n, names);
            return true;
        }
        names += n + (names[n] ? 1 : 0);
    }
    return false;
}

static void check_unique(void) {
    const int n = df_cli_n_rows();
    for (int c = 0; c < DF_CMD_COUNT; c++)
        for (int i = 0; i < n; i++) {
            const char *ni, *hi;
            unsigned ci, fi;
            df_cli_row(i, &ni, &ci, &fi, &hi);
            if (!(ci & (1u << c))) continue;
            CHECK_MSG(hi && *hi, "row %s has no help", ni);
            char a[64];
            for (int k = 0; spelling(ni, k, a, sizeof a); k++)
                for (int j = i + 1; j < n; j++) {
                    const char *nj, *hj;
                    unsigned cj, fj;
                    df_cli_row(j, &nj, &cj, &fj, &hj);
                    if (!(cj & (1u << c))) continue;
                    char b[64];
                    for (int m = 0; spelling(nj, m, b, sizeof b); m++)
                        CHECK_MSG(strcmp(a, b), "%s: '%s' in two rows", cmd_names[c], a);
                }
        }
}

static void check_config_keys(void) {
    /* every key of deltafin.yaml that names a setting reaches run (model.name and precision do
     * not: a label and the only mode) */
    const unsigned want = DF_CFG_MODEL_PATH | DF_CFG_BATCH_SIZE | DF_CFG_MAX_SEQ_LEN | DF_CFG_TEMP | DF_CFG_TOP_K |
                          DF_CFG_TOP_P | DF_CFG_MIN_P | DF_CFG_SEED | DF_CFG_REPEAT_PENALTY | DF_CFG_THREADS |
                          DF_CFG_MEM_LIMIT | DF_CFG_MEM_RESERVE | DF_CFG_IO_ENGINE | DF_CFG_CACHE_SIZE |
                          DF_CFG_PRELOAD | DF_CFG_HOT_SET | DF_CFG_PREFETCH | DF_CFG_CACHE_TYPE_K | DF_CFG_CACHE_TYPE_V;
    unsigned got = 0;
    for (int i = 0; i < df_cli_n_rows(); i++) {
        const char *n, *h;
        unsigned c, f;
        df_cli_row(i, &n, &c, &f, &h);
        if (c & (1u << DF_CMD_RUN)) got |= f;
    }
    CHECK_MSG(got == want, "run's rows map config bits %#x, want %#x", got, want);
    /* a command that takes --config has some option a key maps to */
    for (int c = 0; c < DF_CMD_COUNT; c++) {
        bool config = false, keyed = false;
        for (int i = 0; i < df_cli_n_rows(); i++) {
            const char *n, *h;
            unsigned cm, f;
            df_cli_row(i, &n, &cm, &f, &h);
            if (!(cm & (1u << c))) continue;
            config |= !strcmp(n, "--config");
            keyed |= f != 0;
        }
        CHECK_MSG(!config || keyed, "%s takes --config but no option of it has a config key", cmd_names[c]);
    }
}

/* "(default 0.8" in a row's help must be the value the parser starts from */
static void check_defaults(void) {
    for (int c = 0; c < DF_CMD_COUNT; c++) {
        df_settings s;
        const char *argv[] = {cmd_names[c]};
        CHECK_EQ_INT(parse(c, &s, 1, argv), DF_CLI_GO);
        for (int i = 0; i < df_cli_n_rows(); i++) {
            const char *n, *h;
            unsigned cm, f;
            df_cli_row(i, &n, &cm, &f, &h);
            if (!(cm & (1u << c))) continue;
            const char *d = strstr(h, "(default ");
            if (!d || !(isdigit((unsigned char)d[9]) || d[9] == '-')) continue;
            char want[32], got[32];
            size_t k = strspn(d + 9, "-0123456789.KMGTiB");
            snprintf(want, sizeof want, "%.*s", (int)k, d + 9);
            df_cli_row_value(i, &s, got, sizeof got);
            if (!*got) continue; /* not a number ("default 127.0.0.1") */
            uint64_t bytes;
            if (strpbrk(want, "KMGT") && deltafin_parse_size(want, &bytes) == DELTAFIN_OK) /* "default 1G" */
                snprintf(want, sizeof want, "%llu", (unsigned long long)bytes);
            CHECK_MSG(!strcmp(want, got), "%s %s: help says default %s, parser starts at %s", cmd_names[c], n, want,
                      got);
        }
    }
    /* the serve rows' defaults are the server's own */
    df_settings s;
    const char *argv[] = {"serve"};
    parse(DF_CMD_SERVE, &s, 1, argv);
    df_server_params p = df_server_default_params();
    CHECK_STR(s.host, p.host);
    CHECK_EQ_INT(s.port, p.port);
    CHECK_EQ_INT(s.n_parallel, p.n_parallel);
    CHECK_EQ_INT(s.n_queue, p.n_queue);
    CHECK_EQ_INT(s.max_body, p.max_body);
    CHECK_EQ_INT(s.timeout_s, p.timeout_s);
    CHECK_EQ_INT(s.n_batch, p.n_batch);
    CHECK_EQ_INT(s.step_tokens, p.step_tokens);
    CHECK_EQ_INT(s.n_predict, p.default_max_tokens);
    CHECK_EQ_INT(!s.no_cache_prompt, p.cache_prompt);
}

static void check_parser(void) {
    df_settings s;
    const char *a1[] = {"run", "-m", "m.gguf", "--top_k", "5", "--temp=0.25", "-s", "-1", "-c", "128", "--io-engine",
                        "pread", "--prefetch", "off", "--mem_limit", "2G", "--cache-size=64M", "-ngl", "99", "-fa", "on",
                        "--no-mmap", "-ub", "256", "-tb", "4", "--mlock"};
    CHECK_EQ_INT(parse(DF_CMD_RUN, &s, (int)(sizeof a1 / sizeof *a1), a1), DF_CLI_GO);
    CHECK_STR(s.model, "m.gguf");
    CHECK_EQ_INT(s.sp.top_k, 5);
    CHECK_NEAR(s.sp.temp, 0.25, 1e-7);
    CHECK(s.sp.seed == UINT64_MAX);
    CHECK_EQ_INT(s.n_ctx, 128);
    CHECK_STR(s.io_engine, "pread");
    CHECK_EQ_INT(s.prefetch, DELTAFIN_PREFETCH_OFF);
    CHECK_EQ_INT(s.mem_limit, 2ull << 30);
    CHECK_EQ_INT(s.cache_size, 64ull << 20);
    CHECK(s.mlock);
    CHECK(df_cli_given(&s, &(df_cmd){DF_CMD_RUN, "run", "", NULL, NULL, 0}, "--top-k"));
    deltafin_model_params mp = df_cli_model_params(&s);
    CHECK_EQ_INT(mp.cache_bytes, 64ull << 20);
    CHECK_EQ_INT(mp.prefetch, DELTAFIN_PREFETCH_OFF);
    CHECK_STR(mp.io_engine, "pread");
    CHECK(mp.mlock);
    /* usage errors: exit status 2 */
    const char *bad[][4] = {
        {"run", "-n", "abc", NULL}, {"run", "-t", "4x", NULL}, {"run", "--seed", "12z", NULL},
        {"run", "-c", "-", NULL}, {"run", "-c", "", NULL}, {"run", "--x", NULL, NULL}, {"run", "-m", NULL, NULL},
        {"run", "--special=1", NULL, NULL}, {"run", "extra", NULL, NULL}, {"run", "--io", "nvme", NULL},
        {"run", "-fa", "maybe", NULL}, {"run", "--log-level", "loud", NULL}, {"run", "--mem-limit", "lots", NULL},
        {"bench", "--temp", "1", NULL}, {"bench", "-r", "1e3", NULL}, {"bench", "-p", "32,", NULL},
        {"bench", "-p", "64-32", NULL}, {"bench", "-n", "1-8*1", NULL}, {"bench", "-t", "0-4*2", NULL},
        {"bench", "-b", "-1", NULL}, {"bench", "-p", "1-100000", NULL}, {"bench", "-p", "3x", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int argc = 0;
        while (argc < 4 && bad[i][argc]) argc++;
        int id = !strcmp(bad[i][0], "bench") ? DF_CMD_BENCH : DF_CMD_RUN;
        CHECK_MSG(parse(id, &s, argc, bad[i]) == 2, "%s %s %s accepted", bad[i][0], bad[i][1],
                  bad[i][2] ? bad[i][2] : "");
    }
    /* llama.cpp's sampling flags: values in the sampler parameters (serve takes them as defaults) */
    const char *a5[] = {"serve", "-m", "m.gguf", "--presence-penalty", "0.5", "--frequency-penalty=0.25",
                        "--typical", "0.9", "--top-nsigma", "1.5", "--xtc-probability", "0.5", "--xtc-threshold", "0.2",
                        "--mirostat", "2", "--mirostat-lr", "0.2", "--mirostat-ent", "3", "--dry-multiplier", "0.8",
                        "--dry-base", "0.5", "--dry-allowed-length", "3", "--dry-penalty-last-n", "128",
                        "--dry-sequence-breaker", "\n", "--dry-sequence-breaker", "###", "-l", "15+1",
                        "--logit-bias", "7-inf", "--samplers", "top_k;temperature", "--ignore-eos", "--temp", "-1",
                        "-ot", "exps=CPU", "-cmoe", "-ncmoe", "4"};
    CHECK_EQ_INT(parse(DF_CMD_SERVE, &s, (int)(sizeof a5 / sizeof *a5), a5), DF_CLI_GO);
    CHECK(s.sp.presence_penalty == 0.5f && s.sp.freq_penalty == 0.25f && s.sp.typical_p == 0.9f);
    CHECK(s.sp.top_n_sigma == 1.5f && s.sp.xtc_probability == 0.5f && s.sp.xtc_threshold == 0.2f);
    CHECK(s.sp.mirostat == 2 && s.sp.mirostat_eta == 0.2f && s.sp.mirostat_tau == 3.0f);
    CHECK(s.sp.dry_multiplier == 0.8f && s.sp.dry_base == 1.75f /* < 1: ignored, as llama.cpp */);
    CHECK(s.sp.dry_allowed_length == 3 && s.sp.dry_penalty_last_n == 128);
    CHECK(s.dry_breakers_set && s.n_dry_breakers == 2 && !strcmp(s.dry_breakers[1], "###"));
    CHECK(s.n_logit_bias == 2 && s.logit_bias[0].token == 15 && s.logit_bias[0].bias == 1.0f &&
          s.logit_bias[1].token == 7 && s.logit_bias[1].bias == -INFINITY);
    CHECK(s.sp.n_samplers == 2 && s.sp.samplers[0] == DELTAFIN_SAMPLER_TOP_K &&
          s.sp.samplers[1] == DELTAFIN_SAMPLER_TEMPERATURE);
    CHECK(s.ignore_eos);
    CHECK(s.sp.temp == 0.0f); /* clamped at 0, as llama.cpp */
    const char *a6[] = {"run", "--dry-sequence-breaker", "x", "--dry-sequence-breaker", "none", "--sampler-seq", "kt"};
    CHECK_EQ_INT(parse(DF_CMD_RUN, &s, 7, a6), DF_CLI_GO);
    CHECK(s.dry_breakers_set && s.n_dry_breakers == 0);
    CHECK(s.sp.n_samplers == 2 && s.sp.samplers[0] == DELTAFIN_SAMPLER_TOP_K);
    const char *bad2[][3] = {
        {"run", "--samplers", "top_k;bogus"}, {"run", "--sampler-seq", "kq"}, {"run", "-l", "15"},
        {"run", "--logit-bias", "x+1"}, {"run", "--mirostat", "3"}, {"run", "--repeat-last-n", "-1"},
        {"run", "--dry-penalty-last-n", "-2"}, {"run", "--repeat-penalty", "0"}, {"run", "-ot", "exps"},
        {"run", "-ot", "[=CPU"}, {"run", "-ot", "a=CPU,"}, {"run", "-ncmoe", "-1"}, {"run", "-ngl", "many"},
        {"run", "-ub", "x"}, {"run", "--typical", "p"},
    };
    for (size_t i = 0; i < sizeof bad2 / sizeof *bad2; i++)
        CHECK_MSG(parse(DF_CMD_RUN, &s, 3, bad2[i]) == 2, "%s %s %s accepted", bad2[i][0], bad2[i][1], bad2[i][2]);
    const char *a7[] = {"run", "-ngl", "-1", "-ngl", "all", "-ot", "blk\\.(1[0-9])\\.ffn_.*_exps=CPU,x=CUDA0"};
    CHECK_EQ_INT(parse(DF_CMD_RUN, &s, 7, a7), DF_CLI_GO);
    /* llama.cpp's escapes (-p, --dry-sequence-breaker) */
    const char *esc[][2] = {{"a\\nb", "a\nb"}, {"\\t\\r\\'\\\"\\\\", "\t\r'\"\\"}, {"\\x41\\x4", "A\\x4"},
                            {"\\q\\", "\\q\\"}, {"plain", "plain"}};
    for (size_t i = 0; i < sizeof esc / sizeof *esc; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%s", esc[i][0]);
        df_cli_unescape(buf);
        CHECK_STR(buf, esc[i][1]);
    }
    /* same spelling, another command's meaning: bench -p is the prompt length */
    const char *a2[] = {"bench", "-p", "64", "-n", "8"};
    CHECK_EQ_INT(parse(DF_CMD_BENCH, &s, 5, a2), DF_CLI_GO);
    CHECK_EQ_INT(s.n_prompt.n, 1);
    CHECK_EQ_INT(s.n_prompt.v[0], 64);
    CHECK_EQ_INT(s.n_gen.n, 1);
    CHECK_EQ_INT(s.n_gen.v[0], 8);
    /* llama-bench's lists: commas, ranges (+step, *mult), a flag given again adds to the list */
    const char *b1[] = {"bench", "-p", "32,64", "-p", "128-512*2", "-n", "1-7+3", "-t", "1,2", "-pg", "8,4", "-b", "16"};
    CHECK_EQ_INT(parse(DF_CMD_BENCH, &s, 13, b1), DF_CLI_GO);
    const int want_p[] = {32, 64, 128, 256, 512}, want_n[] = {1, 4, 7};
    CHECK_EQ_INT(s.n_prompt.n, 5);
    for (int i = 0; i < 5 && i < s.n_prompt.n; i++) CHECK_EQ_INT(s.n_prompt.v[i], want_p[i]);
    CHECK_EQ_INT(s.n_gen.n, 3);
    for (int i = 0; i < 3 && i < s.n_gen.n; i++) CHECK_EQ_INT(s.n_gen.v[i], want_n[i]);
    CHECK(s.bench_threads.n == 2 && s.bench_threads.v[1] == 2);
    CHECK(s.bench_pg.n == 2 && s.bench_pg.v[0] == 8 && s.bench_pg.v[1] == 4);
    CHECK(s.bench_batch.n == 1 && s.bench_batch.v[0] == 16);
    const char *b2[] = {"bench"}; /* the defaults: one value each */
    CHECK_EQ_INT(parse(DF_CMD_BENCH, &s, 1, b2), DF_CLI_GO);
    CHECK(s.n_prompt.n == 1 && s.n_prompt.v[0] == 512 && s.n_gen.n == 1 && s.n_gen.v[0] == 128);
    CHECK(s.bench_batch.n == 1 && s.bench_batch.v[0] == 512 && s.bench_threads.n == 0 && s.bench_pg.n == 0);
    CHECK_STR(s.bench_output, "md");
    /* positionals interleaved with flags (quantize IN OUT TYPE -t 2) */
    const char *a3[] = {"quantize", "in.gguf", "out.gguf", "Q4_K", "-t", "2", "--pure"};
    CHECK_EQ_INT(parse(DF_CMD_QUANTIZE, &s, 7, a3), DF_CLI_GO);
    CHECK_EQ_INT(s.n_pos, 3);
    CHECK_STR(s.pos[2], "Q4_K");
    CHECK_EQ_INT(s.n_threads, 2);
    CHECK(s.pure);
    /* help exits 0 even when a value looks like help is not given */
    const char *a4[] = {"tokenize", "-p", "-h"};
    CHECK_EQ_INT(parse(DF_CMD_TOKENIZE, &s, 3, a4), DF_CLI_GO);
    CHECK_STR(s.prompt, "-h");
}

static void check_config(void) {
    char path[] = "/tmp/df_test_flags_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    const char *y = "model:\n  path: /m/cfg.gguf\ninference:\n  batch_size: 64\n  max_seq_len: 256\n"
                    "  sampling:\n    temperature: 1.5\n    seed: 7\nhardware:\n  threads: 3\n  io_engine: direct\n"
                    "cache:\n  size: 8M\n  prefetch: on\n";
    CHECK(write(fd, y, strlen(y)) == (ssize_t)strlen(y));
    close(fd);
    df_settings s;
    const char *a1[] = {"run", "--temp", "0", "--config", path, "-t", "1"};
    CHECK_EQ_INT(parse(DF_CMD_RUN, &s, 7, a1), DF_CLI_GO);
    CHECK_STR(s.model, "/m/cfg.gguf");
    CHECK_EQ_INT(s.n_batch, 64);
    CHECK_EQ_INT(s.n_ctx, 256);
    CHECK_NEAR(s.sp.temp, 0, 0);      /* the flag wins, wherever --config is */
    CHECK_EQ_INT(s.sp.seed, 7);
    CHECK_EQ_INT(s.n_threads, 1);
    CHECK_STR(s.io_engine, "direct");
    CHECK_EQ_INT(s.cache_size, 8u << 20);
    CHECK_EQ_INT(s.prefetch, DELTAFIN_PREFETCH_ON);
    /* another command takes the keys of its own options: info gets the model and the context */
    const char *a2[] = {"info", "--config", path};
    CHECK_EQ_INT(parse(DF_CMD_INFO, &s, 3, a2), DF_CLI_GO);
    CHECK_STR(s.model, "/m/cfg.gguf");
    CHECK_EQ_INT(s.n_ctx, 256);
    /* bench's lists take the file's threads and batch as one value; a flag replaces them */
    const char *a5[] = {"bench", "--config", path, "-b", "8,16"};
    CHECK_EQ_INT(parse(DF_CMD_BENCH, &s, 5, a5), DF_CLI_GO);
    CHECK(s.bench_threads.n == 1 && s.bench_threads.v[0] == 3);
    CHECK(s.bench_batch.n == 2 && s.bench_batch.v[0] == 8 && s.bench_batch.v[1] == 16);
    df_cmd info = cmd_of(DF_CMD_INFO);
    int rc;
    s.pos[s.n_pos++] = "/m/other.gguf"; /* the positional MODEL overrides the file's */
    CHECK_STR(df_cli_model_arg(&info, &s, true, &rc), "/m/other.gguf");
    const char *a3[] = {"info", "-m", "a.gguf", "b.gguf"};
    CHECK_EQ_INT(parse(DF_CMD_INFO, &s, 4, a3), DF_CLI_GO);
    CHECK(df_cli_model_arg(&info, &s, true, &rc) == NULL && rc == 2); /* the model twice */
    /* a broken file is a usage error (2) before anything runs */
    FILE *f = fopen(path, "w");
    fputs("hardware:\n  cach: 4G\n", f);
    fclose(f);
    const char *a4[] = {"doctor", "--config=", NULL};
    char arg[64];
    snprintf(arg, sizeof arg, "--config=%s", path);
    a4[1] = arg;
    CHECK_EQ_INT(parse(DF_CMD_DOCTOR, &s, 2, a4), 2);
    unlink(path);
}

int main(void) {
    deltafin_init();
    check_unique();
    check_config_keys();
    check_defaults();
    check_parser();
    check_config();
    TEST_MAIN_END("test_flags");
}
