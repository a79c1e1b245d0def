/* test_config.c — deltafin.yaml parsing: every key, defaults, and each error class with
 * the line it names. Flag-over-file precedence is tested end to end in test_config_cli.sh. */
#include "app/config.h"
#include "weights/expert_store.h"
#include "testlib.h"
#include <unistd.h>

static int parse(const char *text, df_config *c) {
    df_config_init(c);
    df_err_clear();
    return df_config_parse(text, strlen(text), "t.yaml", c);
}

static void expect_err(const char *text, const char *msg) {
    df_config c;
    int rc = parse(text, &c);
    CHECK_EQ_INT(rc, DF_ERR_FORMAT);
    CHECK_MSG(strstr(df_errmsg(), msg) != NULL, "want '%s' in '%s'", msg, df_errmsg());
}

int main(void) {
    df_init();
    df_config c;
    const char *full =
        "# comment\n"
        "model:\n"
        "  path: /models/qwen3.gguf\n"
        "  name: qwen3-30b\n"
        "inference:\n"
        "  precision: auto\n"
        "  batch_size: 256\n"
        "  max_seq_len: 8192\n"
        "  sampling:\n"
        "    temperature: 0.6\n"
        "    top_k: 20\n"
        "    top_p: 0.9\n"
        "    min_p: 0.01\n"
        "    seed: 42\n"
        "    repeat_penalty: 1.1\n"
        "hardware:\n"
        "  threads: 8\n"
        "  memory_limit: 16G\n"
        "  memory_reserve: 512M\n"
        "  io_engine: direct\n"
        "cache:\n"
        "  size: 4G\n"
        "  preload_experts: [\"0:1\", \"3:7\"]\n"
        "  hot_set: hot.txt\n"
        "  prefetch: off\n";
    CHECK_EQ_INT(parse(full, &c), DF_OK);
    CHECK_STR(c.model_path, "/models/qwen3.gguf");
    CHECK_STR(c.model_name, "qwen3-30b");
    CHECK_EQ_INT(c.batch_size, 256);
    CHECK_EQ_INT(c.max_seq_len, 8192);
    CHECK_NEAR(c.temperature, 0.6, 1e-6);
    CHECK_EQ_INT(c.top_k, 20);
    CHECK_NEAR(c.top_p, 0.9, 1e-6);
    CHECK_NEAR(c.min_p, 0.01, 1e-6);
    CHECK_EQ_INT(c.seed, 42);
    CHECK_NEAR(c.repeat_penalty, 1.1, 1e-6);
    CHECK_EQ_INT(c.threads, 8);
    CHECK_EQ_INT(c.memory_limit, 16ull << 30);
    CHECK_EQ_INT(c.memory_reserve, 512ull << 20);
    CHECK_STR(c.io_engine, "direct");
    CHECK_EQ_INT(c.cache_size, 4ull << 30);
    CHECK_STR(c.preload_experts, "0:1,3:7");
    CHECK_STR(c.hot_set, "hot.txt");
    CHECK_EQ_INT(c.prefetch, DF_PREFETCH_OFF);
    CHECK_EQ_INT(c.set, (1u << 19) - 1); /* every key set */

    /* partial file: only named keys set; aliases; empty section; empty file */
    CHECK_EQ_INT(parse("hardware:\n  io: uring\ncache:\n  cache_size: 1M\n  preload_experts: \"1:2,2:3\"\nmodel:\n", &c), DF_OK);
    CHECK_EQ_INT(c.set, DF_CFG_IO_ENGINE | DF_CFG_CACHE_SIZE | DF_CFG_PRELOAD);
    CHECK_STR(c.io_engine, "uring");
    CHECK_STR(c.preload_experts, "1:2,2:3");
    CHECK_EQ_INT(parse("cache:\n  preload_experts: []\n", &c), DF_OK);
    CHECK_EQ_INT(c.set, 0);
    CHECK_EQ_INT(c.prefetch, DF_PREFETCH_AUTO);
    CHECK_EQ_INT(parse("", &c), DF_OK);
    CHECK_EQ_INT(c.set, 0);
    CHECK_EQ_INT(parse("# nothing\n", &c), DF_OK);
    CHECK_EQ_INT(parse("inference:\n  sampling:\n    seed: random\n", &c), DF_OK);
    CHECK(c.seed == UINT64_MAX);
    CHECK_EQ_INT(parse("cache:\n  prefetch: true\n", &c), DF_OK);
    CHECK_EQ_INT(c.prefetch, DF_PREFETCH_ON);

    /* unknown keys and sections name the line */
    expect_err("model:\n  path: a\nhardware:\n  threads: 2\n\n\n  cach: 1\n",
               "t.yaml:7: unknown key 'cach' in section 'hardware'");
    expect_err("modle:\n  path: a\n", "t.yaml:1: unknown section 'modle'");
    expect_err("inference:\n  sampling:\n    tmp: 1\n", "t.yaml:3: unknown key 'tmp' in section 'inference.sampling'");
    expect_err("model:\n  temperature: 1\n", "t.yaml:2: unknown key 'temperature' in section 'model'");
    /* wrong types */
    expect_err("hardware:\n  threads: many\n", "t.yaml:2: hardware.threads: expected an integer, got 'many'");
    expect_err("hardware:\n  threads: \"8\"\n", "t.yaml:2: hardware.threads: expected an integer");
    expect_err("inference:\n  sampling:\n    top_p: high\n", "t.yaml:3: inference.sampling.top_p: expected a number");
    expect_err("hardware:\n  memory_limit: lots\n", "t.yaml:2: hardware.memory_limit: expected a size");
    expect_err("hardware:\n  threads: [1, 2]\n", "t.yaml:2: hardware.threads: expected a value, got a list");
    expect_err("model: /x.gguf\n", "t.yaml:1: section 'model': expected a mapping, got a scalar");
    expect_err("- a\n- b\n", "t.yaml:1: expected a mapping of sections");
    expect_err("cache:\n  preload_experts: [{a: 1}]\n", "t.yaml:2: cache.preload_experts: list items");
    expect_err("inference:\n  sampling: 3\n", "t.yaml:2: inference.sampling: expected a mapping");
    /* bad values */
    expect_err("hardware:\n  io_engine: turbo\n", "t.yaml:2: hardware.io_engine: unknown I/O engine 'turbo'");
    expect_err("cache:\n  prefetch: maybe\n", "t.yaml:2: cache.prefetch: expected auto, on or off");
    expect_err("inference:\n  sampling:\n    top_p: 1.5\n", "t.yaml:3: inference.sampling.top_p: 1.5 is out of range");
    expect_err("inference:\n  batch_size: 0\n", "t.yaml:2: inference.batch_size: 0 is out of range");
    expect_err("inference:\n  sampling:\n    seed: -5\n", "inference.sampling.seed: expected a non-negative integer");
    expect_err("inference:\n  precision: fp8\n", "t.yaml:2: inference.precision: 'fp8' is not supported");
    expect_err("model:\n  path: \"\"\n", "t.yaml:2: model.path: empty value");
    /* duplicates, aliases, syntax */
    expect_err("hardware:\n  threads: 1\n  threads: 2\n", "t.yaml:3: duplicate key 'threads'");
    expect_err("hardware:\n  io: pread\n  io_engine: mmap\n", "t.yaml:3: duplicate key 'io_engine'");
    expect_err("cache:\n  size: 1G\ncache:\n  prefetch: on\n", "t.yaml:3: duplicate section 'cache'");
    expect_err("hardware: &h\n  threads: 1\ncache: *h\n", "t.yaml:3: YAML aliases are not supported");
    expect_err("hardware:\n  threads: 1\n  \"threads: 1\n", "YAML syntax error");
    expect_err("model:\n  path: a\n---\nmodel:\n  path: b\n", "only one YAML document");

    /* load from a file; missing file */
    char path[] = "/tmp/df_cfg_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("hardware:\n  threads: 3\n", f);
    fclose(f);
    df_config_init(&c);
    CHECK_EQ_INT(df_config_load(path, &c), DF_OK);
    CHECK_EQ_INT(c.threads, 3);
    f = fopen(path, "w");
    fputs("hardware:\n  thread: 3\n", f);
    fclose(f);
    df_config_init(&c);
    CHECK_EQ_INT(df_config_load(path, &c), DF_ERR_FORMAT);
    char want[128];
    snprintf(want, sizeof want, "%s:2: unknown key 'thread'", path);
    CHECK_MSG(strstr(df_errmsg(), want) != NULL, "%s", df_errmsg());
    unlink(path);
    df_config_init(&c);
    CHECK(df_config_load("/nonexistent/deltafin.yaml", &c) < 0);

    /* --config lookup */
    char *av[] = {"run", "-m", "x", "--config", "a.yaml", "-p", "hi"};
    CHECK_STR(df_config_find_arg(7, av), "a.yaml");
    char *av2[] = {"run", "--config=b.yaml"};
    CHECK_STR(df_config_find_arg(2, av2), "b.yaml");
    CHECK(df_config_find_arg(1, av2) == NULL);
    TEST_MAIN_END("test_config");
}
