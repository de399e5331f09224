"""Workflows driver: the original direct-messaging workflow experiments, reproduced: each workflow run directly (the
steps one domain, passing data to each other; program files by reference) and mediated (the manager invoking every
step and relaying every result), alternating; tables, JSON, CSV, plots.

Entry point: benchmarks/workflows/run [--quick] [--out DIR] [--rounds R] [--parts chain,programs,multi,loop]
             benchmarks/workflows/run --with-wan   (then the manager behind an emulated slow link)

One `mpiws serve` endpoint on loopback deploys the steps (echo, add and relax from examples/workflows/steps.py, and
copy: examples/workflows/copy.sh, a cat), with 10 instance processes kept started ahead (``--spare-instances``) so
that neither form waits for cold ones; the manager is bench.py's process, one launch per part and point, both forms
alternated by round inside it; medians over rounds. The parts: a chain of 8 echo services for messages of 1 KiB to
64 MiB (beside the 9/16 bound: direct moves the data 9 times, mediated 16); the same chain of 8 programs passing a
file; a multi-input step (two producers, one consumer); an iterative workflow (4 services sharing an allreduce each
iteration) for 10 to 1000 iterations. A point whose mediated run would take longer than --max-point-seconds (an
estimate from the point before) is left out and said so.

The WAN part (``--with-wan``, which ``mpiws bench workflows --wan`` passes): the manager behind a Toxiproxy link (one
way latency and a rate, each direction) while the steps talk among themselves on the endpoint's machine: the endpoint
listens on this machine's non-loopback address, the manager reaches it through tinyproxy behind the link
(``HTTP_PROXY``) and the steps reach the manager through a second link (``advertise``).
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

PROG = HERE / "bench.py"
SIZES = [1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26]
QUICK_SIZES = [1 << 10, 1 << 20]
ITERATIONS, QUICK_ITERATIONS = [10, 100, 1000], [10]
MULTI, QUICK_MULTI = [1 << 20, 1 << 24], [1 << 20]
BOUND = 9 / 16
MODES = ("direct", "mediated")
LABELS = {"direct": "direct", "mediated": "mediated"}
COLORS = {"direct": "tab:red", "mediated": "tab:blue", "bound": "tab:gray"}
STEPS = [
    "echo=examples.workflows.steps:echo",
    "add=examples.workflows.steps:add",
    "relax=examples.workflows.steps:relax",
]
PROGRAM = "copy=examples/workflows/copy.sh [in:file:src:binary] [out:file:dst:binary]"
WAN_LATENCY, WAN_RATE = 25, 100
SPARE = 10  # instance processes started ahead: neither form waits for a cold one (8 ranks start at once direct)
TARGETS = {"chain": (1 << 26, 0.65), "loop": (100, 3.0)}


def parse(argv):
    ap = common.arg_parser(
        "workflows",
        __doc__,
        "1 round, chain at 1 KiB and 1 MiB, programs and multi at 1 MiB, loop at 10 iterations (~1 min)",
        "default 3, quick 1",
        "default 900",
        bench_args=False,
    )
    ap.add_argument("--parts", default="chain,programs,multi,loop", help="which parts (default all)")
    ap.add_argument("--sizes", default=None, help="message sizes, bytes, of chain and programs (default 1 KiB..64 MiB)")
    ap.add_argument("--iterations", default=None, help="loop iterations (default 10,100,1000; quick 10)")
    ap.add_argument(
        "--max-point-seconds",
        type=float,
        default=120,
        help="leave out a form at a point when one run would take longer (estimated from the point "
        "before; default 120, 0: never)",
    )
    ap.add_argument("--with-wan", action="store_true", help="then the parts again with the manager behind a slow link")
    ap.add_argument("--wan", action="store_true", help="the WAN part alone")
    ap.add_argument(
        "--latency", type=int, default=None, help="WAN: one-way link latency, ms (default %d)" % WAN_LATENCY
    )
    ap.add_argument("--rate", type=float, default=None, help="WAN: link rate each way, Mbit/s (default %g)" % WAN_RATE)
    return ap.parse_args(argv)


class Endpoint:
    """The `mpiws serve` deploying every step, keyed, its output in a file."""

    def __init__(self, tmp, env, host="127.0.0.1"):
        self.log = open(tmp / "endpoint.log", "w+")
        args = [
            str(common.VENV / "bin" / "mpiws"),
            "serve",
            "--host",
            host,
            "--fetch-allow",
            host,
            "--program",
            PROGRAM,
            "--spare-instances",
            str(SPARE),
        ]
        for s in STEPS:
            args += ["--service", s]
        if host != "127.0.0.1":
            # The WAN part: this machine's own address, which traffic reaches without leaving the machine.
            args += ["--insecure"]
        self.proc = subprocess.Popen(
            args,
            cwd=str(common.ROOT),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        self.url = None
        while self.url is None:
            self.log.seek(0)
            for line in self.log.read().splitlines():
                if line.startswith("mpiws: serving ") and " at " in line:
                    self.url = line.rsplit(" ", 1)[1].strip()
            if self.url is None and (self.proc.poll() is not None or time.monotonic() > deadline):
                self.log.seek(0)
                said = self.log.read()[-2000:]
                self.stop()
                raise RuntimeError("the endpoint did not start: %s" % said)
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def clean_env(key):
    env = dict(os.environ, MPIWS_KEY_FILE=str(key), PYTHONUNBUFFERED="1")
    for k in (
        "MPIWS_KEY",
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        env.pop(k, None)
    return env


def launch(part, url, point, modes, rounds, skip, env, timeout, wan=None):
    cmd = [
        str(common.PYTHON),
        str(PROG),
        "--part",
        part,
        "--endpoint",
        url,
        "--points",
        str(point),
        "--modes",
        ",".join(modes),
        "--rounds",
        str(rounds),
        "--skip",
        ",".join(skip),
    ]
    if wan:
        cmd += ["--toxiproxy", wan["api"], "--link-latency", str(wan["latency"]), "--link-rate", str(wan["rate"])]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(common.ROOT))
    except subprocess.TimeoutExpired as e:
        raise common.LaunchError(
            "%s %s: timed out after %ss\n%s" % (part, point, timeout, common._tail(e.stderr))
        ) from e
    for line in p.stdout.splitlines():
        if line.startswith(common.RESULT_PREFIX) and p.returncode == 0:
            return json.loads(line[len(common.RESULT_PREFIX) :])["rounds"]
    raise common.LaunchError("%s %s: exit %s\n%s" % (part, point, p.returncode, common._tail(p.stderr)))


def run_part(part, url, points, rounds, cap, env, timeout, wan=None):
    """Every point of ``part`` (ascending), both forms; {point: {mode: merged measurement}}, failures, skipped."""
    merged, failures, skipped, last = {}, [], [], {}
    for point in points:
        skip = []
        for mode in MODES:
            if cap and mode in last and part == "loop":  # a run's time grows with the iterations
                est = last[mode][1] * point / last[mode][0]
                if est > cap:
                    skip.append("%s:%d" % (mode, point))
                    skipped.append({"part": part, "mode": mode, "point": point, "estimate": est})
                    common.log("workflows %s: %s at %s left out: ~%.0f s a run > %g s" % (part, mode, point, est, cap))
        if len(skip) == len(MODES):
            continue
        t0 = time.time()
        try:
            got = launch(part, url, point, MODES, rounds, skip, env, timeout, wan)
        except common.LaunchError as e:
            failures.append({"part": part, "point": point, "error": str(e)})
            common.log("workflows %s: %s FAILED:\n%s" % (part, point, e))
            continue
        merged[point] = {m["kind"]: m for m in common.merge_rounds(got)}
        for mode, m in merged[point].items():
            last[mode] = (point, m["t"])
        common.log("workflows %s: %s done in %.0f s" % (part, point, time.time() - t0))
    return merged, failures, skipped


def size_label(part, point):
    return "%d" % point if part == "loop" else common.human_size(point)


def part_table(part, merged, skipped, title, extra_note=None):
    unit = "iterations" if part == "loop" else "size"
    header = [unit, "direct s", "mediated s", "direct / mediated", "mediated / direct"]
    header += ["bound (9/16)"] if part in ("chain", "programs") else []
    header += ["manager bytes direct", "mediated"]
    rows = []
    for point, by in sorted(merged.items()):
        d, m = by.get("direct"), by.get("mediated")
        r = common.paired_ratio(d, m)
        row = [
            size_label(part, point),
            common.fmt(d and d["t"], "%.3f"),
            common.fmt(m and m["t"], "%.3f"),
            common.fmt(r, "%.3f"),
            common.fmt(r and 1 / r, "%.2f"),
        ]
        row += ["%.4f" % BOUND] if part in ("chain", "programs") else []
        row += [common.fmt(d and d["manager_bytes"], "%d"), common.fmt(m and m["manager_bytes"], "%d")]
        rows.append(row)
    for point in sorted({s["point"] for s in skipped} - set(merged)):
        rows.append([size_label(part, point)] + ["-"] * (len(header) - 1))
    note = " ".join(
        [NOTES[part]]
        + [
            "%s at %s not run (one run estimated at %.0f s)." % (s["mode"], size_label(part, s["point"]), s["estimate"])
            for s in skipped
        ]
        + ([extra_note] if extra_note else [])
    )
    return common.table(title, header, rows, note)


PART_TITLES = {  # short: the CSV files are named after them
    "chain": "Chain of 8 echo services, direct against mediated (medians, s)",
    "programs": "Chain of 8 programs, by reference against mediated (medians, s)",
    "multi": "Multi-input, two producers feeding one step (medians, s)",
    "loop": "Loop of 4 services, an allreduce per iteration (medians, s)",
}
WAN_TITLES = {"chain": "WAN, chain of 8 echo services (medians, s)", "loop": "WAN, loop of 4 services (medians, s)"}
NOTES = {
    "chain": "A random message through 8 echo services: direct moves it 9 times (in, 7 hops, out), mediated 16 "
    "(in and out of every step).",
    "programs": "A file through 8 `cat` jobs: by reference each job's endpoint links the previous job's file; "
    "mediated, the manager downloads and uploads every one.",
    "multi": "Two echo services (P bytes each) feeding one step that concatenates them.",
    "loop": "4 services (a scatter over 4 blocks of 1000 numbers) looping inside the domain with an allreduce of "
    "two values each iteration, against the manager invoking each service every iteration and reducing itself.",
}


def targets_table(results):
    rows = []
    for part, (point, target) in TARGETS.items():
        by = results.get(part, {}).get(point)
        r = common.paired_ratio(by.get("direct"), by.get("mediated")) if by else None
        if part == "chain":
            rows.append(
                [
                    "chain of 8, %s: direct / mediated time" % common.human_size(point),
                    common.fmt(r, "%.3f"),
                    "<= %.2f (bound %.4f)" % (target, BOUND),
                    "-" if r is None else "yes" if r <= target else "NO",
                ]
            )
        else:
            s = r and 1 / r
            rows.append(
                [
                    "loop, %d iterations: mediated / direct time" % point,
                    common.fmt(s, "%.2f"),
                    ">= %.1f" % target,
                    "-" if s is None else "yes" if s >= target else "NO",
                ]
            )
    return common.table("Targets", ["what", "measured", "target", "met"], rows)


def plots(out, results, prefix="", title_extra=""):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for part in ("chain", "programs"):
        merged = results.get(part) or {}
        pts = [(p, common.paired_ratio(by.get("direct"), by.get("mediated"))) for p, by in sorted(merged.items())]
        pts = [(p, r) for p, r in pts if r]
        if not pts:
            continue
        fig, ax = plt.subplots(figsize=(8, 5))
        ax.plot(
            [p for p, _ in pts], [r for _, r in pts], "o-", color=COLORS["direct"], label="direct / mediated (measured)"
        )
        ax.axhline(BOUND, ls="--", color=COLORS["bound"], label="bound 9/16 (data moved 9 times instead of 16)")
        ax.axhline(1.0, ls=":", color="black", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks([p for p, _ in pts])
        ax.set_xticklabels([common.human_size(p).replace(" ", "") for p, _ in pts])
        ax.set_xlabel("message size")
        ax.set_ylabel("time ratio, direct / mediated")
        ax.set_title(PART_TITLES[part].split(",")[0] + title_extra, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / ("%s%s-ratio.png" % (prefix, part)), dpi=110)
        plt.close(fig)
    for part in ("chain", "programs", "loop"):
        merged = results.get(part) or {}
        series = {
            mode: [
                (p, by[mode]["t"], by[mode]["t_min"], by[mode]["t_max"])
                for p, by in sorted(merged.items())
                if mode in by
            ]
            for mode in MODES
        }
        if any(series.values()):
            xticks = sorted(merged) if part == "loop" else None
            common.plot(
                out / ("%s%s-times.png" % (prefix, part)),
                PART_TITLES[part].split(",")[0] + title_extra,
                series,
                "seconds per run",
                xlabel="iterations" if part == "loop" else "message size",
                colors=COLORS,
                xticks=xticks,
            )


def start_wan(tmp, latency, rate):
    """Toxiproxy, tinyproxy behind a link of it, and this machine's non-loopback address; or (None, why)."""
    sys.path.insert(0, str(HERE.parent / "wan"))
    from toxiproxy import Toxiproxy, ToxiproxyError, free_port

    host = next(
        (
            a
            for a in subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
            if "." in a and not a.startswith("127.")
        ),
        None,
    )
    if host is None:
        return (
            None,
            "this machine has no non-loopback IPv4 address for the endpoint (the manager's proxy skips loopback)",
        )
    if shutil.which("tinyproxy") is None:
        return None, "tinyproxy is not installed (apt-get install tinyproxy)"
    try:
        tp = Toxiproxy()
        tp.start()
    except ToxiproxyError as e:
        return None, "Toxiproxy is not available: %s" % e
    port = free_port()
    conf = tmp / "tinyproxy.conf"
    conf.write_text("Port %d\nListen 127.0.0.1\nTimeout 600\nMaxClients 200\nAllow 127.0.0.1\nLogLevel Error\n" % port)
    proxy = subprocess.Popen(["tinyproxy", "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proxy.poll() is not None:
                proxy.kill()
                tp.stop()
                return None, "tinyproxy did not start"
            time.sleep(0.05)
    listen = tp.link("127.0.0.1:%d" % port, latency_ms=latency, rate_mbit=rate, name="wf-manager-out")
    return {
        "tp": tp,
        "proxy": proxy,
        "host": host,
        "api": tp.api,
        "http_proxy": "http://%s" % listen,
        "latency": latency,
        "rate": rate,
    }, None


def stop_wan(wan):
    wan["proxy"].terminate()
    wan["proxy"].wait()
    wan["tp"].stop()


def measure(a, parts, key, tmp, wan=None):
    """Every part on a fresh endpoint (behind ``wan``'s link for the manager): {part: merged}, failures, skipped."""
    env = clean_env(key)
    endpoint = Endpoint(tmp, env, host=wan["host"] if wan else "127.0.0.1")
    bench_env = dict(env, HTTP_PROXY=wan["http_proxy"]) if wan else env
    rounds = a.rounds or (1 if a.quick else 3)
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else (QUICK_SIZES if a.quick else SIZES)
    iterations = (
        [int(x) for x in a.iterations.split(",")] if a.iterations else (QUICK_ITERATIONS if a.quick else ITERATIONS)
    )
    points = {
        "chain": sizes,
        "programs": sizes if not a.quick else [1 << 20],
        "multi": QUICK_MULTI if a.quick else MULTI,
        "loop": iterations,
    }
    if wan:  # the slow link: the sizes a link of this rate carries in seconds
        points.update(chain=[x for x in sizes if x <= 1 << 24] or sizes[:1], loop=iterations[:2])
    results, failures, skipped = {}, [], []
    try:
        for part in parts:
            common.log(
                "workflows: --- %s%s: %s ---" % (part, " (WAN)" if wan else "", ",".join(map(str, points[part])))
            )
            merged, f, s = run_part(
                part, endpoint.url, points[part], rounds, a.max_point_seconds, bench_env, a.timeout or 900, wan
            )
            results[part], failures, skipped = merged, failures + f, skipped + s
    finally:
        endpoint.stop()
    return results, failures, skipped


def report(meta, results, failures, skipped, wan=None):
    lines = []
    if wan:
        lines += [
            "## Behind a slow link: the manager %d ms one way from the steps, %g Mbit/s each way"
            % (wan["latency"], wan["rate"]),
            "",
        ]
    else:
        lines += [
            "## Workflows: direct messaging against mediated",
            "",
            "%d cores, %s; %d rounds, medians (the ratios: medians of per-round ratios). %s"
            % (
                meta["machine"]["cores"],
                meta["machine"].get("cpu", "?"),
                meta["rounds"],
                common.provenance(meta["machine"]),
            ),
            "",
        ]
    for part in ("chain", "programs", "multi", "loop"):
        if part in results:
            lines.append(
                part_table(
                    part,
                    results[part],
                    [s for s in skipped if s["part"] == part],
                    (WAN_TITLES if wan else PART_TITLES)[part],
                )
            )
    if not wan:
        lines.append(targets_table(results))
    lines += common.failure_lines(failures, lambda f: "%s %s" % (f["part"], f["point"]))
    return "\n".join(lines)


def main(argv=None):
    a = parse(argv)
    parts = [p for p in a.parts.split(",") if p]
    for p in parts:
        if p not in PART_TITLES:
            raise SystemExit("workflows: unknown part %r (have %s)" % (p, ", ".join(PART_TITLES)))
    if not (common.ROOT / "examples" / "workflows" / "steps.py").exists():
        common.log("workflows: the steps it deploys are examples/workflows/ of a source checkout; run it there")
        return 2
    if not (common.VENV / "bin" / "mpiws").exists():
        common.log("workflows: mpiws is not set up in %s; run: %s" % (common.VENV, common.SETUP_HINT))
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="mpiws-bench-wf-"))
    key = tmp / "key"
    key.write_text(secrets.token_hex(32) + "\n")
    key.chmod(0o600)
    meta = {
        "suite": "workflows",
        "machine": common.machine(),
        "rounds": a.rounds or (1 if a.quick else 3),
        "quick": a.quick,
        "argv": sys.argv,
    }
    text, rc = "", 0
    try:
        if not a.wan:
            results, failures, skipped = measure(a, parts, key, tmp)
            text = report(meta, results, failures, skipped)
            common.save(
                "workflows",
                out,
                meta,
                {p: {str(k): v for k, v in r.items()} for p, r in results.items()},
                {},
                failures,
                text,
                None if a.no_plots else lambda o: plots(o, results),
            )
            rc = 1 if failures else 0
        if a.wan or a.with_wan:
            latency, rate = a.latency or WAN_LATENCY, a.rate or WAN_RATE
            wan, why = start_wan(tmp, latency, rate)
            if wan is None:
                common.log("workflows: WAN part not measured: %s" % why)
                wtext = "## Behind a slow link\n\nNot measured: %s.\n" % why
            else:
                try:
                    wparts = [p for p in parts if p in ("chain", "loop")]
                    wresults, wfailures, wskipped = measure(a, wparts, key, tmp, wan)
                finally:
                    stop_wan(wan)
                wtext = report(meta, wresults, wfailures, wskipped, wan)
                common.write_json(
                    out / "wan-results.json",
                    dict(
                        meta,
                        wan={"latency": latency, "rate": rate},
                        results={p: {str(k): v for k, v in r.items()} for p, r in wresults.items()},
                        failures=wfailures,
                    ),
                )
                if not a.no_plots:
                    try:
                        plots(out, wresults, prefix="wan-", title_extra=" (manager %d ms away)" % latency)
                    except ImportError:
                        pass
                rc = rc or (1 if wfailures else 0)
            print(wtext)
            with open(out / "table.md", "a") as f:
                f.write("\n" + wtext)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    common.log("workflows: wrote %s" % out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
