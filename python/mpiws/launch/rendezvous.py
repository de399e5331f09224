"""``mpiws run --rendezvous URL --size N [--rank R] prog.py``: one rank of a
domain whose ranks someone else started: Slurm's ``srun``, a Kubernetes
Indexed Job, a person at N shells.

Each rank serves its own endpoint and registers its URL at the rendezvous
(``POST URL/rendezvous`` with the shared endpoint key, ``MPIWS_KEY``). Rank 0
serves the rendezvous itself, on the URL's port, unless a launcher does
(``mpiws run --slurm`` sets ``MPIWS_RENDEZVOUS_LAUNCHER``); once every rank
is there, whoever serves it starts the domain and watches it as ``mpiws run
-n N`` does. Each rank runs the program and exits with its status; ranks
other than the one that watches stay until it is gone (so that it reads
their final status), at most ``LINGER_SECONDS``.

As under mpiexec, only rank 0 reads standard input (its own: whoever
started it gave it one); the others read none.
"""

import json
import os
import socket
import sys
import threading
import time

from .. import _core
from ..keys import relay_key
from .domain import Domain, exit_status
from .program import SERVICE
from .worker import run_program

#: Where a rank's number and the domain's size come from, first found first.
RANK_ENV = ("MPIWS_RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX", "PMI_RANK", "OMPI_COMM_WORLD_RANK")
SIZE_ENV = ("MPIWS_SIZE", "SLURM_NTASKS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
#: Set (to anything) by a launcher that serves the rendezvous itself.
LAUNCHER_ENV = "MPIWS_RENDEZVOUS_LAUNCHER"
#: How long ranks may take to gather (pods pending, nodes booting).
TIMEOUT_SECONDS = float(os.environ.get("MPIWS_RENDEZVOUS_TIMEOUT", "600"))
LINGER_SECONDS = 60.0


class Refused(SystemExit):
    def __init__(self, message):
        super().__init__(f"mpiws run: {message}")


def from_env(names, what):
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise Refused(f"{name}={value!r} is not a {what}") from None
    raise Refused(f"no {what} given: use --{what} or set one of {', '.join(names)}")


def endpoint_url(scheme, host, port):
    """The URL peers reach ``host:port`` at (an IPv6 address in brackets)."""
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def advertised_host(host, toward=None):
    """The address peers reach a rank bound to ``host`` at: ``host`` itself;
    for a wildcard bind, the address this machine reaches ``toward`` (host,
    port) from (no packet is sent), else its name's address."""
    if host not in ("0.0.0.0", "::", ""):
        return host
    if toward is not None:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect(toward)
                return s.getsockname()[0]
        except OSError:
            pass  # no route yet (a name not resolving yet): the machine's name
    return socket.gethostbyname(socket.gethostname())


def run_rank(
    program,
    args,
    rendezvous,
    size=None,
    rank=None,
    host="127.0.0.1",
    port=None,
    advertise=None,
    tls_cert=None,
    tls_key=None,
    keep_going=False,
    log=None,
    relay=False,
    via_relay=None,
    form="path",
):
    """Be one rank of ``program`` (a file, or in ``form`` "module" or "code");
    returns the exit status."""
    log = log or (lambda msg: print(f"mpiws run: {msg}", file=sys.stderr, flush=True))
    size = size if size is not None else from_env(SIZE_ENV, "size")
    rank = rank if rank is not None else from_env(RANK_ENV, "rank")
    if not 0 <= rank < size:
        raise Refused(f"rank {rank} is not in a domain of {size} ranks")
    key = os.environ.get("MPIWS_KEY")
    if not key:
        raise Refused("--rendezvous needs the domain's shared endpoint key in MPIWS_KEY")
    try:
        _, where_host, where_port, where_path = _core.parse_url(rendezvous)
    except ValueError as e:
        raise Refused(f"--rendezvous: {e}") from None
    if where_path != "/":
        raise Refused(f"--rendezvous {rendezvous!r} is not http(s)://HOST:PORT")
    serves = rank == 0 and not os.environ.get(LAUNCHER_ENV)
    if serves and port not in (None, where_port):
        raise Refused(f"rank 0 serves the rendezvous, so it listens on the URL's port {where_port}, not --port {port}")
    advertise = advertise or advertised_host(host, (where_host, where_port))
    # Peers and the rendezvous reach this endpoint under names it must accept.
    endpoint = _core.Endpoint(
        host,
        where_port if serves else (port or 0),
        keys=key,
        tls_cert=tls_cert,
        tls_key=tls_key,
        allow_hosts=[where_host, advertise],
        relay=relay,
        via_relay=via_relay,
        relay_key=relay_key(key) if via_relay else None,
    )
    endpoint.deploy(SERVICE)
    # Behind a relay, peers reach this rank at the relay's URL for it.
    me = endpoint.url if via_relay else endpoint_url("https" if tls_cert else "http", advertise, endpoint.port)
    watched = {}
    watcher = None
    if serves:
        endpoint.open_rendezvous(size)
        watcher = threading.Thread(
            target=_watch, args=(endpoint, size, key, program, args, keep_going, log, watched, form), daemon=True
        )
        watcher.start()
    _core.rendezvous_register(rendezvous, key, rank, size, me, TIMEOUT_SECONDS)
    if rank != 0:
        _no_input()
    code = run_program(endpoint, program, args, wait=TIMEOUT_SECONDS, form=form)
    if watcher is not None:
        watcher.join()
        return code or watched.get("code", 1)
    _linger(rendezvous, key)
    return code


def serve_and_watch(endpoint, size, key, program, args, keep_going=False, log=None, gone=None, form="path"):
    """Wait for ``size`` ranks at ``endpoint``'s rendezvous, start the domain
    of ``program`` on them and watch it to its end, then let the ranks go;
    the exit status. ``gone()`` says why the ranks cannot come any more
    (their starter ended), or None."""
    log = log or (lambda msg: print(f"mpiws run: {msg}", file=sys.stderr, flush=True))
    try:
        urls = _gather(endpoint, gone)
        domain = Domain(urls, key=key)
        failed = domain.start(SERVICE, {"program": program, "args": list(args), "form": form}, keep_going)
        statuses, failure = domain.wait(failed, keep_going=keep_going)
        return exit_status(statuses, failure, log, 5.0)
    finally:
        endpoint.close_rendezvous()


def _gather(endpoint, gone):
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        try:
            return endpoint.rendezvous_wait(min(1.0, max(deadline - time.monotonic(), 0.0)))
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
            why = gone() if gone else None
            if why:
                raise RuntimeError(f"{why} before every rank registered") from None


def _watch(endpoint, size, key, program, args, keep_going, log, watched, form):
    try:
        watched["code"] = serve_and_watch(endpoint, size, key, program, args, keep_going, log, form=form)
    except BaseException as e:  # noqa: BLE001 - said, and rank 0 fails
        log(f"the domain did not start: {e}")
        watched["code"] = 1


def _no_input():
    """Standard input at its end, as mpiexec gives ranks other than 0 (a
    person's terminal at each rank, or srun's default copy to every task,
    would otherwise reach them all)."""
    fd = os.open(os.devnull, os.O_RDONLY)
    if fd != 0:  # else fd 0 was closed, and now is /dev/null
        os.dup2(fd, 0)
        os.close(fd)


def _linger(rendezvous, key):
    """Stay (serving this rank's final status) until whoever watches the
    domain says it has ended, or is gone."""
    client = _core.JobsClient(key)
    deadline = time.monotonic() + LINGER_SECONDS
    while time.monotonic() < deadline:
        try:
            if json.loads(client.call("GET", f"{rendezvous.rstrip('/')}/rendezvous", None)).get("closed"):
                return
        except Exception:  # noqa: BLE001 - unreachable: it is gone
            return
        time.sleep(0.2)
