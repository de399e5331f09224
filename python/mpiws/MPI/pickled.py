"""Objects on the wire: pickle protocol 5, large contiguous buffers (numpy
arrays, bytes) out of band, so they travel as their own bytes without copies.

Unpickling runs code that the sender chooses, so what an instance may
unpickle is its binding's policy (``mpiws.binding.Bound.loads``): full pickle
for ``mpiws run`` ranks, which are all the user's own (mpi4py's behaviour),
and a restricted unpickler for services of ``mpiws serve``, which serve
senders they do not trust: it builds only builtin values, numpy arrays and
the types the deployer names. Everything is unpickled here, one way.
"""

import io
import pickle as _pickle

from .. import binding
from .memory import buffer

#: Buffers smaller than this stay inside the pickle (``MPI.pickle.THRESHOLD``).
OUT_OF_BAND_FROM = 64 * 1024

#: What a restricted unpickler builds: plain data, and numpy arrays, dtypes
#: and scalars (their reconstructors take only data and these types).
SAFE = frozenset(
    [
        ("builtins", n)
        for n in (
            "int",
            "float",
            "complex",
            "str",
            "bytes",
            "bytearray",
            "list",
            "tuple",
            "dict",
            "set",
            "frozenset",
            "bool",
            "slice",
            "range",
        )
    ]
    + [
        ("collections", "OrderedDict"),
        ("collections", "deque"),
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("decimal", "Decimal"),
        ("fractions", "Fraction"),
    ]
    + [(m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray") for n in ("_reconstruct", "scalar")]
    + [(m, "_frombuffer") for m in ("numpy.core.numeric", "numpy._core.numeric")]
    + [("numpy", "ndarray"), ("numpy", "dtype")]
)


# Pickle's BUILD sets the state of the object below it on the stack: on
# an instance that is its construction, but on a class (a global) it is
# ``setattr(cls, name, value)``, which a sender could use to change an
# allowed class for every later user in the process (``Fraction.__eq__ =
# int``). Immutable types refuse that themselves; for a class that does not
# (Fraction, the deployer's own), the pickle is read through once, without
# running anything, before it loads: no BUILD may have a class as target.

_MARK, _CLASS, _VALUE = object(), object(), object()
#: What these leave on the stack is what they worked on (its kind kept).
_IN_PLACE = frozenset(["BUILD", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"])
_CLASSES = frozenset(["GLOBAL", "STACK_GLOBAL", "EXT1", "EXT2", "EXT4"])


def _builds_on_a_class(data):
    """Does any BUILD in pickle ``data`` set the state of a class?"""
    import pickletools

    stack, memo = [], {}
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name == "BUILD" and len(stack) >= 2 and stack[-2] is _CLASS:
            return True
        if name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else _VALUE
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1] if stack else _VALUE
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(arg, _VALUE))
        elif name == "DUP":
            stack.append(stack[-1] if stack else _VALUE)
        else:
            before = op.stack_before
            target = _VALUE
            if pickletools.markobject in before:
                while stack and stack.pop() is not _MARK:
                    pass
                below = before.index(pickletools.markobject)
            else:
                below = len(before)
            if below:
                target = stack[-below] if len(stack) >= below else _VALUE
                del stack[-below:]
            for kind in op.stack_after:
                if kind is pickletools.markobject:
                    stack.append(_MARK)
                elif name in _CLASSES:
                    stack.append(_CLASS)
                else:
                    stack.append(target if name in _IN_PLACE else _VALUE)
    return False


class Restricted(_pickle.Unpickler):
    """An unpickler that builds only the globals in ``allowed``, and changes no class."""

    def __init__(self, data, buffers, allowed):
        data = _as_bytes(data)  # read twice: by pickletools, and unpickled
        super().__init__(io.BytesIO(data), buffers=buffers)
        self.data, self.allowed, self.checked = data, allowed, False

    def find_class(self, module, name):
        if (module, name) in self.allowed:
            found = super().find_class(module, name)
            if isinstance(found, type) and not self.checked and not _immutable(found):
                self.checked = True
                if _builds_on_a_class(self.data):
                    raise _pickle.UnpicklingError(
                        f"mpiws: refusing a pickle that sets attributes of a class ({module}.{name} is one it names): "
                        "no message changes a class"
                    )
            return found
        raise _pickle.UnpicklingError(
            f"mpiws: refusing to unpickle {module}.{name}: this service only accepts plain data and numpy arrays "
            f"(its deployer can allow the type with --pickle-allow {module}.{name}, or any with --pickle full)"
        )


def _immutable(cls):
    """A type whose attributes cannot be set: a static type (builtins), or
    one flagged immutable (Py_TPFLAGS_HEAPTYPE, Py_TPFLAGS_IMMUTABLETYPE)."""
    heap, immutable = 1 << 9, 1 << 8
    return not cls.__flags__ & heap or bool(cls.__flags__ & immutable)


def policy(kind="restricted", allow=()):
    """How an instance unpickles: None for full pickle, else a function
    ``loads(data, buffers)`` that builds only ``SAFE`` and ``allow``
    (``module.Name`` strings)."""
    if kind == "full":
        return None
    if kind != "restricted":
        raise ValueError(f"pickle policy is 'restricted' or 'full', not {kind!r}")
    extra = set()
    for spec in allow:
        module, dot, name = spec.rpartition(".")
        if not (dot and module and name):
            raise ValueError(f"--pickle-allow takes module.Name, not {spec!r}")
        extra.add((module, name))
    allowed = SAFE | extra
    return lambda data, buffers=(): Restricted(data, buffers, allowed).load()


def _as_bytes(data):
    """A received message's read-only view (``_core.View``) as bytes, for
    what reads only bytes (another serializer's ``loads``, pickletools)."""
    return data if isinstance(data, (bytes, bytearray)) else bytes(data)


def loads_bytes(data, buffers=()):
    """Unpickle ``data`` as the calling thread's instance may."""
    restricted = binding.current().loads
    if restricted is None:
        return _pickle.loads(data, buffers=buffers)
    return restricted(data, buffers)


class _Serializer:
    __slots__ = ("dumps", "loads", "protocol", "threshold")

    def __init__(self, dumps=None, loads=None, protocol=None, threshold=None):
        if protocol is None and dumps is None:
            protocol = _pickle.HIGHEST_PROTOCOL
        elif protocol is not None and protocol < 0:
            protocol = _pickle.HIGHEST_PROTOCOL
        self.dumps, self.loads, self.protocol = dumps, loads, protocol
        self.threshold = OUT_OF_BAND_FROM if threshold is None else threshold


class Pickle:
    """
    Pickle and unpickle Python objects (mpi4py's ``MPI.Pickle``).

    ``MPI.pickle`` serves every object message and collective, and
    ``MPI.pickle.__init__(dumps, loads, protocol, threshold)`` puts another
    serializer in (json, marshal, dill: ``dumps(obj[, protocol])`` and
    ``loads(data)``), as in mpi4py; ``__init__()`` restores pickle, with
    the instance's unpickling policy and large buffers out of band. That
    choice is the calling instance's: services sharing an endpoint process
    keep their own. Any other ``Pickle()`` is independent of it (as
    ``mpiws.util.pkl5.pickle`` is).
    """

    def __init__(self, dumps=None, loads=None, protocol=None, threshold=None):
        s = _Serializer(dumps, loads, protocol, threshold)
        if self is pickle:
            binding.current().serializer = s
        else:
            self._own = s

    def _now(self):
        own = getattr(self, "_own", None)
        if own is not None:
            return own
        b = binding.current()
        if b.serializer is None:
            b.serializer = _Serializer()
        return b.serializer

    def _set_protocol(self, v):
        s = self._now()
        s.protocol = _pickle.HIGHEST_PROTOCOL if v is None and s.dumps is None else v

    def _set_threshold(self, v):
        self._now().threshold = OUT_OF_BAND_FROM if v is None else v

    PROTOCOL = property(lambda self: self._now().protocol, _set_protocol, doc="Protocol version.")
    THRESHOLD = property(lambda self: self._now().threshold, _set_threshold, doc="Out-of-band threshold.")

    def dumps(self, obj):
        """dumps(self, obj)

        Serialize object to pickle data stream.
        """
        s = self._now()
        if s.dumps is None:
            return _pickle.dumps(obj, protocol=s.protocol)
        return s.dumps(obj) if s.protocol is None else s.dumps(obj, s.protocol)

    def loads(self, data, buffers=()):
        """loads(self, data, buffers=())

        Deserialize object from pickle data stream.
        """
        s = self._now()
        if s.loads is None:
            return loads_bytes(data, buffers)
        return s.loads(_as_bytes(data))

    def dumps_oob(self, obj):
        """dumps_oob(self, obj)

        Serialize object to pickle data stream and out-of-band buffers.

        ``(data, buffers)``: the buffers (``MPI.buffer``) are the object's
        contiguous buffers of ``THRESHOLD`` bytes or more (pickle protocol 5
        at least, as in mpi4py).
        """
        s = self._now()
        protocol = max(_pickle.HIGHEST_PROTOCOL if s.protocol is None else s.protocol, 5)
        buffers = []

        def keep_out_of_band(pb):
            try:
                raw = pb.raw()
            except BufferError:  # not contiguous: pickle it in band
                return True
            if raw.nbytes < s.threshold:
                return True
            buffers.append(buffer.frombuffer(raw))
            return False

        if s.dumps is None:
            data = _pickle.dumps(obj, protocol, buffer_callback=keep_out_of_band)
        else:
            data = s.dumps(obj, protocol, buffer_callback=keep_out_of_band)
        return data, buffers

    def loads_oob(self, data, buffers):
        """loads_oob(self, data, buffers)

        Deserialize object from pickle data stream and out-of-band buffers.
        """
        s = self._now()
        if s.loads is None:
            return loads_bytes(data, list(buffers))
        return s.loads(data, buffers=buffers)

    def parts(self, obj):
        """parts(self, obj)

        Return the parts of a message carrying an object.

        The parts of a message carrying ``obj``: the pickle, then each
        out-of-band buffer (pickle protocol 5 only).
        """
        s = self._now()
        if s.dumps is not None or s.protocol < 5:
            return [self.dumps(obj)]
        buffers = []

        def keep_out_of_band(pb):
            try:
                raw = pb.raw()
            except BufferError:  # not contiguous: pickle it in band
                return True
            if raw.nbytes < s.threshold:
                return True
            buffers.append(raw)
            return False

        return [_pickle.dumps(obj, protocol=s.protocol, buffer_callback=keep_out_of_band), *buffers]

    def __repr__(self):
        return "<MPI.pickle>"


#: The instance is made without __init__: binding an instance waits for first use.
pickle = object.__new__(Pickle)


def dumps(obj):
    """The parts of a message carrying ``obj`` (``MPI.pickle``)."""
    return pickle.parts(obj)


def loads(message):
    """The object a received core Message carries."""
    if message.parts:
        parts = message.split()
        return pickle.loads(parts[0], parts[1:])
    if not message.nbytes:
        return None  # an empty message (a buffer send of nothing), as mpi4py has it
    return pickle.loads(message.view())


def items(obj, n):
    """The ``n`` objects a scatter or all-to-all sends, as mpi4py takes
    them: any iterable of ``n``, or None for ``n`` Nones."""
    got = [None] * n if obj is None else list(obj)
    if len(got) != n:
        raise ValueError(f"expecting {n} items, got {len(got)}")
    return got
