"""1-D blocked matrix multiplication C = A @ B of N x N float64 matrices.

Rank j owns column block j of A and of B and computes column block j of C:

    C[:, J] = sum_k A[:, K] @ B[K, J]

In step k the owner of A's column block k broadcasts it (a binomial tree:
mpiws's default up to 8 ranks, forced here through MPIWS_ALGO_BCAST, which
mpi4py ignores) and every rank adds A[:, K] @ B_local[K, :] to its block of
C. N need not be divisible by the number of ranks. The result is gathered
to rank 0 and compared with numpy's product of the full matrices.

Run:  mpiws run -n 4 examples/matmul.py --n 1024
The same file, its mpiws import line switched to mpi4py, runs under
``mpiexec -n 4 python matmul.py``.
"""

import argparse
import json
import os
import sys

# One BLAS thread per rank: ranks are the parallelism (set before numpy loads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("MPIWS_ALGO_BCAST", "binomial")

import numpy as np

from mpiws import MPI


def blocks(n, p):
    """Sizes and offsets of p nearly equal blocks of n (the first n % p get one more)."""
    sizes = [n // p + (1 if j < n % p else 0) for j in range(p)]
    offsets = [sum(sizes[:j]) for j in range(p)]
    return sizes, offsets


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024, help="matrix order N")
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, p, n = comm.Get_rank(), comm.Get_size(), args.n
    if n < p:
        if rank == 0:
            print(f"need N >= number of ranks ({n} < {p})", file=sys.stderr)
        sys.exit(2)
    sizes, offsets = blocks(n, p)
    lo, hi = offsets[rank], offsets[rank] + sizes[rank]

    # Every rank generates the same matrices and keeps its column blocks.
    rng = np.random.default_rng(args.seed)
    A = rng.standard_normal((n, n))
    B = rng.standard_normal((n, n))
    A_local = np.ascontiguousarray(A[:, lo:hi])  # n x nb
    B_local = np.ascontiguousarray(B[:, lo:hi])  # n x nb
    if rank != 0:
        del A, B

    C_local = np.zeros((n, sizes[rank]))
    panel = np.empty((n, max(sizes)))  # receives A's column block k

    comm.Barrier()
    t0 = MPI.Wtime()
    for k in range(p):
        Ak = A_local if k == rank else np.ndarray((n, sizes[k]), buffer=panel)
        comm.Bcast(Ak, root=k)
        C_local += Ak @ B_local[offsets[k] : offsets[k] + sizes[k], :]
    comm.Barrier()
    seconds = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)

    # Gather C^T (its column blocks are contiguous row blocks of C^T) to rank 0.
    CT_local = np.ascontiguousarray(C_local.T)
    CT = np.empty((n, n)) if rank == 0 else None
    counts = [s * n for s in sizes]
    displs = [o * n for o in offsets]
    comm.Gatherv(CT_local, [CT, counts, displs, MPI.DOUBLE] if rank == 0 else None, root=0)

    valid = None
    if rank == 0:
        ref = A @ B
        err = float(np.max(np.abs(CT.T - ref)))
        tol = 1e-12 * n * float(np.max(np.abs(ref)))
        valid = bool(err <= tol)
        print(f"max |C - A@B| = {err:.3e} (tolerance {tol:.3e})")
        print(
            "RESULT " + json.dumps({"app": "matmul", "n": n, "ranks": p, "seconds": round(seconds, 6), "valid": valid}),
            flush=True,
        )
    valid = comm.bcast(valid, root=0)
    if not valid:
        sys.exit(1)


if __name__ == "__main__":
    main()
