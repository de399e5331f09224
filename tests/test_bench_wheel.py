"""``pip install mpiws`` from a wheel, not a checkout, gives a working ``mpiws bench``: the suites
ship in the wheel (pyproject's ``[tool.maturin] include``: site-packages/benchmarks/) and
``mpiws.bench.benchmarks_dir`` finds them there. Builds the wheel (reusing target/), installs it
into a fresh virtualenv without the system's or the checkout's packages, and runs a quick suite
from a directory outside the checkout."""

import csv
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

MATURIN = ROOT / ".venv" / "bin" / "maturin"


def test_wheel_ships_the_suites_and_mpiws_bench_runs_them(tmp_path):
    if not MATURIN.exists():
        pytest.skip("maturin is not in .venv (scripts/setup.sh installs it)")
    dist = tmp_path / "dist"
    p = subprocess.run(
        [str(MATURIN), "build", "--release", "-o", str(dist)], cwd=ROOT, capture_output=True, text=True, timeout=1800
    )
    assert p.returncode == 0, p.stderr[-3000:]
    [wheel] = dist.glob("mpiws-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for f in (
        "benchmarks/common.py",
        "benchmarks/pingpong/driver.py",
        "benchmarks/pingpong/bench.py",
        "benchmarks/rma/driver.py",
        "benchmarks/rma/bench.py",
        "benchmarks/farm/driver.py",
        "benchmarks/farm/bench.py",
        "benchmarks/farm/wire.py",
        "mpiws/bench.py",
    ):
        assert f in names, f
    assert not [n for n in names if n.startswith("benchmarks/results/") or "__pycache__" in n]

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py, mpiws = venv / "bin" / "python", venv / "bin" / "mpiws"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    p = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True, timeout=600, env=env
    )
    assert p.returncode == 0, p.stderr[-3000:]
    # the rank programs need numpy (mpi4py/MPICH are optional: without them the suites measure mpiws alone)
    p = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "numpy"], capture_output=True, text=True, timeout=600, env=env
    )
    if p.returncode != 0:
        pytest.skip("numpy could not be installed into the fresh virtualenv: " + p.stderr[-500:])
    site = subprocess.run(
        [str(py), "-c", "import mpiws, os; print(os.path.dirname(os.path.dirname(os.path.realpath(mpiws.__file__))))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    ).stdout.strip()
    assert site.startswith(os.path.realpath(venv)), site  # the installed copy, not the checkout

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = subprocess.run(
        [str(mpiws), "bench", "pingpong", "--quick", "--rounds", "1"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = elsewhere / "mpiws-bench"  # the default when installed: the current directory, not site-packages
    table = (out / "pingpong" / "table.md").read_text()
    assert "### Buffer latency" in table and "installed in %s" % site in table, table[:1000]
    rows = list(csv.reader(open(out / "pingpong" / "buffer-latency-send-recv-half-round-trip-us.csv")))
    assert rows[0][:2] == ["size", "mpiws"] and len(rows) > 5
    assert all(float(r[1]) > 0 for r in rows[1:]), rows
    assert "# pingpong" in (out / "report.md").read_text()
    assert not os.path.exists(os.path.join(site, "benchmarks", "results"))
