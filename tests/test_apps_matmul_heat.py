"""The application examples (examples/matmul.py, examples/coupled_heat.py)
run on mpiws with 1-4 ranks and, unchanged but for the import line, on
mpi4py under mpiexec; each validates its result and prints a RESULT line."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, assert_ok, mpiws_run

APPS = {
    "matmul": ["--n", "150"],  # 150 is not divisible by 4
    "coupled_heat": ["--cells", "203", "--steps", "300"],
}
IMPORT = "from mpiws import MPI"


def result(stdout, app, ranks):
    lines = [line.split("RESULT ", 1)[1] for line in stdout.splitlines() if "RESULT " in line]
    assert len(lines) == 1, f"expected one RESULT line:\n{stdout}"
    r = json.loads(lines[0])
    assert r["app"] == app and r["ranks"] == ranks and r["valid"] is True, r
    assert r["seconds"] >= 0
    return r


def source(app):
    text = (ROOT / "examples" / f"{app}.py").read_text()
    assert [line for line in text.splitlines() if "import MPI" in line] == [IMPORT], "the only MPI import is one line"
    return text


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("app", list(APPS))
def test_app_mpiws(tmp_path, app, n):
    p = mpiws_run(n, source(app), tmp_path, args=APPS[app])
    assert_ok(p)
    result(p.stdout, app, n)


def _mpiexec():
    exe = Path(sys.executable).parent / "mpiexec"
    return str(exe) if exe.exists() else shutil.which("mpiexec")


@pytest.mark.parametrize("app", list(APPS))
def test_app_mpi4py(tmp_path, app):
    mpiexec = _mpiexec()
    if mpiexec is None or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpiexec or mpi4py not installed")
    script = tmp_path / f"{app}.py"
    script.write_text(source(app).replace(IMPORT, "from mpi4py import MPI"))
    p = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, str(script), *APPS[app]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=dict(os.environ),
    )
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    result(p.stdout, app, 2)
