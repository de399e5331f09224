"""Stubs for ``mpiws._core``, the Rust core's Python face: the contract the
Python layer is written against. Errors are raised as ``MPI.Exception``
(registered with ``set_error_type``); ranks are communicator-local; timeouts
are in seconds, ``None`` meaning for ever. Blocking calls release the GIL."""

from collections.abc import Sequence
from typing import Any

ANY_SOURCE: int
ANY_TAG: int
PROC_NULL: int
TAG_UB: int
VERSION: str
#: Collective name -> its algorithms (the first is the fallback).
ALGORITHMS: dict[str, list[str]]

class Error(RuntimeError):
    """A core error raised before ``set_error_type`` (a process that never imports the MPI package)."""

def set_error_type(cls: type) -> None:
    """Register the exception class core errors are raised as: ``cls(error_class, message)``."""

def set_plain_formats(formats: dict[str, int]) -> None:
    """Register the buffer formats (with item sizes) a send or receive takes as given (``Comm.send_plain``)."""

def wait_any(requests: Sequence[Request], timeout: float | None = None) -> bool:
    """Block until one of ``requests`` is complete; False if ``timeout`` passed first."""

def reduce_local(op: tuple[str, str], inbuf: Any, inoutbuf: Any) -> None:
    """``inoutbuf = inbuf op inoutbuf`` with a builtin op (name, element code) on typed buffers."""

class Memory:
    """Bytes at an address, exported through the buffer protocol (``MPI.buffer`` subclasses it)."""
    def __init__(self, *args: Any) -> None: ...
    def attach(self, obj: Any, readonly: bool | None = None) -> None:
        """Name ``obj``'s (C-contiguous) memory, read-only if asked or if it is."""
    def at(self, address: int, nbytes: int, readonly: bool = False) -> None:
        """Name ``nbytes`` at ``address``, owned by no object."""
    def release(self) -> None:
        """Forget the memory (views still open keep it alive): empty again."""
    address: int
    nbytes: int
    readonly: bool
    obj: Any

class Endpoint:
    """An HTTP server hosting deployed services and the instances of any number of domains."""

    url: str
    port: int
    workdir: str
    tls_fingerprint: str | None
    tls_certificate_file: str | None
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        max_message: int | None = None,
        max_upload: int | None = None,
        workdir: str | None = None,
        keys: str | None = None,
        allow_hosts: list[str] = [],
        allow_origins: list[str] = [],
        max_connections: int | None = None,
        max_connections_per_address: int | None = None,
        max_buffered: int | None = None,
        reserved_connections: int | None = None,
        header_timeout: float | None = None,
        body_timeout: float | None = None,
        max_binding: int | None = None,
        max_ranks: int | None = None,
        max_instances: int | None = None,
        max_instances_per_key: int | None = None,
        fetch_allow: list[str] = [],
        max_fetch: int | None = None,
        fetch_timeout: float | None = None,
        max_disk: int | None = None,
        max_disk_per_key: int | None = None,
        max_jobs: int | None = None,
        max_jobs_per_key: int | None = None,
        max_uploads_per_key: int | None = None,
        job_ttl: float | None = None,
        max_session_disk: int | None = None,
        session_idle: float | None = None,
        max_sessions_per_key: int | None = None,
        cwl_runner: list[str] = [],
        cwl_client_requirements: bool | None = None,
        cwl_runner_forks: list[str] = [],
        cwl_runner_wire: int | None = None,
        max_spawn_body: int | None = None,
        sandbox: list[str] | None = None,
        max_instance_memory: int | None = None,
        max_instances_memory: int | None = None,
        max_instances_memory_per_key: int | None = None,
        max_instance_time: float | None = None,
        spare_instances: int | None = None,
        instance_linger: float | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        tls_self_signed: bool = False,
        tls_cert_out: str | None = None,
        tls_handshake_timeout: float | None = None,
        relay: bool = False,
        relay_max_connections: int | None = None,
        max_dashboard_streams: int | None = None,
        via_relay: str | None = None,
        relay_key: str | None = None,
        tunnel_key: str | None = None,
    ) -> None:
        """``keys``: a keys file's text (none: the service interface refuses
        everyone); ``sandbox``: the command that starts an instance's child
        process (``mpiws.service.sandbox.command``), None: instances are
        queued for ``next_run``; ``relay``: serve as a relay for endpoints
        that accept no connections; ``via_relay``: be one, reached at that
        relay URL (``http(s)://HOST:PORT/relay/NAME``), registered there with
        ``relay_key``, its ``url`` that one pinned (``#sha256=PIN``) with its
        tunnel identity, whose key ``tunnel_key`` keeps (a file, made if
        missing; None: a new key each start); the rest: the endpoint's limits (defaults in
        docs/security.md)."""
    def close(self) -> None:
        """Close the endpoint: no connection is served any more (its port is free), its jobs and spare
        instance processes end, and a work directory or certificate it made is removed."""
    def deploy(self, name: str) -> None: ...
    def deploy_program(self, name: str, template: str) -> None:
        """Deploy a command-line program as a service, described by its one-line template."""
    def deploy_program_cwl(self, name: str, document: str) -> None:
        """Deploy a CWL v1.2 CommandLineTool (its document as JSON text) as a program."""
    def next_run(self, timeout: float | None = None) -> Instance | None:
        """The next instance a *run* request created (to be started by the caller)."""
    def open_rendezvous(self, size: int) -> None:
        """Open this endpoint's rendezvous (``POST /rendezvous``) for a domain of ``size`` ranks."""
    def rendezvous_wait(self, timeout: float) -> list[str]:
        """Every rank's URL once all registered; TimeoutError naming the missing ranks."""
    def close_rendezvous(self) -> None:
        """The gathered domain has ended: its ranks (watching ``GET /rendezvous``) may go."""
    def create_instance(
        self, domain: str, rank: int, endpoints: list[str], token: str, service: str = "", params: str = "null"
    ) -> Instance:
        """An instance created without a *run* request (singleton domains)."""
    def describe(self) -> str:
        """``GET /`` as JSON text."""
    def publish(self, name: str, kind: str, document: str) -> None:
        """Show ``document`` (JSON text) on the dashboard as run ``name`` of ``kind``."""
    def watch_domain(self, domain: str, bearer: str, endpoints: list[str]) -> None:
        """Show a domain hosted elsewhere on the dashboard (rank i at ``endpoints[i]``)."""

class Instance:
    """One rank of one domain on an endpoint."""

    domain: str
    rank: int
    size: int
    service: str
    endpoints: list[str]
    params: str
    state: str
    def world(self) -> Comm: ...
    def self_comm(self) -> Comm: ...
    def set_running(self) -> None: ...
    def finish(self, result: str) -> None:
        """The service returned; ``result`` is JSON text."""
    def fail(self, error_class: int, name: str, message: str, traceback: str) -> None: ...
    def cancel(self) -> None: ...
    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every send is acknowledged or failed."""
    def unexpected_bytes(self) -> int: ...
    def peak_unexpected_bytes(self) -> int:
        """The most bytes unexpected messages ever held at once (kept near MPIWS_MAX_UNEXPECTED by pushing back on senders)."""

class Comm:
    """A context and a group over an instance."""

    rank: int
    size: int
    context: int
    group: list[int]
    endpoints: list[str]
    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every send of this rank is acknowledged or failed; False if ``timeout`` passed first."""
    def isend(
        self,
        dest: int,
        tag: int,
        buffers: Sequence[Any],
        split: bool = False,
        sync: bool = False,
        tell_match: bool = False,
    ) -> Request:
        """Send ``buffers`` back to back; ``split`` keeps their boundaries for the receiver;
        ``tell_match``: learn when a receive took a standard send (``watch_matched``)."""
    def send(
        self,
        dest: int,
        tag: int,
        buffers: Sequence[Any],
        split: bool = False,
        sync: bool = False,
        timeout: float | None = None,
    ) -> None:
        """``isend`` and its wait in one call; ERR_TIMEOUT if not sent within ``timeout`` s."""
    def send_plain(self, dest: int, tag: int, buffer: Any, sync: bool = False, timeout: float | None = None) -> bool:
        """``send`` of a buffer given alone whose format is registered (``set_plain_formats``);
        False, having done nothing, when the buffer rules must read ``buffer``."""
    def recv_plain(
        self, source: int, tag: int, buffer: Any, timeout: float | None = None
    ) -> tuple[int, int, int] | None:
        """``recv`` into a buffer given alone, as ``send_plain``: (source, tag, bytes received), or None."""
    def irecv_plain(self, source: int, tag: int, buffer: Any) -> Request | None:
        """``irecv`` into a buffer given alone, if the buffer rules take it as given (else None, nothing done)."""
    def irecv(self, source: int, tag: int, buffer: Any | None = None) -> Request:
        """Post a receive; a large message may be read straight into ``buffer``."""
    def sendrecv(
        self,
        dest: int,
        sendtag: int,
        buffers: Sequence[Any],
        source: int,
        recvtag: int,
        buffer: Any | None = None,
        timeout: float | None = None,
        split: bool = False,
    ) -> Message:
        """Post the receive, send once this thread reads the source's stream, wait for both;
        ERR_TIMEOUT if nothing matched within ``timeout`` (the receive is withdrawn)."""
    def recv(self, source: int, tag: int, buffer: Any | None = None, timeout: float | None = None) -> Message:
        """``irecv`` and its wait in one call; ERR_TIMEOUT (receive withdrawn) if nothing matched within ``timeout`` s."""
    def collective(
        self,
        name: str,
        root: int = 0,
        data: Any | None = None,
        blocks: Sequence[Any] | None = None,
        op: tuple[str, str] | None = None,
        counts: list[int] | None = None,
        length: int | None = None,
        sources: list[tuple[int, int]] | None = None,
        destinations: list[tuple[int, int]] | None = None,
        algorithm: str | None = None,
        hint: int | None = None,
        nonblocking: bool = False,
        timeout: float | None = None,
    ) -> Request:
        """Run (or start) a collective; the Request's Message holds the result blocks as parts.
        On an intercommunicator ``root`` may be ``ROOT`` (-3) or ``PROC_NULL``; ``sources`` and
        ``destinations``: a neighbourhood exchange's (rank, key) edges (``name="neighbor"``)."""
    def probe(self, source: int, tag: int, timeout: float | None = None) -> tuple[int, int, int] | None:
        """(source, tag, nbytes) of the next matching message; ``timeout=0`` only looks."""
    def next_context(self, salt: int = 0) -> int: ...
    def group_context(self, group: list[int], tag: int) -> int:
        """Context for a communicator over ``group`` that only its members create."""
    def derive(self, context: int, group: list[int]) -> Comm | None: ...
    def derive_inter(self, context: int, local_group: list[int], remote_group: list[int]) -> Comm | None:
        """An intercommunicator: point-to-point ranks name ``remote_group``'s members."""
    remote_group: list[int] | None
    def partitioned(self, tag: int) -> Comm:
        """Where partitioned point-to-point with ``tag`` travels."""
    def world_rank(self, local: int) -> int: ...
    def local_rank(self, world: int) -> int | None: ...
    def allgather_bytes(self, data: bytes, timeout: float | None = None) -> list[bytes]: ...

class Request:
    is_recv: bool
    def wait(self, timeout: float | None = None) -> bool: ...
    def done(self) -> bool: ...
    def take(self) -> Message | None:
        """The outcome, once: None for a send, a Message for a receive; raises the operation's error."""
    def peek(self) -> tuple[int, int, int] | None:
        """(source, tag, nbytes) of a completed receive whose outcome is not taken yet, else None."""
    def cancel(self) -> bool: ...
    def withdraw(self) -> bool:
        """A send that timed out: take it back unless a receive took it (a round trip to the
        receiver); True if withdrawn, never to be received. A receive: ``cancel``."""
    def expire(self, what: str) -> None:
        """The timeout rule, the core's: the wait for ``what`` ran out; raise ERR_TIMEOUT if the
        operation was withdrawn (or cannot be: a collective), else return once it completed after all."""
    def watch(self, events: Events, token: int) -> None:
        """Push ``token`` to ``events`` when the operation completes (at once if it has)."""
    def watch_stored(self, events: Events, token: int) -> bool:
        """A tracked (non-blocking) send: push ``token`` once the receiver stored it, asking it to say so now."""
    def stored_state(self) -> tuple[bool, str | None, int] | None:
        """None until a tracked send was stored or failed; then (ok, error message, error class)."""
    def watch_matched(self, events: Events, token: int) -> bool:
        """A tracked standard send: push ``token`` once a receive took it; unless started with
        ``tell_match``, the receiver is asked now (a long poll). False: not a tracked standard send."""
    def matched_state(self) -> tuple[bool, str | None, int] | None:
        """As ``stored_state``, for the match (None until ``watch_matched`` asked)."""

class Events:
    """Tokens of completed operations, for the handler thread."""
    def __init__(self) -> None: ...
    def next(self, timeout: float | None = None, reading: Request | None = None) -> int | None:
        """The next token, waiting (GIL released) up to ``timeout`` seconds,
        reading meanwhile the stream the receive ``reading`` expects its message on."""
    def push(self, token: int) -> None: ...

class View:
    """Received bytes lent read-only through the buffer protocol, not copied."""
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class Message:
    source: int
    tag: int
    parts: list[int]
    cancelled: bool
    nbytes: int
    def bytes(self) -> bytes: ...
    def view(self) -> View:
        """The whole payload, read-only, not copied where it came in one piece."""
    def split(self) -> list[Any]:
        """The parts: the first a read-only ``View``, the others bytearrays."""
    def blocks(self) -> list[bytes]:
        """Each part as bytes (a collective's result blocks)."""
    def copy_into(self, buffer: Any, offsets: list[int] | None = None) -> int:
        """Copy into a writable buffer (part i at byte ``offsets[i]`` if given); MPI_ERR_TRUNCATE if it does not fit."""

class DomainClient:
    """Start, watch and cancel a domain on running endpoints (the launcher's side)."""

    def __init__(self, domain: str, token: str, endpoints: list[str], key: str | None = None) -> None:
        """``key``: the endpoint key that may create instances (*run*) on every endpoint."""
    def start(self, service: str, params: str, ranks: list[int] | None = None) -> None:
        """*run* on every endpoint, or on those of ``ranks`` (the others' instances their processes create)."""
    def start_each(self, service: str, params: str) -> list[tuple[int, BaseException]]:
        """*run* on every endpoint, each on its own: the ranks that could not be started, with why."""
    def status(self, rank: int, wait: float | None = None) -> str: ...
    def cancel(self, rank: int) -> str: ...

class JobsClient:
    """The HTTP calls a client of deployed programs makes; JSON as strings."""

    def __init__(self, key: str | None = None) -> None:
        """``key``: the endpoint key sent with every call (not with downloads: a file's URL is its capability)."""
    def call(self, method: str, url: str, body: str | None = None) -> str: ...
    def upload(self, url: str, path: str, put: bool = False) -> str:
        """POST (``put``: PUT) the file at ``path`` to ``url`` (streamed); the JSON answer."""
    def download(self, url: str, path: str, keyed: bool = False) -> int:
        """GET ``url`` into the file at ``path`` (streamed; ``keyed``: with the key); its size."""

def sandbox_begin(endpoint: Endpoint) -> Instance:
    """In an instance's child process: create the instance from the binding
    the endpoint writes on stdin, on ``endpoint``, and report ready."""

def sandbox_report(instance: Instance) -> None:
    """In an instance's child process: report the instance's final status."""

def rendezvous_register(rendezvous: str, key: str, rank: int, size: int, url: str, timeout: float) -> None:
    """Register this rank's endpoint ``url`` at the rendezvous, trying again
    while it is unreachable or not open yet, for up to ``timeout`` seconds."""

def parse_url(text: str, endpoint: bool = False) -> tuple[str, str, int, str]:
    """``text`` read by the core's one URL parser: (scheme, host, port, path);
    ``endpoint``: an endpoint's URL (an origin, or one behind a relay).
    ValueError says what is wrong (a port out of range, a user name, ...)."""

def parse_port(text: str) -> int:
    """A TCP port a user names, 1 to 65535; ValueError if not."""

def cwl_eval(text: str, context: str, condition: bool = False) -> str:
    """A CWL parameter reference evaluated against ``context`` (JSON); the value as JSON.
    ``condition`` also allows ``!`` and one comparison with a literal (a step's ``when``)."""

def endpoint_settings() -> str:
    """Every endpoint setting (``Endpoint``'s keywords) with its default, as JSON text."""

def exit_on_signals() -> None:
    """End this process on SIGTERM or SIGINT even while service code holds the
    GIL (call before any other thread starts); its endpoints are closed first."""
