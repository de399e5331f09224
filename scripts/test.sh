#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: Rust unit tests, then the
# pytest suite, which launches real domains of endpoints on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
# MPICH and mpi4py: the application tests also run each example under MPI.
scripts/setup.sh mpich mpi4py matplotlib
echo "== cargo test"
cargo test --release --workspace --exclude mpiws-python
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
