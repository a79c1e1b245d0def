#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_deepseek32.sh (glm-dsa = GLM-5 random
# models) with scripts/record_set.sh (its header: what is written, how seeds are chosen, ONLY).
# Prompts are decoded in batches of 32 on both sides (llama.cpp's -b 32 -ub 32, deltafin -b 32):
# llama.cpp's flash attention takes its tiled kernel for 64+ queries, which deltafin does not
# reproduce bit for bit (with Q8_0 activations a one-ulp difference flips a quantum and then the
# indexer's key selection). The models: 4 layers that run and a NextN layer, indexer top_k 8 (the 119-token prompt and
# every generation past 8 positions select keys), attention.indexer.types 1,0,1,0 (layers 1 and 3
# attend layer 0's / 2's selection) unless said otherwise:
#   f32, q8_0       the default glm5 variant (sigmoid gating, no YaRN keys, 8 experts top-2)
#   pre52-f32       no indexer.types key, training context 4096: every layer full (GLM-5 / 5.1)
#   glm52-q8_0      no key, context 1M, 7 layers that run: GLM-5.2's pattern 1,1,1,0,0,0,1
#   yarn-f32        YaRN keys incl. yarn_log_multiplier, which glm-dsa never reads
#   opt-q8_0        indexer tensors in the shared layers too (optional, unused), no
#                   expert_gating_func key (sigmoid by default)
#   mxfp4           MXFP4 experts (and attn_k_b / attn_v_b), Q8_0 elsewhere (llama-quantize MXFP4_MOE)
#   w-q4_k          256 wide, Q4_K everywhere (--pure)
#   w-q4_k_m        256 wide, llama-quantize's Q4_K_M mixture
HERE=$(cd "$(dirname "$0")" && pwd)
V="--vocab @FIX@/models/tok512.bin"
W="--n-embd 256 --q-lora 256 --kv-lora 256 --n-ff 256 --n-ff-exp 256 --d-v 64"
LIST=$(mktemp)
trap 'rm -f "$LIST"' EXIT INT TERM
{
    printf '%s\t%s\n' f32        "--arch glm-dsa --type f32 $V"
    printf '%s\t%s\n' q8_0       "--arch glm-dsa --type q8_0 $V"
    printf '%s\t%s\n' pre52-f32  "--arch glm-dsa --type f32 --indexer-types none $V"
    printf '%s\t%s\n' glm52-q8_0 "--arch glm-dsa --type q8_0 --indexer-types none --ctx 1048576 --n-layer 8 $V"
    printf '%s\t%s\n' yarn-f32   "--arch glm-dsa --type f32 --yarn-factor 40 $V"
    printf '%s\t%s\n' opt-q8_0   "--arch glm-dsa --type q8_0 --shared-indexer-tensors --gating none $V"
    printf '%s\t%s\n' mxfp4      "--arch glm-dsa $V | quantize Q8_0 --type-experts MXFP4"
    printf '%s\t%s\n' w-q4_k     "--arch glm-dsa $W $V | quantize Q4_K --pure"
    printf '%s\t%s\n' w-q4_k_m   "--arch glm-dsa $W $V | quantize Q4_K_M"
} > "$LIST"
N_BATCH=32 sh "$HERE/../../../../scripts/record_set.sh" "$HERE" "$LIST"
