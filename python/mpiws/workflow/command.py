"""``mpiws workflow run FLOW [JOB.yml] [NAME=VALUE | NAME:@PATH ...]`` and
``mpiws workflow graph FLOW``: the command line of workflows.

The output object (JSON) goes to stdout, as cwltool prints it; progress
per step to stderr; ``--record`` writes the run record, ``--graph`` the
picture (after the run, with each step's state, time and bytes);
``--dashboard`` shows the run live in a browser (``mpiws.dashboard``).
"""

import json
import sys

from .spec import WorkflowError, load
from .values import LocalFile, parse_text


def inputs_from(wf, job=None, args=()):
    """The inputs a command line gives: a job file's (YAML), then ``NAME=VALUE`` (as the input's type)
    and ``NAME:@PATH`` (a file; for a ``bytes`` input, its bytes)."""
    given = {}
    if job:
        import yaml

        with open(job, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        if not isinstance(doc, dict):
            raise WorkflowError(f"{job}: a job file maps input names to values")
        for name, v in doc.items():
            if isinstance(v, dict) and v.get("class") == "File":  # as CWL job files give files
                v = LocalFile(v.get("path") or v.get("location", "").removeprefix("file://"))
            given[name] = v
    for a in args:
        if ":@" in a.split("=", 1)[0] or (":@" in a and "=" not in a):
            name, _, path = a.partition(":@")
            given[name] = LocalFile(path)
            continue
        name, sep, text = a.partition("=")
        if not sep:
            raise WorkflowError(f"an input is NAME=VALUE or NAME:@PATH, not {a!r}")
        spec = wf.inputs.get(name)
        if spec is None:
            raise WorkflowError(f"workflow {wf.name} has no input {name} (inputs: {', '.join(wf.inputs) or 'none'})")
        given[name] = parse_text(text, spec.type)
    return given


def run_command(a):
    from ..dashboard import asked_by, open_board

    board = open_board(asked_by(a), "mpiws workflow")  # open for the whole run, closed at its end
    try:
        if a.flow.endswith(".cwl"):  # a CWL document: its own runner
            from .cwl.run import run_command as run_cwl

            return run_cwl(a, board)
        return _run_flow(a, board)
    finally:
        if board is not None:
            board.close()


def _run_flow(a, board):
    from . import graph
    from .manager import run

    try:
        if a.graph:
            graph.drawer(a.graph)  # before any step runs
        wf = load(a.flow)
        args = list(a.inputs)
        job = args.pop(0) if args and args[0].endswith((".yml", ".yaml", ".json")) and "=" not in args[0] else None
        given = inputs_from(wf, job, args)
        record = {}
        try:
            outputs, record = run(
                wf,
                given,
                mode="mediated" if a.mediated else "direct",
                outdir=a.outdir,
                key=a.key,
                advertise=a.advertise,
                progress=not a.quiet,
                record=a.record,
                sessions=a.session,
                board=board,
            )
        finally:
            if a.graph:
                graph.draw(wf, a.graph, record or _read(a.record))
    except (WorkflowError, graph.CannotDraw) as e:
        print(f"mpiws workflow: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a failed step (StepFailed), an endpoint that refused: said in one line
        print(
            f"mpiws workflow: {type(e).__name__}: {e}" if type(e).__name__ != "StepFailed" else f"mpiws workflow: {e}",
            file=sys.stderr,
        )
        return 1
    json.dump(outputs, sys.stdout, indent=2)
    print()
    return 0


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (TypeError, OSError, ValueError):
        return None


def graph_command(a):
    from . import graph

    try:
        wf = load(a.flow)
        if a.output:
            graph.draw(wf, a.output, _read(a.record) if a.record else None)
        else:
            sys.stdout.write(graph.dot(wf, _read(a.record) if a.record else None))
    except (WorkflowError, graph.CannotDraw) as e:
        print(f"mpiws workflow: {e}", file=sys.stderr)
        return 1
    return 0


def add_endpoint_options(p, which=""):
    """``--key`` and ``--endpoint``, as ``mpiws workflow run`` and ``mpiws-cwl-runner`` take them."""
    p.add_argument("--key", help="endpoint key (default: MPIWS_KEY, else the user's key file)")
    p.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="[STEP=]URL",
        help=f"{which}run STEP (every step, without STEP=) as a job on this endpoint (repeatable)",
    )


def add_steps_option(p):
    """``--steps``, as ``mpiws workflow run`` and ``mpiws-cwl-runner`` take it."""
    p.add_argument(
        "--steps",
        action="store_true",
        help="CWL: run each step as a job of its own (mpiws's step engine: per-step progress and record) though "
        "none is placed; by default an unplaced document runs whole by the endpoint's CWL runner (cwltool)",
    )


def add_parser(sub):
    """``mpiws workflow``; returns its ``run`` subcommand's parser (``mpiws.cli`` adds ``--dashboard`` to it)."""
    w = sub.add_parser("workflow", help="run a workflow: steps pass data to each other directly (docs/workflows.md)")
    ws = w.add_subparsers(dest="workflow_command", required=True)
    r = ws.add_parser("run", help="run a workflow file; prints its output object (JSON)")
    r.add_argument(
        "flow", help="the workflow file (YAML), or a CWL v1.2 document (.cwl: a Workflow or a CommandLineTool)"
    )
    r.add_argument("inputs", nargs="*", metavar="INPUT", help="[JOB.yml] NAME=VALUE, NAME:@PATH (a file)")
    r.add_argument(
        "--mediated",
        action="store_true",
        help="the classic form: the manager invokes each step and relays every result (to compare)",
    )
    r.add_argument("--outdir", default=".", help="where output files are saved (default: here)")
    r.add_argument(
        "--session",
        action="store_true",
        help="program steps on one endpoint run in one session: a job's output files are the next job's inputs "
        "where they lie, not even copied (template programs)",
    )
    r.add_argument("--record", metavar="JSON", help="write the run record: steps, endpoints, times, bytes, outputs")
    r.add_argument("--graph", metavar="PATH", help="draw the workflow after the run: .svg or .png (Graphviz), or .dot")
    r.add_argument(
        "--advertise",
        metavar="URL",
        help="the URL steps reach this manager at, if not its own (a port forward, a proxy)",
    )
    add_endpoint_options(r, "CWL: ")
    add_steps_option(r)
    r.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    r.set_defaults(func=run_command)
    g = ws.add_parser("graph", help="draw a workflow file (DOT on stdout, or -o .svg/.png/.dot)")
    g.add_argument("flow")
    g.add_argument("-o", "--output", metavar="PATH")
    g.add_argument("--record", metavar="JSON", help="a run record: show each step's state, time and bytes")
    g.set_defaults(func=graph_command)
    return r
