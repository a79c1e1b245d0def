#!/bin/sh
# make.sh — record llama-quantize's and llama-imatrix's results for tests/test_quantize_recipes.sh
# and tests/test_imatrix.sh. Needs a llama.cpp build (LLAMA_CPP, default /work/llama.cpp, commit
# d32676d: build/bin/llama-quantize, llama-imatrix), build/deltafin, build/deltafin-dev and
# build/tests/test_quant. Writes, next to this script:
#   models.tsv   name, gen-random arguments, SHA-256 of the F32 model, of the synthetic importance
#                matrix `deltafin-dev gen-imatrix MODEL` writes (GGUF) and of its --dat twin
#   recipes.tsv  model, quantize arguments (RECIPE [options]; @IM@ / @IMDAT@ = that model's
#                synthetic matrix), llama-quantize's outcome: "ok" and the SHA-256 of its tensor
#                data (test_quant --hash-tensors), or "refused" (it exited with an error)
#   dryrun.tsv   model, quantize arguments, SHA-256 of the sorted "tensor TYPE" lines of
#                llama-quantize --dry-run (the type it gives every tensor)
#   imatrix.tsv  name, gen-random arguments, SHA-256 of the model, llama-imatrix's options
#   imatrix_llama.tsv  llama-imatrix's matrix on that model and tests/data/ppl_story.txt
#                (deltafin-dev imatrix-dump: name, counts, values), in avx2/ when this machine's
#                llama.cpp is an AVX2 build (docs/testing.md "One set of recordings per ISA"; the
#                other files do not depend on the ISA: the quantizers are scalar C)
#   ggml_cases.tsv  scripts/quant_oracle.c against the build's libggml-base: ggml_quantize_chunk on
#                tests/quant_cases.h's rows, every type, with and without importance matrices
# deltafin plays no part in what is recorded (CHECK=1: also run deltafin on every recipe row and
# print where it differs). ~10 minutes on 2 idle cores.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../../.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
BIN=$LLAMA_CPP/build/bin
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp build/deltafin "$TMP/deltafin" && cp build/deltafin-dev "$TMP/deltafin-dev" && cp build/tests/test_quant "$TMP/test_quant"
DF=$TMP/deltafin DFDEV=$TMP/deltafin-dev HASH="$TMP/test_quant --hash-tensors"

# A: dense llama, GQA 4, 8 layers (the rules by layer: n_layer/8, use_more_bits, counted in
# llama-quantize's tensor order); B: Mixtral-style llama, 8 experts, no GQA (the 8-expert rules,
# the layer read from the name). Small enough for the test to run every row in a few minutes.
printf 'A\t--arch llama --n-embd 256 --n-ff 256 --n-layer 8 --n-head 8 --n-head-kv 2 --vocab bytes\n' > "$TMP/models"
printf 'B\t--arch llama-moe --n-embd 256 --n-ff 256 --n-layer 1 --n-head 4 --n-head-kv 4 --vocab bytes\n' >> "$TMP/models"
printf 'name\tgen_random_args\tsha256\timatrix_sha256\timatrix_dat_sha256\n' > "$TMP/models.tsv"
while IFS='	' read -r m args; do
    # shellcheck disable=SC2086
    "$DFDEV" gen-random $args "$TMP/$m.gguf" >/dev/null 2>&1
    "$DFDEV" gen-imatrix "$TMP/$m.gguf" "$TMP/$m.imatrix.gguf"
    "$DFDEV" gen-imatrix "$TMP/$m.gguf" "$TMP/$m.imatrix.dat" --dat
    printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$args" "$(sha256sum < "$TMP/$m.gguf" | cut -c1-64)" \
        "$(sha256sum < "$TMP/$m.imatrix.gguf" | cut -c1-64)" "$(sha256sum < "$TMP/$m.imatrix.dat" | cut -c1-64)" >> "$TMP/models.tsv"
done < "$TMP/models"

# every llama-quantize recipe but Q1_0 / Q2_0 (types deltafin cannot produce), without and with
# the importance matrix (where it changes anything), and some options
RECIPES="Q4_0 Q4_1 MXFP4_MOE Q5_0 Q5_1 IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ1_S IQ1_M TQ1_0 TQ2_0 Q2_K Q2_K_S IQ3_XXS
IQ3_S IQ3_M Q3_K IQ3_XS Q3_K_S Q3_K_M Q3_K_L IQ4_NL IQ4_XS Q4_K Q4_K_S Q4_K_M Q5_K Q5_K_S Q5_K_M Q6_K Q8_0 F16
BF16 F32 COPY"
{
    for m in A B; do
        for r in $RECIPES; do
            printf '%s\t%s\n' "$m" "$r"
            case $r in MXFP4_MOE|TQ1_0|TQ2_0|Q8_0|F16|BF16|F32|COPY) ;; *) printf '%s\t%s --imatrix @IM@\n' "$m" "$r" ;; esac
        done
    done
    printf 'A\tIQ2_XXS --imatrix @IMDAT@\nA\tQ3_K_M --imatrix @IMDAT@\nA\tQ4_K_M --pure\nA\tIQ3_S --pure --imatrix @IM@\n'
    printf 'A\tQ4_K_M --leave-output-tensor\nA\tQ5_K_M --output-tensor-type q8_0 --token-embedding-type q4_k\n'
    printf 'A\tIQ2_M --imatrix @IM@ --output-tensor-type iq4_xs\nB\tQ2_K_S --imatrix @IM@ --token-embedding-type q8_0\n'
} > "$TMP/rows"

# the model file and options of a row for llama-quantize and for deltafin
row_args() { # model args -> "$ARGS" with files substituted
    ARGS=$(printf '%s' "$2" | sed "s|@IMDAT@|$TMP/$1.imatrix.dat|; s|@IM@|$TMP/$1.imatrix.gguf|")
}
printf 'model\targs\tllama\tsha256\n' > "$TMP/recipes.tsv"
n=0; bad=0
while IFS='	' read -r m a; do
    row_args "$m" "$a"
    r=${ARGS%% *}; o=${ARGS#"$r"}
    # shellcheck disable=SC2086
    if "$BIN/llama-quantize" $o "$TMP/$m.gguf" "$TMP/l.gguf" "$r" 2 >"$TMP/l.log" 2>&1 </dev/null; then
        h=$($HASH "$TMP/l.gguf"); st=ok
    else
        h=-; st=refused
    fi
    printf '%s\t%s\t%s\t%s\n' "$m" "$a" "$st" "$h" >> "$TMP/recipes.tsv"
    n=$((n + 1))
    if [ "${CHECK:-0}" = 1 ]; then
        # shellcheck disable=SC2086
        if "$DF" quantize "$TMP/$m.gguf" "$TMP/d.gguf" $ARGS -t 2 >"$TMP/d.log" 2>&1 </dev/null; then d=$($HASH "$TMP/d.gguf"); else d=-; fi
        [ "$d" = "$h" ] || { bad=$((bad + 1)); echo "differs: $m $a (llama $st $h, deltafin $d)" >&2; }
    fi
    rm -f "$TMP/l.gguf" "$TMP/d.gguf"
done < "$TMP/rows"
echo "recipes: $n rows${CHECK:+, deltafin differs on $bad}" >&2

# llama-quantize --dry-run: "[ i/ n] NAME - [...], type = T, size = A MiB -> B MiB (NEW)" for a
# converted tensor, "size = A MiB" for a copied one
. tests/lib/quantize_lib.sh
printf 'model\targs\ttypes_sha256\n' > "$TMP/dryrun.tsv"
for ma in "A	Q4_K_M" "A	IQ2_M --imatrix @IM@" "A	Q3_K_L" "B	IQ1_S --imatrix @IM@" "B	Q4_K_S"; do
    m=${ma%%	*}; a=${ma#*	}
    row_args "$m" "$a"
    r=${ARGS%% *}; o=${ARGS#"$r"}
    # shellcheck disable=SC2086
    "$BIN/llama-quantize" --dry-run $o "$TMP/$m.gguf" "$r" 2 2>&1 </dev/null | dry_types > "$TMP/types"
    printf '%s\t%s\t%s\n' "$m" "$a" "$(sha256sum < "$TMP/types" | cut -c1-64)" >> "$TMP/dryrun.tsv"
done

# llama-imatrix on a Q8_0 model (quantized activations: deltafin's products see the same bits,
# docs/testing.md "Quantized parity"), chunks of 128 tokens decoded 32 at a time
IA="--arch qwen3moe --type q8_0 --vocab @FIX@/models/tok512.bin"
IO="-c 128 -b 32"
"$DFDEV" gen-random $(printf '%s' "$IA" | sed "s|@FIX@|$FIX|") "$TMP/im.gguf" >/dev/null 2>&1
printf 'name\tgen_random_args\tsha256\toptions\n' > "$TMP/imatrix.tsv"
printf 'q8\t%s\t%s\t%s\n' "$IA" "$(sha256sum < "$TMP/im.gguf" | cut -c1-64)" "$IO" >> "$TMP/imatrix.tsv"
# shellcheck disable=SC2086
"$BIN/llama-imatrix" -m "$TMP/im.gguf" -f tests/data/ppl_story.txt $IO -t 2 --no-ppl -o "$TMP/ll.imatrix.gguf" >"$TMP/li.log" 2>&1
"$DFDEV" imatrix-dump "$TMP/ll.imatrix.gguf" > "$TMP/imatrix_llama.tsv"
# llama-quantize must read deltafin's file as its own
# shellcheck disable=SC2086
"$DF" imatrix -m "$TMP/im.gguf" -f tests/data/ppl_story.txt $IO -t 2 -o "$TMP/df.imatrix.gguf" 2>/dev/null
"$BIN/llama-quantize" --allow-requantize --imatrix "$TMP/df.imatrix.gguf" "$TMP/im.gguf" "$TMP/x.gguf" IQ4_NL 2 >/dev/null 2>&1 ||
    echo "llama-quantize does not read deltafin's imatrix" >&2
"$DFDEV" imatrix-diff "$TMP/df.imatrix.gguf" "$TMP/imatrix_llama.tsv" >&2 || true

# ggml's quantizers on the edge-case rows (test_quant)
gcc -O2 -I"$LLAMA_CPP/ggml/include" scripts/quant_oracle.c -L"$BIN" -lggml-base -Wl,-rpath,"$BIN" -o "$TMP/quant_oracle"
"$TMP/quant_oracle" > "$TMP/ggml_cases.tsv"

cp "$TMP/models.tsv" "$TMP/recipes.tsv" "$TMP/dryrun.tsv" "$TMP/imatrix.tsv" "$TMP/ggml_cases.tsv" "$HERE/"
if grep -q avx512f /proc/cpuinfo; then cp "$TMP/imatrix_llama.tsv" "$HERE/"
else
    mkdir -p "$HERE/avx2" && cp "$TMP/imatrix_llama.tsv" "$HERE/avx2/"
    printf 'llama.cpp %s built with -DGGML_NATIVE=ON on an AVX2 CPU (%s); tests/data/expected/quantize/make.sh (imatrix_llama.tsv only: the quantize files do not depend on the ISA)\n' \
        "$(git -C "$LLAMA_CPP" rev-parse --short=12 HEAD)" "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)" > "$HERE/avx2/RECORDED"
fi
echo "written to $HERE" >&2
