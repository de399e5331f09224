"""A run's own dashboard. ``mpiws run --dashboard``, ``mpiws workflow run
--dashboard`` and ``MPIPoolExecutor(dashboard=True)`` start an endpoint in
their own process (on loopback, nothing deployed, the user's key only: the
key file ``mpiws serve`` uses) whose page ``/dashboard/`` shows the run:
the domain it started, watched as an endpoint shows a domain it hosts, and
the documents the run publishes (a workflow's record, a farm's figures).

Publishing replaces the run's last document and costs a JSON encoding; the
endpoint gathers nothing while no page is open.
"""

import json
import sys

from . import _core
from .keys import key_file, server_keys


class Board:
    """An endpoint showing one run; ``url`` is its page."""

    def __init__(self, host="127.0.0.1", port=0, announce=None):
        self.endpoint = _core.Endpoint(host, port, keys=server_keys()[0])
        self.url = self.endpoint.url.rstrip("/") + "/dashboard/"
        if announce is not None:
            announce(f"dashboard at {self.url} (paste your key: the one in {key_file()})")

    def watch(self, domain, bearer, urls):
        """Show ``domain``: rank i at ``urls[i]``, asked with ``bearer`` (its token, or a key its endpoints take)."""
        self.endpoint.watch_domain(domain, bearer, list(urls))

    def publish(self, name, kind, document):
        """Show ``document`` (JSON-able) as run ``name`` of ``kind`` ("workflow", "farm")."""
        self.endpoint.publish(name, kind, json.dumps(document, default=str))

    def close(self):
        self.endpoint.close()


def asked_by(options):
    """What ``--dashboard`` / ``--dashboard-port PORT`` ask for, as ``open_board`` takes it: the port if
    given (0: any free one), else whether a board was asked for."""
    port = getattr(options, "dashboard_port", None)
    return port if port is not None else getattr(options, "dashboard", None)


def open_board(spec, who):
    """The board a ``--dashboard[=PORT]`` option (or ``dashboard=`` argument) asks for, announced on
    stderr as ``who``; None when not asked. ``spec``: None/False (none), True or 0 (any free port), a port."""
    if spec is None or spec is False:
        return None
    port = 0 if spec is True else int(spec)
    return Board(port=port, announce=lambda line: print(f"{who}: {line}", file=sys.stderr, flush=True))
