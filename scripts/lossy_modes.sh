#!/bin/sh
# lossy_modes.sh MODEL TEXT CACHE_SIZE [MODES...] — what each opt-in lossy routing mode costs and
# saves: perplexity (and its change against the model's own routing) and the bytes read per
# token with the routed experts streamed (--io pread) through a cache of CACHE_SIZE.
# MODES are flag strings, e.g. "--experts-per-token 1" "--expert-top-p 0.9"; default: a set.
# Prints a TSV table: mode, ppl, dppl%, MB read/token, dropped slots %, moved slots.
set -eu
BIN=${DELTAFIN_BIN:-./build/deltafin}
M=$1 T=$2 CS=$3
shift 3
[ $# -gt 0 ] || set -- "--experts-per-token 1" "--expert-top-p 0.8" "--expert-top-p 0.9" \
    "--cache-aware-routing 0.1" "--cache-aware-routing 0.3"
run_one() { # flags -> "ppl mb dropped% moved"
    # shellcheck disable=SC2086
    out=$("$BIN" perplexity -m "$M" -f "$T" -c 128 --io pread --cache-size "$CS" -t 2 $1 2>&1) || {
        echo "lossy_modes: perplexity $1 failed: $out" >&2; exit 1; }
    ppl=$(printf '%s\n' "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
    lossy=$(printf '%s\n' "$out" | grep 'lossy routing:' || true)
    drop=$(printf '%s\n' "$lossy" | sed -n 's/.*dropped (\([0-9.]*\)%).*/\1/p')
    moved=$(printf '%s\n' "$lossy" | sed -n 's/.*, \([0-9]*\) moved to cached.*/\1/p')
    mb=$(printf '%s\n' "$lossy" | sed -n 's/.*; \([0-9.]*\) MB read per token.*/\1/p')
    echo "$ppl ${mb:--} ${drop:-0} ${moved:-0}"
}
# "--expert-top-p 1" is the model's own routing (1 = off) but prints the bytes line
base=$(run_one "--expert-top-p 1")
bppl=${base%% *}
bmb=$(echo "$base" | cut -d' ' -f2)
printf 'mode\tppl\tdppl%%\tMB/token\tdropped%%\tmoved\n'
printf 'default\t%s\t0\t%s\t0\t0\n' "$bppl" "$bmb"
for mode in "$@"; do
    set -- $(run_one "$mode")
    d=$(awk -v a="$1" -v b="$bppl" 'BEGIN{printf "%+.2f", 100*(a-b)/b}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$1" "$d" "$2" "$3" "$4"
done
