#!/bin/sh
# Cross-compiles test_kernels for AArch64 (NEON dotprod table included) and runs it under
# qemu-aarch64, so the NEON kernels are checked against the reference on an x86 machine.
# Skips (exit 0) with a message when the cross compiler or qemu is missing, or on aarch64
# itself (where `make test` runs test_kernels natively).
CC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
SYSROOT=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
if [ "$(uname -m)" = aarch64 ]; then echo "neon_qemu.sh: native aarch64, skipped"; exit 0; fi
if ! command -v "$CC" >/dev/null 2>&1 || ! command -v "$QEMU" >/dev/null 2>&1; then
    echo "neon_qemu.sh: SKIP ($CC or $QEMU not installed)"; exit 0
fi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
F="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation -Iinclude -Isrc -Itests -pthread"
set -e
# every portable kernels file (all of src/kernels/ but the x86 and NEON tables) and what they use
for f in src/base/util.c src/base/env.c src/format/ggml_types.c src/base/threadpool.c src/forward/ops.c \
    $(ls src/kernels/*.c | grep -v -e /x86_ -e /arm_neon.c); do
    $CC $F -c "$f" -o "$T/$(basename "$f" .c).o"
done
$CC $F -march=armv8.2-a+dotprod+fp16 -c src/kernels/arm_neon.c -o "$T/arm_neon.o"
$CC $F tests/test_kernels.c "$T"/*.o -lm -lpthread -o "$T/test_kernels"
set +e
# -cpu max: dotprod + fp16 available in the emulated CPU
# Bounded: once (1 run in ~7) the emulated test_kernels sat asleep for 17 minutes with 1 s of
# CPU — an unexplained hang under qemu-user, possibly in the thread pool (open item). A hang
# is reported loudly and retried once rather than stalling the whole suite; a second hang fails.
out=$(timeout 300 "$QEMU" -cpu max -L "$SYSROOT" "$T/test_kernels" 2>&1); rc=$?
if [ $rc -eq 124 ]; then
    echo "neon_qemu.sh: WARNING: test_kernels under qemu hung for 300 s; retrying once"
    out=$(timeout 300 "$QEMU" -cpu max -L "$SYSROOT" "$T/test_kernels" 2>&1); rc=$?
fi
echo "$out" | grep -E "FAIL|neon|selected|passed" | head -60
if [ $rc -ne 0 ]; then echo "neon_qemu.sh: FAIL (rc $rc)"; exit 1; fi
echo "$out" | grep -q "selected kernels: neon" || { echo "neon_qemu.sh: FAIL: NEON table not selected"; exit 1; }
echo "neon_qemu.sh: ok"
