"""A process ``MPI.Comm.Spawn`` started (``launch/spawn.py``): serves an
endpoint no client can use, joins the spawn domain from the binding its
parent writes to a pipe, and runs its program (given as to ``python``)
with COMM_WORLD its fellow children and ``Get_parent`` the parents."""

import json
import os
import secrets
import sys
import threading

from .. import _core, binding
from .spawn import sides
from .program import from_python_argv
from .worker import _exit_when_closed, _read_all, quiet_interrupt, run_to_end


def main():
    form, program, args = from_python_argv(sys.argv[1:])
    url_fd = int(os.environ.pop("MPIWS_URL_FD"))
    hold_fd = int(os.environ.pop("MPIWS_HOLD_FD"))
    binding_fd = int(os.environ.pop("MPIWS_BINDING_FD"))
    outcome = {}
    threading.Thread(target=_exit_when_closed, args=(hold_fd, outcome), daemon=True).start()

    # A key nobody is told: the domain is created here, not by a request.
    endpoint = _core.Endpoint(os.environ.get("MPIWS_HOST", "127.0.0.1"), keys=secrets.token_hex(32))
    os.write(url_fd, endpoint.url.encode() + b"\n")  # the pipe stays open until the program has ended
    b = json.loads(_read_all(binding_fd) or "null")
    if not b:
        outcome["code"] = 3  # the parent gave up before binding us
        return
    instance = endpoint.create_instance(b["domain"], b["rank"], b["endpoints"], b["token"])
    instance.set_running()
    world, inter, inter_local = sides(instance, b["parents"])
    from ..MPI.intercomm import _make

    binding.set_process(instance, endpoint=endpoint, world=world, parent=_make(inter, inter_local))
    try:
        run_to_end(program, args, form)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:  # Ctrl-C at mpiws run: its launcher says so, once
        code = 130
    except BaseException:  # noqa: BLE001 - reported as python would (the user's frames), then the exit status
        import traceback

        from .domain import user_traceback

        sys.stderr.write(user_traceback(traceback.format_exc()))
        code = 1
    try:
        instance.flush(None)  # what this child sent is delivered before it says it ended
    except Exception as e:  # noqa: BLE001 - a peer gone: said, and the child ends all the same
        print(f"mpiws: spawned rank {b['rank']}: {e}", file=sys.stderr)
        code = code or 1
    outcome["code"] = code
    sys.stdout.flush()
    sys.stderr.flush()
    os.close(url_fd)
    if code:
        os._exit(code)  # failed: gone at once, so that peers waiting on it fail instead of waiting


if __name__ == "__main__":
    quiet_interrupt(main)  # then the spawning process decides when this one ends
