"""A real one-machine Slurm cluster for tests: started and torn down by the tests.

    with slurm_cluster(tmp_path, cpus=4) as cluster:
        subprocess.run(["srun", "-n", "4", "hostname"], env=cluster.env, timeout=60)

What it does:
- installs Slurm and MUNGE with apt-get when they are missing (Debian's
  `slurmctld slurmd slurm-client munge`); where that cannot be done (not root,
  no apt-get, no package) it raises ``SlurmUnavailable(reason)``, for the test
  to turn into ``pytest.skip(reason)``;
- runs a private ``munged`` (its own key, socket, pid, log and seed files), so
  a system MUNGE, if any, is neither used nor disturbed;
- writes its own ``slurm.conf`` (free ports, every state/spool/log/pid path in
  its own directory, no cgroups, no accounting) with one node named after this
  host that declares ``cpus`` CPUs whatever the hardware has
  (``SlurmdParameters=config_overrides``), in a default partition ``debug``;
- starts ``slurmctld`` and ``slurmd`` in the foreground as children and waits
  until the node is idle;
- on exit (also after a start that failed half-way) stops the daemons and
  kills whatever they or the test's Slurm commands left running.

Every process of a cluster carries a marker variable in its environment (the
daemons, and so ``slurmstepd``; the clients run with ``cluster.env``, and so
the tasks they launch): teardown finds leftovers by it, since job steps are
not children of the daemons in the process tree.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

# Debian 12 (bookworm) ships Slurm 22.05; --no-install-recommends keeps the
# install to these and their libraries (no database, no X11, no mail server).
APT_PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
# The programs the cluster needs: if one is missing we install.
PROGRAMS = ["slurmctld", "slurmd", "srun", "sinfo", "scontrol", "munged", "munge", "unmunge"]
# Daemons live in /usr/sbin, which a non-root PATH may lack.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
# Unix socket paths are limited to 108 bytes; slurmd's step sockets add
# "<node>_<job>.<step>" to its spool dir, so runtime paths stay short.
MAX_RUNTIME_DIR = 60
# The environment variable that marks this cluster's processes.
MARKER = "MPIWS_TEST_SLURM_CLUSTER"


class SlurmUnavailable(Exception):
    """Slurm cannot be had on this machine (the reason is the message)."""


def _which(prog):
    return shutil.which(prog, path=SEARCH_PATH)


def _missing_programs():
    return [p for p in PROGRAMS if _which(p) is None]


def _apt_get(args, timeout):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # Wait for a concurrent apt/dpkg (another test session) instead of failing.
    cmd = ["apt-get", "-q", "-y", "-o", "DPkg::Lock::Timeout=300", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def ensure_installed(timeout=900):
    """Install Slurm and MUNGE if missing; raise SlurmUnavailable if that can't be
    done, or if we are not root (the cluster runs slurmd, and so jobs, as root)."""
    missing = _missing_programs()
    if os.geteuid() != 0:
        if missing:
            raise SlurmUnavailable(
                f"Slurm is not installed ({', '.join(missing)} missing) and we are not root to apt-get it"
            )
        raise SlurmUnavailable("not root: this one-machine cluster runs slurmd (and so its jobs) as root")
    if not missing:
        return
    if _which("apt-get") is None:
        raise SlurmUnavailable(f"Slurm is not installed ({', '.join(missing)} missing) and there is no apt-get")
    install = ["install", "--no-install-recommends", *APT_PACKAGES]
    try:
        proc = _apt_get(install, timeout)
        if proc.returncode != 0:
            # Usually stale or absent package lists ("Unable to locate package"):
            # refresh them once and try again.
            _apt_get(["update"], timeout)
            proc = _apt_get(install, timeout)
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"apt-get install {' '.join(APT_PACKAGES)} took more than {timeout} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise SlurmUnavailable(f"apt-get install {' '.join(APT_PACKAGES)} failed (exit {proc.returncode}):\n{tail}")
    missing = _missing_programs()
    if missing:
        raise SlurmUnavailable(f"after apt-get install, still missing: {', '.join(missing)}")


def _free_ports(n):
    """n distinct TCP ports free right now (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tail(path, lines=60):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(none)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def _marked_pids(marker_value):
    """Pids of the processes whose environment carries this cluster's marker."""
    needle = f"{MARKER}={marker_value}".encode() + b"\0"
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read() + b"\0"
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if b"\0" + needle in b"\0" + env:
            pids.append(int(entry))
    return pids


class SlurmCluster:
    """One slurmctld + one slurmd (+ a private munged) on this machine.

    ``env``: the environment to run Slurm commands with (``SLURM_CONF`` set);
    ``cpus``: the CPUs of the node; ``node``: its name; ``partition``;
    ``hardware``: what ``slurmd -C`` found; ``logs()``: the daemons' logs."""

    def __init__(self, tmp_path, cpus=4, start_timeout=60):
        self.cpus = int(cpus)
        self.start_timeout = start_timeout
        self.partition = "debug"
        # Slurm wants the short host name: slurmctld checks SlurmctldHost
        # against it, and slurmd looks its node up by it.
        self.node = socket.gethostname().split(".")[0]
        self.dir = Path(tmp_path).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._own_runtime = len(str(self.dir)) > MAX_RUNTIME_DIR
        self.run = Path(tempfile.mkdtemp(prefix="slurm-")) if self._own_runtime else self.dir / "run"
        self.conf = self.dir / "slurm.conf"
        self.munge_socket = self.run / "munge.socket"
        self.hardware = ""
        self._procs = {}  # name -> Popen
        self._marker = f"{os.getpid()}-{id(self)}-{time.time_ns()}"
        # Without any Slurm variable inherited (from a job the tests might
        # run in): srun would take it for its own allocation.
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SRUN_", "SALLOC_", "SBATCH_"))}
        base["PATH"] = SEARCH_PATH
        self.env = dict(base, SLURM_CONF=str(self.conf), **{MARKER: self._marker})
        # A batch job's output lands here by default, not in the caller's cwd.
        self.env["SBATCH_OUTPUT"] = str(self.dir / "log" / "slurm-%j.out")

    # -- start ---------------------------------------------------------------

    def start(self):
        """Install if needed, then start munged, slurmctld, slurmd; wait for an idle node.
        On failure everything started is stopped before the error propagates."""
        try:
            ensure_installed()
            self._prepare_dirs()
            self._check_hardware()
            self._start_munge()
            self._write_conf()
            self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-f", str(self.conf)])
            self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
            self._wait_idle()
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare_dirs(self):
        for d in (self.run / "state", self.run / "spool", self.dir / "log"):
            d.mkdir(parents=True, exist_ok=True)
        # munged refuses a socket directory others may write to, and warns
        # when others may not reach the socket.
        os.chmod(self.run, 0o755)

    def _check_hardware(self):
        # `slurmd -C` both proves slurmd runs here and says what it detects;
        # the node then declares `cpus` regardless (config_overrides).
        proc = self._cmd(["slurmd", "-C"], timeout=30)
        if proc.returncode != 0 or "NodeName=" not in proc.stdout:
            raise RuntimeError(f"slurmd -C failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        self.hardware = proc.stdout.splitlines()[0].strip()

    def _start_munge(self):
        key = self.run / "munge.key"
        # A random key of MUNGE's default size; only our munged reads it.
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={self.run / 'munged.pid'}",
                f"--seed-file={self.run / 'munged.seed'}",
            ],
        )
        # Ready when a credential made through our socket decodes through it.
        deadline = time.monotonic() + 20
        while True:
            if self.munge_socket.exists():
                enc = self._cmd(["munge", "-n", "-S", str(self.munge_socket)], timeout=10)
                if enc.returncode == 0:
                    dec = self._cmd(["unmunge", "-S", str(self.munge_socket)], input=enc.stdout, timeout=10)
                    if dec.returncode == 0:
                        return
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not answer on its socket within 20 s\n" + self.logs())
            time.sleep(0.2)

    def _write_conf(self):
        ctld_port, slurmd_port = _free_ports(2)
        log = self.dir / "log"
        # An empty plugstack: don't load the system's SPANK plugins.
        plugstack = self.dir / "plugstack.conf"
        plugstack.write_text("")
        lines = [
            "ClusterName=mpiwstest",
            # The address in parentheses is what daemons and clients connect to.
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # Used by auth/munge and cred/munge alike.
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.run / 'state'}",
            f"SlurmdSpoolDir={self.run / 'spool'}",
            f"SlurmctldPidFile={self.run / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.run / 'slurmd.pid'}",
            f"SlurmctldLogFile={log / 'slurmctld.log'}",
            f"SlurmdLogFile={log / 'slurmd.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"PlugStackConfig={plugstack}",
            # No cgroups: processes tracked through /proc, no task binding.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "MailProg=/bin/true",
            # Individual CPUs are allocatable, so -n 4 fits on the one node.
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            # Batch jobs start at submission (not up to 3 s later), and jobs
            # waiting for CPUs are retried every 2 s: tests stay quick.
            "SchedulerParameters=batch_sched_delay=0,sched_interval=2",
            # The node's configured CPUs count, not the hardware's.
            "SlurmdParameters=config_overrides",
            # A node that comes back from DOWN (any reason) is usable again.
            "ReturnToService=2",
            "SlurmdTimeout=60",
            "SlurmctldTimeout=30",
            "MessageTimeout=10",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=60",
            "Waittime=0",
            f"NodeName={self.node} NodeHostname={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def _spawn(self, name, argv):
        out = open(self.dir / "log" / f"{name}.out", "ab")
        try:
            # Own session: a signal to the group reaches the daemon's helpers.
            self._procs[name] = subprocess.Popen(
                [_which(argv[0]) or argv[0], *argv[1:]],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.run,
            )
        finally:
            out.close()

    def _check_alive(self):
        for name, p in self._procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with status {p.returncode} during start-up\n" + self.logs())

    def _node_state(self):
        proc = self._cmd(["sinfo", "-h", "-N", "-n", self.node, "-o", "%T"], timeout=10)
        return proc.stdout.strip().lower() if proc.returncode == 0 else ""

    def _wait_idle(self):
        deadline = time.monotonic() + self.start_timeout
        state = ""
        resumed_at = 0.0
        while True:
            self._check_alive()
            state = self._node_state()
            if state == "idle":  # "idle*" would mean not responding
                return
            # DOWN/DRAIN (an earlier registration failed, say): resume it,
            # at most every few seconds to let slurmd register meanwhile.
            if (
                any(s in state for s in ("down", "drain", "fail"))
                and not state.endswith("*")
                and time.monotonic() - resumed_at > 3
            ):
                self._cmd(["scontrol", "update", f"nodename={self.node}", "state=resume"], timeout=10)
                resumed_at = time.monotonic()
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"node {self.node} not idle after {self.start_timeout} s (state {state!r}; "
                    f"slurmd -C: {self.hardware})\n" + self.logs()
                )
            time.sleep(0.25)

    # -- use -----------------------------------------------------------------

    def _cmd(self, argv, timeout, input=None):
        try:
            return subprocess.run(
                [_which(argv[0]) or argv[0], *argv[1:]],
                env=self.env,
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(argv, -1, e.stdout or "", f"timed out after {timeout} s")

    def logs(self):
        """The daemons' log files and captured output, for failure messages."""
        parts = []
        # munged logs to its stderr in the foreground (munged.out).
        for name in ("slurmctld.log", "slurmd.log", "munged.out", "slurmctld.out", "slurmd.out"):
            path = self.dir / "log" / name
            if path.exists():
                parts.append(f"--- {name} ---\n{_tail(path)}")
        return "\n".join(parts) or "(no logs)"

    # -- stop ----------------------------------------------------------------

    def stop(self):
        """Stop the daemons and everything left over; idempotent."""
        # Jobs still queued or running are cancelled while the daemons can
        # still end them cleanly (bounded; the sweep below is the backstop).
        ctld = self._procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            self._cmd(["scancel", "--quiet", f"--partition={self.partition}"], timeout=10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                q = self._cmd(["squeue", "-h", "-o", "%i"], timeout=5)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(0.2)
        # slurmd first (it ends its steps), then slurmctld, then munged, each
        # with its helpers (its process group); SIGKILL if TERM is not enough.
        for name in ("slurmd", "slurmctld", "munged"):
            p = self._procs.get(name)
            if p is None:
                continue
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
                try:
                    p.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Step daemons and tasks are detached from the daemons: find them
        # by the marker and kill them, until none is left (bounded).
        for _ in range(50):
            pids = _marked_pids(self._marker)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        self._procs.clear()
        if self._own_runtime:
            shutil.rmtree(self.run, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


@contextlib.contextmanager
def slurm_cluster(tmp_path, cpus=4, start_timeout=60):
    """A started SlurmCluster for the ``with`` block; stopped on exit."""
    cluster = SlurmCluster(tmp_path, cpus=cpus, start_timeout=start_timeout)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
