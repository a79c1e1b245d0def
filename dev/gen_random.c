/* gen_random.c — `deltafin-dev gen-random`: write a random model with the exact tensor names,
 * shapes and keys llama.cpp expects for an architecture (formats.md §3), for tests against
 * llama.cpp and for benchmarks at real widths.
 *
 * Determinism: the file is a pure function of the options. Each tensor has its own RNG stream
 * (splitmix64 seeded from --seed and the tensor name), values are k·2^-23·scale + offset with
 * one IEEE rounding per operation and a correctly rounded sqrtf — no other libm — so the same
 * command writes the same bytes on every machine (tests regenerate the models and compare
 * with outputs recorded from llama.cpp).
 * Logit scale: --out-scale sets the gain of output.weight (logit standard deviation about
 * out-scale). Scaling the output does not make greedy choices more robust (logit errors scale
 * with it); scripts/make_expected.sh instead picks seeds whose greedy runs stay far from ties.
 * Memory: tensors are generated and written in chunks of rows, so models larger than RAM
 * (real expert widths) can be written. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/gen_random.h"
#include "dev/llama2c.h"

enum { A_LLAMA, A_LLAMA_MOE, A_QWEN2MOE, A_QWEN3MOE, A_OLMOE };
static const char *const g_arch_opt[] = {"llama", "llama-moe", "qwen2moe", "qwen3moe", "olmoe"};
static const char *const g_arch_gguf[] = {"llama", "llama", "qwen2moe", "qwen3moe", "olmoe"};

typedef struct {
    int arch, type, exp_type;        /* exp_type: routed experts (-1: type) */
    bool sparse;                     /* header only, the data a hole */
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_expert, n_expert_used;
    int64_t n_ff_exp, n_ff_shexp, n_ctx;
    float out_scale, router_scale, router_skew, eps;
    uint64_t seed;
    const char *vocab, *name, *out;
} gr_opts;

/* Real widths (formats.md §3) with few layers, for benchmarks. -1 = arch default. */
typedef struct {
    const char *name;
    int arch;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_expert, n_expert_used;
    int64_t n_ff_exp, n_ff_shexp;
} gr_preset;
static const gr_preset g_presets[] = {
    {"qwen3-30b-a3b", A_QWEN3MOE, 2048, 4, 32, 4, 128, 6144, 128, 8, 768, -1},
    {"qwen3-235b-a22b", A_QWEN3MOE, 4096, 2, 64, 4, 128, 12288, 128, 8, 1536, -1},
    {"mixtral-8x7b", A_LLAMA_MOE, 4096, 2, 32, 8, 128, 14336, 8, 2, -1, -1},
    {"olmoe-1b-7b", A_OLMOE, 2048, 4, 16, 16, 128, 1024, 64, 8, -1, -1},
    {"qwen1.5-moe-a2.7b", A_QWEN2MOE, 2048, 4, 16, 16, 128, 5632, 60, 4, 1408, 5632},
};

static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin-dev gen-random (--arch ARCH | --preset P) [options] OUT.gguf\n\n"
        "Write a model with random weights and the exact tensor names, shapes and keys llama.cpp\n"
        "expects. Deterministic: the same options give the same bytes on every machine.\n\n"
        "  --arch A            llama | llama-moe (Mixtral-style) | qwen2moe | qwen3moe | olmoe |\n"
        "                      deepseek2 (own options: --arch deepseek2 --help)\n"
        "                      deepseek32 (DeepSeek-V3.2 DSA), glm-dsa (GLM-5, --preset glm-5;\n"
        "                      --arch deepseek32 --help)\n"
        "                      deepseek4 (DeepSeek-V4; --arch deepseek4 --help)\n"
        "                      kimi-k3 (own options: --arch kimi-k3 --help)\n"
        "                      gpt-oss (own options: --arch gpt-oss --help)\n"
        "                      qwen3next, qwen35moe (own options: --arch qwen3next --help)\n"
        "                      glm4moe, minimax-m2 (own options: --arch glm4moe --help)\n"
        "  --preset P          real widths, few layers (options given explicitly win):\n"
        "                      qwen3-30b-a3b (4 layers), qwen3-235b-a22b (2), mixtral-8x7b (2),\n"
        "                      olmoe-1b-7b (4), qwen1.5-moe-a2.7b (4)\n"
        "  --type T            f32 | f16 | q8_0 for the matrices (default f32); norms, biases and\n"
        "                      routers stay F32\n"
        "  --expert-type T     f32 | f16 | q8_0 | q4_k for the routed experts (default: --type)\n"
        "  --sparse            header only, the data section a hole (all-zero weights, no disk\n"
        "                      use): memory plans and runs at real widths\n"
        "  --n-embd N          (default 64)\n"
        "  --n-layer N         (default 2)\n"
        "  --n-head N          (default 4)\n"
        "  --n-head-kv N       (default 2; olmoe: = n-head)\n"
        "  --head-dim N        (default n-embd/n-head; qwen3moe default 32)\n"
        "  --n-ff N            dense FFN width; llama-moe/olmoe: expert width (default 128,\n"
        "                      llama-moe/olmoe 64)\n"
        "  --n-expert N        (default 8; llama-moe 4)\n"
        "  --n-expert-used N   (default 2)\n"
        "  --n-ff-exp N        qwen2moe/qwen3moe expert width (default 32)\n"
        "  --n-ff-shexp N      qwen2moe shared-expert width (default 64)\n"
        "  --ctx N             context_length key (default 4096)\n"
        "  --vocab PATH        tokenizer: a GGUF (its tokenizer.* keys are copied), a llama2.c\n"
        "                      tokenizer.bin, or 'bytes' (built-in 3 specials + 256 byte tokens +\n"
        "                      ASCII; 'bytes:N' pads it to N tokens, a real model's vocabulary\n"
        "                      size). Default: $DELTAFIN_FIXTURES/models/tok512.bin, else\n"
        "                      ../shared/fixtures/models/tok512.bin, else 'bytes'\n"
        "  --seed S            (default 1)\n"
        "  --out-scale F       gain of output.weight (default 4)\n"
        "  --router-scale F    gain of the expert routers (default 3)\n"
        "  --router-skew S     Zipf-like expert popularity: router logits get about -S ln(1+rank)\n"
        "                      of a random per-layer rank (default 0: uniform; for cache tests)\n"
        "  --name NAME         general.name (default deltafin-random-ARCH)\n"
        "  -h, --help          this help\n\n"
        "Example (Qwen3-30B-A3B widths, 8 layers, ~5 GB):\n"
        "  deltafin-dev gen-random --preset qwen3-30b-a3b --n-layer 8 --type q8_0 q3.gguf\n");
}

/* ---- vocabulary --------------------------------------------------------------------------- */
static int bytes_vocab(l2c_vocab *v, int n_pad) {
    /* <unk> <s> </s>, <0x00>..<0xFF>, "▁", then printable ASCII '!'..'~', then (n_pad > 354)
     * unused tokens "<pad_K>" up to n_pad: a real model's vocabulary size for the byte sizes of
     * token_embd / output ("bytes:N") */
    int n = 3 + 256 + 1 + 94;
    if (n_pad > n) n = n_pad;
    memset(v, 0, sizeof *v);
    v->n = n;
    v->text = df_calloc((size_t)n, sizeof *v->text);
    v->score = df_calloc((size_t)n, sizeof *v->score);
    v->type = df_calloc((size_t)n, sizeof *v->type);
    if (!v->text || !v->score || !v->type) { l2c_vocab_free(v); return DF_ERR_NOMEM; }
    char buf[32];
    for (int i = 0; i < n; i++) {
        if (i < 3) { snprintf(buf, sizeof buf, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>"); v->type[i] = i ? 3 : 2; }
        else if (i < 259) { snprintf(buf, sizeof buf, "<0x%02X>", i - 3); v->type[i] = 6; }
        else if (i == 259) { snprintf(buf, sizeof buf, "\xe2\x96\x81"); v->type[i] = 1; }
        else if (i < 354) { buf[0] = (char)('!' + (i - 260)); buf[1] = 0; v->type[i] = 1; }
        else { snprintf(buf, sizeof buf, "<pad_%d>", i); v->type[i] = 5; }
        v->text[i] = df_strdup(buf);
        if (!v->text[i]) { l2c_vocab_free(v); return DF_ERR_NOMEM; }
    }
    return DF_OK;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int tokenizer_kvs(df_gguf_writer *w, const char *spec, int64_t *n_vocab) {
    int rc;
    if (ends_with(spec, ".gguf")) {
        df_gguf *g = NULL;
        if ((rc = df_gguf_open(spec, &g))) return rc;
        const df_gguf_kv *tk = df_gguf_find(g, "tokenizer.ggml.tokens");
        if (!tk || tk->type != DF_GGUF_ARRAY || tk->arr_type != DF_GGUF_STRING || tk->arr_n < 3) {
            df_gguf_close(g);
            return df_err(DF_ERR_FORMAT, "%s: no usable tokenizer.ggml.tokens array", spec);
        }
        *n_vocab = (int64_t)tk->arr_n;
        for (int i = 0; i < g->n_kv && !rc; i++)
            if (!strncmp(g->kv[i].key, "tokenizer.", 10)) rc = df_gguf_w_copy_kv(w, &g->kv[i]);
        df_gguf_close(g);
        return rc;
    }
    l2c_vocab v;
    char *end = NULL;
    long n_pad = !strncmp(spec, "bytes:", 6) ? strtol(spec + 6, &end, 10) : 0;
    if (end && (*end || n_pad < 354 || n_pad > (1 << 22)))
        return df_err(DF_ERR_INVALID, "--vocab bytes:N needs 354 <= N <= 4194304 (got '%s')", spec);
    rc = !strcmp(spec, "bytes") || end ? bytes_vocab(&v, (int)n_pad) : l2c_vocab_load(spec, 0, &v);
    if (rc) return rc;
    *n_vocab = v.n;
    rc = l2c_vocab_write_kv(w, &v);
    l2c_vocab_free(&v);
    return rc;
}

int gr_write_vocab(df_gguf_writer *w, const char *arch, const char *spec, int64_t *n_vocab) {
    int rc = tokenizer_kvs(w, spec, n_vocab);
    if (rc) return rc;
    char key[128];
    snprintf(key, sizeof key, "%s.vocab_size", arch);
    return df_gguf_w_u32(w, key, (uint32_t)*n_vocab);
}

/* The optional tensors these files have: the output head, and Qwen2-MoE's q/k/v biases. */
static bool gen_want(void *ud, const df_tensor_spec *s, int il) {
    const gr_opts *o = ud;
    (void)il;
    if (s->field == DF_MF(output)) return true;
    if (s->field == DF_LF(bq) || s->field == DF_LF(bk) || s->field == DF_LF(bv)) return o->arch == A_QWEN2MOE;
    return false;
}

/* KVs, then the tensors from the schema (gen_random_schema.c). */
static int gen_write(gr_opts o) {
    char vbuf[4096];
    gr_default_vocab(&o.vocab, vbuf, sizeof vbuf);

    int rc = DF_OK;
    df_gguf_writer *w = df_gguf_writer_new(GR_ALIGN);
    if (!w) { rc = DF_ERR_NOMEM; goto done; }
    const char *A = g_arch_gguf[o.arch];
    char key[128], nm[128];
#define KU32(suffix, val) (snprintf(key, sizeof key, "%s." suffix, A), df_gguf_w_u32(w, key, (uint32_t)(val)))
#define KF32(suffix, val) (snprintf(key, sizeof key, "%s." suffix, A), df_gguf_w_f32(w, key, (val)))
    snprintf(nm, sizeof nm, "deltafin-random-%s", g_arch_opt[o.arch]);
    int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : 7;
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) ||
        (rc = df_gguf_w_str(w, "general.name", o.name ? o.name : nm)) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type == DF_TYPE_Q8_0 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))))
        goto done;
    int64_t n_ff_key = o.arch == A_QWEN2MOE ? o.n_ff_shexp : o.n_ff;
    if ((rc = KU32("context_length", o.n_ctx)) || (rc = KU32("embedding_length", o.n_embd)) ||
        (rc = KU32("block_count", o.n_layer)) || (rc = KU32("feed_forward_length", n_ff_key)) ||
        (rc = KU32("attention.head_count", o.n_head)) ||
        (rc = KU32("attention.head_count_kv", o.n_head_kv)) ||
        (rc = KU32("attention.key_length", o.head_dim)) ||
        (rc = KU32("attention.value_length", o.head_dim)) ||
        (rc = KU32("rope.dimension_count", o.head_dim)) ||
        (rc = KF32("rope.freq_base", 10000.0f)) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", o.eps)))
        goto done;
    if (o.arch != A_LLAMA) {
        if ((rc = KU32("expert_count", o.n_expert)) || (rc = KU32("expert_used_count", o.n_expert_used)))
            goto done;
        if ((o.arch == A_QWEN2MOE || o.arch == A_QWEN3MOE) && (rc = KU32("expert_feed_forward_length", o.n_ff_exp)))
            goto done;
        if (o.arch == A_QWEN2MOE && (rc = KU32("expert_shared_feed_forward_length", o.n_ff_shexp)))
            goto done;
    }
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, A, o.vocab, &n_vocab))) goto done;
#undef KU32
#undef KF32
    gr_model g = {.arch = A, .type = o.type, .exp_type = o.exp_type >= 0 ? o.exp_type : o.type,
                  .out_scale = o.out_scale, .router_scale = o.router_scale, .router_skew = o.router_skew,
                  .mat_scale = 1.0f, .res_scale = 1.0f, .seed = o.seed, .sparse = o.sparse, .pad_end = !o.sparse,
                  .want = gen_want, .ud = &o, .out = o.out};
    df_hparams *hp = &g.hp;
    hp->n_vocab = (int)n_vocab;
    hp->n_embd = (int)o.n_embd;
    hp->n_layer = (int)o.n_layer;
    hp->n_head = (int)o.n_head;
    hp->n_head_kv = (int)o.n_head_kv;
    hp->n_embd_head_k = hp->n_embd_head_v = hp->n_rot = (int)o.head_dim;
    hp->n_ff = (int)o.n_ff;
    hp->n_expert = o.arch == A_LLAMA ? 0 : (int)o.n_expert;
    hp->n_ff_exp = (int)((o.arch == A_QWEN2MOE || o.arch == A_QWEN3MOE) ? o.n_ff_exp : o.n_ff);
    hp->n_ff_shexp = (int)o.n_ff_shexp;
    gr_stats st;
    if ((rc = gr_write_model(w, &g, &st))) goto done;
    fprintf(stderr, "gen-random: wrote %s (%s %s, %lld layers, n_embd %lld, %.3f M params, vocab %lld from %s)\n",
            o.out, g_arch_opt[o.arch], o.type == DF_TYPE_F32 ? "F32" : o.type == DF_TYPE_F16 ? "F16" : "Q8_0",
            (long long)o.n_layer, (long long)o.n_embd, (double)st.n_params / 1e6, (long long)n_vocab, o.vocab);
done:
    df_gguf_writer_free(w);
    if (rc) { fprintf(stderr, "gen-random: %s\n", df_errmsg()); return 1; }
    return 0;
}

/* The generators with their own options, chosen by --arch (or a preset of theirs) anywhere on
 * the command line, in this order; the rest is this file's. */
static const struct {
    const char *arch[3], *preset[2];
    int (*run)(int argc, char **argv);
} g_generators[] = {
    {{"deepseek2", "deepseek32", "glm-dsa"}, {"glm-5"}, df_gen_random_deepseek2},
    {{"kimi-k3"}, {NULL}, df_gen_random_kimi_k3},
    {{"deepseek4"}, {NULL}, df_gen_random_deepseek4},
    {{"gpt-oss"}, {NULL}, df_gen_random_gpt_oss},
    {{"qwen3next", "qwen35moe"}, {NULL}, df_gen_random_qwen3next},
    {{"glm4moe", "minimax-m2"}, {"glm-4.6", "minimax-m2"}, df_gen_random_gqa_moe},
};

static bool names_one_of(const char *v, const char *const *names, size_t n) {
    for (size_t k = 0; k < n && names[k]; k++)
        if (!strcmp(v, names[k])) return true;
    return false;
}

/* --arch and --preset (applied after all options: options given explicitly win) */
typedef struct { gr_opts *o; const gr_preset **preset; } gen_cli;
static int gen_other(void *ud, const char *a, const char *v) {
    gen_cli *c = ud;
    if (!strcmp(a, "--preset")) {
        for (size_t k = 0; k < sizeof g_presets / sizeof g_presets[0]; k++)
            if (!strcmp(v, g_presets[k].name)) *c->preset = &g_presets[k];
        if (!*c->preset) { fprintf(stderr, "gen-random: unknown --preset '%s' (see --help)\n", v); return 2; }
    } else if (!strcmp(a, "--arch")) {
        for (int k = 0; k < 5; k++) if (!strcmp(v, g_arch_opt[k])) c->o->arch = k;
        if (c->o->arch < 0) { fprintf(stderr, "gen-random: unknown --arch '%s'\n", v); return 2; }
    } else {
        return -1;
    }
    return 0;
}

/* llama, llama-moe, qwen2moe, qwen3moe, olmoe */
static int gen_llama_family(int argc, char **argv) {
    gr_opts o = {.arch = -1, .type = DF_TYPE_F32, .exp_type = -1, .n_embd = -1, .n_layer = -1, .n_head = -1,
                 .n_head_kv = -1, .head_dim = -1, .n_ff = -1, .n_expert = -1, .n_expert_used = -1,
                 .n_ff_exp = -1, .n_ff_shexp = -1, .n_ctx = -1, .out_scale = 4.0f,
                 .router_scale = 3.0f, .seed = 1};
    const gr_preset *preset = NULL;
    const gr_opt opts[] = {
        {"--sparse", GR_FLAG, &o.sparse, 1},
        {"--n-embd", GR_I64_POS, &o.n_embd, 0}, {"--n-layer", GR_I64_POS, &o.n_layer, 0},
        {"--n-head", GR_I64_POS, &o.n_head, 0}, {"--n-head-kv", GR_I64_POS, &o.n_head_kv, 0},
        {"--head-dim", GR_I64_POS, &o.head_dim, 0}, {"--n-ff", GR_I64_POS, &o.n_ff, 0},
        {"--n-expert", GR_I64_POS, &o.n_expert, 0}, {"--n-expert-used", GR_I64_POS, &o.n_expert_used, 0},
        {"--n-ff-exp", GR_I64_POS, &o.n_ff_exp, 0}, {"--n-ff-shexp", GR_I64_POS, &o.n_ff_shexp, 0},
        {"--ctx", GR_I64_POS, &o.n_ctx, 0},
        {"--type", GR_TYPE, &o.type, GR_T_F32 | GR_T_F16 | GR_T_Q8_0},
        {"--expert-type", GR_TYPE, &o.exp_type, GR_T_F32 | GR_T_F16 | GR_T_Q8_0 | GR_T_Q4_K},
        {"--vocab", GR_STR, &o.vocab, 0}, {"--name", GR_STR, &o.name, 0}, {"--seed", GR_SEED, &o.seed, 0},
        {"--router-skew", GR_F32, &o.router_skew, 16},
        {"--out-scale", GR_F32_POS, &o.out_scale, 0}, {"--router-scale", GR_F32_POS, &o.router_scale, 0},
    };
    gen_cli cli = {&o, &preset};
    const gr_args ga = {NULL, opts, sizeof opts / sizeof opts[0], 0, usage, gen_other, &cli, &o.out};
    int prc = gr_parse_args(&ga, argc, argv);
    if (prc != 1) return prc;
    /* explicit options > preset > arch defaults */
    if (preset) {
        if (o.arch >= 0 && o.arch != preset->arch) {
            fprintf(stderr, "gen-random: --preset %s is arch %s\n", preset->name, g_arch_opt[preset->arch]);
            return 2;
        }
        o.arch = preset->arch;
#define P(f) if (o.f < 0) o.f = preset->f
        P(n_embd); P(n_layer); P(n_head); P(n_head_kv); P(head_dim); P(n_ff); P(n_expert);
        P(n_expert_used); P(n_ff_exp); P(n_ff_shexp);
#undef P
    }
    if (o.arch < 0 || !o.out) { usage(stderr); return 2; }

    /* arch defaults and constraints */
    if (o.n_embd < 0) o.n_embd = 64;
    if (o.n_layer < 0) o.n_layer = 2;
    if (o.n_head < 0) o.n_head = 4;
    if (o.n_expert_used < 0) o.n_expert_used = 2;
    if (o.n_ff_exp < 0) o.n_ff_exp = 32;
    if (o.n_ff_shexp < 0) o.n_ff_shexp = 64;
    if (o.n_ctx < 0) o.n_ctx = 4096;
    if (o.n_head_kv < 0) o.n_head_kv = o.arch == A_OLMOE ? o.n_head : 2;
    if (o.head_dim < 0) o.head_dim = o.arch == A_QWEN3MOE ? 32 : o.n_embd / o.n_head;
    if (o.n_ff < 0) o.n_ff = (o.arch == A_LLAMA_MOE || o.arch == A_OLMOE) ? 64 : 128;
    if (o.n_expert < 0) o.n_expert = o.arch == A_LLAMA_MOE ? 4 : 8;
    o.eps = o.arch == A_QWEN3MOE ? 1e-6f : 1e-5f;
    const char *why = NULL;
    if (o.n_head % o.n_head_kv) why = "n-head must be a multiple of n-head-kv";
    else if (o.head_dim % 2) why = "head-dim must be even (RoPE pairs)";
    else if ((o.arch == A_QWEN2MOE || o.arch == A_OLMOE) && o.head_dim * o.n_head != o.n_embd)
        why = "this arch needs head-dim * n-head == n-embd";
    else if (o.arch == A_OLMOE && o.n_head_kv != o.n_head)
        why = "olmoe's k-norm spans n-embd: n-head-kv must equal n-head";
    else if (o.arch != A_LLAMA && (o.n_expert_used > o.n_expert || o.n_expert > 512))
        why = "need n-expert-used <= n-expert <= 512";
    else if (o.n_layer > 512) why = "n-layer must be <= 512";
    if (why) { fprintf(stderr, "gen-random: %s\n", why); return 2; }

    return gen_write(o);
}

int cmd_gen_random(int argc, char **argv) {
    for (size_t g = 0; g < sizeof g_generators / sizeof g_generators[0]; g++)
        for (int i = 1; i + 1 < argc; i++)
            if ((!strcmp(argv[i], "--arch") && names_one_of(argv[i + 1], g_generators[g].arch, 3)) ||
                (!strcmp(argv[i], "--preset") && names_one_of(argv[i + 1], g_generators[g].preset, 2)))
                return g_generators[g].run(argc, argv);
    return gen_llama_family(argc, argv);
}
