"""The memory an object exposes through DLPack (``__dlpack__`` and
``__dlpack_device__``), read and checked as mpi4py does
(``asdlpack.pxi``: ``Py_GetDLPackBuffer``), errors and messages included.

The capsule is read, not consumed: it stays named ``dltensor``(``_versioned``)
and is the span's owner, kept alive beside the view, so the exporter's own
capsule destructor releases the tensor when the view goes. Any device is
taken, its pointer passed on as mpi4py passes it to MPI (``MPI.buffer``
refuses to touch bytes off the host).
"""

import ctypes
import operator
import struct

from .span import CPU, Span


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_uint), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _ManagedVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _Tensor),
    ]


_READ_ONLY = 1
_INT, _UINT, _FLOAT, _COMPLEX, _BOOL = 0, 1, 2, 5, 6
_LONG_DOUBLE = ctypes.sizeof(ctypes.c_longdouble)
#: type code -> {bytes: struct format}, the first C type of each size (mpi4py's ``dlpack_get_format``)
_FORMATS = {
    code: {size: fmt for fmt, size in reversed(pairs)}
    for code, pairs in {
        _INT: [(c, struct.calcsize(c)) for c in "bhilq"],
        _UINT: [(c, struct.calcsize(c)) for c in "BHILQ"],
        _FLOAT: [("e", 2), ("f", 4), ("d", 8), ("g", _LONG_DOUBLE)],
        _COMPLEX: [("Ze", 4), ("Zf", 8), ("Zd", 16), ("Zg", 2 * _LONG_DOUBLE)],
        _BOOL: [("?", 1)],
    }.items()
}

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def read(obj, writable=False):
    """``obj``'s tensor as a ``Span``; NotImplementedError if ``obj`` does not speak DLPack."""
    try:
        dlpack, dlpack_device = obj.__dlpack__, obj.__dlpack_device__
    except AttributeError:
        raise NotImplementedError("dlpack: missing support") from None
    device_type, device_id = dlpack_device()
    device_type, _ = operator.index(device_type), operator.index(device_id)
    stream = {} if device_type == CPU else {"stream": -1}
    try:  # DLPack 1.0+
        capsule, name = dlpack(**stream, max_version=(1, 0), copy=False), b"dltensor_versioned"
    except TypeError:  # DLPack 0.x
        capsule, name = dlpack(**stream), b"dltensor"
    if not _api.PyCapsule_IsValid(capsule, name):
        raise BufferError("dlpack: invalid capsule object")
    pointer = _api.PyCapsule_GetPointer(capsule, name)
    if name == b"dltensor":
        t, readonly = ctypes.cast(pointer, ctypes.POINTER(_Managed)).contents.dl_tensor, False
    else:
        managed = ctypes.cast(pointer, ctypes.POINTER(_ManagedVersioned)).contents
        if managed.major < 1:
            raise BufferError("dlpack: unexpected version")
        t, readonly = managed.dl_tensor, bool(managed.flags & _READ_ONLY)
    shape = _check_shape(t)
    if writable and readonly:
        raise BufferError("dlpack: buffer is not writable")
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    nbytes = (bits * lanes + 7) // 8
    for n in shape:
        nbytes *= n
    if lanes == 1:
        fmt = _FORMATS.get(code, {}).get(bits / 8, "B")
    else:  # a complex as two float lanes, else bytes
        fmt = {32: "Zf", 64: "Zd", 8 * _LONG_DOUBLE: "Zg"}.get(bits, "B") if code == _FLOAT and lanes == 2 else "B"
    return Span((t.data or 0) + t.byte_offset, nbytes, readonly, fmt, device_type, capsule)


def _check_shape(t):
    """The tensor's shape, checked as mpi4py checks shape, strides and contiguity."""
    if t.ndim < 0:
        raise BufferError("dlpack: number of dimensions is negative")
    if t.ndim > 0 and not t.shape:
        raise BufferError("dlpack: shape is NULL")
    shape = [t.shape[i] for i in range(t.ndim)]
    if any(n < 0 for n in shape):
        raise BufferError("dlpack: shape item is negative")
    if not t.strides:  # C-contiguous
        return shape
    strides = [t.strides[i] for i in range(t.ndim)]
    if any(s < 0 for s in strides):
        raise BufferError("dlpack: strides item is negative")
    if not (_contiguous(reversed(shape), reversed(strides)) or _contiguous(shape, strides)):
        raise BufferError("dlpack: buffer is not contiguous")
    return shape


def _contiguous(shape, strides):
    """Whether strides (in items) lay the dimensions out innermost first."""
    size = 1
    for n, s in zip(shape, strides):
        if n > 1 and s != size:
            return False
        size *= n
    return True
