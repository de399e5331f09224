"""A picture of a workflow: its graph in Graphviz's DOT (pure code), drawn as
SVG or PNG by Graphviz's ``dot`` when it is installed. After a run, each
step shows its state, time and bytes, coloured by state."""

import shutil
import subprocess

COLOURS = {"done": "#c8e6c9", "failed": "#ffcdd2", "cancelled": "#eeeeee", "running": "#fff9c4", "waiting": "#ffffff"}


def _q(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(wf, record=None):
    """The DOT text of ``wf`` (with the states of ``record``, a run record, if given)."""
    from .record import human

    lines = [f"digraph {_q(wf.name)} {{", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=11];']
    for name in wf.inputs:
        lines.append(f"  {_q('in:' + name)} [label={_q(name)}, shape=ellipse, style=dashed];")
    for name, s in wf.steps.items():
        label = [name, f"{s.kind} {s.target}" if len(s.target) < 40 else s.kind]
        if s.scatter:
            label.append("scatter " + ", ".join(s.scatter))
        if s.endpoint:
            label.append(s.endpoint)
        fill = "#ffffff"
        if record:
            r = record["steps"].get(name, {})
            fill = COLOURS.get(r.get("state"), fill)
            info = [r.get("state", "")]
            if r.get("started") is not None and r.get("ended") is not None:
                info.append(f"{r['ended'] - r['started']:.3f} s")
            if r.get("bytes_in") or r.get("bytes_out"):
                info.append(f"{human(r['bytes_in'])} in, {human(r['bytes_out'])} out")
            label.append(", ".join(i for i in info if i))
        shape = "box" if s.kind == "service" else "component"
        lines.append(
            f"  {_q(name)} [label={_q(chr(10).join(label))}, shape={shape}, style=filled, fillcolor={_q(fill)}];"
        )
    for name in wf.outputs:
        lines.append(f"  {_q('out:' + name)} [label={_q(name)}, shape=ellipse, style=bold];")
    for tail, head, label in wires(wf):
        lines.append(f"  {_q(tail)} -> {_q(head)} [label={_q(label)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def wires(wf):
    """The picture's arrows, (tail, head, label): from a workflow input (``in:NAME``) or a step, to a step
    or a workflow output (``out:NAME``); one per value a step or an output takes."""
    from .spec import Literal

    for name, s in wf.steps.items():
        for iname, v in s.inputs.items():
            if isinstance(v, Literal):
                continue
            for src in v if isinstance(v, list) else [v]:
                tail = "in:" + src.name if src.step is None else src.step
                yield tail, name, iname if src.step is None or src.name == iname else f"{src.name} -> {iname}"
    for name, src in wf.outputs.items():
        yield "in:" + src.name if src.step is None else src.step, "out:" + name, src.name


def step_edges(wf):
    """[from, to] for each step that feeds another (the picture's arrows between steps, each pair once)."""
    edges = []
    for tail, head, _ in wires(wf):
        if tail in wf.steps and head in wf.steps and [tail, head] not in edges:
            edges.append([tail, head])
    return edges


class CannotDraw(Exception):
    """A picture that cannot be drawn here: said before a run starts, in one line."""


def drawer(path):
    """(format, Graphviz's ``dot`` or None for .dot) for a picture at ``path``; CannotDraw if it cannot be
    drawn here, so that a run asked to draw itself is refused before any step runs."""
    fmt = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if fmt == "dot":
        return fmt, None
    if fmt not in ("svg", "png"):
        raise CannotDraw(f"a workflow picture is .svg, .png or .dot, not {path!r}")
    exe = shutil.which("dot")
    if exe is None:
        raise CannotDraw(f"drawing {path} needs Graphviz's dot (apt-get install graphviz), or ask for a .dot file")
    return fmt, exe


def draw(wf, path, record=None):
    """Write the picture to ``path``: .dot as text; .svg or .png drawn by Graphviz (``dot``)."""
    fmt, exe = drawer(path)
    text = dot(wf, record)
    if exe is None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path
    p = subprocess.run([exe, f"-T{fmt}", "-o", path], input=text.encode(), capture_output=True)
    if p.returncode:
        raise CannotDraw(f"Graphviz's dot could not draw {path}: {p.stderr.decode(errors='replace').strip()}")
    return path
