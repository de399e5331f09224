"""Run one service instance: bind the thread to it, call the service, and
report the result (or the exception and its traceback) to the endpoint."""

import json
import os

from .. import binding
from ..MPI import Intracomm, handle
from ..MPI.exception import ERR_OTHER, Exception as MPIException, _name

#: How long a finished instance waits for its last sends to leave.
FLUSH_SECONDS = 60.0


def run_instance(instance, function, loads=None, served=False):
    """Call ``function(comm, params)`` as ``instance``, unpickling what it
    receives with ``loads`` (None: full pickle); returns True on success.
    ``served``: an instance of ``mpiws serve``, whose failure others read
    (any holder of the domain token): its traceback names files, not where
    the endpoint keeps them."""
    with binding.bound_to(instance, loads) as b, handle.owned():
        instance.set_running()
        try:
            try:
                result = function(Intracomm._wrap(b.world), json.loads(instance.params))
            except SystemExit as e:
                if e.code not in (None, 0):
                    raise
                result = None  # sys.exit(0), as unittest.main() ends: a success
            # Peers read "done" as "all it sent is here" (rank::liveness).
            if not instance.flush(FLUSH_SECONDS):
                raise TimeoutError(f"its last sends were not delivered within {FLUSH_SECONDS:.0f} s")
            try:
                encoded = json.dumps(result)
            except (TypeError, ValueError) as e:
                raise TypeError(f"service result is not JSON-serialisable: {e}") from None
        except BaseException as e:  # noqa: BLE001 - report everything, even SystemExit
            report(instance, e, served)
            return False
        instance.finish(encoded)
        return True


def fail_to_start(instance, e):
    """The instance could not be started at all (no thread, say)."""
    instance.fail(ERR_OTHER, type(e).__name__, f"the endpoint could not start the instance: {e}", "")


def report(instance, e, served=False):
    cls = e.Get_error_class() if isinstance(e, MPIException) else ERR_OTHER
    name = _name(cls) if isinstance(e, MPIException) else type(e).__name__
    # sys.exit(N) is a deliberate exit: its status, no traceback.
    tb = "" if isinstance(e, SystemExit) else "".join(_format(e, served))
    instance.fail(cls, name, str(e), tb)


def _format(e, served):
    """The traceback's lines; ``served``: each file by its name alone."""
    import traceback  # here: only a failure needs it, every rank imports this module

    tb = traceback.TracebackException.from_exception(e)
    if served:
        for part in _chain(tb):
            for frame in part.stack:
                frame.filename = os.path.basename(frame.filename)
    return tb.format()


def _chain(tb):
    """``tb`` and the exceptions it was raised from or during."""
    seen = []
    while tb is not None and tb not in seen:
        seen.append(tb)
        tb = tb.__cause__ or tb.__context__
    return seen
