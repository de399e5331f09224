"""The workflow file: a small YAML format, read and checked here (pure code).

::

    name: chain
    inputs:                       # what the client gives: NAME: TYPE, or NAME: {type: TYPE, default: VALUE}
      message: bytes
    endpoints:                    # optional: names for endpoint URLs
      east: https://east.example.org:8001
    steps:
      first:
        service: steps:echo       # no endpoint: deployed on a local endpoint started for the run
        in: {data: message}       # input <- a workflow input, STEP/OUTPUT, a list of those, or {value: V}
        out: [data]
      second:
        service: echo             # a service deployed on the endpoint named (or a URL)
        endpoint: east
        in: {data: first/data}
        out: [data]
    outputs:
      result: second/data

A step runs a **service** (a function made a step with ``mpiws.workflow.step``)
or a **program** (a deployed one-line template, or, on the local endpoint,
the template itself). ``scatter: NAME`` (or a list, paired element by
element) runs the step once per element of that input; its outputs are
then lists. ``loop:`` makes a service step iterate: its ranks (one per
element when it scatters) call the function again and again, carrying
outputs into the next iteration's inputs and sharing an allreduce of
outputs among themselves, for a fixed number of iterations or until a
step reports it is done (``Loop``). Types: ``any``, ``int``, ``float``, ``string``, ``boolean``,
``bytes``, ``file``, and ``T[]`` for lists. docs/workflows.md is the
reference.
"""

import os
import re
from dataclasses import dataclass, field

#: Names of steps, inputs and outputs: what a template parameter may be called too.
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
TYPES = ("any", "int", "float", "string", "boolean", "bytes", "file")
STEP_KEYS = {"service", "program", "endpoint", "in", "out", "scatter", "scatterMethod", "loop", "label"}
LOOP_KEYS = {"iterations", "until", "max", "carry", "allreduce"}
#: Reductions a loop may share: what MPI.SUM etc. do to numbers and numpy arrays.
OPS = ("sum", "prod", "min", "max")
TOP_KEYS = {"name", "inputs", "outputs", "endpoints", "steps", "doc"}


class WorkflowError(ValueError):
    """The workflow file, or the inputs given to it, are wrong: the message says where."""


class StepFailed(RuntimeError):
    """A step of the workflow failed: ``step``, and what it said (``detail``: its error and traceback or stderr tail)."""

    def __init__(self, step, message, detail="", exit_code=None):
        super().__init__(f"step {step} failed: {message}" + (f"\n{detail}" if detail else ""))
        self.step, self.detail, self.exit_code = step, detail, exit_code


@dataclass(frozen=True)
class Source:
    """Where a value comes from: a workflow input (``step`` None) or a step's output."""

    step: object  # str or None
    name: str

    def __str__(self):
        return self.name if self.step is None else f"{self.step}/{self.name}"


@dataclass(frozen=True)
class Literal:
    value: object


@dataclass
class Input:
    type: str
    default: object = None
    has_default: bool = False

    @property
    def is_list(self):
        return self.type.endswith("[]")

    @property
    def item(self):
        return self.type[:-2] if self.is_list else self.type


@dataclass
class Loop:
    """A step that iterates. Iteration 0 takes the step's inputs as wired;
    each next one takes them again, except ``carry`` (input <- this rank's
    output of the iteration before) and ``allreduce`` (input <- (output, op):
    that output of every rank of the step, reduced). It stops after
    ``iterations``, or after the first iteration in which every rank's
    ``until`` output is true (at most ``max``); the last iteration's outputs
    are the step's outputs."""

    iterations: object = None  # int, or None with until
    until: object = None  # an output name
    max: int = 1000
    carry: dict = field(default_factory=dict)
    allreduce: dict = field(default_factory=dict)  # input -> (output, op)

    def as_config(self):
        return {
            "iterations": self.iterations,
            "until": self.until,
            "max": self.max,
            "carry": dict(self.carry),
            "allreduce": {k: list(v) for k, v in self.allreduce.items()},
        }


@dataclass
class Step:
    name: str
    kind: str  # "service" or "program"
    target: str  # service/program name on its endpoint, or module:function / a template, locally
    endpoint: object  # URL, or None: the run's local endpoint
    inputs: dict  # input name -> Source, Literal, or a list of Sources (merged into a list)
    outputs: list
    scatter: list = field(default_factory=list)
    loop: object = None  # Loop, or None

    @property
    def local(self):
        return self.endpoint is None


@dataclass
class Workflow:
    name: str
    inputs: dict  # name -> Input
    steps: dict  # name -> Step, in file order
    outputs: dict  # name -> Source
    path: str = ""

    def order(self):
        """Step names, each after the steps it takes inputs from."""
        done, order = set(), []

        def visit(name, trail):
            if name in done:
                return
            if name in trail:
                raise WorkflowError(f"steps form a cycle: {' -> '.join(trail[trail.index(name) :] + [name])}")
            for src in sources(self.steps[name]):
                if src.step is not None:
                    visit(src.step, trail + [name])
            done.add(name)
            order.append(name)

        for name in self.steps:
            visit(name, [])
        return order


def _as_sources(v):
    return v if isinstance(v, list) else [v] if isinstance(v, Source) else []


def sources(step):
    return [src for v in step.inputs.values() for src in _as_sources(v)]


def load(path):
    """Read and check a workflow file (YAML or JSON)."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - a dependency of mpiws
        raise WorkflowError("reading workflow files needs PyYAML (pip install pyyaml)") from None
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise WorkflowError(f"{path}: {e}") from None
    return parse(doc, path=os.fspath(path))


def parse(doc, path=""):
    """A workflow from its parsed document; every mistake is a WorkflowError naming its place."""
    where = path or "workflow"
    if not isinstance(doc, dict):
        raise WorkflowError(f"{where}: a workflow is a mapping with steps:, not {type(doc).__name__}")
    _unknown(doc, TOP_KEYS, where)
    endpoints = doc.get("endpoints") or {}
    if not isinstance(endpoints, dict) or not all(isinstance(u, str) and _is_url(u) for u in endpoints.values()):
        raise WorkflowError(f"{where}: endpoints: maps names to http(s):// URLs")
    inputs = {}
    for name, t in (doc.get("inputs") or {}).items():
        inputs[_name(name, f"{where}: inputs")] = _input(t, f"{where}: input {name}")
    steps_doc = doc.get("steps")
    if not isinstance(steps_doc, dict) or not steps_doc:
        raise WorkflowError(f"{where}: steps: is a mapping of step names to steps, and there must be one")
    steps = {}
    for name, s in steps_doc.items():
        steps[_name(name, f"{where}: steps")] = _step(name, s, endpoints, f"{where}: step {name}")
    outputs = {}
    for name, ref in (doc.get("outputs") or {}).items():
        outputs[_name(name, f"{where}: outputs")] = _source(ref, f"{where}: output {name}")
    wf = Workflow(
        str(doc.get("name") or os.path.splitext(os.path.basename(path))[0] or "workflow"), inputs, steps, outputs, path
    )
    _check_references(wf, where)
    wf.order()
    return wf


def _unknown(d, allowed, where):
    extra = sorted(set(d) - allowed)
    if extra:
        raise WorkflowError(
            f"{where}: unknown key{'s' if len(extra) > 1 else ''} {', '.join(map(str, extra))} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )


def _name(name, where):
    if not isinstance(name, str) or not NAME.match(name):
        raise WorkflowError(f"{where}: {name!r} is not a name (letters, digits, _ . -; a letter or _ first)")
    return name


def _is_url(u):
    return u.startswith(("http://", "https://"))


def _type(t, where):
    base = t[:-2] if isinstance(t, str) and t.endswith("[]") else t
    if base not in TYPES:
        raise WorkflowError(f"{where}: type {t!r} is not one of {', '.join(TYPES)} (or T[] for a list)")
    return t


def _input(t, where):
    if isinstance(t, str):
        return Input(_type(t, where))
    if isinstance(t, dict):
        _unknown(t, {"type", "default", "doc"}, where)
        return Input(_type(t.get("type", "any"), where), t.get("default"), "default" in t)
    raise WorkflowError(f"{where}: give a type, or {{type: T, default: V}}")


def _source(ref, where):
    if not isinstance(ref, str) or ref.count("/") > 1 or not ref.strip("/"):
        raise WorkflowError(f"{where}: a source is an input name or STEP/OUTPUT, not {ref!r}")
    step, sep, name = ref.partition("/")
    return Source(step, name) if sep else Source(None, step)


def _step(name, s, endpoints, where):
    if not isinstance(s, dict):
        raise WorkflowError(f"{where}: a step is a mapping (service: or program:, in:, out:)")
    _unknown(s, STEP_KEYS, where)
    kinds = [k for k in ("service", "program") if k in s]
    if len(kinds) != 1:
        raise WorkflowError(f"{where}: a step names exactly one service: or program:")
    kind = kinds[0]
    target = s[kind]
    if not isinstance(target, str) or not target.strip():
        raise WorkflowError(
            f"{where}: {kind}: is a name (or, locally, {'module:function' if kind == 'service' else 'a template'})"
        )
    on = s.get("endpoint")
    if on is not None:
        on = endpoints.get(on, on)
        if not isinstance(on, str) or not _is_url(on):
            raise WorkflowError(
                f"{where}: endpoint: {s.get('endpoint')!r} is neither a name under endpoints: nor an http(s):// URL"
            )
        on = on.rstrip("/")
    elif kind == "service" and not re.match(r"^[\w.]+:[\w]+$", target):
        raise WorkflowError(
            f"{where}: a service without endpoint: runs on the run's local endpoint, so it is named as "
            f"module:function (the function made a step with mpiws.workflow.step), not {target!r}"
        )
    if on is not None and not NAME.match(target):
        raise WorkflowError(f"{where}: {kind} {target!r} on an endpoint is the name it is deployed under")
    ins = {}
    for iname, v in (s.get("in") or {}).items():
        iname = _name(iname, f"{where}: in")
        if isinstance(v, dict):
            _unknown(v, {"value"}, f"{where}: in {iname}")
            ins[iname] = Literal(v.get("value"))
        elif isinstance(v, list):
            if not v:
                raise WorkflowError(f"{where}: in {iname}: an empty list of sources")
            ins[iname] = [_source(r, f"{where}: in {iname}") for r in v]
        else:
            ins[iname] = _source(v, f"{where}: in {iname}")
    outs = s.get("out") or []
    if isinstance(outs, str):
        outs = [outs]
    if not isinstance(outs, list):
        raise WorkflowError(f"{where}: out: is a list of output names")
    outs = [_name(o, f"{where}: out") for o in outs]
    if len(set(outs)) != len(outs):
        raise WorkflowError(f"{where}: out: names an output twice")
    scatter = s.get("scatter") or []
    scatter = [scatter] if isinstance(scatter, str) else scatter
    for x in scatter:
        if x not in ins:
            raise WorkflowError(f"{where}: scatter: {x!r} is not one of its inputs")
        if isinstance(ins[x], Literal):
            raise WorkflowError(f"{where}: scatter: {x!r} is a fixed value; scatter over an input or a step's output")
    method = s.get("scatterMethod", "dotproduct")
    if method != "dotproduct":
        raise WorkflowError(f"{where}: scatterMethod: only dotproduct (elements paired by position)")
    loop = _loop(s["loop"], kind, ins, outs, f"{where}: loop") if "loop" in s else None
    return Step(name, kind, target.strip(), on, ins, outs, list(scatter), loop)


def _loop(d, kind, ins, outs, where):
    if kind != "service":
        raise WorkflowError(f"{where}: only a service step loops (a program step runs once per job)")
    if not isinstance(d, dict):
        raise WorkflowError(f"{where}: a mapping: iterations: N or until: OUTPUT, carry:, allreduce:")
    _unknown(d, LOOP_KEYS, where)

    def count(key):
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 10_000_000:
            raise WorkflowError(f"{where}: {key}: is a whole number of iterations from 1, not {v!r}")
        return v

    if ("iterations" in d) == ("until" in d):
        raise WorkflowError(
            f"{where}: give iterations: N (a fixed number) or until: OUTPUT (a boolean output), one of them"
        )
    loop = Loop()
    if "iterations" in d:
        loop.iterations = count("iterations")
        if "max" in d:
            raise WorkflowError(f"{where}: max: goes with until:, not with a fixed number of iterations")
    else:
        if d["until"] not in outs:
            raise WorkflowError(
                f"{where}: until: {d['until']!r} is not one of the step's outputs (out: {', '.join(outs) or 'none'})"
            )
        loop.until = d["until"]
        loop.max = count("max") if "max" in d else loop.max

    def pairs(key):
        v = d.get(key) or {}
        if not isinstance(v, dict):
            raise WorkflowError(f"{where}: {key}: maps inputs to outputs")
        for i in v:
            if i not in ins:
                raise WorkflowError(
                    f"{where}: {key}: {i!r} is not one of the step's inputs (in: gives its first value)"
                )
        return v

    for i, o in pairs("carry").items():
        if o not in outs:
            raise WorkflowError(f"{where}: carry: {i}: {o!r} is not one of the step's outputs")
        loop.carry[i] = o
    for i, r in pairs("allreduce").items():
        o, op = (
            (r, "sum")
            if isinstance(r, str)
            else (r.get("output"), r.get("op", "sum"))
            if isinstance(r, dict)
            else (None, None)
        )
        if isinstance(r, dict):
            _unknown(r, {"output", "op"}, f"{where}: allreduce: {i}")
        if o not in outs:
            raise WorkflowError(f"{where}: allreduce: {i}: {o!r} is not one of the step's outputs")
        if op not in OPS:
            raise WorkflowError(f"{where}: allreduce: {i}: op {op!r} is not one of {', '.join(OPS)}")
        if i in loop.carry:
            raise WorkflowError(f"{where}: input {i} is both carried and allreduced")
        loop.allreduce[i] = (o, op)
    return loop


def _check_references(wf, where):
    def check(src, place):
        if src.step is None:
            if src.name not in wf.inputs:
                raise WorkflowError(
                    f"{where}: {place}: no workflow input {src.name!r} (inputs: {', '.join(wf.inputs) or 'none'})"
                )
        elif src.step not in wf.steps:
            raise WorkflowError(f"{where}: {place}: no step {src.step!r}")
        elif src.name not in wf.steps[src.step].outputs:
            raise WorkflowError(
                f"{where}: {place}: step {src.step} has no output {src.name!r} (out: "
                f"{', '.join(wf.steps[src.step].outputs) or 'none'})"
            )

    for s in wf.steps.values():
        for iname, v in s.inputs.items():
            for src in _as_sources(v):
                check(src, f"step {s.name} in {iname}")
                if src.step == s.name:
                    raise WorkflowError(f"{where}: step {s.name} in {iname}: takes its own output")
    for o, src in wf.outputs.items():
        check(src, f"output {o}")
