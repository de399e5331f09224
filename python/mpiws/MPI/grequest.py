"""``Grequest``: a generalized request, an operation the program carries
out itself and completes with ``Complete`` (MPI_Grequest_start). Waiting
on it runs ``query_fn(status, *args, **kwargs)`` for its status, then
``free_fn``; ``Cancel`` runs ``cancel_fn(completed, ...)``."""

import threading

from .request import Request
from .status import Status


class Generalized:
    """The operation behind a Grequest, in the shape of a core request."""

    def __init__(self, query, free, cancel, args, kwargs):
        self._fns, self._args, self._kwargs = (query, free, cancel), args or (), kwargs or {}
        self._done = threading.Event()

    def _call(self, i, *first):
        fn = self._fns[i]
        if fn is not None:
            fn(*first, *self._args, **self._kwargs)

    def complete(self):
        self._done.set()

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        return self._done.wait(timeout)

    def take(self):
        """The status the query gives, then the request is freed."""
        status = Status()  # ANY_SOURCE, ANY_TAG, no bytes: what the query may change
        try:
            self._call(0, status)
        finally:
            self._call(1)
        return status

    def peek(self):
        return None

    def cancel(self):
        self._call(2, self.done())
        return False

    withdraw = cancel


class Grequest(Request):
    """
    Generalized request handler.
    """

    __slots__ = ()

    @classmethod
    def Start(cls, query_fn=None, free_fn=None, cancel_fn=None, args=None, kwargs=None):
        """Start(cls, query_fn=None, free_fn=None, cancel_fn=None, args=None, kwargs=None)

        Create and return a user-defined request.
        """
        return cls(Generalized(query_fn, free_fn, cancel_fn, args, kwargs))

    start = Start

    def Complete(self):
        """Complete(self)

        Notify that a user-defined request is complete.
        """
        self._r.complete()

    complete = Complete
