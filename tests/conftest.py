"""Shared helpers: run a program on N real rank processes (``mpiws run``),
and host test services on an in-process endpoint."""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The endpoint key that servers started by the tests (in-process or as
# `mpiws serve`) generate and their clients read: the session's own, never
# the user's (mpiws.keys).
os.environ["MPIWS_KEY_FILE"] = os.path.join(tempfile.mkdtemp(prefix="mpiws-test-keys-"), "key")
os.environ.pop("MPIWS_KEY", None)
# The warm CWL runners that runs start (mpiws.workflow.cwl.warm) listen here: the session's own,
# never the user's; each ends once its socket is gone (the directory is removed at the session's end).
RUNTIME_DIR = tempfile.mkdtemp(prefix="mpiws-test-run-")
os.environ["XDG_RUNTIME_DIR"] = RUNTIME_DIR


def pytest_sessionfinish(session, exitstatus):
    import shutil

    shutil.rmtree(RUNTIME_DIR, ignore_errors=True)


def mpiws_run(n, code, tmp_path, args=(), timeout=120, env=None, keep_going=False):
    """Run ``code`` (a script body) on ``n`` ranks; returns the CompletedProcess.
    ``keep_going``: a failed rank does not stop the others (``mpiws run -k``)."""
    script = tmp_path / f"prog_{abs(hash(code))}.py"
    script.write_text(textwrap.dedent(code))
    e = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "mpiws", "run", "-n", str(n), "-l", *(["-k"] if keep_going else []), str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
        cwd=ROOT,
    )


def assert_ok(proc, n=None, marker="OK"):
    """All ranks succeeded; if ``n``, each printed ``marker``."""
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    if n is not None:
        got = sorted(
            int(line.split("]")[0][1:])
            for line in proc.stdout.splitlines()
            if line.split("] ", 1)[-1].startswith(marker)
        )
        assert got == list(range(n)), f"ranks that reported {marker}: {got}\n{proc.stdout}\n{proc.stderr}"


def mpiws_serve(args, env=None, cwd=None):
    """Start ``mpiws serve ARGS`` as a process; (the process, its URL) once it serves."""
    import re
    import time

    p = subprocess.Popen(
        [str(Path(sys.executable).with_name("mpiws")), "serve", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        m = re.search(r"serving .* at (\S+)", line)
        if m:
            return p, m.group(1)
        if not line and p.poll() is not None:
            break
    p.kill()
    raise AssertionError("mpiws serve did not start")


@pytest.fixture
def run(tmp_path):
    def _run(n, code, **kw):
        return mpiws_run(n, code, tmp_path, **kw)

    return _run


@pytest.fixture(scope="module")
def server():
    """An endpoint in this process hosting the services in tests/services.py."""
    import services
    from mpiws.service.serve import Server

    s = Server(services.ALL, max_message=1 << 20)
    yield s
    s.stop()
