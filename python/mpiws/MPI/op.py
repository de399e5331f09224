"""``MPI.Op``: reduction operations.

A builtin op is applied by the core on numeric buffers (and numpy arrays
passed to the lowercase calls); on other Python objects it is the Python
function mpi4py uses (``SUM`` is ``a + b``). ``Op.Create`` makes a user op:
called as ``function(a, b)`` on objects and as ``function(invec, inoutvec,
datatype)`` on buffers, where it must leave ``invec op inoutvec`` in
``inoutvec``.
"""

import operator

__all__ = ["Op", "OP_NULL", "SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP"]

from .exception import ERR_OP, Exception as MPIException


class Op:
    __slots__ = ("name", "_fn", "_core", "_commute", "_user")

    def __init__(self, name, fn, core=None, commute=True, user=False):
        self.name = name
        self._fn = fn
        self._core = core  # the core's name for a builtin op
        self._commute = commute
        self._user = user

    @classmethod
    def Create(cls, function, commute=False):
        if not callable(function):
            raise TypeError("Op.Create needs a callable")
        return cls(getattr(function, "__name__", "user op"), function, None, bool(commute), True)

    def __call__(self, x, y):
        """``x op y`` on Python objects."""
        if self._user:
            return self._fn(x, y)
        if self._fn is None:
            raise MPIException(ERR_OP, f"{self.name} has no meaning on Python objects")
        return self._fn(x, y)

    def Is_commutative(self):
        return self._commute

    @property
    def is_commutative(self):
        return self._commute

    @property
    def is_predefined(self):
        return not self._user

    def Free(self):
        pass

    def __repr__(self):
        return f"<Op {self.name}>"


def _maxloc(x, y):
    (u, i), (v, j) = x, y
    if u > v or (u == v and i <= j):
        return x
    return y


def _minloc(x, y):
    (u, i), (v, j) = x, y
    if u < v or (u == v and i <= j):
        return x
    return y


OP_NULL = Op("MPI_OP_NULL", None)
SUM = Op("MPI_SUM", operator.add, "sum")
PROD = Op("MPI_PROD", operator.mul, "prod")
MAX = Op("MPI_MAX", lambda x, y: y if y > x else x, "max")
MIN = Op("MPI_MIN", lambda x, y: y if y < x else x, "min")
LAND = Op("MPI_LAND", lambda x, y: x and y, "land")
LOR = Op("MPI_LOR", lambda x, y: x or y, "lor")
LXOR = Op("MPI_LXOR", lambda x, y: bool(x) != bool(y), "lxor")
BAND = Op("MPI_BAND", operator.and_, "band")
BOR = Op("MPI_BOR", operator.or_, "bor")
BXOR = Op("MPI_BXOR", operator.xor, "bxor")
MAXLOC = Op("MPI_MAXLOC", _maxloc, "maxloc")
MINLOC = Op("MPI_MINLOC", _minloc, "minloc")
REPLACE = Op("MPI_REPLACE", lambda x, y: y, "replace", commute=False)
NO_OP = Op("MPI_NO_OP", lambda x, y: x, "no_op", commute=False)


def as_op(op):
    """An Op for ``op`` (an Op or any callable taking two objects)."""
    if isinstance(op, Op):
        return op
    if callable(op):
        return Op(getattr(op, "__name__", "callable"), op, None, False, True)
    raise TypeError(f"expected an MPI.Op or a callable, got {type(op).__name__}")


def fold(values, op):
    """``v0 op v1 op ...`` in rank order."""
    it = iter(values)
    acc = next(it)
    for v in it:
        acc = op(acc, v)
    return acc
