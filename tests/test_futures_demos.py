"""mpi4py's futures demos (demo/futures/run_*.py of mpi4py's source
distribution, fetched from PyPI) run on mpiws with the import changed and
nothing else, in the ways mpi4py's makefile runs them: a pool that spawns
its workers (``run_cpi``, ``run_hello``, ``run_primes``, ``run_crawl``), an
``MPICommExecutor`` over the launched ranks (``run_julia``,
``run_mandelbrot``), and each under ``-m mpiws.futures``."""

import os
import re
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

MPIWS = Path(sys.executable).with_name("mpiws")
MPI4PY = "4.1.2"

EXPECT = {
    "cpi": r"pi: 3\.14159\d*, error: \d",
    "hello": r"Hello, World! I am worker \d+ of \d+",
    "primes": r"993960000099397 is prime: True",
    "crawl": r"page is \d+ bytes|generated an exception",
    "julia": r"Julia Set \d+x\d+ in",
    "mandelbrot": r"Mandelbrot Set \d+x\d+ in",
}
POOL, COMM = ("cpi", "hello", "primes", "crawl"), ("julia", "mandelbrot")


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    where = tmp_path_factory.mktemp("demos")
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            "mpi4py",
            f"mpi4py=={MPI4PY}",
            "-d",
            str(where),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr
    with tarfile.open(where / f"mpi4py-{MPI4PY}.tar.gz") as tar:
        for member in tar.getmembers():
            m = re.fullmatch(rf"mpi4py-{MPI4PY}/demo/futures/(run_\w+\.py)", member.name)
            if m:
                text = tar.extractfile(member).read().decode()
                text = text.replace("from mpi4py.futures import", "from mpiws.futures import")
                text = text.replace("from mpi4py import MPI", "from mpiws import MPI")
                assert "mpi4py" not in text, m.group(1)  # the import was all there was to change
                (where / m.group(1)).write_text(text)
    return where


def internet():
    try:
        socket.create_connection(("www.python.org", 80), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("how", ["spawned", "-m mpiws.futures"])
@pytest.mark.parametrize("demo", POOL + COMM)
def test_mpi4py_futures_demo_runs_with_the_import_changed(demos, demo, how):
    if demo == "crawl" and not internet():
        pytest.skip("run_crawl fetches pages from the internet, which this machine cannot reach")
    ranks = ["-n", "1"] if how == "spawned" and demo in POOL else ["-n", "3"]
    module = ["-m", "mpiws.futures"] if how != "spawned" else []
    env = dict(os.environ, MPLBACKEND="Agg")
    out = subprocess.run(
        [str(MPIWS), "run", *ranks, *module, f"run_{demo}.py"],
        cwd=demos,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert re.search(EXPECT[demo], out.stdout), out.stdout[-2000:]
    assert "RuntimeWarning" not in out.stderr, out.stderr[-2000:]
