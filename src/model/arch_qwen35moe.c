/* arch_qwen35moe.c — Qwen3.5 / Qwen3.6 MoE (`qwen35moe`, e.g. Qwen3.5-397B-A17B): Qwen3-Next's
 * hybrid stack (arch_qwen3next.c, whose hyperparameter, dims, KV and state hooks it shares)
 * with three differences, as llama.cpp's qwen35moe: the DeltaNet input is always the fused
 * attn_qkv + attn_gate, beta and alpha come from two separate projections ssm_beta / ssm_alpha
 * (one row per v head), and v head h reads k head h % Hk (the fused op's broadcast, not
 * qwen3next's repeat-interleave); attention uses interleaved M-RoPE (rope.dimension_sections),
 * which for text positions (t = h = w = pos) is NEOX as long as the sections cover every
 * rotated pair (checked here). The forward pass is src/forward/qwen3next.c. */
#include "model/model.h"
#include "model/qwen3next.h"

static int q35_hparams(df_model *m) {
    int rc = df_qn_hparams(m);
    if (rc < 0) return rc;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch->name);
    const void *data = NULL;
    uint64_t n = 0;
    int32_t sec[4];
    rc = df_gguf_get_arr(m->gguf, key, DF_GGUF_I32, &data, &n);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_FORMAT, "%s: missing %s", m->path, key);
    if (rc < 0) rc = df_gguf_get_arr(m->gguf, key, DF_GGUF_U32, &data, &n);
    if (rc < 0) return rc;
    if (n < 4) return df_err(DF_ERR_FORMAT, "%s: %s has %llu values, want 4", m->path, key, (unsigned long long)n);
    memcpy(sec, data, sizeof sec);
    /* ggml's interleaved M-RoPE: pair k uses position t, h, w by k % 3 within 3·sections[i], else
     * the extra position e (0 for text: an unrotated pair, which the NEOX path cannot do) */
    const int sd = sec[0] + sec[1] + sec[2] + sec[3];
    if (sec[0] < 0 || sec[1] < 0 || sec[2] < 0 || sec[3] < 0 || sd <= 0 || sd > m->hp.n_rot)
        return df_err(DF_ERR_FORMAT, "%s: bad %s [%d, %d, %d, %d] for %d rotated dims", m->path, key, sec[0], sec[1],
                      sec[2], sec[3], m->hp.n_rot);
    for (int k = 0; k < m->hp.n_rot / 2; k++) {
        const int s = k % sd;
        const bool covered = (s % 3 == 1 && s < 3 * sec[1]) || (s % 3 == 2 && s < 3 * sec[2]) ||
                             (s % 3 == 0 && s < 3 * sec[0]);
        if (!covered)
            return df_err(DF_ERR_UNSUPPORTED, "%s: %s [%d, %d, %d, %d] leaves rotary pair %d on the extra position "
                          "(not supported)", m->path, key, sec[0], sec[1], sec[2], sec[3], k);
    }
    return DF_OK;
}

#define RECR DF_W_RECR
#define F32 DF_T_NORM
static const df_tensor_spec q35_tensors[] = {
    DF_SCHEMA_TOK_EMBD,
    DF_SCHEMA_QN_ATTN,
    /* Gated DeltaNet */
    DF_TS("blk.%d.attn_qkv.weight", DF_LF(wqkv), 0, DF_R_MAT, RECR, 0, DF_D_EMBD, QN_CONV_DIM),
    DF_TS("blk.%d.attn_gate.weight", DF_LF(attn_gate), 0, DF_R_MAT, RECR, 0, DF_D_EMBD, QN_VDIM),
    DF_SCHEMA_QN_CONV,
    DF_TS("blk.%d.ssm_beta.weight", DF_LF(ssm_beta), 0, DF_R_MAT, RECR, 0, DF_D_EMBD, QN_HV),
    DF_TS("blk.%d.ssm_alpha.weight", DF_LF(ssm_alpha), 0, DF_R_MAT, RECR, 0, DF_D_EMBD, QN_HV),
    DF_TS("blk.%d.ssm_norm.weight", DF_LF(ssm_o_norm), F32, DF_R_NORM, RECR, 0, QN_S),
    DF_TS("blk.%d.ssm_out.weight", DF_LF(wo), 0, DF_R_MAT, RECR, 0, QN_VDIM, DF_D_EMBD),
    DF_SCHEMA_QN_MOE_OUT,
};
#undef RECR
#undef F32

const df_arch df_arch_qwen35moe = {
    .name = "qwen35moe",
    .load_hparams = q35_hparams,
    DF_SCHEMA(q35_tensors),
    .dims = df_qn_dims,
    .kv_row = df_qn_kv_row,
    .state_bytes = df_qn_state_bytes,
};
