"""``mpiws run`` as an mpi4py user expects of ``mpiexec``: standard input
reaches rank 0 (as it comes, to its end) and no other rank; ``-m module``
and ``-c code`` run a program as ``python -m`` / ``python -c`` would; and
``python -m mpiws run`` does all of it. Real rank processes throughout,
started through ``.venv/bin/mpiws`` (or ``python -m mpiws``)."""

import hashlib
import json
import os
import secrets
import select
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT

MPIWS = Path(sys.executable).with_name("mpiws")
# Not run from the virtualenv: the same command, as a module.
RUN = [str(MPIWS)] if MPIWS.exists() else [sys.executable, "-m", "mpiws"]

# Rank 0 digests all it reads; every rank says how much it read.
DIGEST = """
import hashlib, sys
from mpiws import MPI
comm = MPI.COMM_WORLD
data = sys.stdin.buffer.read()
print("read", comm.rank, len(data), hashlib.sha256(data).hexdigest(), flush=True)
lines = data.decode().splitlines()
if lines:
    print("first", comm.rank, lines[0], "last", lines[-1], flush=True)
comm.Barrier()
"""

# Rank 0 echoes each line as it comes, then says when the input ended.
ECHO = """
import sys
from mpiws import MPI
comm = MPI.COMM_WORLD
if comm.rank != 0:
    print("other read", repr(sys.stdin.read()), flush=True)
n = 0
for line in sys.stdin:
    n += 1
    print("echo", line.rstrip("\\n"), flush=True)
if comm.rank == 0:
    print("eof after", n, flush=True)
print("ranks", comm.allreduce(1), flush=True)
"""

# What a program sees of how it was started, and a class of its __main__
# that must pickle by reference from rank 0 to rank 1.
PROBE = """
import json, sys
from mpiws import MPI

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

comm = MPI.COMM_WORLD
if comm.size > 1:
    if comm.rank == 0:
        comm.send(Point(3, 4), dest=1)
    elif comm.rank == 1:
        p = comm.recv(source=0)
        print("point", type(p).__module__, type(p).__name__, p.x, p.y, flush=True)
print("probe", json.dumps({"name": __name__, "argv": sys.argv, "path0": sys.path[0], "rank": comm.rank,
                           "size": comm.size, "stdin": sys.stdin.read()}), flush=True)
"""


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def run(*args, input=None, cwd=ROOT, timeout=120, command=RUN, **kw):
    return subprocess.run([*command, "run", *args], input=input, capture_output=True, cwd=cwd, timeout=timeout, **kw)


def ok(p):
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    return out


def probes(out):
    """Each rank's PROBE report, by rank."""
    found = [json.loads(line.split("probe ", 1)[1]) for line in out.splitlines() if "probe {" in line]
    return {p["rank"]: p for p in found}


def test_stdin_reaches_rank_0_only_in_order_to_its_end(tmp_path):
    prog = write(tmp_path / "digest.py", DIGEST)
    data = b"".join(b"line %07d of the input\n" % i for i in range(45_000))  # about 1 MB
    assert len(data) > 1_000_000
    out = ok(run("-n", "2", "-l", str(prog), input=data))
    assert f"[0] read 0 {len(data)} {hashlib.sha256(data).hexdigest()}" in out, out
    assert "[0] first 0 line 0000000 of the input last line 0044999 of the input" in out, out
    assert f"[1] read 1 0 {hashlib.sha256(b'').hexdigest()}" in out, out

    # an empty input, or none at all (fd 0 closed, ``<&-``): rank 0 reads its end at once too
    for how in ({"input": b""}, {"preexec_fn": lambda: os.close(0)}):
        out = ok(run("-n", "2", str(prog), **how))
        assert out.count(f" 0 {hashlib.sha256(b'').hexdigest()}") == 2, out


class Lines:
    """A pipe's output as it arrives, each piece waited for at most ``timeout``."""

    def __init__(self, stream):
        self.fd, self.buf, self.seen = stream.fileno(), b"", []

    def until(self, marker, timeout=60.0):
        """What comes up to and including ``marker`` (a line's end, or a prompt that has none)."""
        deadline = time.monotonic() + timeout
        while marker not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} within {timeout} s; so far {self.buf!r}"
            if select.select([self.fd], [], [], left)[0]:
                chunk = os.read(self.fd, 65536)
                assert chunk, f"output ended before {marker!r}; so far {self.buf!r}"
                self.buf += chunk
        head, _, self.buf = self.buf.partition(marker)
        self.seen.append((head + marker).decode())
        return self.seen[-1]

    def next(self, timeout=60.0):
        return self.until(b"\n", timeout)[:-1]

    def find(self, prefix, timeout=60.0):
        """The next line that starts with ``prefix`` (others skipped)."""
        while not (line := self.next(timeout)).startswith(prefix):
            pass
        return line


def test_stdin_streams_line_by_line(tmp_path):
    prog = write(tmp_path / "echo.py", ECHO)
    p = subprocess.Popen(
        [*RUN, "run", "-n", "2", "-l", str(prog)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
    )
    try:
        lines = Lines(p.stdout)
        # each answer comes before the next line is written: no waiting for EOF, or for a full buffer
        for i in range(5):
            p.stdin.write(f"question {i}\n".encode())
            assert lines.find("[0] echo") == f"[0] echo question {i}"
        p.stdin.close()
        assert lines.find("[0] eof") == "[0] eof after 5"
        out = "".join(lines.seen) + (lines.buf + p.stdout.read()).decode()
        assert p.wait(timeout=60) == 0, p.stderr.read().decode()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "[1] other read ''" in out and "[1] echo" not in out and "[0] ranks 2" in out, out


# As mpi4py's compute-pi demos: rank 0 prompts (no line end), reads the answer, shares it.
PROMPT = """
from mpiws import MPI
comm = MPI.COMM_WORLD
while True:
    n = int(input("intervals (0 quits)? ")) if comm.rank == 0 else None
    n = comm.bcast(n, root=0)
    if n == 0:
        break
    total = comm.allreduce(n * comm.rank)
    if comm.rank == 0:
        print("total", total)
"""


def test_a_prompt_shows_before_it_is_answered():
    p = subprocess.Popen(
        [*RUN, "run", "-n", "3", "-l", "-c", PROMPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        cwd=ROOT,
    )
    try:
        out = Lines(p.stdout)
        for n in (4, 10):
            # the prompt, a line without its end, is out while rank 0 waits for the answer
            out.until(b"[0] intervals (0 quits)? ")
            p.stdin.write(f"{n}\n".encode())
            assert out.next() == f"total {3 * n}"
        out.until(b"[0] intervals (0 quits)? ")
        p.stdin.write(b"0\n")
        p.stdin.close()
        assert p.wait(timeout=60) == 0, p.stderr.read().decode()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_other_ranks_read_an_empty_input(tmp_path):
    prog = write(tmp_path / "echo.py", ECHO)
    out = ok(run("-n", "3", "-l", str(prog), input=b"only for zero\n"))
    assert "[0] echo only for zero" in out and "[0] eof after 1" in out, out
    assert "[1] other read ''" in out and "[2] other read ''" in out, out


def test_dash_m_runs_a_module_as_python_dash_m(tmp_path):
    write(tmp_path / "probe_io_mod.py", PROBE)
    write(tmp_path / "probe_io_pkg" / "__init__.py", "")
    write(tmp_path / "probe_io_pkg" / "__main__.py", PROBE)
    cwd = os.path.realpath(tmp_path)
    # what python -m itself gives, alone (a domain of one rank)
    alone = probes(
        subprocess.run(
            [sys.executable, "-m", "probe_io_mod", "-x", "--flag", "v"],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=60,
            check=True,
        ).stdout
    )[0]
    assert alone["name"] == "__main__" and alone["argv"] == [os.path.join(cwd, "probe_io_mod.py"), "-x", "--flag", "v"]
    assert alone["path0"] == cwd

    # mpiws's own options before -m; everything after the module is the module's, even -l or -n
    out = ok(run("-n", "2", "-l", "-m", "probe_io_mod", "-x", "--flag", "v", cwd=cwd))
    got = probes(out)
    assert sorted(got) == [0, 1], out
    for p in got.values():
        assert {k: p[k] for k in ("name", "argv", "path0")} == {k: alone[k] for k in ("name", "argv", "path0")}, out
        assert p["size"] == 2
    assert "[1] point __main__ Point 3 4" in out, out  # a class of the module's __main__ pickles by reference

    # python's attached form, -mMODULE, too
    got = probes(ok(run("-n", "1", "-mprobe_io_mod", "a", "-l", cwd=cwd)))
    assert got[0]["argv"] == [os.path.join(cwd, "probe_io_mod.py"), "a", "-l"], got

    out = ok(run("-n", "2", "-m", "probe_io_pkg", "-n", "5", cwd=cwd))
    got = probes(out)
    assert sorted(got) == [0, 1], out
    assert all(p["argv"] == [os.path.join(cwd, "probe_io_pkg", "__main__.py"), "-n", "5"] for p in got.values()), out


def test_dash_m_errors(tmp_path):
    p = run("-n", "2", "-m", cwd=tmp_path)
    assert p.returncode != 0 and b"-m needs its module" in p.stderr, p.stderr
    p = run("-n", "2", "-m", "no_such_module_here", cwd=tmp_path)
    assert p.returncode == 1 and b"No module named no_such_module_here" in p.stderr, p.stderr


def test_dash_c_runs_code_as_python_dash_c(tmp_path):
    out = ok(run("-n", "2", "-l", "-c", PROBE, "a", "-n", "3", cwd=tmp_path, input=b"typed\n"))
    got = probes(out)
    assert sorted(got) == [0, 1], out
    for p in got.values():
        assert p["name"] == "__main__" and p["argv"] == ["-c", "a", "-n", "3"] and p["path0"] == "", out
    assert got[0]["stdin"] == "typed\n" and got[1]["stdin"] == "", out
    assert "[1] point __main__ Point 3 4" in out, out


def test_python_dash_m_mpiws_with_dash_m_and_stdin(tmp_path):
    write(tmp_path / "probe_io_mod.py", PROBE)
    cwd = os.path.realpath(tmp_path)
    out = ok(
        run(
            "-n",
            "2",
            "-m",
            "probe_io_mod",
            "arg",
            cwd=cwd,
            input=b"first\nsecond\n",
            command=[sys.executable, "-m", "mpiws"],
        )
    )
    got = probes(out)
    assert sorted(got) == [0, 1], out
    assert got[0]["stdin"] == "first\nsecond\n" and got[1]["stdin"] == "", out
    assert all(
        p["argv"] == [os.path.join(cwd, "probe_io_mod.py"), "arg"] and p["name"] == "__main__" for p in got.values()
    )


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rendezvous_ranks_other_than_0_read_no_input(tmp_path):
    write(tmp_path / "probe_io_mod.py", PROBE)
    url, key = f"http://127.0.0.1:{_free_port()}", secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("MPIWS_RANK", "MPIWS_SIZE")}
    env.update(MPIWS_KEY=key)
    procs = []
    for rank in range(2):  # each started by hand, each with an input of its own
        procs.append(
            subprocess.Popen(
                [*RUN, "run", "--rendezvous", url, "--size", "2", "--rank", str(rank), "-m", "probe_io_mod"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=tmp_path,
                env=env,
            )
        )
    outs = [p.communicate(input=f"typed at rank {r}\n".encode(), timeout=120) for r, p in enumerate(procs)]
    info = "\n".join(
        f"rank {r}: exit {p.returncode}\n{o.decode()}{e.decode()}" for r, (p, (o, e)) in enumerate(zip(procs, outs))
    )
    assert [p.returncode for p in procs] == [0, 0], info
    assert probes(outs[0][0].decode())[0]["stdin"] == "typed at rank 0\n", info
    assert probes(outs[1][0].decode())[1]["stdin"] == "", info


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from slurm_cluster import SlurmUnavailable, slurm_cluster

    try:
        with slurm_cluster(tmp_path_factory.mktemp("slurm"), cpus=4) as c:
            yield c
    except SlurmUnavailable as e:
        pytest.skip(str(e))


def test_slurm_gives_the_input_to_rank_0_and_runs_modules(cluster, tmp_path):
    write(tmp_path / "probe_io_mod.py", PROBE)
    prog = write(tmp_path / "digest.py", DIGEST)
    data = b"".join(b"slurm line %05d\n" % i for i in range(20_000))
    env = dict(cluster.env, PYTHONPATH=str(ROOT))

    def salloc(*args, input):
        p = subprocess.run(
            ["salloc", "-n", "3", *RUN, "run", "--slurm", *args],
            input=input,
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=180,
        )
        assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout.decode()}{p.stderr.decode()}\n{cluster.logs()}"
        return p.stdout.decode()

    out = salloc(str(prog), input=data)
    assert f"read 0 {len(data)} {hashlib.sha256(data).hexdigest()}" in out, out
    for r in (1, 2):
        assert f"read {r} 0 " in out, out

    out = salloc("-m", "probe_io_mod", "x", input=b"to task zero\n")
    got = probes(out)
    assert sorted(got) == [0, 1, 2], out
    assert got[0]["stdin"] == "to task zero\n" and got[1]["stdin"] == got[2]["stdin"] == "", out
    assert all(p["argv"][1:] == ["x"] and p["argv"][0].endswith("probe_io_mod.py") for p in got.values()), out
