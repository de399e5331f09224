"""mpi4py's ``MPI._sizeof``, ``_addressof`` and ``_handleof``: an MPI object's
handle as a size, an address and a number, for handles (MPI/handle.py),
requests and statuses alike."""

from .handle import Handle
from .request import Request
from .status import Status


def _mpi_class(cls):
    """Whether ``cls`` is an MPI object's class: a handle kind, or a
    request or status (which are not on ``Handle``)."""
    return issubclass(cls, (Handle, Request, Status))


def sizeof(arg):
    """sizeof(arg)

    Size in bytes of the underlying MPI handle.

    ``MPI._sizeof``: the size of a handle (the same for an object and its
    type); a status's is MPICH's five ints.
    """
    cls = arg if isinstance(arg, type) else type(arg)
    if not _mpi_class(cls):
        raise TypeError(f"expected an MPI object or type, got {cls.__name__}")
    return 4 * 5 if issubclass(cls, Status) else 8


def addressof(obj):
    """addressof(obj)

    Memory address of the underlying MPI handle.

    ``MPI._addressof``: where the handle is (its object's identity here).
    """
    if not _mpi_class(type(obj)):
        raise TypeError(f"expected an MPI object, got {type(obj).__name__}")
    return id(obj)


def handleof(obj):
    """handleof(obj)

    Unsigned integer value with the underlying MPI handle.

    ``MPI._handleof``: the handle number (a status's: its address).
    """
    if not _mpi_class(type(obj)):
        raise TypeError(f"expected an MPI object, got {type(obj).__name__}")
    return obj.tohandle() if hasattr(obj, "tohandle") else id(obj)
