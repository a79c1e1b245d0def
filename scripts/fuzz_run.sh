#!/bin/sh
# fuzz_run.sh TARGET [MINUTES] — run one libFuzzer target (fuzz/fuzz_TARGET.c, built by
# `make fuzz` into build-fuzz/) for MINUTES (default 10) on its corpus, merge what it found
# into fuzz/corpus/TARGET (libFuzzer -merge=1: only inputs that add coverage), and append a
# row to fuzz/runs.tsv:
#   date  commit  target  minutes  executions  crashes  timeouts  ooms  corpus_files  corpus_kib
# A crash, timeout or OOM leaves its input in build-fuzz/findings/TARGET/ (reproduce with
# build-fuzz/fuzz_TARGET FILE) and makes the script exit 1. Run one or two at a time on a
# shared machine (each uses one core). Environment: DELTAFIN_FIXTURES (tokenizer vocabularies).
set -u
TARGET=${1:?usage: fuzz_run.sh TARGET [MINUTES]}
MIN=${2:-10}
BIN=build-fuzz/fuzz_$TARGET
CORPUS=fuzz/corpus/$TARGET
[ -n "${DELTAFIN_FIXTURES:-}" ] || export DELTAFIN_FIXTURES="$(cd .. && pwd)/shared/fixtures"
make -s "$BIN" || { echo "fuzz_run: cannot build $BIN"; exit 1; }
mkdir -p "$CORPUS" "build-fuzz/findings/$TARGET"
NEW=$(mktemp -d /tmp/df_fuzz_$TARGET.XXXXXX)
STAMP=$(mktemp /tmp/df_fuzz_stamp.XXXXXX)   # findings newer than this are this run's
case $TARGET in
    gguf|pack) MAXLEN=262144 ;;
    chat_template|tokenizer|server) MAXLEN=16384 ;;
    *) MAXLEN=8192 ;;
esac
LOG=build-fuzz/$TARGET.log
secs=$((MIN * 60))
# -fork would spread over cores; one process keeps the shared machine usable
"$BIN" "$NEW" "$CORPUS" -max_total_time=$secs -max_len=$MAXLEN -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="build-fuzz/findings/$TARGET/" -print_final_stats=1 >"$LOG" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$LOG" | tail -n 1)
[ -n "$execs" ] || execs=$(grep -o '#[0-9]*' "$LOG" | tail -n 1 | tr -d '#')
# findings of this run (earlier runs' stay in the folder too)
found() { find "build-fuzz/findings/$TARGET" -maxdepth 1 -type f -newer "$STAMP" 2>/dev/null | sed 's|.*/||' | grep -c "$1"; }
crashes=$(found '^crash-\|^leak-\|^deadly-')
timeouts=$(found '^timeout-\|^slow-unit-')
ooms=$(found '^oom-')
# keep only what adds coverage; hand-named inputs (seeds, regress_*: any name that is not a
# 40-hex digest) always stay under their names and count as the corpus the merge starts from
MERGED=$(mktemp -d /tmp/df_fuzz_merge_$TARGET.XXXXXX)
for f in "$CORPUS"/*; do
    [ -f "$f" ] && ! basename "$f" | grep -q '^[0-9a-f]\{40\}$' && cp "$f" "$MERGED"/
done
# only after a clean run: libFuzzer's merge leaves out inputs that crash, so a target broken on
# every input (a build that cannot run here) would "merge" the corpus down to nothing
if [ "$crashes" = 0 ] && [ "$timeouts" = 0 ] && [ "$ooms" = 0 ] &&
   "$BIN" -merge=1 -max_len=$MAXLEN "$MERGED" "$CORPUS" "$NEW" >>"$LOG" 2>&1; then
    for f in "$CORPUS"/*; do basename "$f" | grep -q '^[0-9a-f]\{40\}$' && rm -f "$f"; done
    cp "$MERGED"/* "$CORPUS"/ 2>/dev/null
fi
rm -rf "$NEW" "$MERGED" "$STAMP"
files=$(ls "$CORPUS" | wc -l)
kb=$(( $(cat "$CORPUS"/* 2>/dev/null | wc -c) / 1024 ))
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%Y-%m-%d)" "$(git rev-parse --short HEAD)" "$TARGET" "$MIN" \
    "${execs:-0}" "$crashes" "$timeouts" "$ooms" "$files" "$kb" >>fuzz/runs.tsv
echo "fuzz_run: $TARGET: $MIN min, ${execs:-0} executions, $crashes crashes, $timeouts timeouts, $ooms OOMs; corpus $files files ($kb KiB)"
[ $rc = 0 ] && [ "$crashes$timeouts$ooms" = 000 ]
