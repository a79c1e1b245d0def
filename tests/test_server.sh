#!/bin/sh
# deltafin serve end to end: starts the server on a free loopback port (--port 0), waits for
# /health, runs the official openai npm client (tests/server, installed on demand; SKIP with a
# message when npm cannot install it) and curl checks of every bad input (each must get an
# OpenAI-format error body with the right status while the server keeps serving), queue
# overflow, a slow client, prompt-cache reuse, /health while loading, SIGTERM drain, and a
# --chat-template-file server (the prompt is the file template's rendering; /props shows it).
# The server is always stopped (trap).
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
BIN=${DELTAFIN_BIN:-build/deltafin}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M="$FIX/models/llama-2-tiny-random.gguf"
[ -f "$M" ] || { echo "test_server: SKIP (no $M)"; exit 0; }
command -v curl >/dev/null || { echo "test_server: SKIP (no curl)"; exit 0; }
ROOT=$(pwd)
T=$(mktemp -d)
SPID=""
KEY=test-key-123
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
    jobs -p | xargs -r kill 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
nfail=0; nok=0
ok() { nok=$((nok+1)); }
bad() { echo "test_server: FAIL: $*"; nfail=$((nfail+1)); }

start_server() { # args...; sets SPID PORT URL
    "$BIN" serve -m "$M" --port 0 --api-key "$KEY" "$@" >"$T/out" 2>"$T/err" &
    SPID=$!
    PORT=""
    for i in $(seq 100); do
        PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out")
        [ -n "$PORT" ] && break
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$PORT" ] || { echo "test_server: FAIL: server did not start"; cat "$T/err"; exit 1; }
    URL="http://127.0.0.1:$PORT"
}
wait_health() {
    for i in $(seq 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && return 0
        sleep 0.1
    done
    echo "test_server: FAIL: /health never became 200"; cat "$T/err"; exit 1
}
# req NAME METHOD PATH EXPECTED_STATUS [curl args...]: checks the status and, for errors, the
# OpenAI error shape {"error":{"message","type","code"}}
req() {
    name=$1 method=$2 path=$3 want=$4; shift 4
    code=$(curl -s -o "$T/body" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $KEY" \
           -H 'Content-Type: application/json' "$@" "$URL$path")
    if [ "$code" != "$want" ]; then bad "$name: status $code, expected $want: $(head -c 300 "$T/body")"; return 1; fi
    if [ "$want" -ge 400 ] && ! grep -q '"error":{"message":"[^"]' "$T/body" ||
       [ "$want" -ge 400 ] && ! grep -q '"type":"[a-z_]*"' "$T/body" ||
       [ "$want" -ge 400 ] && ! grep -q '"code":' "$T/body"; then
        bad "$name: not an OpenAI error body: $(head -c 300 "$T/body")"; return 1
    fi
    ok; return 0
}

# ---- /health is 503 while the model loads (the model path is a FIFO nobody writes yet) ----
mkfifo "$T/slow.gguf"
"$BIN" serve -m "$T/slow.gguf" --port 0 >"$T/out" 2>"$T/err" &
SPID=$!
for i in $(seq 100); do PORT=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out"); [ -n "$PORT" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT"
req "health while loading" GET /health 503
req "chat while loading" POST /v1/chat/completions 503 -d '{"messages":[{"role":"user","content":"hi"}]}'
exec 4>"$T/slow.gguf"; exec 4>&-   # EOF: the load fails, the server exits with an error
wait "$SPID"; rc=$?; SPID=""
[ "$rc" -ne 0 ] && ok || bad "server with an unreadable model exited 0"

# ---- main server ----
start_server -c 4096 --parallel 2 --queue 2 --timeout 2 --max-body 64K
wait_health
MODEL=$(curl -s -H "Authorization: Bearer $KEY" "$URL/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
[ "$MODEL" = llama-2-tiny-random ] && ok || bad "/v1/models id '$MODEL'"

CHAT='{"model":"llama-2-tiny-random","messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"seed":3}'
req "chat" POST /v1/chat/completions 200 -d "$CHAT" && grep -q '"finish_reason":"length"' "$T/body" && ok || bad "chat body $(head -c 300 "$T/body")"
req "chat again" POST /v1/chat/completions 200 -d "$CHAT"
cached=$(sed -n 's/.*"cached_tokens":\([0-9]*\).*/\1/p' "$T/body")
[ "${cached:-0}" -gt 0 ] && ok || bad "second identical request reused no KV prefix (cached_tokens=$cached)"
req "generic model alias" POST /v1/chat/completions 200 -d '{"model":"gpt-4o","messages":[{"role":"user","content":"x"}],"max_tokens":2}'
req "completion" POST /v1/completions 200 -d '{"prompt":"Once upon a time","max_tokens":4,"logprobs":2}' &&
    grep -q '"token_logprobs":\[' "$T/body" && ok || bad "completion logprobs"
req "completion from token ids" POST /v1/completions 200 -d '{"prompt":[1,15043],"max_tokens":2}'
req "tokenize" POST /tokenize 200 -d '{"content":"Hello world"}'
toks=$(sed -n 's/.*"tokens":\(\[[0-9,]*\]\).*/\1/p' "$T/body")
[ -n "$toks" ] && ok || bad "tokenize body $(cat "$T/body")"
req "detokenize" POST /detokenize 200 -d "{\"tokens\":$toks}" && grep -q '"content":" *Hello world"' "$T/body" && ok ||
    bad "detokenize round trip: $(cat "$T/body")"
req "tools passed to the template" POST /v1/chat/completions 200 -d '{"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"max_tokens":2}'
req "stream" POST /v1/chat/completions 200 -N -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true}'
tail -c 20 "$T/body" | grep -q 'data: \[DONE\]' && [ "$(grep -c '^data: ' "$T/body")" -ge 4 ] && ok || bad "SSE stream: $(head -c 400 "$T/body")"

# ---- bad input: each gets an OpenAI error body and the right status ----
req "malformed JSON" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}' && grep -q invalid_json "$T/body" && ok || bad "malformed JSON code"
req "trailing garbage" POST /v1/chat/completions 400 -d '{"messages":[]} x'
req "not an object" POST /v1/completions 400 -d '[1,2]'
req "empty body" POST /v1/completions 400
req "messages wrong type" POST /v1/chat/completions 400 -d '{"messages":"hi"}'
req "messages empty" POST /v1/chat/completions 400 -d '{"messages":[]}'
req "role wrong" POST /v1/chat/completions 400 -d '{"messages":[{"role":"wizard","content":"hi"}]}'
req "temperature wrong type" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}'
req "temperature out of range" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"temperature":7}'
req "stop wrong type" POST /v1/completions 400 -d '{"prompt":"a","stop":[1]}'
req "prompt missing" POST /v1/completions 400 -d '{"max_tokens":3}'
req "token id outside vocab" POST /v1/completions 400 -d '{"prompt":[1,99999999],"max_tokens":2}'
req "detokenize bad ids" POST /detokenize 400 -d '{"tokens":[-1]}'
req "any model id (llama-server)" POST /v1/chat/completions 200 -d '{"model":"llama-9000","messages":[{"role":"user","content":"hi"}],"max_tokens":2}' &&
    grep -q '"model":"llama-2-tiny-random"' "$T/body" && ok || bad "the answer names the served model: $(head -c 300 "$T/body")"
req "negative max_tokens" POST /v1/completions 400 -d '{"prompt":"a","max_tokens":-3}'
req "zero max_tokens" POST /v1/completions 400 -d '{"prompt":"a","max_tokens":0}'
req "absurd max_tokens" POST /v1/completions 400 -d '{"prompt":"a","max_tokens":1000000000000}'
req "fractional max_tokens" POST /v1/completions 400 -d '{"prompt":"a","max_tokens":2.5}'
long=$(yes 'the quick brown fox jumps over the lazy dog' | head -n 1200 | tr '\n' ' ')
req "prompt longer than the context" POST /v1/completions 400 -d "{\"prompt\":\"$long\"}" &&
    grep -q context_length_exceeded "$T/body" && ok || bad "context_length_exceeded code"
head -c 70000 /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt":"/; s/$/"}/' >"$T/big.json"
req "oversized body" POST /v1/completions 413 --data-binary @"$T/big.json"
req "oversized chunked body" POST /v1/completions 413 -H 'Transfer-Encoding: chunked' --data-binary @"$T/big.json"
printf '{"prompt":"caf\xe9 \xff"}' >"$T/bad_utf8.json"
req "invalid UTF-8" POST /v1/completions 400 --data-binary @"$T/bad_utf8.json" && grep -q invalid_utf8 "$T/body" && ok || bad "invalid_utf8 code"
printf '{"prompt":"\xed\xa0\x80"}' >"$T/surrogate.json"
req "UTF-8 surrogate" POST /v1/completions 400 --data-binary @"$T/surrogate.json"
code=$(curl -s -o "$T/body" -w '%{http_code}' -d '{"prompt":"a"}' "$URL/v1/completions")
[ "$code" = 401 ] && grep -q authentication_error "$T/body" && ok || bad "missing API key: $code $(cat "$T/body")"
code=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Authorization: Bearer nope' "$URL/v1/models")
[ "$code" = 401 ] && ok || bad "wrong API key: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
[ "$code" = 200 ] && ok || bad "/health needs no key: $code"
req "unknown endpoint" POST /v1/nothing-here 404 -d '{}'
req "wrong method" GET /v1/chat/completions 405
# agents and llama-server clients (server_agents.c): bad values of the new fields, the llama.cpp endpoints
req "n = 0" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"n":0}'
req "n too large" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"n":17}'
req "bad grammar" POST /v1/completions 400 -d '{"prompt":"a","grammar":"root ::= ( \"a\""}' && grep -q grammar "$T/body" && ok || bad "bad grammar message"
req "bad schema" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}'
req "logit_bias outside vocab" POST /v1/completions 400 -d '{"prompt":"a","logit_bias":{"99999999":5}}'
req "logit_bias bad value" POST /v1/completions 400 -d '{"prompt":"a","logit_bias":{"5":"x"}}'
req "tool_choice without tools" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}'
req "tool_choice unknown function" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"g"}}}'
req "grammar with tools" POST /v1/chat/completions 400 -d '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"grammar":"root ::= \"x\""}'
req "grammar" POST /v1/completions 200 -d '{"prompt":"a","grammar":"root ::= (\"yes\" | \"no\") \".\"","max_tokens":20}' &&
    grep -Eq '"text":"(yes|no)\."' "$T/body" && grep -q '"finish_reason":"stop"' "$T/body" && ok || bad "grammar output: $(head -c 300 "$T/body")"
req "llama.cpp /completion" POST /completion 200 -d '{"prompt":"Hello","n_predict":3}' &&
    grep -q '"tokens_predicted":3' "$T/body" && grep -q '"stop_type":"limit"' "$T/body" && ok || bad "/completion body: $(head -c 300 "$T/body")"
# /completion n_probs: llama.cpp's completion_probabilities (per token id, token, bytes, logprob,
# top_logprobs of the n_probs best), non-streamed and in the stream chunks (a chunk carries the entries
# of the tokens whose text it sends, so one entry per token over the stream).
# Expected values recorded from llama-server (llama.cpp d32676d) with the same request on this model.
if command -v python3 >/dev/null; then
    NP_EXP='[[9439,-10.152198791503906,[[9439,-10.152198791503906],[20960,-10.153776168823242]]],[6937,-10.169352531433105,[[6937,-10.169352531433105],[6430,-10.171646118164062]]]]'
    np_check() { # FILE stream(0|1)
        python3 - "$1" "$2" "$NP_EXP" <<'PY'
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
if sys.argv[2] == "1":
    ev = [json.loads(l[6:]) for l in raw.splitlines() if l.startswith("data: ")]
    probs = [p for e in ev for p in e.get("completion_probabilities", [])]
    assert "completion_probabilities" not in ev[-1], "final chunk has probabilities"
else:
    probs = json.loads(raw)["completion_probabilities"]
exp = json.loads(sys.argv[3])
assert len(probs) == len(exp), "%d entries" % len(probs)
for p, (tid, lp, tops) in zip(probs, exp):
    assert list(p.keys()) == ["id", "token", "bytes", "logprob", "top_logprobs"], list(p.keys())
    assert p["id"] == tid and abs(p["logprob"] - lp) < 1e-3, (p["id"], p["logprob"])
    assert bytes(p["bytes"]).decode("utf-8") == p["token"], p
    assert [t["id"] for t in p["top_logprobs"]] == [t[0] for t in tops], p["top_logprobs"]
    for t, (_, tl) in zip(p["top_logprobs"], tops):
        assert list(t.keys()) == ["id", "token", "bytes", "logprob"] and abs(t["logprob"] - tl) < 1e-3, t
PY
    }
    req "/completion n_probs" POST /completion 200 -d '{"prompt":"Hello","n_predict":2,"n_probs":2,"temperature":0}' &&
        { np_check "$T/body" 0 && ok || bad "/completion n_probs: $(head -c 400 "$T/body")"; }
    req "/completion n_probs stream" POST /completion 200 -d '{"prompt":"Hello","n_predict":2,"n_probs":2,"temperature":0,"stream":true}' &&
        { np_check "$T/body" 1 && ok || bad "/completion n_probs stream: $(head -c 400 "$T/body")"; }
    req "/completion without n_probs" POST /completion 200 -d '{"prompt":"Hello","n_predict":2}' &&
        { ! grep -q completion_probabilities "$T/body" && ok || bad "/completion without n_probs has probabilities"; }
fi
req "n_probs not an integer" POST /completion 400 -d '{"prompt":"Hello","n_probs":1.5}'
req "post_sampling_probs" POST /completion 400 -d '{"prompt":"Hello","n_probs":2,"post_sampling_probs":true}'
req "/props" GET /props 200 && grep -q '"total_slots":2' "$T/body" && ok || bad "/props body: $(head -c 300 "$T/body")"
req "/slots" GET /slots 200 && grep -q '"is_processing"' "$T/body" && ok || bad "/slots body: $(head -c 300 "$T/body")"
req "embeddings base64" POST /v1/embeddings 200 -d '{"input":"Hello","encoding_format":"base64"}' && grep -q '"embedding":"[A-Za-z0-9+/]*=*"' "$T/body" && ok || bad "base64 embedding"
req "embeddings empty input" POST /v1/embeddings 400 -d '{"input":[]}'
code=$(curl -s -o "$T/body" -w '%{http_code}' "$URL/")
[ "$code" = 200 ] && grep -q '<title>deltafin chat</title>' "$T/body" && ok || bad "web page at /: $code"

# ---- queue: 2 slots + 2 waiting; the rest is refused with 429 ----
# first wait until the requests of the checks above have left their slots (on a loaded
# machine a cancelled or disconnected request can still hold one for a while)
for _ in $(seq 1 120); do
    curl -s -H "Authorization: Bearer $KEY" "$URL/metrics" >"$T/idle" 2>/dev/null
    grep -q '^deltafin_requests_processing 0$' "$T/idle" && grep -q '^deltafin_requests_queued 0$' "$T/idle" && break
    sleep 0.5
done
QP=""
for i in 1 2 3 4 5 6 7 8; do
    curl -s -o "$T/q$i" -w '%{http_code}\n' -H "Authorization: Bearer $KEY" \
        -d '{"prompt":"Count","max_tokens":2000,"seed":1}' "$URL/v1/completions" >"$T/qs$i" &
    QP="$QP $!"
done
wait $QP
n200=$(cat "$T"/qs* | grep -c '^200$'); n429=$(cat "$T"/qs* | grep -c '^429$')
[ $((n200 + n429)) -eq 8 ] && [ "$n429" -ge 1 ] && [ "$n200" -ge 4 ] && ok || bad "queue overflow: $n200 x 200, $n429 x 429 of 8"
for i in 1 2 3 4 5 6 7 8; do
    if grep -q '^429$' "$T/qs$i"; then grep -q '"code":"queue_full"' "$T/q$i" || bad "429 body: $(cat "$T/q$i")"; fi
    if grep -q '^200$' "$T/qs$i"; then grep -q '"completion_tokens":2000' "$T/q$i" || grep -q '"finish_reason":"stop"' "$T/q$i" || bad "queued request incomplete: $(head -c 200 "$T/q$i")"; fi
done

# ---- a slow client is dropped after --timeout (2 s) and the server keeps serving ----
t0=$(date +%s)
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"pro' >&3
timeout 15 cat <&3 >/dev/null
exec 3<&-
dt=$(( $(date +%s) - t0 ))
[ "$dt" -ge 1 ] && [ "$dt" -le 8 ] && ok || bad "slow client closed after ${dt}s (timeout 2s)"

# ---- the openai npm client ----
if command -v node >/dev/null && command -v npm >/dev/null; then
    if [ ! -d tests/server/node_modules/openai ]; then
        (cd tests/server && timeout 180 npm ci --no-audit --no-fund --loglevel=error >"$T/npm.log" 2>&1)
    fi
    if [ -d tests/server/node_modules/openai ]; then
        if DF_URL="$URL" DF_API_KEY="$KEY" DF_MODEL="$MODEL" timeout 300 node tests/server/client.test.mjs >"$T/node.log" 2>&1; then
            ok; echo "test_server: openai client: $(tail -n 1 "$T/node.log")"
        else
            bad "openai client tests:"; sed 's/^/  /' "$T/node.log"
        fi
    else
        echo "test_server: SKIP openai npm client tests (npm install failed: $(tail -n 2 "$T/npm.log" | tr '\n' ' '))"
    fi
else
    echo "test_server: SKIP openai npm client tests (node/npm not installed)"
fi

# ---- still healthy, metrics present ----
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
[ "$code" = 200 ] && ok || bad "/health after the bad inputs: $code"
curl -s -H "Authorization: Bearer $KEY" "$URL/metrics" >"$T/metrics"
for m in requests_total tokens_generated_total generation_tokens_per_second expert_cache_hits_total \
         expert_cache_misses_total bytes_read_total memory_rss_bytes requests_processing; do
    grep -q "^deltafin_$m [0-9]" "$T/metrics" && ok || bad "/metrics lacks deltafin_$m"
done

# ---- SIGTERM drains: the running request completes, then the server exits 0 ----
# A streamed request long enough (~4000 tokens) to be mid-generation when SIGTERM arrives: the
# signal is sent as soon as its first token is on the wire, so no polling race decides the test.
curl -s -N -o "$T/drain" -H "Authorization: Bearer $KEY" \
    -d '{"prompt":"Drain","max_tokens":4000,"seed":2,"stream":true}' "$URL/v1/completions" &
CPID=$!
held=no
for i in $(seq 600); do
    grep -q '^data: {' "$T/drain" 2>/dev/null && { held=yes; break; }
    sleep 0.05
done
[ "$held" = yes ] && ok || bad "the drain request never started streaming"
grep -q 'data: \[DONE\]' "$T/drain" && bad "the drain request finished before SIGTERM (too fast to test)"
kill -TERM "$SPID"
wait "$CPID"
wait "$SPID"; rc=$?; SPID=""
[ "$rc" -eq 0 ] && ok || bad "server exit status $rc after SIGTERM"
tail -c 20 "$T/drain" | grep -q 'data: \[DONE\]' && grep -q '"finish_reason":"\(length\|stop\)"' "$T/drain" && ok ||
    bad "request running at SIGTERM did not complete: $(tail -c 300 "$T/drain")"
grep -q 'stopped' "$T/err" && ok || bad "no clean stop message"

# ---- --chat-template-file: the file's template renders chats, /props shows it ----
printf '%s' '{%- for m in messages %}<<{{ m.role }}|{{ m.content }}>>{%- endfor %}{%- if add_generation_prompt %}<<assistant|{%- endif %}' \
    >"$T/tmpl.jinja"
start_server --chat-template-file "$T/tmpl.jinja"
wait_health
req "chat with --chat-template-file" POST /v1/chat/completions 200 \
    -d '{"messages":[{"role":"user","content":"hi there"}],"max_tokens":1}'
PT=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$T/body")
req "tokenize the rendered chat" POST /tokenize 200 -d '{"content":"<<user|hi there>><<assistant|","add_special":true}'
NT=$(sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' "$T/body" | tr ',' '\n' | grep -c .)
[ -n "$PT" ] && [ "$PT" = "$NT" ] && ok || bad "--chat-template-file: prompt_tokens '$PT' vs $NT tokens of the rendered text"
req "/props with --chat-template-file" GET /props 200 && grep -q '<<{{ m.role }}|' "$T/body" && ok ||
    bad "/props chat_template is not the file's: $(head -c 300 "$T/body")"
kill "$SPID"; wait "$SPID" 2>/dev/null; SPID=""

# ---- gpt-oss Harmony: the analysis channel is reasoning_content, not the answer, unless the
# request asks for llama-server's reasoning_format "none". A grammar makes the model write the
# Harmony text (the markers as plain text: the parser works on text), served with the gpt-oss
# template. ----
start_server -c 512 --parallel 1 --chat-template gpt-oss
wait_health
HGR='"grammar":"root ::= \"<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi.\""'
HMSG='"messages":[{"role":"user","content":"hi"}],"max_tokens":200'
req "harmony answer" POST /v1/chat/completions 200 -d "{$HMSG,$HGR}" &&
    grep -q '"content":"Hi."' "$T/body" && grep -q '"reasoning_content":"Think."' "$T/body" && ok ||
    bad "harmony: analysis not split off: $(head -c 400 "$T/body")"
req "harmony reasoning_format none" POST /v1/chat/completions 200 -d "{$HMSG,$HGR,\"reasoning_format\":\"none\"}" &&
    grep -q '"content":"<|channel|>analysis<|message|>Think.<|end|>Hi."' "$T/body" && ! grep -q reasoning_content "$T/body" && ok ||
    bad "harmony reasoning_format none: $(head -c 400 "$T/body")"
req "harmony streamed" POST /v1/chat/completions 200 -d "{$HMSG,$HGR,\"stream\":true}" &&
    [ "$(/usr/bin/python3 -c '
import json, sys
r = c = ""
for line in open(sys.argv[1]):
    if line.startswith("data: {"):
        for ch in json.loads(line[6:]).get("choices", []):
            d = ch.get("delta", {})
            r += d.get("reasoning_content") or ""; c += d.get("content") or ""
print(r + "|" + c)' "$T/body")" = "Think.|Hi." ] && ok || bad "harmony streamed deltas: $(head -c 600 "$T/body")"
req "reasoning_format bad value" POST /v1/chat/completions 400 -d "{$HMSG,\"reasoning_format\":\"hidden\"}" &&
    grep -q reasoning_format "$T/body" && ok || bad "reasoning_format bad value message"
kill -TERM "$SPID"; wait "$SPID"; SPID=""

if [ "$nfail" -eq 0 ]; then echo "test_server: OK ($nok checks)"; exit 0; fi
echo "test_server: $nfail FAILED ($nok ok)"; exit 1
