# Adapted from mpi4py (https://github.com/mpi4py/mpi4py), src/mpi4py/futures/pool.py
# at commit 7c8dac2c58203a4d538961c6524e3940b04a42dc (2026-08-22, version 4.2.0.dev0).
# Changes for mpiws: imports are mpiws's (``from .. import MPI`` is mpiws.MPI; ``..run`` is ._run);
# map/starmap take ``progress=`` (both through ``_starmap``); endpoint workers; ``worker_stats()``;
# ``dashboard=`` (board.py), with the farm's tally.
#
# mpi4py's licence:
#
# Copyright (c) 2026, Lisandro Dalcin
#
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions are met:
#
# 1. Redistributions of source code must retain the above copyright notice, this
#    list of conditions and the following disclaimer.
#
# 2. Redistributions in binary form must reproduce the above copyright notice,
#    this list of conditions and the following disclaimer in the documentation
#    and/or other materials provided with the distribution.
#
# 3. Neither the name of the copyright holder nor the names of its contributors
#    may be used to endorse or promote products derived from this software
#    without specific prior written permission.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
# AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
# IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
# DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE
# FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
# DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
# SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
# CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
# OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
# OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
#
# Author:  Lisandro Dalcin
# Contact: dalcinl@gmail.com
"""Implements MPIPoolExecutor."""

import collections
import functools
import itertools
import sys
import threading
import time
import weakref

from . import _base, _core
from . import board as _board  # mpiws: the run's dashboard
from . import endpoints  # mpiws: workers on endpoints (it gives _core their manager)
from . import farm  # mpiws: its tally
from . import progress as _progress


class MPIPoolExecutor(_base.Executor):
    """MPI-based asynchronous executor."""

    Future = _base.Future

    def __init__(
        self, max_workers=None, initializer=None, initargs=(), **kwargs
    ):
        """Initialize a new MPIPoolExecutor instance.

        Args:
            max_workers: The maximum number of MPI processes that can be used
                to execute the given calls. If ``None`` or not given then the
                number of worker processes will be determined from the MPI
                universe size attribute if defined, otherwise a single worker
                process will be spawned.
            initializer: An callable used to initialize workers processes.
            initargs: A tuple of arguments to pass to the initializer.

        Keyword Args:
            python_exe: Path to Python executable used to spawn workers.
            python_args: Command line arguments to pass to Python executable.
            mpi_info: Mapping or iterable with ``(key, value)`` pairs.
            globals: Mapping with global variables to set in workers.
            main: If ``False``, do not import ``__main__`` in workers.
            path: List of paths to append to ``sys.path`` in workers.
            wdir: Path to set current working directory in workers.
            env: Environment variables to update ``os.environ`` in workers.
            use_pkl5: If ``True``, use out-of-band pickle for communication.
            endpoints: mpiws: URLs of endpoints that deploy the futures
                worker service (``mpiws.futures.endpoints``), one worker
                each, beside ``max_workers`` local ones if given; also
                ``MPIWS_FUTURES_ENDPOINTS`` (comma-separated).
            key: mpiws: the endpoint key that starts them (default:
                ``MPIWS_KEY`` or the user's key file).
            advertise: mpiws: the URL endpoint workers reach this process
                at, when not its endpoint's own (a port forward, a proxy);
                also ``MPIWS_FUTURES_ADVERTISE``.
            prefetch, max_batch, retries, task_timeout: mpiws: the farm's
                settings (``mpiws.futures.farm``).
            dashboard: mpiws: show the farm live in a browser
                (``mpiws.dashboard``): ``True`` or a port (0: any) for a
                page of its own on loopback, for the user's key, said on
                stderr and closed at shutdown; or an open
                ``mpiws.dashboard.Board`` to show it on (left open). Its
                document: workers serving and lost, tasks submitted,
                done, failed and resubmitted, tasks per second over the
                last 5 seconds, batch sizes (``mpiws.futures.board``).
                Also ``MPIWS_FUTURES_DASHBOARD`` (1, or a port).

        """
        if max_workers is not None:
            max_workers = int(max_workers)
            if max_workers <= 0:
                raise ValueError("max_workers must be greater than 0")
            kwargs["max_workers"] = max_workers
        if initializer is not None:
            if not callable(initializer):
                raise TypeError("initializer must be a callable")
            kwargs["initializer"] = initializer
            kwargs["initargs"] = tuple(initargs)

        if kwargs.get("task_timeout") is None and _core.os_environ_get("TASK_TIMEOUT"):  # mpiws: workers get it in options
            kwargs["task_timeout"] = float(_core.os_environ_get("TASK_TIMEOUT"))
        if kwargs.get("task_timeout") is not None and not float(kwargs["task_timeout"]) > 0:
            raise ValueError(f"task_timeout must be a positive number of seconds, got {kwargs['task_timeout']!r}")
        dashboard = kwargs.pop("dashboard", None)  # mpiws: never sent to the workers with the options
        if dashboard is None:
            dashboard = _board.asked(_core.os_environ_get("DASHBOARD"))
        self._options = kwargs
        self._shutdown = False
        self._broken = None
        self._lock = threading.Lock()
        self._pool = None
        self._tally = farm.Tally()  # mpiws: what the farm did (its pool counts into it)
        self._shown = _board.show(self, dashboard)  # mpiws: None without a dashboard

    _make_pool = staticmethod(_core.WorkerPool)

    def _bootstrap(self):
        if self._pool is None:
            self._pool = self._make_pool(self)
        return self._pool

    @property
    def _max_workers(self):
        return self.num_workers

    @property
    def num_workers(self):
        """Number or worker processes."""
        with self._lock:
            if self._broken:
                return 0
            if self._shutdown:
                return 0
            pool = self._bootstrap()
            pool.wait()
            return pool.size

    def bootup(self, wait=True):
        """Allocate executor resources eagerly.

        Args:
            wait: If ``True`` then bootup will not return until the
                executor resources are ready to process submissions.

        """
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot bootup after shutdown")
            pool = self._bootstrap()
            if wait:
                pool.wait()
            return self

    def submit(self, fn, /, *args, **kwargs):
        """Submit a callable to be executed with the given arguments.

        Schedule the callable to be executed as ``fn(*args, **kwargs)`` and
        return a `Future` instance representing the execution of the callable.

        Returns:
            A `Future` representing the given call.

        """
        with self._lock:
            if self._broken:
                raise _base.BrokenExecutor(self._broken)
            if self._shutdown:
                raise RuntimeError("cannot submit after shutdown")
            pool = self._bootstrap()
            future = self.Future()
            task = (fn, args, kwargs)
            pool.push((future, task))
            self._tally.submitted += 1  # mpiws
            return future

    def map(
        self,
        fn,
        *iterables,
        timeout=None,
        chunksize=1,
        buffersize=None,
        unordered=False,
        progress=None,
    ):
        """Return an iterator equivalent to ``map(fn, *iterables)``.

        Args:
            fn: A callable that will take as many arguments as there are
                passed iterables.
            iterables: Iterables yielding positional arguments to be passed to
                the callable.
            timeout: The maximum number of seconds to wait. If ``None``, then
                there is no limit on the wait time.
            chunksize: The size of the chunks the iterable will be broken into
                before being passed to a worker process.
            buffersize: If not ``None``, limit the number of submitted
                tasks whose results have not yet been yielded.
            unordered: If ``True``, yield results out-of-order, as completed.
            progress: mpiws: ``True`` for a progress bar (tqdm's if
                installed), or a tqdm-like class (``mpiws.futures.progress``).

        Returns:
            An iterator equivalent to built-in ``map(func, *iterables)``
            but the calls may be evaluated out-of-order.

        Raises:
            TimeoutError: If the entire result iterator could not be generated
                before the given timeout.
            Exception: If ``fn(*args)`` raises for any values.

        """
        return self._starmap(
            fn, zip(*iterables), timeout, chunksize, buffersize, unordered,
            progress, lambda: _progress.total_of(*iterables),
        )

    def starmap(
        self,
        fn,
        iterable,
        timeout=None,
        chunksize=1,
        buffersize=None,
        unordered=False,
        progress=None,
    ):
        """Return an iterator equivalent to ``itertools.starmap(...)``.

        Args:
            fn: A callable that will take positional argument from iterable.
            iterable: An iterable yielding ``args`` tuples to be used as
                positional arguments to call ``fn(*args)``.
            timeout: The maximum number of seconds to wait. If ``None``, then
                there is no limit on the wait time.
            chunksize: The size of the chunks the iterable will be broken into
                before being passed to a worker process.
            buffersize: If not ``None``, limit the number of submitted
                tasks whose results have not yet been yielded.
            unordered: If ``True``, yield results out-of-order, as completed.
            progress: mpiws: ``True`` for a progress bar (tqdm's if
                installed), or a tqdm-like class (``mpiws.futures.progress``).

        Returns:
            An iterator equivalent to ``itertools.starmap(fn, iterable)``
            but the calls may be evaluated out-of-order.

        Raises:
            TimeoutError: If the entire result iterator could not be generated
                before the given timeout.
            Exception: If ``fn(*args)`` raises for any values.

        """
        return self._starmap(
            fn, iterable, timeout, chunksize, buffersize, unordered,
            progress, lambda: _progress.total_of(iterable),
        )

    def _starmap(
        self, fn, iterable, timeout, chunksize, buffersize, unordered, progress, total
    ):
        # mpiws: map and starmap in one; ``total()`` counts the calls for the bar.
        # pylint: disable=too-many-arguments,too-many-positional-arguments
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        if buffersize is not None:
            if not isinstance(buffersize, int):
                raise TypeError("buffersize must be an integer or None")
            if buffersize < 1:
                raise ValueError("buffersize must be None or > 0")
            if unordered:
                raise ValueError("buffersize must be None if unordered")
        bar = _progress.bar(progress, total())
        if chunksize == 1:
            return _starmap_helper(
                self,
                fn,
                iterable,
                timeout,
                buffersize,
                unordered,
                bar,
            )
        else:
            return _starmap_chunks(
                self,
                fn,
                iterable,
                timeout,
                chunksize,
                buffersize,
                unordered,
                bar,
            )

    def add_endpoints(self, *urls):
        """mpiws: workers on the endpoints at ``urls`` join this executor,
        even while a map runs (for an executor made with ``endpoints=``,
        which may be empty). Blocks until they are ready; returns their
        keys in ``worker_stats``."""
        with self._lock:
            if self._broken:
                raise _base.BrokenExecutor(self._broken)
            if self._shutdown:
                raise RuntimeError("cannot add workers after shutdown")
            pool = self._bootstrap()
        pool.wait()
        workers = getattr(pool, "workers", None)
        if workers is None:
            raise ValueError("only an executor made with endpoints= (which may be empty) takes workers on endpoints")
        return [workers.add(url) for url in urls]

    def remove_endpoints(self, *keys):
        """mpiws: end the workers ``keys`` (as ``add_endpoints`` returned
        them) on their endpoints, even while a map runs; the tasks they held
        are redone by the others."""
        workers = getattr(self._pool, "workers", None)
        if workers is None:
            raise ValueError("only an executor made with endpoints= has workers on endpoints")
        for key in keys:
            workers.remove(key)

    def worker_stats(self):
        """mpiws: per worker, the tasks it completed, the seconds it computed,
        its tasks per second since it joined, the tasks it holds now, and why
        it was lost (None while it serves). Empty before the first task."""
        dispatcher = getattr(self._pool, "dispatcher", None)
        return dispatcher.stats(time.perf_counter()) if dispatcher else []

    def shutdown(self, wait=True, *, cancel_futures=False):
        """Clean-up the resources associated with the executor.

        It is safe to call this method several times. Otherwise, no other
        methods can be called after this one.

        Args:
            wait: If ``True`` then shutdown will not return until all running
                futures have finished executing and the resources used by the
                executor have been reclaimed.
            cancel_futures: If ``True`` then shutdown will cancel all pending
                futures. Futures that are completed or running will not be
                cancelled.

        """
        with self._lock:
            if not self._shutdown:
                self._shutdown = True
                if self._pool is not None:
                    self._pool.done()
            if cancel_futures:
                if self._pool is not None:
                    self._pool.cancel()
            pool = None
            if wait:
                pool = self._pool
                self._pool = None
        if pool is not None:
            pool.join()
        if self._shown is not None:  # mpiws: the dashboard's last document; a board of its own closes
            self._shown.end()


def _starmap_helper(
    executor, function, iterable, timeout, buffersize, unordered, bar=None, weight=None
):
    # pylint: disable=too-many-arguments,too-many-positional-arguments
    # mpiws: ``bar`` advances by ``weight(args)`` (default 1) as each call finishes.
    timer = time.monotonic
    executor_weakref = weakref.ref(executor)

    def submit(function, *args):
        future = executor_weakref().submit(function, *args)
        if bar is not None:
            n = weight(args) if weight else 1
            future.add_done_callback(lambda _: bar.update(n))
        return future

    end_time = sys.float_info.max
    if timeout is not None:
        end_time = timeout + timer()

    if buffersize is not None:
        fs = collections.deque(
            submit(function, *args)
            for args in itertools.islice(iterable, buffersize)
        )
        unordered = False
    else:
        fs = collections.deque(
            submit(function, *args) for args in iterable
        )
        if unordered:
            fs = set(fs)

    del executor

    def resolve(future, timeout=None):
        try:
            try:
                return future.result(timeout)
            finally:
                future.cancel()
        finally:
            del future

    def result_iterator():
        # pylint: disable=unidiomatic-typecheck
        future = collections.deque()
        result = collections.deque()
        try:
            if unordered:
                assert type(fs) is set  # noqa: S101
                if timeout is None:
                    iterator = _base.as_completed(fs)
                else:
                    iterator = _base.as_completed(fs, end_time - timer())
                for _ in map(future.append, iterator):
                    fs.remove(future[0])
                    yield resolve(future.pop())
            else:
                assert type(fs) is collections.deque  # noqa: S101
                fs.reverse()
                while fs:
                    if timeout is None:
                        result.append(resolve(fs.pop()))
                    else:
                        result.append(resolve(fs.pop(), end_time - timer()))
                    if (
                        buffersize is not None
                        and executor_weakref()
                        and (args := next(iterable, None))
                    ):
                        fs.appendleft(submit(function, *args))
                    yield result.pop()
        finally:
            del future
            del result
            while fs:
                fs.pop().cancel()
            if bar is not None:
                bar.close()

    return result_iterator()


def _apply_chunks(function, chunk):
    return list(itertools.starmap(function, chunk))


def _build_chunks(iterable, chunksize):
    iterable = iter(iterable)
    while True:
        chunk = tuple(itertools.islice(iterable, chunksize))
        if not chunk:
            return
        yield (chunk,)


def _chain_from_iterable_of_lists(iterable):
    for item in iterable:
        item.reverse()
        while item:
            yield item.pop()


def _starmap_chunks(
    executor, function, iterable, timeout, chunksize, buffersize, unordered, bar=None
):
    # pylint: disable=too-many-arguments,too-many-positional-arguments
    function = functools.partial(_apply_chunks, function)
    iterable = _build_chunks(iterable, chunksize)
    result = _starmap_helper(
        executor, function, iterable, timeout, buffersize, unordered, bar,
        weight=lambda args: len(args[0]),
    )
    return _chain_from_iterable_of_lists(result)


class MPICommExecutor:
    """Context manager for `MPIPoolExecutor`.

    This context manager splits a MPI (intra)communicator in two
    disjoint sets: a single master process and the remaining worker
    processes. These sets are then connected through an intercommunicator.
    The target of the ``with`` statement is assigned either an
    `MPIPoolExecutor` instance (at the master) or ``None`` (at the workers).

    Example::

        with MPICommExecutor(MPI.COMM_WORLD, root=0) as executor:
            if executor is not None:  # master process
                executor.submit(...)
                executor.map(...)
    """

    def __init__(self, comm=None, root=0, **kwargs):
        """Initialize a new MPICommExecutor instance.

        Args:
            comm: MPI (intra)communicator.
            root: Designated master process.

        Raises:
            ValueError: If the communicator has wrong kind or
               the root value is not in the expected range.

        """
        if comm is None:
            comm = _core._comm_executor_world()
        if comm.Is_inter():
            raise ValueError("expecting an intracommunicator")
        if root < 0 or root >= comm.Get_size():
            raise ValueError("expecting root in range(comm.size)")
        if _core.SharedPool is not None:
            comm = _core._comm_executor_world()
            root = comm.Get_rank()

        self._comm = comm
        self._root = root
        self._options = kwargs
        self._executor = None

    def __enter__(self):
        """Return `MPIPoolExecutor` instance at the root."""
        if self._executor is not None:
            raise RuntimeError("__enter__")

        comm = self._comm
        root = self._root
        options = self._options
        executor = None

        if comm.Get_rank() == root:
            executor = MPIPoolExecutor(**options)
        _core._comm_executor_helper(executor, comm, root)

        self._executor = executor
        return executor

    def __exit__(self, *args):
        """Shutdown `MPIPoolExecutor` instance at the root."""
        executor = self._executor
        self._executor = None

        if executor is not None:
            executor.shutdown(wait=True)
            return False
        else:
            return True


class ThreadPoolExecutor(MPIPoolExecutor):
    """`MPIPoolExecutor` subclass using a pool of threads."""

    _make_pool = staticmethod(_core.ThreadPool)


class ProcessPoolExecutor(MPIPoolExecutor):
    """`MPIPoolExecutor` subclass using a pool of processes."""

    _make_pool = staticmethod(_core.SpawnPool)


def get_comm_workers():
    """Access an intracommunicator grouping MPI worker processes."""
    return _core.get_comm_server()
