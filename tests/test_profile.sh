#!/bin/sh
# test_profile.sh — `deltafin profile` on the shipped demo MoE (models/demo-moe-q8_0.gguf: 5 MoE
# layers, 16 experts, top-2) over tests/data/profile_prompts.txt:
#   1. counts: per layer, the selections sum to 2 x the tokens decoded (prompt token counts from
#      `deltafin tokenize`, independently); the last layer counts only rows whose logits are
#      computed (last prompt token + generated tokens), as llama.cpp's inp_out_ids
#   2. the file is sorted by count, descending, and routing is uneven: the 4 most used of 16
#      experts per layer hold >= 40% of the selections (uniform: 25%, ~33% by chance here)
#   3. `deltafin run --hot FILE` accepts the file under a memory limit that streams experts,
#      pins some of them, and gives the same greedy tokens as with every expert resident and
#      as the same limit without --hot; pinning the profile's hottest experts hits the cache
#      more often than pinning its coldest ones
# Prints one PASS/FAIL/SKIP line per check; exit 1 if anything failed.
cd "$(dirname "$0")/.." || exit 1
BIN=${DELTAFIN_BIN:-build/deltafin}
M=models/demo-moe-q8_0.gguf
PF=tests/data/profile_prompts.txt
NGEN=16
fails=0
pass() { echo "profile: PASS $*"; }
fail() { echo "profile: FAIL $*"; fails=$((fails + 1)); }
skip() { echo "profile: SKIP $*"; }
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT

[ -x "$BIN" ] || { fail "no deltafin binary at $BIN"; exit 1; }
cp "$BIN" "$TMP/deltafin" || { fail "cannot copy $BIN"; exit 1; }
BIN=$TMP/deltafin
[ -f "$M" ] || { fail "missing $M"; exit 1; }

"$BIN" profile --help >"$TMP/help" 2>&1 && grep -q -- "--output" "$TMP/help" || fail "profile --help"

if ! "$BIN" profile -m "$M" -f "$PF" -n $NGEN -o "$TMP/hot.txt" 2>"$TMP/err"; then
    fail "deltafin profile failed: $(tail -n 1 "$TMP/err")"; exit 1
fi
grep -q "top experts:" "$TMP/err" && grep -q "layer   0:" "$TMP/err" || fail "no summary on stderr"

# ---- 1. counts
ptok=0; nprompt=0
while IFS= read -r line; do
    case "$line" in *[![:space:]]*) ;; *) continue ;; esac
    n=$("$BIN" tokenize -m "$M" -p "$line" --bos --special | wc -w)
    ptok=$((ptok + n)); nprompt=$((nprompt + 1))
done <"$PF"
gen=$(sed -n 's/.*tokens (\([0-9]*\) prompt + \([0-9]*\) generated).*/\1 \2/p' "$TMP/hot.txt")
gp=${gen% *}; gg=${gen#* }
if [ -z "$gen" ] || [ "$gp" != "$ptok" ]; then
    fail "counts: header says '$gen' prompt/generated tokens, tokenize counts $ptok prompt tokens"
elif [ "$gg" -lt 1 ] || [ "$gg" -gt $((nprompt * NGEN)) ]; then
    fail "counts: $gg generated tokens, expected 1..$((nprompt * NGEN))"
else
    sums=$(awk '!/^#/ { s[$1] += $3 } END { for (l = 0; l < 5; l++) printf "%d ", s[l] }' "$TMP/hot.txt")
    want="$((2 * (ptok + gg))) $((2 * (ptok + gg))) $((2 * (ptok + gg))) $((2 * (ptok + gg))) $((2 * (nprompt + gg))) "
    if [ "$sums" = "$want" ]; then
        pass "counts: per-layer selections $sums= 2 x ($ptok prompt + $gg generated tokens), last layer 2 x ($nprompt + $gg)"
    else
        fail "counts: per-layer selections '$sums', expected '$want'"
    fi
fi

# ---- 2. sorted, uneven
if awk '!/^#/ { if (NR > 3 && $3 > prev) bad = 1; prev = $3; n++ } END { exit bad || n == 0 }' "$TMP/hot.txt"; then
    share=$(awk '!/^#/ { if (++k[$1] <= 4) top += $3; tot += $3 } END { printf "%d", 100 * top / tot }' "$TMP/hot.txt")
    if [ "$share" -ge 40 ]; then pass "uneven: top 4 of 16 experts per layer take $share% of the selections"
    else fail "uneven: top 4 of 16 experts per layer take only $share% of the selections"; fi
else
    fail "hot file not sorted by count descending (or empty)"
fi

# ---- 3. run --hot under a streaming memory limit
ids_of() { sed -n 's/.*"tokens":\[\([^]]*\)\].*/\1/p' "$1" | tail -n 1; }
field() { sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p" "$1" | tail -n 1; }
P="Once upon a time"
accepts() { "$BIN" run -m "$M" -p "$P" -n 1 --temp 0 --mem-limit "$1" >/dev/null 2>&1; }
lo=0; hi=1073741824
if ! "$BIN" run --help 2>&1 | grep -q -- "--hot"; then
    skip "run --hot: this deltafin run has no --hot"
elif ! accepts $hi; then
    fail "run --hot: deltafin run refuses a 1 GiB limit"
else
    while [ $((hi - lo)) -gt 4096 ]; do
        mid=$(( (lo + hi) / 2 ))
        if accepts $mid; then hi=$mid; else lo=$mid; fi
    done
    LIM=$((hi + 12 * 61440))   # room for about 10 pinned experts over the unpinned minimum
    # the same pairs with inverted counts (--hot sorts by count): the coldest are pinned instead
    awk '!/^#/ { print $1, $2, 1000000 - $3 }' "$TMP/hot.txt" >"$TMP/cold.txt"
    "$BIN" run -m "$M" -p "$P" -n 100 --temp 0 --json >"$TMP/full" 2>"$TMP/err" ||
        fail "run --hot: resident run failed: $(tail -n 1 "$TMP/err")"
    "$BIN" run -m "$M" -p "$P" -n 100 --temp 0 --json --mem-limit $LIM >"$TMP/plain" 2>"$TMP/err" ||
        fail "run --hot: run at --mem-limit $LIM failed: $(tail -n 1 "$TMP/err")"
    "$BIN" run -m "$M" -p "$P" -n 100 --temp 0 --json --mem-limit $LIM --hot "$TMP/hot.txt" -v \
        >"$TMP/hot" 2>"$TMP/herr" || fail "run --hot: rejected the profile: $(tail -n 1 "$TMP/herr")"
    "$BIN" run -m "$M" -p "$P" -n 100 --temp 0 --json --mem-limit $LIM --hot "$TMP/cold.txt" \
        >"$TMP/cold" 2>"$TMP/err" || fail "run --hot: cold set rejected: $(tail -n 1 "$TMP/err")"
    pinned=$(sed -n 's/.*--hot: pinned \([0-9]*\) of.*/\1/p' "$TMP/herr" | tail -n 1)
    full=$(ids_of "$TMP/full")
    hh=$(field "$TMP/hot" expert_hits); hc=$(field "$TMP/cold" expert_hits); mh=$(field "$TMP/hot" expert_misses)
    if [ -z "$pinned" ]; then
        skip "run --hot: experts stay resident at --mem-limit $LIM (nothing to pin)"
    elif [ "$pinned" -lt 1 ]; then
        fail "run --hot: accepted but pinned no expert at --mem-limit $LIM"
    elif [ -z "$full" ] || [ "$(ids_of "$TMP/hot")" != "$full" ] || [ "$(ids_of "$TMP/plain")" != "$full" ]; then
        fail "run --hot: greedy ids differ (resident / limit / limit + --hot)"
    else
        pass "run --hot: pinned $pinned experts at --mem-limit $LIM, 100 greedy ids = resident = no --hot"
        if [ -n "$hh" ] && [ -n "$hc" ] && [ "$hh" -gt "$hc" ]; then
            pass "run --hot: hottest pinned $hh hits (+$mh misses) > coldest pinned $hc hits"
        else
            fail "run --hot: hottest pinned '$hh' hits, coldest pinned '$hc' hits"
        fi
    fi
fi

[ $fails -eq 0 ]
