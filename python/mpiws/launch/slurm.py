"""``mpiws run --slurm prog.py``, inside a Slurm allocation (``salloc``,
``sbatch``): one rank per task on the allocated nodes, as ``mpiexec`` does
under Slurm.

This process serves the rendezvous (on this node's address, with a fresh
random key) and runs ``srun``, which starts ``mpiws run --rendezvous`` in
every task (rank ``SLURM_PROCID``; the key reaches the tasks in srun's
environment, never on a command line). Once every task has registered, the
domain starts here and is watched as ``mpiws run -n N`` watches it: output
comes through srun, a failing rank stops the others, and the exit status is
the domain's. Our standard input goes to rank 0 (task 0) alone, through srun,
as mpiexec gives it.
"""

import os
import secrets
import shutil
import subprocess
import sys

from .. import _core
from .local import has_stdin
from .rendezvous import LAUNCHER_ENV, Refused, advertised_host, endpoint_url, from_env, serve_and_watch
from .program import python_argv

#: How long srun may take to end once the domain has.
SRUN_GRACE = 30.0


def run_slurm(
    program, args, size=None, prefix=False, keep_going=False, host=None, tls_cert=None, tls_key=None, form="path"
):
    """Run ``program`` (a file, or in ``form`` "module" or "code") on the
    allocation's tasks; returns the exit status."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise Refused("--slurm runs inside a Slurm allocation (salloc or sbatch): SLURM_JOB_ID is not set")
    srun = shutil.which("srun")
    if srun is None:
        raise Refused("--slurm needs srun on the PATH")
    size = size or from_env(("SLURM_NTASKS",), "size")
    stdin = None if has_stdin() else subprocess.DEVNULL
    key = secrets.token_hex(32)
    host = host or advertised_host("0.0.0.0")  # this node, as the others reach it
    if host.startswith("127.") and int(os.environ.get("SLURM_JOB_NUM_NODES", "1")) > 1:
        raise Refused(
            f"this node's name resolves to {host}, which the allocation's other nodes cannot reach: "
            "give the address they reach this node at with --advertise"
        )
    endpoint = _core.Endpoint(host, 0, keys=key)
    endpoint.open_rendezvous(size)
    rendezvous = endpoint_url("http", host, endpoint.port)
    rank_cmd = [
        sys.executable,
        "-m",
        "mpiws",
        "run",
        "--rendezvous",
        rendezvous,
        "--size",
        str(size),
        "--host",
        "0.0.0.0",
    ]
    if tls_cert:
        rank_cmd += ["--tls-cert", os.path.abspath(tls_cert), "--tls-key", os.path.abspath(tls_key)]
    # --input=0: srun streams our stdin to task 0 (rank SLURM_PROCID 0) only; the others read none.
    cmd = [
        srun,
        f"--ntasks={size}",
        "--kill-on-bad-exit=0",
        "--input=0",
        *(["--label"] if prefix else []),
        *rank_cmd,
        *python_argv(program, args, form),
    ]
    env = dict(os.environ, MPIWS_KEY=key, PYTHONUNBUFFERED="1", **{LAUNCHER_ENV: "1"})
    # srun forwards the tasks' output to ours, and our input to task 0.
    proc = subprocess.Popen(cmd, env=env, stdin=stdin)

    def gone():
        code = proc.poll()
        return None if code is None else f"srun exited with status {code}"

    try:
        code = serve_and_watch(endpoint, size, key, program, args, keep_going, gone=gone, form=form)
    except (RuntimeError, TimeoutError) as e:
        print(f"mpiws run: {e}", file=sys.stderr, flush=True)
        code = 1
    try:
        proc.wait(timeout=SRUN_GRACE)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait()
    return code
