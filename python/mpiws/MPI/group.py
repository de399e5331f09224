"""``MPI.Group``: an ordered set of the domain's processes (world ranks), a handle."""

from .exception import ERR_ARG, ERR_GROUP, ERR_RANK, Exception as MPIException
from .handle import Handle, _table, predefine
from .status import UNDEFINED

PROC_NULL = -1
IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3


class _Members:
    """What a group handle names: world ranks in order, and the caller's."""

    __slots__ = ("ranks", "me")

    def __init__(self, ranks, me):
        self.ranks, self.me = tuple(ranks), me


class Group(Handle):
    """
    Group of processes.
    """

    __slots__ = ()
    _invalid = ERR_GROUP

    @classmethod
    def _make(cls, ranks, me):
        """A new group of these world ranks, seen by world rank ``me``."""
        return cls._new(_Members(ranks, me))

    @property
    def _ranks(self):
        return self._state().ranks

    @property
    def _me(self):
        return self._state().me

    def Get_size(self):
        """Get_size(self)

        Return the number of processes in a group.
        """
        return len(self._ranks)

    def Get_rank(self):
        """Get_rank(self)

        Return the rank of this process in a group.
        """
        try:
            return self._ranks.index(self._me)
        except ValueError:
            return UNDEFINED

    @property
    def size(self):
        return self.Get_size()

    @property
    def rank(self):
        return self.Get_rank()

    def _checked(self, ranks):
        ranks = list(ranks)
        for r in ranks:
            if not isinstance(r, int) or not 0 <= r < len(self._ranks):
                raise MPIException(ERR_RANK, f"rank {r} is not in a group of {len(self._ranks)}")
        if len(set(ranks)) != len(ranks):
            raise MPIException(ERR_RANK, f"ranks repeat: {ranks}")
        return ranks

    def Incl(self, ranks):
        """Incl(self, ranks)

        Create a new group by including listed members.
        """
        return Group._make([self._ranks[r] for r in self._checked(ranks)], self._me)

    def Excl(self, ranks):
        """Excl(self, ranks)

        Create a new group by excluding listed members.
        """
        out = set(self._checked(ranks))
        return Group._make([w for r, w in enumerate(self._ranks) if r not in out], self._me)

    def Range_incl(self, ranks):
        """Range_incl(self, ranks)

        Create a new group by including ranges of members.
        """
        return self.Incl(
            [r for first, last, stride in ranks for r in range(first, last + (1 if stride > 0 else -1), stride)]
        )

    def Range_excl(self, ranks):
        """Range_excl(self, ranks)

        Create a new group by excluding ranges of members.
        """
        return self.Excl(
            [r for first, last, stride in ranks for r in range(first, last + (1 if stride > 0 else -1), stride)]
        )

    def Translate_ranks(self, ranks=None, group=None):
        """Translate_ranks(self, ranks=None, group=None)

        Translate ranks in a group to those in another group.

        The rank in ``group`` of each of ``ranks`` (of this group); UNDEFINED
        where a process is not in ``group``. Without ``group``: world ranks.
        """
        ranks = range(len(self._ranks)) if ranks is None else ranks
        out = []
        for r in ranks:
            if r == PROC_NULL:
                out.append(PROC_NULL)
                continue
            w = self._ranks[self._checked([r])[0]]
            if group is None:
                out.append(w)
            else:
                out.append(group._ranks.index(w) if w in group._ranks else UNDEFINED)
        return out

    def Compare(self, group):
        """Compare(self, group)

        Compare two groups.
        """
        if self._ranks == group._ranks:
            return IDENT
        if sorted(self._ranks) == sorted(group._ranks):
            return SIMILAR
        return UNEQUAL

    @classmethod
    def Union(cls, group1, group2):
        """Union(cls, group1, group2)

        Create a new group from the union of two existing groups.
        """
        return cls._make(group1._ranks + tuple(w for w in group2._ranks if w not in group1._ranks), group1._me)

    @classmethod
    def Intersection(cls, group1, group2):
        """Intersection(cls, group1, group2)

        Create a new group from the intersection of two existing groups.
        """
        return cls._make([w for w in group1._ranks if w in group2._ranks], group1._me)

    @classmethod
    def Difference(cls, group1, group2):
        """Difference(cls, group1, group2)

        Create a new group from the difference of two existing groups.
        """
        return cls._make([w for w in group1._ranks if w not in group2._ranks], group1._me)

    def Dup(self):
        """Dup(self)

        Duplicate a group.
        """
        state = self._state()
        return type(self)._new(_Members(state.ranks, state.me))

    def Free(self):
        """Free(self)

        Free a group.
        """
        self._release()

    def __repr__(self):
        if not self:
            return "<Group null>"
        return f"<Group {list(self._ranks)}>" if self._h in _table else "<Group freed>"


GROUP_NULL = predefine(Group(), "GROUP_NULL")
GROUP_EMPTY = predefine(Group._new(_Members((), None), predefined=True), "GROUP_EMPTY")


def members_of(group, parent_ranks):
    """``group``'s world ranks, which must all belong to the parent communicator."""
    if not isinstance(group, Group):
        raise TypeError(f"expected an MPI.Group, got {type(group).__name__}")
    missing = [w for w in group._ranks if w not in parent_ranks]
    if missing:
        raise MPIException(ERR_GROUP, f"processes {missing} are not in the communicator")
    if not group._ranks:
        raise MPIException(ERR_ARG, "empty group")
    return list(group._ranks)
