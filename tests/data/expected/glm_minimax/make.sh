#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_glm_minimax.sh (glm4moe and minimax-m2 random
# models). Needs a llama.cpp build (LLAMA_CPP, default /work/llama.cpp), build/deltafin and
# build/deltafin-dev. ONLY=regex records only the matching models and merges them into the
# existing files. Writes, next to this script:
#   models.tsv  name, gen-random arguments (@FIX@ = fixtures folder), sha256 of the file
#   greedy.tsv  name, prompt, prompt ids, greedy ids (llama.cpp, 32 steps), min gap (4 prompts)
#   ppl.tsv     name, llama-perplexity PPL (-c 128 -b 32 on tests/data/ppl_story.txt)
# The same procedure as tests/data/expected/deepseek2/make.sh (which explains the seed choice,
# -b 32 and the "| quantize" entries checked against llama-quantize).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../../.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
export DELTAFIN_FIXTURES="$FIX"
DF=${DELTAFIN_BIN:-build/deltafin}
DFDEV=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
GAP_MIN=${GAP_MIN:-0.03}
MAX_SEED=${MAX_SEED:-80}
N_PREDICT=32
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp "$DF" "$TMP/deltafin" && DF=$TMP/deltafin   # other builds may relink build/deltafin meanwhile
cp "$DFDEV" "$TMP/deltafin-dev" && DFDEV=$TMP/deltafin-dev
LIBDIR=$LLAMA_CPP/build/bin
gcc -O2 -o "$TMP/oracle" scripts/llama_oracle.c -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
    -L"$LIBDIR" -lllama -lggml-base -Wl,-rpath,"$LIBDIR"
PPL_BIN=$LLAMA_CPP/build/bin/llama-perplexity
LQ_BIN=$LLAMA_CPP/build/bin/llama-quantize
HASH=${DELTAFIN_BUILD:-build}/tests/test_quant
cp "$HASH" "$TMP/test_quant" && HASH=$TMP/test_quant
printf 'Once upon a time\nThe little dog ran to the park and\nOne day, a girl named Lily\nThe sun was\n' > "$TMP/prompts"
printf 'name\tgen_random_args\tsha256\n' > "$TMP/models.tsv"
printf 'name\tprompt\tprompt_ids\tgen_ids\tmin_gap\n' > "$TMP/greedy.tsv"
printf 'name\tppl\n' > "$TMP/ppl.tsv"

{
    V="--vocab @FIX@/models/tok512.bin"
    # a third column: the first seed to try (where the search ended last time; saves minutes)
    printf '%s\t%s\t%s\n' "glm-f32" "--arch glm4moe --type f32 $V" 16
    printf '%s\t%s\t%s\n' "glm-f16" "--arch glm4moe --type f16 $V" 10
    printf '%s\t%s\t%s\n' "glm-q8_0" "--arch glm4moe --type q8_0 $V" 41
    printf '%s\t%s\t%s\n' "mm-f32" "--arch minimax-m2 --type f32 $V" 11
    printf '%s\t%s\t%s\n' "mm-f16" "--arch minimax-m2 --type f16 $V" 22
    printf '%s\t%s\t%s\n' "mm-q8_0" "--arch minimax-m2 --type q8_0 $V" 2
    # GLM-4.5-Air style: no QK norm; no q/k/v biases; two shared experts, two dense layers
    printf '%s\t%s\n' "glm-noqk-f32" "--arch glm4moe --no-qk-norm --n-layer 5 --n-dense 2 --out-scale 8 $V"
    printf '%s\t%s\n' "glm-nobias-q8_0" "--arch glm4moe --no-bias --n-shared 2 --type q8_0 $V"
    # wide enough for Q4_K on every matrix (rows of 256)
    GW="--arch glm4moe --n-embd 256 --head-dim 64 --n-rot 32 --n-ff 256 --n-ff-exp 256 $V"
    MW="--arch minimax-m2 --n-embd 256 --head-dim 64 --n-rot 32 --n-ff 256 $V"
    printf '%s\t%s\n' "glmw-q4_k" "$GW | quantize Q4_K --pure"
    printf '%s\t%s\n' "mmw-q4_k" "$MW | quantize Q4_K --pure"
    printf '%s\t%s\n' "glm-mxfp4" "--arch glm4moe $V | quantize Q8_0 --type-experts MXFP4"
    printf '%s\t%s\n' "mm-mxfp4" "--arch minimax-m2 $V | quantize Q8_0 --type-experts MXFP4"
} | grep -E "^(${ONLY:-.*})	" > "$TMP/list"

. scripts/record_lib.sh
ppl_of() { ppl1 "$1" -b 32; }

while IFS='	' read -r name base seed0; do
    seed=${seed0:-1}
    while :; do
        args=$(with_seed "$base" $seed)
        build_model "$name" "$args" "$TMP/$name.gguf"
        check_seed "$name" "$TMP/$name.gguf" $N_PREDICT && break
        seed=$((seed + 1))
        if [ $seed -gt "$MAX_SEED" ]; then
            echo "no seed for $name in 1..$MAX_SEED with gaps >= $GAP_MIN" >&2; exit 1
        fi
    done
    sha=$(sha256sum "$TMP/$name.gguf" | cut -d' ' -f1)
    printf '%s\t%s\t%s\n' "$name" "$args" "$sha" >> "$TMP/models.tsv"
    cat "$TMP/rows" >> "$TMP/greedy.tsv"
    printf '%s\t%s\n' "$name" "$(ppl_of "$TMP/$name.gguf")" >> "$TMP/ppl.tsv"
    rm -f "$TMP/$name.gguf"
    echo "$name: seed $seed" >&2
done < "$TMP/list"
if [ -n "${ONLY:-}" ]; then
    # merge: keep the other models' rows, replace (or append) the recorded ones
    /usr/bin/python3 - "$HERE" "$TMP" <<'PY'
import sys
here, tmp = sys.argv[1], sys.argv[2]
for f in ("models.tsv", "greedy.tsv", "ppl.tsv"):
    nrows = [l.rstrip("\n").split("\t") for l in open(f"{tmp}/{f}") if l.strip()]
    orows = [l.rstrip("\n").split("\t") for l in open(f"{here}/{f}") if l.strip()]
    head, ncols = nrows[0], len(nrows[0])
    names = {r[0] for r in nrows[1:]}
    keep = [r + [""] * (ncols - len(r)) for r in orows[1:] if r[0] not in names]
    with open(f"{here}/{f}", "w") as fh:
        for r in [head] + keep + nrows[1:]:
            fh.write("\t".join(r) + "\n")
PY
else
    cp "$TMP/models.tsv" "$TMP/greedy.tsv" "$TMP/ppl.tsv" "$HERE/"
fi
echo "written to $HERE" >&2
