"""One-sided (RMA) rank program, OSU-style: the same code on mpiws and on mpi4py.

BENCH_MPI=mpi4py selects mpi4py, anything else mpiws (benchmarks/common.py).
Rank 0 prints one JSON result line. Standalone:

    .venv/bin/mpiws run -n 2 benchmarks/rma/bench.py --quick
    BENCH_MPI=mpi4py .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/rma/bench.py --quick
    .venv/bin/mpiws run -n 8 benchmarks/rma/bench.py --quick --only counter

Parts (``--only``), all on windows made with ``Win.Allocate``:

  put      Put latency, rank 0 -> rank 1 (osu_put_latency), three synchronisations:
             flush  Lock(1, SHARED) once; per operation Put + Flush(1)
             lock   per operation Lock(1, SHARED) + Put + Unlock(1) (a whole passive epoch)
             fence  per iteration rank 0 Put, Fence, rank 1 Put (to rank 0), Fence:
                    time per put = elapsed / (2 x iterations)
  get      Get bandwidth, rank 0 reads rank 1 (osu_get_bw): Lock(1, SHARED) once; per
           iteration a window of W back-to-back Gets of the size (W = 64, fewer when
           W x size would pass 16 MiB), then Flush(1). Bandwidth = W x size / time
  acc      Accumulate latency, MPI.SUM on float64 (osu_acc_latency, flush
           synchronisation): per operation Accumulate + Flush(1). Checks the sums
  counter  shared counter under contention: every rank (rank 0 too, on its own
           memory) does Fetch_and_op(+1, SUM) on an int64 on rank 0, Flush(0) after
           each (the fetched value is needed), inside one Lock(0, SHARED) epoch.
           Reported: total ops/s = ranks x ops / slowest rank's time, per-op time
           of the remote ranks (median over them) and of rank 0. Checks the final
           count is exact and every fetched value is distinct.
           With more than 2 ranks only this part runs (the others use ranks 0 and 1).

A launch first settles (every rank does 300, quick 60, 8-byte Put + Flush into the
next rank's window). Each point: warm up, estimate one operation, choose repetitions for a timed block
of ~40 ms (quick 15 ms; the counter 3 times that, per rank; at least 10, at most
5000), time 3 blocks (quick 1) and keep their median (the driver keeps the median
over rounds).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402

MPI = common.import_mpi()

PARTS = ["put", "get", "acc", "counter"]
PUT_MODES = ["flush", "lock", "fence"]
FULL_SIZES = [1 << k for k in range(23)]  # 1 B .. 4 MiB
QUICK_SIZES = [1, 64, 4096, 1 << 16, 1 << 20]
GET_FULL_SIZES = [1 << k for k in range(0, 23, 2)]  # 1 B, 4 B, .. 4 MiB
GET_QUICK_SIZES = [8, 4096, 1 << 16, 1 << 20]
ACC_FULL_SIZES = [8 << k for k in range(18)]  # 8 B .. 1 MiB (1 .. 131072 doubles)
ACC_QUICK_SIZES = [8, 4096, 1 << 16]
GET_WINDOW = 64
GET_WINDOW_BYTES = 16 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer sizes, shorter blocks, 1 trial")
    ap.add_argument("--trials", type=int, default=None, help="timed blocks per point; the median is kept")
    ap.add_argument("--max-size", type=int, default=None, help="largest message in bytes")
    ap.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ",".join(PARTS))
    ap.add_argument("--modes", default=",".join(PUT_MODES), help="put synchronisations: " + ",".join(PUT_MODES))
    ap.add_argument("--block", type=float, default=None, help="seconds per timed block (default 0.04, quick 0.015)")
    a = ap.parse_args()
    trials = a.trials or (1 if a.quick else 3)
    block = a.block or (0.015 if a.quick else 0.04)
    cap = (lambda ss: [s for s in ss if s <= a.max_size]) if a.max_size is not None else (lambda ss: ss)
    sizes = cap(QUICK_SIZES if a.quick else FULL_SIZES)
    get_sizes = cap(GET_QUICK_SIZES if a.quick else GET_FULL_SIZES)
    acc_sizes = cap(ACC_QUICK_SIZES if a.quick else ACC_FULL_SIZES)
    parts = [p for p in a.only.split(",") if p]
    for p in parts:
        if p not in PARTS:
            raise SystemExit("unknown part %r (have %s)" % (p, ", ".join(PARTS)))
    modes = [m for m in a.modes.split(",") if m]

    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    if nranks < 2:
        raise SystemExit("the RMA benchmark needs at least 2 ranks")
    if nranks > 2:
        parts = [p for p in parts if p == "counter"]
    out, checks = [], []
    started = time.time()

    def record(kind, key, size, reps, ts, **extra):
        ts = sorted(ts)
        out.append(dict(kind=kind, key=key, size=size, reps=reps, t=ts[len(ts) // 2], trials=ts, **extra))

    def choose_reps(est, lo=10, hi=5000):
        """Repetitions for one timed block, from rank 0's estimate of one operation (the same on every rank)."""
        reps = max(lo, min(hi, int(block / est))) if est > 0 else hi
        return comm.bcast(reps if rank == 0 else None, root=0)

    def allocate(nbytes, unit, dtype):
        """A window of ``nbytes`` on this rank, zeroed (MPI_Win_allocate does not zero it), and a numpy view."""
        win = MPI.Win.Allocate(nbytes, unit, comm=comm)
        mem = np.frombuffer(win.tomemory(), dtype=dtype) if nbytes else np.zeros(0, dtype=dtype)
        win.Lock(rank, MPI.LOCK_EXCLUSIVE)
        mem[:] = 0
        win.Unlock(rank)
        comm.Barrier()
        return win, mem

    def point(kind, key, size, run, per=1.0, estimate_n=None, **extra):
        """Warm up, estimate, time ``trials`` blocks of ``run(n)`` (rank 0's time; every rank calls
        ``run``); record time per operation = elapsed / (n * per)."""
        warm = estimate_n or 5
        comm.Barrier()
        run(2)  # first touch: connections, window pages
        comm.Barrier()
        t0 = MPI.Wtime()
        run(warm)
        est = (MPI.Wtime() - t0) / warm
        reps = choose_reps(est)
        ts = []
        for _ in range(trials):
            comm.Barrier()
            t0 = MPI.Wtime()
            run(reps)
            ts.append((MPI.Wtime() - t0) / (reps * per))
        if rank == 0:
            record(kind, key, size, reps, ts, **extra)
        return 2 + warm + trials * reps

    # settle: the first moments of a launch are noisy (connections, launcher threads, page faults):
    # every rank puts 8 bytes into the next rank's window, with a flush, a few hundred times
    win, _ = allocate(8, 1, np.uint8)
    peer, eight = (rank + 1) % nranks, np.zeros(8, dtype=np.uint8)
    win.Lock(peer, MPI.LOCK_SHARED)
    for _ in range(60 if a.quick else 300):
        win.Put(eight, peer)
        win.Flush(peer)
    win.Unlock(peer)
    comm.Barrier()
    win.Free()

    # ---- put latency ------------------------------------------------------------
    if "put" in parts and sizes:
        top = max(sizes)
        win, mem = allocate(top, 1, np.uint8)
        for size in sizes:
            value = 1 + size % 251
            sbuf = np.full(size, value, dtype=np.uint8)
            for mode in modes:
                if mode == "flush":

                    def run(n, sbuf=sbuf):
                        if rank == 0:
                            win.Lock(1, MPI.LOCK_SHARED)
                            for _ in range(n):
                                win.Put(sbuf, 1)
                                win.Flush(1)
                            win.Unlock(1)

                    point("put", "%s/%d" % (mode, size), size, run, mode=mode)
                elif mode == "lock":

                    def run(n, sbuf=sbuf):
                        if rank == 0:
                            for _ in range(n):
                                win.Lock(1, MPI.LOCK_SHARED)
                                win.Put(sbuf, 1)
                                win.Unlock(1)

                    point("put", "%s/%d" % (mode, size), size, run, mode=mode)
                elif mode == "fence":

                    def run(n, sbuf=sbuf):
                        win.Fence(MPI.MODE_NOPRECEDE)
                        for i in range(n):
                            if rank == 0:
                                win.Put(sbuf, 1)
                            win.Fence()
                            if rank == 1:
                                win.Put(sbuf, 0)
                            win.Fence(MPI.MODE_NOSUCCEED if i == n - 1 else 0)  # then locks may follow

                    point("put", "%s/%d" % (mode, size), size, run, per=2.0, mode=mode)
                else:
                    raise SystemExit("unknown put synchronisation %r (have %s)" % (mode, ", ".join(PUT_MODES)))
                # what arrived: the target's memory, read under a lock of its own window
                comm.Barrier()
                win.Lock(rank, MPI.LOCK_SHARED)
                bad = rank < 2 and (mode == "fence" or rank == 1) and not (mem[0] == value and mem[size - 1] == value)
                win.Unlock(rank)
                if comm.allreduce(int(bad), op=MPI.MAX):
                    raise SystemExit("put %s of %d bytes: wrong data at the target" % (mode, size))
                win.Lock(rank, MPI.LOCK_EXCLUSIVE)
                mem[:size] = 0
                win.Unlock(rank)
                comm.Barrier()
            del sbuf
        win.Free()

    # ---- get bandwidth --------------------------------------------------------------
    if "get" in parts and get_sizes:
        top = max(get_sizes)
        win, mem = allocate(top, 1, np.uint8)
        win.Lock(rank, MPI.LOCK_EXCLUSIVE)
        mem[:] = np.arange(top, dtype=np.int64) % 251
        win.Unlock(rank)
        comm.Barrier()
        for size in get_sizes:
            w = max(1, min(GET_WINDOW, GET_WINDOW_BYTES // size))
            rbuf = np.zeros(size, dtype=np.uint8)

            def run(n, w=w, rbuf=rbuf):
                if rank == 0:
                    win.Lock(1, MPI.LOCK_SHARED)
                    for _ in range(n):
                        for _ in range(w):
                            win.Get(rbuf, 1)
                        win.Flush(1)
                    win.Unlock(1)

            point("get", size, size, run, per=w, window=w)
            if rank == 0 and not np.array_equal(rbuf[: min(size, 4096)], np.arange(min(size, 4096)) % 251):
                raise SystemExit("get of %d bytes: wrong data" % size)
            del rbuf
        comm.Barrier()
        win.Free()

    # ---- accumulate latency -----------------------------------------------------------
    if "acc" in parts and acc_sizes:
        top = max(acc_sizes)
        win, mem = allocate(top, 8, np.float64)
        for size in acc_sizes:
            count = size // 8
            ones = np.ones(count, dtype=np.float64)

            def run(n, ones=ones):
                if rank == 0:
                    win.Lock(1, MPI.LOCK_SHARED)
                    for _ in range(n):
                        win.Accumulate(ones, 1, op=MPI.SUM)
                        win.Flush(1)
                    win.Unlock(1)

            done = point("acc", size, size, run)
            comm.Barrier()
            win.Lock(rank, MPI.LOCK_EXCLUSIVE)
            got = (float(mem[0]), float(mem[count - 1]))
            mem[:count] = 0
            win.Unlock(rank)
            if rank == 1 and got != (done, done):
                raise SystemExit("accumulate of %d doubles: the target holds %s, expected %d" % (count, got, done))
            comm.Barrier()
        win.Free()

    # ---- shared counter under contention ---------------------------------------------------
    if "counter" in parts:
        win, _ = allocate(8 if rank == 0 else 0, 8, np.int64)
        one = np.ones(1, dtype=np.int64)
        old = np.zeros(1, dtype=np.int64)
        fetched = []

        def ops(n):
            got = np.empty(n, dtype=np.int64)
            win.Lock(0, MPI.LOCK_SHARED)
            t0 = MPI.Wtime()
            for i in range(n):
                win.Fetch_and_op(one, old, 0, 0, MPI.SUM)
                win.Flush(0)
                got[i] = old[0]
            dt = MPI.Wtime() - t0
            win.Unlock(0)
            fetched.append(got)
            return dt

        comm.Barrier()
        ops(2)
        comm.Barrier()
        est = comm.allreduce(ops(10) / 10, op=MPI.MAX)  # the slowest rank's time per op
        reps = max(10, min(5000, int(3 * block / est))) if est > 0 else 5000  # longer blocks: contention is noisy
        reps = comm.bcast(reps if rank == 0 else None, root=0)
        rate, remote, local = [], [], []
        for _ in range(trials):
            comm.Barrier()
            dt = ops(reps)
            times = comm.gather(dt, root=0)
            if rank == 0:
                rate.append(max(times) / (nranks * reps))  # seconds per op, all ranks together
                remote.append(sorted(times[1:])[(nranks - 1) // 2] / reps)  # median over the remote ranks
                local.append(times[0] / reps)
        comm.Barrier()
        final = np.zeros(1, dtype=np.int64)
        if rank == 0:
            win.Lock(0, MPI.LOCK_EXCLUSIVE)
            win.Get(final, 0)
            win.Unlock(0)
        values = comm.gather(np.concatenate(fetched), root=0)
        if rank == 0:
            expected = nranks * (2 + 10 + trials * reps)
            allv = np.sort(np.concatenate(values))
            distinct = len(np.unique(allv))
            exact = (
                int(final[0]) == expected and distinct == expected and bool(np.array_equal(allv, np.arange(expected)))
            )
            checks.append(
                dict(
                    part="counter",
                    nranks=nranks,
                    final=int(final[0]),
                    expected=expected,
                    distinct_fetched=distinct,
                    exact=exact,
                )
            )
            record("counter", "rate", nranks, reps, rate, nranks=nranks)
            record("counter", "remote", nranks, reps, remote, nranks=nranks)
            record("counter", "self", nranks, reps, local, nranks=nranks)
        comm.Barrier()
        win.Free()

    comm.Barrier()
    if rank == 0:
        common.emit(
            {
                "bench": "rma",
                "impl": common.impl_name(),
                "nranks": nranks,
                "cores": os.cpu_count(),
                "quick": a.quick,
                "trials": trials,
                "parts": parts,
                "vendor": list(map(str, MPI.Get_library_version().splitlines()[:1]))
                if hasattr(MPI, "Get_library_version")
                else None,
                "measurements": out,
                "checks": checks,
                "seconds": round(time.time() - started, 2),
                "time": time.time(),
            }
        )


if __name__ == "__main__":
    main()
