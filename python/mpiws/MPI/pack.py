"""``Datatype.Pack``/``Unpack`` and their external32 forms: a message's
packed bytes into and out of a user buffer at a position. The packing is
the core's (``_core.Layout``); external32 is big-endian, which only the
byte order distinguishes from this machine's packed form for mpiws's
datatypes of one basic type.

Buffers are read by the caller's ``flat(buf, writable=False)`` (their bytes:
``Datatype``'s reading of a buffer), when each is needed."""

import sys

from .exception import ERR_ARG, ERR_TRUNCATE, ERR_TYPE, Exception as MPIException

EXTERNAL32 = "external32"


def _items(dt, nbytes):
    extent = dt.extent
    return nbytes // extent if extent > 0 else 0


def _external(dt, data, datarep):
    """``data`` (packed ``dt`` items) swapped to or from big-endian."""
    if datarep != EXTERNAL32:
        raise MPIException(ERR_ARG, f"unsupported data representation {datarep!r} (only {EXTERNAL32!r})")
    if sys.byteorder == "big" or not data:
        return bytes(data)
    import numpy as np

    code = dt.typecode
    try:
        native = np.frombuffer(data, dtype=np.dtype(code))
    except (TypeError, ValueError):
        raise MPIException(ERR_TYPE, f"external32 of {dt.name}: mpiws swaps datatypes of one basic type only") from None
    return native.byteswap().tobytes()


def pack(dt, flat, inbuf, outbuf, position, datarep=None):
    """Pack all of ``inbuf``'s items of ``dt`` into ``outbuf`` at byte
    ``position``; the position after them."""
    src = flat(inbuf)
    packed = dt._layout.pack(_items(dt, src.nbytes), src, 0)
    if datarep is not None:
        packed = _external(dt, packed, datarep)
    out = flat(outbuf, writable=True)
    end = position + len(packed)
    if position < 0 or end > out.nbytes:
        raise MPIException(ERR_TRUNCATE, f"{len(packed)} packed bytes at position {position} do not fit {out.nbytes}")
    out[position:end] = packed
    return end


def unpack(dt, flat, inbuf, position, outbuf, datarep=None):
    """Fill ``outbuf``'s items of ``dt`` from ``inbuf`` at byte ``position``;
    the position after what was taken."""
    out = flat(outbuf, writable=True)
    count = _items(dt, out.nbytes)
    src = flat(inbuf)
    end = position + count * dt.Get_size()
    if position < 0 or end > src.nbytes:
        raise MPIException(
            ERR_TRUNCATE, f"{count} items need {end - position} packed bytes at position {position} of {src.nbytes}"
        )
    data = src[position:end]
    if datarep is not None:
        data = _external(dt, data, datarep)
    dt._layout.unpack(count, data, out, 0)
    return end


def pack_size(dt, count, datarep=None):
    if datarep is not None and datarep != EXTERNAL32:
        raise MPIException(ERR_ARG, f"unsupported data representation {datarep!r} (only {EXTERNAL32!r})")
    if count < 0:
        raise MPIException(ERR_ARG, f"negative count {count}")
    return count * dt.Get_size()
