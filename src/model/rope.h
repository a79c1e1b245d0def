/* rope.h — a model's RoPE parameters (formats.md §3.0: NORM / NEOX pairing, YaRN, rope_freqs
 * divisors), filled from the hyperparameters when the model is described; the tables and the
 * rotation itself are the forward pass's (forward/ops.h: df_rope_init, df_rope_cache,
 * df_rope_apply). */
#ifndef DF_ROPE_H
#define DF_ROPE_H

enum { DF_ROPE_NORM = 0, DF_ROPE_NEOX = 2 };

typedef struct df_rope {
    int n_rot;              /* rotated dims per head (even) */
    int mode;               /* DF_ROPE_NORM | DF_ROPE_NEOX */
    float freq_base;
    float freq_scale;       /* 1 / rope.scaling.factor (1 if none) */
    float ext_factor;       /* 1 for YaRN, else 0 */
    float attn_factor;      /* mscale passed to ggml_rope_ext */
    float beta_fast, beta_slow;
    int n_ctx_orig;
    const float *freq_factors; /* rope_freqs {n_rot/2} or NULL (borrowed) */
    /* derived by df_rope_init */
    float theta_scale;
    float corr_dims[2];
} df_rope;
#endif
