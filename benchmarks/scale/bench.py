"""Scale rank program: one launch of N ranks. Rank 0 prints when every rank
was up (against the driver's clock before the launch), the first barrier
(connections opened), barrier and 8 B Allreduce latency, and per rank: memory
(PSS and RSS), sockets and threads held after the collectives."""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402

MPI = common.import_mpi()
import numpy as np  # noqa: E402

LAUNCHED = float(os.environ["SCALE_T0"])  # the driver's time.time() just before the launch


def proc_kib(path, field):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def sockets():
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink("/proc/self/fd/" + fd).startswith("socket:")
        except OSError:
            pass
    return n


def per_call(comm, op, n):
    """Median seconds per call over 5 blocks of ``n`` calls (after a warm-up)."""
    for _ in range(3):
        op()
    blocks = []
    for _ in range(5):
        comm.Barrier()
        t = time.perf_counter()
        for _ in range(n):
            op()
        blocks.append((time.perf_counter() - t) / n)
    # Every rank's median, the slowest kept (a collective ends when its last rank does).
    return max(comm.allgather(statistics.median(blocks)))


comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
up = time.time()
t = time.perf_counter()
comm.Barrier()
first_barrier = time.perf_counter() - t
reps = max(5, 400 // size)
one, total = np.ones(1), np.zeros(1)
barrier = per_call(comm, comm.Barrier, reps)
allreduce = per_call(comm, lambda: comm.Allreduce(one, total, op=MPI.SUM), reps)
assert total[0] == size
mine = {
    "up": up,
    "pss": proc_kib("/proc/self/smaps_rollup", "Pss"),
    "rss": proc_kib("/proc/self/status", "VmRSS"),
    "sockets": sockets(),
    "threads": proc_kib("/proc/self/status", "Threads"),
}
everyone = comm.gather(mine, root=0)
if rank == 0:

    def mean(field):
        xs = [r[field] for r in everyone if r[field] is not None]
        return statistics.mean(xs) if xs else None

    m = [
        ("up_s", max(r["up"] for r in everyone) - LAUNCHED),
        ("first_barrier_s", first_barrier),
        ("barrier_s", barrier),
        ("allreduce_s", allreduce),
        ("pss_mib", mean("pss") / 1024 if mean("pss") else None),
        ("rss_mib", mean("rss") / 1024 if mean("rss") else None),
        ("sockets", mean("sockets")),
        ("sockets_max", max(r["sockets"] for r in everyone)),
        ("threads", mean("threads")),
    ]
    common.emit({"measurements": [{"kind": "scale", "key": k, "t": v} for k, v in m if v is not None]})
