"""One chaos trial's client (run by chaos.py as a process of its own): at
once, a domain of ``services:ranks`` (one rank per endpoint), a task farm
over the endpoints (``mpiws.futures``) and a workflow whose steps run one
per endpoint (``mpiws workflow run``); prints ``STARTED`` when all three
are under way, progress lines on stderr, and at the end one line
``RESULT {json}``.

Usage: client.py CONFIG.json
"""

import faulthandler
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import wait as wait_futures

from mpiws.futures import MPIPoolExecutor
from mpiws.launch.domain import Domain


def task(x):
    import time

    time.sleep(0.02)
    return x * x


def run_domain(cfg, out):
    d = Domain(cfg["urls"])
    d.start("ranks", {k: cfg[k] for k in ("rounds", "seconds", "pause", "piddir")})

    def show(rank, s):
        err = (s.get("error") or {}).get("message", "")
        print(f"client: rank {rank} {s['state']} {err[:200]}", file=sys.stderr, flush=True)

    statuses, _ = d.wait(keep_going=True, on_result=show)
    out["ranks"] = statuses
    print("client: domain ended", file=sys.stderr, flush=True)


def run_farm(cfg, out):
    settled = {}  # future index -> how many times its done-callbacks ran
    lock = threading.Lock()

    def done(i):
        def cb(_f):
            with lock:
                settled[i] = settled.get(i, 0) + 1

        return cb

    ex = MPIPoolExecutor(endpoints=cfg["urls"])
    fs = []
    for i in range(cfg["tasks"]):
        f = ex.submit(task, i)
        f.add_done_callback(done(i))
        fs.append(f)
    wait_futures(fs, timeout=cfg["farm_timeout"])
    ex.shutdown(wait=False, cancel_futures=False)
    time.sleep(0.2)  # callbacks of futures settled just now
    results = {"tasks": len(fs), "done": 0, "exceptions": 0, "wrong": 0, "unsettled": 0, "twice": 0, "errors": []}
    for i, f in enumerate(fs):
        if not f.done():
            results["unsettled"] += 1
            continue
        if settled.get(i, 0) != 1:
            results["twice" if settled.get(i, 0) > 1 else "unsettled"] += 1
        e = f.exception()
        if e is not None:
            results["exceptions"] += 1
            if len(results["errors"]) < 3:
                results["errors"].append(f"{type(e).__name__}: {e}"[:300])
        elif f.result() != i * i:
            results["wrong"] += 1
        else:
            results["done"] += 1
    results["stats"] = [
        {k: s.get(k) for k in ("worker", "tasks", "lost")} for s in ex.worker_stats() if isinstance(s, dict)
    ]
    out["farm"] = results
    print("client: farm settled", file=sys.stderr, flush=True)


def run_workflow(cfg, out):
    # `mpiws workflow run ...`, dumping its threads' stacks if it is still running near its limit
    wrapped = (
        "import faulthandler, sys; faulthandler.dump_traceback_later(float(sys.argv.pop(1)), exit=True);"
        "from mpiws.cli import main; sys.argv[0] = 'mpiws'; sys.exit(main())"
    )
    argv = [sys.executable, "-c", wrapped, str(cfg["workflow_timeout"] - 5)]
    argv += ["workflow", "run", cfg["flow"], "x=3", "--outdir", cfg["outdir"], "-q"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=cfg["workflow_timeout"])
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        out["workflow"] = {"returncode": None, "stdout": "", "stderr": err[-6000:]}
        raise
    out["workflow"] = {"returncode": p.returncode, "stdout": p.stdout[-2000:], "stderr": p.stderr[-6000:]}
    print("client: workflow ended", file=sys.stderr, flush=True)


def main():
    cfg = json.loads(open(sys.argv[1]).read())
    # still here near the trial's limit: every thread's stack to stderr, for the report
    faulthandler.dump_traceback_later(cfg["dump_after"], exit=False)
    out = {}
    errors = {}

    def guarded(name, fn):
        try:
            fn(cfg, out)
        except BaseException as e:  # noqa: BLE001 - reported in the result
            errors[name] = f"{type(e).__name__}: {e}"[:500]

    threads = [
        threading.Thread(target=guarded, args=(name, fn), daemon=True)
        for name, fn in (("ranks", run_domain), ("farm", run_farm), ("workflow", run_workflow))
    ]
    for t in threads:
        t.start()
    print(f"STARTED {time.time():.3f}", flush=True)
    for t in threads:
        t.join()
    out["client_errors"] = errors
    print("RESULT " + json.dumps(out), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
