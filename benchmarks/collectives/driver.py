"""Collectives driver: mpiws (every algorithm + auto) vs MPI-TCP and MPI-shm, alternating; tables, JSON, plots.

Entry point: benchmarks/collectives/run [--quick] [--out DIR] [--ranks 2,4,8] [--rounds R] [--impls a,b]
"""

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

PROG = HERE / "bench.py"
COLLECTIVES = ["bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce"]
PLOT_RANKS = 4
VS_RANKS_SIZE = 1 << 20  # the size of the time-vs-ranks comparison (or the largest measured below it)
ALGO_COLORS = ["tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray"]


def parse(argv):
    ap = common.arg_parser(
        "collectives",
        __doc__,
        "4 ranks, 4 sizes, 2 rounds, shorter blocks",
        "default 3, quick 2",
        "default 300, quick 150",
    )
    ap.add_argument("--ranks", default=None, help="comma-separated rank counts (default 2,4,8; quick 4)")
    return ap.parse_args(argv)


def main(argv=None):
    a = parse(argv)
    rounds = a.rounds or (2 if a.quick else 3)
    ranks = [int(x) for x in (a.ranks or ("4" if a.quick else "2,4,8")).split(",")]
    timeout = a.timeout or (150 if a.quick else 300)
    keys, impls = common.select(a.impls)
    args = (["--quick"] if a.quick else []) + a.bench_args
    machine = common.machine()
    common.log(
        "collectives: ranks %s on %s cores, %d rounds of %s, %s"
        % (",".join(map(str, ranks)), machine["cores"], rounds, ", ".join(keys), "quick" if a.quick else "full")
    )
    started = time.time()
    raw, merged, failures = common.sweep("collectives", impls, rounds, PROG, [(n, args) for n in ranks], timeout)
    meta = common.run_meta(
        "collectives",
        a,
        argv,
        started,
        machine,
        rounds,
        keys,
        ranks=ranks,
    )
    out = common.save_suite("collectives", a, meta, merged, raw, failures, report, plots, any(merged.values()))
    common.log(
        "collectives: wrote %s (results.json, table.md%s) in %.0fs"
        % (out, "" if a.no_plots else ", collectives-*.png", time.time() - started)
    )
    return 1 if not any(merged.values()) else 0


class Lookup:
    """t(nranks, impl, collective, algo, size) -> median seconds (or the full measurement)."""

    def __init__(self, merged):
        self.by = {}
        for n, per in merged.items():
            for k, ms in per.items():
                for m in ms:
                    self.by[(int(n), k, m["kind"], m["algo"], m["size"])] = m

    def m(self, n, k, kind, algo, size):
        return self.by.get((n, k, kind, algo, size))

    def t(self, n, k, kind, algo, size):
        m = self.m(n, k, kind, algo, size)
        return m["t"] if m else None

    def algos(self, n, kind):
        seen = []
        for (nn, k, kk, algo, _), _m in self.by.items():
            if nn == n and k == "mpiws" and kk == kind and algo != "auto" and algo not in seen:
                seen.append(algo)
        return seen

    def sizes(self, n, kind):
        return sorted({s for (nn, _, kk, _, s) in self.by if nn == n and kk == kind})

    def ref(self, n, k, kind, size):
        return self.t(n, k, kind, "mpi", size)


def scaled(x, scale, whole_from):
    """Seconds as a short number in 1/scale units (whole numbers from `whole_from`)."""
    if x is None:
        return "-"
    x *= scale
    return "%.0f" % x if x >= whole_from else ("%.1f" % x if x >= 10 else "%.2f" % x)


def msec(x):
    return scaled(x, 1e3, 100)


def oversub(n, meta):
    return n > (meta["cores"] or n)


def vs_ranks_points(L, ranks):
    """[(kind, size)]: per collective (and matmul) the size compared across rank counts: 1 MiB or the largest
    measured at every rank count below it (matmul: the largest N measured at every rank count)."""
    measured = [n for n in ranks if any(L.sizes(n, k) for k in COLLECTIVES + ["matmul"])]
    if len(measured) < 2:
        return []
    out = []
    for kind in COLLECTIVES + ["matmul"]:
        common_sizes = set.intersection(*[set(L.sizes(n, kind)) for n in measured])
        ok = sorted(s for s in common_sizes if kind == "matmul" or 0 < s <= VS_RANKS_SIZE)
        if ok:
            out.append((kind, ok[-1]))
    return out


def point_label(kind, size):
    return "N = %d" % size if kind == "matmul" else common.human_size(size)


def us(x):
    return scaled(x, 1e6, 1000)


def targets(L, ranks):
    rows = []

    def row(title, a, b, goal, ok, la, lb):
        r = common.ratio(a, b)
        rows.append(
            [
                title,
                "%s %s us" % (la, us(a)),
                "%s %s us" % (lb, us(b)),
                common.fmt(r, "%.2f"),
                goal,
                "-" if r is None else ("yes" if ok(r) else "NO"),
            ]
        )

    row(
        "barrier, 4 ranks: mpiws auto / MPI-TCP",
        L.t(4, "mpiws", "barrier", "auto", 0),
        L.ref(4, "mpi-tcp", "barrier", 0),
        "<= 3",
        lambda r: r <= 3,
        "auto",
        "TCP",
    )
    row(
        "16 MiB allreduce, 4 ranks: mpiws auto / MPI-TCP",
        L.t(4, "mpiws", "allreduce", "auto", 1 << 24),
        L.ref(4, "mpi-tcp", "allreduce", 1 << 24),
        "<= 1.5",
        lambda r: r <= 1.5,
        "auto",
        "TCP",
    )
    for n in (8, 4):
        if n == 8 or 8 not in ranks:
            row(
                "1 MiB bcast, %d ranks: serial / binomial%s" % (n, "" if n == 8 else " (target is at 8 ranks)"),
                L.t(n, "mpiws", "bcast", "serial", 1 << 20),
                L.t(n, "mpiws", "bcast", "binomial", 1 << 20),
                ">= 1.8",
                lambda r: r >= 1.8,
                "serial",
                "binomial",
            )
    return common.table(
        "Targets",
        ["target", "mpiws", "reference", "ratio", "goal", "met"],
        rows,
        "Medians over rounds of the max-over-ranks time per call.",
    )


def report(meta, merged, failures):
    L = Lookup(merged)
    ranks = meta["ranks"]
    m = meta["machine"]
    head = [
        "## Collectives: mpiws (every algorithm) vs mpi4py + MPICH",
        "",
        "Ranks %s on %s cores (%s; more ranks than cores = oversubscribed), %s run, median of %d alternating "
        "rounds (%s), %s, took %.0f s. Load average at start %s, at end %s."
        % (
            ", ".join(map(str, ranks)),
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
        common.provenance(m),
        "Command: `%s`" % meta["command"],
        "",
    ]
    head += common.failure_lines(failures, lambda f: "%d ranks round %d %s" % (f["nranks"], f["round"], f["impl"]))
    for n in ranks:
        for k in meta["impls"]:
            ms = merged.get(str(n), {}).get(k)
            if not ms:
                head.append("%d ranks, %s: no results (all launches failed)." % (n, k))
            elif min(x["n"] for x in ms) < meta["rounds"]:
                head.append(
                    "%d ranks, %s: only %d of %d rounds succeeded." % (n, k, min(x["n"] for x in ms), meta["rounds"])
                )
    parts = ["\n".join(head), targets(L, ranks)]

    # barrier vs ranks
    algos = []
    for n in ranks:
        algos += [x for x in L.algos(n, "barrier") if x not in algos]
    rows = []
    for n in ranks:
        ts = [L.t(n, "mpiws", "barrier", x, 0) for x in algos]
        auto = L.t(n, "mpiws", "barrier", "auto", 0)
        tcp, shm = L.ref(n, "mpi-tcp", "barrier", 0), L.ref(n, "mpi-shm", "barrier", 0)
        best = min([x for x in ts if x is not None], default=None)
        rows.append(
            ["%d%s" % (n, " (oversub.)" if n > (meta["cores"] or n) else "")]
            + [us(x) for x in ts]
            + [
                us(auto),
                us(tcp),
                us(shm),
                common.fmt(common.ratio(best, tcp), "%.2f"),
                common.fmt(common.ratio(auto, tcp), "%.2f"),
            ]
        )
    parts.append(
        common.table(
            "Barrier vs number of ranks (us per call)",
            ["ranks"] + algos + ["auto", "MPI-TCP", "MPI-shm", "best/TCP", "auto/TCP"],
            rows,
            "mpiws columns: each algorithm forced, then auto (mpiws's choice). Ratio above 1 = mpiws slower.",
        )
    )

    for kind in COLLECTIVES:
        for n in ranks:
            algos = L.algos(n, kind)
            sizes = L.sizes(n, kind)
            if not sizes:
                continue
            rows = []
            for s in sizes:
                ts = [L.t(n, "mpiws", kind, x, s) for x in algos]
                auto = L.t(n, "mpiws", kind, "auto", s)
                tcp, shm = L.ref(n, "mpi-tcp", kind, s), L.ref(n, "mpi-shm", kind, s)
                best = min([x for x in ts if x is not None], default=None)
                bestname = algos[ts.index(best)] if best is not None else "-"
                rows.append(
                    [common.human_size(s)]
                    + [us(x) for x in ts]
                    + [
                        us(auto),
                        us(tcp),
                        us(shm),
                        bestname,
                        common.fmt(common.ratio(best, tcp), "%.2f"),
                        common.fmt(common.ratio(auto, tcp), "%.2f"),
                    ]
                )
            parts.append(
                common.table(
                    "%s, %d ranks%s (us per call)"
                    % (kind.capitalize(), n, ", oversubscribed" if n > (meta["cores"] or n) else ""),
                    ["size"] + algos + ["auto", "MPI-TCP", "MPI-shm", "best", "best/TCP", "auto/TCP"],
                    rows,
                    None
                    if kind in ("bcast", "reduce", "allreduce")
                    else "size = whole buffer per rank; each rank's block is size/%d (at least one float64)." % n,
                )
            )

    # matmul: one multiplication's communication
    for n in ranks:
        sizes = L.sizes(n, "matmul")
        if not sizes:
            continue
        algos = L.algos(n, "matmul")
        rows = []
        for order in sizes:
            ts = [L.t(n, "mpiws", "matmul", x, order) for x in algos]
            auto = L.t(n, "mpiws", "matmul", "auto", order)
            tcp, shm = L.ref(n, "mpi-tcp", "matmul", order), L.ref(n, "mpi-shm", "matmul", order)
            best = min([x for x in ts if x is not None], default=None)
            bestname = algos[ts.index(best)] if best is not None else "-"
            width, nbytes = order // n, order * order * 8 / n
            rows.append(
                [
                    order,
                    "%d x %d%s" % (order, width, "" if order % n == 0 else "..%d" % (width + 1)),
                    common.human_size(nbytes)
                    if order % n == 0
                    else "~%.3g %s" % ((nbytes / (1 << 20), "MiB") if nbytes >= 1 << 20 else (nbytes / 1024, "KiB")),
                ]
                + [msec(x) for x in ts]
                + [
                    msec(auto),
                    msec(tcp),
                    msec(shm),
                    bestname,
                    common.fmt(common.ratio(best, tcp), "%.2f"),
                    common.fmt(common.ratio(auto, tcp), "%.2f"),
                ]
            )
        parts.append(
            common.table(
                "Matmul communication, %d ranks%s (ms per multiplication)"
                % (n, ", oversubscribed" if oversub(n, meta) else ""),
                ["N", "block", "block bytes"] + algos + ["auto", "MPI-TCP", "MPI-shm", "best", "best/TCP", "auto/TCP"],
                rows,
                "1-D blocked C = A B of N x N float64 matrices without the arithmetic: %d `Bcast`s, step k rooted at "
                "rank k, of its N x N/%d column block (the whole matrix is broadcast once). mpiws columns: bcast "
                "forced to each algorithm, then auto. Ratio above 1 = mpiws slower." % (n, n),
            )
        )

    # every collective against the number of ranks, at one size
    rows = []
    for kind, size in vs_ranks_points(L, ranks):
        for n in ranks:
            auto = L.t(n, "mpiws", kind, "auto", size)
            tcp, shm = L.ref(n, "mpi-tcp", kind, size), L.ref(n, "mpi-shm", kind, size)
            rows.append(
                [
                    kind,
                    point_label(kind, size),
                    "%d%s" % (n, " (oversub.)" if oversub(n, meta) else ""),
                    us(auto),
                    us(tcp),
                    us(shm),
                    common.fmt(common.ratio(auto, tcp), "%.2f"),
                    common.fmt(common.ratio(auto, shm), "%.2f"),
                ]
            )
    if rows:
        parts.append(
            common.table(
                "Time per call vs number of ranks (us)",
                ["collective", "size", "ranks", "mpiws auto", "MPI-TCP", "MPI-shm", "auto/TCP", "auto/shm"],
                rows,
                "Each collective at %s (or the largest size measured at every rank count below it; matmul: one "
                "multiplication at the largest N). Ratio above 1 = mpiws slower." % common.human_size(VS_RANKS_SIZE),
            )
        )

    # spread
    rows = []
    for n in ranks:
        for k in meta["impls"]:
            ms = [x for x in merged.get(str(n), {}).get(k, []) if x["t_min"]]
            if not ms or meta["rounds"] < 2:
                continue
            spread = sorted(x["t_max"] / x["t_min"] for x in ms)
            worst = max(ms, key=lambda x: x["t_max"] / x["t_min"])
            rows.append(
                [
                    n,
                    common.IMPLS[k].label,
                    "%.2f" % spread[len(spread) // 2],
                    "%.2f" % spread[-1],
                    "%s %s %s" % (worst["kind"], worst["algo"], point_label(worst["kind"], worst["size"])),
                ]
            )
    if rows:
        parts.append(
            common.table(
                "Spread over rounds (max/min time per measurement)",
                ["ranks", "impl", "median", "worst", "worst at"],
                rows,
            )
        )
    return "\n".join(parts)


def size_series(L, n, kind, scale):
    """{series: [(size, t, t_min, t_max) * scale]} for every mpiws algorithm, mpiws auto, MPI-TCP and MPI-shm at
    ``n`` ranks, and their colors (mpiws auto red, MPI blue/green, the algorithms from the rest)."""
    series, colors = {}, {}
    palette = iter(ALGO_COLORS)
    for algo in L.algos(n, kind) + ["auto"]:
        series["mpiws " + algo] = [
            (s, x["t"] * scale, x["t_min"] * scale, x["t_max"] * scale)
            for s in L.sizes(n, kind)
            for x in [L.m(n, "mpiws", kind, algo, s)]
            if x
        ]
        colors["mpiws " + algo] = "tab:red" if algo == "auto" else next(palette, None)
    for k in ("mpi-tcp", "mpi-shm"):
        series[k] = [
            (s, x["t"] * scale, x["t_min"] * scale, x["t_max"] * scale)
            for s in L.sizes(n, kind)
            for x in [L.m(n, k, kind, "mpi", s)]
            if x
        ]
    return {k: v for k, v in series.items() if v}, colors


def plots(out, meta, merged):
    L = Lookup(merged)
    ranks = meta["ranks"]
    n = PLOT_RANKS if PLOT_RANKS in ranks else ranks[0]
    sub = "%d ranks, %s cores; median of %d alternating rounds, band = min..max" % (n, meta["cores"], meta["rounds"])
    for kind in COLLECTIVES:
        series, colors = size_series(L, n, kind, 1e6)
        if series:
            common.plot(
                out / ("collectives-%s.png" % kind),
                "%s: time per call" % kind.capitalize(),
                series,
                "time per call (us)",
                xlabel="buffer size per rank (bytes)",
                subtitle=sub,
                colors=colors,
            )
    series, colors = size_series(L, n, "matmul", 1e3)
    if series:
        common.plot(
            out / "collectives-matmul.png",
            "Matmul communication: %d Bcasts of N x N/%d float64 blocks per multiplication" % (n, n),
            series,
            "time per multiplication (ms)",
            xlabel="matrix order N",
            subtitle=sub,
            colors=colors,
            xticks=L.sizes(n, "matmul"),
        )
    points = vs_ranks_points(L, ranks)
    if points:
        plot_vs_ranks(out / "collectives-vs-ranks.png", meta, L, points)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    algos = []
    for nn in ranks:
        algos += [x for x in L.algos(nn, "barrier") if x not in algos]
    lines = [("mpiws " + x, "mpiws", x) for x in algos + ["auto"]] + [
        ("MPI-TCP", "mpi-tcp", "mpi"),
        ("MPI-shm", "mpi-shm", "mpi"),
    ]
    for label, k, algo in lines:
        pts = [(nn, L.m(nn, k, "barrier", algo, 0)) for nn in ranks]
        pts = [(nn, x) for nn, x in pts if x]
        if not pts:
            continue
        style = "s--" if k != "mpiws" else ("o-" if algo == "auto" else "o:")
        ax.plot(
            [p[0] for p in pts],
            [p[1]["t"] * 1e6 for p in pts],
            style,
            label=label,
            color=common.COLORS.get(k) if k != "mpiws" or algo == "auto" else None,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ranks)
    ax.set_xticklabels([str(x) for x in ranks])
    ax.set_xlabel("ranks (%s cores)" % meta["cores"])
    ax.set_ylabel("barrier time (us)")
    ax.set_title("Barrier vs number of ranks\nmedian of %d alternating rounds" % meta["rounds"], fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "collectives-barrier.png", dpi=110)
    plt.close(fig)


def plot_vs_ranks(path, meta, L, points):
    """One panel per collective (and matmul): time per call vs ranks at one size, mpiws auto, MPI-TCP, MPI-shm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ranks = meta["ranks"]
    cols = min(4, len(points))
    rows = (len(points) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.4 * rows), squeeze=False)
    for ax, (kind, size) in zip(axes.flat, points):
        for label, k, algo in (
            ("mpiws auto", "mpiws", "auto"),
            ("MPI-TCP", "mpi-tcp", "mpi"),
            ("MPI-shm", "mpi-shm", "mpi"),
        ):
            pts = [(n, x) for n in ranks for x in [L.m(n, k, kind, algo, size)] if x]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ax.plot(xs, [p[1]["t"] * 1e6 for p in pts], "o-", ms=3, color=common.COLORS.get(k), label=label)
            ax.fill_between(
                xs,
                [p[1]["t_min"] * 1e6 for p in pts],
                [p[1]["t_max"] * 1e6 for p in pts],
                color=common.COLORS.get(k),
                alpha=0.15,
                lw=0,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ranks)
        ax.set_xticklabels([str(x) for x in ranks])
        ax.set_title(
            "%s, %s%s" % (kind, point_label(kind, size), " (one multiplication)" if kind == "matmul" else ""),
            fontsize=10,
        )
        ax.set_xlabel("ranks")
        ax.set_ylabel("time per call (us)")
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(points) :]:
        ax.set_visible(False)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(
        "Time per call vs number of ranks (%s cores: more ranks are oversubscribed); median of %d "
        "alternating rounds, band = min..max" % (meta["cores"], meta["rounds"]),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
