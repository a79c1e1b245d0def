/* test_schema.c — the tensor schema walk (src/model/schema.c) on a synthetic architecture
 * that uses every kind of condition: dense-lead vs MoE, sliding-window layers, a NextN layer,
 * a probe (fused alternative), an arch bit and an arch dim, products of dims, globals before
 * and after the layer run; then binding that table from a real GGUF (members stored, the
 * second member of a fused tensor, optional tensors, is_moe, NextN tensors flagged unused,
 * the tied output), and every registered architecture's table is well formed. */
#include "testlib.h"
#include "model/model.h"
#include "model/schema.h"
#include "format/gguf.h"
#include "kernels/quant.h"

#include <unistd.h>

enum { T_ARCH_BIT = DF_W_ARCH(0) };
enum { T_ARCH_DIM = DF_D_ARCH };

static uint32_t t_props(const df_hparams *hp, int il) {
    (void)hp;
    return il == 1 || il < 0 ? T_ARCH_BIT : 0;
}
static void t_dims(const df_hparams *hp, int il, int64_t *d) { d[T_ARCH_DIM] = 100 + il + hp->n_embd; }

static const df_tensor_spec t_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_TS("blk.%d.attn_norm.weight", DF_LF(attn_norm), DF_T_NORM, DF_R_NORM, 0, 0, DF_D_EMBD),
    DF_TS("blk.%d.swa.weight", DF_LF(wq), 0, DF_R_MAT, DF_W_SWA, 0, DF_D_EMBD, DF_D_Q),
    DF_TS("blk.%d.full.weight", DF_LF(wq), 0, DF_R_MAT, 0, DF_W_SWA, DF_D_EMBD, DF_D_Q),
    {"blk.%d.fused.weight", DF_LF(exps[DF_EXPERT_GATE]), DF_LF(exps[DF_EXPERT_UP]), DF_T_EXPERT, DF_R_MAT,
     DF_W_MOE | DF_W_FUSED_GATE_UP, 0, {DF_D_EMBD, DF_DX(2, DF_D_FF_EXP), DF_D_EXPERT}},
    DF_TS("blk.%d.gate.weight", DF_LF(exps[DF_EXPERT_GATE]), DF_T_EXPERT, DF_R_MAT, DF_W_MOE, DF_W_FUSED_GATE_UP,
          DF_D_EMBD, DF_D_FF_EXP, DF_D_EXPERT),
    DF_TS("blk.%d.dense.weight", DF_LF(ffn_up), 0, DF_R_MAT, DF_W_DENSE, 0, DF_D_EMBD, DF_D_FF),
    DF_TS("blk.%d.archbit.weight", DF_LF(ffn_down), DF_T_OPTIONAL, DF_R_MAT, T_ARCH_BIT, 0, T_ARCH_DIM),
    DF_TS("blk.%d.nextn.weight", 0, 0, DF_R_MAT, DF_W_NEXTN, 0, DF_DX(2, DF_D_EMBD), DF_D_EMBD),
    DF_SCHEMA_OUTPUT(DF_T_OPTIONAL),
    DF_TS("extra.weight", DF_MF(rope_freqs), DF_T_NORM, DF_R_NORM, T_ARCH_BIT, 0, DF_D_ONE),
};
static const df_schema_probe t_probes[] = {{DF_W_FUSED_GATE_UP, "blk.%d.fused.weight"}};
static const df_arch t_arch = {.name = "schematest", DF_SCHEMA(t_tensors), DF_PROBES(t_probes),
                               .layer_props = t_props, .dims = t_dims};

static df_hparams t_hparams(void) {
    df_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_embd = 32; hp.n_vocab = 10; hp.n_layer = 4; hp.n_head = 2; hp.n_head_kv = 1;
    hp.n_embd_head_k = hp.n_embd_head_v = 16; hp.n_ff = 64; hp.n_ff_exp = 8; hp.n_expert = 3;
    hp.n_layer_dense_lead = 1; hp.n_layer_nextn = 1;
    hp.layer_swa[1] = hp.layer_swa[3] = 1;
    return hp;
}

/* the walk as text: one "name n_dims ne0 ne1 ne2" line per visit */
typedef struct { char buf[4096]; size_t n; bool skip_optional; } rec;
static bool rec_has(void *ud, uint32_t bit, const char *name) {
    (void)ud;
    return bit == DF_W_FUSED_GATE_UP && !strcmp(name, "blk.2.fused.weight");
}
static int rec_visit(void *ud, const df_tensor_spec *s, int il, const char *name, int n_dims, const int64_t ne[3]) {
    rec *r = ud;
    (void)il;
    if (r->skip_optional && (s->flags & DF_T_OPTIONAL)) return DF_OK;
    r->n += (size_t)snprintf(r->buf + r->n, sizeof r->buf - r->n, "%s %d %lld %lld %lld\n", name, n_dims,
                             (long long)ne[0], (long long)ne[1], (long long)ne[2]);
    return DF_OK;
}

static const char *t_expect =
    "token_embd.weight 2 32 10 1\n"
    "blk.0.attn_norm.weight 1 32 1 1\n" "blk.0.full.weight 2 32 32 1\n" "blk.0.dense.weight 2 32 64 1\n"
    "blk.1.attn_norm.weight 1 32 1 1\n" "blk.1.swa.weight 2 32 32 1\n" "blk.1.gate.weight 3 32 8 3\n"
    "blk.1.archbit.weight 1 133 1 1\n"
    "blk.2.attn_norm.weight 1 32 1 1\n" "blk.2.full.weight 2 32 32 1\n" "blk.2.fused.weight 3 32 16 3\n"
    "blk.3.attn_norm.weight 1 32 1 1\n" "blk.3.swa.weight 2 32 32 1\n" "blk.3.gate.weight 3 32 8 3\n"
    "blk.3.nextn.weight 2 64 32 1\n"
    "output_norm.weight 1 32 1 1\n" "output.weight 2 32 10 1\n" "extra.weight 1 1 1 1\n";

static void test_walk(void) {
    df_hparams hp = t_hparams();
    rec r = {.n = 0};
    const df_schema_ops ops = {.has = rec_has, .visit = rec_visit, .ud = &r};
    CHECK_EQ_INT(df_schema_walk(&t_arch, &hp, &ops), DF_OK);
    CHECK_STR(r.buf, t_expect);
    CHECK_EQ_INT(df_schema_props(&t_arch, &hp, 0), DF_W_DENSE | DF_W_ATTN);
    CHECK_EQ_INT(df_schema_props(&t_arch, &hp, 1), DF_W_MOE | DF_W_ATTN | DF_W_SWA | T_ARCH_BIT);
    CHECK_EQ_INT(df_schema_props(&t_arch, &hp, 3), DF_W_MOE | DF_W_ATTN | DF_W_SWA | DF_W_NEXTN);
    CHECK_EQ_INT(df_schema_props(&t_arch, &hp, -1), T_ARCH_BIT);
    hp.layer_recr[2] = 1;
    CHECK_EQ_INT(df_schema_props(&t_arch, &hp, 2), DF_W_MOE | DF_W_RECR);
}

/* writes the walk's tensors (without the optional ones, without output.weight) as a GGUF */
typedef struct { df_gguf_writer *w; void *bufs[64]; int n; } wr;
static int wr_visit(void *ud, const df_tensor_spec *s, int il, const char *name, int n_dims, const int64_t ne[3]) {
    wr *x = ud;
    (void)il;
    if (s->flags & DF_T_OPTIONAL) return DF_OK;
    size_t n = (size_t)(ne[0] * ne[1] * ne[2]);
    float *f = calloc(n, sizeof(float));
    x->bufs[x->n++] = f;
    return df_gguf_w_tensor(x->w, name, DF_TYPE_F32, n_dims, ne, f);
}

static void test_bind(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/df_test_schema_%d.gguf", (int)getpid());
    df_hparams hp = t_hparams();
    wr x = {.w = df_gguf_writer_new(32)};
    const df_schema_ops ops = {.has = rec_has, .visit = wr_visit, .ud = &x};
    CHECK_EQ_INT(df_schema_walk(&t_arch, &hp, &ops), DF_OK);
    CHECK_EQ_INT(df_gguf_writer_save(x.w, path), DF_OK);
    df_gguf_writer_free(x.w);
    for (int i = 0; i < x.n; i++) free(x.bufs[i]);

    df_model m;
    memset(&m, 0, sizeof m);
    m.path = path;
    CHECK_EQ_INT(df_gguf_open(path, &m.gguf), DF_OK);
    unlink(path);
    if (!m.gguf) return;
    m.arch = &t_arch;
    m.hp = hp;
    m.layers = calloc((size_t)hp.n_layer, sizeof(df_layer));
    m.cap_bound = m.gguf->n_tensors;
    m.tensors = calloc((size_t)m.cap_bound, sizeof(df_tensor));
    CHECK_EQ_INT(df_model_bind_schema(&m), DF_OK);
    CHECK_EQ_INT(m.n_bound, m.gguf->n_tensors);
    CHECK(m.output == m.tok_embd && m.tok_embd && !strcmp(m.tok_embd->info->name, "token_embd.weight"));
    CHECK(m.rope_freqs && !strcmp(m.rope_freqs->info->name, "extra.weight"));
    const df_layer *L = m.layers;
    /* the NextN layer 3 has routed experts in the file but never runs: not a MoE layer to the store */
    CHECK(!L[0].is_moe && L[1].is_moe && L[2].is_moe && !L[3].is_moe);
    CHECK(L[0].ffn_up && !L[0].exps[DF_EXPERT_GATE]);
    CHECK(L[1].wq && !strcmp(L[1].wq->info->name, "blk.1.swa.weight") && !strcmp(L[2].wq->info->name, "blk.2.full.weight"));
    CHECK(L[1].exps[DF_EXPERT_GATE] && !L[1].exps[DF_EXPERT_UP]);
    CHECK(L[2].exps[DF_EXPERT_GATE] && L[2].exps[DF_EXPERT_GATE] == L[2].exps[DF_EXPERT_UP]);
    CHECK(!L[1].ffn_down);                 /* optional, absent */
    for (int i = 0; i < m.n_bound; i++) {
        const df_tensor *t = &m.tensors[i];
        bool nextn = !strncmp(t->info->name, "blk.3.", 6);
        CHECK_MSG(((t->flags & DF_T_UNUSED) != 0) == nextn, "%s flags %d", t->info->name, t->flags);
    }
    /* a wrong shape names the tensor */
    m.n_bound = 0;
    memset(m.layers, 0, sizeof(df_layer) * (size_t)hp.n_layer);
    m.hp.n_ff = 65;
    CHECK_EQ_INT(df_model_bind_schema(&m), DF_ERR_FORMAT);
    CHECK_MSG(strstr(df_errmsg(), "blk.0.dense.weight") && strstr(df_errmsg(), "wrong shape"), "%s", df_errmsg());
    free(m.layers);
    free(m.tensors);
    df_gguf_close(m.gguf);
}

/* every registered table: names with at most one "%d", shapes 1-3 dims of known symbols,
 * members inside df_layer / df_model */
static void test_tables(void) {
    const char *names[] = {"llama", "qwen2moe", "qwen3moe", "olmoe", "deepseek2", "deepseek32", "glm-dsa",
                           "kimi-k3", "gpt-oss", "qwen3next", "qwen35moe", "glm4moe", "minimax-m2"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const df_arch *a = df_arch_find(names[k]);
        CHECK_MSG(a && a->n_tensors > 0, "%s", names[k]);
        if (!a) continue;
        for (int i = 0; i < a->n_tensors; i++) {
            const df_tensor_spec *s = &a->tensors[i];
            const char *p = strchr(s->name, '%');
            const bool layer = p != NULL;
            CHECK_MSG(!p || (p[1] == 'd' && !strchr(p + 1, '%')), "%s: %s", names[k], s->name);
            CHECK_MSG(s->ne[0] != DF_D_NONE, "%s: %s", names[k], s->name);
            for (int d = 0; d < 3; d++) CHECK_MSG(s->ne[d] % 64 < DF_D_COUNT, "%s: %s", names[k], s->name);
            size_t lim = layer ? sizeof(df_layer) : sizeof(df_model);
            CHECK_MSG(s->field <= lim && s->field2 <= lim, "%s: %s", names[k], s->name);
            CHECK_MSG(s->field || (s->flags & DF_T_UNUSED), "%s: %s binds nothing", names[k], s->name);
        }
    }
}

int main(void) {
    test_walk();
    test_bind();
    test_tables();
    printf("test_schema: %d passed, %d failed\n", t_pass, t_fail);
    return t_fail ? 1 : 0;
}
