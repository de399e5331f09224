"""Derived datatypes (MPI/datatype.py over the core's layouts in
crates/core/src/mpi/datatype): constructors' bounds and contents as MPICH
gives them, messages of non-contiguous types packed on the way out and
spread into place on arrival (point-to-point, collectives, BOTTOM
addresses), Pack/Unpack, and the MPI-4 persistent collectives and
partitioned point-to-point that ride on them."""

import array
import ctypes
import pickle

import numpy as np
import pytest

from conftest import assert_ok
from mpiws import MPI


def test_bounds_envelope_and_decode_as_mpich():
    s = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.CHAR])
    assert (s.Get_extent(), s.Get_true_extent(), s.size) == ((0, 16), (0, 9), 9)
    v = MPI.INT.Create_vector(2, 1, -3)
    assert (v.Get_extent(), v.Get_true_extent()) == ((-12, 16), (-12, 16))
    sub = MPI.INT.Create_subarray([4, 4], [2, 2], [1, 1])
    assert sub.Get_envelope() == (2, 0, 6, 1, MPI.COMBINER_SUBARRAY)
    assert sub.Get_contents()[:3] == ([2, MPI.ORDER_C], [], [4, 4, 2, 2, 1, 1])
    assert (sub.Get_extent(), sub.Get_true_extent()) == ((0, 64), (20, 24))
    old, name, params = sub.decode()
    assert old == MPI.INT and name == "SUBARRAY" and params["starts"] == [1, 1]
    back = pickle.loads(pickle.dumps(s))  # a derived type pickles as how it was made
    assert back.decode()[1:] == s.decode()[1:] and back.Get_extent() == (0, 16)
    assert MPI.INT.Dup().tocode() == "i" and MPI.DOUBLE_INT.typestr == "V16"
    with pytest.raises(ValueError):
        MPI.Datatype.Create_struct([1], [0], [MPI.INT, MPI.FLOAT])
    big = MPI.BYTE.Create_contiguous(2**31 + 10)  # one run of bytes, not 2**31 of them
    assert big.size == 2**31 + 10
    for t in (s, v, sub, back, big):
        t.Free()


def _buffers():
    """Buffers a program may give alone: plain formats, and what only the full rules read."""
    plain = [np.arange(5).astype(t) for t in ("i1", "u2", "i4", "i8", "f4", "f8", "c8", "c16", "?", "e")]
    readonly = np.arange(4.0)
    readonly.flags.writeable = False
    others = [
        np.arange(12.0).reshape(3, 4),
        np.arange(12.0).reshape(3, 4).T,  # Fortran order
        np.arange(16.0).reshape(4, 4)[:, ::2],  # strided
        np.zeros(0),
        readonly,
        bytearray(b"abcdef"),
        b"xyz",
        array.array("d", [1.0, 2.0]),
        (ctypes.c_int * 3)(1, 2, 3),  # format "<i"
        memoryview(bytearray(8)).cast("i"),
    ]
    return plain + others


def test_a_buffer_alone_is_decided_in_the_core_exactly_where_the_full_rules_take_it_as_given():
    """`Comm.Send`/`Recv` of a buffer given alone go through `send_plain`/
    `recv_plain` (the format rule registered by MPI/datatype.py): the core
    takes a buffer exactly where `datatype._plain` would, moves the same
    bytes, and leaves the rest to the full rules untouched."""
    from mpiws.MPI import datatype

    core, _ = MPI.COMM_SELF._state().core_and_limit(None)
    common = (np.ndarray, bytearray, bytes, array.array)
    for buf in _buffers():
        raw = bytes(memoryview(buf).cast("B")) if memoryview(buf).c_contiguous else None
        # send
        taken = core.send_plain(0, 7, buf)
        # Never what the full rules must read; always the common buffers
        # (a buffer whose exporter gives no strides, as ctypes', may go either way).
        assert not taken or datatype._plain(buf, False) is not None, (type(buf), memoryview(buf).format)
        assert taken or not isinstance(buf, common) or datatype._plain(buf, False) is None
        if taken:
            assert core.recv(0, 7).bytes() == raw
        assert core.probe(0, 7, 0) is None, "nothing sent where the core declined"
        # receive
        sent = bytes(range(len(raw))) if raw else b"\x01"
        core.send(0, 8, [sent])
        got = core.recv_plain(0, 8, buf)
        if got is None:
            assert datatype._plain(buf, True) is None or not isinstance(buf, common)
            assert core.probe(0, 8, 0) is not None, "the message is left for the full rules"
            core.recv(0, 8)
            continue
        assert datatype._plain(buf, True) is not None
        assert got == (0, 8, len(sent)) and bytes(memoryview(buf).cast("B")) == sent
    # and through the API, with the full rules' errors where they apply
    got = np.zeros(3, "i")
    MPI.COMM_SELF.Send(np.array([4, 5, 6], "i"), 0, 3)
    status = MPI.Status()
    MPI.COMM_SELF.Recv(got, 0, 3, status)
    assert list(got) == [4, 5, 6] and (status.source, status.tag, status.Get_count(MPI.INT)) == (0, 3, 3)
    MPI.COMM_SELF.Send(np.arange(8, dtype="i"), 0, 4)
    with pytest.raises(MPI.Exception) as e:
        MPI.COMM_SELF.Recv(got, 0, 4)
    assert e.value.Get_error_class() == MPI.ERR_TRUNCATE
    with pytest.raises(TypeError, match="read-only"):
        MPI.COMM_SELF.Recv(b"immutable", 0, 4)


def test_a_buffer_with_its_datatype_is_read_as_the_full_rules_read_it():
    """``[buf, datatype]`` of a plain datatype (`datatype._plain_typed`)
    gives what the full rules give, and declines what they must decide."""
    from mpiws.MPI import datatype

    a = np.arange(6, dtype="f8")
    for dt in (MPI.BYTE, MPI.DOUBLE, MPI.INT, MPI.FLOAT):
        fast = datatype._plain_typed(a, dt, False)
        full = datatype.parse([a, None, None, dt])  # the full rules (a 4-item spec)
        assert fast is not None and bytes(fast[0]) == bytes(full[0]) and fast[1:] == full[1:]
    odd = np.zeros(7, "u1")
    assert datatype._plain_typed(odd, MPI.INT, False) is None  # 7 bytes of 4-byte items: the rules' error
    with pytest.raises(ValueError):
        datatype.parse([odd, MPI.INT])
    pair = MPI.INT.Create_contiguous(2).Commit()
    resized = MPI.INT.Create_resized(0, 8).Commit()
    try:
        assert datatype._plain_typed(np.zeros(4, "i"), pair, False) is not None
        assert datatype._plain_typed(np.zeros(4, "i"), resized, False) is None  # items 8 bytes apart
    finally:
        pair.Free()
        resized.Free()
    assert datatype._plain_typed(a, MPI.DATATYPE_NULL, False) is None
    # what is no buffer at all keeps the full rules' error (a bool is an int)
    with pytest.raises(TypeError, match="expected a buffer object, got bool"):
        datatype.parse(True)


def test_non_contiguous_messages_on_one_rank():
    comm = MPI.COMM_SELF
    a = np.arange(16, dtype="i").reshape(4, 4)
    column = MPI.INT.Create_vector(4, 1, 4).Create_resized(0, 4).Commit()
    got = np.full((4, 4), -1, dtype="i")
    comm.Sendrecv([a, 1, column], 0, recvbuf=[got.reshape(-1)[2:], 1, column], source=0)
    assert list(got[:, 2]) == list(a[:, 0]) and (got[:, [0, 1, 3]] == -1).all()
    # a message shorter than the receive type fills its leading elements only
    status = MPI.Status()
    got[:] = -1
    comm.Sendrecv([np.array([7, 8], "i"), MPI.INT], 0, recvbuf=[got, 1, column], source=0, status=status)
    assert list(got[:, 0]) == [7, 8, -1, -1] and status.Get_elements(column) == 2
    assert status.Get_count(column) == MPI.UNDEFINED
    # struct of absolute addresses at BOTTOM
    x, y = np.array([1.5, 2.5]), np.array([3], "i")
    out_x, out_y = np.zeros(2), np.zeros(1, "i")
    send = MPI.Datatype.Create_struct([2, 1], [MPI.Get_address(x), MPI.Get_address(y)], [MPI.DOUBLE, MPI.INT]).Commit()
    recv = MPI.Datatype.Create_struct(
        [2, 1], [MPI.Get_address(out_x), MPI.Get_address(out_y)], [MPI.DOUBLE, MPI.INT]
    ).Commit()
    comm.Sendrecv([MPI.BOTTOM, 1, send], 0, recvbuf=[MPI.BOTTOM, 1, recv], source=0)
    assert list(out_x) == [1.5, 2.5] and out_y[0] == 3
    # a type whose items reach outside the buffer is refused before anything moves
    with pytest.raises(MPI.Exception) as e:
        comm.Send([np.zeros(3, "i"), 1, column], 0)
    assert e.value.Get_error_class() == MPI.ERR_BUFFER
    for t in (column, send, recv):
        t.Free()


def test_pack_unpack_and_external32():
    col = MPI.INT.Create_vector(3, 1, 3).Commit()
    a = np.arange(9, dtype="i")
    buf = bytearray(col.Pack_size(1, MPI.COMM_SELF) + 4)
    end = col.Pack(a, buf, 0, MPI.COMM_SELF)
    assert end == 12 and np.frombuffer(buf[:12], "i").tolist() == [0, 3, 6]
    out = np.zeros(9, "i")
    assert col.Unpack(buf, 0, out, MPI.COMM_SELF) == 12 and out.tolist() == [0, 0, 0, 3, 0, 0, 6, 0, 0]
    ext = bytearray(MPI.INT.Pack_external_size("external32", 2))
    MPI.INT.Pack_external("external32", np.array([1, 2], "i"), ext, 0)
    assert bytes(ext) == b"\0\0\0\1\0\0\0\2"  # big-endian, whatever this machine is
    col.Free()


def test_derived_types_in_collectives_persistent_and_partitioned(run):
    p = run(
        3,
        """
import numpy as np
from mpiws import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
evens = MPI.INT.Create_indexed_block(1, [0, 2, 4, 6]).Commit()
buf = np.arange(8, dtype="i") if rank == 0 else np.full(8, -1, "i")
comm.Bcast([buf, 1, evens], root=0)
assert buf.tolist() == ([0, 1, 2, 3, 4, 5, 6, 7] if rank == 0 else [0, -1, 2, -1, 4, -1, 6, -1]), buf

# a persistent broadcast started three times reads the buffer at each Start
data = np.zeros(4, "d")
req = comm.Bcast_init(data, root=1)
for round_ in range(3):
    if rank == 1:
        data[:] = round_ + 0.5
    req.Start()
    req.Wait()
    assert (data == round_ + 0.5).all(), data
req.Free()

# partitioned: rank r sends 3 partitions to r+1, readied in reverse order
dest, source = (rank + 1) % size, (rank - 1) % size
out, got = np.arange(6, dtype="i") + 10 * rank, np.full(6, -1, "i")
sreq = comm.Psend_init(out, 3, dest, tag=4)
rreq = comm.Precv_init(got, 3, source, tag=4)
rreq.Start()
sreq.Start()
for i in (2, 1, 0):
    sreq.Pready(i)
while not rreq.Parrived(0):
    pass
MPI.Request.Waitall([sreq, rreq])
assert got.tolist() == (np.arange(6) + 10 * source).tolist(), got
sreq.Free(); rreq.Free(); evens.Free()
print("OK")
""",
    )
    assert_ok(p, 3)


def test_vector_collectives_place_blocks_of_a_derived_type_by_its_extent(run):
    # Column blocks of a matrix as a resized vector type (mpi4py's transpose
    # idiom): Scatterv/Gatherv/Allgatherv/Alltoallv displacements count the
    # type's extent and its items are laid out, as in MPICH (they were read
    # as packed bytes at multiples of the type's size).
    p = run(
        3,
        """
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
p, r = comm.size, comm.rank
n = 2 * p
A = np.arange(n * n, dtype="d").reshape(n, n)
col = MPI.DOUBLE.Create_vector(n, 2, n).Create_resized(0, 2 * 8).Commit()
counts, displs = [1] * p, list(range(p))
mine = np.zeros((n, 2))
comm.Scatterv([A, counts, displs, col] if r == 0 else None, [mine, MPI.DOUBLE], root=0)
assert (mine == A[:, 2 * r : 2 * r + 2]).all(), mine
B = np.zeros((n, n))
comm.Gatherv([mine, MPI.DOUBLE], [B, counts, displs, col] if r == 0 else None, root=0)
assert r != 0 or (B == A).all(), B
C = np.zeros((n, n))
comm.Allgatherv([mine, MPI.DOUBLE], [C, counts, displs, col])
assert (C == A).all(), C
# in place at the root: its own block read from the receive buffer
D = A.copy() if r == 0 else None
if r == 0:
    D[:, 0:2] = A[:, 0:2]
comm.Gatherv(MPI.IN_PLACE if r == 0 else [mine, MPI.DOUBLE], [D, counts, displs, col] if r == 0 else None, root=0)
assert r != 0 or (D == A).all(), D
# a transpose by Alltoallv: rank r's rows, each rank's column block sent to it
rows = A[2 * r : 2 * r + 2, :].copy()
blk = MPI.DOUBLE.Create_vector(2, 2, n).Create_resized(0, 2 * 8).Commit()
got = np.zeros((2 * p, 2))
comm.Alltoallv([rows, counts, displs, blk], [got, [4] * p, [4 * i for i in range(p)], MPI.DOUBLE])
assert (got == A[:, 2 * r : 2 * r + 2]).all(), got
print("OK", flush=True)
""",
    )
    assert_ok(p, 3)
