"""One object of SIZE bytes from rank 0 to rank 1 with ``send``/``recv``
(mpiws or mpi4py: ``BENCH_MPI``). Each rank prints ``ROLE pid`` first, so
the driver can sum what each process copied.

Usage: bench.py KIND SIZE   (KIND: bytes | numpy)
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402


def make(kind, size):
    # Made without a memcpy: what the driver counts is the transfer's.
    if kind == "bytes":
        return os.urandom(size)
    import numpy as np

    return np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)


def main():
    kind, size = sys.argv[1], int(sys.argv[2])
    MPI = common.import_mpi()
    comm = MPI.COMM_WORLD
    role = "SENDER" if comm.rank == 0 else "RECEIVER"
    print(f"{role} {os.getpid()}", flush=True)
    obj = make(kind, size) if comm.rank == 0 else None
    comm.Barrier()
    if comm.rank == 0:
        comm.send(obj, dest=1, tag=7)
    else:
        obj = comm.recv(source=0, tag=7)
        assert len(obj) == size, (len(obj), size)
    comm.Barrier()
    if comm.rank == 0:
        common.emit({"kind": kind, "size": size})


if __name__ == "__main__":
    main()
