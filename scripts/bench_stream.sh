#!/bin/sh
# bench_stream.sh — issue 9's expert-streaming benchmark.
# A random qwen3moe model with Kimi-K2 expert geometry (hidden 7168, expert width 2048, top-8 of
# 32 experts, Q4_K experts, Q8_0 dense) whose routed-expert bytes are >= 4x the memory limit
# runs in a memory cgroup (v1) of that limit: deltafin with each I/O engine and llama.cpp
# (--no-repack, mmap) in the same cgroup, page cache of the model dropped before every run,
# disk bandwidth measured in the same run with 16 MiB O_DIRECT reads.
# Prints a table and appends rows to docs/experiments.tsv (with --record).
#
# usage: scripts/bench_stream.sh [--record] [--quick]
#   env: DIR (work dir, default /tmp/dfbench), LIMIT (default 1G), LAYERS (default 6: at Q4_K
#        one layer's 32 experts are 756 MiB, so 5 layers are 3.69 GiB < 4 GiB), N_GEN (8),
#        THREADS (default: all cores), LLAMA_BIN (/work/llama.cpp/build/bin),
#        EXPERT_TYPE (q4_k default; q8_0 skips quantizing: 5 layers are then 7 GiB of experts),
#        PACK=1 (run the `deltafin pack` copy: one checksummed read per expert)
#   --quick: tiny geometry (n_embd 1024, width 512) and a 160M limit, to test the script itself.
set -u
RECORD=0; QUICK=0
for a in "$@"; do
    case $a in --record) RECORD=1 ;; --quick) QUICK=1 ;; -h|--help) sed -n 2,16p "$0"; exit 0 ;; esac
done
BIN=${DELTAFIN_BIN:-build/deltafin}
DIR=${DIR:-/tmp/dfbench}
LIMIT=${LIMIT:-1G}
LAYERS=${LAYERS:-6}
N_GEN=${N_GEN:-8}
THREADS=${THREADS:-$(nproc)}
LLAMA_BIN=${LLAMA_BIN:-/work/llama.cpp/build/bin}
EMBD=7168; FF=2048; HEADS=8; KV=2; HD=128
if [ $QUICK = 1 ]; then EMBD=1024; FF=512; LIMIT=160M; LAYERS=4; fi
CTX=256   # the plan (DELTAFIN_PLAN_CTX) and the run use the same context and batch
export DELTAFIN_PLAN_CTX=$CTX
mkdir -p "$DIR"
# private copy of the binary: a concurrent rebuild must not pull it away mid-benchmark
cp "$BIN" "$DIR/deltafin.bench" || exit 1
BIN="$DIR/deltafin.bench"
EXPERT_TYPE=${EXPERT_TYPE:-q4_k}   # q8_0: skip the quantize step (44.6 MiB experts)
SRC="$DIR/k2geo-${EMBD}-${FF}-${LAYERS}-q8.gguf"
MODEL="$DIR/k2geo-${EMBD}-${FF}-${LAYERS}-q4k.gguf"
[ "$EXPERT_TYPE" = q8_0 ] && MODEL=$SRC
PROMPT="Hello"   # byte vocabulary: 5 tokens

need_gb=$(( (EMBD * FF * 3 / 256 * 144 * 32 * LAYERS * 3) / 1000000000 + 2 ))
[ -f "$MODEL" ] && need_gb=1
avail_gb=$(df -P --block-size=1G "$DIR" | awk 'NR==2 {print $4}')
[ "$avail_gb" -gt "$need_gb" ] || { echo "bench_stream: need ~${need_gb} GB free in $DIR, have ${avail_gb}"; exit 1; }

if [ ! -f "$MODEL" ]; then
    echo "== generating $MODEL"
    [ -f "$SRC" ] || nice "$BIN" gen-random --arch qwen3moe --type q8_0 --n-embd $EMBD --n-layer $LAYERS \
        --n-head $HEADS --n-head-kv $KV --head-dim $HD --n-expert 32 --n-expert-used 8 --n-ff-exp $FF \
        --vocab bytes --seed 9 "$SRC" || exit 1
    if [ "$MODEL" != "$SRC" ]; then
        nice "$BIN" quantize "$SRC" "$MODEL" Q4_K --type-dense Q8_0 || exit 1
        rm -f "$SRC"
    fi
fi

# PACK=1: run the expert-major packed copy (one read per expert; llama.cpp cannot load it)
PACK=${PACK:-0}
LABEL=gguf
if [ "$PACK" = 1 ]; then
    if [ ! -f "$MODEL.packed" ]; then
        echo "== packing $MODEL"
        nice "$BIN" pack "$MODEL" "$MODEL.packed" || exit 1
    fi
    MODEL="$MODEL.packed"
    LABEL=packed
fi

# ---- memory cgroup (v1) -----------------------------------------------------------------------
CG=/sys/fs/cgroup/memory/dfbench.$$
if mkdir "$CG" 2>/dev/null && echo "$LIMIT" > "$CG/memory.limit_in_bytes" 2>/dev/null; then
    echo 0 > "$CG/memory.swappiness" 2>/dev/null
    IN_CG() { sh -c 'echo $$ > "$0/cgroup.procs" && shift && exec "$@"' "$CG" x "$@"; }
    CGNOTE="cgroup v1 $LIMIT"
else
    rmdir "$CG" 2>/dev/null
    echo "bench_stream: cannot create a memory cgroup; running with --mem-limit only"
    IN_CG() { "$@"; }
    CGNOTE="no cgroup (--mem-limit only)"
fi
trap 'rmdir "$CG" 2>/dev/null' EXIT

drop_cache() { # the model file's pages (the cache that matters; kinder to a shared machine than
               # drop_caches); DROP_ALL=1: whole page cache when allowed
    if [ "${DROP_ALL:-0}" = 1 ] && sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then DROP="drop_caches"; else
        /usr/bin/python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$MODEL"
        DROP="fadvise(DONTNEED) of the model"
    fi
}

# ---- disk bandwidth: 16 parallel streams of 16 MiB O_DIRECT reads (3 GiB)
drop_cache
SZ=$(stat -c %s "$MODEL"); CNT=12; NS=16; T0=$(date +%s.%N)
k=0
while [ $k -lt $NS ]; do
    dd if="$MODEL" of=/dev/null bs=16M count=$CNT skip=$(( (SZ / 16777216 / NS) * k )) iflag=direct 2>/dev/null &
    k=$((k + 1))
done
wait
T1=$(date +%s.%N)
DISK=$(echo "$T0 $T1" | awk -v b=$((NS * CNT * 16777216)) '{printf "%.2f", b / ($2 - $1) / 1e9}')
echo "disk: ${DISK} GB/s ($NS streams x ${CNT} x 16 MiB O_DIRECT)"

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE=$(date +%Y-%m-%d)
BPB=144; [ "$EXPERT_TYPE" = q8_0 ] && BPB=272   # bytes per 256 weights
EXP_BYTES=$(( EMBD * FF / 256 * BPB * 3 * 32 * LAYERS ))
printf '%-10s %10s %10s %10s %10s %12s\n' run "gen tok/s" "read GB/s" "hit %" "peak RSS" "vs disk"
ROWS=""
for io in auto pread direct uring mmap; do
    drop_cache
    OUT=$(IN_CG "$BIN" run -m "$MODEL" -p "$PROMPT" -n $N_GEN --temp 0 -t $THREADS -c $CTX -b $CTX --mem-limit $LIMIT \
          --io $io -v 2>&1 >/dev/null)
    if ! echo "$OUT" | grep -q "generation:"; then echo "$io: failed: $(echo "$OUT" | tail -2)"; continue; fi
    GEN=$(echo "$OUT" | sed -n 's/.*generation: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p')
    RD=$(echo "$OUT" | sed -n 's/.* at \([0-9.]*\) GB\/s.*/\1/p')
    HIT=$(echo "$OUT" | sed -n 's/.*| hit \([0-9.]*\)%.*/\1/p')
    PEAK=$(echo "$OUT" | sed -n 's/.*peak memory: \([0-9.]* [KMG]iB\).*/\1/p')
    ENG=$(echo "$OUT" | sed -n 's/.*io \([a-z]*\), prefetch.*/\1/p')
    R=$(echo "$RD $DISK" | awk '{ if ($2 > 0) printf "%.2f", $1 / $2; else print "" }')
    [ $io = auto ] && echo "(auto chose $ENG)"
    printf '%-10s %10s %10s %10s %10s %12s\n' "$io" "$GEN" "$RD" "$HIT" "$PEAK" "$R"
    ROWS="$ROWS$DATE	$COMMIT	streaming	run $LABEL $io ($ENG) K2 geometry ${LAYERS}L $EXPERT_TYPE experts $(($EXP_BYTES / 1048576)) MiB, $CGNOTE, $N_GEN tokens	expert read GB/s	$RD	$DISK	$R	yes	gen ${GEN} tok/s, hit ${HIT}%, peak RSS ${PEAK}, cache dropped by $DROP, disk = 16 parallel dd streams of 16 MiB O_DIRECT reads (3 GiB), same run, load avg $(cut -d' ' -f1 /proc/loadavg)
"
    eval "GEN_$io=\$GEN"
done

# ---- llama.cpp baseline, same cgroup -------------------------------------------------------------
if [ -x "$LLAMA_BIN/llama-completion" ] && [ "$PACK" != 1 ]; then
    drop_cache
    LOUT=$(IN_CG "$LLAMA_BIN/llama-completion" -m "$MODEL" -p "$PROMPT" -n $N_GEN --temp 0 -t $THREADS -c $CTX -b $CTX \
           --no-repack -no-cnv --no-warmup 2>&1 </dev/null)
    LGEN=$(echo "$LOUT" | grep "eval time" | grep -v prompt | sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1)
    if [ -n "$LGEN" ]; then
        printf '%-10s %10s\n' "llama.cpp" "$LGEN"
        BEST=${GEN_auto:-}
        R=$(echo "${BEST:-0} $LGEN" | awk '{ if ($2 > 0) printf "%.2f", $1 / $2 }')
        ROWS="$ROWS$DATE	$COMMIT	streaming	run --io auto vs llama-completion --no-repack (mmap), same cgroup, K2 geometry ${LAYERS}L $EXPERT_TYPE experts	gen tok/s	${BEST}	$LGEN	$R	yes	$CGNOTE, cache dropped by $DROP, $N_GEN tokens, $THREADS threads
"
    else
        echo "llama.cpp: no timing line ($(echo "$LOUT" | tail -2))"
    fi
fi
if [ $RECORD = 1 ] && [ -n "$ROWS" ]; then printf '%s' "$ROWS" >> docs/experiments.tsv; echo "recorded in docs/experiments.tsv"; fi
