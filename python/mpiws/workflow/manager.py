"""One run of a workflow: its inputs bound, a local endpoint if some step
needs one, the direct or the mediated form executed, the output object
and the run record made. ``run`` is the Python entry point; ``mpiws
workflow run`` calls it."""

import os
import shutil
import tempfile
import threading

from . import direct, mediated
from .graph import step_edges
from .live import shown
from .local import LocalEndpoint, deployed_name
from .programs import Jobs
from .record import Record, kept
from .spec import Workflow, load
from .values import LocalFile, Ref, bind, nbytes, output_object


class Run:
    """What both forms share: where each step runs, the jobs, the record, how values cross the manager."""

    def __init__(self, wf, values, mode, key=None, advertise=None, progress=True, sessions=False, board=None):
        self.wf, self.values, self.mode = wf, values, mode
        self.key, self.advertise = key, advertise
        self.board = board
        self.record = Record(wf, mode, progress, edges=step_edges(wf))
        self.scratch = tempfile.mkdtemp(prefix="mpiws-wf-")
        self.jobs = Jobs(key, self.scratch, sessions)
        self.local = None
        self._count = threading.Lock()
        self._keys_file = None
        if any(s.local for s in wf.steps.values()):
            keys = None
            if key:  # the local endpoint takes the key given for the others
                fd, keys = tempfile.mkstemp(dir=self.scratch, prefix="keys-")
                with os.fdopen(fd, "w") as f:
                    f.write(key + "\n")
            self.local = LocalEndpoint(wf, keys=keys)

    def close(self):
        self.jobs.remove_all()
        if self.local is not None:
            self.local.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def show(self, domain):
        """The run's dashboard, if any, shows the ranks of ``domain`` (a ``StepDomain``)."""
        if self.board is not None:
            self.board.watch(domain.domain, domain.token, domain.urls)

    def url(self, step):
        return step.endpoint or self.local.url

    def deployed(self, step):
        """The name ``step``'s service or program has on its endpoint."""
        return step.target if step.endpoint else deployed_name(step)

    def count(self, value):
        """``value`` passed between the manager and a step."""
        n = (
            value.size
            if isinstance(value, Ref)
            else os.path.getsize(value.path)
            if isinstance(value, LocalFile)
            else nbytes(value)
        )
        with self._count:
            self.record.manager_bytes += n

    def for_service(self, v):
        """A value as a service receives it: a file's bytes."""
        if isinstance(v, list):
            return [self.for_service(x) for x in v]
        return v.read() if isinstance(v, LocalFile) else v

    def service_value(self, src, v):
        """A program step's output (``src``) as a service receives it: its value, fetched by the manager."""
        step = self.wf.steps[src.step]
        if isinstance(v, list):
            return [self.service_value(src, x) for x in v]
        if isinstance(v, Ref):
            self.count(v)
        kind = self.jobs.types(self.url(step), self.deployed(step)).get(src.name, "binary")
        return self.jobs.value(v, kind)

    def program_unit(self, step, index, inputs, relayed=False):
        """One job of a program step; its outputs by reference."""
        for v in inputs.values():  # what the manager uploads
            if isinstance(v, (LocalFile, bytes, bytearray)):
                self.count(v)
        job = self.jobs.spawn(self.url(step), self.deployed(step), inputs)
        self.record.unit(step.name, index, "running", job=job.url)
        try:
            outputs = self.jobs.finish(step.name, job)
        except Exception:
            self.record.unit(step.name, index, "failed", job=job.url)
            raise
        self.record.unit(step.name, index, "done", job=job.url)
        if relayed:  # mediated: every result comes back to the manager
            outputs = {name: self.fetched(step, name, ref) for name, ref in outputs.items()}
        return outputs

    def fetched(self, step, name, ref):
        """A job's output here: a value for int, float and string outputs, else a local copy of the file."""
        if isinstance(ref, list):
            return [self.fetched(step, name, r) for r in ref]
        if not isinstance(ref, Ref):
            return ref
        self.count(ref)
        kind = self.jobs.types(self.url(step), self.deployed(step)).get(name, "binary")
        if kind in ("int", "float", "string"):
            return self.jobs.value(ref, kind)
        return self.jobs.relay(ref)

    def final(self, src, v):
        """A workflow output's value for the client: program outputs fetched (files saved whole)."""
        if src.step is None or self.wf.steps[src.step].kind != "program":
            return v
        return self.fetched(self.wf.steps[src.step], src.name, v)


def run(
    flow,
    inputs=None,
    mode="direct",
    outdir=".",
    key=None,
    advertise=None,
    progress=True,
    record=None,
    sessions=False,
    board=None,
):
    """Run a workflow (a file's path, or a ``Workflow``) on ``inputs``
    (name -> value; a file as ``values.LocalFile``): returns (output object, run record).
    ``mode``: ``direct`` or ``mediated``; files among the outputs are saved in
    ``outdir``; ``record``: a path to write the run record to (JSON); ``sessions``:
    program steps on one endpoint run in one session, files passed where they lie; ``board``: an open
    ``mpiws.dashboard.Board`` to show the run on, live (``mpiws workflow run --dashboard``: its caller
    opens and closes it)."""
    if mode not in ("direct", "mediated"):
        raise ValueError(f"mode is direct or mediated, not {mode!r}")
    wf = flow if isinstance(flow, Workflow) else load(flow)
    values = bind(wf, inputs or {})
    r = Run(wf, values, mode, key=key, advertise=advertise, progress=progress, sessions=sessions, board=board)
    with shown(board, r.record), kept(r.record, record, r.close):
        outputs = (direct if mode == "direct" else mediated).execute(r)
        r.record.outputs = output_object(outputs, outdir)
        return r.record.outputs, r.record.as_json()
