#!/bin/sh
# test_install.sh — `make install PREFIX=DIR` puts the CLI, the library, its two headers and a
# pkg-config file under DIR; the installed CLI runs, and tests/embed/embed.c builds against the
# installed header and library alone (pkg-config's --static flags when pkg-config exists) and
# prints the tokens the CLI prints. `make uninstall` removes them again.
set -u
B=${DELTAFIN_BUILD:-build}
CC=${CC:-cc}
T=$(mktemp -d /tmp/df_test_install.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "  ok: $1"; }
bad() { echo "  FAIL: $1"; fail=1; }

P="$T/prefix"
# the suite's build as it is (-o: never remade here, whatever flags it was built with)
if ! make -s install BUILD="$B" PREFIX="$P" -o "$B/deltafin" -o "$B/libdeltafin.a" -o "$B/deltafin.pc" >"$T/log" 2>&1; then
    echo "test_install: make install failed: $(tail -n 5 "$T/log")"; exit 1
fi
for f in bin/deltafin lib/libdeltafin.a include/deltafin.h include/deltafin_debug.h lib/pkgconfig/deltafin.pc; do
    [ -f "$P/$f" ] || bad "missing $P/$f"
done
[ -x "$P/bin/deltafin" ] && "$P/bin/deltafin" --version | grep -q "^deltafin .*(commit " &&
    ok "installed bin/deltafin runs: $("$P/bin/deltafin" --version)" || bad "installed CLI"
grep -q "^prefix=$P\$" "$P/lib/pkgconfig/deltafin.pc" && ok "deltafin.pc names the prefix" ||
    bad "deltafin.pc: $(head -n 1 "$P/lib/pkgconfig/deltafin.pc")"

if command -v pkg-config >/dev/null 2>&1; then
    FLAGS=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs --static deltafin)
else
    FLAGS="-I$P/include -L$P/lib -ldeltafin $(sed -n 's/^Libs.private: //p' "$P/lib/pkgconfig/deltafin.pc")"
fi
SAN=""
nm "$P/lib/libdeltafin.a" 2>/dev/null | grep -q '__asan_' && SAN="-fsanitize=address,undefined"
# the embedding program sees only the installed files: no -I into the source tree
if $CC -std=c11 -O1 $SAN -o "$T/embed" tests/embed/embed.c $FLAGS 2>"$T/cc"; then
    ok "embed.c builds against the installed library ($FLAGS)"
    M=models/demo-moe-q8_0.gguf
    if [ -f "$M" ]; then
        GOT=$("$T/embed" "$M" "Hello" 6 2>"$T/err")
        WANT=$("$P/bin/deltafin" run -m "$M" -p Hello -n 6 --temp 0 -t 1 --json 2>/dev/null |
               sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p')
        [ -n "$GOT" ] && [ "$GOT" = "$WANT" ] && ok "installed library = installed CLI ($GOT)" ||
            bad "embed '$GOT' vs CLI '$WANT' $(cat "$T/err")"
    fi
else bad "embed.c against the installed library: $(head -n 3 "$T/cc")"; fi

make -s uninstall BUILD="$B" PREFIX="$P" -o "$B/deltafin" -o "$B/libdeltafin.a" -o "$B/deltafin.pc" >/dev/null 2>&1
left=$(find "$P" -type f | head -n 3)
[ -z "$left" ] && ok "make uninstall removes them" || bad "left after uninstall: $left"

[ $fail = 0 ] && echo "test_install: ok" || echo "test_install: FAILED"
exit $fail
