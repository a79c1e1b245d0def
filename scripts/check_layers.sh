#!/bin/sh
# check_layers.sh — the module layering of docs/architecture.md, enforced: every
# `#include "X/..."` in src/<module>/, app/ and dev/ must name a module the including one may
# use (dependencies point downward only), and the include graph of the engine's files has no
# cycle. Exit 1 with the offending lines. Usage: sh scripts/check_layers.sh [ROOT]
ROOT=${1:-.}
cd "$ROOT" || exit 2
# MPI is src/dist's business: nothing else includes mpi.h
mpi=$(grep -rln '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]mpi\.h[>"]' src app dev include 2>/dev/null | grep -v '^src/dist/')
if [ -n "$mpi" ]; then echo "check_layers: mpi.h included outside src/dist: $mpi"; exit 1; fi
find src app dev -name '*.[ch]' 2>/dev/null | sort | while read -r f; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
        echo "$f $inc"
    done
done | awk '
BEGIN {
    # module -> modules it may include (itself included)
    allow["base"]    = "base"
    allow["format"]  = "base format"
    allow["kernels"] = "base format kernels"
    allow["model"]   = "base format kernels model"
    allow["weights"] = "base format kernels model weights"
    allow["forward"] = "base format kernels model weights forward"
    allow["dist"]    = "base format kernels model weights forward dist"
    allow["text"]    = "base format text"
    allow["runtime"] = "base format kernels model weights forward dist text runtime"
    allow["app"]     = "include app"
    allow["dev"]     = "include base format kernels model weights forward dist text runtime dev"
    bad = 0
}
function module_of(path,   a, n) {
    n = split(path, a, "/")
    if (a[1] == "src") return a[2]
    return a[1]
}
{
    f = $1; inc = $2
    from = module_of(f)
    n = split(inc, p, "/")
    if (n == 1) {
        # a bare name: the same directory, or a public header
        if (inc == "deltafin.h" || inc == "deltafin_debug.h") to = "include"
        else to = from
    } else if (p[1] == "app" || p[1] == "dev") to = p[1]
    else to = p[1]
    ok = 0
    m = split(allow[from], al, " ")
    for (i = 1; i <= m; i++) if (al[i] == to) ok = 1
    # the engine may include the public header (it implements it)
    if (to == "include" && from != "app") ok = 1
    if (!(from in allow)) { print "check_layers: " f ": unknown module \"" from "\""; bad = 1; next }
    if (!ok) { print "check_layers: " f " includes \"" inc "\": " from " may not use " to; bad = 1 }
    # edges for the cycle check (engine headers and sources by path)
    if (n == 1) tgt = substr(f, 1, length(f) - length(a_last(f))) inc
    else if (p[1] == "app" || p[1] == "dev") tgt = inc
    else tgt = "src/" inc
    edge[f] = edge[f] " " tgt
}
function a_last(path,   a, n) { n = split(path, a, "/"); return a[n] }
function visit(v,   i, k, e) {
    if (state[v] == 1) { print "check_layers: include cycle through " v; bad = 1; return }
    if (state[v] == 2) return
    state[v] = 1
    k = split(edge[v], e, " ")
    for (i = 1; i <= k; i++) visit(e[i])
    state[v] = 2
}
END {
    for (v in edge) visit(v)
    if (bad) exit 1
    print "check_layers: ok"
}'
