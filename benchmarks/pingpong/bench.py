"""Ping-pong rank program: the same code on mpiws and on mpi4py.

BENCH_MPI=mpi4py selects mpi4py, anything else mpiws (benchmarks/common.py).
Run with 2 ranks; rank 0 prints one JSON result line. Standalone:

    .venv/bin/mpiws run -n 2 benchmarks/pingpong/bench.py --quick
    BENCH_MPI=mpi4py .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/pingpong/bench.py --quick

Measures, rank 0 <-> rank 1, half round trip = elapsed / (2 * reps):
  buffer    Send/Recv of numpy uint8 arrays, 0 B .. 64 MiB (quick: .. 16 MiB)
  object    send/recv (pickled) of a small dict, a 10-float64 array, a 1 MiB array
  pingpong  Ping*Pong: 10 Sends of 1 KiB then one 8-byte reply; time per cycle
  exchange  both ranks swap equal uint8 buffers each step, 8 B .. 16 MiB: "sendrecv"
            (Sendrecv on both) and "sendthenrecv" (rank 0 Send then Recv, rank 1
            Recv then Send); time per step (rank 0), both variants in every block
  bibw      bidirectional bandwidth as OSU's osu_bibw: each iteration both ranks post
            a window of Irecvs and Isends (64 messages, fewer where 64 x size would
            pass 64 MiB) and wait for all; bandwidth = 2 x window x size / time
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402

MPI = common.import_mpi()

FULL_SIZES = [0] + [1 << k for k in range(27)]  # 0, 1, 2, 4, 8, ... 64 MiB
QUICK_SIZES = [0, 1, 8, 64, 512, 4096, 32768, 1 << 18, 1 << 20, 1 << 22, 1 << 24]
EXCHANGE_SIZES = [8 << (2 * k) for k in range(11)] + [1 << 24]  # 8 B, 32 B, ... 8 MiB, 16 MiB
EXCHANGE_QUICK_SIZES = [8, 4096, 1 << 16, 1 << 20, 1 << 24]
EXCHANGE_VARIANTS = ["sendrecv", "sendthenrecv"]
BIBW_SIZES = [1 << k for k in range(12, 25, 2)]  # 4 KiB, 16 KiB, ... 16 MiB
BIBW_QUICK_SIZES = [4096, 1 << 16, 1 << 20, 1 << 24]


def bibw_window(size):
    """OSU's window of 64 messages, fewer where they would pass 64 MiB."""
    return max(1, min(64, (64 << 20) // max(1, size)))


def reps_for(size, quick):
    """Thousands for small messages, tens for large; about 0.1-0.4 s per block."""
    if size <= 4096:
        r = 2000
    else:
        r = int(max(10, min(2000, 2e8 / size)))
    if quick:
        r = max(5, r // 5)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer sizes (to 16 MiB) and repetitions")
    ap.add_argument("--trials", type=int, default=None, help="timed blocks per size; the median is kept")
    ap.add_argument("--max-size", type=int, default=None, help="largest buffer in bytes")
    ap.add_argument("--only", default="buffer,object,pingpong,exchange,bibw", help="comma-separated parts to run")
    a = ap.parse_args()
    trials = a.trials or (1 if a.quick else 3)
    sizes = QUICK_SIZES if a.quick else FULL_SIZES
    xsizes = EXCHANGE_QUICK_SIZES if a.quick else EXCHANGE_SIZES
    if a.max_size is not None:
        sizes = [s for s in sizes if s <= a.max_size]
        xsizes = [s for s in xsizes if s <= a.max_size]
    parts = set(a.only.split(","))

    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    if nranks < 2:
        raise SystemExit("pingpong needs 2 ranks")
    peer = 1 - rank if rank < 2 else None
    out = []

    # settle: the first second of a launch is noisy (connections, launcher threads, page faults)
    one, back = np.zeros(8, dtype=np.uint8), np.zeros(8, dtype=np.uint8)
    comm.Barrier()
    for _ in range(200 if a.quick else 2000):
        if rank == 0:
            comm.Send(one, dest=1, tag=9)
            comm.Recv(back, source=1, tag=9)
        elif rank == 1:
            comm.Recv(back, source=0, tag=9)
            comm.Send(back, dest=0, tag=9)

    def record(kind, key, size, reps, ts, **extra):
        ts.sort()
        out.append(dict(kind=kind, key=key, size=size, reps=reps, t=ts[len(ts) // 2], trials=ts, **extra))

    # ---- buffers: Send / Recv ---------------------------------------------
    if "buffer" in parts:
        for size in sizes:
            reps = reps_for(size, a.quick)
            sbuf = np.full(size, 7, dtype=np.uint8)
            rbuf = np.zeros(size, dtype=np.uint8)
            warm = max(2, min(200, reps // 10))
            ts = []
            for trial in range(trials + 1):  # trial 0 is the warm-up
                n = warm if trial == 0 else reps
                comm.Barrier()
                t0 = MPI.Wtime()
                if rank == 0:
                    for _ in range(n):
                        comm.Send(sbuf, dest=1, tag=1)
                        comm.Recv(rbuf, source=1, tag=2)
                elif rank == 1:
                    for _ in range(n):
                        comm.Recv(rbuf, source=0, tag=1)
                        comm.Send(rbuf, dest=0, tag=2)
                dt = MPI.Wtime() - t0
                if trial == 0:
                    if rank == 0 and size and not (rbuf[0] == 7 and rbuf[-1] == 7):
                        raise SystemExit("buffer of %d bytes came back wrong" % size)
                else:
                    ts.append(dt / (2 * n))
            if rank == 0:
                record("buffer", size, size, reps, ts)
            del sbuf, rbuf

    # ---- objects: send / recv (pickled) -------------------------------------
    if "object" in parts:
        objects = [
            ("dict", lambda: {"a": 1, "b": [1, 2, 3]}, 2000),
            ("ndarray-10", lambda: np.arange(10, dtype=np.float64), 2000),
            ("ndarray-1MiB", lambda: np.zeros(1 << 17, dtype=np.float64), 100),
        ]
        import pickle

        for name, make, reps in objects:
            obj = make()
            if a.quick:
                reps = max(5, reps // 5)
            warm = max(2, min(200, reps // 10))
            ts = []
            for trial in range(trials + 1):
                n = warm if trial == 0 else reps
                comm.Barrier()
                t0 = MPI.Wtime()
                if rank == 0:
                    for _ in range(n):
                        comm.send(obj, dest=1, tag=3)
                        back = comm.recv(source=1, tag=4)
                elif rank == 1:
                    for _ in range(n):
                        back = comm.recv(source=0, tag=3)
                        comm.send(back, dest=0, tag=4)
                dt = MPI.Wtime() - t0
                if trial == 0 and rank == 0:
                    same = np.array_equal(back, obj) if isinstance(obj, np.ndarray) else back == obj
                    if not same:
                        raise SystemExit("object %s came back wrong" % name)
                elif trial:
                    ts.append(dt / (2 * n))
            if rank == 0:
                record("object", name, len(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)), reps, ts)

    # ---- Ping*Pong: 10 pings of 1 KiB, then one pong -------------------------
    if "pingpong" in parts:
        pings, psize = 10, 1024
        reps = 100 if a.quick else 500
        ping = np.full(psize, 3, dtype=np.uint8)
        pbuf = np.zeros(psize, dtype=np.uint8)
        pong = np.zeros(8, dtype=np.uint8)
        ts = []
        for trial in range(trials + 1):
            n = 20 if trial == 0 else reps
            comm.Barrier()
            t0 = MPI.Wtime()
            if rank == 0:
                for _ in range(n):
                    for _ in range(pings):
                        comm.Send(ping, dest=1, tag=5)
                    comm.Recv(pong, source=1, tag=6)
            elif rank == 1:
                for _ in range(n):
                    for _ in range(pings):
                        comm.Recv(pbuf, source=0, tag=5)
                    comm.Send(pong, dest=0, tag=6)
            dt = MPI.Wtime() - t0
            if trial:
                ts.append(dt / n)
        if rank == 0:
            record("pingpong", "10x1KiB", pings * psize, reps, ts, pings=pings)

    # ---- exchange: Sendrecv vs Send-then-Receive --------------------------------
    # Both ranks swap a buffer of the same size each step. Send-then-Receive is a
    # round trip (rank 0 Send, Recv; rank 1 Recv, Send: no deadlock at any size);
    # Sendrecv lets both directions proceed at once. Each block times both
    # variants in turn, so drift hits them alike.
    if "exchange" in parts and rank < 2:
        for size in xsizes:
            reps = max(5, reps_for(size, a.quick) // 2)  # a step moves two messages, as a round trip does
            sbuf = np.full(size, 7 + rank, dtype=np.uint8)
            rbuf = np.zeros(size, dtype=np.uint8)
            warm = max(2, min(200, reps // 10))
            ts = {v: [] for v in EXCHANGE_VARIANTS}
            for trial in range(trials + 1):  # trial 0 is the warm-up
                n = warm if trial == 0 else reps
                for variant in EXCHANGE_VARIANTS:
                    rbuf[:1] = rbuf[-1:] = 0
                    comm.Barrier()
                    t0 = MPI.Wtime()
                    if variant == "sendrecv":
                        for _ in range(n):
                            comm.Sendrecv(sbuf, dest=peer, sendtag=7, recvbuf=rbuf, source=peer, recvtag=7)
                    elif rank == 0:
                        for _ in range(n):
                            comm.Send(sbuf, dest=1, tag=8)
                            comm.Recv(rbuf, source=1, tag=8)
                    else:
                        for _ in range(n):
                            comm.Recv(rbuf, source=0, tag=8)
                            comm.Send(sbuf, dest=0, tag=8)
                    dt = MPI.Wtime() - t0
                    if trial == 0:
                        if not (rbuf[0] == 7 + peer and rbuf[-1] == 7 + peer):
                            raise SystemExit("exchange %s of %d bytes: wrong data on rank %d" % (variant, size, rank))
                    else:
                        ts[variant].append(dt / n)
            if rank == 0:
                for variant in EXCHANGE_VARIANTS:
                    record("exchange", "%s/%d" % (variant, size), size, reps, ts[variant], variant=variant)
            del sbuf, rbuf
    elif "exchange" in parts:
        for _ in range(len(xsizes) * (trials + 1) * len(EXCHANGE_VARIANTS)):
            comm.Barrier()

    # ---- bidirectional bandwidth (osu_bibw) ------------------------------------
    bsizes = BIBW_QUICK_SIZES if a.quick else BIBW_SIZES
    if a.max_size is not None:
        bsizes = [s for s in bsizes if s <= a.max_size]
    if "bibw" in parts and rank < 2:
        for size in bsizes:
            window = bibw_window(size)
            iters = max(3, min(100, int(4e8 / (2 * window * size))))
            if a.quick:
                iters = max(2, iters // 4)
            sbuf = np.full(size, 7 + rank, dtype=np.uint8)
            rbuf = np.zeros(size * window, dtype=np.uint8)
            ts = []
            for trial in range(trials + 1):  # trial 0 is the warm-up
                n = 1 if trial == 0 else iters
                comm.Barrier()
                t0 = MPI.Wtime()
                for _ in range(n):
                    reqs = [comm.Irecv(rbuf[i * size : (i + 1) * size], source=peer, tag=9) for i in range(window)]
                    reqs += [comm.Isend(sbuf, dest=peer, tag=9) for _ in range(window)]
                    MPI.Request.Waitall(reqs)
                dt = MPI.Wtime() - t0
                if trial == 0:
                    if not (rbuf[0] == 7 + peer and rbuf[-1] == 7 + peer):
                        raise SystemExit("bibw of %d bytes: wrong data on rank %d" % (size, rank))
                else:
                    ts.append(dt / n)
            if rank == 0:
                record("bibw", size, size, iters, ts, window=window)
            del sbuf, rbuf
    elif "bibw" in parts:
        for _ in range(len(bsizes) * (trials + 1)):
            comm.Barrier()

    comm.Barrier()
    if rank == 0:
        common.emit(
            {
                "bench": "pingpong",
                "impl": common.impl_name(),
                "nranks": nranks,
                "cores": os.cpu_count(),
                "quick": a.quick,
                "trials": trials,
                "vendor": list(map(str, MPI.Get_library_version().splitlines()[:1]))
                if hasattr(MPI, "Get_library_version")
                else None,
                "measurements": out,
                "time": time.time(),
            }
        )


if __name__ == "__main__":
    main()
