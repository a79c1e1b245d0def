#!/bin/sh
# record_set.sh — record llama.cpp's outputs for one set of random test models (the make.sh of
# a tests/data/expected/<set>/ folder calls it with its model list). Needs a llama.cpp build
# (LLAMA_CPP, default /work/llama.cpp: libllama, llama-perplexity, llama-quantize for "| quantize"
# entries), build/deltafin, build/deltafin-dev and build/tests/test_quant.
#
# usage: sh scripts/record_set.sh DIR LIST
#   LIST: lines "name<TAB>gen-random arguments" (@FIX@ = fixtures folder; "... | quantize TYPE
#   [OPTIONS]" = `deltafin quantize` of the F32 model, checked against llama-quantize's tensor
#   data, scripts/record_lib.sh)
#   env: ONLY (regex on names: record only those and merge them into DIR's files), GAP_MIN
#   (0.005), MIN_TOKENS (8), MAX_SEED (40), PROMPTS (a file, one prompt per line; default the
#   four prompts below), N_BATCH (prompts decoded in batches of N: llama.cpp's -b N -ub N through
#   llama_oracle's ORACLE_N_BATCH; the test then runs deltafin with -b N. Below 64 it keeps
#   llama.cpp's flash attention on its one-chunk kernel: its tiled kernel for 64+ queries is not
#   reproduced bit for bit by deltafin)
# Writes DIR/models.tsv (name, gen-random arguments, sha256 of the file) and, into DIR on an
# AVX-512 machine and DIR/avx2/ on an AVX2 one (a -march=native llama.cpp sums in its ISA's order;
# tests/lib/dfcheck.py `recorded` picks the folder deltafin's kernels can be compared with, and
# scripts/record_isa.py adds the other ISA's recordings of the same models):
#   greedy.tsv  name, prompt, prompt ids, greedy ids (llama.cpp, 32 steps), min gap, per-step gaps
#   ppl.tsv     name, llama-perplexity PPL (-c 128 -b 32 on tests/data/ppl_story.txt)
# Each model tries seeds 1, 2, ... and keeps the first whose llama.cpp greedy runs never come
# within GAP_MIN logits of a tie and generate at least MIN_TOKENS tokens; deltafin plays no part
# in the choice. The default prompts: two short ones, one of 13 tokens and one of 119 (tok512),
# longer than qwen3next's DeltaNet chunk (64) and than the DSA indexer's top_k of the test models.
set -eu
DIR=$(cd "$1" && pwd)
LIST=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
cd "$(dirname "$0")/.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
export DELTAFIN_FIXTURES="$FIX"
DF=${DELTAFIN_BIN:-build/deltafin}
DFDEV=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
GAP_MIN=${GAP_MIN:-0.005}
MIN_TOKENS=${MIN_TOKENS:-8}
MAX_SEED=${MAX_SEED:-40}
N_PREDICT=32
[ -n "${N_BATCH:-}" ] && export ORACLE_N_BATCH=$N_BATCH
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp "$DF" "$TMP/deltafin" && DF=$TMP/deltafin   # other builds may relink build/deltafin meanwhile
cp "$DFDEV" "$TMP/deltafin-dev" && DFDEV=$TMP/deltafin-dev
HASH=${DELTAFIN_BUILD:-build}/tests/test_quant
cp "$HASH" "$TMP/test_quant" && HASH=$TMP/test_quant
LIBDIR=$LLAMA_CPP/build/bin
gcc -O2 -o "$TMP/oracle" scripts/llama_oracle.c -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
    -L"$LIBDIR" -lllama -lggml -lggml-base -Wl,-rpath,"$LIBDIR" -lm
PPL_BIN=$LIBDIR/llama-perplexity
LQ_BIN=$LIBDIR/llama-quantize
ISA=$("$DF" --version 2>/dev/null | sed -n 's/^kernels: \([a-z0-9]*\).*/\1/p')
case "$ISA" in
    avx512) OUT=$DIR ;;
    avx2) OUT=$DIR/avx2 ;;
    *) echo "record_set: deltafin's kernels here are '$ISA': record on an AVX2 or AVX-512 machine" >&2; exit 1 ;;
esac
mkdir -p "$OUT"
if [ -n "${PROMPTS:-}" ]; then cp "$PROMPTS" "$TMP/prompts"; else
    {
        echo 'Once upon a time'
        echo 'The little dog ran to the park and'
        echo 'One day, a girl named Lily found a needle in her room.'
        echo 'The little dog ran to the park and saw a big red ball. He wanted to play with it, so he ran after it. The ball rolled down the hill and into the pond. The dog jumped in the water and swam to the ball. He brought it back to the boy, who was very happy and gave him a treat.'
    } > "$TMP/prompts"
fi
printf 'name\tgen_random_args\tsha256\n' > "$TMP/models.tsv"
printf 'name\tprompt\tprompt_ids\tgen_ids\tmin_gap\tgaps\n' > "$TMP/greedy.tsv"
printf 'name\tppl\n' > "$TMP/ppl.tsv"
grep -E "^(${ONLY:-.*})	" "$LIST" > "$TMP/list" || { echo "record_set: no model of $LIST matches '${ONLY:-}'" >&2; exit 1; }

. scripts/record_lib.sh
rows_of() { # NAME FILE -> TMP/rows (all columns of the oracle), 1 on a near tie / short run
    : > "$TMP/rows"
    while IFS= read -r prompt; do
        out=$("$TMP/oracle" "$2" "$prompt" $N_PREDICT 2>/dev/null </dev/null)
        gap=$(printf '%s' "$out" | cut -f3)
        n=$(printf '%s' "$out" | cut -f2 | tr ',' '\n' | grep -c . || true)
        if awk -v g="$gap" -v m="$GAP_MIN" 'BEGIN{exit !(g < m)}' || [ "$n" -lt "$MIN_TOKENS" ]; then return 1; fi
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
if [ -n "${ONLY:-}" ] && [ -f "$DIR/models.tsv" ]; then
    # merge: keep the other models' rows, replace (or append) the recorded ones
    /usr/bin/python3 - "$DIR" "$OUT" "$TMP" <<'PY'
import os, sys
here, out, tmp = sys.argv[1:4]
for f in ("models.tsv", "greedy.tsv", "ppl.tsv"):
    dst = f"{here}/{f}" if f == "models.tsv" else f"{out}/{f}"
    nrows = [l.rstrip("\n").split("\t") for l in open(f"{tmp}/{f}") if l.strip()]
    orows = [l.rstrip("\n").split("\t") for l in open(dst) if l.strip()] if os.path.exists(dst) else [nrows[0]]
    head, ncols = nrows[0], len(nrows[0])
    names = {r[0] for r in nrows[1:]}
    keep = [r + [""] * (ncols - len(r)) for r in orows[1:] if r[0] not in names]
    with open(dst, "w") as fh:
        for r in [head] + keep + nrows[1:]:
            fh.write("\t".join(r) + "\n")
PY
else
    cp "$TMP/models.tsv" "$DIR/"
    cp "$TMP/greedy.tsv" "$TMP/ppl.tsv" "$OUT/"
fi
# RECORDED: the llama.cpp build and CPU (a line added for the models of an ONLY merge)
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
[ -n "${ONLY:-}" ] && [ -f "$OUT/RECORDED" ] || : > "$OUT/RECORDED"
printf '%sllama.cpp %s built with -DGGML_NATIVE=ON on an %s CPU (%s); scripts/record_set.sh%s\n' \
    "${ONLY:+models $ONLY: }" "$(git -C "$LLAMA_CPP" rev-parse --short=12 HEAD 2>/dev/null || echo '?')" \
    "$(echo "$ISA" | tr a-z A-Z)" "$CPU" "${N_BATCH:+, prompts in batches of $N_BATCH}" >> "$OUT/RECORDED"
echo "written to $DIR ($ISA recordings in $OUT)" >&2
