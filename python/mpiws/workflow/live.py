"""A run shown on its dashboard (``mpiws.dashboard``): its record
(``Record.live``) published as run ``NAME`` of kind "workflow" when it
starts, when a step's state changes (at most ``1 / INTERVAL`` times a
second: changes meanwhile go out together, on the next turn), and once
more when it ends, done or failed."""

import threading
from contextlib import contextmanager

#: Seconds between two publications, at least: about 5 a second.
INTERVAL = 0.2


class Live:
    def __init__(self, board, record):
        self.board, self.record = board, record
        self.changed = threading.Event()
        self.ending = threading.Event()
        self.thread = threading.Thread(target=self._publish_changes, name="mpiws-wf-dashboard", daemon=True)
        self.publish()  # every step waiting, before any starts
        record.on_change = self.changed.set  # from the threads that report units: they only wake this one
        self.thread.start()

    def publish(self, ended=False):
        self.board.publish(self.record.wf.name, "workflow", self.record.live(ended))

    def _publish_changes(self):
        while True:
            self.changed.wait()
            if self.ending.is_set():
                return
            self.changed.clear()
            self.publish()
            self.ending.wait(INTERVAL)  # the throttle; the run's end does not wait for it

    def end(self):
        """The last publication: the run's final state."""
        self.record.on_change = None
        self.ending.set()
        self.changed.set()
        self.thread.join()
        self.publish(ended=True)


@contextmanager
def shown(board, record):
    """``record``'s run shown on ``board`` (an open ``mpiws.dashboard.Board``; None: none) while it goes."""
    if board is None:
        yield
        return
    live = Live(board, record)
    try:
        yield
    finally:
        live.end()
