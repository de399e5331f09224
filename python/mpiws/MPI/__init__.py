"""Message Passing Interface over web services.

``from mpiws import MPI``: mpi4py's API over web service instances.

One file per MPI concept: ``comm`` (Comm, Intracomm), ``intercomm``
(Intercomm; its collectives in ``intercomm_collectives``), ``request`` (Request),
``info`` (Info), ``persistent`` (Prequest), ``status`` (Status), ``datatype`` (Datatype, buffer
specifications), ``exception`` (Exception, error classes), ``op`` (Op),
``group`` (Group), ``collectives`` (the collective calls of Comm);
``handle`` is the object model of handles (equality, null, free, pickling,
numbers), ``pickled`` how objects travel. mpiws's additions: ``events``
(Schedule, Receipt, the handler thread) and ``timeout`` (time limits).
"""

# Functions and constants only, not modules: mpi4py's MPI namespace holds no
# modules (see the end of this file).
from socket import gethostname as _gethostname
from time import get_clock_info as _get_clock_info, monotonic as _monotonic, time as _walltime

from .._core import PROC_NULL as _CORE_PROC_NULL, VERSION as _CORE_VERSION
from .comm import (
    COMM_NULL,
    COMM_SELF,
    COMM_TYPE_HW_GUIDED,
    COMM_TYPE_HW_UNGUIDED,
    COMM_TYPE_RESOURCE_GUIDED,
    COMM_TYPE_SHARED,
    COMM_WORLD,
    CONGRUENT,
    IDENT,
    SIMILAR,
    UNEQUAL,
    Comm,
    Intercomm,
    Intracomm,
)
from .collectives import IN_PLACE
from .datatype import *  # noqa: F401,F403  (BYTE, INT, DOUBLE, ...)
from .datatype import Datatype, _typedict
from .exception import *  # noqa: F401,F403  (ERR_RANK, ERR_TAG, ...)
from .exception import (
    Add_error_class,
    Add_error_code,
    Add_error_string,
    Exception,
    Get_error_class,
    Get_error_string,
    Remove_error_class,
    Remove_error_code,
    Remove_error_string,
)
from .attributes import APPNUM, HOST, IO, KEYVAL_INVALID, LASTUSEDCODE, UNIVERSE_SIZE, WTIME_IS_GLOBAL
from .events import COMPLETED, FAILED, MATCHED, SUBMITTED, TIMED_OUT, Receipt, Schedule
from .errhandler import ERRHANDLER_NULL, ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN, Errhandler
from .grequest import Grequest
from .group import GROUP_EMPTY, GROUP_NULL, Group
from .handle import addressof as _addressof, handleof as _handleof, sizeof as _sizeof
from .info import INFO_ENV, INFO_NULL, MAX_INFO_KEY, MAX_INFO_VAL, Info
from .op import *  # noqa: F401,F403  (SUM, MAX, ...)
from .memory import (
    BSEND_OVERHEAD,
    BUFFER_AUTOMATIC,
    Alloc_mem,
    Attach_buffer,
    Detach_buffer,
    Flush_buffer,
    Free_mem,
    Iflush_buffer,
    buffer,
    memory,
)
from .message import MESSAGE_NO_PROC, MESSAGE_NULL, Message
from .op import Op
from .persistent import Prequest
from .commctx import _comm_lock, _comm_lock_table, _commctx_inter, _commctx_intra
from .typestr import _typealign, _typecode
from .pickled import Pickle, pickle
from .request import REQUEST_NULL, Request
from .status import ANY_SOURCE, ANY_TAG, F_ERROR, F_SOURCE, F_STATUS_SIZE, F_TAG, UNDEFINED, Status
from .topology import (
    CART,
    DIST_GRAPH,
    GRAPH,
    UNWEIGHTED,
    WEIGHTS_EMPTY,
    Cartcomm,
    Compute_dims,
    Distgraphcomm,
    Graphcomm,
    Topocomm,
)
from .unsupported import (
    FILE_NULL,
    MODE_APPEND,
    MODE_CREATE,
    MODE_DELETE_ON_CLOSE,
    MODE_EXCL,
    MODE_RDONLY,
    MODE_RDWR,
    MODE_SEQUENTIAL,
    MODE_UNIQUE_OPEN,
    MODE_WRONLY,
    SESSION_NULL,
    File,
    Session,
)
from .win import (
    LOCK_EXCLUSIVE,
    LOCK_SHARED,
    MODE_NOCHECK,
    MODE_NOPRECEDE,
    MODE_NOPUT,
    MODE_NOSTORE,
    MODE_NOSUCCEED,
    WIN_BASE,
    WIN_CREATE_FLAVOR,
    WIN_DISP_UNIT,
    WIN_FLAVOR_ALLOCATE,
    WIN_FLAVOR_CREATE,
    WIN_FLAVOR_DYNAMIC,
    WIN_FLAVOR_SHARED,
    WIN_MODEL,
    WIN_NULL,
    WIN_SEPARATE,
    WIN_SIZE,
    WIN_UNIFIED,
    Win,
)

PROC_NULL = _CORE_PROC_NULL
ROOT = -3
from .attributes import TAG_UB  # the key; its value is _core.TAG_UB

BOTTOM = 0
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
VERSION, SUBVERSION = 4, 1

_T0 = _walltime() - _monotonic()
_finalized = False


def Wtime():
    """Wtime()

    Wall-clock time in seconds (monotonic, so differences are exact).
    """
    return _T0 + _monotonic()


def Wtick():
    """Wtick()

    Return the resolution of `Wtime`.
    """
    return _get_clock_info("monotonic").resolution


def Get_processor_name():
    """Get_processor_name()

    Obtain the name of the calling processor.
    """
    return _gethostname()


def Get_version():
    """Get_version()

    Obtain the version number of the MPI standard.
    """
    return (VERSION, SUBVERSION)


def Pcontrol(level):
    """Pcontrol(level)

    Profiling control: mpiws has no profiling layer to tell (accepted, as MPI allows).
    """
    if not isinstance(level, int):
        raise TypeError(f"level must be an int, got {type(level).__name__}")


def Get_hw_resource_info():
    """Get_hw_resource_info()

    What this process runs on: host name and CPU count, as an Info.
    """
    import os as _os

    return Info.Create(
        {
            "mpi_hw_resource_type": "mpi_shared_memory",
            "host": _gethostname(),
            "cpus": str(len(_os.sched_getaffinity(0)) if hasattr(_os, "sched_getaffinity") else _os.cpu_count()),
        }
    )


def Get_address(location):
    """Get_address(location)

    The address of a buffer's first byte (0 for None and BOTTOM).
    """
    if location is None or (isinstance(location, int) and location == BOTTOM):
        return 0
    import numpy as _np

    from .datatype import as_view

    view = as_view(location)
    return int(_np.frombuffer(view, dtype="B").ctypes.data) if view.nbytes else 0


def Aint_add(base, disp):
    """Aint_add(base, disp)

    Return the sum of base address and displacement.
    """
    return base + disp


def Aint_diff(addr1, addr2):
    """Aint_diff(addr1, addr2)

    Return the difference between absolute addresses.
    """
    return addr1 - addr2


#: What a buffered send needs beside its message in an attached buffer.
def Get_abi_version():
    """Get_abi_version()

    The MPI ABI this library implements: none (mpiws is not a C MPI library).
    """
    return (-1, -1)


def get_vendor():
    """get_vendor()

    Information about the underlying MPI implementation.

    Mpi4py's ``get_vendor``: this library's name and version.
    """
    return ("mpiws", tuple(int(x) for x in _CORE_VERSION.split(".")[:3]))


def Get_library_version():
    """Get_library_version()

    Obtain the version string of the MPI library.
    """
    return f"mpiws {_CORE_VERSION} (MPI-style message passing between web services)"


def Init():
    """Init()

    Initialize the MPI execution environment.
    """
    pass


def Init_thread(required=THREAD_MULTIPLE):
    """Init_thread(required=THREAD_MULTIPLE)

    Initialize the MPI execution environment.
    """
    return THREAD_MULTIPLE


def Query_thread():
    """Query_thread()

    Return the level of thread support provided by the MPI library.
    """
    return THREAD_MULTIPLE


def Is_initialized():
    """Is_initialized()

    Indicate whether `Init` has been called.
    """
    return True


def Is_finalized():
    """Is_finalized()

    Indicate whether `Finalize` has completed.
    """
    return _finalized


def Finalize():
    """Finalize()

    Wait until this rank's sends have left.
    """
    global _finalized
    Flush_buffer()
    _finalized = True


def Is_thread_main():
    """Is_thread_main()

    Indicate whether this thread called `Init` or `Init_thread`.
    """
    import threading

    return threading.current_thread() is threading.main_thread()


# mpi4py's ``MPI`` is one extension module with no submodules, and the typed
# stub (``__init__.pyi``) declares none: keep the implementation modules
# (``comm``, ``datatype``, ...) out of this namespace.  They stay importable
# through ``sys.modules`` (``from mpiws.MPI.comm import Comm``).  Import every
# submodule first, so that a lazy ``from .spawn import ...`` inside a function
# cannot re-add one as a package attribute later.
def _hide_submodules():
    import importlib
    import pkgutil
    import types

    for _info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{_info.name}")
    for _key, _value in list(globals().items()):
        if isinstance(_value, types.ModuleType) and _value.__name__.startswith(__name__ + "."):
            del globals()[_key]


_hide_submodules()
del _hide_submodules
