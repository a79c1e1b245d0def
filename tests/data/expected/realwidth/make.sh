#!/bin/sh
# make.sh — record llama.cpp's greedy outputs for tests/test_realwidth.sh: random models at the
# REAL hidden width 7168 with as few layers and experts as the architectures allow:
#   k3-q8_0-mxfp4  kimi-k3 (`--preset k3`: 96 KDA / MLA heads of 128, q/kv LoRA 1536/512,
#                  latent 3584, expert width 3072), layers K M (a dense KDA layer 0 and an MLA
#                  MoE layer), Q8_0 with MXFP4 experts, 8 experts / 2 used, 1 shared expert,
#                  dense FFN width 2048 instead of 33792 (~1.0 GB instead of ~1.8 GB)
#   k2-q8_0        deepseek2 at Kimi K2 geometry (`--preset kimi-k2`: 64 MLA heads, q/kv LoRA
#                  1536/512, dense FFN 18432, expert width 2048, YaRN), a dense layer 0 and one
#                  MoE layer, Q8_0, 4 experts / 2 used (~0.88 GB)
# Needs build/deltafin, build/deltafin-dev (gen-random) and two llama.cpp builds: LLAMA_K3
# (default /work/llama-k3, llama.cpp 34af94cd9ab2 with kimi-k3) for the kimi-k3 model and
# LLAMA_CPP (default /work/llama.cpp) for deepseek2. Writes, next to this script:
#   models.tsv  name, gen-random arguments (@FIX@ = fixtures folder), sha256 of the file, oracle
#   greedy.tsv  name, prompt, prompt ids, llama.cpp's greedy ids (32 steps), min gap and its
#               step, gaps (per step top-1 minus top-2 logit of llama.cpp: scripts/llama_oracle.c)
# Every model uses seed 1: no seed is chosen or rejected, neither on llama.cpp's gaps nor on
# deltafin's output. The test accepts a divergence only where the recorded gap is a near-tie.
# Work files (~1 GB each, one at a time) go to a new folder under DIR (default /tmp, or build/
# when /tmp is a tmpfs).
# ~3 minutes on 2 cores (llama.cpp needs ~30 s per kimi-k3 run).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../../.."
LLAMA_K3=${LLAMA_K3:-/work/llama-k3}
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
DF=${DELTAFIN_BIN:-build/deltafin}
DFDEV=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
N_PREDICT=32
BASE=${DIR:-/tmp}
[ "$(stat -f -c %T "$BASE" 2>/dev/null)" = tmpfs ] && mkdir -p build && BASE=$(pwd)/build
TMP=$(mktemp -d "$BASE/realwidth_make.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
cp "$DF" "$TMP/deltafin" && DF=$TMP/deltafin   # other builds may relink build/deltafin meanwhile
cp "$DFDEV" "$TMP/deltafin-dev" && DFDEV=$TMP/deltafin-dev
for L in "$LLAMA_K3" "$LLAMA_CPP"; do
    gcc -O2 -o "$TMP/oracle-$(basename "$L")" scripts/llama_oracle.c -I"$L/include" -I"$L/ggml/include" \
        -L"$L/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$L/build/bin" -lm
done
printf 'Once upon a time\nThe little dog ran to the park and\n' > "$TMP/prompts"
printf 'name\tgen_random_args\tsha256\toracle\n' > "$TMP/models.tsv"
printf 'name\tprompt\tprompt_ids\tgen_ids\tmin_gap\tmin_gap_step\tgaps\n' > "$TMP/greedy.tsv"
V="--vocab @FIX@/models/tok512.bin --seed 1"
{
    printf '%s\t%s\t%s\n' k3-q8_0-mxfp4 "$LLAMA_K3" "--arch kimi-k3 --preset k3 --n-layer 2 --layers KM --n-ff 2048 --n-shared 1 --n-expert 8 --n-expert-used 2 --type q8_0 --expert-type mxfp4 --raw-experts $V"
    printf '%s\t%s\t%s\n' k2-q8_0 "$LLAMA_CPP" "--arch deepseek2 --preset kimi-k2 --n-layer 2 --n-expert 4 --n-expert-used 2 --type q8_0 $V"
} | grep -E "^(${ONLY:-.*})	" > "$TMP/list"

while IFS='	' read -r name llama args; do
    oracle=$TMP/oracle-$(basename "$llama")
    # shellcheck disable=SC2086
    nice -n 10 "$DFDEV" gen-random $(printf '%s' "$args" | sed "s|@FIX@|$FIX|g") "$TMP/$name.gguf" >/dev/null 2>&1 </dev/null
    sha=$(sha256sum "$TMP/$name.gguf" | cut -d' ' -f1)
    ver=$(git -C "$llama" rev-parse --short=12 HEAD 2>/dev/null || echo "?")
    [ "$ver" = "?" ] && [ "$llama" = /work/llama-k3 ] && ver=34af94cd9ab2
    printf '%s\t%s\t%s\t%s\n' "$name" "$args" "$sha" "llama.cpp $ver ($llama)" >> "$TMP/models.tsv"
    while IFS= read -r prompt; do
        out=$(nice -n 10 "$oracle" "$TMP/$name.gguf" "$prompt" $N_PREDICT 2>/dev/null </dev/null)
        [ -n "$out" ] || { echo "$name: llama.cpp failed on '$prompt'" >&2; exit 1; }
        printf '%s\t%s\t%s\n' "$name" "$prompt" "$out" >> "$TMP/greedy.tsv"
        echo "$name '$prompt': min gap $(printf '%s' "$out" | cut -f3) at step $(printf '%s' "$out" | cut -f4)" >&2
    done < "$TMP/prompts"
    rm -f "$TMP/$name.gguf"
done < "$TMP/list"
if [ -n "${ONLY:-}" ]; then
    # merge: keep the other models' rows, replace (or append) the recorded ones
    /usr/bin/python3 - "$HERE" "$TMP" <<'PY'
import sys
here, tmp = sys.argv[1], sys.argv[2]
for f in ("models.tsv", "greedy.tsv"):
    nrows = [l.rstrip("\n").split("\t") for l in open(f"{tmp}/{f}") if l.strip()]
    orows = [l.rstrip("\n").split("\t") for l in open(f"{here}/{f}") if l.strip()]
    names = {r[0] for r in nrows[1:]}
    with open(f"{here}/{f}", "w") as fh:
        for r in [nrows[0]] + [r for r in orows[1:] if r[0] not in names] + nrows[1:]:
            fh.write("\t".join(r) + "\n")
PY
else
    cp "$TMP/models.tsv" "$TMP/greedy.tsv" "$HERE/"
fi
echo "written to $HERE" >&2
