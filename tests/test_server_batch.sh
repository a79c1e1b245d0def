#!/bin/sh
# test_server_batch.sh — the server decodes all active slots as one batch per step
# (docs/server.md "Batching"): on a random MoE model with its experts streamed through a small
# cache, 4 different requests sent together give the texts each gives alone (greedy, byte for
# byte), also a long prompt cut into --step-tokens chunks while the others generate; /metrics
# shows steps with several slots, fewer forward passes than slots and expert acquires saved
# by sharing; -v logs the batch line. The server is always stopped (trap).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
BIN=${DELTAFIN_BIN:-build/deltafin}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
GEN="$BIN gen-random"
if [ -n "${DELTAFIN_DEV_BIN:-}" ]; then GEN="$DELTAFIN_DEV_BIN gen-random"
elif [ -x "$(dirname "$BIN")/deltafin-dev" ]; then GEN="$(dirname "$BIN")/deltafin-dev gen-random"; fi
command -v curl >/dev/null || { echo "test_server_batch: SKIP (no curl)"; exit 0; }
VOCAB="$FIX/models/tok512.bin"
[ -f "$VOCAB" ] || VOCAB=bytes
T=$(mktemp -d)
SPID=""
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
    jobs -p | xargs -r kill 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
nfail=0; nok=0
ok() { nok=$((nok+1)); }
bad() { echo "test_server_batch: FAIL: $*"; nfail=$((nfail+1)); }

$GEN --arch qwen3moe --type q8_0 --n-expert 16 --n-expert-used 4 --n-layer 3 --vocab "$VOCAB" --seed 7 \
    "$T/m.gguf" >/dev/null 2>&1 || { echo "test_server_batch: FAIL: gen-random"; exit 1; }

start_server() { # args...; sets SPID URL
    DELTAFIN_EXPERT_CACHE=64K "$BIN" serve -m "$T/m.gguf" --port 0 --io pread -v --no-cache-prompt "$@" \
        >"$T/out" 2>"$T/err" &
    SPID=$!
    PORT=""
    for i in $(seq 300); do
        PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out")
        [ -n "$PORT" ] && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$PORT" ] || { echo "test_server_batch: FAIL: server did not start"; cat "$T/err"; exit 1; }
    URL="http://127.0.0.1:$PORT"
    for i in $(seq 600); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && return 0
        sleep 0.1
    done
    echo "test_server_batch: FAIL: /health never became 200"; cat "$T/err"; exit 1
}
stop_server() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""; }
# complete NAME PROMPT: the generated text (JSON string, escapes kept) into $T/NAME
complete() {
    curl -s -d "{\"prompt\":\"$2\",\"max_tokens\":24,\"temperature\":0}" "$URL/v1/completions" >"$T/$1.json"
    sed -n 's/.*"text":\("\([^"\\]\|\\.\)*"\).*/\1/p' "$T/$1.json" >"$T/$1"
    [ -s "$T/$1" ] || echo "no text: $(head -c 300 "$T/$1.json")" >"$T/$1"
}
metric() { curl -s "$URL/metrics" | sed -n "s/^deltafin_$1 \([0-9.]*\)$/\1/p"; }

LONG=$(yes 'the little dog ran to the park and saw a big red ball' | head -n 20 | tr '\n' ' ')
P1="Once upon a time"; P2="The little dog ran to the park and"; P3="She said"; P4="$LONG"
start_server --parallel 4 --step-tokens 32
for i in 1 2 3 4; do eval "complete alone$i \"\$P$i\""; done
s0=$(metric batch_steps_total)
CP=""
for i in 1 2 3 4; do eval "complete together$i \"\$P$i\"" & CP="$CP $!"; done
wait $CP
for i in 1 2 3 4; do
    if cmp -s "$T/alone$i" "$T/together$i"; then ok; else bad "request $i: $(cat "$T/together$i") together, $(cat "$T/alone$i") alone"; fi
done
grep -q '"completion_tokens":24' "$T/together1.json" && ok || bad "request 1 generated fewer tokens: $(head -c 300 "$T/together1.json")"
steps=$(metric batch_steps_total); slots=$(metric batch_slots_total); smax=$(metric batch_slots_max)
passes=$(metric batch_passes_total); spasses=$(metric batch_slot_passes_total)
acq=$(metric batch_experts_acquired_total); alone=$(metric batch_experts_alone_total); saved=$(metric batch_experts_saved_total)
echo "  steps $((steps - s0)), slots/step $(awk -v a=$slots -v b=$steps "BEGIN{printf \"%.2f\", a/b}"), max $smax, passes $passes of $spasses, experts $acq of $alone"
[ "${smax:-0}" -ge 2 ] && [ "${smax:-0}" -le 4 ] && ok || bad "batch_slots_max $smax (want 2..4)"
[ "${steps:-0}" -gt "${s0:-0}" ] && [ "${slots:-0}" -gt "${steps:-0}" ] && ok || bad "steps $steps, slots $slots: no step with several slots"
[ "${passes:-0}" -lt "${spasses:-0}" ] && ok || bad "passes $passes, per-slot passes $spasses: no pass shared"
[ "${saved:-0}" -gt 0 ] && [ $((alone - acq)) -eq "$saved" ] && ok || bad "experts: $acq acquired, $alone alone, $saved saved"
# the prompt of 240+ tokens went in chunks of at most 32 (--step-tokens): at least 8 steps
[ "$((steps - s0))" -ge 8 ] && ok || bad "only $((steps - s0)) steps for the 4 requests"
stop_server
grep -q 'batch: [0-9]* steps, [0-9.]* slots/step, [0-9]* tokens; routed experts [0-9]* acquired for [0-9]* alone' "$T/err" && ok ||
    bad "-v batch line missing: $(grep -c batch "$T/err") lines"

# one slot: the same texts (a request's tokens do not depend on the slots beside it)
start_server --parallel 1 --step-tokens 32
for i in 1 2 4; do
    eval "complete single$i \"\$P$i\""
    cmp -s "$T/alone$i" "$T/single$i" && ok || bad "request $i on 1 slot: $(cat "$T/single$i") vs $(cat "$T/alone$i")"
done
stop_server
[ $nfail = 0 ] && echo "test_server_batch: $nok checks ok" || echo "test_server_batch: $nfail failed, $nok ok"
[ $nfail = 0 ]
