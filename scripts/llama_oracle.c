/* llama_oracle.c — greedy token ids from llama.cpp (the reference), for scripts/make_expected.sh.
 * Not part of the deltafin build: compiled against a llama.cpp build by make_expected.sh.
 *
 * usage: llama_oracle MODEL.gguf PROMPT N_PREDICT
 *        llama_oracle --logits MODEL.gguf IDS N_PROMPT OUT.f32
 *        llama_oracle --routes MODEL.gguf IDS N_PROMPT
 *        llama_oracle --dump MODEL.gguf IDS N_PROMPT STEP DIR
 * (second form: teacher-forced logits for scripts/logits_diff.sh — IDS comma-separated, the
 * first N_PROMPT decoded as one batch, the rest one by one; writes n_vocab floats per step.
 * Third form: the same decode calls, printing per step and MoE layer the experts chosen
 * (expert:count over the step's tokens) and the smallest routing margin of the step — how far
 * the top-k selection (and the expert-group selection) was from a tie, in selection-score
 * units: `step layer e:n,e:n,... margin`. A discrete routing flip between engines can only
 * happen where this margin is comparable to their numeric difference.
 * Fourth form: the same decode calls; at decode call STEP every contiguous F32 graph tensor is
 * written to DIR/NAME.f32 (NAME as llama.cpp's graph calls it, `#2`... for repeated names),
 * with DIR/index.tsv listing name and shape — for bisecting a difference op by op.)
 * Every form takes the KV cache types and flash attention from ORACLE_TYPE_K / ORACLE_TYPE_V /
 * ORACLE_FLASH_ATTN (llama.cpp's -ctk / -ctv / -fa; see oracle_ctx_params).
 * Tokenizes PROMPT like llama-completion (add BOS per the model, parse special tokens),
 * decodes it as one batch, then generates up to N_PREDICT tokens greedily (argmax, stopping at
 * an end-of-generation token like llama-completion) one token per decode call. Prints one
 * tab-separated line:
 *   prompt_ids <TAB> generated_ids <TAB> min_gap <TAB> min_gap_step <TAB> gaps
 * ids comma-separated; gaps = per step top-1 minus top-2 logit (how far each greedy choice,
 * including a final end-of-generation choice, is from a tie); min_gap = the smallest. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "ggml-backend.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* ORACLE_NO_REPACK=1: no extra buffer types (llama.cpp's --no-repack), to tell the float order of
 * ggml's repacked kernels from its plain vec_dot ones. */
static struct llama_model_params oracle_model_params(void) {
    struct llama_model_params mp = llama_model_default_params();
    const char *e = getenv("ORACLE_NO_REPACK");
    if (e && *e && strcmp(e, "0")) mp.use_extra_bufts = false;
    return mp;
}

/* ORACLE_TYPE_K / ORACLE_TYPE_V = f16 | f32 | bf16 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | iq4_nl: the KV
 * cache types (llama.cpp's -ctk / -ctv); ORACLE_FLASH_ATTN = on | off | auto (-fa). Unset: the
 * library defaults (F16, auto = on for the CPU), as every form records without them. */
static int kv_type(const char *var, enum ggml_type def) {
    static const struct { const char *n; enum ggml_type t; } k[] = {
        {"f16", GGML_TYPE_F16}, {"f32", GGML_TYPE_F32}, {"bf16", GGML_TYPE_BF16}, {"q8_0", GGML_TYPE_Q8_0},
        {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
        {"iq4_nl", GGML_TYPE_IQ4_NL},
    };
    const char *e = getenv(var);
    if (!e || !*e) return def;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(e, k[i].n)) return k[i].t;
    fprintf(stderr, "%s=%s: unknown KV cache type\n", var, e);
    exit(2);
}

/* ORACLE_N_BATCH=N: logical and physical batch N (llama.cpp's -b N -ub N); prompts are decoded
 * in chunks of N. Below 64 it keeps llama.cpp's flash attention on its one-chunk kernel (its
 * tiled kernel for 64+ queries is not reproduced by deltafin: tests use -b 32 on both sides). */
static int oracle_n_batch(void) {
    const char *e = getenv("ORACLE_N_BATCH");
    return e && atoi(e) > 0 ? atoi(e) : 0;
}

/* llama_decode of ids[0..n) in chunks of ORACLE_N_BATCH (one call without it) */
static int decode_chunks(struct llama_context *ctx, llama_token *ids, int n) {
    const int nb = oracle_n_batch() > 0 ? oracle_n_batch() : n;
    for (int i = 0; i < n; i += nb)
        if (llama_decode(ctx, llama_batch_get_one(ids + i, n - i < nb ? n - i : nb))) return 1;
    return 0;
}

static struct llama_context_params oracle_ctx_params(void) {
    struct llama_context_params cp = llama_context_default_params();
    if (oracle_n_batch() > 0) cp.n_batch = cp.n_ubatch = (uint32_t)oracle_n_batch();
    cp.type_k = kv_type("ORACLE_TYPE_K", cp.type_k);
    cp.type_v = kv_type("ORACLE_TYPE_V", cp.type_v);
    const char *fa = getenv("ORACLE_FLASH_ATTN");
    if (fa && !strcmp(fa, "on")) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    else if (fa && !strcmp(fa, "off")) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    else if (fa && !strcmp(fa, "auto")) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    else if (fa && *fa) { fprintf(stderr, "ORACLE_FLASH_ATTN=%s: on, off or auto\n", fa); exit(2); }
    return cp;
}

static int dump_logits(char **argv) {
    const char *path = argv[2], *out = argv[5];
    struct llama_model *model = llama_model_load_from_file(path, oracle_model_params());
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    struct llama_context_params cp = oracle_ctx_params();
    cp.n_ctx = 0;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int cap = (int)strlen(argv[3]) / 2 + 2, n = 0, np = atoi(argv[4]);
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    for (char *s = argv[3]; *s && n < cap;) {
        ids[n++] = (llama_token)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    if (np < 1 || np > n) { fprintf(stderr, "bad N_PROMPT\n"); return 2; }
    FILE *f = fopen(out, "wb");
    if (!f) { perror(out); return 1; }
    for (int i = 0, step = 0; i < n; step++) {
        int k = step == 0 ? np : 1;
        if (decode_chunks(ctx, ids + i, k)) { fprintf(stderr, "decode failed\n"); return 1; }
        fwrite(llama_get_logits_ith(ctx, -1), sizeof(float), (size_t)n_vocab, f);
        i += k;
    }
    fclose(f);
    free(ids);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

/* --routes: the router's selection scores of each MoE layer, captured by the eval callback */
typedef struct {
    int n_expert, n_used, n_groups, n_group_used, n_layer;
    int step;
} route_ud;

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static bool route_cb(struct ggml_tensor *t, bool ask, void *user) {
    route_ud *u = user;
    const char *nm = ggml_get_name(t);
    int il;
    /* selection scores: ffn_moe_probs_biased when the model has exp_probs_b, else ffn_moe_probs */
    bool biased = !strncmp(nm, "ffn_moe_probs_biased-", 21), plain = !strncmp(nm, "ffn_moe_probs-", 14);
    const char *num = strrchr(nm, '-');
    if (!num || !num[1] || strspn(num + 1, "0123456789") != strlen(num + 1)) biased = plain = false; /* views */
    if (ask) return biased || plain;
    if (!biased && !plain) return true;
    il = atoi(num + 1);
    const int E = (int)t->ne[0], nt = (int)t->ne[1];
    float *v = malloc(sizeof(float) * (size_t)E * (size_t)nt);
    ggml_backend_tensor_get(t, v, 0, sizeof(float) * (size_t)E * (size_t)nt);
    /* the plain probs of a biased model come first: remember them only when no bias follows.
     * Both are reported; the line says which (the biased one decides for DeepSeek-V3). */
    int *cnt = calloc((size_t)E, sizeof(int));
    float margin = INFINITY;
    for (int tk = 0; tk < nt; tk++) {
        float *s = v + (int64_t)tk * E, srt[1024], gs[256], gsrt[256];
        if (u->n_groups > 1) {
            const int per = E / u->n_groups;
            for (int g = 0; g < u->n_groups; g++) {
                float a = -INFINITY, b = -INFINITY;
                for (int e = g * per; e < (g + 1) * per; e++) {
                    if (s[e] > a) { b = a; a = s[e]; } else if (s[e] > b) b = s[e];
                }
                gs[g] = gsrt[g] = a + b;
            }
            qsort(gsrt, (size_t)u->n_groups, sizeof(float), cmp_desc);
            float gm = gsrt[u->n_group_used - 1] - gsrt[u->n_group_used];
            if (u->n_group_used < u->n_groups && gm < margin) margin = gm;
            float cut = gsrt[u->n_group_used - 1];
            for (int g = 0; g < u->n_groups; g++)
                if (gs[g] < cut)
                    for (int e = g * per; e < (g + 1) * per; e++) s[e] = -INFINITY;
        }
        memcpy(srt, s, sizeof(float) * (size_t)E);
        qsort(srt, (size_t)E, sizeof(float), cmp_desc);
        if (u->n_used < E && srt[u->n_used] > -INFINITY && srt[u->n_used - 1] - srt[u->n_used] < margin)
            margin = srt[u->n_used - 1] - srt[u->n_used];
        for (int e = 0; e < E; e++)
            if (s[e] >= srt[u->n_used - 1]) cnt[e]++;
    }
    printf("%d\t%d\t%s\t", u->step, il, biased ? "biased" : "probs");
    for (int e = 0, first = 1; e < E; e++)
        if (cnt[e]) { printf("%s%d:%d", first ? "" : ",", e, cnt[e]); first = 0; }
    printf("\t%.3g\n", (double)margin);
    free(cnt);
    free(v);
    return true;
}

/* --dump */
typedef struct {
    int step, want_step;
    const char *dir;
    FILE *index;
} dump_ud;

static bool dump_cb(struct ggml_tensor *t, bool ask, void *user) {
    dump_ud *u = user;
    if (ask) return u->step == u->want_step;
    if (u->step != u->want_step || t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) return true;
    char base[128], path[512];
    snprintf(base, sizeof base, "%s", ggml_get_name(t));
    for (char *p = base; *p; p++) if (*p == '/' || *p == ' ' || *p == '(' || *p == ')') *p = '_';
    snprintf(path, sizeof path, "%s/%s.f32", u->dir, base);
    for (int k = 2; fopen(path, "rb") && k < 100; k++) snprintf(path, sizeof path, "%s/%s#%d.f32", u->dir, base, k);
    size_t n = (size_t)ggml_nelements(t);
    float *v = malloc(sizeof(float) * n);
    ggml_backend_tensor_get(t, v, 0, sizeof(float) * n);
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(v, sizeof(float), n, f); fclose(f); }
    fprintf(u->index, "%s\t%s\t%lld,%lld,%lld,%lld\n", strrchr(path, '/') + 1, ggml_op_desc(t), (long long)t->ne[0],
            (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    free(v);
    return true;
}

static int dump_step(char **argv) {
    const char *path = argv[2];
    struct llama_model *model = llama_model_load_from_file(path, oracle_model_params());
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    char ip[512];
    snprintf(ip, sizeof ip, "%s/index.tsv", argv[6]);
    dump_ud u = {.step = -1, .want_step = atoi(argv[5]), .dir = argv[6], .index = fopen(ip, "w")};
    if (!u.index) { perror(ip); return 1; }
    struct llama_context_params cp = oracle_ctx_params();
    cp.n_ctx = 0;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = dump_cb;
    cp.cb_eval_user_data = &u;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    int cap = (int)strlen(argv[3]) / 2 + 2, n = 0, np = atoi(argv[4]);
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    for (char *s = argv[3]; *s && n < cap;) {
        ids[n++] = (llama_token)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    if (np < 1 || np > n) { fprintf(stderr, "bad N_PROMPT\n"); return 2; }
    for (int i = 0, step = 0; i < n && step <= u.want_step; step++) {
        int k = step == 0 ? np : 1;
        u.step = step;
        if (decode_chunks(ctx, ids + i, k)) { fprintf(stderr, "decode failed\n"); return 1; }
        i += k;
    }
    fclose(u.index);
    free(ids);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

static int meta_int(const struct llama_model *m, const char *key, int dflt) {
    char arch[64], k[128], buf[64];
    if (llama_model_meta_val_str(m, "general.architecture", arch, sizeof arch) < 0) return dflt;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (llama_model_meta_val_str(m, k, buf, sizeof buf) < 0) return dflt;
    return atoi(buf);
}

static int dump_routes(char **argv) {
    const char *path = argv[2];
    struct llama_model *model = llama_model_load_from_file(path, oracle_model_params());
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    route_ud u = {0};
    u.n_expert = meta_int(model, "expert_count", 0);
    u.n_used = meta_int(model, "expert_used_count", 0);
    u.n_groups = meta_int(model, "expert_group_count", 0);
    u.n_group_used = meta_int(model, "expert_group_used_count", 0);
    if (u.n_expert <= 0 || u.n_used <= 0 || u.n_expert > 1024) { fprintf(stderr, "not a MoE model\n"); return 1; }
    struct llama_context_params cp = oracle_ctx_params();
    cp.n_ctx = 0;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = route_cb;
    cp.cb_eval_user_data = &u;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    int cap = (int)strlen(argv[3]) / 2 + 2, n = 0, np = atoi(argv[4]);
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    for (char *s = argv[3]; *s && n < cap;) {
        ids[n++] = (llama_token)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    if (np < 1 || np > n) { fprintf(stderr, "bad N_PROMPT\n"); return 2; }
    for (int i = 0, step = 0; i < n; step++) {
        int k = step == 0 ? np : 1;
        u.step = step;
        if (decode_chunks(ctx, ids + i, k)) { fprintf(stderr, "decode failed\n"); return 1; }
        i += k;
    }
    fflush(stdout);
    free(ids);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "--dump")) {
        llama_log_set(quiet, NULL);
        llama_backend_init();
        return dump_step(argv);
    }
    if (argc == 5 && !strcmp(argv[1], "--routes")) {
        llama_log_set(quiet, NULL);
        llama_backend_init();
        return dump_routes(argv);
    }
    if (argc == 6 && !strcmp(argv[1], "--logits")) {
        llama_log_set(quiet, NULL);
        llama_backend_init();
        return dump_logits(argv);
    }
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT N_PREDICT\n", argv[0]);
        return 2;
    }
    const char *path = argv[1], *prompt = argv[2];
    int n_predict = atoi(argv[3]);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = oracle_model_params();
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", path); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = oracle_ctx_params();
    cp.n_ctx = 0; /* training context, like llama-completion */
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }

    int cap = (int)strlen(prompt) + 16;
    llama_token *toks = malloc(sizeof *toks * (size_t)cap);
    int np = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), toks, cap, true, true);
    if (np < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
    if (np == 0) { fprintf(stderr, "empty prompt and no BOS\n"); return 1; }
    for (int i = 0; i < np; i++) printf("%s%d", i ? "," : "", toks[i]);
    printf("\t");

    const int n_vocab = llama_vocab_n_tokens(vocab);
    /* ORACLE_SERIAL_PROMPT=1: decode the prompt one token at a time — the same model, other
     * kernels (matrix-vector instead of matrix-matrix): a perturbation of llama.cpp's own
     * numerics of the size of the differences between two engines, used to tell robust
     * greedy runs from those that hang on a rounding near-tie */
    const char *ser = getenv("ORACLE_SERIAL_PROMPT");
    for (int i = 0, k = ser && *ser == '1' ? 1 : np; i < np; i += k)
        if (decode_chunks(ctx, toks + i, k)) { fprintf(stderr, "decode failed\n"); return 1; }
    float min_gap = FLT_MAX;
    int min_step = -1;
    float *gaps = malloc(sizeof *gaps * (size_t)(n_predict > 0 ? n_predict : 1));
    int n_gaps = 0;
    for (int step = 0; step < n_predict; step++) {
        const float *lg = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int i = 1; i < n_vocab; i++) if (lg[i] > lg[best]) best = i;
        float second = -FLT_MAX;
        for (int i = 0; i < n_vocab; i++) if (i != best && lg[i] > second) second = lg[i];
        if (lg[best] - second < min_gap) { min_gap = lg[best] - second; min_step = step; }
        gaps[n_gaps++] = lg[best] - second;
        if (llama_vocab_is_eog(vocab, best)) break;
        printf("%s%d", step ? "," : "", best);
        llama_token t = best;
        if (llama_decode(ctx, llama_batch_get_one(&t, 1))) { fprintf(stderr, "decode failed\n"); return 1; }
    }
    printf("\t%.4f\t%d\t", min_step < 0 ? 0.0 : (double)min_gap, min_step);
    for (int i = 0; i < n_gaps; i++) printf("%s%.4f", i ? "," : "", (double)gaps[i]);
    printf("\n");
    free(gaps);
    free(toks);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
