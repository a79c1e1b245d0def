#!/bin/sh
# test_mpi.sh — routed experts spread over MPI ranks (docs/distributed.md), on one machine with
# `mpirun --oversubscribe`: greedy tokens identical to the single-process run for 1-4 ranks, for
# every architecture with routed experts (qwen3moe, deepseek2 and kimi-k3 in the full matrix;
# gpt-oss, qwen3next, qwen35moe, glm4moe, minimax-m2, deepseek32, olmoe, qwen2moe and llama-moe
# at 1-4 ranks plain, packed, a 2-slot cache and a memory limit; a dense llama runs on rank 0
# alone), plain and packed files, a plain rank 0 with packed workers,
# several expert-cache sizes and memory limits (each rank its own), a balanced placement from
# `deltafin profile`, a layer's reads balanced over the ranks or kept at home; -v and --json report the communication per layer and each rank's cache;
# a worker with another model, one whose limit is too small, one killed and one hung end the run
# with an error naming the rank, within the timeout, leaving no process behind.
# Skips unless $DELTAFIN_BIN (or $DELTAFIN_MPI_BIN) is an MPI build (`make MPI=1 test`, CI) and
# mpirun is installed.
set -u
BIN=${DELTAFIN_MPI_BIN:-${DELTAFIN_BIN:-build/deltafin}}
if ! "$BIN" --version 2>/dev/null | grep -q "built with MPI"; then
    echo "test_mpi: skipped ($BIN is built without MPI: make MPI=1 test runs this)"; exit 0
fi
command -v mpirun >/dev/null 2>&1 || { echo "test_mpi: skipped (mpirun not installed: scripts/deps.sh --mpi)"; exit 0; }
T=$(mktemp -d /tmp/df_test_mpi.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || exit 1   # a private copy: a concurrent relink must not pull it away
BIN="$T/deltafin"
# gen-random lives in the dev binary when there is one
DEV=${DELTAFIN_DEV_BIN:-}
[ -z "$DEV" ] && [ -x "$(dirname "${DELTAFIN_MPI_BIN:-${DELTAFIN_BIN:-build/deltafin}}")/deltafin-dev" ] &&
    DEV="$(dirname "${DELTAFIN_MPI_BIN:-${DELTAFIN_BIN:-build/deltafin}}")/deltafin-dev"
[ -z "$DEV" ] && DEV=$BIN
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# containers often forbid the cross-process copy (ptrace) shared memory would use
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
unset DELTAFIN_STREAM DELTAFIN_EXPERT_CACHE
MPIRUN="mpirun --oversubscribe --bind-to none"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }
toks() { grep -o '"tokens":\[[0-9,]*\]'; }
PROMPT="The little dog ran to the park and"

gen() { # name, gen-random args
    N=$1; shift
    "$DEV" gen-random "$@" --vocab bytes "$T/$N.gguf" >/dev/null 2>"$T/err" || { echo "test_mpi: gen-random $N: $(tail -1 "$T/err")"; exit 1; }
    "$BIN" pack -q "$T/$N.gguf" "$T/$N.packed.gguf" 2>"$T/err" || { echo "test_mpi: pack $N: $(tail -1 "$T/err")"; exit 1; }
}
gen q --arch qwen3moe --type q8_0 --n-embd 128 --n-layer 3 --n-head 4 --n-head-kv 2 --head-dim 32 \
    --n-expert 16 --n-expert-used 4 --n-ff-exp 128 --seed 7
gen d --arch deepseek2 --variant k2 --type q8_0 --n-layer 4 --n-expert 16 --n-expert-used 4 --seed 6
gen k --arch kimi-k3 --type q8_0 --expert-type mxfp4 --n-expert 16 --n-expert-used 4 --seed 2
gen q2 --arch qwen3moe --type q8_0 --n-embd 128 --n-layer 3 --n-head 4 --n-head-kv 2 --head-dim 32 \
    --n-expert 16 --n-expert-used 4 --n-ff-exp 128 --seed 8   # same shapes, other weights

single() { # model, extra args: the single-process reference (no launcher)
    M=$1; shift
    "$BIN" run -m "$M" -p "$PROMPT" -n 16 --temp 0 -t 1 --json "$@" 2>"$T/err" | toks
}
ranks() { # N, model, extra args
    N=$1; M=$2; shift 2
    timeout 120 $MPIRUN -np "$N" "$BIN" run -m "$M" -p "$PROMPT" -n 16 --temp 0 -t 1 --json "$@" 2>"$T/err" | toks
}

# ---- same tokens for every N, architecture, layout and cache ------------------------------------
for m in q d k; do
    REF=$(single "$T/$m.gguf")
    [ -n "$REF" ] || { bad "$m: single-process run failed: $(tail -1 "$T/err")"; continue; }
    [ "$(single "$T/$m.packed.gguf")" = "$REF" ] || bad "$m: packed single-process run differs"
    mf=0
    for n in 1 2 3 4; do
        OUT=$(ranks $n "$T/$m.gguf")
        [ "$OUT" = "$REF" ] || { mf=1; bad "$m plain, $n ranks: $OUT vs $REF ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    done
    for n in 2 3; do
        OUT=$(ranks $n "$T/$m.packed.gguf")
        [ "$OUT" = "$REF" ] || { mf=1; bad "$m packed, $n ranks: $OUT vs $REF ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    done
    # smallest working cache (2 slots of the plain file) on every rank; an exact cache size; a limit
    case $m in q) C2=144K ;; *) C2=48K ;; esac
    OUT=$(DELTAFIN_EXPERT_CACHE=$C2 ranks 3 "$T/$m.gguf" --io pread)
    [ "$OUT" = "$REF" ] || { mf=1; bad "$m, 3 ranks, 2-slot caches: $OUT ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    OUT=$(ranks 2 "$T/$m.packed.gguf" --cache-size 300K --prefetch on)
    [ "$OUT" = "$REF" ] || { mf=1; bad "$m, 2 ranks, --cache-size 300K: $OUT ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    OUT=$(ranks 4 "$T/$m.gguf" --mem-limit 100M)
    [ "$OUT" = "$REF" ] || { mf=1; bad "$m, 4 ranks, --mem-limit 100M: $OUT ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    [ $mf = 0 ] && ok "$m: same tokens for 1-4 ranks, plain and packed, 2-slot / 300K / 100M limits"
done

# ---- every other architecture with routed experts: 1-4 ranks plain, packed, 2-slot caches, a limit
slot2() { # two expert slots of model $1 (its slot size when streamed), for DELTAFIN_EXPERT_CACHE
    "$BIN" run -m "$1" -p x -n 1 --io pread -v 2>&1 | sed -n 's/^experts: [0-9]* slots x \([0-9.]*\) KiB.*/\1/p' |
        awk '{ printf "%dK", 2 * $1 + 0.999 }'
}
gen o --arch gpt-oss --type q8_0 --expert-type mxfp4 --seed 3
gen n --arch qwen3next --type q8_0 --seed 2
gen n5 --arch qwen35moe --type q8_0 --seed 3
gen g --arch glm4moe --type q8_0 --seed 2
gen x --arch minimax-m2 --type q8_0 --seed 2
gen s --arch deepseek32 --type q8_0 --seed 2
gen e --arch olmoe --type q8_0 --seed 3
gen w --arch qwen2moe --type q8_0 --seed 11
gen lm --arch llama-moe --type q8_0 --seed 4
for m in o n n5 g x s e w lm; do
    REF=$(single "$T/$m.gguf")
    [ -n "$REF" ] || { bad "$m: single-process run failed: $(tail -1 "$T/err")"; continue; }
    mf=0
    for n in 1 2 3 4; do
        OUT=$(ranks $n "$T/$m.gguf")
        [ "$OUT" = "$REF" ] || { mf=1; bad "$m plain, $n ranks: $OUT vs $REF ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    done
    OUT=$(ranks 3 "$T/$m.packed.gguf")
    [ "$OUT" = "$REF" ] || { mf=1; bad "$m packed, 3 ranks: $OUT vs $REF ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    C2=$(slot2 "$T/$m.gguf")
    OUT=$(DELTAFIN_EXPERT_CACHE=$C2 ranks 2 "$T/$m.gguf" --io pread)
    [ -n "$C2" ] && [ "$OUT" = "$REF" ] || { mf=1; bad "$m, 2 ranks, 2-slot caches ($C2): $OUT ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    OUT=$(ranks 4 "$T/$m.gguf" --mem-limit 100M)
    [ "$OUT" = "$REF" ] || { mf=1; bad "$m, 4 ranks, --mem-limit 100M: $OUT ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    [ $mf = 0 ] && ok "$m: same tokens for 1-4 ranks, packed, 2-slot ($C2) / 100M limits"
done
# a dense model: nothing to spread; rank 0 runs it alone, the workers wait and exit
"$DEV" gen-random --arch llama --type q8_0 --vocab bytes --seed 4 "$T/l.gguf" >/dev/null 2>&1
REF=$(single "$T/l.gguf")
OUT=$(ranks 3 "$T/l.gguf")
[ -n "$REF" ] && [ "$OUT" = "$REF" ] && ok "dense llama under 3 ranks: the single-process tokens" ||
    bad "dense llama, 3 ranks: $OUT vs $REF ($(tail -2 "$T/err" | tr '\n' ' '))"

# a layer's reads balanced over the ranks (experts computed away from their home rank) or not
REF=$(single "$T/d.gguf")
bf=0
for b in 0 1; do
    for n in 2 4; do
        OUT=$(DELTAFIN_DIST_BALANCE=$b ranks $n "$T/d.gguf" --cache-size 100K)
        [ "$OUT" = "$REF" ] || { bf=1; bad "DELTAFIN_DIST_BALANCE=$b, $n ranks: $OUT vs $REF ($(tail -2 "$T/err" | tr '\n' ' '))"; }
    done
done
[ $bf = 0 ] && ok "balanced reads on and off (DELTAFIN_DIST_BALANCE), 2 and 4 ranks: same tokens"

# rank 0 on the plain file, the workers on packed copies with their own limits (MPMD)
REF=$(single "$T/q.gguf")
OUT=$(timeout 120 $MPIRUN -np 1 "$BIN" run -m "$T/q.gguf" -p "$PROMPT" -n 16 --temp 0 -t 1 --json \
      : -np 1 "$BIN" run -m "$T/q.packed.gguf" -p x --cache-size 200K \
      : -np 1 "$BIN" run -m "$T/q.packed.gguf" -p x --mem-limit 90M --io pread 2>"$T/err" | toks)
[ "$OUT" = "$REF" ] && ok "plain rank 0, packed workers with their own limits (MPMD): same tokens" ||
    bad "MPMD: $OUT vs $REF ($(tail -2 "$T/err" | tr '\n' ' '))"

# balanced placement from a routing profile; -v and --json statistics
"$BIN" profile -m "$T/q.gguf" -f /dev/stdin -o "$T/hot.txt" -t 1 >/dev/null 2>"$T/err" <<EOF
$PROMPT
Once upon a time there was a little girl
EOF
[ -s "$T/hot.txt" ] || bad "profile: $(tail -1 "$T/err")"
J=$(timeout 120 $MPIRUN -np 3 "$BIN" run -m "$T/q.gguf" -p "$PROMPT" -n 16 --temp 0 -t 1 --json -v \
    --dist-placement "$T/hot.txt" 2>"$T/err")
OUT=$(echo "$J" | toks)
[ "$OUT" = "$REF" ] && grep -q "balanced by" "$T/err" && ok "balanced placement (--dist-placement): same tokens" ||
    bad "balanced placement: $OUT ($(tail -2 "$T/err" | tr '\n' ' '))"
ROWS=$(sed -n '/^dist per layer:/,/^dist rank/p' "$T/err" | grep -c '^ *[0-9]')
[ "$ROWS" = 3 ] && grep -q "^dist: 3 ranks" "$T/err" && [ "$(grep -c '^dist rank [0-9] (' "$T/err")" = 3 ] &&
    ok "-v: communication per layer (3 MoE layers) and each rank's cache" || bad "-v rows $ROWS: $(grep dist "$T/err")"
echo "$J" | /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read())["stats"]["dist"]
assert d["ranks"] == 3 and d["exchanges"] > 0 and d["bytes_out"] > 0 and d["bytes_in"] > 0, d
assert len(d["layers"]) == 3 and all(l["calls"] > 0 and l["rtt_s"] >= l["comm_s"] >= 0 for l in d["layers"]), d["layers"]
pr = d["per_rank"]
assert [r["rank"] for r in pr] == [0, 1, 2] and sum(r["pairs"] for r in pr) == 48, pr
assert all(r["requests"] > 0 and r["bytes_read"] > 0 for r in pr[1:]), pr
' 2>"$T/perr" && ok "--json: stats.dist with per-layer and per-rank figures" || bad "--json dist: $(tail -1 "$T/perr")"

# a command that loads no distributed model ends every rank
timeout 60 $MPIRUN -np 3 "$BIN" info -m "$T/q.gguf" >/dev/null 2>"$T/err" && ok "info under 3 ranks exits cleanly" ||
    bad "info under mpirun: $(tail -2 "$T/err")"

# ---- faults: an error that names the rank, never a hang ------------------------------------------
expect_fail() { # label, pattern, max seconds, mpirun args...
    L=$1; PAT=$2; MAX=$3; shift 3
    t0=$(date +%s)
    timeout 120 $MPIRUN "$@" >/dev/null 2>"$T/err"
    rc=$?; dt=$(( $(date +%s) - t0 ))
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -le "$MAX" ] && grep -q "$PAT" "$T/err"; then
        ok "$L: exit $rc after ${dt} s: $(grep -m1 "$PAT" "$T/err" | cut -c1-150)"
    else bad "$L: rc $rc after ${dt} s: $(tail -3 "$T/err" | tr '\n' ' ')"; fi
}
expect_fail "a worker with another model" "rank 1 (.*different model" 60 \
    -np 1 "$BIN" run -m "$T/q.gguf" -p hi -n 4 : -np 1 "$BIN" run -m "$T/q2.gguf" -p hi
expect_fail "a worker whose memory limit is too small" "rank 2 (.*memory limit .* too small" 60 \
    -np 2 "$BIN" run -m "$T/q.gguf" -p hi -n 4 : -np 1 "$BIN" run -m "$T/q.gguf" -p hi --mem-limit 1M
expect_fail "a worker without the model file" "rank 1 (.*cannot open" 60 \
    -np 1 "$BIN" run -m "$T/q.gguf" -p hi -n 4 : -np 1 "$BIN" run -m "$T/missing.gguf" -p hi

# a worker killed / stopped in the middle of a long benchmark
midrun() { # signal, pattern, max seconds
    SIG=$1; PAT=$2; MAX=$3
    $MPIRUN -np 3 "$BIN" bench -m "$T/q.gguf" -p 0 -n 4000 -r 50 -t 1 --dist-timeout 3 >"$T/out" 2>"$T/err" &
    MP=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q "^deltafin " "$T/out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    sleep 1
    victim=""
    for p in $(pgrep -P $MP); do
        tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2 && victim=$p
    done
    [ -n "$victim" ] || { bad "signal $SIG: no rank 2 found"; kill $MP; wait $MP; return; }
    t0=$(date +%s)
    kill -$SIG "$victim"
    i=0
    while kill -0 $MP 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 $MP 2>/dev/null; then bad "signal $SIG: mpirun still running after 60 s: $(tail -4 "$T/err" | tr '\n' ' ')"; kill $MP; kill -9 "$victim"; wait $MP; return; fi
    wait $MP; rc=$?
    dt=$(( $(date +%s) - t0 ))
    if [ $rc -ne 0 ] && [ $dt -le "$MAX" ] && grep -q "$PAT" "$T/err"; then
        ok "rank 2 got SIG$SIG: exit $rc after ${dt} s: $(grep -m1 "$PAT" "$T/err" | cut -c1-150)"
    else bad "rank 2 got SIG$SIG: rc $rc after ${dt} s: $(tail -4 "$T/err" | tr '\n' ' ')"; fi
}
midrun KILL "rank 2 .*signal 9" 20
midrun STOP "rank 2 (.*did not answer layer [0-9]* within 3.0 s" 20
sleep 1
if pgrep -f "$T/deltafin" >/dev/null; then bad "processes left behind: $(pgrep -f "$T/deltafin" | tr '\n' ' ')"
    for p in $(pgrep -f "$T/deltafin"); do kill -9 "$p"; done
else ok "no process left behind"; fi

[ $fail = 0 ] && echo "test_mpi: all passed" || echo "test_mpi: FAILED"
exit $fail
