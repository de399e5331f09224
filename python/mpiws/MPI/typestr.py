"""mpi4py's private datatype queries that ``mpi4py.util.dtlib``
(``mpiws.util.dtlib``) builds on: ``_typecode`` (the character code or type
string of a predefined datatype, or of a duplicate of one) and
``_typealign`` (its C alignment), as mpi4py's ``typestr.pxi`` has them.
"""

import ctypes
import functools

from . import datatype as _dt, derived as _derived

#: C alignment by struct/numpy character code (alignof in C).
_ALIGN = {
    "?": ctypes.alignment(ctypes.c_bool),
    "b": 1,
    "B": 1,
    "c": 1,
    "S": 1,
    "h": ctypes.alignment(ctypes.c_short),
    "H": ctypes.alignment(ctypes.c_short),
    "i": ctypes.alignment(ctypes.c_int),
    "I": ctypes.alignment(ctypes.c_int),
    "l": ctypes.alignment(ctypes.c_long),
    "L": ctypes.alignment(ctypes.c_long),
    "q": ctypes.alignment(ctypes.c_longlong),
    "Q": ctypes.alignment(ctypes.c_longlong),
    "e": ctypes.alignment(ctypes.c_float) // 2,
    "E": ctypes.alignment(ctypes.c_float) // 2,
    "f": ctypes.alignment(ctypes.c_float),
    "F": ctypes.alignment(ctypes.c_float),
    "d": ctypes.alignment(ctypes.c_double),
    "D": ctypes.alignment(ctypes.c_double),
    "g": ctypes.alignment(ctypes.c_longdouble),
    "G": ctypes.alignment(ctypes.c_longdouble),
    "U": ctypes.alignment(ctypes.c_wchar),
    "p": ctypes.alignment(ctypes.c_void_p),
    "P": ctypes.alignment(ctypes.c_void_p),
}


def _named(datatype):
    """The predefined datatype ``datatype`` is, or duplicates (else None)."""
    while datatype:
        if datatype.is_predefined:
            return datatype
        if datatype.combiner != _derived.COMBINER_DUP:
            return None
        datatype = datatype.decode()[0]
    return None


def _typecode(datatype):
    """Map MPI datatype to character code or type string."""
    named = _named(datatype)
    if named is None:
        return None
    try:
        return named.tocode()
    except ValueError:
        return None


def _typealign(datatype):
    """Return MPI datatype alignment."""
    named = _named(datatype)
    if named is None:
        return None
    return _special_align().get(named._h) or _ALIGN.get(named._state().char or "")


@functools.cache
def _special_align():
    """Alignments by predefined handle of the types without a char of their
    own: Fortran's 16-byte kinds and the MAXLOC/MINLOC pairs (built once, at
    the first query)."""
    align = {}
    for n in ("LOGICAL16", "INTEGER16", "REAL16", "COMPLEX32"):
        align[getattr(_dt, n)._h] = 16
    for pair, (a, b) in (
        ("SHORT_INT", "hi"),
        ("INT_INT", "ii"),
        ("LONG_INT", "li"),
        ("FLOAT_INT", "fi"),
        ("DOUBLE_INT", "di"),
        ("LONG_DOUBLE_INT", "gi"),
    ):
        align[getattr(_dt, pair)._h] = max(_ALIGN[a], _ALIGN[b])
    align.pop(0, None)  # a type this platform lacks is the null handle: no alignment
    return align
