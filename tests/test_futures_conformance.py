"""mpi4py's own ``mpi4py.futures`` tests (tests/conformance/mpi4py/futures,
mpi4py's file unchanged) on ``mpiws.futures``, run as mpi4py's makefile
runs them: one process that spawns its workers, 2 ranks under the
launcher, and ``-m mpiws.futures`` at 1 and 3 ranks (a shared pool of the
other ranks). ``mpi4py.MPI`` and ``mpi4py.futures`` are mpiws's through the
conformance runner's shim."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "conformance"))
import run as conformance  # noqa: E402

MPIWS = Path(sys.executable).with_name("mpiws")

MODES = {
    "spawned": [sys.executable, "test_futures.py"],
    "run -n 2": [str(MPIWS), "run", "-n", "2", "test_futures.py"],
    "run -n 1 -m mpiws.futures": [str(MPIWS), "run", "-n", "1", "-m", "mpiws.futures", "test_futures.py"],
    "run -n 3 -m mpiws.futures": [str(MPIWS), "run", "-n", "3", "-m", "mpiws.futures", "test_futures.py"],
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    work = tmp_path_factory.mktemp("futures")
    shutil.copy(conformance.SUITE / "futures" / "test_futures.py", work)
    shutil.copy(conformance.SUITE / "test" / "mpitestutil.py", work)
    (work / "shim" / "mpi4py").mkdir(parents=True)
    (work / "shim" / "mpi4py" / "__init__.py").write_text(conformance.SHIM)
    return work


@pytest.mark.parametrize("mode", list(MODES))
def test_mpi4py_futures_tests_pass(suite, mode):
    env = dict(__import__("os").environ, PYTHONPATH=str(suite / "shim"), MPIWS_TIMEOUT="60")
    out = subprocess.run(MODES[mode], cwd=suite, env=env, capture_output=True, text=True, timeout=600)
    tail = (out.stdout + out.stderr)[-3000:]
    ran = [int(n) for n in re.findall(r"^Ran (\d+) tests?", out.stdout + out.stderr, re.M)]
    assert out.returncode == 0 and ran and min(ran) > 0, tail
    assert "FAILED" not in out.stdout + out.stderr, tail
