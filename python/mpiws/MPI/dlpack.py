"""Host memory an object exposes through DLPack (``__dlpack__``), as an
``__array_interface__`` dict for a numpy view (``datatype._foreign``).

The capsule is read, not consumed: it stays named ``dltensor`` and is kept
alive beside the view, so the exporter's own capsule destructor releases
the tensor when the view goes. Only CPU memory, C-contiguous.
"""

import ctypes
import sys


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_uint), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _ManagedVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


_READ_ONLY = 1
_CPU, _CUDA_HOST = 1, 3
# DLPack type codes -> numpy typestr kinds (int, uint, float, complex, bool)
_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def array_interface(obj):
    """(``__array_interface__`` dict, capsule to keep alive) for ``obj``'s tensor."""
    capsule = obj.__dlpack__()
    if _api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, b"dltensor_versioned"), ctypes.POINTER(_ManagedVersioned))
        t, readonly = managed.contents.dl_tensor, bool(managed.contents.flags & _READ_ONLY)
    elif _api.PyCapsule_IsValid(capsule, b"dltensor"):
        t, readonly = ctypes.cast(_api.PyCapsule_GetPointer(capsule, b"dltensor"), ctypes.POINTER(_Managed)).contents.dl_tensor, False
    else:
        raise BufferError("__dlpack__ did not return a DLPack capsule")
    if t.device.device_type not in (_CPU, _CUDA_HOST):
        raise BufferError(f"DLPack: device type {t.device.device_type} is not host memory")
    kind = _KINDS.get(t.dtype.code)
    if kind == "f" and t.dtype.lanes == 2:  # a complex as two float lanes
        kind = "c"
    elif t.dtype.lanes != 1:
        kind = None
    if kind is None or t.dtype.bits % 8:
        raise BufferError(f"DLPack: unsupported data type code {t.dtype.code}, {t.dtype.bits} bits")
    itemsize = t.dtype.bits // 8 * t.dtype.lanes
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        expect = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != expect:
                raise BufferError("DLPack: the tensor is not C-contiguous")
            expect *= shape[i]
    order = "|" if itemsize == 1 else ("<" if sys.byteorder == "little" else ">")
    iface = {"version": 3, "data": ((t.data or 0) + t.byte_offset, readonly), "typestr": f"{order}{kind}{itemsize}",
             "shape": shape, "strides": None}
    return iface, capsule
