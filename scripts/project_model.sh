#!/bin/sh
# project_model.sh — a streamed MoE model larger than any disk here, projected from a measurement
# of its real layers: Kimi K3 (MODEL=k3, docs/kimi-k3-projection.md), Qwen3.5-397B-A17B
# (MODEL=qwen35) and GLM-5 (MODEL=glm5, docs/qwen35-glm5-projection.md), each on two machine sizes.
#
# Method (every number below is printed, and --record appends it to docs/experiments.tsv):
#  1. The real model's memory plan, per machine: `deltafin info --mem-limit RAM-RESERVE` on a
#     sparse (header-only) file of the whole model (its real vocabulary size for the embedding
#     and output bytes, Q4_K dense, MXFP4 experts): how many dense layers stay resident, the dense
#     bytes streamed per token, and the expert cache slots the rest buys.
#  2. A real (fully written) random model with a few layers of the real geometry (SMALL below;
#     the byte vocabulary: its output matrix is not the real one) — the per-layer compute and I/O
#     of the real model.
#  3. Per machine, the small model runs with the real model's per-layer budget: expert cache =
#     (real slots / real MoE layers) per MoE layer (at least 16 slots), all dense layers streamed
#     when the real plan streams some (DELTAFIN_DENSE_RESIDENT=0: a denser read mix than the real
#     model's), else all resident, in a memory cgroup (page cache included) sized to that plan,
#     the model's cached pages dropped first, prefetch auto, io auto, greedy with --ignore-eos (a
#     random model may end early at its end-of-generation token). With DISK_MBPS the reads
#     of the model's device also go through a cgroup v1 blkio throttle of that many MB/s (the
#     disk at a known speed): the floor then uses the lower of the throttle and what 16 / 64
#     parallel 16 MiB O_DIRECT streams get through it (scripts/bench_stream.sh does the same).
#     Measured: decode tok/s, bytes read per token (experts + dense), expert hit rate and the
#     disk's bandwidth in the same repetition. floor fraction = (bytes/token / disk bandwidth) x
#     tok/s (1.0 = every second spent reading at the disk's speed); and the decode time per token
#     split into computing and waiting on reads (a run bound by its CPU share shows it here).
#  4. Projection to the full model: bytes/token(real) = dense streamed per token (plan 1) + real
#     MoE layers x experts per token x expert bytes x (1 - measured hit rate); I/O floor = that /
#     disk bandwidth; projected s/token = I/O floor / measured floor fraction (capped at 1). Also
#     at FAST_GBS (default 7.1 GB/s, a fast NVMe drive) with the same fraction — an extrapolation.
#     A random model's routing is not the real one's (the hit rate moves bytes/token most), so the
#     floor at uniform routing (hit rate = the real cache's share of the experts) is printed too.
#     The rows' baselines: the reference engine's fraction of its floor; for tok/s the published
#     run where it is like for like (K3), else the full model's I/O floor on this disk.
#
# usage: scripts/project_model.sh [--record]
#   env: MODEL (k3 | qwen35 | glm5), DIR (/tmp/df-MODEL), N_GEN (6), THREADS (nproc), REPEAT (2),
#        MACHINES (k3: "24 64", others "32 64" GiB), RESERVE_MIB (2048: OS + page cache headroom),
#        DISK_MBPS (unset: no throttle), FAST_GBS (7.1), KEEP (1: keep the small model),
#        DROP_ALL (1: drop the whole page cache before each run; 0: only the model's pages,
#        kinder to other work on a shared machine), k3: N_LAYER (3), LAYERS (KKM)
set -u
RECORD=0
for a in "$@"; do case $a in --record) RECORD=1 ;; -h|--help) sed -n 2,41p "$0"; exit 0 ;; esac; done
cd "$(dirname "$0")/.." || exit 1
MODEL_KIND=${MODEL:-k3}
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
DIR=${DIR:-/tmp/df-$MODEL_KIND}
N_GEN=${N_GEN:-6}
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-2}
RESERVE_MIB=${RESERVE_MIB:-2048}
FAST_GBS=${FAST_GBS:-7.1}
DISK_MBPS=${DISK_MBPS:-}
PY=/usr/bin/python3
CTX=256
export DELTAFIN_PLAN_CTX=$CTX
# per model: generator options (real file: + its vocabulary; small file: + SMALL), MoE layers of
# the real model, experts per token, bytes of one expert (gate + up + down), GB per MoE layer of
# the small file, the reference
case $MODEL_KIND in
k3)
    N_LAYER=${N_LAYER:-3}; LAYERS=${LAYERS:-KKM}
    GEN="--arch kimi-k3 --preset k3 --type q4_k --expert-type mxfp4 --raw-experts --seed 3"
    VOCAB="bytes"; SMALL="--n-layer $N_LAYER --layers $LAYERS"; N_MOE=$((N_LAYER - 1))
    REAL_MOE=92; K_ACT=16; N_EXP=896; EXPERT=17547264; LAYER_GB=16; MACHINES=${MACHINES:-24 64}
    TITLE="Kimi K3"; NOTE_GEO="$N_LAYER-layer K3-geometry model ($LAYERS; 896 MXFP4 experts/layer, Q4_K dense)"
    REF_TPS=0.0687; REF_FRAC=0.85
    REF_NOTE="reference 0.0687 tok/s is the published 64 GB laptop run" ;;
qwen35)
    GEN="--arch qwen35moe --preset qwen3.5-397b --type q4_k --expert-type mxfp4 --raw-experts --seed 3"
    VOCAB="bytes:248320"; SMALL="--n-layer 2 --interval 2"; N_LAYER=2; N_MOE=2
    REAL_MOE=60; K_ACT=10; N_EXP=512; EXPERT=6684672; LAYER_GB=4; MACHINES=${MACHINES:-32 64}
    TITLE="Qwen3.5-397B-A17B"
    NOTE_GEO="2-layer Qwen3.5-397B-geometry model (a DeltaNet and an attention layer; 512 MXFP4 experts of width 1024, top-10, Q4_K dense)"
    REF_TPS=""; REF_FRAC=0.40   # 4.4 tok/s was K=4 experts on a 17.5 GB/s SSD: no tok/s baseline
    REF_NOTE="reference: 4.4 tok/s on a 48 GB laptop at 4 bits (4 of the 10 experts per token, 17.5 GB/s SSD), 29-40% of its I/O floor (issue 17)" ;;
glm5)
    GEN="--preset glm-5 --type q4_k --expert-type mxfp4 --raw-experts --seed 3"
    # MoE layers only: the real model's 3 dense-FFN layers of 78 are ~2% of its compute, one of 3
    # layers here was a quarter of the small model's (compute with nothing to read)
    VOCAB="bytes:154880"; SMALL="--n-layer 2 --nextn 0 --n-dense 0"; N_LAYER=2; N_MOE=2
    REAL_MOE=75; K_ACT=8; N_EXP=256; EXPERT=20054016; LAYER_GB=6; MACHINES=${MACHINES:-32 64}
    TITLE="GLM-5"
    NOTE_GEO="2-layer GLM-5-geometry model (2 MoE layers, MLA with its DSA indexer; 256 MXFP4 experts of width 2048, top-8, Q4_K dense, DSA indexer top-2048)"
    REF_TPS=""; REF_FRAC=0.50   # another drive and quantization: no tok/s baseline
    REF_NOTE="reference: GLM-5.x 744B at 1.1 tok/s on two NVMe drives, 40-50% of its I/O floor (issue 17)" ;;
*) echo "project_model: MODEL must be k3, qwen35 or glm5"; exit 2 ;;
esac
mkdir -p "$DIR"
cp "$BIN" "$DIR/deltafin.pm" || exit 1
BIN="$DIR/deltafin.pm"
cp "$DEVBIN" "$DIR/deltafin-dev.pm" || exit 1
DEVBIN="$DIR/deltafin-dev.pm"
SPARSE="$DIR/$MODEL_KIND-full-sparse.gguf"
MODEL="$DIR/$MODEL_KIND-${N_LAYER}L.gguf"

# shellcheck disable=SC2086
"$DEVBIN" gen-random $GEN --vocab "$VOCAB" --sparse "$SPARSE" >/dev/null || exit 1
if [ ! -f "$MODEL" ]; then
    need=$(( N_MOE * LAYER_GB + 4 ))
    avail=$(df -P --block-size=1G "$DIR" | awk 'NR==2 {print $4}')
    [ "$avail" -gt "$need" ] || { echo "project_model: need ~${need} GB free in $DIR, have ${avail}"; exit 1; }
    echo "== generating $MODEL ($SMALL)"
    # shellcheck disable=SC2086
    nice "$DEVBIN" gen-random $GEN --vocab bytes $SMALL "$MODEL.tmp" || exit 1
    mv "$MODEL.tmp" "$MODEL"
fi
"$BIN" info -m "$MODEL" 2>/dev/null | sed -n '/memory plan/,/all resident/p'

CG=/sys/fs/cgroup/memory/dfpm.$$
HAVE_CG=0
mkdir "$CG" 2>/dev/null && HAVE_CG=1
BCG=""
if [ -n "$DISK_MBPS" ]; then
    dv=$(stat -c %D "$MODEL"); DEVNUM="$(( 0x$dv >> 8 )):$(( 0x$dv & 0xff ))"
    BCG=/sys/fs/cgroup/blkio/dfpm.$$
    if ! mkdir "$BCG" 2>/dev/null || ! echo "$DEVNUM $((DISK_MBPS * 1000000))" > "$BCG/blkio.throttle.read_bps_device" 2>/dev/null; then
        rmdir "$BCG" 2>/dev/null
        echo "project_model: cannot create a blkio throttle for $DEVNUM (need cgroup v1 blkio and root)"; exit 1
    fi
fi
RES="$DIR/results.$$"; : >"$RES"
trap 'rmdir "$CG" $BCG 2>/dev/null; rm -f "$RES" "$DIR"/st.$$.jsonl "$DIR"/err.$$' EXIT
. scripts/bench_lib.sh
drop_cache() { df_drop_cache "$MODEL"; }
# $1 = memory cgroup dir or "", then the command: joins the cgroup and the throttle (if any)
in_cg() { _g=$1; shift; sh -c 'for g in "$1" "$2"; do [ -n "$g" ] && echo $$ > "$g/cgroup.procs"; done; shift 2; exec "$@"' x "$_g" "$BCG" "$@"; }
disk_bw() { # $1 parallel streams of 16 MiB O_DIRECT reads (3 GiB), through the throttle if any
    in_cg "" sh -c ". scripts/bench_lib.sh; df_disk_bw '$MODEL' $1 $((192 / $1))"
}

LOAD0=$(cut -d' ' -f1 /proc/loadavg)
echo "== $TITLE: start $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg), $THREADS threads${DISK_MBPS:+, reads throttled to $DISK_MBPS MB/s (blkio v1)}"
for GIB in $MACHINES; do
    LIM_MIB=$((GIB * 1024 - RESERVE_MIB))
    "$BIN" info -m "$SPARSE" --mem-limit ${LIM_MIB}M -c $CTX -b 32 >"$DIR/plan$GIB.txt" 2>&1
    # real plan: resident layers R of L, dense streamed bytes per token, expert cache slots S
    eval "$($PY - "$DIR/plan$GIB.txt" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
units = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
def size(s):
    v, u = s.split(); return float(v) * units[u]
m = re.search(r"dense: (\d+) of (\d+) layers resident.*reads ([\d.]+ \w+) per token", t)
if m: R, L, DS = int(m.group(1)), int(m.group(2)), size(m.group(3))
else:
    m = re.search(r"dense: all (\d+) layers resident", t); R = L = int(m.group(1)); DS = 0
s = re.search(r"expert cache\s+([\d.]+ \w+)\s+\((\d+) slots of ([\d.]+ \w+)", t)
print("REAL_RES=%d REAL_L=%d REAL_DSTREAM=%d REAL_SLOTS=%s SLOT=%d" % (R, L, DS, s.group(2), size(s.group(3))))
EOF
)" || { echo "project_model: cannot read the real plan: $(cat "$DIR/plan$GIB.txt")"; continue; }
    # the same per-layer budget on the small model
    SLOTS=$(( (REAL_SLOTS * N_MOE + REAL_MOE - 1) / REAL_MOE )); [ $SLOTS -lt 16 ] && SLOTS=16
    CACHE=$((SLOTS * SLOT))
    # dense: if the real plan streams layers, stream all of the small model's (with fewer
    # streamed layers than the 2 buffers nothing would be read again), else keep all resident
    K=$N_LAYER; [ "$REAL_RES" -lt "$REAL_L" ] && K=0
    echo "== ${GIB} GiB machine (--mem-limit ${LIM_MIB} MiB): real plan $REAL_RES of $REAL_L dense layers resident," \
         "$(awk -v b=$REAL_DSTREAM 'BEGIN{printf "%.2f", b/1073741824}') GiB dense streamed per token, $REAL_SLOTS expert slots;" \
         "small model: $K of $N_LAYER dense layers resident, $SLOTS slots ($(awk -v b=$CACHE 'BEGIN{printf "%.0f", b/1048576}') MiB)"
    r=1
    while [ $r -le $REPEAT ]; do
        D16=$(disk_bw 16); D64=$(disk_bw 64)
        DISK=$(echo "$D16 $D64" | awk '{print ($1 > $2) ? $1 : $2}')
        [ -n "$DISK_MBPS" ] && DISK=$(awk -v m="$DISK_MBPS" -v c="$DISK" 'BEGIN{d = m / 1000; if (c > 0 && c < d) d = c; printf "%.3f", d}')
        drop_cache
        ST="$DIR/st.$$.jsonl"; rm -f "$ST"
        CGDIR=""
        if [ $HAVE_CG = 1 ]; then
            # cgroup (page cache included) = expert cache + all the small model's dense weights
            # + 1.5 GiB for code, KV, scratch, buffers and slack: no page-cache hits for free
            # (%.0f: mawk's %d stops at 2^31 - 1, which had capped every limit at 2 GiB)
            DENSE=$("$BIN" info -m "$MODEL" 2>/dev/null | sed -n 's/.*dense weights (resident) *\([0-9.]* [KMG]iB\).*/\1/p')
            echo "${DENSE:-2 GiB}" | awk -v c=$CACHE \
                '{ m = $2 == "GiB" ? 1073741824 : $2 == "MiB" ? 1048576 : 1024; printf "%.0f\n", c + $1 * m + 1.5 * 1073741824 }' \
                > "$CG/memory.limit_in_bytes"
            echo 0 > "$CG/memory.max_usage_in_bytes" 2>/dev/null
            CGDIR=$CG
        fi
        OUT=$(DELTAFIN_STREAM=1 DELTAFIN_DENSE_RESIDENT=$K DELTAFIN_EXPERT_CACHE=$CACHE in_cg "$CGDIR" \
              "$BIN" run -m "$MODEL" -p "Hello" -n $N_GEN --temp 0 -t $THREADS -c $CTX -b 32 \
              --prefetch auto --ignore-eos --json --stats-file "$ST" --stats-every 100000 2>"$DIR/err.$$")
        if [ $? -ne 0 ] || [ ! -s "$ST" ]; then echo "  rep $r: run failed: $(tail -n 3 "$DIR/err.$$")"; r=$((r + 1)); continue; fi
        PEAK=$(cat "$CG/memory.max_usage_in_bytes" 2>/dev/null || echo 0)
        # printf, not echo: dash's echo turns the JSON text's \t, \r ... escapes into control characters
        printf '%s\n' "$OUT" | $PY -c '
import json, sys
gib, rep, disk, st_path, peak = sys.argv[1:6]
o = json.loads(sys.stdin.read())
lines = [json.loads(l) for l in open(st_path)]
p = [l for l in lines if l["phase"] == "prompt"][0]; e = lines[-1]
s = o["stats"]; dec = max(1, s["n_gen"] - 1)
bpt = (e["bytes_read"] - p["bytes_read"]) / dec
dpt = (e.get("dense_bytes_read", 0) - p.get("dense_bytes_read", 0)) / dec
hits = e["expert_hits"] - p["expert_hits"]; miss = e["expert_misses"] - p["expert_misses"]
tps = e["gen_tok_s_avg"]
# decode time per token split into computing and waiting on reads: compute_s (the forward passes,
# waits included) and io_wait_s of a line count since the line before, unlike the byte counters
dl = lines[lines.index(p) + 1:]
fwd = sum(l.get("compute_s", 0) for l in dl); wait = sum(l.get("io_wait_s", 0) for l in dl)
cpt = (fwd - wait) / dec; wpt = wait / dec
print(gib, rep, "%.5f" % tps, "%.0f" % bpt, "%.0f" % dpt, disk, "%.4f" % ((bpt / (float(disk) * 1e9)) * tps),
      "%.4f" % (hits / max(1, hits + miss)), s["peak_rss"], peak, "%.1f" % (cpt * 1e3), "%.1f" % (wpt * 1e3), dec)
' "$GIB" "$r" "$DISK" "$ST" "$PEAK" >>"$RES" || { echo "  rep $r: cannot read the run's statistics"; r=$((r + 1)); continue; }
        tail -n 1 "$RES" | awk '{printf "  rep %s: disk %s GB/s, %.4f tok/s, %.0f MiB/token (dense %.0f), floor fraction %.2f, hit %.3f, peak RSS %.0f MiB, cgroup peak %.0f MiB, per token %s ms computing + %s ms waiting on reads (%s decode tokens)\n", $2, $6, $3, $4/1048576, $5/1048576, $7, $8, $9/1048576, $10/1048576, $11, $12, $13}'
        r=$((r + 1))
    done
    echo "REAL $GIB $REAL_RES $REAL_L $REAL_DSTREAM $REAL_SLOTS $SLOT $K $SLOTS" >>"$RES"
done
echo "== end $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
$PY - "$RES" "$RECORD" "$(date +%Y-%m-%d)" "$COMMIT" "$N_GEN" "$THREADS" "$MODEL_KIND" "$TITLE" "$NOTE_GEO" \
    "$REAL_MOE" "$K_ACT" "$N_EXP" "$EXPERT" "$REF_TPS" "$REF_FRAC" "$REF_NOTE" "$FAST_GBS" "${DISK_MBPS:-}" "$LOAD0 - $(cut -d' ' -f1 /proc/loadavg)" <<'EOF'
import sys, statistics as S
(res, record, date, commit, ngen, threads, kind, title, geo, real_moe, k_act, n_exp, expert, ref_tps, ref_frac, ref_note,
 fast, mbps, load) = sys.argv[1:]
real_moe, k_act, n_exp, expert, fast = int(real_moe), int(k_act), int(n_exp), int(expert), float(fast)
rows = [l.split() for l in open(res) if l.strip()]
real = {r[1]: r for r in rows if r[0] == "REAL"}
meas = [r for r in rows if r[0] != "REAL"]
disk_note = "disk throttled to %s MB/s (blkio v1), floor at the lower of that and 16/64 O_DIRECT streams through it" % mbps \
    if mbps else "disk (16 MiB O_DIRECT, same repetitions)"
out = []
for gib, rr in real.items():
    ms = [r for r in meas if r[0] == gib]
    if not ms: continue
    res_l, L, dstream, slots, slot, k, sslots = int(rr[2]), int(rr[3]), float(rr[4]), int(rr[5]), int(rr[6]), int(rr[7]), int(rr[8])
    tps = S.median(float(r[2]) for r in ms); frac = S.median(float(r[6]) for r in ms)
    disk = S.median(float(r[5]) for r in ms); hit = S.median(float(r[7]) for r in ms)
    bpt_small = S.median(float(r[3]) for r in ms)
    cpt = S.median(float(r[10]) for r in ms); wpt = S.median(float(r[11]) for r in ms)
    real_bpt = dstream + real_moe * k_act * expert * (1 - hit)
    floor_s = real_bpt / (disk * 1e9)
    # a fraction above 1 (the engine read faster than dd measured the disk) is not credited
    fc = min(frac, 1.0)
    proj_s = floor_s / fc if fc > 0 else float("inf")
    fast_s = real_bpt / (fast * 1e9) / fc if fc > 0 else float("inf")
    # baseline of the tok/s row: the published run where it is like for like (K3), else this disk's I/O floor
    base_tps = ref_tps or "%.4f" % (1 / floor_s)
    print("\n%s, %s GiB machine: real plan %d of %d dense layers resident, %.2f GiB dense streamed/token, %d expert slots" % (
        title, gib, res_l, L, dstream / 2**30, slots))
    print("  per-layer run (%d resident, %d slots): %.4f tok/s, %.0f MiB/token, floor fraction %.3f (range %.3f-%.3f), hit %.4f, disk %.2f GB/s, per token %.0f ms computing + %.0f ms waiting on reads (medians of %d)" % (
        k, sslots, tps, bpt_small / 2**20, frac, min(float(r[6]) for r in ms), max(float(r[6]) for r in ms), hit, disk, cpt, wpt, len(ms)))
    print("  full model: %.2f GB read per token, I/O floor %.2f s/token at %.2f GB/s -> projected %.2f s/token = %.3f tok/s" % (
        real_bpt / 1e9, floor_s, disk, proj_s, 1 / proj_s))
    print("  at %.1f GB/s (extrapolated, same fraction): %.3f s/token = %.2f tok/s" % (fast, fast_s, 1 / fast_s))
    # a random model's routing is not the real one's: the floor if hits were only the cache's share
    share = min(1.0, slots / (real_moe * n_exp))
    uni_bpt = dstream + real_moe * k_act * expert * (1 - share)
    print("  uniform routing (hit = cache share %.3f): %.2f GB read per token, I/O floor %.2f s/token at %.2f GB/s, %.2f s at %.1f GB/s" % (
        share, uni_bpt / 1e9, uni_bpt / (disk * 1e9), disk, uni_bpt / (fast * 1e9), fast))
    note = ("%s, per-layer budget of the real %d-MoE-layer plan at --mem-limit %d GiB - reserve: %d/%d dense layers resident "
            "(%.2f GiB streamed/token), %d expert slots; small model %d dense resident, %d slots; medians of %d runs; "
            "%.0f MiB read/token measured, hit %.4f, %s %.2f GB/s; per token %.0f ms computing + %.0f ms waiting on reads; "
            "%s tokens, %s threads, load average %s (start - end)") % (
            geo, real_moe, int(gib), res_l, L, dstream / 2**30, slots, k, sslots, len(ms), bpt_small / 2**20, hit,
            disk_note, disk, cpt, wpt, ngen, threads, load)
    out.append("\t".join([date, commit, "%s-projection" % kind, "%s full model on a %s GiB machine: streamed run's fraction of its I/O floor" % (title, gib),
                          "fraction of I/O floor", "%.3f" % frac, ref_frac, "%.2f" % (frac / float(ref_frac)), "yes", note]))
    out.append("\t".join([date, commit, "%s-projection" % kind, "%s full model on a %s GiB machine: projected tok/s on this disk" % (title, gib),
                          "tok/s (projected)", "%.4f" % (1 / proj_s), base_tps, "%.2f" % ((1 / proj_s) / float(base_tps)), "yes",
                          note + "; %.2f GB/token, I/O floor %.2f s/token; at %.1f GB/s: %.3f tok/s (extrapolated); %s" % (
                              real_bpt / 1e9, floor_s, fast, 1 / fast_s, ref_note) +
                          "; at uniform routing (hit %.3f) %.2f GB/token, I/O floor %.2f s/token" % (share, uni_bpt / 1e9, uni_bpt / (disk * 1e9))]))
if record == "1" and out:
    with open("docs/experiments.tsv", "a") as f:
        for l in out: f.write(l + "\n")
    print("recorded %d rows in docs/experiments.tsv" % len(out))
else:
    for l in out: print(l)
EOF
[ "${KEEP:-1}" = 1 ] || rm -f "$MODEL"
rm -f "$SPARSE"
