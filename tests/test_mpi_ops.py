"""Ops as handles (``Op.Create``, ``Free``, the null op, pickling),
``Reduce_local`` (in the core, or with numpy for long doubles and half
floats), reductions on those types, and mpi4py's buffer specifications
of the vector and ``w`` collectives."""

import pickle

import numpy as np
import pytest

from conftest import mpiws_run
from mpiws import MPI


def test_ops_are_handles():
    assert MPI.Op() == MPI.OP_NULL and not MPI.OP_NULL and pickle.loads(pickle.dumps(MPI.MAX)) is MPI.MAX
    with pytest.raises(TypeError):
        hash(MPI.SUM)
    with pytest.raises(ValueError):
        MPI.OP_NULL(1, 2)

    def concat(a, b, datatype):
        assert datatype is None  # on objects, as mpi4py calls it
        return a + b

    op = MPI.Op.Create(concat, commute=False)
    assert MPI.Op(op)([1], [2]) == [1, 2] and not op.is_predefined and MPI.SUM.is_predefined
    op.Free()
    assert op == MPI.OP_NULL
    with pytest.raises(MPI.Exception):
        MPI.SUM.Free()


def test_reduce_local_in_the_core_and_with_numpy():
    a, b = np.arange(1, 6, dtype="i"), np.arange(5, dtype="i")
    MPI.PROD.Reduce_local(a, b)
    assert list(b) == [0, 2, 6, 12, 20]
    g, h = np.full(3, 1e-18, np.longdouble), np.ones(3, np.longdouble)
    MPI.SUM.Reduce_local(g, h)
    assert (h == np.longdouble(1) + np.longdouble(1e-18)).all() and (h != 1).all()  # long double precision kept
    with pytest.raises(ValueError):
        MPI.SUM.Reduce_local([a, 2, MPI.INT], [b, 3, MPI.INT])


def test_vector_and_w_specifications(tmp_path):
    r = mpiws_run(
        3,
        """
        import numpy as np
        from mpiws import MPI
        comm = MPI.COMM_WORLD
        rank, n = comm.rank, comm.size
        # counts and displacements as ints: that many each, at that stride
        got = np.full(n * 4, -1, "i")
        comm.Allgatherv(np.full(2, rank, "i"), [got, (2, 4), MPI.INT])
        assert list(got.reshape(n, 4)[:, :2].ravel()) == [r for r in range(n) for _ in range(2)], got
        assert (got.reshape(n, 4)[:, 2:] == -1).all()
        # Alltoallw: per-rank types, byte displacements
        send = np.arange(n, dtype="d") + 10 * rank
        recv = np.zeros(n, "d")
        disp = [8 * i for i in range(n)]
        comm.Alltoallw([send, ([1] * n, disp), [MPI.DOUBLE] * n], [recv, ([1] * n, disp), [MPI.DOUBLE] * n])
        assert list(recv) == [rank + 10 * s for s in range(n)], recv
        # long double reductions, folded with numpy
        total = np.zeros(2, np.longdouble)
        comm.Allreduce(np.full(2, rank, np.longdouble), total, op=MPI.SUM)
        assert (total == sum(range(n))).all()
        print("ok")
    """,
        tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok") == 3
