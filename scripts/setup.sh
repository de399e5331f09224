#!/usr/bin/env bash
# Set up a fresh machine for mpiws: a virtualenv in .venv with the build and
# test tools, and mpiws itself built from source (Rust core + Python package).
# Extra pip packages may be given as arguments (the benchmarks add mpi4py).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null; then
    echo "setup: cargo (Rust) is required: https://rustup.rs" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "maturin>=1.5,<2" numpy pytest pyyaml trustme mypy cwltool "$@"  # cwltool: the reference runner tests/test_cwl_workflows.py compares with
.venv/bin/maturin develop --release -q
echo "setup: mpiws $(.venv/bin/python -c 'import mpiws; print(mpiws.__version__)') ready in .venv"
