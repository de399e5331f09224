"""``mpiws serve``: one endpoint, any number of deployed services.

A service is a function ``f(comm, params) -> result``: ``comm`` is the
instance's COMM_WORLD, ``params`` the domain's JSON parameters, and the
result must be JSON-serialisable. A program is a command-line program made
a service by its one-line template (``NAME=TEMPLATE``; see ``mpiws.jobs``).
"""

import importlib
import os
import sys
import threading

from .. import _core
from .runner import run_instance


def load(spec):
    """``NAME=module:function`` -> (NAME, function)."""
    name, sep, target = spec.partition("=")
    module, sep2, attr = target.partition(":")
    if not (sep and sep2 and name and module and attr):
        raise ValueError(f"service must be NAME=module:function, got {spec!r}")
    if os.getcwd() not in sys.path:  # like `python -m`: modules beside you import
        sys.path.insert(0, os.getcwd())
    fn = getattr(importlib.import_module(module), attr)
    if not callable(fn):
        raise TypeError(f"{target} is not callable")
    return name, fn


class Server:
    """An endpoint and the dispatcher that starts each instance on a thread."""

    def __init__(self, services, host="127.0.0.1", port=0, programs=(), **limits):
        self.services = dict(services)
        self.endpoint = _core.Endpoint(host, port, **limits)
        for name in self.services:
            self.endpoint.deploy(name)
        for spec in programs:
            name, sep, template = spec.partition("=")
            if not sep:
                raise ValueError(f"program must be NAME=TEMPLATE, got {spec!r}")
            self.endpoint.deploy_program(name.strip(), template)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._dispatch, name="mpiws-dispatch", daemon=True)
        self._thread.start()

    @property
    def url(self):
        return self.endpoint.url

    def _dispatch(self):
        while not self._stop.is_set():
            instance = self.endpoint.next_run(0.5)
            if instance is None:
                continue
            fn = self.services[instance.service]
            threading.Thread(
                target=run_instance, args=(instance, fn), name=f"mpiws-{instance.domain}-{instance.rank}", daemon=True
            ).start()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.endpoint.close_jobs()  # jobs end; a work directory the endpoint made is removed
