#!/bin/sh
# demo.sh BUILD_DIR — `make demo`: tell a story with the shipped demo MoE model
# (models/demo-moe-q8_0.gguf: 5 layers x 16 experts, top-2; see models/README.md) under a
# memory limit so small that only part of the routed experts fit in the expert cache, then
# print the statistics (expert cache hits/misses, bytes read from disk, speed).
#
# The limit: deltafin refuses a limit below its smallest working set and says so; the demo
# finds that floor by bisection (each probe generates one token) and then allows about
# DEMO_SLOTS (default 20, i.e. a quarter of the 80 experts) expert slots above it.
# DEMO_MEM_LIMIT=SIZE overrides the search. Other knobs: DEMO_PROMPT, DEMO_N.
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
BIN="$BUILD/deltafin"
MODEL=${DEMO_MODEL:-models/demo-moe-q8_0.gguf}
PROMPT=${DEMO_PROMPT:-Once upon a time}
N=${DEMO_N:-200}
SLOTS=${DEMO_SLOTS:-20}
SLOT_BYTES=61440   # one expert cache slot of this model in deltafin (gate+up+down, each 4 KiB-rounded)

[ -x "$BIN" ] || { echo "demo: $BIN not found (run make)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "demo: $MODEL not found" >&2; exit 1; }

accepts() {  # accepts BYTES: does deltafin load the model and generate under this limit?
    "$BIN" run -m "$MODEL" -p "$PROMPT" -n 1 --temp 0 --mem-limit "$1" >/dev/null 2>&1
}

LIMIT=${DEMO_MEM_LIMIT:-}
if [ -z "$LIMIT" ]; then
    if ! "$BIN" run --help 2>&1 | grep -q -- "--mem-limit"; then
        echo "demo: this deltafin has no --mem-limit; running with every expert resident"
    else
        lo=0; hi=1073741824           # 1 GiB must be enough for a 3 MiB model
        if accepts $hi; then
            while [ $((hi - lo)) -gt 4096 ]; do
                mid=$(( (lo + hi) / 2 ))
                if accepts $mid; then hi=$mid; else lo=$mid; fi
            done
            LIMIT=$((hi + SLOTS * SLOT_BYTES))
        else
            echo "demo: deltafin refuses even a 1 GiB limit; running without one"
        fi
    fi
fi

echo "== deltafin demo: $MODEL"
echo "== prompt: \"$PROMPT\", $N tokens, greedy${LIMIT:+, --mem-limit $LIMIT bytes}"
echo
OUT=$(mktemp) || exit 1
ERR=$(mktemp) || exit 1
trap 'rm -f "$OUT" "$ERR"' EXIT
if [ -n "$LIMIT" ]; then
    set -- --mem-limit "$LIMIT"
else
    set --
fi
# -v: memory plan and expert-cache statistics on stderr, where this build has it
if "$BIN" run --help 2>&1 | grep -q -- "--verbose"; then set -- "$@" -v; fi
"$BIN" run -m "$MODEL" -p "$PROMPT" -n "$N" --temp 0 --json "$@" >"$OUT" 2>"$ERR"
rc=$?
if [ $rc -ne 0 ]; then
    cat "$ERR" >&2
    echo "demo: deltafin run failed ($rc)" >&2
    exit $rc
fi
# The JSON line is flat enough to pick apart with sed (no Python or jq needed).
json=$(tail -n 1 "$OUT")
text=$(printf '%s' "$json" | sed -n 's/.*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p' |
       sed 's/\\n/\n/g; s/\\"/"/g; s/\\\\/\\/g')
field() { printf '%s' "$json" | sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }
printf '%s%s\n\n' "$PROMPT" "$text"
hits=$(field expert_hits); miss=$(field expert_misses); bytes=$(field bytes_read)
echo "== statistics"
grep -v '^$' "$ERR" | sed 's/^/   /'
printf '   tokens: prompt %s, generated %s; %s tok/s\n' "$(field n_prompt)" "$(field n_gen)" "$(field gen_tok_s)"
printf '   expert cache: %s hits, %s misses; %s bytes read from disk; peak RSS %s bytes\n' \
    "${hits:-?}" "${miss:-?}" "${bytes:-?}" "$(field peak_rss)"
if [ -n "$miss" ] && [ "$miss" != 0 ]; then
    echo "   => routed experts were streamed from disk: only part of them fit under the limit"
else
    echo "   => no expert was read on demand (this build keeps every expert resident)"
fi
