#!/bin/sh
# test_mlock.sh — --mlock, as a llama.cpp user expects it: the resident weights (dense, the
# resident experts, or the expert cache when experts stream) are locked in RAM, the output is
# the same as without the flag, `run -v` and `run --json` report the locked bytes, and when
# RLIMIT_MEMLOCK is too small `run` and `serve` stop at load with an error that names the limit
# and how to raise it (no crash, no half-started server).
#
# Root ignores RLIMIT_MEMLOCK (CAP_IPC_LOCK), so the too-small case drops that capability with
# setpriv (util-linux) when run as root; without setpriv it is skipped (said so). Nothing here
# depends on timing.
set -u
# AddressSanitizer replaces mlock / mlockall by no-ops (its runtime warns "mlock is not supported
# under AddressSanitizer"): nothing would be locked, so an ASan build is not tested here.
case "${DELTAFIN_BUILD:-}" in *asan*) echo "mlock: skip: ASan build (the sanitizer runtime makes mlock a no-op)"; exit 0 ;; esac
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
T=$(mktemp -d /tmp/df_test_mlock.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { echo "mlock: PASS $1"; pass=$((pass + 1)); }
bad() { echo "mlock: FAIL $1"; fail=$((fail + 1)); }
num() { sed -n "s/.*\"memory\":{[^}]*\"$1\":\([0-9]*\).*/\1/p" "$2" | head -1; }
toks() { sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' "$1" | head -1; }

"$DEVBIN" gen-random --arch qwen3moe --n-embd 256 --n-layer 2 --n-expert 8 --n-expert-used 2 \
    --n-ff-exp 256 --vocab bytes --seed 3 "$T/m.gguf" >/dev/null 2>&1 || { echo "mlock: gen-random failed"; exit 1; }
P="The quick brown fox"

# 1. resident: same tokens, everything resident is locked
"$BIN" run -m "$T/m.gguf" -p "$P" -n 8 --temp 0 -t 2 --json > "$T/a.json" 2>"$T/a.err" || bad "run without --mlock: $(tail -1 "$T/a.err")"
"$BIN" run -m "$T/m.gguf" -p "$P" -n 8 --temp 0 -t 2 --json --mlock -v > "$T/b.json" 2>"$T/b.err"
rc=$?
if [ $rc -ne 0 ]; then
    bad "run --mlock (rc $rc): $(tail -1 "$T/b.err")"
else
    A=$(toks "$T/a.json"); B=$(toks "$T/b.json")
    [ -n "$A" ] && [ "$A" = "$B" ] && ok "run --mlock: same tokens ($B)" || bad "run --mlock tokens '$B' != '$A'"
    L=$(num locked "$T/b.json"); D=$(num dense "$T/b.json"); E=$(num experts "$T/b.json")
    L0=$(num locked "$T/a.json")
    if [ -n "$L" ] && [ -n "$D" ] && [ -n "$E" ] && [ "$E" -gt 0 ] && [ "$L" -ge $((D + E)) ]; then
        ok "resident: locked $L >= dense $D + experts $E"
    else
        bad "resident: locked '$L' < dense '$D' + experts '$E'"
    fi
    [ "$L0" = 0 ] && ok "without --mlock nothing is locked" || bad "without --mlock locked '$L0'"
    grep -q '^budget use:.*, locked [0-9.]* [KMG]*i*B$' "$T/b.err" && ok "-v budget use reports the locked bytes" \
        || bad "-v budget use line has no 'locked': $(grep '^budget use' "$T/b.err")"
fi

# 2. streamed experts: the cache is locked (experts 0, cache > 0)
"$BIN" run -m "$T/m.gguf" -p "$P" -n 8 --temp 0 -t 2 --json --mlock --mem-limit 30M > "$T/c.json" 2>"$T/c.err"
rc=$?
if [ $rc -ne 0 ]; then
    bad "run --mlock --mem-limit 30M (rc $rc): $(tail -1 "$T/c.err")"
else
    C=$(num cache "$T/c.json"); E=$(num experts "$T/c.json"); L=$(num locked "$T/c.json"); D=$(num dense "$T/c.json")
    if [ "${E:-1}" = 0 ] && [ "${C:-0}" -gt 0 ] && [ "${L:-0}" -ge $((C + D)) ]; then
        ok "streaming: locked $L >= cache $C + dense $D"
    else
        bad "streaming: experts '$E' cache '$C' dense '$D' locked '$L'"
    fi
    [ "$(toks "$T/c.json")" = "$(toks "$T/a.json")" ] && ok "streaming --mlock: same tokens" || bad "streaming --mlock: tokens differ"
fi

# 3. RLIMIT_MEMLOCK too small: a clear error at load, for run and serve
LOW=""
if [ "$(id -u)" != 0 ]; then LOW="env"
elif command -v setpriv >/dev/null 2>&1 && setpriv --inh-caps -ipc_lock --bounding-set -ipc_lock true 2>/dev/null; then
    LOW="setpriv --inh-caps -ipc_lock --bounding-set -ipc_lock"
fi
if [ -z "$LOW" ]; then
    echo "mlock: SKIP too-small RLIMIT_MEMLOCK (root without a working setpriv)"
else
    for cmd in run serve; do
        if [ $cmd = run ]; then set -- run -m "$T/m.gguf" -p "$P" -n 4 --temp 0 --mlock
        else set -- serve -m "$T/m.gguf" --host 127.0.0.1 --port 0 --mlock; fi
        (ulimit -l 64 && exec timeout 60 $LOW "$BIN" "$@") > "$T/low.out" 2> "$T/low.err"
        rc=$?
        if [ $rc -eq 1 ] && grep -q -- '--mlock: cannot lock .*RLIMIT_MEMLOCK is 64.00 KiB.*ulimit -l' "$T/low.err" \
            && ! grep -qi 'sanitizer\|segmentation\|abort' "$T/low.err"; then
            ok "$cmd --mlock under ulimit -l 64: rc 1, '$(head -c 90 "$T/low.err")...'"
        else
            bad "$cmd --mlock under ulimit -l 64: rc $rc, $(head -3 "$T/low.err")"
        fi
    done
fi
echo "mlock: $pass passed, $fail failed"
[ $fail -eq 0 ]
