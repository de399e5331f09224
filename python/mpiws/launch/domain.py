"""Start a domain on endpoints and watch it until every rank ended; when one
fails, cancel the others and report the first failure."""

import json
import queue
import secrets
import sys
import threading
import time

from .. import _core
from ..keys import client_key

FINAL = ("done", "failed", "cancelled")
#: Status polls in a row without an answer that make a rank unreachable.
UNANSWERED = 2


class Domain:
    """A domain on ``endpoints``, created with the endpoint ``key`` (see
    ``mpiws.keys.client_key``); its token is new and random unless given."""

    def __init__(self, endpoints, domain=None, token=None, key=None):
        self.endpoints = list(endpoints)
        self.domain = domain or secrets.token_hex(8)
        self.token = token or secrets.token_urlsafe(24)
        self.client = _core.DomainClient(self.domain, self.token, self.endpoints, client_key(key))

    @property
    def size(self):
        return len(self.endpoints)

    def start(self, service, params=None, keep_going=False):
        """Create the instances. A rank that cannot be started fails the
        start and the started ones are cancelled; with ``keep_going`` it is
        a failed rank like any other, the others run (a rank that dies at
        once may die before its endpoint answers): returns a queue of
        (rank, exception) for those, to give ``wait`` as its events."""
        params = json.dumps(params)
        failed = queue.Queue()
        if not keep_going:
            self.client.start(service, params)
            return failed
        for rank, e in self.client.start_each(service, params):
            failed.put((rank, e))
        return failed

    def status(self, rank, wait=None):
        return json.loads(self.client.status(rank, wait))

    def cancel_all(self, except_rank=None):
        for r in range(self.size):
            if r != except_rank:
                try:
                    self.client.cancel(r)
                except Exception:  # noqa: BLE001 - an endpoint already gone is cancelled enough
                    pass

    def watch(self, events):
        """Long-poll every rank; put (rank, status or exception) on ``events``.
        A rank is unreachable when two polls in a row get no answer: one
        answer late on a loaded machine is not a failed rank."""

        def poll(rank):
            missed = 0
            while True:
                try:
                    s = self.status(rank, wait=5.0)
                except Exception as e:  # noqa: BLE001
                    missed += 1
                    if missed >= UNANSWERED:
                        events.put((rank, e))
                        return
                    time.sleep(0.2)
                    continue
                missed = 0
                if s["state"] in FINAL:
                    events.put((rank, s))
                    return

        for r in range(self.size):
            threading.Thread(target=poll, args=(r,), daemon=True).start()

    def wait(self, extra_events=None, on_result=None, grace=5.0, keep_going=False):
        """Wait for every rank. Returns (statuses, first failure or None).

        ``extra_events`` is a queue other watchers (process exits) also feed.
        After a failure, ranks still running ``grace`` seconds after their
        cancellation are given up on (left as None). With ``keep_going``
        nobody is cancelled: every rank runs to its own end.
        """
        events = extra_events or queue.Queue()
        self.watch(events)
        statuses = [None] * self.size
        failure = None
        while any(s is None for s in statuses):
            try:
                rank, s = events.get(timeout=None if failure is None or keep_going else grace)
            except queue.Empty:
                break
            if statuses[rank] is not None:
                continue
            if isinstance(s, BaseException):
                s = {
                    "rank": rank,
                    "state": "failed",
                    "error": {"name": "unreachable", "message": str(s), "traceback": ""},
                }
            statuses[rank] = s
            if on_result:
                on_result(rank, s)
            if s["state"] != "done" and failure is None:
                failure = s
                if s["state"] == "failed" and not keep_going:
                    self.cancel_all(except_rank=rank)
            elif s["state"] == "failed" and _peer_failed(failure) and not _peer_failed(s):
                # The cause, told after a rank that found its peer gone: the cause is what failed first.
                failure = s
        return statuses, failure


def _peer_failed(status):
    """Whether a rank failed because a peer had (``MPIX_ERR_PROC_FAILED``): a consequence."""
    return "PROC_FAILED" in ((status or {}).get("error") or {}).get("name", "")


def _exited(err):
    """For a rank that called ``sys.exit(arg)``: (status, what to say), like
    mpiexec; else None. A non-integer ``arg`` is a message and status 1."""
    if err.get("name") != "SystemExit":
        return None
    msg = err.get("message", "")
    if msg.lstrip("-").isdigit():
        return min(max(int(msg), 1), 255), ""
    return 1, f": {msg}"


def exit_status(statuses, failure, log, grace, ended=None):
    """A launcher's exit status for a domain that ended with ``statuses``
    and the first ``failure`` (None: all done), saying what failed through
    ``log`` (and the traceback on stderr), as mpiexec does. ``ended(rank)``
    tells how a rank's process ended, if the launcher knows (else None)."""
    if failure is None:
        return 0
    err = failure.get("error") or {}
    exited = _exited(err)
    if exited is not None:
        log(f"rank {failure['rank']} exited with status {exited[0]}{exited[1]}")
        return exited[0]
    rank = failure["rank"]
    if err.get("name") == "unreachable" and ended is not None:
        how = ended(rank)
        if how is not None:  # its endpoint went away with its process: say how the process ended
            err = {"name": "process ended", "message": how}
    log(f"rank {rank} {failure['state']} first: {err.get('name', '')}: {err.get('message', '')}")
    if err.get("traceback"):
        sys.stderr.write(err["traceback"])
    stuck = [r for r, s in enumerate(statuses) if s is None]
    if stuck:
        log(f"ranks {stuck} did not stop within {grace} s of the failure: killed")
    return 1
