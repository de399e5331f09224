"""A CWL document whose steps are not placed (``run.run`` says when) is run
*whole*, as one job on the run's local endpoint, by that endpoint's CWL
runner (cwltool, the reference: ``crates/core/src/jobs/cwl/delegate.rs``).

cwltool's own loader (schema-salad) reads and validates it here, so a wrong
document is refused before anything starts, for the reason the reference
gives; it is packed into one self-contained object carrying the files it
names itself (a default script, a ``$schemas`` ontology) under
``mpiws:attached``, since the endpoint runs nothing from outside the
document. Files of the job pass as for every CWL job: local ones uploaded
(their secondary files with them), outputs downloaded into ``outdir``."""

import base64
import copy
import json
import logging
import os
import re
import sys
from urllib.parse import unquote

from . import warm
from .job import local as local_object
from .load import CwlError, CwlUnsupported, Step, StepIn, Tool, Workflow, load

#: A job object's own requirements (CWL: ``cwl:requirements`` in a job file), which cwltool reads.
JOB_REQUIREMENTS = "cwl:requirements"

#: Where a document carries its own files, and the most they may weigh together (as the endpoint takes them).
ATTACHED = "mpiws:attached"
MAX_CARRIED = 64 << 20


def available():
    """Whether cwltool, which packs and runs a document whole, is installed (the ``cwl`` extra)."""
    import importlib.util

    return importlib.util.find_spec("cwltool") is not None


def pack(path):
    """The document at ``path`` (a file, or ``FILE#id`` for one process of it) validated and packed
    into one object by cwltool; CwlError saying why if it is not valid CWL."""
    path = str(path)
    try:
        from cwltool.context import LoadingContext
        from cwltool.load_tool import fetch_document, resolve_and_validate_document
        from cwltool.pack import pack as packed
    except ImportError:
        raise CwlUnsupported(
            f"{path}: running it needs cwltool, the reference CWL runner (pip install 'mpiws[cwl]')"
        ) from None
    logging.getLogger("cwltool").setLevel(logging.ERROR)  # its warnings are for its own runs
    file, hash_, process = path.partition("#")
    if not os.path.isfile(file):
        raise CwlError(f"{file}: no such file")
    uri = "file://" + os.path.abspath(file) + hash_ + process
    try:
        context, document, uri = fetch_document(uri, LoadingContext())
        context, uri = resolve_and_validate_document(context, document, uri)
        import cwltool.pack

        theirs, cwltool.pack.import_embed = cwltool.pack.import_embed, lambda d, _seen: _embed_once(d, {})
        try:
            return packed(context, uri)
        finally:
            cwltool.pack.import_embed = theirs
    except Exception as e:  # noqa: BLE001 - schema-salad's and cwltool's reasons, in their words
        raise CwlError(f"{path}: {str(e).strip()}") from None


def _embed_once(d, seen):
    """cwltool's ``import_embed`` (the last step of its pack), but an object becomes an ``$import`` of
    an earlier one with its id only when it is that one (a process embedded twice), not when it only
    shares its id: cwltool's turns a tool's output named as its input into the input, losing its glob."""
    if isinstance(d, list):
        for v in d:
            _embed_once(v, seen)
    elif isinstance(d, dict):
        for n in ("id", "name"):
            ident = d.get(n)
            if isinstance(ident, str):
                if ident in seen and seen[ident] == d:
                    d.clear()
                    d["$import"] = ident
                    return
                seen.setdefault(ident, copy.deepcopy(d))
                break
        for k in sorted(d):
            _embed_once(d[k], seen)


def carried(doc):
    """``doc`` carrying the files it names on this machine (``file://``: a default's File, a
    Directory's, an ontology of ``$schemas``) under ``mpiws:attached`` (name -> base64), each
    reference then that name, as the endpoint takes them (``crates/core/src/jobs/cwl/delegate.rs``)."""
    budget, found, attached = [MAX_CARRIED], patterns(doc), {}

    def attach(path, kind="f"):
        """``path``'s bytes carried under a plain name of their own (its extension kept: rdflib reads by it)."""
        try:
            with open(path, "rb") as f:
                data = f.read(budget[0] + 1)
        except OSError as e:
            raise CwlError(f"the document names a file it cannot read: {path}: {e.strerror}") from None
        budget[0] -= len(data)
        if budget[0] < 0:
            raise CwlUnsupported(f"the files the document names weigh more than {MAX_CARRIED >> 20} MiB together")
        name = kind + str(len(attached)) + re.sub(r"[^A-Za-z0-9.]", "", os.path.splitext(path)[1])[:16]
        attached[name] = base64.b64encode(data).decode()
        return name

    def local(v):
        """The path of a File or Directory of this machine, if it is one."""
        if not isinstance(v, dict) or v.get("class") not in ("File", "Directory"):
            return None
        where = v.get("location") or v.get("path")
        if isinstance(where, str) and where.startswith("file://"):
            return unquote(where[len("file://") :])
        return None

    def walk(v):
        if isinstance(v, list):
            return [walk(x) for x in v]
        if not isinstance(v, dict):
            return v
        if local(v):
            return inline(v)
        if isinstance(v.get("$schemas"), list):  # ontologies for format checks: carried too, if this machine's
            schemas = [attach(unquote(u[7:]), "s") if str(u).startswith("file://") else u for u in v["$schemas"]]
            v = dict(v, **{"$schemas": schemas})
        ref = next(iter(v.values())) if len(v) == 1 and next(iter(v)) in ("$import", "$include") else None
        if ref is not None and not str(ref).startswith("#"):  # what pack left outside (not a part of the document)
            return walk(reference(*next(iter(v.items()))))
        # A default naming a file that is not there is left out, as cwltool only warns of it
        # (the job may give the value); what it would have been for is then an error there.
        return {k: walk(x) for k, x in v.items() if not (k == "default" and local(x) and not os.path.exists(local(x)))}

    def reference(kind, uri):
        """The document (``$import``) or text (``$include``) a reference of this machine names."""
        if not str(uri).startswith("file://"):
            raise CwlUnsupported(f"the document {kind}s {uri}: only files of this machine are carried")
        path = unquote(uri[len("file://") :])
        try:
            with open(path, encoding="utf-8") as f:
                if kind == "$include":
                    return f.read()
                import yaml

                return yaml.safe_load(f)
        except (OSError, ValueError) as e:
            raise CwlError(f"the document {kind}s {path}: {e}") from None

    def inline(v):
        path = local(v)
        basename = v.get("basename") or os.path.basename(path.rstrip("/"))
        out = {k: walk(x) for k, x in v.items() if k not in ("location", "path", "listing", "contents")}
        out["basename"] = basename
        if v["class"] == "Directory":
            if not os.path.isdir(path):
                raise CwlError(f"the document names a directory that is not there: {path}")
            out["listing"] = [
                inline({"class": "Directory" if os.path.isdir(p) else "File", "location": "file://" + p})
                for p in (os.path.join(path, n) for n in sorted(os.listdir(path)))
            ]
            return out
        out["location"] = attach(path)
        near = beside(path, basename, found) if "secondaryFiles" not in v else []
        if near:  # they travel with it, as a job's do (`with_secondaries`)
            out["secondaryFiles"] = [inline({"class": kind, "location": "file://" + b}) for kind, b in near]
        return out

    out = walk(doc)
    if attached:
        out[ATTACHED] = attached
    return out


def patterns(doc):
    """The ``secondaryFiles`` patterns ``doc`` states for its input parameters (those that are no
    expression): an output's are what the tool writes, not what travels to it."""
    found = set()

    def walk(v):
        if isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            given = v.get("secondaryFiles") if v.get("class") not in ("File", "Directory") else None
            for p in given if isinstance(given, list) else [given] if given else []:
                p = p.get("pattern") if isinstance(p, dict) else p
                if isinstance(p, str) and "$(" not in p and "${" not in p:
                    found.add(p)
            for k, x in v.items():
                if k != "outputs":
                    walk(x)

    walk(doc)
    return sorted(found)


def secondary_name(basename, pattern):
    """The name ``pattern`` gives a secondary file of ``basename`` (each leading ``^`` drops an extension)."""
    while pattern.startswith("^"):
        pattern, basename = pattern[1:], basename.rsplit(".", 1)[0] if "." in basename else basename
    return basename + pattern


def beside(path, basename, found):
    """(class, path) of each file or directory next to ``path`` that a pattern of ``found`` names."""
    near = (os.path.join(os.path.dirname(path), secondary_name(basename, p)) for p in found)
    return [("Directory" if os.path.isdir(b) else "File", b) for b in near if os.path.exists(b)]


def with_secondaries(v, doc):
    """The job ``v`` with each local File's secondary files, the files beside it that the patterns of the
    document's own inputs name (its ``#main``'s: a step's are for what the workflow hands it): the runner
    looks for them beside the File, where it will stand alone unless they travel with it."""
    graph = doc.get("$graph")
    main = next((p for p in graph if p.get("id") == "#main"), {}) if isinstance(graph, list) else doc
    named = [
        r for r in main.get("requirements") or [] if isinstance(r, dict) and r.get("class") == "SchemaDefRequirement"
    ]
    found = patterns([main.get("inputs", []), named])  # its inputs, and the record types they may name
    if not found:
        return v

    def walk(x):
        if isinstance(x, list):
            return [walk(y) for y in x]
        if not isinstance(x, dict):
            return x
        if x.get("class") == "File" and "path" in x and "secondaryFiles" not in x:
            near = [local_object(kind, b) for kind, b in beside(x["path"], x["basename"], found)]
            return dict(x, secondaryFiles=near) if near else x
        return {k: walk(y) for k, y in x.items()}

    return walk(v)


_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?\Z")


def json_text(v):
    """``v`` as JSON text, each float as the document wrote it: cwltool prints a float of a
    document on a command line as written (``0.00001``, never ``1e-05``), which it reads from the
    text (ruamel keeps it), so the text travels, not Python's float."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {json_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(json_text, v)) + "]"
    if isinstance(v, Written):
        return v.text
    if isinstance(v, float) and type(v) is not float:  # ruamel's ScalarFloat, which knows its text
        from ruamel.yaml.representer import RoundTripRepresenter

        text = RoundTripRepresenter().represent_scalar_float(v).value
        if _NUMBER.match(text):
            return text
    return json.dumps(v)


def is_packed(doc):
    """Whether ``doc`` is a document as ``pack`` makes it (run whole by the endpoint's CWL runner)."""
    return "$graph" in doc


def document(path):
    """The document at ``path`` as the endpoint takes it (``pack``, then ``carried``): by the user's
    warm runner (``warm``) if there is one."""
    answer = warm.pack(str(path))
    if answer is None:
        return carried(pack(path))
    kind, said = answer
    if kind == "ok":
        return json.loads(said, parse_float=Written)
    raise (CwlUnsupported if kind == "unsupported" else CwlError)(said)


class Written(float):
    """A float that keeps the text it was read from (``json_text`` writes it so)."""

    def __new__(cls, text):
        v = super().__new__(cls, text)
        v.text = text
        return v


def _packed(path):
    """What the warm runner answers a pack with (``warm``)."""
    try:
        return {"ok": json_text(carried(pack(path)))}
    except CwlUnsupported as e:
        return {"unsupported": str(e)}
    except CwlError as e:
        return {"error": str(e)}


def as_workflow(path):
    """The document at ``path``, run whole: a workflow of one step, the packed document's, named by its file."""
    path = str(path)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(os.path.basename(path.partition("#")[0]))[0]) or "cwl"
    tool = Tool(document(path), name, path.partition("#")[0])
    ins, outs = list(tool.inputs), tool.outputs
    ins.append(JOB_REQUIREMENTS)  # a job's own requirements, for the runner (on the run's own endpoint)
    step = Step(name, tool, {n: StepIn([(None, n)]) for n in ins}, outs)
    # Every input optional here: the endpoint's runner fills in defaults and says what is missing.
    inputs = {n: {"type": ["null", "Any"]} for n in ins}
    return Workflow(name, tool.path, inputs, {o: StepIn([(name, o)]) for o in outs}, {name: step})


def tool_spec(spec):
    """``[NAME=]PATH`` of ``mpiws serve --program-cwl``: (name, the document to deploy): a
    CommandLineTool's as it is; any other CWL document packed by cwltool, for the endpoint's
    CWL runner (``whole``)."""
    name, sep, path = spec.partition("=")
    if not sep:
        name, path = "", spec
    try:
        tool = load(path)
    except CwlError:
        tool = None
    if isinstance(tool, Tool):
        return (name.strip() or tool.name), tool.doc
    wf = as_workflow(path)
    return (name.strip() or wf.name), json_text(wf.steps[wf.name].tool.doc)


if __name__ == "__main__":  # the user's warm runner (``warm``), which packs as this module does
    warm.serve(sys.argv[1], _packed)
