"""``mpiws run -n N prog.py args`` (or ``-m module``, ``-c code``): N rank
processes on this machine, each serving its own endpoint, started as one
domain, like ``mpiexec``. Rank 0 reads the launcher's standard input, the
others read none, as under MPICH's mpiexec."""

import os
import secrets
import signal
import subprocess
import sys
import threading
import time

from ..dashboard import open_board
from .domain import Domain, exit_status
from .pipes import STARTUP_SECONDS, forward, read_url
from .program import SERVICE, python_argv

#: ``MPI.ERR_PROC_FAILED``'s class (not imported here: the launcher never loads the MPI package).
PROC_FAILED = 101


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


def how_ended(code):
    """A rank process's exit status as people read it: ``exit status 7``,
    ``exit status -9 (SIGKILL)``."""
    if code is not None and code < 0:
        try:
            return f"exit status {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit status {code}"


def stand_in(domain, rank, url, host, code):
    """Answer for rank ``rank`` of ``domain`` whose process died (exit status
    ``code``): serve, at its URL (the port its process held), its instance as
    failed, so that its peers, which poll its status while they wait for it
    and send there, learn that it is gone at once instead of after
    ``MPIWS_FAILURE_TIMEOUT`` of refused connections. The endpoint (to close
    once the run has ended), or None if the port could not be taken again."""
    from .. import _core

    try:
        port = _core.parse_url(url)[2]
        endpoint = _core.Endpoint(
            host,
            port,
            keys=secrets.token_hex(32),  # nobody's: nothing is ever run here
            tls_cert=os.environ.get("MPIWS_TLS_CERT") or None,
            tls_key=os.environ.get("MPIWS_TLS_KEY") or None,
        )
        instance = endpoint.create_instance(domain.domain, rank, domain.endpoints, domain.token)
    except Exception:  # noqa: BLE001 - the port taken by another process: the peers find out by the timeout
        return None
    instance.fail(PROC_FAILED, "process ended", f"its process ended ({how_ended(code)}), seen by mpiws run", "")
    return endpoint


def _end_ranks(procs, holds, grace, at_most=None):
    """Let the ranks go (each exits once its hold pipe closes), killing any
    still there ``grace`` seconds later (``at_most``: all of them within that
    many seconds in all)."""
    while holds:
        os.close(holds.pop())
    deadline = None if at_most is None else time.monotonic() + at_most
    for p in procs:
        try:
            p.wait(timeout=grace if deadline is None else max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_local(
    n,
    program,
    args=(),
    prefix=False,
    host="127.0.0.1",
    grace=5.0,
    log=None,
    keep_going=False,
    form="path",
    dashboard=None,
):
    """Run ``program`` (a file, or in ``form`` "module" or "code") on ``n``
    local ranks; returns the exit status (130 after Ctrl-C, which ends every
    rank and is said in one line). ``dashboard``: a port (0: any) for the
    run's own page (``mpiws.dashboard``); None: none."""
    log = log or (lambda msg: print(f"mpiws run: {msg}", file=sys.stderr, flush=True))
    procs, url_fds, holds, forwarders, stand_ins = [], [], [], [], []
    board = open_board(dashboard, "mpiws run")
    stdin = has_stdin()  # if closed, rank 0 reads nothing either
    # The launcher ends the ranks (their hold pipes close): a rank that dies
    # after that is not reported to its peers.
    ending = threading.Event()
    reported = set()  # the ranks whose end the launcher has read: a process that dies after it is no news
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
            # A rank starts with Ctrl-C held back (it unblocks it when its
            # program can take it): no traceback from a rank still importing.
            held = _hold_sigint()
            try:
                p = subprocess.Popen(
                    [sys.executable, "-m", "mpiws.launch.worker", *python_argv(program, args, form)],
                    env=env,
                    pass_fds=(url_w, hold_r, key_r),
                    stdin=None if rank == 0 and stdin else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                procs.append(p)
                holds.append(hold_w)
            finally:
                _release_sigint(held)  # a Ctrl-C meanwhile is raised here: the ranks so far are ended
            os.close(url_w)
            os.close(hold_r)
            os.close(key_r)
            url_fds.append(url_r)
            tag = f"[{rank}] ".encode() if prefix else b""
            for stream, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                t = threading.Thread(target=forward, args=(stream, out, tag), daemon=True)
                t.start()
                forwarders.append(t)
        deadline = time.monotonic() + STARTUP_SECONDS
        urls = [read_url(fd, p, deadline) for fd, p in zip(url_fds, procs)]

        domain = Domain(urls, key=key)
        if board is not None:
            board.watch(domain.domain, domain.token, urls)
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
            # A rank process ends only when let go, or when it dies. With -k
            # the others run on: tell them now (without -k they are cancelled).
            if keep_going and not ending.is_set() and rank not in reported:
                stood = stand_in(domain, rank, urls[rank], host, code)
                if stood is not None:
                    stand_ins.append(stood)
            events.put((rank, RuntimeError(f"rank {rank} process exited with status {code} before reporting")))

        for rank, p in enumerate(procs):
            threading.Thread(target=watch_process, args=(rank, p), daemon=True).start()
        statuses, failure = domain.wait(
            events, on_result=lambda rank, _: reported.add(rank), grace=grace, keep_going=keep_going
        )

        def ended(rank):
            if _ended(procs[rank], 1.0) is not None:
                return how_ended(procs[rank].returncode)
            return None

        return exit_status(statuses, failure, log, grace, ended, domain)
    except KeyboardInterrupt:
        # Ctrl-C (the ranks, in our process group, had it too): end them all, say so once.
        _ignore_sigint()
        ending.set()
        _end_ranks(procs, holds, grace, at_most=min(grace, 2.0))
        log("interrupted; ranks ended")
        return 130
    finally:
        ending.set()
        _end_ranks(procs, holds, grace)
        for t in forwarders:
            t.join(timeout=2.0)
        for e in stand_ins:
            e.close()
        if board is not None:
            board.close()


def _hold_sigint():
    """Block SIGINT in this thread (a process started meanwhile inherits it
    blocked); what ``_release_sigint`` restores."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _release_sigint(held):
    signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _ignore_sigint():
    """A second Ctrl-C while the ranks end is no traceback either (main thread only)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:
        pass
