"""Running a CWL v1.2 document: whole, by the run's endpoint's CWL runner
(``whole``), unless its steps are placed or ``--steps`` asks for the step
engine (``run`` decides). On the step engine each tool runs as an mpiws job
of a CWL program (the endpoint builds its command line from the tool document), on
the endpoint a hint (``mpiws:Endpoint``) or a flag (``--endpoint
STEP=URL``) names, else on a local endpoint started for the run with the
tools deployed on it. Steps start as soon as their sources are known; a
scatter's elements run at once. Files pass *by reference*: a job's input
is the producing job's file URL, pulled by the consuming endpoint; only
the final outputs are downloaded, into ``outdir``. A CommandLineTool run
on its own is a workflow of one step."""

import concurrent.futures as cf
import json
import os
import re
import shutil
import sys
import tempfile
from types import SimpleNamespace
from urllib.parse import urlsplit

from ...service import cwl_runner
from ..programs import Jobs
from ..live import shown
from ..record import Record, kept
from . import steps, warm, whole
from .job import Wire, final, from_file, job_object, split_input
from .load import CwlError, CwlUnsupported, Step, StepIn, Tool, Workflow, endpoint_hint, entries, load

#: The exit status of a CWL runner for a feature it does not run (CWL's convention).
UNSUPPORTED = 33

#: Jobs (steps and scatter elements) running at once, at most.
MAX_PARALLEL = 32


def as_workflow(tool):
    """A CommandLineTool as a workflow of one step, named as the tool."""
    ins = {n: StepIn([(None, n)]) for n in tool.inputs}
    step = Step(tool.name, tool, ins, tool.outputs)
    inputs = {
        n: (e if "_short" not in e else {"type": e["_short"]}) for n, e in entries(tool.doc.get("inputs"), "inputs")
    }
    return Workflow(
        tool.name, tool.path, inputs, {o: StepIn([(tool.name, o)]) for o in tool.outputs}, {tool.name: step}
    )


def step_edges(wf):
    """[from, to] for each step that feeds another, once (the dashboard's graph)."""
    edges = []
    for name, step in wf.steps.items():
        for conn in step.ins.values():
            for src, _ in conn.sources:
                if src is not None and [src, name] not in edges:
                    edges.append([src, name])
    return edges


def optional(t):
    return t == "null" or (isinstance(t, str) and t.endswith("?")) or (isinstance(t, list) and "null" in t)


def bind(wf, given, named=()):
    """The workflow's inputs: given, else their default, else null if optional; others missing are an error.
    A job's values the document does not declare are left out, as CWL says, but those ``named`` on
    the command line (``NAME=VALUE``: a typo, most likely) are an error."""
    base = os.path.dirname(os.path.abspath(wf.path)) if wf.path else os.getcwd()
    unknown = sorted(set(named) - set(wf.inputs))
    if unknown:
        raise CwlError(f"{wf.name} has no input {', '.join(unknown)} (inputs: {', '.join(wf.inputs) or 'none'})")
    values = {}
    for name, spec in wf.inputs.items():
        if given.get(name) is not None:
            values[name] = given[name]
        elif spec.get("default") is not None:
            values[name] = from_file(spec["default"], base)
        elif optional(spec.get("type")):
            values[name] = None
        else:
            raise CwlError(f"missing input '{name}' of {wf.name} ({json.dumps(spec.get('type'))})")
    return values


def placements(wf, endpoints):
    """Step name -> (endpoint URL, program name), or None for the run's local endpoint.
    ``endpoints``: ``STEP=URL`` or ``URL`` (every step); a URL may end in ``/programs/NAME``."""
    flags, every = {}, None
    for spec in endpoints or ():
        m = re.match(r"^([A-Za-z0-9_.-]+)=(.+)$", spec)
        if m:
            if m.group(1) not in wf.steps:
                raise CwlError(f"--endpoint {spec}: no step {m.group(1)} (steps: {', '.join(wf.steps)})")
            flags[m.group(1)] = m.group(2)
        else:
            every = spec
    out = {}
    for name, step in wf.steps.items():
        given = flags.get(name) or every
        if given:
            url, sep, program = given.rstrip("/").partition("/programs/")
            out[name] = (url, program if sep else step.tool.name)
            continue
        hint = endpoint_hint(step.hints) or endpoint_hint(step.tool.doc.get("hints"))
        out[name] = (hint[0], hint[1] or step.tool.name) if hint else None
    return out


class Runner:
    def __init__(self, wf, key=None, endpoints=None, progress=True):
        self.wf, self.key = wf, key
        self.place = placements(wf, endpoints)
        # A document run whole here: its runner's jobs are forked by the user's warm runner (`warm`), or
        # else from this process, which has loaded cwltool to pack it (before it starts any thread).
        whole_here = any(self.place[s.name] is None and whole.is_packed(s.tool.doc) for s in wf.steps.values())
        self.forks = (warm.fork_server() or cwl_runner.fork_here()) if whole_here else None
        view = SimpleNamespace(
            name=wf.name,
            path=wf.path,
            steps={n: SimpleNamespace(kind="program", endpoint=p[0] if p else None) for n, p in self.place.items()},
        )
        self.record = Record(view, "direct", progress, edges=step_edges(wf))
        self.scratch = tempfile.mkdtemp(prefix="mpiws-cwl-")
        self.jobs = Jobs(key, self.scratch)
        self.wire = Wire(self.jobs.upload)
        self.server = None
        self.deployed = {}  # local step -> program name
        local = [s for s in wf.steps.values() if self.place[s.name] is None]
        if local:
            try:
                self._start_local(local)
            except BaseException:
                self.close()  # a tool refused: its scratch goes too
                raise

    def _start_local(self, local):
        from ...service.serve import Server

        programs, docs = [], {}
        for s in local:
            name = s.tool.name
            if name in docs and docs[name] is not s.tool.doc:  # two tools of one name: each its own program
                name = f"{name}.{s.name}"
            if name not in docs:
                docs[name] = s.tool.doc
                programs.append((name, whole.json_text(s.tool.doc) if whole.is_packed(s.tool.doc) else s.tool.doc))
            self.deployed[s.name] = name
        keys = None
        if self.key:  # the local endpoint takes the key given for the others
            fd, keys = tempfile.mkstemp(dir=self.scratch, prefix="keys-")
            with os.fdopen(fd, "w") as f:
                f.write(self.key + "\n")
        # Its jobs may pull files by reference from the endpoints the run names, and only those
        # beyond the default public addresses (they may be on loopback or a private network).
        hosts = sorted({urlsplit(p[0]).netloc.rpartition("@")[2] for p in self.place.values() if p})
        # A packed document is for the endpoint's CWL runner; a step's own tool, for its own engine only:
        # what that does not run has the whole document run by the runner (`run`), never one step of it.
        runner = None if any(whole.is_packed(d) for d in docs.values()) else []
        # Its client is its own user: a job may add requirements of its own (code of the user's, run as the user).
        own = {"cwl_runner": runner, "cwl_client_requirements": runner is None}
        if self.forks is not None:  # the endpoint's own copy of the wire; this one is closed with the run
            own["cwl_runner_wire"] = os.dup(self.forks)
        try:
            self.server = Server({}, cwl_programs=programs, keys=keys, fetch_allow=hosts, **own)
        except Exception as e:  # noqa: BLE001 - the endpoint refused a tool: `run` has the document run whole
            raise CwlUnsupported(str(e).removeprefix("MPI_ERR_ARG: ")) from None

    def where(self, step):
        """(endpoint URL, program name) of a step."""
        return self.place[step.name] or (self.server.url, self.deployed[step.name])

    def close(self):
        self.jobs.remove_all()
        if self.server is not None:
            self.server.stop()
        if self.forks is not None:  # the fork server then ends (its wire's last copy)
            os.close(self.forks)
            self.forks = None
        shutil.rmtree(self.scratch, ignore_errors=True)

    def unit(self, step, index, inputs):
        """One job of ``step``: its output object, files by reference (their URLs)."""
        url, program = self.where(step)
        declared = set(step.tool.inputs) | ({whole.JOB_REQUIREMENTS} if whole.is_packed(step.tool.doc) else set())
        try:
            wire = {n: self.wire.value(v, url) for n, v in inputs.items() if n in declared}
            if wire.get(whole.JOB_REQUIREMENTS, 0) is None:  # none given (cwltool reads even a null one)
                del wire[whole.JOB_REQUIREMENTS]
            job = self.jobs.spawn_object(url, program, wire)
        except CwlError:
            raise
        except Exception as e:  # noqa: BLE001 - the endpoint refused the job: its reason, naming the step
            self.record.unit(step.name, index, "failed")
            raise CwlError(f"step {step.name}: {e}") from None
        self.record.unit(step.name, index, "running", job=job.url)
        try:
            outputs = self.jobs.finish(step.name, job, raw=True)
        except Exception as e:
            self.record.unit(step.name, index, "failed", job=job.url)
            if getattr(e, "exit_code", None) == UNSUPPORTED and whole.is_packed(step.tool.doc):
                raise CwlUnsupported(f"the endpoint's CWL runner does not run it: {e}") from None  # its own 33
            raise
        self.record.unit(step.name, index, "done", job=job.url)
        return outputs

    def execute(self, values):
        known = {(None, n): v for n, v in values.items()}
        base = os.path.dirname(os.path.abspath(self.wf.path)) if self.wf.path else os.getcwd()
        for s in self.wf.steps.values():
            for name, conn in s.ins.items():
                conn.default = from_file(conn.default, base) if conn.default is not None else None
                for src in conn.sources:
                    if src[0] is None and src[1] not in self.wf.inputs:
                        raise CwlError(f"step {s.name}, input {name}: no workflow input {src[1]}")
                    if src[0] is not None and src[1] not in self.wf.steps[src[0]].outs:
                        raise CwlError(f"step {s.name}, input {name}: step {src[0]} has no output {src[1]}")
        waiting = list(self.wf.steps.values())
        running, results, left = {}, {}, {}
        pool = cf.ThreadPoolExecutor(MAX_PARALLEL, thread_name_prefix="mpiws-cwl")
        try:
            while True:
                started = True
                while started:
                    started = False
                    for s in list(waiting):
                        if all(src in known for c in s.ins.values() for src in c.sources):
                            waiting.remove(s)
                            started = True
                            units = steps.jobs(s, known)
                            self.record.expect(s.name, len(units))
                            results[s.name], left[s.name] = [None] * len(units), len(units)
                            for i, (inputs, go) in enumerate(units):
                                if go:
                                    running[pool.submit(self.unit, s, i, inputs)] = (s, i)
                                else:
                                    self.record.unit(s.name, i, "done", skipped=True)
                                    left[s.name] -= 1
                            if left[s.name] == 0:
                                self._known(s, results, known)
                if not running:
                    break
                done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                for f in done:
                    s, i = running.pop(f)
                    results[s.name][i] = f.result()
                    left[s.name] -= 1
                    if left[s.name] == 0:
                        self._known(s, results, known)
            if waiting:
                raise CwlError(f"steps {', '.join(s.name for s in waiting)} never got their inputs (a cycle?)")
            return {n: steps.merge(conn, known) for n, conn in self.wf.outputs.items()}
        except BaseException:
            for f in running:
                f.cancel()
            self.jobs.kill_all()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _known(step, results, known):
        for o, v in steps.outputs(step, results[step.name]).items():
            known[(step.name, o)] = v


def run(
    flow, job=None, outdir=".", key=None, endpoints=None, progress=True, record=None, named=(), steps=False, board=None
):
    """Run the CWL document ``flow`` (a path, a ``Tool`` or a ``Workflow``) on the job object
    ``job`` (input name -> value; Files as ``job.local`` makes them): (output object, run record).
    Output files are downloaded into ``outdir``; ``record``: a path to write the run record to;
    ``named``: the inputs the command line names, which must exist (others not declared are left out);
    ``board``: an open ``mpiws.dashboard.Board`` to show the run on, live (the caller opens and closes it).

    Where it runs: a document whose steps are placed (``endpoints``: ``--endpoint``; or
    ``mpiws:Endpoint`` hints), or any with ``steps``, by mpiws's step engine, each step a job
    of its own; any other whole, by the run's endpoint's CWL runner (cwltool: the reference's
    semantics, to the letter; where cwltool is not installed, the step engine). What the step
    engine does not run is then an error (exit 33) where steps are placed, and runs whole where
    they are not."""
    if isinstance(flow, (Tool, Workflow)):
        return _run(flow, job, outdir, key, endpoints, progress, record, named, board)

    def whole_run():
        return _run(whole.as_workflow(flow), job, outdir, key, endpoints, progress, record, named, board)

    if whole.JOB_REQUIREMENTS in (job or {}):  # the job's own requirements: cwltool's to apply
        return whole_run()
    try:
        doc = load(flow)
    except CwlError:
        if endpoints or steps:
            raise
        return whole_run()  # cwltool's loader then says whether it is a wrong document, and why
    wf = doc if isinstance(doc, Workflow) else as_workflow(doc)
    placed = endpoints or steps or any(placements(wf, endpoints).values())
    if not placed and whole.available():
        return whole_run()
    try:
        return _run(doc, job, outdir, key, endpoints, progress, record, named, board)
    except CwlUnsupported as e:
        if placed:
            raise
        raise CwlUnsupported(f"{e} (with cwltool, pip install 'mpiws[cwl]', it would run whole)") from None


def _run(doc, job, outdir, key, endpoints, progress, record, named, board):
    wf = doc if isinstance(doc, Workflow) else as_workflow(doc)
    for s in wf.steps.values():
        if whole.is_packed(s.tool.doc):
            job = whole.with_secondaries(job or {}, s.tool.doc)
    values = bind(wf, job or {}, named)
    r = Runner(wf, key=key, endpoints=endpoints, progress=progress)
    with shown(board, r.record), kept(r.record, record, r.close):
        outputs = r.execute(values)
        taken = {}  # one output's file name is not another's (in name order, as cwltool)
        r.record.outputs = {n: final(outputs[n], outdir, taken) for n in sorted(outputs)}
        return r.record.outputs, r.record.as_json()


def run_command(a, board=None):
    """``mpiws workflow run FLOW.cwl [JOB.yml] [NAME=VALUE | NAME:@PATH ...]``; ``board``: its dashboard, or None."""
    prog = getattr(a, "prog", "mpiws workflow")
    for flag, given in (("--mediated", a.mediated), ("--graph", a.graph), ("--advertise", a.advertise)):
        if given:
            print(f"{prog}: {flag} is not for CWL documents", file=sys.stderr)
            return 1
    try:
        args = list(a.inputs)
        path = getattr(a, "job", None)  # named (mpiws-cwl-runner), else a first input that is a file
        if path is None and args and args[0].endswith((".yml", ".yaml", ".json")) and "=" not in args[0]:
            path = args.pop(0)
        outputs, _ = run(
            a.flow,
            job_object(path, args),
            outdir=a.outdir,
            key=a.key,
            endpoints=a.endpoint,
            progress=not a.quiet,
            record=a.record,
            named=[split_input(x)[0] for x in args],
            steps=getattr(a, "steps", False),
            board=board,
        )
    except Exception as e:  # noqa: BLE001 - a refused document, a failed step: said in one line
        said = str(e) if isinstance(e, CwlError) or type(e).__name__ == "StepFailed" else f"{type(e).__name__}: {e}"
        print(f"{prog}: {said}", file=sys.stderr)
        return UNSUPPORTED if isinstance(e, CwlUnsupported) else 1
    json.dump(outputs, sys.stdout, indent=4)
    print()
    return 0
