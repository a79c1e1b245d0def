#!/bin/sh
# test_stream.sh — end to end: a random qwen3moe model gives the same greedy tokens with routed
# experts resident and streamed from disk, for every I/O engine, expert-cache sizes from 2 slots
# to all resident, prefetch on/off (on = with router look-ahead reads) and a pinned hot set;
# look-ahead starts reads and reports its accuracy (-v, --json), also for deepseek2, kimi-k3 and gpt-oss;
# qwen3next, qwen35moe, glm4moe, minimax-m2, glm-dsa and deepseek32 give the same tokens for every
# engine, prefetch mode and --mem-limit; a too-small --mem-limit is refused with
# the bytes needed; an injected read error fails cleanly naming layer, expert, file and offset;
# `deltafin pack` writes a file whose checksums verify and detects a corrupted record.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
T=$(mktemp -d /tmp/df_test_stream.XXXXXX)
trap 'rm -rf "$T"' EXIT
# a private copy: other builds relinking $BIN while this runs must not break it
cp "$BIN" "$T/deltafin" || { echo "test_stream: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_stream: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

# 16 experts x 3 layers of 216 KiB (q8_0, n_embd 256, n_ff_exp 256)
"$DEVBIN" gen-random --arch qwen3moe --type q8_0 --n-embd 256 --n-layer 3 --n-head 4 --n-head-kv 2 \
    --head-dim 64 --n-expert 16 --n-expert-used 4 --n-ff-exp 256 --vocab bytes --seed 7 "$T/m.gguf" \
    >/dev/null 2>&1 || { echo "test_stream: gen-random failed"; exit 1; }

run() { # $1 = label, rest = extra args; prints the token list
    "$BIN" run -m "$T/m.gguf" -p "The quick brown fox" -n 24 --temp 0 -t 2 --json "$@" 2>"$T/err" |
        grep -o '"tokens":\[[0-9,]*\]'
}

REF=$(DELTAFIN_STREAM=0 run)
[ -n "$REF" ] || { echo "test_stream: reference run failed: $(cat "$T/err")"; exit 1; }

for io in pread direct uring mmap; do
    for cache in 432K 1M 3M 64M; do
        for pf in on off; do
            OUT=$(DELTAFIN_EXPERT_CACHE=$cache run --io $io --prefetch $pf)
            if [ "$OUT" = "$REF" ]; then :; else
                if [ $io = uring ] && grep -q "not available" "$T/err"; then continue; fi
                bad "io=$io cache=$cache prefetch=$pf: tokens differ: $OUT vs $REF ($(tail -1 "$T/err"))"
            fi
        done
    done
done
[ $fail = 0 ] && ok "same tokens for 4 engines x 4 cache sizes x prefetch on/off"
for cache in 432K 3M; do
    OUT=$(DELTAFIN_EXPERT_CACHE=$cache run --io pread --prefetch auto)
    [ "$OUT" = "$REF" ] || bad "io=pread cache=$cache prefetch=auto: tokens differ: $OUT vs $REF ($(tail -1 "$T/err"))"
done

# router look-ahead: --prefetch on starts reads for the next layer's predicted experts and
# reports the prediction accuracy; off predicts and reads nothing ahead
la_reads() { sed -n 's/.*look-ahead [a-z]*: accuracy [0-9.]*% ([0-9]*\/[0-9]*), \([0-9]*\) reads.*/\1/p' "$T/err"; }
OUT=$(DELTAFIN_EXPERT_CACHE=3M run --io pread --prefetch on -v)
N=$(la_reads)
[ "$OUT" = "$REF" ] && [ "${N:-0}" -gt 0 ] && ok "look-ahead on: $N reads started, same tokens ($(grep -o 'accuracy [0-9.]*%' "$T/err"))" ||
    bad "look-ahead on: reads '${N}', $OUT ($(tail -1 "$T/err"))"
OUT=$(DELTAFIN_EXPERT_CACHE=3M run --io pread --prefetch off -v)
[ "$OUT" = "$REF" ] && ! grep -q "look-ahead" "$T/err" && grep -q "prefetch 0 issued" "$T/err" &&
    ok "prefetch off: no prefetch, no look-ahead" || bad "prefetch off: $(tail -1 "$T/err")"
J=$(DELTAFIN_EXPERT_CACHE=3M "$BIN" run -m "$T/m.gguf" -p "The quick brown fox" -n 8 --temp 0 -t 2 --json --io pread --prefetch on 2>/dev/null)
echo "$J" | grep -q '"stream":{"io":"pread".*"lookahead":{"mode":"on","active":true,.*"accuracy":[0-9.e-]*,"reads":[1-9]' &&
    ok "run --json reports stream and look-ahead statistics" || bad "run --json: $J"
J=$(DELTAFIN_EXPERT_CACHE=3M "$BIN" bench -m "$T/m.gguf" -p 8 -n 4 -r 1 -t 2 --io pread --prefetch on --json 2>/dev/null)
echo "$J" | grep -q '"lookahead":{"mode":"on",.*"accuracy":' && ok "bench --json reports look-ahead" || bad "bench --json: $J"

# deepseek2 (leading dense layer, groups, sigmoid + bias): look-ahead on the generic MoE path
"$DEVBIN" gen-random --arch deepseek2 --type q8_0 --n-embd 128 --n-layer 4 --n-expert 16 --n-expert-used 4 \
    --n-ff-exp 128 --vocab bytes --seed 5 "$T/d.gguf" >/dev/null 2>&1 || bad "gen-random deepseek2 failed"
runm() { # $1 = model, rest = extra args
    M=$1; shift
    "$BIN" run -m "$M" -p "The quick brown fox" -n 16 --temp 0 -t 2 --json "$@" 2>"$T/err" | grep -o '"tokens":\[[0-9,]*\]'
}
DREF=$(DELTAFIN_STREAM=0 runm "$T/d.gguf")
dfail=0
for cache in 300K 1M; do
    for pf in on off auto; do
        OUT=$(DELTAFIN_EXPERT_CACHE=$cache runm "$T/d.gguf" --io pread --prefetch $pf -v)
        [ -n "$DREF" ] && [ "$OUT" = "$DREF" ] || { dfail=1; bad "deepseek2 cache=$cache prefetch=$pf: $OUT vs $DREF ($(tail -1 "$T/err"))"; }
        if [ $pf = on ] && [ $cache = 1M ]; then
            N=$(la_reads)
            [ "${N:-0}" -gt 0 ] || { dfail=1; bad "deepseek2 look-ahead started no reads: $(tail -1 "$T/err")"; }
        fi
    done
done
[ $dfail = 0 ] && ok "deepseek2: same tokens streamed with prefetch on/off/auto, look-ahead reads"

# kimi-k3 (latent MoE through df_moe_routed, AttnRes): the same look-ahead without arch code
if "$DEVBIN" gen-random --arch kimi-k3 --type q8_0 --n-embd 128 --n-layer 5 --n-expert 16 --n-expert-used 4 \
    --n-ff-exp 64 --vocab bytes --seed 3 "$T/k.gguf" >/dev/null 2>&1; then
    KREF=$(DELTAFIN_STREAM=0 runm "$T/k.gguf")
    kfail=0
    for pf in on off; do
        OUT=$(DELTAFIN_EXPERT_CACHE=300K runm "$T/k.gguf" --io pread --prefetch $pf -v)
        [ -n "$KREF" ] && [ "$OUT" = "$KREF" ] || { kfail=1; bad "kimi-k3 prefetch=$pf: $OUT vs $KREF ($(tail -1 "$T/err"))"; }
        if [ $pf = on ]; then
            N=$(la_reads)
            [ "${N:-0}" -gt 0 ] || { kfail=1; bad "kimi-k3 look-ahead started no reads: $(tail -1 "$T/err")"; }
        fi
    done
    [ $kfail = 0 ] && ok "kimi-k3: same tokens streamed with prefetch on/off, look-ahead reads"
else
    echo "  skip: gen-random --arch kimi-k3 not available"
fi

# gpt-oss (MXFP4 experts with per-expert biases, router bias, sinks, sliding window): every
# engine, two cache sizes, prefetch on/off, and a --mem-limit that makes it stream
"$DEVBIN" gen-random --arch gpt-oss --type q8_0 --expert-type mxfp4 --n-embd 128 --n-layer 4 --n-expert 16 \
    --n-expert-used 4 --n-ff-exp 128 --vocab bytes --seed 3 "$T/g.gguf" >/dev/null 2>&1 || bad "gen-random gpt-oss failed"
GREF=$(DELTAFIN_STREAM=0 runm "$T/g.gguf")
gfail=0
for io in pread direct uring mmap; do
    for cache in 100K 400K; do
        for pf in on off; do
            OUT=$(DELTAFIN_EXPERT_CACHE=$cache runm "$T/g.gguf" --io $io --prefetch $pf)
            [ -n "$GREF" ] && [ "$OUT" = "$GREF" ] || { [ $io = uring ] && grep -q "not available" "$T/err"; } ||
                { gfail=1; bad "gpt-oss io=$io cache=$cache prefetch=$pf: $OUT vs $GREF ($(tail -1 "$T/err"))"; }
        done
    done
done
OUT=$(runm "$T/g.gguf" --mem-limit 27M -v)
[ "$OUT" = "$GREF" ] && grep -q "experts: [0-9]* slots" "$T/err" || { gfail=1; bad "gpt-oss --mem-limit 27M: $OUT ($(tail -2 "$T/err"))"; }
[ $gfail = 0 ] && ok "gpt-oss: same tokens for 4 engines x 2 caches x prefetch on/off and under --mem-limit"
# qwen3next (Gated DeltaNet state + gated attention, sigmoid-gated shared expert): every engine,
# prefetch on/off, a --mem-limit that streams the experts
if "$DEVBIN" gen-random --arch qwen3next --type q8_0 --n-embd 128 --n-layer 4 --n-expert 16 --n-expert-used 4 \
    --n-ff-exp 64 --vocab bytes --seed 3 "$T/n.gguf" >/dev/null 2>&1; then
    NREF=$(DELTAFIN_STREAM=0 runm "$T/n.gguf")
    nfail=0
    for cfg in "pread on" "pread off" "direct on" "uring off" "mmap off"; do
        io=${cfg% *}; pf=${cfg#* }
        OUT=$(DELTAFIN_EXPERT_CACHE=200K runm "$T/n.gguf" --io $io --prefetch $pf)
        [ $io = uring ] && grep -q "not available" "$T/err" && continue
        [ -n "$NREF" ] && [ "$OUT" = "$NREF" ] || { nfail=1; bad "qwen3next io=$io prefetch=$pf: $OUT vs $NREF ($(tail -1 "$T/err"))"; }
    done
    OUT=$(runm "$T/n.gguf" --mem-limit 29M -v)
    grep -q "experts: [0-9]* slots" "$T/err" && [ "$OUT" = "$NREF" ] || { nfail=1; bad "qwen3next --mem-limit 29M: $OUT vs $NREF ($(tail -1 "$T/err"))"; }
    [ $nfail = 0 ] && ok "qwen3next: same tokens for 4 engines, prefetch on/off and --mem-limit 29M (streamed experts)"
else
    bad "gen-random --arch qwen3next failed"
fi
# glm4moe (dense lead, shared expert, NextN layer never read), minimax-m2 and deepseek4
# (hyper-connections, compressed KV with its per-sequence state, hash-routed first layer): every
# --io engine, prefetch mode and a --mem-limit that streams both experts and dense layers
for A in glm4moe minimax-m2 deepseek4; do
    case $A in
        deepseek4) GA=""; LIMS="40M 30M 29M" ;;
        *) GA="--n-ff 128"; LIMS="40M 30M 26M" ;;
    esac
    # shellcheck disable=SC2086
    "$DEVBIN" gen-random --arch $A --type q8_0 --n-embd 128 --n-layer 4 --n-expert 16 --n-expert-used 4 \
        --n-ff-exp 128 $GA --vocab bytes --seed 5 "$T/$A.gguf" >/dev/null 2>&1 || bad "gen-random $A failed"
    GREF=$(DELTAFIN_STREAM=0 runm "$T/$A.gguf")
    gfail=0
    for io in pread direct uring mmap; do
        for pf in on off auto; do
            OUT=$(DELTAFIN_EXPERT_CACHE=400K runm "$T/$A.gguf" --io $io --prefetch $pf)
            [ -n "$GREF" ] && [ "$OUT" = "$GREF" ] || { gfail=1; bad "$A io=$io prefetch=$pf: $OUT vs $GREF ($(tail -1 "$T/err"))"; }
        done
    done
    for lim in $LIMS; do
        OUT=$(runm "$T/$A.gguf" --mem-limit $lim)
        [ "$OUT" = "$GREF" ] || { gfail=1; bad "$A --mem-limit $lim: $OUT vs $GREF ($(tail -1 "$T/err"))"; }
    done
    for io in pread direct; do # every dense layer streamed as well (glm4moe: 3 of its 4 blocks run)
        OUT=$(DELTAFIN_DENSE_RESIDENT=0 DELTAFIN_EXPERT_CACHE=400K runm "$T/$A.gguf" --io $io -v)
        [ "$OUT" = "$GREF" ] && grep -q "dense: 0 of [34] layers resident" "$T/err" ||
            { gfail=1; bad "$A dense layers streamed (io $io): $OUT vs $GREF ($(tail -1 "$T/err"))"; }
    done
    [ $gfail = 0 ] && ok "$A: same tokens for every --io engine, prefetch on/off/auto, --mem-limit $LIMS, dense layers streamed"
done

# sparse attention (glm-dsa: shared indexer layers and a NextN layer; deepseek32) and qwen35moe:
# every --io engine x prefetch on/off/auto, three --mem-limit values from the plan's own minimum
# (experts and dense layers streamed by the plan) and every dense layer streamed
for spec in "glm-dsa:--n-layer 5 --n-ff 128" "deepseek32:--n-layer 4 --n-ff 128" "qwen35moe:--n-layer 4"; do
    A=${spec%%:*}; extra=${spec#*:}
    # shellcheck disable=SC2086
    "$DEVBIN" gen-random --arch $A --type q8_0 --n-embd 128 --n-expert 16 --n-expert-used 4 --n-ff-exp 128 \
        $extra --vocab bytes --seed 5 "$T/$A.gguf" >/dev/null 2>&1 || { bad "gen-random $A failed"; continue; }
    GREF=$(DELTAFIN_STREAM=0 runm "$T/$A.gguf")
    gfail=0
    for io in pread direct uring mmap auto; do
        for pf in on off auto; do
            OUT=$(DELTAFIN_EXPERT_CACHE=400K runm "$T/$A.gguf" --io $io --prefetch $pf)
            [ $io = uring ] && grep -q "not available" "$T/err" && continue
            [ -n "$GREF" ] && [ "$OUT" = "$GREF" ] || { gfail=1; bad "$A io=$io prefetch=$pf: $OUT vs $GREF ($(tail -1 "$T/err"))"; }
        done
    done
    "$BIN" run -m "$T/$A.gguf" -p x -n 1 --mem-limit 1M >/dev/null 2>"$T/err"
    need=$(sed -n 's/.*too small: need at least \([0-9.]*\) MiB.*/\1/p' "$T/err")
    if [ -z "$need" ]; then gfail=1; bad "$A --mem-limit 1M: no minimum given: $(tail -1 "$T/err")"; fi
    for add in 0.3 2 6; do
        [ -n "$need" ] || break
        lim=$(awk -v n="$need" -v e="$add" 'BEGIN { printf "%d", (n + e) * 1048576 }')
        OUT=$(runm "$T/$A.gguf" --mem-limit $lim -v)
        [ "$OUT" = "$GREF" ] && grep -q "experts: [0-9]* slots" "$T/err" ||
            { gfail=1; bad "$A --mem-limit $lim (minimum $need MiB + $add): $OUT vs $GREF ($(tail -1 "$T/err"))"; }
    done
    for io in pread direct; do
        OUT=$(DELTAFIN_DENSE_RESIDENT=0 DELTAFIN_EXPERT_CACHE=400K runm "$T/$A.gguf" --io $io -v)
        [ "$OUT" = "$GREF" ] && grep -q "dense: 0 of 4 layers resident" "$T/err" ||
            { gfail=1; bad "$A dense layers streamed (io $io): $OUT vs $GREF ($(tail -1 "$T/err"))"; }
    done
    # profile -> --hot pins experts; the packed file streams experts and dense layers: same tokens
    if "$BIN" profile -m "$T/$A.gguf" -f "$(dirname "$0")/data/profile_prompts.txt" -n 4 -t 2 -o "$T/$A.hot" >/dev/null 2>"$T/err"; then
        OUT=$(DELTAFIN_EXPERT_CACHE=400K runm "$T/$A.gguf" --io pread --hot "$T/$A.hot" -v)
        [ "$OUT" = "$GREF" ] && grep -q -- "--hot: pinned [1-9][0-9]* of" "$T/err" ||
            { gfail=1; bad "$A profile + --hot: $OUT vs $GREF ($(grep -- '--hot' "$T/err" | tail -1))"; }
    else
        gfail=1; bad "$A profile: $(tail -1 "$T/err")"
    fi
    if "$BIN" pack -q "$T/$A.gguf" "$T/$A.p.gguf" 2>"$T/err"; then
        OUT=$(DELTAFIN_DENSE_RESIDENT=0 DELTAFIN_EXPERT_CACHE=400K runm "$T/$A.p.gguf" --io direct -v)
        [ "$OUT" = "$GREF" ] && grep -q "dense: 0 of 4 layers resident" "$T/err" ||
            { gfail=1; bad "$A packed, experts and dense layers streamed: $OUT vs $GREF ($(tail -1 "$T/err"))"; }
    else
        gfail=1; bad "$A pack: $(tail -1 "$T/err")"
    fi
    rm -f "$T/$A.p.gguf"
    [ $gfail = 0 ] && ok "$A: same tokens for 5 --io engines x prefetch on/off/auto, 3 --mem-limit values from the minimum up, dense layers streamed, profile + --hot, the packed file"
done

# streaming because the experts do not fit the memory limit (auto engine)
# (fixed part ~36 MiB incl. the ~20 MiB overhead the plan counts; experts 10 MiB)
OUT=$(run --mem-limit 40M -v)
grep -q "memory plan" "$T/err" && grep -q "experts: [0-9]* slots" "$T/err" && [ "$OUT" = "$REF" ] &&
    ok "--mem-limit 40M streams, same tokens" || bad "--mem-limit 40M: $OUT ($(tail -2 "$T/err"))"

# hot set from a routing-count file and a preload list
printf '# layer expert count\n0 3 90\n1 7 80\n2 1 70\n0 5 60\n' > "$T/hot.txt"
OUT=$(DELTAFIN_EXPERT_CACHE=3M run --io pread --hot "$T/hot.txt" --preload 2:2,1:1 -v)
[ "$OUT" = "$REF" ] && grep -q "(6 hot)" "$T/err" && ok "--hot/--preload pin experts, same tokens" ||
    bad "--hot: $OUT ($(tail -1 "$T/err"))"

# refusal with the bytes needed
"$BIN" run -m "$T/m.gguf" -p "x" -n 1 --io pread --mem-limit 20M -t 2 >/dev/null 2>"$T/err"
[ $? -ne 0 ] && grep -q "too small: need at least" "$T/err" && ok "too small --mem-limit refused" ||
    bad "--mem-limit 20M: $(cat "$T/err")"

# injected I/O error: clean failure naming layer, expert, file and offset
DELTAFIN_FAULT=eio:7 DELTAFIN_EXPERT_CACHE=1M "$BIN" run -m "$T/m.gguf" -p "x" -n 4 --io pread -t 2 \
    >/dev/null 2>"$T/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "layer [0-9]* expert [0-9]* .*m.gguf: read of [0-9]* bytes at offset [0-9]* failed: Input/output error" "$T/err" &&
    ok "injected EIO reported" || bad "injected EIO: rc=$rc $(cat "$T/err")"

# pack + check + corruption detection
"$BIN" pack -q "$T/m.gguf" "$T/p.gguf" 2>"$T/err" && [ ! -e "$T/p.gguf.tmp" ] &&
    "$BIN" pack --check "$T/p.gguf" >"$T/out" 2>&1 && grep -q "48 expert records, all checksums match" "$T/out" &&
    ok "pack + --check" || bad "pack: $(cat "$T/err" "$T/out")"
# the packed model runs (one checksummed read per expert) with the same tokens
pfail=0
for io in pread direct uring mmap; do
    for cache in 420K 3M 64M; do
        OUT=$(DELTAFIN_EXPERT_CACHE=$cache "$BIN" run -m "$T/p.gguf" -p "The quick brown fox" -n 24 --temp 0 -t 2 --json --io $io \
              2>"$T/err" | grep -o '"tokens":\[[0-9,]*\]')
        [ "$OUT" = "$REF" ] || { [ $io = uring ] && grep -q "not available" "$T/err"; } ||
            { pfail=1; bad "packed io=$io cache=$cache: $OUT ($(tail -1 "$T/err"))"; }
    done
done
[ $pfail = 0 ] && ok "packed model: same tokens for 4 engines x 3 cache sizes"
DELTAFIN_PACK_FAIL_AFTER=5 "$BIN" pack -q "$T/m.gguf" "$T/q.gguf" 2>/dev/null
[ $? -ne 0 ] && [ ! -e "$T/q.gguf" ] && [ ! -e "$T/q.gguf.tmp" ] && ok "interrupted pack leaves no output" ||
    bad "interrupted pack left a file"
SIZE=$(stat -c %s "$T/p.gguf")
printf 'X' | dd of="$T/p.gguf" bs=1 seek=$((SIZE - 200000)) conv=notrunc 2>/dev/null
"$BIN" pack --check "$T/p.gguf" >/dev/null 2>"$T/err"
[ $? -ne 0 ] && grep -q "layer [0-9]* expert [0-9]*: checksum mismatch in .*p.gguf at offset" "$T/err" &&
    ok "corrupted record detected" || bad "corruption: $(cat "$T/err")"

[ $fail = 0 ] && echo "test_stream: all passed" || echo "test_stream: FAILED"
exit $fail
