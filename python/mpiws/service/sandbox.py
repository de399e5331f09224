"""A service instance in a process of its own: what ``mpiws serve`` runs for
each *run* request (``isolation="process"``, the default), started by the
endpoint (``mpiws_core::service::sandbox``) ahead of need, never by hand.

Started as the endpoint's fork server (``forks``), the same imports serve
every child: each is forked from it, ready at once.

The endpoint writes the binding on stdin and keeps the instance's record;
this process creates the instance on an endpoint of its own (loopback,
no keys: the endpoint relays it the domain's traffic and hands it the
streams), runs the service, reports the outcome and exits. Whatever the
service does (holds the GIL, crashes, runs out of memory, never returns),
the other instances of the endpoint go on, and a cancel ends this process.
"""

import argparse
import json
import os
import sys
import time

from .. import _core
from ..MPI import pickled
from . import forks
from .names import load, spec
from .runner import fail_to_start, run_instance

#: How long a child answers questions about its instance after its code ended.
LINGER_SECONDS = 5.0


def command(services, pickle="restricted", pickle_allow=(), max_message=None, body_timeout=None):
    """The command line that starts a child for an endpoint deploying
    ``services``; the child checks the domain's traffic with the endpoint's limits."""
    cmd = [sys.executable, "-m", "mpiws.service.sandbox", "--path", json.dumps(sys.path), "--pickle", pickle]
    for name, fn in services.items():
        cmd += ["--service", f"{name}={spec(fn)}"]
    for allowed in pickle_allow:
        cmd += ["--pickle-allow", allowed]
    if max_message is not None:
        cmd += ["--max-message", str(max_message)]
    if body_timeout is not None:
        cmd += ["--body-timeout", str(body_timeout)]
    return cmd


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m mpiws.service.sandbox")
    p.add_argument("--service", action="append", default=[])
    p.add_argument("--path", default="[]")
    p.add_argument("--pickle", default="restricted")
    p.add_argument("--pickle-allow", action="append", default=[])
    p.add_argument("--max-message", type=int)
    p.add_argument("--body-timeout", type=float)
    a = p.parse_args(argv)
    sys.path[:0] = [d for d in json.loads(a.path) if d not in sys.path]
    # Imported before the binding comes: a child is started ahead of need, so
    # an instance does not wait for this.
    services, failed = {}, None
    try:
        services = dict(load(named) for named in a.service)
        loads = pickled.policy(a.pickle, a.pickle_allow)
    except Exception as e:  # noqa: BLE001 - the instance's record says why
        failed = e
    if os.environ.pop(forks.FORKS_ENV, None):
        forks.serve()  # the fork server: returns in each child it forks
    # No keys: its service interface refuses everything; it serves only the domain's traffic.
    endpoint = _core.Endpoint("127.0.0.1", 0, max_message=a.max_message, body_timeout=a.body_timeout)
    instance = _core.sandbox_begin(endpoint)  # waits for the binding
    if failed is None and instance.service not in services:
        failed = LookupError(f"no service {instance.service!r} here")
    if failed is not None:
        fail_to_start(instance, failed)
    else:
        run_instance(instance, services[instance.service], loads, served=True)
    _core.sandbox_report(instance)
    sys.stdout.flush()
    sys.stderr.flush()
    # Its peers may still ask what it received (`matched`, `withdraw`) or
    # wait for acknowledgements: answered for a moment before the process ends.
    time.sleep(LINGER_SECONDS)
    os._exit(0)


if __name__ == "__main__":
    main()
