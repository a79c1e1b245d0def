/* schema.c — walking an architecture's tensor table (schema.h): layer properties, symbolic
 * dims, and the table-order visit shared by the binder (model.c) and gen-random (dev/).
 * Invariant: the walk visits exactly the entries that apply, in table order, each run of
 * per-layer entries once per layer. Threading: pure functions of their arguments. */
#include "model/model.h"
#include "model/schema.h"

uint32_t df_schema_props(const df_arch *a, const df_hparams *hp, int il) {
    uint32_t p = 0;
    if (il >= 0) {
        p |= hp->n_expert > 0 && il >= hp->n_layer_dense_lead ? DF_W_MOE : DF_W_DENSE;
        p |= hp->layer_recr[il] ? DF_W_RECR : DF_W_ATTN;
        if (hp->layer_swa[il]) p |= DF_W_SWA;
        if (il >= hp->n_layer - hp->n_layer_nextn) p |= DF_W_NEXTN;
    }
    if (a->layer_props) p |= a->layer_props(hp, il);
    return p;
}

void df_schema_dims(const df_arch *a, const df_hparams *hp, int il, int64_t d[DF_D_COUNT]) {
    memset(d, 0, sizeof(int64_t) * DF_D_COUNT);
    const int64_t nh = hp->n_head, nkv = hp->n_head_kv, hk = hp->n_embd_head_k, hv = hp->n_embd_head_v;
    d[DF_D_ONE] = 1;
    d[DF_D_EMBD] = hp->n_embd;
    d[DF_D_VOCAB] = hp->n_vocab;
    d[DF_D_HEAD] = nh;
    d[DF_D_HEAD_K] = hk;
    d[DF_D_ROT_HALF] = hp->n_rot / 2;
    d[DF_D_Q] = nh * hk;
    d[DF_D_K] = nkv * hk;
    d[DF_D_V] = nkv * hv;
    d[DF_D_O] = nh * hv;
    d[DF_D_QKV] = nh * hk + nkv * hk + nkv * hv;
    d[DF_D_FF] = hp->n_ff;
    d[DF_D_EXPERT] = hp->n_expert;
    d[DF_D_FF_EXP] = hp->n_ff_exp;
    d[DF_D_FF_SHEXP] = hp->n_ff_shexp;
    d[DF_D_LORA_Q] = hp->n_lora_q;
    d[DF_D_LORA_KV] = hp->n_lora_kv;
    d[DF_D_KV_A] = (int64_t)hp->n_lora_kv + hp->n_rot;
    d[DF_D_MLA_Q] = nh * hp->n_embd_head_k_mla;
    d[DF_D_MLA_NOPE] = (int64_t)hp->n_embd_head_k_mla - hp->n_rot;
    d[DF_D_MLA_V] = hp->n_embd_head_v_mla;
    d[DF_D_MLA_O] = nh * hp->n_embd_head_v_mla;
    d[DF_D_MLA_KV_B] = nh * (d[DF_D_MLA_NOPE] + hp->n_embd_head_v_mla);
    if (a->dims) a->dims(hp, il, d);
}

static bool applies(const df_tensor_spec *s, uint32_t props) {
    return (props & s->when) == s->when && !(props & s->unless);
}

static bool per_layer(const df_tensor_spec *s) { return strstr(s->name, "%d") != NULL; }

static int visit(const df_arch *a, const df_hparams *hp, const df_schema_ops *ops, const df_tensor_spec *s,
                 int il, uint32_t props) {
    if (!applies(s, props)) return DF_OK;
    int64_t d[DF_D_COUNT], ne[3] = {1, 1, 1};
    df_schema_dims(a, hp, il, d);
    int n_dims = 0;
    while (n_dims < 3 && s->ne[n_dims] != DF_D_NONE) {
        ne[n_dims] = df_schema_dim(s->ne[n_dims], d);
        n_dims++;
    }
    DF_ASSERT(n_dims > 0);
    char name[128];
    if (il >= 0) snprintf(name, sizeof name, s->name, il);
    else snprintf(name, sizeof name, "%s", s->name);
    return ops->visit(ops->ud, s, il, name, n_dims, ne);
}

int df_schema_walk(const df_arch *a, const df_hparams *hp, const df_schema_ops *ops) {
    const df_tensor_spec *t = a->tensors;
    const int n = a->n_tensors;
    for (int i = 0; i < n;) {
        if (!per_layer(&t[i])) {
            int rc = visit(a, hp, ops, &t[i], -1, df_schema_props(a, hp, -1));
            if (rc < 0) return rc;
            i++;
            continue;
        }
        int j = i;
        while (j < n && per_layer(&t[j])) j++;
        for (int il = 0; il < hp->n_layer; il++) {
            uint32_t props = df_schema_props(a, hp, il);
            for (int p = 0; p < a->n_probes; p++) {
                char name[128];
                snprintf(name, sizeof name, a->probes[p].name, il);
                if (ops->has(ops->ud, a->probes[p].bit, name)) props |= a->probes[p].bit;
            }
            for (int k = i; k < j; k++) {
                int rc = visit(a, hp, ops, &t[k], il, props);
                if (rc < 0) return rc;
            }
        }
        i = j;
    }
    return DF_OK;
}
