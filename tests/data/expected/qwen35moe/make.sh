#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_qwen3next.sh (random qwen35moe models).
# Needs a llama.cpp build with qwen35moe (LLAMA_CPP, default /work/llama.cpp: the oracle of
# /work/llama.cpp/ORACLE.md), build/deltafin and build/deltafin-dev. Writes, next to this script:
#   models.tsv  name, gen-random arguments (@FIX@ = fixtures folder), sha256 of the file
#   greedy.tsv  name, prompt, prompt ids, greedy ids (llama.cpp, 32 steps), min gap, per-step gaps
#   ppl.tsv     name, llama-perplexity PPL (-c 128 -b 32 on tests/data/ppl_story.txt)
# Four prompts, one of them 119 tokens long: longer than llama.cpp's DeltaNet chunk (64) and
# past its switch to the tiled attention kernel. Each model tries seeds 1, 2, ... and keeps the
# first whose llama.cpp greedy runs never come within GAP_MIN logits of a tie and generate at
# least 8 tokens; deltafin plays no part in the choice (scripts/record_lib.sh).
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
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp "$DF" "$TMP/deltafin" && DF=$TMP/deltafin
cp "$DFDEV" "$TMP/deltafin-dev" && DFDEV=$TMP/deltafin-dev
LIBDIR=$LLAMA_CPP/build/bin
gcc -O2 -o "$TMP/oracle" scripts/llama_oracle.c -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
    -L"$LIBDIR" -lllama -lggml -lggml-base -Wl,-rpath,"$LIBDIR" -lm
PPL_BIN=$LLAMA_CPP/build/bin/llama-perplexity
{
    echo 'Once upon a time'
    echo 'The little dog ran to the park and'
    echo 'One day, a girl named Lily found a needle in her room.'
    echo 'The little dog ran to the park and saw a big red ball. He wanted to play with it, so he ran after it. The ball rolled down the hill and into the pond. The dog jumped in the water and swam to the ball. He brought it back to the boy, who was very happy and gave him a treat.'
} > "$TMP/prompts"
printf 'name\tgen_random_args\tsha256\n' > "$TMP/models.tsv"
printf 'name\tprompt\tprompt_ids\tgen_ids\tmin_gap\tgaps\n' > "$TMP/greedy.tsv"
printf 'name\tppl\n' > "$TMP/ppl.tsv"
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
} | grep -E "^${ONLY:-.}" > "$TMP/list"

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
    echo "$name: seed $seed" >&2
done < "$TMP/list"
cp "$TMP/models.tsv" "$TMP/greedy.tsv" "$TMP/ppl.tsv" "$HERE/"
echo "written to $HERE" >&2
