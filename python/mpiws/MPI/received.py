"""What a received message becomes: the object it carries (unpickled, its
size checked against the receive's limit) or its bytes in the receive
buffer (spread over a derived datatype's layout); either fills the
receive's status. Blocking receives (``Comm``) and requests once complete
(``Request``) convert here."""

from . import datatype, pickled
from .exception import ERR_TRUNCATE, Exception as MPIException
from .status import fill

PROC_NULL = -1


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
    datatype.settle(buf, msg.nbytes)
