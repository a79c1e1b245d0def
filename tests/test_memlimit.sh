#!/bin/sh
# test_memlimit.sh — a streaming run stays inside --mem-limit: its peak RSS is at most the limit
# plus SLACK, and in a memory cgroup (v1, when writable) the peak charge of the cgroup (RSS +
# page cache + kernel) is at most limit + SLACK and the page cache left charged to it after the
# run is at most CACHE_MAX: expert reads bypass (O_DIRECT) or drop (posix_fadvise DONTNEED,
# buffered and mmap engines) the page cache.
#
# The model: 96 experts of 1.2 MiB (120 MiB, 1.4x the 84 MiB limit), so an engine that left
# its reads in the page cache would be charged well past limit + SLACK. SLACK (8 MiB) covers
# what the plan does not count: the kernel's own charges for the cgroup (page tables, socket
# and slab memory) and the model's dense bytes that the loader reads buffered; the plan's
# 64 MiB overhead term already covers code, libraries, thread stacks and allocator slack.
# Under ASan (DELTAFIN_BUILD=build-asan) RSS is inflated by shadow memory and the quarantine,
# so the RSS and cgroup peak bounds are doubled (said so); the page cache check is unchanged.
# Without a writable cgroup v1 only the peak RSS is checked (said so).
# Nothing here depends on timing.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
# page-cache checks need a disk-backed file system: tmpfs pages are never "cache" to drop
TMPBASE=/tmp
[ "$(stat -f -c %T /tmp 2>/dev/null)" = tmpfs ] && mkdir -p "${DELTAFIN_BUILD:-build}" && TMPBASE=$(cd "${DELTAFIN_BUILD:-build}" && pwd)
T=$(mktemp -d "$TMPBASE/df_test_memlimit.XXXXXX")
ONTMPFS=0; [ "$(stat -f -c %T "$T" 2>/dev/null)" = tmpfs ] && ONTMPFS=1
CG=""
cleanup() {
    if [ -n "$CG" ] && [ -d "$CG" ]; then
        echo 0 > "$CG/memory.force_empty" 2>/dev/null
        rmdir "$CG" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT
cp "$BIN" "$T/deltafin" || { echo "test_memlimit: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_memlimit: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }
skip() { echo "  skip: $1"; }
MiB=1048576
LIMIT_MIB=84
SLACK_MIB=8
CACHE_MAX_MIB=4
ASAN=0
case "${DELTAFIN_BUILD:-}" in *asan*) ASAN=1 ;; esac

# 4 layers x 24 experts, n_embd 512, expert width 768, q8_0: 1.22 MiB per expert
"$DEVBIN" gen-random --arch qwen3moe --type q8_0 --n-embd 512 --n-layer 4 --n-head 4 --n-head-kv 2 \
    --head-dim 64 --n-expert 24 --n-expert-used 6 --n-ff-exp 768 --vocab bytes --seed 11 "$T/m.gguf" \
    >/dev/null 2>&1 || { echo "test_memlimit: gen-random failed"; exit 1; }
# drop the file's pages (written by gen-random) so reads below really come from disk
drop() { dd if="$T/m.gguf" iflag=nocache count=0 status=none 2>/dev/null; }

# runs with the plan's context (DELTAFIN_PLAN_CTX = -c) so the KV term is what the run uses
export DELTAFIN_PLAN_CTX=256
BOUND_MIB=$((LIMIT_MIB + SLACK_MIB))
# under ASan: shadow memory and the quarantine inflate RSS; the bound is doubled (said so)
[ $ASAN = 1 ] && BOUND_MIB=$((2 * BOUND_MIB)) && echo "  note: ASan build: RSS bounds doubled to $BOUND_MIB MiB"

CGROOT=/sys/fs/cgroup/memory
if [ $ONTMPFS = 1 ]; then
    skip "$T is on tmpfs: peak RSS only, no page cache checks"
elif [ -w "$CGROOT" ] && mkdir "$CGROOT/df_test_memlimit.$$" 2>/dev/null; then
    CG="$CGROOT/df_test_memlimit.$$"
else
    skip "memory cgroup v1 not writable ($CGROOT): peak RSS only, no page cache checks"
fi
IN_CG() { if [ -n "$CG" ]; then sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG" "$@"; else "$@"; fi; }
mib() { awk -v p="$1" -v m=$MiB 'BEGIN { printf "%.1f", p / m }'; }

for io in pread direct uring mmap; do
    drop
    if [ -n "$CG" ]; then
        # no limit on the cgroup: it measures what the run charges; the run enforces --mem-limit
        echo 0 > "$CG/memory.force_empty" 2>/dev/null
        echo 0 > "$CG/memory.max_usage_in_bytes" 2>/dev/null
    fi
    IN_CG "$BIN" run -m "$T/m.gguf" -p "The quick brown fox jumps" -n 12 --temp 0 -t 2 -c 256 -b 64 \
        --mem-limit ${LIMIT_MIB}M --io $io --json -v >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -ne 0 ]; then
        if [ $io = uring ] && grep -q "not available" "$T/err"; then skip "uring: not available"; continue; fi
        bad "$io: rc=$rc $(tail -2 "$T/err")"; continue
    fi
    grep -q "memory plan" "$T/err" && grep -q '"stream":{' "$T/out" || { bad "$io: did not stream: $(tail -2 "$T/err")"; continue; }
    # the run streamed more expert bytes than half the limit (the checks are not vacuous)
    READ=$(sed -n 's/.*"bytes_read":\([0-9.e+]*\),"read_gbps".*/\1/p' "$T/out")
    awk -v r="${READ:-0}" -v l=$(( LIMIT_MIB * MiB / 2 )) 'BEGIN { exit !(r > l) }' ||
        bad "$io: read only ${READ:-0} bytes of experts: the model is too small for this test"
    PEAK=$(sed -n 's/.*"peak_rss":\([0-9.e+]*\).*/\1/p' "$T/out")
    awk -v p="$PEAK" -v l=$((BOUND_MIB * MiB)) 'BEGIN { exit !(p <= l) }' &&
        ok "$io: peak RSS $(mib "$PEAK") MiB <= $BOUND_MIB MiB (--mem-limit ${LIMIT_MIB}M + ${SLACK_MIB} MiB)" ||
        bad "$io: peak RSS $(mib "$PEAK") MiB > $BOUND_MIB MiB"
    [ -n "$CG" ] || continue
    MAX=$(cat "$CG/memory.max_usage_in_bytes")
    CACHE=$(awk '$1 == "cache" { print $2 }' "$CG/memory.stat")
    [ "$MAX" -le $((BOUND_MIB * MiB)) ] &&
        ok "$io: cgroup peak (RSS + page cache) $(mib "$MAX") MiB <= $BOUND_MIB MiB" ||
        bad "$io: cgroup peak (RSS + page cache) $(mib "$MAX") MiB > $BOUND_MIB MiB"
    [ "$CACHE" -le $((CACHE_MAX_MIB * MiB)) ] &&
        ok "$io: page cache left charged after the run: $(mib "$CACHE") MiB <= $CACHE_MAX_MIB MiB" ||
        bad "$io: page cache left charged after the run: $(mib "$CACHE") MiB > $CACHE_MAX_MIB MiB"
done

# the loader: under --mem-limit the dense weights it copied into anonymous memory leave no page
# cache behind (without a limit they stay cached for the next launch)
if command -v fincore >/dev/null && [ $ONTMPFS = 0 ]; then
    "$DEVBIN" gen-random --arch llama --n-embd 512 --n-layer 4 --vocab bytes "$T/d.gguf" >/dev/null 2>&1 && sync
    cat "$T/d.gguf" >/dev/null
    res() { fincore -b -n -o RES "$T/d.gguf" | tr -d ' '; }
    "$BIN" run -m "$T/d.gguf" -p hi -n 2 >/dev/null 2>&1; R0=$(res)
    "$BIN" run -m "$T/d.gguf" -p hi -n 2 --mem-limit 1G >/dev/null 2>&1; R1=$(res)
    SZ=$(wc -c <"$T/d.gguf")
    [ "$R0" -ge $((SZ / 2)) ] && [ "$R1" -le $((MiB / 2)) ] &&
        ok "loader: page cache of the model after a run: $(mib "$R0") MiB without a limit, $(mib "$R1") MiB with --mem-limit" ||
        bad "loader page cache: $R0 B without a limit, $R1 B with --mem-limit (file $SZ B)"
else
    echo "  skip: no fincore, or tmpfs (loader page-cache check)"
fi

[ $fail = 0 ] && echo "test_memlimit: all passed" || echo "test_memlimit: FAILED"
exit $fail
