"""Step functions for the example workflows (``@step`` makes each a service).

Deploy them on an endpoint with ``mpiws serve --service echo=examples.workflows.steps:echo ...``,
or name them as ``steps:echo`` in a workflow file to run them on the run's
own endpoint.
"""

from mpiws.workflow import step


@step
def echo(data):
    """Its input, unchanged (the original chain experiment's service)."""
    return data


@step
def square(x):
    return x * x


@step
def add(a, b):
    return a + b


@step
def total(values):
    """The sum of a list (a scatter's gathered outputs, or several sources merged)."""
    return sum(values)


@step
def stats(values):
    """Two outputs: a dict by name."""
    return {"count": len(values), "mean": sum(values) / len(values) if values else 0.0}


@step
def upper(text):
    return text.upper()


@step
def fail(x):
    raise ValueError(f"this step fails on purpose (given {x!r})")


@step
def upper_bytes(text):
    """A file's bytes in upper case (a service between two programs)."""
    return bytes(text).upper()


@step
def relax(block, total, count, tolerance):
    """One iteration of a distributed relaxation: every value moves halfway to
    the mean of all blocks (``total / count``: the allreduce of the blocks'
    sums and lengths of the iteration before, 0 at first). ``done`` once every
    value is within ``tolerance`` of it."""
    if count:
        mean = total / count
        block = [x + (mean - x) / 2 for x in block]
    done = bool(count) and all(abs(x - mean) <= tolerance for x in block)
    return {"block": block, "sum": sum(block), "n": len(block), "done": done}
