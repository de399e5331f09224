"""Attribute caching on communicators (keyvals, copy and delete
callbacks, the predefined keys) and error classes and codes a program adds,
as mpi4py has them."""

import pytest

from mpiws import MPI


def test_attributes_follow_their_copy_and_delete_rules():
    deleted = []
    comm = MPI.COMM_SELF.Dup()
    keep = MPI.Comm.Create_keyval(copy_fn=True, delete_fn=lambda c, k, v: deleted.append(v))
    double = MPI.Comm.Create_keyval(copy_fn=lambda c, k, v: v * 2)
    skip = MPI.Comm.Create_keyval(copy_fn=lambda c, k, v: NotImplemented)
    try:
        assert comm.Get_attr(keep) is None
        value = [1, 2]
        comm.Set_attr(keep, value)
        comm.Set_attr(double, 21)
        comm.Set_attr(skip, "x")
        dup = comm.Dup()
        assert dup.Get_attr(keep) is value and dup.Get_attr(double) == 42 and dup.Get_attr(skip) is None
        dup.Free()  # its values go: the delete callback sees the shared one
        assert deleted == [value]
        comm.Set_attr(keep, "new")  # replacing deletes the old value
        assert deleted == [value, value] and comm.Get_attr(keep) == "new"
        comm.Delete_attr(keep)
        assert comm.Get_attr(keep) is None and deleted[-1] == "new"
        with pytest.raises(MPI.Exception) as e:
            comm.Delete_attr(keep)
        assert e.value.Get_error_class() == MPI.ERR_KEYVAL
    finally:
        comm.Free()
        for k in (keep, double, skip):
            assert MPI.Comm.Free_keyval(k) == MPI.KEYVAL_INVALID
    bad = MPI.Comm.Create_keyval(delete_fn=lambda c, k, v: 1 / 0)
    MPI.COMM_SELF.Set_attr(bad, 1)
    with pytest.raises(MPI.Exception) as e:
        MPI.COMM_SELF.Delete_attr(bad)
    assert e.value.Get_error_class() == MPI.ERR_OTHER and "ZeroDivisionError" in str(e.value)
    MPI.Comm.Free_keyval(bad)


def test_predefined_keys():
    world = MPI.COMM_WORLD
    assert world.Get_attr(MPI.TAG_UB) == 2**31 - 1 and world.Get_attr(MPI.WTIME_IS_GLOBAL) is False
    assert world.Get_attr(MPI.APPNUM) == 0 and world.Get_attr(MPI.IO) == MPI.ANY_SOURCE


def test_added_error_classes_and_codes():
    cls = MPI.Add_error_class()
    assert cls > MPI.ERR_LASTCODE and MPI.COMM_WORLD.Get_attr(MPI.LASTUSEDCODE) == cls
    code = MPI.Add_error_code(cls)
    MPI.Add_error_string(code, "the flux capacitor is out of flux")
    assert MPI.Get_error_class(code) == cls and MPI.Get_error_string(code) == "the flux capacitor is out of flux"
    assert MPI.Exception(code).Get_error_class() == cls and repr(MPI.Exception(code)) == f"MPI.Exception({code})"
    with pytest.raises(MPI.Exception):
        MPI.Remove_error_class(cls)  # it still has a code
    MPI.Remove_error_string(code)
    MPI.Remove_error_code(code)
    MPI.Remove_error_class(cls)
    assert MPI.Exception(-5) == MPI.ERR_UNKNOWN and MPI.Exception(MPI.ERR_RANK) > MPI.SUCCESS and not MPI.Exception(0)


def test_an_instances_communicators_take_their_attributes_along_when_it_ends():
    """An endpoint running instances on threads forgets the communicators
    each made (``handle.owned``), and their attribute values with them: an
    object collective's lock table is one, on every communicator (the
    thread soak grew by it, ~1 KiB a domain)."""
    from mpiws.MPI import attributes, handle

    key = MPI.Comm.Create_keyval()
    try:
        with handle.owned():
            comm = MPI.COMM_SELF.Dup()
            comm.Set_attr(key, "kept on the communicator")
            number = comm.tohandle()
            assert attributes._values[number][key] == "kept on the communicator"
        assert number not in attributes._values
    finally:
        MPI.Comm.Free_keyval(key)
