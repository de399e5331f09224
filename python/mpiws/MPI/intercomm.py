"""``Intercomm``: a communicator between two disjoint groups.

Point-to-point ranks name the REMOTE group's processes: the core's
communicator translates them (``derive_inter``), and runs its collectives
(MPI/intercomm_collectives.py) over both groups. Beside it an
intercommunicator keeps a hidden intracommunicator over its local group,
for what MPI's calls need of the local group alone (``Split``'s colours,
``Reduce_scatter``'s counts).

Contexts need no messages beyond the ones MPI's calls make anyway: every
member of both groups derives the next one from the intercommunicator's in
the same call order, as intracommunicators do (``next_context``).
"""

import hashlib
import zlib

from .comm import COMM_NULL, COMM_WORLD, Comm, Intracomm, _check_rank_arg, _Context, constructor
from .exception import ERR_ARG, ERR_COMM, ERR_GROUP, ERR_RANK, Exception as MPIException
from .group import Group
from .handle import _table
from .intercomm_collectives import InterCollectives
from .status import UNDEFINED

_CONTEXT_MASK = (1 << 63) - 1  # the core's collective bit is the top one
_SELF_CONTEXT = 2  # contexts up to this one are the predefined communicators'
# Tags of Create_from_groups' contexts: above any stringtag's crc32, so no
# Create_from_group (MPI/comm.py) over the same processes gets the same.
_LOCAL_TAG, _JOINT_TAG = 1 << 32, 2 << 32


class _Inter(_Context):
    """What an intercommunicator handle names: its core communicator (local
    group, remote group, context) and the hidden local intracommunicator."""

    __slots__ = ("local", "remote")
    cls = None  # Intercomm, once defined (Comm.fromhandle reads it)

    def __init__(self, core, local_core):
        super().__init__(core)
        self.local = Intracomm._wrap(local_core)
        self.remote = tuple(core.remote_group)


def _make(core, local_core):
    """A new Intercomm handle; COMM_NULL if this rank is in neither (None)."""
    if core is None or local_core is None:
        return COMM_NULL
    return Intercomm._new(_Inter(core, local_core))


def _joint_context(a, b):
    """The context both groups reach from their leaders' proposals (order-free)."""
    lo, hi = sorted((a, b))
    digest = hashlib.blake2b(f"{lo}:{hi}".encode(), digest_size=8).digest()
    return max(int.from_bytes(digest, "little") & _CONTEXT_MASK, _SELF_CONTEXT + 1)


def _world_ranks(values, world_size, within=None):
    """The world ranks another group sent, checked: distinct ints of the
    domain (of ``within``, if given), not bools or anything else."""
    if not isinstance(values, (list, tuple)):
        raise MPIException(ERR_COMM, "the remote group sent no list of ranks")
    ranks = []
    for w in values:
        if type(w) is not int or not 0 <= w < world_size or (within is not None and w not in within):
            raise MPIException(ERR_COMM, f"the remote group sent an invalid rank {w!r}")
        ranks.append(w)
    if len(set(ranks)) != len(ranks):
        raise MPIException(ERR_COMM, "the remote group sent a rank twice")
    return ranks


@constructor
def create_intercomm(local_comm, local_leader, peer_comm, remote_leader, tag=0):
    """``Intracomm.Create_intercomm``: the local leader trades its group and
    a context proposal with the remote leader over ``peer_comm`` (``tag``
    keeps that apart, as MPI has it); the local group learns the answer."""
    c = local_comm._core
    local_leader = _check_rank_arg(local_leader, "local_leader")
    if not 0 <= local_leader < c.size:
        raise MPIException(ERR_RANK, f"invalid local leader {local_leader} (communicator size {c.size})")
    proposal = c.next_context(0)  # also the hidden local intracommunicator's
    theirs = None
    if c.rank == local_leader:
        theirs = peer_comm.sendrecv((list(c.group), proposal), remote_leader, tag, None, remote_leader, tag)
    remote, their_proposal = local_comm.bcast(theirs, root=local_leader)
    remote = _world_ranks(remote, len(c.endpoints))
    if not remote or set(remote) & set(c.group):
        raise MPIException(
            ERR_COMM, "the remote group of an intercommunicator must be non-empty and disjoint from the local one"
        )
    if type(their_proposal) is not int or not 0 <= their_proposal < 1 << 64:
        raise MPIException(ERR_COMM, f"the remote group sent an invalid context {their_proposal!r}")
    local = list(c.group)
    return _make(c.derive_inter(_joint_context(proposal, their_proposal), local, remote), c.derive(proposal, local))


class Intercomm(InterCollectives, Comm):
    """
    Intercommunicator.

    A communicator between two groups: ``rank``/``size`` are the local
    group's, point-to-point ranks the remote group's.
    """

    __slots__ = ()
    _is_inter = True

    def __new__(cls, comm=None):
        self = super().__new__(cls, comm)
        if self._h in _table and not isinstance(_table[self._h], _Inter):
            raise TypeError("expecting an intercommunicator")
        return self

    def _inter(self):
        return self._state()

    # ---- the remote group ----------------------------------------------

    def Get_remote_group(self):
        """Get_remote_group(self)

        Access the remote group associated with the inter-communicator.
        """
        c = self._core
        return Group._make(self._inter().remote, c.group[c.rank])

    def Get_remote_size(self):
        """Get_remote_size(self)

        Intercommunicator remote size.
        """
        return len(self._inter().remote)

    @property
    def remote_group(self):
        return self.Get_remote_group()

    @property
    def remote_size(self):
        return self.Get_remote_size()

    # ---- communicator management ----------------------------------------

    def _trade(self, obj):
        """_trade(self, obj)

        Exchange an object with the remote group.

        The remote group's ``obj`` (as its leader gave it), on every rank:
        an allgather, in the collectives' order.
        """
        # This class's allgather, not a subclass's: mpi4py.util.pkl5's
        # Intercomm gathers through a merged communicator, which Merge
        # itself makes (it would wait for itself).
        return Intercomm.allgather(self, obj)[0]

    def _derived(self, salt, local, remote):
        """_derived(self, salt, local, remote)

        Create a new intercommunicator over these groups.

        A new intercommunicator over these groups (world ranks; COMM_NULL
        for a rank outside ``local`` or if a group is empty). Every rank of
        both groups takes the step, so later derivations stay agreed.
        """
        st = self._inter()
        context = self._core.next_context(salt)
        local_context = st.local._core.next_context(salt)
        if not local or not remote:
            return COMM_NULL
        core = self._core.derive_inter(context, list(local), list(remote))
        return _make(core, core and st.local._core.derive(local_context, list(local)))

    def Dup(self, info=None):
        """Dup(self, info=None)

        Duplicate a communicator.
        """
        st = self._inter()
        dup = self._derived(0, self._core.group, st.remote)
        dup._state().info = dict(st.info)
        self._copy_attrs(dup)
        self._copy_errhandler(dup)
        if info:
            dup.Set_info(info)
        return dup

    Clone = Dup

    def Merge(self, high=False):
        """Merge(self, high=False)

        Merge intercommunicator into an intracommunicator.

        An intracommunicator over both groups: the ``high=False`` group's
        ranks first (both alike: the group with the lowest world rank).
        """
        st = self._inter()
        local = list(self._core.group)
        theirs = self._trade(bool(high))
        if type(theirs) is not bool:
            raise MPIException(ERR_COMM, f"the remote group sent {theirs!r} for high")
        low_first = bool(high) < theirs or (bool(high) == theirs and min(local) < min(st.remote))
        members = local + list(st.remote) if low_first else list(st.remote) + local
        return Intracomm._wrap(self._core.derive(self._core.next_context(0), members))

    def Split(self, color=0, key=0):
        """Split(self, color=0, key=0)

        Split communicator by color and key.

        Each colour's local members (by key, then rank) with the remote
        group's members of that colour; COMM_NULL where either is empty.
        """
        color = _check_rank_arg(color, "color")
        key = _check_rank_arg(key, "key")
        if color < 0 and color != UNDEFINED:
            raise MPIException(ERR_ARG, f"invalid color {color}")
        st = self._inter()
        entries = st.local.allgather((color, key))
        theirs = Intercomm.allgather(self, (color, key))  # this class's, as in _trade
        if (
            not isinstance(theirs, list)
            or len(theirs) != len(st.remote)
            or not all(isinstance(e, tuple) and len(e) == 2 and all(type(v) is int for v in e) for e in theirs)
        ):
            raise MPIException(ERR_COMM, "the remote group sent no (color, key) per rank")
        if color == UNDEFINED:
            return self._derived(0, [], [])

        def members(entries, ranks):
            return [ranks[r] for _, r in sorted((k, r) for r, (col, k) in enumerate(entries) if col == color)]

        return self._derived(color + 1, members(entries, self._core.group), members(theirs, st.remote))

    def Create(self, group):
        """Create(self, group)

        Create communicator from group.

        An intercommunicator between ``group`` (of the local group) and the
        group the remote side names; COMM_NULL outside them or if one is empty.
        """
        st = self._inter()
        if not isinstance(group, Group):
            raise TypeError(f"expected an MPI.Group, got {type(group).__name__}")
        members = list(group._ranks)
        if any(w not in self._core.group for w in members):
            raise MPIException(ERR_GROUP, "Create takes a group of the local group's processes")
        theirs = _world_ranks(self._trade(members), len(self._core.endpoints), st.remote)
        return self._derived(1, members, theirs)

    def Create_group(self, group, tag=0):
        """Create_group(self, group, tag=0)

        Create communicator from group.
        """
        self._state()
        raise MPIException(ERR_COMM, "Create_group takes an intracommunicator")

    @classmethod
    def Create_from_groups(
        cls,
        local_group,
        local_leader=0,
        remote_group=None,
        remote_leader=0,
        stringtag="org.mpi4py",
        info=None,
        errhandler=None,
    ):
        """Create_from_groups(cls, local_group, local_leader=0, remote_group=None, remote_leader=0, stringtag='org.mpi4py', info=None, errhandler=None)

        Create communicator from group.

        An intercommunicator made by the members of both groups alone (MPI 4):
        each knows both groups, so the context follows from them and ``stringtag``.
        """
        for g in (local_group, remote_group):
            if not isinstance(g, Group):
                raise TypeError(f"expected an MPI.Group, got {type(g).__name__}")
        local, remote = list(local_group._ranks), list(remote_group._ranks)
        if not local or not remote or set(local) & set(remote):
            raise MPIException(ERR_GROUP, "Create_from_groups takes two disjoint, non-empty groups")
        for leader, g in ((local_leader, local), (remote_leader, remote)):
            if not 0 <= _check_rank_arg(leader, "leader") < len(g):
                raise MPIException(ERR_RANK, f"invalid leader {leader} (group size {len(g)})")
        world = COMM_WORLD._core
        tag = zlib.crc32(str(stringtag).encode()) & 0x7FFFFFFF
        first, second = sorted((local, remote))
        core = world.derive_inter(world.group_context(first + second, tag | _JOINT_TAG), local, remote)
        if core is None:
            raise MPIException(ERR_GROUP, "Create_from_groups is called by the local group's members")
        comm = _make(core, world.derive(world.group_context(local, tag | _LOCAL_TAG), local))
        if info:
            comm.Set_info(info)
        if errhandler is not None:
            comm.Set_errhandler(errhandler)
        return comm

    def Free(self):
        """Free(self)

        Free a communicator.

        Free the handle and the hidden local intracommunicator.
        """
        st = self._inter()
        super().Free()
        st.local._release()


_Inter.cls = Intercomm
