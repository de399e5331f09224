"""Which domain instance the calling code belongs to.

A rank process started by ``mpiws run`` has one instance for the whole
process; ``mpiws serve`` runs each instance on its own thread, so the thread's
binding wins. A plain ``python prog.py`` gets a singleton domain of one rank,
as ``mpi4py`` does without ``mpiexec``.
"""

import secrets
import threading
from contextlib import contextmanager

from . import _core


class Bound:
    """An instance with its two predefined communicators (created once, so
    communicators derived from them agree on their contexts), and how it
    unpickles what it receives (``loads``: None for full pickle), and the
    serializer its code chose (``MPI.pickle``: None until it does)."""

    __slots__ = ("instance", "world", "self_comm", "loads", "serializer")

    def __init__(self, instance, loads=None):
        self.instance = instance
        self.world = instance.world()
        self.self_comm = instance.self_comm()
        self.loads = loads
        self.serializer = None


_thread = threading.local()
_process = None
_singleton_lock = threading.Lock()
_singleton_endpoint = None


def current():
    b = getattr(_thread, "bound", None) or _process
    return b if b is not None else _singleton()


def set_process(instance):
    """Bind the whole process to ``instance`` (a rank started by ``mpiws run``)."""
    global _process
    _process = Bound(instance)
    return _process


@contextmanager
def bound_to(instance, loads=None):
    """Bind the calling thread to ``instance`` for the duration of the block."""
    previous = getattr(_thread, "bound", None)
    _thread.bound = b = Bound(instance, loads)
    try:
        yield b
    finally:
        _thread.bound = previous


def _singleton():
    global _process, _singleton_endpoint
    with _singleton_lock:
        if _process is None:
            _singleton_endpoint = _core.Endpoint()
            inst = _singleton_endpoint.create_instance(
                "singleton-" + secrets.token_hex(6), 0, [_singleton_endpoint.url], secrets.token_hex(16)
            )
            inst.set_running()
            _process = Bound(inst)
        return _process
