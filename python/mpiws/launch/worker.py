"""A rank process of ``mpiws run -n N``: serves its own endpoint with one
service, ``script``, which runs the program as ``__main__`` with COMM_WORLD
bound to the domain instance the launcher's *run* request created. The
program is given as to ``python``: ``prog.py``, ``-m module`` or ``-c code``,
then its arguments.

The launcher passes three pipes: the worker writes its URL to the first,
exits when the second closes (the launcher is done, or gone: no orphans),
and reads from the third the only key its endpoint accepts (so only the
launcher can start the rank: no other local process can hand it a domain).
"""

import os
import runpy
import signal
import sys
import threading
import types

from .. import _core, binding
from ..service.runner import run_instance
from .program import SERVICE, from_python_argv
from .spawn import end_children


def _exit_when_closed(fd, outcome):
    while os.read(fd, 4096):
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(outcome.get("code", 1))


def _read_all(fd):
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    os.close(fd)
    return data.decode()


def main():
    # mpiws run starts ranks with SIGINT blocked, so that a Ctrl-C while they
    # import is no traceback; from here on it is a KeyboardInterrupt (one
    # that came meanwhile is raised now: quiet_interrupt ends the rank).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    form, program, args = from_python_argv(sys.argv[1:])
    url_fd = int(os.environ.pop("MPIWS_URL_FD"))
    hold_fd = int(os.environ.pop("MPIWS_HOLD_FD"))
    key = _read_all(int(os.environ.pop("MPIWS_KEY_FD")))
    outcome = {}
    threading.Thread(target=_exit_when_closed, args=(hold_fd, outcome), daemon=True).start()

    # mpiws run --tls-cert/--tls-key: the local ranks serve https.
    endpoint = _core.Endpoint(
        os.environ.get("MPIWS_HOST", "127.0.0.1"),
        keys=key,
        tls_cert=os.environ.get("MPIWS_TLS_CERT") or None,
        tls_key=os.environ.get("MPIWS_TLS_KEY") or None,
    )
    endpoint.deploy(SERVICE)
    os.write(url_fd, endpoint.url.encode() + b"\n")
    os.close(url_fd)

    outcome["code"] = run_program(endpoint, program, args, form=form)


def run_program(endpoint, program, args, wait=120.0, form="path"):
    """Run ``program`` (in ``form``: see ``run_main``) as the rank that the
    next *run* request on ``endpoint`` creates (within ``wait`` seconds);
    its exit status."""
    instance = endpoint.next_run(wait)
    if instance is None:
        print(f"mpiws: no run request within {wait:g} s", file=sys.stderr)
        return 3
    binding.set_process(instance, endpoint=endpoint)
    ok = run_instance(instance, lambda comm, params: _run_and_end_children(program, args, form))
    return 0 if ok else 1


def _run_and_end_children(program, args, form):
    # A rank that spawned processes ends after them, as mpiexec waits for them.
    try:
        run_to_end(program, args, form)
    finally:
        end_children()


def run_to_end(program, args, form):
    """``run_main``, then, once the program ended well (``sys.exit(0)``
    too; another exit is raised), its ``atexit`` handlers, while its rank
    can still communicate: mpi4py runs them before ``MPI_Finalize``
    (dask-mpi stops its scheduler from one), and this process ends with
    ``os._exit``, which runs none. One that raises is reported and the
    others still run, as at an interpreter's exit."""
    import atexit

    try:
        run_main(program, args, form)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    atexit._run_exitfuncs()


def run_main(program, args, form="path"):
    """Run ``program`` as ``__main__`` with ``args``, as ``python`` runs
    ``prog.py`` (form "path"), ``-m module`` ("module") or ``-c code`` ("code"):
    the same sys.argv and sys.path[0]."""
    if form == "module":
        # runpy puts the module's file in sys.argv[0] once found, as python -m does.
        sys.argv = ["-m", *args]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(program, run_name="__main__", alter_sys=True)
    elif form == "code":
        sys.argv = ["-c", *args]
        sys.path.insert(0, "")
        _run_code(program)
    else:
        sys.argv = [program, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
        runpy.run_path(program, run_name="__main__")


def _run_code(code):
    # A fresh __main__ in sys.modules, as runpy gives the other forms: what
    # the program defines there pickles by reference to __main__.
    main = types.ModuleType("__main__")
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
    finally:
        sys.modules["__main__"] = saved


def quiet_interrupt(main):
    """Run ``main``, then wait for the launcher to end this process. Ctrl-C
    reaches every rank with the launcher (one process group): the launcher
    says it, once, and ends the ranks; a rank prints no traceback of its own
    (the program's own KeyboardInterrupt is its failure, reported as any)."""
    try:
        main()
    except KeyboardInterrupt:
        sys.stdout.flush()
        os._exit(130)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the program has ended: nothing left to interrupt
    threading.Event().wait()  # the launcher decides when this process ends


if __name__ == "__main__":
    quiet_interrupt(main)
