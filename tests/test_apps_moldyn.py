"""examples/moldyn.py, the JGF MPJ molecular dynamics benchmark, validates
(size A, 50 moves) on 1 to 4 ranks with mpiws, size B (8788 particles) on 3,
and the same file runs unchanged under mpi4py once its import line is swapped."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, assert_ok, mpiws_run

APP = ROOT / "examples" / "moldyn.py"
REF_A = 1731.4306625334357  # JGFMolDynBench.JGFvalidate, refval[0]
REF_B = 7397.392307839352  # refval[1]
IMPORT = "from mpiws import MPI"


def result_of(stdout):
    """The JSON of the RESULT line (with or without mpiws's ``[rank] `` prefix)."""
    found = [line.split("] ", 1)[-1] for line in stdout.splitlines() if line.split("] ", 1)[-1].startswith("RESULT ")]
    assert len(found) == 1, f"expected one RESULT line:\n{stdout}"
    return json.loads(found[0][len("RESULT ") :])


def check(res, ranks):
    assert res["app"] == "moldyn" and res["size"] == "A" and res["ranks"] == ranks, res
    assert res["valid"] is True, res
    assert abs(res["ek"] - REF_A) < 1e-9, res
    assert res["interactions"] == 1253101, res  # pairs within the cutoff, over the 50 moves
    assert res["seconds"] > 0, res


def test_single_mpi_import():
    lines = [
        line for line in APP.read_text().splitlines() if line.startswith(("from ", "import ")) and "mpi" in line.lower()
    ]
    assert lines == [IMPORT], lines


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_moldyn_mpiws(tmp_path, n):
    p = mpiws_run(n, APP.read_text(), tmp_path, args=("--size", "A"), timeout=300)
    assert_ok(p)
    assert "Validation passed" in p.stdout, p.stdout
    check(result_of(p.stdout), n)


def test_moldyn_size_b(tmp_path):
    p = mpiws_run(3, APP.read_text(), tmp_path, args=("--size", "B"), timeout=600)
    assert_ok(p)
    res = result_of(p.stdout)
    assert (res["size"], res["ranks"], res["valid"]) == ("B", 3, True), res
    assert abs(res["ek"] - REF_B) < 1e-9, res


def test_moldyn_mpi4py(tmp_path):
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("needs mpi4py and mpiexec")
    text = APP.read_text()
    assert text.count(IMPORT + "\n") == 1
    script = tmp_path / "moldyn_mpi4py.py"
    script.write_text(text.replace(IMPORT + "\n", "from mpi4py import MPI\n"))
    p = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, str(script), "--size", "A"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=dict(os.environ),
    )
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    check(result_of(p.stdout), 2)
