"""Start a domain on endpoints and watch it until every rank ended; when one
fails, cancel the others and report the first failure."""

import json
import os
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
        #: The rank whose failure made ``wait`` cancel the others (None: it cancelled nobody).
        self.cancelled_for = None

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
                    self.cancelled_for = rank
                    self.cancel_all(except_rank=rank)
            elif s["state"] == "failed" and _peer_failed(failure) and not _peer_failed(s):
                # The cause, told after a rank that found its peer gone: the cause is what failed first.
                failure = s
        return statuses, failure


def why_cancelled(domain):
    """What to say of a rank of ``domain`` whose status is *cancelled* without an
    error (the core keeps no reason for a cancellation): who cancelled it, if we did."""
    if domain is not None and domain.cancelled_for is not None:
        return f"because rank {domain.cancelled_for} failed"
    return "by a cancel request (the endpoint gives no reason)"


def said(status, domain=None):
    """What follows a rank's state in a line that tells how it ended: ``: ValueError:
    bad value``, `` because rank 1 failed`` (cancelled), or nothing. A message
    that starts with the error's name does not repeat it (``MPI_ERR_RANK: ...``)."""
    err = status.get("error") or {}
    name, message = err.get("name", ""), err.get("message", "")
    if not name and not message:
        return f" {why_cancelled(domain)}" if status.get("state") == "cancelled" else ""
    if name and message.startswith(f"{name}: "):
        name = ""
    return ": " + ": ".join(part for part in (name, message) if part)


#: ``MPIWS_TRACEBACK=full``: a failed rank's traceback as Python gives it, mpiws's own frames too.
TRACEBACK_ENV = "MPIWS_TRACEBACK"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep


def _frame_file(line):
    """The file a traceback line ``  File "NAME", line N, in F`` names, or None."""
    if not line.startswith('  File "'):
        return None
    return line[len('  File "') :].split('", line ', 1)[0]


def _internal(name, trailing=False):
    """Whether a frame's file is mpiws's own (or, leading, how Python starts a program: runpy, importlib)."""
    if name.startswith(_PACKAGE):
        return True
    return not trailing and (name.startswith("<frozen ") or name == _STDLIB + "runpy.py")


def user_traceback(text):
    """A failed rank's traceback with only the user's frames: mpiws's (and
    runpy's) frames before the program's first frame and mpiws's after its
    last one dropped; the exception's type and message kept. Each chained
    exception's part is trimmed alike; a part with no frame of the user's is
    left whole. ``MPIWS_TRACEBACK=full`` keeps everything."""
    if os.environ.get(TRACEBACK_ENV, "").lower() == "full":
        return text
    out, frames = [], None  # frames: the current part's [(file, lines)] while its frames are read
    for line in text.splitlines(keepends=True):
        if frames is not None:
            name = _frame_file(line)
            if name is not None:
                frames.append((name, [line]))
                continue
            if frames and line.startswith(("    ", "  [")):
                frames[-1][1].append(line)  # its source line, carets, "[Previous line repeated ...]"
                continue
            out.extend(_trimmed(frames))
            frames = None
        out.append(line)
        if line.rstrip("\n") == "Traceback (most recent call last):":
            frames = []
    if frames is not None:
        out.extend(_trimmed(frames))
    return "".join(out)


def _trimmed(frames):
    first = next((i for i, (name, _) in enumerate(frames) if not _internal(name)), None)
    if first is None:
        return [line for _, lines in frames for line in lines]
    last = len(frames)
    while last > first + 1 and _internal(frames[last - 1][0], trailing=True):
        last -= 1
    return [line for _, lines in frames[first:last] for line in lines]


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


def exit_status(statuses, failure, log, grace, ended=None, domain=None):
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
    if err.get("name") == "KeyboardInterrupt":  # Ctrl-C reached the rank before this launcher
        log("interrupted; ranks ended")
        return 130
    if err.get("name") == "unreachable" and ended is not None:
        how = ended(rank)
        if how is not None:  # its endpoint went away with its process: say how the process ended
            failure = dict(failure, error={"name": "process ended", "message": how})
            err = failure["error"]
    log(f"rank {rank} {failure['state']} first{said(failure, domain)}")
    if err.get("traceback"):
        sys.stderr.write(user_traceback(err["traceback"]))
    stuck = [r for r, s in enumerate(statuses) if s is None]
    if stuck:
        log(f"ranks {stuck} did not stop within {grace} s of the failure: killed")
    return 1
