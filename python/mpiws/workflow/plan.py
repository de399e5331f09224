"""From a workflow and its inputs to the wiring of one domain (pure code).

Direct messaging starts every service step at once as ranks of one domain:
rank 0 is the manager (the client's own process), then each service step
gets a *group* of ranks, one per element when it scatters. Every
connection between a producer and a consumer gets a tag and a mode
(``wiring``); the manager stands in as producer for the client's inputs
and for program steps' outputs, and as consumer for the workflow's outputs
and for program steps' inputs, so that only those pass through it.

A mediated run (``invocation``) wires one step alone with the manager:
everything comes from rank 0 and goes back to it (a looping step: once
per iteration).
"""

from dataclasses import dataclass, field

from .spec import Literal, WorkflowError


@dataclass
class Group:
    step: str
    first: int
    width: int
    scattered: bool


@dataclass
class Plan:
    groups: dict = field(default_factory=dict)  # service step -> Group
    configs: dict = field(default_factory=dict)  # service step -> its ranks' configuration
    manager: dict = field(
        default_factory=lambda: {"step": "manager", "first": 0, "width": 1, "inputs": {}, "outputs": {}}
    )
    size: int = 1

    def step_of(self, rank):
        for g in self.groups.values():
            if g.first <= rank < g.first + g.width:
                return g.step, rank - g.first
        return None, None


MANAGER = Group("manager", 0, 1, False)


def direct(wf, values):
    """The domain that runs ``wf``'s service steps; ``values``: the client's inputs by name."""
    plan = Plan()
    services = [wf.steps[n] for n in wf.order() if wf.steps[n].kind == "service"]
    for s in services:
        width, scattered = _width(wf, plan, s, values), bool(s.scatter)
        plan.groups[s.name] = Group(s.name, plan.size, width, scattered)
        plan.size += width
    tags = iter(range(1, 1 << 30))

    def producer(src):
        """The group that sends ``src`` and the name of its output there."""
        if src.step is None:
            return MANAGER, "in:" + src.name
        if wf.steps[src.step].kind == "program":
            return MANAGER, f"prog:{src}"
        return plan.groups[src.step], src.name

    def connect(src, consumer, consumer_cfg, input_name, scatters):
        group, out = producer(src)
        if scatters:
            if group.scattered:
                if group.width != consumer.width:
                    raise WorkflowError(
                        f"step {consumer.step} scatters over {src} ({group.width} elements) beside "
                        f"inputs of {consumer.width}"
                    )
                mode = "element"
            else:
                mode = "split"
        else:
            mode = "gather" if group.scattered else "whole"
        tag = next(tags)
        consumer_cfg["inputs"].setdefault(input_name, {"parts": [], "merged": False})["parts"].append(
            {"tag": tag, "from": group.first, "width": group.width, "mode": mode}
        )
        producer_cfg = plan.manager if group is MANAGER else plan.configs[group.step]
        producer_cfg["outputs"].setdefault(out, []).append(
            {"tag": tag, "to": consumer.first, "width": consumer.width, "mode": mode}
        )

    for s in services:
        g = plan.groups[s.name]
        plan.configs[s.name] = {
            "step": s.name,
            "first": g.first,
            "width": g.width,
            "out": list(s.outputs),
            "inputs": {},
            "outputs": {},
        }
        if s.loop is not None:
            plan.configs[s.name]["loop"] = s.loop.as_config()
    for s in services:
        cfg, g = plan.configs[s.name], plan.groups[s.name]
        for name, v in s.inputs.items():
            if isinstance(v, Literal):
                cfg["inputs"][name] = {"value": v.value}
                continue
            for src in v if isinstance(v, list) else [v]:
                connect(src, g, cfg, name, name in s.scatter)
            cfg["inputs"][name]["merged"] = isinstance(v, list)
    # What the manager needs from services: program steps' inputs and the workflow's outputs.
    for s in wf.steps.values():
        if s.kind != "program":
            continue
        for v in s.inputs.values():
            for src in (v if isinstance(v, list) else [v]) if not isinstance(v, Literal) else []:
                if src.step is not None and wf.steps[src.step].kind == "service":
                    connect(src, MANAGER, plan.manager, f"prog:{src}", False)
    for name, src in wf.outputs.items():
        if src.step is not None and wf.steps[src.step].kind == "service":
            connect(src, MANAGER, plan.manager, f"out:{name}", False)
    for cfg in plan.configs.values():  # every declared output is produced, wanted or not
        step = wf.steps[cfg["step"]]
        for o in step.outputs:
            cfg["outputs"].setdefault(o, [])
    return plan


def _width(wf, plan, step, values):
    """How many ranks a service step takes: one, or one per element of what it scatters over."""
    if not step.scatter:
        return 1
    widths = set()
    for name in step.scatter:
        src = step.inputs[name]
        if isinstance(src, list):
            raise WorkflowError(
                f"step {step.name}: scatter over {name}, a list of several sources: direct "
                f"messaging scatters over one source"
            )
        if src.step is None:
            v = values.get(src.name)
            if not isinstance(v, (list, tuple)):
                raise WorkflowError(f"step {step.name} scatters over input {src.name}, which is not a list")
            widths.add(len(v))
        elif src.step in plan.groups and plan.groups[src.step].scattered:
            widths.add(plan.groups[src.step].width)
        else:
            raise WorkflowError(
                f"step {step.name} scatters over {src}, whose length is known only when it has run; "
                f"direct messaging starts every service at once, so it scatters over an input or "
                f"a scattered step's output (or run the workflow --mediated)"
            )
    if len(widths) > 1:
        raise WorkflowError(
            f"step {step.name}: the inputs it scatters over have different lengths "
            f"({', '.join(map(str, sorted(widths)))}); dotproduct pairs them element by element"
        )
    return widths.pop()


def invocation(step):
    """The configuration of one mediated invocation of ``step`` (as rank 1; its inputs' values given by rank 0)."""
    cfg = {"step": step.name, "first": 1, "width": 1, "out": list(step.outputs), "inputs": {}, "outputs": {}}
    tag = 1
    for name in step.inputs:
        cfg["inputs"][name] = {"parts": [{"tag": tag, "from": 0, "width": 1, "mode": "whole"}], "merged": False}
        tag += 1
    for name in step.outputs:
        cfg["outputs"][name] = [{"tag": tag, "to": 0, "width": 1, "mode": "whole"}]
        tag += 1
    return cfg
