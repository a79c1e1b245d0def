#!/bin/sh
# test_imatrix.sh — `deltafin imatrix` against llama-imatrix (d32676d), whose matrix on the same
# model and text is recorded in tests/data/expected/quantize/[avx2/]imatrix_llama.tsv (make.sh there):
#   1. the model (gen-random, Q8_0 so both engines' products see the same activation bits) is
#      rebuilt bit for bit;
#   2. deltafin's matrix over tests/data/ppl_story.txt with llama-imatrix's options (-c 128 -b 32)
#      has the same entries (every blk.* product; routed experts per expert), the same counts
#      exactly, and values within 1e-4 of llama-imatrix's (relative to each matrix's largest;
#      what is left is summation order);
#   3. with the routed experts streamed through a small cache (--mem-limit, DELTAFIN_STREAM=1)
#      the file is byte-identical to the resident run's;
#   4. --output-format dat (llama.cpp's legacy format) holds the same matrix; --chunks,
#      --save-frequency (FILE.at_N copies), --process-output (output.weight) and the errors
#      (too little text, a bad --output-format, a missing model) behave as llama-imatrix's;
#   5. `deltafin quantize --imatrix` takes the file and says so.
# Prints one PASS/FAIL line per check; exit 1 if anything failed.
cd "$(dirname "$0")/.." || exit 1
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
E=tests/data/expected/quantize
TXT=tests/data/ppl_story.txt
fails=0
pass() { echo "imatrix: PASS $*"; }
fail() { echo "imatrix: FAIL $*"; fails=$((fails + 1)); }
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
cp "$BIN" "$TMP/deltafin" && cp "$DEVBIN" "$TMP/deltafin-dev" || { fail "cannot copy the binaries"; exit 1; }
BIN=$TMP/deltafin DEVBIN=$TMP/deltafin-dev

# ---- 1. the model
row=$(sed -n 2p "$E/imatrix.tsv")
args=$(printf '%s' "$row" | cut -f2 | sed "s|@FIX@|$FIX|g")
sha=$(printf '%s' "$row" | cut -f3)
opts=$(printf '%s' "$row" | cut -f4)
M=$TMP/m.gguf
# shellcheck disable=SC2086
"$DEVBIN" gen-random $args "$M" >/dev/null 2>&1 || { fail "gen-random $args"; exit 1; }
if [ "$(sha256sum < "$M" | cut -c1-64)" = "$sha" ]; then pass "model rebuilt bit for bit"
else fail "model differs from the recorded one (sha256): the checks below are void"; exit 1; fi

# ---- 2. against llama-imatrix. Its float orders follow its vector width: the recording of an
# AVX2 build (avx2/) is compared with deltafin's avx2 table, which parity tests use on every x86
# machine (tests/lib/dfcheck.py recorded(); DELTAFIN_PARITY_ISA=native: the CPU's own table
# against an AVX-512 recording where there is one)
isa=$("$BIN" --version | sed -n 's/^kernels: \([a-z0-9]*\).*/\1/p')
REC=$E/avx2
case $isa in
avx2|avx512)
    if [ "${DELTAFIN_PARITY_ISA:-avx2}" = native ] && [ "$isa" = avx512 ] && [ -f "$E/imatrix_llama.tsv" ]; then REC=$E
    else export DELTAFIN_ISA=avx2; isa=avx2; fi ;;
*) REC= ;; # ref, neon: no recording in their float order (a router near-tie moves a count)
esac
if [ -z "$REC" ]; then
    echo "imatrix: NOTE the $isa kernels sum in another order than any recording: llama-imatrix comparison skipped"
    # shellcheck disable=SC2086
    "$BIN" imatrix -m "$M" -f "$TXT" $opts -t 2 -o "$TMP/a.gguf" 2>"$TMP/err" || fail "deltafin imatrix failed: $(tail -n 1 "$TMP/err")"
else
    echo "imatrix: recordings in $REC ($(cat "$REC/RECORDED" 2>/dev/null | cut -c1-60)...), $isa kernels"
    # shellcheck disable=SC2086
    if "$BIN" imatrix -m "$M" -f "$TXT" $opts -t 2 -o "$TMP/a.gguf" 2>"$TMP/err"; then
        if "$DEVBIN" imatrix-diff "$TMP/a.gguf" "$REC/imatrix_llama.tsv" --rtol 1e-4 >"$TMP/diff"; then pass "$(tail -n 1 "$TMP/diff")"
        else fail "differs from llama-imatrix: $(head -n 3 "$TMP/diff" | tr '\n' ' ')"; fi
    else
        fail "deltafin imatrix failed: $(tail -n 1 "$TMP/err")"
    fi
fi
grep -q "written to $TMP/a.gguf" "$TMP/err" || fail "no summary line"

# ---- 3. experts streamed from disk through a small cache: the same bytes
# shellcheck disable=SC2086
if DELTAFIN_STREAM=1 "$BIN" imatrix -m "$M" -f "$TXT" $opts -t 2 --mem-limit 200M --cache-size 72K --io pread -o "$TMP/s.gguf" 2>"$TMP/err"; then
    if cmp -s "$TMP/a.gguf" "$TMP/s.gguf" && grep -q "read from disk" "$TMP/err"; then
        pass "streamed experts give the same file ($(grep "read from disk" "$TMP/err" | cut -d: -f2))"
    else fail "streamed experts: another file, or nothing read from disk"; fi
else
    fail "imatrix with streamed experts failed: $(tail -n 1 "$TMP/err")"
fi

# ---- 4. formats and options
# shellcheck disable=SC2086
"$BIN" imatrix -m "$M" -f "$TXT" $opts -t 2 --output-format dat -o "$TMP/a.dat" 2>/dev/null &&
    "$DEVBIN" imatrix-dump "$TMP/a.dat" > "$TMP/dat.tsv" && "$DEVBIN" imatrix-dump "$TMP/a.gguf" > "$TMP/gguf.tsv" ||
    fail "--output-format dat"
# the legacy file keeps (sum / count) * ncall: the same entries, counts = ncall (chunks), values
# that are the GGUF's scaled by ncall / count
if [ "$(cut -f1 "$TMP/dat.tsv")" = "$(cut -f1 "$TMP/gguf.tsv")" ] && [ -s "$TMP/dat.tsv" ]; then pass "legacy .dat: same entries"
else fail "legacy .dat entries differ from the GGUF's"; fi
# shellcheck disable=SC2086
"$BIN" imatrix -m "$M" -f "$TXT" $opts -t 2 --chunks 2 --save-frequency 1 -o "$TMP/c.gguf" 2>/dev/null || fail "--chunks 2"
[ -f "$TMP/c.gguf.at_1" ] && [ -f "$TMP/c.gguf.at_2" ] && pass "--save-frequency 1: FILE.at_1, FILE.at_2" || fail "--save-frequency"
grep -q '^# chunks 2$' <<EOF || fail "--chunks 2: $("$DEVBIN" imatrix-dump "$TMP/c.gguf" | head -n 1)"
$("$DEVBIN" imatrix-dump "$TMP/c.gguf" | head -n 1)
EOF
# shellcheck disable=SC2086
"$BIN" imatrix -m "$M" -f "$TXT" $opts -t 2 --chunks 2 --process-output -o "$TMP/o.gguf" 2>/dev/null &&
    "$DEVBIN" imatrix-dump "$TMP/o.gguf" | grep -q '^output\.weight	' && pass "--process-output collects output.weight" ||
    fail "--process-output"
"$DEVBIN" imatrix-dump "$TMP/a.gguf" | grep -q '^output\.weight	' && fail "output.weight collected without --process-output"
head -c 200 "$TXT" > "$TMP/short.txt"
"$BIN" imatrix -m "$M" -f "$TMP/short.txt" -c 128 -o "$TMP/x.gguf" 2>"$TMP/err" && fail "too short a text accepted"
grep -q "you need at least 256 tokens" "$TMP/err" && [ ! -e "$TMP/x.gguf" ] && pass "too short a text: llama-imatrix's message" ||
    fail "too short a text: $(tail -n 1 "$TMP/err")"
"$BIN" imatrix -m "$M" -f "$TXT" --output-format bin -o "$TMP/x.gguf" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "output-format" "$TMP/err" && pass "a bad --output-format is a usage error" || fail "--output-format bin: rc $rc"
"$BIN" imatrix -m "$TMP/none.gguf" -f "$TXT" -o "$TMP/x.gguf" 2>"$TMP/err" && fail "a missing model accepted"
grep -q "none.gguf" "$TMP/err" || fail "a missing model: $(tail -n 1 "$TMP/err")"

# ---- 5. quantize takes it (the rows are 64 wide: IQ4_NL, which uses the matrix)
if "$BIN" quantize "$M" "$TMP/q.gguf" IQ4_NL --allow-requantize --imatrix "$TMP/a.gguf" -t 2 2>"$TMP/err"; then
    grep -q "with an importance matrix" "$TMP/err" && pass "quantize --imatrix reads it" || fail "quantize did not use it"
else
    fail "quantize --imatrix: $(tail -n 1 "$TMP/err")"
fi
[ $fails -eq 0 ]
