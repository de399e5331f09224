"""Legacy programs as services: the client side.

A server deploys a command-line program with a one-line template
(``mpiws serve --program 'add=add.sh [in:val:x:int] [in:file:y:int] [out:file:result:int]'``);
a client then runs jobs of it::

    from mpiws.jobs import Program, File
    add = Program("http://127.0.0.1:8001/programs/add")
    add.call(x=1, y=File("y.txt"))["outputs"]["result"]      # spawn, wait, results
    job = add.spawn(x=1, y="41")                            # or step by step
    job.wait(); job.results(by="reference"); job.kill()

A file input is its text (``str``), its bytes (``bytes``) or a :class:`File`:
a local path, uploaded to the program's endpoint first, or a URL the job
pulls itself (another job's output, say: data then goes from service to
service, never through the client).

In a :class:`Session`, jobs share a directory on the endpoint: a file
parameter (input or output) names a session file, and one job's output is
the next one's input where it lies, with no transfer at all::

    with Session("http://127.0.0.1:8001") as s:                 # deleted at the end
        s.upload("big.dat", "raw")
        s.program("filter").call(data=s.file("raw"), result=s.file("filtered"))
        s.program("stats").call(data=s.file("filtered"), result=s.file("stats"))
        s.download("stats", "stats.txt")
"""

import base64
import functools
import json
import os
import time

from . import _core
from .keys import client_key


@functools.cache
def _client_with(key):
    return _core.JobsClient(key)


def _client(key=None):
    """A client (one connection pool per key) sending the endpoint key (``mpiws.keys.client_key``)."""
    return _client_with(client_key(key))


def _call(method, url, body=None, key=None):
    return json.loads(_client(key).call(method, url, None if body is None else json.dumps(body)))


class File:
    """A file input: a local ``path`` (uploaded), or an ``http://`` URL (pulled by the job)."""

    def __init__(self, path_or_url):
        self.location = os.fspath(path_or_url)

    def __repr__(self):
        return f"File({self.location!r})"

    @property
    def is_url(self):
        return self.location.startswith(("http://", "https://"))


def join(url, suffix):
    """``url`` with ``suffix`` (a path or a query) added before its pin, if it
    has one (a relayed endpoint's ``#sha256=PIN``, which stays last)."""
    base, sep, pin = url.partition("#")
    return base.rstrip("/") + suffix + sep + pin


class SessionFile:
    """A session's file, named for a job's file parameter (input or output): ``Session.file(name)``;
    with a ``source`` (text, bytes or a :class:`File`), the input written there under that name first."""

    def __init__(self, name, source=None):
        self.name = name
        self.source = source

    def __repr__(self):
        return f"SessionFile({self.name!r})" if self.source is None else f"SessionFile({self.name!r}, {self.source!r})"


class Program:
    """A deployed program, named by its URL ``{endpoint}/programs/{name}``;
    ``key`` is the endpoint key to use (default: ``mpiws.keys.client_key``);
    ``session``: its jobs run in that :class:`Session` (``Session.program``)."""

    def __init__(self, url, key=None, session=None):
        self.url = join(url, "")
        self.key = key
        self.session = session
        unpinned, hash_, pin = self.url.partition("#")
        base, sep, self.name = unpinned.rpartition("/programs/")
        if not sep or not self.name:
            raise ValueError(f"a program's URL is ENDPOINT/programs/NAME, not {url!r}")
        self.endpoint = base + hash_ + pin

    def __repr__(self):
        return f"Program({self.url!r})"

    def usage(self):
        """The interface: ``{"name", "template", "parameters": [{"name", "direction", "placement", "type"}]}``."""
        return _call("GET", self.url, key=self.key)

    def spawn(self, **inputs):
        """Start a job; returns at once."""
        job = _call("POST", join(self.url, "/jobs"), self._body(inputs), key=self.key)
        return Job(job["url"], key=self.key)

    def call(self, by="value", **inputs):
        """Start a job, wait for it to end, return its results (see :meth:`Job.results`)."""
        return _call("POST", join(self.url, f"/call?by={by}"), self._body(inputs), key=self.key)

    def _body(self, inputs):
        body = {"inputs": {name: self._encode_one(v) for name, v in inputs.items()}}
        if self.session is not None:
            body["session"] = self.session.id
        return body

    def _encode_one(self, v):
        if isinstance(v, SessionFile):
            if v.source is None:
                return {"session": v.name}
            source = self._encode_one(v.source)
            if not isinstance(source, dict):  # a file's text
                source = {"base64": base64.b64encode(str(source).encode()).decode()}
            return {**source, "session": v.name}
        if isinstance(v, File):
            if v.is_url:
                return {"url": v.location}
            return {"url": upload(self.endpoint, v.location, key=self.key)["url"]}
        if isinstance(v, (bytes, bytearray, memoryview)):
            return {"base64": base64.b64encode(bytes(v)).decode()}
        return v


class Job:
    """One job of a program, named by its URL ``{endpoint}/jobs/{id}``."""

    def __init__(self, url, key=None):
        self.url = join(url, "")
        self.key = key
        self.id = self.url.partition("#")[0].rpartition("/")[2]

    def __repr__(self):
        return f"Job({self.url!r})"

    def status(self, wait=None):
        """``{"state": staging|running|done|failed|killed, "exit_code", "error", ...}``;
        ``wait`` long-polls up to that many seconds for the job to end."""
        return _call("GET", self.url if wait is None else join(self.url, f"?wait={wait}"), key=self.key)

    def wait(self, timeout=None):
        """The status once the job has ended; after ``timeout`` seconds, as it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 60.0 if deadline is None else max(0.0, min(60.0, deadline - time.monotonic()))
            s = self.status(wait=left)
            if s["state"] in ("done", "failed", "killed") or (deadline is not None and time.monotonic() >= deadline):
                return s

    def results(self, by="value"):
        """``{"state", "exit_code", "error", "outputs": {name: value}, "stdout", "stderr"}``.
        By value an output is a number or text (``{"base64": ...}`` for binary);
        by reference, or over 16 MiB, ``{"url", "size"}``."""
        return _call("GET", join(self.url, f"/results?by={by}"), key=self.key)

    def kill(self):
        """End the job (if it has not ended); its status afterwards."""
        return _call("DELETE", self.url, key=self.key)

    def remove(self):
        """End the job if it runs, and remove it and its files from its endpoint (their disk is given back)."""
        _client(self.key).call("DELETE", join(self.url, "?remove=true"), None)

    def download(self, name, path):
        """Save output file ``name`` (or ``stdout``/``stderr``) to ``path``; its size."""
        return download(join(self.url, f"/{name}" if name in ("stdout", "stderr") else f"/files/{name}"), path)


class Session:
    """A session on ``endpoint``: a directory of the caller's there, where its jobs read and write
    files by name. ``disk`` (bytes) and ``idle`` (seconds) ask for less than the endpoint's bounds;
    it is removed after ``idle`` seconds unused, or by :meth:`delete` (at the end of a ``with``).
    ``url``: an existing session's, instead of making one."""

    def __init__(self, endpoint=None, key=None, disk=None, idle=None, url=None):
        self.key = key
        if url is None:
            asked = {k: v for k, v in (("disk", disk), ("idle", idle)) if v is not None}
            url = _call("POST", join(endpoint, "/sessions"), asked, key=key)["url"]
        self.url = join(url, "")
        unpinned, hash_, pin = self.url.partition("#")
        base, sep, self.id = unpinned.rpartition("/sessions/")
        if not sep or not self.id:
            raise ValueError(f"a session's URL is ENDPOINT/sessions/ID, not {url!r}")
        self.endpoint = base + hash_ + pin

    def __repr__(self):
        return f"Session({self.url!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.delete()

    def status(self):
        """``{"id", "url", "disk", "used", "idle", "expires", "jobs", ...}``."""
        return _call("GET", self.url, key=self.key)

    def program(self, name):
        """Program ``name`` of the session's endpoint, its jobs run in the session."""
        return Program(join(self.endpoint, f"/programs/{name}"), key=self.key, session=self)

    @staticmethod
    def file(name, source=None):
        """The session's file ``name``, for a job's file parameter (input: read there; output: written there);
        ``source``: an input's text, bytes or :class:`File`, written there as ``name`` first."""
        return SessionFile(name, source)

    def files(self):
        """The session's files: ``[{"name", "size", "url"}]``."""
        return _call("GET", join(self.url, "/files"), key=self.key)["files"]

    def upload(self, path, name=None):
        """Put the local file at ``path`` in the session as ``name`` (default: its own name), streamed."""
        name = name or os.path.basename(os.fspath(path))
        return json.loads(_client(self.key).upload(join(self.url, f"/files/{name}"), os.fspath(path), put=True))

    def download(self, name, path):
        """Save the session's file ``name`` to ``path`` (streamed); its size."""
        return _client(self.key).download(join(self.url, f"/files/{name}"), os.fspath(path), keyed=True)

    def remove(self, name):
        """Remove the session's file ``name``."""
        _client(self.key).call("DELETE", join(self.url, f"/files/{name}"), None)

    def delete(self):
        """Remove the session: its running jobs are killed, its jobs and files removed."""
        _client(self.key).call("DELETE", self.url, None)


def upload(endpoint, path, key=None):
    """Upload a local file to ``endpoint`` (streamed, any size): ``{"url", "size"}``."""
    return json.loads(_client(key).upload(f"{endpoint.rstrip('/')}/files", os.fspath(path)))


def remove_upload(url, key=None):
    """Remove a file ``upload`` made (its URL) from its endpoint."""
    _client(key).call("DELETE", url, None)


def download(url, path):
    """Save the file at ``url`` to ``path`` (streamed, any size); its size.
    A file's URL is its capability: no key is needed."""
    return _client().download(url, os.fspath(path))
