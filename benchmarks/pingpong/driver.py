"""Ping-pong driver: alternate mpiws, its network path, mpiws over TLS, MPI-TCP and MPI-shm; tables, JSON, plots.

Entry point: benchmarks/pingpong/run [--quick] [--out DIR] [--rounds R] [--impls a,b]
"""

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

PROG = HERE / "bench.py"
NRANKS = 2

# mpiws forced onto its network path between ranks on one host
# (`MPIWS_NOLOCAL=1`, as MPICH's MPIR_CVAR_NOLOCAL): "mpiws" itself takes
# the same-host channel. Only this suite measures both.
NET = "mpiws-net"
common.IMPLS.setdefault(NET, common.Impl(NET, "mpiws network path", "mpiws", {"MPIWS_NOLOCAL": "1"}))
common.COLORS.setdefault(NET, "tab:purple")
# mpiws with both ranks serving https (`mpiws run --tls-cert/--tls-key`), on
# the network path (on one host the same-host channel would carry it); its
# certificate is made per run (`tls_files`). Only this suite measures it.
TLS = "mpiws-tls"
common.IMPLS.setdefault(TLS, common.Impl(TLS, "mpiws TLS", "mpiws", {"MPIWS_NOLOCAL": "1"}))
common.COLORS.setdefault(TLS, "tab:orange")


def tls_files(out):
    """A CA and a certificate for 127.0.0.1 it issued, in ``out``: the
    environment that makes the local ranks serve, and trust, https."""
    import trustme

    out.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = {"MPIWS_CA_FILE": out / "ca.pem", "MPIWS_TLS_CERT": out / "cert.pem", "MPIWS_TLS_KEY": out / "key.pem"}
    ca.cert_pem.write_to_path(str(files["MPIWS_CA_FILE"]))
    cert.private_key_pem.write_to_path(str(files["MPIWS_TLS_KEY"]))
    files["MPIWS_TLS_CERT"].write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    return {k: str(v) for k, v in files.items()}


# The issue's targets: (title, mpiws as measured, kind, key, reference, goal, met, time or bandwidth)
TARGETS = [
    ("8 B latency, same host vs MPI-shm", "mpiws", "buffer", "8", "mpi-shm", "<= 2", lambda r: r <= 2.0, "time"),
    (
        "16 MiB bandwidth, same host vs MPI-shm",
        "mpiws",
        "buffer",
        str(16 << 20),
        "mpi-shm",
        ">= 0.8",
        lambda r: r >= 0.8,
        "bw",
    ),
    ("8 B latency, network path vs MPI-TCP", NET, "buffer", "8", "mpi-tcp", "<= 1.3", lambda r: r <= 1.3, "time"),
    (
        "16 MiB bandwidth, network path vs MPI-TCP",
        NET,
        "buffer",
        str(16 << 20),
        "mpi-tcp",
        ">= 1.0",
        lambda r: r >= 1.0,
        "bw",
    ),
    (
        "16 MiB bandwidth, TLS vs cleartext (network path)",
        TLS,
        "buffer",
        str(16 << 20),
        NET,
        ">= 0.8",
        lambda r: r >= 0.8,
        "bw",
    ),
    (
        "16 MiB bidirectional bandwidth, network path vs MPI-TCP",
        NET,
        "bibw",
        str(16 << 20),
        "mpi-tcp",
        ">= 0.9",
        lambda r: r >= 0.9,
        "bw",
    ),
    ("small dict send/recv vs mpi4py TCP", "mpiws", "object", "dict", "mpi-tcp", "<= 1.5", lambda r: r <= 1.5, "time"),
    (
        "10-float64 array send/recv vs mpi4py TCP",
        "mpiws",
        "object",
        "ndarray-10",
        "mpi-tcp",
        "<= 1.5",
        lambda r: r <= 1.5,
        "time",
    ),
]


def parse(argv):
    ap = common.arg_parser(
        "pingpong",
        __doc__,
        "fewer sizes (to 16 MiB), repetitions and rounds",
        "default 5, quick 3",
        None,
        timeout_default=600,
    )
    return ap.parse_args(argv)


def main(argv=None):
    a = parse(argv)
    rounds = a.rounds or (3 if a.quick else 5)
    wanted = a.impls.split(",") if a.impls else list(common.IMPLS)
    keys, impls = common.select(",".join(k for k in wanted if k != TLS))
    if TLS in wanted and "mpiws" in common.check_setup():
        try:
            common.IMPLS[TLS].env.update(tls_files(Path(a.out) / "tls"))
            at = keys.index("mpiws") + 1 if "mpiws" in keys else 0
            keys.insert(at, TLS)
            impls.insert(at, common.IMPLS[TLS])
        except ImportError:
            common.log("pingpong: trustme is missing (scripts/setup.sh installs it): no TLS column")
    args = (["--quick"] if a.quick else []) + a.bench_args
    machine = common.machine()
    common.log(
        "pingpong: %d ranks on %s cores, %d rounds of %s, %s"
        % (NRANKS, machine["cores"], rounds, ", ".join(keys), "quick" if a.quick else "full")
    )
    started = time.time()
    raw, failures = common.alternate(
        impls, rounds, lambda impl: common.launch(impl, PROG, NRANKS, args, timeout=a.timeout)
    )
    merged = {k: common.merge_rounds([r["measurements"] for r in raw[k]]) for k in keys if raw[k]}
    meta = common.run_meta(
        "pingpong",
        a,
        argv,
        started,
        machine,
        rounds,
        keys,
        nranks=NRANKS,
    )
    out = common.save_suite("pingpong", a, meta, merged, raw, failures, report, plots, bool(merged))
    common.log(
        "pingpong: wrote %s (results.json, table.md%s) in %.0fs"
        % (out, "" if a.no_plots else ", pingpong-*.png", time.time() - started)
    )
    return 1 if any(not f.get("kept") for f in failures) and not merged else 0


def lookup(merged):
    return {k: {(m["kind"], str(m["key"])): m for m in ms} for k, ms in merged.items()}


def report(meta, merged, failures):
    by = lookup(merged)
    keys = ["mpiws", "mpi-tcp", "mpi-shm"]
    refs = ("mpi-tcp", "mpi-shm")

    def t(k, kind, key):
        m = by.get(k, {}).get((kind, str(key)))
        return m["t"] if m else None

    head = [
        "## Ping-pong: mpiws vs mpi4py + MPICH",
        "",
        "%d ranks on %s cores (%s), %s run, median of %d alternating rounds (%s), %s, took %.0f s. "
        "Load average at start %s, at end %s."
        % (
            meta["nranks"],
            meta["cores"],
            meta["machine"].get("cpu", "?"),
            "quick" if meta["quick"] else "full",
            meta["rounds"],
            ", ".join(meta["impls"]),
            meta["started"],
            meta["seconds"],
            "/".join("%.2f" % x for x in meta["machine"].get("load_avg", ())),
            "/".join("%.2f" % x for x in meta["machine"].get("load_avg_end", ())),
        ),
        common.provenance(meta["machine"]),
        "Command: `%s`" % meta["command"],
        "",
    ]
    head += common.failure_lines(failures, lambda f: "round %d %s" % (f["round"], f["impl"]))
    for k in keys:
        if k in merged:
            n = min(m["n"] for m in merged[k])
            if n < meta["rounds"]:
                head.append("%s: only %d of %d rounds succeeded." % (k, n, meta["rounds"]))
    parts = ["\n".join(head)]

    # targets first: the figures the issue asks about
    def show(impl, kind, key, what):
        """A target's figure: bandwidth (MB/s) of a ``key``-byte message (both ways for osu_bibw), or latency (us)."""
        x = t(impl, kind, key)
        if kind == "bibw":
            return common.fmt(bibw_rate(by.get(impl, {}).get((kind, key))), "%.0f MB/s")
        if what == "bw":
            return common.fmt(x and int(key) / x / 1e6, "%.0f MB/s")
        return common.fmt(x and x * 1e6, "%.1f us")

    rows = []
    for title, impl, kind, key, ref, goal, ok, what in TARGETS:
        a, b = t(impl, kind, key), t(ref, kind, key)
        r = common.ratio(a, b)
        if r is not None and what == "bw":
            r = 1 / r
        rows.append(
            [
                title,
                show(impl, kind, key, what),
                show(ref, kind, key, what),
                common.fmt(r, "%.2f"),
                goal,
                "-" if r is None else ("yes" if ok(r) else "NO"),
            ]
        )
    parts.append(
        common.table(
            "Targets",
            ["target", "mpiws", "reference", "ratio", "goal", "met"],
            rows,
            "Ratios from the medians below (mpiws / reference; for bandwidth, of bandwidths). "
            '"mpiws" is what a user gets: ranks on one host take the same-host channel; the network path is '
            "`MPIWS_NOLOCAL=1`.",
        )
    )

    buffers = [m for m in merged.get("mpiws", []) or next(iter(merged.values()), []) if m["kind"] == "buffer"]
    sizes = [m["size"] for m in buffers]
    if not merged.get("mpiws"):
        sizes = sorted({m["size"] for ms in merged.values() for m in ms if m["kind"] == "buffer"})
    rows = []
    for s in sizes:
        ts = [t(k, "buffer", s) for k in keys]
        rows.append(
            [common.human_size(s)]
            + [common.fmt(x and x * 1e6, "%.2f") for x in ts]
            + [common.fmt(common.ratio(ts[0], t(r, "buffer", s)), "%.2f") for r in refs]
        )
    hdr = ["size", "mpiws", "MPI-TCP", "MPI-shm", "mpiws/TCP", "mpiws/shm"]
    parts.append(
        common.table(
            "Buffer latency: Send/Recv half round trip (us)",
            hdr,
            rows,
            "Ratio = mpiws time / reference time: above 1 means mpiws is slower.",
        )
    )

    rows = []
    for s in sizes:
        if s < 1024:
            continue
        ts = [t(k, "buffer", s) for k in keys]
        bw = [x and s / x / 1e6 for x in ts]
        rows.append(
            [common.human_size(s)]
            + [common.fmt(x, "%.0f") for x in bw]
            + [common.fmt(common.ratio(bw[0], t(r, "buffer", s) and s / t(r, "buffer", s) / 1e6), "%.2f") for r in refs]
        )
    parts.append(
        common.table(
            "Buffer bandwidth: size / half round trip (MB/s, 1 MB = 10^6 B)",
            hdr,
            rows,
            "Ratio = mpiws bandwidth / reference bandwidth: below 1 means mpiws is slower.",
        )
    )

    rows = []
    for name in ("dict", "ndarray-10", "ndarray-1MiB"):
        ts = [t(k, "object", name) for k in keys]
        size = next((by[k][("object", name)]["size"] for k in keys if ("object", name) in by.get(k, {})), None)
        rows.append(
            [name, common.fmt(size, "%d")]
            + [common.fmt(x and x * 1e6, "%.2f") for x in ts]
            + [common.fmt(common.ratio(ts[0], t(r, "object", name)), "%.2f") for r in refs]
        )
    parts.append(
        common.table(
            "Objects: send/recv (pickled) half round trip (us)",
            ["object", "pickle B", "mpiws", "MPI-TCP", "MPI-shm", "mpiws/TCP", "mpiws/shm"],
            rows,
            "dict = {'a': 1, 'b': [1, 2, 3]}; ndarray-10 = 10 float64; ndarray-1MiB = 131072 float64.",
        )
    )

    ts = [t(k, "pingpong", "10x1KiB") for k in keys]
    if any(ts):
        rows = [
            ["10 x 1 KiB + 8 B reply"]
            + [common.fmt(x and x * 1e6, "%.1f") for x in ts]
            + [common.fmt(common.ratio(ts[0], t(r, "pingpong", "10x1KiB")), "%.2f") for r in refs]
        ]
        parts.append(
            common.table(
                "Ping*Pong: time per cycle (us)",
                ["cycle"] + hdr[1:],
                rows,
                "Ten 1 KiB Sends back to back, then one reply: shows whether sends pipeline.",
            )
        )

    parts += exchange_tables(merged, keys, refs)
    parts += same_host_tables(by, sizes)
    parts += tls_tables(by, sizes)
    parts += bibw_tables(by)

    # spread: how noisy the rounds were
    rows = []
    for k in keys + [NET, TLS]:
        if k not in merged:
            continue
        spread = sorted(m["t_max"] / m["t_min"] for m in merged[k] if m["t_min"])
        worst = max(merged[k], key=lambda m: m["t_max"] / m["t_min"] if m["t_min"] else 0)
        rows.append(
            [
                common.IMPLS[k].label,
                "%.2f" % spread[len(spread) // 2],
                "%.2f" % spread[-1],
                "%s %s"
                % (
                    worst["kind"],
                    common.human_size(worst["size"])
                    if worst["kind"] == "buffer"
                    else "%s %s" % (worst["variant"], common.human_size(worst["size"]))
                    if worst["kind"] == "exchange"
                    else worst["key"],
                ),
            ]
        )
    parts.append(
        common.table("Spread over rounds (max/min time per measurement)", ["impl", "median", "worst", "worst at"], rows)
    )
    return "\n".join(parts)


def side_by_side(by, sizes, order, ratios, hdr, title, note):
    """Latency and bandwidth tables of the buffer sizes for implementations
    ``order``, with ratios of the pairs ``ratios`` (indices into ``order``)."""

    def t(k, s):
        return by.get(k, {}).get(("buffer", str(s)), {}).get("t")

    lat, bw = [], []
    for s in sizes:
        ts = [t(k, s) for k in order]
        lat.append(
            [common.human_size(s)]
            + [common.fmt(x and x * 1e6, "%.2f") for x in ts]
            + [common.fmt(common.ratio(ts[i], ts[j]), "%.2f") for i, j in ratios]
        )
        if s >= 1024:
            rates = [x and s / x / 1e6 for x in ts]
            bw.append(
                [common.human_size(s)]
                + [common.fmt(x, "%.0f") for x in rates]
                + [common.fmt(common.ratio(rates[i], rates[j]), "%.2f") for i, j in ratios]
            )
    return [
        common.table(
            "%s: buffer latency, half round trip (us)" % title,
            hdr,
            lat,
            note + "Ratios of times: above 1 means the first is slower.",
        ),
        common.table(
            "%s: buffer bandwidth (MB/s)" % title,
            hdr,
            bw,
            note + "Ratios of bandwidths: below 1 means the first is slower.",
        ),
    ]


def same_host_tables(by, sizes):
    """The same-host channel beside mpiws's network path, MPI-shm and MPI-TCP."""
    if NET not in by:
        return []
    hdr = ["size", "same host", "network path", "MPI-shm", "MPI-TCP", "same host/shm", "network/TCP"]
    note = (
        "same host = mpiws's same-host channel between two ranks on one host (the default: shared-memory rings, large payloads copied once from the sender's memory); network path = "
        "`MPIWS_NOLOCAL=1` (loopback TCP). "
    )
    return side_by_side(by, sizes, ("mpiws", NET, "mpi-shm", "mpi-tcp"), [(0, 2), (1, 3)], hdr, "Same host", note)


def bibw_rate(m):
    """MB/s of an osu_bibw measurement: both directions' bytes per iteration over its time."""
    return m and 2 * m["window"] * m["size"] / m["t"] / 1e6


def bibw_tables(by):
    """Bidirectional bandwidth (osu_bibw): every implementation measured, with the
    same-host and network-path ratios."""
    order = [k for k in ("mpiws", NET, "mpi-shm", "mpi-tcp") if k in by]
    sizes = sorted({m["size"] for k in order for (kind, _), m in by[k].items() if kind == "bibw"})
    if not sizes:
        return []
    pairs = [
        (a, b, label)
        for a, b, label in (("mpiws", "mpi-shm", "same host/shm"), (NET, "mpi-tcp", "network/TCP"))
        if a in order and b in order
    ]
    rows = []
    for s in sizes:
        rates = {k: bibw_rate(by[k].get(("bibw", str(s)))) for k in order}
        rows.append(
            [common.human_size(s)]
            + [common.fmt(rates[k], "%.0f") for k in order]
            + [common.fmt(common.ratio(rates[a], rates[b]), "%.2f") for a, b, _ in pairs]
        )
    hdr = ["size"] + [common.IMPLS[k].label for k in order] + [label for _, _, label in pairs]
    note = (
        "As OSU's osu_bibw: each iteration both ranks post a window of 64 Irecvs and 64 Isends (fewer where they "
        "would pass 64 MiB) and wait for all; MB/s of both directions together. Ratios: below 1 means mpiws is slower."
    )
    return [common.table("Bidirectional bandwidth (MB/s)", hdr, rows, note)]


def tls_tables(by, sizes):
    """mpiws over TLS beside cleartext mpiws and MPI-TCP, all on the network
    path: latency and bandwidth."""
    if TLS not in by:
        return []
    clear = NET if NET in by else "mpiws"
    hdr = ["size", "mpiws", "mpiws TLS", "MPI-TCP", "TLS/cleartext", "TLS/MPI-TCP"]
    note = (
        "Both ranks serve https (rustls, ring, TLS 1.3 AES-128-GCM; the stream's threads encrypt and decrypt, no pump); "
        "mpiws and mpiws TLS on the network path (`MPIWS_NOLOCAL=1`). "
    )
    return side_by_side(by, sizes, (clear, TLS, "mpi-tcp"), [(1, 0), (1, 2)], hdr, "TLS", note)


VARIANTS = {"sendrecv": "Sendrecv", "sendthenrecv": "Send-then-Receive"}


def exchange_sizes(merged):
    return sorted({m["size"] for ms in merged.values() for m in ms if m["kind"] == "exchange"})


def exchange_tables(merged, keys, refs):
    """Sendrecv vs Send-then-Receive: time per step per variant, mpiws/reference,
    and Sendrecv/Send-then-Receive per implementation."""
    by = lookup(merged)
    sizes = exchange_sizes(merged)
    if not sizes:
        return []

    def m(k, v, s):
        return by.get(k, {}).get(("exchange", "%s/%d" % (v, s)))

    def t(k, v, s):
        return m(k, v, s) and m(k, v, s)["t"]

    hdr = ["size", "mpiws", "MPI-TCP", "MPI-shm", "mpiws/TCP", "mpiws/shm"]
    parts = []
    for v, name in VARIANTS.items():
        rows = []
        for s in sizes:
            ts = [t(k, v, s) for k in keys]
            rows.append(
                [common.human_size(s)]
                + [common.fmt(x and x * 1e6, "%.2f") for x in ts]
                + [common.fmt(common.ratio(ts[0], t(r, v, s)), "%.2f") for r in refs]
            )
        parts.append(
            common.table(
                "Exchange, %s: time per step (us)" % name,
                hdr,
                rows,
                (
                    "Both ranks: `Sendrecv(sbuf, dest=peer, recvbuf=rbuf, source=peer)`."
                    if v == "sendrecv"
                    else "Rank 0: `Send` then `Recv`; rank 1: `Recv` then `Send` (a round trip)."
                )
                + " One step = each rank sends and receives one buffer of this size. "
                "Ratio = mpiws time / reference time: above 1 means mpiws is slower.",
            )
        )
    rows = []
    for s in sizes:
        rows.append(
            [common.human_size(s)]
            + [common.fmt(common.paired_ratio(m(k, "sendrecv", s), m(k, "sendthenrecv", s)), "%.2f") for k in keys]
        )
    parts.append(
        common.table(
            "Exchange: Sendrecv / Send-then-Receive time per step",
            ["size", "mpiws", "MPI-TCP", "MPI-shm"],
            rows,
            "Per implementation (median over rounds of the ratio in each launch). 0.5 = the two directions fully "
            "overlap (Sendrecv costs one transfer, Send-then-Receive two); 1 = no overlap; above 1 = Sendrecv is "
            "slower than doing the two in order.",
        )
    )
    return parts


def plots(out, meta, merged):
    sub = "%d ranks, %s cores; median of %d alternating rounds, band = min..max" % (
        meta["nranks"],
        meta["cores"],
        meta["rounds"],
    )
    series = {
        k: [(m["size"], m["t"], m["t_min"], m["t_max"]) for m in ms if m["kind"] == "buffer"]
        for k, ms in merged.items()
    }
    if any(series.values()):
        common.plot(
            out / "pingpong-latency.png",
            "Ping-pong latency (Send/Recv, half round trip)",
            series,
            "half round trip (us)",
            transform=lambda s, t: t * 1e6,
            subtitle=sub,
        )
        common.plot(
            out / "pingpong-bandwidth.png",
            "Ping-pong bandwidth (Send/Recv)",
            series,
            "bandwidth (MB/s)",
            transform=lambda s, t: s / t / 1e6,
            subtitle=sub,
        )
    if exchange_sizes(merged):
        series, colors, styles = {}, {}, {}
        for k, ms in merged.items():
            for v, name in VARIANTS.items():
                label = "%s %s" % (common.IMPLS[k].label, name)
                series[label] = [
                    (m["size"], m["t"], m["t_min"], m["t_max"])
                    for m in ms
                    if m["kind"] == "exchange" and m["variant"] == v
                ]
                colors[label], styles[label] = common.COLORS.get(k), "o-" if v == "sendrecv" else "s--"
        common.plot(
            out / "pingpong-exchange.png",
            "Exchange: Sendrecv vs Send-then-Receive, time per step",
            {k: v for k, v in series.items() if v},
            "time per step (us)",
            transform=lambda s, t: t * 1e6,
            subtitle=sub,
            colors=colors,
            styles=styles,
        )


if __name__ == "__main__":
    sys.exit(main())
