#!/bin/sh
# Installs the Debian/Ubuntu packages deltafin needs to build and test, if any is missing.
# `deps.sh --check` only reports (exit 1 if something is missing). `--mpi` adds Open MPI, which
# only the optional multi-process build needs (make MPI=1, docs/distributed.md). `--web` adds
# node, npm and Chromium where missing, for the server's openai npm client and web page tests
# (tests/test_server.sh, tests/test_web.sh SKIP without them); CI passes it.
CHECK=0; WANT_MPI=0; WANT_WEB=0
for a in "$@"; do case $a in --check) CHECK=1 ;; --mpi) WANT_MPI=1 ;; --web) WANT_WEB=1 ;; esac; done
PKGS="build-essential clang libpcre2-dev libmicrohttpd-dev libcjson-dev libxxhash-dev libyaml-dev libedit-dev tmux strace libcurl4-openssl-dev libssl-dev liburing-dev python3 python3-jinja2 python3-numpy curl"
[ $WANT_MPI = 1 ] && PKGS="$PKGS libopenmpi-dev openmpi-bin"
# x86-64: a cross compiler and qemu so the NEON kernels are tested too (tests/neon_qemu.sh)
[ "$(uname -m)" = x86_64 ] && PKGS="$PKGS qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
# --web: a failed install of these is only a warning (Ubuntu has Chromium as a snap only)
OPT=""
if [ $WANT_WEB = 1 ]; then
    command -v node >/dev/null 2>&1 || OPT="$OPT nodejs"
    command -v npm >/dev/null 2>&1 || OPT="$OPT npm"
    command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || OPT="$OPT chromium"
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && [ -z "$OPT" ] && exit 0
[ $CHECK = 1 ] && { [ -n "$OPT" ] && echo "optional, missing:$OPT"; [ -z "$missing" ] && exit 0; echo "missing:$missing"; exit 1; }
echo "deltafin: installing missing packages:$missing$OPT"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if ! command -v apt-get >/dev/null 2>&1; then
    echo "deltafin: no apt-get; please install:$missing" >&2; exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
[ -z "$missing" ] || $SUDO apt-get install -y -qq $missing || { echo "deltafin: package install failed" >&2; exit 1; }
[ -z "$OPT" ] || $SUDO apt-get install -y -qq $OPT ||
    echo "deltafin: optional packages not installed:$OPT (tests/test_server.sh's npm client and tests/test_web.sh will SKIP)" >&2
