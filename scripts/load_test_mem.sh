#!/bin/sh
# load_test_mem.sh — memory under load: `serve -np 4 --mem-limit LIMIT` inside a cgroup v1
# memory cgroup of the same limit (page cache charged), 32 concurrent long requests for MINUTES
# (scripts/load_mem.mjs), the server's RSS and the cgroup's charge sampled every second. Passes
# when the peak RSS is at most LIMIT + 8 MiB, the RSS of the last minute is not above that of
# the first minute by more than 4 MiB (no leak), the cgroup saw no OOM kill and every answer
# was right. Appends the peak and the RSS slope to docs/experiments.tsv unless --no-record.
# The model streams its experts under the limit (qwen3moe, 4 x 24 experts of 1.2 MiB = 120 MiB,
# as tests/test_memlimit.sh) and each slot holds a 2048-token context.
# Usage: scripts/load_test_mem.sh [MINUTES=10] [LIMIT_MIB=128] [--no-record]
set -u
MIN=${1:-10}
LIMIT_MIB=${2:-128}
RECORD=1; for a in "$@"; do [ "$a" = --no-record ] && RECORD=0; done
BIN=${DELTAFIN_BIN:-build/deltafin}
command -v node >/dev/null || { echo "load_test_mem: node is required"; exit 2; }
CGROOT=/sys/fs/cgroup/memory
[ -w "$CGROOT" ] || { echo "load_test_mem: needs a writable cgroup v1 memory hierarchy at $CGROOT"; exit 2; }
T=$(mktemp -d /tmp/df_load_mem.XXXXXX)
CG="$CGROOT/df_load_mem.$$"
SPID=""
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
    [ -d "$CG" ] && { echo 0 >"$CG/memory.force_empty" 2>/dev/null; rmdir "$CG" 2>/dev/null; }
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
MiB=1048576
"${DELTAFIN_DEV_BIN:-build/deltafin-dev}" gen-random --arch qwen3moe --type q8_0 --n-embd 512 --n-layer 4 --n-head 4 --n-head-kv 2 --head-dim 64 \
    --n-expert 24 --n-expert-used 6 --n-ff-exp 768 --vocab bytes --seed 11 "$T/m.gguf" >/dev/null 2>&1 ||
    { echo "load_test_mem: gen-random failed"; exit 1; }
mkdir "$CG" || exit 1
echo $((LIMIT_MIB * MiB)) >"$CG/memory.limit_in_bytes"
KEY=load-mem
sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG" "$BIN" serve -m "$T/m.gguf" --host 127.0.0.1 --port 0 \
    --api-key "$KEY" -c 2048 -np 4 --queue 64 --mem-limit ${LIMIT_MIB}M -t 2 -v >"$T/out" 2>"$T/err" &
SPID=$!
for i in $(seq 300); do PORT=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out"); [ -n "$PORT" ] && grep -q ready "$T/out" && break; sleep 0.1; done
[ -n "$PORT" ] && grep -q ready "$T/out" || { echo "load_test_mem: server did not start"; cat "$T/err"; exit 1; }
grep -A12 "memory plan" "$T/err" | head -n 14
timeout $((MIN * 60 + 900)) node scripts/load_mem.mjs "http://127.0.0.1:$PORT" "$KEY" "$SPID" $((MIN * 60)) 32 600 "$CG" \
    >"$T/res" 2>"$T/cerr"; rc=$?
cat "$T/cerr"; cat "$T/res"
OOM=$(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control" 2>/dev/null)
FAILCNT=$(cat "$CG/memory.failcnt")
CGMAX=$(cat "$CG/memory.max_usage_in_bytes")
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
kill -TERM "$SPID"; wait "$SPID"; src=$?; SPID=""
res=$(cat "$T/res")
get() { echo "$res" | sed -n "s/.*\"$1\":\([0-9.-]*\).*/\1/p"; }
PEAK=$(get peak_rss); FIRST=$(get rss_first_min); LAST=$(get rss_last_min); SLOPE=$(get rss_slope_per_min)
mib() { awk -v p="$1" -v m=$MiB 'BEGIN { printf "%.1f", p / m }'; }
echo "load_test_mem: peak RSS $(mib "$PEAK") MiB (limit $LIMIT_MIB MiB), cgroup peak $(mib "$CGMAX") MiB, RSS first minute" \
     "$(mib "$FIRST") MiB, last minute $(mib "$LAST") MiB, slope $(awk -v s="$SLOPE" 'BEGIN { printf "%.1f", s / 1024 }') KiB/min," \
     "oom_kill ${OOM:-?}, failcnt $FAILCNT, server exit $src"
okk=1
[ "$rc" = 0 ] || { echo "load_test_mem: FAIL: wrong answers or the server went away"; okk=0; }
[ "$src" = 0 ] || { echo "load_test_mem: FAIL: server exit status $src"; okk=0; }
[ "${OOM:-0}" = 0 ] || { echo "load_test_mem: FAIL: $OOM OOM kills"; okk=0; }
[ -n "$PEAK" ] && [ "$PEAK" -le $(((LIMIT_MIB + 8) * MiB)) ] || { echo "load_test_mem: FAIL: peak RSS above limit + 8 MiB"; okk=0; }
[ -n "$LAST" ] && [ "$LAST" -le $((FIRST + 4 * MiB)) ] || { echo "load_test_mem: FAIL: RSS grew from the first to the last minute"; okk=0; }
if [ $RECORD = 1 ] && [ -n "$PEAK" ]; then
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    what="load test in a ${LIMIT_MIB} MiB memory cgroup: serve -np 4 -c 2048 --mem-limit ${LIMIT_MIB}M, 32 concurrent long requests (600 tokens), ${MIN} min"
    printf '%s\t%s\tserver\t%s\tpeak RSS MiB\t%s\t%s\t%s\t%s\t%s requests, %s tokens (%s tok/s), %s hung up mid-stream by the client on purpose, %s refused, %s wrong; cgroup peak %s MiB, failcnt %s, oom_kill %s\n' \
        "$(date +%F)" "$commit" "$what" "$(mib "$PEAK")" "$LIMIT_MIB" "$(awk -v p="$PEAK" -v l=$((LIMIT_MIB * MiB)) 'BEGIN { printf "%.3f", p / l }')" \
        "$([ $okk = 1 ] && echo yes || echo no)" "$(get requests_done)" "$(get tokens)" "$(get tok_per_s)" "$(get dropped)" "$(get refused)" \
        "$(get wrong)" "$(mib "$CGMAX")" "$FAILCNT" "${OOM:-?}" >>docs/experiments.tsv
    printf '%s\t%s\tserver\t%s\tRSS slope KiB/min\t%s\t\t\t%s\tleast-squares slope of VmRSS sampled every second from the end of the first minute to the end of the load; mean RSS first minute %s MiB, last minute %s MiB; %s MiB when the last request ended (%s s of drain); load average %s\n' \
        "$(date +%F)" "$commit" "$what" "$(awk -v s="$SLOPE" 'BEGIN { printf "%.1f", s / 1024 }')" \
        "$([ $okk = 1 ] && echo yes || echo no)" "$(mib "$FIRST")" "$(mib "$LAST")" "$(mib "$(get rss_end)")" "$(get drain_seconds)" \
        "$LOADAVG" >>docs/experiments.tsv
    echo "load_test_mem: 2 rows appended to docs/experiments.tsv"
fi
[ $okk = 1 ] && echo "load_test_mem: ok" || echo "load_test_mem: FAILED"
[ $okk = 1 ]
