#!/bin/sh
# bench_batch.sh — issue 18's multi-sequence benchmark (docs/server.md "Batching"): aggregate
# decode tok/s of N concurrent streams for `deltafin serve --parallel N` and llama-server -np N
# on the same file, in the same memory cgroup (v1, page cache included) with the model's disk
# throttled by a cgroup v1 blkio read limit (design.md §5: the disk then has a known speed).
# Model: K2G (default /work/models/k2g-q4k.gguf: a random qwen3moe with Kimi-K2 expert geometry,
# hidden 7168, expert width 2048, top-8 of 32 experts, 5 layers, Q4_K experts and attention,
# Q6_K output, byte vocabulary), so the experts stream from disk and N streams share each step's expert reads
# (4 streams need about 22 of 32 experts per layer, not 4 x 8). Both engines run one copy of it
# in DIR whose output rows of the byte tokens <0x80>..<0xFF> are zeroed (see below).
# Bytes read per token: the blkio cgroup's read bytes (both engines, page cache misses and
# readahead included) during the client's run / tokens generated; deltafin's expert cache hit
# rate from its /metrics.
# Paired: for every N, REPEAT repetitions, each runs deltafin then llama-server with the page
# cache dropped before each server starts. One client thread per stream sends a short prompt
# (a different one per stream) to /v1/completions with stream=true, temperature 0, max_tokens
# N_GEN; aggregate decode tok/s = Σ (tokens - 1) / (last token of any stream - the moment every
# stream had its first token), i.e. the steady state with all N generating.
# Prints a table; --record appends rows to docs/experiments.tsv.
#
# usage: scripts/bench_batch.sh [--record] [--quick]
#   env: DIR (/tmp/dfbench), LIMIT (1G), BPS (1000000000: read bytes/s of the throttle; 0 = none),
#        K2G (the source model), N_GEN (8), STREAMS ("1 2 4 8"), REPEAT (2), THREADS (nproc),
#        LLAMA_BIN (/work/llama.cpp/build/bin; LLAMA=0 skips llama-server), TIMEOUT (900 s per run)
#   --quick: a generated tiny geometry (n_embd 1024, width 512, 4 layers), 200M limit, streams
#        "1 4", 1 repetition: tests the script itself.
set -u
RECORD=0; QUICK=0
for a in "$@"; do
    case $a in --record) RECORD=1 ;; --quick) QUICK=1 ;; -h|--help) sed -n 2,25p "$0"; exit 0 ;; esac
done
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random (--quick)
K2G=${K2G:-/work/models/k2g-q4k.gguf}
DIR=${DIR:-/tmp/dfbench}
LIMIT=${LIMIT:-1G}
BPS=${BPS:-1000000000}
LAYERS=5
N_EXPERT=32
N_GEN=${N_GEN:-8}
STREAMS=${STREAMS:-1 2 4 8}
REPEAT=${REPEAT:-2}
THREADS=${THREADS:-$(nproc)}
LLAMA=${LLAMA:-1}
LLAMA_BIN=${LLAMA_BIN:-/work/llama.cpp/build/bin}
TIMEOUT=${TIMEOUT:-900}
EMBD=7168; FF=2048; HEADS=8; KV=2; HD=128
if [ $QUICK = 1 ]; then EMBD=1024; FF=512; LAYERS=4; LIMIT=200M; STREAMS="1 4"; REPEAT=1; N_GEN=8; fi
CTX=128   # per slot
PY=/usr/bin/python3
mkdir -p "$DIR"
cp "$BIN" "$DIR/deltafin.batchbench" || exit 1   # a concurrent rebuild must not pull it away
BIN="$DIR/deltafin.batchbench"
if [ $QUICK = 1 ]; then
    cp "$DEVBIN" "$DIR/deltafin-dev.batchbench" || exit 1
    DEVBIN="$DIR/deltafin-dev.batchbench"
    SRC="$DIR/k2geo-${EMBD}-${FF}-${LAYERS}L-${N_EXPERT}e-q8-utf8.gguf"
    MODEL="$DIR/k2geo-${EMBD}-${FF}-${LAYERS}L-${N_EXPERT}e-q4k-utf8.gguf"
else
    SRC="$DIR/$(basename "$K2G" .gguf)-utf8.gguf"
    MODEL=$SRC
    [ -f "$MODEL" ] || { echo "== copying $K2G"; cp "$K2G" "$MODEL.tmp" && mv "$MODEL.tmp" "$MODEL" || exit 1; }
fi
if [ ! -f "$MODEL" ] || [ ! -f "$MODEL.patched" ]; then
    need_gb=$(( (EMBD * FF * 3 / 256 * 272 * N_EXPERT * LAYERS) / 1000000000 + 2 ))
    avail_gb=$(df -P --block-size=1G "$DIR" | awk 'NR==2 {print $4}')
    [ "$avail_gb" -gt "$need_gb" ] || { echo "bench_batch: need ~${need_gb} GB free in $DIR, have ${avail_gb}"; exit 1; }
    echo "== generating $MODEL"
    [ -f "$SRC" ] || nice "$DEVBIN" gen-random --arch qwen3moe --type q8_0 --n-embd $EMBD --n-layer $LAYERS \
        --n-head $HEADS --n-head-kv $KV --head-dim $HD --n-expert $N_EXPERT --n-expert-used 8 --n-ff-exp $FF \
        --vocab bytes --seed 9 "$SRC" || exit 1
    # llama-server parses every completion as UTF-8 text and fails the request on invalid bytes
    # (common_chat_peg_parse: "does not match the expected Content-only format"): zero the
    # output rows of the byte tokens <0x80>..<0xFF> so greedy decoding never picks them (their
    # logit is 0, below the best of the others) and the text stays valid UTF-8 for both engines
    $PY - "$SRC" <<'EOF2' || exit 1
import struct, sys
f = open(sys.argv[1], "r+b"); b = f.read(64 << 20)   # the header
o = 4; ver, nt, nkv = struct.unpack_from("<IQQ", b, o); o += 20
def s():
    global o
    n, = struct.unpack_from("<Q", b, o); o += 8; v = b[o:o + n].decode("utf-8", "replace"); o += n; return v
SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def val(t):
    global o
    if t == 8: return s()
    if t == 9:
        et, n = struct.unpack_from("<IQ", b, o); o += 12
        return [val(et) for _ in range(n)]
    v = b[o:o + SZ[t]]; o += SZ[t]
    return struct.unpack("<" + {1: "B", 2: "H", 4: "I", 8: "Q"}[SZ[t]], v)[0]
kv = {}
for _ in range(nkv):
    k = s(); t, = struct.unpack_from("<I", b, o); o += 4; kv[k] = val(t)
ti = {}
for _ in range(nt):
    name = s(); nd, = struct.unpack_from("<I", b, o); o += 4
    dims = struct.unpack_from("<%dQ" % nd, b, o); o += 8 * nd
    ty, off = struct.unpack_from("<IQ", b, o); o += 12
    ti[name] = (dims, ty, off)
al = kv.get("general.alignment", 32); base = (o + al - 1) // al * al
dims, ty, off = ti["output.weight"]
BLK = {8: (32, 34), 14: (256, 210)}   # Q8_0, Q6_K: an all-zero block is 0 (its scale d is 0)
assert ty in BLK, "output.weight is neither Q8_0 nor Q6_K"
rb = dims[0] // BLK[ty][0] * BLK[ty][1]
bad = [i for i, t in enumerate(kv["tokenizer.ggml.tokens"]) if len(t) == 6 and t.startswith("<0x") and int(t[3:5], 16) >= 0x80]
for i in bad:
    f.seek(base + off + i * rb); f.write(bytes(rb))
print("bench_batch: zeroed %d byte-token output rows" % len(bad))
EOF2
    if [ "$SRC" != "$MODEL" ]; then
        nice "$BIN" quantize "$SRC" "$MODEL" Q4_K --type-dense Q8_0 --allow-requantize || exit 1
        rm -f "$SRC"
    fi
    touch "$MODEL.patched"
fi

# ---- cgroups: memory (page cache included) and the disk's read throttle --------------------------
CG=/sys/fs/cgroup/memory/dfbatch.$$
BCG=/sys/fs/cgroup/blkio/dfbatch.$$
CGNOTE="no cgroup (--mem-limit only)"
if mkdir "$CG" 2>/dev/null && echo "$LIMIT" > "$CG/memory.limit_in_bytes" 2>/dev/null; then
    echo 0 > "$CG/memory.swappiness" 2>/dev/null
    CGNOTE="memory cgroup v1 $LIMIT"
else
    rmdir "$CG" 2>/dev/null; CG=""
fi
DEV=$(stat -c '%d' "$MODEL"); MAJ=$((DEV >> 8)); MIN=$((DEV & 255))
if [ "$BPS" != 0 ] && mkdir "$BCG" 2>/dev/null && echo "$MAJ:$MIN $BPS" > "$BCG/blkio.throttle.read_bps_device" 2>/dev/null; then
    CGNOTE="$CGNOTE, reads throttled to $(awk -v b=$BPS 'BEGIN {printf "%.2f", b / 1e9}') GB/s (blkio $MAJ:$MIN)"
else
    rmdir "$BCG" 2>/dev/null; BCG=""
    [ "$BPS" != 0 ] && CGNOTE="$CGNOTE, no disk throttle"
fi
IN_CG() { exec sh -c 'for g in $CGS; do echo $$ > "$g/cgroup.procs" || exit 1; done; exec "$@"' in_cg "$@"; }
CGS="$CG $BCG"; export CGS
RES="$DIR/batch_results.$$"
: > "$RES"
SPID=""
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
    for g in $CG $BCG; do rmdir "$g" 2>/dev/null; done
    rm -f "$RES"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
. "$(dirname "$0")/bench_lib.sh"

PORT=$((18000 + $$ % 1000))
read_bytes() { # the blkio cgroup's bytes read from the model's device (empty without the cgroup)
    [ -n "$BCG" ] && awk -v d="$MAJ:$MIN" '$1 == d && $2 == "Read" {print $3}' "$BCG/blkio.throttle.io_service_bytes"
}
wait_up() { # $1 url: /health 200 within the timeout
    i=0
    while [ $i -lt 600 ]; do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0
        kill -0 "$SPID" 2>/dev/null || return 1
        sleep 0.5; i=$((i + 1))
    done
    return 1
}

# the client: N threads, one streamed completion each; prints "tok/s tokens window_s first_s"
client() { # $1 url, $2 streams, $3 engine
    timeout "$TIMEOUT" $PY - "$1" "$2" "$N_GEN" "$3" <<'EOF'
import http.client, json, sys, threading, time, urllib.parse
url, n, ngen, engine = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
u = urllib.parse.urlparse(url)
prompts = ["Hello", "World", "Once upon", "The dog", "Rain", "Stars at", "Green", "A long road"]
res = [None] * n
t0 = time.time()
def one(i):
    body = {"prompt": prompts[i % len(prompts)] + " %d" % i, "max_tokens": ngen, "temperature": 0, "stream": True,
            "ignore_eos": True, "cache_prompt": False}
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    first = last = None; events = 0; usage = None
    for raw in r:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"): continue
        d = line[5:].strip()
        if d == "[DONE]": break
        try: o = json.loads(d)
        except ValueError: continue
        if o.get("usage"): usage = o["usage"]
        ch = o.get("choices") or []
        if ch and (ch[0].get("text") or "") != "" or ch and ch[0].get("finish_reason") is None and "text" in ch[0]:
            now = time.time()
            events += 1
            if first is None: first = now
            last = now
    toks = usage["completion_tokens"] if usage and "completion_tokens" in usage else events
    res[i] = (first, last, toks)
th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in th: t.start()
for t in th: t.join()
ok = [r for r in res if r and r[0] is not None]
if len(ok) < n:
    print("0 0 0 0"); sys.exit(0)
t_all = max(r[0] for r in ok); t_end = max(r[1] for r in ok)
toks = sum(r[2] - 1 for r in ok)
# tokens produced before every stream had started are not in the window: count the window's share
win = t_end - t_all
if win <= 0: print("0 %d 0 %.3f" % (toks, t_all - t0)); sys.exit(0)
inwin = sum((r[2] - 1) * max(0.0, (r[1] - max(r[0], t_all))) / max(1e-9, r[1] - r[0]) for r in ok)
print("%.4f %d %.3f %.3f" % (inwin / win, toks, win, t_all - t0))
EOF
}

run_one() { # $1 engine, $2 streams, $3 rep
    df_drop_cache "$MODEL"
    LOG="$DIR/batch_srv.$1.$2.$3.log"   # kept for inspection
    if [ "$1" = deltafin ]; then
        IN_CG "$BIN" serve -m "$MODEL" --port $PORT --parallel "$2" -c $CTX -t $THREADS --mem-limit $LIMIT \
            --queue 16 -v >"$LOG" 2>&1 &
    else
        IN_CG "$LLAMA_BIN/llama-server" -m "$MODEL" --port $PORT -np "$2" -c $((CTX * $2)) -t $THREADS \
            --no-repack --no-warmup -cb >"$LOG" 2>&1 &
    fi
    SPID=$!
    if ! wait_up "http://127.0.0.1:$PORT"; then
        echo "  $1 -np $2: server did not come up: $(tail -2 "$LOG" | tr '\n' ' ')"
        kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""; return
    fi
    R0=$(read_bytes)
    OUT=$(client "http://127.0.0.1:$PORT" "$2" "$1")
    R1=$(read_bytes)
    [ -n "$OUT" ] || OUT="0 0 0 0"
    set -- "$1" "$2" "$3" $OUT
    # bytes the cgroup read from the model's disk while the client ran, per generated token
    BPT=$(awk -v a="$R0" -v b="$R1" -v t="$5" 'BEGIN {printf "%.0f", (a != "" && b != "" && t > 0) ? (b - a) / t : -1}')
    EXTRA="-"
    if [ "$1" = deltafin ]; then
        M=$(curl -s "http://127.0.0.1:$PORT/metrics")
        EXTRA=$(echo "$M" | awk '/^deltafin_batch_steps_total /{s=$2} /^deltafin_batch_slots_total /{q=$2}
            /^deltafin_batch_experts_acquired_total /{u=$2} /^deltafin_batch_experts_alone_total /{a=$2}
            /^deltafin_expert_cache_hits_total /{h=$2} /^deltafin_expert_cache_misses_total /{m=$2}
            END {printf "%.2f/%.0f/%.0f/%.3f", (s ? q / s : 0), u, a, (h + m ? h / (h + m) : 0)}')
    fi
    kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""
    echo "$3 $1 $2 $4 $5 $6 $7 $EXTRA $BPT" >> "$RES"
    printf "  rep %s %-12s %d streams: %8s tok/s aggregate (%s tokens in %s s; first tokens after %s s) %.1f MB read/token %s\n" \
        "$3" "$1" "$2" "$4" "$5" "$6" "$7" "$(awk -v b=$BPT 'BEGIN {print b / 1e6}')" \
        "$([ "$EXTRA" = - ] || echo "slots/step, experts acquired/alone, hit rate $EXTRA")"
}

HAVE_LLAMA=0
[ "$LLAMA" = 1 ] && [ -x "$LLAMA_BIN/llama-server" ] && HAVE_LLAMA=1
echo "== $MODEL ($(du -h "$MODEL" | cut -f1)), $CGNOTE, $THREADS threads, $N_GEN tokens per stream, streams $STREAMS, $REPEAT repetitions, start $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ $r -le $REPEAT ]; do
    for n in $STREAMS; do
        run_one deltafin "$n" $r
        [ $HAVE_LLAMA = 1 ] && run_one llama-server "$n" $r
    done
    r=$((r + 1))
done
echo "== end $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
$PY - "$RES" "$RECORD" "$(date +%Y-%m-%d)" "$COMMIT" "$LAYERS" "$N_EXPERT" "$CGNOTE" "$N_GEN" "$THREADS" \
    "$(cut -d' ' -f1 /proc/loadavg)" "$EMBD" "$FF" "$([ $QUICK = 1 ] && echo generated || echo "$(basename "$K2G") (byte-token output rows >= 0x80 zeroed)")" <<'EOF'
import sys, statistics as S
res, record, date, commit, layers, nexp, cg, ngen, threads, load, embd, ff, model = sys.argv[1:]
rows = [l.split() for l in open(res) if l.strip()]
by = {}
for r in rows: by.setdefault((r[1], int(r[2])), []).append(r)
med = lambda v: S.median(v) if v else 0
print("\n%-13s %7s %5s %14s %s" % ("engine", "streams", "n", "tok/s median", "samples"))
tps = {}
for (e, n), rs in sorted(by.items()):
    v = [float(r[3]) for r in rs]
    tps[(e, n)] = (med(v), v, rs)
    print("%-13s %7d %5d %14.3f %s" % (e, n, len(rs), med(v), ",".join("%.3f" % x for x in v)))
geo = "%s: qwen3moe K2 expert geometry (hidden %s, width %s, top-8 of %s), %s layers, Q4_K experts, %s, %s tokens/stream, %s threads" % (
    model, embd, ff, nexp, layers, cg, ngen, threads)
out = []
d1 = tps.get(("deltafin", 1))
for n in sorted({k[1] for k in tps}):
    d = tps.get(("deltafin", n)); l = tps.get(("llama-server", n))
    if not d: continue
    extra = [r[7] for r in d[2] if len(r) > 7]
    mb = lambda rs: ",".join("%.0f" % (float(r[8]) / 1e6) for r in rs if len(r) > 8)
    hit = ",".join("%.1f%%" % (100 * float(x.split("/")[3])) for x in extra if x.count("/") == 3)
    note = "deltafin %s tok/s, %s MB read/token, expert cache hit rate %s (slots/step, experts acquired/alone/hit rate: %s)" % (
        ",".join("%.3f" % x for x in d[1]), mb(d[2]), hit, ";".join(extra))
    if l: note += "; llama-server -np %d %s tok/s, %s MB read/token" % (n, ",".join("%.3f" % x for x in l[1]), mb(l[2]))
    note += "; MB read/token = the blkio cgroup's reads during the run / tokens; machine loaded: 2 vCPUs shared by 8 engineers' builds and tests, load avg %s" % load
    if l:
        out.append("\t".join([date, commit, "batching", "deltafin serve --parallel %d vs llama-server -np %d aggregate decode, %s" % (n, n, geo),
                              "aggregate gen tok/s", "%.3f" % d[0], "%.3f" % l[0], "%.2f" % (d[0] / l[0] if l[0] else 0), "yes",
                              note + ("; target >= 1.5x at 4 streams" if n == 4 else "")]))
    if d1 and n > 1:
        out.append("\t".join([date, commit, "batching", "deltafin serve --parallel %d aggregate vs 1 stream, %s" % (n, geo),
                              "aggregate gen tok/s", "%.3f" % d[0], "%.3f" % d1[0], "%.2f" % (d[0] / d1[0] if d1[0] else 0), "yes",
                              note + ("; target >= 1.4x at 4 streams" if n == 4 else "")]))
for o in out: print(o)
if record == "1" and out:
    with open("docs/experiments.tsv", "a") as f:
        for o in out: f.write(o + "\n")
    print("recorded %d rows in docs/experiments.tsv" % len(out))
EOF
