#!/bin/sh
# test_model_tools.sh — `deltafin run / perplexity / info / bench` on llama-2-tiny-random.gguf.
# Expected values were recorded from llama.cpp on the same file:
#   llama-completion -m llama-2-tiny-random.gguf -p "Hello world" -n 16 --temp 0 -no-cnv
#   llama-perplexity -m llama-2-tiny-random.gguf -f <the text below> -c 64  -> PPL = 32028.3428 +/- 68.66815
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M="$FIX/models/llama-2-tiny-random.gguf"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
T=$(mktemp -d /tmp/df_tools_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }

"$BIN" run --help | grep -q "default -1" && ok || bad "run --help"
"$BIN" perplexity --help | grep -q "default 512" && ok || bad "perplexity --help"
"$BIN" bench --help | grep -q "default 128" && ok || bad "bench --help"
"$BIN" info --help | grep -q "ctx-size" && ok || bad "info --help"

"$BIN" run -m "$M" -p "Hello world" -n 16 --temp 0 -t 2 --json > "$T/run.json" 2> "$T/run.err" || bad "run --json exit"
"$PY" - "$T/run.json" <<'PYEOF' && ok || bad "run --json content"
import json, sys
o = json.loads(open(sys.argv[1]).read())
assert o["prompt_tokens"] == [1, 15043, 3186], o["prompt_tokens"]
assert o["tokens"] == [19356, 7267, 4736, 26640, 24077, 18579, 28435, 21432, 22856, 21748, 10805, 25472, 11982, 26098, 16118, 31167], o["tokens"]
assert o["text"] == " processedlijParam współcro ogni heading igual existed VARCHAR causing Kun sandgenderolasʀ", o["text"]
assert set(["n_prompt", "n_gen", "prompt_tok_s", "gen_tok_s", "peak_rss"]) <= set(o["stats"])
PYEOF
grep -q "generation: 16 tokens" "$T/run.err" && ok || bad "run stats line"

# streaming output = the JSON text (plus a final newline)
"$BIN" run -m "$M" -p "Hello world" -n 16 --temp 0 -t 2 > "$T/run.txt" 2>/dev/null || bad "run exit"
[ "$(cat "$T/run.txt")" = " processedlijParam współcro ogni heading igual existed VARCHAR causing Kun sandgenderolasʀ" ] && ok || bad "run streamed text"

# prompt from a file, batch of 1, -n 0
printf 'Hello world' > "$T/p.txt"
"$BIN" run -m "$M" -f "$T/p.txt" -n 4 -b 1 --temp 0 -t 1 --json 2>/dev/null | grep -q '"tokens":\[19356,7267,4736,26640\]' && ok || bad "run -f -b 1"
"$BIN" run -m "$M" -p "Hello" -n 0 --json 2>/dev/null | grep -q '"tokens":\[\]' && ok || bad "run -n 0"
"$BIN" run -m "$M" -p "Hello" -n 8 -c 4 --temp 0 --json 2>/dev/null | "$PY" -c 'import json,sys; o=json.load(sys.stdin); assert len(o["prompt_tokens"]) + len(o["tokens"]) <= 5' && ok || bad "run stops at full context"
"$BIN" run -m "$T/nonexistent.gguf" -p x > /dev/null 2> "$T/err" && bad "run missing model exit" || ok
grep -q "nonexistent.gguf" "$T/err" && ok || bad "run missing model message"
"$BIN" run -m "$M" -p x --bogus > /dev/null 2>&1 && bad "run bad option" || ok

# perplexity equals llama-perplexity
i=1; : > "$T/ppl.txt"
while [ $i -le 40 ]; do
    echo "The quick brown fox number $i jumps over the lazy dog, and the dog barks back at the fox." >> "$T/ppl.txt"
    i=$((i+1))
done
"$BIN" perplexity -m "$M" -f "$T/ppl.txt" -c 64 -t 2 > "$T/ppl.out" 2>/dev/null || bad "perplexity exit"
tail -1 "$T/ppl.out" | grep -q "^Final estimate: PPL = 32028.34[0-9]* +/- 68.66" && ok || bad "perplexity value: $(tail -1 "$T/ppl.out")"
grep -q "^\[1\]32013.88" "$T/ppl.out" && ok || bad "perplexity first chunk"
"$BIN" perplexity -m "$M" -f "$T/p.txt" -c 64 > /dev/null 2> "$T/err" && bad "perplexity short text exit" || ok
grep -q "you need at least 128 tokens" "$T/err" && ok || bad "perplexity short text message"

# info
"$BIN" info "$M" > "$T/info.txt" || bad "info exit"
grep -q "architecture: llama" "$T/info.txt" && ok || bad "info arch"
grep -q "KV cache per token (F16) .* 32 B" "$T/info.txt" && ok || bad "info kv per token"
grep -q "F16  *9 tensors" "$T/info.txt" && ok || bad "info tensors by type"
grep -q "SPM, bos 1, eos 2" "$T/info.txt" && ok || bad "info tokenizer"

# malformed numeric flags are usage errors naming the flag (exit 2), never a silent 0
for args in "run -n abc" "run -t 4x" "run --temp 0.x" "run --seed 12z" "perplexity -c ''" "bench -r 1e3" \
            "serve --port 99999999999" "chat -c -" "info -b 9q"; do
    eval "set -- $args"; sub=$1; flag=$2
    out=$(eval "\"\$BIN\" $args -m \"\$M\" -p hi" 2>&1 </dev/null); rc=$?
    [ "$rc" -eq 2 ] && printf '%s' "$out" | grep -q -- "$flag: expected" && ok || bad "$args: rc $rc: $out"
done
"$BIN" run -m "$M" -p "Hello" -n 2 --seed -1 >/dev/null 2>&1 && ok || bad "run --seed -1 (random, as llama.cpp)"

# bench
"$BIN" bench -m "$M" -p 16 -n 4 -r 2 -t 2 --json > "$T/bench.json" 2>/dev/null || bad "bench exit"
"$PY" -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert [r["test"] for r in o["results"]] == ["pp16", "tg4"]
assert all(r["avg_ts"] > 0 and len(r["samples_ts"]) == 2 for r in o["results"])
assert o["threads"] == 2 and o["isa"] and o["commit"]
' "$T/bench.json" && ok || bad "bench --json"
"$BIN" bench -m "$M" -p 16 -n 4 -r 1 2>/dev/null | grep -q "^deltafin .* ISA .* threads" && ok || bad "bench config line"

echo "test_model_tools: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
