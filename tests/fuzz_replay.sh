#!/bin/sh
# Replays the committed corpus of every libFuzzer target (fuzz/fuzz_<name>.c over
# fuzz/corpus/<name>/) with gcc and fuzz/replay_main.c, against $DELTAFIN_BUILD/libdeltafin.a.
BUILD=${DELTAFIN_BUILD:-build}
LIB="$BUILD/libdeltafin.a"
[ -f "$LIB" ] || { echo "fuzz_replay: $LIB missing (run make first)"; exit 1; }
LIBS="-lpcre2-8 -lmicrohttpd -lcjson -lxxhash -lyaml -lcurl -lcrypto -lm -lpthread"
[ -f /usr/include/liburing.h ] && LIBS="$LIBS -luring"
# a library built with MPI (make MPI=1) links through mpicc
ar t "$LIB" 2>/dev/null | grep -qx world.o && CC=${MPICC:-mpicc}
SAN=""
case "$BUILD" in *asan*) SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;; esac
out="$BUILD/fuzz-replay"
mkdir -p "$out"
status=0
for src in fuzz/fuzz_*.c; do
    [ -f "$src" ] || continue
    name=$(basename "$src" .c); name=${name#fuzz_}
    corpus="fuzz/corpus/$name"
    bin="$out/replay_$name"
    if ! ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g $SAN -Iinclude -Isrc -I. -o "$bin" "$src" \
            fuzz/replay_main.c "$BUILD/libdeltafin-app.a" "$LIB" $LIBS; then
        echo "fuzz_replay: $name: build failed"; status=1; continue
    fi
    # a target whose corpus is not committed yet is reported, not failed
    if [ ! -d "$corpus" ]; then echo "fuzz_replay: $name: SKIP (no corpus in $corpus)"; continue; fi
    if "$bin" "$corpus" >"$out/replay_$name.log" 2>&1; then
        echo "fuzz_replay: $name: $(tail -n 1 "$out/replay_$name.log")"
    else
        echo "fuzz_replay: $name: FAILED"; tail -n 20 "$out/replay_$name.log"; status=1
    fi
done
exit $status
