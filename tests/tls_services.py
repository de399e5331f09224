"""Services deployed by test_tls on ``mpiws serve`` endpoints (some https)."""

import os

import numpy as np

from mpiws import MPI
from services import multihost


def unix_sockets():
    """How many local (AF_UNIX) sockets this process holds (a stream over
    TLS once crossed a local socket pair pumped through the session)."""
    with open("/proc/self/net/unix") as f:
        inodes = {cols[6] for cols in (line.split() for line in list(f)[1:]) if len(cols) > 6}
    held = set()  # sockets, not descriptors: a stream holds its end twice (reader, writer)
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            held.add(target)
    return len(held)


def mixed(comm, params):
    """Point-to-point (multihost's ring and all-pairs sendrecv), then
    collectives; counts this process's local sockets while every rank is
    still running (between two barriers, so no peer has closed its streams)."""
    before = unix_sockets()  # the process's own (a signal pipe...), before any stream of this domain
    out = multihost(comm, params)
    me, n = comm.Get_rank(), comm.Get_size()
    total = np.zeros(4, dtype="d")
    comm.Allreduce(np.full(4, me + 1.0), total, op=MPI.SUM)
    out["collectives"] = {
        "bcast": comm.bcast({"root": "hello"} if me == 0 else None, root=0),
        "allreduce": comm.allreduce(me, op=MPI.SUM),
        "allgather": comm.allgather(me * 10),
        "alltoall": comm.alltoall([(me, r) for r in range(n)]),
        "Allreduce": total.tolist(),
    }
    comm.barrier()
    out["unix_sockets"] = unix_sockets() - before
    comm.barrier()
    return out
