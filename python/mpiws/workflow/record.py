"""What a run did: live progress per step (stderr) and the run record (JSON).

A step's *unit* is one service instance or one job (a scattered step has
one per element). The record says per step: kind, endpoint, state, when it
started and ended, bytes in and out, its units; per run: the mode, the
bytes that passed through the manager, the outputs (files with checksums).
"""

import copy
import json
import sys
import threading
import time
from contextlib import contextmanager

FINAL = ("done", "failed", "cancelled", "skipped")


def human(n):
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return str(n)


def direct_bytes(steps, manager_bytes):
    """About how many bytes the steps sent each other directly, not through the manager, from what the
    record holds: each such message is counted twice by the steps (one's ``bytes_out``, another's
    ``bytes_in``) and never by the manager, and each message between a step and the manager once by
    each; so it is half of what the steps counted beyond the manager's count. Exact for service steps;
    program steps report no bytes (their files go job to job by reference), so what the manager moved
    for them only lowers it, as does a step still running (a unit reports its bytes as it ends): never
    below 0."""
    counted = sum(s["bytes_in"] + s["bytes_out"] for s in steps.values())
    return max(0, (counted - manager_bytes) // 2)


class Record:
    def __init__(self, wf, mode, progress=True, stream=None, edges=()):
        self.wf, self.mode = wf, mode
        self.edges = [list(e) for e in edges]  # [from, to] per step feeding another (the dashboard's graph)
        self.on_change = None  # called, outside the lock, when a step's state changes (the dashboard's publisher)
        self.started = time.time()
        self._t0 = time.monotonic()
        self.progress = progress
        self.stream = stream or sys.stderr
        self.lock = threading.Lock()
        self.manager_bytes = 0  # intermediate data the manager received or sent (not inputs, not outputs)
        self.steps = {
            name: {
                "kind": s.kind,
                "endpoint": s.endpoint or "local",
                "state": "waiting",
                "units": {},
                "started": None,
                "ended": None,
                "bytes_in": 0,
                "bytes_out": 0,
            }
            for name, s in wf.steps.items()
        }
        self.outputs = None
        self.error = None

    def now(self):
        return time.monotonic() - self._t0

    def unit(self, step, index, state, **info):
        """Unit ``index`` of ``step`` is now in ``state`` (with what it reported: bytes, times, a job URL)."""
        with self.lock:
            s = self.steps[step]
            u = s["units"].setdefault(str(index), {"state": "waiting"})
            if u["state"] in FINAL or (u["state"] == state and not info):
                return
            u.update(info, state=state)
            if state == "running" and u.get("started") is None:
                u["started"] = round(self.now(), 4)
            if state in FINAL:
                u["ended"] = round(self.now(), 4)
            before = s["state"]
            self._roll_up(s)
            changed = s["state"] != before
        if changed and self.progress:
            self._print(step)
        if changed and self.on_change is not None:
            self.on_change()

    def expect(self, step, n):
        """``step`` will have ``n`` units (a scatter over n elements); none: it is done at once."""
        with self.lock:
            s = self.steps[step]
            s["width"] = n
            if n == 0:
                s["state"], s["started"], s["ended"] = "done", round(self.now(), 4), round(self.now(), 4)
        if n == 0 and self.on_change is not None:
            self.on_change()

    def _roll_up(self, s):
        units = list(s["units"].values())
        states = [u["state"] for u in units]
        width = s.get("width", 1)
        s["bytes_in"] = sum(u.get("bytes_in", 0) for u in units)
        s["bytes_out"] = sum(u.get("bytes_out", 0) for u in units)
        starts = [u["started"] for u in units if u.get("started") is not None]
        s["started"] = min(starts) if starts else s["started"]
        if "failed" in states:
            s["state"] = "failed"
        elif len(units) >= width and all(x == "done" for x in states):
            s["state"] = "done"
        elif states and all(x in FINAL for x in states) and len(units) >= width:
            s["state"] = "cancelled"
        elif "running" in states or "done" in states:
            s["state"] = "running"
        if s["state"] in FINAL:
            s["ended"] = max((u.get("ended") or 0) for u in units) if units else round(self.now(), 4)

    def cancel_rest(self):
        """Every step not ended is cancelled (after a failure)."""
        with self.lock:
            for s in self.steps.values():
                if s["state"] not in FINAL:
                    s["state"], s["ended"] = "cancelled", round(self.now(), 4)
                    for u in s["units"].values():
                        if u["state"] not in FINAL:
                            u["state"] = "cancelled"

    def _print(self, step):
        s = self.steps[step]
        moved = ""
        if s["bytes_in"] or s["bytes_out"]:
            moved = f", {human(s['bytes_in'])} in, {human(s['bytes_out'])} out"
        took = f" in {s['ended'] - s['started']:.3f} s" if s["state"] in FINAL and s["started"] is not None else ""
        width = f" x{s['width']}" if s.get("width", 1) != 1 else ""
        print(f"[{self.now():8.3f} s] {step}{width}: {s['state']}{took}{moved}", file=self.stream, flush=True)

    def as_json(self):
        return {
            "workflow": self.wf.name,
            "file": self.wf.path,
            "mode": self.mode,
            "started": self.started,
            "seconds": round(self.now(), 4),
            "state": "failed" if self.error else "done",
            "error": self.error,
            "manager_bytes": self.manager_bytes,
            "steps": self.steps,
            "outputs": self.outputs,
        }

    def live(self, ended=False):
        """The record as the run's dashboard shows it: ``state`` running until the run ``ended``, and also
        the step graph (``edges``) and the bytes steps sent each other directly (``direct_bytes``)."""
        with self.lock:  # a copy: the units change under the lock while the document is encoded
            doc = dict(self.as_json(), steps=copy.deepcopy(self.steps))
        doc.update(edges=self.edges, direct_bytes=direct_bytes(doc["steps"], doc["manager_bytes"]))
        if not ended:
            doc["state"] = "running"
        return doc

    def write(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.as_json(), f, indent=2)
            f.write("\n")


@contextmanager
def kept(record, path, close):
    """A run's body: on an error the record says it and cancels the steps not ended; either way it is
    written to ``path`` (if given), then ``close()`` ends the run's resources."""
    try:
        yield
    except BaseException as e:
        record.error = str(e) or type(e).__name__  # a Ctrl-C says nothing, yet the run failed
        record.cancel_rest()
        raise
    finally:
        if path:
            record.write(path)
        close()
