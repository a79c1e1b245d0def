/* gen_random_args.c — the option loop every random-model generator uses (gen_random.h): a
 * table of options with their kinds and destinations, one positional output path, and a hook
 * for the options a generator treats itself (--arch, --preset, --layers ...). */
#include "dev/gen_random.h"
#include "format/ggml_types.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct { const char *name; int type; } g_types[] = {
    {"f32", DF_TYPE_F32}, {"f16", DF_TYPE_F16}, {"q8_0", DF_TYPE_Q8_0}, {"q4_k", DF_TYPE_Q4_K}, {"mxfp4", DF_TYPE_MXFP4},
};

int gr_parse_type(const char *v, unsigned mask) {
    for (size_t i = 0; i < sizeof g_types / sizeof g_types[0]; i++)
        if ((mask & (1u << i)) && !strcasecmp(v, g_types[i].name)) return g_types[i].type;
    return -1;
}

/* "f32, f16 or q8_0" */
static void type_list(unsigned mask, char *out, size_t cap) {
    size_t n = 0, k = 0, total = 0;
    for (size_t i = 0; i < sizeof g_types / sizeof g_types[0]; i++) total += (mask >> i) & 1;
    out[0] = 0;
    for (size_t i = 0; i < sizeof g_types / sizeof g_types[0] && n < cap; i++) {
        if (!(mask & (1u << i))) continue;
        k++;
        n += (size_t)snprintf(out + n, cap - n, "%s%s", k == 1 ? "" : k == total ? " or " : ", ", g_types[i].name);
    }
}

static const gr_opt *find(const gr_args *c, const char *name) {
    for (size_t i = 0; i < c->n_opts; i++)
        if (!strcmp(c->opts[i].name, name)) return &c->opts[i];
    return NULL;
}

/* one option's value into its destination; false (message printed) when it is not valid */
static bool set_value(const gr_args *c, const gr_opt *o, const char *v) {
    char *e;
    switch (o->kind) {
    case GR_I64:
    case GR_I64_POS: {
        int64_t *d = o->dst;
        if (!gr_parse_i64(v, o->max ? o->max : 1 << 24, d) || (o->kind == GR_I64_POS && *d == 0)) {
            fprintf(stderr, "gen-random: %s: bad value '%s'\n", o->name, v);
            return false;
        }
        return true;
    }
    case GR_F32:
    case GR_F32_ANY: {
        float f = strtof(v, &e);
        if (e == v || *e || !isfinite(f) || (o->kind == GR_F32 && f < 0)) {
            fprintf(stderr, "gen-random: bad %s '%s'\n", o->name, v);
            return false;
        }
        *(float *)o->dst = f;
        return true;
    }
    case GR_SEED: {
        errno = 0;
        unsigned long long s = strtoull(v, &e, 0);
        if (errno || e == v || *e || v[0] == '-') { fprintf(stderr, "gen-random: bad %s '%s'\n", o->name, v); return false; }
        *(uint64_t *)o->dst = s;
        return true;
    }
    case GR_STR: *(const char **)o->dst = v; return true;
    case GR_TYPE: {
        int t = gr_parse_type(v, c->type_mask);
        if (t < 0) {
            char list[64];
            type_list(c->type_mask, list, sizeof list);
            fprintf(stderr, "gen-random: %s must be %s\n", o->name, list);
            return false;
        }
        *(int *)o->dst = t;
        return true;
    }
    default: return false;
    }
}

int gr_parse_args(const gr_args *c, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { c->usage(stdout); return 0; }
        if (a[0] != '-' || !a[1]) {
            if (*c->out) { fprintf(stderr, "gen-random: more than one output path\n"); return 2; }
            *c->out = a;
            continue;
        }
        const gr_opt *o = find(c, a);
        if (o && o->kind == GR_FLAG) { *(bool *)o->dst = o->max != 0; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "gen-random: %s needs a value\n", a); return 2; }
        const char *v = argv[++i];
        if (o) {
            if (!set_value(c, o, v)) return 2;
            continue;
        }
        int rc = c->other ? c->other(c->ud, a, v) : -1;
        if (rc > 0) return rc;
        if (rc < 0) {
            fprintf(stderr, "gen-random: unknown option %s for %s\n", a, c->arch);
            c->usage(stderr);
            return 2;
        }
    }
    return 1;
}
