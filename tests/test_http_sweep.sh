#!/bin/sh
# test_http_sweep.sh — hostile HTTP against `deltafin serve` (tests/lib/http_sweep.py): invalid
# JSON, deep nesting, huge bodies and numbers, invalid UTF-8, Content-Length lies, malformed
# requests, slow clients, 64 streaming clients hanging up mid-stream, SIGTERM drain. Each case
# asserts the status and the error code or text; the server must stay up throughout.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M="$FIX/models/llama-2-tiny-random.gguf"
[ -f "$M" ] || { echo "test_http_sweep: SKIP (no $M)"; exit 0; }
[ -x /usr/bin/python3 ] || { echo "test_http_sweep: SKIP (no python3)"; exit 0; }
T=$(mktemp -d /tmp/df_test_http.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_http_sweep: no binary $BIN"; exit 1; }
/usr/bin/python3 "$(dirname "$0")/lib/http_sweep.py" "$T/deltafin" "$M" "$T" >"$T/log" 2>&1; rc=$?
grep -v "^ok " "$T/log"
[ $rc = 0 ] && echo "test_http_sweep: ok ($(tail -n 1 "$T/log" | sed 's/^http_sweep: //'))" || echo "test_http_sweep: FAILED"
exit $rc
