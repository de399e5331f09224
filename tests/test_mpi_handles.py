"""The handle object model (equality by handle, null objects, Free and the
safe free, pickling, handle numbers) as mpi4py has it, for Info, Comm and
Group; mpi4py's own test_info and test_group pass on top of it
(docs/mpi4py-compat.md)."""

import copy
import pickle

import pytest

from mpiws import MPI


def test_create_set_get_delete():
    info = MPI.Info.Create({"a": "1", "b": "2"})
    try:
        assert (info.Get_nkeys(), info.Get_nthkey(1), info.Get("a"), info.Get("z")) == (2, "b", "1", None)
        info.Set("c", "3")
        info.Delete("a")
        assert info.items() == [("b", "2"), ("c", "3")]
        with pytest.raises(MPI.Exception) as e:
            info.Delete("a")
        assert e.value.Get_error_class() == MPI.ERR_INFO_NOKEY
        with pytest.raises(MPI.Exception) as e:
            info.Set("k" * (MPI.MAX_INFO_KEY + 1), "v")
        assert e.value.Get_error_class() == MPI.ERR_INFO_KEY
        with pytest.raises(TypeError):
            info.Set("k", 1)
    finally:
        info.Free()
    assert info == MPI.INFO_NULL and not info
    with pytest.raises(MPI.Exception):
        info.Get("b")  # freed: an invalid handle, not an empty info


def test_handles_compare_by_handle_and_kind():
    info = MPI.Info.Create()
    alias = MPI.Info(info)
    dup = info.Dup()
    try:
        assert alias == info and alias is not info and dup != info
        assert MPI.Info() == MPI.INFO_NULL and MPI.INFO_NULL != MPI.GROUP_NULL
        assert MPI.Info.fromhandle(info.tohandle()) == info == MPI.Info.f2py(info.py2f())
        with pytest.raises(TypeError):
            hash(info)
        with pytest.raises(TypeError):
            _ = info < alias
        with pytest.raises(TypeError):
            MPI.Info(123)
    finally:
        dup.Free()
        info.Free()
    assert alias  # another object for the freed handle keeps its number, as in MPI


def test_predefined_handles_survive_free_and_pickle_as_themselves():
    with pytest.raises(MPI.Exception):
        MPI.INFO_ENV.Free()
    MPI.INFO_ENV.free()  # the safe free leaves a predefined handle alone
    assert MPI.INFO_ENV and MPI.INFO_ENV.Get("host")
    clone = MPI.Info(MPI.INFO_ENV)
    clone.free()
    assert not clone and MPI.INFO_ENV
    for obj in (MPI.INFO_NULL, MPI.INFO_ENV):
        assert pickle.loads(pickle.dumps(obj)) is obj and copy.copy(obj) is obj
    again = pickle.loads(pickle.dumps(MPI.Info(MPI.INFO_ENV)))
    assert again == MPI.INFO_ENV and again is not MPI.INFO_ENV


def test_a_created_info_pickles_as_a_new_one_with_its_items():
    info = MPI.Info.Create([("x", "1")])
    other = pickle.loads(pickle.dumps(info))
    try:
        assert other != info and other.items() == [("x", "1")]
    finally:
        other.Free()
        info.Free()


def test_a_null_info_is_empty_and_read_only():
    null = MPI.INFO_NULL
    assert (len(null), null.keys(), null.get("k", "d")) == (0, [], "d")
    for change in (lambda: null.__setitem__("k", "v"), lambda: null.update([]), null.popitem):
        with pytest.raises(KeyError):
            change()


def test_communicators_are_handles():
    world = MPI.COMM_WORLD
    dup = world.Dup()
    try:
        assert dup != world and MPI.Comm(dup) == dup and MPI.Intracomm(MPI.COMM_NULL) == MPI.COMM_NULL
        assert world.Compare(dup) == MPI.CONGRUENT and MPI.Comm.Compare(world, world) == MPI.IDENT
        assert pickle.loads(pickle.dumps(world)) is world
        with pytest.raises(ValueError):
            pickle.dumps(dup)  # a communicator names this process's state
        with pytest.raises(TypeError):
            hash(dup)
        info = MPI.Info.Create({"k": "v"})
        dup.Set_info(info)
        info.Free()
        got = dup.Get_info()
        assert got.items() == [("k", "v")]
        got.Free()
    finally:
        dup.Free()
    assert dup == MPI.COMM_NULL and MPI.COMM_NULL.Get_name() == "MPI_COMM_NULL"
    with pytest.raises(MPI.Exception) as e:
        dup.Get_size()
    assert e.value.Get_error_class() == MPI.ERR_COMM
    with pytest.raises(MPI.Exception):
        world.Free()  # predefined
    parent = MPI.Comm.Get_parent()
    assert isinstance(parent, MPI.Intercomm) and parent == MPI.COMM_NULL


def test_groups_are_handles():
    group = MPI.COMM_WORLD.Get_group()
    empty = group.Excl([0])
    assert empty.Get_size() == 0 and MPI.Group.Compare(empty, MPI.GROUP_EMPTY) == MPI.IDENT
    assert empty != MPI.GROUP_EMPTY  # a new handle for an empty group: it may be freed
    empty.Free()
    group.Free()
    assert (empty, group) == (MPI.GROUP_NULL, MPI.GROUP_NULL)
    with pytest.raises(MPI.Exception) as e:
        group.Get_size()
    assert e.value.Get_error_class() == MPI.ERR_GROUP
    assert pickle.loads(pickle.dumps(MPI.GROUP_EMPTY)) is MPI.GROUP_EMPTY
