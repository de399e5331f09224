"""``MPI.Errhandler``: what happens when a call on an object fails.

mpiws raises ``MPI.Exception`` from every failed call, as mpi4py does
under ``ERRORS_RETURN`` (its default on ``COMM_WORLD`` and ``COMM_SELF``).
The handler an object holds is kept and given back (``Get_errhandler``,
``Set_errhandler``); ``Call_errhandler(code)`` runs it: a user handler
(``Create_errhandler(fn)``) gets ``fn(obj, code)``, ``ERRORS_RETURN`` does
nothing, ``ERRORS_ARE_FATAL`` and ``ERRORS_ABORT`` abort the process with
the error, as MPI would.
"""

import os
import sys

from .exception import ERR_ERRHANDLER, SUCCESS, Exception as MPIException, Get_error_string
from .handle import Handle, predefine


class Errhandler(Handle):
    """
    Error handler.
    """

    __slots__ = ()
    _invalid = ERR_ERRHANDLER

    def Free(self):
        """Free(self)

        Free an error handler.

        Let go of this reference (``Get_errhandler`` gives one): the
        handler itself goes when nothing holds it and it is not predefined.
        """
        self._state()
        if self._is_predefined() or any(h._h == self._h for h in _held.values()):
            if not self._is_constant():
                self._h = 0
            return
        self._release()

    def _rebuild(self):
        raise ValueError("cannot pickle a user error handler")


def _abort(obj, code):
    print(
        f"mpiws: {Get_error_string(code)} on {obj!r}: aborting, as the error handler says", file=sys.stderr, flush=True
    )
    os._exit(code or 1)


ERRHANDLER_NULL = predefine(Errhandler(), "ERRHANDLER_NULL")
ERRORS_RETURN = predefine(Errhandler._new(None, predefined=True), "ERRORS_RETURN")
ERRORS_ARE_FATAL = predefine(Errhandler._new(_abort, predefined=True), "ERRORS_ARE_FATAL")
ERRORS_ABORT = predefine(Errhandler._new(_abort, predefined=True), "ERRORS_ABORT")

#: Each object's handler, by handle number (absent: ERRORS_RETURN).
_held = {}


class Handled:
    """Mixin for the kinds that hold an error handler."""

    __slots__ = ()
    #: MPI_FILE_NULL holds the default handler of file operations.
    _null_has_errhandler = False

    def _check(self):
        if self or not self._null_has_errhandler:
            self._state()

    @classmethod
    def Create_errhandler(cls, errhandler_fn):
        if not callable(errhandler_fn):
            raise TypeError("Create_errhandler needs a callable fn(obj, errorcode)")
        return Errhandler._new(errhandler_fn)

    def Get_errhandler(self):
        self._check()
        return Errhandler(_held.get(self._h, ERRORS_RETURN))

    def Set_errhandler(self, errhandler):
        self._check()
        if not isinstance(errhandler, Errhandler) or not errhandler:
            raise MPIException(ERR_ERRHANDLER, "invalid error handler")
        errhandler._state()
        _held[self._h] = Errhandler(errhandler)

    def Call_errhandler(self, errorcode):
        self._check()
        if errorcode == SUCCESS:
            return
        fn = self.Get_errhandler()._state()
        if fn is not None:
            fn(self, errorcode)

    def _copy_errhandler(self, new):
        if self._h in _held:
            _held[new._h] = _held[self._h]

    def _drop_errhandler(self):
        _held.pop(self._h, None)
