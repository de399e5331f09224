"""CWL v1.2 documents read into what the runner needs: a ``Tool`` (a
CommandLineTool, kept as its document: the endpoint that runs it parses and
checks it) or a ``Workflow`` (inputs, outputs, steps with their
connections), ids normalized to plain names (``#main/step/out`` ->
``step/out``), ``run:`` read from its file (relative to the document) or
taken inline. The list and map forms CWL allows are both read."""

import os
from dataclasses import dataclass, field

from ..spec import WorkflowError

#: The namespace of mpiws's own hints (``$namespaces: {mpiws: https://mpiws.org/cwl#}``).
MPIWS_NS = "https://mpiws.org/cwl#"

#: Requirements a Workflow may state; the expression ones allow only what ``steps`` evaluates.
WORKFLOW_REQUIREMENTS = {
    "ScatterFeatureRequirement",
    "MultipleInputFeatureRequirement",
    "StepInputExpressionRequirement",
    "InlineJavascriptRequirement",
    "SubworkflowFeatureRequirement",
}


class CwlError(WorkflowError):
    """A CWL document or job mpiws cannot run, saying why."""


class CwlUnsupported(CwlError):
    """A valid CWL document using a feature mpiws does not run (yet): CWL's
    runners exit 33 for it, so a test suite tells it from a wrong document."""


def read(path):
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise CwlError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise CwlError(f"{path}: not YAML: {e}") from None
    if not isinstance(doc, dict):
        raise CwlError(f"{path}: a CWL document is a map")
    if "$graph" in doc:
        raise CwlUnsupported(f"{path}: packed documents ($graph) are not supported")
    if _references(doc):
        raise CwlUnsupported(f"{path}: {_references(doc)} is not read by the step engine")
    if doc.get("cwlVersion") in ("v1.0", "v1.1"):
        raise CwlUnsupported(f"{path}: cwlVersion {doc['cwlVersion']}: mpiws runs CWL v1.2")
    if doc.get("cwlVersion") != "v1.2":
        raise CwlError(f"{path}: cwlVersion {doc.get('cwlVersion')!r}: mpiws runs CWL v1.2")
    return doc


def _references(v):
    """The first ``$import``, ``$include`` or ``$mixin`` in a document, if any (schema-salad resolves them)."""
    if isinstance(v, dict):
        found = next((k for k in ("$import", "$include", "$mixin") if k in v), None)
        return found or next((r for r in map(_references, v.values()) if r), None)
    if isinstance(v, list):
        return next((r for r in map(_references, v) if r), None)
    return None


def short(id_):
    """A name as an id gives it: after the last ``#`` and ``/``."""
    return str(id_).rsplit("#", 1)[-1].rsplit("/", 1)[-1]


def entries(v, what):
    """A list of ``{id: ...}`` or a map of id -> entry (or -> a type, or -> a source): [(name, dict)]."""
    if v is None:
        return []
    if isinstance(v, list):
        out = []
        for e in v:
            if isinstance(e, str):  # `out: [a, b]`
                out.append((short(e), {}))
            elif isinstance(e, dict) and "id" in e:
                out.append((short(e["id"]), e))
            else:
                raise CwlError(f"each of {what} has an id")
        return out
    if isinstance(v, dict):
        return [(short(k), e if isinstance(e, dict) else {"_short": e}) for k, e in v.items()]
    raise CwlError(f"{what} is a list or a map")


def classes(v):
    """Requirements or hints, list or map form: [(class, dict)]."""
    if not v:
        return []
    if isinstance(v, dict):
        return [(short(k) if not k.startswith(("mpiws:", MPIWS_NS)) else k, e or {}) for k, e in v.items()]
    return [(e.get("class", ""), e) for e in v if isinstance(e, dict)]


def endpoint_hint(hints):
    """The ``mpiws:Endpoint`` hint's (url, program) if there is one."""
    for cls, h in classes(hints):
        if cls in ("mpiws:Endpoint", MPIWS_NS + "Endpoint"):
            if not isinstance(h.get("url"), str):
                raise CwlError("the mpiws:Endpoint hint has url: ENDPOINT")
            return h["url"].rstrip("/"), h.get("program")
    return None


@dataclass
class Tool:
    """A CommandLineTool: its document (deployed as is) and the name it is deployed under."""

    doc: dict
    name: str
    path: str = None

    @property
    def process(self):
        """The document's process (a packed one's ``#main``)."""
        return next((p for p in self.doc.get("$graph", ()) if p.get("id") == "#main"), self.doc)

    @property
    def inputs(self):
        return dict(entries(self.process.get("inputs"), "inputs"))

    @property
    def outputs(self):
        return [n for n, _ in entries(self.process.get("outputs"), "outputs")]


@dataclass
class StepIn:
    sources: list  # [(step or None, name)]
    multi: bool = False  # a list of sources (or linkMerge given): merged
    link_merge: str = "merge_nested"
    pick_value: str = None
    default: object = None
    value_from: str = None


@dataclass
class Step:
    name: str
    tool: Tool
    ins: dict  # name -> StepIn
    outs: list
    scatter: list = field(default_factory=list)
    when: str = None
    hints: object = None


@dataclass
class Workflow:
    name: str
    path: str
    inputs: dict  # name -> its dict (type, default)
    outputs: dict  # name -> StepIn (outputSource as sources)
    steps: dict  # name -> Step, in document order


def load(path):
    """The CWL document at ``path``: a ``Tool`` or a ``Workflow``."""
    doc = read(path)
    base = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    if doc.get("class") == "CommandLineTool":
        return Tool(doc, stem, path)
    if doc.get("class") in ("ExpressionTool", "Operation"):
        raise CwlUnsupported(f"{path}: class {doc['class']}: mpiws runs a CommandLineTool or a Workflow")
    if doc.get("class") != "Workflow":
        raise CwlError(f"{path}: class {doc.get('class')!r}: mpiws runs a CommandLineTool or a Workflow")
    for cls, _ in classes(doc.get("requirements")):
        if short(cls) not in WORKFLOW_REQUIREMENTS:
            raise CwlUnsupported(
                f"{path}: requirement {cls} is not supported by the workflow runner "
                f"(supported: {', '.join(sorted(WORKFLOW_REQUIREMENTS))})"
            )
    steps = {}
    raw_steps = entries(doc.get("steps"), "steps")
    names = {n for n, _ in raw_steps}
    for name, s in raw_steps:
        steps[name] = _step(name, s, base, names, path)
    inputs = {n: (e if "_short" not in e else {"type": e["_short"]}) for n, e in entries(doc.get("inputs"), "inputs")}
    outputs = {}
    for n, e in entries(doc.get("outputs"), "outputs"):
        if "outputSource" not in e:
            raise CwlError(f"{path}: output {n} has no outputSource")
        outputs[n] = _connection(e, "outputSource", names)
    return Workflow(doc.get("label") or stem, path, inputs, outputs, steps)


def _step(name, s, base, steps, path):
    run = s.get("run")
    if isinstance(run, str):
        run_path = os.path.join(base, run)
        tdoc = read(run_path)
        tool_name = os.path.splitext(os.path.basename(run))[0]
    elif isinstance(run, dict):
        tdoc, tool_name, run_path = run, name, None
        tdoc.setdefault("cwlVersion", "v1.2")
    else:
        raise CwlError(f"{path}: step {name} has no run: (a tool's file, or the tool inline)")
    cls = tdoc.get("class")
    if s.get("requirements"):
        raise CwlUnsupported(f"{path}: step {name} states requirements: the step engine does not apply them")
    if cls == "Workflow":
        raise CwlUnsupported(f"{path}: step {name} runs a Workflow: sub-workflows are not supported")
    if cls in ("ExpressionTool", "Operation"):
        raise CwlUnsupported(f"{path}: step {name} runs a {cls}: only CommandLineTools are run as steps")
    if cls != "CommandLineTool":
        raise CwlError(f"{path}: step {name} runs a {cls}: only CommandLineTools are run as steps")
    ins = {}
    for n, e in entries(s.get("in"), f"step {name}'s in"):
        if "_short" in e:
            e = {"source": e["_short"]}
        ins[n] = _connection(e, "source", steps)
    outs = [n for n, _ in entries(s.get("out"), f"step {name}'s out")]
    scatter = s.get("scatter") or []
    scatter = [short(x) for x in (scatter if isinstance(scatter, list) else [scatter])]
    method = s.get("scatterMethod")
    if len(scatter) > 1 and method != "dotproduct":
        raise CwlUnsupported(
            f"{path}: step {name}: scatterMethod {method or '(none)'} is not supported: "
            "scatter over several inputs with scatterMethod: dotproduct"
        )
    for x in scatter:
        if x not in ins:
            raise CwlError(f"{path}: step {name} scatters over {x}, which is not one of its inputs")
    return Step(name, Tool(tdoc, tool_name, run_path), ins, outs, scatter, s.get("when"), s.get("hints"))


def _connection(e, key, steps):
    src = e.get(key)
    # A list of one source without linkMerge is that source's value, not wrapped (CWL v1.2).
    multi = (isinstance(src, list) and len(src) > 1) or "linkMerge" in e
    sources = [_source(x, steps) for x in (src if isinstance(src, list) else [src] if src is not None else [])]
    return StepIn(
        sources, multi, e.get("linkMerge", "merge_nested"), e.get("pickValue"), e.get("default"), e.get("valueFrom")
    )


def _source(src, steps):
    """``step/out`` -> (step, out); ``x`` (a workflow input) -> (None, x); ids normalized."""
    parts = str(src).lstrip("#").split("/")
    if len(parts) >= 2 and parts[-2] in steps:
        return parts[-2], parts[-1]
    return None, parts[-1]
