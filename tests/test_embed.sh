#!/bin/sh
# test_embed.sh — the engine links without the application's libraries: tests/embed/embed.c is
# built with only `-Iinclude $BUILD/libdeltafin.a` and the engine's own libraries (PCRE2,
# cJSON, liburing when built with it, libm, pthread; no libmicrohttpd, libcurl, libyaml or
# libcrypto), loads the demo model, tokenizes, decodes and samples, and must print the tokens
# `deltafin run --temp 0` prints. The archive must not reference any application library symbol.
set -u
BIN=${DELTAFIN_BIN:-build/deltafin}
B=${DELTAFIN_BUILD:-build}
CC=${CC:-cc}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
T=$(mktemp -d /tmp/df_test_embed.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

LIBA="$B/libdeltafin.a"
[ -f "$LIBA" ] || { echo "test_embed: no $LIBA"; exit 1; }
# what the engine may need: nothing of the server, downloads, config file or hashing
if nm -u "$LIBA" 2>/dev/null | grep -E ' (MHD_|curl_|yaml_|EVP_|SHA256)' >"$T/app_syms"; then
    bad "libdeltafin.a references application libraries: $(sort -u "$T/app_syms" | head -n 5 | tr '\n' ' ')"
else ok "libdeltafin.a references no microhttpd, curl, yaml or crypto symbol"; fi

LIBS="-lpcre2-8 -lcjson -lxxhash -lm -lpthread"
nm -u "$LIBA" 2>/dev/null | grep -q ' io_uring_' && LIBS="$LIBS -luring"
SAN=""
nm "$LIBA" 2>/dev/null | grep -q '__asan_' && SAN="-fsanitize=address,undefined"
if $CC -std=c11 -O1 $SAN -Iinclude -o "$T/embed" tests/embed/embed.c "$LIBA" $LIBS 2>"$T/cc"; then
    ok "embed.c links with -Iinclude $LIBA $LIBS"
else
    bad "embed.c does not link with the engine's libraries only: $(grep -m 3 -E 'undefined|error' "$T/cc")"
    exit 1
fi

for M in models/demo-moe-q8_0.gguf "$FIX/models/llama-2-tiny-random.gguf"; do
    [ -f "$M" ] || { echo "  skip: $M absent"; continue; }
    GOT=$("$T/embed" "$M" "Once upon a time" 12 2>"$T/err")
    WANT=$("$BIN" run -m "$M" -p "Once upon a time" -n 12 --temp 0 -t 1 --json 2>/dev/null |
           sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p')
    if [ -n "$GOT" ] && [ "$GOT" = "$WANT" ]; then ok "$(basename "$M"): embedded program = deltafin run ($GOT)"
    else bad "$(basename "$M"): embed '$GOT' vs run '$WANT' $(cat "$T/err")"; fi
done

[ $fail = 0 ] && echo "test_embed: ok" || echo "test_embed: FAILED"
exit $fail
