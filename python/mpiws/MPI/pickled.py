"""Objects on the wire: pickle protocol 5, large contiguous buffers (numpy
arrays, bytes) out of band, so they travel as their own bytes without copies."""

import pickle

PROTOCOL = 5
#: Buffers smaller than this stay inside the pickle.
OUT_OF_BAND_FROM = 64 * 1024


def dumps(obj):
    """The parts to send: the pickle, then each out-of-band buffer."""
    buffers = []

    def keep_out_of_band(pb):
        try:
            raw = pb.raw()
        except BufferError:  # not contiguous: pickle it in band
            return True
        if raw.nbytes < OUT_OF_BAND_FROM:
            return True
        buffers.append(raw)
        return False

    return [pickle.dumps(obj, protocol=PROTOCOL, buffer_callback=keep_out_of_band), *buffers]


def loads(message):
    """Unpickle a received core Message."""
    if message.parts:
        parts = message.split()
        return pickle.loads(parts[0], buffers=parts[1:])
    return pickle.loads(message.bytes())
