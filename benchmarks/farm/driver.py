"""Farm driver: the original task-farm experiment, reproduced: mpiws.futures vs mpi4py.futures (MPICH),
concurrent.futures' ProcessPool, Dask and Ray, alternating; completion time against granularity, tiny-task
throughput, bytes on the wire per message; tables, JSON, CSV, plots.

Entry point: benchmarks/farm/run [--quick] [--out DIR] [--workers 1,2,4,8] [--rounds R] [--impls a,b]
             benchmarks/farm/run --wan [--quick]   (the WAN part alone: wan_farm.py)

Every implementation runs the same program (bench.py) with its own pool of W workers, started by the pool
itself: one launch per implementation and worker count, alternating implementations in rounds; the driver
keeps the median over rounds. A last part captures the loopback traffic of one task at a time (wire.py) to
give the bytes on the wire of a task message and of a result message against the payload.

The WAN part (``--wan``: instead of the rest; ``--with-wan``, which ``mpiws bench farm --wan`` passes: after it, its tables
appended to table.md for ``mpiws bench``): mpiws.futures with workers on endpoints behind emulated links
(wan_farm.py); never run otherwise.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import common  # noqa: E402

PROG = HERE / "bench.py"
MPICH_TCP = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}


class FarmImpl:
    """One pool implementation: how to launch bench.py with it (``common.launch`` calls ``command`` with the
    number of workers in place of the number of ranks)."""

    def __init__(self, key, label, impl, how, mpiexec=False, env=None, module=None):
        self.key, self.label, self.impl, self.how = key, label, impl, how
        self.mpiexec, self.env, self.module = mpiexec, dict(env or {}), module

    def command(self, workers, prog, args):
        cmd = [str(common.PYTHON), str(prog), "--impl", self.impl, "--workers", str(workers), *map(str, args)]
        if self.mpiexec:
            cmd = [str(common.VENV / "bin" / "mpiexec"), "-n", "1"] + cmd
        return cmd

    def environ(self):
        env = dict(os.environ)
        for k in ("BENCH_MPI", "MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER"):
            env.pop(k, None)
        env.update(self.env, BENCH_IMPL=self.key, PYTHONUNBUFFERED="1", RAY_USAGE_STATS_ENABLED="0")
        return env


IMPLS = {
    "mpiws": FarmImpl(
        "mpiws",
        "mpiws.futures",
        "mpiws",
        "`python bench.py`: `mpiws.futures.MPIPoolExecutor(max_workers=W)` spawns W local worker processes",
        module="mpiws",
    ),
    "mpi4py-tcp": FarmImpl(
        "mpi4py-tcp",
        "mpi4py.futures",
        "mpi4py",
        "`mpiexec -n 1 python bench.py`: `mpi4py.futures.MPIPoolExecutor(max_workers=W)` spawns "
        "W workers (`MPI_Comm_spawn`); MPICH forced onto loopback TCP (%s)"
        % " ".join("%s=%s" % kv for kv in MPICH_TCP.items()),
        mpiexec=True,
        env=MPICH_TCP,
        module="mpi4py",
    ),
    "mpi4py-shm": FarmImpl(
        "mpi4py-shm",
        "mpi4py.futures (UCX)",
        "mpi4py",
        "as mpi4py.futures, with MPICH's default channel (ch4:ucx, shared memory between local processes)",
        mpiexec=True,
        module="mpi4py",
    ),
    "processpool": FarmImpl(
        "processpool",
        "ProcessPool",
        "processpool",
        "`python bench.py`: `concurrent.futures.ProcessPoolExecutor(max_workers=W)` (fork)",
    ),
    "dask": FarmImpl(
        "dask",
        "Dask",
        "dask",
        "`python bench.py`: `distributed.LocalCluster(n_workers=W, threads_per_worker=1)` + `Client`; "
        "`client.map` / `client.submit(pure=False)`, `client.gather`",
        module="distributed",
    ),
    "ray": FarmImpl(
        "ray",
        "Ray",
        "ray",
        "`python bench.py`: `ray.init(num_cpus=W)`; one `f.remote(...)` per task (`num_cpus=1`), "
        "`ray.get` (Ray has no executor map: its `map` is the same calls)",
        module="ray",
    ),
}
DEFAULT_FULL = ["mpiws", "mpi4py-tcp", "processpool", "dask", "ray"]
DEFAULT_QUICK = ["mpiws", "mpi4py-tcp", "processpool"]
WIRE_IMPLS = ["mpiws", "mpi4py-tcp"]
COLORS = {
    "mpiws": "tab:red",
    "mpi4py-tcp": "tab:blue",
    "mpi4py-shm": "tab:green",
    "processpool": "tab:gray",
    "dask": "tab:orange",
    "ray": "tab:purple",
}
REF = "mpi4py-tcp"


def parse(argv):
    ap = common.arg_parser(
        "farm",
        __doc__,
        "2 workers, %d values, grains 1..1000, mpiws/mpi4py.futures/ProcessPool only, 2 rounds, "
        "shorter tiny-task runs (~1 min)" % 4000,
        "default 3, quick 2",
        "default 300, quick 120",
    )
    for action in ap._actions:
        if action.dest == "impls":
            action.help = "comma-separated subset of: %s (default %s; quick %s)" % (
                ",".join(IMPLS),
                ",".join(DEFAULT_FULL),
                ",".join(DEFAULT_QUICK),
            )
    ap.add_argument(
        "--workers",
        "--ranks",
        dest="workers",
        default=None,
        help="worker counts (default 1,2,4,8; quick 2); --ranks is the same, for `mpiws bench --ranks`",
    )
    ap.add_argument("--values", type=int, default=None, help="values in the farm (default 10000, quick 4000)")
    ap.add_argument("--grains", default=None, help="values per task (default 1,10,100,1000,10000; quick 1,10,100,1000)")
    ap.add_argument("--iters", type=int, default=None, help="kernel iterations per value (default: bench.py's)")
    ap.add_argument(
        "--tiny-seconds", type=float, default=None, help="length of each tiny-task run (default 1.0, quick 0.5)"
    )
    ap.add_argument(
        "--max-point-seconds",
        type=float,
        default=None,
        help="leave out a granularity whose tasks would take longer than this at the launch's no-op task "
        "rate (default 10; 0: never)",
    )
    ap.add_argument(
        "--target-workers",
        type=int,
        default=None,
        help="worker count of the targets table (default: the number of cores, or the nearest measured)",
    )
    ap.add_argument("--no-wire", action="store_true", help="leave out the bytes-on-the-wire part")
    ap.add_argument(
        "--wire-tasks", type=int, default=None, help="tasks per payload size in the wire part (default 200, quick 50)"
    )
    ap.add_argument(
        "--wan",
        action="store_true",
        help="the WAN part instead: workers on endpoints behind Toxiproxy links, the default farm against "
        "one task at a time (wan_farm.py; writes wan-table.md, wan-*.csv, wan-results.json, "
        "wan-completion.png; --values default 1000, --grains 1,10,100,1000, --workers 2, --rounds "
        "default 3, quick 1, --max-point-seconds default 60)",
    )
    ap.add_argument(
        "--with-wan",
        action="store_true",
        help="the suite, then the WAN part with its defaults (what `mpiws bench farm --wan` "
        "runs); its tables are appended to table.md",
    )
    ap.add_argument("--latencies", default=None, help="WAN part: one-way link latencies, ms (default 10,50; quick 10)")
    ap.add_argument("--rate", type=float, default=None, help="WAN part: link rate each way, Mbit/s (default 100)")
    return ap.parse_args(argv)


def available(keys):
    """(keys that can run here, {key: why not})."""
    have, why = [], {}
    py = str(common.PYTHON)
    for k in keys:
        impl = IMPLS[k]
        if impl.mpiexec and not (common.VENV / "bin" / "mpiexec").exists():
            why[k] = "MPICH's mpiexec is not installed (%s)" % common.SETUP_HINT
            continue
        if impl.module and subprocess.run([py, "-c", "import %s" % impl.module], capture_output=True).returncode != 0:
            hint = {
                "mpi4py": common.SETUP_HINT,
                "distributed": "scripts/setup.sh mpich mpi4py matplotlib dask distributed",
                "ray": "scripts/setup.sh mpich mpi4py matplotlib ray",
            }.get(impl.module, "")
            why[k] = "`%s` does not import here (%s)" % (impl.module, hint)
            continue
        have.append(k)
    return have, why


def calibrate(iters):
    """The kernel's cost per value in this process, seconds (the best of 5 runs of 300 values)."""
    import bench

    xs = bench.values(300)
    best = None
    for _ in range(5):
        t0 = time.perf_counter()
        for x in xs:
            bench.kernel(x, iters)
        t = (time.perf_counter() - t0) / len(xs)
        best = t if best is None else min(best, t)
    return best


def command_line(argv):
    return " ".join(
        (["PYTHONPATH=" + os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
        + ["benchmarks/farm/run"]
        + (argv if argv is not None else sys.argv[1:])
    )


def run_wan(a, argv):
    """The WAN part (wan_farm.py): (exit status, its report's text)."""
    import wan_farm

    return wan_farm.main(a, command_line(argv), calibrate, futures_provenance)


def main(argv=None):
    a = parse(argv)
    if a.wan:
        return run_wan(a, argv)[0]
    rc = main_local(a, argv)
    if a.with_wan:
        import argparse

        # the WAN part's own defaults: the suite's --values/--grains/--workers/--max-point-seconds are not its
        w = argparse.Namespace(**dict(vars(a), values=None, grains=None, workers=None, max_point_seconds=None))
        wrc, text = run_wan(w, argv)
        if text:
            with open(Path(a.out) / "table.md", "a") as f:
                f.write("\n" + text)
        rc = rc or wrc
    return rc


def main_local(a, argv):
    import bench

    rounds = a.rounds or (2 if a.quick else 3)
    workers = [int(x) for x in (a.workers or ("2" if a.quick else "1,2,4,8")).split(",")]
    values = a.values or (4000 if a.quick else 10000)
    grains = [int(x) for x in (a.grains or ("1,10,100,1000" if a.quick else "1,10,100,1000,10000")).split(",")]
    grains = [g for g in grains if g <= values]
    iters = a.iters or bench.ITERS
    tiny_seconds = a.tiny_seconds or (0.5 if a.quick else 1.0)
    cap = a.max_point_seconds if a.max_point_seconds is not None else 10
    timeout = a.timeout or (120 if a.quick else 300)
    wire_tasks = a.wire_tasks or (50 if a.quick else 200)
    asked = a.impls.split(",") if a.impls else (DEFAULT_QUICK if a.quick else DEFAULT_FULL)
    for k in asked:
        if k not in IMPLS:
            raise SystemExit("farm: unknown implementation %r (have %s)" % (k, ", ".join(IMPLS)))
    if not (common.VENV / "bin" / "mpiws").exists():
        common.log("farm: mpiws is not set up in %s; run: %s" % (common.VENV, common.SETUP_HINT))
        return 2
    keys, unavailable = available(asked)
    skipped_impls = dict(unavailable)
    if a.quick and not a.impls:
        for k in ("dask", "ray"):
            skipped_impls.setdefault(k, "left out of quick runs (slow to start); `--impls` names them to include them")
    for k, why in unavailable.items():
        common.log("farm: leaving out %s: %s" % (k, why))
    impls = [IMPLS[k] for k in keys]
    machine = common.machine()
    cost = calibrate(iters)
    args = [
        "--values",
        values,
        "--grains",
        ",".join(map(str, grains)),
        "--iters",
        iters,
        "--tiny-seconds",
        tiny_seconds,
        "--max-point-seconds",
        cap,
    ] + a.bench_args
    common.log(
        "farm: %d values x %d iterations (%.0f us per value here), grains %s, workers %s, %s cores, "
        "%d rounds of %s, %s"
        % (
            values,
            iters,
            cost * 1e6,
            ",".join(map(str, grains)),
            ",".join(map(str, workers)),
            machine["cores"],
            rounds,
            ", ".join(keys),
            "quick" if a.quick else "full",
        )
    )
    started = time.time()
    raw, merged, failures = common.sweep(
        "farm", impls, rounds, PROG, [(w, args) for w in workers], timeout, unit="workers", field="workers"
    )
    wire_res, wire_why = {}, None
    if not a.no_wire:
        wire_res, wire_why = measure_wire([k for k in WIRE_IMPLS if k in keys], wire_tasks, timeout)
    machine["load_avg_end"] = os.getloadavg()
    meta = dict(
        bench="farm",
        workers=workers,
        values=values,
        grains=grains,
        iters=iters,
        cost_per_value=cost,
        tiny_seconds=tiny_seconds,
        max_point_seconds=cap,
        cores=machine["cores"],
        rounds=rounds,
        quick=a.quick,
        impls=keys,
        skipped_impls=skipped_impls,
        target_workers=target_workers(a.target_workers, workers, machine["cores"]),
        hows={k: IMPLS[k].how for k in keys},
        labels={k: IMPLS[k].label for k in IMPLS},
        skipped_points=skipped_points(raw),
        versions=versions(raw),
        all_versions=all_versions(raw, wire_res),
        launches={w: {k: len(rs) for k, rs in per.items()} for w, per in raw.items()},
        futures_provenance=futures_provenance([v for per in all_versions(raw, wire_res).values() for v in per]),
        started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        seconds=round(time.time() - started, 1),
        machine=machine,
        wire=wire_res,
        wire_skipped=wire_why,
        command=command_line(argv),
    )
    out = common.save_suite("farm", a, meta, merged, raw, failures, report, plots, any(merged.values()))
    try:  # the tables as CSV too (``mpiws bench`` does the same for every suite)
        from mpiws.bench import tables_to_csv

        tables_to_csv(Path(out) / "table.md")
    except ImportError:
        pass
    common.log(
        "farm: wrote %s (results.json, table.md, *.csv%s) in %.0fs"
        % (out, "" if a.no_plots else ", farm-*.png", time.time() - started)
    )
    return 0 if any(merged.values()) else 1


def target_workers(asked, workers, cores):
    if asked:
        return asked
    return min(workers, key=lambda w: (abs(w - (cores or 2)), -w))


def skipped_points(raw):
    """{workers: {impl: {g: [the largest estimate, in how many launches]}}}: granularities left out (too many
    tasks for the launch's no-op task rate)."""
    out = {}
    for w, per in raw.items():
        for k, rs in per.items():
            for res in rs:
                for s in res.get("skipped", []):
                    d = out.setdefault(w, {}).setdefault(k, {})
                    est, n = d.get(str(s["g"]), (0, 0))
                    d[str(s["g"])] = [max(est, s["estimate"]), n + 1]
    return out


def versions(raw):
    out = {}
    for per in raw.values():
        for k, rs in per.items():
            for res in rs:
                out.setdefault(k, res.get("versions"))
    return out


def all_versions(raw, wire):
    """{impl: [versions of every launch]} (the wire part's too)."""
    out = {}
    for per in raw.values():
        for k, rs in per.items():
            out.setdefault(k, []).extend(res.get("versions") for res in rs)
    for k, res in (wire or {}).items():
        out.setdefault(k, []).append(res.get("versions"))
    return out


def measure_wire(keys, tasks, timeout):
    """Bytes on the wire per task and result message, mpiws and MPICH over TCP: ({impl: capture}, why not)."""
    import wire

    why = wire.available()
    if why:
        common.log("farm: no wire sizes: %s" % why)
        return {}, why
    out = {}
    for k in keys:
        impl = IMPLS[k]
        common.log("farm: wire sizes, %s (capturing the loopback) ..." % k)
        t0 = time.time()
        try:
            out[k] = wire.measure(
                impl.command(1, PROG, ["--wire", "--wire-tasks", tasks]),
                impl.environ(),
                timeout=timeout,
                cwd=str(common.ROOT),
                log=common.log,
            )
            common.log("farm: wire sizes, %s done in %.1fs" % (k, time.time() - t0))
        except Exception as e:  # noqa: BLE001 - reported in the table, the rest goes on
            common.log("farm: wire sizes, %s FAILED: %s" % (k, e))
            out[k] = {"error": str(e)}
    return out, None


# --------------------------------------------------------------------- report


class Lookup:
    def __init__(self, merged):
        self.by = {
            (int(w), k, m["kind"], str(m["key"])): m for w, per in merged.items() for k, ms in per.items() for m in ms
        }

    def m(self, w, k, kind, key):
        return self.by.get((w, k, kind, str(key)))

    def t(self, w, k, kind, key):
        m = self.m(w, k, kind, key)
        return m["t"] if m else None

    def rate(self, w, k, mode):
        t = self.t(w, k, "tiny", mode)
        return 1 / t if t else None

    def best(self, w, k, grains):
        """(time, g) of the granularity with the shortest completion time."""
        got = [(self.t(w, k, "farm", g), g) for g in grains]
        got = [x for x in got if x[0]]
        return min(got) if got else (None, None)


def f3(x):
    return common.fmt(x, "%.3f")


def f2(x):
    return common.fmt(x, "%.2f")


def rate_fmt(x):
    return common.fmt(x, "%.0f")


def met(value, goal, above):
    if value is None:
        return "-"
    return "met" if (value >= goal if above else value <= goal) else "NO"


def report(meta, merged, failures):
    L = Lookup(merged)
    m = meta["machine"]
    keys, lab = meta["impls"], meta["labels"]
    others = [k for k in keys if k != "mpiws"]
    cores = meta["cores"] or 2
    head = [
        "## Task farm: the original farm experiment, reproduced",
        "",
        "A master farms out %d floating-point values in blocks of g values per task (g = %s); a worker runs %d "
        "iterations of the logistic map on each value (pure Python floats, %.0f us per value measured in the "
        "driver's process), so the whole job is %.2f s of CPU work. Workers %s on %s cores (%s; more workers "
        "than cores = oversubscribed), %s run, median of %d alternating rounds (%s), %s, took %.0f s. Load "
        "average at start %s, at end %s."
        % (
            meta["values"],
            ", ".join(map(str, meta["grains"])),
            meta["iters"],
            meta["cost_per_value"] * 1e6,
            meta["values"] * meta["cost_per_value"],
            ",".join(map(str, meta["workers"])),
            meta["cores"],
            m.get("cpu", "?"),
            "quick" if meta["quick"] else "full",
            meta["rounds"],
            ", ".join(keys),
            meta["started"],
            meta["seconds"],
            "/".join("%.2f" % x for x in m.get("load_avg", ())),
            "/".join("%.2f" % x for x in m.get("load_avg_end", ())),
        ),
        common.provenance(m),
    ]
    fp = meta.get("futures_provenance")
    if fp:
        head.append(fp)
    head += ["Command: `%s`" % meta["command"], ""]
    head += ["How each runs (every pool starts its own workers, on this machine):", ""]
    head += ["- **%s**: %s%s" % (lab[k], meta["hows"][k], versions_note(meta["versions"].get(k))) for k in keys]
    for k, why in meta["skipped_impls"].items():
        head.append("- **%s**: not measured: %s" % (lab.get(k, k), why))
    head.append("")
    head += common.failure_lines(failures, lambda f: "%s round %d %s" % (nw(f["workers"]), f["round"], f["impl"]))
    for w, per in meta.get("launches", {}).items():
        for k, got in per.items():
            if got < meta["rounds"]:
                head.append("%s, %s: only %d of %d launches succeeded." % (nw(w), lab[k], got, meta["rounds"]))
    for k in keys:
        if not any(k in per for per in merged.values()):
            head.append("**%s: no launch succeeded** (see the failures above)." % lab[k])
    sk = meta["skipped_points"]
    if sk:
        head.append(
            "Left out (more tasks than %g s at the launch's own no-op task rate; the median is over the "
            "other rounds if some measured it): %s."
            % (
                meta["max_point_seconds"],
                "; ".join(
                    "%s, %s: g = %s"
                    % (
                        nw(w),
                        lab[k],
                        ", ".join(
                            "%s (~%.0f s%s)"
                            % (g, e, "" if n >= meta["rounds"] else ", in %d of %d rounds" % (n, meta["rounds"]))
                            for g, (e, n) in gs.items()
                        ),
                    )
                    for w, per in sk.items()
                    for k, gs in per.items()
                ),
            )
        )
    head.append("")
    parts = ["\n".join(head)]

    # targets
    tw = meta["target_workers"]
    rows = []
    for mode in ("submit", "map"):
        mine = L.rate(tw, "mpiws", mode)
        for k, goal in ((REF, 1.0), ("dask", 3.0), ("ray", 3.0)):
            if mode == "map" and k == "ray":
                continue  # Ray's map is its submit
            theirs = L.rate(tw, k, mode)
            r = paired(L.m(tw, k, "tiny", mode), L.m(tw, "mpiws", "tiny", mode))
            rows.append(
                [
                    "tiny-task throughput, `%s`, mpiws / %s" % (mode, lab[k]),
                    rate_fmt(mine),
                    rate_fmt(theirs),
                    f2(r),
                    ">= %.1f" % goal,
                    met(r, goal, True) if k in keys else "not measured",
                ]
            )
    (tm, gm), (tr, gr) = L.best(tw, "mpiws", meta["grains"]), L.best(tw, REF, meta["grains"])
    r = common.ratio(tm, tr)
    rows.append(
        [
            "completion time at the best granularity, mpiws / %s (s; g)" % lab[REF],
            "%s (g=%s)" % (f3(tm), gm),
            "%s (g=%s)" % (f3(tr), gr) if tr else "-",
            f2(r),
            "<= 1.1",
            met(r, 1.1, False) if REF in keys else "not measured",
        ]
    )
    parts.append(
        common.table(
            "Targets (from the issue), %s" % nw(tw),
            ["target", "mpiws", "other", "ratio", "goal", "met"],
            rows,
            "Tiny tasks: no-op tasks per second (higher is better), ratio = mpiws / other. "
            "Completion time: each implementation at its own best granularity, ratio = mpiws / "
            "other (above 1 = mpiws slower).",
        )
    )

    # tiny tasks
    for mode in ("submit", "map"):
        ks = [k for k in keys if not (mode == "map" and k == "ray")]
        rows = []
        for w in meta["workers"]:
            rates = [L.rate(w, k, mode) for k in ks]
            rat = [paired(L.m(w, k, "tiny", mode), L.m(w, "mpiws", "tiny", mode)) for k in ks if k != "mpiws"]
            rows.append([over(w, cores)] + [rate_fmt(x) for x in rates] + [f2(x) for x in rat])
        note = (
            "No-op tasks (`return x`), %s, about %g s of them per launch (the count comes from a warm-up of 100); "
            "tasks/s = tasks / (first submission to last result). Ratio = mpiws / other: below 1 = mpiws slower."
            % (
                "one `submit` per task, then every result"
                if mode == "submit"
                else "`map(f, range(n), chunksize=1)` (Dask `client.map`)",
                meta["tiny_seconds"],
            )
        )
        if "ray" in keys and mode == "map":
            note += " Ray has no map (its submit table has it)."
        parts.append(
            common.table(
                "Tiny tasks, `%s`: tasks per second" % mode,
                ["workers"] + [lab[k] for k in ks] + ["mpiws/%s" % lab[k] for k in ks if k != "mpiws"],
                rows,
                note,
            )
        )

    # completion time per worker count
    for w in meta["workers"]:
        rows = []
        for g in meta["grains"]:
            ntasks = -(-meta["values"] // g)
            ideal = meta["values"] * meta["cost_per_value"] / min(w, cores, ntasks)
            ts = [L.t(w, k, "farm", g) for k in keys]
            rat = [paired(L.m(w, "mpiws", "farm", g), L.m(w, k, "farm", g)) for k in others]
            rows.append(
                [g, ntasks, f3(ideal)]
                + [skipped_cell(sk, w, k, g, f3(t)) for k, t in zip(keys, ts)]
                + [f2(x) for x in rat]
            )
        parts.append(
            common.table(
                "Completion time, %s%s (s)" % (nw(w), ", oversubscribed" if w > cores else ""),
                ["g", "tasks", "ideal"] + [lab[k] for k in keys] + ["mpiws/%s" % lab[k] for k in others],
                rows,
                "Time from the first submission to the last result of the %d values in blocks of g "
                "(one task per block). Ideal = the CPU work / min(workers, cores, tasks). Ratio = "
                "mpiws / other: above 1 = mpiws slower." % meta["values"],
            )
        )

    # tasks per second: against the workers
    rows = []
    for g in meta["grains"]:
        ntasks = -(-meta["values"] // g)
        for w in meta["workers"]:
            ts = [L.t(w, k, "farm", g) for k in keys]
            rows.append(
                [g, over(w, cores)] + [skipped_cell(sk, w, k, g, rate_fmt(t and ntasks / t)) for k, t in zip(keys, ts)]
            )
    parts.append(
        common.table(
            "Farm throughput: tasks per second",
            ["g", "workers"] + [lab[k] for k in keys],
            rows,
            "Tasks / completion time (a task = one block of g values).",
        )
    )

    # best granularity
    rows = []
    for w in meta["workers"]:
        best = {k: L.best(w, k, meta["grains"]) for k in keys}
        row = [over(w, cores)] + ["%s (g=%s)" % (f3(best[k][0]), best[k][1]) if best[k][0] else "-" for k in keys]
        row += [f2(common.ratio(best["mpiws"][0], best[k][0])) for k in others]
        rows.append(row)
    parts.append(
        common.table(
            "Best granularity: completion time (s) and g",
            ["workers"] + [lab[k] for k in keys] + ["mpiws/%s" % lab[k] for k in others],
            rows,
            "Each implementation at its own fastest g. Ratio = mpiws / other: above 1 = mpiws slower.",
        )
    )

    # startup
    rows = []
    for w in meta["workers"]:
        rows.append(
            [over(w, cores)]
            + ["%s / %s" % (f2(L.t(w, k, "startup", "startup")), f2(L.t(w, k, "shutdown", "shutdown"))) for k in keys]
        )
    parts.append(
        common.table(
            "Pool start / shutdown (s)",
            ["workers"] + [lab[k] for k in keys],
            rows,
            "Start: from making the pool to the end of a first map of 4 tasks per worker (every worker "
            "up). Shutdown: `shutdown(wait=True)` (Dask: closing client and cluster; Ray: "
            "`ray.shutdown()`). Not part of any completion time above.",
        )
    )

    parts += wire_tables(meta)

    # spread
    rows = []
    for w, per in sorted(merged.items(), key=lambda x: int(x[0])):
        for k in keys:
            ms = [x for x in per.get(k, []) if x["t_min"] and x["kind"] in ("farm", "tiny")]
            if not ms:
                continue
            spread = sorted(x["t_max"] / x["t_min"] for x in ms)
            worst = max(ms, key=lambda x: x["t_max"] / x["t_min"])
            rows.append(
                [
                    w,
                    lab[k],
                    "%.2f" % spread[len(spread) // 2],
                    "%.2f" % spread[-1],
                    "%s %s" % (worst["kind"], worst["key"]),
                ]
            )
    parts.append(
        common.table(
            "Spread over rounds (max/min time per measurement)",
            ["workers", "impl", "median", "worst", "worst at"],
            rows,
        )
    )
    return "\n".join(parts)


def paired(a, b):
    """a/b over the rounds of the same worker count (per-round ratio, then the median; common.paired_ratio)."""
    return common.paired_ratio(a, b)


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def nw(w):
    return plural(int(w), "worker")


def over(w, cores):
    return "%d%s" % (w, " (oversubscribed)" if w > cores else "")


def skipped_cell(sk, w, k, g, text):
    est = sk.get(str(w), {}).get(k, {}).get(str(g))
    if est is not None and text == "-":
        return "left out (~%.0f s)" % est[0]
    return text


def versions_note(v):
    items = [" ".join(("%s %s" % kv).split()) for kv in (v or {}).items() if kv[0] not in ("python", "futures")]
    return " [%s]" % ", ".join(items) if items else ""


def futures_provenance(versions):
    """Which mpiws.futures the launches ran, against git HEAD's (one line for the report)."""
    got = [v.get("futures") for v in versions if v and v.get("futures")]
    if not got:
        return None
    kinds = {tuple(sorted(g["files"].items())) for g in got}
    f = got[0]
    note = ""
    if len(kinds) > 1:
        note = " **It changed during the run** (%d different versions in the launches)." % len(kinds)
    try:
        rel = "python/mpiws/futures/"
        out = subprocess.run(
            ["git", "-C", str(common.ROOT), "ls-tree", "HEAD", rel], capture_output=True, text=True, timeout=30
        ).stdout
        head = {line.split("\t")[1][len(rel) :]: line.split()[2] for line in out.splitlines() if "\t" in line}
        commit = subprocess.run(
            ["git", "-C", str(common.ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head, commit = {}, "?"
    if not head:
        return "mpiws.futures from %s.%s" % (f["dir"], note)
    diff = [
        "%s (%s)" % (n, "not in HEAD" if n not in head else "modified")
        for n, b in sorted(f["files"].items())
        if head.get(n) != b
    ]
    diff += ["%s (deleted)" % n for n in sorted(head) if n.endswith(".py") and n not in f["files"]]
    return "mpiws.futures from %s: %s.%s" % (
        f["dir"],
        "as in git HEAD (%s)" % commit if not diff else "differs from git HEAD (%s) in %s" % (commit, ", ".join(diff)),
        note,
    )


def wire_tables(meta):
    parts = []
    if meta.get("wire_skipped"):
        return ["### Bytes on the wire\n\nNot measured: %s.\n" % meta["wire_skipped"]]
    wire = meta.get("wire") or {}
    if not wire:
        return []
    lab = meta["labels"]
    rows, idle, notes = [], [], []
    for k, res in wire.items():
        if "error" in res:
            notes.append("%s: the capture failed: %s" % (lab[k], res["error"].splitlines()[0]))
            continue
        if res.get("dropped") and not res["dropped"].startswith("0 "):
            notes.append("%s: tcpdump: %s" % (lab[k], res["dropped"]))
        for ph in res["phases"]:
            if ph["phase"] == "idle":
                s = ph["seconds"] or 1
                idle.append(
                    "%s %.0f B/s in %.1f segments/s"
                    % (
                        lab[k],
                        (ph["task"]["ip_bytes"] + ph["result"]["ip_bytes"] + ph["other"]["ip_bytes"]) / s,
                        (ph["task"]["segments"] + ph["result"]["segments"] + ph["other"]["segments"]) / s,
                    )
                )
                continue
            s = ph["size"]
            t, r = ph["task_per_task"], ph["result_per_task"]
            rows.append(
                [
                    lab[k],
                    common.human_size(s),
                    ph["pickled_task"],
                    "%.0f" % t["tcp_payload"],
                    "%.0f" % (t["tcp_payload"] - s),
                    "%.2f" % (t["tcp_payload"] / s),
                    "%.0f" % t["ip_bytes"],
                    "%.1f" % t["segments"],
                    ph["pickled_result"],
                    "%.0f" % r["tcp_payload"],
                    "%.0f" % (r["tcp_payload"] - s),
                    "%.2f" % (r["tcp_payload"] / s),
                    "%.0f" % r["ip_bytes"],
                    "%.1f" % r["segments"],
                ]
            )
    note = (
        "One worker; the manager sends one task at a time (`submit(echo, payload)`, waits for the result, then "
        "the next; %s tasks per size) with a random `bytes` payload that the task returns. Captured with "
        "`tcpdump -i lo` on the ports of the manager <-> worker connections only (found in /proc; wire.py), "
        "summed per direction within each task's window (its submission to the next one's), median over the "
        "tasks of each size (results.json has the means too). **task** = manager -> "
        "worker, **result** = worker -> manager. *wire* = TCP payload bytes (all the implementation writes: its "
        "headers, framing, the pickle, and any acknowledgement it sends that way); *envelope* = wire - payload; "
        "*IP* = wire + IP and TCP headers of every segment, pure ACKs included (on the loopback, MTU 65536: "
        "Ethernet at MTU 1500 adds ~66 B per 1448 B more); *pickled* = `pickle.dumps((echo, (payload,), {}))`, "
        "what the executor itself serialises (the result: `(payload, None)`). mpi4py.futures sends with "
        "`issend` (synchronous): its acknowledgements are in the other direction's bytes."
        % " / ".join(
            "%d at %s" % (n, common.human_size(s))
            for s, n in sorted(
                {
                    (ph["size"], ph["tasks"])
                    for res in wire.values()
                    if "phases" in res
                    for ph in res["phases"]
                    if ph["tasks"]
                }
            )
        )
    )
    if idle:
        note += " Idle traffic (1 s, no tasks): %s." % "; ".join(idle)
    if notes:
        note += " " + " ".join(notes)
    parts.append(
        common.table(
            "Bytes on the wire per message (one task, one result)",
            [
                "impl",
                "payload",
                "pickled task",
                "task wire",
                "task envelope",
                "task wire/payload",
                "task IP",
                "task segments",
                "pickled result",
                "result wire",
                "result envelope",
                "result wire/payload",
                "result IP",
                "result segments",
            ],
            rows,
            note,
        )
    )
    return parts


# ----------------------------------------------------------------------- plots


def plots(out, meta, merged):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    L = Lookup(merged)
    keys, lab = meta["impls"], meta["labels"]
    cores = meta["cores"] or 2
    sub = "%s cores; %d values, %.0f us each; median of %d alternating rounds, band = min..max" % (
        meta["cores"],
        meta["values"],
        meta["cost_per_value"] * 1e6,
        meta["rounds"],
    )

    def series(ax, xs, pts, k):
        pts = [(x, p) for x, p in zip(xs, pts) if p]
        if not pts:
            return
        x = [p[0] for p in pts]
        ax.plot(x, [p[1][0] for p in pts], "o-", ms=3, color=COLORS.get(k), label=lab[k])
        ax.fill_between(x, [p[1][1] for p in pts], [p[1][2] for p in pts], color=COLORS.get(k), alpha=0.15, lw=0)

    # completion time against granularity, one panel per worker count
    ws = meta["workers"]
    ncol = min(len(ws), 2)
    nrow = -(-len(ws) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.5 * ncol, 4.2 * nrow), squeeze=False)
    for ax, w in zip(axes.flat, ws):
        for k in keys:
            ms = [L.m(w, k, "farm", g) for g in meta["grains"]]
            series(ax, meta["grains"], [m and (m["t"], m["t_min"], m["t_max"]) for m in ms], k)
        ideal = [
            meta["values"] * meta["cost_per_value"] / min(w, cores, -(-meta["values"] // g)) for g in meta["grains"]
        ]
        ax.plot(meta["grains"], ideal, ":", color="black", lw=1, label="ideal (CPU work / usable cores)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(meta["grains"])
        ax.set_xticklabels([str(g) for g in meta["grains"]])
        ax.set_xlabel("granularity g (values per task)")
        ax.set_ylabel("completion time (s)")
        ax.set_title("%s%s" % (nw(w), " (oversubscribed)" if w > cores else ""), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(ws) :]:
        ax.set_visible(False)
    fig.suptitle("Task farm: completion time vs granularity\n" + sub, fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "farm-completion.png", dpi=110)
    plt.close(fig)

    # tasks per second against workers: the tiny tasks, then the farm at each granularity
    panels = [("tiny", "submit", "no-op tasks, submit"), ("tiny", "map", "no-op tasks, map (chunksize 1)")]
    panels += [("farm", g, "farm, g = %d (%s)" % (g, plural(-(-meta["values"] // g), "task"))) for g in meta["grains"]]
    ncol = 4 if len(panels) > 4 else len(panels)
    nrow = -(-len(panels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.6 * nrow), squeeze=False)
    for ax, (kind, key, title) in zip(axes.flat, panels):
        for k in keys:
            pts = []
            for w in ws:
                m = L.m(w, k, kind, key)
                if m:
                    n = 1 if kind == "tiny" else -(-meta["values"] // key)
                    pts.append((n / m["t"], n / m["t_max"], n / m["t_min"]))
                else:
                    pts.append(None)
            series(ax, ws, pts, k)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ws)
        ax.set_xticklabels([str(w) for w in ws])
        ax.set_xlabel("workers (%d cores)" % cores)
        ax.set_ylabel("tasks/s")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle("Tasks per second vs workers\n" + sub, fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(out / "farm-tasks-per-second.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
