"""``MPI.Exception`` and MPI's error classes (valued as in MPICH)."""

import operator

from .. import _core

SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_ROOT = 7
ERR_GROUP = 8
ERR_OP = 9
ERR_TOPOLOGY = 10
ERR_DIMS = 11
ERR_ARG = 12
ERR_UNKNOWN = 13
ERR_TRUNCATE = 14
ERR_OTHER = 15
ERR_INTERN = 16
ERR_IN_STATUS = 17
ERR_PENDING = 18
ERR_REQUEST = 19
ERR_ACCESS = 20
ERR_AMODE = 21
ERR_BAD_FILE = 22
ERR_CONVERSION = 23
ERR_DUP_DATAREP = 24
ERR_FILE_EXISTS = 25
ERR_FILE_IN_USE = 26
ERR_FILE = 27
ERR_INFO = 28
ERR_INFO_KEY = 29
ERR_INFO_VALUE = 30
ERR_INFO_NOKEY = 31
ERR_IO = 32
ERR_NAME = 33
ERR_NO_MEM = 34
ERR_NOT_SAME = 35
ERR_NO_SPACE = 36
ERR_NO_SUCH_FILE = 37
ERR_PORT = 38
ERR_QUOTA = 39
ERR_READ_ONLY = 40
ERR_SERVICE = 41
ERR_SPAWN = 42
ERR_UNSUPPORTED_DATAREP = 43
ERR_UNSUPPORTED_OPERATION = 44
ERR_WIN = 45
ERR_BASE = 46
ERR_LOCKTYPE = 47
ERR_KEYVAL = 48
ERR_RMA_CONFLICT = 49
ERR_RMA_SYNC = 50
ERR_SIZE = 51
ERR_DISP = 52
ERR_ASSERT = 53
ERR_RMA_RANGE = 55
ERR_RMA_ATTACH = 56
ERR_RMA_SHARED = 57
ERR_RMA_FLAVOR = 58
ERR_SESSION = 75
ERR_PROC_ABORTED = 76
ERR_VALUE_TOO_LARGE = 77
ERR_ERRHANDLER = 80
ERR_PROC_FAILED = 101
#: mpiws: an operation did not complete within its time limit.
ERR_TIMEOUT = 200
#: mpiws: the instance was cancelled through the service interface.
ERR_CANCELLED = 201
ERR_LASTCODE = 0x3FFFFFFF

_NAMES = {v: k for k, v in globals().items() if k.startswith("ERR_") or k == "SUCCESS"}
_PREFIXED = {
    "ERR_PROC_FAILED": "MPIX_ERR_PROC_FAILED",
    "ERR_TIMEOUT": "MPIWS_ERR_TIMEOUT",
    "ERR_CANCELLED": "MPIWS_ERR_CANCELLED",
}


def _name(code):
    n = _NAMES.get(code)
    return str(code) if n is None else _PREFIXED.get(n, "MPI_" + n)


_TEXT = {
    SUCCESS: "no error",
    ERR_BUFFER: "invalid buffer pointer",
    ERR_COUNT: "invalid count argument",
    ERR_TYPE: "invalid datatype",
    ERR_TAG: "invalid tag",
    ERR_COMM: "invalid communicator",
    ERR_RANK: "invalid rank",
    ERR_ROOT: "invalid root",
    ERR_GROUP: "invalid group",
    ERR_OP: "invalid reduce operation",
    ERR_ARG: "invalid argument",
    ERR_TRUNCATE: "message truncated",
    ERR_OTHER: "other error",
    ERR_INTERN: "internal error",
    ERR_REQUEST: "invalid request",
    ERR_PROC_FAILED: "process failed",
    ERR_TIMEOUT: "operation timed out",
    ERR_CANCELLED: "instance cancelled",
}


class Exception(RuntimeError):  # noqa: A001 - mirrors mpi4py's MPI.Exception
    """An MPI error: ``Get_error_class()`` tells which."""

    def __init__(self, ierr=SUCCESS, message=None):
        self.ierr = int(ierr) if int(ierr) >= SUCCESS else ERR_UNKNOWN
        self.message = message
        super().__init__(self.ierr, message)

    @property
    def error_class(self):
        return Get_error_class(self.ierr)

    @property
    def error_code(self):
        return self.ierr

    @property
    def error_string(self):
        return self.Get_error_string()

    def Get_error_class(self):
        """Get_error_class(self)

        Error class.
        """
        return Get_error_class(self.ierr)

    def Get_error_code(self):
        """Get_error_code(self)

        Error code.
        """
        return self.ierr

    def Get_error_string(self):
        """Get_error_string(self)

        Error string.
        """
        if self.ierr in _added_text:
            return _added_text[self.ierr]
        text = _TEXT.get(self.ierr, "unknown error")
        name = _name(self.ierr)
        return f"{name}: {self.message}" if self.message else f"{name}: {text}"

    def __int__(self):
        return self.ierr

    def __bool__(self):
        return self.ierr != SUCCESS

    def _cmp(self, other, op):
        if isinstance(other, Exception):
            return op(self.ierr, other.ierr)
        if isinstance(other, int):
            return op(self.ierr, other)
        return NotImplemented

    def __eq__(self, other):
        return self._cmp(other, operator.eq)

    def __ne__(self, other):
        return self._cmp(other, operator.ne)

    def __lt__(self, other):
        return self._cmp(other, operator.lt)

    def __le__(self, other):
        return self._cmp(other, operator.le)

    def __gt__(self, other):
        return self._cmp(other, operator.gt)

    def __ge__(self, other):
        return self._cmp(other, operator.ge)

    def __hash__(self):
        return hash(self.ierr)

    def __str__(self):
        return self.Get_error_string()

    def __repr__(self):
        if self.message is None:
            return f"MPI.Exception({self.ierr})"
        return f"MPI.Exception({self.ierr}, {self.message!r})"


# ---- error classes and codes a program adds (MPI_Add_error_class & co.) ----

#: Each added code's class (an added class is its own), and its text.
_added_class = {}
_added_text = {}
_last_used = [ERR_LASTCODE]


def last_used_code():
    """The last error class or code added (``LASTUSEDCODE``)."""
    return _last_used[0]


def _added(errorcode):
    if errorcode not in _added_class:
        raise Exception(ERR_ARG, f"{errorcode} is no error code or class added by Add_error_class/Add_error_code")


def Add_error_class():
    """Add_error_class()

    Add an *error class* to the known error classes.
    """
    _last_used[0] += 1
    _added_class[_last_used[0]] = _last_used[0]
    _added_text[_last_used[0]] = ""
    return _last_used[0]


def Add_error_code(errorclass):
    """Add_error_code(errorclass)

    Add an *error code* to an *error class*.
    """
    if errorclass not in _NAMES and _added_class.get(errorclass) != errorclass:
        raise Exception(ERR_ARG, f"{errorclass} is no error class")
    _last_used[0] += 1
    _added_class[_last_used[0]] = errorclass
    _added_text[_last_used[0]] = ""
    return _last_used[0]


def Add_error_string(errorcode, string):
    """Add_error_string(errorcode, string)

    Associate an *error string* with an *error class* or *error code*.
    """
    _added(errorcode)
    _added_text[errorcode] = str(string)


def Remove_error_string(errorcode):
    """Remove_error_string(errorcode)

    Remove *error string* association from *error class* or *error code*.
    """
    _added(errorcode)
    _added_text[errorcode] = ""


def Remove_error_code(errorcode):
    """Remove_error_code(errorcode)

    Remove an *error code* from the known error codes.
    """
    _added(errorcode)
    if _added_class[errorcode] == errorcode:
        raise Exception(ERR_ARG, f"{errorcode} is an error class: Remove_error_class removes it")
    if _added_text[errorcode]:
        raise Exception(ERR_ARG, f"error code {errorcode} still has a string: Remove_error_string first")
    del _added_class[errorcode], _added_text[errorcode]


def Remove_error_class(errorclass):
    """Remove_error_class(errorclass)

    Remove an *error class* from the known error classes.
    """
    _added(errorclass)
    if any(c == errorclass and k != errorclass for k, c in _added_class.items()):
        raise Exception(ERR_ARG, f"error class {errorclass} still has codes")
    if _added_text[errorclass]:
        raise Exception(ERR_ARG, f"error class {errorclass} still has a string: Remove_error_string first")
    del _added_class[errorclass], _added_text[errorclass]


def Get_error_class(errorcode):
    """Get_error_class(errorcode)

    Convert an *error code* into an *error class*.
    """
    errorcode = int(errorcode)
    if errorcode < SUCCESS:
        return ERR_UNKNOWN
    return _added_class.get(errorcode, errorcode)


def Get_error_string(errorcode):
    """Get_error_string(errorcode)

    Return the *error string* for a given *error class* or *error code*.
    """
    return Exception(errorcode).Get_error_string()


__all__ = [n for n in globals() if n.startswith("ERR_") or n == "SUCCESS"]


_core.set_error_type(Exception)
