#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_deepseek32.sh (deepseek32 = DeepSeek-V3.2
# random models: MLA plus the DSA lightning indexer, top_k 8 keys per query, so both prompts'
# later positions attend a selected subset). Needs a llama.cpp build (LLAMA_CPP, default
# /work/llama.cpp), build/deltafin and build/deltafin-dev. ONLY=regex records only the matching
# models and merges them into the existing files. Writes, next to this script:
#   models.tsv  name, gen-random arguments (@FIX@ = fixtures folder), sha256 of the file
#   greedy.tsv  name, prompt, prompt ids, greedy ids (llama.cpp, 32 steps), min gap
#   ppl.tsv     name, llama-perplexity PPL (-c 128 -b 32 on tests/data/ppl_story.txt)
# Seeds as tests/data/expected/deepseek2/make.sh (first seed whose greedy runs never come
# within GAP_MIN logits of a tie; deltafin plays no part in the choice). "| quantize" models:
# gen-random writes the F32 model, `deltafin quantize` converts it, checked against
# llama-quantize's tensor data.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../../.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
export DELTAFIN_FIXTURES="$FIX"
DF=${DELTAFIN_BIN:-build/deltafin}
DFDEV=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
GAP_MIN=${GAP_MIN:-0.03}
MAX_SEED=${MAX_SEED:-60}
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
printf 'Once upon a time\nThe little dog ran to the park and\n' > "$TMP/prompts"
printf 'name\tgen_random_args\tsha256\n' > "$TMP/models.tsv"
printf 'name\tprompt\tprompt_ids\tgen_ids\tmin_gap\n' > "$TMP/greedy.tsv"
printf 'name\tppl\n' > "$TMP/ppl.tsv"

{
    for vt in v3:f32 v3:q8_0 k2:f16; do
        v=${vt%:*}; type=${vt#*:}
        printf '%s\t%s\n' "$v-$type" "--arch deepseek32 --variant $v --type $type --vocab @FIX@/models/tok512.bin"
    done
    printf '%s\t%s\n' "v3-mxfp4" "--arch deepseek32 --variant v3 --vocab @FIX@/models/tok512.bin | quantize Q8_0 --type-experts MXFP4"
} | grep -E "^(${ONLY:-.*})	" > "$TMP/list"

. scripts/record_lib.sh
ppl_of() { ppl1 "$1" -b 32; }

while IFS='	' read -r name base; do
    seed=1
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
