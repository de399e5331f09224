"""A token travels round the ring of ranks, each adding its rank.
Run: mpiws run -n 4 examples/ring.py"""

from mpiws import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

if rank == 0:
    comm.send([0], dest=right)
    token = comm.recv(source=left)
    print(f"token came back after visiting {size} ranks: {token}")
    assert token == list(range(size))
else:
    token = comm.recv(source=left)
    comm.send(token + [rank], dest=right)
