"""The manager's side of a domain of step instances.

Rank 0 is the manager: an instance this process makes on its own endpoint
(as ``Spawn`` and the futures executor do), so that steps send it the
workflow's outputs directly; ranks 1.. are step instances the endpoints
start on *run* requests signed with the client's key. What the manager
unpickles from steps is plain data and numpy arrays (the restricted
unpickler): endpoints are not trusted with the client's code.
"""

import json
import secrets
import threading
from contextlib import contextmanager

from .. import _core, binding
from ..keys import client_key
from ..MPI import Intracomm, pickled
from .spec import StepFailed

FINAL = ("done", "failed", "cancelled")


def tail(text, lines=15):
    return "\n".join((text or "").rstrip().splitlines()[-lines:])


class StepDomain:
    """A domain of the manager (rank 0) and step instances at ``urls`` (ranks 1..)."""

    def __init__(self, urls, key=None, advertise=None):
        endpoint = binding.process_endpoint()
        if endpoint is None:
            raise RuntimeError(
                "a workflow's manager serves its own endpoint: run it as a program, not inside a service"
            )
        self.domain, self.token = "wf-" + secrets.token_hex(8), secrets.token_urlsafe(24)
        self.urls = [advertise or endpoint.url] + [u.rstrip("/") for u in urls]
        self.instance = endpoint.create_instance(self.domain, 0, self.urls, self.token)
        self.instance.set_running()
        self.client = _core.DomainClient(self.domain, self.token, self.urls, client_key(key))
        self.started = []

    def start(self, service, cfg, ranks):
        """Start ``service`` as ``ranks`` with the step configuration ``cfg``."""
        ranks = list(ranks)
        self.client.start(service, json.dumps({"workflow": cfg}), ranks=ranks)
        self.started.extend(ranks)

    def status(self, rank, wait=None):
        return json.loads(self.client.status(rank, wait))

    @contextmanager
    def comm(self):
        """The domain's world communicator, as rank 0, on this thread."""
        with binding.bound_to(self.instance, pickled.policy("restricted")) as b:
            yield Intracomm._wrap(b.world)

    def watch(self, rank, report):
        """Call ``report(rank, status)`` from a thread of its own when ``rank`` ends (or cannot be asked)."""

        def run():
            while True:
                try:
                    s = self.status(rank, 30.0)
                except Exception as e:  # noqa: BLE001 - an endpoint gone: the step is lost
                    s = {"state": "failed", "error": {"name": type(e).__name__, "message": str(e), "traceback": ""}}
                if s.get("state") in FINAL:
                    report(rank, s)
                    return

        threading.Thread(target=run, name=f"mpiws-wf-watch-{rank}", daemon=True).start()

    def cancel(self):
        """End every instance started that has not ended, and the manager's own."""
        for rank in self.started:
            try:
                self.client.cancel(rank)
            except Exception:  # noqa: BLE001 - gone already
                pass
        self.close()

    def close(self):
        try:
            self.instance.finish("null")
        except Exception:  # noqa: BLE001 - finished already
            pass


def failure(step, status):
    """A StepFailed for an instance's final status that is not ``done``."""
    err = status.get("error") or {}
    if status.get("state") == "cancelled":
        return StepFailed(step, "its instance was cancelled")
    return StepFailed(step, f"{err.get('name', 'error')}: {err.get('message', '')}", tail(err.get("traceback", "")))


class Wake:
    """What the manager sleeps on: a receive completing, an instance ending, a unit finishing."""

    def __init__(self):
        from ..MPI.events import Schedule

        self.event = threading.Event()
        self.ended = {}  # rank -> its final status
        self.schedule = Schedule(completed=self._poke, failed=self._poke, timed_out=self._poke)

    def _poke(self, *_):
        self.event.set()

    def __call__(self):
        self.event.set()

    def report(self, rank, status):
        self.ended[rank] = status
        self.event.set()

    def look(self):
        """Called before looking at what changed: a change after this wakes the next ``sleep``."""
        self.event.clear()

    def sleep(self, timeout=0.5):
        self.event.wait(timeout)
