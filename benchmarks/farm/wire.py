"""Bytes on the wire per task message and per result message, captured on the loopback.

``measure(cmd, env, ...)`` runs bench.py ``--wire`` (one worker; per payload size,
tasks one at a time), and when it says it is ready (``--ready-file``: the
manager's and the worker's pids) finds the TCP ports those two processes listen
on and are connected to each other through (``/proc/<pid>/fd`` and
``/proc/net/tcp{,6}``), starts ``tcpdump -i lo`` on exactly those ports, and
lets the program go on (``--go-file``). Afterwards it reads the capture (a
plain pcap file, parsed here with the standard library) and sums, per phase
(the program's wall-clock start and end of each payload size, and an idle
phase first), per direction (manager -> worker = the task messages,
worker -> manager = the results): TCP payload bytes (everything the
implementation writes: HTTP or MPICH headers, its framing, the pickle, and
any acknowledgement or flow-control message it sends back), IP bytes (the
same plus the IP and TCP headers of every segment, pure ACKs included) and
segments; per task, the median over the tasks of each size (each task's
window: from its submission to the next one's) and the mean.

mpiws runs on its network path here (``MPIWS_NOLOCAL=1``): on one host its
ranks would otherwise share memory and send nothing over the loopback.

Needs tcpdump and the right to capture (root, or CAP_NET_RAW); without them
``available()`` says why and the suite leaves this part out.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path


def available():
    """None if a capture can be made here, else why not."""
    if not shutil.which("tcpdump"):
        return "tcpdump is not installed (Debian/Ubuntu: apt-get install tcpdump)"
    if os.geteuid() != 0:
        return "capturing needs root (or CAP_NET_RAW for tcpdump)"
    return None


# ------------------------------------------------------------ sockets of a process


def _inodes(pid):
    out = set()
    for fd in Path("/proc/%d/fd" % pid).iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def _addr(hexaddr):
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # /proc prints IPv6 as four little-endian 32-bit words
        ip = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
    return ip, int(port, 16)


def tcp_sockets():
    """{inode: (state, local (ip, port), remote (ip, port))} for every TCP socket of this network namespace."""
    out = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            out[int(f[9])] = (f[3], _addr(f[1]), _addr(f[2]))
    return out


LISTEN, ESTABLISHED = "0A", "01"


def ports_between(manager, worker):
    """The ports of the manager <-> worker traffic: {port: "manager" | "worker"} for every port either
    process has a connection to the other on, and the listening ports those connections reach (so a
    connection opened later to one of them is caught too)."""
    socks = tcp_sockets()
    own = {}
    for who, pid in (("manager", manager), ("worker", worker)):
        for ino in _inodes(pid):
            if ino in socks:
                own.setdefault(ino, who)
    shared = _inodes(manager) & _inodes(worker)
    locals_ = {}  # (ip, port) -> owner, for connected sockets
    listening = {}  # port -> owner
    for ino, who in own.items():
        if ino in shared:
            continue  # a socket both inherited (e.g. the process manager's): not theirs
        state, local, _remote = socks[ino]
        if state == LISTEN:
            listening[local[1]] = who
        else:
            locals_[local] = who
    ports = {}
    for ino, who in own.items():
        if ino in shared:
            continue
        state, local, remote = socks[ino]
        if state == LISTEN:
            continue
        other = locals_.get(remote)
        if other is not None and other != who:  # a connection between the two
            ports[local[1]] = who
            ports[remote[1]] = other
    for port, who in listening.items():
        if port in ports:
            ports[port] = who
    return ports


# --------------------------------------------------------------------- pcap


def read_pcap(path):
    """[(time, src port, dst port, ip bytes, tcp payload bytes)] of the TCP segments in a pcap file."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        return []
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise ValueError("%s: not a pcap file" % path)
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(e + "I", data[20:24])[0]
    if linktype == 1:  # Ethernet (the loopback device on Linux)
        link = 14
    elif linktype == 113:  # Linux cooked (-i any)
        link = 16
    else:
        raise ValueError("%s: link type %d not handled" % (path, linktype))
    out, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(e + "IIII", data[off : off + 16])
        pkt = data[off + 16 : off + 16 + incl]
        off += 16 + incl
        t = sec + frac * (1e-9 if nano else 1e-6)
        ethertype = struct.unpack(">H", pkt[link - 2 : link])[0]
        ip = pkt[link:]
        if ethertype == 0x0800:
            ihl = (ip[0] & 0x0F) * 4
            total, proto = struct.unpack(">H", ip[2:4])[0], ip[9]
            tcp = ip[ihl:]
        elif ethertype == 0x86DD:
            total, proto = 40 + struct.unpack(">H", ip[4:6])[0], ip[6]
            ihl = 40
            tcp = ip[40:]
        else:
            continue
        if proto != 6 or len(tcp) < 14:
            continue
        sport, dport = struct.unpack(">HH", tcp[:4])
        doff = (tcp[12] >> 4) * 4
        out.append((t, sport, dport, total, total - ihl - doff))
    return out


def _direction(ports, sp, dp):
    src, dst = ports.get(sp), ports.get(dp)
    if src == "manager" or dst == "worker":
        return "task"
    if src == "worker" or dst == "manager":
        return "result"
    return "other"


def _sums(segments, ports, start, end):
    acc = {d: {"segments": 0, "ip_bytes": 0, "tcp_payload": 0} for d in ("task", "result", "other")}
    for t, sp, dp, ipb, pay in segments:
        if start <= t < end:
            a = acc[_direction(ports, sp, dp)]
            a["segments"] += 1
            a["ip_bytes"] += ipb
            a["tcp_payload"] += pay
    return acc


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if xs else None


def summarize(segments, ports, phases, tail=0.05):
    """Per phase and direction: segments, IP bytes and TCP payload bytes in total; per task, their mean
    (total / tasks: ``<direction>_mean``) and their median over the tasks (``<direction>_per_task``), each
    task's window running from its submission to the next one's (the last: to the phase's end + ``tail``,
    for its final ACK). The median is what the report shows: a stray segment (a retransmission, a late ACK
    of the phase before) moves a mean, not a median."""
    segments = sorted(segments)
    rows = []
    for ph in phases:
        acc = _sums(segments, ports, ph["start"], ph["end"] + tail)
        row = dict({k: v for k, v in ph.items() if k != "marks"}, seconds=ph["end"] - ph["start"], **acc)
        n = ph.get("tasks") or 0
        if n:
            marks = ph.get("marks") or []
            per = [_sums(segments, ports, a, b) for a, b in zip(marks, marks[1:] + [ph["end"] + tail])]
            for d in ("task", "result"):
                row[d + "_mean"] = {k: v / n for k, v in acc[d].items()}
                row[d + "_per_task"] = {k: _median([p[d][k] for p in per]) for k in acc[d]} if per else row[d + "_mean"]
        rows.append(row)
    return rows


# ------------------------------------------------------------------ one run


def measure(cmd, env, timeout=120, cwd=None, log=print):
    """Run ``cmd`` (bench.py --wire, without --ready-file/--go-file) under a capture; the phases' sums."""
    tmp = Path(tempfile.mkdtemp(prefix="farm-wire-"))
    ready, go, pcap = tmp / "ready.json", tmp / "go", tmp / "capture.pcap"
    cmd = list(cmd) + ["--ready-file", str(ready), "--go-file", str(go)]
    # What a network carries: mpiws's ranks on one host would otherwise share memory, and nothing cross the loopback.
    env = dict(env or os.environ, MPIWS_NOLOCAL="1")
    prog = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    dump = None
    try:
        deadline = time.time() + timeout
        while not ready.exists():
            if prog.poll() is not None or time.time() > deadline:
                out, err = prog.communicate(timeout=10) if prog.poll() is not None else ("", "")
                raise RuntimeError(
                    "wire: the program ended or hung before it was ready (exit %s)\n%s"
                    % (prog.poll(), "\n".join((out + err).splitlines()[-15:]))
                )
            time.sleep(0.02)
        pids = json.loads(ready.read_text())
        ports = ports_between(pids["manager"], pids["worker"])
        if not ports:
            raise RuntimeError(
                "wire: found no connection between manager %d and worker %d" % (pids["manager"], pids["worker"])
            )
        expr = "tcp and (%s)" % " or ".join("port %d" % p for p in sorted(ports))
        dump = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-n", "-s", "128", "-B", "16384", "--immediate-mode", "-U", "-w", str(pcap), expr],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # tcpdump says "listening on lo" once the capture runs
        line = dump.stderr.readline()
        if "listening" not in line:
            raise RuntimeError("wire: tcpdump did not start: %s%s" % (line, dump.stderr.read()[-500:]))
        go.touch()
        out, err = prog.communicate(timeout=timeout)
        time.sleep(1.0)  # the last segments reach the file (immediate mode, packet-buffered output)
        dump.send_signal(signal.SIGINT)
        dump_err = dump.communicate(timeout=30)[1]
        dump = None
        result = None
        for line in out.splitlines():
            if line.startswith("BENCH-RESULT "):
                result = json.loads(line[len("BENCH-RESULT ") :])
        if result is None:
            raise RuntimeError("wire: exit %s, no result\n%s" % (prog.returncode, "\n".join(err.splitlines()[-15:])))
        dropped = [line for line in dump_err.splitlines() if "dropped by kernel" in line]
        segments = read_pcap(pcap)
        return {
            "impl": result["impl"],
            "ports": {str(k): v for k, v in sorted(ports.items())},
            "filter": expr,
            "captured_segments": len(segments),
            "tcpdump": dump_err.strip().splitlines()[-3:],
            "dropped": dropped[0] if dropped else None,
            "versions": result.get("versions"),
            "phases": summarize(segments, ports, result["phases"]),
        }
    finally:
        if dump is not None and dump.poll() is None:
            dump.send_signal(signal.SIGINT)
            try:
                dump.wait(timeout=10)
            except subprocess.TimeoutExpired:
                dump.kill()
        if prog.poll() is None:
            try:
                os.killpg(prog.pid, signal.SIGTERM)  # its own session: the launcher and what it started
                prog.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(tmp, ignore_errors=True)
