"""The run's local endpoint: steps without ``endpoint:`` run here, on an endpoint
this process starts for the run (loopback, the user's key, each instance
in a process of its own) deploying exactly those steps: services named
``module:function``, programs by their templates."""

import os
import re
import sys
from urllib.parse import urlsplit

from ..service.serve import Server, load


def deployed_name(step):
    """The name a local step's service or program is deployed under."""
    if step.kind == "program":
        return step.name
    return re.sub(r"[^A-Za-z0-9_.-]", ".", step.target)


def template(step, base):
    """A local program's template, its program path taken from the workflow file's folder if relative."""
    first, sep, rest = step.target.partition(" ")
    if "/" in first and not os.path.isabs(first):
        first = os.path.join(base, first)
    return first + sep + rest


class LocalEndpoint:
    def __init__(self, wf, **limits):
        base = os.path.dirname(os.path.abspath(wf.path)) if wf.path else os.getcwd()
        if base not in sys.path:  # step modules beside the workflow file import, as beside a script
            sys.path.insert(0, base)
        local = [s for s in wf.steps.values() if s.local]
        services = dict(load(f"{deployed_name(s)}={s.target}") for s in local if s.kind == "service")
        programs = [f"{deployed_name(s)}={template(s, base)}" for s in local if s.kind == "program"]
        # Its jobs may pull files by reference from the endpoints the workflow names, and only those
        # beyond the default public addresses (they may be on loopback or a private network).
        hosts = sorted({urlsplit(s.endpoint).netloc.rpartition("@")[2] for s in wf.steps.values() if s.endpoint})
        self.server = Server(services, programs=programs, fetch_allow=hosts, **limits)

    @property
    def url(self):
        return self.server.url

    def stop(self):
        self.server.stop()
