"""``MPI.buffer`` (``MPI.memory``), ``Alloc_mem``/``Free_mem`` and the
buffer ``Attach_buffer`` keeps, as mpi4py has them; mpi4py's test_buffer
and test_mpimem pass on top of these (docs/mpi4py-compat.md)."""

import array
import gc

import numpy as np
import pytest

from mpiws import MPI


def test_a_buffer_over_another_objects_memory():
    obj = bytearray(b"abcdef")
    buf = MPI.buffer(obj)
    assert (buf.obj is obj, buf.nbytes, buf.readonly, len(buf), buf.format) == (True, 6, False, 6, "B")
    buf[1:3] = b"XY"
    buf[0] = 0x7A
    assert obj == b"zXYdef" and buf[-1] == ord("f") and buf[2:4].tobytes() == b"Yd"
    with pytest.raises(ValueError):
        buf[0:1] = b"too long"
    with pytest.raises(IndexError):
        buf[6]
    with pytest.raises(IndexError):
        buf[::2]
    ro = MPI.buffer(b"const")
    assert ro.readonly and buf.toreadonly().readonly and buf.toreadonly().address == buf.address
    with pytest.raises(TypeError):
        ro[:] = 0
    with pytest.raises(TypeError):
        MPI.buffer(None)
    with pytest.raises(BufferError):
        MPI.buffer.frombuffer(b"const", readonly=False)


def test_allocate_cast_and_release_with_views_open():
    mem = MPI.Alloc_mem(24)
    assert type(mem) is MPI.buffer and mem.address and mem.nbytes == 24 and mem[0] == 0
    ints = mem.cast("i", (2, 3))
    ints[1, 2] = 42
    MPI.Free_mem(mem)
    assert (mem.address, mem.nbytes, mem.obj) == (0, 0, None)
    gc.collect()
    assert ints[1, 2] == 42  # the memory a view still shows stays valid after Free_mem
    with pytest.raises(ValueError):
        MPI.buffer.allocate(-1)


def test_raw_memory_by_address():
    arr = array.array("B", [1, 2, 3])
    address, n = arr.buffer_info()
    raw = MPI.buffer.fromaddress(address, n)
    raw[:] = 9
    assert list(arr) == [9, 9, 9] and raw.obj is None
    with pytest.raises(ValueError):
        MPI.buffer.fromaddress(0, 1)
    with pytest.raises(ValueError):
        MPI.buffer.fromaddress(address, -1)


def test_attach_buffer_keeps_a_buffer_and_refuses_read_only_memory():
    data = np.zeros(1 << 12, "B")
    MPI.Attach_buffer(data)
    got = MPI.Detach_buffer()
    assert isinstance(got, MPI.buffer) and got.address == data.ctypes.data and got.nbytes == data.nbytes
    with pytest.raises(BufferError):
        MPI.Attach_buffer(MPI.buffer(b"read-only"))
