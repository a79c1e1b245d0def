#!/bin/sh
# test_config_cli.sh — `deltafin run --config`: the file's settings apply, command-line flags
# override them, and a bad file fails before anything loads with FILE:LINE in the message.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
T=$(mktemp -d /tmp/df_test_cfg.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_config_cli: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_config_cli: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

"$DEVBIN" gen-random --arch qwen3moe --n-layer 2 --vocab bytes --seed 3 "$T/m.gguf" >/dev/null 2>&1 ||
    { echo "test_config_cli: gen-random failed"; exit 1; }
toks() { "$BIN" run --json -n 12 -p "Hello there, config" -t 1 "$@" 2>"$T/err" | grep -o '"tokens":\[[0-9,]*\]'; }

# reference runs with flags only
GREEDY=$(toks -m "$T/m.gguf" --temp 0)
SAMPLED=$(toks -m "$T/m.gguf" --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 11)
[ -n "$GREEDY" ] && [ -n "$SAMPLED" ] || { echo "test_config_cli: reference run failed: $(cat "$T/err")"; exit 1; }
[ "$GREEDY" != "$SAMPLED" ] || { echo "test_config_cli: greedy and sampled runs agree; test cannot tell them apart"; exit 1; }

cat >"$T/c.yaml" <<YAML
model:
  path: $T/m.gguf
inference:
  max_seq_len: 64
  sampling:
    temperature: 1.5
    top_k: 0
    top_p: 1
    min_p: 0
    seed: 11
hardware:
  threads: 1
YAML
# model path and sampling from the file
OUT=$(toks --config "$T/c.yaml")
[ "$OUT" = "$SAMPLED" ] && ok "config file sets model and sampling" || bad "config run: $OUT vs $SAMPLED ($(cat "$T/err"))"
# a flag overrides the file
OUT=$(toks --config "$T/c.yaml" --temp 0)
[ "$OUT" = "$GREEDY" ] && ok "--temp overrides the file" || bad "override: $OUT vs $GREEDY ($(cat "$T/err"))"
# --config after other flags works the same
OUT=$(toks --temp 0 --config="$T/c.yaml")
[ "$OUT" = "$GREEDY" ] && ok "--config=FILE in any position" || bad "order: $OUT vs $GREEDY"
# max_seq_len from the file bounds the context; -c overrides
LONG=$(printf 'word %.0s' $(seq 1 40))
"$BIN" run --config "$T/c.yaml" -p "$LONG" -n 1 >/dev/null 2>"$T/err"
grep -q "context is 64" "$T/err" || "$BIN" run --config "$T/c.yaml" -p "$LONG$LONG" -n 1 >/dev/null 2>"$T/err"
grep -q "context is 64" "$T/err" && ok "max_seq_len applies" || bad "max_seq_len: $(tail -1 "$T/err")"
"$BIN" run --config "$T/c.yaml" -c 2048 -p "$LONG$LONG" -n 1 >/dev/null 2>"$T/err" &&
    ok "-c overrides max_seq_len" || bad "-c override: $(tail -1 "$T/err")"

# cache.size sizes the expert cache (36 KiB slots here); --cache-size overrides it
printf 'model:\n  path: %s\ncache:\n  size: 144K\n  prefetch: on\n' "$T/m.gguf" >"$T/cache.yaml"
DELTAFIN_STREAM=1 "$BIN" run --config "$T/cache.yaml" -p hi -n 2 -v >/dev/null 2>"$T/err"
grep -q "experts: 4 slots x 36.00 KiB.*prefetch on" "$T/err" && ok "cache.size and cache.prefetch apply" ||
    bad "cache.size: $(grep experts: "$T/err")"
DELTAFIN_STREAM=1 "$BIN" run --config "$T/cache.yaml" --cache-size 216K -p hi -n 2 -v >/dev/null 2>"$T/err"
grep -q "experts: 6 slots x 36.00 KiB" "$T/err" && ok "--cache-size overrides cache.size" ||
    bad "--cache-size: $(grep experts: "$T/err")"

# errors: unknown key with its line, wrong type, missing file; exit status 2, nothing run
printf 'model:\n  path: %s\nhardware:\n  threads: 1\n  cach: 4G\n' "$T/m.gguf" >"$T/bad.yaml"
"$BIN" run --config "$T/bad.yaml" -p hi >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "bad.yaml:5: unknown key 'cach' in section 'hardware'" "$T/err" &&
    ok "unknown key named with its line" || bad "unknown key: rc=$rc $(cat "$T/err")"
printf 'inference:\n  sampling:\n    top_k: lots\n' >"$T/bad2.yaml"
"$BIN" run --config "$T/bad2.yaml" -m "$T/m.gguf" -p hi >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "bad2.yaml:3: inference.sampling.top_k: expected an integer" "$T/err" &&
    ok "wrong type named with its line" || bad "wrong type: rc=$rc $(cat "$T/err")"
"$BIN" run --config "$T/none.yaml" -m "$T/m.gguf" -p hi >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "none.yaml" "$T/err" && ok "missing config file" || bad "missing file: rc=$rc $(cat "$T/err")"
# the shipped example parses (paths in it need not exist for parsing)
if [ -f deltafin.example.yaml ]; then
    "$BIN" run --config deltafin.example.yaml -m "$T/none.gguf" -p hi >/dev/null 2>"$T/err"
    grep -q "deltafin.example.yaml" "$T/err" && bad "example config rejected: $(cat "$T/err")" || ok "example config parses"
fi
[ $fail = 0 ] && echo "test_config_cli: ok" || echo "test_config_cli: FAILED"
exit $fail
