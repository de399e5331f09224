"""Program steps: jobs of deployed programs (``mpiws.jobs``).

A job's inputs are values, files the client names (uploaded), or other
jobs' output files *by reference*: the job's endpoint pulls them from the
producing endpoint itself (or, on the same endpoint, copies them from
disk), so files never pass through the manager. An output is kept as a
``Ref`` until someone needs its value: a service step (the manager relays
it: a program's files are not messages), or the client, at the end.
"""

import os
import tempfile

from ..jobs import File, Program, download, join, remove_upload, upload
from .domain import tail
from .spec import StepFailed
from .values import LocalFile, Ref

#: Bytes given to a job inline (base64 in its spawn request) at most; larger ones are uploaded as a file.
INLINE_MAX = 64 * 1024


class Jobs:
    """Starting and finishing the jobs of a run's program steps."""

    def __init__(self, key=None, scratch=None):
        self.key = key
        self.scratch = scratch or tempfile.mkdtemp(prefix="mpiws-wf-")
        self._types = {}
        self.live = set()  # jobs started and not yet finished: killed if the run fails
        self.made = []  # jobs and uploads of the run: removed from their endpoints at its end

    def spawn(self, url, name, inputs):
        """A job of program ``name`` on endpoint ``url`` with ``inputs`` (name -> value, LocalFile or Ref)."""
        return self.spawn_object(url, name, {k: self._input(v, url) for k, v in inputs.items()})

    def spawn_object(self, url, name, inputs):
        """A job whose inputs are given as they go on the wire (a CWL program's job object)."""
        job = Program(join(url, f"/programs/{name}"), key=self.key).spawn(**inputs)
        self.live.add(job)
        self.made.append(job)
        return job

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
        return {name: (Ref(r["url"], r.get("size", -1)) if r else None) for name, r in results["outputs"].items()}

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

    def types(self, url, name):
        """Output name -> template type of program ``name`` on ``url`` (asked once)."""
        if (url, name) not in self._types:
            usage = Program(join(url, f"/programs/{name}"), key=self.key).usage()
            self._types[(url, name)] = {
                p["name"]: p["type"] for p in usage["parameters"] if p["direction"] in ("out", "in_out")
            }
        return self._types[(url, name)]

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
                else:
                    made.remove()
            except Exception:  # noqa: BLE001 - gone already, or its endpoint is
                pass
        self.made = []
