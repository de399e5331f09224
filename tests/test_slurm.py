"""``mpiws run --slurm`` under a real Slurm (slurmctld, slurmd and munge
from the OS packages, one machine, 4 CPUs declared: ``slurm_cluster``): one
rank per task, found through the launcher's rendezvous with no file the user
writes; output, exit status and failures as with ``mpiws run -n N``."""

import subprocess
import sys

import pytest

from conftest import ROOT
from slurm_cluster import SlurmUnavailable, slurm_cluster

PROGRAM = str(ROOT / "tests" / "rank_programs.py")
MPIWS = [sys.executable, "-m", "mpiws"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        with slurm_cluster(tmp_path_factory.mktemp("slurm"), cpus=4) as c:
            yield c
    except SlurmUnavailable as e:
        pytest.skip(str(e))


def run(cluster, *cmd, timeout=120):
    env = dict(cluster.env, PYTHONPATH=str(ROOT))
    return subprocess.run(list(cmd), env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_salloc_runs_one_rank_per_task(cluster):
    p = run(cluster, "salloc", "-n", "4", *MPIWS, "run", "--slurm", PROGRAM, "check")
    info = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}\n{cluster.logs()}"
    assert p.returncode == 0, info
    ranks = sorted(line.split()[1] for line in p.stdout.splitlines() if line.startswith("rank "))
    assert ranks == ["0", "1", "2", "3"], info
    assert "checked 4 ranks" in p.stdout, info


def test_sbatch_with_labels_and_fewer_ranks(cluster, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n{' '.join(MPIWS)} run --slurm -n 3 --prefix {PROGRAM} check\n")
    out = tmp_path / "out.txt"
    p = run(cluster, "sbatch", "--wait", "-n", "4", "-o", str(out), str(script))
    text = out.read_text() if out.exists() else ""
    info = f"exit {p.returncode}\n{p.stdout}{p.stderr}\noutput:\n{text}\n{cluster.logs()}"
    assert p.returncode == 0, info
    # srun --label: each task's lines carry its rank
    assert sorted(line.split(":")[0].strip() for line in text.splitlines() if "rank " in line and " of 3" in line) == [
        "0",
        "1",
        "2",
    ], info
    assert "checked 3 ranks" in text, info


def test_a_failing_rank_fails_the_run_and_stops_the_others(cluster):
    p = run(cluster, "salloc", "-n", "4", *MPIWS, "run", "--slurm", PROGRAM, "fail", "2", timeout=180)
    info = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.returncode == 1, info
    assert "rank 2 failed first: RuntimeError: rank 2 fails on purpose" in p.stderr, info
    assert "Traceback" in p.stderr, info


def test_outside_an_allocation_it_says_so(cluster):
    env = {k: v for k, v in cluster.env.items() if not k.startswith("SLURM_")}
    p = subprocess.run(
        [*MPIWS, "run", "--slurm", PROGRAM, "check"],
        env=dict(env, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0 and "inside a Slurm allocation" in p.stderr, p.stderr
