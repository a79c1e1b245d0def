#!/bin/sh
# test_pull.sh — `deltafin pull` against a loopback HTTP server (tests/pull_server.py):
# download + SHA-256 ok; a connection dropped midway is resumed with Range and completes;
# an existing .part is resumed; a 503 is retried; a server ignoring Range restarts cleanly;
# corrupted bytes are rejected leaving only PATH.part; a split model downloads every part;
# 404 fails without retrying; the SHA-256 is computed while downloading (also across resume
# and restart); bearer tokens go only where they should; the org/repo/file shorthand maps to
# huggingface.co (dry run only: nothing outside 127.0.0.1 is contacted); servers that lie (an
# HTML page, sizes, cut answers, a redirect loop, wrong bytes), a DNS failure, org/repo:QUANT
# through a local copy of the Hub's file-list API (single file, split model, wrong SHA-256).
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}   # gen-random
PY=/usr/bin/python3
[ -x $PY ] || { echo "test_pull: skipped (no $PY)"; exit 0; }
T=$(mktemp -d /tmp/df_test_pull.XXXXXX)
SRV=
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM
cp "$BIN" "$T/deltafin" || { echo "test_pull: no binary $BIN"; exit 1; }
BIN="$T/deltafin"
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

mkdir -p "$T/srv" "$T/out"
head -c 3000000 /dev/urandom >"$T/srv/m.bin"
SUM=$(sha256sum "$T/srv/m.bin" | cut -d' ' -f1)
# GGUF files (a .gguf download must be one): a small model, split in 3 parts
"$DEVBIN" gen-random --arch qwen3moe --n-layer 2 --n-expert 4 --vocab bytes --seed 1 "$T/srv/s.gguf" >/dev/null 2>&1 &&
    $PY "$(dirname "$0")/lib/gguf_tool.py" split "$T/srv/s.gguf" 3 >/dev/null || { echo "test_pull: cannot make GGUF files"; exit 1; }
"$DEVBIN" gen-random --arch llama --n-layer 1 --vocab bytes --seed 2 "$T/srv/other.gguf" >/dev/null 2>&1
mv "$T/srv/s.gguf" "$T/srv/one.gguf"
ONESUM=$(sha256sum "$T/srv/one.gguf" | cut -d' ' -f1)
(cd "$T/srv" && sha256sum s-0000?-of-00003.gguf) >"$T/split.sha256"
# a Hub repository: one single-file quantization, one split in a folder, an mmproj to ignore
H="$T/srv/hub/org/Model-GGUF"
mkdir -p "$H/Q8_0" "$T/srv/hub/org/Bad-GGUF"
cp "$T/srv/one.gguf" "$H/Model-Q4_K_M.gguf"; cp "$T/srv/other.gguf" "$H/mmproj-Model-Q4_K_M.gguf"
for k in 1 2 3; do cp "$T/srv/s-0000$k-of-00003.gguf" "$H/Q8_0/Model-Q8_0-0000$k-of-00003.gguf"; done
cp "$T/srv/one.gguf" "$T/srv/hub/org/Bad-GGUF/Model-Q4_K_M.gguf"; : >"$T/srv/hub/org/Bad-GGUF/badsum"

$PY "$(dirname "$0")/pull_server.py" "$T/srv" "$T/port" "$T/log" 120 &
SRV=$!
for i in $(seq 1 100); do [ -f "$T/port" ] && break; sleep 0.05; done
[ -f "$T/port" ] || { echo "test_pull: server did not start"; exit 1; }
U="http://127.0.0.1:$(cat "$T/port")"
P="$BIN pull -q --retry-wait 0.05"

# 1. plain download with checksum
$P "$U/f/m.bin" -o "$T/out/a.bin" --sha256 "$SUM" 2>"$T/err"
cmp -s "$T/srv/m.bin" "$T/out/a.bin" && [ ! -e "$T/out/a.bin.part" ] && grep -q "$SUM  a.bin" "$T/out/a.bin.sha256" &&
    ok "download + SHA-256 ok, manifest written" || bad "plain download: $(cat "$T/err")"

# 2. connection dropped halfway -> retried with Range, completes
DELTAFIN_LOG=3 $P "$U/drop/m.bin" -o "$T/out/b.bin" --sha256 "$SUM" 2>"$T/err"
if cmp -s "$T/srv/m.bin" "$T/out/b.bin" && grep -q "^/drop/m.bin bytes=[1-9][0-9]*-" "$T/log" &&
   grep -q "SHA-256 computed while downloading" "$T/err"; then
    ok "dropped connection resumed with Range ($(grep '^/drop/' "$T/log" | tr '\n' ' '))"
else bad "drop/resume: $(cat "$T/err") log: $(grep drop "$T/log")"; fi

# 3. an existing .part (earlier interrupted run) is resumed, not restarted
head -c 1234567 "$T/srv/m.bin" >"$T/out/c.bin.part"
$P "$U/f/m.bin" -o "$T/out/c.bin" --sha256 "$SUM" 2>"$T/err"
cmp -s "$T/srv/m.bin" "$T/out/c.bin" && grep -q "^/f/m.bin bytes=1234567-" "$T/log" &&
    ok "existing .part resumed at byte 1234567" || bad "resume .part: $(cat "$T/err")"

# 4. 503 is retried
$P "$U/busy/m.bin" -o "$T/out/d.bin" 2>"$T/err"
cmp -s "$T/srv/m.bin" "$T/out/d.bin" && [ "$(grep -c '^/busy/' "$T/log")" -ge 2 ] &&
    ok "HTTP 503 retried" || bad "503 retry: $(cat "$T/err")"

# 5. server ignoring Range: a stale .part is replaced, result still exact
head -c 5000 /dev/urandom >"$T/out/e.bin.part"
DELTAFIN_LOG=3 $P "$U/norange/m.bin" -o "$T/out/e.bin" --sha256 "$SUM" 2>"$T/err"
cmp -s "$T/srv/m.bin" "$T/out/e.bin" && grep -q "SHA-256 computed while downloading" "$T/err" && ok "no Range support: restarted from 0" || bad "norange: $(cat "$T/err")"

# 6. corrupted bytes: rejected, only the .part is left
$P "$U/corrupt/m.bin" -o "$T/out/f.bin" --sha256 "$SUM" 2>"$T/err"; rc=$?
if [ $rc != 0 ] && [ ! -e "$T/out/f.bin" ] && [ -e "$T/out/f.bin.part" ] && grep -q "SHA-256 mismatch" "$T/err"; then
    ok "corrupted download rejected, nothing complete-looking kept"
else bad "corrupt: rc=$rc $(ls "$T/out") $(cat "$T/err")"; fi
# running again does not turn the bad .part into a complete file either
$P "$U/f/m.bin" -o "$T/out/f.bin" --sha256 "$SUM" 2>"$T/err"; rc=$?
[ $rc != 0 ] && [ ! -e "$T/out/f.bin" ] && ok "corrupt .part stays rejected on rerun" || bad "rerun after corrupt: rc=$rc"

# 7. split model: all parts, each checked against the manifest, manifest kept for verify
$P "$U/f/s-00001-of-00003.gguf" -o "$T/out/split/" --sha256-file "$T/split.sha256" 2>"$T/err"
okk=1
for k in 1 2 3; do cmp -s "$T/srv/s-0000$k-of-00003.gguf" "$T/out/split/s-0000$k-of-00003.gguf" || okk=0; done
[ $okk = 1 ] && [ -f "$T/out/split/s-00001-of-00003.gguf.sha256" ] && ok "split model: 3 parts downloaded and checked" ||
    bad "split: $(cat "$T/err") $(ls "$T/out/split" 2>&1)"
# a manifest that disagrees with part 2 stops at part 2 with only its .part
sed "s/^[0-9a-f]\{8\}\(.*s-00002\)/00000000\1/" "$T/split.sha256" >"$T/bad.sha256"
$P "$U/f/s-00001-of-00003.gguf" -o "$T/out/split2" --sha256-file "$T/bad.sha256" 2>"$T/err"; rc=$?
[ $rc != 0 ] && [ -f "$T/out/split2/s-00001-of-00003.gguf" ] && [ ! -e "$T/out/split2/s-00002-of-00003.gguf" ] &&
    [ -e "$T/out/split2/s-00002-of-00003.gguf.part" ] && ok "split part with wrong checksum rejected" ||
    bad "split bad sum: rc=$rc $(ls "$T/out/split2" 2>&1)"

# progress when stderr is not a terminal: plain lines with rate, and the final "done in" line
"$BIN" pull --retry-wait 0.05 "$U/f/m.bin" -o "$T/out/h.bin" 2>"$T/err"
grep -q "^h.bin: 100.0% 2.86 MiB / 2.86 MiB, .*/s, done in [0-9]*:[0-9][0-9]$" "$T/err" && ! grep -q "$(printf '\r')" "$T/err" &&
    ok "progress lines (no bar) when not a terminal" || bad "progress: $(cat "$T/err")"

# on a terminal: a bar redrawn in place (script(1) gives the command a pty)
if command -v script >/dev/null 2>&1; then
    script -qec "$BIN pull $U/f/m.bin -o $T/out/j.bin" /dev/null >"$T/tty" 2>&1
    grep -q "j.bin \[##############################\] 100.0%" "$T/tty" && grep -q "$(printf '\r')" "$T/tty" &&
        cmp -s "$T/srv/m.bin" "$T/out/j.bin" && ok "progress bar on a terminal" || bad "bar: $(cat -v "$T/tty")"
fi

# 8. 404: fails at once, no retries, no file
$P --retries 3 "$U/f/missing.bin" -o "$T/out/g.bin" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "HTTP 404" "$T/err" && [ ! -e "$T/out/g.bin" ] && [ "$(grep -c missing.bin "$T/log")" = 1 ] &&
    ok "404 fails without retries" || bad "404: rc=$rc $(cat "$T/err")"
# an existing complete file is not overwritten
$P "$U/f/m.bin" -o "$T/out/a.bin" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "already exists" "$T/err" && ok "refuses to overwrite" || bad "overwrite: rc=$rc"
$P "$U/f/m.bin" -o "$T/out/a.bin" --sha256 "$SUM" 2>"$T/err" && grep -q "already complete" "$T/err" &&
    ok "already complete with matching SHA-256 is a no-op" || bad "no-op: $(cat "$T/err")"

# tokens: --token is sent to the URL's host; $HF_TOKEN is never sent to hosts other than huggingface.co
HF_TOKEN=sekrit $P "$U/auth/m.bin" -o "$T/out/i.bin" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "HTTP 401 (gated or private" "$T/err" && ! grep -q "^/auth/.* auth$" "$T/log" &&
    ok "HF_TOKEN not sent to a non-HF host; 401 explained" || bad "HF_TOKEN leak/401: rc=$rc $(cat "$T/err") $(grep auth "$T/log")"
$P --token sekrit "$U/auth/m.bin" -o "$T/out/i.bin" --sha256 "$SUM" 2>"$T/err"
cmp -s "$T/srv/m.bin" "$T/out/i.bin" && ok "--token authorizes" || bad "--token: $(cat "$T/err")"
grep -q sekrit "$T/err" && bad "token printed" || true

# 10. servers that lie: every case must end with a clear error or the right file, never a
#     complete-looking wrong file
cases=0
lie() { cases=$((cases + 1)); }
lie; $P "$U/html/x.gguf" -o "$T/out/html.gguf" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "not a GGUF file: the server sent an HTML page (\"<!DOCTYPE html> <html>" "$T/err" &&
    [ ! -e "$T/out/html.gguf" ] && [ ! -e "$T/out/html.gguf.part" ] && ok "HTML page served as .gguf refused, nothing saved" ||
    bad "html: rc=$rc $(cat "$T/err") $(ls "$T/out" | grep html)"
lie; $P "$U/lie/one.gguf" -o "$T/out/lie.gguf" --sha256 "$ONESUM" 2>"$T/err"; rc=$?
[ $rc = 0 ] && cmp -s "$T/srv/one.gguf" "$T/out/lie.gguf" && ok "Content-Length larger than the file: resumed, then complete and checked" ||
    bad "lie: rc=$rc $(cat "$T/err")"
lie; $P --retries 2 "$U/short/one.gguf" -o "$T/out/short.gguf" --sha256 "$ONESUM" 2>"$T/err"; rc=$?
[ $rc = 0 ] && cmp -s "$T/srv/one.gguf" "$T/out/short.gguf" && [ "$(grep -c '^/short/' "$T/log")" -gt 5 ] &&
    ok "every answer cut short halfway: resumed $(grep -c '^/short/' "$T/log") times to the exact file" || bad "short: rc=$rc $(tail -n 3 "$T/err")"
lie; $P --retries 2 "$U/dead/one.gguf" -o "$T/out/dead.gguf" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "gave up after 2 retries; run again to resume from .*dead.gguf.part" "$T/err" && [ ! -e "$T/out/dead.gguf" ] &&
    ok "answers that never carry a byte: gives up after the retries" || bad "dead: rc=$rc $(cat "$T/err")"
lie; $P "$U/shortlie/one.gguf" -o "$T/out/sl.gguf" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "the download is not a complete GGUF file: .*truncated" "$T/err" && [ ! -e "$T/out/sl.gguf" ] &&
    [ -e "$T/out/sl.gguf.part" ] && ok "half a file claimed complete (no checksum): the GGUF check refuses it" ||
    bad "shortlie: rc=$rc $(cat "$T/err")"
lie; $P "$U/shortlie/one.gguf" -o "$T/out/sl2.gguf" --sha256 "$ONESUM" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "SHA-256 mismatch" "$T/err" && [ ! -e "$T/out/sl2.gguf" ] && ok "half a file claimed complete: SHA-256 mismatch" ||
    bad "shortlie sha: rc=$rc $(cat "$T/err")"
lie; t0=$(date +%s); $P --retries 5 "$U/loop/one.gguf" -o "$T/out/loop.gguf" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "redirect loop" "$T/err" && [ $(( $(date +%s) - t0 )) -lt 10 ] && [ ! -e "$T/out/loop.gguf" ] &&
    ok "redirect loop: stops at once" || bad "loop: rc=$rc $(cat "$T/err")"
lie; $P "$U/wrong/one.gguf" -o "$T/out/wrong.gguf" --sha256 "$ONESUM" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "SHA-256 mismatch: expected $ONESUM" "$T/err" && [ ! -e "$T/out/wrong.gguf" ] &&
    ok "wrong bytes served: SHA-256 mismatch, nothing complete-looking kept" || bad "wrong: rc=$rc $(cat "$T/err")"
lie; echo "not a gguf at all, from an earlier download of the wrong thing" >"$T/out/stale.gguf.part"
$P "$U/f/one.gguf" -o "$T/out/stale.gguf" --sha256 "$ONESUM" 2>"$T/err"; rc=$?
[ $rc = 0 ] && cmp -s "$T/srv/one.gguf" "$T/out/stale.gguf" && ok "a .part that is no GGUF is not resumed: downloaded from the start" ||
    bad "stale part: rc=$rc $(cat "$T/err")"
lie; t0=$(date +%s); $P --retries 5 "http://no-such-host.invalid/m.gguf" -o "$T/out/dns.gguf" 2>"$T/err"; rc=$?
dt=$(( $(date +%s) - t0 ))
[ $rc != 0 ] && grep -q "does not resolve" "$T/err" && [ $dt -lt 10 ] && ok "DNS failure reported at once (${dt} s, no retries)" ||
    bad "dns: rc=$rc ${dt}s $(cat "$T/err")"

# 11. org/repo:QUANT through the Hub's file list (HF_ENDPOINT = this server; 3 entries a page)
export HF_ENDPOINT="$U"
lie; $P org/Model-GGUF:Q4_K_M -o "$T/out/hub/" 2>"$T/err"; rc=$?
[ $rc = 0 ] && cmp -s "$T/srv/one.gguf" "$T/out/hub/Model-Q4_K_M.gguf" && grep -q "SHA-256 ok" "$T/err" &&
    grep -q "^$ONESUM  Model-Q4_K_M.gguf$" "$T/out/hub/Model-Q4_K_M.gguf.sha256" && [ ! -e "$T/out/hub/mmproj-Model-Q4_K_M.gguf" ] &&
    grep -q "cursor=3" "$T/log" && ok "org/repo:Q4_K_M: the file from the (paged) listing, checked with its SHA-256" ||
    bad "hub single: rc=$rc $(cat "$T/err") $(ls "$T/out/hub" 2>&1)"
"$BIN" verify -q "$T/out/hub/Model-Q4_K_M.gguf" >"$T/vout" 2>&1 && ok "verify re-checks it from the manifest pull wrote" ||
    bad "hub verify: $(cat "$T/vout")"
lie; $P org/Model-GGUF:q8_0 -o "$T/out/hub8" 2>"$T/err"; rc=$?
okk=1; for k in 1 2 3; do cmp -s "$T/srv/s-0000$k-of-00003.gguf" "$T/out/hub8/Model-Q8_0-0000$k-of-00003.gguf" || okk=0; done
[ $rc = 0 ] && [ $okk = 1 ] && [ "$(grep -c "SHA-256 ok" "$T/err")" = 3 ] && [ "$(wc -l <"$T/out/hub8/Model-Q8_0-00001-of-00003.gguf.sha256")" = 3 ] &&
    ok "org/repo:q8_0: every part of the split model, each checked" || bad "hub split: rc=$rc $(cat "$T/err")"
lie; $P org/Model-GGUF:IQ2_XS -o "$T/out/hubx" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "no .gguf file for quantization 'IQ2_XS' (the repository has: .*Q4_K_M.*Q8_0\|no .gguf file for quantization 'IQ2_XS' (the repository has: .*Q8_0.*Q4_K_M" "$T/err" &&
    ok "unknown quantization: the ones the repository has are listed" || bad "hub none: rc=$rc $(cat "$T/err")"
lie; $P org/Bad-GGUF:Q4_K_M -o "$T/out/hubbad/" 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "SHA-256 mismatch" "$T/err" && [ ! -e "$T/out/hubbad/Model-Q4_K_M.gguf" ] &&
    ok "a listing whose SHA-256 disagrees with the bytes: refused" || bad "hub badsum: rc=$rc $(cat "$T/err")"
lie; $P org/Missing-GGUF:Q4_K_M 2>"$T/err"; rc=$?
[ $rc != 0 ] && grep -q "HTTP 404: no such repository" "$T/err" && ok "unknown repository: HTTP 404 named" || bad "hub 404: rc=$rc $(cat "$T/err")"
unset HF_ENDPOINT

# 12. a Hugging Face page link (/blob/) is read as its download (/resolve/)
OUT=$($BIN pull --dry-run https://huggingface.co/org/Model-GGUF/blob/main/Model-Q4_K_M.gguf -o "$T/x.gguf" 2>&1)
echo "$OUT" | grep -q "^https://huggingface.co/org/Model-GGUF/resolve/main/Model-Q4_K_M.gguf -> $T/x.gguf$" &&
    ok "/blob/ page link rewritten to /resolve/" || bad "blob: $OUT"
if [ -n "${DELTAFIN_SWEEP_OUT:-}" ]; then
    printf 'pull against lying servers\t%d\t0\t0\t%d\t0\n' "$cases" "$fail" >>"$DELTAFIN_SWEEP_OUT/sweep.tsv"
fi

# 9. shorthand -> Hugging Face URL (dry run: nothing is contacted), split expansion
OUT=$($BIN pull --dry-run Qwen/Qwen3-GGUF/sub/q-00001-of-00002.gguf -o "$T/hf" 2>&1)
echo "$OUT" | grep -q "^https://huggingface.co/Qwen/Qwen3-GGUF/resolve/main/sub/q-00002-of-00002.gguf -> $T/hf/q-00002-of-00002.gguf$" &&
    ok "org/repo/file shorthand and split expansion" || bad "shorthand: $OUT"
$BIN pull --dry-run notashorthand 2>"$T/err"; rc=$?
[ $rc = 2 ] && ok "bad URL rejected" || bad "bad URL: rc=$rc"

[ $fail = 0 ] && echo "test_pull: ok" || echo "test_pull: FAILED"
exit $fail
