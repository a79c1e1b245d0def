#!/bin/sh
# Runs every unit test binary in $1/tests and every tests/*.sh script, then prints one
# closing line "N passed, N failed" (N = test programs). Exit status 1 if any failed.
BUILD=${1:-build}
export DELTAFIN_BIN="$(pwd)/$BUILD/deltafin"
export DELTAFIN_DEV_BIN="$(pwd)/$BUILD/deltafin-dev"   # gen-random, convert-llama2c
export DELTAFIN_BUILD="$BUILD"
[ -n "$DELTAFIN_FIXTURES" ] || export DELTAFIN_FIXTURES="$(cd .. && pwd)/shared/fixtures"
pass=0; fail=0; failed=""
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    if "$t"; then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $(basename $t)"; fi
done
for s in tests/*.sh; do
    [ -f "$s" ] || continue
    if sh "$s"; then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $(basename $s)"; fi
done
[ -n "$failed" ] && echo "FAILED:$failed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
