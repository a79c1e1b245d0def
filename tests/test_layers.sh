#!/bin/sh
# test_layers.sh — the module layering (docs/architecture.md) holds: scripts/check_layers.sh
# passes on the tree, and fails on a copy of it with an upward include planted (base including
# the forward pass) and on one with an include cycle, naming the file.
set -u
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }
out=$(sh scripts/check_layers.sh . 2>&1) && ok "tree: $out" || bad "tree: $out"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/src" && cp -r src/base src/forward src/model "$T/src/"
printf '#include "forward/session.h"\n' >> "$T/src/base/hash.c"
out=$(sh scripts/check_layers.sh "$T" 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q 'src/base/hash.c includes "forward/session.h": base may not use forward' &&
    ok "planted upward include refused" || bad "planted upward include not refused: $out"
rm -rf "$T/src" && mkdir -p "$T/src/base"
printf '#include "base/b.h"\n' > "$T/src/base/a.h"
printf '#include "base/a.h"\n' > "$T/src/base/b.h"
out=$(sh scripts/check_layers.sh "$T" 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "include cycle" && ok "include cycle refused" || bad "include cycle not refused: $out"
mkdir -p "$T/app" && printf '#include "weights/weights.h"\n' > "$T/app/x.c" && rm -f "$T/src/base/a.h" "$T/src/base/b.h"
out=$(sh scripts/check_layers.sh "$T" 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "app may not use weights" && ok "app reaching into the engine refused" ||
    bad "app include of weights not refused: $out"
[ $fail = 0 ] && echo "test_layers: ok" || echo "test_layers: FAILED"
exit $fail
