"""The command line tells a new user what happened, in one line, as mpiexec
and python do (issue 32, "a command line that tells you what happened"):
Ctrl-C, a rank's exception (the user's frames), a missing program, bad
--params, a rank cancelled because another failed, a URL without a scheme,
--version, and a dead rank told to the survivors at once. Real commands
throughout (``python -m mpiws ...``), real rank processes."""

import importlib.metadata
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, mpiws_serve

MPIWS = [sys.executable, "-m", "mpiws"]


def mpiws(*args, cwd=None, env=None, timeout=120):
    return subprocess.run(
        [*MPIWS, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or ROOT,
        env=dict(os.environ, **(env or {})),
    )


def write(path, code):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(code))
    return path


def one_line(p):
    """The command's standard error, which must be one line (and no traceback)."""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


# -- Ctrl-C -------------------------------------------------------------------


def _alive(pid):
    """Whether process ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                pass
    return found


SLEEPER = """
import os, time
from mpiws import MPI
print("ready", MPI.COMM_WORLD.rank, os.getpid(), flush=True)
time.sleep(120)
"""


def _start(tmp_path, n=2, code=SLEEPER):
    prog = write(tmp_path / "sleeper.py", code)
    # a session of its own: a terminal's Ctrl-C reaches the whole foreground process group
    return subprocess.Popen(
        [*MPIWS, "run", "-n", str(n), str(prog)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize("to", ["process group", "launcher"])
def test_ctrl_c_says_one_line_exits_130_and_ends_every_rank(tmp_path, to):
    p = _start(tmp_path)
    pids = [int(p.stdout.readline().split()[2]) for _ in range(2)]
    assert all(_alive(pid) for pid in pids)
    if to == "launcher":
        os.kill(p.pid, signal.SIGINT)  # kill -INT of mpiws run alone
    else:
        os.killpg(p.pid, signal.SIGINT)  # a terminal's Ctrl-C
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert err == "mpiws run: interrupted; ranks ended\n", err
    assert not any(_alive(pid) for pid in pids)


def test_ctrl_c_while_the_ranks_start_is_one_line_too(tmp_path):
    p = _start(tmp_path, n=4)
    deadline = time.monotonic() + 30
    while len(_children(p.pid)) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    ranks = _children(p.pid)
    os.killpg(p.pid, signal.SIGINT)  # the ranks are importing mpiws, or about to start the program
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130 and "Traceback" not in err, err
    assert err.splitlines() in (["mpiws run: interrupted; ranks ended"], ["mpiws run: interrupted"]), err
    assert not any(_alive(pid) for pid in ranks)


# -- a rank's exception: the user's frames --------------------------------------


RAISES = """
from mpiws import MPI

def inner(x):
    raise ValueError(f"bad value {x}")

def outer():
    inner(MPI.COMM_WORLD.rank)

if MPI.COMM_WORLD.rank == 1:
    outer()
MPI.COMM_WORLD.Barrier()
"""


def _frames(stderr):
    return re.findall(r'^  File "([^"]+)", line \d+, in (\S+)$', stderr, re.M)


def test_a_ranks_traceback_shows_the_users_frames_only(tmp_path):
    prog = write(tmp_path / "raises.py", RAISES)
    p = mpiws("run", "-n", "2", str(prog))
    assert p.returncode == 1
    assert "mpiws run: rank 1 failed first: ValueError: bad value 1" in p.stderr, p.stderr
    assert _frames(p.stderr) == [(str(prog), "<module>"), (str(prog), "outer"), (str(prog), "inner")], p.stderr
    assert p.stderr.rstrip().endswith("ValueError: bad value 1"), p.stderr
    assert "runpy" not in p.stderr and "mpiws/" not in p.stderr, p.stderr

    # mpiws's own frames after the user's call go too (an MPI error is the user's call's)
    prog = write(tmp_path / "bad_rank.py", "from mpiws import MPI\nMPI.COMM_WORLD.send('x', dest=7)\n")
    p = mpiws("run", "-n", "1", str(prog))
    assert p.returncode == 1
    assert _frames(p.stderr) == [(str(prog), "<module>")], p.stderr
    assert "MPI_ERR_RANK: invalid rank 7" in p.stderr.splitlines()[-1], p.stderr
    assert "MPI_ERR_RANK: MPI_ERR_RANK" not in p.stderr, p.stderr  # said once


def test_mpiws_traceback_full_keeps_every_frame(tmp_path):
    prog = write(tmp_path / "raises.py", RAISES)
    p = mpiws("run", "-n", "2", str(prog), env={"MPIWS_TRACEBACK": "full"})
    files = [f for f, _ in _frames(p.stderr)]
    assert any(f.endswith(os.path.join("mpiws", "launch", "worker.py")) for f in files), p.stderr
    assert files[-3:] == [str(prog)] * 3, p.stderr


# -- a program that is not there --------------------------------------------------


def test_a_missing_script_is_said_before_any_rank_starts(tmp_path):
    t = time.monotonic()
    p = mpiws("run", "-n", "4", "nope.py", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert one_line(p) == "mpiws run: nope.py: no such file"
    assert time.monotonic() - t < 10


def test_a_missing_module_is_said_before_any_rank_starts(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "sub" / "__init__.py", "")
    write(tmp_path / "pkg" / "sub" / "mod.py", "print('module ran')\n")
    for name, said in (
        ("no_such_module_here", "No module named no_such_module_here"),
        ("no_such_pkg.mod", "No module named no_such_pkg"),
        ("pkg.nope", "No module named pkg.nope"),
        ("pkg.sub.mod.deeper", "pkg.sub.mod is not a package"),
    ):
        p = mpiws("run", "-n", "4", "-m", name, cwd=tmp_path)
        assert p.returncode == 1, p.stderr  # as python -m says it
        assert one_line(p) == f"mpiws run: -m {name}: {said}"
    # found where python -m finds it: the current directory, without importing it
    p = mpiws("run", "-n", "2", "-m", "pkg.sub.mod", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.count("module ran") == 2, p.stderr


# -- --params ----------------------------------------------------------------------


def test_bad_params_json_names_the_flag():
    p = mpiws("run", "--endpoints", "http://127.0.0.1:9", "--service", "x", "--params", "{n: 100}")
    assert p.returncode == 2
    line = one_line(p)
    assert line.startswith("mpiws run: --params is not JSON"), line
    assert "line 1 column 2" in line and "--params '{\"n\": 100}'" in line, line


# -- a rank cancelled because another failed ------------------------------------------------


FAILS_ON_ONE = """
import time

def service(comm, params):
    if comm.Get_rank() == 1:
        time.sleep(0.3)
        raise ValueError("rank one gives up")
    comm.recv(source=1, tag=99)  # until cancelled
"""


def test_a_cancelled_rank_says_why(tmp_path):
    write(tmp_path / "fails_on_one.py", FAILS_ON_ONE)
    server, url = mpiws_serve(
        ["--service", "fails=fails_on_one:service"], env=dict(os.environ, PYTHONPATH=str(tmp_path)), cwd=tmp_path
    )
    try:
        p = mpiws("run", "--endpoints", ",".join([url] * 3), "--service", "fails")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert p.returncode == 1, p.stderr
    lines = sorted(p.stdout.splitlines())
    assert lines == [
        "rank 0: cancelled because rank 1 failed",
        "rank 1: failed: ValueError: rank one gives up",
        "rank 2: cancelled because rank 1 failed",
    ], p.stdout


# -- URLs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,expected",
    [
        (["call", "127.0.0.1:8001/programs/add", "x=1"], "http://HOST:PORT/programs/NAME"),
        (["run", "--endpoints", "127.0.0.1:8001", "--service", "echo"], "http://HOST:PORT"),
        (["run", "--endpoints", "http://127.0.0.1:8001,127.0.0.1:8002", "--service", "echo"], "http://HOST:PORT"),
        (["usage", "localhost:8001/programs/add"], "http://HOST:PORT/programs/NAME"),
        (["spawn", "127.0.0.1:8001/programs/add"], "http://HOST:PORT/programs/NAME"),
        (["job", "127.0.0.1:8001/jobs/1"], "http://HOST:PORT/jobs/ID"),
        (["session", "new", "127.0.0.1:8001"], "http://HOST:PORT"),
    ],
)
def test_a_url_without_a_scheme_says_what_is_expected(args, expected):
    p = mpiws(*args)
    assert p.returncode == 2, p.stderr
    line = one_line(p)
    assert line.startswith(f"mpiws {args[0]}: "), line
    assert f"is not a URL: give a URL such as {expected} (http://" in line, line
    assert "invalid format" not in line


def test_a_url_with_another_scheme_or_a_bad_port_says_what_is_wrong():
    line = one_line(mpiws("job", "ftp://127.0.0.1:8001/jobs/1"))
    assert "http:// and https:// only" in line and "http://HOST:PORT/jobs/ID" in line, line
    line = one_line(mpiws("call", "http://127.0.0.1:99999/programs/add"))
    assert "port" in line and "65535" in line, line


# -- --version ------------------------------------------------------------------------------


def test_version():
    p = mpiws("--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"mpiws {importlib.metadata.version('mpiws')}\n"


# -- a dead rank, told to the survivors at once ---------------------------------------------------


DIES = """
import os, signal, sys, time
from mpiws import MPI

comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 1:
    time.sleep(0.3)  # the others wait for it by now
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(3)
t = time.monotonic()
try:
    if comm.rank == 0:
        comm.recv(source=1)
    else:
        while True:
            comm.send(b"x" * 1024, dest=1)
    print("NOERROR", flush=True)
except MPI.Exception as e:
    print(f"FAILED took={time.monotonic() - t:.2f} class={e.Get_error_class()} msg={e.Get_error_string()}", flush=True)
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_a_dead_rank_is_told_to_the_survivors_at_once(tmp_path, how):
    # Without the launcher's word, the survivors would wait out the failure timeout (10 s here).
    prog = write(tmp_path / "dies.py", DIES)
    p = mpiws("run", "-n", "3", "-l", "-k", str(prog), how, env={"MPIWS_FAILURE_TIMEOUT": "10"}, timeout=60)
    assert p.returncode != 0 and "rank 1 failed first: process ended" in p.stderr, p.stderr
    for r in (0, 2):
        m = re.search(rf"^\[{r}\] FAILED took=([\d.]+) class=(\d+) msg=(.*)$", p.stdout, re.M)
        assert m, p.stdout + p.stderr
        took, cls, msg = float(m.group(1)), int(m.group(2)), m.group(3)
        assert cls == 101 and "rank 1" in msg, m.group(0)  # MPI.ERR_PROC_FAILED, naming the dead rank
        assert took < 0.3 + 0.7, m.group(0)  # it died 0.3 s in: known well under a second later
