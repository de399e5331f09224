"""A plain function as a workflow step, deployed as a service.

::

    from mpiws.workflow import step

    @step
    def echo(data):
        return data

    # mpiws serve --service echo=mymodule:echo

The function takes its inputs by name and returns its output (or, for a
step with several outputs, a dict by name). Run by ``mpiws workflow run``,
an instance receives each input straight from the rank that produces it
and sends each output straight to the ranks that consume it, as its
configuration in the domain's parameters says (``wiring``); run mediated,
it exchanges everything with the manager. A looping step's ranks iterate
here, sharing reductions with collectives among themselves (``loop``). It
reports what it did (times, bytes, iterations) as its instance's result.
"""

import functools
import time

from .loop import iterate
from .values import nbytes
from .wiring import assemble, receives, sends


class step:  # noqa: N801 - used as a decorator, like functools.wraps
    """Make ``function`` a service that runs as a workflow step."""

    def __init__(self, function):
        if not callable(function):
            raise TypeError("step decorates a function")
        self.function = function
        functools.update_wrapper(self, function)

    def __call__(self, comm, params):
        cfg = (params or {}).get("workflow") if isinstance(params, dict) else None
        if cfg is None:
            raise ValueError(f"{self.__qualname__} is a workflow step: run it with mpiws workflow run")
        return run(self.function, comm, cfg)


def run(function, comm, cfg):
    """One rank of a step: receive, call, send; returns the step's report."""
    from ..MPI.request import Request  # here: the workflow package itself loads without the MPI package

    index = comm.Get_rank() - cfg["first"]
    expected = receives(cfg["inputs"], index)
    started = time.monotonic()
    got = Request.waitall([comm.irecv(source=r, tag=t) for _, _, r, t in expected])
    received = {(n, k, r): v for (n, k, r, _), v in zip(expected, got)}
    inputs = assemble(cfg["inputs"], received)
    computing = time.monotonic()
    report = {}
    call = lambda given: named_outputs(function(**given), cfg["out"], cfg["step"])  # noqa: E731
    if cfg.get("loop"):
        group = comm.Create_group(comm.group.Incl(range(cfg["first"], cfg["first"] + cfg["width"])))
        try:
            outputs, report["iterations"] = iterate(call, inputs, group, cfg["loop"])
        finally:
            group.Free()
    else:
        outputs = call(inputs)
    computed = time.monotonic()
    messages = sends(cfg["outputs"], index, outputs, cfg["step"])
    Request.waitall([comm.isend(v, dest=d, tag=t) for d, t, v in messages])
    return {
        **report,
        "waited": computing - started,
        "seconds": computed - computing,
        "sent_seconds": time.monotonic() - computed,
        "bytes_in": sum(map(nbytes, got)),
        "bytes_out": sum(nbytes(v) for _, _, v in messages),
    }


def named_outputs(result, names, step_name):
    """A step function's return value as {output: value}: the value itself for one output, a dict for several."""
    if len(names) == 1:
        return {names[0]: result}
    if not names:
        return {}
    if isinstance(result, dict) and set(names) <= set(result):
        return {n: result[n] for n in names}
    got = f"keys {sorted(result)}" if isinstance(result, dict) else type(result).__name__
    raise TypeError(
        f"step {step_name} has outputs {', '.join(names)}: its function returns a dict with them, not {got}"
    )
