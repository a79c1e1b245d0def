# record_lib.sh — shell functions shared by the scripts that record llama.cpp's outputs for the
# tests (scripts/make_expected.sh, tests/data/expected/{deepseek2,kimi_k3}/make.sh). Sourced, not
# run. The caller sets DF (deltafin), DFDEV (deltafin-dev, for gen-random), FIX (fixtures
# folder), PPL_BIN (llama-perplexity) and, for quantized entries, LQ_BIN (llama-quantize) and
# HASH (build/tests/test_quant); check_seed also needs TMP (with TMP/oracle and TMP/prompts),
# N_PREDICT and GAP_MIN.

# llama-perplexity -c 128 on tests/data/ppl_story.txt (FILE, extra options) -> its PPL. llama.cpp's
# asynchronous logger occasionally loses the last lines at exit (and runs fail now and then
# under load): retry.
# A preloaded destructor (slow_exit.so, built once per TMP) gives llama.cpp's logging thread half a
# second at exit, which keeps the "Final estimate" line on a loaded machine.
ppl1() {
    f=$1; shift
    shim=${TMP:-/tmp}/slow_exit.so
    [ -f "$shim" ] || printf '#include <unistd.h>\n__attribute__((destructor)) static void slow_exit(void) { usleep(500000); }\n' |
        gcc -shared -fPIC -o "$shim" -x c - || shim=
    for try in $(seq 1 20); do
        p=$(LD_PRELOAD=$shim "$PPL_BIN" -m "$f" -f tests/data/ppl_story.txt -c 128 -t 2 "$@" 2>&1 </dev/null |
            sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
        if [ -n "$p" ]; then echo "$p"; return; fi
    done
    echo "llama-perplexity failed on $f" >&2; exit 1
}

# deltafin quantize arguments -> llama-quantize's equivalent: options, then the type
lq_args() {
    case "$*" in
        "Q4_K --pure") echo "--pure Q4_K" ;;
        "Q8_0 --type-experts MXFP4") echo "MXFP4_MOE" ;;
        # --type-experts also takes the 3-D attn_k_b / attn_v_b, as llama-quantize's MXFP4_MOE does
        "Q8_0 --type-experts Q4_K") echo "--tensor-type _exps=q4_k --tensor-type attn_k_b=q4_k --tensor-type attn_v_b=q4_k Q8_0" ;;
        *) echo "no llama-quantize equivalent for '$*'" >&2; exit 1 ;;
    esac
}

# NAME, ARGS (gen-random arguments, @FIX@ = fixtures folder, optionally
# "... | quantize TYPE [OPTIONS]"), OUT -> the model file. A quantized entry is written by
# `deltafin quantize` from the F32 model, and the script stops unless its tensor data equal
# llama-quantize's on the same file.
build_model() {
    a=$(printf '%s' "$2" | sed "s|@FIX@|$FIX|g")
    case "$a" in
    *" | quantize "*)
        # shellcheck disable=SC2086
        "$DFDEV" gen-random ${a%% | quantize *} "$3.f32" 2>/dev/null </dev/null
        q=${a#* | quantize }
        # shellcheck disable=SC2086
        "$DF" quantize "$3.f32" "$3" $q -t 2 >/dev/null 2>&1 </dev/null
        lqa=$(lq_args $q)
        lt=${lqa##* }
        lo=${lqa% *}
        [ "$lo" != "$lqa" ] || lo=
        # shellcheck disable=SC2086
        "$LQ_BIN" $lo "$3.f32" "$3.lq" "$lt" 2 >/dev/null 2>&1 </dev/null
        if [ "$("$HASH" --hash-tensors "$3")" != "$("$HASH" --hash-tensors "$3.lq")" ]; then
            echo "$1: deltafin quantize $q differs from llama-quantize $lo $lt" >&2; exit 1
        fi
        rm -f "$3.f32" "$3.lq" ;;
    *)
        # shellcheck disable=SC2086
        "$DFDEV" gen-random $a "$3" 2>/dev/null </dev/null ;;
    esac
}

# BASE ARGS, SEED -> the arguments with --seed (before a "| quantize" part)
with_seed() {
    case "$1" in
        *" | quantize "*) echo "${1%% | quantize *} --seed $2 | quantize ${1#* | quantize }" ;;
        *) echo "$1 --seed $2" ;;
    esac
}

# NAME, FILE, MIN_TOKENS -> llama.cpp's greedy rows (name, prompt, prompt ids, ids, min gap) of
# every prompt in TMP/rows; returns 1 (a rejected seed) on a gap below GAP_MIN or a generation
# shorter than MIN_TOKENS. deltafin plays no part.
check_seed() {
    : > "$TMP/rows"
    while IFS= read -r prompt; do
        out=$("$TMP/oracle" "$2" "$prompt" $N_PREDICT 2>/dev/null </dev/null)
        gap=$(printf '%s' "$out" | cut -f3)
        n=$(printf '%s' "$out" | cut -f2 | tr ',' '\n' | grep -c . || true)
        if awk -v g="$gap" -v m="$GAP_MIN" 'BEGIN{exit !(g < m)}' || [ "$n" -lt "$3" ]; then return 1; fi
        printf '%s\t%s\t%s\n' "$1" "$prompt" "$out" | cut -f1-5 >> "$TMP/rows"
    done < "$TMP/prompts"
    return 0
}
