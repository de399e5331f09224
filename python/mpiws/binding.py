"""Which domain instance the calling code belongs to.

A rank process started by ``mpiws run`` has one instance for the whole
process; ``mpiws serve`` runs each instance on its own thread, so the thread's
binding wins. A plain ``python prog.py`` gets a singleton domain of one rank,
as ``mpi4py`` does without ``mpiexec``.

How ``MPI.Comm.Spawn`` starts processes is the launcher's too: it registers
it here (``set_spawner``), so that the MPI package never imports it.
"""

import threading
from contextlib import contextmanager

from . import _core


class Bound:
    """An instance with its two predefined communicators (created once, so
    communicators derived from them agree on their contexts), and how it
    unpickles what it receives (``loads``: None for full pickle), and the
    serializer its code chose (``MPI.pickle``: None until it does).

    A spawned process's ``world`` is its children's part of the instance's
    domain, and ``parent`` the intercommunicator to its parents (the
    ``MPI.Intercomm``, made once: ``Get_parent`` gives the same handle).
    ``settings``: what the program set on its COMM_WORLD and COMM_SELF, by
    ``world``/``self_comm`` (MPI/comm.py's; each instance's are its own)."""

    __slots__ = ("instance", "world", "self_comm", "loads", "serializer", "parent", "settings")

    def __init__(self, instance, loads=None, world=None, parent=None):
        self.instance = instance
        self.world = world or instance.world()
        self.self_comm = instance.self_comm()
        self.loads = loads
        self.serializer = None
        self.parent = parent
        self.settings = {}


class _Thread(threading.local):
    # A class default: a thread not bound finds None here, where a missing
    # attribute would raise (and catch) an AttributeError at every call.
    bound = None


_thread = _Thread()
_process = None
_singleton_lock = threading.Lock()
_endpoint = None
_spawner = None


def current():
    b = _thread.bound or _process
    return b if b is not None else _singleton()


def set_process(instance, endpoint=None, world=None, parent=None):
    """Bind the whole process to ``instance`` (a rank started by ``mpiws run``,
    or spawned), served by ``endpoint`` (where ``MPI.Comm.Spawn`` creates the
    process's instances of the domains it spawns)."""
    global _process, _endpoint
    _process = Bound(instance, world=world, parent=parent)
    _endpoint = endpoint
    return _process


def process_endpoint():
    """The endpoint serving this process's own instances: None in a process
    whose instances an ``mpiws serve`` endpoint runs on threads."""
    current()  # a plain ``python prog.py`` makes its singleton first
    return _endpoint


def set_spawner(children, new_domain, sides):
    """Install how ``MPI.Comm.Spawn`` starts processes (``mpiws.launch.spawn``
    does when imported; the ``mpiws`` package imports it): ``children(argv,
    n, flags)`` starts ``n`` of them and has their ``urls`` (``bind(instance,
    domain, token, endpoints, first_rank, nparents)`` then tells them their
    ranks); ``new_domain()`` gives a new domain's (id, token); ``sides(instance,
    nparents)`` the core communicators both sides derive alike (this side's
    intracommunicator, the intercommunicator, its local communicator)."""
    global _spawner
    _spawner = (children, new_domain, sides)


def spawner():
    """What ``set_spawner`` installed: (children, new_domain, sides), or None."""
    return _spawner


@contextmanager
def bound_to(instance, loads=None):
    """Bind the calling thread to ``instance`` for the duration of the block."""
    previous = _thread.bound
    _thread.bound = b = Bound(instance, loads)
    try:
        yield b
    finally:
        _thread.bound = previous


def _singleton():
    global _process, _endpoint
    with _singleton_lock:
        if _process is None:
            import secrets  # here: a singleton is rare, every rank imports this module

            _endpoint = _core.Endpoint()
            inst = _endpoint.create_instance(
                "singleton-" + secrets.token_hex(6), 0, [_endpoint.url], secrets.token_hex(16)
            )
            inst.set_running()
            _process = Bound(inst)
        return _process
