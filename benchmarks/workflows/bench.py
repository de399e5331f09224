"""One launch of the workflows benchmark: one part at its points, the direct and the mediated form alternated in
rounds, every run a whole ``mpiws.workflow.run`` (domain or jobs started, data moved, outputs back) on the steps
deployed on ``--endpoint``. Prints one result line: per round, a measurement per (form, point) with the seconds and
the bytes that passed through the manager. driver.py launches it; run by hand:

    python bench.py --part chain --endpoint URL --points 1024,1048576 --rounds 3

Parts (the workflow files are made here, as documents):
  chain     8 echo services in a row, a message of P bytes through them
  programs  8 copy programs in a row (cat), a file of P bytes
  multi     two echo services feeding one step (add: the two concatenated), P bytes each
  loop      4 services (a scatter over 4 blocks of 1000 numbers), P iterations sharing an allreduce each
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

PARTS = ("chain", "programs", "multi", "loop")
CHAIN = 8
BLOCKS, BLOCK = 4, 1000


def document(part, url, point):
    """The workflow (as its parsed YAML) for ``part``; every step on the endpoint ``url``."""
    if part in ("chain", "programs"):
        kind, target, port = ("service", "echo", "data") if part == "chain" else ("program", "copy", "src")
        out = "data" if part == "chain" else "dst"
        steps = {}
        for i in range(1, CHAIN + 1):
            src = "message" if i == 1 else "s%d/%s" % (i - 1, out)
            steps["s%d" % i] = {kind: target, "endpoint": url, "in": {port: src}, "out": [out]}
        return {
            "name": part,
            "inputs": {"message": "bytes" if part == "chain" else "file"},
            "steps": steps,
            "outputs": {"result": "s%d/%s" % (CHAIN, out)},
        }
    if part == "multi":
        return {
            "name": "multi",
            "inputs": {"a": "bytes", "b": "bytes"},
            "steps": {
                "left": {"service": "echo", "endpoint": url, "in": {"data": "a"}, "out": ["data"]},
                "right": {"service": "echo", "endpoint": url, "in": {"data": "b"}, "out": ["data"]},
                "both": {"service": "add", "endpoint": url, "in": {"a": "left/data", "b": "right/data"}, "out": ["a"]},
            },
            "outputs": {"result": "both/a"},
        }
    return {
        "name": "loop",
        "inputs": {"blocks": "any[]"},
        "steps": {
            "relax": {
                "service": "relax",
                "endpoint": url,
                "scatter": "block",
                "in": {"block": "blocks", "total": {"value": 0}, "count": {"value": 0}, "tolerance": {"value": 0.0}},
                "out": ["block", "sum", "n", "done"],
                "loop": {"iterations": point, "carry": {"block": "block"}, "allreduce": {"total": "sum", "count": "n"}},
            }
        },
        "outputs": {"blocks": "relax/block"},
    }


def inputs(part, point, tmp):
    from mpiws.workflow.values import LocalFile

    if part == "chain":
        return {"message": os.urandom(point)}
    if part == "programs":
        path = Path(tmp) / ("in-%d" % point)
        if not path.exists():
            path.write_bytes(os.urandom(point))
        return {"message": LocalFile(str(path))}
    if part == "multi":
        return {"a": os.urandom(point), "b": os.urandom(point)}
    return {"blocks": [[float(b * BLOCK + i) for i in range(BLOCK)] for b in range(BLOCKS)]}


def check(part, point, given, outputs, outdir):
    """The run's outputs are what the part should give (a benchmark of wrong answers measures nothing)."""
    if part == "chain":
        ok = Path(outputs["result"]["path"]).read_bytes() == given["message"]
    elif part == "programs":
        ok = Path(outputs["result"]["path"]).read_bytes() == Path(given["message"].path).read_bytes()
    elif part == "multi":
        ok = Path(outputs["result"]["path"]).read_bytes() == given["a"] + given["b"]
    else:
        mean = sum(map(sum, given["blocks"])) / (BLOCKS * BLOCK)
        first = given["blocks"][0][0]
        want = mean - (mean - first) * 0.5 ** (point - 1)  # halfway to the mean each iteration after the first
        ok = abs(outputs["blocks"][0][0] - want) <= 1e-6 * max(1.0, abs(mean))
    if not ok:
        raise SystemExit("workflows bench: %s at %s gave wrong outputs" % (part, point))
    for f in Path(outdir).glob("*"):
        f.unlink()


def settle(idle=0.85, most=10.0):
    """Wait until this machine is about idle (``idle`` of its CPU time over 0.2 s; at most ``most`` s): the
    endpoint refills the instance processes a run took (each a new interpreter importing its service), and a
    run measured during that measures the refill. Every run, either form, starts on a settled endpoint."""

    def times():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)  # idle + iowait, all

    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        (i0, a0) = times()
        time.sleep(0.2)
        (i1, a1) = times()
        if a1 > a0 and (i1 - i0) / (a1 - a0) >= idle:
            return


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=PARTS, required=True)
    ap.add_argument("--endpoint", required=True, help="the endpoint the steps are deployed on")
    ap.add_argument("--points", required=True, help="sizes in bytes (loop: iterations), comma-separated")
    ap.add_argument("--modes", default="direct,mediated", help="forms to run, in the first round's order")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip", default="", help="MODE:POINT pairs not to run (too long), comma-separated")
    ap.add_argument(
        "--toxiproxy",
        default=None,
        help="a Toxiproxy API URL: the steps reach this process's endpoint "
        "through a link of it (--link-latency, --link-rate)",
    )
    ap.add_argument("--link-latency", type=int, default=0, help="one-way latency of that link, ms")
    ap.add_argument("--link-rate", type=float, default=None, help="rate of that link, Mbit/s each way")
    a = ap.parse_args(argv)
    from mpiws import workflow
    from mpiws.workflow import spec

    points = [int(x) for x in a.points.split(",")]
    modes = a.modes.split(",")
    skip = set(a.skip.split(",")) - {""}
    advertise, link = None, None
    if a.toxiproxy:
        sys.path.insert(0, str(HERE.parent / "wan"))
        from toxiproxy import own_endpoint_link

        advertise, link = own_endpoint_link(a.toxiproxy, a.link_latency, a.link_rate, "wf-manager-%d" % os.getpid())
    tmp = tempfile.mkdtemp(prefix="mpiws-bench-wf-")
    rounds = []
    try:
        for r in range(a.rounds):
            order = modes if r % 2 == 0 else modes[::-1]
            measurements = []
            for point in points:
                wf = spec.parse(document(a.part, a.endpoint, point), path="%s.yml" % a.part)
                for mode in order:
                    if "%s:%d" % (mode, point) in skip:
                        continue
                    given = inputs(a.part, point, tmp)
                    outdir = os.path.join(tmp, "out")
                    settle()
                    t0 = time.perf_counter()
                    outputs, record = workflow.run(
                        wf, given, mode=mode, outdir=outdir, progress=False, advertise=advertise
                    )
                    t = time.perf_counter() - t0
                    check(a.part, point, given, outputs, outdir)
                    measurements.append({"kind": mode, "key": point, "t": t, "manager_bytes": record["manager_bytes"]})
                    common.log("workflows %s: round %d/%d, %s %s: %.3f s" % (a.part, r + 1, a.rounds, mode, point, t))
            rounds.append(measurements)
    finally:
        if link:
            link()
    common.emit({"part": a.part, "rounds": rounds})


if __name__ == "__main__":
    main()
