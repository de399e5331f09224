"""``mpiws-cwl-runner``: the ``cwl-runner`` interface over ``mpiws workflow
run``, so that CWL's test runner (``cwltest --tool mpiws-cwl-runner``) and
users' scripts written for ``cwl-runner`` run a document with mpiws
unchanged: ``mpiws-cwl-runner [--outdir DIR] [--quiet] DOC.cwl [JOB]``
prints the output object (JSON) on stdout; exit 0 on success, 33 for a
feature mpiws does not run (CWL's convention), 1 for anything else (a
wrong document or job, a failed step)."""

import argparse
import sys
from types import SimpleNamespace

from ..command import add_endpoint_options, add_steps_option
from .run import run_command


def parser():
    from ... import __version__

    p = argparse.ArgumentParser(
        prog="mpiws-cwl-runner",
        description="Run a CWL v1.2 document with mpiws (the cwl-runner interface; docs/workflows.md).",
    )
    p.add_argument("--version", action="version", version=f"mpiws-cwl-runner {__version__}")
    p.add_argument("--outdir", default=".", help="where output files are saved (default: here)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_endpoint_options(p)
    add_steps_option(p)
    p.add_argument("document", help="the CWL document (a Workflow or a CommandLineTool)")
    p.add_argument("job", nargs="?", help="the job: input values (YAML or JSON)")
    return p


def main(argv=None):
    a = parser().parse_args(argv)
    args = SimpleNamespace(
        prog="mpiws-cwl-runner",
        flow=a.document,
        job=a.job,
        inputs=[],
        outdir=a.outdir,
        key=a.key,
        endpoint=a.endpoint,
        steps=a.steps,
        quiet=a.quiet,
        record=None,
        mediated=False,
        graph=None,
        advertise=None,
    )
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
