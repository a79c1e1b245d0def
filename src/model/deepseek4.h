/* deepseek4.h — DeepSeek-V4's per-sequence memory layouts (formats.md §3.4c), shared by the
 * binder (src/model/arch_deepseek4.c: kv_row, state_bytes) and the forward pass
 * (src/forward/deepseek4*.c).
 *
 * KV cache, layer il (F16, the region of df_model_kv_row's k_row elements per position):
 *   [n_ctx raw rows of hd]  the key (= value) of every position; the sliding window reads the
 *                           last n_swa of them (llama.cpp keeps only a window-sized ring)
 *   [compressed rows]       from element n_ctx·hd on, row b (positions ratio·b .. ratio·b +
 *                           ratio - 1) of ds4_comp_elems values: the compressed key (hd), then on
 *                           ratio-4 layers the lightning indexer's compressed key (ID)
 * k_row = hd + ceil(ds4_comp_elems / ratio) holds both for n_ctx positions.
 *
 * State, c->rs (F32): per compressed layer, the compressor inputs of the positions whose block is
 * not complete yet, slot = position % slots: ratio 4 keeps 8 slots (its blocks overlap the
 * previous block) of kv and score rows of 2·hd, then the indexer compressor's 8 slots of 2·ID;
 * ratio 128 keeps 128 slots of hd. Zero for a new sequence (never read before it is written).
 * Threading: pure functions. */
#ifndef DF_MODEL_DEEPSEEK4_H
#define DF_MODEL_DEEPSEEK4_H
#include "model/model.h"

/* Compressed-row values of layer il (0: no compression). */
static inline int64_t ds4_comp_elems(const df_hparams *hp, int il) {
    const int r = hp->comp_ratio[il];
    return r == 0 ? 0 : (int64_t)hp->n_embd_head_k + (r == 4 ? hp->indexer_head_size : 0);
}

/* Compressor state slots and the width of one kv (or score) row of layer il's KV compressor. */
static inline int ds4_state_slots(const df_hparams *hp, int il) {
    return hp->comp_ratio[il] == 4 ? 8 : hp->comp_ratio[il];
}
static inline int64_t ds4_state_width(const df_hparams *hp, int il) {
    return (int64_t)hp->n_embd_head_k * (hp->comp_ratio[il] == 4 ? 2 : 1);
}

/* Floats of layer il's compressor state (kv + score, and the indexer's on ratio-4 layers). */
static inline uint64_t ds4_state_floats(const df_hparams *hp, int il) {
    const int r = hp->comp_ratio[il];
    if (r == 0 || il >= df_hp_n_run_layers(hp)) return 0;
    uint64_t n = 2 * (uint64_t)ds4_state_slots(hp, il) * (uint64_t)ds4_state_width(hp, il);
    if (r == 4) n += 2 * 8 * 2 * (uint64_t)hp->indexer_head_size;
    return n;
}

/* Offset (floats) of layer il's state in c->rs. */
static inline uint64_t ds4_state_off(const df_hparams *hp, int il) {
    uint64_t off = 0;
    for (int l = 0; l < il; l++) off += ds4_state_floats(hp, l);
    return off;
}
#endif
