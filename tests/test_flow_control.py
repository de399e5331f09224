"""Flow control: a fast sender and a slow receiver move 2 GiB through a
64 MiB bound on unexpected messages. Above the bound the receiver's endpoint
stops reading (TCP pushes back, the sender waits); every message arrives,
in order, and the receiver's memory stays near the bound."""

from conftest import assert_ok

PROGRAM = """
import os, resource, sys, time
import numpy as np
from mpiws import MPI, binding
comm = MPI.COMM_WORLD
MB = 1 << 20
total, chunk = int(sys.argv[1]) * MB, 4 * MB
n = total // chunk
if comm.rank == 0:
    buf = np.ones(chunk, np.uint8)
    t = time.monotonic()
    for i in range(n):
        buf[0] = i % 251
        comm.Send(buf, dest=1, tag=1)
    comm.send(time.monotonic() - t, dest=1, tag=2)
else:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    time.sleep(2)                        # the sender runs ahead: unexpected messages pile up
    out = np.empty(chunk, np.uint8)
    for i in range(n):
        comm.Recv(out, source=0, tag=1)
        assert out[0] == i % 251 and out[-1] == 1, i
        if i % 64 == 0:
            time.sleep(0.01)             # a slow receiver
    sent = comm.recv(source=0, tag=2)
    peak = binding.current().instance.peak_unexpected_bytes()
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    print(f"moved {total // MB} MiB; peak unexpected {peak / MB:.1f} MiB; receiver memory grew {grew / MB:.1f} MiB; sender took {sent:.1f} s", flush=True)
    bound = int(os.environ["MPIWS_MAX_UNEXPECTED"])
    assert peak <= bound + chunk, (peak, bound)          # the bound, overshot by at most one message
    assert grew < bound + 128 * MB, grew                  # and the process with it (allocator slack included)
print("OK", flush=True)
"""


def test_two_gib_through_a_64_mib_bound(run):
    p = run(2, PROGRAM, args=("2048",), env={"MPIWS_MAX_UNEXPECTED": str(64 << 20)}, timeout=300)
    assert_ok(p, 2)
    print(p.stdout)
