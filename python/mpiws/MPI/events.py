"""Progressive messages (mpiws): the fate of every non-blocking operation as
events, handed to handlers on one handler thread.

Events: ``submitted`` (a send's buffer may be reused; a receive or a
collective: it is posted), ``completed`` (a
send: the receiving endpoint stored it; a receive or collective: its data is
here), ``matched`` (a send: the receiver's application took it; a standard
send asks the receiver to tell only once a ``matched`` handler is given:
at the start, with ``schedule=``, it costs one more acknowledgement;
later, a long poll),
``failed`` (it never will complete) and ``timed_out`` (its time limit passed:
it was withdrawn, and ``completed`` never follows). A ``Schedule`` maps
events to handlers for any number of operations (``schedule=``), and
``request.on(event, handler)`` adds one. Each handler runs once per event,
one at a time, on the thread ``mpiws-handlers`` (never an I/O thread), with
a read-only ``Receipt``. The thread sleeps in the core until an operation
it watches completes: no polling.
"""

import heapq
import itertools
import threading
import time
from collections import deque

from .. import _core

SUBMITTED, COMPLETED, MATCHED, FAILED, TIMED_OUT = "submitted", "completed", "matched", "failed", "timed_out"
EVENTS = (SUBMITTED, COMPLETED, MATCHED, FAILED, TIMED_OUT)


def check_event(event):
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r}: one of {', '.join(EVENTS)}")
    return event


class Schedule:
    """
    Handlers for the events of an operation (mpiws).

    Handlers for events, any of them blank; one schedule may serve many
    operations: ``Schedule(completed=f, failed=g)``.
    """

    __slots__ = ("handlers",)

    def __init__(self, submitted=None, completed=None, matched=None, failed=None, timed_out=None):
        given = dict(submitted=submitted, completed=completed, matched=matched, failed=failed, timed_out=timed_out)
        for name, h in given.items():
            if h is not None and not callable(h):
                raise TypeError(f"{name} handler must be callable")
        self.handlers = {e: h for e, h in given.items() if h is not None}

    def __repr__(self):
        return f"Schedule({', '.join(self.handlers)})"


def tells_match(schedule):
    """Whether a send started with ``schedule`` must learn of its match
    (asked at the start: the receiver then tells it, one more ack)."""
    return schedule is not None and MATCHED in getattr(schedule, "handlers", ())


class Receipt:
    """
    What a handler is told about an event (mpiws).

    What a handler is told: ``event``, ``tag``, ``size`` (bytes),
    ``source`` and ``dest`` (wildcards resolved once known), ``time``
    (``MPI.Wtime()`` of the event), ``error`` (an ``MPI.Exception`` or None),
    ``request``, and for message handlers ``value`` (what arrived).
    """

    __slots__ = ("_d",)

    def __init__(self, **d):
        object.__setattr__(self, "_d", d)

    def __getattr__(self, name):
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("a Receipt is read-only")

    def __repr__(self):
        shown = ", ".join(f"{k}={v!r}" for k, v in self._d.items() if k not in ("request", "value"))
        return f"Receipt({shown})"


class _Dispatcher:
    """The handler thread: waits on the core's event queue (tokens of
    completed operations) and on the nearest deadline, never spinning."""

    def __init__(self):
        self.events = _core.Events()
        self.lock = threading.Lock()
        self.watched = {}  # token -> (request, what)
        self.timers = []  # heap of (deadline, token, request)
        self.soon = deque()  # callables to run on the thread
        self.tokens = itertools.count(1)
        self.thread = threading.Thread(target=self._run, name="mpiws-handlers", daemon=True)
        self.thread.start()

    def watch(self, request):
        """Watch an operation: its completion and its deadline."""
        done = next(self.tokens)
        with self.lock:
            self.watched[done] = (request, "done")
            if request._deadline is not None:
                heapq.heappush(self.timers, (request._deadline, done, request))
        request._r.watch(self.events, done)
        if request._deadline is not None:
            self.events.push(0)  # recompute the wait

    def watch_part(self, request, what):
        """Watch a send's storing or match ("stored", "matched"): the
        receiver is asked to tell (`Request.on` asks only when a handler wants it)."""
        token = next(self.tokens)
        with self.lock:
            self.watched[token] = (request, what)
        watch = request._watch.core.watch_stored if what == "stored" else request._watch.core.watch_matched
        if not watch(self.events, token):
            with self.lock:
                del self.watched[token]

    def call_soon(self, fn):
        self.soon.append(fn)
        self.events.push(0)

    def _run(self):
        while True:
            with self.lock:
                wait = max(0.0, self.timers[0][0] - time.monotonic()) if self.timers else None
            token = self.events.next(wait)
            while self.soon:
                self.soon.popleft()()
            self._expire_due()
            if not token:
                continue
            with self.lock:
                entry = self.watched.pop(token, None)
            if entry is not None:
                request, what = entry
                request._progress(what)

    def _expire_due(self):
        now = time.monotonic()
        due = []
        with self.lock:
            while self.timers and self.timers[0][0] <= now:
                due.append(heapq.heappop(self.timers)[2])
        for request in due:
            request._progress("deadline")


_dispatcher = None
_start = threading.Lock()


def dispatcher():
    global _dispatcher
    if _dispatcher is None:
        with _start:
            if _dispatcher is None:
                _dispatcher = _Dispatcher()
    return _dispatcher


def run_handler(handler, receipt):
    """Run one handler; an exception in it is reported, not raised into the thread."""
    try:
        handler(receipt)
    except Exception:  # noqa: BLE001 - a handler's bug must not stop the others
        import traceback

        traceback.print_exc()
