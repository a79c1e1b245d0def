#!/bin/sh
# bench_vs_llama.sh — issue 2's resident benchmark: a random model with the real widths of
# Qwen3-30B-A3B (n_embd 2048, 32 heads / 4 KV, head 128, 128 experts top-8, expert width 768;
# N_LAYER layers, Q8_0), generation and prompt tok/s of `deltafin bench` vs llama.cpp's
# `llama-bench` on the same file and thread count, run back to back.
#   usage: scripts/bench_vs_llama.sh [N_LAYER=4] [THREADS=2]
# Needs a llama.cpp build (LLAMA_CPP, default /work/llama.cpp) and build/deltafin + build/deltafin-dev (make).
set -eu
cd "$(dirname "$0")/.."
NL=${1:-4}; T=${2:-2}
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
M=${BENCH_MODEL:-/tmp/df-bench-qwen3-30b-a3b-${NL}l-q8_0.gguf}
[ -f "$M" ] || build/deltafin-dev gen-random --preset qwen3-30b-a3b --n-layer "$NL" --type q8_0 "$M"
echo "== deltafin"
build/deltafin bench -m "$M" -p 128 -n 32 -t "$T" -r 3
echo "== llama.cpp (llama-bench, default settings)"
"$LLAMA_CPP/build/bin/llama-bench" -m "$M" -p 128 -n 32 -t "$T" -r 3
