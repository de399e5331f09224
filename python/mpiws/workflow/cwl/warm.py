"""A warm CWL runner per user, kept between runs: for a document run whole on
the run's own endpoint (``mpiws-cwl-runner``, ``mpiws workflow run
flow.cwl``), it packs the document and forks the endpoint's jobs, with
cwltool imported and its schemas loaded once. A run without it pays both
(about a second here); a run with it, neither.

Rules:

- Started by a run that finds none, in a session of its own (that run goes
  on without it, forking its jobs from itself: ``cwl_runner.fork_here``);
  it ends after ``MPIWS_CWL_WARM_IDLE`` seconds (600) without a run, or
  when its socket is removed. ``MPIWS_CWL_WARM=0`` turns it off.
- Reached by its own user only: its socket is in a private directory (the
  user's own, mode 0700, not a link) and each peer's credentials are
  checked (``SO_PEERCRED``): the same user, who may read the documents it
  packs and run the tools it forks.
- Its socket is named by the interpreter, mpiws's and cwltool's versions
  and its own code's files: an upgraded installation starts a runner of its
  own.
- Each connection is served by a fork of it, which answers one request
  (4-byte length, JSON): ``{"pack": PATH}``, answered with the packed
  document as the endpoint takes it (``whole.document``, JSON text:
  ``{"ok": TEXT}``), or why not (``{"error": WHY}``, ``{"unsupported":
  WHY}``); or
  ``{"forks": {"env": ..., "umask": ...}}``, after which the connection is
  the wire of a fork server (``service/forks.py``) whose jobs run with the
  run's environment (``service/cwl_runner.py`` runs each).
"""

import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

from ...service import cwl_runner, forks

#: Idle seconds before the runner ends, unless ``MPIWS_CWL_WARM_IDLE`` says otherwise.
IDLE = 600.0
#: The most a request or an answer may hold.
MAX_MESSAGE = 256 << 20
LENGTH = struct.Struct("<I")
#: A runner this process started (it warms up meanwhile: not started twice).
_started = []


def enabled():
    return os.environ.get("MPIWS_CWL_WARM", "1") != "0" and cwl_runner.available()


def socket_path():
    """Where the runner listens: in a private directory of the user's (None if there is none to be had)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(os.path.expanduser("~"), ".cache")
    where = os.path.join(base, "mpiws")
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        st = os.lstat(where)
    except OSError:
        return None
    if not os.path.isdir(where) or os.path.islink(where) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    from importlib.metadata import version

    from ... import __version__

    mark = f"{sys.executable}|{__version__}|{version('cwltool')}|{_code()}".encode()
    return os.path.join(where, f"cwl-{hashlib.sha256(mark).hexdigest()[:16]}.sock")


def _code():
    """The runner's own code as it is on disk (each file's size and time): a changed one is another runner."""
    here = os.path.dirname(os.path.abspath(__file__))
    files = [os.path.join(here, n) for n in sorted(os.listdir(here)) if n.endswith(".py")]
    files += [os.path.abspath(m.__file__) for m in (cwl_runner, forks)]
    return ",".join(f"{st.st_size}:{st.st_mtime_ns}" for st in map(os.stat, files))


def _send(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(LENGTH.pack(len(data)) + data)


def _receive(sock):
    head = _exactly(sock, LENGTH.size)
    (n,) = LENGTH.unpack(head)
    if n > MAX_MESSAGE:
        raise ValueError(f"a message of {n} bytes (at most {MAX_MESSAGE})")
    return json.loads(_exactly(sock, n))


def _exactly(sock, n):
    data = bytearray(n)
    view, got = memoryview(data), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("the other side closed")
        got += k
    return bytes(data)


def _connect():
    """A connection to the runner; None if there is none (one is started for the next run)."""
    if not enabled():
        return None
    path = socket_path()
    if path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        return sock
    except OSError:
        sock.close()
    if _started:
        return None
    _started.append(path)
    subprocess.Popen(  # noqa: S603 - this interpreter, the runner's module (``whole``: it packs)
        [sys.executable, "-m", "mpiws.workflow.cwl.whole", path],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )
    return None


def pack(path):
    """The document at ``path`` packed by the runner: ("ok", its JSON text), ("error", why) or
    ("unsupported", why); None if there is no runner."""
    sock = _connect()
    if sock is None:
        return None
    with sock:
        try:
            file, hash_, process = path.partition("#")  # DOC.cwl#id: the file's path made absolute
            _send(sock, {"pack": os.path.abspath(file) + hash_ + process})
            answer = _receive(sock)
        except (OSError, ValueError):
            return None
    kind = next(iter(answer), None)
    return (kind, answer[kind]) if kind in ("ok", "error", "unsupported") else None


def fork_server():
    """A fork session of the runner for this run's endpoint: its wire's descriptor (``cwl_runner_wire``),
    its jobs in this process's environment; None if there is no runner."""
    sock = _connect()
    if sock is None:
        return None
    umask = os.umask(0)
    os.umask(umask)
    try:
        _send(sock, {"forks": {"env": dict(os.environ), "umask": umask}})
    except OSError:
        sock.close()
        return None
    return sock.detach()


def serve(path, packed):
    """The runner: warm, then each connection answered by a fork, until idle or its socket is gone.
    ``packed(path)`` answers a pack."""
    idle = float(os.environ.get("MPIWS_CWL_WARM_IDLE", IDLE))
    cwl_runner.warm()
    os.chdir("/")  # holds no directory of a run's
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
    except OSError:  # another runner's, or one that is gone
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            return  # another serves
        except OSError:
            os.unlink(path)
            listener.bind(path)
        finally:
            probe.close()
    os.chmod(path, 0o600)
    listener.listen(64)
    mine = os.stat(path).st_ino
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its forks reap themselves
    last = time.monotonic()
    while True:
        ready, _, _ = select.select([listener], [], [], 2.0)
        try:
            if os.stat(path).st_ino != mine:
                return
        except OSError:
            return  # its socket is gone: so is it
        if not ready:
            if time.monotonic() - last > idle:
                os.unlink(path)
                return
            continue
        conn, _ = listener.accept()
        last = time.monotonic()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            conn.close()
            continue
        sys.stdout.flush()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _answer(conn, packed)  # never returns
        conn.close()


def _answer(conn, packed):
    try:
        request = _receive(conn)
        if "pack" in request:
            _send(conn, packed(request["pack"]))
            os._exit(0)
        given = request["forks"]
        os.environ.clear()
        os.environ.update(given["env"])
        os.umask(given["umask"])
        cwl_runner.serve(conn)  # returns never: each job's child runs it and exits
    finally:
        os._exit(70)
