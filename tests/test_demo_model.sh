#!/bin/sh
# test_demo_model.sh — checks of the shipped demo MoE model (models/demo-moe-*.gguf, trained by
# scripts/train_demo_moe.py; see models/README.md). Python-free: only sh, sed, awk.
#   1. both files load and `deltafin run --temp 0` gives llama.cpp's greedy token ids
#      (recorded in tests/data/expected/demo_moe_greedy.tsv with scripts/llama_oracle.c; a
#      divergence is accepted only at a step where llama.cpp's top-2 logits are a near-tie)
#   2. the routing is genuinely uneven: `deltafin profile` expert counts (skipped, with a
#      message, while this build has no profile subcommand)
#   3. byte-identical output whatever the expert cache size: greedy ids with the smallest
#      memory limit deltafin accepts = ids with every expert resident (skipped, with a message,
#      when the build keeps every expert resident anyway)
# Prints one PASS/FAIL/SKIP line per check; exit 1 if anything failed.
cd "$(dirname "$0")/.." || exit 1
BIN=${DELTAFIN_BIN:-build/deltafin}
EXP=tests/data/expected/demo_moe_greedy.tsv
NEAR_TIE=0.01
fails=0
pass() { echo "demo-model: PASS $*"; }
fail() { echo "demo-model: FAIL $*"; fails=$((fails + 1)); }
skip() { echo "demo-model: SKIP $*"; }
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

[ -x "$BIN" ] || { fail "no deltafin binary at $BIN"; exit 1; }
# a private copy: other builds may relink $BIN while this runs
cp "$BIN" "$TMP/deltafin" || { fail "cannot copy $BIN"; exit 1; }
BIN=$TMP/deltafin
[ -f "$EXP" ] || { fail "missing $EXP"; exit 1; }

ids_of() { sed -n 's/.*"tokens":\[\([^]]*\)\].*/\1/p' "$1" | tail -n 1; }
field() { sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p" "$1" | tail -n 1; }

# ---- 1. greedy ids = llama.cpp's (file <TAB> prompt <TAB> n <TAB> prompt ids <TAB> ids <TAB> gaps)
while IFS='	' read -r file prompt n pids want gaps; do
    case "$file" in '#'*|'') continue ;; esac
    name="greedy $(basename "$file") \"$prompt\""
    if [ ! -f "$file" ]; then fail "$name: $file missing"; continue; fi
    if ! "$BIN" run -m "$file" -p "$prompt" -n "$n" --temp 0 --json >"$TMP/out" 2>"$TMP/err"; then
        fail "$name: deltafin run failed: $(tail -n 1 "$TMP/err")"; continue
    fi
    got=$(ids_of "$TMP/out")
    verdict=$(awk -v got="$got" -v want="$want" -v gaps="$gaps" -v tie="$NEAR_TIE" 'BEGIN {
        ng = split(got, g, ","); nw = split(want, w, ","); split(gaps, d, ",")
        for (i = 1; i <= nw || i <= ng; i++) {
            if (i > ng || i > nw || g[i] != w[i]) {
                # gaps[i] is llama.cpp top-1 minus top-2 at step i (the choice of want[i])
                if ((i in d) && d[i] + 0 < tie) { printf "tie %d %s", i - 1, d[i]; exit }
                printf "diff %d got %s want %s", i - 1, (i <= ng ? g[i] : "end"), (i <= nw ? w[i] : "end"); exit
            }
        }
        printf "same %d", nw }')
    case "$verdict" in
        same*) pass "$name: ${verdict#same } ids identical to llama.cpp" ;;
        tie*)  pass "$name: identical up to a near-tie of llama.cpp's logits ($verdict)" ;;
        *)     fail "$name: first difference $verdict" ;;
    esac
done < "$EXP"

# ---- 2. uneven expert usage
MQ=models/demo-moe-q8_0.gguf
if "$BIN" profile --help >/dev/null 2>&1; then
    if "$BIN" profile -m "$MQ" -p "Once upon a time" -n 200 >"$TMP/prof" 2>&1; then
        # Expect per-expert selection counts; the statistic: the busiest expert of a layer is
        # selected at least 2x as often as the least used one, in at least one layer, and no
        # layer has an expert that is never used over 200 tokens (routing is used).
        echo "demo-model: profile output:"; sed 's/^/    /' "$TMP/prof" | head -n 40
        skip "expert usage: deltafin profile exists; wire its output format into this check"
    else
        fail "expert usage: deltafin profile failed: $(tail -n 1 "$TMP/prof")"
    fi
else
    skip "expert usage: this build has no 'deltafin profile' (models/README.md lists the measured histogram)"
fi

# ---- 3. tiny expert cache gives the same tokens as all experts resident
if ! "$BIN" run --help 2>&1 | grep -q -- "--mem-limit"; then
    skip "tiny cache: deltafin run has no --mem-limit"
else
    P="Once upon a time"
    "$BIN" run -m "$MQ" -p "$P" -n 120 --temp 0 --json >"$TMP/full" 2>"$TMP/err" ||
        fail "tiny cache: resident run failed: $(tail -n 1 "$TMP/err")"
    lo=0; hi=1073741824
    accepts() { "$BIN" run -m "$MQ" -p "$P" -n 1 --temp 0 --mem-limit "$1" >/dev/null 2>&1; }
    if accepts $hi; then
        while [ $((hi - lo)) -gt 4096 ]; do
            mid=$(( (lo + hi) / 2 ))
            if accepts $mid; then hi=$mid; else lo=$mid; fi
        done
        "$BIN" run -m "$MQ" -p "$P" -n 120 --temp 0 --json --mem-limit $hi >"$TMP/tiny" 2>"$TMP/err" ||
            fail "tiny cache: run at --mem-limit $hi failed: $(tail -n 1 "$TMP/err")"
        miss=$(field "$TMP/tiny" expert_misses)
        if [ -z "$miss" ] || [ "$miss" = 0 ]; then
            skip "tiny cache: at the smallest accepted limit ($hi B) no expert was read on demand (streaming not active in this build)"
        elif [ "$(ids_of "$TMP/tiny")" = "$(ids_of "$TMP/full")" ]; then
            pass "tiny cache: --mem-limit $hi ($miss expert misses, $(field "$TMP/tiny" bytes_read) B read) = all resident, 120 ids"
        else
            fail "tiny cache: ids at --mem-limit $hi differ from all-resident ids"
        fi
    else
        fail "tiny cache: deltafin refuses a 1 GiB limit for a 3 MiB model"
    fi
fi

[ $fails -eq 0 ]
