"""The fork server of an endpoint's instance processes: one interpreter per
endpoint, with the endpoint's services imported, that forks each instance's
process from itself (``mpiws_core::service::sandbox::forks`` is the other
half). A child is then ready in milliseconds, where an interpreter that
starts and imports takes hundreds on these cores.

The wire is one socket, inherited at descriptor 3:

- the server says ``W`` (9 bytes, like every message it sends) once its
  imports are done;
- a request is 8 bytes (the child's address-space bound, 0: none, u64 LE)
  with three descriptors: the child's stdin, its hand-over wire and its
  reports wire (``handover.rs``);
- the server answers ``P`` + the child's pid (0: not forked) + 0, and,
  when a child ends, ``X`` + its pid + its wait status (``<cii``).

Rules: a child is forked only while this process runs no Python thread
besides its own (native pools with fork handlers, as OpenBLAS's, are
allowed, as for multiprocessing's fork server); each child leads a process
group of its own; this process ends when the endpoint closed the wire and
its last child ended.
"""

import gc
import os
import resource
import select
import signal
import socket
import struct
import sys
import threading
import warnings

#: Where the fork server finds its wire (where a child finds its hand-over wire).
WIRE_FD = 3
#: Where a child finds its hand-over and reports wires (``handover::CHILD_FDS``).
CHILD_FDS = (3, 4)
#: What the endpoint sets to start a fork server rather than a child.
FORKS_ENV = "MPIWS_SANDBOX_FORKS"
REQUEST = struct.Struct("<Q")
MESSAGE = struct.Struct("<cii")


def serve():
    """Serve forks. Returns only in a child, its wire in place; the server
    itself exits when it has nothing left to do."""
    wire = socket.socket(fileno=WIRE_FD)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    # What the imports made is never collected here: a child's collections
    # then leave the pages it shares with this process unwritten (unshared).
    gc.freeze()
    # forking: the endpoint may still ask (its side of the wire open);
    # telling: it still hears (children's ends are told until it is gone).
    telling = _tell(wire, b"W", 0, 0)
    forking, children = telling, set()
    while forking or children:
        ready, _, _ = select.select([wire, wake_r] if forking else [wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 512)
            for pid, status in _reaped():
                children.discard(pid)
                telling = telling and _tell(wire, b"X", pid, status)
        if forking and wire in ready:
            request = _request(wire)
            if request is None:
                forking = False  # the endpoint closed its side: no more forks
                continue
            memory, fds = request
            pid = _fork() if threading.active_count() == 1 else 0
            if pid == -1:  # in the child: none of the server's descriptors, its own wire in place
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r)
                os.close(wake_w)
                wire.detach()  # descriptor 3: replaced by the child's hand-over wire
                _take_place(memory, fds)
                return
            for fd in fds:
                os.close(fd)
            if pid:
                children.add(pid)
            telling = _tell(wire, b"P", pid, 0)
            forking = telling
    os._exit(0)


def _tell(wire, kind, pid, status):
    """Send one message; False once the endpoint is gone."""
    try:
        wire.sendall(MESSAGE.pack(kind, pid, status))
        return True
    except OSError:
        return False


def _request(wire):
    """The next request (memory bound, three descriptors); None at the end of the wire."""
    try:
        data, fds, _, _ = socket.recv_fds(wire, REQUEST.size, 3)
        while data and len(data) < REQUEST.size:  # the rest of the bytes, never more descriptors
            more = wire.recv(REQUEST.size - len(data))
            if not more:
                break
            data += more
    except OSError:
        return None
    if len(data) < REQUEST.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    return REQUEST.unpack(data)[0], fds


def _reaped():
    """Children that ended, with their wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def _fork():
    """Fork a child: its pid here (0: not forked), -1 in the child."""
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: a native pool's thread
        try:
            pid = os.fork()
        except OSError:
            return 0
    if pid:
        try:
            os.setpgid(pid, pid)  # also here: the endpoint may signal the group at once
        except OSError:
            pass
        return pid
    return -1


def _take_place(memory, fds):
    """In a new child: its own process group, its wire where a child finds it, its bound."""
    try:
        os.setpgid(0, 0)
        stdin, handover, reports = fds
        os.dup2(stdin, 0)
        os.dup2(handover, CHILD_FDS[0])
        os.dup2(reports, CHILD_FDS[1])
        for fd in fds:
            os.close(fd)
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        _reseed()
    except BaseException:  # noqa: BLE001 - a child that cannot take its place ends; the endpoint says why
        os._exit(71)


def _reseed():
    """A child's random state its own: ``random`` reseeds itself after a
    fork, numpy's global generator does not (every child would draw the
    same numbers). Only if the server imported it: a child that imports it
    seeds it afresh (and importing it here would cost each child 25 ms)."""
    generator = sys.modules.get("numpy.random")
    if generator is not None:
        generator.seed()
