#!/bin/sh
# deltafin quantize vs llama-quantize: on the same deterministic F32 model (gen-random), the
# tensor data must equal llama-quantize's output byte for byte. Expected hashes were taken from
# llama-quantize (build 0.0.9749) outputs: `llama-quantize --pure m.gguf out.gguf TYPE 2` and
# `llama-quantize m.gguf out.gguf MXFP4_MOE 2` (and Q4_K_M below); SHA-256 over tensor data,
# tensors sorted by name.
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
B=${DELTAFIN_BUILD:-build}
HASH="$B/tests/test_quant --hash-tensors"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0
"$DEVBIN" gen-random --arch qwen3moe --n-embd 256 --n-ff-exp 256 --n-ff 512 --n-layer 2 --vocab bytes \
    "$T/m.gguf" >/dev/null 2>&1 || { echo "quantize.sh: gen-random failed"; exit 1; }
check() { # name expected-hash quantize-args...
    name=$1; want=$2; shift 2
    if ! "$BIN" quantize "$T/m.gguf" "$T/$name.gguf" "$@" -t 2 2>"$T/log"; then
        echo "quantize.sh: FAIL $name: quantize failed"; cat "$T/log"; fail=1; return
    fi
    got=$($HASH "$T/$name.gguf")
    if [ "$got" = "$want" ]; then echo "quantize.sh: ok   $name"
    else echo "quantize.sh: FAIL $name: tensor data hash $got, llama-quantize $want"; fail=1; fi
    [ -e "$T/$name.gguf.tmp" ] && { echo "quantize.sh: FAIL $name: temp file left"; fail=1; }
}
check Q8_0 bc02c1763460b6ca62a42e21c50c06f2903e0e08966f12b9e31d02cfbfd5b685 Q8_0 --pure
check Q4_K 67e40da499948da14f3a6c62eb1d9d1fc22f3907d3529842583373d2af6161ee Q4_K --pure
check Q6_K f5f8a7a6130363c0c1ba3d973f835b25c6a94026c1a28ecd5c372b211b24aeb1 Q6_K --pure
check MXFP4_MOE 3a2d61c4ee094bf1d5631d716f828a9b54eba378c17f2a3166eca0130006b54e Q8_0 --type-experts MXFP4
# llama-quantize's Q4_K_M mixture (llama.cpp d32676d, `llama_model_quantize` with
# LLAMA_FTYPE_MOSTLY_Q4_K_M): 8 experts (attn_k / attn_v Q8_0, attn_output Q5_K -> Q5_1 on its
# 128-wide rows, ffn_down Q6_K in use_more_bits layers, output Q6_K)
check Q4_K_M 14db7551b6da86352ae8e61fde075e0cdbb5bdb3701536a7f91771d31cd1cd9d Q4_K_M
# and 16 experts on qwen3next (attn_qkv / attn_v Q6_K in the use_more_bits positions)
"$DEVBIN" gen-random --arch qwen3next --n-embd 256 --head-dim 64 --state 64 --n-ff-exp 256 --n-ff-shexp 256 \
    --n-expert 16 --n-expert-used 4 --vocab bytes "$T/m.gguf" >/dev/null 2>&1 || { echo "quantize.sh: gen-random qwen3next failed"; exit 1; }
check Q4_K_M-qwen3next 567433a6e6ea661a9fe1b614d01e86e0914cb8a576e1de683818d401448a1892 Q4_K_M
"$BIN" quantize "$T/m.gguf" "$T/x.gguf" Q4_K_M --pure 2>/dev/null && { echo "quantize.sh: FAIL Q4_K_M --pure accepted"; fail=1; }
# re-quantization from a quantized input: Q8_0 -> Q4_K goes through dequantize
"$BIN" quantize "$T/Q8_0.gguf" "$T/rq.gguf" Q4_K --pure -t 2 2>/dev/null || { echo "quantize.sh: FAIL requantize"; fail=1; }
# errors: bad type, missing input
"$BIN" quantize "$T/m.gguf" "$T/x.gguf" Q9_9 2>/dev/null && { echo "quantize.sh: FAIL bad type accepted"; fail=1; }
"$BIN" quantize "$T/none.gguf" "$T/x.gguf" Q8_0 2>/dev/null && { echo "quantize.sh: FAIL missing input accepted"; fail=1; }
[ -e "$T/x.gguf" ] && { echo "quantize.sh: FAIL output written on error"; fail=1; }
exit $fail
