"""``MPI.Request``: a non-blocking operation in flight.

A request is truthy while active; completing it (wait/test) makes it inactive,
like mpi4py setting the handle to ``MPI.REQUEST_NULL``.
"""

from .. import _core
from . import pickled
from .exception import ERR_TRUNCATE, Exception as MPIException
from .status import UNDEFINED, fill

PROC_NULL = -1

# What a completed request yields.
_SEND, _OBJECT, _BUFFER, _CALL = 0, 1, 2, 3


def received_object(msg, status, limit=None):
    """The object a core Message carries; fills ``status``."""
    fill(status, msg.source, msg.tag, msg.nbytes)
    if msg.source == PROC_NULL:
        return None
    if limit is not None and msg.nbytes > limit:
        raise MPIException(ERR_TRUNCATE, f"message of {msg.nbytes} bytes truncated: receive buffer holds {limit}")
    return pickled.loads(msg)


def received_buffer(msg, status, buf):
    """Copy a core Message into ``buf`` (if not read there already); fills ``status``."""
    fill(status, msg.source, msg.tag, msg.nbytes)
    msg.copy_into(buf)


class Request:
    __slots__ = ("_r", "_kind", "_buf", "_limit", "__weakref__")

    def __init__(self, request=None, kind=_SEND, buf=None, limit=None):
        if isinstance(request, Request):  # Request(other): copy the handle
            request, kind, buf, limit = request._r, request._kind, request._buf, request._limit
        self._r = request
        self._kind = kind
        self._buf = buf
        self._limit = limit

    def __bool__(self):
        return self._r is not None

    def __eq__(self, other):
        if not isinstance(other, Request):
            return NotImplemented
        return self._r is other._r

    def __hash__(self):
        return id(self._r)

    # ---- completing ------------------------------------------------------

    def _finish(self, status):
        """Take the outcome of a done request; returns the received value."""
        r, self._r = self._r, None
        msg = r.take()
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

    def _complete(self, status, block):
        """(done, value): wait first if ``block``."""
        r = self._r
        if r is None:
            fill(status, -2, -1, 0)
            return True, None
        if block:
            r.wait(None)
        elif not r.done():
            return False, None
        return True, self._finish(status)

    def Wait(self, status=None):
        self._complete(status, True)
        return True

    def wait(self, status=None):
        return self._complete(status, True)[1]

    def Test(self, status=None):
        return self._complete(status, False)[0]

    def test(self, status=None):
        return self._complete(status, False)

    def Get_status(self, status=None):
        """Whether the request is complete, without completing it."""
        done = self._r is None or self._r.done()
        if self._r is None:
            fill(status, -2, -1, 0)
        return done

    def get_status(self, status=None):
        return self.Get_status(status)

    def Cancel(self):
        if self._r is not None:
            self._r.cancel()

    cancel = Cancel

    def Free(self):
        """Forget the request; the operation still completes in the background."""
        self._r = None

    free = Free

    # ---- completing many -------------------------------------------------

    @staticmethod
    def _active(requests):
        return [i for i, r in enumerate(requests) if r._r is not None]

    @staticmethod
    def _wait_until_one_done(requests, active):
        if not any(requests[i]._r.done() for i in active):
            _core.wait_any([requests[i]._r for i in active])

    @classmethod
    def Waitall(cls, requests, statuses=None):
        cls.waitall(requests, statuses)
        return True

    @classmethod
    def waitall(cls, requests, statuses=None):
        out = []
        for i, r in enumerate(requests):
            st = _status_at(statuses, i)
            out.append(r._complete(st, True)[1])
        return out

    @classmethod
    def Testall(cls, requests, statuses=None):
        return cls.testall(requests, statuses)[0]

    @classmethod
    def testall(cls, requests, statuses=None):
        if not all(r._r is None or r._r.done() for r in requests):
            return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def Waitany(cls, requests, status=None):
        return cls.waitany(requests, status)[0]

    @classmethod
    def waitany(cls, requests, status=None):
        active = cls._active(requests)
        if not active:
            fill(status, -2, -1, 0)
            return UNDEFINED, None
        cls._wait_until_one_done(requests, active)
        i = next(i for i in active if requests[i]._r.done())
        return i, requests[i]._finish(status)

    @classmethod
    def Testany(cls, requests, status=None):
        i, flag, _ = cls.testany(requests, status)
        return i, flag

    @classmethod
    def testany(cls, requests, status=None):
        active = cls._active(requests)
        if not active:
            fill(status, -2, -1, 0)
            return UNDEFINED, True, None
        for i in active:
            if requests[i]._r.done():
                return i, True, requests[i]._finish(status)
        return UNDEFINED, False, None

    @classmethod
    def Waitsome(cls, requests, statuses=None):
        return cls.waitsome(requests, statuses)[0]

    @classmethod
    def waitsome(cls, requests, statuses=None):
        active = cls._active(requests)
        if not active:
            return None, None
        cls._wait_until_one_done(requests, active)
        return cls._take_done(requests, active, statuses)

    @classmethod
    def Testsome(cls, requests, statuses=None):
        return cls.testsome(requests, statuses)[0]

    @classmethod
    def testsome(cls, requests, statuses=None):
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


def _status_at(statuses, i):
    if statuses is None:
        return None
    from .status import Status

    while len(statuses) <= i:
        statuses.append(Status())
    return statuses[i]


REQUEST_NULL = Request()
