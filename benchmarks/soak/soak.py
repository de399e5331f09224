"""Soak: does an endpoint keep its memory, descriptors and processes over
time? (issue 28)

One endpoint (``mpiws serve`` on loopback, a key file of its own) serves
``--domains`` domains of two ranks, started by the client API
(``mpiws.launch.domain.Domain``) a few at a time and each waited for to
its end; then one domain of two ranks moves ``--messages`` messages, rank 0
to rank 1. Every so many domains the endpoint process's resident memory
(``/proc/PID/status`` VmRSS), open descriptors (``/proc/PID/fd``), threads
and live processes of the run (a marker in their environment) are sampled;
the two ranks sample their own memory every so many messages (resident
but not shared: the same-host rings are shared memory of a fixed size,
whose pages count as the rings first turn). Slopes are
least-squares fits over the second half of the samples (after warm-up):
KiB and descriptors per 1000 domains, KiB per 100,000 messages. At the end
the endpoint is stopped and no process of the run may remain.

    benchmarks/soak/run [--domains 10000] [--messages 1000000] [--quick] [--out DIR]
"""

import argparse
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.append(str(HERE.parent / "chaos"))  # after the caller's own: chaos/ has a services.py too

from chaos import marked_processes  # noqa: E402


# The instance processes `mpiws serve` keeps started ahead of need (--spare-instances),
# and the fork server they are forked from.
SPARES = 2 + 1


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "Threads"):
                out[k] = int(v.split()[0])
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def slope(points, scale):
    """Least-squares slope of the second half of ``points`` (x, y), per ``scale`` of x."""
    pts = points[len(points) // 2 :]
    if len(pts) < 2:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in pts) / sxx * scale


class Soak:
    def __init__(self, domains, messages, concurrency, isolation, samples=50):
        self.domains, self.messages = domains, messages
        self.concurrency, self.isolation = concurrency, isolation
        self.every_domains = max(1, domains // samples)
        self.every_messages = max(1, messages // samples)
        self.dir = Path(tempfile.mkdtemp(prefix="soak-"))
        self.marker = f"SOAK_RUN={secrets.token_hex(6)}"
        k, v = self.marker.split("=")
        self.env = dict(os.environ, **{k: v})
        self.env.pop("MPIWS_KEY", None)
        self.env.update(
            MPIWS_KEY_FILE=str(self.dir / "key"),
            TMPDIR=str(self.dir),
            PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        )
        os.environ["MPIWS_KEY_FILE"] = self.env["MPIWS_KEY_FILE"]  # this process's clients too
        os.environ.pop("MPIWS_KEY", None)

    def start(self):
        mpiws = str(Path(sys.executable).with_name("mpiws"))
        args = [mpiws, "serve", "--service", "one=services:one", "--service", "pair=services:pair"]
        if self.isolation == "thread":
            args += ["--isolation", "thread"]
        self.server = subprocess.Popen(
            args, env=self.env, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.server.stdout.readline()
            m = re.search(r"serving .* at (\S+)", line)
            if m:
                self.url = m.group(1)
                break
            if not line and self.server.poll() is not None:
                raise RuntimeError("mpiws serve did not start")
        threading.Thread(target=self.server.stdout.read, daemon=True).start()

    def sample(self, x):
        s = proc_status(self.server.pid)
        s["x"] = x
        s["processes"] = len(marked_processes(self.marker)) - 1  # less the endpoint itself
        s["t"] = round(time.monotonic() - self.t0, 2)
        return s

    def settled(self, spares, within=20.0):
        """A sample once the ended instances' processes are gone (each lingers a few
        seconds for its peers' questions) and the endpoint has closed what it held of
        them (its descriptor count has not fallen for a second: on a loaded machine it
        closes them a while after the processes end); or after ``within`` seconds."""
        deadline = time.monotonic() + within
        while len(marked_processes(self.marker)) - 1 > spares and time.monotonic() < deadline:
            time.sleep(0.2)
        lowest, since = None, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - since < 1.0:
            fds = proc_status(self.server.pid)["fds"]
            if lowest is None or fds < lowest:
                lowest, since = fds, time.monotonic()
            time.sleep(0.2)
        return self.sample(self.domains)

    def run_domains(self, progress):
        from mpiws.launch.domain import Domain

        failures = []

        def one(i):
            d = Domain([self.url, self.url])
            d.start("one")
            statuses, failure = d.wait()
            if failure is not None or [s["result"] for s in statuses] != [0, 1]:
                failures.append((i, failure or statuses))

        samples = [self.sample(0)]
        done = 0
        with ThreadPoolExecutor(self.concurrency) as pool:
            while done < self.domains:
                batch = min(self.every_domains, self.domains - done)
                list(pool.map(one, range(done, done + batch)))
                done += batch
                samples.append(self.sample(done))
                progress(
                    f"domains {done}/{self.domains}: rss {samples[-1]['VmRSS']} KiB, fds {samples[-1]['fds']},"
                    f" threads {samples[-1]['Threads']}, processes {samples[-1]['processes']},"
                    f" {samples[-1]['t']:.0f} s"
                )
        return samples, failures

    def run_messages(self, progress):
        from mpiws.launch.domain import Domain

        endpoint = [self.sample(0)]
        stop = threading.Event()

        def watch():
            while not stop.wait(1.0):
                endpoint.append(self.sample(None))

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        started = time.monotonic()
        d = Domain([self.url, self.url])
        d.start("pair", {"messages": self.messages, "every": self.every_messages})
        statuses, failure = d.wait()
        stop.set()
        t.join()
        seconds = time.monotonic() - started
        progress(f"messages {self.messages}: {seconds:.1f} s ({self.messages / seconds:.0f}/s)")
        return statuses, failure, endpoint, seconds

    def stop(self):
        self.server.terminate()
        try:
            self.server.wait(30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
            return ["the endpoint did not stop on SIGTERM"]
        deadline = time.monotonic() + 15
        left = marked_processes(self.marker)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = marked_processes(self.marker)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return left

    def run(self, progress=lambda line: None):
        self.t0 = time.monotonic()
        self.start()
        report = {"domains": self.domains, "messages": self.messages, "isolation": self.isolation}
        try:
            t = time.monotonic()
            dsamples, failures = self.run_domains(progress)
            report["domain_seconds"] = round(time.monotonic() - t, 1)
            report["domain_failures"] = len(failures)
            report["domain_failure_examples"] = [repr(f)[:300] for f in failures[:3]]
            report["domain_samples"] = dsamples
            report["kib_per_1000_domains"] = slope([(s["x"], s["VmRSS"]) for s in dsamples], 1000)
            report["fds_per_1000_domains"] = slope([(s["x"], s["fds"]) for s in dsamples], 1000)
            report["threads_per_1000_domains"] = slope([(s["x"], s["Threads"]) for s in dsamples], 1000)
            report["max_processes"] = max(s["processes"] for s in dsamples)
            report["settled"] = self.settled(SPARES)
            if self.messages:
                statuses, failure, esamples, seconds = self.run_messages(progress)
                report["message_seconds"] = round(seconds, 1)
                report["message_failure"] = failure
                report["endpoint_during_messages"] = esamples
                if failure is None:
                    report["messages_out_of_order"] = statuses[1]["result"]["wrong"]
                    for r in (0, 1):
                        pts = statuses[r]["result"]["samples"]
                        report[f"rank{r}_rss_samples"] = pts
                        report[f"rank{r}_kib_per_100k_messages"] = slope(pts, 100_000)
            report["endpoint_rss_end_kib"] = proc_status(self.server.pid)["VmRSS"]
        finally:
            left = self.stop()
        report["leaked_processes"] = len(left)
        report["leaked"] = [str(x) for x in left]
        report["tmp_left"] = sorted(p.name for p in self.dir.iterdir() if p.name.startswith("mpiws"))
        report["seconds"] = round(time.monotonic() - self.t0, 1)
        return report


def plot(report, out):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    s = report["domain_samples"]
    a.plot([x["x"] for x in s], [x["VmRSS"] / 1024 for x in s], label="endpoint RSS (MiB)")
    a2 = a.twinx()
    a2.plot([x["x"] for x in s], [x["fds"] for x in s], color="tab:orange", label="open fds")
    a.set_xlabel("domains started and ended")
    a.set_ylabel("MiB")
    a2.set_ylabel("fds")
    a.set_title("endpoint over domains")
    for r in (0, 1):
        pts = report.get(f"rank{r}_rss_samples") or []
        b.plot([x for x, _ in pts], [y / 1024 for _, y in pts], label=f"rank {r}")
    b.set_xlabel("messages")
    b.set_ylabel("RSS (MiB)")
    b.set_title("ranks' memory over messages")
    b.legend()
    fig.tight_layout()
    path = out / "soak.png"
    fig.savefig(path)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks/soak/run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--domains", type=int, help="domains started and ended (default 10000; --quick 300)")
    ap.add_argument("--messages", type=int, help="messages from rank 0 to rank 1 (default 1000000; --quick 50000)")
    ap.add_argument("--concurrency", type=int, default=4, help="domains under way at once (default 4)")
    ap.add_argument(
        "--isolation", choices=("process", "thread"), default="process", help="the endpoint's (default process)"
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "soak"))
    a = ap.parse_args(argv)
    domains = a.domains if a.domains is not None else (300 if a.quick else 10000)
    messages = a.messages if a.messages is not None else (50000 if a.quick else 1000000)
    soak = Soak(domains, messages, a.concurrency, a.isolation)
    report = soak.run(progress=lambda line: print("soak: " + line, file=sys.stderr, flush=True))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps(report, indent=1))
    png = plot(report, out)
    keys = (
        "domains",
        "isolation",
        "domain_seconds",
        "domain_failures",
        "kib_per_1000_domains",
        "fds_per_1000_domains",
        "threads_per_1000_domains",
        "max_processes",
        "messages",
        "message_seconds",
        "messages_out_of_order",
        "rank0_kib_per_100k_messages",
        "rank1_kib_per_100k_messages",
        "endpoint_rss_end_kib",
        "leaked_processes",
        "tmp_left",
        "seconds",
    )
    for k in keys:
        v = report.get(k)
        print(f"{k:30s} {round(v, 2) if isinstance(v, float) else v}")
    print(f"soak: written {out / 'soak.json'}" + (f" and {png}" if png else ""))
    bad = report["leaked_processes"] or report["domain_failures"] or report.get("message_failure") or report["tmp_left"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
