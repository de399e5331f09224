"""Workers on endpoints: ``MPIPoolExecutor(endpoints=[URL, ...])``.

A deployer lets an endpoint host farm workers by deploying this module's
``worker`` as a service, with full pickle (a worker runs the code its
clients send, as mpi4py's workers do: only holders of the endpoint's keys
can start one)::

    mpiws serve --service futures=mpiws.futures.endpoints:worker --pickle full

Each worker on an endpoint is a domain of two ranks: rank 0 is the
executor's own process (its instance made on this process's endpoint, as
``Spawn`` makes its own), rank 1 the worker instance the endpoint starts
on a *run* request signed with the client's key (``mpiws.keys``). Both
sides derive the intercommunicator between them without a message
(``launch.spawn.sides``), and the worker serves it as a spawned mpi4py
worker serves its parent. One domain per worker lets workers join and
leave a running executor one by one.

The executor's program reaches the worker as its source (``main=True``,
the default), run there as ``__worker__`` as mpi4py runs it from its path;
so functions defined in the program unpickle on a machine that does not
have its file.
"""

import collections
import json
import secrets
import threading
import warnings

from .. import _core, binding
from ..keys import client_key
from ..launch.spawn import sides
from ..MPI.intercomm import _make
from . import _core as futures
from . import farm

#: The service name an endpoint deploys ``worker`` under, unless told otherwise.
SERVICE = "futures"


class Link:
    """A worker instance on an endpoint and the intercommunicator to it."""

    def __init__(self, url, key=None, service=SERVICE, advertise=None):
        endpoint = binding.process_endpoint()
        if endpoint is None:
            raise RuntimeError(
                "workers on endpoints need this process to serve its own endpoint "
                "(a program, not an instance served by mpiws serve)"
            )
        self.url = url.rstrip("/")
        self.domain, self.token = "futures-" + secrets.token_hex(8), secrets.token_urlsafe(24)
        self.urls = [advertise or endpoint.url, self.url]  # rank 0 as the worker reaches it
        instance = endpoint.create_instance(self.domain, 0, self.urls, self.token)
        instance.set_running()
        self.client = _core.DomainClient(self.domain, self.token, self.urls, client_key(key))
        try:
            self.client.start(service, "null", ranks=[1])
        except Exception:
            instance.finish("null")
            raise
        self.instance = instance
        _, inter, inter_local = sides(instance, 1)
        self.comm = _make(inter, inter_local)

    def failure(self):
        """What the worker instance reported when it failed (or "")."""
        try:
            err = json.loads(self.client.status(1, 2.0)).get("error") or {}
        except Exception:  # noqa: BLE001 - an endpoint gone cannot say
            return ""
        return f" (the worker: {err.get('name')}: {err.get('message')})" if err else ""

    def cancel(self):
        """End the worker instance (a task it runs is abandoned)."""
        try:
            self.client.cancel(1)
        except Exception:  # noqa: BLE001 - an endpoint already gone has ended it
            pass


class Workers:
    """An executor's workers on endpoints (and spawned ones beside them):
    each joins with the executor's options synchronised and its
    initializer run, then receives work from the manager."""

    def __init__(self, pool, options):
        self.pool = pool
        self.key = options.pop("key", None)
        self.service = options.pop("endpoint_service", SERVICE)
        # The URL workers reach this process's endpoint at, if not its own
        # (a port forward, a proxy, an emulated link).
        self.advertise = options.pop("advertise", None) or futures.os_environ_get("ADVERTISE")
        self.options = dict(options)  # what each new worker is synchronised with
        self.comms = []  # (comm, its worker keys) to stop at the end
        self.links = {}  # key -> Link, for the workers on endpoints
        self.lock = threading.Lock()
        self.closed = False
        pool.joining = collections.deque()
        pool.workers = self

    def _ready(self, comm, ship_main):
        options = dict(self.options, ship_main=ship_main)
        comm = futures.client_sync(comm, options)
        if not futures.client_init(comm, options):
            futures.client_stop(comm)
            raise RuntimeError("initializer failed")
        return comm

    def _join(self, comm, ranks):
        """``ranks``: key -> the worker's rank in ``comm``'s remote group."""
        with self.lock:
            if self.closed:
                futures.client_stop(comm)
                raise RuntimeError("cannot add workers after shutdown")
            self.comms.append((comm, ranks))
            for key, rank in ranks.items():
                self.pool.joining.append((key, comm, rank))

    def add(self, url):
        """Connect a worker on the endpoint at ``url`` (blocks until it is
        ready); returns its key in ``worker_stats``."""
        link = Link(url, self.key, self.service, self.advertise)
        try:
            comm = self._ready(link.comm, ship_main=True)
        except Exception as exc:
            link.instance.finish("null")
            raise RuntimeError(f"{exc}{link.failure()}") from exc
        with self.lock:
            n = sum(1 for _, ranks in self.comms for k in ranks if k == link.url or str(k).startswith(link.url + " #"))
        key = link.url if n == 0 else f"{link.url} #{n + 1}"
        self._join(comm, {key: 0})
        self.links[key] = link
        return key

    def remove(self, key):
        """End the worker ``key`` on its endpoint: the manager finds it gone
        and its tasks are redone by the others."""
        link = self.links.get(key)
        if link is None:
            raise KeyError(f"no worker on an endpoint is called {key!r}")
        link.cancel()

    def spawn(self, options, n):
        """Spawn ``n`` local workers (as ``MPIPoolExecutor`` without endpoints does)."""
        comm = futures.serialized(futures.client_spawn)(
            options.pop("python_exe", None), options.pop("python_args", None), n, options.pop("mpi_info", None)
        )
        comm = self._ready(comm, ship_main=False)
        self._join(comm, {rank: rank for rank in range(comm.Get_remote_size())})
        return comm.Get_remote_size()

    def stop(self, lost):
        with self.lock:
            self.closed = True
            comms = list(self.comms)
        for comm, ranks in comms:
            futures.client_stop(comm, {rank for key, rank in ranks.items() if key in lost})
        for link in self.links.values():  # this side's instance of each worker's domain ends too
            link.instance.finish("null")


def manage(pool, options):
    """The manager thread of an executor with workers on endpoints."""
    urls = options.pop("endpoints", None) or []
    if isinstance(urls, str):
        urls = [u for u in urls.split(",") if u.strip()]
    workers = Workers(pool, options)
    nlocal = options.pop("max_workers", None)
    lost = set()
    failed = []
    try:
        size = workers.spawn(options, nlocal) if nlocal else 0
        # An endpoint that cannot start its worker (gone, unreachable, refusing)
        # is left out: the others farm the tasks. Only with no worker at all is
        # the executor broken.
        for url in urls:
            try:
                workers.add(url.strip())
                size += 1
            except Exception as exc:  # noqa: BLE001 - reported below
                failed.append((url.strip(), exc))
        if failed and size == 0:
            raise failed[0][1]
    except Exception as exc:  # noqa: BLE001 - the executor reports it
        pool.broken(f"starting the workers failed: {exc}")
        workers.stop(lost)
        return
    for url, exc in failed:
        warnings.warn(f"mpiws.futures: no worker on {url}: {exc}", RuntimeWarning, stacklevel=1)
    queue = pool.setup(size)
    try:
        backoff = futures.Backoff(futures._getopt_backoff(options))
        farm.run_manager(
            {}, options, 0, futures.WorkerSet(), queue, pool, lost, futures.os_environ_get, backoff, futures.serialized
        )
    finally:
        workers.stop(lost)


def worker(comm, params):
    """The farm worker service: serve the executor (rank 0) until it stops."""
    del comm, params
    bound = binding.current()
    if bound.loads is not None:
        raise PermissionError(
            "the futures worker runs the code its clients send: its endpoint must be "
            "served with --pickle full (docs/security.md)"
        )
    _, inter, inter_local = sides(bound.instance, 1)
    futures.server_main_comm(_make(inter, inter_local))


# The executor's module calls this manager for workers on endpoints (it never imports this).
futures._set_endpoints_manager(manage)
