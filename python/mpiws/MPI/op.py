"""``MPI.Op``: reduction operations.

A builtin op is applied by the core on numeric buffers (and numpy arrays
passed to the lowercase calls); on other Python objects it is the Python
function mpi4py uses (``SUM`` is ``a + b``). ``Op.Create`` makes a user op:
called as ``function(invec, inoutvec, datatype)`` on buffers, where it must
leave ``invec op inoutvec`` in ``inoutvec``, and as ``function(a, b, None)``
on objects, as in mpi4py. Ops are handles (MPI/handle.py).
"""

import operator

__all__ = [
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
]

from .. import _core
from . import datatype
from .exception import ERR_OP, ERR_TYPE, Exception as MPIException
from .handle import Handle, predefine


class _OpState:
    __slots__ = ("name", "fn", "core", "commute", "user")

    def __init__(self, name, fn, core, commute, user):
        self.name, self.fn, self.core, self.commute, self.user = name, fn, core, commute, user


class Op(Handle):
    """
    Reduction operation.

    An op is a handle (MPI/handle.py) naming its function: the Python
    one, and for a builtin op the core's name for it.
    """

    __slots__ = ()
    _invalid = ERR_OP

    @classmethod
    def _builtin(cls, name, fn, core, commute=True):
        return cls._new(_OpState(name, fn, core, commute, False), predefined=True)

    @classmethod
    def Create(cls, function, commute=False):
        """Create(cls, function, commute=False)

        Create a user-defined reduction operation.
        """
        if not callable(function):
            raise TypeError("Op.Create needs a callable")
        return cls._new(_OpState(getattr(function, "__name__", "user op"), function, None, bool(commute), True))

    def _rebuild(self):
        st = self._state()
        return (Op.Create, (st.fn, st.commute))

    # what reductions use (MPI/collectives.py)
    name = property(lambda self: self._state().name if self else "MPI_OP_NULL")
    _fn = property(lambda self: self._state().fn)
    _core = property(lambda self: self._state().core)
    _commute = property(lambda self: self._state().commute)
    _user = property(lambda self: self._state().user)

    def __call__(self, x, y):
        """``x op y`` on Python objects (a user op gets None for the datatype)."""
        if not self:
            raise ValueError("cannot apply the null op")
        st = self._state()
        if st.user:
            return st.fn(x, y, None)
        if st.fn is None:
            raise MPIException(ERR_OP, f"{st.name} has no meaning on Python objects")
        return st.fn(x, y)

    def Is_commutative(self):
        """Is_commutative(self)

        Query reduction operations for their commutativity.
        """
        return self._commute

    @property
    def is_commutative(self):
        return self._commute

    @property
    def is_predefined(self):
        return not self or not self._user

    def Free(self):
        """Free(self)

        Free a user-defined reduction operation.
        """
        self._release()

    def Reduce_local(self, inbuf, inoutbuf):
        """Reduce_local(self, inbuf, inoutbuf)

        Apply a reduction operation to local data.

        ``inoutbuf = inbuf op inoutbuf``, here.
        """
        src, dt, n = datatype.parse(inbuf)
        dst, dt2, m = datatype.parse(inoutbuf, writable=True)
        if (n, dt.Get_size()) != (m, dt2.Get_size()):
            raise ValueError(f"mismatched buffers: {n} x {dt.name} and {m} x {dt2.name}")
        here = folded_here(self, dt)
        if here:
            here._fn(datatype.typed(src, dt), datatype.typed(dst, dt), dt)
        else:
            _core.reduce_local((self._core, datatype.reduce_code(dt)), src, dst)


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


def _max(x, y):
    return y if y > x else x


def _min(x, y):
    return y if y < x else x


def _land(x, y):
    return x and y


def _lor(x, y):
    return x or y


def _lxor(x, y):
    return bool(x) != bool(y)


def _replace(x, y):
    return y


def _no_op(x, y):
    return x


OP_NULL = predefine(Op(), "OP_NULL")
SUM = predefine(Op._builtin("MPI_SUM", operator.add, "sum"), "SUM")
PROD = predefine(Op._builtin("MPI_PROD", operator.mul, "prod"), "PROD")
MAX = predefine(Op._builtin("MPI_MAX", _max, "max"), "MAX")
MIN = predefine(Op._builtin("MPI_MIN", _min, "min"), "MIN")
LAND = predefine(Op._builtin("MPI_LAND", _land, "land"), "LAND")
LOR = predefine(Op._builtin("MPI_LOR", _lor, "lor"), "LOR")
LXOR = predefine(Op._builtin("MPI_LXOR", _lxor, "lxor"), "LXOR")
BAND = predefine(Op._builtin("MPI_BAND", operator.and_, "band"), "BAND")
BOR = predefine(Op._builtin("MPI_BOR", operator.or_, "bor"), "BOR")
BXOR = predefine(Op._builtin("MPI_BXOR", operator.xor, "bxor"), "BXOR")
MAXLOC = predefine(Op._builtin("MPI_MAXLOC", _maxloc, "maxloc"), "MAXLOC")
MINLOC = predefine(Op._builtin("MPI_MINLOC", _minloc, "minloc"), "MINLOC")
REPLACE = predefine(Op._builtin("MPI_REPLACE", _replace, "replace", commute=False), "REPLACE")
NO_OP = predefine(Op._builtin("MPI_NO_OP", _no_op, "no_op", commute=False), "NO_OP")


def as_op(op):
    """An Op for ``op`` (an Op or any callable taking two objects)."""
    if isinstance(op, Op):
        return op
    if callable(op):
        return _Callable(op)
    raise TypeError(f"expected an MPI.Op or a callable, got {type(op).__name__}")


def fold(values, op):
    """``v0 op v1 op ...`` in rank order."""
    it = iter(values)
    acc = next(it)
    for v in it:
        acc = op(acc, v)
    return acc


# The numpy ufunc of each builtin op the core names.
_UFUNCS = {
    "sum": "add",
    "prod": "multiply",
    "max": "maximum",
    "min": "minimum",
    "land": "logical_and",
    "lor": "logical_or",
    "lxor": "logical_xor",
    "band": "bitwise_and",
    "bor": "bitwise_or",
    "bxor": "bitwise_xor",
}


def with_numpy(op, dt):
    """A builtin ``op`` on elements of ``dt`` the core has no arithmetic
    for (long double, its complex, half floats), as a buffer op folded in
    Python with numpy's ufunc."""
    name = _UFUNCS.get(op._core)
    if name is None:
        raise MPIException(ERR_OP, f"{op.name} is not defined on {dt.name}")
    try:
        import numpy as np

        dtype = np.dtype(dt.typecode)
    except (ImportError, TypeError):
        dtype = None
    if dtype is None or dtype.kind not in "biufc":
        raise MPIException(ERR_TYPE, f"no reduction on datatype {dt.name}")
    ufunc = getattr(np, name)

    def apply(invec, inoutvec, _datatype):
        out = np.frombuffer(inoutvec, dtype)
        out[...] = ufunc(np.frombuffer(invec, dtype), out)

    return Op._new(_OpState(op.name, apply, None, op._commute, True))


def folded_here(op, dt):
    """The op to fold with in Python, or None when the core reduces ``dt``
    with ``op``: a user op, or a builtin one on elements the core has no
    arithmetic for (``with_numpy``)."""
    if op._core is None:
        return op
    try:
        datatype.reduce_code(dt)
        return None
    except MPIException:
        return with_numpy(op, dt)


class _Callable:
    """A plain callable where an op goes (lowercase reductions of objects:
    ``f(a, b)``): not a handle, never freed."""

    __slots__ = ("_fn",)
    _core = None
    _commute = False
    _user = True

    def __init__(self, fn):
        self._fn = fn

    name = property(lambda self: getattr(self._fn, "__name__", "callable"))

    def __call__(self, x, y):
        return self._fn(x, y)
