#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: Rust unit tests, then the
# pytest suite, which launches real domains of endpoints on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== cargo test"
cargo test --release --workspace --exclude mpiws-python
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
