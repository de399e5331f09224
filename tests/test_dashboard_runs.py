"""A run's own dashboard (issue 32), read as the page reads it
(``GET /dashboard/api/state`` with the user's key), without a browser:
``mpiws workflow run --dashboard`` publishes the workflow's record (steps,
edges, states going from running to done) and shows its domain's ranks;
its last document says done or failed, with the bytes steps moved
directly; publications are throttled yet the last state always goes out;
``MPIPoolExecutor(dashboard=...)`` publishes the farm's figures (workers,
tasks, batches, a lost worker and its task sent again) and "shut down"."""

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from mpiws.dashboard import Board
from mpiws.keys import client_key

MPIWS = Path(sys.executable).parent / "mpiws"

STEPS = """
import os, time
from mpiws.workflow import step

@step
def square(x):
    return x * x

@step
def hold(values, gate):
    # waits for the test to open the gate (a file), so that the run is seen while it goes
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return sum(values)

@step
def add_one(a):
    return a + 1

@step
def fail(a):
    raise ValueError("fails on purpose")
"""

GATED = """
name: gated
inputs:
  xs: int[]
  gate: string
steps:
  square: {service: dash_steps:square, scatter: x, in: {x: xs}, out: [x]}
  hold:   {service: dash_steps:hold, in: {values: square/x, gate: gate}, out: [total]}
  shift:  {service: dash_steps:add_one, in: {a: hold/total}, out: [a]}
outputs:
  total: shift/a
"""

BROKEN = """
name: broken
inputs: {x: int}
steps:
  square: {service: dash_steps:square, in: {x: x}, out: [x]}
  bad:    {service: dash_steps:fail, in: {a: square/x}, out: [a]}
outputs: {y: bad/a}
"""


def flow(tmp_path, text):
    (tmp_path / "dash_steps.py").write_text(STEPS)
    path = tmp_path / f"{abs(hash(text))}.yml"
    path.write_text(text)
    return path


def state(url):
    """The page's state (``url``: the dashboard's), or None once nothing serves there."""
    request = urllib.request.Request(url + "api/state", headers={"Authorization": f"Bearer {client_key()}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.load(r)
    except (urllib.error.URLError, ConnectionError):
        return None


def run_doc(url, name):
    """The document run ``name`` published, or None."""
    s = state(url)
    return next((run["doc"] for run in (s or {}).get("runs", []) if run["name"] == name), None)


def poll(fetch, until, seconds=20):
    """The first value of ``fetch()`` that satisfies ``until``, looked at every 50 ms for ``seconds``."""
    deadline = time.monotonic() + seconds
    seen = None
    while time.monotonic() < deadline:
        seen = fetch()
        if until(seen):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"not seen in {seconds} s; the last: {json.dumps(seen, indent=1)[:3000]}")


class Lines:
    """A process's output stream, read line by line on a thread of its own."""

    def __init__(self, stream):
        self.lines, self.more = [], threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            with self.more:
                self.lines.append(line)
                self.more.notify_all()

    def wait_for(self, pattern, seconds=20):
        """The first group of the first line matching ``pattern``."""
        with self.more:
            ok = self.more.wait_for(lambda: any(re.search(pattern, x) for x in self.lines), seconds)
            assert ok, f"no line like {pattern!r} in {seconds} s:\n{''.join(self.lines)}"
            return next(m.group(1) for x in self.lines if (m := re.search(pattern, x)))


def ended(p, seconds=30):
    """Wait for ``p`` to end (killed after ``seconds``)."""
    try:
        p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


GATED_STEPS = ("square", "hold", "shift")
ORDER = {"waiting": 0, "running": 1, "done": 2}


def test_workflow_run_shows_its_record_live_from_running_to_done_and_its_domain(tmp_path):
    gate = tmp_path / "open"
    p = subprocess.Popen(
        [str(MPIWS), "workflow", "run", str(flow(tmp_path, GATED)), "xs=[2,3]", f"gate={gate}", "--dashboard"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    out, err = Lines(p.stdout), Lines(p.stderr)
    try:
        url = err.wait_for(r"^mpiws workflow: dashboard at (\S+) \(paste your key")
        # Held at the gate: square done; hold and shift running (direct: every step's ranks start at once).
        doc = poll(
            lambda: run_doc(url, "gated"),
            lambda d: d and d["steps"]["square"]["state"] == "done" and d["steps"]["hold"]["state"] == "running",
        )
        assert doc["state"] == "running" and doc["workflow"] == "gated" and doc["mode"] == "direct", doc
        assert doc["error"] is None and doc["seconds"] >= 0
        assert set(doc["steps"]) == set(GATED_STEPS)
        assert doc["edges"] == [["square", "hold"], ["hold", "shift"]]
        square = doc["steps"]["square"]
        assert square["kind"] == "service" and square["endpoint"] == "local" and square["width"] == 2
        assert [u["state"] for u in square["units"].values()] == ["done", "done"]
        assert square["bytes_in"] > 0 and square["bytes_out"] > 0 and square["ended"] >= square["started"]
        assert doc["steps"]["shift"]["state"] == "running" and doc["manager_bytes"] > 0
        # The Domains tab: the manager (rank 0) and the step ranks, one per unit.
        domains = poll(lambda: (state(url) or {}).get("domains"), lambda ds: ds and len(ds[0]["ranks"]) == 5)
        ranks = domains[0]["ranks"]
        assert domains[0]["domain"].startswith("wf-") and [r["rank"] for r in ranks] == [0, 1, 2, 3, 4], ranks
        assert [r["service"] for r in ranks[1:]] == [
            "dash_steps.square",
            "dash_steps.square",
            "dash_steps.hold",
            "dash_steps.add_one",
        ]
        gate.touch()
        # Until the command ends and its board with it: each step's state only goes forward.
        seen, deadline = [doc], time.monotonic() + 30
        while (d := run_doc(url, "gated")) is not None and time.monotonic() < deadline:
            if d != seen[-1]:
                seen.append(d)
            time.sleep(0.02)
        for step in doc["steps"]:
            states = [ORDER[d["steps"][step]["state"]] for d in seen]
            assert states == sorted(states), (step, [d["steps"][step]["state"] for d in seen])
        assert all(d["state"] in ("running", "done") for d in seen)
        assert p.wait(timeout=30) == 0, "".join(err.lines)
        assert json.loads("".join(out.lines)) == {"total": 14}
        assert state(url) is None  # the board closed with the run
    finally:
        gate.touch()
        ended(p)


def test_the_last_document_says_done_or_failed_with_the_bytes_the_steps_moved_directly(tmp_path):
    from mpiws import workflow
    from mpiws.workflow.spec import StepFailed
    from mpiws.workflow.values import nbytes

    gate = tmp_path / "open"
    gate.touch()
    board = Board()
    try:
        for mode in ("direct", "mediated"):
            got, record = workflow.run(
                flow(tmp_path, GATED), {"xs": [2, 3], "gate": str(gate)}, mode=mode, progress=False, board=board
            )
            assert got == {"total": 14}
            doc = run_doc(board.url, "gated")
            assert doc["state"] == "done" and doc["mode"] == mode, doc
            assert {name: s["state"] for name, s in doc["steps"].items()} == dict.fromkeys(GATED_STEPS, "done")
            figures = ("state", "width", "bytes_in", "bytes_out")
            for name, s in record["steps"].items():
                assert {k: doc["steps"][name][k] for k in figures} == {k: s[k] for k in figures}, name
            assert doc["manager_bytes"] == record["manager_bytes"]
            assert doc["edges"] == [["square", "hold"], ["hold", "shift"]]
            # Direct: 4 and 9 go from square's ranks to hold, 13 from hold to shift; mediated: none.
            assert doc["direct_bytes"] == (nbytes(4) + nbytes(9) + nbytes(13) if mode == "direct" else 0), doc
        with pytest.raises(StepFailed):
            workflow.run(flow(tmp_path, BROKEN), {"x": 3}, progress=False, board=board)
        doc = run_doc(board.url, "broken")
        assert doc["state"] == "failed" and "fails on purpose" in doc["error"], doc
        assert doc["steps"]["bad"]["state"] == "failed" and doc["edges"] == [["square", "bad"]]
    finally:
        board.close()


def test_a_cwl_document_on_the_step_engine_shows_its_record_too(tmp_path):
    from mpiws.workflow.cwl import run
    from mpiws.workflow.cwl.job import job_object

    examples = Path(__file__).resolve().parent.parent / "examples" / "workflows" / "cwl"
    board = Board()
    try:
        job = job_object(str(examples / "fruit.yml"), [])
        run(str(examples / "chain.cwl"), job, outdir=str(tmp_path), steps=True, progress=False, board=board)
        doc = run_doc(board.url, "chain")
        assert doc["state"] == "done" and doc["edges"] == [["upper", "sort"], ["sort", "lines"]], doc
        assert {name: s["state"] for name, s in doc["steps"].items()} == dict.fromkeys(
            ("upper", "sort", "lines"), "done"
        )
        assert doc["direct_bytes"] == 0  # files go job to job by reference: their sizes are not counted
    finally:
        board.close()


class Published:
    """A board that keeps what is published to it."""

    def __init__(self):
        self.docs = []

    def publish(self, name, kind, doc):
        assert kind == "workflow" and name == "many"
        self.docs.append(json.loads(json.dumps(doc)))


def test_publications_are_throttled_yet_each_change_and_the_last_state_go_out():
    from mpiws.workflow.live import INTERVAL, shown
    from mpiws.workflow.record import Record

    steps = {f"s{i}": SimpleNamespace(kind="service", endpoint=None) for i in range(50)}
    record = Record(SimpleNamespace(name="many", path="", steps=steps), "direct", progress=False)
    board = Published()
    with shown(board, record):
        assert board.docs[0]["state"] == "running" and board.docs[0]["steps"]["s0"]["state"] == "waiting"
        started = time.monotonic()
        for name in steps:  # 100 changes at once
            record.unit(name, 0, "running")
            record.unit(name, 0, "done")
        took = time.monotonic() - started
        # at most one publication a turn: the first, then one a turn
        assert len(board.docs) <= 2 + took / INTERVAL, (len(board.docs), took)
        # the last change goes out, on the next turn, though nothing follows it
        poll(lambda: board.docs[-1]["steps"]["s49"]["state"], lambda s: s == "done", seconds=5)
        assert all(d["state"] == "running" for d in board.docs)
    assert board.docs[-1]["state"] == "done" and board.docs[-1]["steps"]["s49"]["state"] == "done"


def test_the_farm_figures_setting_and_rate_are_pure_code():
    from mpiws.futures.board import Rate, asked, document, run_name
    from mpiws.futures.farm import Tally

    assert [asked(x) for x in (None, "", "0", "off", "1", "true", "8123")] == [None] * 4 + [True, True, 8123]
    with pytest.raises(ValueError, match="MPIWS_FUTURES_DASHBOARD"):
        asked("maybe")
    assert [run_name(n) for n in (1, 2, 3)] == ["pool", "pool-2", "pool-3"]
    # A sliding window of 5 s: its oldest look is the last one at least 5 s before the newest.
    rate = Rate(window=5.0)
    assert [rate(t, done) for t, done in ((0, 0), (1, 10), (2, 20))] == [0.0, 10.0, 10.0]
    assert rate(7, 20) == 0.0  # (7 - 2 s: nothing done since the look 5 s ago)
    tally = Tally()
    for n in (4, 8, 2):
        tally.sent(n)
    assert document(tally, "running", 0.04)["batch"] == {"last": 2, "mean": 4.67, "max": 8}
    assert document(Tally(), "running", 0.0)["batch"] == {"last": 0, "mean": 0, "max": 0}


FARM = """
import json, os, sys, time, urllib.request
from mpiws.dashboard import Board
from mpiws.futures import MPIPoolExecutor
from mpiws.keys import client_key

def die_once(x, flag):
    # the first worker to run task 7 dies in it; whoever redoes it succeeds
    if x == 7 and not os.path.exists(flag):
        open(flag, "w").close()
        os._exit(3)
    time.sleep(0.01)
    return x

def square(x):
    return x * x

def runs(board):
    request = urllib.request.Request(board.url + "api/state", headers={"Authorization": "Bearer " + client_key()})
    with urllib.request.urlopen(request, timeout=10) as r:
        return {run["name"]: run["doc"] for run in json.load(r)["runs"]}

if __name__ == "__main__":
    flag, gate = sys.argv[1:]
    # One task a batch and one batch a worker: the worker that dies held only the task it died in.
    with MPIPoolExecutor(max_workers=3, dashboard=True, max_batch=1, prefetch=1) as ex:
        assert list(ex.map(die_once, range(60), [flag] * 60)) == list(range(60))
        deadline = time.monotonic() + 60
        while not os.path.exists(gate) and time.monotonic() < deadline:  # the test looks at its page
            time.sleep(0.02)
    board = Board()  # the program's own: still open after the shutdown
    with MPIPoolExecutor(max_workers=2, dashboard=board) as ex:
        assert list(ex.map(square, range(500))) == [x * x for x in range(500)]
    print(json.dumps(runs(board)), flush=True)
    board.close()
"""


def test_an_executor_shows_its_farm_workers_lost_tasks_resubmitted_and_its_shutdown(tmp_path):
    (tmp_path / "farm_main.py").write_text(FARM)
    gate = tmp_path / "open"
    p = subprocess.Popen(
        [sys.executable, "farm_main.py", str(tmp_path / "died"), str(gate)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, MPIWS_FAILURE_TIMEOUT="1"),
    )
    out, err = Lines(p.stdout), Lines(p.stderr)
    try:
        url = err.wait_for(r"^mpiws\.futures: dashboard at (\S+) \(paste your key")
        doc = poll(lambda: run_doc(url, "pool"), lambda d: d and d["tasks_done"] == 60)
        assert doc.pop("tasks_per_second") > 0, doc
        assert doc == {
            "state": "running",
            "workers": 2,
            "workers_lost": 1,
            "tasks_submitted": 60,
            "tasks_done": 60,
            "tasks_failed": 0,
            "tasks_resubmitted": 1,
            "batch": {"last": 1, "mean": 1.0, "max": 1},
        }
        gate.touch()
        assert p.wait(timeout=30) == 0, "".join(err.lines)[-4000:]
        assert state(url) is None  # its own board closed at the shutdown
        # The second executor in the process, on a board of the program's own (left open): its last document.
        runs = json.loads(out.lines[-1])
        doc = runs["pool-2"]
        batch = doc.pop("batch")
        assert 1 <= batch["last"] <= batch["max"] and 1 <= batch["mean"] <= batch["max"], batch
        assert doc.pop("tasks_per_second") >= 0
        assert doc == {
            "state": "shut down",
            "workers": 2,
            "workers_lost": 0,
            "tasks_submitted": 500,
            "tasks_done": 500,
            "tasks_failed": 0,
            "tasks_resubmitted": 0,
        }
    finally:
        gate.touch()
        ended(p)
