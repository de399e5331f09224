"""``Intracomm.Spawn`` and ``Comm.Get_parent``: real child processes that
join the spawning ranks in a new domain, from a plain ``python prog.py``
(a singleton) and from ranks of ``mpiws run``; the children end with their
spawner (no orphans); ``mpiws.futures`` and ``mpiws.util.pool`` on top."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

MPIWS = Path(sys.executable).with_name("mpiws")

CHILD = """
import atexit, os, sys
from mpiws import MPI
parent = MPI.Comm.Get_parent()
def at_exit():  # runs while the children can still communicate (as under mpi4py)
    mark = os.environ.get("CHILD_EXIT_DIR")
    if mark:
        with open(os.path.join(mark, f"exit{MPI.COMM_WORLD.rank}"), "w") as f:
            f.write(str(MPI.COMM_WORLD.allreduce(1)))
atexit.register(at_exit)
assert parent == MPI.Comm.Get_parent() and parent.Is_inter()
world = MPI.COMM_WORLD
job = parent.recv(source=0, tag=1)
total = world.allreduce(job)  # the children's own world
parent.send((world.rank, world.size, parent.Get_remote_size(), job, total, sys.argv[1:]), dest=0, tag=2)
assert parent.bcast(None, root=0) == "bye"
parent.Disconnect()
"""

PARENT = """
import sys
from mpiws import MPI
assert MPI.Comm.Get_parent() == MPI.COMM_NULL  # nobody spawned this one
errcodes = []
inter = MPI.COMM_SELF.Spawn(sys.executable, [sys.argv[1], "a", "b"], maxprocs=3, errcodes=errcodes)
assert errcodes == [0, 0, 0]
assert (inter.Get_size(), inter.Get_remote_size()) == (1, 3)
for i in range(3):
    inter.send(10 * (i + 1), dest=i, tag=1)
for got in sorted(inter.recv(source=MPI.ANY_SOURCE, tag=2) for _ in range(3)):
    print("child", *got, flush=True)
inter.bcast("bye", root=MPI.ROOT)
inter.Disconnect()
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_singleton_spawns_children_that_talk_to_it_and_to_each_other(tmp_path):
    child = _write(tmp_path, "child.py", CHILD)
    parent = _write(tmp_path, "parent.py", PARENT)
    env = dict(os.environ, CHILD_EXIT_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, parent, child], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in tmp_path.glob("exit*")) == ["exit0", "exit1", "exit2"], out.stderr
    assert {p.read_text() for p in tmp_path.glob("exit*")} == {"3"}
    lines = [line.split() for line in out.stdout.splitlines() if line.startswith("child")]
    # rank, size, remote size, job, the children's allreduce, argv
    assert lines == [["child", str(r), "3", "1", str(10 * (r + 1)), "60", "['a',", "'b']"] for r in range(3)]


def test_ranks_of_mpiws_run_spawn_together_with_any_root(tmp_path):
    prog = _write(
        tmp_path,
        "multi.py",
        """
        import sys
        from mpiws import MPI
        world = MPI.COMM_WORLD
        code = ("from mpiws import MPI; p = MPI.Comm.Get_parent(); x = p.bcast(None, root=1); "
                "p.gather(MPI.COMM_WORLD.rank * 10 + x, root=0); p.Disconnect()")
        inter = world.Spawn(sys.executable, ["-c", code], maxprocs=2, root=1)
        assert (inter.Get_size(), inter.Get_remote_size()) == (world.size, 2)
        inter.bcast(5 if world.rank == 1 else None, root=MPI.ROOT if world.rank == 1 else MPI.PROC_NULL)
        got = inter.gather(None, root=MPI.ROOT if world.rank == 0 else MPI.PROC_NULL)
        print("rank", world.rank, got, flush=True)
        inter.Disconnect()
    """,
    )
    out = subprocess.run([str(MPIWS), "run", "-n", "2", prog], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == ["rank 0 [5, 15]", "rank 1 None"]


def test_what_cannot_be_spawned_is_refused_at_every_spawning_rank(tmp_path):
    prog = _write(
        tmp_path,
        "refused.py",
        """
        import sys
        from mpiws import MPI
        for command, args in (("/bin/echo", ["hi"]), (sys.executable, []), (sys.executable, ["-u"])):
            try:
                MPI.COMM_WORLD.Spawn(command, args, maxprocs=1)
            except MPI.Exception as e:
                print(MPI.COMM_WORLD.rank, e.Get_error_class() in (MPI.ERR_SPAWN, MPI.ERR_ARG), flush=True)
    """,
    )
    out = subprocess.run([str(MPIWS), "run", "-n", "2", prog], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split("\n")[:-1]) == ["0 True"] * 3 + ["1 True"] * 3


def test_children_end_when_their_spawner_is_killed(tmp_path):
    child = _write(
        tmp_path,
        "sleeper.py",
        """
        import os, time
        from mpiws import MPI
        print("pid", os.getpid(), flush=True)
        time.sleep(600)
    """,
    )
    parent = _write(
        tmp_path,
        "spawner.py",
        """
        import sys, time
        from mpiws import MPI
        MPI.COMM_SELF.Spawn(sys.executable, [sys.argv[1]], maxprocs=2)
        time.sleep(600)
    """,
    )
    p = subprocess.Popen([sys.executable, parent, child], stdout=subprocess.PIPE, text=True)
    pids = [int(p.stdout.readline().split()[1]) for _ in range(2)]
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.monotonic() + 30
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in pids if _alive(pid)]
        time.sleep(0.2)
    assert not alive, f"orphans: {alive}"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (its parent gone and not yet reaped by init) has ended too.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.parametrize("launch", ["python", "mpiws run -n 3 -m mpiws.futures"])
def test_mpiws_futures_and_util_pool_run_tasks_on_spawned_or_launched_workers(tmp_path, launch):
    prog = _write(
        tmp_path,
        "farm.py",
        """
        import os
        from mpiws.futures import MPIPoolExecutor
        from mpiws.util.pool import Pool

        def task(x):
            if x == 7:
                raise ValueError("seven")
            return x * x, os.getpid()

        if __name__ == "__main__":
            with MPIPoolExecutor(max_workers=2) as ex:
                futures = [ex.submit(task, i) for i in range(10)]
                results = [f.exception() or f.result()[0] for f in futures]
                pids = {f.result()[1] for f in futures if not f.exception()}
                print("squares", [r if isinstance(r, int) else repr(r) for r in results])
                print("workers", ex.num_workers, "pids", len(pids), os.getpid() in pids)
            with Pool(2) as pool:
                print("pool", pool.map(abs, range(-3, 3)))
    """,
    )
    cmd = [sys.executable, prog] if launch == "python" else [str(MPIWS), *launch.split()[1:], prog]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    expected = [i * i for i in range(10)]
    expected[7] = "ValueError('seven')"
    assert lines[0] == "squares " + str(expected)
    workers, pids = lines[1].split()[1], int(lines[1].split()[3])
    assert workers == "2" and 1 <= pids <= 2 and lines[1].endswith("False")  # tasks ran elsewhere
    assert lines[2] == "pool [3, 2, 1, 0, 1, 2]"


def test_a_child_that_fails_is_an_error_for_its_parent_not_a_hang(tmp_path):
    prog = _write(
        tmp_path,
        "crash.py",
        """
        import sys
        from mpiws import MPI
        code = ("from mpiws import MPI\\n"
                "if MPI.COMM_WORLD.rank == 1: raise SystemExit(3)\\n"
                "MPI.Comm.Get_parent().send('hi', dest=0)")
        inter = MPI.COMM_SELF.Spawn(sys.executable, ["-c", code], maxprocs=2)
        print("from 0:", inter.recv(source=0), flush=True)
        try:
            inter.recv(source=1, timeout=60)
        except MPI.Exception as e:
            print("from 1:", e.Get_error_class() == MPI.ERR_PROC_FAILED, flush=True)
    """,
    )
    out = subprocess.run([sys.executable, prog], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["from 0: hi", "from 1: True"]
