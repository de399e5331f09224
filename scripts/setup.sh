#!/usr/bin/env bash
# Set up a fresh machine for mpiws: a virtualenv in .venv with the build and
# test tools, and mpiws itself built from source (Rust core + Python package).
# Extra pip packages may be given as arguments (the benchmarks add mpi4py).
# It shows its progress: pip lists what it downloads and installs, cargo each
# crate it compiles (the first build of the optimized core takes several
# minutes on 2 cores; later ones only what changed), and each step its time.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null; then
    echo "setup: cargo (Rust) is required: https://rustup.rs" >&2
    exit 1
fi
started=$SECONDS
# Lines that only say nothing was to be done: pip's for what is already installed, and the
# "Ignoring numpy: markers 'extra == "bench"' don't match your environment" that pip prints for each
# optional dependency when maturin develop installs the package's declared dependencies.
quiet() { grep -v -e '^Requirement already satisfied' -e "^Ignoring [^:]*: markers 'extra == " || true; }
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    python3 -m venv .venv
fi
echo "setup: installing the build and test tools into .venv (pip) ..."
.venv/bin/python -m pip install -q --upgrade pip
# cwltool: the reference runner tests/test_cwl_workflows.py compares with; cwltest: CWL's conformance runner (tests/cwl);
# OWSLib: an OGC API - Processes client (tests/test_ogcapi.py), jsonschema: the standard's schemas checked there;
# zeep: a SOAP client (tests/test_soap.py)
.venv/bin/python -m pip install --progress-bar off "maturin>=1.5,<2" numpy pytest trustme mypy cwltool cwltest owslib jsonschema zeep selenium "ruff>=0.17,<0.18" "$@" 2>&1 | quiet
echo "setup: tools ready ($((SECONDS - started)) s); building mpiws (maturin develop --release: the Rust core, then the package) ..."
built=$SECONDS
.venv/bin/maturin develop --release 2>&1 | quiet
# The package's bytecode, as pip writes it when it installs the wheel: an
# editable install leaves it to the first import, which under
# PYTHONDONTWRITEBYTECODE compiles every module at every start (0.29 s
# instead of 0.09 s for `from mpiws import MPI`, per rank).
.venv/bin/python -m compileall -q python/mpiws
echo "setup: mpiws $(.venv/bin/python -c 'import mpiws; print(mpiws.__version__)') ready in .venv (build $((SECONDS - built)) s, setup $((SECONDS - started)) s)"
