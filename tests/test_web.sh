#!/bin/sh
# The built-in web chat page (GET /) in headless Chromium: tests/server/web.test.mjs drives the
# page over the DevTools protocol (loads, sends a message, shows the streamed answer) and saves a
# screenshot to $DELTAFIN_BUILD/test-out/web/chat.png. The DevTools WebSocket is node's own (22,
# or 20-21 with --experimental-websocket) or the `ws` package of tests/server (npm ci on demand,
# as test_server.sh; Debian 12's node 18). SKIP with a message when chromium, node or both
# WebSockets are missing. Server and browser are always stopped (trap).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M="$FIX/models/llama-2-tiny-random.gguf"
OUTDIR="${DELTAFIN_BUILD:-build}/test-out/web"
[ -f "$M" ] || { echo "test_web: SKIP (no $M)"; exit 0; }
CHROME=""
for c in chromium chromium-browser google-chrome; do command -v "$c" >/dev/null && { CHROME=$c; break; }; done
[ -n "$CHROME" ] || { echo "test_web: SKIP (no chromium: apt-get install chromium)"; exit 0; }
command -v node >/dev/null || { echo "test_web: SKIP (no node)"; exit 0; }
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
WSFLAG=""; [ "$NODE_MAJOR" -ge 20 ] && [ "$NODE_MAJOR" -lt 22 ] && WSFLAG=--experimental-websocket
if [ "$NODE_MAJOR" -lt 20 ] && [ ! -d tests/server/node_modules/ws ]; then
    command -v npm >/dev/null && (cd tests/server && timeout 180 npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1)
    [ -d tests/server/node_modules/ws ] || { echo "test_web: SKIP (node $NODE_MAJOR has no WebSocket and npm could not install ws)"; exit 0; }
fi
T=$(mktemp -d)
SPID=""; CPID=""
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
    [ -n "$CPID" ] && kill "$CPID" 2>/dev/null && wait "$CPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir -p "$OUTDIR"
rm -f "$OUTDIR/chat.png"
KEY=web-key-1
# answers of 24 tokens (the page sends no max_tokens)
"$BIN" serve -m "$M" --port 0 --api-key "$KEY" -n 24 >"$T/out" 2>"$T/err" &
SPID=$!
PORT=""
for i in $(seq 100); do
    PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out"); [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || { echo "test_web: FAIL: server did not start"; cat "$T/err"; exit 1; }
URL="http://127.0.0.1:$PORT"
for i in $(seq 200); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && break; sleep 0.1; done
"$CHROME" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --no-default-browser-check \
    --user-data-dir="$T/profile" --remote-debugging-address=127.0.0.1 --remote-debugging-port=0 about:blank \
    >"$T/chrome.out" 2>"$T/chrome.err" &
CPID=$!
WS=""
for i in $(seq 300); do
    WS=$(sed -n 's/^DevTools listening on \(ws:\/\/[^ ]*\).*/\1/p' "$T/chrome.err" | head -n 1); [ -n "$WS" ] && break
    kill -0 "$CPID" 2>/dev/null || break
    sleep 0.1
done
[ -n "$WS" ] || { echo "test_web: FAIL: chromium did not start"; tail -n 5 "$T/chrome.err"; exit 1; }
if DF_URL="$URL" DF_API_KEY="$KEY" DF_WS="$WS" DF_SHOT="$OUTDIR/chat.png" timeout 120 node $WSFLAG tests/server/web.test.mjs >"$T/node.log" 2>&1; then
    echo "test_web: OK ($(grep -c '^ok' "$T/node.log") checks; screenshot $OUTDIR/chat.png)"
else
    echo "test_web: FAIL:"; sed 's/^/  /' "$T/node.log"; exit 1
fi
