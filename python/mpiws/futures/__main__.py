# Adapted from mpi4py (https://github.com/mpi4py/mpi4py), src/mpi4py/futures/__main__.py
# at commit 7c8dac2c58203a4d538961c6524e3940b04a42dc (2026-08-22, version 4.2.0.dev0).
# Changes for mpiws: imports are mpiws's (``from .. import MPI`` is mpiws.MPI; ``..run`` is ._run).
#
# mpi4py's licence:
#
# Copyright (c) 2026, Lisandro Dalcin
#
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions are met:
#
# 1. Redistributions of source code must retain the above copyright notice, this
#    list of conditions and the following disclaimer.
#
# 2. Redistributions in binary form must reproduce the above copyright notice,
#    this list of conditions and the following disclaimer in the documentation
#    and/or other materials provided with the distribution.
#
# 3. Neither the name of the copyright holder nor the names of its contributors
#    may be used to endorse or promote products derived from this software
#    without specific prior written permission.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
# AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
# IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
# DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE
# FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
# DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
# SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
# CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
# OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
# OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
#
# Author:  Lisandro Dalcin
# Contact: dalcinl@gmail.com
"""Run Python code using ``mpi4py.futures``.

Python code (scripts, modules, zip files) is run in the process with rank 0 in
``MPI.COMM_WORLD`` and creates `MPIPoolExecutor` instances to submit tasks. The
other processes team-up in a static-size shared pool of workers executing tasks
submitted from the master process.
"""


def main():
    """Entry point for ``python -m mpi4py.futures ...``."""
    # pylint: disable=import-outside-toplevel
    import os
    import sys

    from ._run import run_command_line, set_abort_status
    from ._core import SharedPoolCtx

    class UsageExit(SystemExit):
        # pylint: disable=missing-class-docstring
        pass

    def usage(error=None):
        import pathlib
        import textwrap

        python = pathlib.Path(sys.executable).name
        program = __spec__ and __spec__.parent
        usage = textwrap.dedent(f"""
        usage: {python} -m {program} <pyfile> [arg] ...
           or: {python} -m {program} -m <module> [arg] ...
           or: {python} -m {program} -c <string> [arg] ...
        """).strip()
        if error:
            print(error, file=sys.stderr)
            print(usage, file=sys.stderr)
        else:
            print(usage, file=sys.stdout)
        raise UsageExit(1 if error else 0)

    def chk_command_line():
        args = sys.argv[1:]
        if not args:
            usage("No path specified for execution")
        elif args[0] == "-":
            pass
        elif args[0] in ("-h", "--help"):
            usage()
        elif args[0] in ("-m", "-c"):
            if len(args) < 2:
                usage(f"Argument expected for option: {args[0]}")
        elif args[0].startswith("-"):
            usage(f"Unknown option: {args[0]}")
        elif not os.path.exists(args[0]):  # noqa: PTH110
            usage(f"Path does not exist: {args[0]}")

    try:
        with SharedPoolCtx() as context:
            if context is not None:
                chk_command_line()
                run_command_line()
    except UsageExit:
        raise
    except SystemExit as exc:
        set_abort_status(exc)
        raise
    except KeyboardInterrupt as exc:
        set_abort_status(exc)
        raise
    except BaseException:
        set_abort_status(1)
        raise


if __name__ == "__main__":
    main()
