"""Two core requests as one (``Isendrecv``): done when both are; its
outcome is the receive's, once the send completed too (a failed send
raises its error), so the send buffer is free when the pair is."""

import time


class Pair:
    __slots__ = ("send", "recv")

    def __init__(self, send, recv):
        self.send, self.recv = send, recv

    def done(self):
        return self.send.done() and self.recv.done()

    def waitable(self):
        """The core request to wait for next (``_core.wait_any``)."""
        return self.recv if self.send.done() else self.send

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        return self.send.wait(timeout) and self.recv.wait(None if end is None else max(0.0, end - time.monotonic()))

    def take(self):
        self.send.take()
        return self.recv.take()

    def peek(self):
        return self.recv.peek() if self.send.done() else None

    def cancel(self):
        return self.recv.cancel()

    def withdraw(self):
        return self.recv.withdraw()
