"""``Info``: (key, value) hints, as MPI and mpi4py have them: the MPI calls
(``Create``, ``Set``, ``Get``, ``Delete``, ``Get_nkeys``, ``Get_nthkey``,
``Dup``, ``Free``) and mpi4py's mapping methods. ``INFO_ENV`` says how this
process was started."""

import os
import sys

from .exception import ERR_ARG, ERR_INFO, ERR_INFO_KEY, ERR_INFO_NOKEY, ERR_INFO_VALUE, Exception as MPIException
from .handle import Handle, predefine

#: MPI_MAX_INFO_KEY and MPI_MAX_INFO_VAL (the terminating NUL excluded).
MAX_INFO_KEY = 255
MAX_INFO_VAL = 1023


def _str(what, value, limit, error):
    if not isinstance(value, str):
        raise TypeError(f"info {what} must be str, not {type(value).__name__}")
    if not value or len(value) > limit:
        raise MPIException(error, f"info {what} must be 1-{limit} characters, got {len(value)}")
    return value


class Info(Handle):
    """
    Info object.
    """

    __slots__ = ()
    _invalid = ERR_INFO

    @classmethod
    def Create(cls, items=None):
        """Create(cls, items=None)

        A new info object, with ``items`` (an info, a mapping, or (key, value) pairs).
        """
        info = cls._new({})
        if items is not None:
            try:
                info.update(items)
            except Exception:
                info._release()
                raise
        return info

    @classmethod
    def Create_env(cls, args=None):
        """Create_env(cls, args=None)

        An info object saying how a process started with ``args`` (this one's if None) is run.
        """
        if args is not None and not isinstance(args, (str, list, tuple)):
            raise TypeError(f"args must be a str or a sequence of str, not {type(args).__name__}")
        return cls._new(_environment(args))

    def Free(self):
        """Free(self)

        Free an info object.
        """
        self._release()

    def Dup(self):
        """Dup(self)

        Duplicate an existing info object.
        """
        return type(self)._new(dict(self._state()))

    def Get(self, key):
        """Get(self, key)

        The value of ``key``, or None.
        """
        return self._state().get(_str("key", key, MAX_INFO_KEY, ERR_INFO_KEY))

    def Set(self, key, value):
        """Set(self, key, value)

        Store a value associated with a key.
        """
        self._state()[_str("key", key, MAX_INFO_KEY, ERR_INFO_KEY)] = _str("value", value, MAX_INFO_VAL, ERR_INFO_VALUE)

    def Delete(self, key):
        """Delete(self, key)

        Remove a (key, value) pair from info.
        """
        state = self._state()
        key = _str("key", key, MAX_INFO_KEY, ERR_INFO_KEY)
        if key not in state:
            raise MPIException(ERR_INFO_NOKEY, f"no info key {key!r}")
        del state[key]

    def Get_nkeys(self):
        """Get_nkeys(self)

        Return the number of currently defined keys in info.
        """
        return len(self._state())

    def Get_nthkey(self, n):
        """Get_nthkey(self, n)

        Return the *n*-th defined key in info.
        """
        keys = list(self._state())
        if not 0 <= n < len(keys):
            raise MPIException(ERR_ARG, f"info key index {n} out of range (0-{len(keys) - 1})")
        return keys[n]

    # -- mpi4py's mapping interface (a null info is empty and read-only) -----

    def _items(self):
        return self._state() if self else {}

    def __len__(self):
        return len(self._items())

    def __contains__(self, key):
        return key in self._items()

    def __iter__(self):
        return iter(list(self._items()))

    def __getitem__(self, key):
        items = self._items()
        if key not in items:
            raise KeyError(key)
        return items[key]

    def __setitem__(self, key, value):
        if not self:
            raise KeyError(key)
        self.Set(key, value)

    def __delitem__(self, key):
        if not self or key not in self._items():
            raise KeyError(key)
        self.Delete(key)

    def get(self, key, default=None):
        """get(self, key, default=None)

        Retrieve value by key.
        """
        return self._items().get(key, default)

    def keys(self):
        """keys(self)

        Return list of keys.
        """
        return list(self._items())

    def values(self):
        """values(self)

        Return list of values.
        """
        return list(self._items().values())

    def items(self):
        """items(self)

        Return list of items.
        """
        return list(self._items().items())

    def copy(self):
        """copy(self)

        Copy contents.
        """
        return self.Dup() if self else type(self)()

    def clear(self):
        """clear(self)

        Clear contents.
        """
        if self:
            self._state().clear()

    def update(self, other=(), **kwds):
        """update(self, other=(), **kwds)

        Update contents.
        """
        if not self:
            raise KeyError("update on a null info")
        if isinstance(other, Info):
            other = other.items()
        elif hasattr(other, "keys"):
            other = [(k, other[k]) for k in other.keys()]
        elif isinstance(other, (str, bytes)) or not hasattr(other, "__iter__"):
            raise TypeError(f"expected an info, a mapping or (key, value) pairs, not {type(other).__name__}")
        for key, value in list(other) + list(kwds.items()):
            self.Set(key, value)

    def pop(self, key, *default):
        """pop(self, key, *default)

        Pop value by key.
        """
        items = self._items()
        if key in items and self:
            value = items[key]
            self.Delete(key)
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self):
        """popitem(self)

        Pop first item.
        """
        items = self._items()
        if not self or not items:
            raise KeyError("popitem on an empty info")
        key = next(reversed(items))
        value = items[key]
        self.Delete(key)
        return key, value

    def _rebuild(self):
        return (_rebuild, (type(self), self.items()))


def _rebuild(cls, items):
    return cls.Create(items)


def _environment(args=None):
    """What MPI_INFO_ENV holds: how the process was started."""
    from .. import _core

    if args is None:
        argv = list(sys.argv)
    elif isinstance(args, str):
        argv = [args]
    else:
        argv = [str(a) for a in args]
    env = {
        "command": argv[0] if argv else sys.executable,
        "argv": " ".join(argv[1:]),
        "maxprocs": os.environ.get("MPIWS_SIZE", "1"),
        "soft": "",
        "host": os.uname().nodename,
        "arch": os.uname().machine,
        "wdir": os.getcwd(),
        "file": "",
        "thread_level": "MPI_THREAD_MULTIPLE",
        "mpiws_version": _core.VERSION,
    }
    return {k: v for k, v in env.items() if v}


INFO_NULL = predefine(Info(), "INFO_NULL")
INFO_ENV = predefine(Info._new(_environment(), predefined=True), "INFO_ENV")
