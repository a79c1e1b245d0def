#!/bin/sh
# bench_stream.sh — issue 9's expert-streaming benchmark (docs/streaming.md "Measured").
# A random qwen3moe model with Kimi-K2 expert geometry (hidden 7168, expert width 2048, top-8 of
# N_EXPERT experts per layer, LAYERS layers, Q4_K experts, Q8_0 dense) whose routed-expert bytes
# are >= 4x the memory limit runs in a memory cgroup (v1, page cache included) of that limit:
# deltafin with --prefetch off / on / auto (router look-ahead) and llama.cpp (llama-completion
# --no-repack, default mmap) in the same cgroup, same threads, caches dropped before every run,
# disk bandwidth measured in the same repetition with 16 MiB O_DIRECT reads (the better of 16
# and 64 parallel dd streams). REPEAT repetitions; medians are reported (the disk is shared and noisy).
#   deltafin tok/s   = decode-only generation speed (N_GEN-1 single-token decodes / their time,
#                      the same measure as llama.cpp's "eval time" line)
#   bytes/token      = expert + dense bytes deltafin read during generation / decodes
#   I/O floor frac   = (bytes/token / disk GB/s) / (1 / tok/s): 1.0 = the disk's speed
#   cache share      = deltafin's expert cache / the memory limit (stats.memory)
# Prints a table; --record appends rows to docs/experiments.tsv.
#
# usage: scripts/bench_stream.sh [--record] [--quick]
#   env: DIR (work dir, default /tmp/dfbench), LIMIT (1G), LAYERS (5), N_EXPERT (36: at Q4_K
#        5 layers x 32 experts are 3.69 GiB < 4x 1 GiB, 36 give 4.15 GiB), N_GEN (8),
#        THREADS (default: all cores), REPEAT (3), PREFETCH ("off on auto"), IO (auto),
#        LLAMA_BIN (/work/llama.cpp/build/bin; LLAMA=0 skips it), EXPERT_TYPE (q4_k | q8_0),
#        PACK=1 (run the `deltafin pack` copy), DROP_ALL (1: echo 3 > drop_caches when
#        allowed, else posix_fadvise(DONTNEED) of the model), KEEP=0 deletes the model at the end
#        MODEL_FILE: run this GGUF instead of generating one (e.g. /work/models/k2g-q4k.gguf),
#        DISK_MBPS: throttle every engine's reads of the model's disk to this many MB/s
#        (cgroup v1 blkio.throttle.read_bps_device, the same cgroup for all engines): the disk's
#        speed is then a known constant and the floor uses it, unless parallel O_DIRECT dd
#        streams through the throttle (16 and 64, measured each repetition) and fio (io_uring,
#        O_DIRECT 8 MiB reads at queue depth 16 and 64: deltafin's engine and request size; when
#        installed), the best of them, get less: then the device under the throttle is the limit
#        and the floor uses that; unset: the measured disk. Each deltafin run also prints the
#        store's read rate while reads are in flight: near the device's, the gap to the floor is
#        time the disk idles (layer / token boundaries, CPU), not slow reads
#        ARCH=gpt-oss: a gpt-oss-120b-geometry model instead (hidden 2880, 64 heads / 8 KV, all
#        128 experts of width 2880 top-4, MXFP4 experts as random valid blocks, Q8_0 dense,
#        LAYERS layers: 12.61 MiB per expert, 1.58 GiB per layer)
#   --quick: tiny geometry (n_embd 1024, width 512, 4 layers), 160M limit, 1 repetition:
#        tests the script itself.
set -u
RECORD=0; QUICK=0
for a in "$@"; do
    case $a in --record) RECORD=1 ;; --quick) QUICK=1 ;; -h|--help) sed -n 2,24p "$0"; exit 0 ;; esac
done
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
DIR=${DIR:-/tmp/dfbench}
LIMIT=${LIMIT:-1G}
LAYERS=${LAYERS:-5}
N_EXPERT=${N_EXPERT:-36}
N_GEN=${N_GEN:-8}
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
PREFETCH=${PREFETCH:-off on auto}
IO=${IO:-auto}
LLAMA=${LLAMA:-1}
LLAMA_BIN=${LLAMA_BIN:-/work/llama.cpp/build/bin}
EMBD=7168; FF=2048; HEADS=8; KV=2; HD=128
if [ $QUICK = 1 ]; then EMBD=1024; FF=512; LIMIT=160M; LAYERS=4; N_EXPERT=32; REPEAT=1; fi
CTX=256   # the plan (DELTAFIN_PLAN_CTX) and the run use the same context and batch
export DELTAFIN_PLAN_CTX=$CTX
PY=/usr/bin/python3
mkdir -p "$DIR"
# private copy of the binary: a concurrent rebuild must not pull it away mid-benchmark
cp "$BIN" "$DIR/deltafin.bench" || exit 1
BIN="$DIR/deltafin.bench"
cp "$DEVBIN" "$DIR/deltafin-dev.bench" || exit 1
DEVBIN="$DIR/deltafin-dev.bench"
EXPERT_TYPE=${EXPERT_TYPE:-q4_k}   # q8_0: skip the quantize step
SRC="$DIR/k2geo-${EMBD}-${FF}-${LAYERS}L-${N_EXPERT}e-q8.gguf"
MODEL="$DIR/k2geo-${EMBD}-${FF}-${LAYERS}L-${N_EXPERT}e-q4k.gguf"
[ "$EXPERT_TYPE" = q8_0 ] && MODEL=$SRC
ARCH=${ARCH:-qwen3moe}
if [ "$ARCH" = gpt-oss ]; then
    EMBD=2880; FF=2880; N_EXPERT=128; EXPERT_TYPE=mxfp4
    SRC="$DIR/gptoss120-${LAYERS}L-mxfp4.gguf"; MODEL=$SRC
fi
if [ -n "${MODEL_FILE:-}" ]; then MODEL=$MODEL_FILE; SRC=$MODEL_FILE; fi
DISK_MBPS=${DISK_MBPS:-}
PROMPT="Hello"   # byte vocabulary: 5 tokens + BOS

need_gb=$(( (EMBD * FF * 3 / 256 * 272 * N_EXPERT * LAYERS) / 1000000000 + 2 ))
[ -f "$MODEL" ] && need_gb=1
avail_gb=$(df -P --block-size=1G "$DIR" | awk 'NR==2 {print $4}')
[ "$avail_gb" -gt "$need_gb" ] || { echo "bench_stream: need ~${need_gb} GB free in $DIR, have ${avail_gb}"; exit 1; }

if [ ! -f "$MODEL" ]; then
    echo "== generating $MODEL"
    [ -f "$SRC" ] || [ "$ARCH" != gpt-oss ] || nice "$DEVBIN" gen-random --arch gpt-oss --preset gpt-oss-120b \
        --n-layer $LAYERS --type q8_0 --expert-type mxfp4 --raw-experts --vocab bytes --seed 9 "$SRC" || exit 1
    [ -f "$SRC" ] || nice "$DEVBIN" gen-random --arch qwen3moe --type q8_0 --n-embd $EMBD --n-layer $LAYERS \
        --n-head $HEADS --n-head-kv $KV --head-dim $HD --n-expert $N_EXPERT --n-expert-used 8 --n-ff-exp $FF \
        --vocab bytes --seed 9 "$SRC" || exit 1
    if [ "$MODEL" != "$SRC" ]; then
        nice "$BIN" quantize "$SRC" "$MODEL" Q4_K --type-dense Q8_0 --allow-requantize || exit 1
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
    LLAMA=0
fi

# ---- memory cgroup (v1), page cache included ---------------------------------------------------
CG=/sys/fs/cgroup/memory/dfbench.$$
if mkdir "$CG" 2>/dev/null && echo "$LIMIT" > "$CG/memory.limit_in_bytes" 2>/dev/null; then
    echo 0 > "$CG/memory.swappiness" 2>/dev/null
    IN_CG() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG" "$@"; }
    CGNOTE="cgroup v1 $LIMIT"
else
    rmdir "$CG" 2>/dev/null
    echo "bench_stream: cannot create a memory cgroup; running with --mem-limit only"
    IN_CG() { "$@"; }
    CGNOTE="no cgroup (--mem-limit only)"
fi
# ---- disk throttle (blkio v1) for the model's device ----------------------------------------
BCG=/sys/fs/cgroup/blkio/dfbench.$$
if [ -n "$DISK_MBPS" ]; then
    dv=$(stat -c %D "$MODEL"); DEVNUM="$(( 0x$dv >> 8 )):$(( 0x$dv & 0xff ))"
    if mkdir "$BCG" 2>/dev/null && echo "$DEVNUM $((DISK_MBPS * 1000000))" > "$BCG/blkio.throttle.read_bps_device" 2>/dev/null; then
        # each engine joins the memory cgroup (when there is one) and the throttle
        if [ -d "$CG" ]; then
            IN_CG() { sh -c 'echo $$ > "$0/cgroup.procs" && echo $$ > "$1/cgroup.procs" && shift && exec "$@"' "$CG" "$BCG" "$@"; }
        else
            IN_CG() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$BCG" "$@"; }
        fi
        CGNOTE="$CGNOTE, reads of $DEVNUM throttled to $DISK_MBPS MB/s (blkio v1)"
        # the device measurements: the throttle only (64 readers' buffers would not fit LIMIT)
        IN_BLK() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$BCG" "$@"; }
    else
        rmdir "$BCG" 2>/dev/null
        echo "bench_stream: cannot create a blkio cgroup throttle for $DEVNUM (need cgroup v1 blkio and root)"; exit 1
    fi
fi
RES="$DIR/results.$$"
: > "$RES"
trap 'rmdir "$CG" "$BCG" 2>/dev/null; rm -f "$RES" "$DIR"/stats.$$.jsonl' EXIT

. "$(dirname "$0")/bench_lib.sh"
drop_cache() { df_drop_cache "$MODEL"; }
disk_bw() { # $1 parallel streams of 16 MiB O_DIRECT reads (3 GiB at the default size)
    if [ $QUICK = 1 ]; then df_disk_bw "$MODEL" "$1" 1; else df_disk_bw "$MODEL" "$1" $((192 / $1)); fi
}

# deltafin run in the cgroup; appends "rep label tok/s bytes/token disk la_acc la_reads hit peak"
run_deltafin() { # $1 = rep, $2 = disk GB/s, $3 = io, $4 = prefetch
    drop_cache
    ST="$DIR/stats.$$.jsonl"
    rm -f "$ST"
    OUT=$(IN_CG "$BIN" run -m "$MODEL" -p "$PROMPT" -n $N_GEN --temp 0 -t $THREADS -c $CTX -b $CTX \
          --mem-limit $LIMIT --io $3 --prefetch $4 --json --stats-file "$ST" --stats-every 100000 2>"$DIR/err.$$")
    if [ $? -ne 0 ] || [ ! -s "$ST" ]; then echo "deltafin io=$3 prefetch=$4: failed: $(tail -2 "$DIR/err.$$")"; return; fi
    echo "$OUT" | $PY -c '
import json, sys
rep, disk, io, pf, st_path = sys.argv[1:6]
o = json.loads(sys.stdin.read())
lines = [json.loads(l) for l in open(st_path)]
p = [l for l in lines if l["phase"] == "prompt"][0]; e = lines[-1]
s = o["stats"]; st = s.get("stream", {}); la = st.get("lookahead", {})
dec = max(1, s["n_gen"] - 1)
bpt = (e["bytes_read"] - p["bytes_read"]) / dec
tps = e["gen_tok_s_avg"]
frac = (bpt / (float(disk) * 1e9)) * tps if float(disk) > 0 else 0
print(rep, "deltafin-%s-%s" % (io, pf), "%.4f" % tps, "%.0f" % bpt, disk, "%.4f" % frac,
      "%.4f" % la.get("accuracy", 0), la.get("reads", 0), la.get("depth", 0), "%.4f" % st.get("hit_rate", 0),
      s["peak_rss"], st.get("io", "-"), "%.3f" % (la.get("boundary_gap_s", 0) * 1e3), "%.3f" % st.get("read_gbps", 0),
      "%.4f" % (s.get("memory", {}).get("cache", 0) / max(1, s.get("memory", {}).get("limit", 1))))
' "$1" "$2" "$3" "$4" "$ST" >> "$RES"
    tail -1 "$RES" | awk '{printf "  rep %s %-22s %7s tok/s  %6.1f MiB/token  floor %.2f  look-ahead acc %.2f reads %s depth %s  hit %.2f  gap %s ms  io %s  reads at %s GB/s while in flight (decode %.3f GB/s)  cache %.1f%% of the limit\n", $1, $2, $3, $4/1048576, $6, $7, $8, $9, $10, $13, $12, $14, $3 * $4 / 1e9, 100 * $15}'
}

run_llama() { # $1 = rep, $2 = disk
    drop_cache
    LOUT=$(IN_CG "$LLAMA_BIN/llama-completion" -m "$MODEL" -p "$PROMPT" -n $N_GEN --temp 0 -t $THREADS -c $CTX -b $CTX \
           --no-repack -no-cnv --no-warmup 2>&1 </dev/null)
    LGEN=$(echo "$LOUT" | grep "eval time" | grep -v prompt | sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1)
    if [ -z "$LGEN" ]; then echo "llama.cpp: no timing line ($(echo "$LOUT" | tail -2))"; return; fi
    echo "$1 llama.cpp $LGEN 0 $2 0 0 0 0 0 0 mmap 0 0 0" >> "$RES"
    echo "  rep $1 llama.cpp              $LGEN tok/s"
}

HAVE_LLAMA=0
[ "$LLAMA" = 1 ] && [ -x "$LLAMA_BIN/llama-completion" ] && HAVE_LLAMA=1
echo "== $MODEL ($(du -h "$MODEL" | cut -f1)), $CGNOTE, $THREADS threads, $N_GEN tokens, $REPEAT repetitions, start $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ $r -le $REPEAT ]; do
    # the disk's bandwidth: the better of 16 and 64 parallel streams (io_uring at queue depth 64
    # gets more from this VM disk than 16 streams do, so 16 alone would flatter the floor)
    if [ -n "$DISK_MBPS" ]; then
        # the throttle is the disk's speed only where the device under it is faster: this VM's
        # disk gives 0.9-2 GB/s depending on the host cache, so measure the throttled device with
        # the same parallel O_DIRECT streams (16 and 64, the better) and take the lower of the two
        T16=$(IN_BLK sh -c ". '$(dirname "$0")/bench_lib.sh'; df_disk_bw '$MODEL' 16 $((96 / 16))")
        T64=$(IN_BLK sh -c ". '$(dirname "$0")/bench_lib.sh'; df_disk_bw '$MODEL' 64 $((192 / 64))")
        # fio with deltafin's engine and request size at queue depth 16 and 64 (when installed)
        F16=$(IN_BLK sh -c ". '$(dirname "$0")/bench_lib.sh'; df_fio_bw '$MODEL' 16")
        F64=$(IN_BLK sh -c ". '$(dirname "$0")/bench_lib.sh'; df_fio_bw '$MODEL' 64")
        CHK=$(echo "$T16 $T64 $F16 $F64" | awk '{m = $1; for (i = 2; i <= NF; i++) if ($i > m) m = $i; print m}')
        DISK=$(awk -v m="$DISK_MBPS" -v c="$CHK" 'BEGIN{d = m / 1000; if (c > 0 && c < d) d = c; printf "%.3f", d}')
        echo "rep $r: disk throttled to $(awk -v m="$DISK_MBPS" 'BEGIN{printf "%.3f", m / 1000}') GB/s, measured through the throttle $CHK GB/s (dd 16 / 64 streams $T16 / $T64, fio io_uring 8 MiB QD 16 / 64 $F16 / $F64): floor at $DISK GB/s"
    else
    D16=$(disk_bw 16); D64=$(disk_bw 64)
    DISK=$(echo "$D16 $D64" | awk '{print ($1 > $2) ? $1 : $2}')
    echo "rep $r: disk $DISK GB/s (16 MiB O_DIRECT reads: 16 streams $D16, 64 streams $D64)"
    fi
    for pf in $PREFETCH; do run_deltafin $r "$DISK" $IO $pf; done
    [ $HAVE_LLAMA = 1 ] && run_llama $r "$DISK"
    r=$((r + 1))
done
echo "== end $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
BPB=144; [ "$EXPERT_TYPE" = q8_0 ] && BPB=272; [ "$EXPERT_TYPE" = mxfp4 ] && BPB=136   # bytes per 256 weights
EXP_MIB=$(( EMBD * FF / 256 * BPB * 3 * N_EXPERT * LAYERS / 1048576 ))
$PY - "$RES" "$RECORD" "$(date +%Y-%m-%d)" "$COMMIT" "$LABEL" "$LAYERS" "$N_EXPERT" "$EXPERT_TYPE" "$EXP_MIB" \
    "$CGNOTE" "$N_GEN" "$THREADS" "$DROP" "$(cut -d' ' -f1 /proc/loadavg)" "$ARCH" <<'EOF'
import sys, statistics as S
res, record, date, commit, label, layers, nexp, etype, exp_mib, cg, ngen, threads, drop, load, arch = sys.argv[1:]
rows = [l.split() for l in open(res) if l.strip()]
by = {}
for r in rows: by.setdefault(r[1], []).append(r)
med = lambda v: S.median(v) if v else 0
disks = sorted({float(r[4]) for r in rows})
print("\n%-24s %5s %12s %14s %10s %12s %12s %8s" % ("run", "n", "tok/s med", "MiB/token", "floor", "la acc", "la reads", "hit"))
summary = {}
for k, rs in by.items():
    t = med([float(r[2]) for r in rs]); b = med([float(r[3]) for r in rs]); f = med([float(r[5]) for r in rs])
    a = med([float(r[6]) for r in rs]); lr = med([float(r[7]) for r in rs]); h = med([float(r[9]) for r in rs])
    summary[k] = (t, b, f, a, lr, h, [float(r[2]) for r in rs], rs)
    print("%-24s %5d %12.3f %14.1f %10.2f %12.3f %12.0f %8.3f" % (k, len(rs), t, b / 1048576, f, a, lr, h))
print("disk GB/s per repetition: %s (median %.2f)" % (", ".join("%.2f" % d for d in disks), med(disks)))
ll = summary.get("llama.cpp")
out = []
geo = "%s %sL %se top-%s %s experts %s MiB, %s, %s tokens, %s threads, cache dropped by %s" % (
    "gpt-oss-120b geometry (hidden 2880, expert width 2880)" if arch == "gpt-oss" else "K2 geometry",
    layers, nexp, 4 if arch == "gpt-oss" else 8, etype, exp_mib, cg, ngen, threads, drop)
for k, (t, b, f, a, lr, h, ts, rs) in summary.items():
    if k == "llama.cpp": continue
    samples = ",".join("%.3f" % x for x in ts)
    rr = med([float(r[13]) for r in rs if len(r) > 13])
    cs = med([float(r[14]) for r in rs if len(r) > 14])
    note = "median of %d runs (%s tok/s); %.1f MiB read per token; reads at %.2f GB/s while in flight, %.2f GB/s over decode; expert cache %.1f%% of the limit; look-ahead accuracy %.1f%%, %d reads/run; hit %.1f%%; disk %s GB/s (floor: the throttle, or the device through it when lower: best of dd 16/64 streams of 16 MiB and fio io_uring 8 MiB QD 16/64, same repetitions); load avg %s" % (
        len(ts), samples, b / 1048576, rr, t * b / 1e9, 100 * cs, 100 * a, lr, 100 * h, ",".join("%.2f" % float(r[4]) for r in rs), load)
    out.append("\t".join([date, commit, "streaming", "%s run %s: I/O floor fraction (bytes/token / disk GB/s x tok/s), %s" % (label, k, geo),
                          "fraction of I/O floor", "%.2f" % f, "0.85", "%.2f" % (f / 0.85), "yes", note]))
    if ll:
        lt = ll[0]
        out.append("\t".join([date, commit, "streaming", "%s %s vs llama-completion --no-repack (mmap), same cgroup, %s" % (label, k, geo),
                              "gen tok/s", "%.3f" % t, "%.3f" % lt, "%.2f" % (t / lt if lt else 0), "yes",
                              "medians; deltafin %s, llama.cpp %s tok/s; target >= 2.5x" % (samples, ",".join("%.3f" % x for x in ll[6]))]))
off, on, au = summary.get("deltafin-auto-off"), summary.get("deltafin-auto-on"), summary.get("deltafin-auto-auto")
for name, s in (("on", on), ("auto", au)):
    if off and s:
        out.append("\t".join([date, commit, "streaming", "%s router look-ahead --prefetch %s vs off, %s" % (label, name, geo),
                              "gen tok/s", "%.3f" % s[0], "%.3f" % off[0], "%.2f" % (s[0] / off[0] if off[0] else 0),
                              "yes" if name == "auto" else "kept as an option",
                              "medians; look-ahead accuracy %.1f%%, %d reads/run, hit %.1f%% vs %.1f%% off" % (100 * s[3], s[4], 100 * s[5], 100 * off[5])]))
if record == "1" and out:
    with open("docs/experiments.tsv", "a") as f:
        for l in out: f.write(l + "\n")
    print("recorded %d rows in docs/experiments.tsv" % len(out))
else:
    for l in out: print(l)
EOF
[ "${KEEP:-1}" = 1 ] || rm -f "$MODEL"
