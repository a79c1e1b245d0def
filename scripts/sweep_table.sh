#!/bin/sh
# sweep_table.sh [--write] — the bad-input table of docs/testing.md: runs every sweep in full
# (DELTAFIN_SWEEP_FULL=1: every cut and flip of the GGUF sweep) with DELTAFIN_SWEEP_OUT set, so
# each adds its row (input class, cases tried, crashes, hangs, unclear errors, data lost), then
# adds the libFuzzer rows from the latest run of each target in fuzz/runs.tsv (written by
# scripts/fuzz_run.sh: executions and minutes). Prints the Markdown table; --write also puts it
# into docs/testing.md between the "sweep-table" markers. Needs build/deltafin (make) and, for
# the fuzz rows, earlier scripts/fuzz_run.sh runs. Takes a few minutes.
set -u
BUILD=${DELTAFIN_BUILD:-build}
export DELTAFIN_BIN="$(pwd)/$BUILD/deltafin" DELTAFIN_BUILD="$BUILD" DELTAFIN_SWEEP_FULL=1
[ -n "${DELTAFIN_FIXTURES:-}" ] || export DELTAFIN_FIXTURES="$(cd .. && pwd)/shared/fixtures"
[ -x "$DELTAFIN_BIN" ] || { echo "sweep_table: build $DELTAFIN_BIN first (make)"; exit 1; }
OUT=$(mktemp -d /tmp/df_sweep.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
export DELTAFIN_SWEEP_OUT="$OUT"
: >"$OUT/sweep.tsv"
status=0
for t in test_gguf_sweep test_verify test_yaml_sweep test_http_sweep test_pull test_faults; do
    sh "tests/$t.sh" >"$OUT/$t.log" 2>&1 || { status=1; echo "sweep_table: tests/$t.sh FAILED (see below)"; tail -n 20 "$OUT/$t.log"; }
done
TABLE="$OUT/table.md"
{
    echo "| input class | cases tried | crashes | hangs | unclear errors | data lost |"
    echo "|---|---:|---:|---:|---:|---:|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$OUT/sweep.tsv"
    if [ -f fuzz/runs.tsv ]; then
        # the latest run of each target: "fuzz: T (libFuzzer+ASan+UBSan) | N executions in M min | crashes | timeouts | - | -"
        awk -F'\t' '$1 !~ /^#/ && NF >= 10 { last[$3] = $0 } END { for (t in last) print last[t] }' fuzz/runs.tsv | sort -t"$(printf '\t')" -k3 |
            awk -F'\t' '{ printf "| fuzz: %s (libFuzzer, ASan+UBSan; %s, %s) | %s executions in %s min | %s | %s | 0 | 0 |\n",
                          $3, $1, $2, $5, $4, $6, $7 + $8 }'
    fi
} >"$TABLE"
cat "$TABLE"
if [ "${1:-}" = --write ]; then
    /usr/bin/python3 - "$TABLE" docs/testing.md <<'PY'
import sys
table, doc = sys.argv[1], sys.argv[2]
t = open(table).read()
d = open(doc).read()
b, e = "<!-- sweep-table:begin -->", "<!-- sweep-table:end -->"
i, j = d.index(b) + len(b), d.index(e)
open(doc, "w").write(d[:i] + "\n" + t + d[j:])
PY
    echo "sweep_table: docs/testing.md updated"
fi
exit $status
