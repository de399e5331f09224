"""Program steps: jobs of deployed programs (``mpiws.jobs``).

A job's inputs are values, files the client names (uploaded), or other
jobs' output files *by reference*: the job's endpoint pulls them from the
producing endpoint itself (or, on the same endpoint, copies them from
disk), so files never pass through the manager. An output is kept as a
``Ref`` until someone needs its value: a service step (the manager relays
it: a program's files are not messages), or the client, at the end.

With ``sessions`` (``mpiws workflow run --session``), the template
programs' jobs on one endpoint run in one session of the run's: every file
they read or write has a name there of the run's choosing (unique: jobs
run side by side), and an output another job there reads is read where it
lies, not even copied. An ``in_out`` file is the job's own copy.
"""

import itertools
import os
import re
import tempfile
import threading

from ..jobs import File, Program, Session, SessionFile, download, join, remove_upload, upload
from .domain import tail
from .spec import StepFailed
from .values import LocalFile, Ref

#: Bytes given to a job inline (base64 in its spawn request) at most; larger ones are uploaded as a file.
INLINE_MAX = 64 * 1024


class Jobs:
    """Starting and finishing the jobs of a run's program steps."""

    def __init__(self, key=None, scratch=None, sessions=False):
        self.key = key
        self.scratch = scratch or tempfile.mkdtemp(prefix="mpiws-wf-")
        self._usage = {}
        self.sessions = {} if sessions else None  # endpoint URL -> the run's Session there
        self._sessions_lock = threading.Lock()
        self._fresh = itertools.count()
        self.live = set()  # jobs started and not yet finished: killed if the run fails
        self.made = []  # jobs and uploads of the run: removed from their endpoints at its end

    def spawn(self, url, name, inputs):
        """A job of program ``name`` on endpoint ``url`` with ``inputs`` (name -> value, LocalFile or Ref)."""
        params = self.params(url, name) if self.sessions is not None else None
        if not params:  # no sessions, or a CWL program
            return self.spawn_object(url, name, {k: self._input(v, url) for k, v in inputs.items()})
        session = self.session(url)
        given = {}
        for k, v in inputs.items():
            p = params.get(k)
            given[k] = self._in_session(v, session, name, p) if p and p["placement"] == "file" else self._input(v, url)
        for p in params.values():
            if p["direction"] == "out" and p["placement"] == "file":
                given[p["name"]] = SessionFile(self._name(name, p["name"]))
        return self.spawn_object(url, name, given, session)

    def spawn_object(self, url, name, inputs, session=None):
        """A job whose inputs are given as they go on the wire (a CWL program's job object)."""
        job = Program(join(url, f"/programs/{name}"), key=self.key, session=session).spawn(**inputs)
        job.session = session
        self.live.add(job)
        self.made.append(job)
        return job

    def session(self, url):
        """The run's session on endpoint ``url`` (made the first time)."""
        with self._sessions_lock:
            if url not in self.sessions:
                self.sessions[url] = Session(url, key=self.key)
                self.made.append(self.sessions[url])
            return self.sessions[url]

    def _name(self, program, param):
        """A name for a file in a session, the run's own and no other job's."""
        return re.sub(r"[^A-Za-z0-9._-]", "_", f"f{next(self._fresh)}-{program}.{param}")

    def _in_session(self, v, session, program, p):
        """A file input of a job in ``session``: a file already there read where it lies, else written there."""
        if isinstance(v, Ref) and v.session and v.session[0] == session.url and p["direction"] == "in":
            return SessionFile(v.session[1])
        name = self._name(program, p["name"])
        if isinstance(v, Ref):
            return SessionFile(name, File(v.url))
        if isinstance(v, LocalFile):
            session.upload(v.path, name)
            return SessionFile(name)
        if isinstance(v, (bytes, bytearray)) and len(v) > INLINE_MAX:
            fd, path = tempfile.mkstemp(dir=self.scratch)
            with os.fdopen(fd, "wb") as f:
                f.write(v)
            try:
                session.upload(path, name)
            finally:
                os.unlink(path)
            return SessionFile(name)
        if isinstance(v, (list, tuple, dict)):
            raise TypeError("a program's parameter takes one value or file, not a list (scatter over it instead)")
        return SessionFile(name, v)

    def upload(self, url, path):
        """A local file uploaded to endpoint ``url`` for the run's jobs there; its URL."""
        got = upload(url, path, key=self.key)["url"]
        self.made.append(got)
        return got

    def _input(self, v, url):
        if isinstance(v, Ref):
            return File(v.url)
        if isinstance(v, LocalFile):
            return File(self.upload(url, v.path))
        if isinstance(v, (bytes, bytearray)) and len(v) > INLINE_MAX:
            fd, path = tempfile.mkstemp(dir=self.scratch)
            with os.fdopen(fd, "wb") as f:
                f.write(v)
            try:
                return File(self.upload(url, path))
            finally:
                os.unlink(path)
        if isinstance(v, (list, tuple, dict)):
            raise TypeError("a program's parameter takes one value or file, not a list (scatter over it instead)")
        return v

    def finish(self, step, job, raw=False):
        """Wait for ``job``; its outputs by reference ({name: Ref}; ``raw``: as the endpoint
        gives them, a CWL output object), or StepFailed with its stderr's tail."""
        status = job.wait()
        self.live.discard(job)
        results = job.results(by="reference")
        if status["state"] != "done":  # the endpoint's word: a CWL tool's successCodes are its to apply
            why = (
                "killed"
                if status["state"] == "killed"
                else status.get("error") or f"exit code {status.get('exit_code')}"
            )
            detail = tail(self._text(results.get("stderr")))
            raise StepFailed(step, f"{why} (job {job.url})", detail, status.get("exit_code"))
        if raw:
            return results["outputs"]
        where = lambda r: (job.session.url, r["session"]) if getattr(job, "session", None) and "session" in r else None  # noqa: E731
        return {
            name: (Ref(r["url"], r.get("size", -1), where(r)) if r else None) for name, r in results["outputs"].items()
        }

    def _text(self, entry):
        if not entry:
            return ""
        path = os.path.join(self.scratch, "stderr-" + os.path.basename(entry["url"].rstrip("/")))
        try:
            download(entry["url"], path)
            with open(path, "rb") as f:
                return f.read()[-16384:].decode(errors="replace")
        except Exception:  # noqa: BLE001 - its stderr is a courtesy
            return ""

    def value(self, ref, kind):
        """A job output's value for a service or the client: ``kind`` is the template's type
        (int, float: a number; string, xml: text; binary: bytes)."""
        if not isinstance(ref, Ref):
            return ref
        data = self.fetch(ref)
        if kind == "int":
            return int(data.decode().strip())
        if kind == "float":
            return float(data.decode().strip())
        if kind in ("string", "xml"):
            return data.decode(errors="replace")
        return data

    def fetch(self, ref):
        fd, path = tempfile.mkstemp(dir=self.scratch)
        os.close(fd)
        try:
            download(ref.url, path)
            with open(path, "rb") as f:
                return f.read()
        finally:
            os.unlink(path)

    def relay(self, ref):
        """A job output through the client (the mediated form): downloaded here, uploaded again by the next job."""
        fd, path = tempfile.mkstemp(dir=self.scratch)
        os.close(fd)
        download(ref.url, path)
        return LocalFile(path)

    def params(self, url, name):
        """Parameter name -> parameter of template program ``name`` on ``url`` (asked once); {} for a CWL program."""
        if (url, name) not in self._usage:
            usage = Program(join(url, f"/programs/{name}"), key=self.key).usage()
            self._usage[(url, name)] = {p["name"]: p for p in usage.get("parameters", [])}
        return self._usage[(url, name)]

    def types(self, url, name):
        """Output name -> template type of program ``name`` on ``url``."""
        return {n: p["type"] for n, p in self.params(url, name).items() if p["direction"] in ("out", "in_out")}

    def kill_all(self):
        for job in list(self.live):
            try:
                job.kill()
            except Exception:  # noqa: BLE001 - ended already
                pass

    def remove_all(self):
        """At the run's end (its outputs saved): every job and upload of it removed from its endpoint, so that
        runs do not fill an endpoint's disk until their files expire."""
        for made in self.made:
            try:
                if isinstance(made, str):  # an upload's URL
                    remove_upload(made, key=self.key)
                elif isinstance(made, Session):
                    made.delete()
                else:
                    made.remove()
            except Exception:  # noqa: BLE001 - gone already, or its endpoint is
                pass
        self.made = []
