"""MPI handles as mpi4py's object model has them.

Every handle class (``Info``, ``Comm``, ``Group`` so far; the other kinds
move onto it) is a thin Python object holding an integer handle. Two objects are equal when they are
of the same kind and hold the same handle; ``cls()`` is the kind's null
handle, ``cls(other)`` another object for the same handle. What a handle
names lives in one table, by handle number, until ``Free`` removes it there
and nulls the object it was called on, as in MPI (and mpi4py: a handle no
Python object refers to any more is not freed by itself). Predefined handles
(``INFO_NULL``, ``INFO_ENV``, ...) pickle as themselves; others as a new
handle of the same contents (``_rebuild``). Handles are unhashable and
unordered; ``tohandle``/``fromhandle``, ``toint``/``fromint`` and
``py2f``/``f2py`` give and take the number.
"""

import contextlib
import itertools
import threading

from .exception import ERR_ARG, Exception as MPIException

#: What each live handle names, by number (0: the null handle of every kind).
_table = {}
_numbers = itertools.count(1)
#: Handle numbers of predefined objects (never freed), and those objects.
_predefined = {}
#: Per thread: the handles made on it while ``owned`` lasts.
_made = threading.local()
#: What else is kept by handle number (attributes), told when ``owned`` forgets one.
_forgetters = []


def on_forget(fn):
    """Call ``fn(number)`` for each handle number ``owned`` forgets."""
    _forgetters.append(fn)


@contextlib.contextmanager
def owned():
    """Handles made on this thread meanwhile are forgotten at the end if
    they were not freed: an instance an endpoint runs on a thread leaves
    no communicator (and through it its binding and messages) behind."""
    made = _made.numbers = []
    try:
        yield
    finally:
        _made.numbers = None
        for number in made:
            if number not in _predefined:
                _table.pop(number, None)
                for forget in _forgetters:
                    forget(number)


class Handle:
    __slots__ = ("_h", "__weakref__")

    def __new__(cls, other=None):
        self = object.__new__(cls)
        if other is None:
            self._h = 0
        elif isinstance(other, Handle) and _kind_of(other) is _kind_of(self):
            self._h = other._h
        else:
            raise TypeError(f"expected {_kind_of(self).__name__}, got {type(other).__name__}")
        return self

    # -- made from a state ---------------------------------------------------

    @classmethod
    def _new(cls, state, predefined=False):
        """A new handle naming ``state``."""
        self = object.__new__(cls)
        self._h = next(_numbers)
        _table[self._h] = state
        made = getattr(_made, "numbers", None)
        if made is not None:
            made.append(self._h)
        if predefined:
            _predefined[self._h] = self
        return self

    def _state(self):
        """What this handle names; an MPI error for a null or freed one."""
        try:
            return _table[self._h]
        except KeyError:
            raise MPIException(self._invalid, f"invalid {_kind_of(self).__name__} handle (null or freed)") from None

    def _release(self):
        """Forget what this handle names (MPI's free); null this object."""
        if self._h in _predefined:
            raise MPIException(self._invalid, f"cannot free a predefined {_kind_of(self).__name__}")
        self._state()
        del _table[self._h]
        self._h = 0

    #: The error class of a bad handle of this kind.
    _invalid = ERR_ARG

    def _is_predefined(self):
        return self._h in _predefined

    def free(self):
        """mpi4py's safe free: a no-op on null and predefined handles (other
        objects for a predefined handle become null), else ``Free``."""
        if not self._h:
            return
        if self._h in _predefined:
            if _predefined[self._h] is not self:
                self._h = 0
            return
        if self._h in _table:
            self._release()
        else:
            self._h = 0

    # -- the object model ----------------------------------------------------

    def __eq__(self, other):
        if not isinstance(other, Handle) or _kind_of(other) is not _kind_of(self):
            return NotImplemented
        return self._h == other._h

    def __ne__(self, other):
        if not isinstance(other, Handle) or _kind_of(other) is not _kind_of(self):
            return NotImplemented
        return self._h != other._h

    __hash__ = None

    def __bool__(self):
        return self._h != 0

    @property
    def handle(self):
        return self._h

    def tohandle(self):
        return self._h

    @classmethod
    def fromhandle(cls, handle):
        self = object.__new__(cls)
        self._h = int(handle)
        return self

    toint = tohandle
    fromint = fromhandle
    py2f = tohandle
    f2py = fromhandle

    def __reduce__(self):
        if self._is_constant():
            return _constants[id(self)][1]
        if not self._h:
            return (type(self), ())
        if self._h in _predefined:  # another object for a predefined handle: one again
            return (type(self), (_predefined[self._h],))
        return self._rebuild()

    def _rebuild(self):
        """(callable, args) making a new handle with this one's contents;
        a kind whose handles cannot cross processes (a communicator, a
        group: they name this process's state) refuses, as mpi4py does."""
        raise ValueError(f"cannot pickle {type(self).__name__} handles but the predefined ones")

    def __copy__(self):
        if self._is_constant():
            return self
        make, args = self.__reduce__()
        return make(*args)

    def __deepcopy__(self, memo):
        return self.__copy__()

    def _is_constant(self):
        return _constants.get(id(self), (None,))[0] is self


class Named:
    """Mixin for handle kinds with a print name, kept in what the handle
    names (its state's ``name``); ``_null_name`` is a null handle's."""

    __slots__ = ()
    _null_name = ""

    def Get_name(self):
        """Get_name(self)

        Get the print name for this object.
        """
        return self._state().name if self else self._null_name

    def Set_name(self, name):
        """Set_name(self, name)

        Set the print name for this object.
        """
        self._state().name = str(name)

    @property
    def name(self):
        return self.Get_name()

    @name.setter
    def name(self, value):
        self.Set_name(value)


#: Predefined objects (null ones too) by identity, with their names: they
#: pickle and copy as themselves.
_constants = {}


def _kind_of(obj_or_cls):
    """The kind of a handle: the class right below ``Handle`` in its ancestry
    (``Comm`` for an ``Intracomm`` or a user's subclass): handles of one kind
    compare with each other."""
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    kind = _kinds.get(cls)
    if kind is None:
        kind = _kinds[cls] = next(c for c in cls.__mro__ if Handle in c.__bases__)
    return kind


#: ``_kind_of`` by class (handles are compared often: datatype decoding).
_kinds = {}


def predefine(obj, name):
    """Make ``obj`` (null, or from ``_new(..., predefined=True)``) the
    predefined handle ``name`` of module ``mpiws.MPI``."""
    _constants[id(obj)] = (obj, name)
    return obj
