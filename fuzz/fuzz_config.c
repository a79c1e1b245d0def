/* fuzz_config.c — libFuzzer target for the deltafin.yaml reader (app/config.c df_config_parse,
 * libyaml underneath) on arbitrary bytes: broken YAML, aliases, deep nesting, huge scalars,
 * invalid UTF-8. Properties: no crash; a refusal is a negative status whose message starts
 * with the file name ("fuzz.yaml:"); an accepted file sets only known bits and keeps its
 * strings NUL-terminated within their fields. */
#include "app/config.h"
#include "deltafin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    df_config c;
    df_config_init(&c);
    int rc = df_config_parse((const char *)data, size, "fuzz.yaml", &c);
    if (rc) {
        if (rc > 0 || strncmp(deltafin_errmsg(), "fuzz.yaml", 9)) abort();
        return 0;
    }
    if (c.set & ~((DF_CFG_PREFETCH << 1) - 1)) abort();
    if (!memchr(c.model_path, 0, sizeof c.model_path) || !memchr(c.model_name, 0, sizeof c.model_name) ||
        !memchr(c.preload_experts, 0, sizeof c.preload_experts) || !memchr(c.hot_set, 0, sizeof c.hot_set) ||
        !memchr(c.io_engine, 0, sizeof c.io_engine) || !memchr(c.precision, 0, sizeof c.precision))
        abort();
    if ((c.set & DF_CFG_THREADS) && (c.threads < 0 || c.threads > 4096)) abort();
    if ((c.set & DF_CFG_TOP_P) && !(c.top_p >= 0 && c.top_p <= 1)) abort();
    return 0;
}
