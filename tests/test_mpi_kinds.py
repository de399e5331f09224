"""The handle kinds beyond communication: error handlers (kept, given
back, called), datatypes as handles, and the kinds mpiws does not provide
yet (``Win``, ``File``, ``Session``: their null handles exist, making one
says what is missing)."""

import pickle

import pytest

from mpiws import MPI


def test_error_handlers_are_kept_and_called():
    comm = MPI.COMM_SELF.Dup()
    seen = []
    eh = MPI.Comm.Create_errhandler(lambda c, code: seen.append((c, code)))
    try:
        assert comm.Get_errhandler() == MPI.ERRORS_RETURN  # as mpi4py sets it
        comm.Set_errhandler(eh)
        comm.Call_errhandler(MPI.SUCCESS)
        comm.Call_errhandler(MPI.ERR_OTHER)
        assert seen == [(comm, MPI.ERR_OTHER)]
        dup = comm.Dup()
        assert dup.Get_errhandler() == eh  # a duplicate inherits it
        dup.Free()
        with pytest.raises(ValueError):
            pickle.dumps(eh)
        assert pickle.loads(pickle.dumps(MPI.ERRORS_RETURN)) is MPI.ERRORS_RETURN
        with pytest.raises(MPI.Exception) as e:
            comm.Set_errhandler(MPI.ERRHANDLER_NULL)
        assert e.value.Get_error_class() == MPI.ERR_ERRHANDLER
    finally:
        comm.Free()
        eh.Free()


def test_datatypes_are_handles():
    dup = MPI.DOUBLE.Dup()
    assert dup != MPI.DOUBLE and dup.Get_size() == 8 and MPI.Datatype(dup) == dup
    assert pickle.loads(pickle.dumps(MPI.DOUBLE)) is MPI.DOUBLE and not MPI.DATATYPE_NULL
    with pytest.raises(TypeError):
        hash(MPI.INT)
    with pytest.raises(MPI.Exception) as e:
        MPI.INT.Free()  # predefined
    assert e.value.Get_error_class() == MPI.ERR_TYPE
    dup.Free()
    assert dup == MPI.DATATYPE_NULL
    with pytest.raises(MPI.Exception):
        dup.Get_size()


def test_null_handles_fail_as_mpi_says():
    for method in ("Get_size", "Is_inter", "Get_topology", "Disconnect"):
        with pytest.raises(MPI.Exception) as e:
            getattr(MPI.COMM_NULL, method)()
        assert e.value.Get_error_class() == MPI.ERR_COMM, method
    for method in ("Free", "Cancel"):
        with pytest.raises(MPI.Exception) as e:
            getattr(MPI.Request(), method)()
        assert e.value.Get_error_class() == MPI.ERR_REQUEST, method
    with pytest.raises(MPI.Exception) as e:
        MPI.COMM_WORLD.Get_attr(MPI.KEYVAL_INVALID)
    assert e.value.Get_error_class() == MPI.ERR_KEYVAL
    assert MPI.FILE_NULL.Get_errhandler() == MPI.ERRORS_RETURN  # files' default handler lives on FILE_NULL


def test_kinds_not_provided_yet():
    for null, kind in ((MPI.WIN_NULL, MPI.Win), (MPI.FILE_NULL, MPI.File), (MPI.SESSION_NULL, MPI.Session)):
        assert not null and kind() == null and pickle.loads(pickle.dumps(null)) is null
    with pytest.raises(NotImplementedError, match="MPI-IO"):
        MPI.File.Open(MPI.COMM_SELF, "/dev/null")
