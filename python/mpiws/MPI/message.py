"""``MPI.Message``: a message matched by a probe (``mprobe``), which only
its own ``recv``/``Recv`` (or ``irecv``/``Irecv``) receives: no other
receive can take it meanwhile, as MPI's matched probe promises.

A matched probe is a receive posted without a buffer: once it completes,
the message is out of the mailbox and the Message holds the completed core
request; receiving it wraps that request as an object or buffer receive and
nulls the handle. ``improbe`` posts the receive and withdraws it unless it
matched at once. ``MESSAGE_NO_PROC`` is what probing ``PROC_NULL`` gives:
receiving it yields nothing (source ``PROC_NULL``) and leaves it as it is.
"""

from .. import binding
from . import datatype
from . import timeout as timeout_
from .exception import ERR_REQUEST
from .handle import Handle, predefine
from .request import _BUFFER, _OBJECT, Request
from .status import ANY_TAG, fill

PROC_NULL = -1
_NO_PROC = "no process"


class Message(Handle):
    """
    Matched message.
    """

    __slots__ = ()
    _invalid = ERR_REQUEST

    # -- probing (comm.mprobe & co. call these) --------------------------------

    @classmethod
    def probe(cls, comm, source=-2, tag=ANY_TAG, status=None):
        """probe(cls, comm, source=-2, tag=ANY_TAG, status=None)

        Blocking test for a matched message.
        """
        if source == PROC_NULL:
            fill(status, PROC_NULL, ANY_TAG, 0)
            return cls(MESSAGE_NO_PROC)
        req = comm._core.irecv(source, tag)
        limit = comm._limit(None)
        if not req.wait(limit) and req.withdraw():
            raise timeout_.expired(f"matched probe (after {limit} s)")
        req.wait(None)
        return cls._matched(req, status)

    @classmethod
    def iprobe(cls, comm, source=-2, tag=ANY_TAG, status=None):
        """iprobe(cls, comm, source=-2, tag=ANY_TAG, status=None)

        Nonblocking test for a matched message.
        """
        if source == PROC_NULL:
            fill(status, PROC_NULL, ANY_TAG, 0)
            return cls(MESSAGE_NO_PROC)
        req = comm._core.irecv(source, tag)
        if not req.done() and req.withdraw():
            return None  # nothing matched: the receive is withdrawn
        req.wait(None)
        return cls._matched(req, status)

    Probe = probe
    Iprobe = iprobe

    @classmethod
    def _matched(cls, req, status):
        # The core request keeps its message until it is received.
        found = req.peek()
        if found is None:
            req.take()  # it failed: raises the receive's error
        fill(status, *found)
        return cls._new(req)

    # -- receiving -------------------------------------------------------------

    def _taken(self):
        """The matched core request (None for no process); nulls this object."""
        state = self._state()
        if state is _NO_PROC:
            if self._is_constant():
                return None  # MESSAGE_NO_PROC itself stays as it is
            self._h = 0
            return None
        self._release()
        return state

    def _request(self, kind, buf=None):
        req = self._taken()
        if req is None:  # a receive from no process (on COMM_SELF) completes at once
            req = binding.current().self_comm.irecv(PROC_NULL, ANY_TAG)
        return Request(req, kind, buf)

    def recv(self, status=None):
        """recv(self, status=None)

        Blocking receive of matched message.
        """
        return self._request(_OBJECT).wait(status)

    def irecv(self):
        """irecv(self)

        Nonblocking receive of matched message.
        """
        return self._request(_OBJECT)

    def Recv(self, buf, status=None):
        """Recv(self, buf, status=None)

        Blocking receive of matched message.
        """
        self.Irecv(buf).Wait(status)

    def Irecv(self, buf):
        """Irecv(self, buf)

        Nonblocking receive of matched message.
        """
        return self._request(_BUFFER, datatype.parse(buf, writable=True)[0])


MESSAGE_NULL = predefine(Message(), "MESSAGE_NULL")
MESSAGE_NO_PROC = predefine(Message._new(_NO_PROC, predefined=True), "MESSAGE_NO_PROC")
