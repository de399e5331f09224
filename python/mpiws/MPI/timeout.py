"""Time limits (an mpiws extension): every blocking call, non-blocking call
and wait takes ``timeout=`` in seconds. Without one, the communicator's
default applies (``comm.Set_timeout``), else ``MPIWS_TIMEOUT`` from the
environment, else none. Expiry raises ``MPI.Exception`` with class
``MPI.ERR_TIMEOUT``; a receive that timed out is withdrawn, so a message
arriving later waits for another receive.
"""

import os
import time

from .exception import ERR_TIMEOUT, Exception as MPIException


def _from_env():
    v = os.environ.get("MPIWS_TIMEOUT", "").strip()
    return float(v) if v else None


_ENV = _from_env()
#: A communicator's default when ``Set_timeout`` set none (the environment's applies).
UNSET = object()


def check(timeout):
    """Seconds, or None for no limit (``float("inf")`` too)."""
    if timeout is None:
        return None
    t = float(timeout)
    if t < 0 or t != t:
        raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
    return None if t == float("inf") else t


def resolve(timeout, default=UNSET):
    """The limit a call runs under: its own (``float("inf")``: none,
    whatever the defaults), its communicator's ``default``, the environment's."""
    if timeout is not None:
        return check(timeout)
    return _ENV if default is UNSET else default


def default(timeout):
    """What a communicator keeps for ``Set_timeout(timeout)``: None gives
    the environment's back (UNSET)."""
    return UNSET if timeout is None else check(timeout)


def deadline(timeout):
    return None if timeout is None else time.monotonic() + timeout


def left(deadline, timeout=None):
    """Seconds until the earlier of ``deadline`` and ``timeout`` from now (None: no limit)."""
    limits = [
        t for t in (timeout, None if deadline is None else max(0.0, deadline - time.monotonic())) if t is not None
    ]
    return min(limits) if limits else None


def expired(what):
    return MPIException(ERR_TIMEOUT, f"{what} timed out")
