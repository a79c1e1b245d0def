#!/bin/sh
# test_llama_cli_compat.sh — command lines a llama.cpp user types (the ones issue 20 quotes, the
# README examples of llama.cpp's llama-completion / llama-cli / llama-server at d32676d, and
# model-card lines), each run against the demo model and checked for the meaning llama.cpp
# documents, not only for exit 0:
#   - options that mean nothing on a CPU engine (-ngl, -fa, --no-mmap, -ot, --cpu-moe,
#     --n-cpu-moe, -ub, -tb, --prio, -no-cnv, --jinja) print their notice and change no token;
#     malformed values are refused as llama.cpp refuses them;
#   - --temp 0 gives llama.cpp's own greedy ids (tests/data/expected/demo_moe_greedy.tsv);
#     --mlock locks or names RLIMIT_MEMLOCK; -ctk/-ctv q8_0 shrink the KV cache to 34/64;
#   - sampling: --samplers / --sampler-seq decide which stages run (top-k 1 in the chain is
#     greedy at any temperature, left out it is not) and run -v prints the chain; a fixed seed
#     repeats; --logit-bias raises, bans; --ignore-eos outlasts a boosted EOS; presence /
#     frequency penalties and DRY shorten repeats, --repeat-last-n 0 turns penalties off;
#     mirostat at temperature 0 is greedy; XTC at probability 1 leaves the greedy path;
#   - chat: --chat-template (an unknown one refused naming the built-ins), --jinja,
#     --single-turn -sys -p; --ignore-eos -n -1 runs to the full context; -p takes llama.cpp's
#     backslash escapes (-e, the default; --no-escape);
#   - serve: llama-server's README line (-m M -c 2048); its sampling flags are the defaults of
#     requests; /completion with llama-server's fields (samplers, dry_*, typical_p, mirostat ...)
#     and greedy equal to run's; an unknown --chat-template is refused at start;
#   - --config FILE gives the model to every command that takes one (run, serve, profile,
#     doctor, verify; the others are in test_cli_flags.sh).
set -u
set -f # patterns such as .ffn_.*_exps.=CPU are arguments, never globs
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
M=models/demo-moe-q8_0.gguf
EXP=tests/data/expected/demo_moe_greedy.tsv
command -v python3 >/dev/null 2>&1 || { echo "test_llama_cli_compat: python3 missing"; exit 1; }
command -v curl >/dev/null 2>&1 || { echo "test_llama_cli_compat: curl missing"; exit 1; }
[ -f "$M" ] || { echo "test_llama_cli_compat: $M missing"; exit 1; }
T=$(mktemp -d /tmp/df_test_compat.XXXXXX)
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

P="Once upon a time"
# ids of a run --json (comma-separated), stderr in $T/err
ids() { "$BIN" run -m "$M" -p "$P" --json -t 1 "$@" 2>"$T/err" | sed -n 's/.*"tokens":\[\([^]]*\)\].*/\1/p'; }
# python over the last run's JSON: tokens, distinct, longest repeated n-gram
rep() {
    python3 -c '
import json, sys
t = json.load(sys.stdin)["tokens"]
best = 0
for n in range(1, len(t)):
    seen, found = set(), False
    for i in range(len(t) - n + 1):
        g = tuple(t[i:i + n])
        if g in seen: found = True; break
        seen.add(g)
    if not found: break
    best = n
print(len(t), len(set(t)), best)'
}

# ---- --temp 0 is llama.cpp's greedy ------------------------------------------------------------
G=$(ids -n 16 --temp 0)
WANT=$(awk -F'\t' -v m="$M" -v p="$P" '$1 == m && $2 == p { print $5 }' "$EXP" | cut -d, -f1-16)
[ -n "$G" ] && [ "$G" = "$WANT" ] && ok "--temp 0: llama.cpp's greedy ids ($G)" || bad "--temp 0: $G, llama.cpp $WANT"

# ---- the options issue 20 quotes: a notice each, the same tokens ----------------------------------
n_bad=0
for f in "-ngl 99" "--n-gpu-layers all" "-fa on" "--flash-attn auto" "--no-mmap" "-ot exps=CPU" \
         "--override-tensor .ffn_.*_exps.=CPU" "-ot blk\.(1[0-9]|2[0-9])\.ffn_.*=CUDA0,exps=CPU" "--cpu-moe" \
         "-cmoe" "--n-cpu-moe 30" "-ncmoe 4" "-ub 512" "-tb 2" "--prio 3" "-no-cnv"; do
    name=${f%% *}
    OUT=$(ids -n 16 --temp 0 $f)
    if [ "$OUT" = "$G" ] && grep -q "^run: note: $name" "$T/err"; then :
    else bad "$f: tokens $OUT, notice: $(cat "$T/err")"; n_bad=1; fi
done
[ $n_bad = 0 ] && ok "-ngl -fa --no-mmap -ot --cpu-moe --n-cpu-moe -ub -tb --prio -no-cnv: a notice each, greedy unchanged"
n_bad=0
for f in "-ngl lots" "-fa maybe" "-ot exps" "-ot exps=" "-ot (=CPU" "-ot a=CPU," "--n-cpu-moe -1" "-ub x" "--prio 9"; do
    "$BIN" run -m "$M" -p "$P" -n 1 $f >/dev/null 2>"$T/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] || { bad "$f: rc=$rc $(cat "$T/err")"; n_bad=1; }
done
[ $n_bad = 0 ] && ok "malformed values refused in one line, exit 2 (-ot: PATTERN=BUFTYPE, the pattern compiled)"

# --mlock: the weights are locked (same tokens), or the error names the limit
OUT=$(ids -n 16 --temp 0 --mlock); rc=$?
if [ "$OUT" = "$G" ]; then ok "--mlock: locked, same tokens"
elif grep -q "RLIMIT_MEMLOCK\|ulimit -l" "$T/err"; then ok "--mlock: refused naming the memlock limit ($(ulimit -l) KiB here)"
else bad "--mlock: $OUT $(cat "$T/err")"; fi

# -ctk/-ctv q8_0 (a model with 32-value heads: the demo model's are 8 wide, which llama.cpp refuses too)
"$DEVBIN" gen-random --arch qwen3moe --n-layer 2 --vocab bytes --seed 3 "$T/r.gguf" >/dev/null 2>&1 ||
    { echo "test_llama_cli_compat: gen-random failed"; exit 1; }
kv() { "$BIN" info "$T/r.gguf" -c 256 "$@" | sed -n 's/^ *KV cache per token ([^)]*) *\([0-9]*\) B$/\1/p'; }
F16=$(kv); Q8=$(kv -ctk q8_0 -ctv q8_0)
"$BIN" run -m "$T/r.gguf" -p "Hello" -n 4 --temp 0 -ctk q8_0 -ctv q8_0 -v >/dev/null 2>"$T/err"; rc=$?
[ -n "$F16" ] && [ "$((Q8 * 64))" = "$((F16 * 34))" ] && [ $rc = 0 ] && grep -q "KV 1.06 MiB" "$T/err" &&
    ok "-ctk q8_0 -ctv q8_0: KV $Q8 B/token against F16's $F16 (34/64), run's plan holds it" ||
    bad "-ctk q8_0: F16 $F16 q8_0 $Q8 rc=$rc $(grep -o 'KV [0-9.]* [KM]iB' "$T/err")"
"$BIN" run -m "$M" -p "$P" -n 1 -ctk q8_0 >/dev/null 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "does not divide the key head size 8" "$T/err" && ok "-ctk q8_0 on 8-wide heads refused" ||
    bad "-ctk q8_0 on the demo model: rc=$rc $(cat "$T/err")"

# ---- sampling --------------------------------------------------------------------------------------
chain() { "$BIN" run -m "$M" -p "$P" -n 1 -v "$@" 2>&1 >/dev/null | sed -n 's/^sampler chain: //p'; }
OUT=$(ids -n 16 --top-k 1 --temp 1.5 -s 7)
[ "$OUT" = "$G" ] && ok "--top-k 1 at --temp 1.5: greedy" || bad "top-k 1: $OUT"
OUT=$(ids -n 16 --samplers "top_k;temperature" --top-k 1 --temp 3 -s 7)
C=$(chain --samplers "top_k;temperature" --top-k 1 --temp 3)
[ "$OUT" = "$G" ] && [ "$C" = "logits -> top-k -> temp-ext -> dist" ] &&
    ok "--samplers top_k;temperature: greedy at temp 3, chain '$C'" || bad "--samplers top_k;temperature: $OUT ($C)"
OUT=$(ids -n 16 --sampler-seq kt --top-k 1 --temp 3 -s 7)
[ "$OUT" = "$G" ] && ok "--sampler-seq kt: the same" || bad "--sampler-seq kt: $OUT"
OUT=$(ids -n 16 --samplers "temperature" --top-k 1 --temp 3 -s 7)
C=$(chain --samplers "temperature" --top-k 1 --temp 3)
[ -n "$OUT" ] && [ "$OUT" != "$G" ] && [ "$C" = "logits -> temp-ext -> dist" ] &&
    ok "--samplers temperature: top-k left out, no longer greedy" || bad "--samplers temperature: $OUT ($C)"
OUT=$(ids -n 16 --samplers "min_p;top-k;TEMP;typ-p;nucleus" --temp 0)
[ "$OUT" = "$G" ] && ok "--samplers with llama.cpp's aliases" || bad "aliases: $OUT $(cat "$T/err")"
C=$(chain --presence-penalty 0.5 --dry-multiplier 0.8 --top-nsigma 1 --typical 0.9 --xtc-probability 0.5 --temp 0.7)
[ "$C" = "logits -> penalties -> dry -> top-n-sigma -> top-k -> typical -> top-p -> min-p -> xtc -> temp-ext -> dist" ] &&
    ok "llama.cpp's default order: $C" || bad "default chain: $C"
C=$(chain --mirostat 2 --mirostat-lr 0.2 --mirostat-ent 3 --temp 0.7 -l 5+1)
[ "$C" = "logits -> logit-bias -> temp -> mirostat-v2" ] && ok "--mirostat 2: $C" || bad "mirostat chain: $C"
A=$(ids -n 16 --temp 1 -s 42); B=$(ids -n 16 --temp 1 -s 42); D=$(ids -n 16 --temp 1 -s 43)
[ -n "$A" ] && [ "$A" = "$B" ] && [ "$A" != "$D" ] && ok "-s 42 repeats, -s 43 differs" || bad "seeds: $A / $B / $D"
T1=${G%%,*}
OUT=$(ids -n 16 --temp 0 -l "$T1-inf"); F=${OUT%%,*}
[ -n "$OUT" ] && [ "$F" != "$T1" ] && ok "--logit-bias $T1-inf bans the greedy first token ($F instead)" ||
    bad "logit-bias ban: $OUT"
OUT=$(ids -n 6 --temp 0 --logit-bias 300+100)
[ "$OUT" = "300,300,300,300,300,300" ] && ok "--logit-bias 300+100: token 300 every time" || bad "logit-bias raise: $OUT"
N1=$("$BIN" run -m "$M" -p "The dog" -n 40 --temp 0 --json -l 2+15 2>/dev/null | rep | cut -d' ' -f1)
N2=$("$BIN" run -m "$M" -p "The dog" -n 40 --temp 0 --json -l 2+15 --ignore-eos 2>/dev/null | rep | cut -d' ' -f1)
[ -n "$N1" ] && [ "$N1" -lt 40 ] && [ "$N2" = 40 ] &&
    ok "--ignore-eos: a boosted EOS ends at $N1 tokens, with --ignore-eos all 40" || bad "ignore-eos: $N1 / $N2"
R0=$("$BIN" run -m "$M" -p "$P" -n 120 --temp 0 --json 2>/dev/null | rep)
n_bad=0
for f in "--presence-penalty 1.5" "--frequency-penalty 1" "--dry-multiplier 1 --dry-base 2"; do
    R=$("$BIN" run -m "$M" -p "$P" -n 120 --temp 0 --json $f 2>/dev/null | rep)
    set -- $R0; d0=$2 l0=$3; set -- $R; d=${2:-0} l=${3:-99}
    if [ "$d" -gt "$d0" ] && [ "$l" -lt "$l0" ]; then :
    else bad "$f: distinct/longest repeat $d/$l against greedy's $d0/$l0"; n_bad=1; fi
done
[ $n_bad = 0 ] && ok "--presence-penalty, --frequency-penalty, --dry-multiplier: more distinct tokens, shorter repeats than greedy ($R0)"
OUT=$(ids -n 16 --temp 0 --repeat-penalty 1.5 --repeat-last-n 0)
[ "$OUT" = "$G" ] && ok "--repeat-last-n 0 turns the penalty off" || bad "repeat-last-n 0: $OUT"
OUT=$(ids -n 16 --temp 0 --mirostat 2)
[ "$OUT" = "$G" ] && ok "--mirostat 2 at --temp 0: greedy (the temperature stage keeps the best)" || bad "mirostat temp 0: $OUT"
OUT=$(ids -n 16 --temp 0 --xtc-probability 1 --xtc-threshold 0.01)
[ -n "$OUT" ] && [ "$OUT" != "$G" ] && ok "--xtc-probability 1: the top choices are excluded" || bad "xtc: $OUT"
n_bad=0
for f in "--samplers top_k;bogus" "--sampler-seq kq" "--samplers infill" "-l 15" "--logit-bias x+1" \
         "--mirostat 3" "--repeat-last-n -1" "--dry-penalty-last-n -1" "--repeat-penalty 0" "-l 99999+1"; do
    "$BIN" run -m "$M" -p "$P" -n 1 $f >/dev/null 2>"$T/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] || { bad "$f: rc=$rc $(cat "$T/err")"; n_bad=1; }
done
[ $n_bad = 0 ] && ok "bad sampling values refused (unknown sampler, bias syntax, ranges llama.cpp refuses, token id)"

# ---- llama-completion / llama-cli README lines -------------------------------------------------------
"$BIN" run -m "$M" -no-cnv --prompt "Once upon a time" -n 16 --temp 0 --json >"$T/o" 2>"$T/err"; rc=$?
OUT=$(sed -n 's/.*"tokens":\[\([^]]*\)\].*/\1/p' "$T/o")
[ $rc = 0 ] && [ "$OUT" = "$G" ] && ok "-m M -no-cnv --prompt 'Once upon a time'" || bad "-no-cnv: rc=$rc $(cat "$T/err")"
printf 'Hello\n' | "$BIN" chat -m "$M" --chat-template gemma >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "unknown chat template 'gemma' (built in: .*chatml" "$T/err" &&
    ok "chat --chat-template gemma: refused before loading, naming the built-in templates" ||
    bad "chat gemma: rc=$rc $(cat "$T/err")"
printf 'Hello\n' | "$BIN" chat -m "$M" --chat-template chatml -n 8 --temp 0 >"$T/o" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ -s "$T/o" ] && ok "chat --chat-template chatml" || bad "chat chatml: rc=$rc $(cat "$T/err")"
printf 'Hello\n' | "$BIN" chat -m "$M" --jinja -n 8 >"$T/o" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ -s "$T/o" ] && grep -q "note: --jinja" "$T/err" && ok "chat --jinja" || bad "chat --jinja: rc=$rc $(cat "$T/err")"
"$BIN" chat -m "$M" --jinja --single-turn -sys "You are a helpful assistant" -p "Hello" -n 8 --temp 0 </dev/null \
    >"$T/o" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ -s "$T/o" ] && ok "chat --jinja --single-turn -sys ... -p Hello: one answer, exit 0" ||
    bad "single-turn: rc=$rc $(cat "$T/err")"
"$BIN" run -m "$M" -p "$P" --ignore-eos -n -1 -c 64 --json >"$T/o" 2>"$T/err"; rc=$?
NT=$(rep <"$T/o" | cut -d' ' -f1)
[ $rc = 0 ] && [ "$NT" = 60 ] && ok "--ignore-eos -n -1: generates until the 64-token context is full (60 after 5)" ||
    bad "ignore-eos -n -1: rc=$rc n=$NT"
# -p takes llama.cpp's escapes (-e, the default): "a\nb" is a, newline, b; --no-escape keeps them
pt() { "$BIN" run -m "$M" -n 1 --temp 0 --json "$@" 2>/dev/null | sed -n 's/.*"prompt_tokens":\[\([^]]*\)\].*/\1/p'; }
NL=$(printf 'a\nb')
E1=$(pt -p 'a\nb'); E2=$(pt -p "$NL"); E3=$(pt -p 'a\nb' --no-escape); E4=$(pt -e -p 'a\nb')
[ -n "$E1" ] && [ "$E1" = "$E2" ] && [ "$E1" = "$E4" ] && [ "$E3" != "$E1" ] &&
    ok "-p: backslash-n is a newline as in llama.cpp (-e), --no-escape keeps it" || bad "escapes: $E1 / $E2 / $E3 / $E4"
# a model card's line (Unsloth's DeepSeek / Qwen3 guides)
"$BIN" run --model "$M" --threads -1 --ctx-size 2048 --n-gpu-layers 99 -ot ".ffn_.*_exps.=CPU" --seed 3407 \
    --prio 3 --temp 0.6 --min-p 0.01 --top-p 0.95 --top-k 20 --presence-penalty 1.5 -no-cnv \
    --prompt "<|User|>Tell me a story<|Assistant|>" -n 8 >"$T/o" 2>"$T/err"; rc=$?
[ $rc = 0 ] && [ -s "$T/o" ] && ok "a model card's llama-cli line" || bad "model card line: rc=$rc $(cat "$T/err")"

# ---- llama-server ---------------------------------------------------------------------------------
start_server() { # args...; sets SPID URL
    "$BIN" serve "$@" --port 0 -np 1 >"$T/sout" 2>"$T/serr" &
    SPID=$!
    PORT=""
    for i in $(seq 300); do
        PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/sout")
        [ -n "$PORT" ] && grep -q "ready" "$T/sout" && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    URL="http://127.0.0.1:$PORT"
    grep -q ready "$T/sout" || { bad "serve $*: did not start: $(cat "$T/serr")"; return 1; }
}
stop_server() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""; }
post() { curl -s -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "$URL$1"; }
text_of() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d.get("content", d.get("choices", [{}])[0].get("text")))' "$1"; }
GTEXT=$("$BIN" run -m "$M" -p "$P" -n 16 --temp 0 --json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')

# the README's line; its sampling flags are the server's defaults
if start_server -m "$M" -c 2048 --temp 0; then
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && ok "serve -m M -c 2048: /health 200" ||
        bad "serve health"
    code=$(post /completion "{\"prompt\": \"$P\", \"n_predict\": 16}")
    [ "$code" = 200 ] && [ "$(text_of "$T/body")" = "$GTEXT" ] &&
        ok "/completion without a temperature: the server's --temp 0, run's greedy text" ||
        bad "/completion default: $code $(head -c 300 "$T/body")"
    code=$(post /completion "{\"prompt\": \"$P\", \"n_predict\": 16, \"temperature\": 2, \"top_k\": 1, \"samplers\": [\"top_k\", \"temperature\"], \"seed\": 5}")
    [ "$code" = 200 ] && [ "$(text_of "$T/body")" = "$GTEXT" ] && ok "/completion samplers [top_k, temperature] with top_k 1: greedy" ||
        bad "/completion samplers: $code $(head -c 300 "$T/body")"
    code=$(post /completion "{\"prompt\": \"$P\", \"n_predict\": 16, \"temperature\": 2, \"top_k\": 1, \"samplers\": \"t\", \"seed\": 5}")
    [ "$code" = 200 ] && [ "$(text_of "$T/body")" != "$GTEXT" ] && ok "/completion samplers \"t\": top_k left out, not greedy" ||
        bad "/completion samplers t: $code $(head -c 300 "$T/body")"
    code=$(post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 8, \"temperature\": 0.8, \"dry_multiplier\": 0.8, \"dry_base\": 1.75, \"dry_allowed_length\": 2, \"dry_penalty_last_n\": 64, \"dry_sequence_breakers\": [\"\\n\", \":\"], \"typical_p\": 0.95, \"top_n_sigma\": 2, \"xtc_probability\": 0.1, \"xtc_threshold\": 0.1, \"repeat_last_n\": 32, \"presence_penalty\": 0.5, \"frequency_penalty\": 0.2, \"min_keep\": 1, \"ignore_eos\": true, \"mirostat\": 0}")
    [ "$code" = 200 ] && ok "/v1/completions with llama-server's sampling fields" || bad "llama fields: $code $(head -c 300 "$T/body")"
    code=$(post /completion "{\"prompt\": \"$P\", \"n_predict\": 16, \"mirostat\": 2, \"mirostat_tau\": 3, \"mirostat_eta\": 0.2}")
    [ "$code" = 200 ] && [ "$(text_of "$T/body")" = "$GTEXT" ] && ok "/completion mirostat 2 at the server's --temp 0: greedy" ||
        bad "/completion mirostat: $code $(head -c 300 "$T/body")"
    n_bad=0
    for body in '{"prompt":"x","samplers":["bogus"]}' '{"prompt":"x","mirostat":3}' '{"prompt":"x","dry_sequence_breakers":[]}' \
                '{"prompt":"x","repeat_penalty":0}' '{"prompt":"x","xtc_probability":2}' '{"prompt":"x","samplers":7}'; do
        code=$(post /completion "$body")
        [ "$code" = 400 ] || { bad "$body: $code"; n_bad=1; }
    done
    [ $n_bad = 0 ] && ok "bad sampling fields: 400"
    stop_server
fi
# --config gives serve its model; sampling flags as llama-server's
printf 'model:\n  path: %s\ninference:\n  sampling:\n    temperature: 0\n' "$M" >"$T/c.yaml"
if start_server --config "$T/c.yaml" --top-k 1 --temp 2; then
    code=$(post /completion "{\"prompt\": \"$P\", \"n_predict\": 16, \"seed\": 9}")
    [ "$code" = 200 ] && [ "$(text_of "$T/body")" = "$GTEXT" ] && ok "serve --config (model from the file), --top-k 1 a default" ||
        bad "serve --config: $code $(head -c 300 "$T/body")"
    stop_server
fi
"$BIN" serve -m "$M" --chat-template nonsense --port 0 >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "unknown chat template 'nonsense' (built in: " "$T/err" &&
    ok "serve --chat-template nonsense: refused at start" || bad "serve unknown template: rc=$rc $(cat "$T/err")"

# ---- --config: the model for every command that takes one ------------------------------------------
OUT=$("$BIN" run --config "$T/c.yaml" -p "$P" -n 16 --json 2>"$T/err" | sed -n 's/.*"tokens":\[\([^]]*\)\].*/\1/p')
[ "$OUT" = "$G" ] && ok "run --config: model and --temp 0 from the file" || bad "run --config: $OUT $(cat "$T/err")"
printf 'Once upon a time\n' >"$T/prompts.txt"
"$BIN" profile --config "$T/c.yaml" -f "$T/prompts.txt" -o "$T/hot.txt" >/dev/null 2>"$T/err" && [ -s "$T/hot.txt" ] &&
    ok "profile --config" || bad "profile --config: $(cat "$T/err")"
"$BIN" doctor --config "$T/c.yaml" --seconds 0.2 --no-save >"$T/o" 2>"$T/err" && grep -q "expected speed" "$T/o" &&
    ok "doctor --config: the estimate for the file's model" || bad "doctor --config: $(tail -n 3 "$T/err")"
"$BIN" verify --config "$T/c.yaml" >"$T/o" 2>&1; rc=$?
[ $rc = 3 ] && grep -q "$M: GGUF structure ok" "$T/o" && ok "verify --config: checks the file's model" ||
    bad "verify --config: rc=$rc $(cat "$T/o")"

[ $fail = 0 ] && echo "test_llama_cli_compat: ok" || echo "test_llama_cli_compat: FAILED"
exit $fail
