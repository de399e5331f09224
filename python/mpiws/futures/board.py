"""An executor's farm on its run's dashboard: ``MPIPoolExecutor(dashboard=...)``
(``mpiws.dashboard``).

While a board is open, a daemon thread looks at the farm's ``farm.Tally``
once a second and publishes its document, as run ``pool`` (``pool-N``
for the N-th executor shown in this process) of kind "farm", when a
figure changed; the executor's shutdown publishes the last one ("shut
down") and closes a board opened for it. With no board there is no thread
and no document: the tally's additions are the whole cost.

Workers on endpoints (``endpoints.Link``) are each a domain of two ranks:
the board watches each as it joins. Spawned workers' domain is the MPI
layer's own, which does not say its token: not watched.
"""

import collections
import itertools
import threading
import time
import weakref

from ..dashboard import Board, open_board

#: Seconds between two looks at the figures.
PERIOD = 1.0

#: ``tasks_per_second`` is over the last WINDOW seconds (a sliding window of the looks).
WINDOW = 5.0

_shown = itertools.count(1)  # the executors shown in this process, to name their runs


def asked(text):
    """What ``MPIWS_FUTURES_DASHBOARD`` asks for, as ``open_board`` takes it: None (unset, empty, 0, false,
    no, off), any free port (1, true, yes, on), or that port."""
    word = (text or "").strip().lower()
    if word in ("", "0", "false", "no", "off"):
        return None
    if word in ("1", "true", "yes", "on"):
        return True
    try:
        return int(word)
    except ValueError:
        raise ValueError(f"MPIWS_FUTURES_DASHBOARD is 1 (any free port) or a port, not {text!r}") from None


def run_name(n):
    """The run name of the ``n``-th executor shown in a process."""
    return "pool" if n == 1 else f"pool-{n}"


class Rate:
    """Tasks per second over the last ``window`` seconds, from looks at (time, tasks done)."""

    def __init__(self, window=WINDOW):
        self.window = window
        self.looks = collections.deque()

    def __call__(self, now, done):
        self.looks.append((now, done))
        # The oldest look kept is the last one at least a window ago (before that, the first).
        while len(self.looks) > 2 and now - self.looks[1][0] >= self.window:
            self.looks.popleft()
        then, before = self.looks[0]
        return (done - before) / (now - then) if now > then else 0.0


def document(tally, state, rate):
    """The farm's dashboard document: ``tally``'s figures, ``state`` and ``rate`` (tasks per second)."""
    return {
        "state": state,
        "workers": tally.workers,
        "workers_lost": tally.workers_lost,
        "tasks_submitted": tally.submitted,
        "tasks_done": tally.done,
        "tasks_failed": tally.failed,
        "tasks_resubmitted": tally.resubmitted,
        "tasks_per_second": round(rate, 1),
        "batch": {
            "last": tally.last_batch,
            "mean": round(tally.batched / tally.batches, 2) if tally.batches else 0,
            "max": tally.max_batch,
        },
    }


def show(executor, dashboard):
    """``executor`` shown on the board ``dashboard`` asks for: an open ``Board`` (the caller's: left open),
    or True or a port (0: any) for one of its own, closed at shutdown; None/False: not shown (None)."""
    if isinstance(dashboard, Board):
        return Shown(executor, dashboard, own=False)
    board = open_board(dashboard, "mpiws.futures")
    return None if board is None else Shown(executor, board, own=True)


class Shown:
    """An executor's farm on ``board`` (``own``: opened for it, closed at its end)."""

    def __init__(self, executor, board, own):
        self.board, self.own = board, own
        self.name = run_name(next(_shown))
        self.tally = executor._tally
        self.executor = weakref.ref(executor)  # the thread never keeps the executor alive
        self.rate = Rate()
        self.last = None  # the document last published
        self.watched = set()  # the workers on endpoints whose domain the board shows
        self.ended = threading.Event()
        self._ending = threading.Lock()  # held by the one shutdown that ends it
        self._look(executor)  # the page shows the pool at once
        self.thread = threading.Thread(target=self._look_every_period, name="mpiws-futures-dashboard", daemon=True)
        self.thread.start()

    def _look_every_period(self):
        while not self.ended.wait(PERIOD):
            executor = self.executor()
            if executor is None:  # dropped without a shutdown: its farm ends
                self._last()
                return
            self._look(executor)
            del executor

    def _look(self, executor):
        self._watch_workers(executor)
        state = "broken" if executor._broken else "running"
        self._publish(document(self.tally, state, self.rate(time.monotonic(), self.tally.done)))

    def _publish(self, doc):
        if doc != self.last:
            self.board.publish(self.name, "farm", doc)
            self.last = doc

    def _watch_workers(self, executor):
        links = getattr(getattr(executor._pool, "workers", None), "links", {})  # key -> endpoints.Link
        for key, link in list(links.items()):
            if key not in self.watched:
                self.watched.add(key)
                self.board.watch(link.domain, link.token, link.urls)

    def end(self):
        """At the executor's shutdown (once): the last document, then a board of its own closes."""
        if not self._ending.acquire(blocking=False):
            return
        self.ended.set()
        self.thread.join()
        self._last()

    def _last(self):
        self._publish(document(self.tally, "shut down", self.rate(time.monotonic(), self.tally.done)))
        if self.own:
            self.board.close()
