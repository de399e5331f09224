"""Message Passing Interface over web services.

``from mpiws import MPI``: mpi4py's API over web service instances.

One file per MPI concept: ``comm`` (Comm, Intracomm), ``intercomm``
(Intercomm; its collectives in ``intercomm_collectives``), ``request`` (Request),
``info`` (Info), ``persistent`` (Prequest), ``status`` (Status), ``datatype`` (Datatype, buffer
specifications), ``exception`` (Exception, error classes), ``op`` (Op),
``group`` (Group), ``collectives`` (the collective calls of Comm);
``handle`` is the object model of handles (equality, null, free, pickling,
numbers, names), ``pickled`` how objects travel, ``received`` what a received
message becomes. mpiws's additions: ``events`` (Schedule, Receipt, the
handler thread and the fate of each watched operation) and ``timeout`` (time
limits). Concept files import these mechanisms, never the other way round.
"""

# Functions and constants only, not modules: mpi4py's MPI namespace holds no
# modules (see the end of this file).
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
    Intracomm,
)
from .collectives import IN_PLACE
from .datatype import (
    COMBINER_NAMED,
    COMBINER_DUP,
    COMBINER_CONTIGUOUS,
    COMBINER_VECTOR,
    COMBINER_HVECTOR,
    COMBINER_INDEXED,
    COMBINER_HINDEXED,
    COMBINER_INDEXED_BLOCK,
    COMBINER_STRUCT,
    COMBINER_SUBARRAY,
    COMBINER_DARRAY,
    COMBINER_F90_REAL,
    COMBINER_F90_COMPLEX,
    COMBINER_F90_INTEGER,
    COMBINER_RESIZED,
    COMBINER_HINDEXED_BLOCK,
    COMBINER_VALUE_INDEX,
    ORDER_C,
    ORDER_FORTRAN,
    ORDER_F,
    DISTRIBUTE_BLOCK,
    DISTRIBUTE_CYCLIC,
    DISTRIBUTE_NONE,
    DISTRIBUTE_DFLT_DARG,
    TYPECLASS_REAL,
    TYPECLASS_INTEGER,
    TYPECLASS_COMPLEX,
    TYPECLASS_LOGICAL,
    DATATYPE_NULL,
    BYTE,
    PACKED,
    CHAR,
    WCHAR,
    SIGNED_CHAR,
    UNSIGNED_CHAR,
    SHORT,
    SIGNED_SHORT,
    UNSIGNED_SHORT,
    INT,
    SIGNED_INT,
    UNSIGNED,
    UNSIGNED_INT,
    LONG,
    SIGNED_LONG,
    UNSIGNED_LONG,
    LONG_LONG,
    SIGNED_LONG_LONG,
    UNSIGNED_LONG_LONG,
    FLOAT,
    FLOAT32_T,
    DOUBLE,
    FLOAT64_T,
    LONG_DOUBLE,
    C_BOOL,
    BOOL,
    INT8_T,
    SINT8_T,
    INT16_T,
    SINT16_T,
    INT32_T,
    SINT32_T,
    INT64_T,
    SINT64_T,
    UINT8_T,
    UINT16_T,
    UINT32_T,
    UINT64_T,
    FLOAT16_T,
    C_FLOAT_COMPLEX,
    C_COMPLEX,
    C_DOUBLE_COMPLEX,
    C_LONG_DOUBLE_COMPLEX,
    CXX_BOOL,
    CXX_FLOAT_COMPLEX,
    CXX_DOUBLE_COMPLEX,
    CXX_LONG_DOUBLE_COMPLEX,
    AINT,
    OFFSET,
    COUNT,
    FLOAT_INT,
    DOUBLE_INT,
    LONG_INT,
    TWOINT,
    INT_INT,
    SHORT_INT,
    LONG_DOUBLE_INT,
    CHARACTER,
    LOGICAL,
    F_BOOL,
    INTEGER,
    F_INT,
    REAL,
    F_FLOAT,
    DOUBLE_PRECISION,
    F_DOUBLE,
    COMPLEX,
    F_COMPLEX,
    F_FLOAT_COMPLEX,
    DOUBLE_COMPLEX,
    F_DOUBLE_COMPLEX,
    INTEGER1,
    INTEGER2,
    INTEGER4,
    INTEGER8,
    REAL4,
    REAL8,
    REAL16,
    COMPLEX8,
    COMPLEX16,
    COMPLEX32,
    BFLOAT16_T,
    COMPLEX4,
    INTEGER16,
    REAL2,
    LOGICAL1,
    LOGICAL2,
    LOGICAL4,
    LOGICAL8,
    LOGICAL16,
    Datatype,
    _typedict as _typedict,
)
from .exception import (
    SUCCESS,
    ERR_BUFFER,
    ERR_COUNT,
    ERR_TYPE,
    ERR_TAG,
    ERR_COMM,
    ERR_RANK,
    ERR_ROOT,
    ERR_GROUP,
    ERR_OP,
    ERR_TOPOLOGY,
    ERR_DIMS,
    ERR_ARG,
    ERR_UNKNOWN,
    ERR_TRUNCATE,
    ERR_OTHER,
    ERR_INTERN,
    ERR_IN_STATUS,
    ERR_PENDING,
    ERR_REQUEST,
    ERR_ACCESS,
    ERR_AMODE,
    ERR_BAD_FILE,
    ERR_CONVERSION,
    ERR_DUP_DATAREP,
    ERR_FILE_EXISTS,
    ERR_FILE_IN_USE,
    ERR_FILE,
    ERR_INFO,
    ERR_INFO_KEY,
    ERR_INFO_VALUE,
    ERR_INFO_NOKEY,
    ERR_IO,
    ERR_NAME,
    ERR_NO_MEM,
    ERR_NOT_SAME,
    ERR_NO_SPACE,
    ERR_NO_SUCH_FILE,
    ERR_PORT,
    ERR_QUOTA,
    ERR_READ_ONLY,
    ERR_SERVICE,
    ERR_SPAWN,
    ERR_UNSUPPORTED_DATAREP,
    ERR_UNSUPPORTED_OPERATION,
    ERR_WIN,
    ERR_BASE,
    ERR_LOCKTYPE,
    ERR_KEYVAL,
    ERR_RMA_CONFLICT,
    ERR_RMA_SYNC,
    ERR_SIZE,
    ERR_DISP,
    ERR_ASSERT,
    ERR_RMA_RANGE,
    ERR_RMA_ATTACH,
    ERR_RMA_SHARED,
    ERR_RMA_FLAVOR,
    ERR_SESSION,
    ERR_PROC_ABORTED,
    ERR_VALUE_TOO_LARGE,
    ERR_ERRHANDLER,
    ERR_PROC_FAILED,
    ERR_TIMEOUT,
    ERR_CANCELLED,
    ERR_LASTCODE,
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
from .attributes import APPNUM, HOST, IO, KEYVAL_INVALID, LASTUSEDCODE, TAG_UB, UNIVERSE_SIZE, WTIME_IS_GLOBAL
from .events import COMPLETED, FAILED, MATCHED, SUBMITTED, TIMED_OUT, Receipt, Schedule
from .errhandler import ERRHANDLER_NULL, ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN, Errhandler
from .grequest import Grequest
from .group import GROUP_EMPTY, GROUP_NULL, Group
from .intercomm import Intercomm
from .info import INFO_ENV, INFO_NULL, MAX_INFO_KEY, MAX_INFO_VAL, Info
from .objmodel import addressof as _addressof, handleof as _handleof, sizeof as _sizeof  # noqa: F401  (mpi4py's private names)
from .op import (
    Op,
    OP_NULL,
    SUM,
    PROD,
    MAX,
    MIN,
    LAND,
    LOR,
    LXOR,
    BAND,
    BOR,
    BXOR,
    MAXLOC,
    MINLOC,
    REPLACE,
    NO_OP,
)
from .buffered import BSEND_OVERHEAD, BUFFER_AUTOMATIC, Attach_buffer, Detach_buffer, Flush_buffer, Iflush_buffer
from .memory import Alloc_mem, Free_mem, buffer, memory
from .message import MESSAGE_NO_PROC, MESSAGE_NULL, Message
from .persistent import Prequest
from .commctx import (
    _comm_lock as _comm_lock,
    _comm_lock_table as _comm_lock_table,
    _commctx_inter as _commctx_inter,
    _commctx_intra as _commctx_intra,
)
from .typestr import _typealign as _typealign, _typecode as _typecode
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

# What ``from mpiws.MPI import *`` gives: every public name of this namespace,
# which are the stub's (tests/test_stub.py checks both), grouped by the module
# each comes from. mpi4py's private helpers (``_typedict``, ``_comm_lock``, ...)
# stay out, as ``import *`` leaves them out.
__all__ = [
    # .comm
    "COMM_NULL",
    "COMM_SELF",
    "COMM_TYPE_HW_GUIDED",
    "COMM_TYPE_HW_UNGUIDED",
    "COMM_TYPE_RESOURCE_GUIDED",
    "COMM_TYPE_SHARED",
    "COMM_WORLD",
    "CONGRUENT",
    "IDENT",
    "SIMILAR",
    "UNEQUAL",
    "Comm",
    "Intracomm",
    # .intercomm
    "Intercomm",
    # .collectives
    "IN_PLACE",
    # .datatype
    "COMBINER_NAMED",
    "COMBINER_DUP",
    "COMBINER_CONTIGUOUS",
    "COMBINER_VECTOR",
    "COMBINER_HVECTOR",
    "COMBINER_INDEXED",
    "COMBINER_HINDEXED",
    "COMBINER_INDEXED_BLOCK",
    "COMBINER_STRUCT",
    "COMBINER_SUBARRAY",
    "COMBINER_DARRAY",
    "COMBINER_F90_REAL",
    "COMBINER_F90_COMPLEX",
    "COMBINER_F90_INTEGER",
    "COMBINER_RESIZED",
    "COMBINER_HINDEXED_BLOCK",
    "COMBINER_VALUE_INDEX",
    "ORDER_C",
    "ORDER_FORTRAN",
    "ORDER_F",
    "DISTRIBUTE_BLOCK",
    "DISTRIBUTE_CYCLIC",
    "DISTRIBUTE_NONE",
    "DISTRIBUTE_DFLT_DARG",
    "TYPECLASS_REAL",
    "TYPECLASS_INTEGER",
    "TYPECLASS_COMPLEX",
    "TYPECLASS_LOGICAL",
    "DATATYPE_NULL",
    "BYTE",
    "PACKED",
    "CHAR",
    "WCHAR",
    "SIGNED_CHAR",
    "UNSIGNED_CHAR",
    "SHORT",
    "SIGNED_SHORT",
    "UNSIGNED_SHORT",
    "INT",
    "SIGNED_INT",
    "UNSIGNED",
    "UNSIGNED_INT",
    "LONG",
    "SIGNED_LONG",
    "UNSIGNED_LONG",
    "LONG_LONG",
    "SIGNED_LONG_LONG",
    "UNSIGNED_LONG_LONG",
    "FLOAT",
    "FLOAT32_T",
    "DOUBLE",
    "FLOAT64_T",
    "LONG_DOUBLE",
    "C_BOOL",
    "BOOL",
    "INT8_T",
    "SINT8_T",
    "INT16_T",
    "SINT16_T",
    "INT32_T",
    "SINT32_T",
    "INT64_T",
    "SINT64_T",
    "UINT8_T",
    "UINT16_T",
    "UINT32_T",
    "UINT64_T",
    "FLOAT16_T",
    "C_FLOAT_COMPLEX",
    "C_COMPLEX",
    "C_DOUBLE_COMPLEX",
    "C_LONG_DOUBLE_COMPLEX",
    "CXX_BOOL",
    "CXX_FLOAT_COMPLEX",
    "CXX_DOUBLE_COMPLEX",
    "CXX_LONG_DOUBLE_COMPLEX",
    "AINT",
    "OFFSET",
    "COUNT",
    "FLOAT_INT",
    "DOUBLE_INT",
    "LONG_INT",
    "TWOINT",
    "INT_INT",
    "SHORT_INT",
    "LONG_DOUBLE_INT",
    "CHARACTER",
    "LOGICAL",
    "F_BOOL",
    "INTEGER",
    "F_INT",
    "REAL",
    "F_FLOAT",
    "DOUBLE_PRECISION",
    "F_DOUBLE",
    "COMPLEX",
    "F_COMPLEX",
    "F_FLOAT_COMPLEX",
    "DOUBLE_COMPLEX",
    "F_DOUBLE_COMPLEX",
    "INTEGER1",
    "INTEGER2",
    "INTEGER4",
    "INTEGER8",
    "REAL4",
    "REAL8",
    "REAL16",
    "COMPLEX8",
    "COMPLEX16",
    "COMPLEX32",
    "BFLOAT16_T",
    "COMPLEX4",
    "INTEGER16",
    "REAL2",
    "LOGICAL1",
    "LOGICAL2",
    "LOGICAL4",
    "LOGICAL8",
    "LOGICAL16",
    "Datatype",
    # .exception
    "SUCCESS",
    "ERR_BUFFER",
    "ERR_COUNT",
    "ERR_TYPE",
    "ERR_TAG",
    "ERR_COMM",
    "ERR_RANK",
    "ERR_ROOT",
    "ERR_GROUP",
    "ERR_OP",
    "ERR_TOPOLOGY",
    "ERR_DIMS",
    "ERR_ARG",
    "ERR_UNKNOWN",
    "ERR_TRUNCATE",
    "ERR_OTHER",
    "ERR_INTERN",
    "ERR_IN_STATUS",
    "ERR_PENDING",
    "ERR_REQUEST",
    "ERR_ACCESS",
    "ERR_AMODE",
    "ERR_BAD_FILE",
    "ERR_CONVERSION",
    "ERR_DUP_DATAREP",
    "ERR_FILE_EXISTS",
    "ERR_FILE_IN_USE",
    "ERR_FILE",
    "ERR_INFO",
    "ERR_INFO_KEY",
    "ERR_INFO_VALUE",
    "ERR_INFO_NOKEY",
    "ERR_IO",
    "ERR_NAME",
    "ERR_NO_MEM",
    "ERR_NOT_SAME",
    "ERR_NO_SPACE",
    "ERR_NO_SUCH_FILE",
    "ERR_PORT",
    "ERR_QUOTA",
    "ERR_READ_ONLY",
    "ERR_SERVICE",
    "ERR_SPAWN",
    "ERR_UNSUPPORTED_DATAREP",
    "ERR_UNSUPPORTED_OPERATION",
    "ERR_WIN",
    "ERR_BASE",
    "ERR_LOCKTYPE",
    "ERR_KEYVAL",
    "ERR_RMA_CONFLICT",
    "ERR_RMA_SYNC",
    "ERR_SIZE",
    "ERR_DISP",
    "ERR_ASSERT",
    "ERR_RMA_RANGE",
    "ERR_RMA_ATTACH",
    "ERR_RMA_SHARED",
    "ERR_RMA_FLAVOR",
    "ERR_SESSION",
    "ERR_PROC_ABORTED",
    "ERR_VALUE_TOO_LARGE",
    "ERR_ERRHANDLER",
    "ERR_PROC_FAILED",
    "ERR_TIMEOUT",
    "ERR_CANCELLED",
    "ERR_LASTCODE",
    "Add_error_class",
    "Add_error_code",
    "Add_error_string",
    "Exception",
    "Get_error_class",
    "Get_error_string",
    "Remove_error_class",
    "Remove_error_code",
    "Remove_error_string",
    # .attributes
    "APPNUM",
    "HOST",
    "IO",
    "KEYVAL_INVALID",
    "LASTUSEDCODE",
    "TAG_UB",
    "UNIVERSE_SIZE",
    "WTIME_IS_GLOBAL",
    # .events
    "COMPLETED",
    "FAILED",
    "MATCHED",
    "SUBMITTED",
    "TIMED_OUT",
    "Receipt",
    "Schedule",
    # .errhandler
    "ERRHANDLER_NULL",
    "ERRORS_ABORT",
    "ERRORS_ARE_FATAL",
    "ERRORS_RETURN",
    "Errhandler",
    # .grequest
    "Grequest",
    # .group
    "GROUP_EMPTY",
    "GROUP_NULL",
    "Group",
    # .info
    "INFO_ENV",
    "INFO_NULL",
    "MAX_INFO_KEY",
    "MAX_INFO_VAL",
    "Info",
    # .op
    "Op",
    "OP_NULL",
    "SUM",
    "PROD",
    "MAX",
    "MIN",
    "LAND",
    "LOR",
    "LXOR",
    "BAND",
    "BOR",
    "BXOR",
    "MAXLOC",
    "MINLOC",
    "REPLACE",
    "NO_OP",
    # .buffered
    "BSEND_OVERHEAD",
    "BUFFER_AUTOMATIC",
    "Attach_buffer",
    "Detach_buffer",
    "Flush_buffer",
    "Iflush_buffer",
    # .memory
    "Alloc_mem",
    "Free_mem",
    "buffer",
    "memory",
    # .message
    "MESSAGE_NO_PROC",
    "MESSAGE_NULL",
    "Message",
    # .persistent
    "Prequest",
    # .pickled
    "Pickle",
    "pickle",
    # .request
    "REQUEST_NULL",
    "Request",
    # .status
    "ANY_SOURCE",
    "ANY_TAG",
    "F_ERROR",
    "F_SOURCE",
    "F_STATUS_SIZE",
    "F_TAG",
    "UNDEFINED",
    "Status",
    # .topology
    "CART",
    "DIST_GRAPH",
    "GRAPH",
    "UNWEIGHTED",
    "WEIGHTS_EMPTY",
    "Cartcomm",
    "Compute_dims",
    "Distgraphcomm",
    "Graphcomm",
    "Topocomm",
    # .unsupported
    "FILE_NULL",
    "MODE_APPEND",
    "MODE_CREATE",
    "MODE_DELETE_ON_CLOSE",
    "MODE_EXCL",
    "MODE_RDONLY",
    "MODE_RDWR",
    "MODE_SEQUENTIAL",
    "MODE_UNIQUE_OPEN",
    "MODE_WRONLY",
    "SESSION_NULL",
    "File",
    "Session",
    # .win
    "LOCK_EXCLUSIVE",
    "LOCK_SHARED",
    "MODE_NOCHECK",
    "MODE_NOPRECEDE",
    "MODE_NOPUT",
    "MODE_NOSTORE",
    "MODE_NOSUCCEED",
    "WIN_BASE",
    "WIN_CREATE_FLAVOR",
    "WIN_DISP_UNIT",
    "WIN_FLAVOR_ALLOCATE",
    "WIN_FLAVOR_CREATE",
    "WIN_FLAVOR_DYNAMIC",
    "WIN_FLAVOR_SHARED",
    "WIN_MODEL",
    "WIN_NULL",
    "WIN_SEPARATE",
    "WIN_SIZE",
    "WIN_UNIFIED",
    "Win",
    # defined below
    "PROC_NULL",
    "ROOT",
    "BOTTOM",
    "THREAD_SINGLE",
    "THREAD_FUNNELED",
    "THREAD_SERIALIZED",
    "THREAD_MULTIPLE",
    "VERSION",
    "SUBVERSION",
    "Wtime",
    "Wtick",
    "Get_processor_name",
    "Get_version",
    "Pcontrol",
    "Get_hw_resource_info",
    "Get_address",
    "Aint_add",
    "Aint_diff",
    "Get_abi_version",
    "get_vendor",
    "Get_library_version",
    "Init",
    "Init_thread",
    "Query_thread",
    "Is_initialized",
    "Is_finalized",
    "Finalize",
    "Is_thread_main",
]

PROC_NULL = _CORE_PROC_NULL
ROOT = -3

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


def _hostname():
    import os  # here, not in this namespace, which holds no module (as mpi4py's)

    return os.uname().nodename


def Get_processor_name():
    """Get_processor_name()

    Obtain the name of the calling processor.
    """
    return _hostname()


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
            "host": _hostname(),
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
# (Listed from the directory: pkgutil's listing imports inspect and typing,
# a tenth of every rank's start.)
def _hide_submodules():
    import importlib
    import os
    import types

    for _file in sorted(os.listdir(__path__[0])):
        if _file.endswith(".py") and _file != "__init__.py":
            importlib.import_module(f"{__name__}.{_file[:-3]}")
    for _key, _value in list(globals().items()):
        if isinstance(_value, types.ModuleType) and _value.__name__.startswith(__name__ + "."):
            del globals()[_key]


_hide_submodules()
del _hide_submodules
