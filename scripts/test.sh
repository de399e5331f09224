#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: Rust unit tests, then the
# pytest suite, which launches real domains of endpoints on loopback, and
# beside it mpi4py's own test suite against its floor (tests/conformance/run.py),
# then CWL's conformance suite's required tag against its floor (tests/cwl/run).
# Arguments go to pytest and run it alone (a selection of tests).
#
# Each stage prints its time as it ends ("== pytest done in 1234 s"), so a slow
# one shows. Two pairs run side by side, each half of a pair leaving most of a
# core idle when alone (it waits on downloads, on a serial compile, on
# processes starting, on the network, on timeouts): the Rust tests' build beside
# the setup (pip, then the extension's build), and conformance beside pytest.
# The half that runs in the background keeps its output and shows it when it ends.
#
# Needs root for apt-get (tests install the OS packages they use) and Go
# (Toxiproxy and kubeconform are built with `go install`): README.md lists them.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
say_done() { # say_done NAME RC SECONDS
    if [ "$2" -eq 0 ]; then
        echo "== $1 done in $3 s (total $((SECONDS - started)) s)"
    else
        echo "== $1 FAILED (exit $2) after $3 s (total $((SECONDS - started)) s)"
    fi
}
stage() { # stage NAME COMMAND...: run it and say how long it took
    local name=$1 t=$SECONDS rc=0
    shift
    echo "== $name"
    "$@" || rc=$?
    say_done "$name" $rc $((SECONDS - t))
    return $rc
}
# beside NAME COMMAND...: start it in the background (one at a time), its output kept for `joined`
beside() {
    bg_name=$1 bg_log=$(mktemp "${TMPDIR:-/tmp}/mpiws-test.XXXXXX")
    shift
    echo "== $bg_name (runs beside what follows; its output when it ends)"
    (
        t=$SECONDS rc=0
        "$@" >"$bg_log" 2>&1 || rc=$?
        echo "$rc $((SECONDS - t))" >"$bg_log.done"
    ) &
    bg_pid=$!
}
# joined: wait for what `beside` started, show its output, say how long it took; its exit status
joined() {
    local rc secs
    wait "$bg_pid" || true
    bg_pid=
    echo "== $bg_name: its output"
    cat "$bg_log"
    read -r rc secs <"$bg_log.done"
    rm -f "$bg_log" "$bg_log.done"
    say_done "$bg_name" "$rc" "$secs"
    return "$rc"
}
# leaving early (a stage failed, or ^C): end what runs beside
trap '[ -z "${bg_pid:-}" ] || { pkill -P "$bg_pid"; kill "$bg_pid"; } 2>/dev/null || true' EXIT

# The Rust tests build with the `ci` profile (Cargo.toml: unoptimized, no debug info; about 1 minute instead of
# the release profile's 18), in target/ci, beside the setup's release build of the extension in target/release.
# Clippy (the lint stage's) is checked there too, so that the lint stage finds its work done.
beside "cargo build (Rust tests), clippy" bash -c \
    "cargo test --profile ci --workspace --exclude mpiws-python --no-run && cargo clippy --workspace --all-targets -- -D warnings"
# MPICH and mpi4py: the application tests also run each example under MPI.
stage setup scripts/setup.sh mpich mpi4py matplotlib
joined
stage "cargo test" cargo test --profile ci --workspace --exclude mpiws-python
stage lint scripts/lint.sh
if [ $# -gt 0 ]; then # a selection of pytest's
    stage pytest .venv/bin/python -m pytest -q "$@"
    exit
fi
beside "conformance (mpi4py's own test suite)" .venv/bin/python tests/conformance/run.py --np 1,2,3
pytest_rc=0
stage pytest .venv/bin/python -m pytest -q || pytest_rc=$?
joined # mpi4py's own suite: fails if a module passes fewer tests than its floor
# CWL's conformance suite, its required tag (under a minute: the warm runner packs and forks each test): fails below the floor, cwltool's count (docs/workflows.md has the full run)
stage "CWL conformance (required tag)" tests/cwl/run --tags required --floor 82
exit $pytest_rc
