#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: Rust unit tests, then the
# pytest suite, which launches real domains of endpoints on loopback, then
# mpi4py's own test suite against its floor (tests/conformance/run.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# MPICH and mpi4py: the application tests also run each example under MPI.
scripts/setup.sh mpich mpi4py matplotlib
echo "== cargo test"
cargo test --release --workspace --exclude mpiws-python
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
if [ $# -eq 0 ]; then  # the whole suite, not a selection of pytest's
    echo "== mpi4py's own test suite (tests/conformance: fails if a module passes fewer than its floor)"
    .venv/bin/python tests/conformance/run.py --np 1,2,3
fi
