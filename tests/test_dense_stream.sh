#!/bin/sh
# test_dense_stream.sh — streamed dense layers (src/dense_stream.c): the same greedy tokens with
# every dense layer resident, k of n resident and none resident, for llama, qwen3moe (experts
# streamed too, and packed), deepseek2 and kimi-k3, with several read engines; --mem-limit picks the same
# plan in `run` and `info`; a too-small limit is refused with the bytes needed; an injected read
# error, a short read and a file truncated below a streamed tensor are named (layer, tensor,
# file, offset) and end the run cleanly.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
T=$(mktemp -d /tmp/df_test_dense.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_dense_stream: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_dense_stream: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }
export DELTAFIN_IO_PROFILE="$T/io-profile"

gen() { "$DEVBIN" gen-random "$@" >/dev/null 2>"$T/gen.err" || { echo "test_dense_stream: gen-random $*: $(cat "$T/gen.err")"; exit 1; }; }
gen --arch llama --type q8_0 --n-embd 256 --n-layer 6 --n-head 4 --n-head-kv 2 --n-ff 512 --vocab bytes --seed 3 "$T/l.gguf"
gen --arch qwen3moe --type q8_0 --n-embd 256 --n-layer 4 --n-head 4 --n-head-kv 2 --head-dim 64 --n-expert 8 \
    --n-expert-used 2 --n-ff-exp 128 --vocab bytes --seed 5 "$T/q.gguf"
gen --arch deepseek2 --type q8_0 --n-embd 128 --n-layer 4 --n-expert 8 --n-expert-used 2 --vocab bytes --seed 9 "$T/d.gguf"
K3=0
"$DEVBIN" gen-random --arch kimi-k3 --type q8_0 --n-embd 128 --n-layer 4 --vocab bytes --seed 2 "$T/k.gguf" >/dev/null 2>&1 && K3=1

# $1 = model; rest = extra args; prints the token list (stderr in $T/err)
run() {
    m=$1; shift
    "$BIN" run -m "$m" -p "The quick brown fox" -n 8 --temp 0 -t 2 --json -v "$@" 2>"$T/err" |
        grep -o '"tokens":\[[0-9,]*\]'
}
plan_line() { grep -o "dense: [0-9]* of [0-9]* layers resident" "$T/err" | head -n 1; }

# ---- same tokens: all resident / k of n / none, several engines -----------------------------
SPECS="l:6:llama q:4:qwen3moe d:4:deepseek2"
[ $K3 = 1 ] && SPECS="$SPECS k:4:kimi-k3"
for spec in $SPECS; do
    f=${spec%%:*}; rest=${spec#*:}; n=${rest%%:*}; arch=${rest#*:}
    REF=$(DELTAFIN_DENSE_STREAM=0 DELTAFIN_STREAM=0 run "$T/$f.gguf")
    [ -n "$REF" ] || { bad "$arch: resident reference run failed: $(tail -n 1 "$T/err")"; continue; }
    good=0; total=0
    for kio in "$((n / 2)) pread" "1 direct" "0 pread" "0 direct" "0 uring" "0 mmap"; do
        k=${kio% *}; io=${kio#* }
        {
            total=$((total + 1))
            OUT=$(DELTAFIN_DENSE_RESIDENT=$k run "$T/$f.gguf" --io $io)
            if [ $io = uring ] && grep -q "not available" "$T/err"; then good=$((good + 1)); continue; fi
            if [ "$OUT" = "$REF" ] && [ "$(plan_line)" = "dense: $k of $n layers resident" ] &&
               grep -q "dense stream: io $io | " "$T/err"; then
                good=$((good + 1))
            else
                bad "$arch k=$k io=$io: $OUT vs $REF | $(plan_line) | $(grep -m1 'dense stream' "$T/err") $(tail -n 1 "$T/err")"
            fi
        }
    done
    [ $good = $total ] && ok "$arch: same tokens with $n, $((n / 2)) (pread), 1 (direct) and 0 (4 engines) of $n dense layers resident"
done

# experts streamed from a small cache AND dense layers streamed
REF=$(DELTAFIN_DENSE_STREAM=0 DELTAFIN_STREAM=0 run "$T/q.gguf")
OUT=$(DELTAFIN_DENSE_RESIDENT=0 DELTAFIN_EXPERT_CACHE=600K run "$T/q.gguf" --io direct)
[ "$OUT" = "$REF" ] && grep -q "experts: [0-9]* slots" "$T/err" && [ "$(plan_line)" = "dense: 0 of 4 layers resident" ] &&
    ok "qwen3moe: experts and all dense layers streamed, same tokens" ||
    bad "qwen3moe experts+dense streamed: $OUT vs $REF ($(tail -n 1 "$T/err"))"

# packed model: dense tensors read from the pack
if "$BIN" pack "$T/q.gguf" "$T/p.gguf" >/dev/null 2>"$T/err"; then
    OUT=$(DELTAFIN_DENSE_RESIDENT=1 run "$T/p.gguf" --io pread)
    [ "$OUT" = "$REF" ] && [ "$(plan_line)" = "dense: 1 of 4 layers resident" ] &&
        ok "packed qwen3moe: 3 of 4 dense layers streamed, same tokens" ||
        bad "packed: $OUT vs $REF ($(tail -n 1 "$T/err"))"
else
    bad "pack failed: $(tail -n 1 "$T/err")"
fi

# ---- --mem-limit: the plan streams layers by itself; info shows the same plan ---------------
REF=$(DELTAFIN_DENSE_STREAM=0 run "$T/l.gguf")
"$BIN" run -m "$T/l.gguf" -p x -n 1 --mem-limit 20M >/dev/null 2>"$T/err"
rc=$?
need=$(sed -n 's/.*too small: need at least \([0-9.]*\) MiB.*/\1/p' "$T/err")
if [ $rc -ne 0 ] && [ -n "$need" ] && grep -q "one streamed layer buffer" "$T/err"; then
    ok "too small --mem-limit refused: needs $need MiB (one layer buffer + KV + scratch)"
    "$BIN" info "$T/l.gguf" --mem-limit 20M >"$T/info" 2>&1
    grep -q "refused: .*need at least $need MiB" "$T/info" && ok "info --mem-limit 20M: same refusal" ||
        bad "info --mem-limit 20M: $(tail -n 2 "$T/info")"
    # just above the minimum: nothing resident; 1.5 MiB more: some layers resident
    for extra in 0.05 1.5; do
        lim=$(awk -v n="$need" -v e="$extra" 'BEGIN { printf "%d", (n + e) * 1048576 }')
        OUT=$(run "$T/l.gguf" --mem-limit $lim)
        pl=$(plan_line)
        "$BIN" info "$T/l.gguf" --mem-limit $lim >"$T/info" 2>&1
        if [ "$OUT" = "$REF" ] && [ -n "$pl" ] && grep -q "$pl" "$T/info" && grep -q "streamed through" "$T/err"; then
            ok "--mem-limit $lim: '$pl' (run = info), same tokens"
        else
            bad "--mem-limit $lim: $OUT vs $REF | run: $pl | info: $(grep dense: "$T/info") | $(tail -n 1 "$T/err")"
        fi
    done
else
    bad "--mem-limit 20M: rc $rc: $(cat "$T/err")"
fi
# a MoE model just above its minimum: experts and dense layers both streamed by the plan
QREF=$(DELTAFIN_DENSE_STREAM=0 DELTAFIN_STREAM=0 run "$T/q.gguf")
"$BIN" run -m "$T/q.gguf" -p x -n 1 --mem-limit 20M >/dev/null 2>"$T/err"
qneed=$(sed -n 's/.*too small: need at least \([0-9.]*\) MiB.*expert slots.*/\1/p' "$T/err")
if [ -n "$qneed" ]; then
    lim=$(awk -v n="$qneed" 'BEGIN { printf "%d", (n + 0.3) * 1048576 }')
    OUT=$(run "$T/q.gguf" --mem-limit $lim)
    [ "$OUT" = "$QREF" ] && grep -q "experts: [0-9]* slots" "$T/err" && grep -q "streamed through 2 buffers" "$T/err" &&
        ok "qwen3moe --mem-limit $lim (minimum $qneed MiB + 0.3): $(plan_line), experts streamed, same tokens" ||
        bad "qwen3moe --mem-limit $lim: $OUT vs $QREF | $(grep dense: "$T/err") | $(tail -n 1 "$T/err")"
    # info --mem-limit prints the expert cache run plans (same slot count)
    rs=$(sed -n 's/.*experts: \([0-9]*\) slots.*/\1/p' "$T/err" | head -n 1)
    "$BIN" info "$T/q.gguf" --mem-limit $lim >"$T/info" 2>&1
    is=$(sed -n 's/.*expert cache .*(\([0-9]*\) slots of.*/\1/p' "$T/info")
    [ -n "$rs" ] && [ "$rs" = "$is" ] && ok "info --mem-limit $lim: expert cache of $is slots, as run" ||
        bad "info expert cache slots '$is' vs run '$rs': $(grep -i 'expert cache' "$T/info")"
else
    bad "qwen3moe --mem-limit 20M: no 'need at least' with expert slots: $(cat "$T/err")"
fi
# a limit that holds everything: nothing streams
OUT=$(run "$T/l.gguf" --mem-limit 1G)
[ "$OUT" = "$REF" ] && ! grep -q "dense stream" "$T/err" && ok "--mem-limit 1G: all dense resident" ||
    bad "--mem-limit 1G: $OUT ($(grep dense "$T/err"))"

# dense reads are counted in the run's statistics (bytes_read = experts + dense)
DELTAFIN_DENSE_RESIDENT=0 "$BIN" run -m "$T/l.gguf" -p "The quick brown fox" -n 4 --temp 0 -t 2 --json 2>/dev/null >"$T/js"
db=$(sed -n 's/.*"dense_bytes_read":\([0-9.e+]*\).*/\1/p' "$T/js"); br=$(sed -n 's/.*"stats":{.*"bytes_read":\([0-9.e+]*\),"dense.*/\1/p' "$T/js")
[ -n "$db" ] && [ -n "$br" ] && awk -v d="$db" -v b="$br" 'BEGIN { exit !(d > 0 && b >= d) }' &&
    ok "run --json: dense_bytes_read $db of bytes_read $br" || bad "dense stats: $(tail -c 400 "$T/js")"

# ---- faults: named, clean exit ------------------------------------------------------------------
for fault in eio:3 short:5; do
    DELTAFIN_FAULT=$fault DELTAFIN_DENSE_RESIDENT=0 "$BIN" run -m "$T/l.gguf" -p "The quick brown fox" -n 8 \
        --temp 0 -t 2 --io pread >/dev/null 2>"$T/err"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] &&
       grep -q "dense layer [0-9]* tensor 'blk\.[0-9]*\.[a-z_]*\.weight': $T/l.gguf: .*offset [0-9]*" "$T/err"; then
        ok "fault $fault: $(grep -o "dense layer.*" "$T/err" | head -n 1 | cut -c1-150)"
    else
        bad "fault $fault: rc $rc: $(cat "$T/err")"
    fi
done
# a file cut below a streamed tensor: refused at load, naming the tensor (or by the GGUF reader)
sz=$(wc -c <"$T/l.gguf")
head -c $((sz - 70000)) "$T/l.gguf" >"$T/cut.gguf"
DELTAFIN_DENSE_RESIDENT=0 "$BIN" run -m "$T/cut.gguf" -p x -n 2 >/dev/null 2>"$T/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "truncated\|past the end\|beyond" "$T/err" &&
    ok "truncated file refused: $(tail -n 1 "$T/err" | cut -c1-160)" || bad "truncated file: rc $rc: $(cat "$T/err")"

[ $fail = 0 ]
