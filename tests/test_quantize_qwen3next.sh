#!/bin/sh
# test_quantize_qwen3next.sh — llama-quantize's Q4_K_M mixture on a 16-expert qwen3next model,
# the case tests/test_quantize_recipes.sh (a dense llama and an 8-expert llama) does not reach:
# the attention-V-like tensors of a hybrid model (attn_qkv of the DeltaNet layers, attn_v of the
# gated-attention ones) get Q6_K at llama-quantize's use_more_bits positions, and no 8-expert
# rule applies. The expected hash is llama-quantize d32676d's (`llama-quantize m.gguf out.gguf
# Q4_K_M 2`): SHA-256 over the tensor data, tensors sorted by name (test_quant --hash-tensors).
cd "$(dirname "$0")/.." || exit 1
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
B=${DELTAFIN_BUILD:-build}
HASH="$B/tests/test_quant --hash-tensors"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
"$DEVBIN" gen-random --arch qwen3next --n-embd 256 --head-dim 64 --state 64 --n-ff-exp 256 --n-ff-shexp 256 \
    --n-expert 16 --n-expert-used 4 --vocab bytes "$T/m.gguf" >/dev/null 2>&1 ||
    { echo "test_quantize_qwen3next: FAIL gen-random qwen3next failed"; exit 1; }
if ! "$BIN" quantize "$T/m.gguf" "$T/q.gguf" Q4_K_M -t 2 2>"$T/log"; then
    echo "test_quantize_qwen3next: FAIL quantize failed"; cat "$T/log"; exit 1
fi
want=567433a6e6ea661a9fe1b614d01e86e0914cb8a576e1de683818d401448a1892
got=$($HASH "$T/q.gguf")
if [ "$got" != "$want" ]; then
    echo "test_quantize_qwen3next: FAIL tensor data hash $got, llama-quantize $want"; exit 1
fi
echo "test_quantize_qwen3next: ok (Q4_K_M of a 16-expert qwen3next = llama-quantize's, byte for byte)"
