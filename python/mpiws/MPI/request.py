"""``MPI.Request``: a non-blocking operation in flight.

A request is truthy while active; completing it (wait/test) makes it inactive,
like mpi4py setting the handle to ``MPI.REQUEST_NULL``.
"""

import time
import weakref

from .. import _core
from . import events as events_
from . import timeout as timeout_
from .exception import ERR_REQUEST, Exception as MPIException
from .received import received_buffer, received_object
from .status import UNDEFINED, Status, fill

# How often a wait for many looks at generalized requests (seconds).
_LOOK = 0.005

# Requests whose handle number was asked for, by number (``tohandle``).
_by_handle = weakref.WeakValueDictionary()

# What a completed request yields.
_SEND, _OBJECT, _BUFFER, _CALL = 0, 1, 2, 3


class Request:
    """
    Request handler.

    ``deadline`` (time.monotonic) is when the operation times out: a wait
    or test after it withdraws the operation and raises ERR_TIMEOUT.
    """

    __slots__ = ("_r", "_kind", "_buf", "_limit", "_deadline", "_info", "_watch", "_start", "__weakref__")

    def __new__(cls, *args, **kwargs):
        # A subclass's ``__new__(cls, request)`` calls this one with the request
        # (mpi4py's subclassing); ``__init__`` then takes it.
        return super().__new__(cls)

    def __init__(self, request=None, kind=_SEND, buf=None, limit=None, deadline=None):
        self._start = None  # a persistent request's: how to start a round (MPI/persistent.py)
        if request is not None and not isinstance(request, Request) and not hasattr(request, "done"):
            raise TypeError(f"expected a Request, got {type(request).__name__}")
        if isinstance(request, Request):  # Request(other): copy the handle
            own = next(
                c for c in type(self).__mro__ if c.__module__.startswith(__package__)
            )  # a user's subclass's MPI class
            if own is not Request and type(request) is not Request and not isinstance(request, own):
                raise TypeError(f"expected a {own.__name__}, got a {type(request).__name__}")
            self._start = request._start
            request, kind, buf, limit, deadline = (
                request._r,
                request._kind,
                request._buf,
                request._limit,
                request._deadline,
            )
        self._r = request
        self._kind = kind
        self._buf = buf
        self._limit = limit
        self._deadline = deadline
        self._info = None  # what a receipt tells: tag, source, dest, size, sync, call
        self._watch = None  # once events are asked for: events.Watch

    def __bool__(self):
        return self._r is not None or self._start is not None

    def __eq__(self, other):
        if not isinstance(other, Request):
            return NotImplemented
        return self._r is other._r and self._start is other._start

    __hash__ = None  # as mpi4py's: equal requests name the same operation

    # ---- handle numbers (requests are not on handle.Handle: each object
    # completes on its own, as mpi4py's do once their handle is nulled) ----

    @property
    def handle(self):
        return self.tohandle()

    def tohandle(self):
        """tohandle(self)

        Return MPI handle.

        A number that ``fromhandle`` turns into another object for this
        request while this one lives; 0 for a null request.
        """
        if not self:
            return 0
        _by_handle[id(self)] = self
        return id(self)

    @classmethod
    def fromhandle(cls, handle):
        """fromhandle(cls, handle)

        Create object from MPI handle.
        """
        handle = int(handle)
        if handle == 0:
            return cls()
        other = _by_handle.get(handle)
        if other is None:
            raise MPIException(ERR_REQUEST, f"no request has handle {handle:#x}")
        return cls(other)

    toint = py2f = tohandle
    fromint = f2py = fromhandle

    def __reduce__(self):
        if self is REQUEST_NULL:
            return "REQUEST_NULL"
        if self._r is None:
            return (type(self), ())
        raise ValueError("cannot pickle an active request: it names this process's operation")

    # ---- completing ------------------------------------------------------

    def _finish(self, status):
        """Take the outcome of a done request; returns the received value."""
        w = self._watch
        if w is None:
            return self._take(status)
        w.settle()
        ok, value, st = w.settled
        self._r = None
        if status is not None and st is not None:
            status._set(st.source, st.tag, st._nbytes, st._cancelled)
        if not ok:
            raise value
        return value

    def _take(self, status):
        r, self._r = self._r, None
        return self._outcome(r, status)

    def _outcome(self, r, status):
        """The received value of ``r`` (done), converted; ``status`` filled."""
        msg = r.take()
        if isinstance(msg, Status):  # a generalized request's query
            fill(status, msg.source, msg.tag, msg._nbytes, msg._cancelled, msg.error)
            return None
        if msg is None:  # a send
            fill(status, -2, -1, 0)
            return None
        if msg.cancelled:
            fill(status, -2, -1, 0, cancelled=True)
            return None
        if self._kind == _CALL:  # a collective: its own conversion
            fill(status, -2, -1, 0)
            return self._buf(msg)
        if self._kind == _BUFFER:
            return received_buffer(msg, status, self._buf)
        return received_object(msg, status, self._limit)

    def _complete(self, status, block, timeout=None):
        """(done, value): wait first (up to ``timeout`` and the deadline) if ``block``."""
        r = self._r
        if r is None:
            fill(status, -2, -1, 0)
            return True, None
        if block:
            if not r.wait(timeout_.left(self._deadline, timeout)):
                self._expire()
        elif not r.done():
            if self._overdue():
                self._expire()
            return False, None
        return True, self._finish(status)

    # ---- events (mpiws): the fate machine is events.Watch ----------------

    def _describe(self, **info):
        self._info = info
        if self._watch is not None:
            self._watch.info = info
        return self

    def on(self, event, handler):
        """on(self, event, handler)

        Register a handler for an event of this request (mpiws).

        Run ``handler(receipt)`` on the handler thread when ``event``
        happens (at once if it already did). Returns the request.
        """
        events_.check_event(event)
        if not callable(handler):
            raise TypeError("handler must be callable")
        self._watched().on(event, handler)
        return self

    def _schedule(self, schedule):
        if schedule is not None:
            if not isinstance(schedule, events_.Schedule):
                raise TypeError("schedule must be an MPI.Schedule")
            w = self._watched() if schedule.handlers else None
            for event, handler in schedule.handlers.items():
                w.on(event, handler)  # checked when the schedule was made
        return self

    def _watched(self):
        w = self._watch
        if w is None:
            if self._r is None:
                raise ValueError("the request is not active")
            receive = self._kind in (_OBJECT, _BUFFER)
            w = self._watch = events_.Watch(self, self._r, self._deadline, self._kind == _SEND, receive, self._info)
            w.start()
        return w

    # What the fate machine (events.Watch, on the handler thread or for the
    # owner) asks of the operation: its outcome, and its withdrawal at the deadline.

    def _outcome_kept(self):
        # (ok, value or error, status) of the done operation, taken now but
        # the request kept active; None if it is not active.
        if self._r is None:
            return None
        # self._r stays set meanwhile: an owner's test() on another thread must
        # not take it for an inactive request (and answer None) while a large
        # message is being converted here.
        st = Status()
        try:
            return (True, self._outcome(self._r, st), st)
        except MPIException as e:
            return (False, e, st)

    def _withdraw_overdue(self):
        # Its deadline passed: withdraw the operation (_withdraw) unless it is
        # done or completes instead. The ERR_TIMEOUT if it was withdrawn (the
        # request then stands for the expired operation), else None.
        if self._r is None or self._r.done():
            return None
        try:
            self._withdraw()
        except MPIException as e:
            self._r = _EXPIRED
            return e
        return None

    def __await__(self):
        """__await__(self)

        Await the completion of this request.

        ``await request``: its value (a receive's object, a collective's
        result), or its error raised, without blocking the event loop.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def resolve():
            if fut.done():
                return
            try:
                fut.set_result(self.wait())
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting task
                fut.set_exception(e)

        if self._r is None:
            resolve()
        else:
            self._watched().on_settled(lambda: loop.call_soon_threadsafe(resolve))
        return fut.__await__()

    def _overdue(self):
        return self._deadline is not None and timeout_.left(self._deadline) == 0

    def _expire(self):
        """_expire(self)

        Withdraw the operation and raise ERR_TIMEOUT.

        Time is up: withdraw the operation and raise ERR_TIMEOUT. A receive
        that matched just now, or a send a receive just took, is not
        withdrawn: it completes instead.
        """
        w = self._watch
        if w is not None:
            # Watched: withdrawn through the watch whichever thread gets
            # there first, so timed_out fires either way.
            ok, error, _ = w.overdue()
            if not ok:
                self._r = None
                raise error
            return
        self._withdraw()

    def _withdraw(self):
        # The core's withdrawal (raises ERR_TIMEOUT), or completed after all.
        what = "receive" if self._kind in (_OBJECT, _BUFFER) else "operation"
        if self._kind in (_OBJECT, _BUFFER, _SEND):
            try:
                self._r.expire(what)  # the core's rule: withdrawn (raises), or completed after all
                return
            except MPIException:
                self._r = None
                raise
        self._r = None  # not the core's to withdraw (a composed or generalized request)
        raise timeout_.expired(what)

    def Wait(self, status=None, timeout=None):
        """Wait(self, status=None, timeout=None)

        Wait for a non-blocking operation to complete.
        """
        self._complete(status, True, timeout_.check(timeout))
        return True

    def wait(self, status=None, timeout=None):
        """wait(self, status=None, timeout=None)

        Wait for a non-blocking operation to complete.
        """
        return self._complete(status, True, timeout_.check(timeout))[1]

    def Test(self, status=None):
        """Test(self, status=None)

        Test for the completion of a non-blocking operation.
        """
        return self._complete(status, False)[0]

    def test(self, status=None):
        """test(self, status=None)

        Test for the completion of a non-blocking operation.
        """
        return self._complete(status, False)

    def Get_status(self, status=None):
        """Get_status(self, status=None)

        Whether the request is complete, without completing it.
        """
        done = self._r is None or self._r.done()
        if done:
            self._peek(status)
        return done

    def get_status(self, status=None):
        """get_status(self, status=None)

        Non-destructive test for the completion of a request.
        """
        return self.Get_status(status)

    def _peek(self, status):
        """Fill ``status`` for a done request without completing it."""
        found = self._r.peek() if self._r is not None and self._r.done() else None
        if found is None:
            fill(status, -2, -1, 0)
        else:
            fill(status, *found)

    @classmethod
    def Get_status_any(cls, requests, status=None):
        """Get_status_any(cls, requests, status=None)

        Non-destructive test for the completion of any requests.

        (index, flag) of a done request, not completing it: (UNDEFINED, True) if none is active.
        """
        active = cls._active(requests)
        if not active:
            fill(status, -2, -1, 0)
            return UNDEFINED, True
        i = next((i for i in active if requests[i]._r.done()), None)
        if i is None:
            return UNDEFINED, False
        requests[i]._peek(status)
        return i, True

    @classmethod
    def Get_status_all(cls, requests, statuses=None):
        """Get_status_all(cls, requests, statuses=None)

        Whether every request is done, not completing them.
        """
        if not all(r._r is None or r._r.done() for r in requests):
            return False
        for i, r in enumerate(requests):
            r._peek(_status_at(statuses, i))
        return True

    @classmethod
    def Get_status_some(cls, requests, statuses=None):
        """Get_status_some(cls, requests, statuses=None)

        Indices of the done requests (None if none is active), not completing them.
        """
        active = cls._active(requests)
        if not active:
            return None
        done = [i for i in active if requests[i]._r.done()]
        for k, i in enumerate(done):
            requests[i]._peek(_status_at(statuses, k))
        return done

    get_status_any = Get_status_any
    get_status_all = Get_status_all
    get_status_some = Get_status_some

    def Cancel(self):
        """Cancel(self)

        Cancel a request.
        """
        if not self:
            raise MPIException(ERR_REQUEST, "cannot cancel a null request")
        if self._r is not None:
            self._r.cancel()

    cancel = Cancel

    def Free(self):
        """Free(self)

        Free a communication request.

        Forget the request (a persistent one too); an active operation
        still completes in the background.
        """
        if not self:
            raise MPIException(ERR_REQUEST, "cannot free a null request")
        self._r = None
        self._start = None

    def free(self):
        """free(self)

        Call `Free` if not null.

        Mpi4py's safe free: nothing on a null request, else ``Free``.
        """
        if self:
            self.Free()

    # ---- completing many -------------------------------------------------

    @staticmethod
    def _active(requests):
        return [i for i, r in enumerate(requests) if r._r is not None]

    @staticmethod
    def _wait_until_one_done(requests, active, timeout):
        """_wait_until_one_done(requests, active, timeout)

        Wait until one of the active requests is done.

        Wait until one of ``active`` is done; ERR_TIMEOUT after ``timeout``,
        and a request past its own deadline is withdrawn (ERR_TIMEOUT).
        """
        rs = [requests[i] for i in active]
        end = timeout_.deadline(timeout)
        while not any(r._r.done() for r in rs):
            soonest = min((r._deadline for r in rs if r._deadline is not None), default=None)
            cores = [_waitable(r._r) for r in rs]
            limit = timeout_.left(soonest, timeout_.left(end))
            if None in cores:
                cores, limit = [c for c in cores if c is not None], min(limit if limit is not None else _LOOK, _LOOK)
            if cores and _core.wait_any(cores, limit):
                continue
            if not cores:
                time.sleep(limit)
            for r in rs:
                if r._overdue():
                    r._expire()
            if end is not None and timeout_.left(end) == 0:
                raise timeout_.expired("wait")

    @staticmethod
    def _check_deadlines(requests):
        """For the test family: withdraw the requests past their deadline."""
        for r in requests:
            if r._r is not None and not r._r.done() and r._overdue():
                r._expire()

    @classmethod
    def Waitall(cls, requests, statuses=None, timeout=None):
        """Waitall(cls, requests, statuses=None, timeout=None)

        Wait for all previously initiated requests to complete.
        """
        cls.waitall(requests, statuses, timeout)
        return True

    @classmethod
    def waitall(cls, requests, statuses=None, timeout=None):
        """waitall(cls, requests, statuses=None, timeout=None)

        Wait for all previously initiated requests to complete.
        """
        end = timeout_.deadline(timeout_.check(timeout))
        out = []
        for i, r in enumerate(requests):
            st = _status_at(statuses, i)
            out.append(r._complete(st, True, timeout_.left(end))[1])
        return out

    @classmethod
    def Testall(cls, requests, statuses=None):
        """Testall(cls, requests, statuses=None)

        Test for completion of all previously initiated requests.
        """
        return cls.testall(requests, statuses)[0]

    @classmethod
    def testall(cls, requests, statuses=None):
        """testall(cls, requests, statuses=None)

        Test for completion of all previously initiated requests.
        """
        cls._check_deadlines(requests)
        if not all(r._r is None or r._r.done() for r in requests):
            return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def Waitany(cls, requests, status=None, timeout=None):
        """Waitany(cls, requests, status=None, timeout=None)

        Wait for any previously initiated request to complete.
        """
        return cls.waitany(requests, status, timeout)[0]

    @classmethod
    def waitany(cls, requests, status=None, timeout=None):
        """waitany(cls, requests, status=None, timeout=None)

        Wait for any previously initiated request to complete.
        """
        active = cls._active(requests)
        if not active:
            fill(status, -2, -1, 0)
            return UNDEFINED, None
        cls._wait_until_one_done(requests, active, timeout_.check(timeout))
        i = next(i for i in active if requests[i]._r.done())
        return i, requests[i]._finish(status)

    @classmethod
    def Testany(cls, requests, status=None):
        """Testany(cls, requests, status=None)

        Test for completion of any previously initiated request.
        """
        i, flag, _ = cls.testany(requests, status)
        return i, flag

    @classmethod
    def testany(cls, requests, status=None):
        """testany(cls, requests, status=None)

        Test for completion of any previously initiated request.
        """
        cls._check_deadlines(requests)
        active = cls._active(requests)
        if not active:
            fill(status, -2, -1, 0)
            return UNDEFINED, True, None
        for i in active:
            if requests[i]._r.done():
                return i, True, requests[i]._finish(status)
        return UNDEFINED, False, None

    @classmethod
    def Waitsome(cls, requests, statuses=None, timeout=None):
        """Waitsome(cls, requests, statuses=None, timeout=None)

        Wait for some previously initiated requests to complete.
        """
        return cls.waitsome(requests, statuses, timeout)[0]

    @classmethod
    def waitsome(cls, requests, statuses=None, timeout=None):
        """waitsome(cls, requests, statuses=None, timeout=None)

        Wait for some previously initiated requests to complete.
        """
        active = cls._active(requests)
        if not active:
            return None, None
        cls._wait_until_one_done(requests, active, timeout_.check(timeout))
        return cls._take_done(requests, active, statuses)

    @classmethod
    def Testsome(cls, requests, statuses=None):
        """Testsome(cls, requests, statuses=None)

        Test for completion of some previously initiated requests.
        """
        return cls.testsome(requests, statuses)[0]

    @classmethod
    def testsome(cls, requests, statuses=None):
        """testsome(cls, requests, statuses=None)

        Test for completion of some previously initiated requests.
        """
        cls._check_deadlines(requests)
        active = cls._active(requests)
        if not active:
            return None, None
        return cls._take_done(requests, active, statuses)

    @staticmethod
    def _take_done(requests, active, statuses):
        indices, values = [], []
        for i in active:
            if requests[i]._r.done():
                indices.append(i)
                values.append(requests[i]._finish(_status_at(statuses, len(indices) - 1)))
        return indices, values

    def __repr__(self):
        return "<Request active>" if self._r is not None else "<Request null>"


class _Expired:
    """Stands for a core request withdrawn by the handler thread on timeout."""

    def done(self):
        return True

    def wait(self, timeout=None):
        return True

    def cancel(self):
        return False  # already withdrawn

    def withdraw(self):
        return True  # the handler thread withdrew it first: the owner's timeout stands

    def peek(self):
        return None


_EXPIRED = _Expired()


def _waitable(core):
    """The core request ``_core.wait_any`` can wait for in ``core``; None
    for a generalized request (the program completes it: looked at often)."""
    if isinstance(core, _core.Request):
        return core
    waitable = getattr(core, "waitable", None)  # a Pair, a partitioned round's Parts
    return waitable() if waitable else None


def _status_at(statuses, i):
    """Status ``i`` of ``statuses``; a list grows to have it, a tuple does not."""
    if statuses is None:
        return None
    if isinstance(statuses, list):
        while len(statuses) <= i:
            statuses.append(Status())
    return statuses[i] if i < len(statuses) else None


REQUEST_NULL = Request()
