"""Datatypes and buffer specifications.

A datatype is a handle (MPI/handle.py) naming a ``_TypeState``: its name,
what mpi4py reports of it (``typechar``, ``tocode``), how it was made
(combiner and arguments, MPI/derived.py) and its layout, the core's
``_core.Layout`` (bounds; packing of non-contiguous types into messages).

A buffer argument is any contiguous buffer (numpy array, bytes, bytearray,
memoryview, array.array, ...) or a list ``[buf, datatype]``,
``[buf, count, datatype]`` or ``[buf, (count, displ), datatype]``, with the
datatype given as an ``MPI.Datatype`` or a typecode string (``'d'``, ``'i'``).
A message of a derived datatype whose items are not their bytes side by
side is packed on the way out and unpacked into place when it arrives
(``settle``).
"""

import operator

from .. import _core
from . import derived
from . import pack as packing
from .attributes import Attributes
from .derived import *  # noqa: F401,F403  (COMBINER_*, ORDER_*, DISTRIBUTE_*, TYPECLASS_*)
from .exception import ERR_ARG, ERR_TYPE, Exception as MPIException
from .handle import Handle, Named, predefine

_TYPESTR = {
    "?": "b1",
    "b": "i1",
    "h": "i2",
    "i": "i4",
    "l": "i8",
    "q": "i8",
    "p": "i8",
    "B": "u1",
    "H": "u2",
    "I": "u4",
    "L": "u8",
    "Q": "u8",
    "P": "u8",
    "e": "f2",
    "f": "f4",
    "d": "f8",
    "g": "f16",
    "E": "c4",
    "F": "c8",
    "D": "c16",
    "G": "c32",
    "S": "S1",
    "U": "U1",
    "c": "S1",
}


class _TypeState:
    """``typecode``: the struct/numpy format of its elements where they
    have one (casts, reductions); ``char``/``code``: mpi4py's ``typechar``
    and ``tocode()`` (None: none); ``combiner``, ``params`` (decode's) and
    ``children`` (states it was made from): how it was made; ``item``: the
    size of an item if items lie side by side from its start, an item's
    size apart (a count of them is a plain run of bytes), else None."""

    __slots__ = ("name", "typecode", "char", "code", "layout", "combiner", "params", "children", "committed", "item")

    def __init__(self, name, typecode, char, code, layout, combiner=derived.COMBINER_NAMED, params=None, children=()):
        self.name, self.typecode, self.char, self.code, self.layout = name, typecode, char, code, layout
        self.combiner, self.params, self.children, self.committed = combiner, params or {}, tuple(children), False
        lb, ub, _, _ = layout.bounds
        self.item = layout.size if layout.dense and lb == 0 and ub == layout.size else None


#: The predefined object for each predefined state (``decode`` gives them back).
_named_of = {}


def _ref(state):
    """A handle for ``state``: its predefined object, or a new handle (freeing
    it leaves the others alone, as freeing what ``Get_contents`` gives)."""
    return _named_of.get(id(state)) or Datatype._new(state)


#: The combiners of predefined datatypes.
_PREDEFINED_COMBINERS = frozenset(
    (
        derived.COMBINER_NAMED,
        derived.COMBINER_VALUE_INDEX,
        derived.COMBINER_F90_INTEGER,
        derived.COMBINER_F90_REAL,
        derived.COMBINER_F90_COMPLEX,
    )
)


class Datatype(Handle, Named, Attributes):
    """
    Datatype object.
    """

    __slots__ = ()
    _invalid = ERR_TYPE
    _null_name = "MPI_DATATYPE_NULL"

    @classmethod
    def _basic(cls, name, typecode, size, char, code=None, parts=None, extent=None):
        parts = parts or [(0, size)]
        align = max(s for _, s in parts)
        align = align // 2 if char in ("F", "D", "G", "E") else align
        layout = _core.Layout.named(parts, extent or size, align)
        obj = cls._new(_TypeState(name, typecode, char, code or char, layout), predefined=True)
        _named_of[id(obj._state())] = obj
        return obj

    # ---- what it is --------------------------------------------------------

    typecode = property(lambda self: self._state().typecode)
    _layout = property(lambda self: self._state().layout)

    def Get_size(self):
        """Get_size(self)

        Return the number of bytes occupied by entries in the datatype.
        """
        return self._layout.size

    def Get_extent(self):
        """Get_extent(self)

        Return lower bound and extent of datatype.
        """
        lb, ub, _, _ = self._layout.bounds
        return lb, ub - lb

    def Get_true_extent(self):
        """Get_true_extent(self)

        Return the true lower bound and extent of a datatype.
        """
        _, _, tlb, tub = self._layout.bounds
        return tlb, tub - tlb

    Get_extent_c, Get_true_extent_c, Get_size_c = Get_extent, Get_true_extent, Get_size
    size = property(Get_size)
    extent = property(lambda self: self.Get_extent()[1])
    lb = property(lambda self: self._layout.bounds[0])
    ub = property(lambda self: self._layout.bounds[1])
    true_extent = property(lambda self: self.Get_true_extent()[1])
    true_lb = property(lambda self: self._layout.bounds[2])
    true_ub = property(lambda self: self._layout.bounds[3])

    @property
    def typechar(self):
        return (self._state().char or "V") if self else ""

    @property
    def typestr(self):
        if not self:
            return ""
        st = self._state()
        if st.code and st.code[0] in "biufc" and st.code[1:].isdigit():
            return st.code
        return _TYPESTR.get(st.char) or f"V{self.extent}"

    def tocode(self):
        """tocode(self)

        Get character code or type string from predefined MPI datatype.
        """
        code = self._state().code if self else None
        if code is None:
            raise ValueError("cannot map to character code or type string")
        return code

    @classmethod
    def fromcode(cls, code):
        """fromcode(cls, code)

        Get predefined MPI datatype from character code or type string.
        """
        try:
            return _typedict[code]
        except (KeyError, TypeError):
            raise ValueError(f"cannot map code {code!r} to MPI datatype") from None

    # ---- how it was made (MPI/derived.py) ----------------------------------

    def Get_envelope(self):
        """Get_envelope(self)

        Return the number of input arguments used to create a datatype.
        """
        st = self._state()
        i, a, c = derived.contents(st.combiner, st.params, len(st.children))
        return len(i), len(a), len(c), len(st.children), st.combiner

    def Get_contents(self):
        """Get_contents(self)

        Return the input arguments used to create a datatype.
        """
        st = self._state()
        if st.combiner == derived.COMBINER_NAMED:
            raise MPIException(ERR_TYPE, "a named datatype has no contents")
        i, a, c = derived.contents(st.combiner, st.params, len(st.children))
        return i, a, c, [_ref(s) for s in st.children]

    envelope = property(Get_envelope)
    contents = property(Get_contents)
    combiner = property(lambda self: self._state().combiner)
    is_named = property(lambda self: self._state().combiner == derived.COMBINER_NAMED)

    @property
    def is_predefined(self):
        return not self or self._state().combiner in _PREDEFINED_COMBINERS

    def decode(self):
        """decode(self)

        Convenience method for decoding a datatype.
        """
        st = self._state()
        if st.combiner == derived.COMBINER_NAMED:
            return self, "NAMED", {}
        params = dict(st.params)
        oldtype = _ref(st.children[0]) if len(st.children) == 1 else DATATYPE_NULL
        if st.combiner == derived.COMBINER_STRUCT:
            params["datatypes"] = [oldtype] if len(st.children) == 1 else [_ref(s) for s in st.children]
        return oldtype, derived.name_of(st.combiner), params

    def _derive(self, combiner, params, layout, children=None):
        children = [self._state()] if children is None else children
        one = children[0] if len(children) == 1 else None
        typecode = one.typecode if one else _common(children)
        char = code = None
        if combiner == derived.COMBINER_DUP:
            char, code = one.char, one.code
        return type(self)._new(_TypeState("", typecode, char, code, layout, combiner, params, children))

    def _rebuild(self):
        return (_recreate, self.decode())

    # ---- constructors ------------------------------------------------------

    def Dup(self):
        """Dup(self)

        Duplicate a datatype.
        """
        dup = self._derive(derived.COMBINER_DUP, {}, self._layout)
        self._copy_attrs(dup)
        return dup

    Create_dup = Dup

    def Create_contiguous(self, count):
        """Create_contiguous(self, count)

        Create a contiguous datatype.
        """
        return self._derive(derived.COMBINER_CONTIGUOUS, {"count": int(count)}, self._layout.contiguous(int(count)))

    def Create_vector(self, count, blocklength, stride):
        """Create_vector(self, count, blocklength, stride)

        Create a vector (strided) datatype.
        """
        params = {"count": int(count), "blocklength": int(blocklength), "stride": int(stride)}
        return self._derive(derived.COMBINER_VECTOR, params, self._layout.vector(*params.values()))

    def Create_hvector(self, count, blocklength, stride):
        """Create_hvector(self, count, blocklength, stride)

        Create a vector (strided) datatype with stride in bytes.
        """
        params = {"count": int(count), "blocklength": int(blocklength), "stride": int(stride)}
        return self._derive(derived.COMBINER_HVECTOR, params, self._layout.hvector(*params.values()))

    def Create_indexed(self, blocklengths, displacements):
        """Create_indexed(self, blocklengths, displacements)

        Create an indexed datatype.
        """
        bls = derived.ints(blocklengths)
        params = {"blocklengths": bls, "displacements": derived.ints(displacements, len(bls), "displacements")}
        return self._derive(derived.COMBINER_INDEXED, params, self._layout.indexed(*params.values()))

    def Create_hindexed(self, blocklengths, displacements):
        """Create_hindexed(self, blocklengths, displacements)

        Create an indexed datatype.
        """
        bls = derived.ints(blocklengths)
        params = {"blocklengths": bls, "displacements": derived.ints(displacements, len(bls), "displacements")}
        return self._derive(derived.COMBINER_HINDEXED, params, self._layout.hindexed(*params.values()))

    def Create_indexed_block(self, blocklength, displacements):
        """Create_indexed_block(self, blocklength, displacements)

        Create an indexed datatype with constant-sized blocks.
        """
        params = {"blocklength": int(blocklength), "displacements": derived.ints(displacements)}
        layout = self._layout.indexed([params["blocklength"]] * len(params["displacements"]), params["displacements"])
        return self._derive(derived.COMBINER_INDEXED_BLOCK, params, layout)

    def Create_hindexed_block(self, blocklength, displacements):
        """Create_hindexed_block(self, blocklength, displacements)

        Create an indexed datatype with constant-sized blocks.
        """
        params = {"blocklength": int(blocklength), "displacements": derived.ints(displacements)}
        layout = self._layout.hindexed([params["blocklength"]] * len(params["displacements"]), params["displacements"])
        return self._derive(derived.COMBINER_HINDEXED_BLOCK, params, layout)

    @classmethod
    def Create_struct(cls, blocklengths, displacements, datatypes):
        """Create_struct(cls, blocklengths, displacements, datatypes)

        Create a general composite (struct) datatype.
        """
        bls = derived.ints(blocklengths)
        params = {"blocklengths": bls, "displacements": derived.ints(displacements, len(bls), "displacements")}
        types = list(datatypes)
        if len(types) != len(bls):
            raise ValueError(f"datatypes: expecting {len(bls)} items, got {len(types)}")
        states = [t._state() for t in types]
        layout = _core.Layout.structure(bls, params["displacements"], [s.layout for s in states])
        return cls()._derive(derived.COMBINER_STRUCT, params, layout, states)

    def Create_subarray(self, sizes, subsizes, starts, order=derived.ORDER_C):
        """Create_subarray(self, sizes, subsizes, starts, order=derived.ORDER_C)

        Create a datatype for a subarray of a multidimensional array.
        """
        sizes = derived.ints(sizes)
        params = {
            "sizes": sizes,
            "subsizes": derived.ints(subsizes, len(sizes), "subsizes"),
            "starts": derived.ints(starts, len(sizes), "starts"),
            "order": int(order),
        }
        return self._derive(derived.COMBINER_SUBARRAY, params, self._layout.subarray(*params.values()))

    def Create_darray(self, size, rank, gsizes, distribs, dargs, psizes, order=derived.ORDER_C):
        """Create_darray(self, size, rank, gsizes, distribs, dargs, psizes, order=derived.ORDER_C)

        Create a datatype for a distributed array on Cartesian process grids.
        """
        gsizes = derived.ints(gsizes)
        n = len(gsizes)
        params = {
            "size": int(size),
            "rank": int(rank),
            "gsizes": gsizes,
            "distribs": derived.ints(distribs, n, "distribs"),
            "dargs": derived.ints(dargs, n, "dargs"),
            "psizes": derived.ints(psizes, n, "psizes"),
            "order": int(order),
        }
        return self._derive(derived.COMBINER_DARRAY, params, self._layout.darray(*params.values()))

    def Create_resized(self, lb, extent):
        """Create_resized(self, lb, extent)

        Create a datatype with a new lower bound and extent.
        """
        params = {"lb": int(lb), "extent": int(extent)}
        return self._derive(derived.COMBINER_RESIZED, params, self._layout.resized(*params.values()))

    Resized = Create_resized

    @classmethod
    def Get_value_index(cls, value, index):
        """Get_value_index(cls, value, index)

        Return a predefined pair datatype.
        """
        value._state(), index._state()
        if index == INT:
            for v, pair in (
                (FLOAT, FLOAT_INT),
                (DOUBLE, DOUBLE_INT),
                (LONG, LONG_INT),
                (INT, TWOINT),
                (SHORT, SHORT_INT),
                (LONG_DOUBLE, LONG_DOUBLE_INT),
            ):
                if value == v:
                    return pair
        return DATATYPE_NULL

    @classmethod
    def Create_f90_integer(cls, r):
        """Create_f90_integer(cls, r)

        Return a bounded integer datatype.
        """
        return _f90(derived.COMBINER_F90_INTEGER, {"r": int(r)}, derived.f90_integer_size(int(r)), "i")

    @classmethod
    def Create_f90_real(cls, p, r):
        """Create_f90_real(cls, p, r)

        Return a bounded real datatype.
        """
        return _f90(derived.COMBINER_F90_REAL, {"p": int(p), "r": int(r)}, derived.f90_real_size(int(p), int(r)), "f")

    @classmethod
    def Create_f90_complex(cls, p, r):
        """Create_f90_complex(cls, p, r)

        Return a bounded complex datatype.
        """
        size = derived.f90_real_size(int(p), int(r))
        return _f90(derived.COMBINER_F90_COMPLEX, {"p": int(p), "r": int(r)}, size and 2 * size, "c")

    @classmethod
    def Match_size(cls, typeclass, size):
        """Match_size(cls, typeclass, size)

        Find a datatype matching a specified size in bytes.
        """
        table = {
            derived.TYPECLASS_INTEGER: (INTEGER1, INTEGER2, INTEGER4, INTEGER8),
            derived.TYPECLASS_REAL: (REAL4, REAL8, REAL16),
            derived.TYPECLASS_COMPLEX: (COMPLEX8, COMPLEX16, COMPLEX32),
            derived.TYPECLASS_LOGICAL: (LOGICAL,),
        }
        for t in table.get(typeclass, ()):
            if t and t.size == size:
                return t
        raise MPIException(
            ERR_TYPE if typeclass in table else ERR_ARG, f"no datatype of class {typeclass} has {size} bytes"
        )

    # ---- packing (MPI/pack.py) -----------------------------------------------

    def Pack(self, inbuf, outbuf, position, comm):
        """Pack(self, inbuf, outbuf, position, comm)

        Pack into contiguous memory according to datatype.
        """
        return packing.pack(self, _flat, inbuf, outbuf, position)

    def Unpack(self, inbuf, position, outbuf, comm):
        """Unpack(self, inbuf, position, outbuf, comm)

        Unpack from contiguous memory according to datatype.
        """
        return packing.unpack(self, _flat, inbuf, position, outbuf)

    def Pack_size(self, count, comm):
        """Pack_size(self, count, comm)

        Determine the amount of space needed to pack a message.
        """
        return packing.pack_size(self, count)

    def Pack_external(self, datarep, inbuf, outbuf, position):
        """Pack_external(self, datarep, inbuf, outbuf, position)

        Pack into contiguous memory according to datatype.
        """
        return packing.pack(self, _flat, inbuf, outbuf, position, datarep)

    def Unpack_external(self, datarep, inbuf, position, outbuf):
        """Unpack_external(self, datarep, inbuf, position, outbuf)

        Unpack from contiguous memory according to datatype.
        """
        return packing.unpack(self, _flat, inbuf, position, outbuf, datarep)

    def Pack_external_size(self, datarep, count):
        """Pack_external_size(self, datarep, count)

        Determine the amount of space needed to pack a message.
        """
        return packing.pack_size(self, count, datarep)

    # ---- life --------------------------------------------------------------

    def Commit(self):
        """Commit(self)

        Commit the datatype.
        """
        self._state().committed = True
        return self

    def Free(self):
        """Free(self)

        Free the datatype.
        """
        self._state()
        if not self._is_predefined():
            self._drop_attrs()
        self._release()

    def __repr__(self):
        return (
            f"<Datatype {self.name}>"
            if self._is_predefined() or not self
            else f"<Datatype {derived.name_of(self.combiner)}>"
        )


def _common(states):
    """The element typecode all of ``states`` share, else None."""
    codes = {s.typecode for s in states}
    return codes.pop() if len(codes) == 1 else None


_F90_KIND = {
    ("i", 1): "b",
    ("i", 2): "h",
    ("i", 4): "i",
    ("i", 8): "l",
    ("f", 4): "f",
    ("f", 8): "d",
    ("f", 16): "g",
    ("c", 8): "F",
    ("c", 16): "D",
    ("c", 32): "G",
}


def _f90(combiner, params, size, kind):
    """A parametrized Fortran type: predefined, of the kind's type of ``size`` bytes."""
    char = _F90_KIND.get((kind, size))
    if char is None:
        raise MPIException(ERR_ARG, f"no {derived.name_of(combiner)} type for {params}")
    code = f"{kind}{size}"
    layout = _core.Layout.named([(0, size)], size, size // 2 if kind == "c" else size)
    return Datatype._new(_TypeState("", code, char, code, layout, combiner, params))


def _recreate(oldtype, combiner, params):
    """A datatype from what ``decode`` gave (unpickling, as mpi4py does)."""
    if combiner == "NAMED":
        return oldtype
    if combiner == "DUP":
        return oldtype.Dup()
    if combiner == "STRUCT":
        return Datatype.Create_struct(**params)
    if combiner.startswith("F90_"):
        return getattr(Datatype, "Create_" + combiner.lower())(**params)
    return getattr(oldtype, "Create_" + combiner.lower())(**params)


B = Datatype._basic
DATATYPE_NULL = Datatype()
BYTE = B("MPI_BYTE", "B", 1, "B")
PACKED = B("MPI_PACKED", "B", 1, "B")
CHAR = B("MPI_CHAR", "c", 1, "c")
WCHAR = B("MPI_WCHAR", "I", 4, "U")
SIGNED_CHAR = B("MPI_SIGNED_CHAR", "b", 1, "b")
UNSIGNED_CHAR = B("MPI_UNSIGNED_CHAR", "B", 1, "B")
SHORT = SIGNED_SHORT = B("MPI_SHORT", "h", 2, "h")
UNSIGNED_SHORT = B("MPI_UNSIGNED_SHORT", "H", 2, "H")
INT = SIGNED_INT = B("MPI_INT", "i", 4, "i")
UNSIGNED = UNSIGNED_INT = B("MPI_UNSIGNED", "I", 4, "I")
LONG = SIGNED_LONG = B("MPI_LONG", "l", 8, "l")
UNSIGNED_LONG = B("MPI_UNSIGNED_LONG", "L", 8, "L")
LONG_LONG = SIGNED_LONG_LONG = B("MPI_LONG_LONG_INT", "q", 8, "q")
UNSIGNED_LONG_LONG = B("MPI_UNSIGNED_LONG_LONG", "Q", 8, "Q")
FLOAT = FLOAT32_T = B("MPI_FLOAT", "f", 4, "f")
DOUBLE = FLOAT64_T = B("MPI_DOUBLE", "d", 8, "d")
LONG_DOUBLE = B("MPI_LONG_DOUBLE", "g", 16, "g")
C_BOOL = BOOL = B("MPI_C_BOOL", "?", 1, "?", "b1")
INT8_T = SINT8_T = B("MPI_INT8_T", "b", 1, "b", "i1")
INT16_T = SINT16_T = B("MPI_INT16_T", "h", 2, "h", "i2")
INT32_T = SINT32_T = B("MPI_INT32_T", "i", 4, "i", "i4")
INT64_T = SINT64_T = B("MPI_INT64_T", "q", 8, "l", "i8")
UINT8_T = B("MPI_UINT8_T", "B", 1, "B", "u1")
UINT16_T = B("MPI_UINT16_T", "H", 2, "H", "u2")
UINT32_T = B("MPI_UINT32_T", "I", 4, "I", "u4")
UINT64_T = B("MPI_UINT64_T", "Q", 8, "L", "u8")
FLOAT16_T = B("MPIX_C_FLOAT16", "e", 2, "e")
C_FLOAT_COMPLEX = C_COMPLEX = B("MPI_C_COMPLEX", "F", 8, "F")
C_DOUBLE_COMPLEX = B("MPI_C_DOUBLE_COMPLEX", "D", 16, "D")
C_LONG_DOUBLE_COMPLEX = B("MPI_C_LONG_DOUBLE_COMPLEX", "G", 32, "G")
CXX_BOOL = B("MPI_CXX_BOOL", "?", 1, "?")
CXX_FLOAT_COMPLEX = B("MPI_CXX_FLOAT_COMPLEX", "F", 8, "F")
CXX_DOUBLE_COMPLEX = B("MPI_CXX_DOUBLE_COMPLEX", "D", 16, "D")
CXX_LONG_DOUBLE_COMPLEX = B("MPI_CXX_LONG_DOUBLE_COMPLEX", "G", 32, "G")
AINT = B("MPI_AINT", "l", 8, "p")
OFFSET = B("MPI_OFFSET", "q", 8, "p")
COUNT = B("MPI_COUNT", "q", 8, "p")
# The pair types (MINLOC/MAXLOC): a value and an int, padded as C pads
# them; the core reduces them as whole items of their extent.
FLOAT_INT = B("MPI_FLOAT_INT", "fi", 8, None, parts=[(0, 8)])
DOUBLE_INT = B("MPI_DOUBLE_INT", "di", 16, None, parts=[(0, 16)])
LONG_INT = B("MPI_LONG_INT", "li", 16, None, parts=[(0, 16)])
TWOINT = INT_INT = B("MPI_2INT", "ii", 8, None, parts=[(0, 8)])
SHORT_INT = B("MPI_SHORT_INT", "hi", 8, None, parts=[(0, 8)])
LONG_DOUBLE_INT = B("MPI_LONG_DOUBLE_INT", "gi", 32, None, parts=[(0, 32)])
# Fortran's, as MPICH has them with gfortran (the null datatype where MPICH has none).
CHARACTER = B("MPI_CHARACTER", "c", 1, "c")
LOGICAL = F_BOOL = B("MPI_LOGICAL", "i", 4, "i")
INTEGER = F_INT = B("MPI_INTEGER", "i", 4, "i")
REAL = F_FLOAT = B("MPI_REAL", "f", 4, "f")
DOUBLE_PRECISION = F_DOUBLE = B("MPI_DOUBLE_PRECISION", "d", 8, "d")
COMPLEX = F_COMPLEX = F_FLOAT_COMPLEX = B("MPI_COMPLEX", "F", 8, "F")
DOUBLE_COMPLEX = F_DOUBLE_COMPLEX = B("MPI_DOUBLE_COMPLEX", "D", 16, "D")
INTEGER1 = B("MPI_INTEGER1", "i1", 1, "b", "i1")
INTEGER2 = B("MPI_INTEGER2", "i2", 2, "h", "i2")
INTEGER4 = B("MPI_INTEGER4", "i4", 4, "i", "i4")
INTEGER8 = B("MPI_INTEGER8", "i8", 8, "l", "i8")
REAL4 = B("MPI_REAL4", "f4", 4, "f", "f4")
REAL8 = B("MPI_REAL8", "f8", 8, "d", "f8")
REAL16 = B("MPI_REAL16", "f16", 16, "g", "f16")
COMPLEX8 = B("MPI_COMPLEX8", "c8", 8, "F", "c8")
COMPLEX16 = B("MPI_COMPLEX16", "c16", 16, "D", "c16")
COMPLEX32 = B("MPI_COMPLEX32", "c32", 32, "G", "c32")
BFLOAT16_T = COMPLEX4 = INTEGER16 = REAL2 = DATATYPE_NULL
LOGICAL1 = LOGICAL2 = LOGICAL4 = LOGICAL8 = LOGICAL16 = DATATYPE_NULL
del B

for _name, _dt in list(globals().items()):
    if isinstance(_dt, Datatype) and _name.isupper():
        predefine(_dt, _name)

# mpi4py's ``fromcode`` table (``MPI._typedict``), as it is with MPICH.
_typedict = {
    "?": C_BOOL,
    "b": SIGNED_CHAR,
    "h": SHORT,
    "i": INT,
    "l": LONG,
    "q": LONG_LONG,
    "B": UNSIGNED_CHAR,
    "H": UNSIGNED_SHORT,
    "I": UNSIGNED,
    "L": UNSIGNED_LONG,
    "Q": UNSIGNED_LONG_LONG,
    "e": FLOAT16_T,
    "f": FLOAT,
    "d": DOUBLE,
    "g": LONG_DOUBLE,
    "Zf": C_FLOAT_COMPLEX,
    "Zd": C_DOUBLE_COMPLEX,
    "F": C_FLOAT_COMPLEX,
    "D": C_DOUBLE_COMPLEX,
    "Zg": C_LONG_DOUBLE_COMPLEX,
    "G": C_LONG_DOUBLE_COMPLEX,
    "i1": INT8_T,
    "i2": INT16_T,
    "i4": INT32_T,
    "i8": INT64_T,
    "f4": FLOAT,
    "f8": DOUBLE,
    "f16": LONG_DOUBLE,
    "c8": C_FLOAT_COMPLEX,
    "c16": C_DOUBLE_COMPLEX,
    "c32": C_LONG_DOUBLE_COMPLEX,
    "b1": C_BOOL,
    "u1": UINT8_T,
    "u2": UINT16_T,
    "u4": UINT32_T,
    "u8": UINT64_T,
    "f2": FLOAT16_T,
    "n": COUNT,
    "N": UNSIGNED_LONG,
    "p": AINT,
    "P": UNSIGNED_LONG,
    "c": CHAR,
    "a": CHAR,
    "S": CHAR,
    "S1": CHAR,
    "s": CHAR,
    "1s": CHAR,
    "U": WCHAR,
    "U1": WCHAR,
    "u": UINT16_T,
    "1u": UINT16_T,
    "w": WCHAR,
    "1w": WCHAR,
    "M": INT64_T,
    "M8": INT64_T,
    "m": INT64_T,
    "m8": INT64_T,
}


def from_typecode(code):
    """The datatype for a buffer format or typecode string such as ``'d'``
    or ``'i4'`` (KeyError if none, as mpi4py)."""
    if code[:1] in ("@", "<", "="):  # native, or little-endian as this machine is
        code = code[1:]
    elif code[:1] in (">", "!"):
        raise BufferError(f"format string {code!r} with non-native byte order")
    try:
        return _typedict[code]
    except KeyError:
        raise KeyError(f"cannot map {code!r} to MPI datatype") from None


def _as_datatype(dt):
    if isinstance(dt, Datatype):
        return dt
    if isinstance(dt, str):
        return from_typecode(dt)
    raise TypeError(f"expected a Datatype or typecode string, got {type(dt).__name__}")


def as_view(buf, writable=False):
    """A C-contiguous memoryview of any buffer mpi4py accepts (None: empty):
    the buffer protocol, in C or Fortran order, DLPack, the CUDA array
    interface, checked as mpi4py checks them."""
    if buf is None:  # mpi4py's empty message (with PROC_NULL, count 0)
        return memoryview(bytearray())
    try:
        mv = memoryview(buf)
    except TypeError:
        mv = _foreign(buf, writable)
    if writable and mv.readonly:
        raise TypeError("receive buffer is read-only")
    return mv if mv.c_contiguous else _foreign(mv, writable)


def _foreign(buf, writable=False):
    """A view of the memory an object shows otherwise than as a C-contiguous
    buffer: through DLPack or the CUDA array interface, or (a memoryview)
    in Fortran order; read as mpi4py reads them (``span``)."""
    from . import cai, dlpack, span

    if isinstance(buf, memoryview):
        at = span.fortran(buf)
    else:
        for read in (dlpack.read, cai.read):
            try:
                at = read(buf, writable)
                break
            except NotImplementedError:
                pass
        else:
            raise TypeError(f"expected a buffer object, got {type(buf).__name__}")
    holder = _Interface()
    holder.at(at.address, at.nbytes, at.readonly)
    holder.device, holder.owner = at.device, at.owner
    raw = memoryview(holder)
    if at.format == "B":
        return raw
    try:
        return raw.cast(at.format)
    except (TypeError, ValueError):  # not a memoryview's item type: numpy's if it has it
        pass
    try:
        import numpy as np

        fmt = at.format[:-2] + at.format[-1].upper() if at.format[-2:-1] == "Z" else at.format
        return memoryview(np.frombuffer(holder, np.dtype(fmt)))
    except (ImportError, TypeError, ValueError):
        return raw  # as bytes


class _Interface(_core.Memory):
    """Memory a ``span.Span`` names, as a buffer (bytes): keeps the
    memory's ``owner`` alive as long as views of it, and tells its
    ``device`` (``MPI.buffer`` refuses to touch bytes off the host)."""

    device = 1  # DLPack's CPU
    owner = None


def _is_bottom(buf):
    """Whether ``buf`` is ``MPI.BOTTOM`` (address 0)."""
    return isinstance(buf, int) and not isinstance(buf, bool) and buf == 0


def _bytes_and_type(buf, dt, writable):
    """``buf`` as a flat byte view, and ``dt`` or else the type its format names."""
    mv = as_view(buf, writable)
    if dt is None:
        dt = _format_type(mv.format)
    if not mv.nbytes:  # an empty array of several dimensions cannot be cast
        return memoryview(bytearray()), dt
    return (mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv), dt


def _flat(buf, writable=False):
    """``buf``'s bytes, as packing reads a buffer (MPI/pack.py)."""
    return _bytes_and_type(buf, BYTE, writable)[0]


def _simple(spec):
    """(buf, count, displ, datatype) from a buffer specification, read as
    mpi4py's ``message_simple`` reads one (None: not given)."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    count = displ = dt = None
    if len(spec) == 2:
        buf, count = spec
        if isinstance(count, (Datatype, str)):
            count, dt = None, count
        elif isinstance(count, (list, tuple)):
            count, displ = count
    elif len(spec) == 3:
        buf, count, dt = spec
        if isinstance(count, (list, tuple)):
            count, displ = count
    elif len(spec) == 4:
        buf, count, displ, dt = spec
    else:
        raise ValueError("message: expecting 2 to 4 items")
    return buf, count, displ, dt


def _positive_extent(dt, doing):
    if not dt:
        raise ValueError(f"message: cannot {doing}, datatype is null")
    lb, extent = dt.Get_extent()
    if extent <= 0:
        raise ValueError(f"message: cannot {doing}, datatype extent {extent} (lb:{lb}, ub:{lb + extent})")
    return extent


# Buffer formats met so far: (datatype, item size) where the format's
# predefined datatype is dense with the format's item size, else False
# (`parse`'s fast path).
_plain_formats = {}


def _plain(spec, writable):
    """``parse`` of the common case, a C-contiguous buffer given alone
    (numpy array, bytearray) of a plain format: what the full rules give,
    without them (a send or receive's cost on one host is mostly here)."""
    try:
        mv = memoryview(spec)
    except TypeError:
        return None
    known = _plain_formats.get(mv.format)
    if known is None:
        known = _plain_formats[mv.format] = _plain_type(mv.format)
    if not known or not mv.c_contiguous or (writable and mv.readonly) or not mv.nbytes:
        return None
    dt, size = known
    if mv.itemsize != size:
        return None
    return (mv if mv.ndim == 1 and mv.format == "B" else mv.cast("B")), dt, mv.nbytes // size


def _format_type(fmt):
    """The datatype a buffer's format names (bytes: BYTE)."""
    return from_typecode(fmt) if fmt not in ("", "B") else BYTE


def _plain_type(fmt):
    try:
        dt = _format_type(fmt)
    except (KeyError, BufferError):
        return False
    item = dt._state().item  # `is_plain`'s rule, with the item's size
    return (dt, item) if item is not None else False


def _plain_typed(buf, dt, writable):
    """``parse`` of ``[buf, dt]`` where ``buf`` is taken as given (`_plain`)
    and ``dt`` is plain (`is_plain`) and fills it whole: the full rules'
    result, without them (many programs name the datatype of every call)."""
    if buf is None or not dt:
        return None
    try:
        item = dt._state().item
    except MPIException:
        return None  # the full rules say what is wrong
    plain = _plain(buf, writable)
    if not item or plain is None or plain[0].nbytes % item:
        return None
    view = plain[0]
    return view, dt, view.nbytes // item


def _register_plain_formats():
    """Tell the core which buffer formats `_plain` takes as given, with
    their item sizes: a send or receive of such a buffer given alone is
    then decided there (``Comm.send_plain``), by this module's rule."""
    found = {}
    for code in ["", *_typedict]:
        for fmt in (code, "@" + code, "<" + code, "=" + code):
            known = _plain_type(fmt)
            if known:
                found[fmt] = known[1]
    _core.set_plain_formats(found)


def parse(spec, writable=False, blocks=1):
    """(bytes view, datatype, count) for a buffer specification, with
    mpi4py's rules and errors; for a collective's buffer of ``blocks``
    blocks (one per rank), the count is per block, as mpi4py reads it."""
    if blocks == 1 and spec is not None:
        if isinstance(spec, (list, tuple)):
            fast = (
                _plain_typed(spec[0], spec[1], writable) if len(spec) == 2 and isinstance(spec[1], Datatype) else None
            )
        else:
            fast = None if isinstance(spec, int) else _plain(spec, writable)
        if fast is not None:
            return fast
    buf, count, displ, dt = _simple(spec)
    if dt is not None:
        dt = _as_datatype(dt)
    if count is not None:
        count = operator.index(count)
        if count < 0:
            raise ValueError(f"message: negative count {count}")
        if count > 0 and buf is None:
            raise ValueError(f"message: buffer is None but count is {count}")
    if _is_bottom(buf):  # displacements are addresses
        if dt is None:
            raise ValueError("message: BOTTOM needs a datatype")
        items = (count or 0) * blocks
        return (_laid_out(None, dt, items, writable) if items else memoryview(bytearray())), dt, count or 0
    raw, dt = _bytes_and_type(buf, dt, writable)
    offset = 0
    if displ is not None:
        displ = operator.index(displ)
        if displ < 0:
            raise ValueError(f"message: negative displacement {displ}")
        if displ > 0:
            extent = _positive_extent(dt, "handle displacement")
            if displ * extent > raw.nbytes:
                raise ValueError(
                    f"message: displacement {displ} out of bounds, number of datatype entries {raw.nbytes // extent}"
                )
            offset = displ * extent
    length = raw.nbytes - offset
    if count is not None:
        items = count * blocks
    elif length > 0:
        extent = _positive_extent(dt, "infer count")
        if length % extent:
            raise ValueError(
                f"message: cannot infer count, buffer length {length} is not a multiple of datatype extent {extent}"
            )
        items = length // extent
        if blocks > 1 and items % blocks:
            raise ValueError(
                f"message: cannot infer count, number of entries {items} is not a multiple of required number of blocks {blocks}"
            )
        count = items // blocks
    else:
        count = items = 0
    if not items:
        return raw[offset:offset], dt, count
    if not dt:
        raise ValueError("message: datatype is null")
    layout = dt._layout
    if not layout.dense:
        return _laid_out(raw, dt, items, writable, -offset), dt, count
    stop = offset + items * layout.size
    if stop > raw.nbytes:
        raise ValueError(
            f"message: buffer of {raw.nbytes} bytes too small for {count} x {dt.name} at displacement {displ or 0}"
        )
    return raw[offset:stop], dt, count


class _Staged(bytearray):
    """A receive's bytes for a derived datatype whose items are not side by
    side: received here, then spread into the user's buffer (``settle``)."""

    __slots__ = ("target", "layout", "items", "origin")


def _laid_out(raw, dt, items, writable, origin=0, base=0):
    """The packed bytes of ``items`` items of ``dt`` in ``raw``, whose first
    byte is at displacement ``origin`` from the first item (None: at
    ``BOTTOM``: the first item is at address ``base``): for a send, packed
    now; for a receive, where to receive them, spread when ``settle`` is
    called."""
    layout = dt._layout
    if raw is None:
        lo, hi = layout.span(items)
        memory = _core.Memory()  # the bytes at their addresses
        memory.at(base + lo, hi - lo, not writable)
        raw, origin = memoryview(memory), lo
    if not writable:
        return memoryview(layout.pack(items, raw, origin))
    lo, hi = layout.span(items)
    if lo < hi and (lo - origin < 0 or hi - origin > raw.nbytes):
        raise ValueError(f"buffer of {raw.nbytes} bytes too small for {items} x a datatype spanning bytes {lo}..{hi}")
    staged = _Staged(layout.size * items)
    staged.target, staged.layout, staged.items, staged.origin = raw, layout, items, origin
    return memoryview(staged)


def settle(view, nbytes=None):
    """After a receive into ``view``: spread what arrived (``nbytes``, else
    all of it) over the receive buffer if ``view`` was staged (``_laid_out``)."""
    staged = view.obj if isinstance(view, memoryview) else None
    if isinstance(staged, _Staged):
        got = memoryview(staged)[: staged.layout.size * staged.items if nbytes is None else nbytes]
        staged.layout.unpack(staged.items, got, staged.target, staged.origin)


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
    if _is_bottom(buf) and (counts is None or displs is None):
        raise ValueError(f"message: BOTTOM requires {'counts' if counts is None else 'displs'}")
    types = [_as_datatype(t) for t in types] if isinstance(types, (list, tuple)) else [_as_datatype(types)] * nranks
    counts = [1] * nranks if counts is None else [int(c) for c in counts]
    displs = [0] * nranks if displs is None else [int(d) for d in displs]
    if not len(types) == len(counts) == len(displs) == nranks:
        raise ValueError(f"counts, displacements and types need one entry per rank ({nranks})")
    bottom = _is_bottom(buf)  # displacements are addresses
    raw = None if bottom else _bytes_and_type(buf, BYTE, writable)[0]
    views = []
    for c, d, t in zip(counts, displs, types):
        layout = t._layout
        if c < 0 or (d < 0 and not bottom):
            raise ValueError(f"block of {c} x {t.name} at byte {d}: negative count or displacement")
        if not c:
            views.append(memoryview(bytearray()))
        elif bottom or not layout.dense:
            views.append(_laid_out(raw, t, c, writable, -d, base=d if bottom else 0))
        elif d + c * layout.size > raw.nbytes:
            raise ValueError(f"block of {c} x {t.name} at byte {d} is outside a buffer of {raw.nbytes} bytes")
        else:
            views.append(raw[d : d + c * layout.size])
    return views


_PAIRS = {"fi": "fi", "di": "di", "li": "li", "ii": "2i", "hi": "si"}
_KINDS = {
    **dict.fromkeys("bhilqn", "i"),
    **dict.fromkeys("BHILQN", "u"),
    "f": "f",
    "d": "f",
    "F": "c",
    "D": "c",
    "?": "b",
}


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


def _index_or_none(value):
    """``value`` as an int if it is one (numpy scalars too), else None."""
    try:
        return operator.index(value)
    except TypeError:
        return None


def parse_v(spec, nranks, writable=False):
    """(whole buffer as bytes, datatype, counts, displacements) for a vector
    specification, in elements, read as mpi4py's ``message_vector`` reads
    one: ``buf``, ``[buf, counts]``, ``[buf, datatype]``,
    ``[buf, counts, datatype]``, ``[buf, counts, displs, datatype]``, where
    a tuple in place of counts is ``(counts, displs)``; counts None: the
    buffer split as evenly as it goes, an int: that many for every rank;
    displs None: packed, an int: that stride."""
    buf, counts, displs, dt = spec, None, None, None
    if isinstance(spec, (list, tuple)):
        if len(spec) == 2:
            buf, counts = spec
            if isinstance(counts, (Datatype, str)):
                counts, dt = None, counts
        elif len(spec) == 3:
            buf, counts, dt = spec
        elif len(spec) == 4:
            buf, counts, displs, dt = spec
        else:
            raise ValueError("message: expecting 2 to 4 items")
        if isinstance(counts, tuple) and len(spec) in (2, 3):
            counts, displs = counts
    if _is_bottom(buf):  # vector collectives take BOTTOM only for empty messages: no blocks fit in it
        raw, dt = memoryview(bytearray()), BYTE if dt is None else _as_datatype(dt)
    else:
        raw, dt = _bytes_and_type(buf, None if dt is None else _as_datatype(dt), writable)
    if counts is None:
        items = 0
        if raw.nbytes:
            extent = _positive_extent(dt, "infer count")
            if raw.nbytes % extent:
                raise ValueError(
                    f"message: cannot infer count, buffer length {raw.nbytes} is not a multiple of datatype extent {extent}"
                )
            items = raw.nbytes // extent
        counts = [items // nranks + (items % nranks > i) for i in range(nranks)]
    elif (one := _index_or_none(counts)) is not None:
        counts = [one] * nranks
    counts = [operator.index(c) for c in counts]
    if displs is None:
        displs, at = [], 0
        for c in counts:
            displs.append(at)
            at += c
    elif (stride := _index_or_none(displs)) is not None:
        displs = [stride * i for i in range(nranks)]
    displs = [operator.index(d) for d in displs]
    if len(counts) != nranks or len(displs) != nranks:
        raise ValueError(f"counts and displacements need one entry per rank ({nranks})")
    # Displacements count extents; a derived datatype's blocks are checked
    # where they are laid out (``_laid_out``).
    size = dt.Get_size() if is_plain(dt) else 0
    for c, d in zip(counts, displs):
        if c < 0 or d < 0 or (d + c) * size > raw.nbytes:
            raise ValueError(f"block of {c} x {dt.name} at displacement {d} is outside a buffer of {raw.nbytes} bytes")
    return raw, dt, counts, displs


def is_plain(dt):
    """Whether ``dt``'s items lie side by side from its start, an item's
    size apart: a count of them is a plain run of bytes."""
    return dt._state().item is not None


def blocks_v(spec, nranks, writable=False):
    """Per rank, its block of a vector specification (``parse_v``'s), where
    MPI puts it (displacements count the datatype's extent): a slice of the
    buffer for a plain datatype, else its items laid out (packed for a
    send; staged for a receive, spread over the buffer by ``settle``)."""
    raw, dt, counts, displs = parse_v(spec, nranks, writable)
    if is_plain(dt):
        size = dt.Get_size()
        return [raw[d * size : (d + c) * size] for c, d in zip(counts, displs)]
    extent = _positive_extent(dt, "place blocks") if any(counts) else 0
    return [
        _laid_out(raw, dt, c, writable, -d * extent) if c else memoryview(bytearray()) for c, d in zip(counts, displs)
    ]


_register_plain_formats()

#: What ``from .datatype import *`` gives: the MPI constants.
__all__ = [n for n in list(globals()) if n.isupper() and not n.startswith("_")]
