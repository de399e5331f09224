"""A map's progress: a bar that advances as its tasks finish (off by default).

``map(..., progress=True)`` draws tqdm's bar when tqdm is installed, else a
line on standard error; ``progress=`` a tqdm-like class or factory (called
with ``total=`` and ``unit=``, giving an object with ``update(n)`` and
``close()``) draws that. The total is known when every iterable has a length.
"""

import sys
import threading
import time


class LineBar:
    """tqdm's ``update``/``close`` as one line on a stream, redrawn at most 5 times a second."""

    def __init__(self, total=None, unit="task", file=None):
        self.total, self.unit = total, unit
        self.file = file or sys.stderr
        self.n = 0
        self.start = self.shown = time.monotonic()
        self.lock = threading.Lock()

    def update(self, n=1):
        with self.lock:
            self.n += n
            now = time.monotonic()
            if now - self.shown >= 0.2:
                self.shown = now
                self._draw(now, "\r")

    def close(self):
        with self.lock:
            self._draw(time.monotonic(), "\r", "\n")

    def _draw(self, now, head, tail=""):
        rate = self.n / max(now - self.start, 1e-9)
        of = f"/{self.total}" if self.total is not None else ""
        self.file.write(f"{head}{self.n}{of} {self.unit}s, {rate:.0f} {self.unit}s/s{tail}")
        self.file.flush()


def bar(progress, total):
    """The bar ``progress`` asks for, or None."""
    if not progress:
        return None
    if progress is True:
        try:
            from tqdm.auto import tqdm  # noqa: PLC0415 (optional)
        except ImportError:
            return LineBar(total)
        return tqdm(total=total, unit="task")
    if not callable(progress):
        raise TypeError(f"progress must be a bool or a tqdm-like class, got {progress!r}")
    return progress(total=total, unit="task")


def total_of(*iterables):
    """How many calls a map over ``iterables`` makes, if they have lengths."""
    try:
        return min(len(it) for it in iterables) if iterables else None
    except TypeError:
        return None
