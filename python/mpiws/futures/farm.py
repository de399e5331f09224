"""The task farm's two loops: the manager sends batches of tasks to workers
and settles their futures from the replies; a worker runs batches.

What goes where is ``dispatch.Dispatcher``'s decision; this moves messages.
On the wire a batch is a list of pickles, one per task, and a reply is
``(results, seconds)``: one pickle of ``(result, exception)`` per task and
the time the batch computed. Each task is pickled on its own, so a task or
result that will not pickle fails alone, not its batch.

A worker that is gone (its process died, its endpoint is unreachable for
the failure timeout: ``mpiws``'s liveness fails the receive posted for its
reply with ``ERR_PROC_FAILED``) is dropped and its tasks are redone on the
others; a task lost with ``1 + retries`` workers fails with ``WorkerLost``.

Settings (executor keyword, then ``MPIWS_FUTURES_<NAME>``): ``prefetch``
(batches a worker holds, default 2), ``max_batch`` (tasks per batch,
default 1024; 1 turns batching off), ``retries`` (default 2),
``task_timeout`` (seconds a task may run: it fails with ``TaskTimeout``,
a ``TimeoutError``, and the worker goes on; default none).
"""

import collections
import contextlib
import signal
import sys
import threading
import time

from .. import MPI
from . import _base, dispatch


#: The tag of each worker's sentinel receive, never sent to.
_GONE_TAG = 2147483647


class WorkerLost(_base.BrokenExecutor):
    """The workers that ran a task were lost before it finished."""


class Tally:
    """What an executor's farm did, for its dashboard (``board``): plain integers, counted whether a board
    is open or not (an addition each); each is written by one thread, the manager's (``submitted``:
    ``submit``, under the executor's lock), and only read by the others."""

    def __init__(self):
        self.submitted = 0  # tasks submitted
        self.done = 0  # tasks that returned
        self.failed = 0  # tasks that raised, would not pickle, or were lost with 1 + retries workers
        self.resubmitted = 0  # tasks sent again, their worker lost
        self.workers = 0  # workers serving: joined, not lost
        self.workers_lost = 0
        self.batches = 0  # batches sent
        self.batched = 0  # the tasks in them (a task sent again, again)
        self.last_batch = 0
        self.max_batch = 0

    def sent(self, n):
        """A batch of ``n`` tasks went out."""
        self.batches += 1
        self.batched += n
        self.last_batch = n
        if n > self.max_batch:
            self.max_batch = n


def _setting(options, name, default, environ_get):
    value = options.pop(name, None)
    if value is None:
        value = environ_get(name.upper(), default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"futures setting {name} must be an integer, got {value!r}") from None


def dispatcher(options, environ_get):
    return dispatch.Dispatcher(
        depth=_setting(options, "prefetch", 2, environ_get),
        max_batch=_setting(options, "max_batch", 1024, environ_get),
        retries=_setting(options, "retries", 2, environ_get),
    )


def run_manager(links, options, tag, worker_set, task_queue, pool, lost, environ_get, backoff, serialized):
    """Hand the tasks of ``task_queue`` to the workers of ``links`` (key:
    (intercommunicator, rank of the worker in its remote group)).

    The executor's module (``_core``, mpi4py's, which calls this; this never
    imports it) gives its helpers: ``environ_get(NAME, default)`` reads a
    setting from the environment, ``backoff`` sleeps between polls, and
    ``serialized(fn)`` wraps an MPI call (a lock, below ``THREAD_MULTIPLE``).

    ``worker_set`` holds the free workers (it is shared by the executors of
    a shared pool): a worker is taken when there is work and given back
    when it is idle and nothing is queued. Returns once the queue's end
    (None) is reached and every batch sent is settled. ``lost``: the set
    of lost workers (shared by the executors of a shared pool), which it
    adds to; when it holds every worker, the tasks fail. Workers that
    join while it runs come as (key, comm, rank) on ``pool.joining``.
    """
    # pylint: disable=too-many-statements
    d = dispatcher(options, environ_get)
    lost = set() if lost is None else lost
    joining = getattr(pool, "joining", None)
    if pool is not None:
        pool.dispatcher = d
    tally = getattr(pool, "tally", None) or Tally()
    tally.workers += len(links.keys() - lost)
    ser = serialized
    redo = collections.deque()
    sentinels, sends = {}, collections.defaultdict(list)
    stopping = False

    def queued():
        nonlocal stopping
        if not stopping and not redo and task_queue and task_queue[0] is None:
            task_queue.pop()  # the end: every task before it is taken
            stopping = True
        return len(redo) + (0 if stopping else len(task_queue))

    def take(n):
        nonlocal stopping
        items = []
        while len(items) < n and redo:
            items.append(redo.popleft())
        while len(items) < n and not stopping:
            try:
                entry = task_queue.pop()
            except LookupError:
                break
            if entry is None:
                stopping = True
                break
            future, task = entry
            if future.set_running_or_notify_cancel():
                items.append(dispatch.Item(future, task))
        return items

    def send(key, items):
        payload, kept = [], []
        for item in items:
            try:
                payload.append(MPI.pickle.dumps(item.task))
                kept.append(item)
            except BaseException:
                item.future.set_exception(sys.exc_info()[1])
                tally.failed += 1
        if not kept:
            return
        d.sent(key, kept, time.perf_counter())
        tally.sent(len(kept))
        comm, rank = links[key]
        try:
            sends[key].append(ser(comm.isend)(payload, rank, tag))
        except MPI.Exception as exc:
            lose(key, exc)

    def settle(key, reply):
        try:
            results, seconds = reply
            items = d.replied(key, time.perf_counter(), len(results), seconds)
        except (TypeError, ValueError) as exc:
            lose(key, f"worker {key} broke the protocol: {exc}")
            return
        for item, data in zip(items, results):
            try:
                result, exception = MPI.pickle.loads(data)
            except BaseException:
                result, exception = None, sys.exc_info()[1]
            if exception is None:
                item.future.set_result(result)
                tally.done += 1
            else:
                item.future.set_exception(exception)
                tally.failed += 1

    def unwatch(key):
        sentinel = sentinels.pop(key, None)
        if sentinel is not None:
            try:
                sentinel.Cancel()
            except MPI.Exception:
                pass

    def lose(key, why):
        if key not in lost:  # (in a shared pool, counted by the executor that found it gone)
            tally.workers -= 1
            tally.workers_lost += 1
        again, failed = d.lose(key, str(why))
        tally.resubmitted += len(again)
        tally.failed += len(failed)
        lost.add(key)
        unwatch(key)
        sends.pop(key, None)
        redo.extendleft(reversed(again))
        for item in failed:
            item.future.set_exception(WorkerLost(f"the workers that ran this task were lost; the last: {why}"))

    def poll():
        progressed = False
        for key in d.awaiting():
            comm, rank = links[key]
            if key not in sentinels:  # never matched; fails when the worker is gone
                sentinels[key] = ser(comm.Irecv)([bytearray(0), MPI.BYTE], rank, _GONE_TAG)
            try:
                while (message := ser(comm.improbe)(rank, tag)) is not None:
                    settle(key, ser(message.recv)())
                    progressed = True
                ser(sentinels[key].Test)()
            except MPI.Exception as exc:
                lose(key, exc)
        for key, reqs in list(sends.items()):
            try:
                reqs[:] = [r for r in reqs if not ser(r.test)()[0]]
            except MPI.Exception as exc:
                lose(key, exc)
        return progressed

    def give_up(message):
        """Settle every task this manager still has, and break the pool."""
        pending = list(redo) + [item for w in d.live() for batch in w.batches for item in batch.items]
        redo.clear()
        for item in pending:
            if not item.future.done():
                item.future.set_exception(WorkerLost(message))
                tally.failed += 1
        if pool is not None:
            pool.broken(message)

    try:
        while True:
            while joining:
                key, comm, rank = joining.popleft()
                links[key] = (comm, rank)
                worker_set.add(key)
                tally.workers += 1
            progressed = poll()
            while queued():
                key = d.pick(queued(), idle_only=True)
                if key is None and worker_set:
                    key = worker_set.pop()
                    if key in lost:  # lost by another executor of the shared pool
                        continue
                    d.join(key, time.perf_counter())
                if key is None:
                    key = d.pick(queued())
                if key is None:
                    break
                items = take(d.batch_size(queued(), len(worker_set)))
                if not items:
                    break
                send(key, items)
                progressed = True
            if not queued():  # idle workers go back, for the other executors of a shared pool
                for key in d.idle_workers():
                    d.release(key)
                    unwatch(key)
                    worker_set.add(key)
            if stopping and not redo and d.idle():
                break
            if queued() and links and len(lost) >= len(links) and not joining:
                why = [w.lost for w in d.workers.values() if w.lost]
                give_up("every worker was lost" + (f"; the last: {why[-1]}" if why else ""))
                break
            if progressed:
                backoff.reset()
            backoff.sleep()
    except BaseException as exc:
        give_up(f"the executor's manager failed: {exc!r}")
        raise


def run_worker(comm, options, wrap_exception):
    """Run the batches the manager sends until it sends None (or is gone).

    ``wrap_exception(exc)``: what a failed task's exception travels as
    (with its traceback and the worker's name). Results go back from a
    thread of their own as they come: those that come while a reply is on
    its way go together in the next.
    """
    status = MPI.Status()
    replies = Replies(comm)
    limit = options.get("task_timeout")

    def run(data):
        start = time.perf_counter()
        try:
            func, args, kwargs = MPI.pickle.loads(data)
            with time_limit(limit):
                outcome = (func(*args, **kwargs), None)
        except BaseException as exc:  # the task's own failure travels back
            outcome = (None, wrap_exception(exc))
        try:
            data = MPI.pickle.dumps(outcome)
        except BaseException as exc:
            data = MPI.pickle.dumps((None, wrap_exception(exc)))
        return data, time.perf_counter() - start

    try:
        while True:
            try:
                batch = comm.recv(None, MPI.ANY_SOURCE, MPI.ANY_TAG, status)
            except MPI.Exception:
                break  # the manager is gone: nobody waits for replies
            if batch is None or replies.broken:
                break
            dest, tag = status.source, status.tag
            for data in batch:
                replies.put(dest, tag, *run(data))
    finally:
        replies.close()


class TaskTimeout(TimeoutError):
    """A task ran longer than the executor's ``task_timeout``."""


@contextlib.contextmanager
def time_limit(seconds):
    """Raise TaskTimeout in the task after ``seconds`` (an alarm signal: on
    the main thread, where workers run tasks; Python code and sleeps are
    interrupted, a long call into C code only when it returns)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TaskTimeout(f"the task ran longer than its limit of {seconds} s (task_timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Replies:
    """A worker's replies, sent by a thread in order, coalesced."""

    def __init__(self, comm):
        self.comm = comm
        self.queue = collections.deque()
        self.ready = threading.Condition()
        self.closed = False
        self.broken = None  # the error that stopped sending: the manager is gone
        self.thread = threading.Thread(target=self._send, name="mpiws-futures-replies", daemon=True)
        self.thread.start()

    def put(self, dest, tag, data, seconds):
        with self.ready:
            self.queue.append((dest, tag, data, seconds))
            self.ready.notify()

    def close(self):
        with self.ready:
            self.closed = True
            self.ready.notify()
        self.thread.join()

    def _send(self):
        while True:
            with self.ready:
                while not self.queue and not self.closed:
                    self.ready.wait()
                if not self.queue:
                    return
                dest, tag = self.queue[0][:2]
                results, seconds = [], 0.0
                while self.queue and self.queue[0][:2] == (dest, tag):
                    _, _, data, spent = self.queue.popleft()
                    results.append(data)
                    seconds += spent
            if self.broken is None:
                try:
                    self.comm.send((results, seconds), dest, tag)
                except MPI.Exception as exc:
                    self.broken = exc
