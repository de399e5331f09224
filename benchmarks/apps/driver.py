"""Applications driver: the examples/ applications on 1..N ranks, mpiws vs mpi4py + MPICH, alternating; times, speedups, JSON, plots.

Entry point: benchmarks/apps/run [--quick] [--out DIR] [--ranks 1,2,4,8] [--rounds R] [--impls a,b] [--apps a,b]

Each application is the file in examples/ as users run it (`mpiws run -n N`);
for MPICH the driver runs a copy whose one import line says
`from mpi4py import MPI` instead of `from mpiws import MPI` (nothing else
changes). Rank 0 prints `RESULT {json}` with the timed part in "seconds" and
whether the answer validated.
"""

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

EXAMPLES = common.ROOT / "examples"
IMPORT_MPIWS = "from mpiws import MPI"
IMPORT_MPI4PY = "from mpi4py import MPI"

# app -> (file, arguments quick, arguments full, what the size means)
APPS = {
    "moldyn": ("moldyn.py", ["--size", "A"], ["--size", "A"], "JGF MolDyn, 50 moves"),
    "matmul": ("matmul.py", ["--n", "1024"], ["--n", "2048"], "C = A B, 1-D blocks, binomial Bcast"),
    "coupled_heat": (
        "coupled_heat.py",
        ["--cells", "20000", "--steps", "2000"],
        ["--cells", "50000", "--steps", "5000"],
        "one material per rank, boundary exchange every step",
    ),
}


def parse(argv):
    ap = common.arg_parser(
        "apps",
        __doc__,
        "small sizes, ranks 1,2,4, one round",
        "default 3, quick 1",
        "default 900, quick 300",
        bench_args=False,
    )
    ap.add_argument("--ranks", default=None, help="comma-separated rank counts (default 1,2,4,8; quick 1,2,4)")
    ap.add_argument("--apps", default=None, help="comma-separated subset of: " + ",".join(APPS))
    return ap.parse_args(argv)


def program(app, impl, out):
    """The application file for ``impl``: the example itself, or its mpi4py copy."""
    src = EXAMPLES / APPS[app][0]
    if impl.mpi == "mpiws":
        return src
    text = src.read_text()
    if text.count(IMPORT_MPIWS) != 1:
        raise SystemExit("apps: %s must import MPI in exactly one line %r" % (src, IMPORT_MPIWS))
    copy = Path(out) / "mpi4py" / src.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text.replace(IMPORT_MPIWS, IMPORT_MPI4PY))
    return copy


def main(argv=None):
    a = parse(argv)
    rounds = a.rounds or (1 if a.quick else 3)
    ranks = [int(x) for x in (a.ranks or ("1,2,4" if a.quick else "1,2,4,8")).split(",")]
    timeout = a.timeout or (300 if a.quick else 900)
    apps = a.apps.split(",") if a.apps else list(APPS)
    for app in apps:
        if app not in APPS:
            raise SystemExit("apps: unknown application %r (have %s)" % (app, ", ".join(APPS)))
    keys, impls = common.select(a.impls)
    machine = common.machine()
    common.log(
        "apps: %s on ranks %s, %s cores, %d rounds of %s"
        % (", ".join(apps), ",".join(map(str, ranks)), machine["cores"], rounds, ", ".join(keys))
    )
    started = time.time()
    raw, merged, failures = {}, {}, []
    for app in apps:
        args = APPS[app][1] if a.quick else APPS[app][2]
        progs = {impl.key: program(app, impl, a.out) for impl in impls}
        for n in ranks:
            common.log("apps: --- %s, %d ranks ---" % (app, n))

            def run(impl, progs=progs, n=n, args=args):
                return common.launch(impl, progs[impl.key], n, args, timeout=timeout, prefix="RESULT ")

            r, f = common.alternate(impls, rounds, run)
            raw["%s/%d" % (app, n)] = r
            for k in keys:
                valid = [x for x in r[k] if x.get("valid")]
                if len(valid) < len(r[k]):
                    failures.append({"impl": k, "app": app, "nranks": n, "error": "result did not validate"})
                if valid:
                    ts = [x["seconds"] for x in valid]
                    merged.setdefault(app, {}).setdefault(k, {})[str(n)] = dict(
                        t=common.median(ts), t_min=min(ts), t_max=max(ts), n=len(ts)
                    )
            failures += [dict(x, app=app, nranks=n) for x in f]
    meta = common.run_meta(
        "apps",
        a,
        argv,
        started,
        machine,
        rounds,
        keys,
        apps=apps,
        ranks=ranks,
        args={app: APPS[app][1] if a.quick else APPS[app][2] for app in apps},
    )
    out = common.save_suite("apps", a, meta, merged, raw, failures, report, plots, bool(merged))
    common.log(
        "apps: wrote %s (results.json, table.md%s) in %.0fs"
        % (out, "" if a.no_plots else ", apps-speedup.png", time.time() - started)
    )
    return 0 if merged and not any(not f.get("kept") for f in failures) else 1


def t(merged, app, key, n):
    m = merged.get(app, {}).get(key, {}).get(str(n))
    return m and m["t"]


def report(meta, merged, failures):
    m = meta["machine"]
    head = [
        "## Applications: mpiws vs mpi4py + MPICH",
        "",
        "Ranks %s on %s cores (%s), %s run, median of %d alternating rounds (%s), %s, took %.0f s."
        % (
            ", ".join(map(str, meta["ranks"])),
            meta["cores"],
            m.get("cpu", "?"),
            "quick" if meta["quick"] else "full",
            meta["rounds"],
            ", ".join(meta["impls"]),
            meta["started"],
            meta["seconds"],
        ),
        common.provenance(m),
        "Command: `%s`" % meta["command"],
        "",
        "Time = the application's timed part (rank 0), seconds. Speedup = time on 1 rank / time on N ranks "
        "of the same implementation. Ratio = mpiws time / MPI time: above 1 means mpiws is slower.",
        "",
    ]
    parts = ["\n".join(head)]
    if failures:
        parts.append(
            common.table(
                "Failures",
                ["app", "ranks", "impl", "error"],
                [
                    [f.get("app", "?"), f.get("nranks", "?"), f["impl"], f["error"].splitlines()[0][:120]]
                    for f in failures
                ],
            )
        )
    labels = [common.IMPLS[k].label for k in meta["impls"]]
    refs = [k for k in meta["impls"] if k != "mpiws"]
    for app in meta["apps"]:
        if app not in merged:
            continue
        header = (
            ["ranks"]
            + ["%s s" % label for label in labels]
            + ["speedup %s" % label for label in labels]
            + ["mpiws/%s" % common.IMPLS[k].label for k in refs]
        )
        rows = []
        for n in meta["ranks"]:
            ts = [t(merged, app, k, n) for k in meta["impls"]]
            sp = [common.ratio(t(merged, app, k, 1), t(merged, app, k, n)) for k in meta["impls"]]
            rat = [common.ratio(t(merged, app, "mpiws", n), t(merged, app, k, n)) for k in refs]
            rows.append(
                [n]
                + [common.fmt(x, "%.3f") for x in ts]
                + [common.fmt(x, "%.2f") for x in sp]
                + [common.fmt(x, "%.2f") for x in rat]
            )
        parts.append(common.table("%s (%s; %s)" % (app, " ".join(meta["args"][app]), APPS[app][3]), header, rows))
    return "\n".join(parts)


def plots(out, meta, merged):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    apps = [a for a in meta["apps"] if a in merged]
    fig, axes = plt.subplots(1, len(apps), figsize=(5 * len(apps), 4), squeeze=False)
    for ax, app in zip(axes[0], apps):
        ranks = meta["ranks"]
        ax.plot(ranks, [n / ranks[0] for n in ranks], "k:", lw=1, label="ideal")
        for k in meta["impls"]:
            pts = [(n, common.ratio(t(merged, app, k, ranks[0]), t(merged, app, k, n))) for n in ranks]
            pts = [p for p in pts if p[1]]
            if pts:
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    "o-",
                    color=common.COLORS.get(k),
                    label=common.IMPLS[k].label,
                )
        ax.set_title("%s (%s)" % (app, " ".join(meta["args"][app])), fontsize=10)
        ax.set_xlabel("ranks")
        ax.set_ylabel("speedup")
        ax.set_xticks(ranks)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("Application speedup on %s cores" % meta["cores"], fontsize=11)
    fig.tight_layout()
    fig.savefig(Path(out) / "apps-speedup.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
