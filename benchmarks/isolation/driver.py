"""What running each instance in a process of its own costs, against
instances on threads of the endpoint, measured on the same machine in
alternating rounds (medians; the ratio is what to compare):

* start: from ``POST /run`` of a one-rank domain to its status ``done``
  (an instance that does nothing), at a sporadic pace (the endpoint's
  spare processes are ready), and for a domain of 8 ranks started at once
  (more than the spares: processes are forked meanwhile), and again on an
  endpoint that keeps no spares (``--spare-instances 0``);
* ping-pong between two ranks of one domain on one endpoint: the round
  trip of an 8 B buffer and the bandwidth of a 16 MiB one, in steady state
  (after the endpoint has started the spares that replace the two).

Entry point: benchmarks/isolation/run [--quick] [--rounds R] [--out DIR]
"""

import argparse
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODES = ("process", "thread")
#: Instances of one domain started at once on the endpoint (the spares are 2).
BURST = 8
SIZES = [(8, 2000), (16 << 20, 20)]
QUICK_SIZES = [(8, 500), (16 << 20, 8)]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Endpoint:
    """`mpiws serve` with the benchmark's services, in one isolation mode."""

    def __init__(self, mode, key_file, spares=2):
        env = dict(os.environ, MPIWS_KEY_FILE=str(key_file))
        self.p = subprocess.Popen(
            [
                str(ROOT / ".venv/bin/mpiws"),
                "serve",
                "--isolation",
                mode,
                "--service",
                "noop=services:noop",
                "--service",
                "pingpong=services:pingpong",
                "--spare-instances",
                str(spares),
            ],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = self.p.stdout.readline().split(" at ")[-1].strip()
        self.key = key_file.read_text().split()[0]
        u = urlparse(self.url)
        self.host, self.port = u.hostname, u.port

    def call(self, method, path, body=None, auth=None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        h = {"authorization": f"Bearer {auth or self.key}"}
        if body is not None:
            h["content-type"] = "application/json"
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        data = json.loads(r.read() or b"null")
        c.close()
        assert r.status < 300, (r.status, data)
        return data

    def domain(self, service, size, params):
        """Run a domain of ``size`` ranks here, to the end of every rank; rank 0's result."""
        d, token = secrets.token_hex(8), secrets.token_hex(16)
        for rank in range(size):
            self.call(
                "POST",
                "/run",
                {
                    "domain": d,
                    "rank": rank,
                    "endpoints": [self.url] * size,
                    "token": token,
                    "service": service,
                    "params": params,
                },
            )
        results = []
        for rank in range(size):  # every rank ended
            while True:
                s = self.call("GET", f"/domains/{d}/ranks/{rank}?wait=60", auth=token)
                if s["state"] in ("done", "failed", "cancelled"):
                    assert s["state"] == "done", s
                    results.append(s["result"])
                    break
        return results[0]

    def close(self):
        self.p.terminate()
        self.p.wait()


def cold_burst(mode, key_file):
    """A domain of BURST ranks on an endpoint that keeps no spare processes."""
    ep = Endpoint(mode, key_file, spares=0)
    try:
        time.sleep(1.0)  # the endpoint's own start (and its fork server's imports) done
        t0 = time.perf_counter()
        ep.domain("noop", BURST, {})
        return time.perf_counter() - t0
    finally:
        ep.close()


def measure(ep, starts, sizes):
    t = []
    for _ in range(starts):
        time.sleep(0.5)  # sporadic requests: the endpoint has its spare processes ready
        t0 = time.perf_counter()
        ep.domain("noop", 1, {})
        t.append(time.perf_counter() - t0)
    time.sleep(1.0)
    t0 = time.perf_counter()
    ep.domain("noop", BURST, {})  # BURST instances at once: more than the spares
    burst = time.perf_counter() - t0
    time.sleep(6.0)  # the burst's processes have ended and the spares have started again
    rt = ep.domain("pingpong", 2, {"sizes": sizes})
    return {
        "start_s": statistics.median(t),
        "burst_s": burst,
        "rtt_8B_s": rt["8"],
        "bw_16MiB_MBps": 2 * (16 << 20) / rt[str(16 << 20)] / 1e6,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="benchmarks/isolation/run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and rounds")
    ap.add_argument("--rounds", type=int, help="alternating rounds (default 5, quick 3)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="where the JSON goes")
    a = ap.parse_args(argv)
    rounds = a.rounds or (3 if a.quick else 5)
    sizes, starts = (QUICK_SIZES, 10) if a.quick else (SIZES, 30)
    raw = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        key_file = Path(tmp) / "cfg" / "key"
        for r in range(rounds):
            for mode in MODES:
                log(f"isolation: round {r + 1}/{rounds}, {mode}")
                ep = Endpoint(mode, key_file)
                try:
                    raw[mode].append(measure(ep, starts, sizes))
                finally:
                    ep.close()
                raw[mode][-1]["cold_burst_s"] = cold_burst(mode, key_file)
    med = {m: {k: statistics.median(x[k] for x in raw[m]) for k in raw[m][0]} for m in MODES}
    p, t = med["process"], med["thread"]
    rows = [
        (
            "instance start, spare ready (run to done)",
            f"{p['start_s'] * 1e3:.1f} ms",
            f"{t['start_s'] * 1e3:.1f} ms",
            p["start_s"] / t["start_s"],
        ),
        (
            f"domain of {BURST} ranks on it (run to done)",
            f"{p['burst_s'] * 1e3:.0f} ms",
            f"{t['burst_s'] * 1e3:.1f} ms",
            p["burst_s"] / t["burst_s"],
        ),
        (
            f"domain of {BURST} ranks, no spares (run to done)",
            f"{p['cold_burst_s'] * 1e3:.0f} ms",
            f"{t['cold_burst_s'] * 1e3:.1f} ms",
            p["cold_burst_s"] / t["cold_burst_s"],
        ),
        (
            "8 B round trip",
            f"{p['rtt_8B_s'] * 1e6:.1f} us",
            f"{t['rtt_8B_s'] * 1e6:.1f} us",
            p["rtt_8B_s"] / t["rtt_8B_s"],
        ),
        (
            "16 MiB bandwidth",
            f"{p['bw_16MiB_MBps']:.0f} MB/s",
            f"{t['bw_16MiB_MBps']:.0f} MB/s",
            p["bw_16MiB_MBps"] / t["bw_16MiB_MBps"],
        ),
    ]
    print(f"\nisolation: medians of {rounds} alternating rounds on {os.cpu_count()} cores\n")
    print(f"| {'':42} | process | thread | process/thread |\n|---|---|---|---|")
    for name, pv, tv, ratio in rows:
        print(f"| {name:42} | {pv} | {tv} | {ratio:.2f} |")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "isolation.json"
    path.write_text(
        json.dumps({"bench": "isolation", "rounds": rounds, "quick": a.quick, "medians": med, "raw": raw}, indent=1)
    )
    log(f"isolation: results in {path}")


if __name__ == "__main__":
    main()
