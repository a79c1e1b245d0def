#!/bin/sh
# test_cli_flags.sh — the one flag table seen from the command line (app/cli/flags.c):
# `deltafin help CMD` prints that command's help, `--version` names the commit, unknown options
# and missing values are one-line usage errors (exit 2) for every command, `--config FILE` works
# for the commands beyond `run` (info, bench, perplexity, tokenize, chat), `--name=value` and
# `_` spellings work, and llama.cpp's -ngl / -fa / --no-mmap / -ub / -tb are accepted with a
# notice and change nothing (same tokens).
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M="$FIX/models/llama-2-tiny-random.gguf"
MOE=models/demo-moe-q8_0.gguf
T=$(mktemp -d /tmp/df_test_cli_flags.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

# ---- help and version --------------------------------------------------------------------------
"$BIN" help run >"$T/h1" 2>&1; rc=$?
"$BIN" run --help >"$T/h2" 2>&1
"$BIN" --help >"$T/top" 2>&1
if [ $rc = 0 ] && cmp -s "$T/h1" "$T/h2" && ! cmp -s "$T/h1" "$T/top" && head -n 1 "$T/h1" | grep -q "^usage: deltafin run "; then
    ok "help run = run --help, not the top-level help"
else bad "help run: rc=$rc $(head -n 2 "$T/h1")"; fi
for c in run chat serve bench perplexity info tokenize quantize imatrix pack profile verify doctor pull; do
    "$BIN" help $c >"$T/h" 2>&1 || { bad "help $c: exit $?"; continue; }
    head -n 1 "$T/h" | grep -q "^usage: deltafin $c" || bad "help $c: $(head -n 1 "$T/h")"
    grep -q -- "-h, --help" "$T/h" || bad "help $c lists no -h"
done
"$BIN" help bench kernels | head -n 1 | grep -q "^usage: deltafin bench kernels" && ok "help bench kernels" ||
    bad "help bench kernels"
V=$("$BIN" --version)
echo "$V" | grep -Eq "^deltafin [0-9.]+ \(commit [0-9a-z]+\)$" && ok "--version: $V" || bad "--version: $V"

# ---- usage errors: one line, exit 2, for every command --------------------------------------------
nbad=0
for c in run chat serve bench perplexity info tokenize quantize imatrix pack profile verify doctor pull "bench kernels"; do
    "$BIN" $c --bogus-flag >"$T/o" 2>"$T/e"; rc=$?
    if [ $rc = 2 ] && [ "$(cat "$T/e")" = "$c: unknown option '--bogus-flag' (see deltafin $c --help)" ]; then :
    else bad "$c --bogus-flag: rc=$rc '$(cat "$T/e")'"; nbad=1; fi
done
[ $nbad = 0 ] && ok "unknown options: exit 2 and '(see deltafin CMD --help)' for every command"
"$BIN" run -m "$M" -p >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q "^run: -p needs a value" "$T/e" && ok "a missing value is named" || bad "missing value: rc=$rc $(cat "$T/e")"
"$BIN" info "$M" extra.gguf >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q "unexpected argument 'extra.gguf'" "$T/e" && ok "extra positional refused" || bad "extra arg: rc=$rc $(cat "$T/e")"

# ---- spellings -----------------------------------------------------------------------------------
toks() { "$BIN" run --json -p "Hello world" -t 1 "$@" 2>"$T/err" | grep -o '"tokens":\[[0-9,]*\]'; }
REF=$(toks -m "$M" -n 8 --temp 1 --top-k 5 --seed 3)
[ -n "$REF" ] || { echo "test_cli_flags: reference run failed: $(cat "$T/err")"; exit 1; }
OUT=$(toks --model="$M" --n_predict=8 --temp=1 --top_k 5 -s 3)
[ "$OUT" = "$REF" ] && ok "--name=value and _ spellings" || bad "spellings: $OUT vs $REF"

# ---- llama.cpp options accepted with a notice --------------------------------------------------------
GREEDY=$(toks -m "$M" -n 8 --temp 0)
OUT=$(toks -m "$M" -n 8 --temp 0 -ngl 99 -fa on --no-mmap -ub 512 -tb 2)
if [ "$OUT" = "$GREEDY" ] && grep -q "note: -ngl 99" "$T/err" && grep -q "note: -fa on" "$T/err" &&
   grep -q "note: --no-mmap" "$T/err" && grep -q "note: -ub 512" "$T/err" && grep -q "note: -tb 2" "$T/err"; then
    ok "-ngl -fa --no-mmap -ub -tb: accepted with a notice, same tokens"
else bad "llama.cpp options: $OUT vs $GREEDY: $(cat "$T/err")"; fi
"$BIN" run -m "$M" -p hi -fa sometimes >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q "\-fa: expected on|off|auto" "$T/e" && ok "-fa checks its value" || bad "-fa value: rc=$rc $(cat "$T/e")"

# ---- --config for more than run -----------------------------------------------------------------------
printf 'model:\n  path: %s\ninference:\n  max_seq_len: 64\nhardware:\n  threads: 1\n' "$M" >"$T/c.yaml"
"$BIN" info --config "$T/c.yaml" >"$T/o" 2>&1 && grep -q "^model: *$M" "$T/o" && grep -q "KV cache at n_ctx 64 " "$T/o" &&
    ok "info --config: model and context from the file" || bad "info --config: $(head -n 3 "$T/o")"
"$BIN" bench --config "$T/c.yaml" -p 8 -n 2 -r 1 --json >"$T/o" 2>"$T/e" && grep -q '"threads":1,' "$T/o" &&
    ok "bench --config: threads from the file" || bad "bench --config: $(cat "$T/e") $(cat "$T/o")"
"$BIN" bench --config "$T/c.yaml" -t 2 -p 8 -n 2 -r 1 --json >"$T/o" 2>"$T/e" && grep -q '"threads":2,' "$T/o" &&
    ok "bench: -t overrides the file" || bad "bench -t override: $(cat "$T/o")"
"$BIN" tokenize --config "$T/c.yaml" -p "Hello world" >"$T/o" 2>"$T/e" &&
    [ "$(cat "$T/o")" = "$("$BIN" tokenize -m "$M" -p "Hello world")" ] &&
    ok "tokenize --config: model from the file" || bad "tokenize --config: $(cat "$T/e")"
printf 'Hello there\n' | "$BIN" chat --config "$T/c.yaml" -n 4 --temp 0 >"$T/o" 2>"$T/e" && [ -s "$T/o" ] &&
    ok "chat --config" || bad "chat --config: $(cat "$T/e")"
python3 -c 'print("the quick brown fox jumps over the lazy dog " * 40)' >"$T/text.txt" 2>/dev/null ||
    awk 'BEGIN { for (i = 0; i < 40; i++) printf "the quick brown fox jumps over the lazy dog "; print "" }' >"$T/text.txt"
"$BIN" perplexity --config "$T/c.yaml" -f "$T/text.txt" -c 32 --chunks 1 >"$T/o" 2>"$T/e" &&
    grep -q "Final estimate: PPL" "$T/o" && ok "perplexity --config (-c overrides max_seq_len)" ||
    bad "perplexity --config: $(tail -n 2 "$T/e")"
printf 'hardware:\n  cach: 1G\n' >"$T/bad.yaml"
"$BIN" bench --config "$T/bad.yaml" -m "$M" >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q "bad.yaml:2: unknown key 'cach'" "$T/e" && ok "bench: a bad config file is a usage error" ||
    bad "bench bad config: rc=$rc $(cat "$T/e")"

# ---- model-loading flags common to every command that runs a model -------------------------------------
if [ -f "$MOE" ]; then
    DELTAFIN_STREAM=1 "$BIN" perplexity -m "$MOE" -f "$T/text.txt" -c 32 --chunks 1 --cache-size 2M --prefetch off \
        --log-level info >"$T/o" 2>"$T/e" && grep -q "expert cache" "$T/e" &&
        ok "perplexity takes --cache-size / --prefetch / --log-level like run" || bad "perplexity loading flags: $(tail -n 3 "$T/e")"
fi

[ $fail = 0 ] && echo "test_cli_flags: ok" || echo "test_cli_flags: FAILED"
exit $fail
