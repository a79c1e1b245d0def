#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_deepseek4.sh (random deepseek4 = DeepSeek-V4
# models). Needs a llama.cpp build (LLAMA_CPP, default /work/llama.cpp: d32676d), build/deltafin,
# build/deltafin-dev and build/tests/test_quant. ONLY=regex records only the matching models and
# merges them into the existing files. Writes, next to this script:
#   models.tsv  name, gen-random arguments (@FIX@ = fixtures folder), sha256 of the file
# and into avx2/ on an AVX2-only machine, next to this script on an AVX-512 one (llama.cpp's float
# orders follow the ISA it was built for; docs/testing.md "One set of recordings per ISA"):
#   greedy.tsv  name, prompt, prompt ids, greedy ids (llama.cpp, 32 steps), min gap, per-step gaps
#   ppl.tsv     name, llama-perplexity PPL (-c 128 -b 32 on tests/data/ppl_story.txt)
#   RECORDED    the llama.cpp commit and the CPU
# The other ISA's rows for the same models: scripts/record_isa.py deepseek4 (no seed search).
# Prompts are decoded in batches of 32 (ORACLE_N_BATCH=32, llama.cpp's -b 32 -ub 32; the test runs
# deltafin with -b 32): llama.cpp's flash attention takes its tiled kernel for 64+ queries, which
# deltafin does not reproduce bit for bit. Four prompts, the last one 206 tokens: past the indexer's
# top_k (4 compressed rows, i.e. 16 positions), the window (8) and the ratio-128 block, under the
# 256 cached cells where llama.cpp's window ring would wrap. Each model tries seeds 1, 2, ... and
# keeps the first whose llama.cpp greedy runs never come within GAP_MIN logits of a tie and
# generate at least 8 tokens; deltafin plays no part in the choice (scripts/record_lib.sh).
# "| quantize" models: gen-random writes the F32 model, `deltafin quantize` converts it, checked
# against llama-quantize's tensor data.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../../.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
export DELTAFIN_FIXTURES="$FIX"
DF=${DELTAFIN_BIN:-build/deltafin}
DFDEV=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
GAP_MIN=${GAP_MIN:-0.005}
MAX_SEED=${MAX_SEED:-40}
N_PREDICT=32
export ORACLE_N_BATCH=32
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp "$DF" "$TMP/deltafin" && DF=$TMP/deltafin
cp "$DFDEV" "$TMP/deltafin-dev" && DFDEV=$TMP/deltafin-dev
LIBDIR=$LLAMA_CPP/build/bin
gcc -O2 -o "$TMP/oracle" scripts/llama_oracle.c -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
    -L"$LIBDIR" -lllama -lggml -lggml-base -Wl,-rpath,"$LIBDIR" -lm
PPL_BIN=$LLAMA_CPP/build/bin/llama-perplexity
LQ_BIN=$LLAMA_CPP/build/bin/llama-quantize
HASH=${DELTAFIN_BUILD:-build}/tests/test_quant
cp "$HASH" "$TMP/test_quant" && HASH=$TMP/test_quant
{
    echo 'Once upon a time'
    echo 'The little dog ran to the park and'
    echo 'One day, a girl named Lily found a needle in her room.'
    echo 'The little dog ran to the park and saw a big red ball. He wanted to play with it, so he ran after it. The ball rolled down the hill and into the pond. The dog jumped in the water and swam to the ball. He brought it back to the boy, who was very happy and gave him a treat. Then they walked home together under the warm sun, and the dog wagged his tail all the way. At home, the mother made soup and bread for dinner, and the boy told her about the ball and the pond.'
} > "$TMP/prompts"
printf 'name\tgen_random_args\tsha256\n' > "$TMP/models.tsv"
printf 'name\tprompt\tprompt_ids\tgen_ids\tmin_gap\tgaps\n' > "$TMP/greedy.tsv"
printf 'name\tppl\n' > "$TMP/ppl.tsv"
V="--vocab @FIX@/models/tok512.bin"
W="--n-embd 256 --q-lora 256 --o-lora 128 --n-ff-exp 256"
{
    # default: 4 layers (compress ratios 0, 4, 128, 4), hash routing on layer 0, window 8, indexer
    # top-4, head 128 (rope 32), 2 output groups, 8 experts top-2, YaRN 16 on the compressed layers
    printf '%s\t%s\n' f32      "--arch deepseek4 --type f32 $V"
    printf '%s\t%s\n' q8_0     "--arch deepseek4 --type q8_0 $V"
    # wider (256) so Q4_K applies to most matrices
    printf '%s\t%s\n' w-q4_k   "--arch deepseek4 --type q4_k $W $V"
    # MXFP4 experts, Q8_0 elsewhere (hyper-connection mixers and position embeddings included), as
    # llama-quantize's MXFP4_MOE
    printf '%s\t%s\n' mxfp4    "--arch deepseek4 $V | quantize Q8_0 --type-experts MXFP4"
    # a NextN / MTP block after 4 layers (loaded, never run), 2 hash layers, SwiGLU limit 1 (the
    # clamps act), 16 experts top-4
    printf '%s\t%s\n' mtp-q8_0 "--arch deepseek4 --type q8_0 --nextn 1 --hash-layers 2 --swiglu-limit 1 --n-expert 16 --n-expert-used 4 $V"
    # head size = indexer key length (64): llama.cpp rotates queries, raw and compressed keys
    # and the output by the Hadamard matrix
    printf '%s\t%s\n' rot-f32  "--arch deepseek4 --type f32 --head-dim 64 --indexer-dim 64 $V"
} | grep -E "^(${ONLY:-.*})	" > "$TMP/list"

. scripts/record_lib.sh
rows_of() { # NAME FILE -> TMP/rows (all columns of the oracle), 1 on a near tie / short run
    : > "$TMP/rows"
    while IFS= read -r prompt; do
        out=$("$TMP/oracle" "$2" "$prompt" $N_PREDICT 2>/dev/null </dev/null)
        gap=$(printf '%s' "$out" | cut -f3)
        n=$(printf '%s' "$out" | cut -f2 | tr ',' '\n' | grep -c . || true)
        if awk -v g="$gap" -v m="$GAP_MIN" 'BEGIN{exit !(g < m)}' || [ "$n" -lt 8 ]; then return 1; fi
        printf '%s\t%s\t%s\n' "$1" "$prompt" "$out" | cut -f1-5,7 >> "$TMP/rows"
    done < "$TMP/prompts"
    return 0
}

while IFS='	' read -r name base; do
    seed=1
    while :; do
        args=$(with_seed "$base" $seed)
        build_model "$name" "$args" "$TMP/$name.gguf"
        rows_of "$name" "$TMP/$name.gguf" && break
        seed=$((seed + 1))
        if [ $seed -gt "$MAX_SEED" ]; then echo "no seed for $name with gap >= $GAP_MIN" >&2; exit 1; fi
    done
    sha=$(sha256sum "$TMP/$name.gguf" | cut -d' ' -f1)
    pp=$(ppl1 "$TMP/$name.gguf" -b 32)
    printf '%s\t%s\t%s\n' "$name" "$args" "$sha" >> "$TMP/models.tsv"
    cat "$TMP/rows" >> "$TMP/greedy.tsv"
    printf '%s\t%s\n' "$name" "$pp" >> "$TMP/ppl.tsv"
    rm -f "$TMP/$name.gguf"
    echo "$name: seed $seed" >&2
done < "$TMP/list"
# the x86 vector width llama.cpp's CPU backend was built for (-march=native) names the folder
OUT=$HERE
grep -q "avx512f" /proc/cpuinfo || OUT=$HERE/avx2
mkdir -p "$OUT"
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
isa=AVX2; [ "$OUT" = "$HERE" ] && isa=AVX-512
printf 'llama.cpp %s built with -DGGML_NATIVE=ON on an %s CPU (%s); tests/data/expected/deepseek4/make.sh\n' \
    "$(git -C "$LLAMA_CPP" rev-parse --short=12 HEAD 2>/dev/null || echo '?')" "$isa" "$cpu" > "$TMP/RECORDED"
if [ -n "${ONLY:-}" ]; then
    /usr/bin/python3 - "$HERE" "$OUT" "$TMP" <<'PY'
import sys
here, out, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
for f in ("models.tsv", "greedy.tsv", "ppl.tsv"):
    dst = f"{here}/{f}" if f == "models.tsv" else f"{out}/{f}"
    nrows = [l.rstrip("\n").split("\t") for l in open(f"{tmp}/{f}") if l.strip()]
    orows = [l.rstrip("\n").split("\t") for l in open(dst) if l.strip()]
    head, ncols = nrows[0], len(nrows[0])
    names = {r[0] for r in nrows[1:]}
    keep = [r + [""] * (ncols - len(r)) for r in orows[1:] if r[0] not in names]
    with open(dst, "w") as fh:
        for r in [head] + keep + nrows[1:]:
            fh.write("\t".join(r) + "\n")
PY
else
    cp "$TMP/models.tsv" "$HERE/"
    cp "$TMP/greedy.tsv" "$TMP/ppl.tsv" "$OUT/"
fi
cp "$TMP/RECORDED" "$OUT/"
echo "written to $HERE, $OUT" >&2
