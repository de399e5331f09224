"""``MPI.Win``: one-sided communication (RMA windows), mpi4py's API.

The mechanism is the core's (``mpiws_core::mpi::window``): each rank's
window memory is registered in its instance, and an origin's ``Put``,
``Get``, ``Accumulate``, ``Lock``, ... travel to the target's core, which
applies them to that memory as they arrive, whatever the target's program
is doing. This file reads mpi4py's arguments (buffer and target
specifications, assertions, groups), keeps the window's handle state
(name, info, attributes, epochs), and holds what the core writes into
until the operation is complete.
"""

import json
import mmap
import operator
import os

from .. import _core
from . import datatype
from .attributes import Attributes
from .comm import COMM_SELF, Comm
from .errhandler import Handled
from .exception import (
    ERR_ARG,
    ERR_LOCKTYPE,
    ERR_RANK,
    ERR_RMA_RANGE,
    ERR_RMA_SHARED,
    ERR_RMA_SYNC,
    ERR_SIZE,
    ERR_WIN,
    Exception as MPIException,
)
from .group import Group, members_of
from .handle import Handle, Named, _predefined, _table, predefine
from .info import Info
from .memory import buffer
from .op import SUM, as_op
from .request import Request

PROC_NULL = -1
# MPICH's values.
WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL = (
    0x66000001,
    0x66000003,
    0x66000005,
    0x66000007,
    0x66000009,
)
WIN_FLAVOR_CREATE, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED = 1, 2, 3, 4
WIN_SEPARATE, WIN_UNIFIED = 1, 2
LOCK_EXCLUSIVE, LOCK_SHARED = 234, 235
MODE_NOCHECK, MODE_NOSTORE, MODE_NOPUT, MODE_NOPRECEDE, MODE_NOSUCCEED = 1024, 2048, 4096, 8192, 16384

_WIN_KEYS = (WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL)


class _WinState:
    """What a window handle names."""

    __slots__ = (
        "core",
        "comm",
        "base",
        "size",
        "unit",
        "flavor",
        "name",
        "info",
        "sizes",
        "units",
        "memory",
        "keep",
        "locked",
        "lock_all",
        "access",
        "exposure",
        "outstanding",
        "bases",
    )

    def __init__(self, core, comm, memory, unit, flavor):
        self.core, self.comm, self.memory, self.unit, self.flavor = core, comm, memory, unit, flavor
        self.base = memory.address if memory is not None else 0
        self.size = memory.nbytes if memory is not None else 0
        self.name, self.info = "", {}
        self.sizes = self.units = self.bases = None
        self.keep = None  # a shared window's mapping
        self.locked = {}  # target -> lock type (passive target epochs)
        self.lock_all = False
        self.access = self.exposure = None  # local ranks of a Start / Post group
        self.outstanding = []  # (core request, staged view or None) of blocking calls


def _intracomm(comm):
    if not isinstance(comm, Comm) or not comm:
        raise MPIException(ERR_ARG, "a window needs a valid intracommunicator")
    if comm.Is_inter():
        raise MPIException(ERR_ARG, "a window needs an intracommunicator")
    return comm


def _held(memory):
    """``memory`` (a buffer, None or BOTTOM) as an ``MPI.buffer``: None if empty."""
    if memory is None or (isinstance(memory, int) and not isinstance(memory, bool) and memory == 0):
        return None
    if isinstance(memory, buffer):
        return memory if memory.nbytes else None
    view = datatype.as_view(memory)
    return buffer.frombuffer(view.cast("B") if view.nbytes else view) if view.nbytes else None


def _disp_unit(disp_unit):
    unit = operator.index(disp_unit)
    if unit <= 0:
        raise MPIException(ERR_ARG, f"invalid displacement unit {unit}")
    return unit


def _positive_size(size):
    size = operator.index(size)
    if size < 0:
        raise MPIException(ERR_SIZE, f"invalid window size {size}")
    return size


def _element_code(dt):
    """The core's name for ``dt``'s elements in an accumulate at the target:
    a long double is x86's 80-bit float in a 16-byte slot, which the core
    applies with the x87 unit (crates/core/src/mpi/window/extended.rs)."""
    if dt.typecode == "g" and dt.Get_size() == 16:
        return "f80x16"
    return datatype.reduce_code(dt)


class Win(Handle, Named, Attributes, Handled):
    """
    Remote memory access context.
    """

    __slots__ = ()
    _invalid = ERR_WIN
    _null_name = "MPI_WIN_NULL"

    # ---- creation ----------------------------------------------------------

    @classmethod
    def _make(cls, comm, memory, unit, flavor, info, keep=None):
        comm = _intracomm(comm)
        core = _core.Window.create(comm._core, memory, unit, flavor == WIN_FLAVOR_DYNAMIC)
        st = _WinState(core, comm, memory, unit, flavor)
        st.keep = keep
        # Registered first: after this exchange every member is, so no
        # operation can find a window missing.
        table = [json.loads(b) for b in core.comm.allgather_bytes(json.dumps([st.size, unit, st.base]).encode())]
        st.sizes, st.units, st.bases = [t[0] for t in table], [t[1] for t in table], [t[2] for t in table]
        win = cls._new(st)
        if info:
            win.Set_info(info)
        return win

    @classmethod
    def Create(cls, memory, disp_unit=1, info=None, comm=None):
        """Create(cls, memory, disp_unit=1, info=None, comm=None)

        Create an window object for one-sided communication.
        """
        return cls._make(
            comm if comm is not None else COMM_SELF, _held(memory), _disp_unit(disp_unit), WIN_FLAVOR_CREATE, info
        )

    @classmethod
    def Allocate(cls, size, disp_unit=1, info=None, comm=None):
        """Allocate(cls, size, disp_unit=1, info=None, comm=None)

        Create an window object for one-sided communication.
        """
        size = _positive_size(size)
        memory = buffer.allocate(size) if size else None
        return cls._make(
            comm if comm is not None else COMM_SELF, memory, _disp_unit(disp_unit), WIN_FLAVOR_ALLOCATE, info
        )

    @classmethod
    def Allocate_shared(cls, size, disp_unit=1, info=None, comm=None):
        """Allocate_shared(cls, size, disp_unit=1, info=None, comm=None)

        Create an window object for one-sided communication.

        Each member's memory is its part of one mapping the members on
        this host share (a file in /dev/shm, removed once mapped).
        """
        comm = _intracomm(comm if comm is not None else COMM_SELF)
        size, unit = _positive_size(size), _disp_unit(disp_unit)
        c = comm._core
        path = ""
        if c.rank == 0:
            import tempfile  # here: imported by few programs, at every rank's start

            fd, path = tempfile.mkstemp(prefix="mpiws-win-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            os.close(fd)
        table = [json.loads(b) for b in c.allgather_bytes(json.dumps([size, path]).encode())]
        sizes, path = [t[0] for t in table], table[0][1]
        total, start = sum(sizes), sum(sizes[: c.rank])
        try:
            if c.rank == 0:
                os.truncate(path, max(total, 1))
            c.allgather_bytes(b"")  # the file has its size
            with open(path, "r+b") as f:
                mapping = mmap.mmap(f.fileno(), max(total, 1))
            failed = ""
        except OSError as e:
            mapping, failed = None, str(e)
        errors = [b.decode() for b in c.allgather_bytes(failed.encode())]  # everyone mapped it (or not)
        if c.rank == 0:
            try:
                os.unlink(path)
            except OSError:
                pass
        if any(errors):
            raise MPIException(
                ERR_RMA_SHARED, f"shared window memory could not be mapped: {next(e for e in errors if e)}"
            )
        whole = memoryview(mapping)
        memory = buffer.frombuffer(whole[start : start + size]) if size else None
        win = cls._make(comm, memory, unit, WIN_FLAVOR_SHARED, info, keep=(mapping, whole))
        first = buffer.frombuffer(whole).address  # this process's mapping of everyone's memory
        win._state().bases = [first + sum(sizes[:r]) for r in range(len(sizes))]
        return win

    @classmethod
    def Create_dynamic(cls, info=None, comm=None):
        """Create_dynamic(cls, info=None, comm=None)

        Create an window object for one-sided communication.
        """
        return cls._make(comm if comm is not None else COMM_SELF, None, 1, WIN_FLAVOR_DYNAMIC, info)

    def Attach(self, memory):
        """Attach(self, memory)

        Attach a local memory region.
        """
        st = self._state()
        view = datatype.as_view(memory, writable=True)
        st.core.attach(view)

    def Detach(self, memory):
        """Detach(self, memory)

        Detach a local memory region.
        """
        st = self._state()
        st.core.detach(datatype.as_view(memory))

    def Free(self):
        """Free(self)

        Free a window.
        """
        st = self._state()
        try:
            st.core.free()
        finally:
            st.outstanding.clear()
            self._drop_attrs()
            self._drop_errhandler()
            self._release()

    def free(self):
        """free(self)

        Call `Free` if not null.

        The safe free of a window that exists is ``Free``: collective, so
        no member lets its memory go while another still operates on it.
        """
        if self._h in _table and self._h not in _predefined:
            self.Free()
        else:
            super().free()

    def _rebuild(self):
        raise ValueError("cannot pickle MPI.Win handles")

    # ---- what it is --------------------------------------------------------

    def Get_group(self):
        """Get_group(self)

        Access the group of processes that created the window.
        """
        st = self._state()
        c = st.core.comm
        return Group._make(c.group, c.group[c.rank])

    @property
    def group(self):
        return self.Get_group()

    @property
    def group_size(self):
        return self._state().core.comm.size

    @property
    def group_rank(self):
        return self._state().core.comm.rank

    def Get_info(self):
        """Get_info(self)

        Return the current hints for a window.
        """
        return Info.Create(self._state().info)

    def Set_info(self, info):
        """Set_info(self, info)

        Set new values for the hints associated with a window.
        """
        self._state().info.update(info.items() if info else ())

    @property
    def info(self):
        return self.Get_info()

    @info.setter
    def info(self, info):
        self.Set_info(info)

    def Get_attr(self, keyval):
        """Get_attr(self, keyval)

        Retrieve attribute value by key.
        """
        if keyval in _WIN_KEYS:
            st = self._state()
            return {
                WIN_BASE: st.base,
                WIN_SIZE: st.size,
                WIN_DISP_UNIT: st.unit,
                WIN_CREATE_FLAVOR: st.flavor,
                WIN_MODEL: WIN_UNIFIED,
            }[keyval]
        return super().Get_attr(keyval)

    @property
    def attrs(self):
        st = self._state()
        return (st.base, st.size, st.unit)

    @property
    def flavor(self):
        return self._state().flavor

    @property
    def model(self):
        self._state()
        return WIN_UNIFIED  # the target's own memory is what operations update

    def tomemory(self):
        """tomemory(self)

        Return window memory buffer.
        """
        st = self._state()
        return buffer.fromaddress(st.base, st.size)

    def Shared_query(self, rank):
        """Shared_query(self, rank)

        Query the process-local address for remote memory segments.

        (memory, displacement unit) of member ``rank``'s part of a shared
        window (PROC_NULL: the first member with memory).
        """
        st = self._state()
        n = len(st.sizes)
        if rank == PROC_NULL:
            rank = next((r for r in range(n) if st.sizes[r]), 0)
        if not 0 <= rank < n:
            raise MPIException(ERR_RANK, f"invalid rank {rank} (window group size {n})")
        if st.flavor == WIN_FLAVOR_SHARED:
            return buffer.fromaddress(st.bases[rank], st.sizes[rank]), st.units[rank]
        if rank == st.core.comm.rank:
            return self.tomemory(), st.unit
        return buffer.fromaddress(0, 0), st.units[rank]

    # ---- data movement -----------------------------------------------------

    def _target(self, origin_count, origin_type, target):
        """(disp, nbytes, datatype, count) of a target specification, read as mpi4py reads one."""
        disp, count, dt = 0, origin_count, origin_type
        if target is None:
            pass
        elif isinstance(target, (list, tuple)):
            if len(target) > 3:
                raise ValueError("target: expecting 3 items at most")
            if len(target) >= 1:
                disp = operator.index(target[0])
            if len(target) >= 2:
                count = operator.index(target[1])
            if len(target) >= 3:
                dt = datatype._as_datatype(target[2])
        else:
            try:
                disp = operator.index(target)
            except TypeError:
                raise ValueError("target: expecting integral or list/tuple") from None
        if dt is None or not count:
            return disp, 0, dt, 0
        return disp, count * dt.Get_size(), dt, count

    def _pieces(self, st, rank, disp, nbytes, dt, count, call=None):
        # (target displacement, offset in the operation's packed bytes,
        # length) of each contiguous piece the target datatype touches (one
        # for a plain datatype), each checked against the target's window. A
        # derived datatype's pieces go as one operation each, in order; a
        # request-based ``call`` (one request for one operation) takes one.
        # (A comment: mpi4py's test_doc holds every docstring here to its rules.)
        if not count or datatype.is_plain(dt):
            self._check_range(st, rank, disp, nbytes)
            return [(disp, 0, nbytes)]
        unit = st.units[rank] if 0 <= rank < len(st.units) else 1
        pieces, at = [], 0
        for offset, n in dt._layout.pieces(count):
            if offset % unit:
                raise NotImplementedError(
                    f"a target datatype piece at byte {offset} is not a multiple of rank {rank}'s displacement unit "
                    f"{unit}: not in mpiws yet (docs/mpi4py-compat.md)"
                )
            self._check_range(st, rank, disp + offset // unit, n)
            pieces.append((disp + offset // unit, at, n))
            at += n
        if call is not None and len(pieces) > 1:
            raise NotImplementedError(
                f"{call} with a non-contiguous target datatype is not in mpiws yet (use {call[1:]})"
            )
        return pieces

    def _check_range(self, st, rank, disp, nbytes):
        """_check_range(self, st, rank, disp, nbytes)

        Check that an access is within the target window.

        Checked here too where the target's size is known (the target
        checks again): the error at the call, as MPI implementations give it.
        """
        n = len(st.units)
        if not isinstance(rank, int) or not 0 <= rank < n:
            raise MPIException(ERR_RANK, f"invalid target rank {rank} (window group size {n})")
        if disp < 0:
            raise MPIException(ERR_RMA_RANGE, f"negative target displacement {disp}")
        if st.flavor != WIN_FLAVOR_DYNAMIC and disp * st.units[rank] + nbytes > st.sizes[rank]:
            raise MPIException(
                ERR_RMA_RANGE,
                f"{nbytes} bytes at displacement {disp} are outside rank {rank}'s window of {st.sizes[rank]} bytes",
            )

    def _origin(self, origin, writable=False):
        view, dt, count = datatype.parse(origin, writable=writable)
        return view, dt, count

    def _track(self, st, requests, staged=None):
        self._settle(st)  # what completed already: spread into place, let go of
        st.outstanding += [(r, staged) for r in requests]

    # Each returns the core requests of its pieces ([] for PROC_NULL).

    def _put(self, origin, target_rank, target, call=None):
        st = self._state()
        if target_rank == PROC_NULL:
            return []
        view, dt, count = self._origin(origin)
        disp, nbytes, tdt, tcount = self._target(count, dt, target)
        if nbytes != view.nbytes:
            raise MPIException(ERR_SIZE, f"origin has {view.nbytes} bytes, target {nbytes}")
        pieces = self._pieces(st, target_rank, disp, nbytes, tdt, tcount, call)
        return [st.core.put(target_rank, d, view[at : at + n]) for d, at, n in pieces]

    def _get(self, origin, target_rank, target, nonblocking):
        st = self._state()
        if target_rank == PROC_NULL:
            return [], None
        view, dt, count = self._origin(origin, writable=True)
        disp, nbytes, tdt, tcount = self._target(count, dt, target)
        if nbytes != view.nbytes:
            raise MPIException(ERR_SIZE, f"origin has {view.nbytes} bytes, target {nbytes}")
        staged = view if isinstance(view.obj, datatype._Staged) else None
        if staged is not None and nonblocking:
            raise NotImplementedError("Rget into a non-contiguous origin datatype is not in mpiws yet")
        pieces = self._pieces(st, target_rank, disp, nbytes, tdt, tcount, "Rget" if nonblocking else None)
        return [st.core.get(target_rank, d, view[at : at + n]) for d, at, n in pieces], staged

    def _acc(self, origin, result, target_rank, target, op, call=None):
        st = self._state()
        op = as_op(op)
        if not op or op._core is None:
            raise MPIException(ERR_ARG, f"RMA accumulate needs a predefined operation, got {op.name}")
        if target_rank == PROC_NULL:
            return []
        view, dt, count = self._origin(origin)
        disp, nbytes, tdt, tcount = self._target(count, dt, target)
        if op._core != "no_op" and nbytes != view.nbytes:
            raise MPIException(ERR_SIZE, f"origin has {view.nbytes} bytes, target {nbytes}")
        fetch = None
        if result is not None:
            fetch, _, _ = self._origin(result, writable=True)
            if isinstance(fetch.obj, datatype._Staged):
                raise NotImplementedError("Get_accumulate into a non-contiguous result datatype is not in mpiws yet")
            if fetch.nbytes != nbytes:
                raise MPIException(ERR_SIZE, f"result has {fetch.nbytes} bytes, target {nbytes}")
        pieces = self._pieces(st, target_rank, disp, nbytes, tdt, tcount, call)
        code = _element_code(dt) if dt is not None and nbytes else "u1"
        none = op._core == "no_op"
        return [
            st.core.accumulate(
                target_rank,
                d,
                memoryview(b"") if none else view[at : at + n],
                n,
                op._core,
                code,
                None if fetch is None else fetch[at : at + n],
            )
            for d, at, n in pieces
        ]

    def Put(self, origin, target_rank, target=None):
        """Put(self, origin, target_rank, target=None)

        Put data into a memory window on a remote process.
        """
        self._track(self._state(), self._put(origin, target_rank, target))

    def Get(self, origin, target_rank, target=None):
        """Get(self, origin, target_rank, target=None)

        Get data from a memory window on a remote process.
        """
        requests, staged = self._get(origin, target_rank, target, False)
        self._track(self._state(), requests, staged)

    def Accumulate(self, origin, target_rank, target=None, op=SUM):
        """Accumulate(self, origin, target_rank, target=None, op=SUM)

        Accumulate data into the target process.
        """
        self._track(self._state(), self._acc(origin, None, target_rank, target, op))

    def Get_accumulate(self, origin, result, target_rank, target=None, op=SUM):
        """Get_accumulate(self, origin, result, target_rank, target=None, op=SUM)

        Fetch-and-accumulate data into the target process.
        """
        self._track(self._state(), self._acc(origin, result, target_rank, target, op))

    def Rput(self, origin, target_rank, target=None):
        """Rput(self, origin, target_rank, target=None)

        Put data into a memory window on a remote process.
        """
        return _request(self._put(origin, target_rank, target, "Rput"))

    def Rget(self, origin, target_rank, target=None):
        """Rget(self, origin, target_rank, target=None)

        Get data from a memory window on a remote process.
        """
        return _request(self._get(origin, target_rank, target, True)[0])

    def Raccumulate(self, origin, target_rank, target=None, op=SUM):
        """Raccumulate(self, origin, target_rank, target=None, op=SUM)

        Fetch-and-accumulate data into the target process.
        """
        return _request(self._acc(origin, None, target_rank, target, op, "Raccumulate"))

    def Rget_accumulate(self, origin, result, target_rank, target=None, op=SUM):
        """Rget_accumulate(self, origin, result, target_rank, target=None, op=SUM)

        Accumulate data into the target process using remote memory access.
        """
        return _request(self._acc(origin, result, target_rank, target, op, "Rget_accumulate"))

    @staticmethod
    def _single(what, spec, writable=False):
        view, dt, count = datatype.parse(spec, writable=writable)
        if count != 1:
            raise ValueError(f"{what}: expecting a single element, got {count}")
        return view, dt

    def Fetch_and_op(self, origin, result, target_rank, target_disp=0, op=SUM):
        """Fetch_and_op(self, origin, result, target_rank, target_disp=0, op=SUM)

        Perform one-sided read-modify-write.
        """
        st = self._state()
        if target_rank == PROC_NULL:
            return
        oview, otype = self._single("origin", origin)
        rview, rtype = self._single("result", result, writable=True)
        if otype != rtype:
            raise ValueError("mismatch in origin and result MPI datatypes")
        disp = operator.index(target_disp)
        op = as_op(op)
        if not op or op._core is None:
            raise MPIException(ERR_ARG, f"RMA accumulate needs a predefined operation, got {op.name}")
        self._check_range(st, target_rank, disp, rview.nbytes)
        data = memoryview(b"") if op._core == "no_op" else oview
        self._track(
            st, [st.core.accumulate(target_rank, disp, data, rview.nbytes, op._core, _element_code(otype), rview)]
        )

    def Compare_and_swap(self, origin, compare, result, target_rank, target_disp=0):
        """Compare_and_swap(self, origin, compare, result, target_rank, target_disp=0)

        Perform one-sided atomic compare-and-swap.
        """
        st = self._state()
        if target_rank == PROC_NULL:
            return
        oview, otype = self._single("origin", origin)
        cview, ctype = self._single("compare", compare)
        rview, rtype = self._single("result", result, writable=True)
        if otype != ctype:
            raise ValueError("mismatch in origin and compare MPI datatypes")
        if otype != rtype:
            raise ValueError("mismatch in origin and result MPI datatypes")
        disp = operator.index(target_disp)
        self._check_range(st, target_rank, disp, rview.nbytes)
        self._track(st, [st.core.compare_and_swap(target_rank, disp, oview, cview, rview)])

    # ---- synchronisation ---------------------------------------------------

    def _settle(self, st):
        """After a flush: what staged gets received, spread into place."""
        for r, staged in st.outstanding:
            if staged is not None and r.done():
                datatype.settle(staged)
        st.outstanding = [(r, v) for r, v in st.outstanding if not r.done()]

    def _flushed(self, st, target=None):
        try:
            st.core.flush(target)
        finally:
            self._settle(st)

    def Fence(self, assertion=0):
        """Fence(self, assertion=0)

        Perform an MPI fence synchronization on a window.
        """
        st = self._state()
        try:
            st.core.fence()
        finally:
            self._settle(st)

    def Lock(self, rank, lock_type=LOCK_EXCLUSIVE, assertion=0):
        """Lock(self, rank, lock_type=LOCK_EXCLUSIVE, assertion=0)

        Begin an RMA access epoch at the target process.
        """
        st = self._state()
        if lock_type not in (LOCK_EXCLUSIVE, LOCK_SHARED):
            raise MPIException(ERR_LOCKTYPE, f"invalid lock type {lock_type}")
        if rank == PROC_NULL:
            return
        if rank in st.locked or st.lock_all:
            raise MPIException(ERR_RMA_SYNC, f"rank {rank}'s window is already locked by this process")
        st.core.lock(rank, lock_type == LOCK_EXCLUSIVE)
        st.locked[rank] = lock_type

    def Unlock(self, rank):
        """Unlock(self, rank)

        Complete an RMA access epoch at the target process.
        """
        st = self._state()
        if rank == PROC_NULL:
            return
        if rank not in st.locked:
            raise MPIException(ERR_RMA_SYNC, f"rank {rank}'s window is not locked by this process")
        del st.locked[rank]
        try:
            st.core.unlock(rank)
        finally:
            self._settle(st)

    def Lock_all(self, assertion=0):
        """Lock_all(self, assertion=0)

        Begin an RMA access epoch at all processes.
        """
        st = self._state()
        if st.locked or st.lock_all:
            raise MPIException(ERR_RMA_SYNC, "the window is already locked by this process")
        st.core.lock_all()
        st.lock_all = True

    def Unlock_all(self):
        """Unlock_all(self)

        Complete an RMA access epoch at all processes.
        """
        st = self._state()
        if not st.lock_all:
            raise MPIException(ERR_RMA_SYNC, "the window is not locked (Lock_all) by this process")
        st.lock_all = False
        try:
            st.core.unlock_all()
        finally:
            self._settle(st)

    def Flush(self, rank):
        """Flush(self, rank)

        Complete all outstanding RMA operations at a target.
        """
        st = self._state()
        self._flushed(st, rank)

    def Flush_all(self):
        """Flush_all(self)

        Complete all outstanding RMA operations at all targets.
        """
        self._flushed(self._state())

    # Local completion: the origin's buffers reusable. Complete at the
    # target implies it (replies come after the data is applied).
    def Flush_local(self, rank):
        """Flush_local(self, rank)

        Complete locally all outstanding RMA operations at a target.
        """
        self.Flush(rank)

    def Flush_local_all(self):
        """Flush_local_all(self)

        Complete locally all outstanding RMA operations at all targets.
        """
        self.Flush_all()

    def Sync(self):
        """Sync(self)

        Synchronize public and private copies of the window.
        """
        self._state()  # one copy of the memory (WIN_UNIFIED): nothing to synchronise

    def _local_ranks(self, st, group):
        c = st.core.comm
        return [c.group.index(w) for w in members_of(group, c.group)] if group.Get_size() else []

    def Start(self, group, assertion=0):
        """Start(self, group, assertion=0)

        Start an RMA access epoch for MPI.
        """
        st = self._state()
        if st.access is not None:
            raise MPIException(ERR_RMA_SYNC, "an access epoch (Start) is already open")
        ranks = self._local_ranks(st, group)
        st.core.start(ranks)
        st.access = ranks

    def Complete(self):
        """Complete(self)

        Complete an RMA operation begun after an `Start`.
        """
        st = self._state()
        if st.access is None:
            raise MPIException(ERR_RMA_SYNC, "Complete without Start")
        ranks, st.access = st.access, None
        try:
            st.core.complete(ranks)
        finally:
            self._settle(st)

    def Post(self, group, assertion=0):
        """Post(self, group, assertion=0)

        Start an RMA exposure epoch.
        """
        st = self._state()
        if st.exposure is not None:
            raise MPIException(ERR_RMA_SYNC, "an exposure epoch (Post) is already open")
        ranks = self._local_ranks(st, group)
        st.core.post(ranks)
        st.exposure = ranks

    def Wait(self):
        """Wait(self)

        Complete an RMA exposure epoch begun with `Post`.
        """
        st = self._state()
        if st.exposure is None:
            raise MPIException(ERR_RMA_SYNC, "Wait without Post")
        st.core.wait(st.exposure)
        st.exposure = None

    def Test(self):
        """Test(self)

        Test whether an RMA exposure epoch has completed.
        """
        st = self._state()
        if st.exposure is None:
            raise MPIException(ERR_RMA_SYNC, "Test without Post")
        if st.core.wait(st.exposure, 0.0):
            st.exposure = None
            return True
        return False


def _request(requests):
    """An ``MPI.Request`` for an operation of one piece (done at once for PROC_NULL)."""
    return Request(requests[0] if requests else None)


WIN_NULL = predefine(Win(), "WIN_NULL")
