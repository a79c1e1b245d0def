#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_deepseek32.sh (deepseek32 = DeepSeek-V3.2
# random models: MLA plus the DSA lightning indexer, top_k 8 keys per query, so the 119-token
# prompt and every generation past 8 positions attend a selected subset) with
# scripts/record_set.sh (its header: what is written, how seeds are chosen, ONLY):
#   v3-f32, v3-q8_0, k2-f16   the v3 / k2 variants
#   nextn-q8_0                a NextN / MTP layer after 3 that run (loaded, never run)
#   v3-mxfp4                  MXFP4 experts (and attn_k_b / attn_v_b), Q8_0 elsewhere
#   v3w-q4_k, v3w-q4_k_m      256 wide: Q4_K everywhere (--pure), llama-quantize's Q4_K_M mixture
HERE=$(cd "$(dirname "$0")" && pwd)
V="--vocab @FIX@/models/tok512.bin"
W="--n-embd 256 --q-lora 256 --kv-lora 256 --n-ff 256 --n-ff-exp 256 --d-v 64"
LIST=$(mktemp)
trap 'rm -f "$LIST"' EXIT INT TERM
{
    printf '%s\t%s\n' v3-f32     "--arch deepseek32 --variant v3 --type f32 $V"
    printf '%s\t%s\n' v3-q8_0    "--arch deepseek32 --variant v3 --type q8_0 $V"
    printf '%s\t%s\n' k2-f16     "--arch deepseek32 --variant k2 --type f16 $V"
    printf '%s\t%s\n' nextn-q8_0 "--arch deepseek32 --variant v3 --type q8_0 --nextn 1 --n-layer 4 $V"
    printf '%s\t%s\n' v3-mxfp4   "--arch deepseek32 --variant v3 $V | quantize Q8_0 --type-experts MXFP4"
    printf '%s\t%s\n' v3w-q4_k   "--arch deepseek32 --variant v3 $W $V | quantize Q4_K --pure"
    printf '%s\t%s\n' v3w-q4_k_m "--arch deepseek32 --variant v3 $W $V | quantize Q4_K_M"
} > "$LIST"
N_BATCH=32 sh "$HERE/../../../../scripts/record_set.sh" "$HERE" "$LIST"
