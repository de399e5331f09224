"""Programs the launch tests run as ranks (``mpiws run ... tests/rank_programs.py MODE``).

- ``check``: every rank reports in, then point-to-point and collectives
  whose results are checked in the program (a wrong one fails the rank);
- ``fail RANK``: that rank raises; the others wait for a message from it
  (and so see its failure instead of hanging).
"""

import sys

from mpiws import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
mode = sys.argv[1]

if mode == "check":
    print(f"rank {rank} of {size} on {MPI.Get_processor_name()}", flush=True)
    right, left = (rank + 1) % size, (rank - 1) % size
    got = comm.sendrecv(rank, dest=right, source=left)
    assert got == left, got
    assert comm.allreduce(rank) == size * (size - 1) // 2
    assert comm.bcast("from the root" if rank == 0 else None, root=0) == "from the root"
    assert comm.allgather(rank) == list(range(size))
    comm.Barrier()
    if rank == 0:
        print(f"checked {size} ranks", flush=True)
elif mode == "fail":
    bad = int(sys.argv[2])
    if rank == bad:
        raise RuntimeError(f"rank {rank} fails on purpose")
    comm.recv(source=bad)
