#!/bin/sh
# logits_diff.sh — where does deltafin's output leave llama.cpp's? Teacher-forced comparison of
# the logits of both engines on the same token sequence (llama.cpp's greedy continuation of the
# prompt), one line per step: max and rms absolute difference, logit spread, both argmaxes.
#   usage: scripts/logits_diff.sh MODEL.gguf "PROMPT" [N_PREDICT=32] [ISA]
# Needs a llama.cpp build (LLAMA_CPP, default /work/llama.cpp), build/libdeltafin.a and python3
# with numpy. Steps whose logits are bit-identical print "exact".
set -eu
cd "$(dirname "$0")/.."
MODEL=$1; PROMPT=$2; N=${3:-32}; ISA=${4:-}
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
LIBDIR=$LLAMA_CPP/build/bin
[ -f "$LIBDIR/libllama.so" ] || LIBDIR=$LLAMA_CPP/build/lib
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
gcc -O2 -o "$TMP/oracle" scripts/llama_oracle.c -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
    -L"$LIBDIR" -lllama -lggml-base -Wl,-rpath,"$LIBDIR"
LIBS="-lpcre2-8 -lmicrohttpd -lcjson -lxxhash -lyaml -lcurl -lcrypto -lm -lpthread"
[ -f /usr/include/liburing.h ] && LIBS="$LIBS -luring"
# shellcheck disable=SC2086
gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -o "$TMP/df" scripts/df_logits.c ${DF_LIB:-build/libdeltafin.a} $LIBS
out=$("$TMP/oracle" "$MODEL" "$PROMPT" "$N" 2>/dev/null)
pids=$(printf '%s' "$out" | cut -f1)
gids=$(printf '%s' "$out" | cut -f2)
np=$(printf '%s' "$pids" | tr ',' '\n' | grep -c .)
ids=$pids${gids:+,$gids}
"$TMP/oracle" --logits "$MODEL" "$ids" "$np" "$TMP/ref.f32" 2>/dev/null
# shellcheck disable=SC2086
"$TMP/df" "$MODEL" "$ids" "$np" "$TMP/df.f32" $ISA
nsteps=$(( $(printf '%s' "$ids" | tr ',' '\n' | grep -c .) - np + 1 ))
"$PY" - "$TMP/ref.f32" "$TMP/df.f32" "$nsteps" <<'EOF'
import sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype=np.float32)
b = np.fromfile(sys.argv[2], dtype=np.float32)
steps = int(sys.argv[3])
if len(a) != len(b) or len(a) % steps:
    sys.exit(f"sizes differ: {len(a)} vs {len(b)} floats for {steps} steps")
a = a.reshape(steps, -1)
b = b.reshape(steps, -1)
print("step  max|diff|   rms|diff|  logit_std  argmax(llama.cpp) argmax(deltafin)")
for i in range(steps):
    d = np.abs(a[i].astype(np.float64) - b[i])
    tag = "exact" if d.max() == 0 else ""
    print(f"{i:4d}  {d.max():10.6f}  {np.sqrt((d * d).mean()):10.6f}  {a[i].std():9.4f}  "
          f"{a[i].argmax():8d} {b[i].argmax():8d}  {tag}")
EOF
