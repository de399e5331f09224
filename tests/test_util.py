"""``mpiws.util`` (mpi4py.util adapted): ``pkl5`` sends large pickles as a
header and out-of-band pieces matched by probes, ``dtlib`` maps numpy dtypes
to MPI datatypes and back; ``MPI.Pickle`` instances are independent of
``MPI.pickle``; ``mpiws.rc`` takes mpi4py's options (docs/mpi4py-compat.md)."""

import numpy as np
import pytest

from conftest import mpiws_run
import mpiws
from mpiws import MPI
from mpiws.util import dtlib, pkl5


def test_pkl5_large_objects_between_two_ranks(tmp_path):
    r = mpiws_run(
        2,
        """
        import numpy as np
        from mpiws import MPI
        from mpiws.util import pkl5
        pkl5._bigmpi.blocksize = 1 << 20  # pieces above 1 MiB go as one derived datatype
        comm = pkl5.Intracomm(MPI.COMM_WORLD)
        big = {"a": np.arange(3 << 20, dtype="i4"), "b": np.ones((512, 513)), "s": "x" * 100}
        if comm.rank == 0:
            comm.send(big, 1, tag=7)
            req = comm.isend([big["b"], big["a"]], 1, tag=8)
            req.wait()
            echoed = comm.recv(source=1, tag=9)
            assert np.array_equal(echoed, big["a"] * 2)
        else:
            status = MPI.Status()
            got = comm.recv(source=0, tag=7, status=status)
            assert status.Get_source() == 0 and status.Get_tag() == 7
            assert status.Get_count(MPI.BYTE) >= big["a"].nbytes + big["b"].nbytes
            assert got["s"] == big["s"] and np.array_equal(got["a"], big["a"]) and np.array_equal(got["b"], big["b"])
            msg = comm.mprobe(0, 8)
            assert isinstance(msg, pkl5.Message)
            b, a = msg.recv()
            assert np.array_equal(a, big["a"]) and np.array_equal(b, big["b"])
            comm.send(got["a"] * 2, 0, tag=9)
        out = comm.bcast(big if comm.rank == 0 else None, root=0)
        assert np.array_equal(out["a"], big["a"])
        assert comm.allgather(np.full(1 << 18, comm.rank))[1][0] == 1
        print("OK")
    """,
        tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("OK") == 2, r.stdout


def test_pkl5_collectives_on_an_intercommunicator(tmp_path):
    # pkl5's intercommunicator collectives merge the intercommunicator first:
    # Merge must not call back into pkl5's own allgather (it waited for itself).
    r = mpiws_run(
        4,
        """
        from mpiws import MPI
        from mpiws.util import pkl5
        world = MPI.COMM_WORLD
        half = world.Split(world.rank % 2, world.rank)
        inter = pkl5.Intercomm(half.Create_intercomm(0, world, 1 - world.rank % 2, tag=3))
        root = (MPI.ROOT if half.rank == 0 else MPI.PROC_NULL) if world.rank % 2 == 0 else 0
        got = inter.bcast({"from": "evens"} if root == MPI.ROOT else None, root=root)
        assert got == ({"from": "evens"} if world.rank % 2 else None), got
        assert sorted(inter.allgather(world.rank)) == [r for r in range(4) if r % 2 != world.rank % 2]
        print("OK")
        """,
        tmp_path,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("OK") == 4, r.stdout


def test_pkl5_pickle_out_of_band_and_independent_of_MPI_pickle():
    p = pkl5.Pickle()
    p.THRESHOLD = 1024
    arr = np.arange(1000, dtype="d")
    data, bufs = p.dumps_oob(arr)
    assert type(data) is bytes and len(bufs) == 1 and type(bufs[0]) is MPI.buffer and bufs[0].nbytes == arr.nbytes
    assert np.array_equal(p.loads_oob(data, bufs), arr)
    assert p.dumps_oob(np.arange(10))[1] == []  # under the threshold: in band
    assert MPI.pickle.THRESHOLD != 1024  # a Pickle() of one's own changes nothing else
    assert MPI.COMM_SELF.sendrecv(arr, 0, 0, None, 0, 0)[999] == 999.0


def test_dtlib_structured_dtype_round_trip_and_transfer():
    dt = np.dtype([("i", "i4"), ("x", "f8", (2, 3)), ("s", "u1", (5,)), ("c", "c16")], align=True)
    mt = dtlib.from_numpy_dtype(dt)
    try:
        assert mt.combiner in (MPI.COMBINER_STRUCT, MPI.COMBINER_RESIZED)
        assert mt.extent == dt.itemsize and mt.size == sum(dt.fields[n][0].itemsize for n in dt.names)
        back = dtlib.to_numpy_dtype(mt)
        # MPI datatypes carry no field names: the fields come back as f0, f1, ...
        assert back.isalignedstruct and back.itemsize == dt.itemsize
        assert [back.fields[f"f{k}"] for k in range(4)] == [dt.fields[n] for n in dt.names]
        mt.Commit()
        src = np.zeros(4, dt)
        src["i"], src["x"], src["s"], src["c"] = range(4), 1.5, 7, 2 - 1j
        dst = np.zeros(4, dt)
        MPI.COMM_SELF.Sendrecv([src, 4, mt], 0, 0, [dst, 4, mt], 0, 0)
        assert dst.tobytes() == src.tobytes() or all(np.array_equal(dst[n], src[n]) for n in dt.names)
    finally:
        mt.Free()
    sub = dtlib.from_numpy_dtype(np.dtype(("i2", (3, 4))))
    assert dtlib.to_numpy_dtype(sub) == np.dtype(("i2", (3, 4)))
    sub.Free()
    with pytest.raises(ValueError):
        dtlib.from_numpy_dtype(np.dtype("O"))


def test_rc_and_toplevel_functions():
    rc = type(mpiws.rc)(thread_level="serialized")
    assert rc.thread_level == "serialized" and mpiws.rc.thread_level == "multiple"
    with pytest.raises(TypeError):
        mpiws.rc(no_such_option=1)
    with pytest.raises(TypeError):
        mpiws.rc.no_such_option = 1
    assert mpiws.get_config() == {}
    with pytest.raises(ValueError):
        mpiws.profile("@no-such-profiler")
