"""Attribute caching: a program's own values kept on communicators (and,
as they become handles, datatypes and windows), as MPI's keyvals do.

``Create_keyval(copy_fn, delete_fn)`` makes a key; ``Set_attr``,
``Get_attr``, ``Delete_attr`` keep values under it on one object;
``Free_keyval`` retires it. ``copy_fn`` decides what a duplicate gets
(None/False: nothing, True: the same value, a function ``(obj, keyval,
value)``: what it returns, unless ``NotImplemented``); ``delete_fn(obj,
keyval, value)`` runs when a value goes (deleted, replaced, its object
freed). An exception in either becomes ``MPI.Exception(ERR_OTHER)``, its
traceback printed. The predefined keys (``TAG_UB``, ...) report what MPI
reports about a communicator.
"""

import itertools
import traceback

from .exception import ERR_KEYVAL, ERR_OTHER, Exception as MPIException
from .handle import on_forget

KEYVAL_INVALID = 0x24000000
# MPICH's numbers for the predefined keys.
TAG_UB, HOST, IO, WTIME_IS_GLOBAL, UNIVERSE_SIZE, LASTUSEDCODE, APPNUM = (
    0x64400001,
    0x64400003,
    0x64400005,
    0x64400007,
    0x64400009,
    0x6440000B,
    0x6440000D,
)
PREDEFINED = frozenset((TAG_UB, HOST, IO, WTIME_IS_GLOBAL, UNIVERSE_SIZE, LASTUSEDCODE, APPNUM))

#: Each live key's (copy_fn, delete_fn), by key.
_keyvals = {}
_next = itertools.count(1)
#: Values by object handle number, then key.
_values = {}
# An instance's communicators, forgotten at its end (`handle.owned`), take their values along.
on_forget(lambda number: _values.pop(number, None))


def _call(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - reported as MPI reports a failed callback
        traceback.print_exc()
        raise MPIException(
            ERR_OTHER, f"attribute callback {getattr(fn, '__name__', fn)!r} raised {type(e).__name__}: {e}"
        ) from e


def _key(keyval):
    if keyval not in _keyvals:
        raise MPIException(ERR_KEYVAL, f"invalid keyval {keyval}")
    return _keyvals[keyval]


class Attributes:
    """Mixin for handle kinds that cache attributes (keyed by handle number)."""

    __slots__ = ()

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        keyval = next(_next)
        _keyvals[keyval] = (copy_fn, delete_fn)
        return keyval

    @classmethod
    def Free_keyval(cls, keyval):
        _key(keyval)
        del _keyvals[keyval]
        return KEYVAL_INVALID

    def Set_attr(self, keyval, attrval):
        _, delete_fn = _key(keyval)
        self._state()
        mine = _values.setdefault(self._h, {})
        if keyval in mine and delete_fn:
            _call(delete_fn, self, keyval, mine[keyval])
        mine[keyval] = attrval

    def Get_attr(self, keyval):
        self._state()
        if keyval in PREDEFINED:
            return self._predefined_attr(keyval)
        _key(keyval)
        return _values.get(self._h, {}).get(keyval)

    def Delete_attr(self, keyval):
        _, delete_fn = _keyvals.get(keyval, (None, None))
        self._state()
        mine = _values.get(self._h, {})
        if keyval not in mine:
            raise MPIException(ERR_KEYVAL, f"no attribute under keyval {keyval}")
        value = mine.pop(keyval)
        if delete_fn:
            _call(delete_fn, self, keyval, value)

    def _predefined_attr(self, keyval):
        return None

    def _copy_attrs(self, new):
        """Give ``new`` (a duplicate of this object) what each key's copy_fn says."""
        for keyval, value in list(_values.get(self._h, {}).items()):
            copy_fn, _ = _keyvals.get(keyval, (None, None))
            if copy_fn is True:
                copied = value
            elif not copy_fn:
                continue
            else:
                copied = _call(copy_fn, self, keyval, value)
                if copied is NotImplemented:
                    continue
            _values.setdefault(new._h, {})[keyval] = copied

    def _drop_attrs(self):
        """This object is being freed: each value's delete_fn, then none."""
        for keyval, value in list(_values.pop(self._h, {}).items()):
            _, delete_fn = _keyvals.get(keyval, (None, None))
            if delete_fn:
                _call(delete_fn, self, keyval, value)
