#!/bin/sh
# test_verify.sh — `deltafin verify`: a packed random model verifies; one byte flipped in one
# expert record is reported as exactly that (layer, expert) and nothing else; one byte flipped
# in any region of the file (header, dense tensors, index, checksum table, records) is found
# and named; version 1 packs say what they leave unprotected; --sha256 HEX; SHA-256
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
   grep -q "^1 of [0-9]* checked parts are corrupt or unreadable (24 expert records checked)" "$T/out"; then
    ok "flipped byte reported as layer 1 expert 5 only"
else bad "flip: rc=$rc $(cat "$T/out")"; fi

# one byte flipped in every region of a version 2 pack (padding excepted): the header and tensor
# table (64 places), every dense tensor, the expert index, the checksum table and every expert
# record (first, middle and last byte each) -- verify exits 1 and names the region every time
"$BIN" verify -q --list "$T/p.gguf" >"$T/parts" 2>&1
/usr/bin/python3 - "$BIN" "$T/p.gguf" "$T/parts" "$T/flip.gguf" <<'PY' >"$T/flips" 2>&1; rc=$?
import subprocess, sys, shutil
bin_, src, parts, dst = sys.argv[1:5]
regions = []
for line in open(parts):
    f = line.split()
    if f[0] == "record":
        regions.append(("layer %s expert %s" % (f[1], f[2]), int(f[3]), int(f[4]), 3))
    elif f[0] == "part":
        kind, name, off, n = f[1], f[2], int(f[3]), int(f[4])
        want = {"header": "header", "tensor": "tensor '%s'" % name, "index": "expert index",
                "table": "checksum table"}[kind]
        regions.append((want, off, n, 64 if kind == "header" else 3))
data = bytearray(open(src, "rb").read())
kinds = set(r[0].split()[0] for r in regions)
assert {"header", "tensor", "expert", "checksum", "layer"} <= kinds, kinds
tried = missed = 0
for want, off, n, k in regions:
    if n == 0:
        continue
    spots = sorted(set([off, off + n - 1] + [off + (n - 1) * i // (k - 1) for i in range(k)]))
    for at in spots:
        d = bytearray(data)
        d[at] ^= 0x01
        open(dst, "wb").write(d)
        r = subprocess.run([bin_, "verify", "-q", dst], capture_output=True, text=True)
        bad = [l for l in r.stdout.splitlines() if l.startswith(("CORRUPT", "TRUNCATED"))]
        tried += 1
        one = want.startswith(("layer", "tensor"))
        if r.returncode != 1 or not any(want in l for l in bad) or (one and len(bad) != 1):
            missed += 1
            print("MISSED flip at %d (%s): rc=%d %s" % (at, want, r.returncode, r.stdout.strip()[-300:]))
print("flips %d regions %d missed %d" % (tried, len(regions), missed))
import os
if os.environ.get("DELTAFIN_SWEEP_OUT"):
    with open(os.path.join(os.environ["DELTAFIN_SWEEP_OUT"], "sweep.tsv"), "a") as f:
        # a missed flip is corruption that verify let through: data lost
        f.write("one byte flipped in every region of a packed file (verify)\t%d\t0\t0\t0\t%d\n" % (tried, missed))
sys.exit(1 if missed else 0)
PY
[ $rc = 0 ] && ok "$(tail -n 1 "$T/flips"): every flipped byte detected and its region named" ||
    bad "region flips: $(tail -n 5 "$T/flips")"

# a version 1 pack (records only) still verifies, and verify says what it leaves unprotected
DELTAFIN_PACK_VERSION=1 "$BIN" pack -q "$T/m.gguf" "$T/p1.gguf" >/dev/null 2>&1
"$BIN" verify -q "$T/p1.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^NOTE     .*pack version 1 protects only the expert records: the header and tensor table, the expert index and 30 dense tensors" "$T/out" &&
    grep -q "24 expert records, checksums match" "$T/out" && ok "version 1 pack: records verified, unprotected parts named" ||
    bad "v1: rc=$rc $(cat "$T/out")"
"$BIN" pack --check "$T/p1.gguf" >"$T/out" 2>&1 && grep -q "pack version 1: the header and dense tensors carry no checksum" "$T/out" &&
    ok "pack --check on a version 1 pack says what it did not check" || bad "v1 --check: $(cat "$T/out")"

# --sha256 HEX for a plain GGUF: the whole file
S=$(sha256sum "$T/m.gguf" | cut -c1-64)
"$BIN" verify -q --sha256 "$S" "$T/m.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^ok       .*m.gguf  SHA-256 matches" "$T/out" && ok "--sha256 HEX matches" || bad "--sha256: rc=$rc $(cat "$T/out")"
"$BIN" verify -q --sha256 "$(echo "$S" | tr 0-9a-f 1-9a-f0)" "$T/m.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^CORRUPT  .*m.gguf  SHA-256 $S, expected" "$T/out" && ok "--sha256 HEX mismatch" || bad "--sha256 bad: rc=$rc $(cat "$T/out")"
"$BIN" verify -q --sha256 1234 "$T/m.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "is not 64 hex digits" "$T/out" && ok "--sha256 malformed: usage error" || bad "--sha256 malformed: rc=$rc $(cat "$T/out")"

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

# a split model whose last part is short: that part is named and called truncated
mkdir "$T/sp" && cp "$T/m.gguf" "$T/sp/m.gguf" && /usr/bin/python3 "$(dirname "$0")/lib/gguf_tool.py" split "$T/sp/m.gguf" 3 >/dev/null &&
    truncate -s -1000 "$T/sp/m-00003-of-00003.gguf"
"$BIN" verify -q "$T/sp/m-00001-of-00003.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^TRUNCATED  .*/sp/m-00003-of-00003.gguf: truncated file: tensor 'output.weight'" "$T/out" &&
    ok "split model: the short part 3 of 3 named and reported truncated" || bad "split truncated: rc=$rc $(cat "$T/out")"

# truncated file: header damage reported, no crash
head -c 3000 "$T/p.gguf" >"$T/t.gguf"
"$BIN" verify -q "$T/t.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^CORRUPT  .*t.gguf: .*truncated file: .*(the header or tensor table is damaged or cut short" "$T/out" &&
    ok "file cut inside its header reported" || bad "truncated header: rc=$rc $(cat "$T/out")"
head -c 600000 "$T/p.gguf" >"$T/t.gguf"
"$BIN" verify -q "$T/t.gguf" >"$T/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^TRUNCATED  .*t.gguf: truncated file: tensor 'deltafin.pack.experts': data .* extends beyond end of file (size 600000)" "$T/out" &&
    ok "file cut in its data reported as truncated, naming the tensor" || bad "truncated data: rc=$rc $(cat "$T/out")"

[ $fail = 0 ] && echo "test_verify: ok" || echo "test_verify: FAILED"
exit $fail
