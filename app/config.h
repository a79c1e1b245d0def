/* config.h — the deltafin.yaml configuration file (docs/operations.md).
 * Sections: model, inference (+ inference.sampling), hardware, cache. Every key is optional;
 * a key that is present sets its bit in df_config.set so callers apply only what the file
 * names and command-line flags (parsed afterwards) override it. Unknown keys, wrong types and
 * out-of-range values are DELTAFIN_ERR_FORMAT with "FILE:LINE: ..." in the message.
 * Threading: pure functions over caller-owned structs. */
#ifndef DF_CONFIG_H
#define DF_CONFIG_H
#include <stddef.h>
#include <stdint.h>

enum {
    DF_CFG_MODEL_PATH = 1u << 0, DF_CFG_MODEL_NAME = 1u << 1,
    DF_CFG_PRECISION = 1u << 2, DF_CFG_BATCH_SIZE = 1u << 3, DF_CFG_MAX_SEQ_LEN = 1u << 4,
    DF_CFG_TEMP = 1u << 5, DF_CFG_TOP_K = 1u << 6, DF_CFG_TOP_P = 1u << 7, DF_CFG_MIN_P = 1u << 8,
    DF_CFG_SEED = 1u << 9, DF_CFG_REPEAT_PENALTY = 1u << 10,
    DF_CFG_THREADS = 1u << 11, DF_CFG_MEM_LIMIT = 1u << 12, DF_CFG_MEM_RESERVE = 1u << 13,
    DF_CFG_IO_ENGINE = 1u << 14,
    DF_CFG_CACHE_SIZE = 1u << 15, DF_CFG_PRELOAD = 1u << 16, DF_CFG_HOT_SET = 1u << 17,
    DF_CFG_PREFETCH = 1u << 18,
    DF_CFG_CACHE_TYPE_K = 1u << 19, DF_CFG_CACHE_TYPE_V = 1u << 20,
};

typedef struct {
    unsigned set;                 /* DF_CFG_* bits of the keys the file gave */
    /* model */
    char model_path[1024];
    char model_name[256];
    /* inference */
    char precision[16];           /* "auto" (the model's own tensor types) */
    int batch_size;               /* -> n_batch */
    int max_seq_len;              /* -> n_ctx */
    int cache_type_k, cache_type_v; /* DELTAFIN_KV_* (deltafin.h): f16 q8_0 q4_0 ... */
    float temperature, top_p, min_p, repeat_penalty;
    int top_k;
    uint64_t seed;
    /* hardware */
    int threads;
    uint64_t memory_limit, memory_reserve;
    char io_engine[16];           /* auto pread direct uring mmap */
    /* cache */
    uint64_t cache_size;          /* expert cache bytes */
    char preload_experts[4096];   /* "L:E,L:E" (a YAML list or a string in the file) */
    char hot_set[1024];           /* hot-set file ("layer expert count" lines) */
    int prefetch;                 /* DELTAFIN_PREFETCH_* (deltafin.h) */
} df_config;

void df_config_init(df_config *c);
/* Parse YAML text; `name` is used in messages (the file path). Relative hot_set / model.path
 * stay as written. On error *c may be partly filled. */
int df_config_parse(const char *text, size_t len, const char *name, df_config *c);
int df_config_load(const char *path, df_config *c);
/* Find "--config FILE" (or --config=FILE) in argv; NULL if absent. */
const char *df_config_find_arg(int argc, char **argv);
#endif
