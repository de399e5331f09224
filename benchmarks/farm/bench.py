"""Task-farm program: one pool implementation, one worker count, every granularity.

The original farm experiment: a master hands blocks of floating-point values to
workers, which run an intensive loop on each value (``kernel``: ``iters``
iterations of the logistic map, pure Python floats, no numpy), and gather the
results. One launch measures one implementation (``--impl``) with ``--workers``
workers:

  startup   making the pool until its workers have run a first task each
  tiny      no-op tasks (return the argument): ``submit`` one at a time, and
            ``map`` at chunksize 1; tasks/s (the count is sized from a warm-up
            to take about ``--tiny-seconds``)
  farm      the N values (``--values``, an ``array("d")``) in blocks of g (``--grains``): one task per
            block, ``map`` at chunksize 1 (Dask ``client.map``, Ray one
            ``.remote`` per block), completion time from the first submission to
            the last result; samples of the results are checked exactly. A
            granularity whose tasks would take longer than
            ``--max-point-seconds`` at the launch's measured no-op task rate
            is left out (listed in the result's "skipped")

  --wire    instead: one worker, tasks sent one at a time (submit, result, next)
            with a random ``bytes`` payload of each ``--wire-sizes`` returned as
            is, while benchmarks/farm/wire.py captures the loopback traffic
            (hand-shake through files: ``--ready-file``/``--go-file``)

  --endpoints URL,URL,...   instead: the master of the WAN part (benchmarks/farm/wan_farm.py):
            ``mpiws.futures.MPIPoolExecutor(endpoints=[...])``, one worker per URL
            (endpoints serving ``futures=mpiws.futures.endpoints:worker --pickle
            full``), in each of ``--modes`` (``default``: the farm's adaptive
            batches and prefetch; ``one``: ``max_batch=1, prefetch=1``, one task
            at a time as mpi4py.futures), an executor each, the farm at every
            granularity. With ``--toxiproxy API --link-latency MS --link-rate
            MBIT`` this process's own endpoint is reached by the workers through
            a Toxiproxy link of its own (``advertise=``)

Implementations (``--impl``): ``mpiws`` (mpiws.futures.MPIPoolExecutor, spawned
workers), ``mpi4py`` (mpi4py.futures.MPIPoolExecutor, spawned workers: run it as
``mpiexec -n 1 python bench.py --impl mpi4py``), ``processpool``
(concurrent.futures.ProcessPoolExecutor), ``dask`` (distributed.LocalCluster,
one thread per worker process), ``ray`` (ray.init(num_cpus=workers)). Prints one
``BENCH-RESULT {json}`` line. Standalone:

    .venv/bin/python benchmarks/farm/bench.py --impl mpiws --workers 2 --quick
    .venv/bin/mpiexec -n 1 .venv/bin/python benchmarks/farm/bench.py --impl mpi4py --workers 2 --quick
    .venv/bin/python benchmarks/farm/bench.py --impl mpiws --endpoints URL,URL --values 1000   # MPIWS_KEY_FILE as the endpoints'
"""

import argparse
import json
from array import array
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402

IMPLS = ("mpiws", "mpi4py", "processpool", "dask", "ray")
ITERS = 1000  # kernel iterations per value (the driver reports the measured cost per value)
FULL_VALUES, QUICK_VALUES = 10000, 4000
FULL_GRAINS, QUICK_GRAINS = [1, 10, 100, 1000, 10000], [1, 10, 100, 1000]


# ------------------------------------------------------------- the tasks
# Defined here, in the main module: mpiws's and mpi4py's workers import it (not as __main__), ProcessPool's
# forked workers have it, Dask and Ray pickle these functions by value (cloudpickle).


def kernel(x, iters):
    """``iters`` iterations of the logistic map at r = 3.7: 3 floating-point operations each."""
    y = x
    for _ in range(iters):
        y = 3.7 * y * (1.0 - y)
    return y


def work(block, iters):
    """A farm task: the kernel on every value of a block (an ``array('d')``); the block of results."""
    return array("d", [kernel(x, iters) for x in block])


def noop(x):
    return x


def echo(payload):
    return payload


def worker_pid():
    return os.getpid()


def values(n):
    """The farm's values: n doubles in an ``array('d')`` (a block is a slice: 8 bytes a value in a pickle, as
    the original's arrays of doubles; a list of floats would also make Dask walk every element of every
    argument and result, looking for keys)."""
    rng = random.Random(12345)
    return array("d", [rng.uniform(0.05, 0.95) for _ in range(n)])


# ------------------------------------------------------- the implementations


class Pool:
    """What a launch needs from an implementation: run one call per item, results in order."""

    name = "?"

    def map(self, fn, args_list):
        """``[fn(*args) for args in args_list]`` on the workers, submitted all at once (map, chunksize 1)."""
        raise NotImplementedError

    def submit_each(self, fn, args_list):
        """The same, one ``submit`` per call, then every result."""
        raise NotImplementedError

    def close(self):
        pass


class ExecutorPool(Pool):
    """concurrent.futures-style executors: mpiws.futures, mpi4py.futures, ProcessPoolExecutor."""

    def __init__(self, ex):
        self.ex = ex

    def map(self, fn, args_list):
        return list(self.ex.map(fn, *zip(*args_list), chunksize=1))

    def submit_each(self, fn, args_list):
        fs = [self.ex.submit(fn, *args) for args in args_list]
        return [f.result() for f in fs]

    def close(self):
        self.ex.shutdown(wait=True)


class DaskPool(Pool):
    def __init__(self, workers):
        from dask.distributed import Client, LocalCluster

        self.cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
        )
        self.client = Client(self.cluster)
        self.client.wait_for_workers(workers)

    def map(self, fn, args_list):
        return self.client.gather(self.client.map(fn, *zip(*args_list), pure=False))

    def submit_each(self, fn, args_list):
        return self.client.gather([self.client.submit(fn, *args, pure=False) for args in args_list])

    def close(self):
        self.client.close()
        self.cluster.close()


class RayPool(Pool):
    has_map = False  # Ray has no executor map: a list of .remote calls is its one way

    def __init__(self, workers):
        import ray

        self.ray = ray
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        self.remote = {}

    def _r(self, fn):
        if fn not in self.remote:
            self.remote[fn] = self.ray.remote(num_cpus=1)(fn)
        return self.remote[fn]

    def map(self, fn, args_list):
        r = self._r(fn)
        return self.ray.get([r.remote(*args) for args in args_list])

    submit_each = map

    def close(self):
        self.ray.shutdown()


def make_pool(impl, workers):
    if impl == "mpiws":
        from mpiws.futures import MPIPoolExecutor

        return ExecutorPool(MPIPoolExecutor(max_workers=workers).bootup(wait=True))
    if impl == "mpi4py":
        from mpi4py.futures import MPIPoolExecutor

        return ExecutorPool(MPIPoolExecutor(max_workers=workers).bootup(wait=True))
    if impl == "processpool":
        from concurrent.futures import ProcessPoolExecutor

        return ExecutorPool(ProcessPoolExecutor(max_workers=workers))
    if impl == "dask":
        return DaskPool(workers)
    if impl == "ray":
        return RayPool(workers)
    raise SystemExit("unknown implementation %r (have %s)" % (impl, ", ".join(IMPLS)))


def versions(impl):
    out = {"python": sys.version.split()[0]}
    mod = {"mpiws": "mpiws", "mpi4py": "mpi4py", "dask": "distributed", "ray": "ray"}.get(impl)
    if mod:
        try:
            from importlib.metadata import version

            out[mod] = version(mod)
        except Exception:  # noqa: BLE001 - a report line
            pass
    if impl == "mpi4py":
        from mpi4py import MPI

        out["mpi"] = MPI.Get_library_version().splitlines()[0].strip()
    if impl == "mpiws":
        out["futures"] = futures_files()
    return out


def futures_files():
    """Which mpiws.futures ran: its directory and each .py file's git blob id (the driver compares them with
    git HEAD; the package changes often)."""
    import hashlib

    import mpiws.futures

    d = os.path.dirname(os.path.abspath(mpiws.futures.__file__))
    files = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".py"):
            data = open(os.path.join(d, name), "rb").read()
            files[name] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return {"dir": d, "files": files}


# ------------------------------------------------------------- measuring


def log(msg):
    print("farm[%s]: %s" % (os.environ.get("BENCH_IMPL", "?"), msg), file=sys.stderr, flush=True)


def tiny(pool, mode, seconds):
    """No-op tasks per second in ``mode`` (submit or map): a warm-up sizes the timed run to ~``seconds``."""
    call = pool.submit_each if mode == "submit" else pool.map
    n = 100
    t0 = time.perf_counter()
    assert call(noop, [(i,) for i in range(n)]) == list(range(n))
    rate = n / (time.perf_counter() - t0)
    n = int(min(max(rate * seconds, 200), 100000))
    args = [(i,) for i in range(n)]
    t0 = time.perf_counter()
    got = call(noop, args)
    t = time.perf_counter() - t0
    if got != list(range(n)):
        raise SystemExit("tiny %s: wrong results" % mode)
    return {"kind": "tiny", "key": mode, "size": 0, "t": t / n, "tasks": n}


def farm(pool, xs, g, iters):
    """The farm at granularity g: completion time, checked on a sample of values."""
    blocks = [xs[i : i + g] for i in range(0, len(xs), g)]
    t0 = time.perf_counter()
    got = pool.map(work, [(b, iters) for b in blocks])
    t = time.perf_counter() - t0
    flat = [y for b in got for y in b]
    if len(flat) != len(xs):
        raise SystemExit("farm g=%d: %d results for %d values" % (g, len(flat), len(xs)))
    for i in random.Random(g).sample(range(len(xs)), min(len(xs), 25)):
        if flat[i] != kernel(xs[i], iters):
            raise SystemExit("farm g=%d: wrong result for value %d" % (g, i))
    return {"kind": "farm", "key": g, "size": g, "t": t, "tasks": len(blocks)}


def run_farm(a):
    xs = values(a.values)
    grains = [g for g in a.grains if g <= a.values]
    t0 = time.perf_counter()
    pool = make_pool(a.impl, a.workers)
    # every worker up and warm: a few tasks per worker, each long enough that one worker cannot take them all
    pool.map(work, [(array("d", [0.5] * 20), a.iters)] * (4 * a.workers))
    startup = time.perf_counter() - t0
    log("%d workers up in %.2fs" % (a.workers, startup))
    ms = [{"kind": "startup", "key": "startup", "size": 0, "t": startup}]
    skipped = []
    try:
        for mode in ("submit", "map"):
            if mode == "map" and not getattr(pool, "has_map", True):
                continue
            m = tiny(pool, mode, a.tiny_seconds)
            ms.append(m)
            log("tiny %s: %.0f tasks/s (%d tasks)" % (mode, 1 / m["t"], m["tasks"]))
        rate = max(1 / m["t"] for m in ms if m["kind"] == "tiny")
        for g in grains:
            tasks = -(-len(xs) // g)
            if a.max_point_seconds and tasks / rate > a.max_point_seconds:
                skipped.append({"g": g, "tasks": tasks, "estimate": tasks / rate, "rate": rate})
                log(
                    "g=%d: skipped, %d tasks at %.0f tasks/s would take %.0fs > %gs"
                    % (g, tasks, rate, tasks / rate, a.max_point_seconds)
                )
                continue
            m = farm(pool, xs, g, a.iters)
            ms.append(m)
            log("g=%d: %d tasks in %.3fs" % (g, m["tasks"], m["t"]))
    finally:
        t1 = time.perf_counter()
        pool.close()
        ms.append({"kind": "shutdown", "key": "shutdown", "size": 0, "t": time.perf_counter() - t1})
    common.emit(
        {
            "impl": a.impl,
            "workers": a.workers,
            "values": a.values,
            "iters": a.iters,
            "grains": grains,
            "measurements": ms,
            "skipped": skipped,
            "versions": versions(a.impl),
        }
    )


def run_wire(a):
    """One worker; per payload size, tasks one at a time; the phases' wall-clock times for the capture."""
    import pickle

    pool = make_pool(a.impl, 1)
    payloads = {s: os.urandom(s) for s in a.wire_sizes}
    for p in payloads.values():  # every connection the phases will use is open
        for _ in range(3):
            assert pool.submit_each(echo, [(p,)]) == [p]
    pid = pool.submit_each(worker_pid, [()])[0]
    with open(a.ready_file + ".tmp", "w") as f:
        json.dump({"manager": os.getpid(), "worker": pid}, f)
    os.replace(a.ready_file + ".tmp", a.ready_file)
    deadline = time.time() + 60
    while not os.path.exists(a.go_file):
        if time.time() > deadline:
            raise SystemExit("wire: no go from the capture within 60 s")
        time.sleep(0.02)
    gap = 0.3
    phases = []
    time.sleep(gap)
    t0 = time.time()
    time.sleep(a.idle)
    phases.append({"phase": "idle", "start": t0, "end": time.time(), "tasks": 0, "size": 0})
    for s, p in payloads.items():
        time.sleep(gap)
        n = a.wire_tasks if s <= 4096 else max(10, a.wire_tasks // 4)
        marks = []
        for _ in range(n):
            marks.append(time.time())
            if pool.submit_each(echo, [(p,)])[0] != p:
                raise SystemExit("wire: payload came back wrong")
        phases.append(
            {
                "phase": "echo",
                "start": marks[0],
                "end": time.time(),
                "marks": marks,
                "tasks": n,
                "size": s,
                "pickled_task": len(pickle.dumps((echo, (p,), {}), protocol=5)),
                "pickled_result": len(pickle.dumps((p, None), protocol=5)),
            }
        )
    time.sleep(gap)
    pool.close()
    common.emit(
        {
            "impl": a.impl,
            "phases": phases,
            "pids": {"manager": os.getpid(), "worker": pid},
            "versions": versions(a.impl),
        }
    )


# ------------------------------------------------- workers on endpoints (WAN)

#: The WAN part's farm settings: executor keywords.
MODES = {"default": {}, "one": {"max_batch": 1, "prefetch": 1}}


def master_link(api, latency_ms, rate_mbit):
    """A Toxiproxy link to this process's own endpoint: (the URL workers reach it at, a function removing it)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wan"))
    from toxiproxy import own_endpoint_link

    return own_endpoint_link(api, latency_ms, rate_mbit, "farm-master-%d" % os.getpid())


def run_endpoints(a):
    """The WAN part's master: per mode an executor whose workers are on ``--endpoints``; its start, a no-op task's
    round trip, then the farm at every granularity (``farm``), and how the tasks were split between the workers."""
    from mpiws.futures import MPIPoolExecutor

    urls = [u.strip() for u in a.endpoints.split(",") if u.strip()]
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            raise SystemExit("unknown mode %r (have %s)" % (m, ", ".join(MODES)))
    skip = {tuple(x.split(":")) for x in a.skip.split(",") if x}
    xs = values(a.values)
    grains = [g for g in a.grains if g <= a.values]
    advertise, link = None, None
    if a.toxiproxy:
        advertise, link = master_link(a.toxiproxy, a.link_latency, a.link_rate)
        log(
            "the workers reach this process at %s (a link of %d ms, %s Mbit/s)"
            % (advertise, a.link_latency, a.link_rate)
        )
    ms, split = [], {}
    try:
        for mode in modes:
            t0 = time.perf_counter()
            ex = MPIPoolExecutor(endpoints=urls, advertise=advertise, **MODES[mode])
            pool = ExecutorPool(ex)
            try:
                ex.bootup(wait=True)
                pool.map(work, [(array("d", [0.5] * 20), a.iters)] * (4 * len(urls)))  # every worker up and warm
                startup = time.perf_counter() - t0
                # each endpoint starts a spare process for its next instance as this one starts: on a shared host
                # it takes CPU from the workers for about half a second
                time.sleep(a.settle)
                ms.append({"kind": "startup", "key": mode, "mode": mode, "size": 0, "t": startup})
                rtts = []
                for i in range(a.rtt_samples):
                    t1 = time.perf_counter()
                    assert ex.submit(noop, i).result() == i
                    rtts.append(time.perf_counter() - t1)
                rtt = common.median(rtts)
                ms.append({"kind": "rtt", "key": mode, "mode": mode, "size": 0, "t": rtt})
                log(
                    "%s: %d workers on endpoints up in %.2fs; a no-op task's round trip %.1f ms"
                    % (mode, len(urls), startup, rtt * 1e3)
                )
                for g in grains:
                    if (mode, str(g)) in skip:
                        continue
                    before = {s["worker"]: s["tasks"] for s in ex.worker_stats()}
                    m = farm(pool, xs, g, a.iters)
                    after = {s["worker"]: s["tasks"] for s in ex.worker_stats()}
                    split["%s:%d" % (mode, g)] = [after[k] - before.get(k, 0) for k in sorted(after, key=str)]
                    m.update(key="%s:%d" % (mode, g), mode=mode)
                    ms.append(m)
                    log(
                        "%s g=%d: %d tasks in %.3fs (per worker %s)"
                        % (mode, g, m["tasks"], m["t"], split["%s:%d" % (mode, g)])
                    )
            finally:
                t1 = time.perf_counter()
                pool.close()
                ms.append({"kind": "shutdown", "key": mode, "mode": mode, "size": 0, "t": time.perf_counter() - t1})
    finally:
        if link:
            link()
    common.emit(
        {
            "impl": "mpiws-endpoints",
            "workers": len(urls),
            "values": a.values,
            "iters": a.iters,
            "grains": grains,
            "modes": modes,
            "measurements": ms,
            "split": split,
            "advertise": advertise,
            "versions": versions("mpiws"),
        }
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", required=True, choices=IMPLS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="fewer values and grains, shorter tiny-task runs")
    ap.add_argument(
        "--values",
        type=int,
        default=None,
        help="values in the farm (default %d, quick %d)" % (FULL_VALUES, QUICK_VALUES),
    )
    ap.add_argument(
        "--grains",
        default=None,
        help="values per task, comma-separated (default %s, quick %s)"
        % (",".join(map(str, FULL_GRAINS)), ",".join(map(str, QUICK_GRAINS))),
    )
    ap.add_argument("--iters", type=int, default=ITERS, help="kernel iterations per value (default %d)" % ITERS)
    ap.add_argument(
        "--tiny-seconds", type=float, default=None, help="length of a tiny-task run (default 1.0, quick 0.5)"
    )
    ap.add_argument(
        "--max-point-seconds",
        type=float,
        default=0,
        help="leave out a granularity whose tasks would take longer than this at the launch's "
        "measured no-op task rate (default 0: none)",
    )
    ap.add_argument("--wire", action="store_true", help="the wire-size run (see the module's docstring)")
    ap.add_argument("--wire-sizes", default="8,1024,65536")
    ap.add_argument("--wire-tasks", type=int, default=200, help="tasks per payload size (a quarter above 4 KiB)")
    ap.add_argument("--idle", type=float, default=1.0, help="seconds of idle traffic measured first")
    ap.add_argument("--ready-file")
    ap.add_argument("--go-file")
    ap.add_argument(
        "--endpoints",
        default=None,
        help="the WAN part's master: workers on these endpoints (comma-separated "
        "URLs, one worker each; see the module's docstring)",
    )
    ap.add_argument(
        "--modes",
        default="default,one",
        help="with --endpoints: the farm settings to run, in this order "
        "(%s)" % ", ".join("%s: %s" % (k, v) for k, v in MODES.items()),
    )
    ap.add_argument("--skip", default="", help="with --endpoints: MODE:G pairs to leave out (comma-separated)")
    ap.add_argument(
        "--toxiproxy",
        default=None,
        help="with --endpoints: a Toxiproxy API URL; the workers reach this "
        "process's endpoint through a link of it (--link-latency, --link-rate)",
    )
    ap.add_argument("--link-latency", type=int, default=0, help="one-way latency of that link, ms")
    ap.add_argument("--link-rate", type=float, default=None, help="rate of that link, Mbit/s each way")
    ap.add_argument(
        "--rtt-samples", type=int, default=8, help="with --endpoints: no-op tasks timed one by one per mode"
    )
    ap.add_argument(
        "--settle",
        type=float,
        default=1.0,
        help="with --endpoints: seconds to wait once the workers are up "
        "(the endpoints start their spare processes then)",
    )
    a = ap.parse_args()
    a.values = a.values or (QUICK_VALUES if a.quick else FULL_VALUES)
    a.grains = [int(x) for x in a.grains.split(",")] if a.grains else (QUICK_GRAINS if a.quick else FULL_GRAINS)
    a.tiny_seconds = a.tiny_seconds or (0.5 if a.quick else 1.0)
    a.wire_sizes = [int(x) for x in a.wire_sizes.split(",")]
    if a.endpoints:
        run_endpoints(a)
    elif a.wire:
        run_wire(a)
    else:
        run_farm(a)


if __name__ == "__main__":
    main()
