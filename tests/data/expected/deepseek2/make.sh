#!/bin/sh
# make.sh — record llama.cpp's outputs for tests/test_deepseek2.sh (deepseek2 random models).
# Needs a llama.cpp build (LLAMA_CPP, default /work/llama.cpp), build/deltafin and
# build/deltafin-dev. ONLY=regex records only the matching models and merges them into the
# existing files. Writes, next to this script:
#   models.tsv  name, gen-random arguments (@FIX@ = fixtures folder), sha256 of the file
#   greedy.tsv  name, prompt, prompt ids, greedy ids (llama.cpp, 32 steps), min gap
#   ppl.tsv     name, llama-perplexity PPL (-c 128 -b 32 on tests/data/ppl_story.txt)
# The test accepts deltafin's perplexity within 0.5% of it.
# Like scripts/make_expected.sh, each model tries seeds 1, 2, ... and keeps the first whose
# greedy runs never come within GAP_MIN logits of a tie; deltafin plays no part in the choice
# (until 2026-12-02 seeds were also rejected where deltafin's ids differed, a selection bias
# removed once deltafin followed ggml's float orders). Quantized-by-deltafin models read
# "GEN-RANDOM ARGS | quantize TYPE [OPTIONS]" in the args column: gen-random writes the F32
# model, `deltafin quantize` converts it; make.sh checks that the tensor data equals
# llama-quantize's (LQ_ARGS: --pure Q4_K, MXFP4_MOE) and stops if not.
# Perplexity uses -b 32 on both sides: these random models are chaotic enough that llama.cpp's
# own PPL moves by several % between its one-chunk and tiled (>= 64 query) flash-attention
# kernels; with -b 32 both engines run the kernel deltafin reproduces bit for bit.
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
    for vt in v3:f32 v3:q8_0 k2:f32 k2:f16 k2:q8_0 lite:f32 lite:q8_0 legacy:f32 legacy:q8_0; do
        v=${vt%:*}; type=${vt#*:}
        printf '%s\t%s\n' "$v-$type" "--arch deepseek2 --variant $v --type $type --vocab @FIX@/models/tok512.bin"
    done
    # fused ffn_gate_up_exps
    printf '%s\t%s\n' "v3fused-q8_0" "--arch deepseek2 --variant v3 --fused --type q8_0 --vocab @FIX@/models/tok512.bin"
    # wider model so that Q4_K applies to most matrices (attn_k_b keeps a 256-incompatible row)
    W="--arch deepseek2 --variant v3 --n-embd 256 --q-lora 256 --kv-lora 256 --n-ff 256 --n-ff-exp 256 --d-v 64 --vocab @FIX@/models/tok512.bin"
    printf '%s\t%s\n' "v3w-f32" "$W"
    # quantized by deltafin quantize (= llama-quantize's tensor data, checked below)
    printf '%s\t%s\n' "v3w-q4_k" "$W | quantize Q4_K --pure"
    printf '%s\t%s\n' "v3-mxfp4" "--arch deepseek2 --variant v3 --vocab @FIX@/models/tok512.bin | quantize Q8_0 --type-experts MXFP4"
    printf '%s\t%s\n' "v3w-mxfp4" "$W | quantize Q8_0 --type-experts MXFP4"
    # Q4_K experts, Q8_0 elsewhere (--type-experts also takes the 3-D attn_k_b / attn_v_b, as
    # llama-quantize's MXFP4_MOE does: its equivalent here needs --tensor-type for all three)
    printf '%s\t%s\n' "v3w-q4_k-exps" "$W | quantize Q8_0 --type-experts Q4_K"
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
