#!/bin/sh
# check_gen_random.sh — rebuild every recorded random model with gen-random (and `deltafin
# quantize` where the recorded arguments pipe into it) and compare its sha256 with the one the
# reference outputs were recorded on. The generators must stay byte-identical: the tensor order,
# KV order and per-tensor RNG streams are part of the recorded files.
# Lists: tests/data/expected/{random_models,deepseek2/models,kimi_k3/models}.tsv (the models
# llama.cpp's outputs were recorded on), gen_random_extra.tsv (a regression guard for options
# those do not use: presets at one layer, sparse headers, raw experts, odd widths; recorded
# from the generator of 0030ad1, never run through llama.cpp; for a --sparse entry the digest
# is sha256 of the first 16 MiB followed by the file size), plus realwidth/models.tsv with
# --realwidth (two ~1 GB files, ~45 s; tests/test_realwidth.sh checks them in `make test`).
# Usage: sh scripts/check_gen_random.sh [--realwidth] [NAME-REGEX]
# Env: DELTAFIN_DEV_BIN (build/deltafin-dev), DELTAFIN_BIN (build/deltafin, for quantize),
#      DELTAFIN_FIXTURES (../shared/fixtures). Exit 1 on any difference.
cd "$(dirname "$0")/.." || exit 2
DEVBIN=${DELTAFIN_DEV_BIN:-build/deltafin-dev}
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
export DELTAFIN_FIXTURES="$FIX"
E=tests/data/expected
LISTS="$E/random_models.tsv $E/deepseek2/models.tsv $E/kimi_k3/models.tsv $E/gen_random_extra.tsv"
if [ "${1:-}" = "--realwidth" ]; then LISTS="$LISTS tests/data/expected/realwidth/models.tsv"; shift; fi
ONLY=${1:-.}
for b in "$DEVBIN" "$BIN"; do [ -x "$b" ] || { echo "check_gen_random: $b not built (make)"; exit 2; }; done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM
n_ok=0; n_bad=0
for list in $LISTS; do
    set_name=$(basename "$(dirname "$list")")
    [ "$set_name" = expected ] && set_name=$(basename "$list" .tsv)
    tail -n +2 "$list" | while IFS='	' read -r name args sha _rest; do
        [ -n "$name" ] || continue
        printf '%s\n' "$set_name/$name" | grep -Eq -- "$ONLY" || continue
        a=$(printf '%s' "$args" | sed "s|@FIX@|$FIX|g")
        f="$T/m.gguf"
        case "$a" in
        *" | quantize "*)
            # shellcheck disable=SC2086
            "$DEVBIN" gen-random ${a%% | quantize *} "$f.f32" >/dev/null 2>"$T/err" </dev/null &&
                "$BIN" quantize "$f.f32" "$f" ${a#* | quantize } -t 2 >/dev/null 2>>"$T/err" </dev/null
            rc=$? ;;
        *)
            # shellcheck disable=SC2086
            "$DEVBIN" gen-random $a "$f" >/dev/null 2>"$T/err" </dev/null
            rc=$? ;;
        esac
        if [ $rc -ne 0 ]; then
            echo "FAIL $set_name/$name: exit $rc: $(tail -n 1 "$T/err")"
        else
            case "$a" in
                *--sparse*) got=$( (head -c 16777216 "$f"; stat -c %s "$f") | sha256sum | cut -d' ' -f1) ;;
                *) got=$(sha256sum "$f" | cut -d' ' -f1) ;;
            esac
            if [ "$got" = "$sha" ]; then echo "ok   $set_name/$name"; else echo "FAIL $set_name/$name: sha256 $got, recorded $sha"; fi
        fi
        rm -f "$f" "$f.f32"
    done
done > "$T/log"
cat "$T/log"
n_ok=$(grep -c '^ok ' "$T/log")
n_bad=$(grep -c '^FAIL ' "$T/log")
echo "check_gen_random: $n_ok identical, $n_bad differ"
[ "$n_bad" -eq 0 ] && [ "$n_ok" -gt 0 ]
