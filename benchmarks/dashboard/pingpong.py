"""Rank program: half round trips of 8 B and 64 KiB buffers between ranks 0
and 1, in blocks, for about ``seconds`` each (so that the dashboard, which
looks once a second, gathers several times meanwhile); rank 0 prints the
median of its blocks as one JSON line."""

import json
import statistics
import sys
import time

import numpy as np

from mpiws import MPI

comm = MPI.COMM_WORLD
seconds = float(sys.argv[1])
result = {}
for size in (8, 65536):
    buf = np.zeros(size, dtype=np.uint8)
    reps = 200 if size <= 4096 else 50
    blocks = []
    comm.Barrier()
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            if comm.rank == 0:
                comm.Send(buf, dest=1)
                comm.Recv(buf, source=1)
            else:
                comm.Recv(buf, source=0)
                comm.Send(buf, dest=0)
        blocks.append((time.perf_counter() - t0) / (2 * reps))
        done = time.perf_counter() - start >= seconds
        if comm.bcast(done if comm.rank == 0 else None, root=0):
            break
    result[str(size)] = statistics.median(blocks)
if comm.rank == 0:
    print("RESULT " + json.dumps(result), flush=True)
