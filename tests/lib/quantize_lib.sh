# quantize_lib.sh — shell functions shared by tests/test_quantize_recipes.sh and
# tests/data/expected/quantize/make.sh. Sourced, not run.

# A --dry-run listing of llama-quantize or deltafin quantize on stdin ("[ i/ n] NAME - [...],
# type = T, size = A MiB -> B MiB (NEW)" for a converted tensor, "size = A MiB" for a copied one)
# -> sorted "NAME TYPE" lines with the type each tensor gets, upper case.
dry_types() {
    grep '^\[' | awk '{ sub(/^\[[^]]*\] */, ""); n = $1; t = $0; sub(/.*type = */, "", t); sub(/,.*/, "", t);
        if (match($0, /\([^)]*\)$/)) t = substr($0, RSTART + 1, RLENGTH - 2); print n, toupper(t) }' | sort
}
