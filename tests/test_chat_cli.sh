#!/bin/sh
# deltafin chat: two turns from stdin; the second turn must reuse the KV cache of the first
# (only the new tokens decoded, per the --stats line); /reset clears it; Ctrl-C (SIGINT)
# stops the current answer, not the program.
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M="$FIX/models/llama-2-tiny-random.gguf"
[ -f "$M" ] || { echo "test_chat_cli: SKIP (no $M)"; exit 0; }
T=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM
fail() { echo "test_chat_cli: FAIL: $*"; [ -f "$T/err" ] && sed 's/^/  /' "$T/err"; exit 1; }

printf 'Hello there\nHow are you today?\n/reset\nAgain\n/exit\nnot read\n' |
    "$BIN" chat -m "$M" -n 8 -s 5 -c 512 --stats >"$T/out" 2>"$T/err" || fail "exit status $?"
grep -q '^\[turn 1\]' "$T/err" || fail "no stats for turn 1"
# [turn N] prompt P tokens: reused R, decoded D ... | generated G ...
l1=$(grep '^\[turn' "$T/err" | sed -n 1p); l2=$(grep '^\[turn' "$T/err" | sed -n 2p); l3=$(grep '^\[turn' "$T/err" | sed -n 3p)
num() { echo "$1" | sed -n "s/.*$2 \([0-9][0-9]*\).*/\1/p"; }
p1=$(num "$l1" prompt); r1=$(num "$l1" reused); g1=$(num "$l1" generated)
p2=$(num "$l2" prompt); r2=$(num "$l2" reused); d2=$(num "$l2" decoded)
r3=$(num "$l3" reused)
[ -n "$p1" ] && [ -n "$p2" ] && [ -n "$r3" ] || fail "missing stats lines"
[ "$r1" -eq 0 ] || fail "turn 1 reused $r1 tokens from an empty cache"
[ "$r2" -ge "$p1" ] || fail "turn 2 reused $r2 tokens, expected at least the $p1 of turn 1's prompt"
[ "$d2" -eq $((p2 - r2)) ] || fail "turn 2 decoded $d2 tokens, expected prompt $p2 - reused $r2"
[ "$d2" -lt "$p2" ] || fail "turn 2 decoded the whole prompt"
[ "$r3" -eq 0 ] || fail "after /reset the first turn reused $r3 tokens"
grep -q 'conversation cleared' "$T/err" || fail "/reset not acknowledged"
[ "$(grep -c '^\[turn' "$T/err")" -eq 3 ] || fail "input after /exit was read"

# Ctrl-C stops the answer (greedy on the random model runs until the context is full)
mkfifo "$T/in"
"$BIN" chat -m "$M" --temp 0 -c 4096 --stats <"$T/in" >"$T/out2" 2>"$T/err" &
PID=$!
exec 3>"$T/in"
echo "Tell me a long story" >&3
# wait until the answer is streaming (loading can be slow on a busy machine), then Ctrl-C
i=0
while [ ! -s "$T/out2" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
sleep 0.3
kill -INT "$PID" 2>/dev/null || fail "chat exited early"
sleep 0.5
kill -0 "$PID" 2>/dev/null || fail "SIGINT ended the program"
echo "/exit" >&3
exec 3>&-
wait "$PID"; rc=$?; PID=""
[ "$rc" -eq 0 ] || fail "exit status $rc after Ctrl-C"
grep -q '(stopped)' "$T/err" || fail "no '(stopped)' after SIGINT"
g=$(num "$(grep '^\[turn 1\]' "$T/err")" generated)
[ -n "$g" ] && [ "$g" -lt 4000 ] || fail "answer was not cut short (generated $g)"
# --grammar constrains every answer (each turn is one generation of the grammar)
printf 'Answer me\nAnd again\n/save %s\n' "$T/g.json" |
    "$BIN" chat -m "$M" -n 16 -s 3 -c 512 --grammar 'root ::= ("yes" | "no") "."' >"$T/out" 2>"$T/err" || fail "grammar: exit status $?"
python3 - "$T/g.json" <<'EOF2' || fail "--grammar: the answers do not follow the grammar"
import json, sys
m = json.load(open(sys.argv[1]))
a = [x["content"] for x in m if x["role"] == "assistant"]
assert len(a) == 2 and all(x in ("yes.", "no.") for x in a), a
EOF2
# --context-shift: a conversation that outgrows -c drops its oldest turns instead of refusing
printf 'one two three four five\nsix seven eight nine ten\neleven twelve thirteen\nfourteen fifteen sixteen\nlast one\n' |
    "$BIN" chat -m "$M" -n 12 --temp 0 -c 96 --context-shift --stats >"$T/out" 2>"$T/err" || fail "context-shift: exit status $?"
grep -q 'context shift: dropped' "$T/err" || fail "--context-shift dropped nothing at -c 96"
[ "$(grep -c '^\[turn' "$T/err")" -eq 5 ] || fail "--context-shift: not every message was answered"
printf 'one two three four five\nsix seven eight nine ten\neleven twelve thirteen\nfourteen fifteen sixteen\nlast one\n' |
    "$BIN" chat -m "$M" -n 12 --temp 0 -c 96 --stats >"$T/out" 2>"$T/err" || fail "no context-shift: exit status $?"
grep -q -- 'or --context-shift' "$T/err" || fail "without --context-shift a full context is not explained"
echo "test_chat_cli: OK (turn 2 reused $r2 of $p2 prompt tokens, decoded $d2; Ctrl-C stopped after $g tokens)"
