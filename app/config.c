/* config.c — deltafin.yaml reader over libyaml's event parser.
 * Only a fixed two-level shape is accepted (section: {key: scalar}, plus inference.sampling);
 * anything else is an error naming the file and line, never ignored, because a silently
 * ignored typo ("cach_size") would make a run behave unlike what its owner wrote down. */
#include "app/config.h"
#include "deltafin.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef enum { T_STR, T_INT, T_FLOAT, T_SIZE, T_SEED, T_ENGINE, T_PREFETCH, T_PRELOAD, T_PRECISION, T_KVTYPE } vtype;

typedef struct {
    const char *section, *key, *alias;
    vtype type;
    unsigned bit;
    size_t off, cap;   /* offset into df_config; cap for strings */
    double lo, hi;     /* numeric range (inclusive) */
} keydef;

#define S(f) offsetof(df_config, f), sizeof(((df_config *)0)->f)
#define N(f) offsetof(df_config, f), 0
static const keydef g_keys[] = {
    {"model", "path", NULL, T_STR, DF_CFG_MODEL_PATH, S(model_path), 0, 0},
    {"model", "name", NULL, T_STR, DF_CFG_MODEL_NAME, S(model_name), 0, 0},
    {"inference", "precision", NULL, T_PRECISION, DF_CFG_PRECISION, S(precision), 0, 0},
    {"inference", "batch_size", NULL, T_INT, DF_CFG_BATCH_SIZE, N(batch_size), 1, 1 << 20},
    {"inference", "max_seq_len", "context", T_INT, DF_CFG_MAX_SEQ_LEN, N(max_seq_len), 1, 1 << 24},
    {"inference", "cache_type_k", NULL, T_KVTYPE, DF_CFG_CACHE_TYPE_K, N(cache_type_k), 0, 0},
    {"inference", "cache_type_v", NULL, T_KVTYPE, DF_CFG_CACHE_TYPE_V, N(cache_type_v), 0, 0},
    {"sampling", "temperature", "temp", T_FLOAT, DF_CFG_TEMP, N(temperature), 0, 100},
    {"sampling", "top_k", NULL, T_INT, DF_CFG_TOP_K, N(top_k), 0, 1 << 30},
    {"sampling", "top_p", NULL, T_FLOAT, DF_CFG_TOP_P, N(top_p), 0, 1},
    {"sampling", "min_p", NULL, T_FLOAT, DF_CFG_MIN_P, N(min_p), 0, 1},
    {"sampling", "seed", NULL, T_SEED, DF_CFG_SEED, N(seed), 0, 0},
    {"sampling", "repeat_penalty", NULL, T_FLOAT, DF_CFG_REPEAT_PENALTY, N(repeat_penalty), 0.01, 100},
    {"hardware", "threads", NULL, T_INT, DF_CFG_THREADS, N(threads), 0, 4096},
    {"hardware", "memory_limit", NULL, T_SIZE, DF_CFG_MEM_LIMIT, N(memory_limit), 0, 0},
    {"hardware", "memory_reserve", NULL, T_SIZE, DF_CFG_MEM_RESERVE, N(memory_reserve), 0, 0},
    {"hardware", "io_engine", "io", T_ENGINE, DF_CFG_IO_ENGINE, S(io_engine), 0, 0},
    {"cache", "size", "cache_size", T_SIZE, DF_CFG_CACHE_SIZE, N(cache_size), 0, 0},
    {"cache", "preload_experts", NULL, T_PRELOAD, DF_CFG_PRELOAD, S(preload_experts), 0, 0},
    {"cache", "hot_set", NULL, T_STR, DF_CFG_HOT_SET, S(hot_set), 0, 0},
    {"cache", "prefetch", NULL, T_PREFETCH, DF_CFG_PREFETCH, N(prefetch), 0, 0},
};
#undef S
#undef N

static const char *g_sections[] = {"model", "inference", "hardware", "cache"};

void df_config_init(df_config *c) {
    memset(c, 0, sizeof *c);
    c->prefetch = DELTAFIN_PREFETCH_AUTO;
    snprintf(c->precision, sizeof c->precision, "auto");
    snprintf(c->io_engine, sizeof c->io_engine, "auto");
}

typedef struct {
    yaml_parser_t p;
    yaml_event_t ev;
    bool have;
    const char *name;
    df_config *c;
} rd;

static int line_of(const yaml_event_t *e) { return (int)e->start_mark.line + 1; }

/* "L:E" with non-negative decimal integers (what --preload takes; checked here too, so a
 * wrong list is refused even when the experts turn out resident and the list goes unused) */
static bool preload_item_ok(const char *v, size_t n) {
    size_t i = 0, a = 0, b = 0;
    while (i < n && v[i] == ' ') i++;
    while (i < n && v[i] >= '0' && v[i] <= '9') { i++; a++; }
    if (!a || i >= n || v[i++] != ':') return false;
    while (i < n && v[i] >= '0' && v[i] <= '9') { i++; b++; }
    while (i < n && v[i] == ' ') i++;
    return b && i == n && a <= 9 && b <= 9;
}

static bool preload_list_ok(const char *v) {
    for (const char *p = v;;) {
        size_t n = strcspn(p, ",");
        if (!preload_item_ok(p, n)) return false;
        if (!p[n]) return true;
        p += n + 1;
    }
}

static int next(rd *r) {
    if (r->have) { yaml_event_delete(&r->ev); r->have = false; }
    if (!yaml_parser_parse(&r->p, &r->ev))
        return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: YAML syntax error: %s", r->name,
                      (int)r->p.problem_mark.line + 1, r->p.problem ? r->p.problem : "?");
    r->have = true;
    if (r->ev.type == YAML_ALIAS_EVENT)
        return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: YAML aliases are not supported", r->name, line_of(&r->ev));
    return DELTAFIN_OK;
}

static const char *ev_kind(const yaml_event_t *e) {
    switch (e->type) {
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_SEQUENCE_START_EVENT: return "a list";
    case YAML_SCALAR_EVENT: return "a scalar";
    default: return "something else";
    }
}

static bool plain(const yaml_event_t *e) { return e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

static int set_value(rd *r, const keydef *k, const char *sec) {
    df_config *c = r->c;
    char *base = (char *)c;
    const int ln = line_of(&r->ev);
    const char *kind = ev_kind(&r->ev);
    if (k->type == T_PRELOAD && r->ev.type == YAML_SEQUENCE_START_EVENT) {
        char *dst = base + k->off;
        dst[0] = 0;
        size_t used = 0;
        for (;;) {
            int rc = next(r);
            if (rc) return rc;
            if (r->ev.type == YAML_SEQUENCE_END_EVENT) break;
            if (r->ev.type != YAML_SCALAR_EVENT)
                return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: list items must be \"layer:expert\" strings, got %s",
                              r->name, line_of(&r->ev), sec, k->key, ev_kind(&r->ev));
            const char *v = (const char *)r->ev.data.scalar.value;
            size_t n = strlen(v);
            if (!preload_item_ok(v, n))
                return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected \"layer:expert\" items, got '%s'",
                                          r->name, line_of(&r->ev), sec, k->key, v);
            if (used + n + 2 > k->cap)
                return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: list too long", r->name, line_of(&r->ev), sec, k->key);
            if (used) dst[used++] = ',';
            memcpy(dst + used, v, n + 1);
            used += n;
        }
        if (used) c->set |= k->bit; /* [] = none */
        return DELTAFIN_OK;
    }
    if (r->ev.type != YAML_SCALAR_EVENT)
        return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected a value, got %s", r->name, ln, sec, k->key, kind);
    const char *v = (const char *)r->ev.data.scalar.value;
    char *end = NULL;
    switch (k->type) {
    case T_STR: case T_PRELOAD: {
        if (strlen(v) >= k->cap)
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: value too long", r->name, ln, sec, k->key);
        if (!*v || (plain(&r->ev) && (!strcmp(v, "~") || !strcmp(v, "null"))))
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: empty value", r->name, ln, sec, k->key);
        if (k->type == T_PRELOAD && !preload_list_ok(v))
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected \"layer:expert,...\", got '%s'", r->name,
                                      ln, sec, k->key, v);
        snprintf(base + k->off, k->cap, "%s", v);
        break;
    }
    case T_PRECISION:
        if (strcmp(v, "auto"))
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: '%s' is not supported (only 'auto': compute in the "
                          "model's own tensor types)", r->name, ln, sec, k->key, v);
        snprintf(base + k->off, k->cap, "%s", v);
        break;
    case T_INT: {
        errno = 0;
        long x = plain(&r->ev) ? strtol(v, &end, 10) : 0;
        if (!plain(&r->ev) || !*v || *end || errno)
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected an integer, got '%s'", r->name, ln, sec, k->key, v);
        if (x < k->lo || x > k->hi)
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: %ld is out of range [%.0f, %.0f]", r->name, ln, sec,
                          k->key, x, k->lo, k->hi);
        *(int *)(base + k->off) = (int)x;
        break;
    }
    case T_FLOAT: {
        errno = 0;
        double x = plain(&r->ev) ? strtod(v, &end) : 0;
        if (!plain(&r->ev) || !*v || *end || errno || !isfinite(x))
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected a number, got '%s'", r->name, ln, sec, k->key, v);
        if (x < k->lo || x > k->hi)
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: %g is out of range [%g, %g]", r->name, ln, sec, k->key,
                          x, k->lo, k->hi);
        *(float *)(base + k->off) = (float)x;
        break;
    }
    case T_SEED: {
        uint64_t s;
        if (!strcmp(v, "random") || !strcmp(v, "-1")) s = UINT64_MAX;
        else {
            errno = 0;
            unsigned long long x = strtoull(v, &end, 10);
            if (!*v || *v == '-' || *end || errno)
                return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected a non-negative integer or 'random', got '%s'",
                              r->name, ln, sec, k->key, v);
            s = x;
        }
        *(uint64_t *)(base + k->off) = s;
        break;
    }
    case T_SIZE: {
        uint64_t x;
        if (deltafin_parse_size(v, &x) != DELTAFIN_OK) {
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected a size such as 16G, 512M or 4096, got '%s'",
                          r->name, ln, sec, k->key, v);
        }
        *(uint64_t *)(base + k->off) = x;
        break;
    }
    case T_ENGINE: {
        /* the name only: an engine this build lacks is the loader's to report */
        if (deltafin_io_engine_check(v) == DELTAFIN_ERR_INVALID) {
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: unknown I/O engine '%s' (auto, pread, direct, uring, mmap)",
                          r->name, ln, sec, k->key, v);
        }
        snprintf(base + k->off, k->cap, "%s", v);
        break;
    }
    case T_PREFETCH: {
        int m;
        if (!strcmp(v, "true") || !strcmp(v, "yes")) m = DELTAFIN_PREFETCH_ON;
        else if (!strcmp(v, "false") || !strcmp(v, "no")) m = DELTAFIN_PREFETCH_OFF;
        else if (deltafin_prefetch_parse(v, &m) != DELTAFIN_OK) {
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected auto, on or off, got '%s'", r->name, ln, sec,
                          k->key, v);
        }
        *(int *)(base + k->off) = m;
        break;
    }
    case T_KVTYPE: {
        int t;
        if (deltafin_kv_type_parse(v, &t) != DELTAFIN_OK) {
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: %s.%s: expected f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, "
                          "q5_1 or iq4_nl, got '%s'", r->name, ln, sec, k->key, v);
        }
        *(int *)(base + k->off) = t;
        break;
    }
    }
    c->set |= k->bit;
    return DELTAFIN_OK;
}

/* Reads the mapping of `sec` (the MAPPING_START event is current). */
static int read_section(rd *r, const char *sec) {
    for (;;) {
        int rc = next(r);
        if (rc) return rc;
        if (r->ev.type == YAML_MAPPING_END_EVENT) return DELTAFIN_OK;
        if (r->ev.type != YAML_SCALAR_EVENT)
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: section '%s': expected a key, got %s", r->name, line_of(&r->ev),
                          sec, ev_kind(&r->ev));
        char key[128];
        snprintf(key, sizeof key, "%s", (const char *)r->ev.data.scalar.value);
        const int kline = line_of(&r->ev);
        if (!strcmp(sec, "inference") && !strcmp(key, "sampling")) {
            rc = next(r);
            if (rc) return rc;
            if (r->ev.type != YAML_MAPPING_START_EVENT)
                return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: inference.sampling: expected a mapping, got %s", r->name,
                              line_of(&r->ev), ev_kind(&r->ev));
            rc = read_section(r, "sampling");
            if (rc) return rc;
            continue;
        }
        const keydef *k = NULL;
        for (size_t i = 0; i < sizeof g_keys / sizeof g_keys[0]; i++)
            if (!strcmp(g_keys[i].section, sec) &&
                (!strcmp(g_keys[i].key, key) || (g_keys[i].alias && !strcmp(g_keys[i].alias, key))))
                k = &g_keys[i];
        const char *shown = strcmp(sec, "sampling") ? sec : "inference.sampling";
        if (!k) return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: unknown key '%s' in section '%s'", r->name, kline, key, shown);
        if (r->c->set & k->bit)
            return deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: duplicate key '%s' in section '%s'", r->name, kline, key, shown);
        rc = next(r);
        if (rc) return rc;
        rc = set_value(r, k, shown);
        if (rc) return rc;
    }
}

int df_config_parse(const char *text, size_t len, const char *name, df_config *c) {
    rd r = {.name = name ? name : "config", .c = c};
    if (!yaml_parser_initialize(&r.p)) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "yaml parser init");
    yaml_parser_set_input_string(&r.p, (const unsigned char *)text, len);
    int rc;
    unsigned seen = 0;
    if ((rc = next(&r))) goto out;           /* STREAM_START */
    if ((rc = next(&r))) goto out;
    if (r.ev.type == YAML_STREAM_END_EVENT) goto out; /* empty file: nothing set */
    if ((rc = next(&r))) goto out;           /* after DOCUMENT_START */
    if (r.ev.type == YAML_SCALAR_EVENT && plain(&r.ev) && !r.ev.data.scalar.length) goto out; /* only comments */
    if (r.ev.type != YAML_MAPPING_START_EVENT) {
        rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: expected a mapping of sections (model, inference, hardware, cache), got %s",
                    r.name, line_of(&r.ev), ev_kind(&r.ev));
        goto out;
    }
    for (;;) {
        if ((rc = next(&r))) goto out;
        if (r.ev.type == YAML_MAPPING_END_EVENT) break;
        if (r.ev.type != YAML_SCALAR_EVENT) {
            rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: expected a section name, got %s", r.name, line_of(&r.ev), ev_kind(&r.ev));
            goto out;
        }
        char sec[64];
        snprintf(sec, sizeof sec, "%s", (const char *)r.ev.data.scalar.value);
        int si = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(g_sections[i], sec)) si = i;
        if (si < 0) {
            rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: unknown section '%s' (expected model, inference, hardware or cache)",
                        r.name, line_of(&r.ev), sec);
            goto out;
        }
        if (seen & (1u << si)) {
            rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: duplicate section '%s'", r.name, line_of(&r.ev), sec);
            goto out;
        }
        seen |= 1u << si;
        if ((rc = next(&r))) goto out;
        if (r.ev.type == YAML_SCALAR_EVENT && plain(&r.ev) && !r.ev.data.scalar.length) continue; /* "cache:" */
        if (r.ev.type != YAML_MAPPING_START_EVENT) {
            rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: section '%s': expected a mapping, got %s", r.name, line_of(&r.ev), sec,
                        ev_kind(&r.ev));
            goto out;
        }
        if ((rc = read_section(&r, sec))) goto out;
    }
    if ((rc = next(&r))) goto out;           /* DOCUMENT_END */
    if ((rc = next(&r))) goto out;
    if (r.ev.type != YAML_STREAM_END_EVENT)
        rc = deltafin_set_error(DELTAFIN_ERR_FORMAT, "%s:%d: only one YAML document is allowed", r.name, line_of(&r.ev));
out:
    if (r.have) yaml_event_delete(&r.ev);
    yaml_parser_delete(&r.p);
    return rc;
}

int df_config_load(const char *path, df_config *c) {
    char *data = NULL;
    size_t len = 0;
    int rc = deltafin_read_file(path, &data, &len);
    if (rc) return deltafin_set_error(rc, "config: %s", deltafin_errmsg());
    rc = df_config_parse(data, len, path, c);
    free(data);
    return rc;
}

const char *df_config_find_arg(int argc, char **argv) {
    const char *found = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) found = argv[++i];
        else if (!strncmp(argv[i], "--config=", 9)) found = argv[i] + 9;
    }
    return found;
}
