"""Who sends what to whom: a rank's part of a workflow's wiring (pure code).

A *group* is the ranks of one step: ``first`` and ``width`` (one rank, or
one per element of a scatter). Its configuration (made by ``plan``, sent
in the instances' parameters) lists for each input the *parts* it is
made of and for each output where it goes; one entry per connection::

    {"step": "b", "first": 3, "width": 2,
     "inputs":  {"x": {"parts": [{"tag": 7, "from": 1, "width": 1, "mode": "split"}], "merged": false},
                 "n": {"value": 5}},
     "outputs": {"y": [{"tag": 9, "to": 0, "width": 1, "mode": "gather"}]}}

A connection's *mode* says how the producer's ranks meet the consumer's:

- ``whole``: one producer rank; each consumer rank gets its value;
- ``split``: one producer rank, a list; consumer rank k gets element k
  (the consumer scatters over it);
- ``element``: as many producer ranks as consumer ranks; rank k to rank k
  (a scatter feeding a scatter);
- ``gather``: several producer ranks; each consumer rank gets all their
  values as a list, in rank order.

The same reading serves every rank: step instances on endpoints and the
manager (rank 0), which produces the client's inputs and consumes the
workflow's outputs.
"""

from .spec import WorkflowError

MODES = ("whole", "split", "element", "gather")


def receives(inputs, index):
    """The messages rank ``index`` of a group receives: (input, part, source rank, tag) in a fixed order."""
    out = []
    for name, spec in inputs.items():
        for k, part in enumerate(spec.get("parts", ())):
            mode, first, width = part["mode"], part["from"], part["width"]
            if mode == "element":
                ranks = [first + index]
            elif mode == "gather":
                ranks = list(range(first, first + width))
            else:
                ranks = [first]
            out.extend((name, k, r, part["tag"]) for r in ranks)
    return out


def assemble(inputs, received):
    """Input values from ``received``: (input, part, source rank) -> value, for the keys ``receives`` gave."""
    values = {}
    for name, spec in inputs.items():
        if "value" in spec:
            values[name] = spec["value"]
            continue
        parts = []
        for k, part in enumerate(spec["parts"]):
            got = sorted(((r, v) for (n, kk, r), v in received.items() if n == name and kk == k), key=lambda p: p[0])
            if part["mode"] == "gather":
                parts.append([v for _, v in got])
            else:
                parts.append(got[0][1])
        values[name] = parts if spec.get("merged") else parts[0]
    return values


def sends(outputs, index, values, step="step"):
    """(destination rank, tag, value) for each message rank ``index`` sends, given its output ``values``."""
    out = []
    for name, conns in outputs.items():
        if name not in values:
            raise WorkflowError(f"step {step} did not produce its output {name!r}")
        v = values[name]
        for c in conns:
            first, width, mode = c["to"], c["width"], c["mode"]
            if mode == "split":
                items = list(v) if isinstance(v, (list, tuple)) else None
                if items is None or len(items) != width:
                    got = f"{len(items)} elements" if items is not None else type(v).__name__
                    raise WorkflowError(
                        f"step {step}: output {name} feeds a scatter over {width} elements, but is {got}"
                    )
                out.extend((first + k, c["tag"], items[k]) for k in range(width))
            elif mode == "element":
                out.append((first + index, c["tag"], v))
            else:  # whole, gather: every consumer rank gets it
                out.extend((first + k, c["tag"], v) for k in range(width))
    return out
