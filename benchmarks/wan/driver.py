"""WAN suite: mpiws across emulated wide-area links, against the links' own bounds.

Endpoints (``mpiws serve``) on loopback, each reached by its peers only
through a Toxiproxy link of its own (``toxiproxy.py``) with a one-way
latency L and a rate R (each direction; per connection: a full mesh of
independent paths). For each link setting:

* the link itself, measured with plain TCP (``calibrate.py``): half an 8 B
  round trip, and the rate of 64 MiB;
* point-to-point (2 ranks): half an 8 B round trip against L (target <=
  1.1 L); a large message's rate against R (target >= 0.8 R);
* collectives (8 ranks): barrier and 8 B / 1 KiB allreduce against
  ceil(log2 8) = 3 one-way latencies (target <= 1.2 x 3 L: no more rounds
  than recursive doubling); a large broadcast's rate against R (target >=
  0.7 R), and against the same bytes passed down a chain of 8 plain-TCP
  nodes through the same kind of links in the same run (``calibrate.chain``:
  the best a broadcast can do with this emulation on this machine, which
  falls short of R where the machine cannot carry 7 links at R at once);
* the iterative loop of 4 services: each iteration the services update a
  vector and average it with an allreduce (MPI style), against the same
  loop mediated by a client that invokes the 4 services every iteration
  (a one-rank domain each: *run*, then *status*) and averages their
  answers itself, the client also behind the links. Reported: the ratio.

Entry point: benchmarks/wan/run [--quick] [--out DIR]   (mpiws bench wan)
"""

import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import calibrate  # noqa: E402
import common  # noqa: E402
from toxiproxy import Toxiproxy, ensure_installed, url_through  # noqa: E402

MIB = 1 << 20
# (one-way latency ms, rate Mbit/s)
LINKS = [(10, 100), (10, 1000), (50, 100), (50, 1000)]
QUICK_LINKS = [(10, 100)]
NRANKS = 8
LOOP_RANKS = 4


def parse(argv):
    ap = common.arg_parser(
        "wan",
        __doc__,
        "one link setting (10 ms, 100 Mbit/s), 8 MiB messages, fewer repetitions",
        "1",
        None,
        bench_args=False,
    )
    ap.add_argument("--big", type=int, default=None, help="large message in MiB (default 64, quick 8)")
    return ap.parse_args(argv)


def mpiws_exe():
    return str(common.VENV / "bin" / "mpiws")


class Endpoints:
    """``n`` endpoints on loopback serving the suite's services on threads."""

    def __init__(self, n, env):
        self.procs, self.urls = [], []
        services = [f"{name}=benchmarks.wan.services:{name}" for name in ("p2p", "colls", "loop", "step")]
        args = [arg for s in services for arg in ("--service", s)]
        for _ in range(n):
            p = subprocess.Popen(
                [mpiws_exe(), "serve", "--isolation", "thread", *args],
                cwd=common.ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            line = p.stdout.readline()
            if "serving" not in line:
                raise SystemExit("wan: an endpoint did not start: %r" % line)
            self.procs.append(p)
            self.urls.append(line.rsplit(" ", 1)[1].strip())

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=10)


def run_domain(urls, service, params, env, timeout):
    """``mpiws run --endpoints`` of ``service``: (rank 0's result, wall seconds)."""
    t = time.monotonic()
    p = subprocess.run(
        [mpiws_exe(), "run", "--endpoints", ",".join(urls), "--service", service, "--params", json.dumps(params)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    wall = time.monotonic() - t
    for line in p.stdout.splitlines():
        if line.startswith("rank 0: "):
            return json.loads(line[len("rank 0: ") :]), wall
    raise RuntimeError("%s failed (exit %d): %s" % (service, p.returncode, (p.stdout + p.stderr)[-800:]))


def mediated(urls, n, iterations, env):
    """The loop with a client in the middle: per iteration, each service is
    invoked (a one-rank domain: run, then status) with the vector and
    answers its update; the client averages them. Seconds per iteration."""
    os.environ.update({k: env[k] for k in ("MPIWS_KEY_FILE",)})
    from mpiws.launch.domain import Domain

    x = [0.0] * n
    t = time.monotonic()
    for _ in range(iterations):
        answers = [None] * len(urls)

        def invoke(i, x=x, answers=answers):
            d = Domain([urls[i]])
            d.start("step", {"x": x})
            s = d.status(0, wait=60)
            while s["state"] not in ("done", "failed", "cancelled"):
                s = d.status(0, wait=60)
            if s["state"] != "done":
                raise RuntimeError("step %d: %s" % (i, s))
            answers[i] = s["result"]

        threads = [threading.Thread(target=invoke, args=(i,)) for i in range(len(urls))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if any(a is None for a in answers):
            raise RuntimeError("a mediated step failed")
        x = [sum(col) / len(answers) for col in zip(*answers)]
    return (time.monotonic() - t) / iterations


def measure_link(tp, lat, rate, big):
    """The link itself, with plain TCP: half an 8 B round trip (s), rate of ``big`` bytes (bit/s)."""
    server = calibrate.Server()
    try:
        link = tp.link(server.addr, latency_ms=lat, rate_mbit=rate)
        rtts = calibrate.ping_pong(link, 1.0, max_n=50)
        last, _ = calibrate.bulk(server, link, big)
        tp.remove(link)
        return common.median(rtts) / 2e3, big * 8 / max(last - lat / 1e3, 1e-9)
    finally:
        server.close()


def one_setting(tp, eps, lat, rate, big, reps, iterations, env, timeout):
    links = [tp.link(u.split("//", 1)[1], latency_ms=lat, rate_mbit=rate) for u in eps.urls]
    urls = [url_through(u, link) for u, link in zip(eps.urls, links)]
    try:
        L, R = lat / 1e3, rate * 1e6
        tcp_half, tcp_rate = measure_link(tp, lat, rate, big)
        rounds = math.ceil(math.log2(NRANKS))
        chain_rate = big * 8 / max(calibrate.chain(tp, NRANKS, big, lat, rate) - rounds * L, 1e-9)
        common.log(
            "wan: %d ms, %d Mbit/s: plain TCP half RTT %.2f ms, %.0f Mbit/s; a chain of %d: %.0f Mbit/s"
            % (lat, rate, tcp_half * 1e3, tcp_rate / 1e6, NRANKS, chain_rate / 1e6)
        )
        p2p, _ = run_domain(urls[:2], "p2p", {"big": big, "reps": reps}, env, timeout)
        common.log("wan: p2p %s" % p2p)
        colls, _ = run_domain(urls[:NRANKS], "colls", {"big": big, "reps": reps}, env, timeout)
        common.log("wan: collectives %s" % colls)
        loop_n = 128
        direct, direct_wall = run_domain(
            urls[:LOOP_RANKS], "loop", {"n": loop_n, "iterations": iterations}, env, timeout
        )
        per_mediated = mediated(urls[:LOOP_RANKS], loop_n, iterations, env)
        common.log(
            "wan: loop direct %.1f ms/iteration, mediated %.1f ms/iteration"
            % (direct["per_iteration"] * 1e3, per_mediated * 1e3)
        )
        return {
            "latency_ms": lat,
            "rate_mbit": rate,
            "big": big,
            "L": L,
            "R": R,
            "tcp_half_rtt": tcp_half,
            "tcp_rate": tcp_rate,
            "p2p_small": p2p["small_half_rtt"],
            "p2p_rate": big * 8 / max(p2p["big_half_rtt"] - L, 1e-9),
            "barrier": colls["barrier"],
            "allreduce_8": colls["allreduce_8"],
            "allreduce_1k": colls["allreduce_1k"],
            "bcast_rate": big * 8 / max(colls["bcast_big"] - rounds * L, 1e-9),
            "rounds": rounds,
            "chain_rate": chain_rate,
            "loop_direct": direct["per_iteration"],
            "loop_mediated": per_mediated,
            "loop_direct_total": direct_wall,
        }
    finally:
        for link in links:
            tp.remove(link)


def rows_for(r):
    """(measure, mpiws, bound, ratio, target, met) for one link setting."""
    L, R, k = r["L"], r["R"], r["rounds"]
    ms = lambda s: "%.2f ms" % (s * 1e3)  # noqa: E731
    mbit = lambda b: "%.0f Mbit/s" % (b / 1e6)  # noqa: E731

    def row(name, value, bound, ratio, target, ok):
        return [name, value, bound, "%.2f" % ratio, target, "yes" if ok else "**no**"]

    rows = [
        row(
            "8 B one way (half RTT), 2 ranks",
            ms(r["p2p_small"]),
            ms(L),
            r["p2p_small"] / L,
            "<= 1.1",
            r["p2p_small"] <= 1.1 * L,
        ),
        row(
            "%s rate, 2 ranks" % common.human_size(r["big"]),
            mbit(r["p2p_rate"]),
            mbit(R),
            r["p2p_rate"] / R,
            ">= 0.8",
            r["p2p_rate"] >= 0.8 * R,
        ),
        row(
            "barrier, %d ranks" % NRANKS,
            ms(r["barrier"]),
            "%d x L = %s" % (k, ms(k * L)),
            r["barrier"] / (k * L),
            "<= 1.2",
            r["barrier"] <= 1.2 * k * L,
        ),
        row(
            "allreduce 8 B, %d ranks" % NRANKS,
            ms(r["allreduce_8"]),
            ms(k * L),
            r["allreduce_8"] / (k * L),
            "<= 1.2",
            r["allreduce_8"] <= 1.2 * k * L,
        ),
        row(
            "allreduce 1 KiB, %d ranks" % NRANKS,
            ms(r["allreduce_1k"]),
            ms(k * L),
            r["allreduce_1k"] / (k * L),
            "<= 1.2",
            r["allreduce_1k"] <= 1.2 * k * L,
        ),
        row(
            "bcast %s rate, %d ranks" % (common.human_size(r["big"]), NRANKS),
            mbit(r["bcast_rate"]),
            mbit(R),
            r["bcast_rate"] / R,
            ">= 0.7",
            r["bcast_rate"] >= 0.7 * R,
        ),
    ]
    if "chain_rate" in r:
        rows.append(
            row(
                "bcast %s rate vs a plain-TCP chain of %d" % (common.human_size(r["big"]), NRANKS),
                mbit(r["bcast_rate"]),
                mbit(r["chain_rate"]),
                r["bcast_rate"] / r["chain_rate"],
                ">= 0.7",
                r["bcast_rate"] >= 0.7 * r["chain_rate"],
            )
        )
    return rows


def report(meta, results):
    out = ["## WAN: mpiws across emulated links (Toxiproxy)", "", common.provenance(meta["machine"]), ""]
    for r in results:
        title = "%d ms one way, %d Mbit/s" % (r["latency_ms"], r["rate_mbit"])
        note = (
            "plain TCP through the same link: half RTT %.2f ms, %.0f Mbit/s (the emulation's own accuracy). "
            "Rates are the message over (time - the latencies it must cross). The chain: the same bytes passed down "
            "%d plain-TCP nodes through such links, forwarded as they arrive (a broadcast's best case on this machine)."
            % (r["tcp_half_rtt"] * 1e3, r["tcp_rate"] / 1e6, NRANKS)
        )
        out.append(common.table(title, ["measure", "mpiws", "bound", "ratio", "target", "met"], rows_for(r), note))
    loop_rows = [
        [
            "%d ms, %d Mbit/s" % (r["latency_ms"], r["rate_mbit"]),
            "%.1f" % (r["loop_direct"] * 1e3),
            "%.1f" % (r["loop_mediated"] * 1e3),
            "%.2f" % (r["loop_mediated"] / r["loop_direct"]),
        ]
        for r in results
    ]
    out.append(
        common.table(
            "Iterative loop of %d services, 1 KiB vector (ms per iteration)" % LOOP_RANKS,
            ["link", "MPI style (allreduce)", "mediated (client relays)", "mediated / MPI style"],
            loop_rows,
            "MPI style: the services loop and average with an allreduce; mediated: every iteration the "
            "client invokes each service (run + status) and averages the answers.",
        )
    )
    return "\n".join(out)


def plots(out, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [row[0] for row in rows_for(results[0])]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        # each measure as a fraction of its target (>= 1 is met, for both kinds)
        fractions = []
        for row in rows_for(r):
            ratio, target = float(row[3]), float(row[4].split()[-1])
            fractions.append(target / ratio if row[4].startswith("<=") else ratio / target)
        ax.bar(
            [x + i * width for x in range(len(names))],
            fractions,
            width,
            label="%d ms, %d Mbit/s" % (r["latency_ms"], r["rate_mbit"]),
        )
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))])
    ax.set_xticklabels([n.replace(", ", "\n") for n in names], fontsize=8)
    ax.set_ylabel("target / measured (>= 1: target met)")
    ax.set_title("mpiws across emulated WAN links (Toxiproxy)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "wan-targets.png", dpi=110)
    plt.close(fig)


def main(argv=None):
    a = parse(argv)
    links = QUICK_LINKS if a.quick else LINKS
    big = (a.big or (8 if a.quick else 64)) * MIB
    reps, iterations = (10, 10) if a.quick else (20, 20)
    timeout = a.timeout or 900
    common.check_setup()
    ensure_installed()
    machine = common.machine()
    started = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="mpiws-wan-"))
    key = tmp / "key"
    key.write_text(secrets.token_hex(32) + "\n")
    key.chmod(0o600)
    env = dict(os.environ, MPIWS_KEY_FILE=str(key), PYTHONPATH=str(common.ROOT), NO_PROXY="*")
    results, failures = [], []
    with Toxiproxy() as tp:
        eps = Endpoints(NRANKS, env)
        try:
            for i, (lat, rate) in enumerate(links, 1):
                common.log(
                    "wan: [%d/%d] %d ms one way, %d Mbit/s (%.0f s so far)"
                    % (i, len(links), lat, rate, time.time() - started)
                )
                try:
                    results.append(one_setting(tp, eps, lat, rate, big, reps, iterations, env, timeout))
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    common.log("wan: %d ms, %d Mbit/s failed: %s" % (lat, rate, e))
                    failures.append({"latency_ms": lat, "rate_mbit": rate, "error": str(e)})
        finally:
            eps.stop()
    machine["load_avg_end"] = os.getloadavg()
    meta = dict(
        bench="wan",
        links=links,
        big=big,
        reps=reps,
        iterations=iterations,
        quick=a.quick,
        machine=machine,
        started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        seconds=round(time.time() - started, 1),
        command=" ".join(["benchmarks/wan/run"] + (argv if argv is not None else sys.argv[1:])),
    )
    text = report(meta, results) + "".join(
        "\n\nfailed: %(latency_ms)d ms, %(rate_mbit)d Mbit/s: %(error)s" % f for f in failures
    )
    out = common.save(
        "wan",
        a.out,
        meta,
        results,
        {},
        failures,
        text,
        None if a.no_plots or not results else (lambda o: plots(o, results)),
    )
    common.log("wan: wrote %s in %.0f s" % (out, time.time() - started))
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
