"""Overlap rank program: the same code on mpiws and on mpi4py.

BENCH_MPI=mpi4py selects mpi4py, anything else mpiws (benchmarks/common.py).
Run with 2 ranks; rank 0 prints one JSON result line. Standalone:

    .venv/bin/mpiws run -n 2 benchmarks/overlap/bench.py --quick
    BENCH_MPI=mpi4py .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/overlap/bench.py --quick

Three parts (``--only loop,idle,latency``):

loop     compute + exchange, per iteration: both ranks do a fixed amount of
         numpy work (``--work`` kernel calls, ~1 ms; the driver calibrates it
         once so every implementation does the same work) and exchange one
         uint8 message of each size with the peer. Variants:
           compute      the work alone
           exchange     Sendrecv alone
           blocking     work, then Sendrecv
           nonblocking  Irecv + Isend, work, Waitall
           handlers     (mpiws) Irecv + Isend with an MPI.Schedule: the
                        handlers (receive ``completed``, send ``submitted``:
                        the buffer may be reused, what Wait guarantees) count
                        the completions and wake the main thread once both
                        are in; no MPI wait in the main thread
         Each timed block runs every variant in turn (drift hits them alike);
         t = seconds per iteration (slower rank, median of the blocks); kind
         "ratio": variant / blocking per block, median (the overlap ratio).
idle     rank 1 sleeps ``--idle`` s, then sends 8 bytes; rank 0 waits for
         them: ``Recv``; ``Irecv`` + ``Wait``; (mpiws) ``Irecv`` with a
         completed handler while the main thread sleeps in threading.Event.
         Measured in the waiting process: CPU seconds (time.process_time:
         every thread of the process), user/sys, context switches
         (getrusage), wall seconds; and the CPU of the sleeping sender.
latency  ping-pong of 8 bytes (``--pp-sizes``), half round trip; blocks of
         every variant in turn; kind "overhead" = per block (variant round
         trip - blocking round trip) / deliveries per round trip, median:
           blocking     Send/Recv on both ranks
           irecv-wait   rank 1 pre-posts Irecv and Waits, then Sends
           handler-echo (mpiws) rank 1 replies with Send from the
                        ``completed`` handler of its Irecv and posts the next
                        Irecv there: one handler delivery per round trip
           handler-both (mpiws) both ranks driven by handlers: two handler
                        deliveries per round trip
           await-echo   (mpiws) rank 1 in asyncio: ``await comm.Irecv(...)``
                        then Send: one delivery through the handler thread
                        and the event loop per round trip
"""

import argparse
import os
import resource
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402

MPI = None  # imported in main(): ``--calibrate`` runs without MPI
IS_MPIWS = os.environ.get("BENCH_MPI") != "mpi4py"

FULL_SIZES = [8, 1 << 16, 1 << 20]
QUICK_SIZES = FULL_SIZES
LOOP_VARIANTS = ["compute", "exchange", "blocking", "nonblocking", "handlers"]
IDLE_VARIANTS = ["recv", "irecv-wait", "handler"]
PP_VARIANTS = ["blocking", "irecv-wait", "handler-echo", "handler-both", "await-echo"]
# handler (or request) deliveries per round trip: the overhead per delivery is
# (round trip - blocking round trip) / deliveries
DELIVERIES = {"irecv-wait": 1, "handler-echo": 1, "handler-both": 2, "await-echo": 1}
MPIWS_ONLY = {"handlers", "handler", "handler-echo", "handler-both", "await-echo"}


# ------------------------------------------------------------------ compute


class Work:
    """A fixed amount of numpy work: ``calls`` kernel calls on 32768 float64
    (256 KiB, cache-resident); numpy releases the GIL inside each ufunc."""

    N = 1 << 15

    def __init__(self, calls):
        rng = np.random.default_rng(1)
        self.a, self.b = rng.random(self.N), rng.random(self.N)
        self.c = np.empty(self.N)
        self.calls = calls

    def kernel(self):
        np.multiply(self.a, self.b, out=self.c)
        np.add(self.c, self.a, out=self.c)
        np.sqrt(self.c, out=self.c)

    def __call__(self):
        k = self.kernel
        for _ in range(self.calls):
            k()


def calibrate(target):
    """Kernel calls for about ``target`` seconds (min over a few tries)."""
    w = Work(1)
    for _ in range(200):
        w()
    best = None
    for _ in range(7):
        n = 200
        t0 = time.perf_counter()
        for _ in range(n):
            w.kernel()
        dt = (time.perf_counter() - t0) / n
        best = dt if best is None else min(best, dt)
    return max(1, round(target / best))


# ------------------------------------------------------------------ helpers


def only_mpiws(variant):
    return variant in MPIWS_ONLY and not IS_MPIWS


class Countdown:
    """Bookkeeping done by handlers: counts completions and bytes; wakes the
    main thread when ``expected`` have come in."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.left = 0
        self.bytes = 0
        self.events = 0

    def arm(self, expected):
        self.ready.clear()
        self.left = expected

    def done(self, receipt):
        with self.lock:
            self.events += 1
            self.bytes += receipt.size or 0
            self.left -= 1
            if self.left == 0:
                self.ready.set()

    def wait(self, timeout=60):
        if not self.ready.wait(timeout):
            raise SystemExit("handlers: completion never came (left %d)" % self.left)


def rusage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return dict(
        cpu=time.process_time(),
        user=r.ru_utime,
        sys=r.ru_stime,
        nvcsw=r.ru_nvcsw,
        nivcsw=r.ru_nivcsw,
        wall=time.perf_counter(),
    )


def threads():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


# ------------------------------------------------------------------ parts


def part_loop(comm, a, out, work):
    """Per size: every variant warmed up, then ``trials`` rounds of all the
    variants one after the other (so that drift hits them alike)."""
    rank = comm.Get_rank()
    peer = 1 - rank
    variants = [v for v in LOOP_VARIANTS if not only_mpiws(v)]
    for size in a.sizes:
        sbuf = np.full(size, rank + 1, dtype=np.uint8)
        rbuf = np.zeros(size, dtype=np.uint8)
        runs = {v: loop_variant(comm, v, peer, sbuf, rbuf, work) for v in variants}
        ts = {v: [] for v in variants}
        for trial in range(a.trials + 1):  # trial 0 is the warm-up
            n = max(3, a.iters // 4) if trial == 0 else a.iters
            for v in variants:
                rbuf[:1] = 0
                comm.Barrier()
                t0 = MPI.Wtime()
                runs[v](n)
                dt = MPI.Wtime() - t0
                if v != "compute" and size and rbuf[0] != peer + 1:
                    raise SystemExit("loop %s %d: wrong data" % (v, size))
                if trial:
                    ts[v].append(dt / n)
        for v in variants:
            ts[v] = allmax(comm, ts[v])
        if rank != 0:
            continue
        for v in variants:
            out.append(
                dict(
                    kind="loop",
                    key="%s/%d" % (v, size),
                    variant=v,
                    size=size,
                    iters=a.iters,
                    t=median(ts[v]),
                    trials=ts[v],
                )
            )
        # overlap ratios per trial (same trial = same conditions), then their median
        for v in ("nonblocking", "handlers"):
            if v in ts:
                rs = [x / b for x, b in zip(ts[v], ts["blocking"])]
                out.append(dict(kind="ratio", key="%s/%d" % (v, size), variant=v, size=size, t=median(rs), trials=rs))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def loop_variant(comm, variant, peer, sbuf, rbuf, work):
    """A function running ``n`` iterations of one variant."""
    if variant == "compute":

        def run(n):
            for _ in range(n):
                work()
    elif variant == "exchange":

        def run(n):
            for _ in range(n):
                comm.Sendrecv(sbuf, dest=peer, sendtag=11, recvbuf=rbuf, source=peer, recvtag=11)
    elif variant == "blocking":

        def run(n):
            for _ in range(n):
                work()
                comm.Sendrecv(sbuf, dest=peer, sendtag=12, recvbuf=rbuf, source=peer, recvtag=12)
    elif variant == "nonblocking":
        Waitall = MPI.Request.Waitall

        def run(n):
            for _ in range(n):
                reqs = [comm.Irecv(rbuf, source=peer, tag=13), comm.Isend(sbuf, dest=peer, tag=13)]
                work()
                Waitall(reqs)
    elif variant == "handlers":
        cd = Countdown()
        on_recv = MPI.Schedule(completed=cd.done)
        on_send = MPI.Schedule(submitted=cd.done)

        def run(n):
            for _ in range(n):
                cd.arm(2)
                comm.Irecv(rbuf, source=peer, tag=14, schedule=on_recv)
                comm.Isend(sbuf, dest=peer, tag=14, schedule=on_send)
                work()
                cd.wait()
    else:
        raise ValueError(variant)
    return run


def allmax(comm, ts):
    """Per trial, the slower rank's time (both ranks run the same loop)."""
    a = np.array(ts, dtype=np.float64)
    b = np.zeros_like(a)
    comm.Allreduce(a, b, op=MPI.MAX)
    return [float(x) for x in b]


def part_idle(comm, a, out):
    rank = comm.Get_rank()
    buf = np.zeros(8, dtype=np.uint8)
    for variant in IDLE_VARIANTS:
        if only_mpiws(variant):
            continue
        comm.Barrier()
        if rank == 0:
            nthreads = threads()
            r0 = rusage()
            if variant == "recv":
                comm.Recv(buf, source=1, tag=21)
            elif variant == "irecv-wait":
                comm.Irecv(buf, source=1, tag=21).Wait()
            else:
                arrived = threading.Event()
                comm.Irecv(buf, source=1, tag=21, schedule=MPI.Schedule(completed=lambda r, ev=arrived: ev.set()))
                if not arrived.wait(a.idle * 10 + 30):
                    raise SystemExit("idle handler: never completed")
            r1 = rusage()
            peer = comm.recv(source=1, tag=22)
            d = {k: r1[k] - r0[k] for k in r0}
            d["threads"] = nthreads
            d["peer_cpu"] = peer["cpu"]
            d["peer_wall"] = peer["wall"]
            for metric, v in d.items():
                out.append(
                    dict(kind="idle", key="%s/%s" % (variant, metric), variant=variant, metric=metric, size=8, t=v)
                )
        else:
            r0 = rusage()
            time.sleep(a.idle)
            r1 = rusage()
            comm.Send(buf, dest=0, tag=21)
            comm.send({"cpu": r1["cpu"] - r0["cpu"], "wall": r1["wall"] - r0["wall"]}, dest=0, tag=22)


def part_latency(comm, a, out):
    """Per size: every variant warmed up, then ``pp_trials`` blocks of all the
    variants in turn; the handler overhead is taken per block (against the
    blocking ping-pong of the same block), then its median."""
    rank = comm.Get_rank()
    variants = [v for v in PP_VARIANTS if not only_mpiws(v)]
    for size in a.pp_sizes:
        ts = {v: [] for v in variants}
        for trial in range(a.pp_trials + 1):  # trial 0 is the warm-up
            n = max(20, a.pp_reps // 5) if trial == 0 else a.pp_reps
            for v in variants:
                comm.Barrier()
                dt = pingpong(comm, v, size, n, rank)
                if trial:
                    ts[v].append(dt / (2 * n))
        if rank != 0:
            continue
        for v in variants:
            out.append(
                dict(
                    kind="latency",
                    key="%s/%d" % (v, size),
                    variant=v,
                    size=size,
                    reps=a.pp_reps,
                    t=median(ts[v]),
                    trials=ts[v],
                )
            )
        for v, k in DELIVERIES.items():
            if v in ts:
                over = [2 * (x - b) / k for x, b in zip(ts[v], ts["blocking"])]
                out.append(
                    dict(
                        kind="overhead",
                        key="%s/%d" % (v, size),
                        variant=v,
                        size=size,
                        deliveries=k,
                        t=median(over),
                        trials=over,
                    )
                )


def pingpong(comm, variant, size, n, rank):
    """``n`` round trips; rank 0's elapsed seconds (rank 1: None)."""
    ping = np.full(size, 5, dtype=np.uint8)
    rbuf = np.zeros(size, dtype=np.uint8)
    tag = 31
    t0 = MPI.Wtime()
    if rank == 0 and variant != "handler-both":
        for _ in range(n):
            comm.Send(ping, dest=1, tag=tag)
            comm.Recv(rbuf, source=1, tag=tag)
    elif rank == 0:  # handler-both: each pong's handler sends the next ping
        cd = Countdown()
        cd.arm(1)
        count = [0]

        def pong(receipt):
            count[0] += 1
            if count[0] == n:
                cd.done(receipt)
                return
            comm.Irecv(rbuf, source=1, tag=tag, schedule=sched)
            comm.Send(ping, dest=1, tag=tag)

        sched = MPI.Schedule(completed=pong)
        comm.Irecv(rbuf, source=1, tag=tag, schedule=sched)
        comm.Send(ping, dest=1, tag=tag)
        cd.wait()
    elif variant == "blocking":
        for _ in range(n):
            comm.Recv(rbuf, source=0, tag=tag)
            comm.Send(rbuf, dest=0, tag=tag)
    elif variant == "irecv-wait":
        for _ in range(n):
            comm.Irecv(rbuf, source=0, tag=tag).Wait()
            comm.Send(rbuf, dest=0, tag=tag)
    elif variant in ("handler-echo", "handler-both"):
        cd = Countdown()
        cd.arm(1)
        count = [0]

        def echo(receipt):
            comm.Send(rbuf, dest=0, tag=tag)
            count[0] += 1
            if count[0] == n:
                cd.done(receipt)
            else:
                comm.Irecv(rbuf, source=0, tag=tag, schedule=sched)

        sched = MPI.Schedule(completed=echo)
        comm.Irecv(rbuf, source=0, tag=tag, schedule=sched)
        cd.wait()
    elif variant == "await-echo":
        import asyncio

        async def echo():
            for _ in range(n):
                await comm.Irecv(rbuf, source=0, tag=tag)
                comm.Send(rbuf, dest=0, tag=tag)

        asyncio.run(echo())
    else:
        raise ValueError(variant)
    dt = MPI.Wtime() - t0
    if rank == 0 and size and rbuf[0] != 5:
        raise SystemExit("pingpong %s: wrong data" % variant)
    return dt


# ------------------------------------------------------------------ main


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer iterations and trials, shorter idle wait")
    ap.add_argument(
        "--calibrate",
        type=float,
        default=None,
        metavar="SECONDS",
        help="print the number of kernel calls for SECONDS of work, and exit (no MPI)",
    )
    ap.add_argument("--work", type=int, default=None, help="kernel calls per iteration (default: calibrate 1 ms)")
    ap.add_argument("--iters", type=int, default=None, help="loop iterations per timed block (default 50, quick 25)")
    ap.add_argument("--trials", type=int, default=None, help="loop blocks per variant (default 5, quick 3)")
    ap.add_argument("--sizes", default=None, help="loop message sizes in bytes (default 8,65536,1048576)")
    ap.add_argument("--idle", type=float, default=None, help="seconds the peer sleeps (default 3, quick 1.5)")
    ap.add_argument("--pp-sizes", default="8", help="ping-pong sizes in bytes (default 8)")
    ap.add_argument("--pp-reps", type=int, default=None, help="round trips per block (default 500, quick 200)")
    ap.add_argument("--pp-trials", type=int, default=None, help="ping-pong blocks per variant (default 7, quick 3)")
    ap.add_argument("--only", default="loop,idle,latency", help="comma-separated parts to run")
    a = ap.parse_args()
    a.trials = a.trials or (3 if a.quick else 5)
    a.iters = a.iters or (25 if a.quick else 50)
    a.idle = a.idle if a.idle is not None else (1.5 if a.quick else 3.0)
    a.pp_reps = a.pp_reps or (200 if a.quick else 500)
    a.pp_trials = a.pp_trials or (3 if a.quick else 7)
    a.sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else (QUICK_SIZES if a.quick else FULL_SIZES)
    a.pp_sizes = [int(x) for x in a.pp_sizes.split(",")]
    return a


def main():
    global MPI
    a = parse()
    if a.calibrate is not None:
        print(calibrate(a.calibrate))
        return
    MPI = common.import_mpi()
    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    if nranks != 2:
        raise SystemExit("overlap needs exactly 2 ranks")
    parts = set(a.only.split(","))
    calls = a.work if a.work is not None else calibrate(1e-3)
    work = Work(calls)
    out = []
    t_start = time.time()

    # settle: connections, page faults
    one, back = np.zeros(8, dtype=np.uint8), np.zeros(8, dtype=np.uint8)
    comm.Barrier()
    for _ in range(200 if a.quick else 1000):
        comm.Sendrecv(one, dest=1 - rank, sendtag=9, recvbuf=back, source=1 - rank, recvtag=9)

    def done(name):
        if rank == 0:
            print("overlap: %s done at %.1fs" % (name, time.time() - t_start), file=sys.stderr, flush=True)

    if "loop" in parts:
        part_loop(comm, a, out, work)
        done("loop")
    if "latency" in parts:
        part_latency(comm, a, out)
        done("latency")
    if "idle" in parts:
        part_idle(comm, a, out)
        done("idle")

    comm.Barrier()
    if rank == 0:
        common.emit(
            {
                "bench": "overlap",
                "impl": common.impl_name(),
                "nranks": nranks,
                "cores": os.cpu_count(),
                "quick": a.quick,
                "trials": a.trials,
                "pp_trials": a.pp_trials,
                "pp_reps": a.pp_reps,
                "iters": a.iters,
                "work_calls": calls,
                "idle_seconds": a.idle,
                "measurements": out,
                "seconds": time.time() - t_start,
                "time": time.time(),
            }
        )


if __name__ == "__main__":
    main()
