"""Persistent point-to-point requests (``Send_init``/``Recv_init``,
``Start``/``Startall``): a request started again each round, inactive (not
null) between rounds, on a rank's own communicator."""

import numpy as np
import pytest

from mpiws import MPI


def test_rounds_of_a_persistent_send_and_receive():
    comm = MPI.COMM_SELF
    out, got = np.zeros(4, "i"), np.zeros(4, "i")
    send = comm.Send_init(out, 0, tag=7)
    recv = comm.Recv_init(got, 0, tag=7)
    try:
        assert send and recv and send != MPI.REQUEST_NULL
        for round_ in range(3):
            out[:] = np.arange(4) * (round_ + 1)
            MPI.Prequest.Startall([recv, send])
            status = MPI.Status()
            MPI.Request.Waitall([send, recv], [MPI.Status(), status])
            assert list(got) == list(out) and status.Get_tag() == 7
            assert send and recv  # inactive, not freed: started again next round
        with pytest.raises(MPI.Exception) as e:
            recv.Start()
            recv.Start()  # still active
        assert e.value.Get_error_class() == MPI.ERR_REQUEST
        send.Start()
        recv.Wait()
        send.Wait()
    finally:
        send.Free()
        recv.Free()
    assert not send and not recv
    with pytest.raises(MPI.Exception):
        send.Start()
