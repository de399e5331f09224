"""Partitioned point-to-point (``Psend_init``/``Precv_init``, MPI 4):
a persistent request whose buffer is ``partitions`` equal parts, each sent
when the program marks it ready (``Pready``) and each seen arriving
(``Parrived``). Partition i travels as a message tagged i on a context
of its own per communicator and tag (core ``Comm.partitioned``), so parts
readied in any order land in their place and match nothing else."""

import time

from . import datatype
from .exception import ERR_ARG, ERR_REQUEST, ERR_TYPE, Exception as MPIException
from .request import _SEND, Request


def _slices(buf, partitions, writable):
    if partitions < 1:
        raise MPIException(ERR_ARG, f"invalid number of partitions {partitions}")
    view, dt, _ = datatype.parse(buf, writable=writable, blocks=partitions)
    if not dt._layout.dense:
        raise MPIException(ERR_TYPE, "partitioned communication takes contiguous datatypes only")
    size = view.nbytes // partitions
    return [view[i * size : (i + 1) * size] for i in range(partitions)]


class Parts:
    """One round of a partitioned request, as the Request machinery sees a
    core request: done when every partition's message is."""

    __slots__ = ("reqs", "slices", "taken")

    def __init__(self, slices):
        self.slices, self.reqs, self.taken = slices, [None] * len(slices), [False] * len(slices)

    def done(self):
        return all(r is not None and r.done() for r in self.reqs)

    def waitable(self):
        return next((r for r in self.reqs if r is not None and not r.done()), None)

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        for r in self.reqs:
            while r is None:  # a send's partition not readied yet: another thread may
                if end is not None and time.monotonic() >= end:
                    return False
                time.sleep(0.001)
            if not r.wait(None if end is None else max(0.0, end - time.monotonic())):
                return False
        return True

    def arrived(self, i):
        """Whether partition i is in place (received: copied there once)."""
        r = self.reqs[i]
        if r is None or not r.done():
            return False
        if not self.taken[i]:
            self.taken[i] = True
            msg = r.take()
            if msg is not None:
                msg.copy_into(self.slices[i])
        return True

    def take(self):
        for i in range(len(self.reqs)):
            self.arrived(i)
        return None

    def cancel(self):
        return False

    def withdraw(self):
        return False

    def peek(self):
        return None


class _Round:
    """What ``Prequest.Start`` calls for a partitioned request, and what its
    ``Pready``/``Parrived`` reach."""

    def __init__(self, comm, buf, partitions, peer, tag, send):
        self.core = comm._core.partitioned(tag)
        self.buf, self.partitions, self.peer, self.send = buf, partitions, peer, send
        self.parts = None

    def __call__(self):
        self.parts = Parts(_slices(self.buf, self.partitions, writable=not self.send))
        if not self.send:
            for i, view in enumerate(self.parts.slices):
                self.parts.reqs[i] = self.core.irecv(self.peer, i, view)
        return Request(self.parts, _SEND)

    def _partition(self, i):
        if self.parts is None:
            raise MPIException(ERR_REQUEST, "partitioned request not started")
        if not 0 <= i < self.partitions:
            raise MPIException(ERR_ARG, f"partition {i} out of range (0..{self.partitions - 1})")
        return i

    def ready(self, i):
        if not self.send:
            raise MPIException(ERR_REQUEST, "Pready on a receive")
        i = self._partition(i)
        if self.parts.reqs[i] is not None:
            raise MPIException(ERR_REQUEST, f"partition {i} is already ready")
        self.parts.reqs[i] = self.core.isend(self.peer, i, [self.parts.slices[i]])

    def arrived(self, i):
        if self.send:
            raise MPIException(ERR_REQUEST, "Parrived on a send")
        return self.parts.arrived(self._partition(i))
