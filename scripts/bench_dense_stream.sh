#!/bin/sh
# bench_dense_stream.sh — streamed dense layers (dense_stream.c): a random llama model whose dense
# weights are larger than the memory limit runs in a memory cgroup (v1) of that limit (page cache
# included) with --mem-limit the same; layers that do not fit are read every token through two
# layer buffers while the previous layer computes. Reports, per engine, the dense read rate
# (bytes / wall time with a read in flight), the bytes read per token, the time per token against
# the I/O floor (bytes per token / disk bandwidth) and the time the forward pass waited for
# reads; the disk bandwidth is measured in the same run, before and after (4 parallel dd
# streams of 16 MiB O_DIRECT reads over the whole model file).
#
# usage: scripts/bench_dense_stream.sh [--record] [--quick]
#   env: DIR (default /tmp/dfbench), LIMIT (default 512M), N_GEN (8), THREADS (all cores),
#        ENGINES (default "direct pread uring")
#   --quick: a 6-layer n_embd 512 model and a 96M limit, to test the script itself.
set -u
RECORD=0; QUICK=0
for a in "$@"; do
    case $a in --record) RECORD=1 ;; --quick) QUICK=1 ;; -h|--help) sed -n 2,15p "$0"; exit 0 ;; esac
done
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
DIR=${DIR:-/tmp/dfbench}
LIMIT=${LIMIT:-512M}
N_GEN=${N_GEN:-8}
THREADS=${THREADS:-$(nproc)}
ENGINES=${ENGINES:-direct pread uring}
EMBD=2048; FF=5632; LAYERS=24; HEADS=16; KV=4
if [ $QUICK = 1 ]; then EMBD=512; FF=1408; LAYERS=6; HEADS=8; KV=2; LIMIT=80M; fi
CTX=256
export DELTAFIN_PLAN_CTX=$CTX
mkdir -p "$DIR"
cp "$BIN" "$DIR/deltafin.dbench" || exit 1
BIN="$DIR/deltafin.dbench"
cp "$DEVBIN" "$DIR/deltafin-dev.dbench" || exit 1
DEVBIN="$DIR/deltafin-dev.dbench"
MODEL="$DIR/llama-${EMBD}-${FF}-${LAYERS}-q8.gguf"
[ -f "$MODEL" ] || nice "$DEVBIN" gen-random --arch llama --type q8_0 --n-embd $EMBD --n-layer $LAYERS --n-head $HEADS \
    --n-head-kv $KV --n-ff $FF --vocab bytes --seed 11 "$MODEL" >/dev/null || exit 1

CG=/sys/fs/cgroup/memory/dfdense.$$
if mkdir "$CG" 2>/dev/null && echo "$LIMIT" > "$CG/memory.limit_in_bytes" 2>/dev/null; then
    echo 0 > "$CG/memory.swappiness" 2>/dev/null
    IN_CG() { sh -c 'echo $$ > "$0/cgroup.procs" && shift && exec "$@"' "$CG" x "$@"; }
    CGNOTE="cgroup v1 $LIMIT"
else
    rmdir "$CG" 2>/dev/null
    IN_CG() { "$@"; }
    CGNOTE="no cgroup (--mem-limit only)"
fi
trap 'rmdir "$CG" 2>/dev/null' EXIT
. "$(dirname "$0")/bench_lib.sh"
DROP_ALL=0   # drop only the model's pages, never the whole page cache
drop_cache() { df_drop_cache "$MODEL"; }

"$BIN" info "$MODEL" --mem-limit $LIMIT | sed -n '/^at --mem-limit/,$p'
SZ=$(stat -c %s "$MODEL")
# disk bandwidth: the whole model file once, NS parallel dd streams of 16 MiB O_DIRECT reads
# (few streams: spawning 16 dd on a loaded 2-core machine cost more than their reads)
disk_bw() { _c=$(( SZ / 16777216 / 4 )); [ $_c -lt 1 ] && _c=1; df_disk_bw "$MODEL" 4 "$_c"; }
DISK1=$(disk_bw)
echo "disk: $DISK1 GB/s (4 dd streams x 16 MiB O_DIRECT over the model file), $CGNOTE, $THREADS threads, load avg $(cut -d' ' -f1 /proc/loadavg)"
DISK=$DISK1

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE=$(date +%Y-%m-%d)
printf '%-8s %9s %10s %11s %12s %9s %9s %10s\n' engine "gen tok/s" "read GB/s" "read/token" "s/token" "floor s" "wait s" "peak RSS"
ROWS=""
for io in $ENGINES; do
    drop_cache
    OUT=$(IN_CG "$BIN" run -m "$MODEL" -p "Hello" -n $N_GEN --temp 0 -t $THREADS -c $CTX -b $CTX --mem-limit $LIMIT \
          --io $io -v 2>&1 >/dev/null)
    if ! echo "$OUT" | grep -q "generation:"; then echo "$io: failed: $(echo "$OUT" | tail -n 2)"; continue; fi
    GEN=$(echo "$OUT" | sed -n 's/.*generation: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p')
    PEAK=$(echo "$OUT" | sed -n 's/.*peak memory: \([0-9.]* [KMG]iB\).*/\1/p')
    PLAN=$(echo "$OUT" | grep -o "dense: [0-9]* of [0-9]* layers resident")
    PER=$(echo "$OUT" | sed -n 's/.*: reads \([0-9.]* [KMG]iB\) per token.*/\1/p')
    ST=$(echo "$OUT" | grep "dense stream:")
    RD=$(echo "$ST" | sed -n 's/.* at \([0-9.]*\) GB\/s.*/\1/p')
    WAIT=$(echo "$ST" | sed -n 's/.*| wait \([0-9.]*\) s.*/\1/p')
    PERB=$(echo "$PER" | awk '{ m = $2 == "GiB" ? 1073741824 : $2 == "MiB" ? 1048576 : 1024; printf "%.0f", $1 * m }')
    SPT=$(echo "$GEN" | awk '{ if ($1 > 0) printf "%.3f", 1 / $1 }')
    FLOOR=$(echo "$PERB $DISK" | awk '{ if ($2 > 0) printf "%.3f", $1 / $2 / 1e9 }')
    printf '%-8s %9s %10s %11s %12s %9s %9s %10s\n' "$io" "$GEN" "$RD" "$PER" "$SPT" "$FLOOR" "$WAIT" "$PEAK"
    R=$(echo "$RD $DISK" | awk '{ if ($2 > 0) printf "%.2f", $1 / $2 }')
    ROWS="$ROWS$DATE	$COMMIT	dense-stream	run --io $io, llama ${LAYERS}L n_embd $EMBD Q8_0 ($(($SZ / 1048576)) MiB dense), $PLAN, $CGNOTE, $N_GEN tokens	dense read GB/s	$RD	$DISK	$R	yes	reads $PER/token; gen $GEN tok/s = $SPT s/token vs I/O floor $FLOOR s; forward waited $WAIT s in all; peak RSS $PEAK; disk = 4 dd streams of 16 MiB O_DIRECT over the file just before the runs ($DISK1 GB/s; after the runs @DISK2@ GB/s); $THREADS threads, load avg $(cut -d' ' -f1 /proc/loadavg)
"
done
DISK2=$(disk_bw)
echo "disk after the runs: $DISK2 GB/s"
if [ $RECORD = 1 ] && [ -n "$ROWS" ]; then printf "%s" "$ROWS" | sed "s/@DISK2@/$DISK2/g" >> docs/experiments.tsv; echo "recorded in docs/experiments.tsv"; fi
