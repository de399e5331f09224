"""The object kinds mpiws does not provide yet: MPI-IO files (``File``)
and sessions (``Session``). (RMA windows are ``win.py``.) Their classes and null
handles exist, so programs and libraries that name them import; making
one raises ``NotImplementedError`` naming what is missing
(docs/mpi4py-compat.md)."""

from .errhandler import Handled
from .exception import ERR_FILE, ERR_SESSION
from .handle import Handle, predefine


def _missing(what):
    def make(*args, **kwargs):
        """make(*args, **kwargs)

        Create a session.
        """
        raise NotImplementedError(f"{what} is not in mpiws yet (docs/mpi4py-compat.md)")

    return classmethod(make)


class File(Handle, Handled):
    """
    File I/O context.
    """

    __slots__ = ()
    _invalid = ERR_FILE
    _null_has_errhandler = True
    Open = _missing("MPI.File (MPI-IO)")

    def Close(self):
        """Close(self)

        Close a file.
        """
        self._release()


class Session(Handle, Handled):
    """
    Session context.
    """

    __slots__ = ()
    _invalid = ERR_SESSION
    Init = _missing("MPI.Session (the sessions model)")

    def Finalize(self):
        """Finalize(self)

        Finalize a session.
        """
        self._release()


# MPI-IO's access modes, MPICH's values (for programs that name them).
MODE_CREATE, MODE_RDONLY, MODE_WRONLY, MODE_RDWR = 1, 2, 4, 8
MODE_DELETE_ON_CLOSE, MODE_UNIQUE_OPEN, MODE_EXCL, MODE_APPEND, MODE_SEQUENTIAL = 16, 32, 64, 128, 256

FILE_NULL = predefine(File(), "FILE_NULL")
SESSION_NULL = predefine(Session(), "SESSION_NULL")
