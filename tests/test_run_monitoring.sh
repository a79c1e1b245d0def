#!/bin/sh
# test_run_monitoring.sh — `deltafin run` monitoring: --stats-file writes valid JSON lines
# (after the prompt, every --stats-every tokens, a final one) with tok/s, RSS, expert cache
# bytes and hit rate, SSD MB/s and the compute/I/O split; --log-file takes the log off stderr;
# --log-level filters; the prompt and output are never logged (even at debug) without
# --log-prompts, and are with it.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
PY=/usr/bin/python3
T=$(mktemp -d /tmp/df_test_mon.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_run_monitoring: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_run_monitoring: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

"$DEVBIN" gen-random --arch qwen3moe --n-layer 2 --vocab bytes --seed 9 "$T/m.gguf" >/dev/null 2>&1 ||
    { echo "test_run_monitoring: gen-random failed"; exit 1; }
SECRET="zebra-quartz-7781"
DELTAFIN_STREAM=1 DELTAFIN_EXPERT_CACHE=200K "$BIN" run -m "$T/m.gguf" -p "say $SECRET" -n 20 --temp 0 -t 1 \
    --stats-file "$T/s.jsonl" --stats-every 8 --log-file "$T/log" --log-level debug >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] || bad "run failed: $(cat "$T/err")"
if [ -x $PY ]; then
    $PY - "$T/s.jsonl" "$T/out" <<'PY' && ok "stats lines: valid JSON, all fields, expected cadence, streaming counters" || bad "stats file: $(cat "$T/s.jsonl")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
keys = ["phase", "t", "n_prompt", "n_gen", "tok_s", "gen_tok_s_avg", "rss_bytes", "peak_rss_bytes", "streaming",
        "expert_cache_bytes", "expert_hits", "expert_misses", "expert_hit_rate", "bytes_read", "ssd_mb_s",
        "compute_s", "io_wait_s", "io_frac"]
for o in lines:
    missing = [k for k in keys if k not in o]
    assert not missing, missing
    assert 0 <= o["expert_hit_rate"] <= 1 and 0 <= o["io_frac"] <= 1 and o["rss_bytes"] > 0
assert lines[0]["phase"] == "prompt" and lines[-1]["phase"] == "end" and lines[-1].get("final") is True
gen = [o for o in lines if o["phase"] == "gen"]
n = lines[-1]["n_gen"]
assert [o["n_gen"] for o in gen] == list(range(8, n + 1, 8)), gen
assert all(o["tok_s"] > 0 for o in gen)
assert lines[-1]["streaming"] and lines[-1]["expert_cache_bytes"] > 0 and lines[-1]["bytes_read"] > 0
assert lines[-1]["expert_misses"] > 0 and lines[0]["ssd_mb_s"] > 0
ts = [o["t"] for o in lines]
assert ts == sorted(ts)
PY
else
    [ "$(wc -l <"$T/s.jsonl")" -ge 2 ] && ok "stats lines written" || bad "stats file"
fi
grep -q "memory plan" "$T/log" && ok "log file has the info/debug log" || bad "log file: $(head -3 "$T/log")"
grep -q "deltafin: " "$T/err" && bad "log lines still on stderr: $(cat "$T/err")" || ok "stderr free of log lines"
grep -q "$SECRET" "$T/log" "$T/s.jsonl" && bad "prompt leaked into log/stats" || ok "prompt not logged without --log-prompts (debug level)"
grep -q "output (" "$T/log" && bad "output logged without --log-prompts" || ok "output not logged"

# --log-prompts: both go to the log
"$BIN" run -m "$T/m.gguf" -p "say $SECRET" -n 5 --temp 0 -t 1 --log-file "$T/log2" --log-prompts >/dev/null 2>&1
grep -q "prompt (.*$SECRET" "$T/log2" && grep -q "output (5 tokens)\|output ([0-4] tokens)" "$T/log2" &&
    ok "--log-prompts logs prompt and output" || bad "--log-prompts: $(cat "$T/log2")"
# --log-level error drops info lines
"$BIN" run -m "$T/m.gguf" -p hi -n 2 -t 1 -v --log-level error --log-file "$T/log3" >/dev/null 2>&1
[ ! -s "$T/log3" ] && ok "--log-level error: nothing below error" || bad "log-level error: $(cat "$T/log3")"
"$BIN" run -m "$T/m.gguf" -p hi -n 2 --log-level loud >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && ok "bad --log-level rejected" || bad "bad log level: rc=$rc"
"$BIN" run -m "$T/m.gguf" -p hi -n 2 --stats-file "$T/nodir/s.jsonl" >/dev/null 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "stats-file" "$T/err" && ok "unwritable stats file reported" || bad "stats file error: rc=$rc"

# -v: per-layer hits / misses / I/O wait; the layers' counts add up to the totals
DELTAFIN_STREAM=1 DELTAFIN_EXPERT_CACHE=200K "$BIN" run -m "$T/m.gguf" -p hi -n 12 --temp 0 -t 1 -v >/dev/null 2>"$T/verr"
tot=$(sed -n 's/.*| hit [0-9.]*% (\([0-9]*\)\/\([0-9]*\)).*/\1 \2/p' "$T/verr")
sum=$(sed -n '/^per layer:/,$p' "$T/verr" | awk 'NR > 1 && NF == 5 { h += $2; a += $2 + $3; n++ } END { print h, a, n }')
[ -n "$tot" ] && [ "$tot ${sum##* }" = "$sum" ] && [ "${sum##* }" -eq 2 ] &&
    ok "-v per-layer table: 2 layers, hits/accesses $sum" || bad "-v per layer: totals '$tot' vs layers '$sum': $(tail -n 5 "$T/verr")"

[ $fail = 0 ] && echo "test_run_monitoring: ok" || echo "test_run_monitoring: FAILED"
exit $fail
