"""Communicators: ``Comm`` / ``Intracomm`` with mpi4py's point-to-point API.

Lowercase methods move Python objects (pickled, large buffers out of band);
uppercase methods move buffers. Both map onto the core's ``isend``/``irecv``.
"""

import json
import operator
import warnings
import zlib

from .. import binding
from .._core import TAG_UB as _TAG_UB
from . import buffered, datatype, pickled
from . import events as events_
from . import timeout as timeout_
from .attributes import APPNUM, HOST, IO, LASTUSEDCODE, TAG_UB, UNIVERSE_SIZE, WTIME_IS_GLOBAL, Attributes
from .collectives import Collectives
from .errhandler import Handled
from .exception import ERR_ARG, ERR_COMM, ERR_GROUP, Exception as MPIException, last_used_code
from .handle import Handle, Named, _table, predefine
from .info import Info
from .group import CONGRUENT, IDENT, SIMILAR, UNEQUAL, Group, members_of
from .message import Message
from .pair import Pair
from .partitioned import _Round
from .persistent import Prequest
from .received import received_buffer, received_object
from .request import _BUFFER, _OBJECT, Request
from .status import ANY_SOURCE, ANY_TAG, UNDEFINED, fill

PROC_NULL = -1
COMM_TYPE_SHARED, COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, COMM_TYPE_RESOURCE_GUIDED = 1, 2, 3, 4
_HW_RESOURCE, _SHARED_MEMORY = "mpi_hw_resource_type", "mpi_shared_memory"


def _check_rank_arg(value, name):
    """An int argument (bools count, as in mpi4py's C conversion)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


#: What the methods making communicators of the kinds built on this file's
#: classes call, by name: MPI/intercomm.py, topology.py and spawn.py, which
#: import this file, register theirs (``constructor``) when imported, and
#: MPI/__init__ imports them all; this file imports none of them.
_constructors = {}


def constructor(fn):
    """Register ``fn``: the ``Comm`` method making its kind calls it by name."""
    _constructors[fn.__name__] = fn
    return fn


class _Settings:
    """What this process set on a communicator (mpiws): its default time
    limit (``Set_timeout``; ``timeout.UNSET``: none), the algorithms it
    forces on collectives (``Set_algorithm``) and its message handlers
    (``on_message``)."""

    __slots__ = ("timeout", "algorithms", "handlers")

    def __init__(self):
        self.timeout, self.algorithms, self.handlers = timeout_.UNSET, {}, []


class _Context:
    """What a communicator handle names: a core communicator, its name, its
    info hints and its settings (freed with the handle)."""

    __slots__ = ("core", "name", "info", "settings")

    def __init__(self, core, name=""):
        self.core, self.name, self.info = core, name, {}
        self.settings = _Settings()

    def core_and_limit(self, timeout):
        """The core communicator and the time limit of a call given ``timeout``."""
        return self.core, timeout_.resolve(timeout, self.settings.timeout)


class _Bound:
    """What COMM_WORLD and COMM_SELF name: the calling thread's domain
    instance's (the process's, or a service thread's), looked up per call;
    their settings are each instance's own (kept on its binding)."""

    __slots__ = ("which", "name", "info")

    def __init__(self, which, name):
        self.which, self.name, self.info = which, name, {}

    @property
    def core(self):
        return getattr(binding.current(), self.which)

    @property
    def settings(self):
        return self._settings_of(binding.current())

    def _settings_of(self, bound):
        kept = bound.settings
        found = kept.get(self.which)
        return found if found is not None else kept.setdefault(self.which, _Settings())

    def core_and_limit(self, timeout):
        """`_Context.core_and_limit`, with one look-up of the calling thread's
        instance (every call on COMM_WORLD makes it: kept to one dict look-up)."""
        bound = binding.current()
        found = bound.settings.get(self.which)
        return getattr(bound, self.which), timeout_.resolve(timeout, timeout_.UNSET if found is None else found.timeout)


class Comm(Handle, Named, Attributes, Handled, Collectives):
    """A communication context over a group of ranks."""

    __slots__ = ()
    _invalid = ERR_COMM
    _null_name = "MPI_COMM_NULL"
    #: Whether the communicators of this class are intercommunicators (Intercomm's are).
    _is_inter = False

    @classmethod
    def _wrap(cls, core):
        """A new communicator handle for a core communicator."""
        return cls._new(_Context(core))

    @property
    def _core(self):
        return self._state().core

    # ---- size, rank, names -----------------------------------------------

    def Get_rank(self):
        """Get_rank(self)

        Return the rank of this process in a communicator.
        """
        return self._core.rank

    def Get_size(self):
        """Get_size(self)

        Return the number of processes in a communicator.
        """
        return self._core.size

    @property
    def rank(self):
        return self._core.rank

    @property
    def size(self):
        return self._core.size

    def Is_inter(self):
        """Is_inter(self)

        Return whether the communicator is an intercommunicator.
        """
        self._state()
        return self._is_inter

    def Is_intra(self):
        """Is_intra(self)

        Return whether the communicator is an intracommunicator.
        """
        self._state()
        return not self._is_inter

    @property
    def is_inter(self):
        return self._is_inter

    @property
    def is_intra(self):
        return not self._is_inter

    def Compare(self, comm):
        """IDENT (the same handle), CONGRUENT (same group in the same order),
        SIMILAR (same members), or UNEQUAL."""
        comm1, comm2 = self, comm
        a, b = comm1._core, comm2._core
        if comm1 == comm2:
            return IDENT
        ra, rb = a.remote_group, b.remote_group  # intercommunicators: those compare too
        if (ra is None) != (rb is None):
            return UNEQUAL
        if a.group == b.group and ra == rb:
            return CONGRUENT
        if sorted(a.group) == sorted(b.group) and sorted(ra or ()) == sorted(rb or ()):
            return SIMILAR
        return UNEQUAL

    # ---- communicator management ------------------------------------------

    def Dup(self, info=None):
        """Dup(self, info=None)

        A new communicator with the same group and a separate context.
        """
        c = self._core
        dup = type(self)._wrap(c.derive(c.next_context(0), c.group))  # mpi4py's: of the caller's class
        dup._state().info = dict(self._state().info)
        self._copy_attrs(dup)
        self._copy_errhandler(dup)
        if info:
            dup.Set_info(info)
        return dup

    Clone = Dup

    def Dup_with_info(self, info):
        """Dup_with_info(self, info)

        Duplicate a communicator with hints.
        """
        return self.Dup(info)

    def Idup(self, info=None):
        """Idup(self, info=None)

        Nonblocking duplicate a communicator.

        ``Dup`` and a request: done at once (a new context costs no message here).
        """
        return self.Dup(info), Request()

    def Idup_with_info(self, info):
        """Idup_with_info(self, info)

        Nonblocking duplicate a communicator with hints.
        """
        return self.Idup(info)

    def Set_info(self, info):
        """Set_info(self, info)

        Set new values for the hints associated with a communicator.
        """
        self._state().info.update(info.items() if info else ())

    def Get_info(self):
        """Get_info(self)

        Return the current hints for a communicator.
        """
        return Info.Create(self._state().info)

    @property
    def info(self):
        return self.Get_info()

    @info.setter
    def info(self, info):
        self.Set_info(info)

    def Get_topology(self):
        # A topology communicator's state says its kind (MPI/topology.py).
        """Get_topology(self)

        Return the type of topology (if any) associated with a communicator.
        """
        return getattr(self._state(), "kind", UNDEFINED)

    @property
    def topology(self):
        return self.Get_topology()

    @property
    def is_topo(self):
        return self.Get_topology() != UNDEFINED

    @classmethod
    def fromhandle(cls, handle):
        """fromhandle(cls, handle)

        Create object from MPI handle.

        An object for ``handle``, of its communicator's own class where that
        is more specific (mpi4py's: a Cartesian communicator's is a Cartcomm).
        """
        own = getattr(_table.get(int(handle)), "cls", cls)
        return Handle.fromhandle.__func__(own if issubclass(own, cls) else cls, handle)

    fromint = f2py = fromhandle

    @classmethod
    def Get_parent(cls):
        """Get_parent(cls)

        The intercommunicator to the ranks that spawned this process (null if none did).
        """
        return _constructors["get_parent"]()

    def Disconnect(self):
        """Disconnect(self)

        Wait for this rank's sends to be delivered, then free.
        """
        self._state()
        buffered.Flush_buffer()
        self._core.flush(None)  # a spawned domain's instance is not the process's own
        self.Free()

    def Free(self):
        """Free(self)

        Free a communicator.
        """
        self._state()
        self._drop_attrs()
        self._drop_errhandler()
        self._release()

    def _predefined_attr(self, keyval):
        """What MPI reports under the predefined keys (as of COMM_WORLD)."""
        return {
            TAG_UB: _TAG_UB,
            HOST: PROC_NULL,
            IO: ANY_SOURCE,
            WTIME_IS_GLOBAL: False,
            UNIVERSE_SIZE: COMM_WORLD.Get_size() if COMM_WORLD else None,
            APPNUM: 0,
            LASTUSEDCODE: last_used_code(),
        }[keyval]

    def Split(self, color=0, key=0):
        """Split(self, color=0, key=0)

        Partition by ``color``, order each part by ``key`` (then rank).
        """
        c = self._core
        color = _check_rank_arg(color, "color")
        key = _check_rank_arg(key, "key")
        if color < 0 and color != UNDEFINED:
            raise MPIException(ERR_ARG, f"invalid color {color}")
        entries = [json.loads(b) for b in c.allgather_bytes(json.dumps([color, key]).encode())]
        # Every rank takes one derivation step; the colour keeps parts apart.
        context = c.next_context(color + 1 if color >= 0 else 0)
        if color == UNDEFINED:
            return COMM_NULL
        members = sorted((k, r) for r, (col, k) in enumerate(entries) if col == color)
        return Intracomm._wrap(c.derive(context, [c.group[r] for _, r in members]))

    def Split_type(self, split_type, key=0, info=None):
        """Split_type(self, split_type, key=0, info=None)

        Split communicator by split type.

        By hardware: ``COMM_TYPE_SHARED`` (and the guided types asking
        for ``mpi_shared_memory``) groups the ranks whose endpoints are on
        the same host; ``COMM_TYPE_HW_UNGUIDED`` does too where that is a
        smaller group, else (as for a resource mpiws does not know) no
        communicator.
        """
        from urllib.parse import urlsplit  # here: imported by few programs, at every rank's start

        c = self._core
        hosts = [urlsplit(u).hostname for u in c.endpoints]
        mine = hosts[c.group[c.rank]]
        same_host = min(r for r, w in enumerate(c.group) if hosts[w] == mine)
        if split_type == COMM_TYPE_SHARED:
            color = same_host
        elif split_type in (COMM_TYPE_HW_GUIDED, COMM_TYPE_RESOURCE_GUIDED):
            asked = info.Get(_HW_RESOURCE) if info else None
            color = same_host if asked == _SHARED_MEMORY else UNDEFINED
        elif split_type == COMM_TYPE_HW_UNGUIDED:
            color = same_host if len({hosts[w] for w in c.group}) > 1 else UNDEFINED
            if color != UNDEFINED and info:
                info.Set(_HW_RESOURCE, _SHARED_MEMORY)
        elif split_type == UNDEFINED:
            color = UNDEFINED
        else:
            raise MPIException(ERR_ARG, f"unsupported split type {split_type}")
        return self.Split(color, key)

    # ---- groups ------------------------------------------------------------

    def Get_group(self):
        """Get_group(self)

        Access the group associated with a communicator.
        """
        c = self._core
        return Group._make(c.group, c.group[c.rank])

    @property
    def group(self):
        return self.Get_group()

    def Create(self, group):
        """A communicator over ``group`` (collective over this communicator;
        COMM_NULL on ranks outside the group)."""
        c = self._core
        members = members_of(group, c.group)
        context = c.next_context(len(members))
        made = c.derive(context, members)
        return COMM_NULL if made is None else Intracomm._wrap(made)

    @classmethod
    def Create_from_group(cls, group, stringtag="org.mpi4py", info=None, errhandler=None):
        """Create_from_group(cls, group, stringtag='org.mpi4py', info=None, errhandler=None)

        Create communicator from group.

        A communicator over ``group``, made by its members alone (MPI 4);
        ``stringtag`` keeps concurrent creations apart.
        """
        world = COMM_WORLD._core
        members = members_of(group, world.group)
        tag = zlib.crc32(str(stringtag).encode()) & 0x7FFFFFFF
        comm = cls._wrap(world.derive(world.group_context(members, tag), members))
        if info:
            comm.Set_info(info)
        return comm

    def Create_group(self, group, tag=0):
        """Create_group(self, group, tag=0)

        A communicator over ``group``, created by its members only.
        """
        c = self._core
        members = members_of(group, c.group)
        if c.group[c.rank] not in members:
            raise MPIException(ERR_GROUP, "Create_group is called by the group's members only")
        return Intracomm._wrap(c.derive(c.group_context(members, tag), members))

    def Abort(self, errorcode=0):
        """Abort(self, errorcode=0)

        Terminate the MPI execution environment.
        """
        raise SystemExit(errorcode or 1)

    # ---- time limits (mpiws) ---------------------------------------------

    def Set_timeout(self, timeout):
        """Set_timeout(self, timeout)

        Default time limit (seconds; None: none) of this communicator's calls.
        """
        self._state().settings.timeout = timeout_.default(timeout)

    def Get_timeout(self):
        """Get_timeout(self)

        Return the time limit of this communicator's operations (mpiws).
        """
        return self._limit(None)

    def _limit(self, timeout):
        return timeout_.resolve(timeout, self._state().settings.timeout)

    # ---- point-to-point: objects -----------------------------------------

    def _isend_obj(self, obj, dest, tag, sync, timeout, schedule=None):
        parts = pickled.dumps(obj)
        core, limit = self._state().core_and_limit(timeout)
        r = core.isend(dest, tag, parts, split=len(parts) > 1, sync=sync, tell_match=events_.tells_match(schedule))
        req = Request(r, deadline=timeout_.deadline(limit))
        return _sent(req, core, dest, tag, sum(memoryview(p).nbytes for p in parts), sync, schedule)

    def _send_obj(self, obj, dest, tag, sync, timeout):
        parts = pickled.dumps(obj)
        self._core.send(dest, tag, parts, len(parts) > 1, sync, self._limit(timeout))

    def send(self, obj, dest, tag=0, timeout=None):
        """send(self, obj, dest, tag=0, timeout=None)

        Send in standard mode.
        """
        self._send_obj(obj, dest, tag, False, timeout)

    def bsend(self, obj, dest, tag=0, timeout=None):
        """bsend(self, obj, dest, tag=0, timeout=None)

        Send in buffered mode.
        """
        self._send_obj(obj, dest, tag, False, timeout)

    def ssend(self, obj, dest, tag=0, timeout=None):
        """ssend(self, obj, dest, tag=0, timeout=None)

        Send in synchronous mode.
        """
        self._send_obj(obj, dest, tag, True, timeout)

    def isend(self, obj, dest, tag=0, timeout=None, schedule=None):
        """isend(self, obj, dest, tag=0, timeout=None, schedule=None)

        Nonblocking send.
        """
        return self._isend_obj(obj, dest, tag, False, timeout, schedule)

    def ibsend(self, obj, dest, tag=0, timeout=None, schedule=None):
        """ibsend(self, obj, dest, tag=0, timeout=None, schedule=None)

        Nonblocking send in buffered mode.
        """
        return self._isend_obj(obj, dest, tag, False, timeout, schedule)

    def issend(self, obj, dest, tag=0, timeout=None, schedule=None):
        """issend(self, obj, dest, tag=0, timeout=None, schedule=None)

        Nonblocking send in synchronous mode.
        """
        return self._isend_obj(obj, dest, tag, True, timeout, schedule)

    def irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, timeout=None, schedule=None):
        """irecv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, timeout=None, schedule=None)

        Nonblocking receive.
        """
        size = None if buf is None else _buffer_length(buf)
        core, limit = self._state().core_and_limit(timeout)
        req = Request(core.irecv(source, tag), _OBJECT, None, size, timeout_.deadline(limit))
        return _posted(req, core, source, tag, schedule)

    def recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None):
        """recv(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None)

        Receive.
        """
        limit = None if buf is None else _buffer_length(buf)
        return received_object(self._core.recv(source, tag, None, self._limit(timeout)), status, limit)

    def sendrecv(
        self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, status=None, timeout=None
    ):
        """sendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, status=None, timeout=None)

        Send and Receive.
        """
        parts = pickled.dumps(sendobj)
        limit = None if recvbuf is None else _buffer_length(recvbuf)
        msg = self._core.sendrecv(dest, sendtag, parts, source, recvtag, None, self._limit(timeout), len(parts) > 1)
        return received_object(msg, status, limit)

    def probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None):
        """probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None)

        Blocking test for a message.
        """
        return self.Probe(source, tag, status, timeout)

    def iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None)

        Nonblocking test for a message.
        """
        return self.Iprobe(source, tag, status)

    # ---- point-to-point: buffers -----------------------------------------

    def _isend_buf(self, buf, dest, tag, sync, timeout, schedule=None):
        view, _, _ = datatype.parse(buf)
        core, limit = self._state().core_and_limit(timeout)
        r = core.isend(dest, tag, [view], sync=sync, tell_match=events_.tells_match(schedule))
        return _sent(Request(r, deadline=timeout_.deadline(limit)), core, dest, tag, view.nbytes, sync, schedule)

    def _send_buf(self, buf, dest, tag, sync, timeout):
        core, limit = self._state().core_and_limit(timeout)
        if not core.send_plain(dest, tag, buf, sync, limit):  # a buffer alone, decided in the core
            core.send(dest, tag, [datatype.parse(buf)[0]], sync=sync, timeout=limit)

    def Send(self, buf, dest, tag=0, timeout=None):
        """Send(self, buf, dest, tag=0, timeout=None)

        Blocking send.
        """
        self._send_buf(buf, dest, tag, False, timeout)

    def Bsend(self, buf, dest, tag=0, timeout=None):
        """Bsend(self, buf, dest, tag=0, timeout=None)

        Blocking send in buffered mode.
        """
        self._send_buf(buf, dest, tag, False, timeout)

    def Rsend(self, buf, dest, tag=0, timeout=None):
        """Rsend(self, buf, dest, tag=0, timeout=None)

        Blocking send in ready mode.
        """
        self._send_buf(buf, dest, tag, False, timeout)

    def Ssend(self, buf, dest, tag=0, timeout=None):
        """Ssend(self, buf, dest, tag=0, timeout=None)

        Blocking send in synchronous mode.
        """
        self._send_buf(buf, dest, tag, True, timeout)

    def Isend(self, buf, dest, tag=0, timeout=None, schedule=None):
        """Isend(self, buf, dest, tag=0, timeout=None, schedule=None)

        Nonblocking send.
        """
        return self._isend_buf(buf, dest, tag, False, timeout, schedule)

    def Ibsend(self, buf, dest, tag=0, timeout=None, schedule=None):
        """Ibsend(self, buf, dest, tag=0, timeout=None, schedule=None)

        Nonblocking send in buffered mode.
        """
        return self._isend_buf(buf, dest, tag, False, timeout, schedule)

    def Irsend(self, buf, dest, tag=0, timeout=None, schedule=None):
        """Irsend(self, buf, dest, tag=0, timeout=None, schedule=None)

        Nonblocking send in ready mode.
        """
        return self._isend_buf(buf, dest, tag, False, timeout, schedule)

    def Issend(self, buf, dest, tag=0, timeout=None, schedule=None):
        """Issend(self, buf, dest, tag=0, timeout=None, schedule=None)

        Nonblocking send in synchronous mode.
        """
        return self._isend_buf(buf, dest, tag, True, timeout, schedule)

    # ---- buffered sends' buffer, per communicator (MPI/buffered.py) ---------

    def Attach_buffer(self, buf):
        """Attach_buffer(self, buf)

        Attach a user-provided buffer for sending in buffered mode.
        """
        buffered.Attach_buffer(buf, ("comm", self.tohandle()))

    def Detach_buffer(self):
        """Detach_buffer(self)

        Remove an existing attached buffer.
        """
        return buffered.Detach_buffer(("comm", self.tohandle()))

    def Flush_buffer(self):
        """Flush_buffer(self)

        Block until all buffered messages have been transmitted.
        """
        buffered.Flush_buffer()

    def Iflush_buffer(self):
        """Iflush_buffer(self)

        Nonblocking flush for buffered messages.
        """
        return buffered.Iflush_buffer()

    # ---- persistent requests (MPI/persistent.py) ----------------------------

    def Send_init(self, buf, dest, tag=0):
        """Send_init(self, buf, dest, tag=0)

        Create a persistent request for a standard send.
        """
        return Prequest._persistent(lambda: self.Isend(buf, dest, tag))

    def Bsend_init(self, buf, dest, tag=0):
        """Bsend_init(self, buf, dest, tag=0)

        Persistent request for a send in buffered mode.
        """
        return Prequest._persistent(lambda: self.Ibsend(buf, dest, tag))

    def Ssend_init(self, buf, dest, tag=0):
        """Ssend_init(self, buf, dest, tag=0)

        Persistent request for a send in synchronous mode.
        """
        return Prequest._persistent(lambda: self.Issend(buf, dest, tag))

    def Rsend_init(self, buf, dest, tag=0):
        """Rsend_init(self, buf, dest, tag=0)

        Persistent request for a send in ready mode.
        """
        return Prequest._persistent(lambda: self.Irsend(buf, dest, tag))

    def Psend_init(self, buf, partitions, dest, tag=0, info=None):
        """Psend_init(self, buf, partitions, dest, tag=0, info=None)

        Create request for a partitioned send operation.
        """
        return Prequest._persistent(_Round(self, buf, partitions, dest, tag, send=True))

    def Precv_init(self, buf, partitions, source=ANY_SOURCE, tag=ANY_TAG, info=None):
        """Precv_init(self, buf, partitions, source=ANY_SOURCE, tag=ANY_TAG, info=None)

        Create request for a partitioned recv operation.
        """
        return Prequest._persistent(_Round(self, buf, partitions, source, tag, send=False))

    def Recv_init(self, buf, source=ANY_SOURCE, tag=ANY_TAG):
        """Recv_init(self, buf, source=ANY_SOURCE, tag=ANY_TAG)

        Create a persistent request for a receive.
        """
        return Prequest._persistent(lambda: self.Irecv(buf, source, tag))

    def Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, timeout=None, schedule=None):
        """Irecv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, timeout=None, schedule=None)

        Nonblocking receive.
        """
        core, limit = self._state().core_and_limit(timeout)
        r = core.irecv_plain(source, tag, buf)  # a buffer alone, decided in the core
        if r is None:
            buf, _, _ = datatype.parse(buf, writable=True)
            r = core.irecv(source, tag, buf)
        return _posted(Request(r, _BUFFER, buf, deadline=timeout_.deadline(limit)), core, source, tag, schedule)

    def Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None):
        """Recv(self, buf, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None)

        Blocking receive.
        """
        core, limit = self._state().core_and_limit(timeout)
        got = core.recv_plain(source, tag, buf, limit)  # a buffer alone, decided in the core
        if got is not None:
            fill(status, *got)
            return
        view, _, _ = datatype.parse(buf, writable=True)
        received_buffer(core.recv(source, tag, view, limit), status, view)

    def Sendrecv(
        self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, status=None, timeout=None
    ):
        # The core's calls directly: this is many solvers' inner loop.
        """Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, status=None, timeout=None)

        Send and receive a message.
        """
        view, _, _ = datatype.parse(recvbuf, writable=True)
        core, limit = self._state().core_and_limit(timeout)
        msg = core.sendrecv(dest, sendtag, [datatype.parse(sendbuf)[0]], source, recvtag, view, limit)
        received_buffer(msg, status, view)

    def Isendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, timeout=None):
        """Isendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, timeout=None)

        Nonblocking send and receive.
        """
        sview = datatype.parse(sendbuf)[0]
        rview = datatype.parse(recvbuf, writable=True)[0]
        send = self._core.isend(dest, sendtag, [sview])
        pair = Pair(send, self._core.irecv(source, recvtag, rview))
        return Request(pair, _BUFFER, rview, deadline=timeout_.deadline(self._limit(timeout)))

    def Isendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, timeout=None):
        """Isendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, timeout=None)

        Send and receive a message.
        """
        view = datatype.parse(buf, writable=True)[0]
        send = self._core.isend(
            dest, sendtag, [bytes(datatype.parse(buf)[0])]
        )  # a copy: the receive overwrites the buffer
        pair = Pair(send, self._core.irecv(source, recvtag, view))
        return Request(pair, _BUFFER, view, deadline=timeout_.deadline(self._limit(timeout)))

    def isendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, timeout=None):
        """isendrecv(self, sendobj, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE, recvtag=ANY_TAG, timeout=None)

        Nonblocking send and receive a general Python object.
        """
        limit = None if recvbuf is None else _buffer_length(recvbuf)
        parts = pickled.dumps(sendobj)
        pair = Pair(self._core.isend(dest, sendtag, parts, split=len(parts) > 1), self._core.irecv(source, recvtag))
        return Request(pair, _OBJECT, None, limit, timeout_.deadline(self._limit(timeout)))

    def Sendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, status=None, timeout=None):
        """Sendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG, status=None, timeout=None)

        Send and receive a message.
        """
        end = timeout_.deadline(self._limit(timeout))
        view, _, _ = datatype.parse(buf, writable=True)
        sreq = Request(self._core.isend(dest, sendtag, [bytes(datatype.parse(buf)[0])]))
        self.Irecv(view, source, recvtag).Wait(status, timeout_.left(end))
        sreq.Wait(None, timeout_.left(end))

    def Probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None):
        """Probe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None, timeout=None)

        Blocking test for a message.
        """
        limit = self._limit(timeout)
        found = self._core.probe(source, tag, limit)
        if found is None:
            raise timeout_.expired(f"probe (after {limit} s)")
        fill(status, *found)
        return True

    def Iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """Iprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None)

        Nonblocking test for a message.
        """
        found = self._core.probe(source, tag, 0.0)
        if found is None:
            return False
        fill(status, *found)
        return True

    # ---- matched probes (MPI/message.py) -----------------------------------

    def mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """mprobe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None)

        Blocking test for a matched message.
        """
        return Message.probe(self, source, tag, status)

    def improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        """improbe(self, source=ANY_SOURCE, tag=ANY_TAG, status=None)

        Nonblocking test for a matched message.
        """
        return Message.iprobe(self, source, tag, status)

    Mprobe = mprobe
    Improbe = improbe

    # ---- message handlers (mpiws) ------------------------------------------

    def on_message(self, handler, source=ANY_SOURCE, tag=ANY_TAG):
        """on_message(self, handler, source=ANY_SOURCE, tag=ANY_TAG)

        Register a handler for arriving messages (mpiws).

        Run ``handler(receipt)`` on the handler thread for each arriving
        message that matches, with no receive posted by the application
        (``receipt.value`` is the object), until ``off_message``.
        """
        if not callable(handler):
            raise TypeError("handler must be callable")
        state = events_.MessageHandler(self, handler, source, tag)
        self._state().settings.handlers.append(state)
        state.arm()

    def off_message(self, handler=None, source=ANY_SOURCE, tag=ANY_TAG):
        """off_message(self, handler=None, source=ANY_SOURCE, tag=ANY_TAG)

        Remove message handlers (mpiws).

        Remove the message handlers registered with these arguments
        (``handler=None``: every handler for that source and tag).
        """
        settings = self._state().settings
        kept = []
        for state in settings.handlers:
            if (handler is None or state.handler is handler) and (state.source, state.tag) == (source, tag):
                state.stop()
            else:
                kept.append(state)
        settings.handlers = kept

    def __repr__(self):
        if not self:
            return f"<{type(self).__name__} null>"
        try:
            c = self._core
        except MPIException:
            return f"<{type(self).__name__} freed>"
        return f"<{type(self).__name__} rank={c.rank} size={c.size}>"


def _async_form(name):
    async def call(self, *args, **kwargs):
        return await getattr(self, name)(*args, **kwargs)

    call.__name__ = "a" + name[1:]
    call.__doc__ = (
        f"{call.__name__}(self, *args, **kwargs)\n\n"
        f"Await ``{name}`` from asyncio code (mpiws).\n\n"
        f"``await comm.{call.__name__}(...)``: ``{name}`` awaited without blocking the event loop.\n"
    )
    return call


for _name in (
    "isend",
    "issend",
    "irecv",
    "ibarrier",
    "ibcast",
    "igather",
    "iscatter",
    "iallgather",
    "ialltoall",
    "ireduce",
    "iallreduce",
    "iscan",
    "iexscan",
):
    setattr(Comm, "a" + _name[1:], _async_form(_name))


def _sent(req, core, dest, tag, size, sync, schedule):
    """Describe a send request for receipts; attach its schedule."""
    return req._describe(tag=tag, dest=dest, source=core.rank, size=size, sync=sync)._schedule(schedule)


def _posted(req, core, source, tag, schedule):
    """Describe a receive request for receipts; attach its schedule."""
    return req._describe(tag=tag, source=source, dest=core.rank)._schedule(schedule)


def _buffer_length(buf):
    """The most bytes an object receive takes: ``buf`` is a size or, as
    mpi4py still accepts with a warning, a buffer (never written to)."""
    if isinstance(buf, int):
        return buf
    warnings.warn("an object receive does not use a buffer: pass its size, or nothing", UserWarning, stacklevel=3)
    return memoryview(buf).nbytes


class Intracomm(Comm):
    """A communicator within one group."""

    __slots__ = ()

    def __new__(cls, comm=None):
        self = super().__new__(cls, comm)
        own = getattr(_table.get(self._h), "cls", None)  # an intercommunicator's is Intercomm
        if own is not None and not issubclass(own, Intracomm):
            raise TypeError("expecting an intracommunicator")
        return self

    def Spawn(self, command, args=None, maxprocs=1, info=None, root=0, errcodes=None):
        """Spawn(self, command, args=None, maxprocs=1, info=None, root=0, errcodes=None)

        Spawn instances of a single MPI application.

        Start ``maxprocs`` processes running ``command args`` (a Python
        program: ``MPI/spawn.py``); the intercommunicator to them.
        """
        self._state()
        inter = _constructors["spawn"](self, command, args, maxprocs, root)
        if errcodes is not None:
            errcodes[:] = [0] * inter.Get_remote_size()  # MPI_SUCCESS for each child, as mpi4py fills the list
        return inter

    def Create_intercomm(self, local_leader, peer_comm, remote_leader, tag=0):
        """Create_intercomm(self, local_leader, peer_comm, remote_leader, tag=0)

        Create intercommunicator.

        An intercommunicator between this group and the remote leader's
        (MPI/intercomm.py); ``peer_comm`` joins the two leaders.
        """
        return _constructors["create_intercomm"](self, local_leader, peer_comm, remote_leader, tag)

    # ---- process topologies (MPI/topology.py, which builds on this class) ---

    def Create_cart(self, dims, periods=None, reorder=False):
        """Create_cart(self, dims, periods=None, reorder=False)

        Create cartesian communicator.
        """
        return _constructors["create_cart"](self, dims, periods, reorder)

    def Create_graph(self, index, edges, reorder=False):
        """Create_graph(self, index, edges, reorder=False)

        Create graph communicator.
        """
        return _constructors["create_graph"](self, index, edges, reorder)

    def Create_dist_graph_adjacent(
        self, sources, destinations, sourceweights=None, destweights=None, info=None, reorder=False
    ):
        """Create_dist_graph_adjacent(self, sources, destinations, sourceweights=None, destweights=None, info=None, reorder=False)

        Create distributed graph communicator.
        """
        return _constructors["create_dist_graph_adjacent"](
            self, sources, destinations, sourceweights, destweights, info, reorder
        )

    def Create_dist_graph(self, sources, degrees, destinations, weights=None, info=None, reorder=False):
        """Create_dist_graph(self, sources, degrees, destinations, weights=None, info=None, reorder=False)

        Create distributed graph communicator.
        """
        return _constructors["create_dist_graph"](self, sources, degrees, destinations, weights, info, reorder)

    def Cart_map(self, dims, periods=None):
        """Cart_map(self, dims, periods=None)

        Determine optimal process placement on a Cartesian topology.
        """
        return _constructors["cart_map"](self, dims, periods)

    def Graph_map(self, index, edges):
        """Graph_map(self, index, edges)

        Determine optimal process placement on a graph topology.
        """
        return _constructors["graph_map"](self, index, edges)


COMM_NULL = predefine(Intracomm(), "COMM_NULL")
COMM_WORLD = predefine(Intracomm._new(_Bound("world", "MPI_COMM_WORLD"), predefined=True), "COMM_WORLD")
COMM_SELF = predefine(Intracomm._new(_Bound("self_comm", "MPI_COMM_SELF"), predefined=True), "COMM_SELF")
