/* model.c — the model description: architecture registry, common hyperparameters
 * (formats.md §3.0), tensor binding with exact shape checks, expert shapes and file
 * locations, KV row sizes and the footprint the memory plan needs. Reads metadata and the
 * tensor table only; loading weight bytes is the runtime loader's job (runtime/loader.c).
 * Invariant: see model.h. Threading: built on one thread; read-only afterwards. */
#include "model/model.h"
#include "format/pack.h"
#include "kernels/quant.h"
#include "kernels/kernels.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <sys/mman.h>

/* ---- architecture registry ------------------------------------------------------------
 * One line per family in src/model/arch_*.c. The references must be strong: a weak reference would
 * not pull the object out of the static library. */
extern const df_arch df_arch_llama;
extern const df_arch df_arch_qwen2moe;
extern const df_arch df_arch_qwen3moe;
extern const df_arch df_arch_olmoe;
extern const df_arch df_arch_deepseek2, df_arch_deepseek32, df_arch_glm_dsa, df_arch_deepseek4;
extern const df_arch df_arch_kimi_k3;
extern const df_arch df_arch_gpt_oss;
extern const df_arch df_arch_qwen3next;
extern const df_arch df_arch_qwen35moe;
extern const df_arch df_arch_glm4moe, df_arch_minimax_m2;

const df_arch *df_arch_find(const char *name) {
    const df_arch *all[] = {&df_arch_llama, &df_arch_qwen2moe, &df_arch_qwen3moe, &df_arch_olmoe,
                             &df_arch_deepseek2, &df_arch_deepseek32, &df_arch_glm_dsa, &df_arch_deepseek4, &df_arch_kimi_k3,
                             &df_arch_gpt_oss, &df_arch_qwen3next, &df_arch_qwen35moe,
                             &df_arch_glm4moe, &df_arch_minimax_m2};
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

int df_model_rope_attn_factor(df_model *m) {
    df_hparams *hp = &m->hp;
    float rope_attn_factor = 1.0f;
    TRY(key_f32(m, "rope.scaling.attn_factor", &rope_attn_factor, false));
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
    return DF_OK;
}

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
    hp->yarn_log_mul = 0.0f;
    TRY(key_f32(m, "rope.scaling.yarn_log_multiplier", &hp->yarn_log_mul, false));
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_ext_factor = yarn ? 1.0f : 0.0f;
    TRY(df_model_rope_attn_factor(m));

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

static df_tensor *bind_named(df_model *m, const char *name, int flags, int n_dims, int64_t ne0, int64_t ne1,
                             int64_t ne2) {
    if (m->bind_status < 0) return NULL;
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
    if (!ok && (flags & DF_T_RESHAPE)) /* stored with the last dims merged: same rows */
        ok = t->ne[0] == want[0] && t->ne[1] * t->ne[2] * t->ne[3] == want[1] * want[2] && t->ne[1] > 0;
    if (!ok) {
        char a[96], b[96];
        fmt_shape(a, sizeof a, n_dims, want);
        fmt_shape(b, sizeof b, t->n_dims > 0 ? t->n_dims : 1, t->ne);
        m->bind_status = df_err(DF_ERR_FORMAT, "%s: tensor '%s' has wrong shape; expected %s, got %s",
                                m->path, name, a, b);
        return NULL;
    }
    const df_type_traits *tt = df_type_info(t->type);
    if (flags & DF_T_INDEX) { /* an integer table: read as stored, never a matmul */
        if (t->type != DF_TYPE_I32) {
            m->bind_status = df_err(DF_ERR_FORMAT, "%s: tensor '%s' is %s; expected I32", m->path, name,
                                    df_gguf_tensor_type_name(t->type));
            return NULL;
        }
    } else if (!tt || !tt->blck) {
        m->bind_status = df_err(DF_ERR_FORMAT, "%s: tensor '%s' has invalid type %d", m->path, name,
                                t->type);
        return NULL;
    } else if ((flags & DF_T_NORM) && t->type != DF_TYPE_F32) {
        m->bind_status = df_err(DF_ERR_UNSUPPORTED, "%s: tensor '%s' is %s; 1-D tensors must be F32",
                                m->path, name, tt->name);
        return NULL;
    } else if (!tt->can_compute) {
        m->bind_status = df_err(DF_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, not supported by "
                                "this build", m->path, name, tt->name);
        return NULL;
    } else if (ne0 % tt->blck) {
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
    memcpy(d->ne, (flags & DF_T_RESHAPE) ? want : t->ne, sizeof d->ne);
    d->data = NULL;
    d->flags = (uint8_t)flags;
    return d;
}

df_tensor *df_model_tensor(df_model *m, const char *fmt, int il, int flags, int n_dims,
                           int64_t ne0, int64_t ne1, int64_t ne2) {
    char name[128];
    snprintf(name, sizeof name, fmt, il);
    return bind_named(m, name, flags, n_dims, ne0, ne1, ne2);
}

bool df_model_has_tensor(df_model *m, const char *name) {
    return df_gguf_tensor_find(m->gguf, name) || (m->pack && df_model_pack_tensor(m, name));
}

/* The schema walk's callbacks for binding: probes ask the file, every entry that applies is
 * bound with its flags and stored in its members. */
static bool bind_has(void *ud, uint32_t bit, const char *name) {
    (void)bit;
    return df_model_has_tensor(ud, name);
}

static int bind_visit(void *ud, const df_tensor_spec *s, int il, const char *name, int n_dims, const int64_t ne[3]) {
    df_model *m = ud;
    int flags = s->flags;
    if (il >= 0 && il >= m->hp.n_layer - m->hp.n_layer_nextn) flags |= DF_T_UNUSED; /* NextN / MTP layer */
    df_tensor *t = bind_named(m, name, flags, n_dims, ne[0], ne[1], ne[2]);
    if (m->bind_status < 0) return m->bind_status;
    char *base = il < 0 ? (char *)m : (char *)&m->layers[il];
    if (s->field) *(df_tensor **)(base + s->field - 1) = t;
    if (s->field2) *(df_tensor **)(base + s->field2 - 1) = t;
    return DF_OK;
}

int df_model_bind_schema(df_model *m) {
    const df_hparams *hp = &m->hp;
    if (m->arch->pre_bind) {
        int rc = m->arch->pre_bind(m);
        if (rc < 0) return rc;
    }
    const df_schema_ops ops = {.has = bind_has, .visit = bind_visit, .ud = m};
    int rc = df_schema_walk(m->arch, hp, &ops);
    if (rc < 0) return rc;
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].is_moe = (df_schema_props(m->arch, hp, il) & (DF_W_MOE | DF_W_NEXTN)) == DF_W_MOE;
    if (!m->output) m->output = m->tok_embd; /* tied (output.weight optional in the schema) */
    if (m->arch->post_bind) rc = m->arch->post_bind(m);
    return rc < 0 ? rc : m->bind_status;
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

/* ---- packed models: expert tensors presented from the pack index ------------------------ */
int df_model_pack_init(df_model *m) {
    if (!df_pack_is_packed(m->gguf)) return DF_OK;
    df_pack *p = NULL;
    int rc = df_pack_open(m->gguf, &p);
    if (rc) return rc;
    int n = df_pack_n_tensors(p);
    m->pack_tensors = df_calloc((size_t)(n ? n : 1), sizeof(df_gguf_tensor));
    if (!m->pack_tensors) { df_pack_close(p); return DF_ERR_NOMEM; }
    for (int i = 0; i < n; i++) {
        const char *name;
        int64_t ne[3];
        df_gguf_tensor *t = &m->pack_tensors[i];
        df_pack_tensor_info(p, i, &name, &t->type, ne, &t->nbytes);
        snprintf(t->name, sizeof t->name, "%s", name);
        t->n_dims = 3;
        t->ne[0] = ne[0]; t->ne[1] = ne[1]; t->ne[2] = ne[2]; t->ne[3] = 1;
        t->shard = 0;
        t->offset = 0; /* not a contiguous tensor: locations come from the pack index */
    }
    m->n_pack_tensors = n;
    m->pack = p;
    return DF_OK;
}

const df_gguf_tensor *df_model_pack_tensor(df_model *m, const char *name) {
    for (int i = 0; i < m->n_pack_tensors; i++)
        if (!strcmp(m->pack_tensors[i].name, name)) return &m->pack_tensors[i];
    return NULL;
}

void df_model_pack_free(df_model *m) {
    df_pack_close(m->pack);
    m->pack = NULL;
    free(m->pack_tensors);
    m->pack_tensors = NULL;
    m->n_pack_tensors = 0;
}

/* ---- the whole description ---------------------------------------------------------------- */
bool df_model_is_expert(const df_model *m, const df_tensor *t) {
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < DF_EXPERT_NPARTS; p++)
            if (m->layers[l].exps[p] == t) return true;
    return false;
}

int df_model_describe(df_model *m) {
    const char *path = m->path;
    int rc;
    rc = df_model_pack_init(m);
    if (rc < 0) return rc;
    const char *arch = NULL;
    rc = df_gguf_get_str(m->gguf, "general.architecture", &arch);
    if (rc < 0) {
        return rc == DF_ERR_NOTFOUND ? df_err(DF_ERR_FORMAT, "%s: missing general.architecture", path) : rc;
    }
    m->arch = df_arch_find(arch);
    if (!m->arch) {
        return df_err(DF_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported", path, arch);
    }
    rc = load_common_hparams(m);
    if (rc == DF_OK && m->arch->load_hparams) rc = m->arch->load_hparams(m);
    if (rc == DF_OK && m->hp.n_vocab <= 0) rc = df_err(DF_ERR_FORMAT, "%s: vocabulary size unknown", path);
    if (rc < 0) return rc;

    m->layers = df_calloc((size_t)m->hp.n_layer, sizeof(df_layer));
    m->cap_bound = m->gguf->n_tensors + m->n_pack_tensors;
    m->tensors = df_calloc((size_t)(m->cap_bound ? m->cap_bound : 1), sizeof(df_tensor));
    if (!m->layers || !m->tensors) return DF_ERR_NOMEM;
    m->rope_freqs = NULL;
    rc = df_model_bind_schema(m);
    /* a packed file replaces its expert tensors by deltafin.pack.experts + .index (+ .sums) */
    if (rc == DF_OK && m->n_bound != m->gguf->n_tensors + (m->pack ? m->n_pack_tensors - df_pack_n_own_tensors(m->pack) : 0)) {
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
    if (rc < 0) return rc;

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
    return DF_OK;
}

void df_model_kv_row(const df_model *m, int il, int64_t *k_row, int64_t *v_row) {
    if (il >= df_hp_n_run_layers(&m->hp)) { *k_row = *v_row = 0; return; } /* NextN: never run */
    if (m->arch->kv_row) { m->arch->kv_row(m, il, k_row, v_row); return; }
    *k_row = (int64_t)m->hp.n_head_kv * m->hp.n_embd_head_k;
    *v_row = (int64_t)m->hp.n_head_kv * m->hp.n_embd_head_v;
}

static int kv_ggml_type(int t) {
    static const int map[DELTAFIN_KV_COUNT] = {
        [DELTAFIN_KV_F16] = DF_TYPE_F16, [DELTAFIN_KV_F32] = DF_TYPE_F16, /* cast to F16, as llama.cpp's FA */
        [DELTAFIN_KV_BF16] = DF_TYPE_BF16, [DELTAFIN_KV_Q8_0] = DF_TYPE_Q8_0, [DELTAFIN_KV_Q4_0] = DF_TYPE_Q4_0,
        [DELTAFIN_KV_Q4_1] = DF_TYPE_Q4_1, [DELTAFIN_KV_Q5_0] = DF_TYPE_Q5_0, [DELTAFIN_KV_Q5_1] = DF_TYPE_Q5_1,
        [DELTAFIN_KV_IQ4_NL] = DF_TYPE_IQ4_NL,
    };
    return t >= 0 && t < DELTAFIN_KV_COUNT ? map[t] : -1;
}

void df_model_kv_types(const df_model *m, int *type_k, int *type_v) {
    *type_k = kv_ggml_type(m->params.cache_type_k);
    *type_v = kv_ggml_type(m->params.cache_type_v);
}

int df_model_kv_check(const df_model *m) {
    const df_hparams *hp = &m->hp;
    const char *an = m->arch->name;
    const int ck = m->params.cache_type_k, cv = m->params.cache_type_v;
    int tk, tv;
    df_model_kv_types(m, &tk, &tv);
    if (tk < 0) return df_err(DF_ERR_INVALID, "KV cache type K: bad id %d", ck);
    if (tv < 0) return df_err(DF_ERR_INVALID, "KV cache type V: bad id %d", cv);
    if (m->arch->kv_f16_only && (tk != DF_TYPE_F16 || tv != DF_TYPE_F16))
        return df_err(DF_ERR_UNSUPPORTED, "%s: its KV cache (raw and compressed rows) is F16 in deltafin: -ctk / -ctv "
                      "f16 or f32 (got %s / %s)", an, deltafin_kv_type_name(ck), deltafin_kv_type_name(cv));
    const df_type_traits *fk = df_type_info(tk), *fv = df_type_info(tv);
    for (int l = 0; l < hp->n_layer; l++) {
        int64_t kr, vr;
        df_model_kv_row(m, l, &kr, &vr);
        if (!kr && !vr) continue; /* no KV (recurrent or NextN layer) */
        int64_t hk, hv;
        if (kr && !vr) { /* MLA: one latent row [c_kv ; k_pe], V its first n_lora_kv values */
            if (hp->indexer_top_k > 0 && tk != DF_TYPE_F16 && tk != DF_TYPE_F32 && tk != DF_TYPE_BF16)
                return df_err(DF_ERR_UNSUPPORTED, "%s: the sparse-attention indexer cache takes -ctk f16, "
                              "bf16 or f32 in deltafin (got %s)", an, deltafin_kv_type_name(ck));
            if (ck != cv)
                return df_err(DF_ERR_UNSUPPORTED, "%s: its MLA cache keeps one latent row for K and V, so the K "
                              "and V cache types must be the same (-ctk %s -ctv %s; llama.cpp refuses this too)",
                              an, deltafin_kv_type_name(ck), deltafin_kv_type_name(cv));
            hk = kr; hv = hp->n_lora_kv;
        } else if (hp->n_lora_kv > 0) { /* deepseek2 without MLA tensors: decompressed heads */
            hk = hp->n_embd_head_k_mla; hv = hp->n_embd_head_v_mla;
        } else {
            hk = hp->n_embd_head_k; hv = hp->n_embd_head_v;
        }
        if (hk % fk->blck)
            return df_err(DF_ERR_UNSUPPORTED, "%s: K cache type %s (blocks of %d) does not divide the key head size %lld",
                          an, deltafin_kv_type_name(ck), fk->blck, (long long)hk);
        if (hv % fv->blck)
            return df_err(DF_ERR_UNSUPPORTED, "%s: V cache type %s (blocks of %d) does not divide the value head size %lld",
                          an, deltafin_kv_type_name(cv), fv->blck, (long long)hv);
    }
    return DF_OK;
}

void df_model_kv_rot(const df_model *m, int *nrot_k, int *nrot_v) {
    const df_hparams *hp = &m->hp;
    int tk, tv;
    df_model_kv_types(m, &tk, &tv);
    *nrot_k = *nrot_v = 0;
    if (tk < 0 || tv < 0) return;
    int64_t hk_all = 0, hv_all = 0; /* the head sizes of every KV layer, -1 where they differ */
    for (int l = 0; l < hp->n_layer; l++) {
        int64_t kr, vr, hk, hv;
        df_model_kv_row(m, l, &kr, &vr);
        if (!kr && !vr) continue;
        if (kr && !vr) return; /* MLA: llama.cpp's K-only attention applies no rotation */
        if (hp->n_lora_kv > 0) { hk = hp->n_embd_head_k_mla; hv = hp->n_embd_head_v_mla; }
        else { hk = hp->n_embd_head_k; hv = hp->n_embd_head_v; }
        hk_all = !hk_all ? hk : hk_all == hk ? hk_all : -1;
        hv_all = !hv_all ? hv : hv_all == hv ? hv_all : -1;
    }
    if (hk_all > 0 && hk_all % 64 == 0 && df_type_info(tk)->blck > 1) {
        int n = 64;
        while (hk_all % (2 * n) == 0) n *= 2;
        *nrot_k = n;
    }
    if (hv_all > 0 && hv_all % 64 == 0 && df_type_info(tv)->blck > 1) *nrot_v = 64;
}

/* ---- footprint ------------------------------------------------------------------------- */
void df_model_footprint(const df_model *m, int n_ctx, df_footprint *out) {
    const df_hparams *hp = &m->hp;
    memset(out, 0, sizeof *out);
    out->n_ctx = n_ctx;
    for (int i = 0; i < m->n_bound; i++) {
        const df_tensor *t = &m->tensors[i];
        if (t->flags & DF_T_UNUSED) continue; /* never read (NextN layers) */
        if (df_model_is_expert(m, t)) out->expert_bytes += t->info->nbytes;
        else out->dense_bytes += t->info->nbytes;
    }
    for (int l = 0; l < hp->n_layer; l++) {
        if (!m->layers[l].is_moe) continue;
        out->n_moe_layers++;
        uint64_t one = 0;
        for (int p = 0; p < DF_EXPERT_NPARTS; p++) {
            uint64_t b;
            df_model_expert_shape(m, l, p, NULL, NULL, &b);
            one += b;
        }
        if (one > out->expert_bytes_one) out->expert_bytes_one = one;
    }
    int tk, tv;
    df_model_kv_types(m, &tk, &tv);
    if (tk < 0) tk = DF_TYPE_F16; /* refused at load (df_model_kv_check) */
    if (tv < 0) tv = DF_TYPE_F16;
    for (int l = 0; l < hp->n_layer; l++) {
        int64_t kr, vr;
        df_model_kv_row(m, l, &kr, &vr);
        out->kv_bytes_per_token += df_type_row_bytes(tk, kr) + df_type_row_bytes(tv, vr);
    }
    out->kv_bytes = out->kv_bytes_per_token * (uint64_t)n_ctx;
    out->state_bytes = m->arch->state_bytes ? m->arch->state_bytes(m) : 0;
    out->kv_bytes += 2 * out->state_bytes; /* the state and its prompt snapshot (the ctx keeps both) */
}
