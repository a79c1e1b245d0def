#!/bin/sh
# test_server_timeout.sh — --timeout is an idle timeout for clients, never a limit on how long a
# request may wait for a slot or for its tokens (issue 18): `serve -np 1 --timeout 2` gets 3
# non-streamed and 4 streamed requests at once, so the later ones wait well past 2 s in the
# queue; every answer must be complete (a full JSON body; a stream ending in `data: [DONE]`).
# A keep-alive connection left idle after a stream, and a client that stops sending its body,
# are still closed after about 2 s. The server is always stopped (trap).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
BIN=${DELTAFIN_BIN:-build/deltafin}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
GEN="$BIN gen-random"
if [ -n "${DELTAFIN_DEV_BIN:-}" ]; then GEN="$DELTAFIN_DEV_BIN gen-random"
elif [ -x "$(dirname "$BIN")/deltafin-dev" ]; then GEN="$(dirname "$BIN")/deltafin-dev gen-random"; fi
command -v curl >/dev/null || { echo "test_server_timeout: SKIP (no curl)"; exit 0; }
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
bad() { echo "test_server_timeout: FAIL: $*"; nfail=$((nfail+1)); }

$GEN --arch qwen3moe --type q8_0 --n-embd 512 --n-layer 4 --n-head 4 --n-head-kv 2 --head-dim 64 \
    --n-expert 24 --n-expert-used 6 --n-ff-exp 768 --vocab bytes --seed 11 "$T/m.gguf" >/dev/null 2>&1 ||
    { echo "test_server_timeout: FAIL: gen-random"; exit 1; }
"$BIN" serve -m "$T/m.gguf" --port 0 -np 1 --queue 8 --timeout 2 -c 4096 --no-cache-prompt >"$T/out" 2>"$T/err" &
SPID=$!
PORT=""
for i in $(seq 300); do
    PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out")
    [ -n "$PORT" ] && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.1
done
[ -n "$PORT" ] || { echo "test_server_timeout: FAIL: server did not start"; cat "$T/err"; exit 1; }
URL="http://127.0.0.1:$PORT"
for i in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && break
    sleep 0.1
done

# ---- queued requests wait longer than --timeout and still get their whole answer ----
# each takes about 1.5 s, whatever the machine (an ASan build is 10x slower than a release one):
# one calibration request measures the time per token, N follows from it, so the last of the 7
# wait 6+ s for the one slot while no request comes near curl's limit
t=$(curl -s -m 300 -o /dev/null -w '%{time_total}' \
    -d '{"prompt":"calibrate","max_tokens":64,"temperature":0}' "$URL/v1/completions")
N=$(awk -v t="$t" 'BEGIN { n = int(1.5 * 64 / (t > 0 ? t : 0.001)); if (n < 16) n = 16; if (n > 3000) n = 3000; print n }')
nonstream() { # NAME: a non-streamed completion into $T/NAME, "status time" into $T/NAME.st
    curl -s -m 300 -o "$T/$1" -w '%{http_code} %{time_total}' \
        -d "{\"prompt\":\"request $1\",\"max_tokens\":$N,\"temperature\":0}" "$URL/v1/completions" >"$T/$1.st"
}
stream() { # NAME PATH BODY-HEAD: a streamed request
    curl -s -N -m 300 -o "$T/$1" -w '%{http_code} %{time_total}' \
        -d "{$3,\"max_tokens\":$N,\"temperature\":0,\"stream\":true}" "$URL$2" >"$T/$1.st"
}
nonstream n1 & sleep 0.05
stream s1 /v1/completions '"prompt":"stream 1"' & sleep 0.05
nonstream n2 & sleep 0.05
stream s2 /v1/completions '"prompt":"stream 2"' & sleep 0.05
stream c1 /v1/chat/completions '"messages":[{"role":"user","content":"chat"}]' & sleep 0.05
nonstream n3 & sleep 0.05
stream s3 /v1/completions '"prompt":"stream 3"'
wait $(jobs -p | grep -v "^$SPID$")
for f in n1 n2 n3; do
    touch "$T/$f" "$T/$f.st"
    if [ "$(cut -d' ' -f1 "$T/$f.st")" = 200 ] && grep -q '"finish_reason":"\(length\|stop\)"' "$T/$f" &&
       grep -q '"completion_tokens":[1-9]' "$T/$f"; then ok
    else bad "queued request $f: status $(cat "$T/$f.st"), body $(head -c 200 "$T/$f")"; fi
done
for f in s1 s2 s3 c1; do
    touch "$T/$f" "$T/$f.st"
    st=$(cut -d' ' -f1 "$T/$f.st")
    if [ "$st" = 200 ] && [ "$(tail -n 2 "$T/$f" | head -n 1)" = "data: [DONE]" ] &&
       grep -q '"finish_reason":"\(length\|stop\)"' "$T/$f"; then ok
    else bad "queued stream $f: status $st, $(wc -c <"$T/$f") bytes, ends $(tail -c 120 "$T/$f" | tr '\n' ' ')"; fi
done
# the test means something only if the last ones really waited past --timeout
for f in n3 s3; do
    w=$(cut -d' ' -f2 "$T/$f.st")
    awk -v w="$w" 'BEGIN { exit !(w > 3) }' && ok || bad "$f took only ${w}s: it never waited past --timeout 2"
done

# ---- a keep-alive connection idle after a stream is still closed after --timeout ----
t0=$(date +%s)
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
body='{"prompt":"idle","max_tokens":4,"temperature":0,"stream":true}'
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    "${#body}" "$body" >&3
timeout 20 cat <&3 >"$T/ka"
exec 3<&-
dt=$(( $(date +%s) - t0 ))
grep -q '^data: \[DONE\]' "$T/ka" && ok || bad "keep-alive stream incomplete: $(tail -c 200 "$T/ka")"
[ "$dt" -le 10 ] && ok || bad "idle keep-alive connection after a stream held ${dt}s (timeout 2s)"

# ---- a client that stops sending its body is dropped after --timeout ----
t0=$(date +%s)
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"pro' >&3
timeout 20 cat <&3 >/dev/null
exec 3<&-
dt=$(( $(date +%s) - t0 ))
[ "$dt" -ge 1 ] && [ "$dt" -le 8 ] && ok || bad "slow client closed after ${dt}s (timeout 2s)"

kill -0 "$SPID" 2>/dev/null && ok || bad "server died: $(tail -5 "$T/err")"
echo "test_server_timeout: $nok ok, $nfail failed"
[ "$nfail" = 0 ]
