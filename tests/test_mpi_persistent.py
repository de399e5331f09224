"""Persistent requests (``Send_init``/``Recv_init``, ``Start``/``Startall``,
and the persistent collectives): a request started again each round,
inactive (not null) between rounds, on a rank's own communicator and
between rank processes over streams and over stores."""

import numpy as np
import pytest

from conftest import assert_ok
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


PERSISTENT_COLLECTIVES = """
import numpy as np
from mpiws import MPI
comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
data = np.zeros(3, dtype="d")
total = np.zeros(3, dtype="d")
gathered = np.zeros((size, 3), dtype="d")
requests = [comm.Allreduce_init(data, total, op=MPI.SUM), comm.Allgather_init(data, gathered),
            comm.Bcast_init(total, root=size - 1), comm.Barrier_init()]
for round_ in range(3):  # the buffers are read again at each Start
    data[:] = [rank, round_, 1]
    for r in requests[:2]:
        r.Start()
    MPI.Request.Waitall(requests[:2])
    assert list(total) == [size * (size - 1) / 2, size * round_, size], total
    assert [list(row) for row in gathered] == [[r, round_, 1] for r in range(size)]
    requests[2].Start(); requests[2].Wait()
    requests[3].Start(); requests[3].Wait()
# Point-to-point persistent requests round a ring in the same rounds.
left, right = (rank - 1) % size, (rank + 1) % size
out, into = np.zeros(1, dtype="i8"), np.zeros(1, dtype="i8")
pair = [comm.Send_init(out, right, tag=7), comm.Recv_init(into, left, tag=7)]
for round_ in range(3):
    out[0] = 10 * rank + round_
    MPI.Prequest.Startall(pair)
    MPI.Request.Waitall(pair)
    assert into[0] == 10 * left + round_
for r in requests + pair:
    r.Free()
print("OK")
"""


@pytest.mark.parametrize("channel", ["streams", "stores"])
def test_persistent_collectives_and_point_to_point_over_streams_and_stores(run, channel):
    p = run(3, PERSISTENT_COLLECTIVES, env={"MPIWS_STREAMS": "0"} if channel == "stores" else {})
    assert_ok(p, 3)
