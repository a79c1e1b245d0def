/* model.c — model loading: architecture dispatch, common hyperparameters (formats.md §3.0),
 * tensor binding with exact shape checks, resident weights read with pread into anonymous
 * memory (no mmap of the file, no page-cache residency, no type conversion), the resident
 * expert provider, expert file locations for streaming providers, and the memory plan.
 * Invariant: see model.h. Threading: load/free on one thread; the loaded model is read-only. */
#include "model/model.h"
#include "weights/dense_stream.h"
#include "runtime/plan.h"
#include "format/pack.h"
#include "kernels/quant.h"
#include "kernels/kernels.h"
#include "text/tokenizer.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <sys/mman.h>

/* ---- architecture registry ------------------------------------------------------------
 * One line per family in src/models/. The references must be strong: a weak reference would
 * not pull the object out of the static library. */
extern const df_arch df_arch_llama;
extern const df_arch df_arch_qwen2moe;
extern const df_arch df_arch_qwen3moe;
extern const df_arch df_arch_olmoe;
extern const df_arch df_arch_deepseek2;
extern const df_arch df_arch_kimi_k3;

const df_arch *df_arch_find(const char *name) {
    const df_arch *all[] = {&df_arch_llama, &df_arch_qwen2moe, &df_arch_qwen3moe, &df_arch_olmoe,
                             &df_arch_deepseek2, &df_arch_kimi_k3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    return NULL;
}

/* ---- keys -------------------------------------------------------------------------------- */
static int key_u32(df_model *m, const char *suffix, uint32_t *out, bool required) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    int rc = df_gguf_get_u32(m->gguf, key, out);
    if (rc == DF_ERR_NOTFOUND) {
        if (required) return df_err(DF_ERR_FORMAT, "%s: missing required key '%s'", m->path, key);
        return DF_OK;
    }
    return rc;
}

static int key_f32(df_model *m, const char *suffix, float *out, bool required) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    int rc = df_gguf_get_f32(m->gguf, key, out);
    if (rc == DF_ERR_NOTFOUND) {
        if (required) return df_err(DF_ERR_FORMAT, "%s: missing required key '%s'", m->path, key);
        return DF_OK;
    }
    return rc;
}

/* Per-layer u32 (scalar or array); the engine supports uniform values only. */
static int key_u32_uniform(df_model *m, const char *suffix, uint32_t *out, bool required) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    if (!df_gguf_find(m->gguf, key)) {
        if (required) return df_err(DF_ERR_FORMAT, "%s: missing required key '%s'", m->path, key);
        return DF_OK;
    }
    int n = m->hp.n_layer;
    uint32_t *v = df_malloc(sizeof(uint32_t) * (size_t)n);
    if (!v) return DF_ERR_NOMEM;
    int rc = df_gguf_get_u32_per_layer(m->gguf, key, v, n);
    if (rc == DF_OK) {
        for (int i = 1; i < n; i++)
            if (v[i] != v[0]) {
                rc = df_err(DF_ERR_UNSUPPORTED, "%s: key '%s' varies per layer (not supported)",
                            m->path, key);
                break;
            }
        if (rc == DF_OK) *out = v[0];
    }
    free(v);
    return rc;
}

int df_model_key_u32(df_model *m, const char *suffix, uint32_t *out, bool required) {
    return key_u32(m, suffix, out, required);
}
int df_model_key_f32(df_model *m, const char *suffix, float *out, bool required) {
    return key_f32(m, suffix, out, required);
}

#define TRY(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

static float get_mscale(float s, float mm) { return s <= 1.0f ? 1.0f : 1.0f + 0.1f * mm * logf(s); }

static int load_common_hparams(df_model *m) {
    df_hparams *hp = &m->hp;
    uint32_t u = 0;
    TRY(key_u32(m, "context_length", &u, true)); hp->n_ctx_train = (int)u;
    TRY(key_u32(m, "embedding_length", &u, true)); hp->n_embd = (int)u;
    TRY(key_u32(m, "block_count", &u, true)); hp->n_layer = (int)u;
    if (hp->n_layer <= 0 || hp->n_layer > DF_MAX_LAYERS)
        return df_err(DF_ERR_FORMAT, "%s: block_count %d out of range (1..%d)", m->path, hp->n_layer,
                      DF_MAX_LAYERS);
    if (hp->n_embd <= 0 || hp->n_embd > (1 << 20))
        return df_err(DF_ERR_FORMAT, "%s: embedding_length %d out of range", m->path, hp->n_embd);
    u = 0; TRY(key_u32_uniform(m, "feed_forward_length", &u, false)); hp->n_ff = (int)u;
    u = 0; TRY(key_u32_uniform(m, "attention.head_count", &u, true)); hp->n_head = (int)u;
    u = (uint32_t)hp->n_head;
    if (m->arch->head_kv_per_layer) {
        /* kimi-k3: per-layer array (0 = recurrent layer) or a scalar */
        char kk[256];
        snprintf(kk, sizeof kk, "%s.attention.head_count_kv", m->arch->name);
        uint32_t v[DF_MAX_LAYERS];
        for (int i = 0; i < hp->n_layer; i++) v[i] = u;
        if (df_gguf_find(m->gguf, kk)) TRY(df_gguf_get_u32_per_layer(m->gguf, kk, v, hp->n_layer));
        u = 0;
        for (int i = 0; i < hp->n_layer; i++) {
            hp->layer_recr[i] = v[i] == 0;
            if (v[i] > u) u = v[i];
        }
        if (u == 0) u = 1; /* all layers recurrent: no KV heads, keep the checks below simple */
    } else {
        TRY(key_u32_uniform(m, "attention.head_count_kv", &u, false));
    }
    hp->n_head_kv = (int)u;
    if (hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv)
        return df_err(DF_ERR_FORMAT, "%s: bad head counts (n_head %d, n_head_kv %d)", m->path,
                      hp->n_head, hp->n_head_kv);
    u = (uint32_t)(hp->n_embd / hp->n_head);
    TRY(key_u32(m, "attention.key_length", &u, false)); hp->n_embd_head_k = (int)u;
    u = (uint32_t)(hp->n_embd / hp->n_head);
    TRY(key_u32(m, "attention.value_length", &u, false)); hp->n_embd_head_v = (int)u;
    u = (uint32_t)hp->n_embd_head_k;
    TRY(key_u32(m, "rope.dimension_count", &u, false)); hp->n_rot = (int)u;
    if (hp->n_embd_head_k <= 0 || hp->n_embd_head_v <= 0 || hp->n_embd_head_k > 4096 ||
        hp->n_embd_head_v > 4096 || hp->n_rot < 0 || hp->n_rot > hp->n_embd_head_k || (hp->n_rot & 1))
        return df_err(DF_ERR_FORMAT, "%s: bad head dims (k %d, v %d, n_rot %d)", m->path,
                      hp->n_embd_head_k, hp->n_embd_head_v, hp->n_rot);
    TRY(key_f32(m, "attention.layer_norm_rms_epsilon", &hp->eps, true));

    /* vocabulary size: key, else the token list length */
    u = 0;
    TRY(key_u32(m, "vocab_size", &u, false));
    if (!u) {
        const df_gguf_kv *kv = df_gguf_find(m->gguf, "tokenizer.ggml.tokens");
        if (kv && kv->type == DF_GGUF_ARRAY) u = (uint32_t)kv->arr_n;
    }
    hp->n_vocab = (int)u;

    /* RoPE */
    hp->rope_freq_base = 10000.0f;
    TRY(key_f32(m, "rope.freq_base", &hp->rope_freq_base, false));
    char key[256];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    const char *stype = "linear";
    int rc = df_gguf_get_str(m->gguf, key, &stype);
    if (rc < 0 && rc != DF_ERR_NOTFOUND) return rc;
    bool yarn = false;
    if (!strcmp(stype, "yarn")) yarn = true;
    else if (strcmp(stype, "none") && strcmp(stype, "linear"))
        return df_err(DF_ERR_UNSUPPORTED, "%s: rope scaling type '%s' not supported", m->path, stype);
    float factor = 0.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", m->arch->name);
    rc = df_gguf_get_f32(m->gguf, key, &factor);
    if (rc == DF_ERR_NOTFOUND) {
        snprintf(key, sizeof key, "%s.rope.scale_linear", m->arch->name);
        rc = df_gguf_get_f32(m->gguf, key, &factor);
    }
    if (rc < 0 && rc != DF_ERR_NOTFOUND) return rc;
    hp->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    u = (uint32_t)hp->n_ctx_train;
    TRY(key_u32(m, "rope.scaling.original_context_length", &u, false)); hp->n_ctx_orig = (int)u;
    float rope_attn_factor = 1.0f;
    TRY(key_f32(m, "rope.scaling.attn_factor", &rope_attn_factor, false));
    hp->yarn_log_mul = 0.0f;
    TRY(key_f32(m, "rope.scaling.yarn_log_multiplier", &hp->yarn_log_mul, false));
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_ext_factor = yarn ? 1.0f : 0.0f;
    /* attn_factor as llama_context computes it (formats.md §3.0 YaRN) */
    float attn_factor = 1.0f;
    if (hp->yarn_ext_factor != 0.0f) {
        float fac = 1.0f / hp->rope_freq_scale;
        if (hp->yarn_log_mul != 0.0f)
            attn_factor = get_mscale(fac, hp->yarn_log_mul) / get_mscale(fac, hp->yarn_log_mul);
        else
            attn_factor = get_mscale(fac, 1.0f);
        attn_factor *= 1.0f / (1.0f + 0.1f * logf(fac));
    }
    hp->rope_attn_factor = attn_factor * rope_attn_factor;

    /* MoE */
    u = 0; TRY(key_u32(m, "expert_count", &u, false)); hp->n_expert = (int)u;
    u = 0; TRY(key_u32(m, "expert_used_count", &u, false)); hp->n_expert_used = (int)u;
    u = 0; TRY(key_u32(m, "expert_feed_forward_length", &u, false)); hp->n_ff_exp = (int)u;
    u = 0; TRY(key_u32(m, "expert_shared_feed_forward_length", &u, false)); hp->n_ff_shexp = (int)u;
    if (hp->n_expert < 0 || hp->n_expert > 65536 || hp->n_expert_used < 0 ||
        hp->n_expert_used > hp->n_expert || (hp->n_expert > 0 && hp->n_expert_used == 0) ||
        (hp->n_expert == 0 && hp->n_expert_used != 0))
        return df_err(DF_ERR_FORMAT, "%s: bad expert counts (expert_count %d, expert_used_count %d)",
                      m->path, hp->n_expert, hp->n_expert_used);
    hp->gating = DF_GATING_SOFTMAX;
    hp->kq_scale = 1.0f / sqrtf((float)hp->n_embd_head_k);
    return DF_OK;
}

/* ---- binding ----------------------------------------------------------------------------- */
static void fmt_shape(char *buf, size_t cap, int n, const int64_t *ne) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

df_tensor *df_model_tensor(df_model *m, const char *fmt, int il, int flags, int n_dims,
                           int64_t ne0, int64_t ne1, int64_t ne2) {
    if (m->bind_status < 0) return NULL;
    char name[128];
    snprintf(name, sizeof name, fmt, il);
    const df_gguf_tensor *t = df_gguf_tensor_find(m->gguf, name);
    if (!t && m->pack && (flags & DF_T_EXPERT)) t = df_model_pack_tensor(m, name); /* packed model */
    if (!t) {
        if (!(flags & DF_T_OPTIONAL))
            m->bind_status = df_err(DF_ERR_FORMAT, "%s: missing tensor '%s' (required by arch %s)",
                                    m->path, name, m->arch->name);
        return NULL;
    }
    int64_t want[4] = {ne0, n_dims > 1 ? ne1 : 1, n_dims > 2 ? ne2 : 1, 1};
    bool ok = true;
    for (int i = 0; i < 4; i++) if (t->ne[i] != want[i]) ok = false;
    if (!ok) {
        char a[96], b[96];
        fmt_shape(a, sizeof a, n_dims, want);
        fmt_shape(b, sizeof b, t->n_dims > 0 ? t->n_dims : 1, t->ne);
        m->bind_status = df_err(DF_ERR_FORMAT, "%s: tensor '%s' has wrong shape; expected %s, got %s",
                                m->path, name, a, b);
        return NULL;
    }
    const df_type_traits *tt = df_type_info(t->type);
    if (!tt || !tt->blck) {
        m->bind_status = df_err(DF_ERR_FORMAT, "%s: tensor '%s' has invalid type %d", m->path, name,
                                t->type);
        return NULL;
    }
    if ((flags & DF_T_NORM) && t->type != DF_TYPE_F32) {
        m->bind_status = df_err(DF_ERR_UNSUPPORTED, "%s: tensor '%s' is %s; 1-D tensors must be F32",
                                m->path, name, tt->name);
        return NULL;
    }
    if (!tt->can_compute) {
        m->bind_status = df_err(DF_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, not supported by "
                                "this build", m->path, name, tt->name);
        return NULL;
    }
    if (ne0 % tt->blck) {
        m->bind_status = df_err(DF_ERR_FORMAT, "%s: tensor '%s': row length %lld not a multiple of "
                                "the %s block size %d", m->path, name, (long long)ne0, tt->name, tt->blck);
        return NULL;
    }
    for (int i = 0; i < m->n_bound; i++)
        if (m->tensors[i].info == t) return &m->tensors[i]; /* bound twice (tied output) */
    DF_ASSERT(m->n_bound < m->cap_bound);
    df_tensor *d = &m->tensors[m->n_bound++];
    d->info = t;
    d->type = t->type;
    memcpy(d->ne, t->ne, sizeof d->ne);
    d->data = NULL;
    (void)(flags & DF_T_EXPERT);
    return d;
}

int df_bind_output(df_model *m, bool output_optional) {
    const df_hparams *hp = &m->hp;
    m->tok_embd = df_model_tensor(m, "token_embd.weight", 0, 0, 2, hp->n_embd, hp->n_vocab, 0);
    m->output_norm = df_model_tensor(m, "output_norm.weight", 0, DF_T_NORM, 1, hp->n_embd, 0, 0);
    m->output = df_model_tensor(m, "output.weight", 0, output_optional ? DF_T_OPTIONAL : 0, 2,
                                hp->n_embd, hp->n_vocab, 0);
    if (!m->output && m->bind_status == DF_OK) m->output = m->tok_embd; /* tied */
    return m->bind_status;
}

void df_bind_attn(df_model *m, int il, bool out_bias) {
    const df_hparams *hp = &m->hp;
    df_layer *L = &m->layers[il];
    int64_t nq = (int64_t)hp->n_head * hp->n_embd_head_k;
    int64_t nk = (int64_t)hp->n_head_kv * hp->n_embd_head_k;
    int64_t nv = (int64_t)hp->n_head_kv * hp->n_embd_head_v;
    int64_t no = (int64_t)hp->n_head * hp->n_embd_head_v;
    const int opt = DF_T_OPTIONAL;
    L->attn_norm = df_model_tensor(m, "blk.%d.attn_norm.weight", il, DF_T_NORM, 1, hp->n_embd, 0, 0);
    char qkvname[64];
    snprintf(qkvname, sizeof qkvname, "blk.%d.attn_qkv.weight", il);
    if (df_gguf_tensor_find(m->gguf, qkvname)) {
        L->wqkv = df_model_tensor(m, "blk.%d.attn_qkv.weight", il, 0, 2, hp->n_embd, nq + nk + nv, 0);
        L->bqkv = df_model_tensor(m, "blk.%d.attn_qkv.bias", il, opt | DF_T_NORM, 1, nq + nk + nv, 0, 0);
    } else {
        L->wq = df_model_tensor(m, "blk.%d.attn_q.weight", il, 0, 2, hp->n_embd, nq, 0);
        L->wk = df_model_tensor(m, "blk.%d.attn_k.weight", il, 0, 2, hp->n_embd, nk, 0);
        L->wv = df_model_tensor(m, "blk.%d.attn_v.weight", il, 0, 2, hp->n_embd, nv, 0);
        L->bq = df_model_tensor(m, "blk.%d.attn_q.bias", il, opt | DF_T_NORM, 1, nq, 0, 0);
        L->bk = df_model_tensor(m, "blk.%d.attn_k.bias", il, opt | DF_T_NORM, 1, nk, 0, 0);
        L->bv = df_model_tensor(m, "blk.%d.attn_v.bias", il, opt | DF_T_NORM, 1, nv, 0, 0);
    }
    L->wo = df_model_tensor(m, "blk.%d.attn_output.weight", il, 0, 2, no, hp->n_embd, 0);
    if (out_bias)
        L->bo = df_model_tensor(m, "blk.%d.attn_output.bias", il, opt | DF_T_NORM, 1, hp->n_embd, 0, 0);
}

void df_bind_moe_exps(df_model *m, int il, int64_t n_ff_exp) {
    const df_hparams *hp = &m->hp;
    df_layer *L = &m->layers[il];
    L->is_moe = true;
    L->gate_inp = df_model_tensor(m, "blk.%d.ffn_gate_inp.weight", il, 0, 2, hp->n_embd, hp->n_expert, 0);
    L->exps[DF_EXPERT_GATE] = df_model_tensor(m, "blk.%d.ffn_gate_exps.weight", il, DF_T_EXPERT, 3,
                                              hp->n_embd, n_ff_exp, hp->n_expert);
    L->exps[DF_EXPERT_UP] = df_model_tensor(m, "blk.%d.ffn_up_exps.weight", il, DF_T_EXPERT, 3,
                                            hp->n_embd, n_ff_exp, hp->n_expert);
    L->exps[DF_EXPERT_DOWN] = df_model_tensor(m, "blk.%d.ffn_down_exps.weight", il, DF_T_EXPERT, 3,
                                              n_ff_exp, hp->n_embd, hp->n_expert);
}

/* ---- expert locations and the resident provider ------------------------------------------- */
void df_model_expert_shape(const df_model *m, int layer, int part, int64_t *n_in, int64_t *n_out,
                           uint64_t *nbytes) {
    const df_tensor *t = m->layers[layer].exps[part];
    /* fused ffn_gate_up_exps: gate and up share one tensor, rows [0, n_ff) and [n_ff, 2 n_ff) */
    const int64_t rows = part != DF_EXPERT_DOWN && df_layer_fused_gate_up(&m->layers[layer]) ? t->ne[1] / 2 : t->ne[1];
    if (n_in) *n_in = t->ne[0];
    if (n_out) *n_out = rows;
    if (nbytes) *nbytes = df_type_row_bytes(t->type, t->ne[0]) * (uint64_t)rows;
}

int df_model_expert_loc(const df_model *m, int layer, int expert, int part, df_expert_loc *out) {
    if (layer < 0 || layer >= m->hp.n_layer || !m->layers[layer].is_moe)
        return df_err(DF_ERR_INVALID, "expert_loc: layer %d has no routed experts", layer);
    if (expert < 0 || expert >= m->hp.n_expert || part < 0 || part >= DF_EXPERT_NPARTS)
        return df_err(DF_ERR_INVALID, "expert_loc: bad expert %d / part %d", expert, part);
    if (m->pack) return df_pack_expert_loc(m->pack, layer, expert, part, out);
    const df_tensor *t = m->layers[layer].exps[part];
    uint64_t bytes = df_type_row_bytes(t->type, t->ne[0]) * (uint64_t)t->ne[1];
    out->shard = t->info->shard;
    out->offset = t->info->offset + (uint64_t)expert * bytes;
    out->nbytes = bytes;
    if (part != DF_EXPERT_DOWN && df_layer_fused_gate_up(&m->layers[layer])) {
        out->nbytes = bytes / 2;
        if (part == DF_EXPERT_UP) out->offset += bytes / 2;
    }
    out->type = t->type;
    return DF_OK;
}

static int resident_acquire(void *ud, int layer, int expert, df_expert_w *out) {
    df_model *m = ud;
    for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
        const df_tensor *t = m->layers[layer].exps[p];
        uint64_t bytes = df_type_row_bytes(t->type, t->ne[0]) * (uint64_t)t->ne[1];
        out->w[p] = (const char *)t->data + (uint64_t)expert * bytes;
        if (p == DF_EXPERT_UP && df_layer_fused_gate_up(&m->layers[layer])) out->w[p] = (const char *)out->w[p] + bytes / 2;
        out->type[p] = t->type;
    }
    return DF_OK;
}
static void resident_release(void *ud, int layer, int expert) { (void)ud; (void)layer; (void)expert; }

void df_model_set_expert_provider(df_model *m, const df_expert_provider *p) {
    if (m->has_provider && m->provider.destroy) m->provider.destroy(m->provider.ud);
    m->provider = *p;
    m->has_provider = true;
}

/* ---- loading ----------------------------------------------------------------------------- */
static bool is_expert(const df_model *m, const df_tensor *t) {
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < DF_EXPERT_NPARTS; p++)
            if (m->layers[l].exps[p] == t) return true;
    return false;
}

static void *anon_alloc(uint64_t n) {
    if (n == 0) n = 1;
    void *p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int load_data(df_model *m, int flags) {
    bool skip = flags & DF_LOAD_SKIP_EXPERTS;
    uint64_t off_d = 0, off_e = 0;
    uint64_t *offs = df_calloc((size_t)m->n_bound, sizeof(uint64_t));
    if (!offs) return DF_ERR_NOMEM;
    m->expert_file_bytes = 0;
    for (int i = 0; i < m->n_bound; i++) {
        df_tensor *t = &m->tensors[i];
        bool ex = is_expert(m, t);
        if (ex) m->expert_file_bytes += t->info->nbytes;
        uint64_t *o = ex ? &off_e : &off_d;
        if (ex && skip) continue;
        if (df_dense_tensor_streamed(m, t)) continue; /* read per pass (dense_stream.c) */
        *o = df_pad(*o, 64);
        offs[i] = *o;
        if (!df_add_ok(*o, t->info->nbytes, o)) { free(offs); return df_err(DF_ERR_RANGE, "size overflow"); }
    }
    m->dense_bytes = off_d;
    m->expert_bytes = skip ? 0 : off_e;
    uint64_t need = m->dense_bytes + m->expert_bytes;
    if (m->params.mem_limit && need > m->params.mem_limit) {
        char a[32], b[32];
        free(offs);
        return df_err(DF_ERR_RANGE, "%s: resident weights need %s but the memory limit is %s", m->path,
                      df_fmt_bytes(need, a, sizeof a), df_fmt_bytes(m->params.mem_limit, b, sizeof b));
    }
    m->dense_mem = anon_alloc(m->dense_bytes);
    if (!m->dense_mem) { free(offs); return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes for weights",
                                                   (unsigned long long)m->dense_bytes); }
    if (m->expert_bytes) {
        m->expert_mem = anon_alloc(m->expert_bytes);
        if (!m->expert_mem) { free(offs); return df_err(DF_ERR_NOMEM, "cannot allocate %llu bytes for experts",
                                                        (unsigned long long)m->expert_bytes); }
    }
    uint64_t done = 0, t0 = df_time_ns(), last = t0, to_read = 0;
    for (int i = 0; i < m->n_bound; i++)
        if (!(skip && is_expert(m, &m->tensors[i])) && !df_dense_tensor_streamed(m, &m->tensors[i]))
            to_read += m->tensors[i].info->nbytes;
    for (int i = 0; i < m->n_bound; i++) {
        df_tensor *t = &m->tensors[i];
        bool ex = is_expert(m, t);
        if (ex && skip) continue;
        if (df_dense_tensor_streamed(m, t)) continue;
        t->data = (char *)(ex ? m->expert_mem : m->dense_mem) + offs[i];
        int rc = df_gguf_read(m->gguf, t->info, 0, t->data, t->info->nbytes);
        if (rc < 0) { free(offs); return df_err_prefix(rc, "%s: reading tensor '%s'", m->path, t->info->name); }
        /* Under --mem-limit the page cache counts too (a memory cgroup charges it): drop the
         * pages just copied into anonymous memory. Without a limit they stay, so a second
         * launch of the same model loads from RAM. */
        if (m->params.mem_limit && t->info->shard >= 0 && t->info->shard < m->gguf->n_shards &&
            m->gguf->shards[t->info->shard].fd >= 0)
            (void)posix_fadvise(m->gguf->shards[t->info->shard].fd, (off_t)t->info->offset, (off_t)t->info->nbytes,
                                POSIX_FADV_DONTNEED);
        done += t->info->nbytes;
        if (m->params.progress_cb) m->params.progress_cb(m->params.progress_ud, done, to_read);
        if (m->params.progress && df_time_ns() - last > 500000000ull) {
            last = df_time_ns();
            df_log(DF_LOG_INFO, "loading: %.1f%%", 100.0 * (double)done / (double)(need ? need : 1));
        }
    }
    free(offs);
    if (m->params.mlock) {
        if (mlock(m->dense_mem, (size_t)(m->dense_bytes ? m->dense_bytes : 1)) != 0)
            df_log(DF_LOG_WARN, "mlock of %llu bytes failed (RLIMIT_MEMLOCK?)", (unsigned long long)m->dense_bytes);
    }
    df_log(DF_LOG_DEBUG, "loaded %llu bytes in %.2f s", (unsigned long long)need, (df_time_ns() - t0) / 1e9);
    return DF_OK;
}

/* Resident weights that only df_matmul / df_matmul_id read get the layout the selected kernels
 * want (df_repack_type: Q4_K as 8 interleaved rows on AVX-512) — the same numbers, faster. Not
 * token_embd (row lookups; also the tied output), not the per-head 3-D attn_k_b / attn_v_b
 * (df_matmul_3d), not routers, not streamed tensors (read from the file per pass: no data here). */
static int repack_weights(df_model *m) {
    const int to = df_repack_type(DF_TYPE_Q4_K);
    if (to < 0) return DF_OK;
    uint64_t t0 = df_time_ns(), bytes = 0;
    int count = 0, rc = DF_OK;
    df_pool *pool = df_pool_create(m->params.n_threads);
    for (int l = -1; l < m->hp.n_layer; l++) {
        df_tensor *list[32];
        int n = 0;
        if (l < 0) {
            list[n++] = m->output;
        } else {
            const df_layer *L = &m->layers[l];
            df_tensor *w[] = {L->wq, L->wk, L->wv, L->wqkv, L->wo, L->ffn_gate, L->ffn_up, L->ffn_down,
                              L->gate_shexp, L->up_shexp, L->down_shexp, L->wq_a, L->wq_b, L->wkv_a_mqa,
                              L->wkv_b, L->attn_gate, L->routed_down, L->routed_up, L->ssm_f_a, L->ssm_f_b,
                              L->ssm_beta, L->ssm_g, L->exps[0], L->exps[1], L->exps[2]};
            for (size_t i = 0; i < sizeof w / sizeof *w; i++) list[n++] = w[i];
        }
        for (int i = 0; i < n; i++) {
            df_tensor *t = list[i];
            if (!t || !t->data || t->type != DF_TYPE_Q4_K || t == m->tok_embd) continue;
            /* fused gate_up experts: up starts n_ff rows into each expert's matrix */
            const int64_t group = l >= 0 && t == m->layers[l].exps[DF_EXPERT_GATE] &&
                                  t == m->layers[l].exps[DF_EXPERT_UP] ? 16 : 8;
            if (t->ne[1] % group) continue;
            rc = df_repack_rows(pool, DF_TYPE_Q4_K, to, t->data, t->ne[0], t->ne[1] * t->ne[2] * t->ne[3]);
            if (rc < 0) {
                df_pool_free(pool);
                return df_err_prefix(rc, "%s: repacking '%s'", m->path, t->info->name);
            }
            t->type = to;
            bytes += t->info->nbytes;
            count++;
        }
    }
    df_pool_free(pool);
    df_log(DF_LOG_DEBUG, "repacked %d tensors (%.1f MiB) to %s in %.2f s", count, bytes / 1048576.0,
           df_type_info(to)->name, (df_time_ns() - t0) / 1e9);
    return DF_OK;
}

deltafin_model_params deltafin_model_default_params(void) {
    deltafin_model_params p;
    memset(&p, 0, sizeof p);
    p.n_threads = 0;
    p.io_engine = "auto";
    return p;
}

int df_model_load(const char *path, const deltafin_model_params *p, int flags, df_model **out) {
    df_init();
    df_kernels_init(); /* the kernel table is chosen at load (its DELTAFIN_ISA warning here) */
    *out = NULL;
    df_model *m = df_calloc(1, sizeof *m);
    if (!m) return DF_ERR_NOMEM;
    m->params = p ? *p : deltafin_model_default_params();
    m->path = df_strdup(path);
    int rc = df_gguf_open(path, &m->gguf);
    if (rc < 0) { deltafin_model_free(m); return rc; }
    rc = df_model_pack_init(m);
    if (rc < 0) { deltafin_model_free(m); return rc; }
    const char *arch = NULL;
    rc = df_gguf_get_str(m->gguf, "general.architecture", &arch);
    if (rc < 0) {
        deltafin_model_free(m);
        return rc == DF_ERR_NOTFOUND ? df_err(DF_ERR_FORMAT, "%s: missing general.architecture", path) : rc;
    }
    m->arch = df_arch_find(arch);
    if (!m->arch) {
        rc = df_err(DF_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported", path, arch);
        deltafin_model_free(m);
        return rc;
    }
    rc = load_common_hparams(m);
    if (rc == DF_OK && m->arch->load_hparams) rc = m->arch->load_hparams(m);
    if (rc == DF_OK && m->hp.n_vocab <= 0) rc = df_err(DF_ERR_FORMAT, "%s: vocabulary size unknown", path);
    if (rc < 0) { deltafin_model_free(m); return rc; }

    m->layers = df_calloc((size_t)m->hp.n_layer, sizeof(df_layer));
    m->cap_bound = m->gguf->n_tensors + m->n_pack_tensors;
    m->tensors = df_calloc((size_t)(m->cap_bound ? m->cap_bound : 1), sizeof(df_tensor));
    if (!m->layers || !m->tensors) { deltafin_model_free(m); return DF_ERR_NOMEM; }
    m->rope_freqs = NULL;
    rc = m->arch->bind(m);
    if (rc == DF_OK) rc = m->bind_status;
    /* a packed file replaces its expert tensors by deltafin.pack.experts + .index */
    if (rc == DF_OK && m->n_bound != m->gguf->n_tensors + (m->pack ? m->n_pack_tensors - 2 : 0)) {
        /* like llama.cpp's "wrong number of tensors", but name the culprit */
        const char *extra = "?";
        for (int i = 0; i < m->gguf->n_tensors; i++) {
            bool used = false;
            for (int j = 0; j < m->n_bound && !used; j++) used = m->tensors[j].info == &m->gguf->tensors[i];
            if (!used) { extra = m->gguf->tensors[i].name; break; }
        }
        rc = df_err(DF_ERR_FORMAT, "%s: wrong number of tensors; expected %d, got %d: tensor '%s' is not "
                    "used by arch %s", path, m->n_bound, m->gguf->n_tensors, extra, m->arch->name);
    }
    if (rc < 0) { deltafin_model_free(m); return rc; }

    df_rope *r = &m->rope;
    r->n_rot = m->hp.n_rot;
    r->mode = m->hp.rope_mode;
    r->freq_base = m->hp.rope_freq_base;
    r->freq_scale = m->hp.rope_freq_scale;
    r->ext_factor = m->hp.yarn_ext_factor;
    r->attn_factor = m->hp.rope_attn_factor;
    r->beta_fast = m->hp.yarn_beta_fast;
    r->beta_slow = m->hp.yarn_beta_slow;
    r->n_ctx_orig = m->hp.n_ctx_orig;
    if (r->n_rot > 0) df_rope_init(r);

    /* expert streaming (memplan.c): routed experts stay on disk when they do not fit */
    bool stream = false;
    if (!(flags & (DF_LOAD_SKIP_EXPERTS | DF_LOAD_META_ONLY))) {
        rc = df_stream_decide(m, &stream);
        if (rc < 0) { deltafin_model_free(m); return rc; }
        if (stream) flags |= DF_LOAD_SKIP_EXPERTS;
    }
    /* dense layers that do not fit the limit stream too (dense_stream.c) */
    if (!(flags & DF_LOAD_META_ONLY)) {
        rc = df_dense_decide(m, stream);
        if (rc < 0) { deltafin_model_free(m); return rc; }
    }
    m->meta_only = flags & DF_LOAD_META_ONLY;
    if (!m->meta_only) {
        rc = load_data(m, flags);
        if (rc == DF_OK) rc = repack_weights(m);
        if (rc < 0) { deltafin_model_free(m); return rc; }
        if (m->rope_freqs) r->freq_factors = m->rope_freqs->data;
    }

    bool any_moe = false;
    for (int l = 0; l < m->hp.n_layer; l++) any_moe |= m->layers[l].is_moe;
    if (any_moe && !(flags & (DF_LOAD_SKIP_EXPERTS | DF_LOAD_META_ONLY))) {
        df_expert_provider pr = {.ud = m, .acquire = resident_acquire, .release = resident_release};
        m->provider = pr;
        m->has_provider = true;
        m->experts_loaded = true;
    } else if (stream) {
        rc = df_stream_attach(m);
        if (rc < 0) { deltafin_model_free(m); return rc; }
    }
    if (!m->meta_only) {
        rc = df_dense_open(m);
        if (rc < 0) { deltafin_model_free(m); return rc; }
    }
    if (!(flags & DF_LOAD_NO_TOKENIZER) &&
        df_gguf_find(m->gguf, "tokenizer.ggml.model")) {
        df_tokenizer *tok = NULL;
        rc = df_tokenizer_load(m->gguf, &tok);
        if (rc < 0) { deltafin_model_free(m); return df_err_prefix(rc, "%s", path); }
        m->tokenizer = tok;
    }
    *out = m;
    return DF_OK;
}

int deltafin_model_load(const char *path, const deltafin_model_params *p, deltafin_model **out) {
    return df_model_load(path, p, 0, out);
}

void deltafin_model_free(deltafin_model *m) {
    if (!m) return;
    df_dense_free(m);
    if (m->has_provider && m->provider.destroy) m->provider.destroy(m->provider.ud);
    if (m->tokenizer) df_tokenizer_free(m->tokenizer);
    if (m->dense_mem) munmap(m->dense_mem, (size_t)(m->dense_bytes ? m->dense_bytes : 1));
    if (m->expert_mem) munmap(m->expert_mem, (size_t)m->expert_bytes);
    df_model_pack_free(m);
    if (m->gguf) df_gguf_close(m->gguf);
    free(m->layers);
    free(m->tensors);
    free(m->path);
    free(m);
}

int deltafin_model_n_vocab(const deltafin_model *m) { return m->hp.n_vocab; }
int deltafin_model_n_ctx_train(const deltafin_model *m) { return m->hp.n_ctx_train; }
const char *deltafin_model_arch(const deltafin_model *m) { return m->arch->name; }
const char *deltafin_model_meta_str(const deltafin_model *m, const char *key) {
    const char *s = NULL;
    if (df_gguf_get_str(m->gguf, key, &s) != DF_OK) return NULL;
    return s;
}

void df_model_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    if (m->arch->kv_row) { m->arch->kv_row(m, il, k_row, v_row); return; }
    *k_row = (int64_t)m->hp.n_head_kv * m->hp.n_embd_head_k;
    *v_row = (int64_t)m->hp.n_head_kv * m->hp.n_embd_head_v;
}

/* ---- memory plan ------------------------------------------------------------------------- */
void df_model_mem_plan(const df_model *m, int n_ctx, int n_batch, df_mem_plan *out) {
    const df_hparams *hp = &m->hp;
    memset(out, 0, sizeof *out);
    out->n_ctx = n_ctx;
    out->n_batch = n_batch;
    for (int i = 0; i < m->n_bound; i++) {
        const df_tensor *t = &m->tensors[i];
        if (is_expert(m, t)) out->expert_bytes += t->info->nbytes;
        else out->dense_bytes += t->info->nbytes;
    }
    for (int l = 0; l < hp->n_layer; l++) {
        if (!m->layers[l].is_moe) continue;
        uint64_t one = 0;
        for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
            uint64_t b;
            df_model_expert_shape(m, l, p, NULL, NULL, &b);
            one += b;
        }
        if (one > out->expert_bytes_one) out->expert_bytes_one = one;
    }
    out->kv_bytes_per_token = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        int64_t kr, vr;
        df_model_kv_row(m, l, &kr, &vr);
        out->kv_bytes_per_token += (uint64_t)(kr + vr) * sizeof(df_f16);
    }
    out->kv_bytes = out->kv_bytes_per_token * (uint64_t)n_ctx;
    out->state_bytes = m->arch->state_bytes ? m->arch->state_bytes(m) : 0;
    out->kv_bytes += 2 * out->state_bytes; /* the state and its prompt snapshot (session.c) */
    /* mirrors the buffers deltafin_ctx_create allocates (session.c) */
    extern uint64_t df_session_scratch_bytes(const df_model *m, int n_ctx, int n_batch, int n_threads);
    out->scratch_bytes = df_session_scratch_bytes(m, n_ctx, n_batch, 1);
}
