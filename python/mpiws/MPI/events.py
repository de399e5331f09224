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

Each watched operation's fate is a ``Watch``: its handlers, the events
fired, and its outcome once taken (by the handler thread or by its owner,
whichever comes first). The watch turns what the core tells of the
operation (done, stored, matched, its deadline passed) into events; it asks
its request only for the outcome and for the withdrawal at the deadline.
``MessageHandler`` is one ``comm.on_message`` registration: a receive kept
posted.
"""

import heapq
import itertools
import threading
import time
from collections import deque

from .. import _core
from .exception import ERR_CANCELLED, ERR_TIMEOUT, Exception as MPIException

SUBMITTED, COMPLETED, MATCHED, FAILED, TIMED_OUT = "submitted", "completed", "matched", "failed", "timed_out"
EVENTS = (SUBMITTED, COMPLETED, MATCHED, FAILED, TIMED_OUT)
_GOOD = frozenset((SUBMITTED, COMPLETED, MATCHED))  # none fires after a failure
_NOTHING = {}
# What a send's receiver is asked to tell for a handler of each event.
_ASKS = {COMPLETED: ("stored",), FAILED: ("stored",), MATCHED: ("stored", "matched")}

# A watched request is completed by the handler thread or by its owner,
# whichever comes first: taking its outcome is done under this lock.
_settling = threading.RLock()


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

    # Its fields are made when first read (most handlers read few or none):
    # `_d` is then set from `_made`, (watch, event, (time, error, status)).
    __slots__ = ("_d", "_made")

    def __init__(self, **d):
        object.__setattr__(self, "_d", d)

    @classmethod
    def _of(cls, watch, event, made):
        r = object.__new__(cls)
        object.__setattr__(r, "_made", (watch, event, made))
        return r

    def __getattr__(self, name):
        if name == "_d":  # not made yet
            d = self._made[0].receipt_fields(*self._made[1:])
            object.__setattr__(self, "_d", d)
            return d
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("a Receipt is read-only")

    def __repr__(self):
        shown = ", ".join(f"{k}={v!r}" for k, v in self._d.items() if k not in ("request", "value"))
        return f"Receipt({shown})"


class Watch:
    """One operation's fate: its handlers, the events already fired, and its
    outcome once taken (``settled``: (ok, value or error, status)).

    ``request`` is the operation's ``Request``, which this asks for its
    outcome (``_outcome_kept``) and, at the deadline, to withdraw it
    (``_withdraw_overdue``); ``core`` its core request (also after the owner
    completed it); ``send``: a send (the receiver tells of storing and
    matching when asked), ``receive``: a receive (its receipts say what
    arrived); ``info``: what receipts tell (tag, source, dest, size, sync, call).
    """

    __slots__ = (
        "request",
        "core",
        "deadline",
        "send",
        "receive",
        "info",
        "handlers",
        "fired",
        "settled",
        "waiters",
        "asked",
    )

    def __init__(self, request, core, deadline, send, receive, info):
        self.request, self.core, self.deadline = request, core, deadline
        self.send, self.receive, self.info = send, receive, info
        self.asked = set()  # what the receiver was asked to tell: "stored", "matched"
        self.handlers = {}
        self.fired = {}
        self.settled = None
        self.waiters = []

    def start(self):
        """Watch the operation: its completion and its deadline."""
        dispatcher().watch(self)
        if not self.send:
            self.fire(SUBMITTED)  # a receive or collective is under way once posted

    def on(self, event, handler):
        self.handlers.setdefault(event, []).append(handler)
        if self.send:
            # Ask the receiver only for what a handler wants: storing costs
            # an acknowledgement now, a standard send's match a long poll.
            for what in _ASKS.get(event, ()):
                if what not in self.asked:
                    self.asked.add(what)
                    dispatcher().watch_part(self, what)
        fired = self.fired.get(event)
        if fired is not None:
            receipt = self.receipt(event, fired)
            dispatcher().call_soon(lambda: run_handler(handler, receipt))

    def overdue(self):
        """For the owner, whose wait reached the deadline before the handler
        thread did: withdraw now (or take the outcome it completed with), the
        timed_out event then fired on the handler thread. Returns the outcome."""
        error = self._withdraw()
        if error is not None:
            dispatcher().call_soon(lambda: (self.fire(TIMED_OUT, error=error), self.wake()))
        self.settle()
        return self.settled or (False, MPIException(ERR_TIMEOUT, "the operation timed out"), None)

    def _withdraw(self):
        # The deadline passed: withdraw unless settled or done; the ERR_TIMEOUT if withdrawn now.
        with _settling:
            if self.settled is not None:
                return None
            error = self.request._withdraw_overdue()
            if error is not None:
                self.settled = (False, error, None)
            return error

    def settle(self):
        """Take the outcome now (handler thread or owner), keeping the request active."""
        with _settling:
            if self.settled is None:
                self.settled = self.request._outcome_kept()

    def progress(self, what):
        """On the handler thread: the operation moved on (``what``: done, stored, matched, deadline)."""
        if what == "deadline":
            error = self._withdraw()
            if error is not None:
                self.fire(TIMED_OUT, error=error)
                self.wake()
            return
        if what in ("stored", "matched"):
            state = self.core.stored_state() if what == "stored" else self.core.matched_state()
            if state is None:
                return
            ok, message, cls = state
            if not ok:
                self.fire(FAILED, error=MPIException(cls, message))
                return
            self.fire(SUBMITTED)
            self.fire(COMPLETED)
            if what == "matched":
                self.fire(MATCHED)
            return
        self.settle()
        if self.settled is None:
            return
        ok, value, st = self.settled
        if not ok:
            timed_out = value.Get_error_class() == ERR_TIMEOUT
            self.fire(TIMED_OUT if timed_out else FAILED, error=value)
        elif self.send:
            self.fire(SUBMITTED)
            if (self.info or {}).get("sync"):
                self.fire(COMPLETED)
                self.fire(MATCHED)
        elif st.Is_cancelled():
            # Withdrawn by Cancel: it will never complete (no data is here).
            self.fire(FAILED, error=MPIException(ERR_CANCELLED, "the receive was cancelled"))
        else:
            self.fire(COMPLETED, status=st)
        self.wake()

    def fire(self, event, error=None, status=None):
        fired = self.fired
        if event in fired or (event in _GOOD and (FAILED in fired or TIMED_OUT in fired)):
            return
        # What a receipt tells, kept: most events have no handler, and a
        # receipt is made only for one (now, or when one is added later).
        fired[event] = made = (time.time(), error, status)
        handlers = self.handlers.get(event)
        if handlers:
            receipt = self.receipt(event, made)
            for h in handlers:
                run_handler(h, receipt)

    def receipt(self, event, made):
        """The ``Receipt`` of ``event``, fired as ``made`` (time, error, status)."""
        return Receipt._of(self, event, made)

    def receipt_fields(self, event, made):
        """What the ``Receipt`` of ``event``, fired as ``made``, tells."""
        at, error, status = made
        info = self.info or _NOTHING
        if status is not None and self.receive:
            source, tag, size = status.source, status.tag, status.Get_count()
        else:
            source, tag, size = info.get("source"), info.get("tag"), info.get("size")
        return dict(
            event=event,
            tag=tag,
            size=size,
            source=source,
            dest=info.get("dest"),
            call=info.get("call"),
            time=at,
            error=error,
            request=self.request,
        )

    def on_settled(self, fn):
        with _settling:
            if self.settled is None:
                self.waiters.append(fn)
                return
        fn()

    def wake(self):
        if not self.waiters:  # (one added once settled is called at once: `on_settled`)
            return
        with _settling:
            waiters, self.waiters = self.waiters, []
        for fn in waiters:
            fn()


class MessageHandler:
    """One ``comm.on_message`` registration: a receive kept posted, re-posted
    after each message (what arrives in between waits in the mailbox)."""

    def __init__(self, comm, handler, source, tag):
        self.comm, self.handler, self.source, self.tag = comm, handler, source, tag
        self.request, self.active = None, True

    def arm(self):
        if self.active:
            self.request = self.comm.irecv(source=self.source, tag=self.tag)
            self.request.on(COMPLETED, self.arrived)

    def arrived(self, receipt):
        if not self.active:
            return
        try:
            value = receipt.request.wait()
        except MPIException:
            return
        self.handler(Receipt(**dict(receipt._d, value=value, event="message")))
        self.arm()

    def stop(self):
        self.active = False
        if self.request:
            self.request.Cancel()


class _Dispatcher:
    """The handler thread: waits on the core's event queue (tokens of
    completed operations) and on the nearest deadline, never spinning."""

    def __init__(self):
        self.events = _core.Events()
        self.lock = threading.Lock()
        self.watched = {}  # token -> (Watch, what)
        self.timers = []  # heap of (deadline, token, Watch)
        self.soon = deque()  # callables to run on the thread
        self.tokens = itertools.count(1)
        # The core request of the latest watched receive: the thread reads
        # the stream its message will come on while it waits (so the message
        # completes it here, not on the progress thread, which would then
        # have to wake this one).
        self.reading = None
        self.thread = threading.Thread(target=self._run, name="mpiws-handlers", daemon=True)
        self.thread.start()

    def watch(self, w):
        """Watch an operation (its ``Watch``): its completion and its deadline."""
        done = next(self.tokens)
        with self.lock:
            self.watched[done] = (w, "done")
            if w.deadline is not None:
                heapq.heappush(self.timers, (w.deadline, done, w))
        w.core.watch(self.events, done)
        if w.receive and isinstance(w.core, _core.Request):
            self.reading = w.core
        if w.deadline is not None:
            self.events.push(0)  # recompute the wait

    def watch_part(self, w, what):
        """Watch a send's storing or match ("stored", "matched"): the
        receiver is asked to tell (`Watch.on` asks only when a handler wants it)."""
        token = next(self.tokens)
        with self.lock:
            self.watched[token] = (w, what)
        watch = w.core.watch_stored if what == "stored" else w.core.watch_matched
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
            token = self.events.next(wait, self.reading)
            while self.soon:
                self.soon.popleft()()
            if self.timers:
                self._expire_due()
            if not token:
                continue
            with self.lock:
                entry = self.watched.pop(token, None)
            if entry is not None:
                w, what = entry
                w.progress(what)

    def _expire_due(self):
        now = time.monotonic()
        due = []
        with self.lock:
            while self.timers and self.timers[0][0] <= now:
                due.append(heapq.heappop(self.timers)[2])
        for w in due:
            w.progress("deadline")


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
