"""The buffer buffered sends are given (``MPI.Attach_buffer`` and the rest,
the process's and, MPI 4.1, a communicator's). mpiws's sends never wait for
their receiver, so ``Bsend`` needs none: it is kept to be given back, and a
flush waits for what was sent to be delivered.
"""

from .. import binding
from . import datatype
from .memory import buffer
from .request import Request

BSEND_OVERHEAD = 96
BUFFER_AUTOMATIC = 0


#: Buffers given to buffered sends: the process's (key None), or a
#: communicator's (by handle number, MPI 4.1).
_attached = {}


def Attach_buffer(buf, owner=None):
    """Attach_buffer(buf, owner=None)

    Attach a user-provided buffer for sending in buffered mode.

    Give buffered sends a buffer. mpiws's sends never wait for their
    receiver, so ``Bsend`` needs none; it is kept to be given back.
    """
    if buf is not BUFFER_AUTOMATIC and not isinstance(buf, buffer):
        buf = buffer(datatype.as_view(buf))
    if buf is not BUFFER_AUTOMATIC and buf.readonly:
        raise BufferError("a buffered sends' buffer must be writable")
    _attached[owner] = buf


def Detach_buffer(owner=None):
    """Detach_buffer(owner=None)

    Remove an existing attached buffer.

    The buffer ``Attach_buffer`` gave (None if none), once every
    buffered send has left, as MPI's detach waits for them.
    """
    Flush_buffer()
    return _attached.pop(owner, None)


def Flush_buffer():
    """Flush_buffer()

    Block until all buffered messages have been transmitted.

    Wait until the messages sent so far (buffered ones among them) are
    delivered or failed.
    """
    binding.current().instance.flush(None)


def Iflush_buffer():
    """Iflush_buffer()

    Nonblocking flush for buffered messages.
    """
    Flush_buffer()
    return Request()
