#!/bin/sh
# make.sh — record llama-perplexity's KL-divergence and HellaSwag outputs for tests/test_kld.sh.
# Needs a llama.cpp build (LLAMA_CPP, default /work/llama.cpp: build/bin/llama-perplexity and
# llama-quantize), build/deltafin, build/deltafin-dev and build/tests/test_quant. Writes, next
# to this script (llama.cpp's outputs depend on the ISA it was built for: OUT is avx2/ on a
# CPU without AVX-512, else this folder; docs/testing.md "One set of recordings per ISA"):
#   models.tsv   name, base model, quantized model (each a path or gen-random arguments with
#                @FIX@ = fixtures folder, optionally followed by "| quantize TYPE [OPTIONS]"),
#                sha256 of both files, and which figures the test compares: "all" where deltafin computes the quantized model's logits in
#                llama.cpp's float orders, "summary" (the means, ratios, RMS Δp, same top p) where
#                it does not (Q4_0: llama.cpp repacks it into 8-row groups on x86, whose summation
#                order deltafin does not reproduce: its tail percentiles move by a few %)
#   OUT/logits.tsv  name, sha256 of llama-perplexity's base log-probabilities file and of the one
#                deltafin wrote for the same model and text
#   OUT/RECORDED the llama.cpp commit and the CPU
#   OUT/NAME.base.txt   llama-perplexity -m BASE -f tests/data/ppl_story.txt -c 128 -b 32 --chunks 3
#                   --kl-divergence-base FILE (stdout and stderr: per-chunk PPL, final estimate)
#   OUT/NAME.kld.txt    llama-perplexity -m Q --kl-divergence-base FILE --kl-divergence (stdout)
#   OUT/NAME.kld_df.txt the same run against the base file deltafin wrote (llama.cpp reads deltafin's)
#   OUT/demo-q8_0.logits.gz  llama-perplexity's base file of models/demo-moe-q8_0.gguf (deltafin reads
#                   it in the test; ~70 KB)
#   OUT/hellaswag.txt, hellaswag5.txt   llama-perplexity --hellaswag -f tests/data/hellaswag/stories.txt
#                   on models/demo-moe-q8_0.gguf, all tasks and --hellaswag-tasks 5 (stdout)
# A quantized model is written by `deltafin quantize`; the script stops unless its tensor data
# equal llama-quantize's on the same file. The bases are Q8_0 files, whose logits deltafin
# computes bit for bit as llama.cpp (F16 / F32 matrices differ by up to ~1e-2, docs/testing.md). Perplexity runs with -c 128 -b 32 (below 64
# queries llama.cpp uses the flash-attention kernel deltafin reproduces bit for bit).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../../.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
DF=${DELTAFIN_BIN:-build/deltafin}
DFDEV=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
HASH=${DELTAFIN_BUILD:-build}/tests/test_quant
PPL=$LLAMA_CPP/build/bin/llama-perplexity
LQ=$LLAMA_CPP/build/bin/llama-quantize
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp "$DF" "$TMP/deltafin" && DF=$TMP/deltafin   # other builds may relink build/deltafin meanwhile
cp "$DFDEV" "$TMP/deltafin-dev" && DFDEV=$TMP/deltafin-dev
cp "$HASH" "$TMP/test_quant" && HASH=$TMP/test_quant
OUT=$HERE
grep -qw avx512f /proc/cpuinfo || OUT=$HERE/avx2
mkdir -p "$OUT"
TEXT=tests/data/ppl_story.txt
ARGS="-c 128 -b 32 --chunks 3"
TASKS=tests/data/hellaswag/stories.txt

# llama-perplexity ARGS...: its stdout and stderr into TMP/out. Its asynchronous logger now and
# then loses the last lines at exit (and runs fail now and then under load): retry until the
# output has LAST (a fixed string).
llama_ppl() {
    last=$1; shift
    for try in $(seq 1 20); do
        "$PPL" "$@" -t 2 >"$TMP/out" 2>"$TMP/err" </dev/null || true
        if grep -qF "$last" "$TMP/out" "$TMP/err"; then return 0; fi
    done
    echo "llama-perplexity $* failed: $(tail -n 3 "$TMP/err")" >&2; exit 1
}

# SPEC OUT: the model file of a models.tsv spec: a path or gen-random arguments, then optionally
# "| quantize TYPE [OPTIONS]" (deltafin's, which must equal llama-quantize's)
model_of() {
    m_spec=$(printf '%s' "$1" | sed "s|@FIX@|$FIX|g")
    m_src=${m_spec%% | quantize *}
    case "$m_src" in
    --*) # shellcheck disable=SC2086
         "$DFDEV" gen-random $m_src "$2.src" 2>/dev/null </dev/null ;;
    *) cp "$m_src" "$2.src" ;;
    esac
    if [ "$m_src" = "$m_spec" ]; then mv "$2.src" "$2"; return; fi
    m_q=${m_spec#* | quantize }
    # shellcheck disable=SC2086
    "$DF" quantize "$2.src" "$2" $m_q -t 2 >/dev/null 2>&1 </dev/null
    m_type=${m_q%% *}; m_opt=; [ "$m_type" != "$m_q" ] && m_opt=${m_q#* }
    # shellcheck disable=SC2086
    "$LQ" $m_opt "$2.src" "$2.lq" "$m_type" 2 >/dev/null 2>&1 </dev/null
    if [ "$("$HASH" --hash-tensors "$2")" != "$("$HASH" --hash-tensors "$2.lq")" ]; then
        echo "deltafin quantize $m_q differs from llama-quantize $m_opt $m_type on $m_src" >&2; exit 1
    fi
    rm -f "$2.src" "$2.lq"
}

printf 'name\tbase\tq\tbase_sha256\tq_sha256\tfigures\n' > "$TMP/models.tsv"
printf 'name\tlogits_sha256\tdf_logits_sha256\n' > "$TMP/logits.tsv"
V="--vocab @FIX@/models/tok512.bin"
{
    # name <TAB> base <TAB> quantized <TAB> figures the test compares
    # the demo model's Q4_K of its F16 file (--pure: llama-quantize's Q4_K is its Q4_K_M mix): width
    # 64 is no multiple of 256, so Q4_K falls back to Q5_0 as in llama-quantize
    printf 'demo-q4_k\tmodels/demo-moe-q8_0.gguf\tmodels/demo-moe-f16.gguf | quantize Q4_K --pure\tall\n'
    printf 'demo-q4_0\tmodels/demo-moe-q8_0.gguf\tmodels/demo-moe-f16.gguf | quantize Q4_0 --pure\tsummary\n'
    # a random MoE: Q8_0 and the Q4_K of the same weights (gen-random draws the F32 values per
    # tensor name whatever the type)
    R="--arch qwen3moe --n-embd 256 --n-ff-exp 256 --n-ff 256 $V --seed 1"
    printf 'qwen3moe-q4_k\t%s --type q8_0\t%s --type f32 | quantize Q4_K --pure\tall\n' "$R" "$R"
} > "$TMP/list"

while IFS='	' read -r name base q figures; do
    model_of "$base" "$TMP/base.gguf"
    model_of "$q" "$TMP/q.gguf"
    llama_ppl "Final estimate" -m "$TMP/base.gguf" -f $TEXT $ARGS --kl-divergence-base "$TMP/l.bin"
    { grep '^\[1\]' "$TMP/out"; grep -o 'Final estimate: .*' "$TMP/err"; } > "$OUT/$name.base.txt"
    "$DF" perplexity -m "$TMP/base.gguf" -f $TEXT $ARGS -t 2 --kl-divergence-base "$TMP/d.bin" >/dev/null 2>&1 </dev/null
    same=no; cmp -s "$TMP/l.bin" "$TMP/d.bin" && same=yes
    [ "$name" = demo-q4_k ] && gzip -9n < "$TMP/l.bin" > "$OUT/demo-q8_0.logits.gz"
    llama_ppl "Same top p:" -m "$TMP/q.gguf" $ARGS --kl-divergence-base "$TMP/l.bin" --kl-divergence
    sed -n '/^chunk /,$p' "$TMP/out" > "$OUT/$name.kld.txt"
    llama_ppl "Same top p:" -m "$TMP/q.gguf" $ARGS --kl-divergence-base "$TMP/d.bin" --kl-divergence
    sed -n '/^chunk /,$p' "$TMP/out" > "$OUT/$name.kld_df.txt"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$base" "$q" "$(sha256sum < "$TMP/base.gguf" | cut -d' ' -f1)" \
        "$(sha256sum < "$TMP/q.gguf" | cut -d' ' -f1)" "$figures" >> "$TMP/models.tsv"
    printf '%s\t%s\t%s\n' "$name" "$(sha256sum < "$TMP/l.bin" | cut -d' ' -f1)" \
        "$(sha256sum < "$TMP/d.bin" | cut -d' ' -f1)" >> "$TMP/logits.tsv"
    echo "$name: deltafin's base file $( [ $same = yes ] && echo 'is byte-identical to' || echo 'differs from') llama.cpp's" >&2
    rm -f "$TMP/base.gguf" "$TMP/q.gguf" "$TMP/l.bin" "$TMP/d.bin"
done < "$TMP/list"
cp "$TMP/models.tsv" "$HERE/models.tsv"
cp "$TMP/logits.tsv" "$OUT/logits.tsv"
printf 'llama.cpp %s; CPU %s; tests/data/expected/kld/make.sh\n' "$(git -C "$LLAMA_CPP" rev-parse --short=12 HEAD)" \
    "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)" > "$OUT/RECORDED"

llama_ppl "$(printf '12\t')" -m models/demo-moe-q8_0.gguf -f $TASKS --hellaswag
sed -n '/^task/,$p' "$TMP/out" > "$OUT/hellaswag.txt"
llama_ppl "$(printf '5\t')" -m models/demo-moe-q8_0.gguf -f $TASKS --hellaswag --hellaswag-tasks 5
sed -n '/^task/,$p' "$TMP/out" > "$OUT/hellaswag5.txt"
