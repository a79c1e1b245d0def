#!/bin/sh
# test_doctor.sh — `deltafin doctor MODEL` (short: --seconds 1) prints measurements and
# recommendations, writes the I/O profile in io.c's format (other lines kept), and a later
# `run --io auto` uses that profile instead of measuring (checked with -v: no "io auto:" line,
# and the store's engine is the profile's). Control: with an empty profile run does measure.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
T=$(mktemp -d /tmp/df_test_doctor.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$BIN" "$T/deltafin" || { echo "test_doctor: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
cp "$DEVBIN" "$T/deltafin-dev" || { echo "test_doctor: no binary $DEVBIN"; exit 1; }
DEVBIN="$T/deltafin-dev"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

# > 4 expert reads (io auto ignores tiny files): 3 layers x 16 experts x 3 x 512 KiB = 72 MiB
"$DEVBIN" gen-random --arch qwen3moe --n-embd 256 --n-layer 3 --n-expert 16 --n-ff-exp 512 --vocab bytes \
    "$T/m.gguf" >/dev/null 2>&1 || { echo "test_doctor: gen-random failed"; exit 1; }
echo "dev=9999:9 probe=4096 engine=mmap" >"$T/prof"

DELTAFIN_IO_PROFILE="$T/prof" "$BIN" doctor --seconds 1 "$T/m.gguf" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 0 ] || bad "doctor failed: rc=$rc $(cat "$T/err")"
for want in "memory read" "kernels " "ram " "buffered" "direct" "io auto choice" "--mem-limit" "-t " \
            "--io " "--prefetch" "expected speed" "tok/s"; do
    grep -q -- "$want" "$T/out" || bad "doctor output lacks '$want'"
done
DEV=$(stat -c '%Hd:%Ld' "$T/m.gguf" 2>/dev/null)
LINE=$(grep "^dev=$DEV probe=524288 engine=" "$T/prof")
ENG=$(echo "$LINE" | sed 's/.* engine=\([a-z]*\).*/\1/')
[ -n "$LINE" ] && ok "profile line written: $LINE" || bad "no profile line for dev=$DEV probe=524288: $(cat "$T/prof")"
grep -q "^dev=9999:9 probe=4096 engine=mmap$" "$T/prof" && ok "other profile lines kept" || bad "profile lost lines"
grep -q "^  --io $ENG " "$T/out" && ok "recommends --io $ENG" || bad "recommendation differs from profile ($ENG)"

# run with --io auto reuses the profile: no measurement, same engine
runv() {
    DELTAFIN_IO_PROFILE="$1" DELTAFIN_STREAM=1 "$BIN" run -m "$T/m.gguf" --io auto -v -p "hi" -n 2 --temp 0 -t 1 \
        2>"$T/rerr" >/dev/null
}
runv "$T/prof" || bad "run failed: $(tail -2 "$T/rerr")"
if ! grep -q "io auto:" "$T/rerr" && grep -q "io $ENG," "$T/rerr"; then ok "run --io auto used the doctor's profile ($ENG)"
else bad "run did not use the profile: $(grep -E 'io auto|experts:' "$T/rerr")"; fi
# control: a fresh profile path makes run measure (so the check above can fail)
runv "$T/fresh" || bad "control run failed"
grep -q "io auto:" "$T/rerr" && ok "control: without a profile run measures" || bad "control: no measurement line"

# a memory limit that holds a third of the experts: misses, an I/O floor and a tok/s range
DELTAFIN_IO_PROFILE="$T/prof" "$BIN" doctor --seconds 0.5 --no-save --mem-limit 95M "$T/m.gguf" >"$T/out" 2>&1
if grep -q "expert cache .* = [1-9][0-9]*% of the experts (memory plan at --mem-limit 95.00 MiB)" "$T/out" &&
   grep -q "I/O floor  *[0-9.]* ms/token ([1-9][0-9]*% misses" "$T/out" && grep -q "expected  *[0-9.]* - [0-9.]* tok/s" "$T/out" &&
   ! grep -q "= 100% of the experts" "$T/out"; then ok "estimate with --mem-limit: partial cache, I/O floor"
else bad "mem-limit estimate: $(sed -n '/expected speed/,$p' "$T/out")"; fi

# a fully written model gets no sparse warning; a sparse one (holes read at memory speed) does,
# and a K3-shaped sparse file whose dense part exceeds the limit shows the dense streaming plan
grep -q "is sparse" "$T/out" && bad "sparse warning on a fully written file" || ok "no sparse warning on a real file"
"$DEVBIN" gen-random --arch kimi-k3 --preset k3 --type q4_k --expert-type mxfp4 --sparse --vocab bytes "$T/k3.gguf" >/dev/null 2>&1 &&
DELTAFIN_IO_PROFILE="$T/prof" "$BIN" doctor --seconds 0.3 --no-save --mem-limit 22G "$T/k3.gguf" >"$T/k3out" 2>&1 &&
    grep -q "is sparse" "$T/k3out" && grep -q "dense: .* streamed through" "$T/k3out" &&
    ok "sparse K3-shaped file: warning + dense streaming plan" || bad "K3 doctor: $(tail -n 12 "$T/k3out")"
rm -f "$T/k3.gguf"
# --no-save leaves the profile alone; doctor without a model measures memory/CPU only
cp "$T/prof" "$T/prof.before"
DELTAFIN_IO_PROFILE="$T/prof" "$BIN" doctor --seconds 0.5 --no-save "$T/m.gguf" >/dev/null 2>&1
cmp -s "$T/prof" "$T/prof.before" && ok "--no-save writes nothing" || bad "--no-save changed the profile"
"$BIN" doctor >"$T/out" 2>&1 && grep -q "memory read" "$T/out" && ! grep -q "^disk" "$T/out" &&
    ok "doctor without MODEL" || bad "no-model doctor: $(cat "$T/out")"
"$BIN" doctor "$T/missing.gguf" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "missing.gguf" "$T/err" && ok "missing model reported" || bad "missing model: rc=$rc"

[ $fail = 0 ] && echo "test_doctor: ok" || echo "test_doctor: FAILED"
exit $fail
