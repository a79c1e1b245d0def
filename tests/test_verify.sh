#!/bin/sh
# test_verify.sh — `deltafin verify`: a packed random model verifies; one byte flipped in one
# expert record is reported as exactly that (layer, expert) and nothing else; SHA-256
# manifests catch corrupt and missing files; missing parts of a split set are named; a model
# with nothing to check against exits 3.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
T=$(mktemp -d /tmp/df_test_verify.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_verify: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_verify: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

"$DEVBIN" gen-random --arch qwen3moe --n-layer 3 --n-expert 8 --vocab bytes --seed 5 "$T/m.gguf" >/dev/null 2>&1 &&
    "$BIN" pack -q "$T/m.gguf" "$T/p.gguf" >/dev/null 2>&1 || { echo "test_verify: gen-random/pack failed"; exit 1; }

# unpacked, no manifest: structure only -> 3
"$BIN" verify -q "$T/m.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 3 ] && grep -q "nothing to check" "$T/out" && ok "no checksums -> exit 3" || bad "no checksums: rc=$rc $(cat "$T/out")"

# packed: all records verify
"$BIN" verify -q --list "$T/p.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "24 expert records, checksums match" "$T/out" && ok "packed model verifies (24 records)" ||
    bad "packed ok: rc=$rc $(cat "$T/out")"

# flip one byte in the middle of record (layer 1, expert 5)
set -- $(grep "^record 1 5 " "$T/out")
OFF=$(( $4 + $5 / 2 ))
cp "$T/p.gguf" "$T/q.gguf"
/usr/bin/python3 - "$T/q.gguf" "$OFF" <<'PY' || { echo "test_verify: flip failed"; exit 1; }
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0x40]))
PY
"$BIN" verify -q "$T/q.gguf" >"$T/out" 2>&1; rc=$?
if [ $rc = 1 ] && grep -q "^CORRUPT  layer 1 expert 5: " "$T/out" && [ "$(grep -c '^CORRUPT' "$T/out")" = 1 ] &&
   grep -q "1 of 24 expert records are corrupt" "$T/out"; then
    ok "flipped byte reported as layer 1 expert 5 only"
else bad "flip: rc=$rc $(cat "$T/out")"; fi

# SHA-256 manifest: ok, then corrupt and missing files named
(cd "$T" && sha256sum m.gguf >m.gguf.sha256)
"$BIN" verify -q "$T/m.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^ok       .*m.gguf  SHA-256 matches" "$T/out" && ok "manifest matches" || bad "manifest ok: rc=$rc $(cat "$T/out")"
(cd "$T" && sha256sum q.gguf >m2.sha256 && sha256sum p.gguf >>m2.sha256 && echo "$(sha256sum m.gguf | cut -c1-64)  gone.gguf" >>m2.sha256)
"$BIN" verify -q --sha256-file "$T/m2.sha256" "$T/p.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^MISSING  .*gone.gguf" "$T/out" && grep -q "^ok       .*p.gguf" "$T/out" && ok "missing file in manifest named" ||
    bad "missing: rc=$rc $(cat "$T/out")"
(cd "$T" && sha256sum p.gguf | sed 's/p.gguf/q.gguf/' >q.gguf.sha256)
"$BIN" verify -q "$T/q.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^CORRUPT  .*q.gguf  SHA-256" "$T/out" && grep -q "layer 1 expert 5" "$T/out" &&
    ok "file SHA-256 mismatch and the bad record both reported" || bad "sha mismatch: rc=$rc $(cat "$T/out")"

# split set with part 2 missing
: >"$T/s-00001-of-00003.gguf"; : >"$T/s-00003-of-00003.gguf"
"$BIN" verify -q "$T/s-00001-of-00003.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^MISSING  .*s-00002-of-00003.gguf  (part 2 of 3" "$T/out" && [ "$(grep -c MISSING "$T/out")" = 1 ] &&
    ok "missing split part named" || bad "split: rc=$rc $(cat "$T/out")"

# truncated file: header damage reported, no crash
head -c 3000 "$T/p.gguf" >"$T/t.gguf"
"$BIN" verify -q "$T/t.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^CORRUPT" "$T/out" && ok "truncated file reported" || bad "truncated: rc=$rc $(cat "$T/out")"

[ $fail = 0 ] && echo "test_verify: ok" || echo "test_verify: FAILED"
exit $fail
