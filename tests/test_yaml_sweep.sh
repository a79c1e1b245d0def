#!/bin/sh
# test_yaml_sweep.sh — malformed deltafin.yaml files (tests/lib/yaml_sweep.py): YAML syntax,
# structure and values; each refusal must name the file, the line and the key or problem, and
# valid files must still work.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
[ -x /usr/bin/python3 ] || { echo "test_yaml_sweep: SKIP (no python3)"; exit 0; }
T=$(mktemp -d /tmp/df_test_yaml.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_yaml_sweep: no binary $BIN"; exit 1; }
"$DEVBIN" gen-random --arch llama --n-layer 1 --vocab bytes --seed 1 "$T/m.gguf" >/dev/null 2>&1 ||
    { echo "test_yaml_sweep: gen-random failed"; exit 1; }
/usr/bin/python3 "$(dirname "$0")/lib/yaml_sweep.py" "$T/deltafin" "$T/m.gguf" "$T" >"$T/log" 2>&1; rc=$?
grep -v "^ok " "$T/log" | tail -n 20
[ $rc = 0 ] && echo "test_yaml_sweep: ok" || echo "test_yaml_sweep: FAILED"
exit $rc
