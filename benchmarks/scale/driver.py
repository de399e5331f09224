"""Scale driver: N ranks on this machine, `mpiws run` against `mpiexec` (MPICH), alternating; tables, JSON, plots.

Entry point: benchmarks/scale/run [--quick] [--ranks 2,4,...] [--rounds R] [--impls mpiws,mpi-shm] [--out DIR]
"""

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

PROG = HERE / "bench.py"
# (measurement key, label, unit, scale from the rank program's value, format)
ROWS = [
    ("launch_s", "whole launch", "s", 1, "%.2f"),
    ("up_s", "every rank up", "s", 1, "%.2f"),
    ("first_barrier_s", "first barrier (connections opened)", "ms", 1e3, "%.1f"),
    ("barrier_s", "barrier", "us", 1e6, "%.0f"),
    ("allreduce_s", "8 B Allreduce", "us", 1e6, "%.0f"),
    ("pss_mib", "memory per rank (PSS)", "MiB", 1, "%.1f"),
    ("rss_mib", "memory per rank (RSS)", "MiB", 1, "%.1f"),
    ("sockets", "sockets per rank (mean)", "", 1, "%.1f"),
    ("sockets_max", "sockets per rank (most)", "", 1, "%.0f"),
    ("threads", "threads per rank", "", 1, "%.1f"),
]


def parse(argv):
    ap = common.arg_parser(
        "scale", __doc__, "2, 4 and 8 ranks, 2 rounds", "default 3, quick 2", "default 600", bench_args=False
    )
    ap.add_argument("--ranks", default=None, help="comma-separated rank counts (default 2,4,8,16,32,64; quick 2,4,8)")
    return ap.parse_args(argv)


def run_one(impl, n, timeout):
    """One launch; its wall time is a measurement too (the driver's clock)."""
    os.environ["SCALE_T0"] = repr(time.time())
    t = time.time()
    result = common.launch(impl, PROG, n, timeout=timeout)
    result["measurements"].append({"kind": "scale", "key": "launch_s", "t": time.time() - t})
    return result


def main(argv=None):
    a = parse(argv)
    rounds = a.rounds or (2 if a.quick else 3)
    ranks = [int(x) for x in (a.ranks or ("2,4,8" if a.quick else "2,4,8,16,32,64")).split(",")]
    timeout = a.timeout or 600
    keys, impls = common.select(a.impls or "mpiws,mpi-shm")
    machine = common.machine()
    common.log(
        "scale: ranks %s on %s cores, %d rounds of %s"
        % (",".join(map(str, ranks)), machine["cores"], rounds, ", ".join(keys))
    )
    started = time.time()
    raw, merged, failures = {}, {}, []
    for n in ranks:
        common.log("scale: --- %d ranks ---" % n)
        r, f = common.alternate(impls, rounds, lambda impl, n=n: run_one(impl, n, timeout))
        raw[str(n)] = r
        merged[str(n)] = {i.key: common.merge_rounds([x["measurements"] for x in r[i.key]]) for i in impls if r[i.key]}
        failures += [dict(x, nranks=n) for x in f]
    meta = common.run_meta(
        "scale",
        a,
        argv,
        started,
        machine,
        rounds,
        keys,
        ranks=ranks,
    )
    out = common.save_suite("scale", a, meta, merged, raw, failures, report, plots, any(merged.values()))
    common.log("scale: wrote %s in %.0fs" % (out, time.time() - started))
    return 1 if not any(merged.values()) else 0


def value(merged, n, impl, key):
    for m in merged.get(str(n), {}).get(impl, []):
        if m["key"] == key:
            return m["t"]
    return None


def report(meta, merged, failures):
    keys = meta["impls"]
    ref = next((k for k in keys if k != "mpiws"), None)
    labels = [common.IMPLS[k].label for k in keys]
    parts = [
        "## Scale: `mpiws run -n N` vs `mpiexec -n N`, %d cores\n\nCommand: `%s`, %s, %.0f s, load %s. Medians of %d alternating rounds; "
        "above %d ranks the machine is oversubscribed.\n"
        % (
            meta["cores"],
            meta["command"],
            meta["started"],
            meta["seconds"],
            " ".join("%.1f" % x for x in meta["machine"].get("load_avg", [])),
            meta["rounds"],
            meta["cores"],
        )
    ]
    for key, label, unit, scale, spec in ROWS:
        rows = []
        for n in meta["ranks"]:
            vals = [value(merged, n, k, key) for k in keys]
            cells = [common.fmt(None if v is None else v * scale, spec) for v in vals]
            if ref and "mpiws" in keys:
                cells.append(
                    common.fmt(common.ratio(value(merged, n, "mpiws", key), value(merged, n, ref, key)), "%.2f")
                )
            rows.append([n] + cells)
        header = ["ranks"] + labels + (["mpiws/" + common.IMPLS[ref].label] if ref and "mpiws" in keys else [])
        parts.append(common.table("%s%s" % (label, " (%s)" % unit if unit else ""), header, rows))
    parts.append(model(meta, merged))
    if failures:
        parts.append(
            "Failures: "
            + "; ".join(
                "%s at %s ranks, round %s: %s" % (f["impl"], f["nranks"], f["round"], f["error"].splitlines()[0])
                for f in failures
            )
            + "\n"
        )
    return "\n".join(parts)


def model(meta, merged):
    """Barrier and allreduce per algorithm round (dissemination and recursive
    doubling take ceil(log2 N) rounds), and the fit t(N) = rounds * (a + b * N),
    least relative squares: `a` a round's cost on its own, `b` what each rank
    adds to every round by sharing the cores (oversubscription); a model for
    more ranks and other links is checked against this."""
    import math

    rows, fits = [], []
    for key, label in (("barrier_s", "barrier"), ("allreduce_s", "8 B Allreduce")):
        pts = [(n, value(merged, n, "mpiws", key)) for n in meta["ranks"]]
        pts = [(n, math.ceil(math.log2(n)), t) for n, t in pts if t is not None and n > 1]
        if len(pts) < 2:
            continue
        # Minimise sum(((r*a + r*n*b) - t) / t)^2: 2x2 normal equations in (a, b).
        xs = [(r / t, r * n / t) for n, r, t in pts]
        s11, s12, s22 = sum(u * u for u, _ in xs), sum(u * v for u, v in xs), sum(v * v for _, v in xs)
        y1, y2 = sum(u for u, _ in xs), sum(v for _, v in xs)
        det = s11 * s22 - s12 * s12
        if det == 0:
            continue
        a, b = (y1 * s22 - y2 * s12) / det, (s11 * y2 - s12 * y1) / det
        fits.append("%s: a = %.1f us, b = %.2f us per rank" % (label, a * 1e6, b * 1e6))
        for n, r, t in pts:
            fit = r * (a + b * n)
            rows.append(
                [
                    label,
                    n,
                    r,
                    "%.0f" % (t * 1e6 / r),
                    "%.0f" % (t * 1e6),
                    "%.0f" % (fit * 1e6),
                    "%+.0f%%" % (100 * (fit / t - 1)),
                ]
            )
    if not rows:
        return ""
    return common.table(
        "mpiws: per round, and the fit t = rounds * (a + b * N)",
        ["collective", "ranks", "rounds", "us per round", "measured us", "fit us", "fit error"],
        rows,
        "; ".join(fits) + ".",
    )


def plots(out, meta, merged):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in ROWS if r[0] in ("launch_s", "barrier_s", "allreduce_s", "pss_mib", "sockets", "threads")]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (key, label, unit, scale, _) in zip(axes.flat, shown):
        for k in meta["impls"]:
            pts = [(n, value(merged, n, k, key)) for n in meta["ranks"]]
            pts = [(n, v * scale) for n, v in pts if v is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=common.IMPLS[k].label, color=common.COLORS.get(k))
        ax.set_xscale("log", base=2)
        if key in ("launch_s", "barrier_s", "allreduce_s"):
            ax.set_yscale("log")
        ax.set_title(label + (" (%s)" % unit if unit else ""))
        ax.set_xlabel("ranks")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("Scale on %d cores (%s)" % (meta["cores"], meta["started"]))
    fig.tight_layout()
    fig.savefig(out / "scale.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
