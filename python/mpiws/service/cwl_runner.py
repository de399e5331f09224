"""The endpoint's CWL runner (``mpiws serve --cwl-runner``; the core's half is
``crates/core/src/jobs/cwl/delegate.rs``): the command that runs a CWL document
the endpoint's own engine does not, by default this Python's cwltool, the
reference, and its fork server.

A fresh cwltool pays for its imports and for loading the CWL schema (about a
second here) before it reads a document; the fork server pays once. It is a
fork server of ``forks`` (the same wire as the instances' one), warm with
cwltool and the CWL schemas every job loads, started by the endpoint when the first
document for the runner is deployed (``python -m mpiws.service.cwl_runner``),
or forked by a client from itself, where it has just loaded them to pack the
document (``fork_here``). Each job is a child of it, which:

- reads its request on its stdin (JSON: ``argv``, what follows the runner's
  options on its command line; ``cwd``; ``exit``, where the exit status
  goes), written there by the endpoint, then has ``/dev/null`` as stdin;
- writes to the job's stdout and stderr files (its descriptors 3 and 4);
- runs ``cwltool.main.main`` with the schema it already holds, then writes
  its exit status to the job's exit file, as the wrapper of any other job
  does (an endpoint started again reads it).

The child is the job's process as a started runner would be: its own
process group (a kill ends it whole), the endpoint's environment, the same
options and files; the request is the endpoint's only (the wire is a socket
pair between the endpoint and this process).
"""

import functools
import importlib.util
import json
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import traceback

from . import forks

#: How the endpoint's cwltool runs (besides its container runtime, ``containers``): its log only
#: for warnings and errors.
OPTIONS = [
    "--relax-path-checks",  # names with spaces and '#', as the endpoint stages them (plain names, nothing more)
    "--disable-color",
    "--quiet",
]
#: A fresh cwltool. (Not ``-m cwltool``: its ``__main__`` drops the exit status, so a failed run would look like a run.)
FRESH = ["-c", "import sys, cwltool.main; sys.exit(cwltool.main.main())"]
#: The CWL schemas every job loads, loaded ahead: a packed document's version (cwltool's pack writes
#: v1.2), the one cwltool's types come from (v1.0), and the one it updates a document to (its own).
VERSIONS = ("v1.2", "v1.0", "INTERNAL")
#: The most a job's request may hold.
MAX_REQUEST = 1 << 20


def available():
    return importlib.util.find_spec("cwltool") is not None


@functools.cache
def containers():
    """cwltool's option for this machine's container runtime: podman, or docker (each if it answers:
    a docker command without its daemon is none), else singularity or apptainer; else ``--no-container``:
    a tool is run on the host as any other program, and a ``DockerRequirement`` exits 33."""
    for exe, option in (("podman", "--podman"), ("docker", None)):
        try:
            if shutil.which(exe) and subprocess.run([exe, "info"], capture_output=True, timeout=10).returncode == 0:
                return [option] if option else []
        except (OSError, subprocess.TimeoutExpired):
            pass
    if shutil.which("apptainer") or shutil.which("singularity"):
        return ["--singularity"]
    return ["--no-container"]


def options():
    return [*containers(), *OPTIONS]


def command(given=None):
    """The endpoint's CWL runner, a command as a list: ``given`` (a command line; ``none``: no runner),
    else this Python's cwltool if it is installed, else none (``[]``)."""
    if given is not None:
        return [] if given.strip() == "none" else shlex.split(given)
    return [sys.executable, *FRESH, *options()] if available() else []


def forks_command():
    """The command of the default runner's fork server (``[]`` without cwltool)."""
    return [sys.executable, "-m", __name__] if available() else []


def warm():
    """Load what every job would: cwltool, and the CWL schema of packed documents (and find the container runtime)."""
    import cwltool.main  # noqa: F401
    from cwltool.process import get_schema
    from cwltool.update import INTERNAL_VERSION

    for version in VERSIONS:
        get_schema(INTERNAL_VERSION if version == "INTERNAL" else version)
    containers()


def fork_here():
    """A fork server forked from this process (which has loaded cwltool and the schema: a client that
    packed a document): its wire, a descriptor the endpoint takes (``cwl_runner_wire``); None if this
    process runs threads (a fork of it would hold locks nobody releases)."""
    if threading.active_count() != 1:
        return None
    containers()  # found once, for the server and the endpoint both
    ours, theirs = socket.socketpair()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the server: never returns
        try:
            ours.close()
            null = os.open(os.devnull, os.O_RDWR)  # not the client's terminal or pipes: they end with the client
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            warm()
            serve(theirs)
        finally:
            os._exit(70)
    theirs.close()
    threading.Thread(target=os.waitpid, args=(pid, 0), name="mpiws-cwl-forks", daemon=True).start()
    return ours.detach()


def serve(wire=None):
    """Serve forks on ``wire`` (a socket, placed at descriptor 3), else on descriptor 3 as it is (warm
    already); each child runs its job and exits. Never returns."""
    if wire is not None:
        os.dup2(wire.fileno(), forks.WIRE_FD)
        wire.close()
    forks.serve()  # returns only in a child
    _run_job()


def _run_job():
    code, exit_file = 1, None
    try:
        request = json.loads(_read_all(0))
        exit_file = request["exit"]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for mine, std in zip(forks.CHILD_FDS, (1, 2)):
            os.dup2(mine, std)
            os.close(mine)
        os.chdir(request["cwd"])
        import cwltool.main

        logging.getLogger("cwltool").setLevel(logging.NOTSET)  # as a fresh runner's (a client's pack quiets it)
        # The callback keeps the standard schemas loaded (cwltool's own setup would drop them).
        code = cwltool.main.main(argsl=[*options(), *request["argv"]], custom_schema_callback=lambda: None)
    except BaseException:  # noqa: BLE001 - said on the job's stderr; the job fails
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if exit_file:
            _write_exit(exit_file, code)
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


def _read_all(fd):
    data = b""
    while len(data) <= MAX_REQUEST:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data
        data += chunk
    raise ValueError(f"a job's request is at most {MAX_REQUEST} bytes")


def _write_exit(path, code):
    """As the wrapper of other jobs: the whole status or nothing (``jobs/job.rs``'s ``WRAPPER``)."""
    part = path + ".part"
    try:
        os.unlink(part)
    except FileNotFoundError:
        pass
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{code}\n")
    os.replace(part, path)


if __name__ == "__main__":
    warm()
    serve()
