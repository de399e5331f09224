"""What the dashboard costs the ranks it watches. ``mpiws run -n 2`` of a
ping-pong (8 B and 64 KiB buffers, half round trips, the median of blocks
over a few seconds), three ways in alternating rounds:

- none: no dashboard;
- idle: ``--dashboard``, no page open (the claim: nothing is gathered);
- open: ``--dashboard`` and a page open all along, i.e. a client reading
  ``/dashboard/api/events``: the endpoint then asks each rank's status
  (traffic, what it waits for) once a second, as it does for a browser.

Medians over rounds; the ratios against `none` are what to compare. The
results go to OUT/dashboard.json.

Entry point: benchmarks/dashboard/run [--quick] [--rounds R] [--out DIR]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

WAYS = ("none", "idle", "open")
MPIWS = common.VENV / "bin" / "mpiws"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def read_events(url, key, stop, seen):
    """Read the page's event stream until ``stop``; count the documents."""
    req = urllib.request.Request(url + "api/events", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        while not stop.is_set():
            line = r.readline()
            if not line:
                return
            if line.startswith(b"event: state"):
                seen.append(time.monotonic())


def one(way, seconds, env, key_file):
    cmd = [str(MPIWS), "run", "-n", "2"]
    if way != "none":
        cmd.append("--dashboard")
    p = subprocess.Popen(
        [*cmd, str(HERE / "pingpong.py"), str(seconds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop, seen = threading.Event(), []
    reader = None
    if way != "none":
        line = p.stderr.readline()
        url = line.split(" at ")[1].split()[0]
        if way == "open":
            reader = threading.Thread(
                target=read_events, args=(url, key_file.read_text().strip(), stop, seen), daemon=True
            )
            reader.start()
    out, err = p.communicate(timeout=600)
    stop.set()
    if p.returncode != 0:
        raise RuntimeError(f"{way}: exit {p.returncode}: {err[-2000:]}")
    result = json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    result["documents"] = len(seen)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds of 2 s per size")
    ap.add_argument("--rounds", type=int, help="alternating rounds (default 5, quick 3)")
    ap.add_argument("--seconds", type=float, help="per size and run (default 4, quick 2)")
    ap.add_argument("--out", default=str(common.BENCH_DIR / "results" / "dashboard"))
    a = ap.parse_args()
    rounds = a.rounds or (3 if a.quick else 5)
    seconds = a.seconds or (2.0 if a.quick else 4.0)
    with tempfile.TemporaryDirectory(prefix="mpiws-dash-bench-") as tmp:
        key_file = Path(tmp) / "config" / "key"
        env = dict(os.environ, MPIWS_KEY_FILE=str(key_file))
        results = {w: [] for w in WAYS}
        for r in range(rounds):
            for way in WAYS:
                got = one(way, seconds, env, key_file)
                results[way].append(got)
                log(
                    f"round {r + 1}/{rounds} {way}: 8 B {got['8'] * 1e6:.1f} us, 64 KiB {got['65536'] * 1e6:.1f} us"
                    + (f", {got['documents']} documents read" if way == "open" else "")
                )
    med = {w: {s: statistics.median(x[s] for x in results[w]) for s in ("8", "65536")} for w in WAYS}
    rows = []
    for size, label in (("8", "8 B"), ("65536", "64 KiB")):
        base = med["none"][size]
        rows.append(
            [
                label,
                *(f"{med[w][size] * 1e6:.1f}" for w in WAYS),
                f"{med['idle'][size] / base:.3f}",
                f"{med['open'][size] / base:.3f}",
            ]
        )
    note = f"mpiws run -n 2, half round trip (us), medians of {rounds} alternating rounds of {seconds:g} s per size"
    print(
        common.table(
            "What the dashboard costs the ranks",
            ["buffer", "none", "idle", "open", "idle / none", "open / none"],
            rows,
            note,
        )
    )
    common.write_json(
        Path(a.out) / "dashboard.json", {"rounds": rounds, "seconds": seconds, "medians": med, "runs": results}
    )


if __name__ == "__main__":
    main()
