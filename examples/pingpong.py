"""Ping-pong between ranks 0 and 1: objects, then numpy buffers.
Run: mpiws run -n 2 examples/pingpong.py"""

import numpy as np

from mpiws import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
if comm.Get_size() < 2:
    raise SystemExit("pingpong needs at least 2 ranks")

ROUNDS = 100
if rank == 0:
    t = MPI.Wtime()
    for i in range(ROUNDS):
        comm.send({"ping": i}, dest=1, tag=1)
        assert comm.recv(source=1, tag=2) == {"pong": i}
    dt = (MPI.Wtime() - t) / ROUNDS / 2
    print(f"object ping-pong: {dt * 1e6:.1f} us half round trip")
    buf = np.arange(1 << 20, dtype="d")
    back = np.empty_like(buf)
    t = MPI.Wtime()
    for _ in range(10):
        comm.Send(buf, dest=1, tag=3)
        comm.Recv(back, source=1, tag=4)
    dt = (MPI.Wtime() - t) / 10 / 2
    assert np.array_equal(buf, back)
    print(f"8 MiB buffer ping-pong: {buf.nbytes / dt / 1e9:.2f} GB/s")
elif rank == 1:
    for _ in range(ROUNDS):
        msg = comm.recv(source=0, tag=1)
        comm.send({"pong": msg["ping"]}, dest=0, tag=2)
    buf = np.empty(1 << 20, dtype="d")
    for _ in range(10):
        comm.Recv(buf, source=0, tag=3)
        comm.Send(buf, dest=0, tag=4)
