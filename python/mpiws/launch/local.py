"""``mpiws run -n N prog.py args`` (or ``-m module``, ``-c code``): N rank
processes on this machine, each serving its own endpoint, started as one
domain, like ``mpiexec``. Rank 0 reads the launcher's standard input, the
others read none, as under MPICH's mpiexec."""

import os
import secrets
import subprocess
import sys
import threading
import time

from .domain import Domain, exit_status
from .pipes import STARTUP_SECONDS, forward, read_url
from .program import SERVICE, python_argv


def has_stdin():
    """Whether fd 0 is open (not closed with ``<&-``); ask before making
    pipes or sockets, one of which would take it."""
    try:
        os.fstat(0)
        return True
    except OSError:
        return False


def _ended(proc, within):
    """``proc``'s exit status if it ends within ``within`` seconds, else None."""
    try:
        return proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        return None


def run_local(n, program, args=(), prefix=False, host="127.0.0.1", grace=5.0, log=None, keep_going=False, form="path"):
    """Run ``program`` (a file, or in ``form`` "module" or "code") on ``n``
    local ranks; returns the exit status."""
    log = log or (lambda msg: print(f"mpiws run: {msg}", file=sys.stderr, flush=True))
    procs, url_fds, holds, forwarders = [], [], [], []
    stdin = has_stdin()  # if closed, rank 0 reads nothing either
    # The only key the ranks' endpoints accept: it reaches them through a
    # pipe, never leaves this user's processes, and dies with the run; no
    # other process can start anything on them.
    key = secrets.token_hex(32)
    try:
        for rank in range(n):
            url_r, url_w = os.pipe()
            hold_r, hold_w = os.pipe()
            key_r, key_w = os.pipe()
            os.write(key_w, key.encode())
            os.close(key_w)
            env = dict(
                os.environ,
                MPIWS_URL_FD=str(url_w),
                MPIWS_HOLD_FD=str(hold_r),
                MPIWS_KEY_FD=str(key_r),
                MPIWS_HOST=host,
                PYTHONUNBUFFERED="1",
            )
            # Rank 0 inherits our stdin: it reads each line as it comes, and
            # its end, with nothing in between to buffer or to outlive it.
            p = subprocess.Popen(
                [sys.executable, "-m", "mpiws.launch.worker", *python_argv(program, args, form)],
                env=env,
                pass_fds=(url_w, hold_r, key_r),
                stdin=None if rank == 0 and stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            os.close(url_w)
            os.close(hold_r)
            os.close(key_r)
            procs.append(p)
            url_fds.append(url_r)
            holds.append(hold_w)
            tag = f"[{rank}] ".encode() if prefix else b""
            for stream, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                t = threading.Thread(target=forward, args=(stream, out, tag), daemon=True)
                t.start()
                forwarders.append(t)
        deadline = time.monotonic() + STARTUP_SECONDS
        urls = [read_url(fd, p, deadline) for fd, p in zip(url_fds, procs)]

        domain = Domain(urls, key=key)
        try:
            events = domain.start(SERVICE, {"program": program, "args": list(args), "form": form}, keep_going)
        except Exception:
            # A rank that ends at once can die before its endpoint answers
            # the run request: name it by its exit status, not by a lost reply.
            time.sleep(0.5)
            dead = [(r, p.poll()) for r, p in enumerate(procs) if p.poll() is not None]
            if not dead:
                raise
            for r, code in dead:
                log(f"rank {r} process exited with status {code} while the domain started")
            return 1

        def watch_process(rank, p):
            code = p.wait()
            events.put((rank, RuntimeError(f"rank {rank} process exited with status {code} before reporting")))

        for rank, p in enumerate(procs):
            threading.Thread(target=watch_process, args=(rank, p), daemon=True).start()
        statuses, failure = domain.wait(events, grace=grace, keep_going=keep_going)

        def ended(rank):
            if _ended(procs[rank], 1.0) is not None:
                return f"exit status {procs[rank].returncode}"
            return None

        return exit_status(statuses, failure, log, grace, ended)
    finally:
        for h in holds:
            os.close(h)
        for p in procs:
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for t in forwarders:
            t.join(timeout=2.0)
