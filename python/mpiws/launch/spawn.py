"""``MPI.Comm.Spawn``'s mechanism: N new Python processes on this machine
that join the spawning ranks in a new domain.

The spawning ranks are the domain's first ranks (each creates its instance
on its own process's endpoint), the children the rest. Each child serves an
endpoint that accepts no client (its key is random and never leaves it):
nothing can start anything on it. It reports its URL through a pipe, reads
its binding (domain, token, every rank's URL, its rank) from a second one,
and creates its instance itself, as the spawning ranks do: no *run*
request, no key travels. A third pipe holds the child: when the spawning
process ends (or is killed), the child exits, so no orphan outlives it.
A child closes its URL pipe when its program has ended and what it sent is
delivered; it exits once all its fellow children have (and they stop
serving together: none leaves while another's last message to it may
still want its acknowledgement), or when the spawning process ends. A
child whose program failed exits at once, so that its peers' operations
with it fail (MPIX_ERR_PROC_FAILED) instead of waiting for it.

Both sides derive the same communicators from the domain's world without a
message (``sides``): each side's intracommunicator and the
intercommunicator between them, as MPI_Comm_spawn defines them.
"""

import atexit
import json
import os
import sys
import threading
import time

from .. import binding
from .pipes import STARTUP_SECONDS, forward, read_url

#: Salts of the communicators ``sides`` derives, in the order it derives them.
_SIDE, _INTER, _INTER_LOCAL = 0x5350, 0x5351, 0x5352

#: The children of this process, alive until it ends (their hold pipes).
_children = []

#: How long this process, ending, waits for its children to end by themselves
#: (as mpiexec waits for spawned processes) before it ends them.
GRACE_SECONDS = float(os.environ.get("MPIWS_SPAWN_GRACE", "60"))


@atexit.register
def end_children():
    """Wait (``GRACE_SECONDS`` at most) for this process's children to end
    their programs, then let them exit."""
    deadline = time.monotonic() + GRACE_SECONDS
    for children in list(_children):
        children.ended.wait(timeout=max(0.0, deadline - time.monotonic()))
        children.release()


def sides(instance, nparents):
    """(this side's intracommunicator, the intercommunicator to the other
    side, the intercommunicator's own local communicator) of a spawn
    domain whose first ``nparents`` ranks spawned the rest: core
    communicators every member derives alike, with no message."""
    world = instance.world()
    parents, children = list(range(nparents)), list(range(nparents, world.size))
    mine, theirs = (parents, children) if world.rank < nparents else (children, parents)
    contexts = [world.next_context(salt) for salt in (_SIDE, _INTER, _INTER_LOCAL)]
    return (
        world.derive(contexts[0], mine),
        world.derive_inter(contexts[1], mine, theirs),
        world.derive(contexts[2], mine),
    )


class Children:
    """``n`` child processes running ``argv`` (as ``python *flags argv``),
    started and reporting their URLs; ``bind`` hands them their domain."""

    def __init__(self, argv, n, flags=(), host=None):
        host = host or os.environ.get("MPIWS_HOST", "127.0.0.1")  # where this rank serves, its children too
        self.procs, self._binding_fds, holds = [], [], []
        url_fds = []
        try:
            for _ in range(n):
                url_r, url_w = os.pipe()
                hold_r, hold_w = os.pipe()
                bind_r, bind_w = os.pipe()
                child_env = dict(
                    os.environ,
                    MPIWS_URL_FD=str(url_w),
                    MPIWS_HOLD_FD=str(hold_r),
                    MPIWS_BINDING_FD=str(bind_r),
                    MPIWS_HOST=host,
                    PYTHONUNBUFFERED="1",
                )
                import subprocess

                p = subprocess.Popen(
                    [sys.executable, *flags, "-m", "mpiws.launch.child", *argv],
                    env=child_env,
                    pass_fds=(url_w, hold_r, bind_r),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                for fd in (url_w, hold_r, bind_r):
                    os.close(fd)
                self.procs.append(p)
                url_fds.append(url_r)
                holds.append(hold_w)
                self._binding_fds.append(bind_w)
                for stream, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                    threading.Thread(target=forward, args=(stream, out, b""), daemon=True).start()
            deadline = time.monotonic() + STARTUP_SECONDS
            self.urls = [read_url(os.dup(fd), p, deadline) for fd, p in zip(url_fds, self.procs)]
        except BaseException:
            for fd in holds + self._binding_fds + url_fds:
                os.close(fd)
            for p in self.procs:
                p.kill()
            raise
        self._holds = holds
        self._releasing = threading.Lock()
        self.instance = None  # the spawning rank's instance in the children's domain, once made
        self.ended = threading.Event()
        threading.Thread(target=self._watch, args=(url_fds,), daemon=True).start()
        _children.append(self)

    def _watch(self, fds):
        """Release the children once every one has ended its program and
        what this rank sent them is acknowledged (a child gone cannot)."""
        for fd in fds:
            while os.read(fd, 4096):
                pass
            os.close(fd)
        try:
            if self.instance is not None:
                self.instance.flush(GRACE_SECONDS)
        except Exception:  # noqa: BLE001 - a child that failed: its sends fail and are reported there
            pass
        self.ended.set()
        self.release()

    def release(self):
        """Let the children exit (at once if their programs ended)."""
        import subprocess  # loaded already: the children were started with it

        with self._releasing:  # the watcher and the exit can both release
            holds, self._holds = self._holds, []
        for fd in holds:
            os.close(fd)
        for p in self.procs:
            try:
                p.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                p.kill()
        if self in _children:
            _children.remove(self)

    def bind(self, instance, domain, token, endpoints, first_rank, nparents):
        """Tell each child its rank in ``domain`` (ranks from ``first_rank``);
        ``instance`` is this rank's in it."""
        self.instance = instance
        for i, fd in enumerate(self._binding_fds):
            told = {
                "domain": domain,
                "token": token,
                "endpoints": endpoints,
                "rank": first_rank + i,
                "parents": nparents,
            }
            try:
                os.write(fd, json.dumps(told).encode())
            finally:
                os.close(fd)


def new_domain():
    """A new spawn domain's id and token."""
    import secrets  # here (and subprocess below): Spawn is rare, every rank imports this module

    return "spawn-" + secrets.token_hex(8), secrets.token_urlsafe(24)


# MPI's Spawn starts its children here (MPI/spawn.py asks the binding; it never imports this).
binding.set_spawner(Children, new_domain, sides)
