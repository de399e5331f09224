"""Compute pi by the midpoint rule, the work split across ranks.
Run: mpiws run -n 4 examples/compute_pi.py [intervals]"""

import math
import sys

from mpiws import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
# Rank 0 tells everyone the number of intervals.
if rank == 0:
    for r in range(1, size):
        comm.send(n, dest=r)
else:
    n = comm.recv(source=0)

h = 1.0 / n
local = h * sum(4.0 / (1.0 + (h * (i + 0.5)) ** 2) for i in range(rank, n, size))

if rank == 0:
    pi = local + sum(comm.recv(source=MPI.ANY_SOURCE, tag=7) for _ in range(size - 1))
    print(f"pi ~= {pi:.12f}, error {abs(pi - math.pi):.2e}, {n} intervals on {size} ranks")
else:
    comm.send(local, dest=0, tag=7)
