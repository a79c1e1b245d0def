#!/bin/sh
# test_quantize_recipes.sh — `deltafin quantize` against llama-quantize (d32676d), whose results
# on the same F32 models are recorded in tests/data/expected/quantize/ (make.sh there):
#   1. the models (gen-random: a dense llama with GQA over 8 layers, a Mixtral-style 8-expert
#      llama) and their synthetic importance matrices (deltafin-dev gen-imatrix, GGUF and the
#      legacy .dat) are rebuilt bit for bit;
#   2. every recipe, without and with the importance matrix, and some options (--pure,
#      --leave-output-tensor, --output-tensor-type, --token-embedding-type): the tensor data
#      equal llama-quantize's (SHA-256 over all tensors, test_quant --hash-tensors), and where
#      llama-quantize refused (an i-quant recipe without an imatrix) deltafin refuses too;
#   3. --dry-run gives every tensor the type llama-quantize's --dry-run gives it, writes nothing,
#      and says when the real run needs an importance matrix;
#   4. deltafin's own spellings: Q8_0 --type-experts MXFP4 = MXFP4_MOE, the MXFP4 recipe,
#      llama-quantize's argument forms (IN RECIPE -> ggml-model-RECIPE.gguf, NTHREADS);
#   5. requantizing: refused without --allow-requantize (nothing written), done with it; a
#      recipe that keeps every type copies the file's tensors unchanged;
#   6. errors: an unknown recipe lists the recipes (exit 2), an unknown option is a usage error
#      (also as the last argument), a missing input, IN = OUT, a bad or mismatched imatrix.
# Prints one PASS/FAIL line per check (the recipe rows: one line each); exit 1 on any FAIL.
# Under the sanitizers (DELTAFIN_BUILD=build-asan: ~10x slower quantizers) every 5th recipe row
# runs, and every refused one; DELTAFIN_QUANT_ALL=1 runs them all. ~1 CPU-minute in full.
cd "$(dirname "$0")/.." || exit 1
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
B=${DELTAFIN_BUILD:-build}
E=tests/data/expected/quantize
fails=0
pass() { echo "quantize: PASS $*"; }
fail() { echo "quantize: FAIL $*"; fails=$((fails + 1)); }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" && cp "$DEVBIN" "$T/deltafin-dev" && cp "$B/tests/test_quant" "$T/test_quant" ||
    { fail "cannot copy the binaries"; exit 1; }
BIN=$T/deltafin DEVBIN=$T/deltafin-dev
HASH="$T/test_quant --hash-tensors"
. tests/lib/quantize_lib.sh

# ---- 1. models and importance matrices
TAB=$(printf '\t')
while IFS=$TAB read -r m args sha isha idsha; do
    # shellcheck disable=SC2086
    "$DEVBIN" gen-random $args "$T/$m.gguf" >/dev/null 2>&1 &&
        "$DEVBIN" gen-imatrix "$T/$m.gguf" "$T/$m.imatrix.gguf" && "$DEVBIN" gen-imatrix "$T/$m.gguf" "$T/$m.imatrix.dat" --dat ||
        { fail "model $m: gen-random / gen-imatrix failed"; exit 1; }
    [ "$(sha256sum < "$T/$m.gguf" | cut -c1-64)" = "$sha" ] &&
        [ "$(sha256sum < "$T/$m.imatrix.gguf" | cut -c1-64)" = "$isha" ] &&
        [ "$(sha256sum < "$T/$m.imatrix.dat" | cut -c1-64)" = "$idsha" ] ||
        { fail "model $m or its imatrix differs from the recorded one: the checks below are void"; exit 1; }
done <<EOF
$(tail -n +2 "$E/models.tsv")
EOF
pass "models and importance matrices rebuilt bit for bit"

# a row's arguments with the model's matrix files
row_args() { ARGS=$(printf '%s' "$2" | sed "s|@IMDAT@|$T/$1.imatrix.dat|; s|@IM@|$T/$1.imatrix.gguf|"); }

# ---- 2. every recipe row
n=0; bad=0; k=0; every=1
case "$B" in *asan*) [ "${DELTAFIN_QUANT_ALL:-0}" = 1 ] || every=5 ;; esac
while IFS=$TAB read -r m a st want; do
    row_args "$m" "$a"
    k=$((k + 1))
    [ "$st" = refused ] || [ $((k % every)) -eq 0 ] || [ $every -eq 1 ] || continue
    n=$((n + 1))
    # shellcheck disable=SC2086
    if "$BIN" quantize "$T/$m.gguf" "$T/q.gguf" $ARGS -t 2 >/dev/null 2>"$T/log"; then got=$($HASH "$T/q.gguf")
    else got=refused; fi
    [ "$st" = refused ] && want=refused
    if [ "$got" = "$want" ]; then echo "quantize: PASS $m $a: ${st}"
    else fail "$m $a: $got, llama-quantize $want ($(tail -n 1 "$T/log"))"; bad=$((bad + 1)); fi
    [ -e "$T/q.gguf.tmp" ] && fail "$m $a: temp file left"
    rm -f "$T/q.gguf"
done <<EOF
$(tail -n +2 "$E/recipes.tsv")
EOF
[ $bad -eq 0 ] && pass "$n recipe rows: tensor data identical to llama-quantize's (or refused as it refuses)"

# ---- 3. dry runs
while IFS=$TAB read -r m a want; do
    row_args "$m" "$a"
    # shellcheck disable=SC2086
    "$BIN" quantize "$T/$m.gguf" "$T/dry.gguf" $ARGS --dry-run >"$T/dry" 2>&1 || fail "--dry-run $m $a failed"
    got=$(dry_types < "$T/dry" | sha256sum | cut -c1-64)
    [ "$got" = "$want" ] && pass "--dry-run $m $a: llama-quantize's type for every tensor" ||
        fail "--dry-run $m $a: types differ from llama-quantize's"
    [ -e "$T/dry.gguf" ] || [ -e "$T/dry.gguf.tmp" ] && fail "--dry-run wrote a file"
    grep -q "^quant size  = " "$T/dry" || fail "--dry-run $m $a: no size summary"
done <<EOF
$(tail -n +2 "$E/dryrun.tsv")
EOF
"$BIN" quantize "$T/A.gguf" "$T/dry.gguf" IQ2_XXS --dry-run >"$T/dry" 2>&1 && grep -q "needs an importance matrix" "$T/dry" &&
    pass "--dry-run without --imatrix: says the real run needs one" || fail "--dry-run IQ2_XXS without --imatrix"

# ---- 4. deltafin's own spellings
want=$(awk -F'\t' '$1 == "B" && $2 == "MXFP4_MOE" { print $4 }' "$E/recipes.tsv")
"$BIN" quantize "$T/B.gguf" "$T/q.gguf" Q8_0 --type-experts MXFP4 -t 2 2>/dev/null
[ "$($HASH "$T/q.gguf")" = "$want" ] && pass "Q8_0 --type-experts MXFP4 = llama-quantize MXFP4_MOE" ||
    fail "Q8_0 --type-experts MXFP4 differs from MXFP4_MOE"
"$BIN" quantize "$T/B.gguf" "$T/q.gguf" MXFP4 -t 2 2>/dev/null && "$BIN" quantize "$T/B.gguf" "$T/dry.gguf" MXFP4 --dry-run |
    dry_types | awk '$1 ~ /ffn_.*_exps|attn_q\./ && $2 != "MXFP4" { bad = 1 } $1 == "output.weight" && $2 != "Q6_K" { bad = 1 } END { exit bad }' &&
    pass "MXFP4 (deltafin's recipe): matrices MXFP4, output Q6_K" || fail "MXFP4 recipe"
want=$(awk -F'\t' '$1 == "A" && $2 == "Q8_0" { print $4 }' "$E/recipes.tsv")
cp "$T/A.gguf" "$T/in.gguf"
"$BIN" quantize "$T/in.gguf" q8_0 1 2>/dev/null && [ "$($HASH "$T/ggml-model-Q8_0.gguf")" = "$want" ] &&
    pass "IN RECIPE NTHREADS writes IN's folder/ggml-model-RECIPE.gguf" || fail "quantize IN RECIPE NTHREADS"
"$BIN" quantize "$T/in.gguf" "$T/q.gguf" Q8_0 2x 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "NTHREADS" "$T/err" && pass "a bad NTHREADS is a usage error" || fail "NTHREADS 2x: rc $rc"

# ---- 5. requantizing (ggml-model-Q8_0.gguf is A in Q8_0)
Q8=$T/ggml-model-Q8_0.gguf
"$BIN" quantize "$Q8" "$T/rq.gguf" Q4_K_M 2>"$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q -- "--allow-requantize" "$T/err" && grep -q "already quantized (Q8_0)" "$T/err" &&
    [ ! -e "$T/rq.gguf" ] && [ ! -e "$T/rq.gguf.tmp" ] && pass "requantizing refused without --allow-requantize, nothing written" ||
    fail "requantize refusal: rc $rc, $(tail -n 1 "$T/err")"
"$BIN" quantize "$Q8" "$T/rq.gguf" Q4_K_M --allow-requantize -t 2 2>/dev/null && [ -s "$T/rq.gguf" ] &&
    pass "--allow-requantize converts Q8_0 -> Q4_K_M" || fail "--allow-requantize"
"$BIN" quantize "$Q8" "$T/same.gguf" Q8_0 -t 2 2>"$T/err" && [ "$($HASH "$T/same.gguf")" = "$($HASH "$Q8")" ] &&
    grep -q "0 tensors converted" "$T/err" && pass "the same recipe again copies every tensor (no requantizing)" ||
    fail "Q8_0 -> Q8_0: $(tail -n 1 "$T/err")"

# ---- 6. errors
"$BIN" quantize "$T/A.gguf" "$T/x.gguf" Q9_9 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown recipe 'Q9_9'" "$T/err" && grep -q "Q4_K_M" "$T/err" && grep -q "IQ2_XXS" "$T/err" &&
    pass "an unknown recipe lists the recipes (exit 2)" || fail "unknown recipe: rc $rc"
"$BIN" quantize "$T/A.gguf" "$T/x.gguf" Q4_K_M --allow-requantiz 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown option '--allow-requantiz'" "$T/err" && pass "an unknown last option is a usage error" ||
    fail "unknown last option: rc $rc, $(tail -n 1 "$T/err")"
"$BIN" quantize "$T/none.gguf" "$T/x.gguf" Q8_0 2>"$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "none.gguf" "$T/err" && pass "a missing input is named" || fail "missing input: rc $rc"
"$BIN" quantize "$T/A.gguf" "$T/A.gguf" Q8_0 2>"$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "same" "$T/err" && pass "IN = OUT refused" || fail "IN = OUT: rc $rc"
"$BIN" quantize "$T/A.gguf" "$T/x.gguf" IQ2_XXS 2>"$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q -- "--imatrix" "$T/err" && pass "IQ2_XXS without an importance matrix refused, naming --imatrix" ||
    fail "IQ2_XXS without imatrix: rc $rc"
head -c 1000 "$T/A.imatrix.gguf" > "$T/bad.gguf"
"$BIN" quantize "$T/A.gguf" "$T/x.gguf" Q4_K_M --imatrix "$T/bad.gguf" 2>"$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "bad.gguf" "$T/err" && pass "a truncated imatrix is named" || fail "truncated imatrix: rc $rc, $(tail -n 1 "$T/err")"
"$BIN" quantize "$T/B.gguf" "$T/x.gguf" IQ2_XXS --imatrix "$T/A.imatrix.gguf" 2>"$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "imatrix" "$T/err" && pass "another model's imatrix refused: $(tail -n 1 "$T/err" | cut -c1-90)" ||
    fail "mismatched imatrix: rc $rc"
[ -e "$T/x.gguf" ] && fail "an output was written on error"
[ $fails -eq 0 ]
