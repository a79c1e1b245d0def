#!/bin/sh
# test_moe_tools.sh — the tools on gpt-oss, glm4moe and minimax-m2 (issue 16 item 4), each a small
# random model (4 layers, 16 experts top-4, Q8_0, tok512 vocabulary): greedy ids with every
# expert resident are the reference, and the same ids come from
#   - the `deltafin pack` copy (which `verify` passes) streamed through a 2-slot expert cache,
#   - `deltafin profile`'s hot file pinned with --hot under a small cache,
#   - every dense layer streamed (DELTAFIN_DENSE_RESIDENT=0),
#   - `deltafin serve` (/v1/completions at temperature 0: the same text as `run`), which also
#     answers a chat request,
# and `deltafin chat` answers a message. Nothing here depends on timing.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
T=$(mktemp -d /tmp/df_test_moe_tools.XXXXXX)
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
cp "$BIN" "$T/deltafin" || { echo "test_moe_tools: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_moe_tools: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }
P="The little dog ran to the park and"
ids() { # model, extra args: the generated ids
    m=$1; shift
    "$BIN" run -m "$m" -p "$P" -n 16 --temp 0 -t 2 --json "$@" 2>"$T/err" | tail -n 1 |
        sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p'
}

for A in gpt-oss glm4moe minimax-m2; do
    M="$T/$A.gguf"
    if [ $A = gpt-oss ]; then extra="--n-ff-exp 64"; else extra="--n-ff-exp 64 --n-ff 96"; fi
    "$DEVBIN" gen-random --arch $A --type q8_0 --n-embd 128 --n-layer 4 --n-expert 16 --n-expert-used 4 $extra \
        --vocab "$FIX/models/tok512.bin" --seed 3 "$M" >/dev/null 2>&1 || { bad "$A: gen-random failed"; continue; }
    REF=$(DELTAFIN_STREAM=0 ids "$M")
    [ -n "$REF" ] || { bad "$A: reference run failed: $(tail -1 "$T/err")"; continue; }

    # pack: verifies, and streams to the same ids
    if "$BIN" pack -q "$M" "$T/$A.packed.gguf" >/dev/null 2>"$T/err" && "$BIN" verify -q "$T/$A.packed.gguf" >"$T/v" 2>&1; then
        OUT=$(DELTAFIN_EXPERT_CACHE=100K ids "$T/$A.packed.gguf" --io pread -v)
        [ "$OUT" = "$REF" ] && grep -q "experts: [0-9]* slots" "$T/err" && ok "$A: packed, verified, streamed: same ids" ||
            bad "$A: packed + streamed: $OUT vs $REF ($(tail -1 "$T/err"))"
    else
        bad "$A: pack / verify failed: $(tail -1 "$T/err") $(tail -1 "$T/v")"
    fi

    # profile -> --hot
    printf '%s\nOnce upon a time\n' "$P" >"$T/prompts.txt"
    if "$BIN" profile -m "$M" -f "$T/prompts.txt" -n 8 -t 2 -o "$T/hot.txt" >/dev/null 2>"$T/err" &&
       [ "$(grep -vc '^#' "$T/hot.txt")" -gt 0 ]; then
        OUT=$(DELTAFIN_EXPERT_CACHE=300K ids "$M" --io pread --hot "$T/hot.txt" -v)
        [ "$OUT" = "$REF" ] && grep -q "([1-9][0-9]* hot)" "$T/err" && ok "$A: profile's hot file pinned (--hot): same ids" ||
            bad "$A: --hot: $OUT vs $REF ($(grep 'experts:' "$T/err" | tail -1))"
    else
        bad "$A: profile failed: $(tail -1 "$T/err")"
    fi

    # every dense layer streamed
    OUT=$(DELTAFIN_DENSE_RESIDENT=0 DELTAFIN_EXPERT_CACHE=300K ids "$M" --io pread -v)
    [ "$OUT" = "$REF" ] && grep -q "dense: 0 of [0-9]* layers resident" "$T/err" && ok "$A: dense layers streamed: same ids" ||
        bad "$A: dense layers streamed: $OUT vs $REF ($(grep 'dense:' "$T/err" | tail -1))"

    # serve: a completion at temperature 0 is run's text; a chat request is answered
    "$BIN" serve -m "$M" --port 0 -c 512 -t 2 >"$T/srv.out" 2>"$T/srv.err" &
    SPID=$!
    PORT=""
    for i in $(seq 300); do
        PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/srv.out")
        [ -n "$PORT" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ] && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    if [ -n "$PORT" ]; then
        RT=$("$BIN" run -m "$M" -p "$P" -n 16 --temp 0 -t 2 --json 2>/dev/null | tail -n 1 |
             /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')
        ST=$(curl -s "http://127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":\"$P\",\"max_tokens\":16,\"temperature\":0}" |
             /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null)
        [ -n "$RT" ] && [ "$ST" = "$RT" ] && ok "$A: serve /v1/completions = run's text" || bad "$A: serve text '$ST' vs run '$RT'"
        CC=$(curl -s -o "$T/chat.json" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/chat/completions" \
             -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0}')
        [ "$CC" = 200 ] && grep -q '"completion_tokens":[1-9]' "$T/chat.json" && ok "$A: serve answers a chat request" ||
            bad "$A: serve chat: $CC $(head -c 300 "$T/chat.json")"
        kill -TERM "$SPID"; wait "$SPID"; SPID=""
    else
        bad "$A: serve did not start: $(tail -2 "$T/srv.err")"
        kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""
    fi

    # chat: one message from stdin
    printf 'Hello\n/exit\n' | "$BIN" chat -m "$M" -n 8 --temp 0 -t 2 -c 512 --stats >"$T/chat.out" 2>"$T/err" &&
        grep -q '^\[turn 1\] prompt [0-9]* tokens.*generated [1-9]' "$T/err" && ok "$A: chat answers a message" ||
        bad "$A: chat: $(tail -2 "$T/err")"
done
[ $fail = 0 ] && echo "test_moe_tools: ok" || echo "test_moe_tools: FAILED"
exit $fail
