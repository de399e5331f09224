"""Services the isolation benchmark deploys (`mpiws serve --service NAME=services:NAME`)."""

import time

import numpy as np

from mpiws import MPI


def noop(comm, params):
    return None


def pingpong(comm, params):
    """Rank 0 and 1 bounce a buffer of each size; rank 0 returns the median round trip per size (seconds)."""
    me, other = comm.Get_rank(), 1 - comm.Get_rank()
    # Steady state: the endpoint has started the spare processes that replace
    # these two (a few hundred ms of CPU) before the clock starts.
    time.sleep(params.get("settle", 1.5))
    comm.Barrier()
    out = {}
    for size, reps in params["sizes"]:
        buf = np.zeros(size, dtype="u1")
        times = []
        for i in range(reps + 2):  # two to warm up
            t0 = time.perf_counter()
            if me == 0:
                comm.Send(buf, dest=other)
                comm.Recv(buf, source=other)
            else:
                comm.Recv(buf, source=other)
                comm.Send(buf, dest=other)
            if i >= 2:
                times.append(time.perf_counter() - t0)
        out[str(size)] = sorted(times)[len(times) // 2]
    comm.Barrier()
    return out if me == 0 else None


__all__ = ["noop", "pingpong", "MPI"]
