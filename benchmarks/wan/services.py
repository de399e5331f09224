"""The services the WAN suite runs on endpoints whose peers reach each other
through Toxiproxy links (``driver.py``). Each returns its measurements from
rank 0 (seconds); the others return None.

Timing: back-to-back repetitions after a warm-up that opens every stream
the operation uses (so connection set-up through the link is not counted),
each rank's mean per repetition, the slowest rank's taken; a large
broadcast from the root's start to the last rank's end (one host's clock),
the median of 3.
"""

import statistics
import time

import numpy as np

from mpiws import MPI


def _slowest(comm, seconds):
    return comm.allreduce(seconds, op=MPI.MAX)


def _timed(comm, reps, op):
    t = MPI.Wtime()
    for _ in range(reps):
        op()
    return _slowest(comm, (MPI.Wtime() - t) / reps)


def _warm(comm):
    """Open every pair's stream (the links' set-up is not what is measured)."""
    comm.alltoall(list(range(comm.Get_size())))
    comm.Barrier()


def _round_trip(comm, buf, other):
    """``buf`` to ``other`` and back (rank 0 sends first); seconds taken."""
    t = MPI.Wtime()
    if comm.Get_rank() == 0:
        comm.Send(buf, dest=other)
        comm.Recv(buf, source=other)
    else:
        comm.Recv(buf, source=other)
        comm.Send(buf, dest=other)
    return MPI.Wtime() - t


def p2p(comm, params):
    """Ranks 0 and 1: half round trips of 8 B (median), and one 64 MiB
    message each way (half the round trip)."""
    rank = comm.Get_rank()
    other = 1 - rank
    small = np.zeros(8, "B")
    big = np.zeros(params["big"], "B")
    # Two warm-up round trips first: the stream opens both ways.
    halves = [_round_trip(comm, small, other) / 2 for _ in range(params["reps"] + 2)][2:]
    big_half = _round_trip(comm, big, other) / 2
    return {"small_half_rtt": statistics.median(halves), "big_half_rtt": big_half} if rank == 0 else None


def colls(comm, params):
    """Barrier, allreduce of 8 B and of 1 KiB, and a broadcast of a large buffer."""
    _warm(comm)
    reps = params["reps"]
    one, one_out = np.ones(1, "d"), np.zeros(1, "d")
    kib, kib_out = np.ones(128, "d"), np.zeros(128, "d")
    big = np.zeros(params["big"], "B")
    out = {
        "barrier": _timed(comm, reps, comm.Barrier),
        "allreduce_8": _timed(comm, reps, lambda: comm.Allreduce(one, one_out)),
        "allreduce_1k": _timed(comm, reps, lambda: comm.Allreduce(kib, kib_out)),
    }
    assert one_out[0] == comm.Get_size() and kib_out[0] == comm.Get_size()
    # From the root's start to the last rank's end: the ranks share one
    # host's clock here, and per-rank durations would count the skew with
    # which they left the barrier before. The median of a few: the first
    # also pays for the fresh buffer's pages.
    times = []
    for _ in range(params.get("big_reps", 3)):
        comm.Barrier()
        start = time.time()
        comm.Bcast(big, root=0)
        ends = comm.gather(time.time(), root=0)
        starts = comm.bcast(start, root=0)
        if comm.Get_rank() == 0:
            times.append(max(ends) - starts)
    if comm.Get_rank() == 0:
        out["bcast_big"] = statistics.median(times)
        out["bcast_big_all"] = times
        return out
    return None


def loop(comm, params):
    """The iterative loop, MPI style: every iteration each service updates
    its vector and the services average them with an allreduce."""
    x = np.full(params["n"], float(comm.Get_rank()))
    y = np.empty_like(x)
    _warm(comm)
    t = MPI.Wtime()
    for _ in range(params["iterations"]):
        x = x * 0.5 + 1.0
        comm.Allreduce(x, y)
        x = y / comm.Get_size()
    per_iteration = _slowest(comm, (MPI.Wtime() - t) / params["iterations"])
    return {"per_iteration": per_iteration, "checksum": float(x.sum())} if comm.Get_rank() == 0 else None


def step(comm, params):
    """One iteration of one service, for the mediated loop: the client sends
    the vector, gets the update back, and averages the services' itself."""
    return [v * 0.5 + 1.0 for v in params["x"]]
