"""Collectives rank program: the same code on mpiws and on mpi4py.

BENCH_MPI=mpi4py selects mpi4py, anything else mpiws (benchmarks/common.py).
Run with N ranks; rank 0 prints one JSON result line. Standalone:

    .venv/bin/mpiws run -n 4 benchmarks/collectives/bench.py --quick
    BENCH_MPI=mpi4py .venv/bin/mpiexec -n 4 .venv/bin/python benchmarks/collectives/bench.py --quick

Measures buffer collectives on numpy float64 arrays (Bcast, Gather, Scatter,
Allgather, Alltoall, Reduce, Allreduce) over a range of sizes, and Barrier.
"size" is the bytes of the whole buffer per rank: the broadcast / reduced
buffer; for Gather and Allgather the assembled receive buffer, for Scatter the
root's send buffer, for Alltoall each rank's send buffer (so every rank's block
is size / N; at least one float64: the actual bytes are recorded as "bytes").

Time per call: warm up, estimate the time of one call (max over ranks), pick
repetitions for about --batch seconds per timed block, then --trials blocks,
each preceded by a Barrier; per rank the median block time / reps, and the
result is the max over ranks (Allreduce MAX).

On mpiws every algorithm of ``_core.ALGORITHMS`` is measured (forced with
``comm.Set_algorithm``), then "auto" (mpiws's own choice). mpi4py: "mpi".

"matmul": the communication of one 1-D blocked matrix multiplication
(examples/matmul.py without the arithmetic): on p ranks and for a matrix of
order N each rank owns an N x (N/p) float64 column block (the first N % p
ranks one column more), and one multiplication is p Bcasts, step k rooted at
rank k, of rank k's block: the whole N x N matrix is broadcast once. "size" is
N; the time is per multiplication (blocks of 3 x --batch). On mpiws: bcast
forced to binomial, serial, then auto.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402

MPI = common.import_mpi()

COLLECTIVES = ["bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce"]
FULL_SIZES = [8, 64, 1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24]  # 8 B .. 16 MiB
QUICK_SIZES = [8, 1 << 12, 1 << 20, 1 << 24]
MATMUL_N = [256, 512, 1024, 2048]
MATMUL_QUICK_N = [256, 1024]
MATMUL_ALGOS = ["binomial", "serial"]  # forced bcast algorithms (mpiws), then auto


def algorithms(name):
    """(label, forced algorithm or None) to measure for one collective."""
    if os.environ.get("BENCH_MPI") != "mpi4py":
        try:
            from mpiws import _core

            algos = list(_core.ALGORITHMS.get(name, []))
        except (ImportError, AttributeError):
            algos = []
        return [(a, a) for a in algos] + [("auto", "auto")]
    return [("mpi", None)]


def make_op(name, comm, size, n, root=0):
    """A zero-argument callable doing one collective on ``size`` bytes; its actual byte count."""
    rank = comm.Get_rank()
    count = max(1, size // 8)
    block = max(1, count // n)
    f8 = np.float64
    if name == "bcast":
        buf = np.full(count, 1.0, f8)
        return (lambda: comm.Bcast(buf, root=root)), count * 8
    if name == "reduce":
        s, r = np.full(count, 1.0, f8), np.zeros(count, f8)
        return (lambda: comm.Reduce(s, r, op=MPI.SUM, root=root)), count * 8
    if name == "allreduce":
        s, r = np.full(count, 1.0, f8), np.zeros(count, f8)
        return (lambda: comm.Allreduce(s, r, op=MPI.SUM)), count * 8
    if name == "gather":
        s = np.full(block, float(rank), f8)
        r = np.zeros(block * n, f8) if rank == root else None
        return (lambda: comm.Gather(s, r, root=root)), block * n * 8
    if name == "scatter":
        s = np.full(block * n, 1.0, f8) if rank == root else None
        r = np.zeros(block, f8)
        return (lambda: comm.Scatter(s, r, root=root)), block * n * 8
    if name == "allgather":
        s, r = np.full(block, float(rank), f8), np.zeros(block * n, f8)
        return (lambda: comm.Allgather(s, r)), block * n * 8
    if name == "alltoall":
        s, r = np.full(block * n, float(rank), f8), np.zeros(block * n, f8)
        return (lambda: comm.Alltoall(s, r)), block * n * 8
    if name == "barrier":
        return (lambda: comm.Barrier()), 0
    raise ValueError(name)


def blocks(n, p):
    """Widths and offsets of p nearly equal column blocks of n (the first n % p get one more), as in examples/matmul.py."""
    widths = [n // p + (1 if j < n % p else 0) for j in range(p)]
    return widths, [sum(widths[:j]) for j in range(p)]


def make_matmul(comm, order):
    """A zero-argument callable doing one multiplication's communication for matrices of ``order``: p Bcasts, step
    k rooted at rank k, of its N x width_k float64 block; the bytes broadcast. Checks the data once."""
    rank, p = comm.Get_rank(), comm.Get_size()
    widths, _ = blocks(order, p)
    own = np.full((order, widths[rank]), float(rank + 1))
    panel = np.empty((order, max(widths)))
    views = [own if k == rank else np.ndarray((order, widths[k]), buffer=panel) for k in range(p)]

    def op():
        for k in range(p):
            comm.Bcast(views[k], root=k)

    for k in range(p):  # one checked multiplication
        views[k][0, 0] = views[k][-1, -1] = 0.0 if k != rank else float(rank + 1)
        comm.Bcast(views[k], root=k)
        if widths[k] and not (views[k][0, 0] == views[k][-1, -1] == float(k + 1)):
            raise SystemExit("matmul N=%d: block %d arrived wrong on rank %d" % (order, k, rank))
    return op, order * order * 8


def allmax(comm, x):
    a, b = np.array([x], np.float64), np.zeros(1, np.float64)
    comm.Allreduce(a, b, op=MPI.MAX)
    return float(b[0])


def measure(comm, op, batch, trials, max_reps, warm):
    """Seconds per call: max over ranks of the per-rank median over ``trials`` blocks."""
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(warm):
        op()
    est = allmax(comm, (MPI.Wtime() - t0) / warm)  # agreed by all ranks
    reps = int(max(1, min(max_reps, batch / max(est, 1e-7))))
    ts = []
    for _ in range(trials):
        comm.Barrier()
        t0 = MPI.Wtime()
        for _ in range(reps):
            op()
        ts.append((MPI.Wtime() - t0) / reps)
    ts.sort()
    return allmax(comm, ts[len(ts) // 2]), reps, allmax(comm, ts[0]), allmax(comm, ts[-1])


def set_algorithm(comm, name, algo):
    if algo is not None and hasattr(comm, "Set_algorithm"):
        comm.Set_algorithm(name, algo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer sizes, shorter blocks, one trial")
    ap.add_argument("--trials", type=int, default=None, help="timed blocks per point (default 3, quick 1)")
    ap.add_argument("--batch", type=float, default=None, help="seconds per timed block (default 0.03, quick 0.02)")
    ap.add_argument("--max-size", type=int, default=None, help="largest buffer in bytes")
    ap.add_argument(
        "--only", default=",".join(COLLECTIVES + ["barrier", "matmul"]), help="comma-separated collectives (and matmul)"
    )
    a = ap.parse_args()
    trials = a.trials or (1 if a.quick else 3)
    batch = a.batch or (0.02 if a.quick else 0.03)
    sizes = QUICK_SIZES if a.quick else FULL_SIZES
    if a.max_size is not None:
        sizes = [s for s in sizes if s <= a.max_size]
    only = a.only.split(",")

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    out = []
    t_start = time.time()

    # settle: connections, page faults
    for _ in range(50 if a.quick else 200):
        comm.Barrier()

    for name in [c for c in COLLECTIVES + ["barrier"] if c in only]:
        for label, algo in algorithms(name):
            set_algorithm(comm, name, algo)
            for size in [0] if name == "barrier" else sizes:
                op, nbytes = make_op(name, comm, size, n)
                warm = 10 if size <= (1 << 16) else (2 if size < (1 << 22) else 1)
                t, reps, tmin, tmax = measure(comm, op, batch, trials, 1000 if a.quick else 3000, warm)
                if rank == 0:
                    out.append(
                        dict(
                            kind=name,
                            key="%s/%d" % (label, size),
                            algo=label,
                            size=size,
                            bytes=nbytes,
                            reps=reps,
                            t=t,
                            t_trial_min=tmin,
                            t_trial_max=tmax,
                        )
                    )
                del op
            if algo is not None:
                set_algorithm(comm, name, "auto")
        if rank == 0:
            print("collectives: %s done at %.1fs" % (name, time.time() - t_start), file=sys.stderr, flush=True)

    if "matmul" in only:
        forced = [(x, x) for x, _ in algorithms("bcast") if x in MATMUL_ALGOS] + [
            (label, algo) for label, algo in algorithms("bcast") if label in ("auto", "mpi")
        ]
        for label, algo in forced:
            set_algorithm(comm, "bcast", algo)
            for order in [x for x in (MATMUL_QUICK_N if a.quick else MATMUL_N) if x >= n]:
                op, nbytes = make_matmul(comm, order)
                # calls take milliseconds: longer blocks than the collectives' so a block is more than one call
                t, reps, tmin, tmax = measure(comm, op, 3 * batch, trials, 100 if a.quick else 300, 2)
                if rank == 0:
                    out.append(
                        dict(
                            kind="matmul",
                            key="%s/%d" % (label, order),
                            algo=label,
                            size=order,
                            bytes=nbytes,
                            reps=reps,
                            t=t,
                            t_trial_min=tmin,
                            t_trial_max=tmax,
                        )
                    )
                del op
            if algo is not None:
                set_algorithm(comm, "bcast", "auto")
        if rank == 0:
            print("collectives: matmul done at %.1fs" % (time.time() - t_start), file=sys.stderr, flush=True)

    comm.Barrier()
    if rank == 0:
        common.emit(
            {
                "bench": "collectives",
                "impl": common.impl_name(),
                "nranks": n,
                "cores": os.cpu_count(),
                "quick": a.quick,
                "trials": trials,
                "batch": batch,
                "measurements": out,
                "seconds": time.time() - t_start,
                "time": time.time(),
            }
        )


if __name__ == "__main__":
    main()
