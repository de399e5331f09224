"""mpiws as a pip user gets it: the wheel, installed into a fresh virtualenv with its default dependencies
only (no checkout, no test tools, no numpy), runs every command.

The wheel is built once for the module (``maturin build --release`` for the interpreter that runs the tests,
into cargo's target directory that ``scripts/setup.sh``'s ``maturin develop --release`` used: the compiled
crates are reused, nothing is built twice), or taken from ``MPIWS_TEST_WHEEL``. The commands run in a
directory outside the checkout, on copies of the examples: ``mpiws run -n 2`` of a hello program; ``mpiws
serve`` of a template program and of a CWL tool, each called with ``mpiws call``; ``mpiws workflow run`` of
a YAML and of a CWL workflow; ``mpiws.futures`` with 2 workers; and ``mpiws bench --quick``, which from a
wheel has no suites to run (they stay in the source tree) and says so in one line, exiting 0."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT


def _env():
    """The environment of a user's shell: nothing pointing at the checkout or at the test run's virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(Path(sys.executable).parent))
    )
    return env


def _build_wheel(dist):
    given = os.environ.get("MPIWS_TEST_WHEEL")
    if given:
        return Path(given)
    maturin = Path(sys.executable).with_name("maturin")
    if not maturin.exists():
        pytest.skip("maturin is not beside the test interpreter (scripts/setup.sh installs it)")
    # -i: the interpreter maturin develop built for, so that cargo's fingerprints match and the build is reused
    p = subprocess.run(
        [str(maturin), "build", "--release", "-i", sys.executable, "-o", str(dist)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    [wheel] = dist.glob("mpiws-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return _build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh virtualenv with the wheel and its declared dependencies: (its bin directory, a work directory
    outside the checkout holding copies of the examples)."""
    base = tmp_path_factory.mktemp("wheel")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    p = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(),
    )
    assert p.returncode == 0, p.stderr[-3000:]
    work = base / "work"
    shutil.copytree(ROOT / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    return venv / "bin", work


def _mpiws(venv, *args, timeout=300, check=True):
    bin_, work = venv
    p = subprocess.run(
        [str(bin_ / "mpiws"), *args], cwd=work, capture_output=True, text=True, timeout=timeout, env=_env()
    )
    if check:
        assert p.returncode == 0, f"mpiws {' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p


def test_the_wheel_holds_the_package_and_declares_its_dependencies(wheel):
    z = zipfile.ZipFile(wheel)
    tops = {n.split("/")[0] for n in z.namelist()}
    assert tops == {"mpiws", "mpiws-0.1.0.dist-info"}, tops  # no benchmarks/ (or anything else) beside it
    assert not [n for n in z.namelist() if "__pycache__" in n]
    assert any(n.startswith("mpiws/_core") and n.endswith(".so") for n in z.namelist())
    meta = z.read("mpiws-0.1.0.dist-info/METADATA").decode()
    requires = re.findall(r"^Requires-Dist: (.*)$", meta, re.M)
    assert [r for r in requires if "extra ==" not in r] == ["pyyaml>=5.1"], requires
    assert {"numpy", "bench", "test"} <= set(re.findall(r"^Provides-Extra: (.*)$", meta, re.M))


def test_installed_from_the_wheel_not_the_checkout(venv):
    bin_, work = venv
    p = subprocess.run(
        [str(bin_ / "python"), "-c", "import mpiws, importlib.util as u; print(mpiws.__file__, u.find_spec('numpy'))"],
        cwd=work,
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    where, numpy = p.stdout.split()
    assert Path(where).resolve().is_relative_to(bin_.parent.resolve()), where
    assert numpy == "None"  # default dependencies only


def test_mpiws_run_two_ranks(venv):
    p = _mpiws(venv, "run", "-n", "2", "examples/hello.py")
    assert sorted(re.findall(r"Hello from rank (\d) of 2", p.stdout)) == ["0", "1"], p.stdout


def test_mpiws_serve_and_call_a_template_program_and_a_cwl_tool(venv):
    bin_, work = venv
    server = subprocess.Popen(
        [
            str(bin_ / "mpiws"),
            "serve",
            "--program",
            "add=examples/add.sh [in:val:x:int] [in:file:y:int] [out:file:result:int]",
            "--program-cwl",
            "examples/workflows/cwl/echo.cwl",
        ],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    try:
        url, seen = None, []
        while url is None:
            line = server.stdout.readline()
            seen.append(line)
            if not line and server.poll() is not None:
                raise AssertionError("mpiws serve exited:\n" + "".join(seen))
            m = re.search(r"serving .* at (\S+)", line)
            url = m and m.group(1)
        added = json.loads(_mpiws(venv, "call", url + "/programs/add", "x=1", "y=41").stdout)
        assert added["state"] == "done" and added["outputs"] == {"result": 42}, added
        echoed = json.loads(_mpiws(venv, "call", url + "/programs/echo", "message=hello").stdout)
        assert echoed["outputs"]["out"]["basename"] == "hello.txt" and echoed["outputs"]["out"]["size"] == 6, echoed
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_mpiws_workflow_run_yaml(venv, tmp_path):
    p = _mpiws(
        venv, "workflow", "run", "examples/workflows/chain.yml", "message=hello", "--outdir", str(tmp_path), "--quiet"
    )
    out = json.loads(p.stdout)
    assert Path(out["message"]["path"]).read_text() == "hello", out


def test_mpiws_workflow_run_cwl(venv, tmp_path):
    p = _mpiws(
        venv,
        "workflow",
        "run",
        "examples/workflows/cwl/chain.cwl",
        "examples/workflows/cwl/fruit.yml",
        "--outdir",
        str(tmp_path),
        "--quiet",
    )
    out = json.loads(p.stdout)
    assert out["count"].split()[0] == str(len((ROOT / "examples/workflows/cwl/fruit.txt").read_text().splitlines()))
    assert Path(out["sorted"]["path"]).read_text().isupper()


def test_mpiws_futures_two_workers(venv):
    bin_, work = venv
    prog = work / "farm.py"
    prog.write_text(
        "from mpiws.futures import MPIPoolExecutor\n"
        "if __name__ == '__main__':\n"
        "    with MPIPoolExecutor(max_workers=2) as pool:\n"
        "        print(sum(pool.map(pow, range(20), [2] * 20)))\n"
    )
    p = subprocess.run(
        [str(bin_ / "python"), str(prog)], cwd=work, capture_output=True, text=True, timeout=300, env=_env()
    )
    assert p.returncode == 0 and p.stdout.split() == [str(sum(i * i for i in range(20)))], p.stdout + p.stderr


def test_mpiws_bench_quick_says_where_the_suites_are(venv):
    bin_, work = venv
    p = _mpiws(venv, "bench", "--quick")
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "source tree" in lines[0] and "scripts/setup.sh" in lines[0], p.stderr
    assert not (work / "mpiws-bench").exists() and not list(bin_.parent.glob("lib/python*/site-packages/benchmarks"))


def test_mpiws_cwl_runner_runs_a_document_as_cwl_runner_does(venv, tmp_path):
    bin_, work = venv
    runner = str(bin_ / "mpiws-cwl-runner")
    version = subprocess.run([runner, "--version"], capture_output=True, text=True, env=_env(), timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("mpiws-cwl-runner "), version
    p = subprocess.run(
        [
            runner,
            f"--outdir={tmp_path}",
            "--quiet",
            "examples/workflows/cwl/chain.cwl",
            "examples/workflows/cwl/fruit.yml",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert p.returncode == 0 and p.stderr == "", p
    assert Path(json.loads(p.stdout)["sorted"]["path"]).read_text().isupper()


def test_cwl_beyond_the_own_engine_needs_the_cwl_extra_and_runs_with_it(venv, wheel, tmp_path):
    """A document with JavaScript runs by cwltool, the reference runner: without the ``cwl`` extra the runner
    says how to get it (exit 33: a feature not run here); with ``pip install mpiws[cwl]`` it runs. (Last in
    this module: it adds cwltool to the venv.)"""
    bin_, work = venv
    runner = [str(bin_ / "mpiws-cwl-runner"), f"--outdir={tmp_path}", "--quiet", "examples/workflows/cwl/js.cwl"]
    job = tmp_path / "job.yml"
    job.write_text("n: 41\n")
    p = subprocess.run([*runner, job], cwd=work, capture_output=True, text=True, env=_env(), timeout=300)
    assert p.returncode == 33 and "pip install 'mpiws[cwl]'" in p.stderr and "Traceback" not in p.stderr, p
    p = subprocess.run(
        [str(bin_ / "python"), "-m", "pip", "install", "-q", f"{wheel}[cwl]"],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(),
    )
    assert p.returncode == 0, p.stderr[-3000:]
    p = subprocess.run([*runner, job], cwd=work, capture_output=True, text=True, env=_env(), timeout=300)
    assert p.returncode == 0 and json.loads(p.stdout) == {}, p
