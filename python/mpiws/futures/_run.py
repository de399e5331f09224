# Adapted from mpi4py (https://github.com/mpi4py/mpi4py), src/mpi4py/run.py (run_command_line,
# set_abort_status) at commit 7c8dac2c58203a4d538961c6524e3940b04a42dc; mpi4py's licence is in
# mpiws/util/pkl5.py. Changes for mpiws: set_abort_status keeps the status (mpiws has no MPI._set_abort_status).
# Author:  Lisandro Dalcin
# Contact: dalcinl@gmail.com
"""Run Python code as ``python`` would (mpi4py's ``mpi4py.run``).

Run Python code (scripts, modules, zip files) using the ``runpy``
module. In case of an unhandled exception, abort execution of the MPI
program by calling ``MPI.COMM_WORLD.Abort()``.
"""


def run_command_line(args=None):
    """Run command line ``[pyfile | -m mod | -c cmd | -] [arg] ...``.

    * ``pyfile`` : program read from script file
    * ``-m mod`` : run library module as a script
    * ``-c cmd`` : program passed in as a command string
    * ``-``      : program read from standard input (``sys.stdin``)
    * ``arg ...``: arguments passed to program in ``sys.argv[1:]``
    """
    # pylint: disable=import-outside-toplevel
    import os
    import sys
    from runpy import run_module, run_path

    def run_string(
        string,
        init_globals=None,
        run_name=None,
        filename="<string>",
        argv0="-c",
    ):
        # pylint: disable=protected-access
        run_module_code = __import__("runpy")._run_module_code  # ty: ignore
        code = compile(string, filename, "exec", 0, True)
        kwargs = {"script_name": argv0}
        return run_module_code(code, init_globals, run_name, **kwargs)

    sys.argv[:] = args if args is not None else sys.argv[1:]

    if sys.argv[0] == "-":
        cmd = sys.stdin.read()
        run_string(cmd, run_name="__main__", filename="<stdin>", argv0="-")
    elif sys.argv[0] == "-c":
        cmd = sys.argv.pop(1)  # Remove "cmd" from argument list
        run_string(cmd, run_name="__main__", filename="<string>", argv0="-c")
    elif sys.argv[0] == "-m":
        del sys.argv[0]  # Remove "-m" from argument list
        run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        if not getattr(sys.flags, "isolated", 0):  # pragma: no branch
            dir_path = os.path.dirname(sys.argv[0])  # noqa: PTH120
            sys.path[0] = os.path.realpath(dir_path)  # Fix sys.path
        run_path(sys.argv[0], run_name="__main__")


def set_abort_status(status):
    """Keep the status a failing program ends with.

    mpi4py aborts MPI.COMM_WORLD with it at exit; mpiws's launcher already
    ends the domain when a rank fails, so the status is only kept. Call it
    within an ``except`` block, then re-raise.
    """
    if isinstance(status, SystemExit):
        status = status.code
    elif isinstance(status, KeyboardInterrupt):
        signal = __import__("signal")
        status = signal.SIGINT + 128
    if not isinstance(status, int):
        status = 0 if status is None else 1
    global abort_status
    abort_status = status  # the rank's failure, which mpiws's launcher reports and ends the domain on


#: The status ``set_abort_status`` was given (None: none).
abort_status = None
