#!/bin/sh
# Fuzz every parser of the Rust core: the property-based targets in
# crates/core/tests/fuzz_*.rs (proptest, stable Rust), MPIWS_FUZZ_CASES
# cases per target (default 1,000,000; `cargo test` alone runs 10,000).
#
#   scripts/fuzz.sh                       # every target, 1,000,000 cases each
#   MPIWS_FUZZ_CASES=50000 scripts/fuzz.sh fuzz_envelope
#
# benchmarks/fuzz/run is the whole long run (these targets, then the HTTP
# fuzz), with a summary per target. Targets, and what one million cases
# took on the 2-core development machine: see docs/security/fuzzing.md. A failing case is printed shrunk to
# a minimal input; keep it as a named unit test beside the fix.
set -eu
cd "$(dirname "$0")/.."
export MPIWS_FUZZ_CASES="${MPIWS_FUZZ_CASES:-1000000}"
targets="${*:-fuzz_stream_frames fuzz_envelope fuzz_requests}"
args=""
for t in $targets; do args="$args --test $t"; done
# Build once, then run each target binary (its properties in parallel).
cargo test --release -q -p mpiws-core $args --no-run
status=0
for t in $targets; do
    start=$(date +%s)
    echo "fuzz: $t, $MPIWS_FUZZ_CASES cases per property"
    cargo test --release -q -p mpiws-core --test "$t" || status=1
    echo "fuzz: $t took $(( $(date +%s) - start )) s"
done
exit $status
