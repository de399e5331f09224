"""The memory an object exposes through the CUDA array interface
(``__cuda_array_interface__``), read and checked as mpi4py does
(``ascaibuf.pxi``: ``Py_GetCAIBuffer``), errors and messages included.

The pointer is passed on as mpi4py passes it to MPI: the memory is
advertised as CUDA's (``MPI.buffer`` refuses to touch it), and must be
readable from the host for a message to carry it.
"""

import ctypes
import struct
import sys
import warnings

from .span import CUDA, Span

_LONG_DOUBLE = ctypes.sizeof(ctypes.c_longdouble)
#: typestr kind -> {itemsize: struct format}, the first C type of each size (mpi4py's ``cuda_get_format``)
_FORMATS = {
    kind: {size: fmt for fmt, size in reversed(pairs)}
    for kind, pairs in {
        "b": [("?", 1)],
        "i": [(c, struct.calcsize(c)) for c in "bhilq"],
        "u": [(c, struct.calcsize(c)) for c in "BHILQ"],
        "f": [("e", 2), ("f", 4), ("d", 8), ("g", _LONG_DOUBLE)],
        "c": [("Ze", 4), ("Zf", 8), ("Zd", 16), ("Zg", 2 * _LONG_DOUBLE)],
    }.items()
}
_NATIVE = "<" if sys.byteorder == "little" else ">"


def _typed(value, kind, what):
    """``value`` if it is a ``kind`` (or None), as Cython's typed variables check."""
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{what}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def read(obj, writable=False):
    """``obj``'s array as a ``Span``; NotImplementedError if ``obj`` has no CUDA array interface."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        raise NotImplementedError("missing CUDA array interface") from None
    cai = _typed(cai, dict, "__cuda_array_interface__")
    data = _typed(cai["data"], tuple, "__cuda_array_interface__ data")
    typestr = _typed(cai["typestr"], str, "__cuda_array_interface__ typestr")
    shape = _typed(cai["shape"], tuple, "__cuda_array_interface__ shape")
    strides = _typed(cai.get("strides"), tuple, "__cuda_array_interface__ strides")
    descr = _typed(cai.get("descr"), list, "__cuda_array_interface__ descr")
    mask = cai.get("mask")

    dev_ptr, readonly = data
    size = 1
    for n in shape:
        size *= n
    if dev_ptr is None and size == 0:
        dev_ptr = 0
    if not isinstance(dev_ptr, int):
        raise TypeError(f"__cuda_array_interface__: expected an int pointer, got {type(dev_ptr).__name__}")
    byteorder, kind, itemsize = typestr[0:1], typestr[1:2], int(typestr[2:])
    fmt = _FORMATS.get(kind, {}).get(itemsize, "B")

    if byteorder in ("<", ">") and byteorder != _NATIVE:
        raise BufferError(f"__cuda_array_interface__: typestr {typestr!r} with non-native byte order")
    if byteorder not in ("<", ">", "|"):
        raise BufferError(f"__cuda_array_interface__: typestr {typestr!r} with unrecognized byte order")
    if mask is not None:
        raise BufferError("__cuda_array_interface__: cannot handle masked arrays")
    if size < 0:
        raise BufferError(f"__cuda_array_interface__: buffer with negative size (shape:{shape}, size:{size})")
    if strides is not None and not (
        _contiguous(shape[::-1], strides[::-1], itemsize) or _contiguous(shape, strides, itemsize)
    ):
        raise BufferError(
            f"__cuda_array_interface__: buffer is not contiguous "
            f"(shape:{shape}, strides:{strides}, itemsize:{itemsize})"
        )
    if readonly and writable:
        raise BufferError("__cuda_array_interface__: buffer is not writable")
    if descr is not None and (len(descr) != 1 or descr[0] != ("", typestr)):
        warnings.warn("__cuda_array_interface__: ignoring 'descr' key", RuntimeWarning, stacklevel=2)
    return Span(dev_ptr, size * itemsize, bool(readonly), fmt, CUDA, obj)


def _contiguous(shape, strides, itemsize):
    """Whether strides (in bytes) lay the dimensions out innermost first."""
    size = itemsize
    for n, s in zip(shape, strides):
        if n > 1 and s != size:
            return False
        size *= n
    return True
