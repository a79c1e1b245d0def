/* gen_random_gpt_oss.c — `deltafin-dev gen-random --arch gpt-oss ...`: a random gpt-oss model
 * (llama.cpp's "gpt-oss": sinks, q/k/v/o biases, alternating sliding-window layers, router and
 * per-expert biases, YaRN keys) with the exact names, shapes and keys llama.cpp expects; the
 * tensors come from the schema (src/model/arch_gpt_oss.c). Deterministic like gen_random.c.
 * Called from cmd_gen_random when --arch gpt-oss is given. */
#include "base/util.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "dev/gen_random.h"

#include <errno.h>
#include <math.h>

typedef struct {
    int type, exp_type;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_expert, n_used, n_ff_exp, n_ctx, swa, swa_period;
    float rope_base, yarn_factor, eps, out_scale, router_scale;
    bool sparse, raw_experts;
    uint64_t seed;
    const char *vocab, *out, *name;
} go_opts;

static void go_usage(FILE *f) {
    fprintf(f,
        "usage: deltafin-dev gen-random --arch gpt-oss [options] OUT.gguf\n\n"
        "Random gpt-oss model (attention sinks, q/k/v/o biases, sliding-window layers, router and\n"
        "per-expert biases, clamped SwiGLU, YaRN). Deterministic.\n"
        "  --type T           f32 | f16 | q8_0 | q4_k | mxfp4 for weight matrices (default f32;\n"
        "                     rows off the type's block fall back to Q8_0, else F16)\n"
        "  --expert-type T    type of the routed experts (*_exps) (default: --type)\n"
        "  --n-embd N (64)  --n-layer N (4)  --n-head N (4)  --n-head-kv N (2)  --head-dim N (32)\n"
        "  --n-expert N (8)  --n-expert-used N (2)  --n-ff-exp N (32)\n"
        "  --swa N (8)        attention.sliding_window\n"
        "  --swa-period N (0) attention.sliding_window_pattern (0: key absent, llama.cpp's 2)\n"
        "  --rope-base F (150000)  --yarn-factor F (32; 0: no YaRN keys)  --eps F (1e-5)\n"
        "  --preset P         gpt-oss-120b (hidden 2880, 64 heads / 8 KV of 64, 128 experts top-4,\n"
        "                     width 2880, window 128, 36 layers) | gpt-oss-20b (24 layers, 32\n"
        "                     experts); options given explicitly win (e.g. --n-layer 2)\n"
        "  --sparse           header only, data section a hole (for `info` / memory plans)\n"
        "  --raw-experts      q8_0 / mxfp4 experts filled with random valid blocks directly (fast)\n"
        "  --vocab PATH|bytes  --seed S (1)  --out-scale F (4)  --router-scale F (3)  --ctx N (4096)\n"
        "  --name NAME\n");
}

/* Optional tensors: the q/k/v biases (gpt-oss files have them). */
static bool go_want(void *ud, const df_tensor_spec *s, int il) {
    (void)ud; (void)il;
    return s->field == DF_LF(bq) || s->field == DF_LF(bk) || s->field == DF_LF(bv);
}

static int go_write(go_opts o) {
    char vbuf[4096];
    gr_default_vocab(&o.vocab, vbuf, sizeof vbuf);
    int rc = DF_OK;
    df_gguf_writer *w = df_gguf_writer_new(GR_ALIGN);
    if (!w) return 1;
    const char *A = "gpt-oss";
    char key[128];
#define KU32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_u32(w, key, (uint32_t)(v)))
#define KF32(s, v) (snprintf(key, sizeof key, "%s." s, A), df_gguf_w_f32(w, key, (v)))
    int ftype = o.type == DF_TYPE_F32 ? 0 : o.type == DF_TYPE_F16 ? 1 : o.type == DF_TYPE_Q8_0 ? 7 : 15;
    if (o.exp_type == DF_TYPE_MXFP4) ftype = 38;
    if ((rc = df_gguf_w_str(w, "general.architecture", A)) ||
        (rc = df_gguf_w_str(w, "general.name", o.name ? o.name : "deltafin-random-gpt-oss")) ||
        (rc = df_gguf_w_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (o.type != DF_TYPE_F32 && o.type != DF_TYPE_F16 && (rc = df_gguf_w_u32(w, "general.quantization_version", 2))) ||
        (rc = KU32("context_length", o.n_ctx)) || (rc = KU32("embedding_length", o.n_embd)) ||
        (rc = KU32("block_count", o.n_layer)) || (rc = KU32("feed_forward_length", o.n_ff_exp)) ||
        (rc = KU32("attention.head_count", o.n_head)) || (rc = KU32("attention.head_count_kv", o.n_head_kv)) ||
        (rc = KU32("attention.key_length", o.head_dim)) || (rc = KU32("attention.value_length", o.head_dim)) ||
        (rc = KU32("rope.dimension_count", o.head_dim)) || (rc = KF32("rope.freq_base", o.rope_base)) ||
        (rc = KF32("attention.layer_norm_rms_epsilon", o.eps)) ||
        (rc = KU32("attention.sliding_window", o.swa)) ||
        (o.swa_period > 0 && (rc = KU32("attention.sliding_window_pattern", o.swa_period))) ||
        (rc = KU32("expert_count", o.n_expert)) || (rc = KU32("expert_used_count", o.n_used)) ||
        (rc = KU32("expert_feed_forward_length", o.n_ff_exp)))
        goto done;
    if (o.yarn_factor > 0.0f &&
        ((rc = (snprintf(key, sizeof key, "%s.rope.scaling.type", A), df_gguf_w_str(w, key, "yarn"))) ||
         (rc = KF32("rope.scaling.factor", o.yarn_factor)) ||
         (rc = KU32("rope.scaling.original_context_length", 4096))))
        goto done;
    int64_t n_vocab = 0;
    if ((rc = gr_write_vocab(w, A, o.vocab, &n_vocab))) goto done;
#undef KU32
#undef KF32
    gr_model g = {.arch = A, .type = o.type, .exp_type = o.exp_type, .type_fallback = true,
                  .out_scale = o.out_scale, .router_scale = o.router_scale, .mat_scale = 1.0f, .res_scale = 1.0f,
                  .seed = o.seed, .sparse = o.sparse, .pad_end = !o.sparse, .raw_experts = o.raw_experts,
                  .want = go_want, .ud = &o, .out = o.out};
    df_hparams *hp = &g.hp;
    hp->n_vocab = (int)n_vocab;
    hp->n_embd = (int)o.n_embd;
    hp->n_layer = (int)o.n_layer;
    hp->n_head = (int)o.n_head;
    hp->n_head_kv = (int)o.n_head_kv;
    hp->n_embd_head_k = hp->n_embd_head_v = hp->n_rot = (int)o.head_dim;
    hp->n_expert = (int)o.n_expert;
    hp->n_ff_exp = (int)o.n_ff_exp;
    hp->n_swa = (int)o.swa;
    const int64_t per = o.swa_period > 0 ? o.swa_period : 2;
    for (int64_t il = 0; il < o.n_layer; il++) hp->layer_swa[il] = il % per < per - 1;
    gr_stats st;
    rc = gr_write_model(w, &g, &st);
    if (!rc)
        fprintf(stderr, "gen-random: wrote %s (gpt-oss, %s / experts %s, %lld layers, n_embd %lld, %lld experts "
                "top-%lld, window %lld, %.3f M params, vocab %lld from %s%s)\n", o.out,
                df_gguf_tensor_type_name(o.type), df_gguf_tensor_type_name(o.exp_type), (long long)o.n_layer,
                (long long)o.n_embd, (long long)o.n_expert, (long long)o.n_used, (long long)o.swa,
                (double)st.n_params / 1e6, (long long)n_vocab, o.vocab, o.sparse ? ", sparse" : "");
done:
    if (rc) fprintf(stderr, "gen-random: %s\n", deltafin_errmsg());
    df_gguf_writer_free(w);
    return rc ? 1 : 0;
}

/* Presets apply where the option was not given (-1). */
static void go_preset(go_opts *o, bool big) {
    const int64_t v[] = {2880, big ? 36 : 24, 64, 8, 64, big ? 128 : 32, 4, 2880, 128};
    int64_t *f[] = {&o->n_embd, &o->n_layer, &o->n_head, &o->n_head_kv, &o->head_dim, &o->n_expert,
                    &o->n_used, &o->n_ff_exp, &o->swa};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (*f[i] < 0) *f[i] = v[i];
    if (o->n_ctx < 0) o->n_ctx = 131072;
}

/* --arch is how the dispatcher chose this generator: only gpt-oss itself */
static int go_other(void *ud, const char *opt, const char *v) {
    (void)ud;
    if (strcmp(opt, "--arch")) return -1;
    if (strcmp(v, "gpt-oss")) { fprintf(stderr, "gen-random: --arch %s\n", v); return 2; }
    return 0;
}

int df_gen_random_gpt_oss(int argc, char **argv) {
    go_opts o = {.type = DF_TYPE_F32, .exp_type = -1, .n_embd = -1, .n_layer = -1, .n_head = -1, .n_head_kv = -1,
                 .head_dim = -1, .n_expert = -1, .n_used = -1, .n_ff_exp = -1, .n_ctx = -1, .swa = -1,
                 .swa_period = 0, .rope_base = 150000.0f, .yarn_factor = 32.0f, .eps = 1e-5f,
                 .out_scale = 4.0f, .router_scale = 3.0f, .seed = 1};
    const char *preset = NULL;
    const gr_opt opts[] = {
        {"--sparse", GR_FLAG, &o.sparse, 1}, {"--raw-experts", GR_FLAG, &o.raw_experts, 1},
        {"--n-embd", GR_I64, &o.n_embd, 0}, {"--n-layer", GR_I64, &o.n_layer, 0}, {"--n-head", GR_I64, &o.n_head, 0},
        {"--n-head-kv", GR_I64, &o.n_head_kv, 0}, {"--head-dim", GR_I64, &o.head_dim, 0},
        {"--n-expert", GR_I64, &o.n_expert, 0}, {"--n-expert-used", GR_I64, &o.n_used, 0},
        {"--n-ff-exp", GR_I64, &o.n_ff_exp, 0}, {"--ctx", GR_I64, &o.n_ctx, 0}, {"--swa", GR_I64, &o.swa, 0},
        {"--swa-period", GR_I64, &o.swa_period, 0},
        {"--rope-base", GR_F32, &o.rope_base, 0}, {"--yarn-factor", GR_F32, &o.yarn_factor, 0}, {"--eps", GR_F32, &o.eps, 0},
        {"--out-scale", GR_F32, &o.out_scale, 0}, {"--router-scale", GR_F32, &o.router_scale, 0},
        {"--type", GR_TYPE, &o.type, 0}, {"--expert-type", GR_TYPE, &o.exp_type, 0},
        {"--vocab", GR_STR, &o.vocab, 0}, {"--name", GR_STR, &o.name, 0}, {"--seed", GR_SEED, &o.seed, 0},
        {"--preset", GR_STR, &preset, 0},
    };
    const gr_args ga = {"gpt-oss", opts, sizeof opts / sizeof opts[0], GR_T_F32 | GR_T_F16 | GR_T_Q8_0 | GR_T_Q4_K | GR_T_MXFP4,
                        go_usage, go_other, NULL, &o.out};
    int prc = gr_parse_args(&ga, argc, argv);
    if (prc != 1) return prc;
    if (preset && strcmp(preset, "gpt-oss-120b") && strcmp(preset, "gpt-oss-20b")) {
        fprintf(stderr, "gen-random: gpt-oss --preset: gpt-oss-120b | gpt-oss-20b\n");
        return 2;
    }
    if (!o.out) { go_usage(stderr); return 2; }
    if (preset) go_preset(&o, !strcmp(preset, "gpt-oss-120b"));
    const int64_t def[] = {64, 4, 4, 2, 32, 8, 2, 32, 8, 4096};
    int64_t *f[] = {&o.n_embd, &o.n_layer, &o.n_head, &o.n_head_kv, &o.head_dim, &o.n_expert, &o.n_used,
                    &o.n_ff_exp, &o.swa, &o.n_ctx};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (*f[i] < 0) *f[i] = def[i];
    if (o.exp_type < 0) o.exp_type = o.type;
    const char *why = NULL;
    if (o.n_embd < 1 || o.n_layer < 1 || o.n_layer > 512 || o.n_head < 1 || o.n_head_kv < 1 || o.head_dim < 2 ||
        (o.head_dim & 1) || o.n_ff_exp < 1 || o.swa < 1 || o.n_ctx < 1)
        why = "dims must be positive, head-dim even, n-layer <= 512";
    else if (o.n_head % o.n_head_kv) why = "n-head must be a multiple of n-head-kv";
    else if (o.n_used < 1 || o.n_used > o.n_expert || o.n_expert > 1024)
        why = "need 1 <= n-expert-used <= n-expert <= 1024";
    if (why) { fprintf(stderr, "gen-random: %s\n", why); return 2; }
    return go_write(o);
}
