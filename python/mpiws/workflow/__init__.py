"""Workflows: steps that pass data to each other directly, not through the manager.

- ``spec``: the workflow file (YAML) and its checks; ``values``: inputs, outputs, files.
- ``plan`` and ``wiring``: which rank sends what to whom (pure code).
- ``step``: a function as a step service (``@step``), the steps' side.
- ``direct`` and ``mediated``: the manager's two forms; ``flow``: its dataflow
  of steps it runs itself; ``programs``: program steps as jobs;
  ``domain``: the manager's rank 0 and the step instances; ``local``: the
  run's own endpoint; ``record``: progress and the run record; ``live``: the record on
  the run's dashboard; ``manager``: one run.
- ``command``: ``mpiws workflow ...``.

docs/workflows.md is the user's reference.
"""

from .spec import StepFailed, WorkflowError
from .step import step


def run(flow, inputs=None, **options):
    """Run a workflow file; returns (output object, run record). See ``mpiws.workflow.manager.run``."""
    from .manager import run as _run

    return _run(flow, inputs, **options)


__all__ = ["StepFailed", "WorkflowError", "run", "step"]
