"""Bytes at an address that an object owns: how ``datatype.as_view`` gets
the buffers mpi4py takes besides C-contiguous buffer-protocol ones (its
``PyMPI_GetBuffer``): DLPack (``dlpack.read``), the CUDA array interface
(``cai.read``) and buffers contiguous in Fortran order (``fortran``).
"""

import ctypes
from collections import namedtuple

#: ``address``, ``nbytes``, ``readonly``; ``format``: the items' struct
#: format ("B": bytes); ``device``: the DLPack device type the exporter
#: advertises; ``owner``: what keeps the memory alive (mpi4py's view.obj).
Span = namedtuple("Span", "address nbytes readonly format device owner")

# DLPack device types (dlpack.h)
CPU, CUDA, CUDA_HOST, ROCM_HOST, CUDA_MANAGED = 1, 2, 3, 11, 13
#: Devices whose memory the CPU reads (mpi4py's ``check_cpu_accessible``).
HOST = frozenset((CPU, CUDA_HOST, ROCM_HOST, CUDA_MANAGED))


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_ANY_CONTIGUOUS = 0x0080 | 0x0018  # with PyBUF_STRIDES
_api = ctypes.pythonapi
_api.PyObject_GetBuffer.restype = ctypes.c_int
_api.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_api.PyBuffer_Release.restype = None
_api.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]


def fortran(view):
    """A memoryview contiguous in Fortran order, as the run of bytes it is
    (mpi4py asks buffers for ``PyBUF_ANY_CONTIGUOUS``)."""
    if not view.f_contiguous:
        raise BufferError("buffer is not contiguous")
    pb = _PyBuffer()
    if _api.PyObject_GetBuffer(view, ctypes.byref(pb), _PyBUF_ANY_CONTIGUOUS):  # raises
        raise BufferError("buffer is not contiguous")
    address = pb.buf or 0  # the view itself keeps the memory exported
    _api.PyBuffer_Release(ctypes.byref(pb))
    return Span(address, view.nbytes, view.readonly, view.format, CPU, view)
