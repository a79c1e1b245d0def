#!/bin/sh
# Bounded load test of deltafin serve on loopback: 32 concurrent clients, 200 requests, 4
# rounds (scripts/load_test.mjs), then the server is stopped. Appends a row to
# docs/experiments.tsv (throughput, p50/p99 latency) unless --no-record.
# Usage: scripts/load_test.sh [MODEL] [--no-record]   (default: the tiny random llama fixture)
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M=${1:-$FIX/models/llama-2-tiny-random.gguf}
RECORD=1; [ "$2" = --no-record ] || [ "$1" = --no-record ] && RECORD=0
[ "$1" = --no-record ] && M=$FIX/models/llama-2-tiny-random.gguf
[ -f "$M" ] || { echo "load_test: no model $M"; exit 2; }
command -v node >/dev/null || { echo "load_test: node is required"; exit 2; }
T=$(mktemp -d); SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
KEY=load-test
"$BIN" serve -m "$M" --host 127.0.0.1 --port 0 --api-key "$KEY" -c 1024 --parallel 4 --queue 64 >"$T/out" 2>"$T/err" &
SPID=$!
for i in $(seq 100); do PORT=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out"); [ -n "$PORT" ] && break; sleep 0.1; done
[ -n "$PORT" ] || { echo "load_test: server did not start"; cat "$T/err"; exit 1; }
URL=http://127.0.0.1:$PORT
for i in $(seq 300); do [ "$(curl -s -o /dev/null -w '%{http_code}' $URL/health)" = 200 ] && break; sleep 0.1; done
timeout 900 node scripts/load_test.mjs "$URL" "$KEY" "$SPID" 32 200 4 >"$T/res" 2>"$T/cerr"; rc=$?
cat "$T/cerr"; cat "$T/res"
kill -TERM "$SPID"; wait "$SPID"; src=$?; SPID=""
[ "$src" -eq 0 ] || { echo "load_test: server exit status $src"; rc=1; }
res=$(cat "$T/res")
get() { echo "$res" | sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
if [ "$rc" -eq 0 ] && [ "$RECORD" -eq 1 ] && [ -n "$res" ]; then
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    printf '%s\t%s\tserver\tload test %s: 32 clients, 200 req (chat/stream/completion, 32 tok), 4 slots, loopback\treq/s\t%s\t\t\tyes\tgen %s tok/s, p50 %s ms, p99 %s ms, %s refused, RSS flat (%s)\n' \
        "$(date +%F)" "$commit" "$(basename "$M")" "$(get req_per_s)" "$(get gen_tok_per_s)" "$(get p50_ms)" "$(get p99_ms)" \
        "$(get refused)" "$(echo "$res" | sed -n 's/.*"rss_rounds":\[\([0-9,]*\)\].*/\1/p')" >>docs/experiments.tsv
    echo "load_test: row appended to docs/experiments.tsv"
fi
exit $rc
