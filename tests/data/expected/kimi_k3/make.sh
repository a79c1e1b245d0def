#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_kimi_k3.sh (random kimi-k3 models).
# Needs a llama.cpp build with kimi-k3 (LLAMA_CPP, default /work/llama-k3: commit 34af94cd9ab2,
# the one docs kimi-k3.md was written from), build/deltafin and build/deltafin-dev. Writes, next
# to this script:
#   models.tsv  name, gen-random arguments (@FIX@ = fixtures folder), sha256 of the file
#   greedy.tsv  name, prompt, prompt ids, greedy ids (llama.cpp, 32 steps), min gap
#   ppl.tsv     name, llama-perplexity PPL (-c 128 -b 32 on tests/data/ppl_story.txt)
# Each model tries seeds 1, 2, ... and keeps the first whose llama.cpp greedy runs never come
# within GAP_MIN logits of a tie (a near tie is decided by rounding, in either engine) and
# generate at least 8 tokens before an end-of-generation token; deltafin plays no part in the
# choice (as in the other recording scripts; shared functions in scripts/record_lib.sh).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../../.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama-k3}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
export DELTAFIN_FIXTURES="$FIX"
DF=${DELTAFIN_BIN:-build/deltafin}
DFDEV=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
GAP_MIN=${GAP_MIN:-0.02}
MAX_SEED=${MAX_SEED:-40}
N_PREDICT=32
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp "$DF" "$TMP/deltafin" && DF=$TMP/deltafin   # other builds may relink build/deltafin meanwhile
cp "$DFDEV" "$TMP/deltafin-dev" && DFDEV=$TMP/deltafin-dev
LIBDIR=$LLAMA_CPP/build/bin
gcc -O2 -o "$TMP/oracle" scripts/llama_oracle.c -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
    -L"$LIBDIR" -lllama -lggml -lggml-base -Wl,-rpath,"$LIBDIR" -lm
PPL_BIN=$LLAMA_CPP/build/bin/llama-perplexity
printf 'Once upon a time\nThe little dog ran to the park and\n' > "$TMP/prompts"
printf 'name\tgen_random_args\tsha256\n' > "$TMP/models.tsv"
printf 'name\tprompt\tprompt_ids\tgen_ids\tmin_gap\n' > "$TMP/greedy.tsv"
printf 'name\tppl\n' > "$TMP/ppl.tsv"
V="--vocab @FIX@/models/tok512.bin"
W="--mat-scale 0.5 --n-embd 256 --n-head 4 --head-dim 64 --q-lora 256 --kv-lora 256 --d-nope 32 --d-rope 32 --d-v 64 --n-ff 256 --n-ff-exp 256 --latent 256"
{
    # default: layers K M K K, B = 2 (banks at 0, 2), q LoRA, MLA gate, latent 32, 2 shared
    printf '%s\t%s\n' f32      "--arch kimi-k3 --type f32 $V"
    printf '%s\t%s\n' q8_0     "--arch kimi-k3 --type q8_0 $V"
    printf '%s\t%s\n' f16      "--arch kimi-k3 --type f16 $V"
    # the other branches: no AttnRes, attn_q, no MLA gate, no gate lower bound (softplus
    # gate), experts at n_embd (no latent), no routed norm, K/M alternating, 2 dense layers
    printf '%s\t%s\n' plain-f32 "--arch kimi-k3 --type f32 --layers KM --n-layer 5 --block-size 0 --q-lora 0 --no-attn-gate --no-lb --latent 0 --n-dense 2 --n-shared 1 $V"
    # MLA-heavy with a bank at every layer; KDA-heavy with B = 3 and a 3-tap conv (llama.cpp
    # cannot run a kimi-k3 file without any MLA layer or without any KDA layer: it asserts in
    # its hybrid-memory input setup, so every model here mixes both kinds)
    printf '%s\t%s\n' mla-f32  "--arch kimi-k3 --type f32 --layers MMKM --n-layer 4 --block-size 1 $V"
    printf '%s\t%s\n' kda-q8_0 "--arch kimi-k3 --type q8_0 --layers KKKM --n-layer 4 --block-size 3 --conv 3 $V"
    # MXFP4 routed experts (Q8_0 elsewhere), 16 experts 4 used
    printf '%s\t%s\n' mxfp4    "--arch kimi-k3 --type q8_0 --expert-type mxfp4 --n-expert 16 --n-expert-used 4 $V"
    # wider (256) so Q4_K applies to most matrices (ne0 64 / 32 rows fall back to Q8_0)
    printf '%s\t%s\n' w-q4_k   "--arch kimi-k3 --type q4_k $W $V"
    printf '%s\t%s\n' w-q8_0-mxfp4 "--arch kimi-k3 --type q8_0 --expert-type mxfp4 $W $V"
} | grep -E "^${ONLY:-.}" > "$TMP/list"

. scripts/record_lib.sh
ppl_of() { ppl1 "$1" -b 32; }

while IFS='	' read -r name base; do
    seed=1
    while :; do
        args=$(with_seed "$base" $seed)
        build_model "$name" "$args" "$TMP/$name.gguf"
        check_seed "$name" "$TMP/$name.gguf" 8 && break
        seed=$((seed + 1))
        if [ $seed -gt "$MAX_SEED" ]; then echo "no seed for $name with gap >= $GAP_MIN" >&2; exit 1; fi
    done
    sha=$(sha256sum "$TMP/$name.gguf" | cut -d' ' -f1)
    pp=$(ppl_of "$TMP/$name.gguf")
    printf '%s\t%s\t%s\n' "$name" "$args" "$sha" >> "$TMP/models.tsv"
    cat "$TMP/rows" >> "$TMP/greedy.tsv"
    printf '%s\t%s\n' "$name" "$pp" >> "$TMP/ppl.tsv"
    echo "$name: seed $seed" >&2
done < "$TMP/list"
cp "$TMP/models.tsv" "$TMP/greedy.tsv" "$TMP/ppl.tsv" "$HERE/"
echo "written to $HERE" >&2
