#!/bin/sh
# test_gen_random.sh — gen-random is byte-identical for every recorded model and the extra
# regression list (scripts/check_gen_random.sh; ~15 s; realwidth: tests/test_realwidth.sh).
cd "$(dirname "$0")/.." || exit 1
out=$(sh scripts/check_gen_random.sh 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^ok ' | sed 's/^/test_gen_random: /'
exit $rc
