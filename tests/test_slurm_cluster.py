"""The one-machine Slurm cluster harness (tests/slurm_cluster.py) really
schedules and launches: tasks get their ranks, allocations and batch jobs
run, a failed task fails srun, and nothing is left running afterwards."""

import os
import socket
import subprocess
import time

import pytest

import slurm_cluster as sc

CPUS = 4
TIMEOUT = 60  # seconds, for every Slurm command


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        with sc.slurm_cluster(tmp_path_factory.mktemp("slurm"), cpus=CPUS) as c:
            yield c
    except sc.SlurmUnavailable as e:
        pytest.skip(str(e))


def run(cluster, *argv, timeout=TIMEOUT, **kw):
    return subprocess.run(list(argv), env=cluster.env, capture_output=True, text=True, timeout=timeout, **kw)


def explain(proc, cluster):
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\n{cluster.logs()}"


def test_node_declares_the_requested_cpus(cluster):
    # config_overrides: the node has CPUS whatever the hardware (2 cores here).
    p = run(cluster, "sinfo", "-h", "-N", "-o", "%N %c %T %P")
    assert p.returncode == 0, explain(p, cluster)
    assert p.stdout.split() == [cluster.node, str(CPUS), "idle", "debug*"], p.stdout


def test_srun_gives_each_task_its_rank(cluster):
    p = run(cluster, "srun", "-n", str(CPUS), "printenv", "SLURM_PROCID")
    assert p.returncode == 0, explain(p, cluster)
    assert sorted(int(x) for x in p.stdout.split()) == list(range(CPUS)), p.stdout


def test_srun_task_environment(cluster):
    script = 'echo "$SLURM_PROCID $SLURM_NTASKS $SLURM_STEP_NODELIST"'
    p = run(cluster, "srun", "-n", str(CPUS), "sh", "-c", script)
    assert p.returncode == 0, explain(p, cluster)
    rows = sorted(line.split() for line in p.stdout.splitlines())
    assert rows == [[str(i), str(CPUS), cluster.node] for i in range(CPUS)], p.stdout


def test_salloc_then_srun(cluster):
    p = run(cluster, "salloc", "-n", str(CPUS), "srun", "-n", str(CPUS), "hostname")
    assert p.returncode == 0, explain(p, cluster)
    assert p.stdout.split() == [socket.gethostname()] * CPUS, p.stdout


def test_sbatch_wait(cluster, tmp_path):
    out = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\necho ntasks=$SLURM_NTASKS\nsrun printenv SLURM_PROCID\n")
    p = run(cluster, "sbatch", "--wait", "-n", str(CPUS), f"--output={out}", str(script))
    assert p.returncode == 0, explain(p, cluster)
    lines = out.read_text().split()
    assert lines[0] == f"ntasks={CPUS}", lines
    assert sorted(int(x) for x in lines[1:]) == list(range(CPUS)), lines


def test_failing_task_fails_srun(cluster):
    # Task 2 exits 3, the others 0: srun returns the highest task exit code.
    p = run(cluster, "srun", "-n", str(CPUS), "sh", "-c", '[ "$SLURM_PROCID" = 2 ] && exit 3; exit 0')
    assert p.returncode == 3, explain(p, cluster)


def test_more_tasks_than_cpus_do_not_start(cluster):
    # The node has exactly CPUS CPUs: one more task cannot be allocated
    # (Slurm queues such a job rather than rejecting it; --immediate gives up).
    p = run(cluster, "srun", "--immediate=2", "-n", str(CPUS + 1), "true")
    assert p.returncode != 0, explain(p, cluster)
    assert "unable to allocate resources" in p.stderr.lower(), p.stderr


def test_stop_leaves_nothing_running(tmp_path):
    try:
        c = sc.SlurmCluster(tmp_path, cpus=2).start()
    except sc.SlurmUnavailable as e:
        pytest.skip(str(e))
    try:
        # A step still running at teardown: srun, slurmstepd and the task.
        srun = subprocess.Popen(
            ["srun", "-n", "1", "sleep", "300"], env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + TIMEOUT
        while "R" not in run(c, "squeue", "-h", "-o", "%t", timeout=10).stdout:
            assert time.monotonic() < deadline, c.logs()
            time.sleep(0.2)
        daemons = [p.pid for p in c._procs.values()]
    finally:
        c.stop()
    try:
        srun.wait(10)
    except subprocess.TimeoutExpired:
        srun.kill()
        pytest.fail("srun still running after stop()")
    assert sc._marked_pids(c._marker) == []
    for pid in daemons:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # reaped by us, so the pid is gone
    c.stop()  # idempotent


def test_failed_start_leaves_nothing_running(tmp_path, monkeypatch):
    # A slurm.conf the daemons reject: start() fails after munged is up,
    # says why with the logs, and stops what it had started.
    write_conf = sc.SlurmCluster._write_conf

    def bad_conf(self):
        write_conf(self)
        with open(self.conf, "a") as f:
            f.write("NoSuchSlurmOption=1\n")

    monkeypatch.setattr(sc.SlurmCluster, "_write_conf", bad_conf)
    c = sc.SlurmCluster(tmp_path, cpus=2)
    try:
        with pytest.raises(RuntimeError, match="exited with status") as failure:
            c.start()
    except sc.SlurmUnavailable as e:
        pytest.skip(str(e))
    assert "NoSuchSlurmOption" in str(failure.value)  # the daemon's own complaint
    assert sc._marked_pids(c._marker) == []


@pytest.mark.parametrize("missing", [["slurmctld"], []])
def test_unavailable_without_root(monkeypatch, missing):
    # Not root (to install, or to run slurmd): the reason is raised, and the
    # tests above skip with it.
    monkeypatch.setattr(sc, "_missing_programs", lambda: missing)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(sc.SlurmUnavailable, match="not root"):
        sc.ensure_installed()
