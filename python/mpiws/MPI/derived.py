"""What MPI says about a derived datatype besides its layout: the combiner
that made it and its arguments, as ``Get_envelope``/``Get_contents`` give
them (laid out as MPICH lays them out: counts and displacements in the
large-count array) and as ``decode`` gives them (mpi4py's names). The
layout itself (bounds, packing) is the core's (``_core.Layout``)."""

COMBINER_NAMED = 1
COMBINER_DUP = 2
COMBINER_CONTIGUOUS = 3
COMBINER_VECTOR = 4
COMBINER_HVECTOR = 6
COMBINER_INDEXED = 7
COMBINER_HINDEXED = 9
COMBINER_INDEXED_BLOCK = 10
COMBINER_STRUCT = 12
COMBINER_SUBARRAY = 13
COMBINER_DARRAY = 14
COMBINER_F90_REAL = 15
COMBINER_F90_COMPLEX = 16
COMBINER_F90_INTEGER = 17
COMBINER_RESIZED = 18
COMBINER_HINDEXED_BLOCK = 19
COMBINER_VALUE_INDEX = 20

ORDER_C = 56
ORDER_FORTRAN = ORDER_F = 57
DISTRIBUTE_BLOCK = 121
DISTRIBUTE_CYCLIC = 122
DISTRIBUTE_NONE = 123
DISTRIBUTE_DFLT_DARG = -49767
TYPECLASS_REAL = 1
TYPECLASS_INTEGER = 2
TYPECLASS_COMPLEX = 3
TYPECLASS_LOGICAL = 4

_NAMES = {v: k[len("COMBINER_") :] for k, v in globals().items() if k.startswith("COMBINER_")}


def name_of(combiner):
    return _NAMES[combiner]


def ints(values, n=None, what="array"):
    """A list of ints from a sequence, of length ``n`` if given (ValueError
    otherwise, as mpi4py's argument arrays)."""
    values = [int(v) for v in values]
    if n is not None and len(values) != n:
        raise ValueError(f"{what}: expecting {n} items, got {len(values)}")
    return values


def contents(combiner, params, ntypes):
    """(integers, addresses, counts) of ``Get_contents``, from ``decode``'s
    parameters."""
    p = params
    if combiner in (COMBINER_DUP, COMBINER_NAMED, COMBINER_VALUE_INDEX):
        return [], [], []
    if combiner == COMBINER_CONTIGUOUS:
        return [], [], [p["count"]]
    if combiner in (COMBINER_VECTOR, COMBINER_HVECTOR):
        return [], [], [p["count"], p["blocklength"], p["stride"]]
    if combiner in (COMBINER_INDEXED, COMBINER_HINDEXED, COMBINER_STRUCT):
        return [], [], [len(p["blocklengths"]), *p["blocklengths"], *p["displacements"]]
    if combiner in (COMBINER_INDEXED_BLOCK, COMBINER_HINDEXED_BLOCK):
        return [], [], [len(p["displacements"]), p["blocklength"], *p["displacements"]]
    if combiner == COMBINER_SUBARRAY:
        return [len(p["sizes"]), p["order"]], [], [*p["sizes"], *p["subsizes"], *p["starts"]]
    if combiner == COMBINER_DARRAY:
        return (
            [p["size"], p["rank"], len(p["gsizes"]), *p["distribs"], *p["dargs"], *p["psizes"], p["order"]],
            [],
            list(p["gsizes"]),
        )
    if combiner == COMBINER_RESIZED:
        return [], [], [p["lb"], p["extent"]]
    if combiner == COMBINER_F90_INTEGER:
        return [p["r"]], [], []
    return [p["p"], p["r"]], [], []  # F90 real and complex


# F90 parametrized types: the predefined type of the kind with enough
# precision (p decimal digits) and range (10**r), as gfortran's kinds.
def f90_integer_size(r):
    for size, digits in ((1, 2), (2, 4), (4, 9), (8, 18)):
        if r <= digits:
            return size
    return None


def f90_real_size(p, r):
    for size, (digits, exponent) in ((4, (6, 37)), (8, (15, 307)), (16, (33, 4931))):
        if p <= digits and r <= exponent:
            return size
    return None


#: What ``from .derived import *`` gives: the MPI constants.
__all__ = [n for n in list(globals()) if n.isupper() and not n.startswith("_")]
