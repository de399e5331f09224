#!/usr/bin/env bash
# The lint gate (issue 27): formatting and lints of the Rust core and of the
# Python code, in that order, then the layout (every import points down:
# scripts/layers.py); stops at the first check that fails (exit 1).
# The same four checks run as pre-commit hooks (.pre-commit-config.yaml).
# Rules and excluded files: rustfmt.toml, pyproject.toml [tool.ruff].
set -euo pipefail
cd "$(dirname "$0")/.."
PY_DIRS=(python tests benchmarks examples scripts)
RUFF=.venv/bin/ruff
if [ ! -x "$RUFF" ]; then
    echo "lint: $RUFF not found: install ruff into .venv (.venv/bin/python -m pip install ruff)" >&2
    exit 1
fi
echo "== cargo fmt --all --check"
cargo fmt --all --check
echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== ruff check ${PY_DIRS[*]}"
"$RUFF" check "${PY_DIRS[@]}"
echo "== ruff format --check ${PY_DIRS[*]}"
"$RUFF" format --check "${PY_DIRS[@]}"
echo "== scripts/layers.py (the layers' allowed arrows: docs/architecture.md)"
.venv/bin/python scripts/layers.py
echo "lint: all checks passed"
