"""Basic datatypes and buffer specifications.

A buffer argument is any contiguous buffer (numpy array, bytes, bytearray,
memoryview, array.array, ...) or a list ``[buf, datatype]``,
``[buf, count, datatype]`` or ``[buf, (count, displ), datatype]``, with the
datatype given as an ``MPI.Datatype`` or a typecode string (``'d'``, ``'i'``).
"""

import struct

from .attributes import Attributes
from .exception import ERR_TYPE, Exception as MPIException
from .handle import Handle, predefine


class _TypeState:
    __slots__ = ("name", "typecode", "size")

    def __init__(self, name, typecode, size):
        self.name, self.typecode, self.size = name, typecode, size


class Datatype(Handle, Attributes):
    """A datatype is a handle (MPI/handle.py) naming its element: name,
    typecode (as in buffer formats) and size."""

    __slots__ = ()
    _invalid = ERR_TYPE

    @classmethod
    def _basic(cls, name, typecode, size=None):
        return cls._new(_TypeState(name, typecode, struct.calcsize(typecode) if size is None else size), predefined=True)

    name = property(lambda self: self._state().name if self else "MPI_DATATYPE_NULL")
    typecode = property(lambda self: self._state().typecode)
    _size = property(lambda self: self._state().size)

    def Get_size(self):
        return self._size

    def Get_extent(self):
        return (0, self._size)

    def Get_name(self):
        return self.name

    @property
    def size(self):
        return self._size

    @property
    def extent(self):
        return self._size

    @property
    def lb(self):
        return 0

    @property
    def ub(self):
        return self._size

    def Dup(self):
        st = self._state()
        dup = Datatype._new(_TypeState(st.name, st.typecode, st.size))
        self._copy_attrs(dup)
        return dup

    def Free(self):
        self._state()
        if not self._is_predefined():
            self._drop_attrs()
        self._release()

    def Commit(self):
        self._state()
        return self

    def _rebuild(self):
        st = self._state()
        return (_rebuilt, (st.name, st.typecode, st.size))

    def __repr__(self):
        return f"<Datatype {self.name}>"


def _rebuilt(name, typecode, size):
    return Datatype._new(_TypeState(name, typecode, size))


DATATYPE_NULL = Datatype()
BYTE = Datatype._basic("MPI_BYTE", "B")
PACKED = Datatype._basic("MPI_PACKED", "B")
CHAR = Datatype._basic("MPI_CHAR", "c")
WCHAR = Datatype._basic("MPI_WCHAR", "I")
SIGNED_CHAR = Datatype._basic("MPI_SIGNED_CHAR", "b")
UNSIGNED_CHAR = Datatype._basic("MPI_UNSIGNED_CHAR", "B")
SHORT = Datatype._basic("MPI_SHORT", "h")
UNSIGNED_SHORT = Datatype._basic("MPI_UNSIGNED_SHORT", "H")
INT = Datatype._basic("MPI_INT", "i")
UNSIGNED = UNSIGNED_INT = Datatype._basic("MPI_UNSIGNED", "I")
LONG = Datatype._basic("MPI_LONG", "l")
UNSIGNED_LONG = Datatype._basic("MPI_UNSIGNED_LONG", "L")
LONG_LONG = Datatype._basic("MPI_LONG_LONG", "q")
UNSIGNED_LONG_LONG = Datatype._basic("MPI_UNSIGNED_LONG_LONG", "Q")
FLOAT = Datatype._basic("MPI_FLOAT", "f")
DOUBLE = Datatype._basic("MPI_DOUBLE", "d")
LONG_DOUBLE = Datatype._basic("MPI_LONG_DOUBLE", "g", 16)
C_BOOL = BOOL = Datatype._basic("MPI_C_BOOL", "?")
INT8_T = Datatype._basic("MPI_INT8_T", "b")
INT16_T = Datatype._basic("MPI_INT16_T", "h")
INT32_T = Datatype._basic("MPI_INT32_T", "i")
INT64_T = Datatype._basic("MPI_INT64_T", "q")
UINT8_T = Datatype._basic("MPI_UINT8_T", "B")
UINT16_T = Datatype._basic("MPI_UINT16_T", "H")
UINT32_T = Datatype._basic("MPI_UINT32_T", "I")
UINT64_T = Datatype._basic("MPI_UINT64_T", "Q")
C_FLOAT_COMPLEX = C_COMPLEX = COMPLEX = Datatype._basic("MPI_C_FLOAT_COMPLEX", "F", 8)
C_DOUBLE_COMPLEX = DOUBLE_COMPLEX = Datatype._basic("MPI_C_DOUBLE_COMPLEX", "D", 16)
FLOAT_INT = Datatype._basic("MPI_FLOAT_INT", "fi", 8)
DOUBLE_INT = Datatype._basic("MPI_DOUBLE_INT", "di", 16)
LONG_INT = Datatype._basic("MPI_LONG_INT", "li", 16)
TWOINT = Datatype._basic("MPI_2INT", "ii", 8)
AINT = Datatype._basic("MPI_AINT", "l")
OFFSET = Datatype._basic("MPI_OFFSET", "q")
COUNT = Datatype._basic("MPI_COUNT", "q")

# The rest of mpi4py's predefined datatypes, as MPICH has them (named after
# MPICH's; the null datatype where MPICH has none).
SIGNED_SHORT, SIGNED_INT, SIGNED_LONG = SHORT, INT, LONG
SIGNED_LONG_LONG = Datatype._basic("MPI_LONG_LONG_INT", "q", 8)
SINT8_T, SINT16_T, SINT32_T, SINT64_T = INT8_T, INT16_T, INT32_T, INT64_T
FLOAT32_T, FLOAT64_T = FLOAT, DOUBLE
FLOAT16_T = Datatype._basic("MPIX_C_FLOAT16", "e", 2)
C_LONG_DOUBLE_COMPLEX = Datatype._basic("MPI_C_LONG_DOUBLE_COMPLEX", "G", 32)
CXX_BOOL = Datatype._basic("MPI_CXX_BOOL", "?", 1)
CXX_FLOAT_COMPLEX = Datatype._basic("MPI_CXX_FLOAT_COMPLEX", "F", 8)
CXX_DOUBLE_COMPLEX = Datatype._basic("MPI_CXX_DOUBLE_COMPLEX", "D", 16)
CXX_LONG_DOUBLE_COMPLEX = Datatype._basic("MPI_CXX_LONG_DOUBLE_COMPLEX", "G", 32)
SHORT_INT = Datatype._basic("MPI_SHORT_INT", "hi", 6)
LONG_DOUBLE_INT = Datatype._basic("MPI_LONG_DOUBLE_INT", "gi", 20)
INT_INT = TWOINT
CHARACTER = Datatype._basic("MPI_CHARACTER", "c", 1)
F_BOOL = LOGICAL = Datatype._basic("MPI_LOGICAL", "i", 4)
F_INT = INTEGER = Datatype._basic("MPI_INTEGER", "i", 4)
F_FLOAT = REAL = Datatype._basic("MPI_REAL", "f", 4)
F_DOUBLE = DOUBLE_PRECISION = Datatype._basic("MPI_DOUBLE_PRECISION", "d", 8)
F_COMPLEX = F_FLOAT_COMPLEX = Datatype._basic("MPI_COMPLEX", "F", 8)
F_DOUBLE_COMPLEX = Datatype._basic("MPI_DOUBLE_COMPLEX", "D", 16)
INTEGER1 = Datatype._basic("MPI_INTEGER1", "i1", 1)
INTEGER2 = Datatype._basic("MPI_INTEGER2", "i2", 2)
INTEGER4 = Datatype._basic("MPI_INTEGER4", "i4", 4)
INTEGER8 = Datatype._basic("MPI_INTEGER8", "i8", 8)
REAL4 = Datatype._basic("MPI_REAL4", "f4", 4)
REAL8 = Datatype._basic("MPI_REAL8", "f8", 8)
REAL16 = Datatype._basic("MPI_REAL16", "f16", 16)
COMPLEX8 = Datatype._basic("MPI_COMPLEX8", "c8", 8)
COMPLEX16 = Datatype._basic("MPI_COMPLEX16", "c16", 16)
COMPLEX32 = Datatype._basic("MPI_COMPLEX32", "c32", 32)
BFLOAT16_T = COMPLEX4 = INTEGER16 = REAL2 = DATATYPE_NULL
LOGICAL1 = LOGICAL2 = LOGICAL4 = LOGICAL8 = LOGICAL16 = DATATYPE_NULL

for _name, _dt in list(globals().items()):
    if isinstance(_dt, Datatype) and _name.isupper():
        predefine(_dt, _name)

# Typecode (as in buffer formats and numpy's dtype.char) -> datatype.
_BY_TYPECODE = {
    "B": BYTE, "c": CHAR, "b": SIGNED_CHAR, "h": SHORT, "H": UNSIGNED_SHORT,
    "i": INT, "I": UNSIGNED, "l": LONG, "L": UNSIGNED_LONG, "q": LONG_LONG,
    "Q": UNSIGNED_LONG_LONG, "n": LONG, "N": UNSIGNED_LONG, "f": FLOAT, "d": DOUBLE,
    "g": LONG_DOUBLE, "?": C_BOOL, "F": C_FLOAT_COMPLEX, "D": C_DOUBLE_COMPLEX,
    "G": C_LONG_DOUBLE_COMPLEX, "Zf": C_FLOAT_COMPLEX, "Zd": C_DOUBLE_COMPLEX, "Zg": C_LONG_DOUBLE_COMPLEX, "e": Datatype._basic("MPI_FLOAT16", "e"),
    "i1": INT8_T, "i2": INT16_T, "i4": INT32_T, "i8": INT64_T,
    "u1": UINT8_T, "u2": UINT16_T, "u4": UINT32_T, "u8": UINT64_T,
    "f4": FLOAT, "f8": DOUBLE, "c8": C_FLOAT_COMPLEX, "c16": C_DOUBLE_COMPLEX,
    "p": Datatype._basic("MPI_AINT", "P"),
}


def from_typecode(code):
    """The datatype for a typecode string such as ``'d'`` or ``'i4'``."""
    dt = _BY_TYPECODE.get(code.lstrip("@=<>!"))
    if dt is None:
        raise MPIException(ERR_TYPE, f"unknown typecode {code!r}")
    return dt


def _as_datatype(dt):
    if isinstance(dt, Datatype):
        return dt
    if isinstance(dt, str):
        return from_typecode(dt)
    raise TypeError(f"expected a Datatype or typecode string, got {type(dt).__name__}")


def as_view(buf, writable=False):
    """A C-contiguous memoryview of any buffer mpi4py accepts (the buffer
    protocol, DLPack, the CUDA array interface; None: empty)."""
    if buf is None:  # mpi4py's empty message (with PROC_NULL, count 0)
        return memoryview(bytearray())
    try:
        mv = memoryview(buf)
    except TypeError:
        mv = _foreign(buf)
    if writable and mv.readonly:
        raise TypeError("receive buffer is read-only")
    if not mv.c_contiguous:
        raise ValueError("buffer must be C-contiguous")
    return mv


def _foreign(buf):
    """A view of host memory an object exposes through DLPack or the CUDA
    array interface instead of the buffer protocol (unified memory, and
    mpi4py's test arrays)."""
    holder = _Interface()
    holder.owner = buf
    if hasattr(buf, "__dlpack__"):
        from .dlpack import array_interface

        holder.__array_interface__, holder.capsule = array_interface(buf)
    else:
        iface = getattr(buf, "__cuda_array_interface__", None)
        if not (isinstance(iface, dict) and "data" in iface):
            raise TypeError(f"expected a buffer object, got {type(buf).__name__}")
        holder.__array_interface__ = {"version": 3, "data": tuple(iface["data"]), "typestr": iface["typestr"],
                                      "shape": tuple(iface["shape"]), "strides": iface.get("strides")}
    import numpy as np

    return memoryview(np.asarray(holder))


class _Interface:
    """Carries an ``__array_interface__`` for numpy to view, and keeps the
    memory's owner alive as long as the view."""


def _bytes_and_type(buf, dt, writable):
    """``buf`` as a flat byte view, and ``dt`` or else the type its format names."""
    mv = as_view(buf, writable)
    if dt is None:
        fmt = mv.format
        dt = from_typecode(fmt) if fmt not in ("", "B") else BYTE
    return (mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv), dt


def parse(spec, writable=False, blocks=1):
    """(bytes view, datatype, count) for a buffer specification; for a
    collective's buffer of ``blocks`` blocks (one per rank), a count given
    is per block, as mpi4py reads it."""
    count = displ = None
    dt = None
    if isinstance(spec, (list, tuple)):
        if not 1 <= len(spec) <= 3:
            raise ValueError(f"buffer specification must be [buf], [buf, datatype] or [buf, count, datatype], got {len(spec)} items")
        buf = spec[0]
        if len(spec) == 2:
            if isinstance(spec[1], (Datatype, str)):
                dt = _as_datatype(spec[1])
            else:
                count = spec[1]
        elif len(spec) == 3:
            count, dt = spec[1], _as_datatype(spec[2])
        if isinstance(count, (list, tuple)):
            count, displ = count
    else:
        buf = spec
    raw, dt = _bytes_and_type(buf, dt, writable)
    size = dt.Get_size()
    explicit = count is not None
    if count is None:
        count = raw.nbytes // size if size else 0
    if count < 0:
        raise ValueError(f"negative count {count}")
    start = (displ or 0) * size
    stop = start + count * size * (blocks if explicit else 1)
    if stop > raw.nbytes:
        raise ValueError(f"buffer of {raw.nbytes} bytes too small for {count} x {dt.name} at displacement {displ or 0}")
    return raw[start:stop], dt, count


def typed(b, dt):
    """``b`` as ``dt``'s elements where memoryview knows them, else bytes."""
    mv = memoryview(b)
    try:
        return mv.cast(dt.typecode)
    except (ValueError, TypeError):
        return mv


def parse_w(spec, nranks, writable=False):
    """Per rank, the bytes of a ``w`` vector specification, read as mpi4py
    reads one: ``[buf, types]`` (one item each at the start),
    ``[buf, (counts, displs), types]`` or ``[buf, counts, displs, types]``;
    displacements in bytes, from the buffer or, for ``BOTTOM`` (0), from
    address 0; ``types``: one datatype or one per rank."""
    if not isinstance(spec, (list, tuple)) or len(spec) not in (2, 3, 4):
        raise ValueError("message: expecting 2 to 4 items")
    counts = displs = None
    if len(spec) == 2:
        buf, types = spec
    elif len(spec) == 3:
        buf, (counts, displs), types = spec
    else:
        buf, counts, displs, types = spec
    types = [_as_datatype(t) for t in types] if isinstance(types, (list, tuple)) else [_as_datatype(types)] * nranks
    counts = [1] * nranks if counts is None else [int(c) for c in counts]
    displs = [0] * nranks if displs is None else [int(d) for d in displs]
    if not len(types) == len(counts) == len(displs) == nranks:
        raise ValueError(f"counts, displacements and types need one entry per rank ({nranks})")
    if isinstance(buf, int) and buf == 0:  # BOTTOM: displacements are addresses
        from .memory import buffer

        return [memoryview(buffer.fromaddress(d, c * t.Get_size(), not writable)) for c, d, t in zip(counts, displs, types)]
    raw = as_view(buf, writable).cast("B")
    views = []
    for c, d, t in zip(counts, displs, types):
        n = c * t.Get_size()
        if c < 0 or d < 0 or d + n > raw.nbytes:
            raise ValueError(f"block of {c} x {t.name} at byte {d} is outside a buffer of {raw.nbytes} bytes")
        views.append(raw[d:d + n])
    return views


_PAIRS = {"fi": "fi", "di": "di", "li": "li", "ii": "2i", "hi": "si"}
_KINDS = {**dict.fromkeys("bhilqn", "i"), **dict.fromkeys("BHILQN", "u"), "f": "f", "d": "f", "F": "c", "D": "c", "?": "b"}


def reduce_code(dt):
    """The core's name for ``dt`` in reductions ('i4', 'f8', 'di', ...)."""
    code = dt.typecode
    if code in _PAIRS:
        return _PAIRS[code]
    if len(code) > 1 and code[0] in "iufcb" and code[1:].isdigit():
        return code
    kind = _KINDS.get(code)
    if kind is None:
        raise MPIException(ERR_TYPE, f"no reduction on datatype {dt.name}")
    return f"{kind}{dt.Get_size()}"


def parse_v(spec, nranks, writable=False):
    """(whole buffer as bytes, datatype, counts, displacements) for a vector
    specification, in elements, read as mpi4py reads one: ``buf``,
    ``[buf, counts]``, ``[buf, datatype]``, ``[buf, counts, datatype]``,
    ``[buf, counts, displs, datatype]``, where a tuple in place of counts is
    ``(counts, displs)``; counts None: the buffer split as evenly as it goes,
    an int: that many for every rank; displs None: packed, an int: that
    stride."""
    buf, counts, displs, dt = spec, None, None, None
    if isinstance(spec, (list, tuple)):
        if len(spec) == 2:
            buf, counts = spec
            if isinstance(counts, (Datatype, str)):
                counts, dt = None, _as_datatype(counts)
        elif len(spec) == 3:
            buf, counts, dt = spec[0], spec[1], _as_datatype(spec[2])
        elif len(spec) == 4:
            buf, counts, displs, dt = spec[0], spec[1], spec[2], _as_datatype(spec[3])
        else:
            raise ValueError("message: expecting 2 to 4 items")
        if isinstance(counts, tuple) and len(spec) in (2, 3):
            counts, displs = counts
    raw, dt = _bytes_and_type(buf, dt, writable)
    size = dt.Get_size()
    if counts is None:
        items = raw.nbytes // size if size else 0
        counts = [items // nranks + (items % nranks > i) for i in range(nranks)]
    elif isinstance(counts, int):
        counts = [counts] * nranks
    counts = [int(c) for c in counts]
    if displs is None:
        displs, at = [], 0
        for c in counts:
            displs.append(at)
            at += c
    elif isinstance(displs, int):
        displs = [displs * i for i in range(nranks)]
    displs = [int(d) for d in displs]
    if len(counts) != nranks or len(displs) != nranks:
        raise ValueError(f"counts and displacements need one entry per rank ({nranks})")
    for c, d in zip(counts, displs):
        if c < 0 or d < 0 or (d + c) * size > raw.nbytes:
            raise ValueError(f"block of {c} x {dt.name} at displacement {d} is outside a buffer of {raw.nbytes} bytes")
    return raw, dt, counts, displs
