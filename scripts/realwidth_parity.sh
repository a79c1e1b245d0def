#!/bin/sh
# realwidth_parity.sh — greedy parity with llama.cpp at REAL widths (hidden 7168; Qwen3.5: 4096), few layers, on
# models larger than tests/test_realwidth.sh's: Kimi K3 (kimi-k3, Q8_0 + MXFP4 experts, layers
# K M, the real dense FFN width 33792, 2 shared experts), gpt-oss-120b (hidden 2880, all 128
# experts top-4, MXFP4) and Kimi K2 (deepseek2, Q8_0), 2 layers, 16 experts / 4 used (gpt-oss:
# 128 / 4), 2 prompts x N tokens. Not part of `make test`: the files are 2, 3.3 and 1.4 GB and
# it needs llama.cpp (the test uses smaller models and recorded outputs). Prints, per model
# and prompt, how many ids equal llama.cpp's and, where they part, llama.cpp's top-1 minus top-2
# logit gap (a tiny gap is a near-tie). Also GLM-4.6 (glm4moe), MiniMax-M2, Qwen3.5-397B
# (qwen35moe, 512 experts top-10), GLM-5 (glm-dsa, 256 experts top-8) and DeepSeek V4 Flash
# (deepseek4) widths (at the end).
# One model on disk at a time, in a new folder under DIR, removed at the end.
#   env: DIR (/tmp), N (16), LLAMA_K3 (/work/llama-k3:
#        llama.cpp with kimi-k3), LLAMA (/work/llama.cpp), TOK (../shared/fixtures/models/tok512.bin),
#        ONLY (regex on the entry names k3 gpt-oss k2 qwen35 glm46 minimax glm5 ds4: only those)
set -u
cd "$(dirname "$0")/.." || exit 1
N=${N:-16}
LLAMA_K3=${LLAMA_K3:-/work/llama-k3}; LLAMA=${LLAMA:-/work/llama.cpp}
TOK=${TOK:-$(cd .. && pwd)/shared/fixtures/models/tok512.bin}
DIR=$(mktemp -d "${DIR:-/tmp}/dfrw.XXXXXX") || exit 1
trap 'rm -rf "$DIR"' EXIT INT TERM
cp "${DELTAFIN_BIN:-build/deltafin}" "$DIR/deltafin" || exit 1
B="$DIR/deltafin"
cp "${DELTAFIN_DEV_BIN:-build/deltafin-dev}" "$DIR/deltafin-dev" || exit 1
D="$DIR/deltafin-dev"   # gen-random
want() { printf '%s\n' "$1" | grep -Eq -- "${ONLY:-.}"; }
for L in "$LLAMA_K3" "$LLAMA"; do
    [ "$L" = "$LLAMA_K3" ] && ! want k3 && continue
    gcc -O2 -o "$DIR/oracle-$(basename "$L")" scripts/llama_oracle.c -I"$L/include" -I"$L/ggml/include" \
        -L"$L/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$L/build/bin" -lm || exit 1
done
compare() { # name model oracle [deltafin's extra options] [a third prompt]
    for P in "Once upon a time" "The little dog ran to the park and" ${5:+"$5"}; do
        O=$(nice -n 10 "$3" "$2" "$P" $N 2>/dev/null </dev/null)
        DF=$(nice -n 10 "$B" run -m "$2" -p "$P" -n $N --temp 0 -t 2 ${4:-} --json 2>/dev/null |
            tail -n 1 | sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p')
        echo "$DF" "$O" | awk -v name="$1" -v p="$P" '{
            split($1, d, ","); split($3, l, ","); n = 0; split($0, f, "\t"); split(f[5], g, ",")
            for (i = 1; i in l; i++) { if (d[i] != l[i]) break; n++ }
            if (n == length(l)) printf "%s | %s | %d/%d ids identical\n", name, p, n, length(l)
            else printf "%s | %s | %d/%d ids identical, then deltafin %s vs llama.cpp %s where llama.cpp'"'"'s gap is %s\n", name, p, n, length(l), d[n+1], l[n+1], g[n+1] }'
    done
}
want k3 && {
nice -n 10 "$D" gen-random --arch kimi-k3 --preset k3 --n-layer 2 --layers KM --n-expert 16 --n-expert-used 4 --type q8_0 \
    --expert-type mxfp4 --raw-experts --vocab "$TOK" --seed 2 "$DIR/k3w.gguf" >/dev/null || exit 1
compare "kimi-k3 7168 q8_0+mxfp4" "$DIR/k3w.gguf" "$DIR/oracle-$(basename "$LLAMA_K3")"
rm -f "$DIR/k3w.gguf"; }
# gpt-oss-120b widths (hidden 2880, 64 heads / 8 KV, 128 experts top-4, window 128), 2 layers
want gpt-oss && {
nice -n 10 "$D" gen-random --arch gpt-oss --preset gpt-oss-120b --n-layer 2 --type q8_0 --expert-type mxfp4 \
    --raw-experts --vocab "$TOK" --seed 2 "$DIR/gow.gguf" >/dev/null || exit 1
compare "gpt-oss-120b 2880 q8_0+mxfp4" "$DIR/gow.gguf" "$DIR/oracle-$(basename "$LLAMA")"
rm -f "$DIR/gow.gguf"; }
want k2 && {
nice -n 10 "$D" gen-random --arch deepseek2 --preset kimi-k2 --n-layer 2 --n-expert 16 --n-expert-used 4 --type q8_0 \
    --vocab "$TOK" --seed 2 "$DIR/k2w.gguf" >/dev/null || exit 1
compare "deepseek2 (K2) 7168 q8_0" "$DIR/k2w.gguf" "$DIR/oracle-$(basename "$LLAMA")"
rm -f "$DIR/k2w.gguf"; }
# Qwen3.5-397B-A17B widths (qwen35moe: hidden 4096, DeltaNet 16 k / 64 v heads of 128, attention 32
# heads of 256 with 64 M-RoPE dims), one DeltaNet and one attention layer, all 512 experts top-10
# of width 1024 and the shared expert: Q8_0 with MXFP4 experts (6.8 GB)
want qwen35 && {
nice -n 10 "$D" gen-random --arch qwen35moe --preset qwen3.5-397b --n-layer 2 --interval 2 --type q8_0 \
    --expert-type mxfp4 --raw-experts --vocab "$TOK" --seed 2 "$DIR/q35w.gguf" >/dev/null || exit 1
compare "qwen35moe (Qwen3.5-397B) 4096, 512 experts top-10, q8_0+mxfp4" "$DIR/q35w.gguf" "$DIR/oracle-$(basename "$LLAMA")"
rm -f "$DIR/q35w.gguf"; }
# GLM-4.6 widths (hidden 5120, 96 x 128 heads, 8 KV, rope 64 of 128, dense 12288, experts 1536
# top-8): a dense layer, a MoE layer and the NextN layer; MiniMax-M2 widths (3072, 48 x 128, 8 KV,
# experts 1536 top-8), 2 layers. E_GLM / E_MM experts (16 / 32 by default; the real 160 / 256 make
# 4 / 4.8 GB per MoE layer at Q8_0).
want glm46 && {
nice -n 10 "$D" gen-random --preset glm-4.6 --n-layer 3 --n-dense 1 --n-nextn 1 --n-expert "${E_GLM:-16}" --type q8_0 \
    --vocab "$TOK" --seed 1 "$DIR/glmw.gguf" >/dev/null 2>&1 || exit 1
compare "glm4moe (GLM-4.6) 5120 q8_0" "$DIR/glmw.gguf" "$DIR/oracle-$(basename "$LLAMA")"
rm -f "$DIR/glmw.gguf"; }
want minimax && {
nice -n 10 "$D" gen-random --preset minimax-m2 --n-layer 2 --n-expert "${E_MM:-32}" --type q8_0 \
    --vocab "$TOK" --seed 1 "$DIR/mmw.gguf" >/dev/null 2>&1 || exit 1
compare "minimax-m2 3072 q8_0" "$DIR/mmw.gguf" "$DIR/oracle-$(basename "$LLAMA")"
rm -f "$DIR/mmw.gguf"; }
# GLM-5 widths (glm-dsa: hidden 6144, 64 MLA heads, q/kv LoRA 2048/512, nope/rope/v 192/64/256,
# dense FFN 12288, 256 experts top-8 of 2048 + 1 shared, indexer 32 x 128): a dense and a MoE
# layer, Q8_0 with MXFP4 experts (5.6 GB); the published indexer top_k 2048 (every key of these
# prompts is kept), then the same file with top_k 8 (the selection at real width)
want glm5 && {
nice -n 10 "$D" gen-random --preset glm-5 --n-layer 2 --nextn 0 --n-dense 1 --type q8_0 --expert-type mxfp4 \
    --raw-experts --vocab "$TOK" --seed 1 "$DIR/glm5w.gguf" >/dev/null 2>&1 || exit 1
compare "glm-dsa (GLM-5) 6144, 256 experts top-8, q8_0+mxfp4, top_k 2048" "$DIR/glm5w.gguf" "$DIR/oracle-$(basename "$LLAMA")"
/usr/bin/python3 - "$DIR/glm5w.gguf" <<'PY' || exit 1
import struct, sys
# rewrite the u32 value of glm-dsa.attention.indexer.top_k in place (2048 -> 8)
key = b"glm-dsa.attention.indexer.top_k"
with open(sys.argv[1], "r+b") as f:
    head = f.read(1 << 20)
    i = head.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<II", head, i) == (4, 2048)  # type u32, value
    f.seek(i + 4); f.write(struct.pack("<I", 8))
PY
compare "glm-dsa (GLM-5) 6144, 256 experts top-8, q8_0+mxfp4, top_k 8" "$DIR/glm5w.gguf" "$DIR/oracle-$(basename "$LLAMA")"
rm -f "$DIR/glm5w.gguf"; }
# DeepSeek V4 Flash widths (deepseek4: hidden 4096, 64 heads of 512 with rope 64, q LoRA 1024, 8
# output groups of LoRA 1024, window 128, indexer 64 heads of 128, experts 2048 top-6 of 16 here (V4
# Flash: 256), Q8_0 with MXFP4 experts): a hash-routed ratio-4 layer and a routed ratio-128 layer.
# A third prompt of 206 tokens lets the window slide and a ratio-128 block complete; the indexer's
# top-k is 32 here (V4 Flash: 512, which needs 2048+ tokens to select). Prompts in 32-token batches
# on both sides (tests/test_deepseek4.sh says why).
want ds4 && {
nice -n 10 "$D" gen-random --arch deepseek4 --preset v4-flash --n-layer 2 --ratios 4,128 --hash-layers 1 \
    --n-expert 16 --n-expert-used 6 --indexer-top-k 32 --type q8_0 --expert-type mxfp4 --raw-experts \
    --vocab "$TOK" --seed 1 "$DIR/ds4w.gguf" >/dev/null || exit 1
LONG="The little dog ran to the park and saw a big red ball. He wanted to play with it, so he ran after it. \
The ball rolled down the hill and into the pond. The dog jumped in the water and swam to the ball. He brought it back \
to the boy, who was very happy and gave him a treat. Then they walked home together under the warm sun, and the dog \
wagged his tail all the way. At home, the mother made soup and bread for dinner, and the boy told her about the ball \
and the pond."
ORACLE_N_BATCH=32; export ORACLE_N_BATCH
compare "deepseek4 (V4 Flash) 4096 q8_0+mxfp4" "$DIR/ds4w.gguf" "$DIR/oracle-$(basename "$LLAMA")" "-b 32" "$LONG"
unset ORACLE_N_BATCH
rm -f "$DIR/ds4w.gguf"; }
