"""Requests as mpi4py has them beyond send and receive: ``Isendrecv``
(one request for a send and a receive), generalized requests
(``Grequest``), handle numbers, ``Get_status`` without completing."""

import threading

import numpy as np
import pytest

from conftest import mpiws_run
from mpiws import MPI


def test_isendrecv_is_one_request_for_both(tmp_path):
    r = mpiws_run(
        3,
        """
        import numpy as np
        from mpiws import MPI
        comm = MPI.COMM_WORLD
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        out, got = np.full(1 << 18, comm.rank, "i"), np.empty(1 << 18, "i")
        req = comm.Isendrecv(out, right, 4, got, left, 4)
        status = MPI.Status()
        req.Wait(status)
        assert (got == left).all() and status.source == left and not req
        buf = np.full(3, comm.rank, "d")
        comm.Isendrecv_replace(buf, right, 5, left, 5).Wait()
        assert (buf == left).all()
        assert comm.isendrecv(("obj", comm.rank), right, 6, None, left, 6).wait() == ("obj", left)
        print("ok")
    """,
        tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok") == 3


def test_a_generalized_request_completes_when_the_program_says():
    calls = []

    def query(status, tag):
        calls.append("query")
        status.Set_source(3)
        status.Set_tag(tag)

    greq = MPI.Grequest.Start(query, lambda tag: calls.append("free"), None, args=(7,))
    assert greq and not greq.Test() and MPI.Request(greq) == greq
    with pytest.raises(TypeError):
        MPI.Prequest(greq)
    threading.Timer(0.05, greq.Complete).start()
    status = MPI.Status()
    index = MPI.Request.Waitany([MPI.COMM_SELF.irecv(source=0, tag=99), greq], status)
    assert index == 1 and (status.source, status.tag) == (3, 7) and calls == ["query", "free"] and not greq


def test_handles_and_status_peeks():
    comm = MPI.COMM_SELF
    req = comm.Irecv(np.zeros(2, "i"), 0, tag=1)
    assert MPI.Request.fromhandle(req.tohandle()) == req and MPI.Request.fromhandle(0) == MPI.REQUEST_NULL
    status = MPI.Status()
    assert MPI.Request.Get_status_any([req], status) == (MPI.UNDEFINED, False)
    comm.Send(np.arange(2, dtype="i"), 0, tag=1)
    while not req.Get_status(status):
        pass
    assert (status.source, status.tag, status.Get_count(MPI.INT)) == (0, 1, 2) and req  # not completed by looking
    assert MPI.Request.Get_status_all([req]) and MPI.Request.Get_status_some([req]) == [0]
    req.Wait()
    assert not req and MPI.Request.Get_status_some([req]) is None
