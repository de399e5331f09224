"""RMA driver: one-sided put/get/accumulate and a contended counter; mpiws vs MPI-TCP and MPI-shm, alternating;
tables, JSON, plots.

Entry point: benchmarks/rma/run [--quick] [--out DIR] [--ranks 2,4,8] [--rounds R] [--impls a,b]
"""

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

PROG = HERE / "bench.py"
PAIR = 2  # put, get and accumulate run on ranks 0 and 1 of a 2-rank launch
PARTS = ["put", "get", "acc", "counter"]
KEYS = ("mpiws", "mpi-tcp", "mpi-shm")
REFS = ("mpi-tcp", "mpi-shm")
PUT_MODES = {
    "flush": "Lock once; Put + Flush per operation",
    "lock": "Lock + Put + Unlock per operation (a whole passive-target epoch)",
    "fence": "Put, then Fence on both ranks (each rank puts in turn; time per put)",
}
MODE_STYLES = {"flush": "o-", "lock": "s--", "fence": "^:"}


def parse(argv):
    ap = common.arg_parser(
        "rma",
        __doc__,
        "5 put sizes, 4 get, 3 accumulate, shorter blocks, 1 trial, 2 rounds",
        "default 3, quick 2",
        "default 300, quick 120",
    )
    ap.add_argument(
        "--ranks",
        default=None,
        help="rank counts for the shared counter (default 2,4,8); put/get/accumulate always use 2",
    )
    return ap.parse_args(argv)


def requested_parts(bench_args):
    """The parts bench.py will run, from an ``--only`` among the arguments for it (the last one wins)."""
    parts = list(PARTS)
    for i, x in enumerate(bench_args):
        if x == "--only" and i + 1 < len(bench_args):
            parts = bench_args[i + 1].split(",")
        elif x.startswith("--only="):
            parts = x.split("=", 1)[1].split(",")
    return [p for p in parts if p]


def main(argv=None):
    a = parse(argv)
    rounds = a.rounds or (2 if a.quick else 3)
    ranks = [int(x) for x in (a.ranks or "2,4,8").split(",")]
    if any(n < PAIR for n in ranks):
        common.log(
            "rma: the counter needs at least 2 ranks: leaving out %s" % ",".join(str(n) for n in ranks if n < PAIR)
        )
        ranks = [n for n in ranks if n >= PAIR]
    timeout = a.timeout or (120 if a.quick else 300)
    keys, impls = common.select(a.impls)
    base = (["--quick"] if a.quick else []) + a.bench_args
    parts = requested_parts(a.bench_args)
    # one launch of 2 ranks for put/get/accumulate (and the counter at 2), one per other rank count for the counter
    plan = []
    pair_parts = [p for p in parts if p != "counter" or PAIR in ranks]
    if pair_parts:
        plan.append((PAIR, base + ["--only", ",".join(pair_parts)]))
    if "counter" in parts:
        plan += [(n, base + ["--only", "counter"]) for n in ranks if n != PAIR]
    machine = common.machine()
    common.log(
        "rma: %s on %s cores, %d rounds of %s, %s"
        % (
            "; ".join("%d ranks (%s)" % (n, args[args.index("--only") + 1]) for n, args in plan),
            machine["cores"],
            rounds,
            ", ".join(keys),
            "quick" if a.quick else "full",
        )
    )
    started = time.time()
    raw, merged, failures = common.sweep("rma", impls, rounds, PROG, plan, timeout)
    meta = common.run_meta(
        "rma",
        a,
        argv,
        started,
        machine,
        rounds,
        keys,
        ranks=sorted({n for n, _ in plan}),
        counter_ranks=[n for n in ranks if "counter" in parts],
        checks=checks(raw),
    )
    out = common.save_suite("rma", a, meta, merged, raw, failures, report, plots, any(merged.values()))
    common.log(
        "rma: wrote %s (results.json, table.md%s) in %.0fs"
        % (out, "" if a.no_plots else ", rma-*.png", time.time() - started)
    )
    wrong = [c for per in meta["checks"].values() for cs in per.values() for c in cs if not c["exact"]]
    return 1 if not any(merged.values()) or wrong else 0


def checks(raw):
    """{ranks: {impl: [the counter's check of each launch]}}."""
    return {
        n: {k: [c for res in rs for c in res.get("checks", []) if c["part"] == "counter"] for k, rs in per.items()}
        for n, per in raw.items()
    }


class Lookup:
    """m(nranks, impl, kind, key) -> the merged measurement (median over rounds in "t")."""

    def __init__(self, merged):
        self.by = {
            (int(n), k, m["kind"], str(m["key"])): m for n, per in merged.items() for k, ms in per.items() for m in ms
        }

    def m(self, n, k, kind, key):
        return self.by.get((n, k, kind, str(key)))

    def t(self, n, k, kind, key):
        m = self.m(n, k, kind, key)
        return m["t"] if m else None

    def sizes(self, kind, mode=None):
        return sorted(
            {
                m["size"]
                for (n, _k, kk, _key), m in self.by.items()
                if n == PAIR and kk == kind and (mode is None or m.get("mode") == mode)
            }
        )

    def ranks(self):
        return sorted({n for (n, _k, kk, _key) in self.by if kk == "counter"})


def us(x):
    return common.fmt(x and x * 1e6, "%.2f")


def mbs(size):
    return lambda t: t and size / t / 1e6


HDR = ["mpiws", "MPI-TCP", "MPI-shm", "mpiws/TCP", "mpiws/shm"]
SLOWER_TIME = "Ratio = mpiws time / reference time: above 1 means mpiws is slower."
SLOWER_RATE = "Ratio = mpiws / reference: below 1 means mpiws is slower."


def report(meta, merged, failures):
    L = Lookup(merged)
    m = meta["machine"]
    head = [
        "## One-sided communication (RMA): mpiws vs mpi4py + MPICH",
        "",
        "Put/Get/Accumulate on 2 ranks, the shared counter on %s ranks; %s cores (%s; more ranks than cores = "
        "oversubscribed), %s run, median of %d alternating rounds (%s), %s, took %.0f s. "
        "Load average at start %s, at end %s."
        % (
            ",".join(map(str, meta["counter_ranks"])) or "-",
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
    for n, per in merged.items():
        for k, ms in per.items():
            got = min(x["n"] for x in ms)
            if got < meta["rounds"]:
                head.append("%s ranks, %s: only %d of %d rounds succeeded." % (n, k, got, meta["rounds"]))
    wrong = [(n, k, c) for n, per in meta["checks"].items() for k, cs in per.items() for c in cs if not c["exact"]]
    if wrong:
        head += [
            "**The shared counter came out WRONG in %d launches** (%s)."
            % (
                len(wrong),
                "; ".join(
                    "%s ranks %s: final %d, expected %d, %d distinct values fetched"
                    % (n, k, c["final"], c["expected"], c["distinct_fetched"])
                    for n, k, c in wrong
                ),
            ),
            "",
        ]
    parts = ["\n".join(head)]

    # summary: one figure per part
    rows = []
    put_sizes, get_sizes, acc_sizes = L.sizes("put", "flush"), L.sizes("get"), L.sizes("acc")

    def summary(title, n, kind, key, value, show, reading):
        vs = [L.t(n, k, kind, key) for k in KEYS]
        vs = [value(v) if v else None for v in vs]
        rows.append(
            [title] + [show(v) for v in vs] + [common.fmt(common.ratio(vs[0], v), "%.2f") for v in vs[1:]] + [reading]
        )

    if put_sizes:
        s = put_sizes[0]
        summary(
            "Put latency, %s, flush (us)" % common.human_size(s),
            PAIR,
            "put",
            "flush/%d" % s,
            lambda t: t * 1e6,
            lambda v: common.fmt(v, "%.2f"),
            "above 1 = mpiws slower",
        )
        big = max(x for x in put_sizes if x <= 1 << 20)
        summary(
            "Put latency, %s, flush (us)" % common.human_size(big),
            PAIR,
            "put",
            "flush/%d" % big,
            lambda t: t * 1e6,
            lambda v: common.fmt(v, "%.1f"),
            "above 1 = mpiws slower",
        )
    if get_sizes:
        s = get_sizes[0]
        summary(
            "Get, %s: time per get in a window (us)" % common.human_size(s),
            PAIR,
            "get",
            s,
            lambda t: t * 1e6,
            lambda v: common.fmt(v, "%.2f"),
            "above 1 = mpiws slower",
        )
        big = max(x for x in get_sizes if x <= 1 << 20)
        summary(
            "Get bandwidth, %s (MB/s)" % common.human_size(big),
            PAIR,
            "get",
            big,
            mbs(big),
            lambda v: common.fmt(v, "%.0f"),
            "below 1 = mpiws slower",
        )
    if acc_sizes:
        s = acc_sizes[0]
        summary(
            "Accumulate latency, %s SUM (us)" % common.human_size(s),
            PAIR,
            "acc",
            s,
            lambda t: t * 1e6,
            lambda v: common.fmt(v, "%.2f"),
            "above 1 = mpiws slower",
        )
    for n in L.ranks()[-1:]:
        summary(
            "Shared counter, %d ranks (Fetch_and_op/s, all ranks)" % n,
            n,
            "counter",
            "rate",
            lambda t: 1 / t,
            lambda v: common.fmt(v, "%.0f"),
            "below 1 = mpiws slower",
        )
    if rows:
        parts.append(
            common.table(
                "Summary",
                ["measure"] + HDR + ["reading"],
                rows,
                "Medians over rounds; the tables below have every size.",
            )
        )

    # put latency, one table per synchronisation
    for mode, what in PUT_MODES.items():
        sizes = L.sizes("put", mode)
        if not sizes:
            continue
        rows = []
        for s in sizes:
            ts = [L.t(PAIR, k, "put", "%s/%d" % (mode, s)) for k in KEYS]
            rows.append(
                [common.human_size(s)]
                + [us(x) for x in ts]
                + [common.fmt(common.ratio(ts[0], x), "%.2f") for x in ts[1:]]
            )
        parts.append(
            common.table(
                "Put latency, %s synchronisation (us per put)" % mode,
                ["size"] + HDR,
                rows,
                "Rank 0 puts into rank 1's window: %s. %s" % (what, SLOWER_TIME),
            )
        )

    # get bandwidth
    if get_sizes:
        rows = []
        for s in get_sizes:
            w = next((L.m(PAIR, k, "get", s)["window"] for k in KEYS if L.m(PAIR, k, "get", s)), "-")
            bw = [L.t(PAIR, k, "get", s) and s / L.t(PAIR, k, "get", s) / 1e6 for k in KEYS]
            rows.append(
                [common.human_size(s), str(w)]
                + [common.fmt(x, "%.1f" if s < 1024 else "%.0f") for x in bw]
                + [common.fmt(common.ratio(bw[0], x), "%.2f") for x in bw[1:]]
            )
        parts.append(
            common.table(
                "Get bandwidth (MB/s, 1 MB = 10^6 B)",
                ["size", "window"] + HDR,
                rows,
                "Rank 0 reads rank 1's window: Lock once; per iteration `window` Gets back to back, "
                "then Flush. Bandwidth = window x size / time. " + SLOWER_RATE,
            )
        )

    # accumulate latency
    if acc_sizes:
        rows = []
        for s in acc_sizes:
            ts = [L.t(PAIR, k, "acc", s) for k in KEYS]
            rows.append(
                [common.human_size(s), str(s // 8)]
                + [us(x) for x in ts]
                + [common.fmt(common.ratio(ts[0], x), "%.2f") for x in ts[1:]]
            )
        parts.append(
            common.table(
                "Accumulate latency, MPI.SUM on float64 (us per accumulate)",
                ["size", "doubles"] + HDR,
                rows,
                "Rank 0 accumulates into rank 1's window: Lock once; Accumulate + Flush per "
                "operation; the sums are checked at the end. " + SLOWER_TIME,
            )
        )

    # shared counter
    counter_ranks = L.ranks()
    if counter_ranks:
        rows = []
        for n in counter_ranks:
            rate = [L.t(n, k, "counter", "rate") for k in KEYS]
            ops = [x and 1 / x for x in rate]
            rows.append(
                ["%d%s" % (n, " (oversubscribed)" if n > (meta["cores"] or n) else "")]
                + [common.fmt(x, "%.0f") for x in ops]
                + [common.fmt(common.ratio(ops[0], x), "%.2f") for x in ops[1:]]
            )
        parts.append(
            common.table(
                "Shared counter: Fetch_and_op(+1) on rank 0, all ranks together (operations/s)",
                ["ranks"] + HDR,
                rows,
                "Every rank (rank 0 on its own memory) does Fetch_and_op(1, SUM) + Flush(0) on one "
                "int64 at rank 0, inside one Lock(0, SHARED) epoch. ops/s = ranks x ops per rank / "
                "the slowest rank's time. " + SLOWER_RATE,
            )
        )
        rows = []
        for n in counter_ranks:
            remote = [L.t(n, k, "counter", "remote") for k in KEYS]
            self_ = [L.t(n, k, "counter", "self") for k in KEYS]
            rows.append(
                [str(n)]
                + [us(x) for x in remote]
                + [common.fmt(common.ratio(remote[0], x), "%.2f") for x in remote[1:]]
                + [us(x) for x in self_]
            )
        parts.append(
            common.table(
                "Shared counter: time per Fetch_and_op + Flush (us)",
                [
                    "ranks",
                    "mpiws",
                    "MPI-TCP",
                    "MPI-shm",
                    "mpiws/TCP",
                    "mpiws/shm",
                    "rank 0 mpiws",
                    "rank 0 MPI-TCP",
                    "rank 0 MPI-shm",
                ],
                rows,
                "Median over the remote ranks (1 .. N-1) of each one's time per operation while all "
                "contend, and rank 0's own (on its own memory). " + SLOWER_TIME,
            )
        )
        rows = []
        for n in counter_ranks:
            row = [str(n)]
            for k in KEYS:
                cs = meta["checks"].get(str(n), {}).get(k, [])
                bad = [c for c in cs if not c["exact"]]
                row.append(
                    "-"
                    if not cs
                    else ("exact (%d launches)" % len(cs) if not bad else "WRONG in %d of %d" % (len(bad), len(cs)))
                )
            rows.append(row)
        parts.append(
            common.table(
                "Shared counter: final count",
                ["ranks", "mpiws", "MPI-TCP", "MPI-shm"],
                rows,
                "Exact = the counter ends at ranks x operations and the values fetched are exactly "
                "0 .. total-1, each once (checked in every launch).",
            )
        )

    # spread: how noisy the rounds were
    rows = []
    for n, per in sorted(merged.items(), key=lambda x: int(x[0])):
        for k in KEYS:
            ms = [x for x in per.get(k, []) if x["t_min"]]
            if not ms:
                continue
            spread = sorted(x["t_max"] / x["t_min"] for x in ms)
            worst = max(ms, key=lambda x: x["t_max"] / x["t_min"])
            rows.append(
                [
                    n,
                    common.IMPLS[k].label,
                    "%.2f" % spread[len(spread) // 2],
                    "%.2f" % spread[-1],
                    "%s %s" % (worst["kind"], worst["key"]),
                ]
            )
    parts.append(
        common.table(
            "Spread over rounds (max/min time per measurement)", ["ranks", "impl", "median", "worst", "worst at"], rows
        )
    )
    return "\n".join(parts)


def plots(out, meta, merged):
    L = Lookup(merged)
    sub = "%s cores; median of %d alternating rounds, band = min..max" % (meta["cores"], meta["rounds"])
    per = merged.get(str(PAIR), {})

    def pts(ms, pred):
        return [(x["size"], x["t"], x["t_min"], x["t_max"]) for x in ms if pred(x)]

    series, colors, styles = {}, {}, {}
    for k, ms in per.items():
        for mode in PUT_MODES:
            label = "%s %s" % (common.IMPLS[k].label, mode)
            p = pts(ms, lambda x, mode=mode: x["kind"] == "put" and x.get("mode") == mode)
            if p:
                series[label], colors[label], styles[label] = p, common.COLORS.get(k), MODE_STYLES[mode]
    if series:
        common.plot(
            out / "rma-put-latency.png",
            "Put latency, rank 0 -> rank 1 (flush, lock, fence)",
            series,
            "time per put (us)",
            transform=lambda s, t: t * 1e6,
            subtitle="2 ranks, " + sub,
            colors=colors,
            styles=styles,
        )
    series = {k: pts(ms, lambda x: x["kind"] == "get") for k, ms in per.items()}
    if any(series.values()):
        common.plot(
            out / "rma-get-bandwidth.png",
            "Get bandwidth (window of Gets, then Flush)",
            {k: v for k, v in series.items() if v},
            "bandwidth (MB/s)",
            transform=lambda s, t: s / t / 1e6,
            subtitle="2 ranks, " + sub,
        )
    series = {k: pts(ms, lambda x: x["kind"] == "acc") for k, ms in per.items()}
    if any(series.values()):
        common.plot(
            out / "rma-accumulate-latency.png",
            "Accumulate latency (MPI.SUM, float64, + Flush)",
            {k: v for k, v in series.items() if v},
            "time per accumulate (us)",
            transform=lambda s, t: t * 1e6,
            subtitle="2 ranks, " + sub,
        )
    ranks = L.ranks()
    if ranks:
        series = {}
        for k in KEYS:
            p = [(n, x["t"], x["t_min"], x["t_max"]) for n in ranks for x in [L.m(n, k, "counter", "rate")] if x]
            if p:
                series[k] = p
        common.plot(
            out / "rma-counter.png",
            "Shared counter: Fetch_and_op(+1) on rank 0 by every rank",
            series,
            "operations/s, all ranks",
            transform=lambda s, t: 1 / t,
            xlabel="ranks (%s cores)" % meta["cores"],
            subtitle=sub,
            xticks=ranks,
        )


if __name__ == "__main__":
    sys.exit(main())
