"""Matched probes (``mprobe``/``improbe`` and ``MPI.Message``): the probed
message is out of reach of every other receive until its own ``recv``;
statuses as memory; DLPack buffers. mpi4py's test_p2p_obj_matched,
test_p2p_buf_matched, test_request and test_status pass on top of these
(docs/mpi4py-compat.md)."""

import pickle

import numpy as np
import pytest

from conftest import mpiws_run
from mpiws import MPI


def test_a_matched_message_is_received_only_through_its_message():
    comm = MPI.COMM_SELF
    assert comm.improbe(0, 5) is None
    comm.send("first", 0, tag=5)
    comm.send("second", 0, tag=6)
    status = MPI.Status()
    m = comm.mprobe(0, MPI.ANY_TAG, status)
    assert m and isinstance(m, MPI.Message) and (status.source, status.tag) == (0, 5)
    # Another receive, for any tag, cannot take the matched message.
    assert comm.recv(source=0, tag=MPI.ANY_TAG) == "second"
    assert comm.improbe(0, 5) is None
    with pytest.raises(ValueError):
        pickle.dumps(m)
    assert m.recv() == "first" and m == MPI.MESSAGE_NULL and not m
    with pytest.raises(MPI.Exception) as e:
        m.recv()  # received already: an invalid message
    assert e.value.Get_error_class() == MPI.ERR_REQUEST


def test_buffers_and_no_process():
    comm = MPI.COMM_SELF
    comm.Send(np.arange(5, dtype="d"), 0, tag=1)
    m = MPI.Message.Iprobe(comm, 0, 1)
    got, status = np.zeros(5), MPI.Status()
    req = m.Irecv(got)
    assert not m and req
    req.Wait(status)
    assert list(got) == [0, 1, 2, 3, 4] and status.Get_count(MPI.DOUBLE) == 5
    noproc = comm.mprobe(MPI.PROC_NULL)
    assert noproc == MPI.MESSAGE_NO_PROC and noproc != MPI.MESSAGE_NULL
    assert noproc.recv(status) is None and status.source == MPI.PROC_NULL and not noproc
    assert MPI.MESSAGE_NO_PROC.recv() is None and MPI.MESSAGE_NO_PROC  # the constant itself stays
    assert pickle.loads(pickle.dumps(MPI.MESSAGE_NO_PROC)) is MPI.MESSAGE_NO_PROC


def test_matched_probes_between_ranks(tmp_path):
    r = mpiws_run(
        2,
        """
        from mpiws import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            for i in range(20):
                comm.send(("msg", i), 0, tag=i % 3)
        else:
            got = []
            while len(got) < 20:
                m = comm.improbe(1, MPI.ANY_TAG) or comm.mprobe(1)
                got.append(m.recv())
            assert got == [("msg", i) for i in range(20)], got  # in order per pair
            print("ok", len(got))
    """,
        tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok 20" in r.stdout


class _DLPackOnly:
    """An array reachable only through DLPack (as mpi4py's test arrays)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_buffers_are_sent_and_received():
    comm = MPI.COMM_SELF
    src, dst = np.arange(6, dtype="i4").reshape(2, 3), np.zeros((2, 3), "i4")
    status = MPI.Status()
    comm.Sendrecv(_DLPackOnly(src), 0, 3, _DLPackOnly(dst), 0, 3, status)
    assert (dst == src).all() and status.Get_count(MPI.INT) == 6
    with pytest.raises(BufferError):
        comm.Send(_DLPackOnly(src[:, ::2]), 0)  # not contiguous


def test_status_fields_are_memory_and_pickle():
    s = MPI.Status()
    assert (s.source, s.tag, s.error, s.count, s.cancelled) == (MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.SUCCESS, 0, False)
    s.Set_elements(MPI.BYTE, (1 << 33) + 5)
    s.cancelled = True
    mem = s.tomemory()
    mem[2], mem[3] = 4, 9  # source, tag
    assert (s.source, s.tag, s.count, s.cancelled) == (4, 9, (1 << 33) + 5, True)
    copy = pickle.loads(pickle.dumps(s))
    assert copy == s and copy is not s and MPI.Status(s) == s
    with pytest.raises(TypeError):
        MPI.Status(123)
