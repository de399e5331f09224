"""Which worker runs which tasks: the task farm's bookkeeping, as pure code.

The manager (``farm.py``) moves the messages; this decides, from what it is
told (a batch was sent, a reply arrived, a worker was lost), and keeps no
clock of its own (``now`` comes in), so it is tested without processes.

- **Batches.** Tasks go out in batches, one message each. Tiny tasks share
  a message, so the per-message cost (an HTTP request, a round trip) is
  paid once per batch; a batch holds about one round trip's worth of work
  (``target``: the measured round trip, at least ``min_target``), never
  more than a fair share of what is queued, nor ``max_batch`` tasks.
  Until a task time is measured, a batch is one task.
- **Prefetch.** A worker holds up to ``depth`` batches: the one it runs and
  the next, already on its way, so it never waits a round trip for work.
  While fewer tasks are queued than there are workers, only idle workers
  get work, so the tail is not held up behind a prefetched batch.
- **Measures.** Workers reply as results come (coalescing those that
  arrive while a reply is on its way, so a slow task never holds back
  the results before it) and say how long those tasks computed; the
  round trip is what the first reply of a batch sent to an idle worker
  took beyond that.
- **Lost workers.** The batches a lost worker held are redone on others,
  first in line; a task is tried at most ``1 + retries`` times. Every
  future is settled once: a batch settles only by its own worker's reply,
  and a reply from a worker already declared lost is never taken.
"""

import collections

#: Weight of a new measure in the moving averages.
_EWMA = 0.25


class Item:
    """A task and its future, with the number of times it was sent."""

    __slots__ = ("future", "task", "attempts")

    def __init__(self, future, task):
        self.future = future
        self.task = task
        self.attempts = 0


class Batch:
    __slots__ = ("items", "sent_at", "to_idle")

    def __init__(self, items, sent_at, to_idle):
        self.items = items
        self.sent_at = sent_at
        self.to_idle = to_idle


class Worker:
    """One worker's queue of batches in flight and its counts."""

    __slots__ = ("key", "batches", "tasks", "busy", "joined", "held", "lost")

    def __init__(self, key, now):
        self.key = key
        self.batches = collections.deque()
        self.tasks = 0  # tasks it completed
        self.busy = 0.0  # seconds it reported computing
        self.joined = now
        self.held = True  # given work by this dispatcher (not released)
        self.lost = None  # why it was lost

    @property
    def outstanding(self):
        return sum(len(b.items) for b in self.batches)


def _average(old, new):
    return new if old is None else old + _EWMA * (new - old)


class Dispatcher:
    def __init__(self, *, depth=2, max_batch=1024, min_target=0.002, retries=2):
        if depth < 1 or max_batch < 1 or retries < 0:
            raise ValueError("depth and max_batch must be at least 1, retries at least 0")
        self.depth = depth
        self.max_batch = max_batch
        self.min_target = min_target
        self.retries = retries
        self.workers = {}
        self.task_time = None  # seconds per task, as workers report
        self.round_trip = None  # seconds a batch spends on the way, both ways
        self._turn = 0

    # -- workers --

    def join(self, key, now):
        """Worker ``key`` may be given work (again, after ``release``)."""
        w = self.workers.get(key)
        if w is None:
            self.workers[key] = Worker(key, now)
        elif w.lost is not None or w.held:
            raise ValueError(f"worker {key!r} cannot join: it is {'lost' if w.lost else 'already here'}")
        else:
            w.held = True

    def release(self, key):
        """Worker ``key`` (idle) gets no more work until it joins again."""
        w = self.workers[key]
        if w.batches:
            raise ValueError(f"worker {key!r} still has batches in flight")
        w.held = False

    def live(self):
        return [w for w in self.workers.values() if w.held and w.lost is None]

    def idle_workers(self):
        return [w.key for w in self.live() if not w.batches]

    def lose(self, key, why):
        """Worker ``key`` is gone: returns (to redo, to fail) item lists."""
        w = self.workers[key]
        if w.lost is not None:
            return [], []
        w.lost = why
        redo, fail = [], []
        while w.batches:
            for item in w.batches.popleft().items:
                (redo if item.attempts <= self.retries else fail).append(item)
        return redo, fail

    # -- dispatching --

    def batch_size(self, queued, free=0):
        """How many tasks the next batch takes, with ``queued`` waiting and
        ``free`` workers that may still join."""
        live = max(1, len(self.live()) + free)
        share = max(1, -(-queued // live))  # ceil: a fair share of the queue
        if self.task_time is None:
            return 1
        target = max(self.min_target, self.round_trip or 0.0)
        size = round(target / self.task_time) if self.task_time > 0 else self.max_batch
        return max(1, min(size, share, self.max_batch))

    def pick(self, queued, idle_only=False):
        """The worker that should get the next batch, or None.

        The least loaded live worker with room; with fewer tasks queued than
        workers (or ``idle_only``), only an idle one. Ties go round the
        workers in turn.
        """
        live = self.live()
        if not live or queued <= 0:
            return None
        limit = 1 if idle_only or queued < len(live) else self.depth
        best = None
        n = len(live)
        for i in range(n):
            w = live[(self._turn + i) % n]
            if len(w.batches) < limit and (best is None or len(w.batches) < len(best.batches)):
                best = w
        if best is not None:
            self._turn = (live.index(best) + 1) % n
            return best.key
        return None

    def sent(self, key, items, now):
        w = self.workers[key]
        for item in items:
            item.attempts += 1
        w.batches.append(Batch(items, now, to_idle=not w.batches))

    def replied(self, key, now, count, compute):
        """Results for the next ``count`` tasks ``key`` holds arrived:
        returns those items. A worker replies as results come, so a reply
        may cover part of a batch or run into the next; ``compute`` is the
        seconds the worker says those tasks took.
        """
        w = self.workers[key]
        if w.lost is not None:  # a lost worker's batches are redone elsewhere
            raise ValueError(f"worker {key!r} is lost")
        if not 0 < count <= w.outstanding:
            raise ValueError(f"worker {key!r} replied for {count} tasks, it holds {w.outstanding}")
        compute = max(0.0, float(compute))
        first = w.batches[0]
        if first.to_idle:  # the first reply to a batch sent to an idle worker
            self.round_trip = _average(self.round_trip, max(0.0, now - first.sent_at - compute))
            first.to_idle = False
        items = []
        while len(items) < count:
            batch = w.batches[0]
            take = min(count - len(items), len(batch.items))
            items += batch.items[:take]
            batch.items = batch.items[take:]
            if not batch.items:
                w.batches.popleft()
        w.tasks += count
        w.busy += compute
        self.task_time = _average(self.task_time, compute / count)
        return items

    def awaiting(self):
        """Keys of live workers with batches in flight."""
        return [w.key for w in self.live() if w.batches]

    def idle(self):
        return not any(w.batches for w in self.live())

    # -- reporting --

    def stats(self, now):
        """Per worker: tasks done, seconds busy, tasks per second since it joined."""
        out = []
        for w in self.workers.values():
            span = max(now - w.joined, 1e-9)
            out.append(
                {
                    "worker": w.key,
                    "tasks": w.tasks,
                    "busy": w.busy,
                    "tasks_per_second": w.tasks / span,
                    "in_flight": w.outstanding,
                    "lost": w.lost,
                }
            )
        return out
