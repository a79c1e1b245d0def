#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_qwen3next.sh (random qwen35moe models).
# Needs a llama.cpp build with qwen35moe (LLAMA_CPP, default /work/llama.cpp), build/deltafin and
# build/deltafin-dev; scripts/record_set.sh records (its header: models.tsv here, greedy.tsv and
# ppl.tsv here or in avx2/ by the recording machine's ISA, ONLY merges; the rows made by
# scripts/record_isa.py for the same models on the other ISA stay as they are).
# Four prompts, one of them 119 tokens long: longer than llama.cpp's DeltaNet chunk (64) and
# past its switch to the tiled attention kernel. Each model tries seeds 1, 2, ... and keeps the
# first whose llama.cpp greedy runs never come within GAP_MIN logits of a tie and generate at
# least 8 tokens; deltafin plays no part in the choice (scripts/record_lib.sh).
HERE=$(cd "$(dirname "$0")" && pwd)
LIST=$(mktemp)
trap 'rm -f "$LIST"' EXIT INT TERM
V="--vocab @FIX@/models/tok512.bin"
W="--n-embd 256 --head-dim 64 --state 64 --n-ff-exp 256 --n-ff-shexp 256"
{
    # default: 4 layers (DeltaNet x3, attention), 2 k heads / 4 v heads, M-RoPE sections 3,3,2,0
    printf '%s\t%s\n' f32      "--arch qwen35moe --type f32 $V"
    printf '%s\t%s\n' q8_0     "--arch qwen35moe --type q8_0 $V"
    # 2 k heads broadcast to 8 v heads (v head h reads k head h % 2), attention every 2nd layer
    printf '%s\t%s\n' gqa-f32  "--arch qwen35moe --type f32 --groups 2 --v-heads 8 --n-layer 8 --interval 2 $V"
    # 512 experts top-10 (Qwen3.5-397B's router), MXFP4 experts
    printf '%s\t%s\n' e512-q8_0 "--arch qwen35moe --type q8_0 --n-expert 512 --n-expert-used 10 $V"
    printf '%s\t%s\n' mxfp4    "--arch qwen35moe --type q8_0 --expert-type mxfp4 --n-expert 16 --n-expert-used 4 $V"
    # wider (256) so Q4_K applies to most matrices; 32 rotary dims in sections 6,5,5,0
    printf '%s\t%s\n' w-q4_k   "--arch qwen35moe --type q4_k $W --n-rot 32 --sections 6,5,5,0 $V"
    # llama-quantize's Q4_K_M mixture of the 256-wide F32 model
    printf '%s\t%s\n' w-q4_k_m "--arch qwen35moe --type f32 $W --n-rot 32 --sections 6,5,5,0 $V | quantize Q4_K_M"
} > "$LIST"
sh "$HERE/../../../../scripts/record_set.sh" "$HERE" "$LIST"
