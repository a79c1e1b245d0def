/* test_batch.c — multi-sequence batches (deltafin_decode_batch) give the bits of decoding each
 * sequence alone, for every architecture: 4 different prompts decoded as one batch and then
 * greedy-generated together, compared token for token and logit for logit (memcmp) with the
 * same prompts run one context at a time; prompt chunks of one sequence sharing passes with the
 * generated tokens of others (continuous batching); sequences whose contexts have different
 * n_batch (chunked prompts, the lead's scratch); all-logits rows; how many rows the last layer's
 * FFN sees (llama.cpp's graph per architecture); the call's statistics (one
 * pass per step, expert acquires of the union <= the sum per sequence) and its refusals.
 * Models: gen-random's (DELTAFIN_DEV_BIN, else build/deltafin-dev, else build/deltafin
 * gen-random) for llama, llama-moe, qwen2moe, qwen3moe (also Q4_K: repacked rows, ggml's gemm
 * order), olmoe, deepseek2 (absorbed MLA, legacy, lite), kimi-k3 (KDA state, MLA, AttnRes),
 * gpt-oss (sinks, sliding window, MXFP4 experts), qwen3next and qwen35moe (Gated DeltaNet state,
 * gated attention), glm4moe, minimax-m2, deepseek32 (DSA key selection) and deepseek4 (compressed
 * KV and its state, the indexer, hyper-connections), each in its own
 * process (`test_batch --model PATH`); then packed (`deltafin_pack`) and plain
 * files with the routed experts streamed through a 3-slot cache and the dense layers streamed
 * (DELTAFIN_EXPERT_CACHE, DELTAFIN_DENSE_RESIDENT=0, --io pread). */
#include "testlib.h"
#include "deltafin.h"
#include <libgen.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSEQ 4
#define NGEN 10
#define NCTX 128

static const int g_plen[NSEQ] = {5, 70, 13, 2}; /* 70: llama.cpp's tiled attention (>= 64) */
static int32_t g_prompt[NSEQ][80];
static int g_V;

static deltafin_ctx *mkctx(deltafin_model *m, int nb) {
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = NCTX;
    cp.n_batch = nb;
    cp.n_threads = 2;
    deltafin_ctx *c = NULL;
    if (deltafin_ctx_create(m, &cp, &c) < 0) return NULL;
    return c;
}

static int argmax(const float *a, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (a[i] > a[b]) b = i;
    return b;
}

/* one sequence's run: greedy tokens and the logits they came from */
typedef struct { int32_t tok[NGEN]; float *lg; /* [NGEN][V] */ } run_t;

static void run_init(run_t *r) { r->lg = calloc((size_t)NGEN * g_V, sizeof(float)); }

static void record(run_t *r, int g, const float *lg) {
    memcpy(r->lg + (int64_t)g * g_V, lg, sizeof(float) * (size_t)g_V);
    r->tok[g] = argmax(lg, g_V);
}

/* each prompt alone in its own context, then NGEN - 1 tokens one at a time */
static bool run_alone(deltafin_model *m, int s, int nb, run_t *r) {
    deltafin_ctx *c = mkctx(m, nb);
    if (!c) return false;
    bool ok = deltafin_decode(c, g_prompt[s], g_plen[s], false) == 0;
    for (int g = 0; ok && g < NGEN; g++) {
        record(r, g, deltafin_logits(c, -1));
        if (g + 1 < NGEN) ok = deltafin_decode(c, &r->tok[g], 1, false) == 0;
    }
    deltafin_ctx_free(c);
    return ok;
}

static int compare(const char *what, const run_t *a, const run_t *b, int s) {
    int bad = 0;
    for (int g = 0; g < NGEN; g++) {
        if (a->tok[g] != b->tok[g] && !bad)
            printf("  %s seq %d: token %d: %d alone, %d batched\n", what, s, g, a->tok[g], b->tok[g]);
        bad += a->tok[g] != b->tok[g];
        if (memcmp(a->lg + (int64_t)g * g_V, b->lg + (int64_t)g * g_V, sizeof(float) * (size_t)g_V) != 0) {
            if (!bad) printf("  %s seq %d: logits of step %d differ (same token)\n", what, s, g);
            bad++;
        }
    }
    return bad;
}

/* Continuous batching: sequence s joins at step start[s] with its prompt while the others
 * decode; every call is one pass (at most one chunk each). */
static bool run_together(deltafin_model *m, const int nb[NSEQ], const int start[NSEQ], run_t *out, bool moe,
                         const char *what) {
    deltafin_ctx *c[NSEQ];
    int gen[NSEQ] = {0};
    bool ok = true;
    for (int s = 0; s < NSEQ; s++) ok &= (c[s] = mkctx(m, nb[s])) != NULL;
    for (int step = 0; ok; step++) {
        deltafin_batch_seq b[NSEQ];
        int n = 0, ntok = 0;
        for (int s = 0; s < NSEQ; s++) {
            if (step < start[s] || gen[s] >= NGEN) continue;
            if (step == start[s]) b[n] = (deltafin_batch_seq){c[s], g_prompt[s], g_plen[s], false};
            else b[n] = (deltafin_batch_seq){c[s], &out[s].tok[gen[s] - 1], 1, false};
            ntok += b[n].n;
            n++;
        }
        if (n == 0) {
            bool left = false;
            for (int s = 0; s < NSEQ; s++) left |= gen[s] < NGEN;
            if (!left) break;
            continue;
        }
        deltafin_batch_info info;
        int rc = deltafin_decode_batch(b, n, &info);
        CHECK_MSG(rc == 0, "%s step %d: %s", what, step, deltafin_errmsg());
        if (rc) { ok = false; break; }
        CHECK_EQ_INT(info.n_tokens, ntok);
        CHECK(info.n_passes >= 1 && info.n_seq_passes >= n && info.n_seq_passes >= info.n_passes);
        CHECK_MSG(info.expert_acquires <= info.expert_acquires_alone, "%s: union %llu > per-sequence %llu", what,
                  (unsigned long long)info.expert_acquires, (unsigned long long)info.expert_acquires_alone);
        if (moe) CHECK(info.expert_acquires > 0);
        else CHECK(info.expert_acquires_alone == 0);
        if (ntok <= 128 && nb[0] >= 128) CHECK_EQ_INT(info.n_passes, 1); /* everything fits one pass */
        for (int i = 0; i < n; i++) {
            int s = (int)(b[i].ctx == c[0] ? 0 : b[i].ctx == c[1] ? 1 : b[i].ctx == c[2] ? 2 : 3);
            record(&out[s], gen[s]++, deltafin_logits(c[s], -1));
        }
    }
    for (int s = 0; s < NSEQ; s++) deltafin_ctx_free(c[s]);
    return ok;
}

/* all-logits rows of one sequence next to an ordinary one, as each alone */
static void check_all_logits(deltafin_model *m) {
    deltafin_ctx *a = mkctx(m, 128), *b = mkctx(m, 128), *x = mkctx(m, 128), *y = mkctx(m, 128);
    if (!a || !b || !x || !y) { CHECK(false); goto out; }
    const int n = g_plen[2];
    CHECK_EQ_INT(deltafin_decode(a, g_prompt[2], n, true), 0);
    CHECK_EQ_INT(deltafin_decode(b, g_prompt[1], g_plen[1], false), 0);
    deltafin_batch_seq bs[2] = {{y, g_prompt[1], g_plen[1], false}, {x, g_prompt[2], n, true}};
    CHECK_EQ_INT(deltafin_decode_batch(bs, 2, NULL), 0);
    CHECK(deltafin_logits(x, n - 1) && !deltafin_logits(x, n) && deltafin_logits(y, 0) && !deltafin_logits(y, 1));
    if (deltafin_logits(x, 0) && deltafin_logits(y, 0)) {
        CHECK_MSG(memcmp(deltafin_logits(a, 0), deltafin_logits(x, 0), sizeof(float) * (size_t)n * g_V) == 0,
                  "all-logits rows in a batch differ from alone");
        CHECK_MSG(memcmp(deltafin_logits(b, -1), deltafin_logits(y, -1), sizeof(float) * (size_t)g_V) == 0,
                  "last-row logits next to an all-logits sequence differ from alone");
    }
out:
    deltafin_ctx_free(a); deltafin_ctx_free(b); deltafin_ctx_free(x); deltafin_ctx_free(y);
}

/* rows of the last layer's plain FFN matmuls (router, shared expert, dense FFN) of a prompt
 * decoded for its last logits only: llama.cpp's graphs drop the other rows before the last FFN
 * (inp_out_ids), except deepseek4's, qwen3next's and qwen35moe's, which keep every row up to
 * output_norm, so the batch products' float orders (tinyBLAS, repacked gemm) there see them */
typedef struct { int layer, rows; } last_rows;

static void last_rows_obs(void *ud, const deltafin_matmul_info *mm) {
    last_rows *lr = ud;
    int il = -1;
    if (mm->per_expert || sscanf(mm->tensor, "blk.%d.", &il) != 1 || !strstr(mm->tensor, ".ffn_")) return;
    if (il > lr->layer) { lr->layer = il; lr->rows = 0; }
    if (il == lr->layer && mm->n_rows > lr->rows) lr->rows = mm->n_rows;
}

static void check_last_layer_rows(deltafin_model *m) {
    deltafin_ctx *c = mkctx(m, 128);
    if (!c) { CHECK(false); return; }
    last_rows lr = {-1, 0};
    CHECK_EQ_INT(deltafin_ctx_set_matmul_observer(c, last_rows_obs, &lr), 0);
    CHECK_EQ_INT(deltafin_decode(c, g_prompt[1], g_plen[1], false), 0);
    const char *a = deltafin_model_arch(m);
    const bool late = !strcmp(a, "deepseek4") || !strcmp(a, "qwen3next") || !strcmp(a, "qwen35moe");
    CHECK_MSG(lr.layer >= 0 && lr.rows == (late ? g_plen[1] : 1), /* the last layer run (NextN ones are not) */
              "%s: the last layer's FFN matmuls saw %d rows (layer %d), want %d", a, lr.rows, lr.layer,
              late ? g_plen[1] : 1);
    deltafin_ctx_free(c);
}

/* refusals change nothing; a cut after a batch continues as the ctx's own history says */
static void check_refusals(deltafin_model *m) {
    deltafin_ctx *a = mkctx(m, 32), *b = mkctx(m, 32);
    if (!a || !b) { CHECK(false); goto out; }
    CHECK_EQ_INT(deltafin_decode(a, g_prompt[0], g_plen[0], false), 0);
    int32_t bad_id = g_V + 5;
    deltafin_batch_seq twice[2] = {{a, g_prompt[2], 3, false}, {a, g_prompt[3], 1, false}};
    CHECK_EQ_INT(deltafin_decode_batch(twice, 2, NULL), DELTAFIN_ERR_INVALID);
    deltafin_batch_seq oob[2] = {{b, g_prompt[2], 3, false}, {a, &bad_id, 1, false}};
    CHECK_EQ_INT(deltafin_decode_batch(oob, 2, NULL), DELTAFIN_ERR_INVALID);
    CHECK(strstr(deltafin_errmsg(), "out of range") != NULL);
    deltafin_batch_seq full[2] = {{b, g_prompt[1], 70, false}, {a, g_prompt[1], NCTX - g_plen[0] + 1, false}};
    CHECK_EQ_INT(deltafin_decode_batch(full, 2, NULL), DELTAFIN_ERR_RANGE);
    CHECK_EQ_INT(deltafin_decode_batch(NULL, 0, NULL), DELTAFIN_ERR_INVALID);
    CHECK_EQ_INT(deltafin_ctx_pos(a), g_plen[0]);
    CHECK_EQ_INT(deltafin_ctx_pos(b), 0);
    /* after a batch: drop the last token and decode it again alone */
    int32_t t1 = 7, t2 = 9;
    deltafin_batch_seq two[2] = {{b, g_prompt[2], g_plen[2], false}, {a, &t1, 1, false}};
    CHECK_EQ_INT(deltafin_decode_batch(two, 2, NULL), 0);
    deltafin_batch_seq two2[2] = {{b, &t2, 1, false}, {a, &t2, 1, false}};
    CHECK_EQ_INT(deltafin_decode_batch(two2, 2, NULL), 0);
    float *want = malloc(sizeof(float) * (size_t)g_V);
    memcpy(want, deltafin_logits(a, -1), sizeof(float) * (size_t)g_V);
    CHECK_EQ_INT(deltafin_ctx_truncate(a, g_plen[0] + 1), 0);
    CHECK_EQ_INT(deltafin_decode(a, &t2, 1, false), 0);
    /* a recurrent state is rebuilt by re-decoding (rounding may differ): same argmax */
    CHECK_EQ_INT(argmax(deltafin_logits(a, -1), g_V), argmax(want, g_V));
    free(want);
out:
    deltafin_ctx_free(a); deltafin_ctx_free(b);
}

static int child(const char *path, const char *io, bool want_stream) {
    deltafin_model_params mp = deltafin_model_default_params();
    mp.n_threads = 2;
    mp.n_seq = 2 * NSEQ + 4;
    mp.n_ctx = NCTX;
    mp.io_engine = io;
    deltafin_model *m = NULL;
    int rc = deltafin_model_load(path, &mp, &m);
    CHECK_MSG(rc == 0, "load %s: %s", path, deltafin_errmsg());
    if (rc) return 1;
    g_V = deltafin_model_n_vocab(m);
    const bool moe = deltafin_model_n_expert(m) > 0;
    for (int s = 0; s < NSEQ; s++)
        for (int i = 0; i < g_plen[s]; i++) g_prompt[s][i] = (int32_t)((i * 37 + 11 * s + 5) % g_V);
    run_t alone[NSEQ], alone_c[NSEQ], tog[NSEQ], cont[NSEQ], chk[NSEQ];
    const int nb128[NSEQ] = {128, 128, 128, 128}, nbmix[NSEQ] = {16, 32, 16, 8};
    const int at0[NSEQ] = {0, 0, 0, 0}, stagger[NSEQ] = {0, 0, 2, 5}, late[NSEQ] = {3, 0, 0, 1};
    int bad = 0;
    for (int s = 0; s < NSEQ; s++) {
        run_init(&alone[s]); run_init(&alone_c[s]); run_init(&tog[s]); run_init(&cont[s]); run_init(&chk[s]);
        CHECK(run_alone(m, s, 128, &alone[s]));
        CHECK(run_alone(m, s, nbmix[s], &alone_c[s]));
    }
    /* 1. four prompts as one pass, then four tokens per pass */
    CHECK(run_together(m, nb128, at0, tog, moe, "together"));
    for (int s = 0; s < NSEQ; s++) bad += compare("together", &alone[s], &tog[s], s);
    /* 2. prompts joining while the others generate (prompt chunks + decode tokens per pass) */
    CHECK(run_together(m, nb128, stagger, cont, moe, "staggered"));
    for (int s = 0; s < NSEQ; s++) bad += compare("staggered", &alone[s], &cont[s], s);
    /* 3. contexts with n_batch 16 / 32 / 16 / 8: chunked prompts packed into the lead's passes */
    CHECK(run_together(m, nbmix, late, chk, moe, "chunked"));
    for (int s = 0; s < NSEQ; s++) bad += compare("chunked", &alone_c[s], &chk[s], s);
    CHECK_MSG(bad == 0, "%s: %d tokens / logit rows differ between batched and alone", path, bad);
    int diverse = 0;
    for (int s = 1; s < NSEQ; s++) diverse += memcmp(alone[s].tok, alone[0].tok, sizeof alone[0].tok) != 0;
    CHECK_MSG(diverse > 0, "the four prompts generate the same tokens (the test would not see a mix-up)");
    check_all_logits(m);
    check_last_layer_rows(m);
    check_refusals(m);
    if (want_stream) {
        deltafin_stream_stats st;
        CHECK_EQ_INT(deltafin_model_stream_stats(m, &st), 0);
        CHECK_MSG(st.experts_stream && st.misses > 0, "experts did not stream (misses %llu)", (unsigned long long)st.misses);
        CHECK_MSG(st.dense_stream && st.dense_layers_streamed > 0 && st.dense_layer_reads > 0,
                  "dense layers did not stream");
        printf("  streamed: %llu expert misses, %llu dense layer reads\n", (unsigned long long)st.misses,
               (unsigned long long)st.dense_layer_reads);
    }
    printf("  %s: %d sequences x %d tokens identical batched and alone (3 schedules)\n", path, NSEQ, NGEN);
    for (int s = 0; s < NSEQ; s++) { free(alone[s].lg); free(alone_c[s].lg); free(tog[s].lg); free(cont[s].lg); free(chk[s].lg); }
    deltafin_model_free(m);
    return 0;
}

/* ---- driver: make the models, run a child per model ------------------------------------------ */
static char g_bin[4400], g_gen[4600], g_self[4400], g_dir[256];

static int sh(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

static bool gen(const char *name, const char *args, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s.gguf", g_dir, name);
    char *cmd = malloc(strlen(g_gen) + strlen(args) + strlen(path) + 64);
    sprintf(cmd, "%s %s --vocab bytes %s >/dev/null 2>&1", g_gen, args, path);
    int rc = sh(cmd);
    CHECK_MSG(rc == 0, "gen-random %s failed: %s", args, cmd);
    free(cmd);
    return rc == 0;
}

static void run_child(const char *env, const char *path, const char *io) {
    char cmd[10000];
    snprintf(cmd, sizeof cmd, "%s '%s' --model '%s'%s%s%s", env, g_self, path, io ? " --io " : "", io ? io : "",
             *env ? " --stream" : "");
    int rc = sh(cmd);
    CHECK_MSG(rc == 0, "%s%s%s: batched differs from alone (exit %d)", env, *env ? " " : "", path, rc);
}

/* a 3-slot expert cache for this model (its slot size when streamed) */
static uint64_t slot3(const char *path) {
    deltafin_model_params mp = deltafin_model_default_params();
    mp.io_engine = "pread";
    mp.n_threads = 1;
    deltafin_model *m = NULL;
    if (deltafin_model_load(path, &mp, &m) < 0) return 0;
    deltafin_plan p;
    deltafin_model_plan(m, &p);
    deltafin_model_free(m);
    return 3 * p.slot_bytes;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--model")) {
        const char *io = argc >= 5 && !strcmp(argv[3], "--io") ? argv[4] : NULL;
        bool stream = argc >= 6 && !strcmp(argv[5], "--stream");
        child(argv[2], io, stream);
        TEST_MAIN_END("test_batch");
    }
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    char *dir = dirname(self);
    snprintf(g_self, sizeof g_self, "%s/test_batch", dir);
    snprintf(g_bin, sizeof g_bin, "%s/../deltafin", dir);
    const char *dev = getenv("DELTAFIN_DEV_BIN");
    struct stat stt;
    char devp[4400];
    snprintf(devp, sizeof devp, "%s/../deltafin-dev", dir);
    if (dev && *dev) snprintf(g_gen, sizeof g_gen, "'%s' gen-random", dev);
    else if (stat(devp, &stt) == 0) snprintf(g_gen, sizeof g_gen, "'%s' gen-random", devp);
    else snprintf(g_gen, sizeof g_gen, "'%s' gen-random", g_bin);
    snprintf(g_dir, sizeof g_dir, "/tmp/df_test_batch_%d", (int)getpid());
    mkdir(g_dir, 0700);
    static const struct { const char *name, *args; } models[] = {
        {"llama-f32", "--arch llama --type f32 --seed 4"},
        {"llama-moe-q8_0", "--arch llama-moe --type q8_0 --seed 4"},
        {"qwen2moe-f32", "--arch qwen2moe --type f32 --seed 11"},
        {"qwen3moe-f16", "--arch qwen3moe --type f16 --seed 2"},
        {"qwen3moe-w256", "--arch qwen3moe --n-embd 256 --n-ff-exp 256 --n-ff 256 --seed 16"},
        {"olmoe-q8_0", "--arch olmoe --type q8_0 --seed 3"},
        {"ds2-v3-f32", "--arch deepseek2 --variant v3 --type f32 --seed 9"},
        {"ds2-legacy-q8_0", "--arch deepseek2 --variant legacy --type q8_0 --seed 2"},
        {"ds2-lite-f16", "--arch deepseek2 --variant lite --type f16 --seed 3"},
        {"k3-f32", "--arch kimi-k3 --type f32 --seed 2"},
        {"k3-q8_0", "--arch kimi-k3 --type q8_0 --n-layer 5 --n-expert 16 --n-expert-used 4 --seed 6"},
        {"ds4-q8_0", "--arch deepseek4 --type q8_0 --n-layer 5 --ratios 0,4,128,4,128 --seed 3"},
        {"gpt-oss-q8_0", "--arch gpt-oss --type q8_0 --expert-type mxfp4 --seed 3"},
        {"qwen3next-f32", "--arch qwen3next --type f32 --seed 2"},
        {"qwen35moe-q8_0", "--arch qwen35moe --type q8_0 --seed 3"},
        {"glm4moe-f32", "--arch glm4moe --type f32 --seed 2"},
        {"minimax-m2-q8_0", "--arch minimax-m2 --type q8_0 --seed 2"},
        {"ds32-f32", "--arch deepseek32 --type f32 --seed 2"},
    };
    const int n_models = (int)(sizeof models / sizeof models[0]);
    char paths[24][512];
    for (int i = 0; i < n_models; i++)
        if (!gen(models[i].name, models[i].args, paths[i], sizeof paths[i])) TEST_MAIN_END("test_batch");
    /* Q4_K (repacked rows in memory: ggml's gemm order for groups of 4 tokens) */
    char q4[600];
    snprintf(q4, sizeof q4, "%s/qwen3moe-q4_k.gguf", g_dir);
    deltafin_quantize_params qp = deltafin_quantize_default_params();
    qp.recipe = deltafin_quantize_recipe("Q4_K");
    qp.pure = true;
    int rc = deltafin_quantize(paths[4], q4, &qp, NULL);
    CHECK_MSG(rc == 0, "quantize Q4_K: %s", deltafin_errmsg());
    for (int i = 0; i < n_models; i++)
        if (i != 4) run_child("", paths[i], NULL);
    if (rc == 0) run_child("", q4, NULL);
    /* packed and streamed: experts through a 3-slot cache, every dense layer streamed */
    const char *streamed[] = {q4, paths[6], paths[10], paths[11]};
    for (int i = 0; i < 4; i++) {
        char pk[700], env[200];
        snprintf(pk, sizeof pk, "%s.packed.gguf", streamed[i]);
        deltafin_pack_params pp = {.progress = DELTAFIN_PROGRESS_NONE};
        const char *file = streamed[i];
        if (i != 2) { /* kimi-k3 streams from its plain file */
            rc = deltafin_pack(streamed[i], pk, &pp);
            CHECK_MSG(rc == 0, "pack %s: %s", streamed[i], deltafin_errmsg());
            if (rc) continue;
            file = pk;
        }
        uint64_t cache = slot3(file);
        CHECK(cache > 0);
        snprintf(env, sizeof env, "DELTAFIN_EXPERT_CACHE=%llu DELTAFIN_DENSE_RESIDENT=0", (unsigned long long)cache);
        run_child(env, file, "pread");
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    sh(cmd);
    TEST_MAIN_END("test_batch");
}
