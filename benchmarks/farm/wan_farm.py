"""The farm's WAN part: mpiws.futures with workers on endpoints across emulated wide-area links.

Entry point: benchmarks/farm/run --wan [--quick] [--rounds R] [--out DIR]   (driver.py calls ``main``)

Two worker endpoints (``mpiws serve --service futures=mpiws.futures.endpoints:worker --pickle full``) on loopback,
each reached by the master only through a Toxiproxy link of its own (benchmarks/wan/toxiproxy.py: one-way latency L
and a rate in each direction), and the master's own endpoint, which the workers send their results to, through a
third link (``advertise=``): every message between master and a worker crosses one link, a round trip 2L. For each
link setting (10 ms and 50 ms at 100 Mbit/s; quick: 10 ms; and plain loopback, no link, for reference), the farm of
bench.py (the values in blocks of g, the ``work`` kernel, ``map`` at chunksize 1) with one worker per endpoint, in
two modes, an executor each: mpiws's default (adaptive batches, 2 batches prefetched) and one task at a time
(``max_batch=1, prefetch=1``, as mpi4py.futures). One launch of bench.py (``--endpoints``) per link setting and
round, both modes in it (their order alternating by round), rounds alternating the settings; medians over rounds.
Writes wan-table.md (+ the tables as CSV), wan-results.json and wan-completion.png beside the suite's own files.
"""

import json
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "wan"))
import common  # noqa: E402
from toxiproxy import Toxiproxy, ToxiproxyError, ensure_installed, url_through  # noqa: E402

PROG = HERE / "bench.py"
LATENCIES, QUICK_LATENCIES = [10, 50], [10]  # one-way, ms
RATE = 100  # Mbit/s, each direction
VALUES = 1000
GRAINS = [1, 10, 100, 1000]
WORKERS = 2
MODES = ["default", "one"]
LABELS = {"default": "default", "one": "one at a time"}
HOWS = {
    "default": "`MPIPoolExecutor(endpoints=[...])` as it comes: adaptive batches (about one round trip's worth "
    "of tasks each) and 2 batches prefetched per worker",
    "one": "`MPIPoolExecutor(endpoints=[...], max_batch=1, prefetch=1)`: one task per message and per worker at "
    "a time (as mpi4py.futures farms)",
}
COLORS = {"default": "tab:red", "one": "tab:blue"}
SERVICE = "futures=mpiws.futures.endpoints:worker"


def setting_name(lat):
    return "loopback" if lat is None else "%d ms" % lat


def setting_label(lat, rate):
    return "loopback (no link)" if lat is None else "%d ms one way, %g Mbit/s" % (lat, rate)


def endpoints_env(key):
    env = dict(os.environ, MPIWS_KEY_FILE=str(key), NO_PROXY="*", PYTHONUNBUFFERED="1")
    for k in list(env):
        # the modes are the executor's keywords: no farm setting, endpoint or advertised URL from the caller's shell
        if k.startswith("MPIWS_FUTURES_") or k in (
            "MPIWS_KEY",
            "BENCH_MPI",
            "http_proxy",
            "https_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
        ):
            env.pop(k)
    return env


class Endpoints:
    """``n`` ``mpiws serve`` endpoints deploying the futures worker service (each instance in a process of its
    own, the default), their output in files."""

    def __init__(self, n, env, tmp):
        self.procs, self.urls, self.logs = [], [], []
        try:
            for i in range(n):
                log = open(tmp / ("endpoint%d.log" % i), "w+")
                p = subprocess.Popen(
                    [str(common.VENV / "bin" / "mpiws"), "serve", "--service", SERVICE, "--pickle", "full"],
                    cwd=str(tmp),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                self.procs.append(p)
                self.logs.append(log)
                self.urls.append(self._url(p, log))
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _url(p, log, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log.seek(0)
            for line in log.read().splitlines():
                if line.startswith("mpiws: serving futures at "):
                    return line.rsplit(" ", 1)[1].strip()
            if p.poll() is not None:
                break
            time.sleep(0.05)
        log.seek(0)
        raise RuntimeError("an endpoint did not start: %s" % log.read()[-2000:])

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self.logs:
            f.close()


class Launch:
    """One link setting, as ``common.alternate`` wants it (``key``): bench.py --endpoints with its arguments."""

    def __init__(self, lat, rate, urls, api, args, skip, env):
        self.key, self.lat, self.rate, self.urls = setting_name(lat), lat, rate, urls
        self.api, self.args, self.skip, self.env = api, args, skip, env
        self.round = 0

    def run(self, timeout):
        modes = MODES if self.round % 2 == 0 else MODES[::-1]  # which mode goes first alternates by round
        self.round += 1
        cmd = [
            str(common.PYTHON),
            str(PROG),
            "--impl",
            "mpiws",
            "--endpoints",
            ",".join(self.urls),
            "--modes",
            ",".join(modes),
            "--skip",
            ",".join(self.skip),
        ] + [str(x) for x in self.args]
        if self.lat is not None:
            cmd += ["--toxiproxy", self.api, "--link-latency", str(self.lat), "--link-rate", str(self.rate)]
        env = dict(self.env, BENCH_IMPL="wan %s" % self.key)
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(common.ROOT))
        except subprocess.TimeoutExpired as e:
            raise common.LaunchError("%s: timed out after %ss\n%s" % (self.key, timeout, common._tail(e.stderr))) from e
        result = None
        for line in p.stdout.splitlines():
            if line.startswith(common.RESULT_PREFIX):
                result = json.loads(line[len(common.RESULT_PREFIX) :])
        if result is None:
            raise common.LaunchError(
                "%s: exit %s, no result line\n%s\n%s"
                % (self.key, p.returncode, common._tail(p.stdout), common._tail(p.stderr))
            )
        if p.returncode != 0:
            result["exit_error"] = "exit %s after the result line: %s" % (p.returncode, common._tail(p.stderr, 4))
        result["order"] = modes
        return result


def link_rtt(tp, lat, rate):
    """Plain TCP's 8 B round trip through a link like the workers' (the emulation's own accuracy), seconds."""
    import calibrate

    server = calibrate.Server()
    try:
        link = tp.link(server.addr, latency_ms=lat, rate_mbit=rate)
        try:
            return common.median(calibrate.ping_pong(link, 0.5, max_n=20, min_n=8)) / 1e3
        finally:
            tp.remove(link)
    finally:
        server.close()


def estimate(mode, lat, g, values, cost, workers):
    """A point's expected completion time (s): one at a time, each task a round trip of its own plus its work
    (~1 ms of mpiws's own per task); the default, the ideal plus a few round trips."""
    tasks = -(-values // g)
    rtt = 2 * (lat or 0) / 1e3
    if mode == "one":
        return math.ceil(tasks / workers) * (rtt + 1e-3 + g * cost)
    return ideal(values, cost, tasks, workers, lat) + 4 * rtt


def ideal(values, cost, tasks, workers, lat):
    """The CPU work over the workers that have a task, plus one round trip."""
    return values * cost / min(workers, tasks) + 2 * (lat or 0) / 1e3


def not_measured(out, why, command):
    """No Toxiproxy here: the part says so (wan-table.md) and ends without failing."""
    text = "## Task farm across emulated WAN links\n\nNot measured: %s.\n\nCommand: `%s`\n" % (why, command)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "wan-table.md").write_text(text)
    common.write_json(out / "wan-results.json", {"bench": "farm-wan", "skipped": why, "command": command})
    return text


def main(a, command, calibrate, futures_provenance):
    """``a``: driver.py's parsed arguments (--quick, --rounds, --values, --grains, --iters, --workers, --latencies,
    --rate, --max-point-seconds, --timeout, --out, --no-plots); ``calibrate`` and ``futures_provenance``: the
    driver's. Returns (exit status, the report's text)."""
    import bench

    out = Path(a.out)
    rounds = a.rounds or (1 if a.quick else 3)
    values = a.values or VALUES
    grains = [g for g in [int(x) for x in (a.grains or ",".join(map(str, GRAINS))).split(",")] if g <= values]
    iters = a.iters or bench.ITERS
    try:
        workers = int(a.workers) if a.workers else WORKERS
    except ValueError:
        raise SystemExit(
            "farm wan: --workers is one number there (workers on endpoints, one endpoint each), not %r" % a.workers
        ) from None
    lats = [int(x) for x in a.latencies.split(",")] if a.latencies else (QUICK_LATENCIES if a.quick else LATENCIES)
    rate = a.rate or RATE
    cap = a.max_point_seconds if a.max_point_seconds is not None else 60
    timeout = a.timeout or 600
    if not (common.VENV / "bin" / "mpiws").exists():
        common.log("farm wan: mpiws is not set up in %s; run: %s" % (common.VENV, common.SETUP_HINT))
        return 2, None
    try:
        ensure_installed()
    except ToxiproxyError as e:
        if shutil.which("go") is None:
            common.log("farm wan: not measured: %s" % e)
            return 0, not_measured(out, "Toxiproxy is not available: %s" % e, command)
        raise
    machine = common.machine()
    cost = calibrate(iters)
    settings = [None] + lats
    skip, skipped = {}, []
    for lat in settings:
        skip[lat] = []
        for mode in MODES:
            for g in grains:
                est = estimate(mode, lat, g, values, cost, workers)
                if cap and est > cap:
                    skip[lat].append("%s:%d" % (mode, g))
                    skipped.append({"link": setting_name(lat), "mode": mode, "g": g, "estimate": est})
    common.log(
        "farm wan: %d values x %d iterations (%.0f us per value here), grains %s, %d workers on endpoints, "
        "links %s at %g Mbit/s and loopback, %d rounds, %s"
        % (
            values,
            iters,
            cost * 1e6,
            ",".join(map(str, grains)),
            workers,
            ", ".join("%d ms" % x for x in lats),
            rate,
            rounds,
            "quick" if a.quick else "full",
        )
    )
    for s in skipped:
        common.log(
            "farm wan: %s, %s, g=%d left out: ~%.0f s > %g s" % (s["link"], s["mode"], s["g"], s["estimate"], cap)
        )
    started = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="mpiws-farm-wan-"))
    key = tmp / "key"
    key.write_text(secrets.token_hex(32) + "\n")
    key.chmod(0o600)
    env = endpoints_env(key)
    args = ["--values", values, "--grains", ",".join(map(str, grains)), "--iters", iters]
    raw, failures, link_rtts = {}, [], {}
    try:
        with Toxiproxy() as tp:
            eps = Endpoints(workers, env, tmp)
            try:
                launches = []
                for lat in settings:
                    urls = list(eps.urls)
                    if lat is not None:
                        link_rtts[setting_name(lat)] = link_rtt(tp, lat, rate)
                        urls = [
                            url_through(u, tp.link(u.split("//", 1)[1].rstrip("/"), latency_ms=lat, rate_mbit=rate))
                            for u in urls
                        ]
                        common.log(
                            "farm wan: %s: plain TCP round trip through such a link %.1f ms"
                            % (setting_label(lat, rate), link_rtts[setting_name(lat)] * 1e3)
                        )
                    launches.append(Launch(lat, rate, urls, tp.api, args, skip[lat], env))
                raw, failures = common.alternate(launches, rounds, lambda launch: launch.run(timeout))
            finally:
                eps.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    merged = {k: common.merge_rounds([x["measurements"] for x in rs]) for k, rs in raw.items() if rs}
    machine["load_avg_end"] = os.getloadavg()
    versions = [r.get("versions") for rs in raw.values() for r in rs]
    meta = dict(
        bench="farm-wan",
        values=values,
        grains=grains,
        iters=iters,
        cost_per_value=cost,
        workers=workers,
        latencies=lats,
        rate=rate,
        settings=[setting_name(x) for x in settings],
        rounds=rounds,
        quick=a.quick,
        modes=MODES,
        labels=LABELS,
        hows=HOWS,
        link_rtts=link_rtts,
        skipped_points=skipped,
        max_point_seconds=cap,
        cores=machine["cores"],
        machine=machine,
        versions=versions[0] if versions else None,
        futures_provenance=futures_provenance(versions),
        started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        seconds=round(time.time() - started, 1),
        command=command,
    )
    text = report(meta, merged, raw, failures)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    common.write_json(out / "wan-results.json", dict(meta, results=merged, raw=raw, failures=failures))
    (out / "wan-table.md").write_text(text)
    try:
        from mpiws.bench import tables_to_csv

        tables_to_csv(out / "wan-table.md")
    except ImportError:
        pass
    if not a.no_plots and merged:
        try:
            plot(out, meta, merged)
        except ImportError:
            common.log("farm wan: matplotlib is missing, no plot; install with: %s" % common.SETUP_HINT)
    common.log(
        "farm wan: wrote %s (wan-results.json, wan-table.md, wan-*.csv%s) in %.0fs"
        % (out, "" if a.no_plots else ", wan-completion.png", time.time() - started)
    )
    return (0 if merged else 1), text


# --------------------------------------------------------------------- report


class Lookup:
    def __init__(self, merged):
        self.by = {(s, m["kind"], str(m["key"])): m for s, ms in merged.items() for m in ms}

    def m(self, s, kind, key):
        return self.by.get((s, kind, str(key)))

    def t(self, s, kind, key):
        m = self.m(s, kind, key)
        return m["t"] if m else None


def report(meta, merged, raw, failures):
    L = Lookup(merged)
    m = meta["machine"]
    cost, n, w = meta["cost_per_value"], meta["values"], meta["workers"]
    f3 = lambda x: common.fmt(x, "%.3f")  # noqa: E731
    f2 = lambda x: common.fmt(x, "%.2f")  # noqa: E731
    rate_fmt = lambda x: common.fmt(x, "%.0f")  # noqa: E731
    ms_fmt = lambda x: common.fmt(x and x * 1e3, "%.1f")  # noqa: E731
    head = [
        "## Task farm across emulated WAN links: workers on endpoints",
        "",
        "The farm of the local suite with its %d workers on endpoints: %d `mpiws serve --service %s --pickle full` "
        "on loopback, one worker each, each reached by the master only through a Toxiproxy link of its own "
        "(one-way latency L and %g Mbit/s in each direction, benchmarks/wan/toxiproxy.py), and the master's own "
        "endpoint, which the workers send results to, through a link of the same kind (`advertise=`): each "
        "message crosses one link, a round trip is 2L. Loopback = the same endpoints reached directly. %d values "
        "in blocks of g values per task (g = %s), %d iterations of the logistic map each (%.0f us per value "
        "measured in the driver's process), so %.3f s of CPU work in all; `map(work, blocks, chunksize=1)`, "
        "completion time from the first submission to the last result (the results checked on a sample). "
        "%s cores (%s), %s run, median of %d rounds (one launch per link setting and round, both modes in it "
        "one after the other, an executor each, their order alternating by round), %s, took %.0f s. Load "
        "average at start %s, at end %s."
        % (
            w,
            w,
            SERVICE,
            meta["rate"],
            n,
            ", ".join(map(str, meta["grains"])),
            meta["iters"],
            cost * 1e6,
            n * cost,
            meta["cores"],
            m.get("cpu", "?"),
            "quick" if meta["quick"] else "full",
            meta["rounds"],
            meta["started"],
            meta["seconds"],
            "/".join("%.2f" % x for x in m.get("load_avg", ())),
            "/".join("%.2f" % x for x in m.get("load_avg_end", ())),
        ),
        common.provenance(m),
    ]
    if meta.get("futures_provenance"):
        head.append(meta["futures_provenance"])
    head += ["Command: `%s`" % meta["command"], "", "Modes:", ""]
    head += ["- **%s**: %s" % (LABELS[k], HOWS[k]) for k in meta["modes"]]
    head.append("")
    head += common.failure_lines(failures, lambda f: "round %d %s" % (f["round"], f["impl"]))
    for s in meta["settings"]:
        got = len(raw.get(s, []))
        if got < meta["rounds"]:
            head.append("%s: only %d of %d launches succeeded." % (s, got, meta["rounds"]))
    if meta["skipped_points"]:
        head.append(
            "Left out (expected to take more than %g s, `--max-point-seconds`): %s."
            % (
                meta["max_point_seconds"],
                "; ".join(
                    "%s, %s, g = %d (~%.0f s)" % (x["link"], LABELS[x["mode"]], x["g"], x["estimate"])
                    for x in meta["skipped_points"]
                ),
            )
        )
    head.append("")
    parts = ["\n".join(head)]

    rows = []
    for s, lat in zip(meta["settings"], [None] + meta["latencies"]):
        for g in meta["grains"]:
            tasks = -(-n // g)
            best = ideal(n, cost, tasks, w, lat)
            md, mo = L.m(s, "farm", "default:%d" % g), L.m(s, "farm", "one:%d" % g)
            td, to = md and md["t"], mo and mo["t"]
            rows.append(
                [
                    s,
                    g,
                    tasks,
                    f3(best),
                    f3(td),
                    f3(to),
                    rate_fmt(td and tasks / td),
                    rate_fmt(to and tasks / to),
                    f2(common.paired_ratio(md, mo)),
                    f2(common.ratio(td, best)),
                    f2(common.ratio(to, best)),
                ]
            )
    parts.append(
        common.table(
            "WAN farm: completion time (s) and tasks per second, %d workers on endpoints" % w,
            [
                "link",
                "g",
                "tasks",
                "ideal",
                "default",
                "one at a time",
                "default tasks/s",
                "one at a time tasks/s",
                "default/one at a time",
                "default/ideal",
                "one at a time/ideal",
            ],
            rows,
            "Link: one-way latency L (each direction, %g Mbit/s), or loopback without a link. Ideal = the CPU work / "
            "min(%d workers, tasks) + one round trip 2L (a first task cannot return sooner). tasks/s = tasks / "
            "completion time. default/one at a time: the median over rounds of the two modes' ratio in each launch; "
            "below 1 = the default is faster. x/ideal: the median time over the ideal (1 = as fast as the link and the "
            "cores allow)." % (meta["rate"], w),
        )
    )

    rows = []
    for s in meta["settings"]:
        rows.append(
            [
                s,
                ms_fmt(meta["link_rtts"].get(s)) if s != "loopback" else "-",
                ms_fmt(L.t(s, "rtt", "default")),
                ms_fmt(L.t(s, "rtt", "one")),
                f2(L.t(s, "startup", "default")),
                f2(L.t(s, "startup", "one")),
                f2(L.t(s, "shutdown", "default")),
                f2(L.t(s, "shutdown", "one")),
            ]
        )
    parts.append(
        common.table(
            "WAN farm: round trips and the pool's start",
            [
                "link",
                "plain TCP RTT (ms)",
                "no-op task RTT, default (ms)",
                "no-op task RTT, one at a time (ms)",
                "start, default (s)",
                "start, one at a time (s)",
                "shutdown, default (s)",
                "shutdown, one at a time (s)",
            ],
            rows,
            "Plain TCP RTT: an 8 B ping-pong through a link of the same setting (the emulation itself). No-op task RTT: "
            "`submit(noop).result()` one at a time, median of the samples in a launch, then over rounds. Start: making "
            "the executor to the end of a first map of %d small tasks (every worker up: each a run request to its "
            "endpoint through the link, the options and the program's source shipped); not part of any completion "
            "time, nor is the second the master then waits (each endpoint starts a spare process for its next "
            "instance as one starts, which takes CPU from the workers on a shared host for about half a second)."
            % (4 * w),
        )
    )

    rows = []
    for s in meta["settings"]:
        ms = [x for x in merged.get(s, []) if x["t_min"] and x["kind"] == "farm"]
        if not ms:
            continue
        spread = sorted(x["t_max"] / x["t_min"] for x in ms)
        worst = max(ms, key=lambda x: x["t_max"] / x["t_min"])
        rows.append(
            [s, "%.2f" % spread[len(spread) // 2], "%.2f" % spread[-1], "%s g=%s" % tuple(str(worst["key"]).split(":"))]
        )
    parts.append(
        common.table(
            "WAN farm: spread over rounds (max/min time per measurement)", ["link", "median", "worst", "worst at"], rows
        )
    )
    return "\n".join(parts)


def plot(out, meta, merged):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    L = Lookup(merged)
    settings = list(zip(meta["settings"], [None] + meta["latencies"]))
    cost, n, w, grains = meta["cost_per_value"], meta["values"], meta["workers"], meta["grains"]
    fig, axes = plt.subplots(1, len(settings), figsize=(4.6 * len(settings), 4.2), squeeze=False, sharey=True)
    for ax, (s, lat) in zip(axes.flat, settings):
        for mode in meta["modes"]:
            pts = [(g, L.m(s, "farm", "%s:%d" % (mode, g))) for g in grains]
            pts = [(g, m) for g, m in pts if m]
            if not pts:
                continue
            xs = [g for g, _ in pts]
            ax.plot(xs, [m["t"] for _, m in pts], "o-", ms=3, color=COLORS[mode], label=LABELS[mode])
            ax.fill_between(
                xs, [m["t_min"] for _, m in pts], [m["t_max"] for _, m in pts], color=COLORS[mode], alpha=0.15, lw=0
            )
        ax.plot(
            grains,
            [ideal(n, cost, -(-n // g), w, lat) for g in grains],
            "--",
            color="black",
            lw=1,
            label="ideal (CPU work / min(workers, tasks) + 2L)",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(grains)
        ax.set_xticklabels([str(g) for g in grains])
        ax.set_xlabel("granularity g (values per task)")
        ax.set_title(setting_label(lat, meta["rate"]), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes.flat[0].set_ylabel("completion time (s)")
    fig.suptitle(
        "Task farm, %d workers on endpoints behind emulated links: completion time vs granularity\n"
        "%s cores; %d values, %.0f us each; median of %d rounds, band = min..max"
        % (w, meta["cores"], n, cost * 1e6, meta["rounds"]),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out / "wan-completion.png", dpi=110)
    plt.close(fig)
