"""CWL v1.2 in mpiws: ``mpiws workflow run flow.cwl job.yml``.

- ``load``: CWL documents (a CommandLineTool, or a Workflow of them) and
  their ids normalized; ``job``: the job object, values on the wire, the
  final output object; ``steps``: a step's jobs from its sources (pure);
  ``run``: a run, each tool an mpiws job of a CWL program (the endpoint
  builds its command line: ``crates/core/src/jobs/cwl``); ``whole``: what
  that step engine does not run, packed by cwltool's loader and run whole
  by the endpoint's CWL runner (cwltool: ``jobs/cwl/delegate.rs``);
  ``runner``: the ``cwl-runner`` interface.

docs/workflows.md ("CWL") says what of CWL v1.2 is supported.
"""

from .load import CwlError

# The function, bound over the submodule of the same name (importing the
# submodule later would otherwise rebind `run` to the module).
from .run import run  # noqa: E402

__all__ = ["CwlError", "run"]
