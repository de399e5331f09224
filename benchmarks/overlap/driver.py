"""Overlap driver: compute/communication overlap, idle-wait CPU and handler latency; mpiws vs MPI-TCP and MPI-shm,
alternating; tables, JSON, plots.

Entry point: benchmarks/overlap/run [--quick] [--out DIR] [--rounds R] [--impls a,b] [--work-ms MS]
"""

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

PROG = HERE / "bench.py"
NRANKS = 2
KEYS = ("mpiws", "mpi-tcp", "mpi-shm")
REFS = ("mpi-tcp", "mpi-shm")
LOOP_VARIANTS = ["compute", "exchange", "blocking", "nonblocking", "handlers"]
IDLE_VARIANTS = ["recv", "irecv-wait", "handler"]
PP_VARIANTS = ["blocking", "irecv-wait", "handler-echo", "handler-both", "await-echo"]


def parse(argv):
    ap = common.arg_parser(
        "overlap",
        __doc__,
        "fewer iterations, 1 trial, 1.5 s idle wait, 2 rounds",
        "default 3, quick 2",
        "default 300, quick 150",
    )
    ap.add_argument("--work-ms", type=float, default=1.0, help="compute per loop iteration, calibrated once (ms)")
    return ap.parse_args(argv)


def calibrate(ms):
    """Kernel calls for ``ms`` of numpy work, measured once here so that every
    implementation does the same work."""
    p = subprocess.run(
        [str(common.PYTHON), str(PROG), "--calibrate", str(ms / 1e3)],
        capture_output=True,
        text=True,
        cwd=str(common.ROOT),
    )
    if p.returncode != 0:
        raise SystemExit("overlap: calibration failed:\n" + p.stderr)
    return int(p.stdout.split()[-1])


def main(argv=None):
    a = parse(argv)
    rounds = a.rounds or (2 if a.quick else 3)
    timeout = a.timeout or (150 if a.quick else 300)
    keys, impls = common.select(a.impls)
    args = (["--quick"] if a.quick else []) + a.bench_args
    work = None
    if "--work" not in a.bench_args:
        work = calibrate(a.work_ms)
        args += ["--work", str(work)]
    machine = common.machine()
    common.log(
        "overlap: %d ranks on %s cores, %d rounds of %s, %s, %s kernel calls of work per iteration"
        % (NRANKS, machine["cores"], rounds, ", ".join(keys), "quick" if a.quick else "full", work or "given")
    )
    started = time.time()
    raw, failures = common.alternate(
        impls, rounds, lambda impl: common.launch(impl, PROG, NRANKS, args, timeout=timeout)
    )
    merged = {k: common.merge_rounds([r["measurements"] for r in raw[k]]) for k in keys if raw[k]}
    first = next((r[0] for r in raw.values() if r), {})
    meta = common.run_meta(
        "overlap",
        a,
        argv,
        started,
        machine,
        rounds,
        keys,
        nranks=NRANKS,
        work_calls=first.get("work_calls", work),
        work_ms=a.work_ms,
        iters=first.get("iters"),
        trials=first.get("trials"),
        pp_trials=first.get("pp_trials"),
        pp_reps=first.get("pp_reps"),
        idle_seconds=first.get("idle_seconds"),
    )
    out = common.save_suite("overlap", a, meta, merged, raw, failures, report, plots, bool(merged))
    common.log(
        "overlap: wrote %s (results.json, table.md%s) in %.0fs"
        % (
            out,
            "" if a.no_plots else ", overlap-loop.png, overlap-idle-cpu.png, overlap-latency.png",
            time.time() - started,
        )
    )
    return 1 if not merged else 0


class Lookup:
    def __init__(self, merged):
        self.by = {k: {(m["kind"], str(m["key"])): m for m in ms} for k, ms in merged.items()}

    def m(self, impl, kind, key):
        return self.by.get(impl, {}).get((kind, str(key)))

    def t(self, impl, kind, key):
        m = self.m(impl, kind, key)
        return m["t"] if m else None

    def loop(self, impl, variant, size):
        return self.t(impl, "loop", "%s/%d" % (variant, size))

    def idle(self, impl, variant, metric):
        return self.t(impl, "idle", "%s/%s" % (variant, metric))

    def ratio(self, impl, variant, size):
        """variant / blocking: the per-block ratio's median if measured, else the ratio of the medians."""
        r = self.t(impl, "ratio", "%s/%d" % (variant, size))
        return r if r is not None else common.ratio(self.loop(impl, variant, size), self.loop(impl, "blocking", size))

    def overhead(self, variant, size):
        """mpiws: extra round-trip time per delivery, measured per block against blocking, median."""
        return self.t("mpiws", "overhead", "%s/%d" % (variant, size))

    def pp(self, impl, variant, size):
        return self.t(impl, "latency", "%s/%d" % (variant, size))

    def sizes(self, kind):
        return sorted({m["size"] for per in self.by.values() for (kk, _), m in per.items() if kk == kind})


def us(x, spec=None):
    if x is None:
        return "-"
    x *= 1e6
    if spec:
        return spec % x
    return "%.0f" % x if abs(x) >= 100 else ("%.1f" % x if abs(x) >= 10 else "%.2f" % x)


def r2(x):
    return common.fmt(x, "%.2f")


HIDEABLE_MIN = 0.1


def hidden(L, impl, variant, size):
    """Fraction of the hideable time actually hidden: (blocking - variant) / min(compute, exchange);
    "n/a" where the hideable time is under 10 % of the blocking time (the figure would be noise)."""
    blk, t = L.loop(impl, "blocking", size), L.loop(impl, variant, size)
    c, e = L.loop(impl, "compute", size), L.loop(impl, "exchange", size)
    if None in (blk, t, c, e) or min(c, e) <= 0:
        return "-"
    if min(c, e) < HIDEABLE_MIN * blk:
        return "n/a"
    return "%.2f" % ((blk - t) / min(c, e))


def header(meta, merged, failures):
    m = meta["machine"]
    head = [
        "## Overlap: computation/communication overlap, idle CPU, handler latency — mpiws vs mpi4py + MPICH",
        "",
        "%d ranks on %s cores (%s), %s run, median of %d alternating rounds (%s), %s, took %.0f s. "
        "Load average at start %s, at end %s."
        % (
            meta["nranks"],
            meta["cores"],
            m.get("cpu", "?"),
            "quick" if meta["quick"] else "full",
            meta["rounds"],
            ", ".join(meta["impls"]),
            meta["started"],
            meta["seconds"],
            "/".join("%.2f" % x for x in m.get("load_avg", ())),
            "/".join("%.2f" % x for x in m.get("load_avg_end", ())),
        ),
        "Work per loop iteration: %s numpy kernel calls (calibrated to %.1f ms on an idle core); "
        "%s iterations per timed block, %s blocks; ping-pong %s blocks of %s round trips "
        "(each block runs every variant in turn); idle wait %s s."
        % (
            meta.get("work_calls"),
            meta["work_ms"],
            meta.get("iters"),
            meta.get("trials"),
            meta.get("pp_trials"),
            meta.get("pp_reps"),
            meta.get("idle_seconds"),
        ),
        common.provenance(m),
        "Command: `%s`" % meta["command"],
        "",
    ]
    head += common.failure_lines(failures, lambda f: "round %d %s" % (f["round"], f["impl"]))
    for k in meta["impls"]:
        if k not in merged:
            head.append("%s: no results (all launches failed)." % k)
        elif min(x["n"] for x in merged[k]) < meta["rounds"]:
            head.append("%s: only %d of %d rounds succeeded." % (k, min(x["n"] for x in merged[k]), meta["rounds"]))
    return "\n".join(head)


def report(meta, merged, failures):
    L = Lookup(merged)
    parts = [header(meta, merged, failures)]
    sizes = L.sizes("loop")
    pp_sizes = L.sizes("latency")
    labels = {k: common.IMPLS[k].label for k in KEYS}

    # ---- summary: the headline figures
    rows = []
    ran = [k for k in KEYS if k in merged]
    big = max(sizes) if sizes else None
    if big is not None:
        for k in ran:
            rows.append(
                [
                    "loop %s: non-blocking / blocking (%s)" % (common.human_size(big), labels[k]),
                    r2(L.ratio(k, "nonblocking", big)),
                    "below 1 = overlap pays",
                ]
            )
        rows.append(
            ["loop %s: mpiws handlers / blocking" % common.human_size(big), r2(L.ratio("mpiws", "handlers", big)), ""]
        )
        rows.append(
            [
                "loop %s: mpiws non-blocking / MPI-TCP non-blocking" % common.human_size(big),
                r2(common.ratio(L.loop("mpiws", "nonblocking", big), L.loop("mpi-tcp", "nonblocking", big))),
                "above 1 = mpiws slower",
            ]
        )
    for k in ran if L.sizes("idle") else ():
        cpu, wall = L.idle(k, "recv", "cpu"), L.idle(k, "recv", "wall")
        rows.append(
            [
                "idle Recv: CPU of the waiting rank (%s)" % labels[k],
                common.fmt(common.ratio(cpu, wall) and 100 * common.ratio(cpu, wall), "%.1f %%"),
                "of one core",
            ]
        )
    if pp_sizes:
        s = pp_sizes[0]
        h = L.pp("mpiws", "handler-echo", s)
        rows.append(
            [
                "handler delivery overhead, %s ping-pong (mpiws)" % common.human_size(s),
                us(L.overhead("handler-echo", s), "%.1f us"),
                "extra round-trip time when the reply is sent from a completed handler",
            ]
        )
        rows.append(
            [
                "%s half round trip: mpiws handler-echo / MPI-TCP blocking" % common.human_size(s),
                r2(common.ratio(h, L.pp("mpi-tcp", "blocking", s))),
                "",
            ]
        )
    parts.append(common.table("Summary", ["figure", "value", "note"], rows))

    # ---- 1. loop: time per iteration
    if sizes:
        parts += loop_tables(L, sizes, meta, labels)

    # ---- 2. idle waiting CPU
    if L.sizes("idle"):
        parts += idle_tables(L, labels)

    # ---- 3. handler delivery latency
    for s in pp_sizes:
        rows = []
        for v in PP_VARIANTS:
            ts = [L.pp(k, v, s) for k in KEYS]
            if not any(ts):
                continue
            refv = "blocking" if v in ("handler-echo", "handler-both", "await-echo") else v
            over = L.overhead(v, s)
            rows.append(
                [v]
                + [us(x, "%.2f") for x in ts]
                + [r2(common.ratio(ts[0], L.pp(r, refv, s))) for r in REFS]
                + [us(over, "%.1f") if over is not None else "-"]
            )
        parts.append(
            common.table(
                "3. Handler delivery latency: %s ping-pong, half round trip (us)" % common.human_size(s),
                ["variant", "mpiws", "MPI-TCP", "MPI-shm", "mpiws/TCP", "mpiws/shm", "mpiws overhead us/delivery"],
                rows,
                "blocking = Send/Recv on both ranks; irecv-wait = rank 1 Irecv + Wait then Send; handler-echo (mpiws) = "
                "rank 1 replies from the completed handler of its Irecv (one handler delivery per round trip); "
                "handler-both = both ranks driven by handlers (two per round trip); await-echo = rank 1 in asyncio "
                "`await comm.Irecv(...)` then Send. Ratios of the handler/await rows are against MPI blocking. "
                "Overhead = (round trip - mpiws blocking round trip of the same block) / deliveries per round trip, "
                "median over blocks and rounds (the variants run in turn in every block).",
            )
        )

    # ---- spread
    rows = []
    for k in KEYS:
        ms = [x for x in merged.get(k, []) if x["kind"] in ("loop", "latency") and x["t_min"]]
        if not ms or meta["rounds"] < 2:
            continue
        spread = sorted(x["t_max"] / x["t_min"] for x in ms)
        worst = max(ms, key=lambda x: x["t_max"] / x["t_min"])
        rows.append(
            [labels[k], "%.2f" % spread[len(spread) // 2], "%.2f" % spread[-1], "%s %s" % (worst["kind"], worst["key"])]
        )
    if rows:
        parts.append(
            common.table(
                "Spread over rounds (max/min time per loop/latency measurement)",
                ["impl", "median", "worst", "worst at"],
                rows,
            )
        )
    return "\n".join(parts)


def loop_tables(L, sizes, meta, labels):
    parts = []
    hdr = ["size", "variant", "mpiws", "MPI-TCP", "MPI-shm", "mpiws/TCP", "mpiws/shm"]
    rows = []
    for s in sizes:
        for v in LOOP_VARIANTS:
            ts = [L.loop(k, v, s) for k in KEYS]
            if not any(ts):
                continue
            # mpiws handlers have no MPI counterpart: compare them with MPI non-blocking
            refv = "nonblocking" if v == "handlers" else v
            rs = [common.ratio(ts[0], L.loop(r, refv, s)) for r in REFS]
            rows.append(
                [common.human_size(s), v + (" (vs MPI nb)" if v == "handlers" else "")]
                + [us(x) for x in ts]
                + [r2(x) for x in rs]
            )
    parts.append(
        common.table(
            "1. Compute + exchange loop: time per iteration (us)",
            hdr,
            rows,
            "Two ranks; each iteration does the same numpy work (~%.1f ms) and exchanges one message of `size` "
            "with the peer. compute / exchange = each alone; blocking = work then Sendrecv; nonblocking = "
            "Irecv+Isend, work, Waitall; handlers (mpiws) = Irecv+Isend with an MPI.Schedule whose handlers count the "
            "completions and wake the main thread (no MPI wait); its ratio columns compare it with MPI nonblocking. "
            "Time = the slower rank's; ratio above 1 = mpiws slower." % meta["work_ms"],
        )
    )

    rows = []
    for s in sizes:
        rows.append(
            [common.human_size(s)]
            + [r2(L.ratio(k, "nonblocking", s)) for k in KEYS]
            + [r2(L.ratio("mpiws", "handlers", s))]
            + [hidden(L, k, "nonblocking", s) for k in KEYS]
            + [hidden(L, "mpiws", "handlers", s)]
        )
    parts.append(
        common.table(
            "1b. Overlap ratio and hidden fraction",
            [
                "size",
                "mpiws nb/blk",
                "TCP nb/blk",
                "shm nb/blk",
                "mpiws hnd/blk",
                "mpiws hidden",
                "TCP hidden",
                "shm hidden",
                "mpiws hnd hidden",
            ],
            rows,
            "nb/blk = overlap ratio = non-blocking time / blocking time per iteration, per timed block (same "
            "conditions), median (below 1: overlapping pays; the best possible is max(compute, exchange) / "
            "(compute + exchange)); hnd/blk the same for mpiws handlers. hidden = (blocking - non-blocking) / "
            "min(compute, exchange) from the medians: 1 = all the hideable time hidden, 0 = none, below 0 = "
            "non-blocking is slower; n/a where min(compute, exchange) is under 10 % of the blocking time.",
        )
    )

    rows = []
    for s in sizes:
        rows.append(
            [common.human_size(s)]
            + [
                r2(common.ratio(L.loop("mpiws", v, s), L.loop(r, v, s)))
                for v in ("blocking", "nonblocking")
                for r in REFS
            ]
            + [r2(common.ratio(L.loop("mpiws", "handlers", s), L.loop(r, "nonblocking", s))) for r in REFS]
        )
    parts.append(
        common.table(
            "1c. mpiws / MPI, time per iteration",
            [
                "size",
                "blocking /TCP",
                "blocking /shm",
                "nb /TCP",
                "nb /shm",
                "mpiws hnd / TCP nb",
                "mpiws hnd / shm nb",
            ],
            rows,
            "Above 1 = mpiws slower.",
        )
    )
    return parts


def idle_tables(L, labels):
    parts = []
    rows = []
    for v in IDLE_VARIANTS:
        for k in KEYS:
            cpu, wall = L.idle(k, v, "cpu"), L.idle(k, v, "wall")
            if cpu is None:
                continue
            peer = L.idle(k, v, "peer_cpu")
            rows.append(
                [
                    v,
                    labels[k],
                    common.fmt(wall, "%.2f"),
                    "%.3f" % cpu,
                    common.fmt(100 * cpu / wall if wall else None, "%.1f"),
                    common.fmt(L.idle(k, v, "user"), "%.3f"),
                    common.fmt(L.idle(k, v, "sys"), "%.3f"),
                    common.fmt(L.idle(k, v, "nvcsw"), "%.0f"),
                    common.fmt(L.idle(k, v, "nivcsw"), "%.0f"),
                    common.fmt(L.idle(k, v, "threads"), "%.0f"),
                    common.fmt(peer and peer * 1e3, "%.1f"),
                ]
            )
    parts.append(
        common.table(
            "2. Idle waiting: CPU used by a rank blocked in a receive",
            [
                "wait",
                "impl",
                "wall s",
                "CPU s",
                "CPU %",
                "user s",
                "sys s",
                "vol. cs",
                "invol. cs",
                "threads",
                "sleeping peer CPU ms",
            ],
            rows,
            "Rank 1 sleeps, then sends 8 bytes; rank 0 waits: recv = Recv; irecv-wait = Irecv + Wait; handler (mpiws) "
            "= Irecv with a completed handler, the main thread asleep in threading.Event.wait. CPU = "
            "time.process_time() of the waiting process over the wait (every thread); user/sys and context switches "
            "from getrusage(RUSAGE_SELF); CPU % = CPU / wall (100 = one core). The sleeping peer's CPU is measured "
            "the same way over its sleep.",
        )
    )

    rows = []
    for v in IDLE_VARIANTS[:2]:
        w = L.idle("mpiws", v, "cpu")
        rows.append(
            [v]
            + [r2(common.ratio(w, L.idle(r, v, "cpu"))) for r in REFS]
            + [common.fmt(common.ratio(L.idle(r, v, "cpu"), w), "%.0f") for r in REFS]
        )
    h = L.idle("mpiws", "handler", "cpu")
    rows.append(
        ["mpiws handler vs MPI irecv-wait"]
        + [r2(common.ratio(h, L.idle(r, "irecv-wait", "cpu"))) for r in REFS]
        + [common.fmt(common.ratio(L.idle(r, "irecv-wait", "cpu"), h), "%.0f") for r in REFS]
    )
    parts.append(
        common.table(
            "2b. Idle waiting CPU ratios",
            ["wait", "mpiws/TCP", "mpiws/shm", "TCP/mpiws", "shm/mpiws"],
            rows,
            "CPU seconds of the waiting rank; mpiws/MPI below 1 = mpiws uses less CPU.",
        )
    )
    return parts


# ------------------------------------------------------------------ plots


def bars(ax, groups, series, colors=None):
    """Grouped bars: ``groups`` x labels; ``series`` [(label, [value or None per group])]."""
    n = max(1, len(series))
    width = 0.8 / n
    for i, (label, vals) in enumerate(series):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar(
            [x for x, v in zip(xs, vals) if v is not None],
            [v for v in vals if v is not None],
            width,
            label=label,
            color=(colors or {}).get(label),
        )
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.grid(True, axis="y", alpha=0.3)


def plots(out, meta, merged):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    L = Lookup(merged)
    keys = [k for k in KEYS if k in merged]
    labels = [common.IMPLS[k].label for k in keys]
    sub = "%d ranks, %s cores; median of %d alternating rounds" % (meta["nranks"], meta["cores"], meta["rounds"])
    vcolors = {
        "compute": "tab:gray",
        "exchange": "tab:olive",
        "blocking": "tab:blue",
        "nonblocking": "tab:orange",
        "handlers": "tab:red",
    }

    sizes = L.sizes("loop")
    if sizes:
        fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 4.2), squeeze=False)
        for ax, s in zip(axes[0], sizes):
            series = [(v, [L.loop(k, v, s) and L.loop(k, v, s) * 1e3 for k in keys]) for v in LOOP_VARIANTS]
            bars(ax, labels, [x for x in series if any(x[1])], vcolors)
            ax.set_title("message %s" % common.human_size(s), fontsize=10)
            ax.set_ylabel("time per iteration (ms)")
        axes[0][0].legend(fontsize=8)
        fig.suptitle("Compute (~%.1f ms) + exchange loop\n%s" % (meta["work_ms"], sub), fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "overlap-loop.png", dpi=110)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.2))
    series = []
    for v in IDLE_VARIANTS:
        vals = []
        for k in keys:
            cpu, wall = L.idle(k, v, "cpu"), L.idle(k, v, "wall")
            vals.append(100 * cpu / wall if cpu is not None and wall else None)
        if any(x is not None for x in vals):
            series.append((v, [max(x, 1e-3) if x is not None else None for x in vals]))
    bars(ax, labels, series)
    ax.set_yscale("log")
    ax.set_ylabel("CPU of the waiting process (% of one core, log)")
    ax.set_title("Idle waiting: rank blocked %s s in a receive\n%s" % (meta.get("idle_seconds"), sub), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "overlap-idle-cpu.png", dpi=110)
    plt.close(fig)

    pp = L.sizes("latency")
    if pp:
        s = pp[0]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        series = [(v, [L.pp(k, v, s) and L.pp(k, v, s) * 1e6 for k in keys]) for v in PP_VARIANTS]
        bars(ax, labels, [x for x in series if any(x[1])])
        ax.set_ylabel("half round trip (us)")
        ax.set_title("Handler delivery latency: %s ping-pong\n%s" % (common.human_size(s), sub), fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "overlap-latency.png", dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
