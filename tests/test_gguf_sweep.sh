#!/bin/sh
# test_gguf_sweep.sh — malformed GGUF files (tests/lib/gguf_sweep.py): a model cut at every
# structural offset, one bit flipped at every structural offset (then run, if it still parses),
# crafted files (huge counts and dims, offsets past the end, duplicates, unknown types, bad
# alignment, bad names, wrong versions) and NaN/Inf weights; each case asserts the error text.
# `make test` runs every 7th cut and every 5th flip (DELTAFIN_SWEEP_FULL=1: all of them, as
# scripts/sweep_table.sh does for docs/testing.md).
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
[ -x /usr/bin/python3 ] || { echo "test_gguf_sweep: SKIP (no python3)"; exit 0; }
T=$(mktemp -d /tmp/df_test_gguf_sweep.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_gguf_sweep: no binary $BIN"; exit 1; }
Q=--quick; [ "${DELTAFIN_SWEEP_FULL:-0}" = 1 ] && Q=
/usr/bin/python3 "$(dirname "$0")/lib/gguf_sweep.py" "$T/deltafin" "$T" $Q >"$T/log" 2>&1; rc=$?
grep -v "^ok " "$T/log" | tail -n 30
[ $rc = 0 ] && echo "test_gguf_sweep: ok" || echo "test_gguf_sweep: FAILED"
exit $rc
