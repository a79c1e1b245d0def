#!/bin/sh
# test_bench.sh — `deltafin bench` as llama-bench (docs/operations.md "bench"), on the demo model:
#   1. comma lists and ranges: -p 8,16 -n 4 -t 1,2 -pg 8,4 runs pp8 pp16 tg4 pp8+tg4 for each
#      thread count, in llama-bench's order; -p 4-16*2 is 4 8 16
#   2. -o md: llama-bench's columns, every row of the table as wide as the header (the '|' at the
#      same places), n_batch shown when -b is not the default, the streaming columns when experts
#      stream
#   3. -o csv: a header of llama-bench's field names and one row per test, every row as many
#      columns; -o json parses (python3 json) with samples_ns / samples_ts of -r entries; -o jsonl
#      one object per line
#   4. --json: deltafin's earlier object (results[], stats) unchanged for scripts
#   5. usage errors: -o xml, -pg 8, -p 8- (exit 2)
# Speeds are never compared (timing is not tested); only shapes and counts.
cd "$(dirname "$0")/.." || exit 1
BIN=${DELTAFIN_BIN:-build/deltafin}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
M=models/demo-moe-q8_0.gguf
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" && BIN=$T/deltafin   # other builds may relink $BIN while this runs
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "bench: PASS $*"; }
bad() { fail=$((fail + 1)); echo "bench: FAIL $*"; }
B() { "$BIN" bench -m "$M" -r 2 "$@" 2>"$T/err"; }

# ---- 1, 2. lists, -pg, the md table ----
if B -p 8,16 -n 4 -t 1,2 -pg 8,4 > "$T/md"; then
    tests=$(awk -F'|' '/^\| llama/ { gsub(/ /, "", $6); gsub(/ /, "", $7); printf "%s:%s ", $6, $7 }' "$T/md")
    [ "$tests" = "1:pp8 1:pp16 1:tg4 1:pp8+tg4 2:pp8 2:pp16 2:tg4 2:pp8+tg4 " ] && ok "lists and -pg: $tests" ||
        bad "lists and -pg: got '$tests'"
    head -n 3 "$T/md" | sed -n 2p | grep -q '^| model  *|  *size |  *params | backend  *| threads |  *test |  *t/s |$' &&
        ok "md: llama-bench's columns" || bad "md header: $(sed -n 2p "$T/md")"
    # the table is aligned: the same display width and '|' positions on every row ('±' is one character)
    "$PY" - "$T/md" <<'PY' && ok "md: every row aligned with the header" || bad "md: rows not aligned"
import sys
rows = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8") if l.startswith("|")]
bars = {tuple(i for i, c in enumerate(r) if c == "|") for r in rows}
sys.exit(0 if len(rows) == 10 and len(bars) == 1 else 1)
PY
else
    bad "bench lists: $(tail -n 1 "$T/err")"
fi
B -p 4-16*2 -n 0 -b 8 > "$T/md2" &&
    [ "$(awk -F'|' '/^\| llama/ { gsub(/ /, "", $8); printf "%s ", $8 }' "$T/md2")" = "pp4 pp8 pp16 " ] &&
    grep -q '| n_batch |' "$T/md2" && ok "range 4-16*2 and the n_batch column" || bad "range: $(cat "$T/md2" "$T/err")"
B -p 8 -n 2 --io pread --cache-size 1M > "$T/md3" && grep -q 'read/token | hit rate |$' "$T/md3" &&
    "$PY" -c '
import sys
rows = [l for l in open(sys.argv[1], encoding="utf-8") if l.startswith("|")]
sys.exit(0 if len({tuple(i for i, c in enumerate(r) if c == "|") for r in rows}) == 1 else 1)' "$T/md3" &&
    ok "streamed experts: read/token and hit rate columns, aligned" || bad "streaming columns: $(cat "$T/md3" "$T/err")"

# ---- 3. csv, json, jsonl ----
B -p 8 -n 2 -pg 4,2 -o csv > "$T/csv" && "$PY" - "$T/csv" <<'PY' && ok "csv: llama-bench's fields, 3 rows" || bad "csv: $(head -c 600 "$T/csv")"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
for f in ("build_commit", "model_filename", "model_type", "model_size", "model_n_params", "n_batch", "n_threads",
          "n_prompt", "n_gen", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "bytes_read_per_token",
          "expert_hit_rate"):
    assert f in head, f
assert len(rows) == 4 and all(len(r) == len(head) for r in rows)
d = [dict(zip(head, r)) for r in rows[1:]]
assert [(x["n_prompt"], x["n_gen"]) for x in d] == [("8", "0"), ("0", "2"), ("4", "2")]
assert all(float(x["avg_ts"]) > 0 and int(x["avg_ns"]) > 0 for x in d)
PY
B -p 8 -n 2 -o json > "$T/json" && "$PY" -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert isinstance(a, list) and len(a) == 2
for o in a:
    assert len(o["samples_ns"]) == 2 and len(o["samples_ts"]) == 2 and o["avg_ts"] > 0
    assert o["model_type"].startswith("llama") and o["backends"] == "CPU" and o["model_n_params"] == 3081920
assert a[0]["n_prompt"] == 8 and a[1]["n_gen"] == 2
' "$T/json" && ok "json parses: 2 tests with samples" || bad "json: $(head -c 400 "$T/json")"
B -p 8 -n 2 -o jsonl > "$T/jsonl" && "$PY" -c '
import json, sys
l = [json.loads(x) for x in open(sys.argv[1])]
assert len(l) == 2 and all(len(o["samples_ts"]) == 2 for o in l)
' "$T/jsonl" && ok "jsonl: one object per line" || bad "jsonl: $(head -c 400 "$T/jsonl")"

# ---- 4. --json unchanged ----
B -p 16 -n 4 -t 2 --json > "$T/legacy" && "$PY" -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert [r["test"] for r in o["results"]] == ["pp16", "tg4"]
assert all(r["avg_ts"] > 0 and len(r["samples_ts"]) == 2 and r["n_tokens"] for r in o["results"])
assert o["threads"] == 2 and o["isa"] and o["commit"] and "stats" in o and "expert_hits" in o["stats"]
' "$T/legacy" && ok "--json: deltafin's earlier object" || bad "--json: $(head -c 400 "$T/legacy")"

# ---- 5. usage errors ----
for a in "-o xml" "-pg 8" "-p 8-" "--json -o csv"; do
    # shellcheck disable=SC2086
    "$BIN" bench -m "$M" $a >/dev/null 2>"$T/err" </dev/null; rc=$?
    [ $rc -eq 2 ] && ok "bench $a: usage error" || bad "bench $a: exit $rc: $(tail -n 1 "$T/err")"
done

echo "test_bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
