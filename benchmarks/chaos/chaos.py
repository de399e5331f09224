"""Chaos: faults under load, seeded and reproducible (issue 28).

Each trial starts three endpoints (``mpiws serve`` on loopback, with a key
file of the trial's own), each behind a link (``tests/faultproxy.py``, with
no faults of its own) that every client and peer reaches it through, and a
client (client.py) that runs, at once, a domain of three ranks (sequence-
numbered point-to-point and collectives), a task farm over the three
endpoints (``mpiws.futures``) and a three-step workflow, one step per
endpoint (``mpiws workflow run``). At a moment drawn from the seed it does
one fault:

- ``kill-rank``: SIGKILL to the instance process of one rank of the domain;
- ``kill-endpoint``: SIGKILL to one endpoint process (its instances go too);
- ``cut-link``: the link to one endpoint resets every connection, for good;
- ``stall-link``: the link to one endpoint moves no byte for a while
  (shorter or longer than the failure timeout).

Then it checks: the trial ended within its wall-clock bound (else a hang);
every rank still running got an error naming the failed rank (or none,
for a link stalled for less than half the failure timeout), within the
failure timeout plus slack; no message delivered twice, lost without an
error, or delivered after its sender or receiver was told it failed; every
future settled exactly once; the workflow succeeded or failed naming a
step; and once the trial's survivors are stopped, no process of the trial
(found by a marker in its environment, /proc/*/environ), no listening
socket on the trial's ports and no ``mpiws-*`` temporary file is left.

    benchmarks/chaos/run [--trials N] [--seed S] [--quick] [--only K] [--out DIR]
"""

import argparse
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from faultproxy import FaultProxy  # noqa: E402

KINDS = ("kill-rank", "kill-endpoint", "cut-link", "stall-link")
FAILURE_TIMEOUT = 2.0
#: how late after the fault an error may come: the failure timeout, a look
#: or two, and slack for a loaded 2-core machine
DETECT_BOUND = FAILURE_TIMEOUT + 8.0
#: a trial's hard limit, from the client's start to its end
WALL = 120.0
#: after the survivors are stopped, how long their processes may take to go
GRACE = 10.0
STEPS = ("a", "b", "c")

FLOW = """name: chaos
inputs:
  x: int
steps:
  a: {{service: slow, endpoint: "{u0}", in: {{x: x, seconds: {{value: {s}}}}}, out: [x]}}
  b: {{service: slow, endpoint: "{u1}", in: {{x: a/x, seconds: {{value: {s}}}}}, out: [x]}}
  c: {{service: slow, endpoint: "{u2}", in: {{x: b/x, seconds: {{value: {s}}}}}, out: [x]}}
outputs:
  y: c/x
"""


def mpiws_exe():
    return str(Path(sys.executable).with_name("mpiws"))


# ---------------------------------------------------------------- /proc scans


def marked_processes(marker):
    """PIDs of live processes whose environment holds ``marker`` (zombies excluded)."""
    needle = marker.encode()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle not in f.read():
                    continue
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                found.append(int(d))
        except OSError:
            continue
    return found


def listening_ports():
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[3] == "0A":  # LISTEN
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return ports


def describe(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


# ---------------------------------------------------------------- one trial


class Trial:
    def __init__(self, index, seed, quick, log):
        self.index = index
        self.rng = random.Random(f"{seed}:{index}")
        self.kind = KINDS[self.rng.randrange(len(KINDS))] if index >= len(KINDS) else KINDS[index]
        self.victim = self.rng.randrange(3)
        self.quick = quick
        self.log = log
        self.dir = Path(tempfile.mkdtemp(prefix=f"chaos-{index}-"))
        self.marker = f"CHAOS_TRIAL={secrets.token_hex(6)}"
        # The workload: rounds of messages (~rounds * (pause + a round's time),
        # and on until the fault has surely been done), tasks of 20 ms over
        # three workers, three workflow steps in a chain.
        self.rounds = 150 if quick else 250
        self.pause = 0.02
        self.tasks = 300 if quick else 500
        self.step_seconds = 1.0 if quick else 1.5
        latest_fault = 4.0 if quick else 6.0
        self.fault_at = self.rng.uniform(0.5, latest_fault)
        # Ranks start after the client says STARTED (from which the fault is
        # timed), so rounds that last this long from their start see it.
        self.round_seconds = latest_fault + 2.0
        # a hiccup, a stall longer than the failure timeout, a link that black-holes for good
        self.stall_for = self.rng.choice([0.4, FAILURE_TIMEOUT * 2.5, WALL]) * self.rng.uniform(0.8, 1.0)
        self.servers, self.proxies = [], []
        self.outcome = {
            "trial": index,
            "kind": self.kind,
            "victim": self.victim,
            "fault_at": round(self.fault_at, 3),
        }
        if self.kind == "stall-link":
            self.outcome["stall_for"] = round(self.stall_for, 3)

    # -------------------------------------------------------------- set-up
    def env(self):
        tmp = self.dir / "tmp"
        tmp.mkdir(exist_ok=True)
        e = dict(os.environ)
        e.pop("MPIWS_KEY", None)
        k, v = self.marker.split("=")
        e.update(
            {
                k: v,
                "MPIWS_KEY_FILE": str(self.dir / "key"),
                "MPIWS_FAILURE_TIMEOUT": str(FAILURE_TIMEOUT),
                "TMPDIR": str(tmp),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), e.get("PYTHONPATH")])),
                "CHAOS_PIDDIR": str(self.dir / "pids"),
            }
        )
        return e

    def start_endpoints(self):
        (self.dir / "pids").mkdir()
        env = self.env()
        # The key file first, so that the three endpoints share it.
        made = "from mpiws import keys; keys.server_keys(None)"
        subprocess.run([sys.executable, "-c", made], env=env, check=True, capture_output=True)
        args = ["serve", "--pickle", "full", "--service", "ranks=services:ranks"]
        args += ["--service", "futures=services:futures", "--service", "slow=services:slow"]
        for _ in range(3):
            p = subprocess.Popen(
                [mpiws_exe(), *args],
                env=env,
                cwd=self.dir,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            self.servers.append([p, None])
        deadline = time.monotonic() + 90
        for s in self.servers:
            while s[1] is None and time.monotonic() < deadline:
                line = s[0].stdout.readline()
                m = re.search(r"serving .* at (\S+)", line)
                if m:
                    s[1] = m.group(1)
                elif not line and s[0].poll() is not None:
                    break
            if s[1] is None:
                raise RuntimeError("an endpoint did not start")
            # keep reading its output, so that it never blocks on a full pipe
            threading.Thread(target=s[0].stdout.read, daemon=True).start()
        self.ports = [int(u.rsplit(":", 1)[1]) for _, u in self.servers]
        self.proxies = [FaultProxy(port, refuse=0, mean_bytes=None) for port in self.ports]
        self.ports += [p.port for p in self.proxies]

    # -------------------------------------------------------------- the fault
    def pid_of(self, name, deadline):
        path = self.dir / "pids" / f"{name}.pid"
        while time.monotonic() < deadline:
            try:
                return int(path.read_text())
            except (OSError, ValueError):
                time.sleep(0.05)
        return None

    def fault(self):
        v = self.victim
        if self.kind == "kill-rank":
            pid = self.pid_of(f"rank{v}", time.monotonic() + 10)
            if pid is None:
                self.outcome["fault_note"] = "rank's pid never written"
                return
            os.kill(pid, signal.SIGKILL)
        elif self.kind == "kill-endpoint":
            os.kill(self.servers[v][0].pid, signal.SIGKILL)
        elif self.kind == "cut-link":
            self.proxies[v].cut()
        else:
            self.proxies[v].stall(self.stall_for)
        self.fault_time = time.time()

    # -------------------------------------------------------------- running
    def run(self):
        t0 = time.monotonic()
        self.fault_time = None
        try:
            self.start_endpoints()
            self.outcome["setup_s"] = round(time.monotonic() - t0, 2)
            result, hung = self.run_client()
            self.check(result, hung)
        except Exception as e:  # noqa: BLE001 - a trial that could not run is reported
            self.outcome.setdefault("problems", []).append(f"trial error: {type(e).__name__}: {e}")
        finally:
            self.teardown()
        self.outcome["seconds"] = round(time.monotonic() - t0, 2)
        return self.outcome

    def run_client(self):
        urls = [p.url for p in self.proxies]
        (self.dir / "flow.yml").write_text(FLOW.format(u0=urls[0], u1=urls[1], u2=urls[2], s=self.step_seconds))
        (self.dir / "out").mkdir()
        cfg = {
            "urls": urls,
            "rounds": self.rounds,
            "pause": self.pause,
            "seconds": self.round_seconds,
            "piddir": str(self.dir / "pids"),
            "tasks": self.tasks,
            "farm_timeout": WALL - 20,
            "flow": str(self.dir / "flow.yml"),
            "outdir": str(self.dir / "out"),
            "workflow_timeout": WALL - 20,
            "mpiws": mpiws_exe(),
            "dump_after": WALL - 5,
        }
        (self.dir / "client.json").write_text(json.dumps(cfg))
        client = subprocess.Popen(
            [sys.executable, str(HERE / "client.py"), str(self.dir / "client.json")],
            env=self.env(),
            cwd=HERE,
            stdout=subprocess.PIPE,
            stderr=open(self.dir / "client.err", "w"),
            text=True,
            start_new_session=True,
        )
        lines = []
        started = threading.Event()

        def read():
            for line in client.stdout:
                lines.append(line)
                if line.startswith("STARTED"):
                    started.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + WALL
        if started.wait(60):
            time.sleep(self.fault_at)
            self.fault()
        try:
            client.wait(max(1.0, deadline - time.monotonic()))
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(client.pid, signal.SIGKILL)
            client.wait()
        reader.join(5)
        result = None
        for line in lines:
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
        return result, hung

    # -------------------------------------------------------------- checks
    def check(self, result, hung):
        o, v = self.outcome, self.victim
        problems = o.setdefault("problems", [])
        o.update(hang=hung, duplicates=0, lost=0, after_failed=0, late=0, unsettled=0, leftovers=0)
        if hung or result is None:
            o["hang"] = True
            err = (self.dir / "client.err").read_text()[-6000:]
            problems.append(f"client did not end within {WALL} s (or gave no result): {err}")
            return
        if result.get("client_errors"):
            problems.append(f"client errors: {result['client_errors']}")
        if self.fault_time is None:
            problems.append("the fault was not done: " + o.get("fault_note", "the client never started"))
        detect = []
        # ---- the domain
        statuses = result.get("ranks") or [None] * 3
        stalled_briefly = self.kind == "stall-link" and self.stall_for < FAILURE_TIMEOUT / 2
        black_hole = self.kind == "stall-link" and self.stall_for > WALL / 2
        by_rank = {}
        for r, s in enumerate(statuses):
            if s is None:
                o["hang"] = True
                problems.append(f"rank {r}: no final status")
                continue
            if s.get("state") != "done":
                by_rank[r] = None
                # the victim failed (killed), or could not be asked behind its broken link
                if r != v or stalled_briefly:
                    problems.append(f"rank {r} {s.get('state')}: {(s.get('error') or {}).get('message', '')[:200]}")
                continue
            by_rank[r] = s["result"]
        for r, res in by_rank.items():
            if res is None:
                continue
            o["duplicates"] += res["duplicates"]
            o["lost"] += res["lost"] if res["error"] is None else 0
            if res["bad_collectives"]:
                problems.append(f"rank {r}: {res['bad_collectives']} collectives gave wrong values")
            err = res["error"]
            if err is None:
                if r != v and self.kind != "stall-link":
                    problems.append(f"rank {r} ended its rounds with no error")
                continue
            if stalled_briefly:
                problems.append(f"rank {r}: error for a link stalled {self.stall_for:.2f} s: {err['message'][:200]}")
            # It names the failed rank, or a rank that ended on an error of its own first.
            named = {int(x) for x in re.findall(r"rank (\d+)", err["message"])} - {r}
            cascade = any(by_rank.get(x) is not None and by_rank[x]["error"] is not None for x in named)
            if r != v and v not in named and not cascade and (self.kind != "stall-link" or black_hole):
                problems.append(f"rank {r}: error does not name rank {v}: {err['message'][:200]}")
            if err["class"] != 101 and r != v:
                problems.append(f"rank {r}: error class {err['class']}, not ERR_PROC_FAILED: {err['message'][:200]}")
            if self.fault_time is not None:
                took = err["time"] - self.fault_time
                detect.append(took)
                if took < 0:
                    problems.append(f"rank {r}: an error {-took:.1f} s before the fault: {err['message'][:200]}")
                # a link that answers nothing: two status polls time out (LONG_POLL + FT each)
                bound = DETECT_BOUND + (2 * (2 + FAILURE_TIMEOUT) if self.kind == "stall-link" else 0)
                if took > bound:
                    o["late"] += 1
                    problems.append(
                        f"rank {r}: error {took:.1f} s after the fault, in {err['op']} {err['peer']}: {err['message'][:200]}"
                    )
        # a sender told a send failed: its receiver has nothing from it at or after that number
        for r, res in by_rank.items():
            if not res:
                continue
            for dest, seq in res["failed_send"].items():
                got = by_rank.get(int(dest))
                if got and got["next"].get(str(r), 0) > seq:
                    o["after_failed"] += 1
                    problems.append(
                        f"rank {dest} received #{got['next'][str(r)] - 1} from {r}, whose send #{seq} failed"
                    )
        for r, res in by_rank.items():
            if res and res["lost"] and res["error"] is None:
                problems.append(f"rank {r}: {res['lost']} messages missing with no error")
            if res and res["duplicates"]:
                problems.append(f"rank {r}: {res['duplicates']} duplicates")
        o["detect_s"] = [round(t, 2) for t in detect]
        # ---- the farm
        farm = result.get("farm")
        if farm is None:
            o["unsettled"] = self.tasks
            problems.append("the farm gave no result")
        else:
            o["unsettled"] = farm["unsettled"] + farm["twice"]
            o["futures"] = {k: farm[k] for k in ("tasks", "done", "exceptions", "wrong", "unsettled", "twice")}
            if farm["unsettled"] or farm["twice"] or farm["wrong"]:
                problems.append(f"farm: {o['futures']}")
            if farm["exceptions"]:
                problems.append(f"farm: {farm['exceptions']} tasks failed: {farm['errors']}")
        # ---- the workflow
        wf = result.get("workflow")
        if wf is None:
            problems.append("the workflow gave no result")
        elif wf["returncode"] is None:
            o["workflow"] = "hung"
            problems.append(f"the workflow did not end: {wf['stderr'][-3000:]}")
        elif wf["returncode"] == 0:
            o["workflow"] = "done"
            if '"y": 31' not in wf["stdout"].replace(" ", " "):
                problems.append(f"workflow output: {wf['stdout'][:200]}")
        else:
            named = re.findall(r"step '?\"?(\w+)", wf["stderr"])
            named = [s for s in named if s in STEPS]
            o["workflow"] = f"failed: step {named[0]}" if named else "failed, no step named"
            o["workflow_error"] = wf["stderr"].strip().splitlines()[-1][:300] if wf["stderr"].strip() else ""
            if not named:
                problems.append(f"workflow failed naming no step: {wf['stderr'][-400:]}")

    # -------------------------------------------------------------- teardown
    def teardown(self):
        o = self.outcome
        o.setdefault("leftovers", 0)
        for p in self.proxies:
            p.close()
        self.proxies = []
        for p, _ in self.servers:
            if p.poll() is None:
                p.terminate()
        for p, _ in self.servers:
            try:
                p.wait(GRACE)
            except subprocess.TimeoutExpired:
                o.setdefault("problems", []).append(f"endpoint {p.pid} did not stop on SIGTERM")
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        deadline = time.monotonic() + GRACE
        left = marked_processes(self.marker)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = marked_processes(self.marker)
        left_info = [f"{pid}: {describe(pid)}" for pid in left]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        sockets = sorted(set(getattr(self, "ports", [])) & listening_ports())
        tmp = self.dir / "tmp"
        files = sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []
        leftovers = [f"process {x}" for x in left_info] + [f"listening port {x}" for x in sockets]
        leftovers += [f"temporary {x}" for x in files if x.startswith("mpiws")]
        if leftovers:
            o["leftovers"] = len(leftovers)
            o.setdefault("problems", []).append(f"left behind: {leftovers}")
        if not o.get("problems"):
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            o["dir"] = str(self.dir)


# ---------------------------------------------------------------- many trials


def summarize(outcomes, seed, seconds):
    kinds = {k: sum(o["kind"] == k for o in outcomes) for k in KINDS}
    detect = sorted(t for o in outcomes for t in o.get("detect_s", []))
    return {
        "seed": seed,
        "trials": len(outcomes),
        "seconds": round(seconds, 1),
        "kinds": kinds,
        "failed_trials": sum(bool(o.get("problems")) for o in outcomes),
        "hangs": sum(bool(o.get("hang")) for o in outcomes),
        "duplicates": sum(o.get("duplicates", 0) for o in outcomes),
        "lost": sum(o.get("lost", 0) for o in outcomes),
        "after_failed": sum(o.get("after_failed", 0) for o in outcomes),
        "late_errors": sum(o.get("late", 0) for o in outcomes),
        "unsettled_futures": sum(o.get("unsettled", 0) for o in outcomes),
        "futures": sum((o.get("futures") or {}).get("tasks", 0) for o in outcomes),
        "future_exceptions": sum((o.get("futures") or {}).get("exceptions", 0) for o in outcomes),
        "workflows_failed_naming_a_step": sum(str(o.get("workflow", "")).startswith("failed: step") for o in outcomes),
        "workflows_done": sum(o.get("workflow") == "done" for o in outcomes),
        "leftovers": sum(o.get("leftovers", 0) for o in outcomes),
        "detect_s": {
            "median": detect[len(detect) // 2] if detect else None,
            "max": detect[-1] if detect else None,
        },
    }


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks/chaos/run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, help="number of trials (default 60; --quick 6)")
    ap.add_argument("--seed", type=int, default=1, help="the seed every trial's draw derives from (default 1)")
    ap.add_argument("--quick", action="store_true", help="shorter trials, 6 of them")
    ap.add_argument("--only", type=int, action="append", help="run only trial K of the seed's sequence (repeatable)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "chaos"), help="where summary.json goes")
    a = ap.parse_args(argv)
    trials = a.trials or (6 if a.quick else 60)
    which = a.only or range(trials)
    t0 = time.monotonic()
    outcomes = []
    for i in which:
        o = Trial(i, a.seed, a.quick, log=None).run()
        outcomes.append(o)
        extra = f" stall {o['stall_for']}s" if "stall_for" in o else ""
        status = "ok" if not o.get("problems") else "FAIL: " + " | ".join(o["problems"])[:600]
        print(
            f"trial {i:3d} {o['kind']:<13} victim {o['victim']} at {o['fault_at']:.2f}s{extra}:"
            f" {o['seconds']:.1f}s detect {o.get('detect_s')} wf {o.get('workflow')} {status}",
            flush=True,
        )
    summary = summarize(outcomes, a.seed, time.monotonic() - t0)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"summary": summary, "trials": outcomes}, indent=1))
    print(json.dumps(summary, indent=1))
    print(f"chaos: {summary['trials']} trials, {summary['failed_trials']} failed; written {out / 'summary.json'}")
    return 1 if summary["failed_trials"] else 0


if __name__ == "__main__":
    sys.exit(main())
