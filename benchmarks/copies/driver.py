"""Copies driver: how many times the bytes of one large object are copied
in user space on each side of a ``send``/``recv``, mpiws against mpi4py +
MPICH, counted rather than timed.

Every ``memcpy``/``memmove`` of at least 4 KiB in the ranks (libc's, which
Python, numpy, Rust and MPICH all call) is recorded by a perf uprobe on the
routine libc resolved them to here, with its length; the copies a transfer
makes are what one object of SIZE costs over one of 1 byte, per process,
in units of SIZE. Copies the kernel makes (socket reads and writes) are not
counted: they are the network's, the same for everyone. Same-host channels
copy into and out of shared memory in user space, which is counted.

Needs root (uprobes) and perf; exits 2 with the reason otherwise.
"""

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402

HERE = Path(__file__).resolve().parent
PROBE = "mpiws_copies"
KINDS = ("bytes", "numpy")
IMPLS = {
    "mpiws": common.IMPLS["mpiws"],
    "mpiws-net": common.Impl("mpiws-net", "mpiws network path", "mpiws", {"MPIWS_NOLOCAL": "1"}),
    "mpi-tcp": common.IMPLS["mpi-tcp"],
    "mpi-shm": common.IMPLS["mpi-shm"],
}


def memcpy_target():
    """(libc path, file offset) of the routine memcpy resolves to here."""
    libc = ctypes.CDLL("libc.so.6")
    addr = ctypes.cast(libc.memcpy, ctypes.c_void_p).value
    for line in open("/proc/self/maps"):
        fields = line.split()
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if lo <= addr < hi and len(fields) >= 6:
            return fields[5], addr - lo + int(fields[2], 16)
    raise RuntimeError("memcpy is in no mapped file")


def add_probe():
    libc, offset = memcpy_target()
    subprocess.run(["perf", "probe", "-q", "-d", f"probe_libc:{PROBE}"], capture_output=True)
    # x86-64: the length is the third argument (rdx).
    subprocess.run(["perf", "probe", "-q", "-x", libc, "-a", f"{PROBE}={offset:#x} len=%dx:u64"], check=True)


def remove_probe():
    subprocess.run(["perf", "probe", "-q", "-d", f"probe_libc:{PROBE}"], capture_output=True)


def copied(impl, kind, size, tmp):
    """{role: bytes copied} for one launch."""
    data = Path(tmp) / "perf.data"
    cmd = ["perf", "record", "-q", "-o", str(data), "-e", f"probe_libc:{PROBE}", "--filter", "len >= 4096", "--"]
    cmd += impl.command(2, HERE / "bench.py", [kind, size])
    p = subprocess.run(cmd, env=impl.environ(), capture_output=True, text=True, timeout=300, cwd=str(common.ROOT))
    roles = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("SENDER", "RECEIVER"):
            roles[parts[1]] = parts[0]
    if p.returncode != 0 or len(roles) != 2:
        raise RuntimeError(
            f"{impl.key} {kind}: exit {p.returncode}\n{common._tail(p.stdout)}\n{common._tail(p.stderr)}"
        )
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "pid,trace"], capture_output=True, text=True, check=True
    )
    total = dict.fromkeys(roles.values(), 0)
    for line in script.stdout.splitlines():
        fields = line.split()
        role = roles.get(fields[0]) if fields else None
        if role:
            total[role] += int(fields[-1].split("=", 1)[1])
    return total


def main():
    ap = argparse.ArgumentParser(prog="benchmarks/copies/run", description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64 << 20, help="object size in bytes (default 64 MiB)")
    ap.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset of: " + ",".join(IMPLS))
    ap.add_argument("--out", default=str(common.BENCH_DIR / "results" / "copies"), help="output directory")
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("perf"):
        common.log("copies: needs root and perf (uprobes on libc's memcpy): not measured here")
        raise SystemExit(2)
    have = set(common.check_setup()) | {"mpiws-net"}
    impls = [IMPLS[k] for k in a.impls.split(",") if k in have]
    add_probe()
    rows, raw = [], {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for kind in KINDS:
                for impl in impls:
                    common.log(f"copies: {kind} {impl.key} ...")
                    big, small = copied(impl, kind, a.size, tmp), copied(impl, kind, 1, tmp)
                    moved = {role: (big[role] - small[role]) / a.size for role in big}
                    raw[f"{kind}/{impl.key}"] = {"object": big, "one_byte": small, "copies": moved}
                    rows.append([kind, impl.label, "%.2f" % moved["SENDER"], "%.2f" % moved["RECEIVER"]])
    finally:
        remove_probe()
    size = common.human_size(a.size)
    text = common.table(
        f"Copies of a {size} object's bytes in user space, each side (memcpy bytes / object size)",
        ["object", "implementation", "sender", "receiver"],
        rows,
        note="Counted with a perf uprobe on libc's memcpy (>= 4 KiB each): "
        "the transfer's copies are a run with the object less a run with 1 byte. Kernel copies (sockets) are not counted.",
    )
    print(text)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    common.write_json(Path(a.out) / "copies.json", {"size": a.size, "results": raw})


if __name__ == "__main__":
    main()
